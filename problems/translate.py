"""Translation problems: WMT14 through tensorflow-datasets (or local files), and the user's files.

WMT14 follows the paper: en-de is Europarl v7 + Common Crawl + News Commentary v9 (about 4.5M
pairs) with a shared BPE vocabulary of about 37000; en-fr (about 36M pairs) uses 32000 WordPiece.
Dev is newstest2013 and test newstest2014, as tfds's `wmt14_translate` splits them.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any, ClassVar

from t2t_lite.data import check_parallel, read_parallel
from t2t_lite.extras import import_extra
from t2t_lite.problems.base import Problem
from t2t_lite.problems.registry import register_problem

# The vocabulary is trained on at most this many pairs, taken evenly across the training data.
VOCAB_PAIRS = 1_000_000
_TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def _evenly(pairs: Iterator[tuple[str, str]], total: int, limit: int) -> Iterator[str]:
    """Both sides of every k-th pair, k chosen so that about `limit` pairs are used."""
    for source, target in itertools.islice(pairs, 0, None, max(1, total // limit)):
        yield source
        yield target


class Wmt14Problem(Problem):
    """WMT14 from tfds `wmt14_translate/<config>`, or `<raw_dir>/{train,dev,test}.{src,tgt}`."""

    tfds_config: ClassVar[str] = ""
    source_language: ClassVar[str] = "en"
    target_language: ClassVar[str] = ""
    max_input_length: ClassVar[int] = 256
    max_target_length: ClassVar[int] = 256
    default_options: ClassVar[dict[str, Any]] = {"raw_dir": "", "tfds_dir": ""}
    option_help: ClassVar[dict[str, str]] = {
        "raw_dir": "Folder of local files {train,dev,test}.{en,de|fr} read instead of tfds.",
        "tfds_dir": "tensorflow-datasets data_dir for the WMT14 builders.",
    }
    # tfds_dir is tensorflow-datasets' own store (versioned by tfds, and shared with other
    # datasets), not an input datagen fingerprints.
    input_options: ClassVar[dict[str, str] | None] = {"raw_dir": "path"}

    def _raw_files(self, raw_dir: str, split: str) -> tuple[str, str]:
        return tuple(  # type: ignore[return-value]
            os.path.join(raw_dir, f"{split}.{lang}")
            for lang in (self.source_language, self.target_language)
        )

    def prepare(self, data_dir: str, options: dict[str, Any]) -> None:
        if options["raw_dir"]:
            if not os.path.isdir(options["raw_dir"]):
                raise FileNotFoundError(f"--raw_dir {options['raw_dir']} is not a folder")
            for split in self.splits(options):
                source, target = self._raw_files(options["raw_dir"], split)
                stats = check_parallel(
                    source, target, f"--raw_dir {split} source", f"--raw_dir {split} target"
                )
                if split == "train":
                    self._train_pairs = stats.kept
        else:
            builder = self._tfds_builder(options)
            try:
                builder.download_and_prepare()
            except Exception as e:  # tfds raises many kinds; all mean "no data this way"
                # An OSError: the commands report it as one line, with what to do instead.
                cause = (str(e).splitlines() or [""])[0][:200]
                raise OSError(
                    f"tensorflow-datasets could not download {builder.name}/"
                    f"{self.tfds_config} ({type(e).__name__}: {cause}); offline, pass "
                    f"--raw_dir=DIR with {{train,dev,test}}.{{{self.source_language},"
                    f"{self.target_language}}} files"
                ) from e
            # Known once prepared; mocked builders (tests) report no splits.
            splits = builder.info.splits
            self._train_pairs = splits["train"].num_examples if "train" in splits else None

    def _tfds(self):
        """tensorflow-datasets, which only this path needs (the `wmt` extra)."""
        return import_extra(
            "tensorflow_datasets",
            "tensorflow-datasets",
            "wmt",
            f"problem {self.name} without --raw_dir",
        )

    def _tfds_builder(self, options: dict[str, Any]):
        """One builder per tfds_dir, made once: tensorflow-datasets makes a temporary folder
        for each builder made before its data is prepared, and leaves it behind."""
        builders = self.__dict__.setdefault("_builders", {})
        data_dir = options["tfds_dir"] or None
        if data_dir not in builders:
            builders[data_dir] = self._tfds().builder(
                f"wmt14_translate/{self.tfds_config}", data_dir=data_dir
            )
        return builders[data_dir]

    def text_pairs(self, split: str, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        if options["raw_dir"]:
            source, target = self._raw_files(options["raw_dir"], split)
            for _, src, tgt in read_parallel(source, target, skip_empty=False):
                yield src, tgt
            return
        dataset = self._tfds_builder(options).as_dataset(
            split=_TFDS_SPLITS[split], shuffle_files=False
        )
        for example in self._tfds().as_numpy(dataset):
            yield (
                example[self.source_language].decode("utf-8").strip(),
                example[self.target_language].decode("utf-8").strip(),
            )

    def vocab_texts(self, options: dict[str, Any]) -> Iterator[str]:
        total = getattr(self, "_train_pairs", None) or VOCAB_PAIRS
        return _evenly(self.text_pairs("train", options), total, VOCAB_PAIRS)


@register_problem("wmt14_ende")
class Wmt14EnDe(Wmt14Problem):
    """English --> German, shared BPE vocabulary of 37000 (the paper's base and big models)."""

    tfds_config = "de-en"
    target_language = "de"
    vocab_type = "bpe"
    vocab_size = 37000


@register_problem("wmt14_enfr")
class Wmt14EnFr(Wmt14Problem):
    """English --> French, 32000 WordPiece vocabulary."""

    tfds_config = "fr-en"
    target_language = "fr"
    vocab_type = "wordpiece"
    vocab_size = 32000
    examples_per_shard = 500_000


@register_problem("text2text")
class Text2Text(Problem):
    """The user's own parallel files, one sentence per line (`t2t_lite.data.read_lines`).

    --train_src/--train_tgt and --dev_src/--dev_tgt are required, --test_src/--test_tgt optional.
    Every file is checked (encoding, line endings, equal line counts) before anything is written.
    """

    default_options: ClassVar[dict[str, Any]] = {
        **{f"{split}_{side}": "" for split in ("train", "dev", "test") for side in ("src", "tgt")},
        "vocab_type": "bpe",
        "vocab_size": 0,
        "vocab_model": "",
    }
    option_help: ClassVar[dict[str, str]] = {
        **{
            f"{split}_{side}": f"The {split} {kind} file, one sentence a line."
            for split in ("train", "dev", "test")
            for side, kind in (("src", "source"), ("tgt", "target"))
        },
        "vocab_type": "Vocabulary type: bpe, wordpiece or words.",
        "vocab_model": "An existing SentencePiece model (e.g. a parent run's data_dir/"
        "vocab.bpe.model) used as the vocabulary instead of training one; for fine-tuning.",
        "vocab_size": "Vocabulary size, reserved ids included; 0: sized from the training pairs "
        "(t2t_lite.data.vocab_builders.auto_vocab_size).",
    }

    def splits(self, options: dict[str, Any]) -> tuple[str, ...]:
        return (
            ("train", "dev", "test")
            if options["test_src"] or options["test_tgt"]
            else ("train", "dev")
        )

    def vocab_settings(self, options: dict[str, Any]) -> tuple[str, int]:
        return options["vocab_type"], options["vocab_size"]

    def prepare(self, data_dir: str, options: dict[str, Any]) -> None:
        for split in self.splits(options):
            flags = [f"--{split}_{side}" for side in ("src", "tgt")]
            files = [options[flag[2:]] for flag in flags]
            for flag, path in zip(flags, files, strict=True):
                if not path:
                    raise ValueError(f"problem text2text needs {flag}")
            check_parallel(files[0], files[1], flags[0], flags[1])

    def text_pairs(self, split: str, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        flags = [f"--{split}_{side}" for side in ("src", "tgt")]
        source, target = (options[flag[2:]] for flag in flags)
        for _, src, tgt in read_parallel(source, target, None, *flags, skip_empty=False):
            yield src, tgt
