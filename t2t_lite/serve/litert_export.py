"""Export for LiteRT: a trained run --> a `.tflite` model of greedy search, ids in, ids out.

`t2t-export --format=litert` traces `transformer_step.sample_ids` at temperature 0 (greedy
search; the same hypotheses as t2t-decode's beam search at beam 1 without a length penalty) for
inputs [batch, length] int32, both free (or the batch fixed, for delegates that need static
shapes), and converts it with `tf.lite.TFLiteConverter` to LiteRT's builtin ops only: the
search's `tf.while_loop` becomes a WHILE op over a decoding cache as long as the call's outputs
can be (`fixed_shapes`, written in place), and the model file needs no TensorFlow ops (no Flex
delegate), so the `ai-edge-litert` interpreter runs it on its own. Its one signature,
"serving_default", takes "inputs" [batch, length] (zero-padded source ids, each ending in EOS;
length up to input_length, t2t-export's --max_input_length) and gives "ids" [batch,
min(length + extra_length, max_positions)] (EOS included, zeros after it); each sentence stops
at its own input length + extra_length, as in t2t-decode.

The tokenizer stays outside: its SentencePiece op is not a LiteRT builtin. The vocabulary file
is copied beside the model, and `t2t_lite.serve.litert_runner` (no TensorFlow) reads both.

The model computes in float32 whatever the run trained in (mixed bfloat16 runs are copied to a
float32 model first). quantization="int8" asks the converter for int8 weights
(`tf.lite.Optimize.DEFAULT` without a representative data set: dynamic-range quantization, the
products computed from int8 weights and float activations).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from absl import logging

# Freezing a function's variables into constants: the converter itself leaves the variables
# read inside the search's WHILE body as resource variables that no signature initializes
# (LiteRT then fails with "READ_VARIABLE ... variable != nullptr"); TensorFlow's public API has
# no other way to freeze a function.
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
)

from t2t_lite.decode import transformer_step
from t2t_lite.decode.exported import EXPORT_INFO
from t2t_lite.model import lora
from t2t_lite.model.transformer import Transformer
from t2t_lite.run.run import Run
from t2t_lite.runtime import atomic_io
from t2t_lite.serve.versions import write_version

QUANTIZATIONS = ("none", "int8")
MODEL_FILE = "model.tflite"
SIGNATURE = "serving_default"


def refusal(run: Run) -> str | None:
    """Why this run's model and search cannot become a LiteRT greedy search, or None."""
    if not isinstance(run.model, Transformer):
        return "--checkpoint names several checkpoints; convert one (t2t-avg-checkpoints averages)"
    if lora.is_adapted(run.model):
        return "its LoRA adapter is not merged; restore it with merge_lora=True (t2t-export does)"
    if not run.tokenizer.path.endswith(".model"):
        return (
            f"its vocabulary {os.path.basename(run.tokenizer.path)} is not a SentencePiece model; "
            "the LiteRT runner tokenizes with SentencePiece only"
        )
    if run.search.constrained:
        return f"problem {run.problem.name} decodes constrained; pass --noconstrained"
    if run.problem.has_postprocess():
        return f"problem {run.problem.name} postprocesses its outputs in Python"
    if run.search.sampling:
        return "--sampling: the LiteRT model searches greedily"
    if run.quantize != "none":
        return f"--quantize={run.quantize}; the converter quantizes (--litert_quantization)"
    return None


def check_quantization(quantization: str) -> None:
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"--litert_quantization={quantization!r} is not one of {QUANTIZATIONS}")


def float32_model(model: Transformer) -> Transformer:
    """`model` itself when it computes in float32, else a float32 copy of its weights (LiteRT's
    builtin kernels take float32; a mixed bfloat16 model's weights are float32 already)."""
    if model.dtype_policy.name == "float32":
        return model
    copy = Transformer.from_config({**model.get_config(), "dtype": "float32"})
    copy.build()
    copy.set_weights(model.get_weights())
    return copy


def output_length(model: Transformer, input_length: int, extra_length: int) -> int:
    """The ids a search of inputs `input_length` wide returns per sentence (as
    `transformer_step` with fixed shapes): min(input_length + extra_length, max_positions)."""
    return max(min(input_length + extra_length, model.max_positions), 1)


def greedy_function(
    model: Transformer, batch_size: int | None, extra_length: int
) -> tf.types.experimental.ConcreteFunction:
    """Greedy search as a concrete function of inputs [batch, length] int32 -->
    {"ids": [batch, output_length(length)] int32}: the length free, so that a call computes
    the positions of its longest sentence only, and the batch free (`batch_size` None) or
    fixed."""

    @tf.function(input_signature=[tf.TensorSpec([batch_size, None], tf.int32)], autograph=False)
    def greedy(inputs):
        found = transformer_step.sample_ids(
            model, inputs, temperature=0.0, extra_length=extra_length, fixed_shapes=True
        )
        ids = tf.squeeze(found.ids, 1)  # [batch, 1, output_length] --> [batch, output_length]
        return {"ids": ids}

    return greedy.get_concrete_function()


def convert(function: tf.types.experimental.ConcreteFunction, quantization: str = "none") -> bytes:
    """A concrete function --> the bytes of a `.tflite` model of LiteRT's builtin ops only, with
    one signature `SIGNATURE` of the function's inputs and outputs; int8 weights with
    `quantization="int8"`. A ConverterError names the ops that LiteRT's builtins lack."""
    check_quantization(quantization)
    frozen = convert_variables_to_constants_v2(function)
    spec = function.structured_input_signature[0][0]
    names = sorted(function.structured_outputs)  # the frozen function returns a flat list

    def serve(inputs):
        return dict(zip(names, tf.nest.flatten(frozen(inputs)), strict=True))

    holder = tf.Module()  # the converter's signature comes from a tracked tf.function
    holder.serve = tf.function(serve, input_signature=[spec], autograph=False)
    traced = holder.serve.get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([traced], holder)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantization == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def export_run(
    run: Run,
    export_dir: str,
    version: int | None = None,
    quantization: str = "none",
    batch_size: int | None = None,
    card: Callable[[dict[str, Any], str], str] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Converts a restored run to `export_dir/<version>` (model.tflite, the run's SentencePiece
    model, t2t_export.json and README.md), written whole or not at all (`write_version`).
    Greedy search over inputs [batch, up to run.search's input limit], the batch free or
    `batch_size` rows. Returns the folder and the facts stored."""
    check_quantization(quantization)
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"--litert_batch_size must be at least 1, got {batch_size}")
    reason = refusal(run)
    if reason:
        raise ValueError(f"{run.output_dir} cannot be converted to LiteRT: {reason}")
    model = float32_model(run.model)
    input_length = run.search.input_limit(model.max_positions)
    extra = run.search.extra_length
    info = {
        **run.describe(),
        "format": "litert",
        "search": "greedy",
        "quantization": quantization,
        "vocabulary": os.path.basename(run.tokenizer.path),
        "model_file": MODEL_FILE,
        "batch_size": batch_size,  # None: any number of rows
        "input_length": input_length,
        "output_length": output_length(model, input_length, extra),
    }
    for key in ("output_dir", "checkpoint", "data_dir"):
        info[key] = os.path.abspath(info[key])
    # The search it holds: beam search at beam 1 without a length penalty finds the same.
    info["settings"] = {**info["settings"], "beam_size": 1, "alpha": 0.0, "nbest": 1}
    start = time.monotonic()
    flatbuffer = convert(greedy_function(model, batch_size, extra), quantization)
    # What the runner checks before it loads them (a damaged copy is refused, named).
    info["model_sha256"] = hashlib.sha256(flatbuffer).hexdigest()
    info["vocabulary_sha256"] = atomic_io.file_sha256(run.tokenizer.path)

    def write(folder: str) -> None:
        with open(os.path.join(folder, MODEL_FILE), "wb") as f:
            f.write(flatbuffer)
        shutil.copyfile(run.tokenizer.path, os.path.join(folder, info["vocabulary"]))
        atomic_io.write_json(os.path.join(folder, EXPORT_INFO), info)
        readme = card(info, usage(info)) if card else usage(info)  # the model card
        atomic_io.write_text(os.path.join(folder, "README.md"), readme)

    path = write_version(export_dir, version, write)
    logging.info(
        "wrote the LiteRT model %s (%.1f MB) in %.1f s",
        path,
        len(flatbuffer) / 1e6,
        time.monotonic() - start,
    )
    return path, info


def usage(info: dict[str, Any]) -> str:
    """The README.md written beside a converted model: how to translate with it."""
    rows = info["batch_size"] or "rows"
    return (
        f"# LiteRT model of the run {os.path.basename(info['output_dir'])}\n\n"
        f"Checkpoint {os.path.basename(info['checkpoint'])} (problem {info['problem']}, hparams "
        f"{info['hparams_set']}), greedy search, weights {info['quantization']}. Converted by "
        "t2t-export --format=litert (docs/deploy.md in t2t_lite).\n\n"
        f'{MODEL_FILE}: signature {SIGNATURE!r}, input "inputs" int32 '
        f"[{rows}, length <= {info['input_length']}] (SentencePiece ids of "
        f'{info["vocabulary"]}, then EOS = 1, then zeros), output "ids" int32 '
        f"[{rows}, up to {info['output_length']}] (EOS = 1 ends each, zeros "
        "after).\n\n"
        "```python\nfrom t2t_lite.serve.litert_runner import LiteRTTranslator\n\n"
        'translator = LiteRTTranslator(".")  # this folder; needs ai-edge-litert, not TensorFlow\n'
        'print(translator.translate(["Click the OK button to close the dialog."]))\n```\n'
    )
