"""keras-hub peer on a GPU: the base model from keras-hub's layers, trained with Keras' own
`compile` / `train_on_batch` on the JAX backend (so every step is XLA-compiled).

    KERAS_BACKEND=jax python3 bench/gpu/keras_hub_jax.py --precision=mixed_bfloat16

The model is bench/peers/keras_hub_peer.py's at the sizes of bench/gpu/base_config.py: post-norm
TransformerEncoder / TransformerDecoder, ReLU, a tied ReversibleEmbedding and sinusoids.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import base_config as C  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import values  # noqa: E402


def build_model() -> keras.Model:
    """{"inputs": [b, s], "decoder_inputs": [b, t]} ids --> logits [b, t, vocab]."""
    source = keras.Input((None,), dtype="int32", name="inputs")
    decoder_inputs = keras.Input((None,), dtype="int32", name="decoder_inputs")
    embedding = keras_hub.layers.ReversibleEmbedding(
        C.VOCAB,
        C.D_MODEL,
        tie_weights=True,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=C.D_MODEL**-0.5),
    )
    positions = keras_hub.layers.SinePositionEncoding()

    def embed(ids):
        x = embedding(ids) * (C.D_MODEL**0.5)
        return x + positions(x)

    layer_args = dict(
        intermediate_dim=C.D_FF, num_heads=C.HEADS, dropout=C.DROPOUT, activation="relu"
    )
    memory = embed(source)
    for _ in range(C.LAYERS):
        memory = keras_hub.layers.TransformerEncoder(**layer_args)(memory)
    x = embed(decoder_inputs)
    for _ in range(C.LAYERS):
        x = keras_hub.layers.TransformerDecoder(**layer_args)(x, memory, use_causal_mask=True)
    logits = keras.layers.Activation("linear", dtype="float32")(embedding(x, reverse=True))
    return keras.Model({"inputs": source, "decoder_inputs": decoder_inputs}, logits)


def smoothed_loss(targets, logits):
    one_hot = keras.ops.one_hot(keras.ops.cast(targets, "int32"), C.VOCAB)
    return keras.losses.categorical_crossentropy(
        one_hot, logits, from_logits=True, label_smoothing=C.LABEL_SMOOTHING
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--precision", default="float32", choices=("float32", "mixed_bfloat16", "mixed_float16")
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    keras.mixed_precision.set_global_policy(args.precision)
    keras.utils.set_random_seed(0)
    model = build_model()
    optimizer = keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    model.compile(optimizer, loss=smoothed_loss, jit_compile=True)  # LossScale for float16
    source, target = values.batch(C.SENTENCES, C.LENGTH, C.VOCAB)
    decoder_inputs = np.pad(target, [[0, 0], [1, 0]])[:, :-1]  # shift right
    features = {"inputs": source, "decoder_inputs": decoder_inputs}
    start = time.perf_counter()
    for _ in range(args.warmup):
        loss = model.train_on_batch(features, target)
    compile_seconds = time.perf_counter() - start
    seconds = []
    for i in range(args.steps):
        start = time.perf_counter()
        loss = float(model.train_on_batch(features, target))  # a host float: waits for the step
        seconds.append(time.perf_counter() - start)
        print(
            f"keras-hub {args.precision} {i + 1}/{args.steps}: {seconds[-1] * 1e3:.1f} ms, "
            f"loss {loss:.4f}",
            file=sys.stderr,
        )
    median = statistics.median(seconds)
    print(
        "RESULT "
        + json.dumps(
            {
                "peer": "keras-hub",
                "backend": "jax",
                "precision": args.precision,
                "steps": args.steps,
                "seconds_per_step": median,
                "target_tokens_per_s": C.TARGET_TOKENS / median,
                "last_loss": loss,
                "warmup_seconds": compile_seconds,
                "keras_hub": keras_hub.__version__,
                "keras": keras.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
