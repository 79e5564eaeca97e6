"""A run trained briefly to reverse word order (text2text, SentencePiece): the export tests'
trained model, built once per session by tests/serve/conftest.py's `reverse_words` fixture.

SentencePiece resources do not survive `tf.random.set_seed` (which conftest's reseeding fixture
calls before each test), so the session keeps the trained run's folder, and a module restores
the run itself (`ReverseWords.restore`) and overrides the reseeding (see
tests/serve/test_export.py).
"""

from __future__ import annotations

import dataclasses
import pathlib

import keras
import numpy as np

from t2t_lite.hparams import get_hparams
from t2t_lite.problems import get_problem
from t2t_lite.run.run import Run
from t2t_lite.train.loop import TrainConfig, train

WORDS = "the a cat dog sat on mat big small house red blue runs over under".split()


@dataclasses.dataclass(frozen=True)
class ReverseWords:
    """The trained run's folder, and the folder of its data and text files."""

    output_dir: str
    root: pathlib.Path
    max_positions: int = 24
    extra_length: int = 6

    @staticmethod
    def sentences(count: int, seed: int) -> list[str]:
        """`count` sentences of 2 to 7 of WORDS (the run's source language)."""
        rng = np.random.default_rng(seed)
        return [" ".join(rng.choice(WORDS, rng.integers(2, 8))) for _ in range(count)]

    def restore(self) -> Run:
        """The run, restored to search with beam 4, alpha 0 and extra_length 6."""
        search = {"beam_size": 4, "alpha": 0.0, "extra_length": self.extra_length}
        return Run.restore(self.output_dir, search=search)


def _write(path: pathlib.Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def train_reverse_words(root: pathlib.Path) -> ReverseWords:
    """A text2text run (2 + 2 layers, d_model 32, a 60-piece SentencePiece vocabulary) trained
    250 steps on 1,100 sentences to reverse their word order, in `root`/run."""
    keras.utils.set_random_seed(1)  # the same weights whichever test asks first
    sources = ReverseWords.sentences(1200, seed=1)
    targets = [" ".join(s.split()[::-1]) for s in sources]
    files = {}
    for split, part in (("train", slice(0, 1100)), ("dev", slice(1100, 1200))):
        files[f"{split}_src"] = _write(root / f"{split}.src", sources[part])
        files[f"{split}_tgt"] = _write(root / f"{split}.tgt", targets[part])
    data_dir, output_dir = str(root / "data"), str(root / "run")
    problem = get_problem("text2text")
    problem.generate_data(data_dir, vocab_size=60, **files)
    hparams = get_hparams(
        "transformer_tiny",
        "num_encoder_layers=2,num_decoder_layers=2,d_model=32,d_ff=64,num_heads=4,"
        f"max_positions={ReverseWords.max_positions},batch_size=1024,learning_rate=0.5,"
        "warmup_steps=50",
    )
    config = TrainConfig(output_dir, data_dir, train_steps=250, eval_every=250, save_every=250)
    train(problem, config, hparams, "transformer_tiny")
    return ReverseWords(output_dir, root)
