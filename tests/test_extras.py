"""Without an optional package, the paths that need it name the extra that installs it, and the
commands report that as one line. The package is made unimportable with `sys.modules[name] = None`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from t2t_lite.decode.visualize import render_png
from t2t_lite.extras import MissingExtraError, import_extra
from t2t_lite.problems import get_problem

WMT = "problem wmt14_ende without --raw_dir needs tensorflow-datasets: pip install 't2t_lite[wmt]'"
VIZ = "drawing attention pictures needs matplotlib: pip install 't2t_lite[viz]'"


def test_import_extra_returns_the_module_or_names_the_extra(monkeypatch):
    assert import_extra("json", "json", "none", "a test") is sys.modules["json"]
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
    with pytest.raises(MissingExtraError) as raised:
        import_extra("tensorflow_datasets", "tensorflow-datasets", "wmt", "WMT14")
    assert str(raised.value) == "WMT14 needs tensorflow-datasets: pip install 't2t_lite[wmt]'"
    assert isinstance(raised.value, ImportError)


def test_import_extra_keeps_errors_from_inside_an_installed_package(tmp_path, monkeypatch):
    """A package that is there but fails to import is a bug to see, not a missing extra."""
    (tmp_path / "broken_extra").mkdir()
    (tmp_path / "broken_extra" / "__init__.py").write_text("import no_such_module_inside\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_module_inside") as raised:
        import_extra("broken_extra", "broken-extra", "x", "a test")
    assert not isinstance(raised.value, MissingExtraError)


@pytest.mark.parametrize("name", ["wmt14_ende", "wmt14_enfr"])
def test_wmt14_without_tensorflow_datasets(tmp_path, monkeypatch, name):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
    with pytest.raises(MissingExtraError, match=r"pip install 't2t_lite\[wmt\]'") as raised:
        get_problem(name).generate_data(str(tmp_path / "data"))
    assert str(raised.value).startswith(f"problem {name} without --raw_dir needs ")


def test_wmt14_from_raw_dir_needs_no_tensorflow_datasets(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "dev", "test"):
        (raw / f"{split}.en").write_text("a house .\nthe cat .\n", encoding="utf-8")
        (raw / f"{split}.de").write_text("ein Haus .\ndie Katze .\n", encoding="utf-8")
    problem = get_problem("wmt14_ende")
    options = problem.resolve_options({"raw_dir": str(raw)})
    assert list(problem.text_pairs("dev", options)) == [
        ("a house .", "ein Haus ."),
        ("the cat .", "die Katze ."),
    ]


def test_attention_pictures_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtraError) as raised:
        render_png(np.ones([1, 2, 2]), ["a", "b"], ["c", "d"], "t", str(tmp_path / "x.png"))
    assert str(raised.value) == VIZ


def _command(module: str, argv: list[str], missing: str) -> subprocess.CompletedProcess:
    """Runs the command `module` with `missing` unimportable, as its console script would."""
    code = textwrap.dedent(f"""
        import sys
        sys.modules[{missing!r}] = None
        sys.argv = {argv!r}
        from t2t_lite.bin.{module} import run
        run()
    """)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )


def test_commands_report_a_missing_extra_in_one_line(tmp_path):
    datagen = _command(
        "t2t_datagen",
        ["t2t-datagen", "--problem=wmt14_ende", f"--data_dir={tmp_path / 'data'}"],
        "tensorflow_datasets",
    )
    assert datagen.returncode == 2, datagen.stderr[-2000:]
    assert datagen.stderr.strip().splitlines()[-1] == f"t2t-datagen: error: {WMT}"
    assert "Traceback" not in datagen.stderr
    # t2t-visualize checks before it restores the run: no run is needed to see the error.
    visualize = _command(
        "t2t_visualize",
        ["t2t-visualize", f"--output_dir={tmp_path / 'no_run'}", "--inputs=a b"],
        "matplotlib",
    )
    assert visualize.returncode == 2, visualize.stderr[-2000:]
    assert visualize.stderr.strip().splitlines()[-1] == f"t2t-visualize: error: {VIZ}"


@pytest.mark.parametrize(
    "module, argv, missing, message",
    [
        ("t2t_serve", ["t2t-serve", "--export_dir=/nonexistent"], "fastapi",
         "t2t-serve needs fastapi: pip install 't2t_lite[serve]'"),
        ("t2t_serve", ["t2t-serve", "--export_dir=/nonexistent"], "uvicorn",
         "t2t-serve needs uvicorn: pip install 't2t_lite[serve]'"),
        ("t2t_export", ["t2t-export", "--output_dir=/nonexistent", "--export_dir=/x",
                        "--format=ctranslate2"], "ctranslate2",
         "t2t-export --format=ctranslate2 needs ctranslate2: pip install 't2t_lite[ctranslate2]'"),
        ("t2t_query", ["t2t-query", "--model=m", "--protocol=grpc", "--input_file=/dev/null"],
         "grpc",
         "t2t-query --protocol=grpc needs grpcio: pip install 't2t_lite[grpc]'"),
    ],
)  # fmt: skip
def test_serving_commands_name_their_extra(module, argv, missing, message):
    """The serving paths check their extra before they touch a run or a server, so the paths in
    these commands need not exist."""
    done = _command(module, argv, missing)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == f"{argv[0]}: error: {message}"
    assert "Traceback" not in done.stderr
