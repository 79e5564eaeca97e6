"""TF Model Garden peer: `official.nlp.modeling.models.Seq2SeqTransformer`, training and its beam
search.

    .bench/model_garden/bin/python bench/peers/model_garden_peer.py --task=train --dtype=bfloat16
    .bench/model_garden/bin/python bench/peers/model_garden_peer.py --task=beam   # or greedy

Encoder and decoder are the Model Garden's `TransformerEncoder` / `TransformerDecoder` with
`norm_first=False` (post-norm, as the paper and t2t_lite). Training is a tf.function with a
GradientTape, label-smoothed cross entropy and Adam, the way the Model Garden's own translation
task trains it. Decoding calls the model without targets (its cached `sequence_beam_search`,
greedy is beam 1); EOS gets -1e9 added to its logit so that every output runs to the target
length, as t2t_lite's benchmark does.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import protocol as P  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402
from official.nlp.modeling import models  # noqa: E402


class ForcedLengthTransformer(models.Seq2SeqTransformer):
    """Seq2SeqTransformer whose decoding step can never choose EOS."""

    def _get_symbols_to_logits_fn(self, max_decode_length):
        step = super()._get_symbols_to_logits_fn(max_decode_length)
        no_eos = -1e9 * tf.one_hot(P.EOS_ID, P.VOCAB, dtype=self.compute_dtype)

        def forced(ids, i, cache):
            logits, cache = step(ids, i, cache)
            return logits + no_eos, cache

        return forced


def build_model(beam: int) -> models.Seq2SeqTransformer:
    layer_args = dict(
        num_layers=P.LAYERS,
        num_attention_heads=P.HEADS,
        intermediate_size=P.D_FF,
        dropout_rate=P.DROPOUT,
        norm_first=False,
    )
    return ForcedLengthTransformer(
        vocab_size=P.VOCAB,
        embedding_width=P.D_MODEL,
        dropout_rate=P.DROPOUT,
        decode_max_length=P.TARGET_LENGTH,
        beam_size=beam,
        alpha=P.ALPHA,
        encoder_layer=models.TransformerEncoder(**layer_args),
        decoder_layer=models.TransformerDecoder(**layer_args),
    )


def smoothed_loss(logits, targets):
    """Mean label-smoothed cross entropy over the (unpadded) target tokens."""
    one_hot = tf.one_hot(targets, P.VOCAB)
    return tf.reduce_mean(
        tf_keras.losses.categorical_crossentropy(
            one_hot, logits, from_logits=True, label_smoothing=P.LABEL_SMOOTHING
        )
    )


def train(args, source, target) -> None:
    model = build_model(P.BEAM)
    optimizer = tf_keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    features = {"inputs": tf.constant(source), "targets": tf.constant(target)}

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = smoothed_loss(model(features, training=True), features["targets"])
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    seconds = P.time_calls(
        lambda: step().numpy(), args.steps, args.warmup, f"model_garden train {args.dtype}"
    )
    P.report(seconds, version=tf.__version__)


def decode(args, source) -> None:
    model = build_model(P.BEAM if args.task == "beam" else 1)
    search = tf.function(lambda inputs: model({"inputs": inputs})["outputs"])
    inputs = tf.constant(source)
    lengths = []

    def run():
        ids = search(inputs).numpy()  # --> [batch, length]; id 0 is a token it may choose
        lengths.append(ids.shape[0] * ids.shape[1])

    seconds = P.time_calls(run, args.steps, args.warmup, f"model_garden {args.task}")
    if min(lengths) != P.TARGET_TOKENS:
        raise AssertionError(f"outputs not of the forced length: {min(lengths)} tokens")
    P.report(seconds, version=tf.__version__, output_tokens=lengths[-1])


def main() -> None:
    args = P.parse_args(("train", "beam", "greedy"), ("float32", "bfloat16"))
    if args.dtype == "bfloat16":
        tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    tf.random.set_seed(0)
    source, target = P.batch()
    if args.task == "train":
        train(args, source, target)
    else:
        decode(args, source)


if __name__ == "__main__":
    main()
