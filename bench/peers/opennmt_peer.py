"""OpenNMT-tf peer: `opennmt.models.Transformer` (its own encoder/decoder, post-norm here) with
all embeddings shared, its own label-smoothed loss, trained with Adam in a tf.function step.

    .bench/opennmt/bin/python bench/peers/opennmt_peer.py --task=train --dtype=float32

OpenNMT-tf 2.32 runs on TensorFlow 2.12 (its venv). The vocabulary file holds OpenNMT's three
special tokens and ordinary tokens, 7,999 lines, to which its inputter adds one OOV bucket:
8,000 ids. bfloat16 sets Keras' "mixed_bfloat16" policy before the model is built.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tempfile  # noqa: E402

import numpy as np  # noqa: E402
import opennmt  # noqa: E402
import protocol as P  # noqa: E402
import tensorflow as tf  # noqa: E402


def build_model(vocabulary: str) -> opennmt.models.Transformer:
    model = opennmt.models.Transformer(
        source_inputter=opennmt.inputters.WordEmbedder(embedding_size=P.D_MODEL),
        target_inputter=opennmt.inputters.WordEmbedder(embedding_size=P.D_MODEL),
        num_layers=P.LAYERS,
        num_units=P.D_MODEL,
        num_heads=P.HEADS,
        ffn_inner_dim=P.D_FF,
        dropout=P.DROPOUT,
        attention_dropout=P.DROPOUT,
        ffn_dropout=P.DROPOUT,
        share_embeddings=opennmt.models.EmbeddingsSharingLevel.ALL,
        pre_norm=False,
    )
    params = {"label_smoothing": P.LABEL_SMOOTHING, "average_loss_in_time": False}
    model.initialize({"source_vocabulary": vocabulary, "target_vocabulary": vocabulary}, params)
    return model


def features_and_labels():
    """OpenNMT's feature dicts: source ids; target ids behind <s> (id 1 in its vocabulary) and
    ids_out ending with </s> (id 2)."""
    source, target = (a.astype(np.int64) for a in P.batch())
    source[:, -1] = 2  # </s>
    ids_out = target.copy()
    ids_out[:, -1] = 2
    ids_in = np.concatenate([np.ones((P.BATCH, 1), np.int64), ids_out[:, :-1]], axis=1)
    lengths = np.full([P.BATCH], P.TARGET_LENGTH, np.int32)
    features = {"ids": tf.constant(source), "length": tf.constant(lengths)}
    labels = {
        "ids": tf.constant(ids_in),
        "ids_out": tf.constant(ids_out),
        "length": tf.constant(lengths),
    }
    return features, labels


def main() -> None:
    args = P.parse_args(("train",), ("float32", "bfloat16"))
    if args.dtype == "bfloat16":
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    tf.random.set_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        vocabulary = os.path.join(folder, "vocab.txt")
        words = ["<blank>", "<s>", "</s>"] + [f"w{i}" for i in range(3, P.VOCAB - 1)]
        with open(vocabulary, "w") as f:
            f.write("\n".join(words) + "\n")
        model = build_model(vocabulary)
    optimizer = tf.keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    features, labels = features_and_labels()

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            outputs, _ = model(features, labels=labels, training=True)
            loss, normalizer, _ = model.compute_loss(outputs, labels, training=True)
            loss = loss / tf.cast(normalizer, loss.dtype)
        grads = tape.gradient(loss, model.trainable_variables)
        # TF 2.12 autograph replaces zip with its own, which takes no strict argument.
        optimizer.apply_gradients(zip(grads, model.trainable_variables))  # noqa: B905
        return loss

    seconds = P.time_calls(
        lambda: step().numpy(), args.steps, args.warmup, f"opennmt train {args.dtype}"
    )
    P.report(seconds, version=opennmt.__version__, tensorflow=tf.__version__)


if __name__ == "__main__":
    main()
