"""The whole path as a user runs it (slow tier, about 3 minutes on 2 CPU cores): t2t-datagen ->
t2t-train (300 steps on algorithmic_reverse) -> t2t-export -> a fresh process and t2t-query
through `t2t-serve --export_dir`'s TF Serving REST API, both equal to t2t-decode and (nearly)
always right.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tf_serving_helpers import t2t_serve

from t2t_lite.problems import get_problem
from t2t_lite.serve import query

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
OPTIONS = {"max_sequence_length": 6, "train_size": 2000, "dev_size": 200, "test_size": 100}
FRESH_PROCESS = os.path.join(os.path.dirname(__file__), "..", "fresh_process_translate.py")
SEARCH = ("--beam_size=2", "--alpha=0.6")


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding (see tests/serve/test_export.py): the SavedModel is loaded during the test."""
    yield


def _command(*args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        [sys.executable, *args], input=stdin, capture_output=True, env=ENV, timeout=600
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return done.stdout.decode("utf-8")


def _bin(name: str, *flags: str, stdin: bytes | None = None) -> str:
    return _command("-m", f"t2t_lite.bin.{name}", *flags, stdin=stdin)


@pytest.mark.slow
def test_train_export_serve(tmp_path, capsys):
    data_dir, output_dir = str(tmp_path / "data"), str(tmp_path / "run")
    export_dir, source = str(tmp_path / "served"), tmp_path / "test.src"
    options = ",".join(f"{k}={v}" for k, v in OPTIONS.items())
    problem = ("--problem=algorithmic_reverse", f"--data_dir={data_dir}")
    _bin("t2t_datagen", *problem, f"--problem_options={options}")
    _bin(
        "t2t_train",
        *problem,
        "--hparams_set=transformer_tiny",
        "--hparams=warmup_steps=60,learning_rate=0.4,batch_size=2048",
        f"--output_dir={output_dir}",
        "--train_steps=300",
        "--eval_every=300",
        "--save_every=300",
    )
    report = json.loads(
        _bin("t2t_export", f"--output_dir={output_dir}", f"--export_dir={export_dir}", *SEARCH)
    )
    reverse = get_problem("algorithmic_reverse")
    pairs = list(reverse.text_pairs("test", reverse.resolve_options(OPTIONS)))
    source.write_text("".join(src + "\n" for src, _ in pairs), encoding="utf-8")

    decoded = _bin(
        "t2t_decode", f"--output_dir={output_dir}", f"--decode_from_file={source}", *SEARCH
    )
    decoded = decoded.split("\n")[:-1]
    right = sum(out == tgt for out, (_, tgt) in zip(decoded, pairs, strict=True))
    assert right >= 95, f"{right} of 100 reversed correctly"
    fresh = json.loads(_command(FRESH_PROCESS, report["saved_model"], str(source)))
    assert fresh["outputs"] == decoded

    with t2t_serve(f"--export_dir={export_dir}") as url:  # TF Serving's REST API
        served = _bin("t2t_query", f"--server={url}", "--model=served", f"--input_file={source}")
        body = {"instances": ["1 2 3 4 5", "9 8 7"]}
        answer = query.post_json(query.predict_url(url, "served"), body)
    assert served.split("\n")[:-1] == decoded
    with capsys.disabled():  # README's example request and response
        for shown in (body, answer):
            print(json.dumps(shown, ensure_ascii=False))
