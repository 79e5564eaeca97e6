"""Export for TF Serving: a SavedModel that turns raw strings into translations in one graph.

The exported graph tokenizes with tensorflow-text, runs the batched cached beam search of
`t2t_lite.search.beam` in a `tf.while_loop`, and detokenizes, so a client sends text and gets
text back. The signatures:

  serving_default  inputs: string [batch] --> outputs: string [batch],
                   scores: float32 [batch], truncated: bool [batch]
  nbest            inputs: string [batch] --> outputs: string [batch, n],
                   scores: float32 [batch, n], truncated: bool [batch]
  translate_ids    input_ids: int32 [batch, length] (zero-padded, EOS optional)
                   --> output_ids: int32 [batch, out_length] (EOS included, zero-padded),
                   scores: float32 [batch], truncated: bool [batch]
  sample           inputs: string [batch], seed: int32 [] --> outputs: string [batch],
                   scores: float32 [batch], truncated: bool [batch]: one sampled translation
                   each (temperature, top_k, top_p as exported with --sampling)
  attention        inputs: string [batch] --> the best translation's tokens and every layer's
                   and head's attention maps (`ServingFunctions.attention`), for `t2t-serve`
  guided           inputs, prefixes: string [batch], constraints: string [batch, C] --> the
                   best translation with its prefix and target phrases, and its tokens, token
                   probabilities, word alignment and confidence (`t2t_lite.serve.guided_graph`)

Text is handled as t2t-decode handles it: surrounding whitespace is stripped, an empty input
gives an empty output with score 0, and `scores` is the beam's ranking score log p / lp(length)
(GNMT length penalty; the plain log-probability when alpha = 0). An input longer than
`max_input_length` tokens (EOS included) is cut to that length and flagged in `truncated`;
invalid UTF-8 bytes become U+FFFD. An empty batch returns empty outputs without searching.

The SavedModel's root (`saved_model_root`) tracks the model's variables, every other variable a
signature reads and the tokenizer's resources explicitly, as `keras.export.ExportArchive` does (a
Keras 3 model inside a plain `tf.Module` would export variables that non-Python loaders such as
TF Serving cannot find), and each signature is traced once (ExportArchive traces its endpoints
to find their variables, and `tf.saved_model.save` traces them again in its own context). It
goes to a hidden temporary folder in `export_dir`, renamed to `export_dir/<version>` once
complete, so TF Serving, which watches `export_dir`, never sees half an export. Loading it in
Python needs `import tensorflow_text` first (it registers the tokenizer ops).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf
from absl import logging

from t2t_lite.data import Tokenizer, trim_ids
from t2t_lite.data.shortlist import Shortlist
from t2t_lite.decode import transformer_step
from t2t_lite.decode.confidence import Calibration
from t2t_lite.decode.exported import (  # the names its readers share
    ATTENTION_SIGNATURE,
    EXPORT_INFO,
    GUIDED_SIGNATURE,
    IDS_SIGNATURE,
    NBEST_SIGNATURE,
    SAMPLE_SIGNATURE,
)
from t2t_lite.hparams import SearchSettings
from t2t_lite.model.ensemble import Ensemble
from t2t_lite.run.run import Run
from t2t_lite.runtime import logs
from t2t_lite.search.constraint import Constraint
from t2t_lite.search.controls import Controls
from t2t_lite.serve.attention_graph import graph_token_labels, stack_attention
from t2t_lite.serve.facts import run_facts
from t2t_lite.serve.guided_graph import GuidedSignature
from t2t_lite.serve.text_graph import clean_utf8, source_ids, strip_whitespace
from t2t_lite.serve.versions import write_version


class ServingFunctions:
    """The signatures' computations over a restored model and its tokenizer; each public method
    takes a batch and returns its signature's output dict (they run eagerly too).

    As in t2t-decode, an input that is empty after stripping whitespace is not searched: its
    output is "" (or no ids) with score 0. The search keeps to `constraint` (a problem's decoding
    constraint) and the text outputs go through `postprocess`, a problem's `graph_postprocess`
    (sources [kept] and outputs [kept, n] strings --> [kept, n]), so an export returns what
    t2t-decode writes.
    """

    def __init__(
        self,
        model: keras.Model,
        tokenizer: Tokenizer,
        settings: SearchSettings,
        constraint: Constraint | None = None,
        postprocess: Callable[[tf.Tensor, tf.Tensor], tf.Tensor] | None = None,
        shortlist: Shortlist | None = None,
    ):
        settings.check(model.max_positions)
        if tokenizer.vocab_size != model.vocab_size:
            raise ValueError(
                f"the tokenizer has {tokenizer.vocab_size} ids but the model {model.vocab_size}"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings
        self.max_input_length = settings.input_limit(model.max_positions)
        self.constraint = constraint
        self.postprocess = postprocess
        self.shortlist = shortlist  # the text and sample signatures' (t2t_lite.data.shortlist)
        self.calibration = Calibration()  # the run's, for the guided signature's confidence

    @classmethod
    def from_run(cls, run: Run, nbest: int | None = None) -> ServingFunctions:
        """The run's model, vocabulary, search settings, constraint and postprocessing; the
        nbest signature returns `nbest` hypotheses (default: the beam size).

        Raises ValueError naming the problem when its decoding cannot be put in a graph."""
        if isinstance(run.model, Ensemble):
            raise ValueError(
                "--checkpoint names several checkpoints, an ensemble, which only t2t-decode "
                "searches; export one (t2t-avg-checkpoints averages several into one)"
            )
        refusal = run.problem.export_refusal(run.search)
        if refusal:
            raise ValueError(f"problem {run.problem.name} cannot be exported: {refusal}")
        settings = run.search.override(
            sampling=False,  # the text signatures search the beam; `sample` samples
            nbest=nbest or run.search.beam_size,
            max_input_length=run.search.input_limit(run.hparams.max_positions),
        )
        postprocess = run.problem.graph_postprocess if run.problem.has_postprocess() else None
        functions = cls(
            run.model, run.tokenizer, settings, run.constraint, postprocess, run.shortlist
        )
        functions.calibration = Calibration.load(run.output_dir)
        return functions

    def _search(
        self,
        ids: tf.Tensor,
        keep: tf.Tensor,
        nbest: int,
        finish: Callable[[tf.Tensor, tf.Tensor], dict[str, tf.Tensor]],
        empty: dict[str, tf.Tensor],
        seed: tf.Tensor | None = None,
    ) -> dict[str, tf.Tensor]:
        """Searches the rows of source ids [batch, length] where keep [batch] is True.

        `finish` maps the found ids [kept, nbest, out_length] and the kept rows' indices [kept]
        to a dict of [kept, ...] outputs;
        `empty` holds the same outputs for no rows. Returns them scattered back to [batch, ...]
        (zeros or "" at rows not kept) with "scores" [batch, nbest]. Rows not kept, and an empty
        batch, are never searched. With a `seed`, one hypothesis is sampled per row (temperature,
        top_k and top_p of the settings) instead of beam search.
        """
        s = self.settings
        rows = tf.where(keep)[:, 0]  # --> [kept]

        def search():
            if seed is None:
                found = transformer_step.search_function(
                    self.model,
                    s.override(sampling=False, nbest=nbest),
                    self.constraint,
                    shortlist=self.shortlist,
                )(tf.gather(ids, rows))
            else:
                found = transformer_step.sample_ids(
                    self.model,
                    tf.gather(ids, rows),
                    temperature=s.temperature,
                    top_k=s.top_k,
                    top_p=s.top_p,
                    seed=seed,
                    extra_length=s.extra_length,
                    constraint=self.constraint,
                    shortlist=self.shortlist,
                    controls=Controls.of(s),
                )
            return {"scores": found.scores, **finish(found.ids, rows)}

        def nothing():  # a zero-row search has no maximum length to loop to
            return {"scores": tf.zeros([0, nbest], tf.float32), **empty}

        found = tf.cond(tf.size(rows) > 0, search, nothing)
        batch = tf.shape(ids, tf.int64)[:1]
        return {
            name: tf.scatter_nd(
                rows[:, None], value, tf.concat([batch, tf.shape(value, tf.int64)[1:]], 0)
            )
            for name, value in found.items()
        }

    def _translate_text(
        self, inputs: tf.Tensor, nbest: int, seed: tf.Tensor | None = None
    ) -> dict[str, tf.Tensor]:
        """[batch] strings --> outputs [batch, nbest], scores [batch, nbest], truncated [batch]."""
        text = strip_whitespace(clean_utf8(tf.convert_to_tensor(inputs, tf.string)))
        tokens = self.tokenizer.encode(text)  # --> ragged [batch, (n)]
        ids, truncated = source_ids(tokens, self.max_input_length)

        def detokenize(found_ids, rows):  # [kept, nbest, out_length] --> [kept, nbest] strings
            shape = tf.shape(found_ids)
            flat = tf.reshape(found_ids, [-1, shape[2]])  # --> [kept * nbest, out_length]
            outputs = tf.reshape(self.tokenizer.decode(flat), shape[:2])
            if self.postprocess is not None:
                outputs = self.postprocess(tf.gather(text, rows), outputs)
            return {"outputs": outputs}

        empty = {"outputs": tf.zeros([0, nbest], tf.string)}
        found = self._search(ids, tf.strings.length(text) > 0, nbest, detokenize, empty, seed)
        return {**found, "truncated": truncated}

    def translate(self, inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        """serving_default: inputs [batch] --> outputs [batch], scores, truncated [batch]."""
        found = self._translate_text(inputs, 1)
        return {**found, "outputs": found["outputs"][:, 0], "scores": found["scores"][:, 0]}

    def sample(self, inputs: tf.Tensor, seed: tf.Tensor) -> dict[str, tf.Tensor]:
        """sample: inputs [batch], seed int32 [] --> outputs [batch], scores [batch] (the model's
        log-probability of each sample), truncated [batch]. The same seed and batch give the
        same samples; temperature, top_k and top_p are the export's (--sampling)."""
        found = self._translate_text(inputs, 1, seed)
        return {**found, "outputs": found["outputs"][:, 0], "scores": found["scores"][:, 0]}

    def translate_nbest(self, inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        """nbest: inputs [batch] --> outputs [batch, n], scores [batch, n], truncated [batch],
        best first. An empty slot (fewer finished hypotheses than n) has score -inf."""
        return self._translate_text(inputs, self.settings.nbest)

    def translate_ids(self, input_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        """translate_ids: input_ids [batch, length], zero-padded, what follows a row's first EOS
        or pad ignored --> output_ids [batch, out_length] (EOS included, zero-padded), scores
        [batch], truncated [batch]. Ids outside [0, vocab_size) are an error."""
        input_ids = tf.convert_to_tensor(input_ids, tf.int32)
        checks = [
            tf.debugging.assert_non_negative(input_ids, message="input_ids must be >= 0"),
            tf.debugging.assert_less(
                input_ids,
                self.model.vocab_size,
                message=f"input_ids must be < the vocabulary size {self.model.vocab_size}",
            ),
        ]
        with tf.control_dependencies(checks):
            tokens = trim_ids(input_ids)  # --> ragged [batch, (n)]
        ids, truncated = source_ids(tokens, self.max_input_length)
        found = self._search(
            ids,
            tokens.row_lengths() > 0,
            1,
            lambda found_ids, rows: {"output_ids": found_ids[:, 0]},  # --> [kept, out_length]
            {"output_ids": tf.zeros([0, 0], tf.int32)},
        )
        return {**found, "scores": found["scores"][:, 0], "truncated": truncated}

    def attention(self, inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        """attention: inputs [batch] --> the attention of each input's best translation, what
        t2t-visualize draws and `t2t-serve` shows:

          outputs [batch] (the translation, before any postprocessing), scores, truncated [batch];
          source_tokens [batch, S], target_tokens [batch, T]: token labels ("</s>" for EOS, ""
            past a row's length), source_length, target_length [batch] int32 (EOS included, 0
            for an empty input);
          encoder [batch, layers, heads, S, S], decoder_self [batch, layers, heads, T, T],
            decoder_cross [batch, layers, heads, T, S] float32, zero past the row's lengths.
        """
        text = strip_whitespace(clean_utf8(tf.convert_to_tensor(inputs, tf.string)))
        keep = tf.strings.length(text) > 0
        ids, truncated = source_ids(self.tokenizer.encode(text), self.max_input_length)
        found = self._search(
            ids,
            keep,
            1,
            lambda found_ids, rows: {"output_ids": found_ids[:, 0]},  # --> [kept, out_length]
            {"output_ids": tf.zeros([0, 0], tf.int32)},
        )
        targets = found["output_ids"]  # --> [batch, T], EOS included, zero-padded
        lengths = {
            "source": tf.where(keep, tf.reduce_sum(tf.cast(ids > 0, tf.int32), axis=1), 0),
            "target": tf.reduce_sum(tf.cast(targets > 0, tf.int32), axis=1),
        }
        valid = {
            "source": tf.sequence_mask(lengths["source"], tf.shape(ids)[1]),  # --> [batch, S]
            "target": tf.sequence_mask(lengths["target"], tf.shape(targets)[1]),  # [batch, T]
        }
        maps = self.model.attention_maps(ids, targets)  # kind --> layers x [batch, heads, q, k]
        return {
            "outputs": self.tokenizer.decode(targets),
            "scores": found["scores"][:, 0],
            "truncated": truncated,
            "source_tokens": graph_token_labels(
                self.tokenizer, ids * tf.cast(valid["source"], tf.int32)
            ),
            "target_tokens": graph_token_labels(self.tokenizer, targets),
            "source_length": lengths["source"],
            "target_length": lengths["target"],
            **stack_attention(maps, valid),
        }


def signatures(functions: ServingFunctions) -> dict[str, tuple[Any, list[tf.TensorSpec]]]:
    """Signature name --> (function, input signature), serving_default first."""
    text = [tf.TensorSpec([None], tf.string, name="inputs")]
    found = {
        "serving_default": (functions.translate, text),
        NBEST_SIGNATURE: (functions.translate_nbest, text),
        SAMPLE_SIGNATURE: (functions.sample, [*text, tf.TensorSpec([], tf.int32, name="seed")]),
        IDS_SIGNATURE: (
            functions.translate_ids,
            [tf.TensorSpec([None, None], tf.int32, name="input_ids")],
        ),
    }
    if not isinstance(functions.model, Ensemble):  # an ensemble has no attention maps
        found[ATTENTION_SIGNATURE] = (functions.attention, text)
        guided = GuidedSignature(functions, functions.calibration)
        found[GUIDED_SIGNATURE] = (guided, guided.input_signature())
    return found


def saved_model_root(functions: ServingFunctions) -> tuple[tf.Module, dict]:
    """The SavedModel's root and its signatures, each traced here once, as concrete functions.

    The root tracks the model's variables in order (`model_variables`), every variable a
    signature reads (`captured`: the same ones, and any other) and the tokenizer's resources:
    graph-mode loaders such as TF Serving restore only what the root reaches. A signature
    saved as a `tf.function` would be traced once more inside `tf.saved_model.save`."""
    traced = {
        name: tf.function(fn, input_signature=spec, autograph=False).get_concrete_function()
        for name, (fn, spec) in signatures(functions).items()
    }
    root = tf.Module()
    root.tokenizer = functions.tokenizer  # its lookup tables or SentencePiece resource
    root.model_variables = list(functions.model.variables)
    captured = {id(v): v for function in traced.values() for v in function.variables}
    root.captured = list(captured.values())
    return root, traced


def write_saved_model(
    functions: ServingFunctions,
    export_dir: str,
    version: int | None = None,
    info: dict[str, Any] | None = None,
    readme: str | None = None,
) -> str:
    """Writes the SavedModel with its signatures to `export_dir/<version>` atomically (see
    `write_version`) and returns that path. `info` (JSON-able: checkpoint, settings, ...) is
    stored with the version as assets.extra/t2t_export.json; `readme` (the model card) as
    README.md."""
    start = time.monotonic()

    def write(folder: str) -> None:
        logging.info("tracing the signatures and writing them to %s", folder)
        with logs.tensorflow_info_hidden():  # renamed inputs, sharding, fingerprints
            root, traced = saved_model_root(functions)
            tf.saved_model.save(root, folder, signatures=traced)
        extra = os.path.join(folder, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        with open(os.path.join(extra, EXPORT_INFO), "w") as f:
            json.dump(info or {}, f, indent=2, sort_keys=True)
        if readme is not None:
            with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as f:
                f.write(readme)

    path = write_version(export_dir, version, write)
    logging.info("wrote %s in %.1f s", path, time.monotonic() - start)
    return path


def export_run(
    run: Run,
    export_dir: str,
    version: int | None = None,
    nbest: int | None = None,
    card: Callable[[dict[str, Any], str], str] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Exports a restored run (see `ServingFunctions.from_run`) to `export_dir/<version>`;
    returns the version folder and the facts stored with it (run, checkpoint, settings).
    `card(info, usage)`: the README.md model card (t2t_lite.serve.model_card)."""
    functions = ServingFunctions.from_run(run, nbest)
    info = {**run.describe(), **run_facts(run), "settings": functions.settings.to_dict()}
    for key in ("output_dir", "checkpoint", "data_dir"):
        info[key] = os.path.abspath(info[key])
    readme = card(info, usage(info)) if card else None
    return write_saved_model(functions, export_dir, version, info, readme), info


def usage(info: dict[str, Any]) -> str:
    """How to translate with a SavedModel of t2t-export (the model card's "Use")."""
    return (
        "TF Serving serves the folder of versions (`t2t-serve --export_dir=FOLDER` answers the "
        "same REST API); from Python, with t2t_lite installed:\n\n"
        "```python\nfrom t2t_lite import Translator\n\n"
        'translator = Translator.from_run("FOLDER")  # this folder, or its folder of versions\n'
        'print(translator.translate(["Click the OK button to close the dialog."]))\n```\n\n'
        f"Signatures: `serving_default` (beam {info['settings']['beam_size']}, alpha "
        f"{info['settings']['alpha']}), `nbest`, `translate_ids`, `guided` and `attention` "
        "(docs/serving.md in t2t_lite)."
    )
