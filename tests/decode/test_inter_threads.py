"""--inter_threads (t2t_lite.runtime.threads): batches searched at once on threads of their own
give exactly what one batch after another gives (hypotheses, scores, --score_file and
t2t-distill's best hypotheses), in the input's order; the threads really overlap, stop early
when the caller does, and the threads per op are set before TensorFlow runs or refused."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from command_helpers import command
from decoding_helpers import MIXED_LINES, MIXED_TARGETS

# 13 lines, 2 empty; with batch_tokens=12, 8 batches of 1 to 3 rows.
LINES, TARGETS = MIXED_LINES, MIXED_TARGETS


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from decoding_helpers import write_tiny_run

    output_dir, _, _ = write_tiny_run(tmp_path_factory.mktemp("inter_threads"), 8)
    return str(output_dir)


def test_map_batches_keeps_the_order_and_overlaps():
    from t2t_lite.runtime.threads import map_batches

    both_running = threading.Barrier(2, timeout=30)  # broken unless two calls run at once

    def slow_square(x):
        if x < 2:
            both_running.wait()
        time.sleep(0.01 * (7 - x))  # later batches finish first
        return x * x

    found = list(map_batches(slow_square, range(8), 2))
    assert found == [(x, x * x) for x in range(8)]
    assert list(map_batches(lambda x: -x, [3, 1], 1)) == [(3, -3), (1, -1)]


def test_map_batches_starts_few_ahead_and_cancels_the_rest():
    from t2t_lite.runtime.threads import map_batches

    started = []

    def record(x):
        started.append(x)
        time.sleep(0.02)
        return x

    found = map_batches(record, range(100), 2)
    assert next(found) == (0, 0)
    found.close()
    # Batch 0 returned, at most 2 x 2 more queued when it was, and those not yet started are
    # cancelled: nowhere near the 100 batches given.
    assert len(started) <= 5, started


def test_split_cpus_is_refused_once_tensorflow_has_run():
    import tensorflow as tf

    from t2t_lite.runtime.threads import cpu_count, split_cpus

    tf.constant(1.0) + 1.0
    assert split_cpus(1) == cpu_count()  # leaves TensorFlow as it is
    with pytest.raises(ValueError, match=r"--inter_threads=2: TensorFlow has already run"):
        split_cpus(2)
    with pytest.raises(ValueError, match="--inter_threads=0 must be at least 1"):
        split_cpus(0)


def test_each_part_gets_its_share_of_the_cpus_and_at_least_one(monkeypatch):
    from t2t_lite.runtime import threads

    monkeypatch.setattr(threads, "cpu_count", lambda: 8)
    assert [threads.cpus_per_part(n) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]


def test_two_threads_decode_score_and_distill_as_one(run_dir):
    from t2t_lite.decode.translator import Translator
    from t2t_lite.train.distill import best_hypotheses

    def outputs(inter_threads):
        translator = Translator.from_run(
            run_dir, batch_tokens=12, beam_size=3, nbest=3, inter_threads=inter_threads
        )
        names = [f"line {i}" for i in range(len(LINES))]
        found = translator.hypotheses(LINES, names, log_progress=False)
        scores = translator.score(LINES, TARGETS, names, names)
        sources = [s for s in translator.encode(LINES, names) if s]
        return found, scores, best_hypotheses(translator, sources)

    one, two = outputs(1), outputs(2)
    found_one, found_two = one[0], two[0]
    assert [len(h) for h in found_one] == [3, 0, 3, 3, 3, 3, 0, 3, 3, 3, 3, 3, 3]
    assert [[h.text for h in hyps] for hyps in found_two] == [
        [h.text for h in hyps] for hyps in found_one
    ]
    np.testing.assert_array_equal(
        [h.score for hyps in found_two for h in hyps], [h.score for hyps in found_one for h in hyps]
    )
    assert two[1] == one[1] and one[1][1] is None and one[1][3] is None  # an empty side: None
    assert two[2] == one[2] and len(one[2]) == 11


def test_t2t_decode_flag(run_dir, tmp_path):
    """t2t-decode --inter_threads=2 in a process of its own (its threads per op are set before
    TensorFlow runs) writes what one batch after another writes: `run_decode`, which the
    command calls, with --inter_threads=1 in this process."""
    from decoding_helpers import decode_flags

    from t2t_lite.decode.runner import run_decode

    source, one = tmp_path / "in.txt", tmp_path / "one.txt"
    source.write_text("".join(line + "\n" for line in LINES))
    config = decode_flags(
        output_dir=run_dir, decode_from_file=str(source), decode_to_file=str(one),
        batch_tokens=12, inter_threads=1,
    )  # fmt: skip
    assert run_decode(*config) == len(LINES)
    written = one.read_text(encoding="utf-8")
    two = command(
        "t2t_decode", f"--output_dir={run_dir}", f"--decode_from_file={source}",
        "--batch_tokens=12", "--inter_threads=2",
    )  # fmt: skip
    assert two.returncode == 0, two.stderr[-2000:]
    assert two.stdout == written and len(written.splitlines()) == len(LINES)
    per_op = max(1, len(os.sched_getaffinity(0)) // 2)
    assert f"--inter_threads=2: 2 batches searched at once, each op on {per_op} of" in two.stderr
