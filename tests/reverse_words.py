"""The reverse-words run the export tests share: a text2text run (SentencePiece) trained
briefly to reverse word order, and its CTranslate2 and LiteRT exports.

Each is a session fixture (tests/conftest.py): built once per pytest process, that is once per
xdist worker, the first time a test asks for it, then made read-only, so that a test writing
into one fails rather than changing what the next test reads (and, since file modes do not stop
root, checked unchanged when the session ends). A test that needs to write copies
the folder (shutil.copytree) or exports into its own tmp_path. (pytest-xdist's `loadgroup`,
which could send the files that use them to one worker, groups nothing under pytest 9, whose
node ids it no longer rewrites: `make test` distributes by file.)
"""

from __future__ import annotations

import contextlib
import os
import stat
import time

import numpy as np
import pytest

MAX_POSITIONS = 24
EXTRA = 6  # the searches' extra_length
INPUT_LENGTH = 14  # the LiteRT export's max_input_length
STEPS = 250
WORDS = "the a cat dog sat on mat big small house red blue runs over under".split()
HPARAMS = (
    "num_encoder_layers=2,num_decoder_layers=2,d_model=32,d_ff=128,num_heads=4,"
    f"max_positions={MAX_POSITIONS},batch_size=1024,learning_rate=0.5,warmup_steps=50,"
    "precision=float32"
)
# The searches the exports are made for: CTranslate2's beam search, LiteRT's greedy one.
CT2_SEARCH = {"beam_size": 4, "alpha": 0.0, "extra_length": EXTRA}
LITERT_SEARCH = {"beam_size": 1, "alpha": 0.0, "extra_length": EXTRA}


def sentences(count: int, seed: int) -> list[str]:
    """`count` lines of 2 to 7 of WORDS."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(2, 8))) for _ in range(count)]


def reversed_words(line: str) -> str:
    return " ".join(line.split()[::-1])


def _write(path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _set_writable(root: str, writable: bool) -> None:
    """Every file and folder under `root` (itself included) read-only, or writable again."""
    write = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    for folder, _, files in os.walk(root, topdown=False):
        for path in [os.path.join(folder, name) for name in files] + [folder]:
            mode = os.stat(path).st_mode
            os.chmod(path, (mode | stat.S_IWUSR) if writable else (mode & ~write))


def _listing(root: str) -> dict[str, tuple[int, int]]:
    """(size, modification time) of every file and folder under `root`, by relative path."""
    found = {}
    for folder, _, files in os.walk(root):
        for path in [folder] + [os.path.join(folder, name) for name in files]:
            status = os.stat(path)
            found[os.path.relpath(path, root)] = (status.st_size, status.st_mtime_ns)
    return found


@contextlib.contextmanager
def read_only(root: str):
    """`root` read-only while the tests read it; after them writable again (so that pytest can
    remove it) and checked unchanged, which also catches a test that wrote as root (whom file
    modes do not stop): an AssertionError naming what changed."""
    before = _listing(root)
    _set_writable(root, False)
    try:
        yield
    finally:
        _set_writable(root, True)
    after = _listing(root)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    assert not changed, f"a test changed the shared folder {root}: {changed}"


def _train(root) -> str:
    from t2t_lite.hparams import get_hparams
    from t2t_lite.problems import get_problem
    from t2t_lite.train.loop import TrainConfig, train

    lines = sentences(1200, seed=1)
    targets = [reversed_words(line) for line in lines]
    files = {}
    for split, part in (("train", slice(0, 1100)), ("dev", slice(1100, 1200))):
        files[f"{split}_src"] = _write(root / f"{split}.src", lines[part])
        files[f"{split}_tgt"] = _write(root / f"{split}.tgt", targets[part])
    data_dir, output_dir = str(root / "data"), str(root / "run")
    problem = get_problem("text2text")
    problem.generate_data(data_dir, vocab_size=60, **files)
    config = TrainConfig(
        output_dir, data_dir, train_steps=STEPS, eval_every=STEPS, save_every=STEPS
    )
    train(problem, config, get_hparams("transformer_tiny", HPARAMS), "transformer_tiny")
    return str(root)


@pytest.fixture(scope="session")
def reverse_words_run(tmp_path_factory):
    """The trained run's output_dir (read-only; its data_dir beside it, read-only too)."""
    root = _train(tmp_path_factory.mktemp("reverse_words"))
    with read_only(root):
        yield os.path.join(root, "run")


@pytest.fixture(scope="session")
def reverse_words_ct2(reverse_words_run, tmp_path_factory):
    """The run's CTranslate2 export (float32), made for CT2_SEARCH: {"path", "info",
    "seconds"} (seconds: the conversion's)."""
    from t2t_lite.run.run import Run
    from t2t_lite.serve import ctranslate2_export

    root = tmp_path_factory.mktemp("reverse_words_ct2")
    run = Run.restore(reverse_words_run, search=CT2_SEARCH)
    start = time.monotonic()
    path, info = ctranslate2_export.export_run(run, str(root / "ct2"))
    seconds = time.monotonic() - start
    with read_only(str(root)):
        yield {"path": path, "info": info, "seconds": seconds}


@pytest.fixture(scope="session")
def reverse_words_litert(reverse_words_run, tmp_path_factory):
    """The run's LiteRT exports for LITERT_SEARCH and inputs of INPUT_LENGTH ids, two versions
    of one export folder: float32 weights with the batch free ("float", version 1) and int8
    weights in fixed batches of 1 ("int8", version 2); "info" is the float one's."""
    from t2t_lite.run.run import Run
    from t2t_lite.serve import litert_export

    root = tmp_path_factory.mktemp("reverse_words_litert")
    search = {**LITERT_SEARCH, "max_input_length": INPUT_LENGTH}
    run = Run.restore(reverse_words_run, search=search)
    float_path, info = litert_export.export_run(run, str(root / "export"))
    int8_path, _ = litert_export.export_run(
        run, str(root / "export"), quantization="int8", batch_size=1
    )
    with read_only(str(root)):
        yield {"float": float_path, "int8": int8_path, "info": info}
