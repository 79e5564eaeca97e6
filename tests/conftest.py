"""Shared test set-up: quiet TensorFlow logs, deterministic seeds, the NumPy references, the
session fixtures of the expensive artifacts (tests/reverse_words.py: a trained run and its
exports, built once per worker and read-only to the tests), and the order in which the workers
get the test files (tests/file_order.py: the longest first)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from t2t_lite.runtime.threads import cpus_per_part  # noqa: E402  (TensorFlow not yet imported)


def _share_the_cpus() -> None:
    """Each of `make test`'s workers runs TensorFlow's ops on its share of the CPUs, as
    `t2t-decode --inter_threads` splits them: two workers that each spread every op over both
    CPUs wait on each other's threads. Set before TensorFlow starts, and inherited by the
    commands a test runs."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        share = str(cpus_per_part(workers))
        os.environ.setdefault("TF_NUM_INTRAOP_THREADS", share)
        os.environ.setdefault("TF_NUM_INTEROP_THREADS", share)


_share_the_cpus()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from file_order import (  # noqa: E402, F401  (hooks: the files' order, --record-file-seconds)
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_terminal_summary,
)
from reverse_words import (  # noqa: E402, F401  (session fixtures)
    reverse_words_ct2,
    reverse_words_litert,
    reverse_words_run,
)
from step_clock import step_clock  # noqa: E402, F401  (a fixture)
from tf_iterators import tf_iterators  # noqa: E402, F401  (a fixture)


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
