"""Shared test set-up: quiet TensorFlow logs, deterministic seeds, the NumPy references, and the
session fixtures of the expensive artifacts (tests/reverse_words.py: a trained run and its
exports, built once per worker and read-only to the tests)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from reverse_words import (  # noqa: E402, F401  (session fixtures)
    reverse_words_ct2,
    reverse_words_litert,
    reverse_words_run,
)
from step_clock import step_clock  # noqa: E402, F401  (a fixture)

# The files that take a worker longest, slowest first (seconds of one process on an Intel Xeon
# with AMX, 2026-12-05: about 140 to 30 each). `make test` hands whole files to its two workers
# (--dist loadfile) in the order they are collected, so these go out first and the run does not
# end with one worker on a long file while the other waits.
SLOW_FILES = (
    "decode/test_quantize.py",
    "train/test_budget.py",
    "bin/test_cli.py",
    "train/test_evaluation.py",
    "sweep/test_sweep_end_to_end.py",
    "decode/test_shortlist.py",
    "serve/test_web_browser.py",
    "train/test_train_step.py",
    "decode/test_replicas.py",
    "decode/test_sampling.py",
    "serve/test_litert_export.py",
    "run/test_checkpoints.py",
    "serve/test_export_parsing.py",
)


def pytest_collection_modifyitems(config, items):
    """The tests of SLOW_FILES first, in that order; the rest as collected."""
    here = os.path.dirname(os.path.abspath(__file__))
    gone = [name for name in SLOW_FILES if not os.path.isfile(os.path.join(here, name))]
    if gone:
        raise pytest.UsageError(f"tests/conftest.py: SLOW_FILES names missing files: {gone}")
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(os.path.relpath(str(item.path), here), len(rank)))


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(1234)
    yield


def assert_close(actual, expected, rtol=1e-5):
    """Relative error, measured against the largest reference magnitude, under rtol."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = max(np.abs(expected).max(), 1e-12)
    error = np.abs(actual - expected).max() / scale
    assert error < rtol, f"relative error {error:.3g} >= {rtol}"
