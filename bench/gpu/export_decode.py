"""Exports t2t_lite's beam search as XLA HLO, for a GPU machine that has no TensorFlow.

    .venv/bin/python bench/gpu/export_decode.py --out=/tmp/decode_bf16 --precision=mixed_bfloat16

The search is `translate_ids(..., fixed_shapes=True)` (beam 4, alpha 0.6: encoder, the
fixed-length decoding cache, the whole `tf.while_loop` of the search; with --beam_size=1 greedy
search, `sample_ids(..., fixed_shapes=True)`) in one
`tf.function(jit_compile=True)`, what XLA compiles where TensorFlow runs it. TensorFlow lowers it
to HLO here; bench/gpu/run_decode.py compiles that HLO for the GPU with jaxlib's XLA and runs
it. Two source shapes are written, as for the training step (bench/gpu/export_step.py): `check`
with TensorFlow's own ids and scores from the same weights, which the GPU must reproduce, and
`time`. The weights are `uniform` or constant fills remade on both sides (bench/gpu/values.py);
the sinusoid table travels in constants.npz.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from export_step import describe_arguments, resolve_captures  # noqa: E402
from values import batch  # noqa: E402

from t2t_lite.decode.transformer_step import sample_ids, translate_ids  # noqa: E402
from t2t_lite.hparams import get_hparams  # noqa: E402
from t2t_lite.model import flops  # noqa: E402
from t2t_lite.model.transformer import Transformer  # noqa: E402

CHECK_SHAPE = (4, 12)


def make_decode(model: Transformer, beam_size: int, extra_length: int):
    """Beam search, or greedy search (`sample_ids` at temperature 0) when beam_size is 1."""

    @tf.function(jit_compile=True)
    def decode(inputs):  # [batch, source] int32 --> ids [batch, 1, width], scores [batch, 1]
        if beam_size == 1:
            result = sample_ids(model, inputs, extra_length=extra_length, fixed_shapes=True)
        else:
            result = translate_ids(
                model, inputs, beam_size=beam_size, extra_length=extra_length, fixed_shapes=True
            )
        return result.ids, result.scores

    return decode


def captured_arguments(decode, inputs, model: Transformer) -> list:
    """The HLO parameters after the source ids, in order: the variable each captured resource
    is, or the captured tensor itself (see bench/gpu/export_step.py)."""
    return resolve_captures(decode.get_concrete_function(inputs), model.variables)


def export(folder: str, hparams, vocab: int, time_shape, beam_size: int, extra: int) -> dict:
    """Writes the two shapes' HLO and sources, constants.npz and manifest.json; returns the
    manifest."""
    os.makedirs(folder, exist_ok=True)
    tf.keras.utils.set_random_seed(0)
    model = Transformer.from_hparams(hparams, vocab)
    model.build()
    decode = make_decode(model, beam_size, extra)
    shapes = {"check": batch(*CHECK_SHAPE, vocab)[0], "time": batch(*time_shape, vocab)[0]}
    arguments = captured_arguments(decode, shapes["check"], model)
    if list(map(id, captured_arguments(decode, shapes["time"], model))) != list(map(id, arguments)):
        raise RuntimeError("the two shapes capture different arguments")
    manifest = {
        "hparams": hparams.to_dict(),
        "vocab": vocab,
        "beam_size": beam_size,
        "extra_length": extra,
        "tensorflow": tf.__version__,
        "arguments": describe_arguments(arguments, folder),
        "shapes": {},
    }
    for name, source in shapes.items():
        with open(os.path.join(folder, f"{name}.pb"), "wb") as f:
            f.write(decode.experimental_get_compiler_ir(source)(stage="hlo_serialized"))
        np.savez(os.path.join(folder, f"{name}_batch.npz"), inputs=source)
        width = source.shape[1] + extra
        # Decoder FLOPs per hypothesis token at the state's width (an upper bound on its
        # attention), for the share of the GPU's peak.
        per_token = flops.forward_flops_per_token(hparams, vocab, source.shape[1], width)
        manifest["shapes"][name] = {"batch": list(source.shape), "width": width}
        manifest["shapes"][name]["flops_per_hypothesis_token"] = per_token
    ids, scores = decode(shapes["check"])  # TensorFlow's own search, on this CPU
    manifest["shapes"]["check"]["tensorflow_ids"] = ids.numpy()[:, 0].tolist()
    manifest["shapes"]["check"]["tensorflow_scores"] = scores.numpy()[:, 0].tolist()
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
    parser.add_argument("--sentences", type=int, default=256, help="timed batch, sentences")
    parser.add_argument("--length", type=int, default=32, help="source tokens, EOS last")
    parser.add_argument("--extra_length", type=int, default=32, help="output <= source + this")
    parser.add_argument("--beam_size", type=int, default=4, help="1: greedy search")
    args = parser.parse_args()
    hparams = get_hparams(args.hparams_set, f"precision={args.precision}")
    shape = (args.sentences, args.length)
    manifest = export(args.out, hparams, args.vocab, shape, args.beam_size, args.extra_length)
    scores = manifest["shapes"]["check"]["tensorflow_scores"]
    print(f"{args.out}: {len(manifest['arguments'])} arguments, TensorFlow scores {scores}")


if __name__ == "__main__":
    main()
