"""The README and the guides cannot drift from the code: every name their Python blocks import
exists, and every `--flag` of a `t2t-*` command line in their code blocks is defined by that
command (asked of the command itself, in a fresh process)."""

from __future__ import annotations

import ast
import functools
import importlib
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from command_helpers import python_json

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
    return frozenset(
        python_json(script, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    )


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


# Where the code and the guides name the repository's files and modules: the guides, the
# README, and every docstring and comment of the package, its commands, scripts and tests. (The
# results journal, bench/'s dated records and the changelog speak of their day.)
NAMING = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *(
        p
        for folder in ("t2t_lite", "bin", "problems", "hparams", "scripts", "tests", "bench")
        for p in sorted((REPO / folder).rglob("*.py"))
        if p.name != "test_docs.py"  # (its examples of missing names below)
    ),
]
# A file path: from the repository root, or from the package's folder (`train/budget.py`).
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:t2t_lite|bin|problems|hparams|tests|scripts|bench|docs)/[\w/.-]*\w"
    r"\.(?:py|md|sh|json|yml|toml|sha256))(?![\w])"
)
PACKAGE_PATH = re.compile(
    r"(?<![\w/.-])((?:train|decode|serve|run|runtime|data|model|metrics|sweep)/[\w/]*\w\.py)"
    r"(?![\w])"
)
MODULE = re.compile(r"(?<![\w.])(t2t_lite(?:\.[A-Za-z_]\w*)+)")
# pyproject.toml's [tool.setuptools.package-dir]: installed inside t2t_lite/
MAPPED = {f"t2t_lite/{d}/": f"{d}/" for d in ("bin", "problems", "hparams")}
# Named on purpose though not here: a peer's file (the README's comparison with fairseq), and
# the design map test's example of a missing file.
ELSEWHERE = {"scripts/average_checkpoints.py", "t2t_lite/model/layers/x.py"}


def _missing_paths(text: str) -> list[str]:
    missing = []
    for path in REPO_PATH.findall(text):
        for installed, here in MAPPED.items():
            path = here + path[len(installed) :] if path.startswith(installed) else path
        if not (REPO / path).exists() and path not in ELSEWHERE and "results/" not in path:
            missing.append(path)
    missing += [p for p in PACKAGE_PATH.findall(text) if not (REPO / "t2t_lite" / p).exists()]
    return missing


def _names_in(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a module's or class's body defines, imports or assigns."""
    names = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update({t.id: node for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.If, ast.Try)):
            names.update(_names_in(node.body))
    return names


def _missing_module(name: str) -> bool:
    """Whether dotted `name` (a module, or a module's attribute) is not there, read from the
    sources (importing the commands' modules would define their flags twice)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:i]))
        except ModuleNotFoundError:  # a parent that is a module, not a package
            continue
        if spec is not None:
            break
    if i == len(parts):
        return False
    if spec.submodule_search_locations:  # a package: its __init__'s names
        source = Path(spec.submodule_search_locations[0]) / "__init__.py"
    else:
        source = Path(spec.origin)
    body = ast.parse(source.read_text(encoding="utf-8")).body
    for attribute in parts[i:]:
        node = _names_in(body).get(attribute)
        if node is None:
            return True
        if not isinstance(node, ast.ClassDef) or node.bases:
            return False  # a function's attribute, an import or a subclass: not followed
        # the class's body, and what its methods set on `self`
        body = node.body + [
            ast.Assign([ast.Name(t.attr)], t)
            for t in ast.walk(node)
            if isinstance(t, ast.Attribute) and isinstance(t.ctx, ast.Store)
        ]
    return False


def test_every_file_and_module_the_docs_and_docstrings_name_exists():
    missing, names = [], {}
    for source in NAMING:
        text = source.read_text(encoding="utf-8")
        where = str(source.relative_to(REPO))
        missing += [f"{where}: {path}" for path in _missing_paths(text)]
        for name in MODULE.findall(text):
            names.setdefault(name.rstrip("."), where)
    assert len(names) > 50, "too few module names found: the pattern is wrong"
    missing += [f"{where}: {name}" for name, where in names.items() if _missing_module(name)]
    assert not missing, missing


@pytest.mark.parametrize(
    "text",
    [
        "see t2t_lite/decode/quantize.py",
        "(train/no_such_module.py)",
        "t2t_lite.decode.shortlist builds it",
        "t2t_lite.decode.translator.NoSuchClass",
    ],
)
def test_the_name_check_catches_a_moved_file_or_module(text):
    names = [n for n in MODULE.findall(text) if _missing_module(n)]
    assert _missing_paths(text) or names, text
