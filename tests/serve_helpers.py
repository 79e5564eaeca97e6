"""Tiny runs for the t2t-serve tests: a SentencePiece translation run and a parsing run, each a
random Transformer saved as a checkpoint with its data_dir (built in a few seconds).

SentencePiece resources created in a process do not survive `tf.random.set_seed`, so modules
that keep a restored run across tests override conftest's reseeding fixture (see
tests/serve/test_export.py), and the model is seeded here before any tokenizer of theirs exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading

import keras
import numpy as np
import tensorflow as tf

from t2t_lite.hparams import SearchSettings, get_hparams
from t2t_lite.model import Transformer
from t2t_lite.problems import get_problem
from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run_info import RunInfo
from t2t_lite.serve.web.backend import Capabilities

# 1 + 1 layers, 2 heads: attention maps small enough to compare whole.
HPARAMS = "num_encoder_layers=1,num_decoder_layers=1,d_model=32,d_ff=64,num_heads=2,dropout=0.0"
WORDS = (
    "I you we see saw take took a the red green small box boxes door doors now then here".split()
)


def sentences(count: int, seed: int) -> list[str]:
    """Random sentences of 2 to 9 words."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(2, 10))) for _ in range(count)]


def server_events(text: str) -> list[tuple[str, dict]]:
    """A `text/event-stream` body --> [(event name, its JSON data)], in order."""
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def _save_run(problem: str, data_dir: str, output_dir: str, max_positions: int, seed: int) -> None:
    task = get_problem(problem)
    vocab_size = task.tokenizer(data_dir).vocab_size
    output_size = task.output_size(data_dir)
    hparams = get_hparams("transformer_tiny", f"{HPARAMS},max_positions={max_positions}")
    keras.utils.set_random_seed(seed)
    model = Transformer.from_hparams(hparams, vocab_size, output_vocab_size=output_size)
    model.build()
    info = RunInfo(problem, data_dir, "transformer_tiny", hparams, vocab_size, output_size)
    info.save(output_dir)
    checkpoints = os.path.join(output_dir, CHECKPOINT_DIR)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), checkpoints, 1).save()


def text_run(root, seed: int = 11, max_positions: int = 24) -> str:
    """A text2text run (SentencePiece vocabulary of 60) in root/run; returns its output_dir."""
    files = {}
    for split, count in (("train", 60), ("dev", 10)):
        for side, offset in (("src", 0), ("tgt", 1000)):
            path = os.path.join(root, f"{split}.{side}")
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(s + "\n" for s in sentences(count, seed + offset + len(split)))
            files[f"{split}_{side}"] = path
    data_dir, output_dir = os.path.join(root, "data"), os.path.join(root, "run")
    get_problem("text2text").generate_data(data_dir, vocab_size=60, **files)
    _save_run("text2text", data_dir, output_dir, max_positions, seed)
    return output_dir


GOLD_TREES = [
    "(ROOT (S (NP (PRP We)) (VP (VBD saw) (NP (DT the) (JJ red) (NN box))) (. .)))",
    "(ROOT (S (NP (PRP I)) (VP (VBP take) (NP (DT a) (NN door))) (ADVP (RB now))))",
    "(ROOT (S (NP (PRP You)) (VP (VBD took) (NP (DT the) (NNS boxes)) (ADVP (RB here))) (. !)))",
    "(ROOT (NP (NP (DT a) (JJ small) (NN box)) (, ,) (NP (DT a) (JJ green) (NN door))))",
]


def parsing_run(root, seed: int = 3) -> str:
    """A parsing_trees run trained on GOLD_TREES for no steps, in root/run; returns its
    output_dir. Its constrained search makes a well-formed tree over any sentence's words."""
    for split in ("train", "dev", "test"):
        with open(os.path.join(root, f"{split}.mrg"), "w") as f:
            f.write("\n".join(GOLD_TREES) + "\n")
    data_dir, output_dir = os.path.join(root, "data"), os.path.join(root, "run")
    trees = {f"{s}_trees": os.path.join(root, f"{s}.mrg") for s in ("train", "dev", "test")}
    get_problem("parsing_trees").generate_data(data_dir, **trees)
    _save_run("parsing_trees", data_dir, output_dir, 64, seed)
    return output_dir


class BlockingBackend:
    """A t2t-serve backend whose translate waits for `release`: requests pile up as slow
    searches do; `started` counts the searches begun."""

    capabilities = Capabilities(SearchSettings(nbest=1), False, None, False, False)

    def __init__(self):
        self.started, self.release = threading.Semaphore(0), threading.Event()

    def facts(self):
        return {}

    def translate(self, sentences, settings, guides=None, details=False):
        self.started.release()
        self.release.wait(30)
        return [{"source": s, "truncated": False, "hypotheses": []} for s in sentences]


@contextlib.contextmanager
def run_client(output_dir: str, limits=None, **run_flags):
    """t2t-serve's app over the run in `output_dir` (`load_backend` of its `RunFlags`, with
    `run_flags` such as search settings), as a TestClient on the host the guards allow."""
    from fastapi.testclient import TestClient

    from t2t_lite.run.run_flags import RunFlags
    from t2t_lite.serve.web.app import create_app
    from t2t_lite.serve.web.server import load_backend

    app = create_app(load_backend(RunFlags(output_dir, **run_flags)), limits)
    with TestClient(app, base_url="http://localhost") as client:
        yield client
