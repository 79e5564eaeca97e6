"""The `Problem` base class and the problem registry (`--usr_dir` is in `usr_dir.py`).

A problem is data: where its text comes from and how it is split (`text_pairs`), which
vocabulary it trains (type and size), its metric and its decode defaults. `generate_data` turns
it into a vocabulary, TFRecord shards and `metadata.json` in a data directory; `make_dataset`
reads them back as length-bucketed batches; `tokenizer` loads the same vocabulary for decoding
and export.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from absl import logging

from t2t_lite import data  # its tokenizers load TensorFlow when first used
from t2t_lite.data import word_dropout
from t2t_lite.extras import lazy_import
from t2t_lite.hparams import HParams, SearchSettings
from t2t_lite.hparams.hparams_base import parse_bool
from t2t_lite.problems import inputs
from t2t_lite.runtime import atomic_io

tf = lazy_import("tensorflow")

if TYPE_CHECKING:
    from t2t_lite.data.tokenizers import Tokenizer

METADATA = "metadata.json"
STATE = "datagen.json"  # written first: which problem and options this data_dir is for
METRICS = ("bleu", "accuracy", "parse_f1")
VOCAB_TYPES = ("bpe", "wordpiece", "words")
# How datagen runs, not what it writes: every problem takes it (`t2t-datagen --num_processes`),
# and it is not recorded, so a rerun may resume with another count.
NUM_PROCESSES_HELP = (
    "Processes that tokenize and write the shards, 1 or more; default: every core for problems "
    "of 50,000 or more pairs a shard (text2text, wmt14_*), else 1. Output does not depend on it."
)
# Starting a worker process (it imports TensorFlow) costs about what encoding 50,000 pairs
# does; problems with smaller shards (algorithmic, lohelp) write them in one process by default.
PARALLEL_MIN_SHARD_PAIRS = 50_000


class Problem:
    """Base class. Subclasses set the class attributes and implement `text_pairs`.

    `options` are what `t2t-datagen` passes on from its flags (`raw_dir`, `train_src`, ...); a
    subclass lists the ones it accepts, with their defaults, in `default_options`.
    """

    name: ClassVar[str] = ""
    vocab_type: ClassVar[str] = "bpe"
    vocab_size: ClassVar[int] = 8000
    metric: ClassVar[str] = "bleu"
    decode_defaults: ClassVar[SearchSettings] = SearchSettings()
    # The search tuning of a budget run (t2t_lite/train/search_tuning.py): the length penalties it
    # tries at decode_defaults' beam, then the beams it tries besides that one at the best.
    # Between 1.0 and 1.4 a short budget's outputs reach the reference's length (20-minute
    # models: en-de at 1.2, en-fr at 1.4) and past it run long, so the grid is finer there
    # (docs/training.md, "The length penalty between 1.0 and 1.4").
    tune_alphas: ClassVar[tuple[float, ...]] = (0.6, 1.0, 1.2, 1.4)
    tune_beams: ClassVar[tuple[int, ...]] = (8,)
    # The hparams sets a --train_minutes run without --hparams_set chooses from, narrowest
    # first (t2t_lite/train/model_choice.py).
    budget_ladder: ClassVar[tuple[str, ...]] = (
        "transformer_budget_xs",
        "transformer_budget_s",
        "transformer_budget_m",
    )
    has_inputs: ClassVar[bool] = True
    # Longest inputs / targets (tokens, EOS included) the problem is meant for; hparams.max_length
    # is what the pipeline enforces.
    max_input_length: ClassVar[int] = 256
    max_target_length: ClassVar[int] = 256
    examples_per_shard: ClassVar[int] = 100_000
    default_options: ClassVar[dict[str, Any]] = {}
    # What each option means, one line of `t2t-datagen --help`; a subclass lists only the
    # options its bases do not describe. An option without a line is described by its default.
    option_help: ClassVar[dict[str, str]] = {}
    # The options that name input files or folders, {option: "path" | "glob"}; None: by their
    # names (`*_src`, `*_dir`, `*_trees`, ...; t2t_lite.problems.inputs). Datagen records their
    # sizes and SHA-256 and refuses to finish or reuse a data_dir whose inputs changed.
    input_options: ClassVar[dict[str, str] | None] = None

    def __init__(self) -> None:
        # What `prepare` may report about the raw data (e.g. pairs aligned, filtered); it goes
        # into metadata.json.
        self.raw_counts: dict[str, int] = {}

    # --- what subclasses provide -------------------------------------------------------------

    def splits(self, options: dict[str, Any]) -> tuple[str, ...]:
        """The splits datagen writes."""
        return ("train", "dev", "test")

    def prepare(self, data_dir: str, options: dict[str, Any]) -> None:
        """Fetches and validates raw data before anything is written (override as needed)."""

    def text_pairs(self, split: str, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        """Yields (source text, target text) of a split, deterministically."""
        raise NotImplementedError

    def vocab_texts(self, options: dict[str, Any]) -> Iterator[str]:
        """Texts the vocabulary is trained on: both sides of train (a shared vocabulary)."""
        for source, target in self.text_pairs("train", options):
            yield source
            yield target

    def vocab_settings(self, options: dict[str, Any]) -> tuple[str, int]:
        """(vocabulary type, size); the class attributes unless options choose them."""
        return self.vocab_type, self.vocab_size

    def output_vocab_size(self, tokenizer: Tokenizer, options: dict[str, Any]) -> int:
        """How many leading ids the model may output (softmax and search are restricted to
        them), or 0 for the whole vocabulary. A problem whose targets use only a few symbols
        that its vocabulary lists first (parsing) returns their count."""
        return 0

    def output_size(self, data_dir: str) -> int:
        """`output_vocab_size` as datagen recorded it in data_dir (0 for data written before
        the field existed): what t2t-train builds the model with."""
        return int(read_metadata(data_dir)["vocab"].get("output_size", 0))

    def vocab_words(self, options: dict[str, Any]) -> list[str] | None:
        """For vocab_type "words": a fixed word list, or None to count words of `vocab_texts`."""
        return None

    def decode_constraint(self, data_dir: str, tokenizer: Any) -> Any:
        """A `t2t_lite.search.constraint.Constraint` on what decoding may emit, or None (none
        here; the parsing problems allow only well-formed trees over the sentence's words)."""
        return None

    def postprocess(self, source: str, output: str) -> str:
        """What `t2t-decode` writes for the decoded `output` of the input line `source`
        (identity here; the parsing problems repair the linearized tree into a tree)."""
        return output

    def has_postprocess(self) -> bool:
        """Whether `postprocess` changes anything (a subclass overrides it)."""
        return type(self).postprocess is not Problem.postprocess

    def graph_postprocess(self, sources: tf.Tensor, outputs: tf.Tensor) -> tf.Tensor:
        """`postprocess` in TensorFlow ops, for exported SavedModels: sources string [batch]
        (stripped input lines) and outputs string [batch, n] --> string [batch, n]. A problem
        that overrides `postprocess` overrides this too, or says why not in `export_refusal`."""
        return outputs

    def export_refusal(self, settings: SearchSettings) -> str | None:
        """Why decoding with `settings` cannot be put in a SavedModel, or None if it can. An
        export must return what t2t-decode writes, so a Python-only `postprocess` refuses."""
        if self.has_postprocess() and type(self).graph_postprocess is Problem.graph_postprocess:
            return "its postprocess runs in Python only (no graph_postprocess)"
        return None

    # --- the interface used by datagen, training, decoding and export ------------------------

    def resolve_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """Checks option names, fills defaults and converts flag strings to the default's type."""
        unknown = sorted(set(options) - set(self.default_options))
        if unknown:
            raise ValueError(
                f"problem {self.name} does not take option(s) {unknown}; "
                f"it takes {sorted(self.default_options) or 'none'}"
            )
        resolved = dict(self.default_options)
        for key, value in options.items():
            default = self.default_options[key]
            if isinstance(value, str) and default is not None and not isinstance(default, str):
                try:
                    value = _parse_option(value, type(default))
                except ValueError:
                    raise ValueError(
                        f"problem {self.name} option {key} expects {type(default).__name__}, "
                        f"got {value!r}"
                    ) from None
            resolved[key] = value
        return resolved

    def generate_data(self, data_dir: str, **options: Any) -> dict:
        """Writes the vocabulary, TFRecord shards and metadata.json into `data_dir`.

        Idempotent: a finished data_dir is left alone, an interrupted one is completed (the
        vocabulary and finished shards are kept), and a damaged shard (truncated, altered or
        missing) is written again. `num_processes` (an option of every problem)
        chooses how many processes write the shards (`datagen_processes`). Returns the metadata.
        """
        processes = datagen_processes(options.pop("num_processes", None), self.examples_per_shard)
        options = self.resolve_options(options)
        state = {"problem": self.name, "options": _jsonable(options)}
        os.makedirs(data_dir, exist_ok=True)
        self._check_state(data_dir, state, options)
        metadata_path = os.path.join(data_dir, METADATA)
        if os.path.isfile(metadata_path) and not self._damaged_shards(data_dir):
            logging.info("%s is complete (%s exists); nothing to do", data_dir, METADATA)
            return read_metadata(data_dir)
        atomic_io.remove_stale_temporaries(data_dir)
        self.prepare(data_dir, options)
        state["inputs"] = inputs.fingerprint(options, self.input_options)  # once they are there
        atomic_io.write_json(os.path.join(data_dir, STATE), state)
        tokenizer = self._vocabulary(data_dir, options)
        metadata = {
            **state,
            "vocab": {
                **_vocab_entry(tokenizer, self.vocab_settings(options)[0]),
                "output_size": self.output_vocab_size(tokenizer, options),
            },
            "metric": self.metric,
            "max_lengths": {"inputs": self.max_input_length, "targets": self.max_target_length},
            "decode_defaults": self.decode_defaults.to_dict(),
            "raw_counts": dict(self.raw_counts),
            "splits": {},
        }
        for split in self.splits(options):
            logging.info("%s: writing split %s", self.name, split)
            metadata["splits"][split] = data.shards.write_split(
                data_dir,
                split,
                self.text_pairs(split, options),
                tokenizer,
                self.examples_per_shard,
                vocab_sha256=metadata["vocab"]["sha256"],
                num_processes=processes,
                total_pairs=self.split_size(split, options),
            )
            if not metadata["splits"][split]["examples"]:
                raise ValueError(f"problem {self.name}: split {split} has no examples")
        atomic_io.write_json(metadata_path, metadata)
        return metadata

    def split_size(self, split: str, options: dict[str, Any]) -> int | None:
        """How many pairs `text_pairs(split)` yields, if that is cheap to know (datagen's
        progress shows an ETA then), else None. Here: the lines of the file that the option
        `<split>_src` names, when the problem has one (text2text)."""
        path = options.get(f"{split}_src")
        if not (isinstance(path, str) and path and os.path.isfile(path)):
            return None
        return _count_newlines(path)

    def check_data_dir(self, data_dir: str, wanted_by: str = "--problem") -> None:
        """Refuses a data_dir that datagen made for another problem (its metadata.json names
        it); a folder without metadata.json (a bare vocabulary) is not checked."""
        path = os.path.join(data_dir, METADATA)
        if not os.path.isfile(path):
            return
        made_for = read_metadata(data_dir).get("problem")
        if made_for and made_for != self.name:
            raise ValueError(f"{wanted_by} is {self.name}, but {path} holds data for {made_for}")

    def train_tokens(self, data_dir: str) -> int:
        """Target tokens of the train split (metadata.json), to count passes over it."""
        split = read_metadata(data_dir).get("splits", {}).get("train", {})
        tokens = split.get("target_lengths", {}).get("tokens")
        if tokens is None:
            raise ValueError(
                f"{os.path.join(data_dir, METADATA)} has no splits.train.target_lengths.tokens; "
                "rerun t2t-datagen into a new --data_dir"
            )
        return int(tokens)

    def tokenizer(self, data_dir: str) -> Tokenizer:
        """The in-graph tokenizer of the vocabulary datagen wrote into `data_dir`."""
        return data.load_tokenizer(data_dir)

    def make_dataset(
        self, data_dir: str, split: str, hparams: HParams, **options: Any
    ) -> tf.data.Dataset:
        """Batches {"inputs": int32 [b, s], "targets": int32 [b, t]} of a finished split.

        `options` are those of `t2t_lite.data.pipeline.make_dataset_from_files` (shuffle, repeat,
        seed, input_context), which batches and shards; the train split's source words go
        through `hparams.word_dropout` (`t2t_lite.data.word_dropout`).
        """
        files = self.split_files(data_dir, split)
        if split == "train" and hparams.word_dropout:  # the training stream only
            options["transform"] = word_dropout.training_transform(
                self.tokenizer(data_dir), files, hparams.word_dropout, options.get("seed", 0)
            )
        return data.pipeline.make_dataset_from_files(files, hparams, **options)

    def check_hparams(self, data_dir: str, hparams: HParams) -> None:
        """ValueError for hparams that this problem's data cannot train with: word dropout
        without a words vocabulary with signatures to read the dropped words as."""
        if hparams.word_dropout:
            word_dropout.check_tokenizer(self.tokenizer(data_dir), hparams.word_dropout)

    def split_files(self, data_dir: str, split: str) -> list[str]:
        """The shard paths of a split, as metadata.json lists them (only finished data)."""
        splits = read_metadata(data_dir)["splits"]
        if split not in splits:
            raise ValueError(f"{data_dir} has no split {split!r}; it has {sorted(splits)}")
        return [os.path.join(data_dir, name) for name in splits[split]["shards"]]

    # --- internals ----------------------------------------------------------------------------

    def _damaged_shards(self, data_dir: str) -> list[str]:
        """The shards metadata.json lists that are not as datagen wrote them, each named in a
        warning: a rerun writes them again (`t2t_lite.data.shard_check`)."""
        damaged = []
        for split in read_metadata(data_dir)["splits"]:
            for shard in self.split_files(data_dir, split):
                if not os.path.isfile(shard):
                    reason = "missing"
                elif not (reason := data.shard_check.damage(shard)):
                    continue
                logging.warning("%s is damaged (%s): writing it again", shard, reason)
                damaged.append(shard)
        return damaged

    def _check_state(self, data_dir: str, state: dict, options: dict[str, Any]) -> None:
        """Refuses a data_dir written for another problem, other options or other input files."""
        path = os.path.join(data_dir, STATE)
        if os.path.isfile(path):
            with open(path) as f:
                previous = json.load(f)
            if {key: previous.get(key) for key in state} != state:
                raise ValueError(
                    f"{data_dir} holds data of {previous['problem']} with options "
                    f"{previous['options']}, not {state['problem']} with {state['options']}; "
                    "use another --data_dir"
                )
            if "inputs" in previous:  # (not recorded before 2026-11)
                current = inputs.fingerprint(options, self.input_options)
                inputs.check_unchanged(data_dir, previous["inputs"], current)

    def _vocabulary(self, data_dir: str, options: dict[str, Any]) -> Tokenizer:
        vocab_type, vocab_size = self.vocab_settings(options)
        if vocab_type not in VOCAB_TYPES:
            raise ValueError(f"problem {self.name}: vocab_type {vocab_type!r} not in {VOCAB_TYPES}")
        if os.path.isfile(data.vocab_path(data_dir, vocab_type)):
            logging.info("%s: vocabulary exists, reusing it", self.name)
        elif options.get("vocab_model"):
            if vocab_type != "bpe":
                raise ValueError("vocab_model is a SentencePiece model: needs vocab_type=bpe")
            logging.info("%s: the vocabulary is %s", self.name, options["vocab_model"])
            data.adopt_sentencepiece(os.path.expanduser(options["vocab_model"]), data_dir)
        else:
            words = self.vocab_words(options)
            if words is not None:  # a fixed list, which sized itself
                vocab_size = len(data.RESERVED_TOKENS) + len(words)
            elif not vocab_size:
                pairs = sum(1 for _ in self.text_pairs("train", options))
                vocab_size = data.auto_vocab_size(pairs)
                logging.info("%s: %d training pairs: vocab_size %d", self.name, pairs, vocab_size)
            logging.info("%s: training a %s vocabulary of %d", self.name, vocab_type, vocab_size)
            texts = _logged(self.vocab_texts(options), "vocabulary: %d texts read")
            data.build_vocab(data_dir, vocab_type, texts, vocab_size, words=words)
        return self.tokenizer(data_dir)


def datagen_processes(value: Any, examples_per_shard: int) -> int:
    """The `num_processes` option (None, a count, or a flag's text) --> how many processes
    write shards: the count given, else every core (`os.cpu_count()`) for problems of
    PARALLEL_MIN_SHARD_PAIRS or more pairs a shard, else 1. Anything but a count of 1 or more
    is an error."""
    if value is None:
        return (os.cpu_count() or 1) if examples_per_shard >= PARALLEL_MIN_SHARD_PAIRS else 1
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdecimal() or int(text) < 1:
        raise ValueError(
            f"num_processes must be a whole number of processes, 1 or more, got {value!r}; "
            f"leave it out to use every core ({os.cpu_count()} here)"
        )
    return int(text)


def _count_newlines(path: str) -> int:
    """Lines of a file, a last line without its newline included (read in 1 MiB blocks: about
    a second a gigabyte, no decoding)."""
    lines, last = 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            lines, last = lines + block.count(b"\n"), block[-1:]
    return lines + (last != b"\n")


def _parse_option(text: str, kind: type) -> Any:
    return parse_bool(text) if kind is bool else kind(text)


def _logged(texts: Iterator[str], message: str, every: int = 500_000) -> Iterator[str]:
    """Passes texts through, logging a count now and then (vocabulary training is silent)."""
    count = 0
    for count, text in enumerate(texts, start=1):
        if count % every == 0:
            logging.info(message, count)
        yield text
    logging.info(message, count)


def _jsonable(options: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(options, default=str))


def _vocab_entry(tokenizer: Tokenizer, vocab_type: str) -> dict:
    with open(tokenizer.path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return {
        "type": vocab_type,
        "file": os.path.basename(tokenizer.path),
        "size": tokenizer.vocab_size,
        "sha256": digest,
    }


def read_metadata(data_dir: str) -> dict:
    """metadata.json of a finished data_dir; a clear error if datagen has not finished there."""
    path = os.path.join(data_dir, METADATA)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path} not found: datagen has not finished in {data_dir}; "
            "run t2t-datagen --problem=... --data_dir=... (rerunning completes an interrupted run)"
        )
    try:
        with open(path, encoding="utf-8") as f:
            metadata = json.load(f)
        for split, entry in metadata["splits"].items():
            for name in entry["shards"]:
                _check_shard_name(name, f"splits.{split}.shards")
    except (ValueError, KeyError, TypeError, AttributeError) as error:  # a damaged or crafted file
        reason = f"no field {error}" if isinstance(error, KeyError) else str(error)
        raise ValueError(
            f"{path}: not a metadata.json of t2t-datagen ({reason}); rerun t2t-datagen into a "
            "new --data_dir"
        ) from None
    return metadata


def datagen_options(data_dir: str) -> dict:
    """The problem options t2t-datagen wrote `data_dir` with (its datagen.json), {} when the
    folder has none (a bare vocabulary, a problem's own in-memory data)."""
    try:
        with open(os.path.join(data_dir, STATE), encoding="utf-8") as f:
            options = json.load(f).get("options", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return options if isinstance(options, dict) else {}


def _check_shard_name(name: Any, field: str) -> None:
    """A shard is a file name inside the data_dir: no folder, no '..', no absolute path (a
    data_dir from elsewhere is input; its metadata must not point training outside it)."""
    if (
        not isinstance(name, str)
        or not name
        or name != os.path.basename(name)
        or name
        in (
            ".",
            "..",
        )
    ):
        raise ValueError(f"{field}: {name!r} is not a file name inside the data_dir")
