"""Exports t2t_lite's training step as XLA HLO, for a GPU machine that has no TensorFlow.

    .venv/bin/python bench/gpu/export_step.py --out=/tmp/step_bf16 --precision=mixed_bfloat16

The step is `Trainer._single_step` (forward, label-smoothed loss, gradients, the non-finite
check, Adam; for mixed_float16 the loss-scale optimizer too) and the step counter, in one
`tf.function(jit_compile=True)`: the XLA computation of `t2t-train` with `jit_compile=true`.
TensorFlow lowers it to HLO here; bench/gpu/run_step.py compiles that HLO for the GPU with
jaxlib's XLA and runs it. Two batch shapes are written, each as `{name}.pb` and
`{name}_batch.npz`: `check` (8 x 32, with TensorFlow's own losses of three steps from the same
values, which the GPU must reproduce) and `time` (the benchmark batch). manifest.json describes
every argument after the two batch inputs (bench/gpu/values.py), the FLOPs of a step
(t2t_lite.model.flops) and the hparams.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from values import batch, uniform_values  # noqa: E402

from t2t_lite.hparams import get_hparams  # noqa: E402
from t2t_lite.model import flops  # noqa: E402
from t2t_lite.runtime import distribute  # noqa: E402
from t2t_lite.train.step import Trainer  # noqa: E402

CHECK_SHAPE = (8, 32)


def make_step(trainer: Trainer):
    @tf.function(jit_compile=True)
    def step(inputs, targets):  # [batch, length] int32 each --> loss, applied
        result = trainer._single_step({"inputs": inputs, "targets": targets})
        trainer.step.assign_add(1)
        return result["loss"], result["applied"]

    return step


def captured_arguments(step, source, target, trainer: Trainer) -> list:
    """The HLO parameters after the two batch inputs, in order: the variable each captured
    resource is, or the captured tensor itself. (TensorFlow's XLA bridge passes the explicit
    inputs, then the captured tensors in capture order, and returns the updated resources after
    the outputs in the same order.)"""
    variables = trainer.model.variables + trainer.optimizer.variables + [trainer.step]
    return resolve_captures(step.get_concrete_function(source, target), variables)


def resolve_captures(concrete, variables: list) -> list:
    """The captured inputs of the traced function `concrete`, each resource as the variable of
    `variables` it is a handle of, each captured tensor as itself."""
    by_handle = {id(v.handle): v for v in variables}
    return [by_handle[id(t)] if t.dtype == tf.resource else t for t in concrete.captured_inputs]


def describe_arguments(arguments: list, folder: str) -> list[dict]:
    """Manifest records for `arguments` (bench/gpu/values.py); writes constants.npz and sets
    every variable that is not a constant fill to its uniform values."""
    records, constants = [], {}
    for index, argument in enumerate(arguments):
        value = argument.numpy()
        record = {"shape": list(value.shape), "dtype": value.dtype.name}
        if isinstance(argument, tf.Tensor):
            constants[f"arg{index}"] = value
            records.append({"kind": "constant", **record})
            continue
        record = {"kind": "variable", "name": getattr(argument, "path", argument.name), **record}
        if value.size and np.all(value == value.flat[0]):
            record["fill"] = value.flat[0].item()
        else:
            argument.assign(uniform_values(index, value.shape, value.dtype.name))
            record["uniform"] = True
        records.append(record)
    np.savez(os.path.join(folder, "constants.npz"), **constants)
    return records


def export(folder: str, hparams, vocab: int, time_shape: tuple[int, int]) -> dict:
    """Writes the two shapes' HLO and batches, constants.npz and manifest.json; returns the
    manifest."""
    os.makedirs(folder, exist_ok=True)
    tf.keras.utils.set_random_seed(0)
    trainer = Trainer(hparams, vocab, distribute.create_strategy("default"))
    step = make_step(trainer)
    shapes = {"check": batch(*CHECK_SHAPE, vocab), "time": batch(*time_shape, vocab)}
    arguments = captured_arguments(step, *shapes["check"], trainer)
    if [id(a) for a in captured_arguments(step, *shapes["time"], trainer)] != list(
        map(id, arguments)
    ):
        raise RuntimeError(
            "the two shapes capture different arguments; one manifest cannot serve both"
        )
    manifest = {
        "hparams": hparams.to_dict(),
        "vocab": vocab,
        "tensorflow": tf.__version__,
        "arguments": describe_arguments(arguments, folder),
        "shapes": {},
    }
    for name, (source, target) in shapes.items():
        with open(os.path.join(folder, f"{name}.pb"), "wb") as f:
            f.write(step.experimental_get_compiler_ir(source, target)(stage="hlo_serialized"))
        np.savez(os.path.join(folder, f"{name}_batch.npz"), inputs=source, targets=target)
        per_token = flops.forward_flops_per_token(hparams, vocab, source.shape[1], target.shape[1])
        manifest["shapes"][name] = {
            "batch": list(source.shape),
            "target_tokens": int(target.size),
            "train_flops": 3 * per_token * int(target.size),
        }
    # TensorFlow's own losses at the check shape, from the values just described.
    manifest["shapes"]["check"]["tensorflow_losses"] = [
        float(step(*shapes["check"])[0]) for _ in range(3)
    ]
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the HLO, manifest and constants")
    parser.add_argument("--hparams_set", default="transformer_base")
    parser.add_argument(
        "--precision", default="float32", choices=("float32", "mixed_bfloat16", "mixed_float16")
    )
    parser.add_argument("--vocab", type=int, default=37000, help="the paper's shared BPE size")
    parser.add_argument("--sentences", type=int, default=384, help="timed batch, sentences")
    parser.add_argument("--length", type=int, default=64, help="source = target tokens each")
    args = parser.parse_args()
    hparams = get_hparams(args.hparams_set, f"precision={args.precision},jit_compile=true")
    manifest = export(args.out, hparams, args.vocab, (args.sentences, args.length))
    losses = manifest["shapes"]["check"]["tensorflow_losses"]
    print(f"{args.out}: {len(manifest['arguments'])} arguments, TensorFlow losses {losses}")


if __name__ == "__main__":
    main()
