"""The package as a team installs it: pyproject.toml lists every package folder and command, the
wheel holds the package and nothing else, and its commands run from a fresh virtual environment
(not the repository's editable install)."""

from __future__ import annotations

import ast
import email
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test extra installs tomli there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
VERSION = re.search(
    r'^__version__ = "(.+)"$', (REPO / "t2t_lite" / "__init__.py").read_text(), re.M
).group(1)
DIST_INFO = f"t2t_lite-{VERSION}.dist-info"


def _package_folders() -> dict[str, Path]:
    """{package name: folder} for every folder with an __init__.py, as the mapping names them."""
    roots = {"t2t_lite": REPO / "t2t_lite"}
    roots.update({name: REPO / folder for name, folder in SETUPTOOLS["package-dir"].items()})
    packages = {}
    for name, root in roots.items():
        for init in root.rglob("__init__.py"):
            parts = init.parent.relative_to(root).parts
            packages[".".join((name, *parts))] = init.parent
    return packages


def test_pyproject_lists_every_package_folder():
    missing = sorted(set(_package_folders()) - set(SETUPTOOLS["packages"]))
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml"


def test_every_command_names_a_run_function():
    """[project.scripts] --> a module of bin/ that defines run()."""
    for command, target in PYPROJECT["project"]["scripts"].items():
        module, _, function = target.partition(":")
        assert command == "t2t-" + module.rsplit(".t2t_", 1)[-1].replace("_", "-"), target
        path = _package_folders()["t2t_lite.bin"] / (module.rsplit(".", 1)[-1] + ".py")
        assert path.is_file(), f"{command}: {path} is missing"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert function in functions, f"{command}: {path} defines no {function}()"


def _source_copy(destination: Path) -> Path:
    """The files git would commit (tracked and new, not ignored), copied: the build writes its
    build/ and *.egg-info there rather than into the working tree `make lint` also builds in."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8")
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a file deleted but not yet committed is still listed
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def test_setup_py_is_a_shim_over_pyproject():
    """setup.py declares nothing of its own: a bare setup() call, so pyproject.toml stays the one
    place for the package's metadata (the wheel below is built with setup.py present)."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert len(calls) == 1 and calls[0].func.id == "setup", ast.dump(tree)
    assert not calls[0].args and not calls[0].keywords


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("packaging")
    source = _source_copy(root / "source")
    assert (source / "setup.py").is_file()
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", "tmp", "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # No setuptools warning about the page's folder (a data-only package it must be told of).
    assert "Package would be ignored" not in built.stdout + built.stderr, built.stderr[-3000:]
    (path,) = (source / "tmp").glob(f"t2t_lite-{VERSION}-*.whl")
    return path


def test_wheel_holds_the_package_and_nothing_else(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    outside = [n for n in names if not n.startswith(("t2t_lite/", f"{DIST_INFO}/"))]
    assert not outside, outside  # no tests/, docs/, bench/, nothing from ../shared
    for package, folder in _package_folders().items():
        for module in folder.glob("*.py"):
            assert "/".join([*package.split("."), module.name]) in names
    for page in ("index.html", "app.js", "draw.js", "document.js", "events.js", "style.css"):
        assert f"t2t_lite/serve/web/static/{page}" in names
    assert f"{DIST_INFO}/licenses/LICENSE" in names


def test_wheel_metadata(wheel):
    archive = zipfile.ZipFile(wheel)
    metadata = email.message_from_bytes(archive.read(f"{DIST_INFO}/METADATA"))
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Requires-Python"] == ">=3.10"
    assert metadata["Version"] == VERSION
    extras = set(metadata.get_all("Provides-Extra"))
    assert extras == {
        *("wmt", "viz", "tensorboard", "serve", "ctranslate2", "grpc", "litert"),
        *("all", "test", "docs"),
    }
    requires = metadata.get_all("Requires-Dist")
    core = [r for r in requires if "extra ==" not in r]
    assert not [r for r in core if r.startswith(("tensorflow-datasets", "matplotlib"))], core
    assert 'tensorflow-datasets<5,>=4.9; extra == "wmt"' in requires
    assert 'matplotlib>=3.7; extra == "viz"' in requires
    assert 't2t_lite[ctranslate2,grpc,litert,serve,tensorboard,viz,wmt]; extra == "all"' in (
        requires
    )
    entry_points = archive.read(f"{DIST_INFO}/entry_points.txt").decode("utf-8")
    for command, target in PYPROJECT["project"]["scripts"].items():
        assert f"{command} = {target}" in entry_points


def test_wheel_commands_run_from_a_fresh_environment(wheel, tmp_path):
    """The fresh environment sees this one's packages (TensorFlow, ...) through a .pth file that
    names its site-packages: a path in a .pth file is added as it is, so the .pth files there
    (the editable install's finder among them) are not processed and t2t_lite comes from the
    wheel alone."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "t2t_lite_parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    installed = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    code = "import t2t_lite as t, t2t_lite.problems as p; print(t.__file__, p.__file__)"
    where = subprocess.run(
        [python, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.split()
    assert all(Path(path).is_relative_to(site) for path in where), (where, site)
    listed = subprocess.run(
        [venv / "bin" / "t2t-info", "--list"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    for name in ("transformer_base", "transformer_big", "wmt14_ende", "translate_ende_lohelp"):
        assert f"  {name}\n" in listed.stdout, listed.stdout
