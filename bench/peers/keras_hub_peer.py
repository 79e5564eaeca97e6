"""keras-hub peer: `TransformerEncoder` / `TransformerDecoder` (post-norm, ReLU) with a tied
`ReversibleEmbedding` and sinusoids, trained with Keras' own `compile` / `train_on_batch`.

    .bench/keras_hub/bin/python bench/peers/keras_hub_peer.py --task=train --dtype=float32
    .bench/keras_hub/bin/python bench/peers/keras_hub_peer.py --task=train_xla

train_xla compiles the step with XLA (`compile(jit_compile=True)`); train runs it as a plain
tf.function. bfloat16 is Keras' "mixed_bfloat16" policy.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import protocol as P  # noqa: E402
import tensorflow as tf  # noqa: E402


def build_model() -> keras.Model:
    """{"inputs": [b, s], "decoder_inputs": [b, t]} ids --> logits [b, t, vocab]."""
    source = keras.Input((None,), dtype="int32", name="inputs")
    decoder_inputs = keras.Input((None,), dtype="int32", name="decoder_inputs")
    embedding = keras_hub.layers.ReversibleEmbedding(
        P.VOCAB,
        P.D_MODEL,
        tie_weights=True,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=P.D_MODEL**-0.5),
    )
    positions = keras_hub.layers.SinePositionEncoding()

    def embed(ids):
        x = embedding(ids) * (P.D_MODEL**0.5)
        return x + positions(x)

    layer_args = dict(
        intermediate_dim=P.D_FF, num_heads=P.HEADS, dropout=P.DROPOUT, activation="relu"
    )
    memory = embed(source)
    for _ in range(P.LAYERS):
        memory = keras_hub.layers.TransformerEncoder(**layer_args)(memory)
    x = embed(decoder_inputs)
    for _ in range(P.LAYERS):
        x = keras_hub.layers.TransformerDecoder(**layer_args)(x, memory, use_causal_mask=True)
    logits = keras.layers.Activation("linear", dtype="float32")(embedding(x, reverse=True))
    return keras.Model({"inputs": source, "decoder_inputs": decoder_inputs}, logits)


def smoothed_loss(targets, logits):
    """Label-smoothed cross entropy per token (Keras' sparse loss has no smoothing)."""
    one_hot = tf.one_hot(tf.cast(targets, tf.int32), P.VOCAB)
    return keras.losses.categorical_crossentropy(
        one_hot, logits, from_logits=True, label_smoothing=P.LABEL_SMOOTHING
    )


def main() -> None:
    args = P.parse_args(("train", "train_xla"), ("float32", "bfloat16"))
    if args.dtype == "bfloat16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    keras.utils.set_random_seed(0)
    model = build_model()
    optimizer = keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    model.compile(optimizer, loss=smoothed_loss, jit_compile=args.task == "train_xla")
    source, target = P.batch()
    decoder_inputs = tf.pad(target, [[0, 0], [1, 0]])[:, :-1].numpy()  # shift right
    features = {"inputs": source, "decoder_inputs": decoder_inputs}
    seconds = P.time_calls(
        lambda: model.train_on_batch(features, target),
        args.steps,
        args.warmup,
        f"keras_hub {args.task} {args.dtype}",
    )
    P.report(seconds, version=keras_hub.__version__, keras=keras.__version__)


if __name__ == "__main__":
    main()
