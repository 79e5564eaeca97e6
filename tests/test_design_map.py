"""docs/design.md's map of the house names every module of the package: each folder has a row
of the Layout table, and each module's file name appears in its folder's row (a sub-folder's
modules in the row of the folder above, as `layers/` in model's)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The folders the package is made of, as the map's rows name them (pyproject.toml maps problems/,
# hparams/ and bin/ into t2t_lite/).
ROOTS = ("t2t_lite", "problems", "hparams", "bin")


def _rows() -> dict[str, str]:
    """{what the row's first cell names, e.g. "t2t_lite/run/": the row's text} of the Layout
    table (a folder, or a top-level module such as "t2t_lite/vocabulary.py")."""
    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        match = re.match(r"\| `([^`]+)`", line)
        if match:
            rows[match.group(1)] = line
    return rows


def _modules() -> list[Path]:
    found = []
    for root in ROOTS:
        found += [p for p in (REPO / root).rglob("*.py") if p.name != "__init__.py"]
    return sorted(found)


def test_every_module_is_on_the_map():
    rows = _rows()
    missing = []
    for module in _modules():
        folder = module.parent.relative_to(REPO)
        # t2t_lite/model/layers/x.py is listed in t2t_lite/model/'s row.
        while f"{folder.as_posix()}/" not in rows and folder.parent != Path("."):
            folder = folder.parent
        row = rows.get(f"{folder.as_posix()}/", "")
        if module.parent == REPO / "t2t_lite":  # a top-level module: a row of its own
            row = next((r for r in rows.values() if f"`t2t_lite/{module.name}`" in r), "")
        if f"`{module.name}`" not in row and f"{module.stem}.py" not in row:
            missing.append(str(module.relative_to(REPO)))
    assert not missing, f"docs/design.md's Layout table does not name {missing}"


def test_the_map_names_no_module_that_is_gone():
    rows = _rows()
    present = {m.name for m in _modules()}
    for folder, row in rows.items():
        if not folder.startswith(ROOTS):
            continue
        for name in re.findall(r"`([a-z_0-9]+\.py)`", row):
            assert name in present, f"docs/design.md names {folder}{name}, which does not exist"
