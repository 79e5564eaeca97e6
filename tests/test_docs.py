"""The README and the guides cannot drift from the code: every name their Python blocks import
exists, and every `--flag` of a `t2t-*` command line in their code blocks is defined by that
command (asked of the command itself, in a fresh process)."""

from __future__ import annotations

import ast
import functools
import importlib
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test extra installs tomli there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _blocks(language: str | None = None) -> list[tuple[str, str]]:
    """(page name, block text) of every fenced code block (of `language` when given)."""
    found = []
    for page in PAGES:
        for lang, text in BLOCK.findall(page.read_text(encoding="utf-8")):
            if language is None or lang == language:
                found.append((str(page.relative_to(REPO)), text))
    return found


def test_every_name_a_python_block_imports_exists():
    missing = []
    blocks = _blocks("python")
    assert blocks, "no ```python blocks found: the pattern is wrong"
    for page, text in blocks:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module.startswith("t2t_lite"):
                module = importlib.import_module(node.module)
                missing += [
                    f"{page}: {node.module}.{a.name}"
                    for a in node.names
                    if not hasattr(module, a.name)
                    and importlib.util.find_spec(f"{node.module}.{a.name}") is None
                ]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("t2t_lite") and importlib.util.find_spec(a.name) is None:
                        missing.append(f"{page}: {a.name}")
    assert not missing, missing


def _command_lines() -> list[tuple[str, str, str]]:
    """(page, command, its arguments) of every `t2t-*` command line in a code block, with its
    backslash-continued lines joined."""
    found = []
    for page, text in _blocks():
        text = text.replace("\\\n", " ")
        for line in text.splitlines():
            for match in re.finditer(r"(?:^|[\s|;(`$])(t2t-[a-z-]+)(?=\s|$)(.*)", line):
                command, rest = match.groups()
                if command in SCRIPTS:
                    found.append((page, command, rest.split("|")[0].split(">")[0]))
    return found


@functools.cache
def _flags_of(command: str) -> frozenset[str]:
    """The flags `command` defines: its module imported in a fresh process, absl's registry read."""
    module = SCRIPTS[command].partition(":")[0]
    script = (
        f"import json, {module}\nfrom absl import flags\nprint(json.dumps(sorted(flags.FLAGS)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return frozenset(json.loads(done.stdout.strip().splitlines()[-1]))


FLAG = r"(?:^|\s)--([a-z][a-z0-9_]*)"


def _defined(flag: str, names: frozenset[str]) -> bool:
    """Whether --flag is one of `names`, or --noX for a boolean X."""
    return flag in names or (flag.startswith("no") and flag[2:] in names)


def test_every_flag_on_a_command_line_exists():
    lines = _command_lines()
    assert len(lines) > 50, len(lines)  # the pattern finds the guides' commands
    commands = sorted({command for _, command, _ in lines})
    with ThreadPoolExecutor(2) as pool:
        defined = dict(zip(commands, pool.map(_flags_of, commands), strict=True))
    unknown = []
    for page, command, rest in lines:
        for flag in re.findall(FLAG, rest):
            if not _defined(flag, defined[command]):
                unknown.append(f"{page}: {command} --{flag}")
    assert not unknown, sorted(set(unknown))


@pytest.mark.parametrize("text", ["t2t-decode --output_dir=R --no_such_flag=1"])
def test_the_flag_check_catches_a_wrong_flag(text):
    rest = text.partition("t2t-decode")[2]
    flags = re.findall(FLAG, rest)
    assert flags == ["output_dir", "no_such_flag"]
    assert not _defined("no_such_flag", _flags_of("t2t-decode"))
    assert _defined("output_dir", _flags_of("t2t-decode"))
    assert _defined("nojit_compile", _flags_of("t2t-decode"))  # absl's --noX of a boolean


def test_every_printed_output_is_made_by_the_script_and_names_a_module_that_logs():
    """The README's and the tour's printed outputs are written by scripts/docs_outputs.py
    (`make docs-outputs`), which runs their commands; each marked block is one it makes, and
    each log line's `file.py]` names a module of the package that logs."""
    sys.path.insert(0, str(REPO / "scripts"))
    import docs_outputs

    marked = [n for page in docs_outputs.PAGES for n in docs_outputs.marked_blocks(page)]
    assert "quick-start" in marked and "tour-train" in marked, marked
    assert sorted(marked) == sorted(docs_outputs.NAMES), "a marked block the script does not make"
    sources = {p.name: p for d in ("t2t_lite", "bin", "problems") for p in (REPO / d).rglob("*.py")}
    stale = []
    for page in docs_outputs.PAGES:
        for _, body in docs_outputs.MARKER.findall(page.read_text(encoding="utf-8")):
            for file in re.findall(r"^([\w]+\.py)\] ", body, re.M):
                source = sources.get(file)
                if source is None or "logging." not in source.read_text(encoding="utf-8"):
                    stale.append(f"{page.name}: {file}")
    assert not stale, stale
