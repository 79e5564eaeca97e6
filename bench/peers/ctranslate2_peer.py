"""CTranslate2 peer: beam-4 and greedy decoding of the benchmark Transformer, float32 and int8.

    .bench/ctranslate2/bin/python bench/peers/ctranslate2_peer.py --task=beam --dtype=int8

The model is described with CTranslate2's own spec API (post-norm `TransformerSpec`, ReLU,
sinusoidal positions, one embedding shared by source, target and the output projection) and
filled with random weights of the same scale as t2t_lite's initializers; speed does not depend
on the values. `min_decoding_length = max_decoding_length` forces every output to the target
length, as the other decoders do by forbidding EOS.
"""

from __future__ import annotations

import tempfile

import ctranslate2
import numpy as np
import protocol as P
from ctranslate2.specs import common_spec, transformer_spec

SPECIALS = ["<blank>", "</s>", "<s>", "<unk>"]  # ids 0..3; pad 0 and EOS 1 as in t2t_lite


def _fill_norm(spec, rng) -> None:
    spec.gamma = np.ones(P.D_MODEL, np.float32)
    spec.beta = np.zeros(P.D_MODEL, np.float32)


def _fill_linear(spec, rng, out_dim: int, in_dim: int) -> None:
    spec.weight = rng.normal(0, in_dim**-0.5, (out_dim, in_dim)).astype(np.float32)
    spec.bias = np.zeros(out_dim, np.float32)


def _fill_attention(spec, rng, self_attention: bool) -> None:
    d = P.D_MODEL
    _fill_norm(spec.layer_norm, rng)
    shapes = [(3 * d, d), (d, d)] if self_attention else [(d, d), (2 * d, d), (d, d)]
    for linear, shape in zip(spec.linear, shapes, strict=True):
        _fill_linear(linear, rng, *shape)


def _fill_ffn(spec, rng) -> None:
    _fill_norm(spec.layer_norm, rng)
    _fill_linear(spec.linear_0, rng, P.D_FF, P.D_MODEL)
    _fill_linear(spec.linear_1, rng, P.D_MODEL, P.D_FF)


def build_model(folder: str) -> None:
    """Writes a random-weight model of the benchmark configuration to `folder`."""
    rng = np.random.default_rng(0)
    spec = transformer_spec.TransformerSpec.from_config(
        (P.LAYERS, P.LAYERS), P.HEADS, pre_norm=False, activation=common_spec.Activation.RELU
    )
    embedding = rng.normal(0, P.D_MODEL**-0.5, (P.VOCAB, P.D_MODEL)).astype(np.float32)
    spec.encoder.embeddings[0].weight = embedding
    spec.decoder.embeddings.weight = embedding
    spec.decoder.projection.weight = embedding  # tied: the same array is stored once
    spec.decoder.projection.bias = np.zeros(P.VOCAB, np.float32)
    for layer in spec.encoder.layer:
        _fill_attention(layer.self_attention, rng, self_attention=True)
        _fill_ffn(layer.ffn, rng)
    for layer in spec.decoder.layer:
        _fill_attention(layer.self_attention, rng, self_attention=True)
        _fill_attention(layer.attention, rng, self_attention=False)
        _fill_ffn(layer.ffn, rng)
    vocabulary = SPECIALS + [f"w{i}" for i in range(len(SPECIALS), P.VOCAB)]
    spec.register_source_vocabulary(vocabulary)
    spec.register_target_vocabulary(vocabulary)
    spec.validate()
    spec.optimize()
    spec.save(folder)


def main() -> None:
    args = P.parse_args(("beam", "greedy"), ("float32", "int8"))
    source, _ = P.batch()
    # Tokens as strings, the EOS dropped (CTranslate2 appends its own); ids 2, 3 are specials
    # here, so they become the first ordinary token.
    tokens = [[f"w{max(i, len(SPECIALS))}" for i in row[:-1]] for row in source]
    beam = P.BEAM if args.task == "beam" else 1
    with tempfile.TemporaryDirectory() as folder:
        build_model(folder)
        translator = ctranslate2.Translator(
            folder,
            device="cpu",
            compute_type=args.dtype,
            inter_threads=1,
            intra_threads=args.threads,
        )
        lengths = []

        def run():
            results = translator.translate_batch(
                tokens,
                beam_size=beam,
                length_penalty=P.ALPHA,
                min_decoding_length=P.TARGET_LENGTH,
                max_decoding_length=P.TARGET_LENGTH,
            )
            lengths.append(sum(len(r.hypotheses[0]) for r in results))

        seconds = P.time_calls(
            run, args.steps, args.warmup, f"ctranslate2 {args.task} {args.dtype}"
        )
    # CTranslate2 returns the tokens without the final EOS; each output has TARGET_LENGTH
    # positions either way, which the check below makes sure of.
    if min(lengths) < P.BATCH * (P.TARGET_LENGTH - 1):
        raise AssertionError(f"outputs shorter than forced: {min(lengths)} tokens per batch")
    P.report(seconds, version=ctranslate2.__version__, output_tokens=lengths[-1])


if __name__ == "__main__":
    main()
