"""t2t-decode --strategy (t2t_lite.decode.replicas): each batch split across two logical CPU
devices gives exactly the one-device output, n-best lists and --score_file scores included, with
batches that do not divide evenly and batches of fewer rows than replicas.

Logical devices must be set before TensorFlow starts, so the two-device half runs in a fresh
process: this file run as a script (`python test_replicas.py OUTPUT_DIR FOLDER`)."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from command_helpers import command, run
from decoding_helpers import MIXED_LINES, MIXED_TARGETS

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.path.dirname(HERE)}
MAX_POSITIONS = 8
# 13 lines, 2 empty: one batch of 11 rows (6 + 5 per replica), or with --batch_tokens=12
# batches of 1 to 3 rows (a batch of one row leaves a replica without rows).
LINES, TARGETS = MIXED_LINES, MIXED_TARGETS


def decode_all(output_dir: str, folder: str, strategy: str) -> dict:
    """Every output t2t-decode writes for LINES with this --strategy: n-best lines, 1-best
    lines with several batches, and the scores of TARGETS."""
    from decoding_helpers import t2t_decode

    source, targets = os.path.join(folder, "in.txt"), os.path.join(folder, "targets.txt")
    for path, lines in ((source, LINES), (targets, TARGETS)):
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
    runs = {
        "nbest": {"beam_size": 3, "alpha": 0.6, "nbest": 3},
        "small_batches": {"beam_size": 2, "batch_tokens": 12},
        "scores": {"score_file": targets, "batch_tokens": 12},
    }
    found = {}
    for name, settings in runs.items():
        out = os.path.join(folder, f"{name}.{strategy}.txt")
        found[name] = t2t_decode(source, out, output_dir=output_dir, strategy=strategy, **settings)
    return found


def two_devices_main(output_dir: str, folder: str) -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from t2t_lite.runtime.distribute import decode_strategy

    replicas = decode_strategy("mirrored").num_replicas_in_sync
    found = {s: decode_all(output_dir, folder, s) for s in ("default", "mirrored", "auto")}
    print("RESULT " + json.dumps({"replicas": replicas, **found}))


def _split_scores(lines: list[str]) -> tuple[list[str], list[float]]:
    """Output lines --> (their texts, their scores): n-best lines "i ||| text ||| score", or
    score lines (an empty line: NaN)."""
    texts, scores = [], []
    for line in lines:
        text, _, score = line.rpartition(" ||| ") if " ||| " in line else ("", "", line)
        texts.append(text)
        scores.append(float(score) if score else float("nan"))
    return texts, scores


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from decoding_helpers import write_tiny_run

    output_dir, _, _ = write_tiny_run(tmp_path_factory.mktemp("replicas"), MAX_POSITIONS)
    return str(output_dir)


def test_two_replicas_decode_and_score_as_one_device(run_dir, tmp_path):
    done = run(__file__, run_dir, str(tmp_path), env=ENV, timeout=600)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    found = json.loads(lines[-1][len("RESULT ") :])
    assert found["replicas"] == 2
    one = found["default"]
    assert len(one["nbest"]) == 3 * len(LINES) and len(one["scores"]) == len(LINES)
    assert one["scores"][1] == "" and one["scores"][0] != ""  # an empty input: an empty line
    for strategy in ("mirrored", "auto"):
        # The same texts in the same order. A score may differ in its last printed digit: a
        # replica multiplies fewer rows at once, and float32 matrix products round according
        # to their shapes (as they do between batch sizes on one device).
        assert found[strategy]["small_batches"] == one["small_batches"], strategy
        for kind in ("nbest", "scores"):
            got, want = (_split_scores(found[strategy][kind]), _split_scores(one[kind]))
            assert got[0] == want[0], (strategy, kind)
            np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-5)


def test_shares_and_padding():
    import tensorflow as tf

    from t2t_lite.decode.replicas import _concat_padded, shard_bounds

    def shares(batch, replicas):
        return [tuple(int(b) for b in shard_bounds(batch, replicas, r)) for r in range(replicas)]

    assert shares(11, 2) == [(0, 6), (6, 11)]
    assert shares(7, 3) == [(0, 3), (3, 5), (5, 7)]
    assert shares(1, 2) == [(0, 1), (1, 1)]  # the second replica has no rows
    a, b = tf.ones([2, 3, 4], tf.int32), 2 * tf.ones([1, 3, 6], tf.int32)
    joined = _concat_padded([a, b]).numpy()  # --> [3, 3, 6], a's rows zero past 4
    assert joined.shape == (3, 3, 6) and joined[:2, :, 4:].sum() == 0 and joined[2].min() == 2
    np.testing.assert_array_equal(_concat_padded([tf.range(2), tf.range(3)]), [0, 1, 0, 1, 2])


def test_strategy_names():
    from t2t_lite.runtime.distribute import decode_strategy

    assert decode_strategy("default") is None
    with pytest.raises(ValueError, match="one process"):
        decode_strategy("multi_worker")
    with pytest.raises(ValueError, match="'gpu' is not one of auto, mirrored"):
        decode_strategy("gpu")


def test_t2t_decode_flag(run_dir, tmp_path):
    """t2t-decode --strategy=mirrored (one replica in a process of one device) writes what
    `run_decode`, which the command calls, writes with the default strategy in this process;
    --strategy=multi_worker is refused in one line."""
    from decoding_helpers import decode_flags

    from t2t_lite.decode.runner import run_decode

    source, default = tmp_path / "in.txt", tmp_path / "default.txt"
    source.write_text("1 2 3\n\n4 5\n")
    config = decode_flags(
        output_dir=run_dir, decode_from_file=str(source), decode_to_file=str(default),
        strategy="default",
    )  # fmt: skip
    assert run_decode(*config) == 3
    written = default.read_text(encoding="utf-8")
    outputs = {}
    for strategy in ("mirrored", "multi_worker"):
        outputs[strategy] = command(
            "t2t_decode", f"--output_dir={run_dir}", f"--decode_from_file={source}",
            f"--strategy={strategy}",
        )  # fmt: skip
    assert outputs["mirrored"].returncode == 0, outputs["mirrored"].stderr[-2000:]
    assert outputs["mirrored"].stdout == written
    assert len(written.splitlines()) == 3
    refused = outputs["multi_worker"]
    assert refused.returncode == 2 and "--strategy=multi_worker: decoding runs in one process" in (
        refused.stderr
    )


if __name__ == "__main__":
    two_devices_main(sys.argv[1], sys.argv[2])
