"""Sampling from the command line (`t2t-decode --sampling=...`) and from an export's `sample`
signature: the same seed gives the same output, and temperature 0 is greedy search."""

from __future__ import annotations

import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)
from decoding_helpers import decode_flags, write_tiny_run

from t2t_lite.decode.runner import run_decode
from t2t_lite.run.run import Run
from t2t_lite.serve import export

LINES = ["1 2 3", "4 5 6 7 8", "9", "2 2 2 2", "3 1 4 1 5 9 2 6"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("sampling")
    write_tiny_run(root, max_positions=32, seed=11)
    (root / "in.txt").write_text("\n".join(LINES) + "\n")
    return root


def _decode(root, name: str, **flags) -> list[str]:
    target = root / f"{name}.txt"
    config = decode_flags(
        output_dir=str(root / "out"),
        decode_from_file=str(root / "in.txt"),
        decode_to_file=str(target),
        extra_length=12,
        **flags,
    )
    assert run_decode(*config) == len(LINES)
    return target.read_text().split("\n")[:-1]


def test_cli_sampling_is_seeded_and_temperature_0_is_greedy(run_dir):
    greedy = _decode(run_dir, "greedy", beam_size=1, alpha=0.0)
    assert _decode(run_dir, "t0", sampling="temperature:0") == greedy
    first = _decode(run_dir, "s5", sampling="temperature:1.5,seed:5")
    assert _decode(run_dir, "s5_again", sampling="temperature:1.5,seed:5") == first
    other = _decode(run_dir, "s6", sampling="temperature:1.5,seed:6")
    assert other != first and first != greedy  # a random model's samples differ
    nucleus = _decode(run_dir, "top1", sampling="temperature:1.5,top_k:1,seed:5")
    assert nucleus == greedy  # the top-1 token only: greedy again
    with pytest.raises(ValueError, match="--sampling draws one hypothesis per input"):
        _decode(run_dir, "nbest", sampling="temperature:1", nbest=2, beam_size=2)


def _export(root, name: str, search: dict):
    run = Run.restore(str(root / "out"), search={"extra_length": 12, **search})
    path, info = export.export_run(run, str(root / name))
    return tf.saved_model.load(path), info


def test_sample_signature(run_dir):
    inputs = tf.constant(LINES + [""])
    loaded, info = _export(run_dir, "warm", {"sampling": True, "temperature": 1.5})
    assert info["settings"]["temperature"] == 1.5 and not info["settings"]["sampling"]
    sample = loaded.signatures[export.SAMPLE_SIGNATURE]
    first = sample(inputs=inputs, seed=tf.constant(5))
    again = sample(inputs=inputs, seed=tf.constant(5))
    other = sample(inputs=inputs, seed=tf.constant(6))
    assert first["outputs"].numpy().tolist() == again["outputs"].numpy().tolist()
    assert first["outputs"].numpy().tolist() != other["outputs"].numpy().tolist()
    assert first["outputs"].numpy()[-1] == b"" and first["scores"].numpy()[-1] == 0.0
    cold, _ = _export(
        run_dir, "cold", {"sampling": True, "temperature": 0.0, "beam_size": 1, "alpha": 0.0}
    )
    greedy = cold.signatures["serving_default"](inputs=inputs)["outputs"].numpy().tolist()
    drawn = cold.signatures[export.SAMPLE_SIGNATURE](inputs=inputs, seed=tf.constant(9))
    assert drawn["outputs"].numpy().tolist() == greedy
