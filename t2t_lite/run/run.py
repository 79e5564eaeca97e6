"""The one way to restore a training run: `Run.restore(output_dir)`.

`t2t-decode`, `t2t-export`, `t2t-visualize` and the Python API all come through here, so they
restore the same weights, read the same vocabulary and search with the same settings: the
problem's `decode_defaults` with the caller's values on top, checked once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf
from absl import logging

from t2t_lite.data import Tokenizer
from t2t_lite.data.shortlist import Shortlist, load_or_build
from t2t_lite.hparams import HParams, SearchSettings
from t2t_lite.model import Transformer, ensemble, footprint, lora
from t2t_lite.model.layers import int8_product
from t2t_lite.model.quantize import quantize_model, quantized_layers
from t2t_lite.problems import Problem, get_problem
from t2t_lite.run import adapter
from t2t_lite.run.checkpoints import restore_checkpoint
from t2t_lite.run.layout import ADAPTER_FILE, RUN_INFO_FILE, SEARCH_FILE
from t2t_lite.run.run_info import RunInfo
from t2t_lite.runtime.atomic_io import file_sha256
from t2t_lite.runtime.precision import AUTO, decoding_precision


def build_model(info: RunInfo) -> Transformer:
    """A built (weights created) Transformer for the run, in the precision its hparams say."""
    model = Transformer.from_hparams(
        info.hparams, info.vocab_size, output_vocab_size=info.output_vocab_size
    )
    model.build()
    return model


def decoding_info(info: RunInfo) -> RunInfo:
    """`info` with the precision this machine decodes the run in (`decoding_precision`: a mixed
    bfloat16 run computes in float32 where there is no bfloat16 arithmetic; the weights, float32
    either way, are the same), logged when that is not the run's own."""
    recorded = info.hparams.precision
    precision = decoding_precision(recorded)
    if recorded in (precision, AUTO):  # "auto" (older runs): the model resolves it as training did
        return info
    logging.info(
        "decoding in %s: the run computed in %s, which this machine has no arithmetic for",
        precision,
        recorded,
    )
    return dataclasses.replace(info, hparams=info.hparams.replace(precision=precision))


def load_run(output_dir: str) -> tuple[RunInfo, adapter.AdapterRecord | None]:
    """The run's hparams.json and, for an adapter run, its adapter.json (None otherwise), each
    checked field by field; a ModelTooLargeError when the model they describe would not fit in
    the memory this process may take (`footprint.check_fits`), before anything is built."""
    info = RunInfo.load(output_dir)
    record = None
    if adapter.is_adapter_run(output_dir):  # base + LoRA adapter (t2t_lite.run.adapter)
        record = adapter.AdapterRecord.load(output_dir, info.hparams.d_model)
    source = os.path.join(output_dir, RUN_INFO_FILE)
    if record is not None:
        source += f" with {ADAPTER_FILE}"
    rank = record.rank if record is not None else 0
    footprint.check_fits(info.hparams, info.vocab_size, source, adapter_rank=rank)
    return info, record


def restore_model(
    output_dir: str, checkpoint: str | None = None
) -> tuple[Transformer, RunInfo, str]:
    """(model, run info, checkpoint path) with the weights of `checkpoint` (default: the newest
    readable of output_dir/final, averaged and checkpoints, unreadable newer ones skipped
    with a warning naming the file); the model part of `Run.restore`. A CheckpointError names
    the file when nothing is readable, or when a given `checkpoint` is unreadable."""
    info, record = load_run(output_dir)
    model = build_model(decoding_info(info))
    if record is not None:
        return model, info, adapter.restore_adapted(model, record, output_dir, checkpoint)
    path = restore_checkpoint(tf.train.Checkpoint(model=model), output_dir, checkpoint)
    return model, info, path


def restore_models(
    output_dir: str,
    checkpoint: str | None = None,
    data_dir: str | None = None,
    weights: Sequence[float] | None = None,
) -> tuple[Transformer | ensemble.Ensemble, RunInfo, str]:
    """`restore_model`, or for several comma-separated checkpoints (`--checkpoint=A,B`) an
    `Ensemble` of them (`weights`: --ensemble_weights): (model, the first member's run info,
    the checkpoint paths joined by commas). Members of other runs must share the vocabulary;
    `data_dir` stands in for a member run's own when that is gone."""
    entries = split_checkpoints(checkpoint)
    if len(entries) <= 1:
        if weights and len(weights) != 1:
            raise ValueError(f"--ensemble_weights has {len(weights)} values for 1 checkpoint")
        if entries:
            return restore_model(*member_location(output_dir, entries[0]))
        return restore_model(output_dir)
    restored, vocabularies = [], []
    for entry in entries:
        run_dir, path = member_location(output_dir, entry)
        model, info, path = restore_model(run_dir, path)
        own = info.data_dir if os.path.isdir(info.data_dir) else data_dir or info.data_dir
        vocabulary = get_problem(info.problem).tokenizer(own).path
        info.check_vocabulary(vocabulary, run_dir)
        vocabularies.append((run_dir, info, vocabulary))
        restored.append((model, info, path))
    check_same_vocabulary(vocabularies)
    models = ensemble.Ensemble([model for model, _, _ in restored], weights)
    return models, restored[0][1], ",".join(path for _, _, path in restored)


def _problem_of(info: RunInfo, output_dir: str) -> Problem:
    """The run's registered problem; a KeyError naming the run's recorded --usr_dir when the
    problem is one of the user's and that code has not been imported."""
    try:
        return get_problem(info.problem)
    except KeyError:
        if not info.usr_dir:
            raise
        raise KeyError(
            f"problem {info.problem!r} of the run in {output_dir} was registered by "
            f"--usr_dir={info.usr_dir}; pass that --usr_dir (it runs the code it names)"
        ) from None


@dataclasses.dataclass(frozen=True)
class Run:
    """A restored training run: its model, problem, vocabulary and search settings.

    `search` is resolved: the problem's `decode_defaults` with the given values on top, checked
    against the model's positions. `constraint` holds the problem's decoding constraint when
    `search.constrained`.
    """

    output_dir: str
    info: RunInfo
    checkpoint: str
    model: Transformer | ensemble.Ensemble  # an Ensemble for several checkpoints
    problem: Problem
    data_dir: str
    tokenizer: Tokenizer
    search: SearchSettings
    quantize: str = "none"  # "int8": the weights were quantized after restoring
    # Set when the model's variables were made in its scope; searches then split each batch
    # across its replicas (t2t_lite.decode.replicas).
    strategy: tf.distribute.Strategy | None = None

    @property
    def hparams(self) -> HParams:
        return self.info.hparams

    @classmethod
    def restore(
        cls,
        output_dir: str,
        checkpoint: str | None = None,
        data_dir: str | None = None,
        search: Mapping[str, Any] | None = None,
        ensemble_weights: Sequence[float | str] | None = None,
        quantize: str | None = None,
        strategy: tf.distribute.Strategy | None = None,
        merge_lora: bool = False,
    ) -> Run:
        """Restores `output_dir` (written by t2t-train).

        Args:
          checkpoint: a checkpoint path or folder (its newest); default the newest readable of
            final/, averaged/ and checkpoints/ (damaged newer ones are skipped with a warning).
            Several, comma-separated (checkpoint paths or folders, or run folders for their
            newest), restore an `Ensemble` (t2t_lite.model.ensemble) as
            the model; `checkpoint` is then the paths joined by commas.
          data_dir: the folder with the vocabulary; default the one the run trained on.
          search: search settings to use instead of the run's (None values are ignored, so
            absl flags can be passed as they are): the problem's defaults, with the beam size
            and alpha the run tuned on dev (output_dir/search.json) when it did.
          ensemble_weights: one weight per checkpoint of an ensemble; default equal.
          quantize: "int8" quantizes the restored weights (t2t_lite.model.quantize);
            None or "none" keeps them as the checkpoint has them.
          strategy: a tf.distribute strategy whose replicas decode
            (`t2t_lite.runtime.distribute.decode_strategy`); the model is made in its scope.
            None: one device.
          merge_lora: for an adapter run (t2t_lite.run.adapter), fold the adapter into the
            base weights (`lora.merge`); int8 merges too. Otherwise the model computes
            base + adapter.
        """
        quantize = quantize or "none"
        with strategy.scope() if strategy is not None else contextlib.nullcontext():
            weights = ensemble.parse_weights(ensemble_weights)
            model, info, path = restore_models(output_dir, checkpoint, data_dir, weights)
            # int8 quantizes kernels, which an unmerged adapter adds to: merge first.
            if lora.is_adapted(model) and (merge_lora or quantize != "none"):
                lora.merge(model)
                logging.info("merged the LoRA adapter of %s into its base weights", output_dir)
            quantize_model(model, quantize)
        logging.info("restored %s (problem %s, hparams %s)", path, info.problem, info.hparams_set)
        if quantize != "none":
            logging.info("%s: %s", quantize, int8_product.check().describe())
            for member in ensemble.members(model):
                layers = quantized_layers(member)
                fast = sum(int8_product.prepared(layer) for layer in layers)
                logging.info(
                    "%s: %d layers quantized, %d of them with 8-bit products (oneDNN)",
                    quantize, len(layers), fast,
                )  # fmt: skip
        problem = _problem_of(info, output_dir)
        data_dir = data_dir or info.data_dir
        problem.check_data_dir(data_dir, wanted_by=f"the problem of the run in {output_dir}")
        tokenizer = problem.tokenizer(data_dir)
        info.check_vocabulary(tokenizer.path, output_dir)
        if tokenizer.vocab_size != info.vocab_size:
            raise ValueError(
                f"the vocabulary in {data_dir} has {tokenizer.vocab_size} ids but the model in "
                f"{output_dir} was trained with {info.vocab_size}; pass the run's --data_dir"
            )
        tuned = tuned_search(output_dir)
        settings = problem.decode_defaults.override(**tuned).override(**dict(search or {}))
        settings.check(info.hparams.max_positions)
        run = cls(
            output_dir, info, path, model, problem, data_dir, tokenizer, settings, quantize,
            strategy,
        )  # fmt: skip
        if settings.constrained and run.constraint is None:
            raise ValueError(f"--constrained: problem {problem.name} has no decoding constraint")
        logging.info("search: %s", settings)
        return run

    @functools.cached_property
    def constraint(self) -> Any:
        """The problem's decoding constraint (a `t2t_lite.search.constraint.Constraint`), or None
        when the search is unconstrained."""
        if not self.search.constrained:
            return None
        return self.problem.decode_constraint(self.data_dir, self.tokenizer)

    @functools.cached_property
    def shortlist(self) -> Shortlist | None:
        """The vocabulary shortlist `search.shortlist` sizes (t2t_lite.data.shortlist), its
        table read from the data directory, or built there from the training split the first
        time; None when the search takes the whole vocabulary."""
        if not self.search.shortlisted:
            return None
        table = load_or_build(
            self.data_dir,
            self.problem.split_files(self.data_dir, "train"),
            self.tokenizer.path,
            self.info.vocab_size,
        )
        return table.sized(*self.search.shortlist)

    def describe(self) -> dict[str, Any]:
        """JSON-able facts: run, checkpoint, problem, hparams set, data_dir and settings."""
        return {
            "output_dir": self.output_dir,
            "checkpoint": self.checkpoint,
            "problem": self.problem.name,
            "hparams_set": self.info.hparams_set,
            "data_dir": self.data_dir,
            "vocab_size": self.info.vocab_size,
            "settings": self.search.to_dict(),
            "quantize": self.quantize,
        }


# --- the run folders of an ensemble's members -------------------------------------------------


def tuned_search(output_dir: str) -> dict[str, Any]:
    """The beam size and alpha a budget run tuned on dev at its end (output_dir/search.json,
    written by t2t_lite.train.search_tuning), or {}; a damaged file is passed over with a
    warning."""
    path = os.path.join(output_dir, SEARCH_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        tuned = {"beam_size": int(record["beam_size"]), "alpha": float(record["alpha"])}
    except (OSError, ValueError, KeyError, TypeError) as e:
        logging.warning("%s is damaged (%s): the problem's search settings are used", path, e)
        return {}
    logging.info("search settings tuned on dev (%s): %s", path, tuned)
    return tuned


def split_checkpoints(checkpoint: str | None) -> list[str]:
    """--checkpoint's comma-separated entries, blanks dropped ([] when unset)."""
    return [entry.strip() for entry in (checkpoint or "").split(",") if entry.strip()]


def member_location(output_dir: str, entry: str) -> tuple[str, str | None]:
    """(run folder, checkpoint) of one --checkpoint entry.

    A run folder (one holding hparams.json) stands for its newest checkpoint (None). A checkpoint
    folder or path belongs to the run folder above it (run/checkpoints, run/averaged/ckpt-N), or
    to `output_dir` when there is none above it.
    """
    if os.path.isfile(os.path.join(entry, RUN_INFO_FILE)):
        return entry, None
    folder = entry if os.path.isdir(entry) else os.path.dirname(entry)
    parent = os.path.dirname(os.path.abspath(folder))
    if os.path.isfile(os.path.join(parent, RUN_INFO_FILE)) and not _same_folder(parent, output_dir):
        return parent, entry
    return output_dir, entry


def _same_folder(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def check_same_vocabulary(members: Sequence[tuple[str, RunInfo, str]]) -> None:
    """Raises ValueError naming both runs when two members' vocabularies differ.

    `members` are (run folder, run info, vocabulary file) per member; the files are compared by
    SHA-256, the run infos by vocabulary size and output vocabulary size.
    """
    first_dir, first_info, first_file = members[0]
    first_digest = file_sha256(first_file)
    for run_dir, info, vocab_file in members[1:]:
        if (info.vocab_size, info.output_vocab_size) != (
            first_info.vocab_size,
            first_info.output_vocab_size,
        ):
            raise ValueError(
                f"--checkpoint: the runs {first_dir} and {run_dir} have different vocabularies "
                f"({first_info.vocab_size} and {info.vocab_size} ids); an ensemble needs one"
            )
        digest = file_sha256(vocab_file)
        if digest != first_digest:
            raise ValueError(
                f"--checkpoint: the runs {first_dir} and {run_dir} have different vocabularies "
                f"({first_file} sha256 {first_digest[:12]}, {vocab_file} sha256 {digest[:12]}); "
                "an ensemble needs one"
            )
    logging.info("ensemble of %d checkpoints, one vocabulary (%s)", len(members), first_file)
