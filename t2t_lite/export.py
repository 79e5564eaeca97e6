"""Export for TF Serving: a SavedModel that turns raw strings into translations in one graph.

The exported graph tokenizes with tensorflow-text, runs the batched cached beam search of
`t2t_lite.decoding` in a `tf.while_loop`, and detokenizes, so a client sends text and gets text
back. Three signatures:

  serving_default  inputs: string [batch]
                   --> outputs: string [batch], scores: float32 [batch], truncated: bool [batch]
  nbest            inputs: string [batch]
                   --> outputs: string [batch, n], scores: float32 [batch, n], truncated: bool [batch]
  translate_ids    input_ids: int32 [batch, length] (zero-padded, EOS optional)
                   --> output_ids: int32 [batch, out_length] (EOS included, zero-padded),
                       scores: float32 [batch], truncated: bool [batch]

`scores` is the beam-search ranking score: log p(output | input) / lp(|output|) with the GNMT
length penalty lp (the model's log-probability when alpha = 0). An input longer than
`max_input_length` tokens (EOS included) is cut to that length and flagged in `truncated`.
Invalid UTF-8 bytes in an input become U+FFFD before tokenization. An empty batch returns empty
outputs without running the search.

The SavedModel is written with `keras.export.ExportArchive`, which tracks every model variable
and the tokenizer's resources explicitly (a Keras 3 model inside a plain `tf.Module` would export
variables that non-Python loaders such as TF Serving cannot find). It is written to a hidden
temporary folder in `export_dir` and renamed to `export_dir/<version>` when complete, so TF
Serving, which watches `export_dir`, never sees half an export. Loading it in Python needs
`import tensorflow_text` first (it registers the tokenizer ops).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from typing import Any

import keras
import tensorflow as tf

from t2t_lite import decoding
from t2t_lite.layers.masks import EOS_ID, PAD_ID
from t2t_lite.text import Tokenizer, trim_ids

NBEST_SIGNATURE = "nbest"
IDS_SIGNATURE = "translate_ids"
EXPORT_INFO = "t2t_export.json"  # in the version folder's assets.extra/
_TMP_PREFIX = ".tmp-export-"


@dataclasses.dataclass(frozen=True)
class ServingSettings:
    """Search settings fixed into the exported graph.

    beam_size: live hypotheses per sentence; alpha: GNMT length-penalty exponent;
    extra_length: outputs are at most input length + extra_length tokens; max_input_length:
    longer inputs (tokens, EOS included) are truncated; nbest: hypotheses of the n-best signature.
    """

    beam_size: int = 4
    alpha: float = 0.6
    extra_length: int = 50
    max_input_length: int = 256
    nbest: int = 4

    def check(self, max_positions: int) -> None:
        """Raises ValueError naming the flag that is out of range."""
        if self.beam_size < 1:
            raise ValueError(f"--beam_size must be at least 1, got {self.beam_size}")
        if not 1 <= self.nbest <= self.beam_size:
            raise ValueError(f"--nbest must be in [1, --beam_size={self.beam_size}], got {self.nbest}")
        if self.alpha < 0:
            raise ValueError(f"--alpha must be >= 0, got {self.alpha}")
        if self.extra_length < 1:
            raise ValueError(f"--extra_length must be at least 1, got {self.extra_length}")
        # Positions past max_positions have no encoding: the graph would fail at serving time.
        if not 1 <= self.max_input_length <= max_positions:
            raise ValueError(
                f"--max_input_length must be in [1, {max_positions}] (the model's max_positions), "
                f"got {self.max_input_length}"
            )


def clean_utf8(strings: tf.Tensor) -> tf.Tensor:
    """[batch] tf.string --> [batch] valid UTF-8: each invalid byte sequence becomes U+FFFD."""
    return tf.strings.unicode_transcode(
        strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


def source_ids(tokens: tf.RaggedTensor, max_input_length: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Ragged ids without EOS [batch, (n)] --> model inputs [batch, length] int32 (truncated to
    `max_input_length - 1` tokens, then EOS, then zero padding) and truncated [batch] bool."""
    keep = max_input_length - 1
    truncated = tokens.row_lengths() > keep  # --> [batch]
    tokens = tf.cast(tokens[:, :keep], tf.int32)
    eos = tf.RaggedTensor.from_tensor(tf.fill([tokens.nrows(), 1], EOS_ID))
    ids = tf.concat([tokens, eos], axis=1).to_tensor(default_value=PAD_ID)  # --> [batch, length]
    return ids, truncated


class Translator:
    """The serving computations over a restored model and its tokenizer (usable eagerly too).

    Each public method takes a batch and returns the signature's output dict.
    """

    def __init__(self, model: keras.Model, tokenizer: Tokenizer, settings: ServingSettings):
        settings.check(model.hparams.max_positions)
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings

    def _search(self, ids: tf.Tensor, nbest: int) -> decoding.SearchResult:
        """[batch, length] source ids --> SearchResult with ids [batch, nbest, out_length]."""
        s = self.settings
        return decoding.translate_ids(
            self.model,
            ids,
            beam_size=s.beam_size,
            alpha=s.alpha,
            extra_length=s.extra_length,
            nbest=nbest,
        )

    def _translate_text(self, inputs: tf.Tensor, nbest: int) -> dict[str, tf.Tensor]:
        """[batch] strings (batch > 0) --> outputs [batch, nbest], scores, truncated [batch]."""
        tokens = self.tokenizer.encode(clean_utf8(inputs))  # --> ragged [batch, (n)]
        ids, truncated = source_ids(tokens, self.settings.max_input_length)
        result = self._search(ids, nbest)
        batch, length = tf.shape(result.ids)[0], tf.shape(result.ids)[2]
        flat = tf.reshape(result.ids, [batch * nbest, length])  # --> [batch * nbest, length]
        outputs = tf.reshape(self.tokenizer.decode(flat), [batch, nbest])
        return {"outputs": outputs, "scores": result.scores, "truncated": truncated}

    def _guarded(self, size: tf.Tensor, run, empty: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        # An empty batch skips tokenization and search: a zero-row search has no max length.
        return tf.cond(size > 0, run, lambda: empty)

    def translate(self, inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        """serving_default: inputs [batch] --> outputs [batch], scores [batch], truncated [batch]."""
        inputs = tf.convert_to_tensor(inputs, tf.string)

        def run():
            result = self._translate_text(inputs, 1)
            return {**result, "outputs": result["outputs"][:, 0], "scores": result["scores"][:, 0]}

        empty = {
            "outputs": tf.zeros([0], tf.string),
            "scores": tf.zeros([0], tf.float32),
            "truncated": tf.zeros([0], tf.bool),
        }
        return self._guarded(tf.size(inputs), run, empty)

    def translate_nbest(self, inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        """nbest: inputs [batch] --> outputs [batch, n], scores [batch, n], truncated [batch].
        Empty n-best slots (fewer finished hypotheses than n) have score -inf."""
        inputs = tf.convert_to_tensor(inputs, tf.string)
        n = self.settings.nbest
        empty = {
            "outputs": tf.zeros([0, n], tf.string),
            "scores": tf.zeros([0, n], tf.float32),
            "truncated": tf.zeros([0], tf.bool),
        }
        return self._guarded(tf.size(inputs), lambda: self._translate_text(inputs, n), empty)

    def translate_ids(self, input_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        """translate_ids: input_ids [batch, length] (zero-padded; what follows the first EOS or
        pad is ignored) --> output_ids [batch, out_length], scores [batch], truncated [batch]."""
        input_ids = tf.convert_to_tensor(input_ids, tf.int32)

        def run():
            ids, truncated = source_ids(trim_ids(input_ids), self.settings.max_input_length)
            result = self._search(ids, 1)
            return {
                "output_ids": result.ids[:, 0],
                "scores": result.scores[:, 0],
                "truncated": truncated,
            }

        empty = {
            "output_ids": tf.zeros([0, 0], tf.int32),
            "scores": tf.zeros([0], tf.float32),
            "truncated": tf.zeros([0], tf.bool),
        }
        return self._guarded(tf.shape(input_ids)[0], run, empty)


def signatures(translator: Translator) -> dict[str, tuple[Any, list[tf.TensorSpec]]]:
    """Signature name --> (function, input signature), serving_default first."""
    text = [tf.TensorSpec([None], tf.string, name="inputs")]
    return {
        "serving_default": (translator.translate, text),
        NBEST_SIGNATURE: (translator.translate_nbest, text),
        IDS_SIGNATURE: (
            translator.translate_ids,
            [tf.TensorSpec([None, None], tf.int32, name="input_ids")],
        ),
    }


def next_version(export_dir: str) -> int:
    """1 + the largest numeric version folder in `export_dir` (1 if there is none)."""
    if not os.path.isdir(export_dir):
        return 1
    versions = [int(name) for name in os.listdir(export_dir) if name.isdigit()]
    return max(versions, default=0) + 1


def write_saved_model(
    translator: Translator,
    export_dir: str,
    version: int | None = None,
    info: dict[str, Any] | None = None,
) -> str:
    """Writes the SavedModel to `export_dir/<version>` atomically and returns that path.

    `version` defaults to `next_version(export_dir)`; an existing version is never overwritten.
    `info` (JSON-able: checkpoint, settings, ...) is stored as assets.extra/t2t_export.json.
    """
    os.makedirs(export_dir, exist_ok=True)
    version = next_version(export_dir) if version is None else version
    if version < 0:
        raise ValueError(f"--version must be a non-negative integer, got {version}")
    final = os.path.join(export_dir, str(version))
    if os.path.exists(final):
        raise FileExistsError(f"{final} already exists; pass another --version")
    archive = keras.export.ExportArchive()
    archive.track(translator.model)
    archive.track(translator.tokenizer)  # its lookup tables / SentencePiece resource
    for name, (fn, input_signature) in signatures(translator).items():
        archive.add_endpoint(name, fn, input_signature)
    tmp = tempfile.mkdtemp(dir=export_dir, prefix=f"{_TMP_PREFIX}{version}-")
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; a server may run as another user
        archive.write_out(tmp, verbose=False)
        extra = os.path.join(tmp, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        with open(os.path.join(extra, EXPORT_INFO), "w") as f:
            json.dump({"version": version, **(info or {})}, f, indent=2, sort_keys=True)
        # A folder rename is atomic within one file system; TF Serving skips non-numeric names.
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final



def load_translator(
    output_dir: str,
    *,
    checkpoint: str | None = None,
    data_dir: str | None = None,
    beam_size: int | None = None,
    alpha: float | None = None,
    extra_length: int | None = None,
    max_input_length: int | None = None,
    nbest: int | None = None,
) -> tuple[Translator, dict[str, Any]]:
    """Restores a training run (output_dir/hparams.json and a checkpoint) as a Translator.

    Search settings left None take the problem's decode defaults, as t2t-decode does;
    max_input_length defaults to the run's hparams.max_length (capped at max_positions) and
    nbest to beam_size. `data_dir` overrides the one recorded at training time.

    Returns:
      (translator, info): info is JSON-able (checkpoint, problem, settings) for the export.
    """
    from t2t_lite.problems import get_problem  # the problem registry; heavy, so imported late
    from t2t_lite.run_info import restore_model

    model, run, path = restore_model(output_dir, checkpoint)
    data_dir = data_dir or run.data_dir
    tokenizer = get_problem(run.problem).tokenizer(data_dir)
    if tokenizer.vocab_size != run.vocab_size:
        raise ValueError(
            f"the vocabulary in {data_dir} has {tokenizer.vocab_size} ids but the model in "
            f"{output_dir} was trained with {run.vocab_size}; pass the run's --data_dir"
        )
    defaults = get_problem(run.problem).decode_defaults
    hp = run.hparams
    beam_size = beam_size or defaults.beam_size
    settings = ServingSettings(
        beam_size=beam_size,
        alpha=defaults.alpha if alpha is None else alpha,
        extra_length=extra_length or defaults.extra_length,
        max_input_length=max_input_length or min(hp.max_length, hp.max_positions),
        nbest=nbest or beam_size,
    )
    info = {
        "output_dir": os.path.abspath(output_dir),
        "checkpoint": os.path.abspath(path),
        "problem": run.problem,
        "hparams_set": run.hparams_set,
        "data_dir": os.path.abspath(data_dir),
        "settings": dataclasses.asdict(settings),
    }
    return Translator(model, tokenizer, settings), info
