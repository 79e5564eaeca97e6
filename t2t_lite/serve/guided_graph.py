"""The exported `guided` signature: target prefixes and terminology constraints in, each best
translation's tokens, token probabilities, word alignment and confidence out, in one graph.

  guided  inputs: string [batch], prefixes: string [batch] ("" for none),
          constraints: string [batch, C] (target phrases, "" for none; C at most
          MAX_CONSTRAINTS, else InvalidArgument: TF Serving's 400),
          no_repeat_ngram_size: int32 [batch], repetition_penalty: float32 [batch],
          min_length: int32 [batch], disable_unk: bool [batch] (the repetition and length
          controls per sentence, `t2t_lite.search.controls`; 0, 1, 0 and false search as
          before they existed, bit for bit)
          --> outputs [batch], scores [batch], truncated [batch], tokens [batch, T] (labels,
          "" past the end), token_probs [batch, T] float32 (0 past the end), alignment
          [batch] (Pharaoh "i-j"), confidence [batch] float32

It computes what `Translator.hypotheses(..., guides, details=True)` does in Python, with the
same pieces: `guidance.encode_guides`' rule for what fits, `transformer_step.translate_ids`
with the prefix and terms, `details.forced_pass`, the words of `details.token_words` (from
`Tokenizer.joins_previous`) and the run's `Calibration`, embedded at export.
"""

from __future__ import annotations

import tensorflow as tf

from t2t_lite.decode import transformer_step
from t2t_lite.decode.confidence import Calibration
from t2t_lite.decode.details import forced_pass
from t2t_lite.search.controls import Controls
from t2t_lite.serve.attention_graph import graph_token_labels
from t2t_lite.serve.text_graph import clean_utf8, source_ids, strip_whitespace
from t2t_lite.vocabulary import EOS_ID

# Constraints per sentence the signature takes: each is encoded and tracked by the beam search,
# so a request's count is bounded here as well as by the server in front (t2t-serve's
# --max_constraints, 16 by default).
MAX_CONSTRAINTS = 64


def fitted_guides(tokenizer, prefixes, constraints, max_lengths):
    """Prefix ids [batch, P] and phrase ids [batch, C, T], dropped where they do not fit the
    [batch] maximum output lengths as `guidance.encode_guides` drops them."""
    prefix = tokenizer.encode(prefixes).to_tensor()  # --> [batch, P]
    prefix = tf.cast(prefix, tf.int32)
    room = max_lengths - 1
    prefix_length = tf.reduce_sum(tf.cast(prefix > 0, tf.int32), axis=1)
    fits = prefix_length <= room
    prefix = tf.where(fits[:, None], prefix, 0)
    room -= tf.where(fits, prefix_length, 0)
    shape = tf.shape(constraints)
    flat = tokenizer.encode(tf.reshape(constraints, [-1])).to_tensor()  # --> [batch * C, T]
    phrases = tf.reshape(tf.cast(flat, tf.int32), [shape[0], shape[1], -1])
    lengths = tf.reduce_sum(tf.cast(phrases > 0, tf.int32), axis=2)  # --> [batch, C]
    kept = tf.cumsum(lengths, axis=1) <= room[:, None]
    kept = tf.cast(tf.math.cumprod(tf.cast(kept, tf.int32), axis=1), tf.bool)  # the first misfit
    return prefix, tf.where(kept[:, :, None], phrases, 0)


def token_word_ids(joins: tf.Tensor, ids: tf.Tensor) -> tf.Tensor:
    """ids [batch, n] --> the word of each token [batch, n], -1 for EOS and padding
    (`details.token_words`)."""
    real = ids > EOS_ID
    first = tf.equal(tf.range(tf.shape(ids)[1]), 0)[None, :]
    starts = (~tf.gather(joins, ids) | first) & real
    words = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1
    return tf.where(real, tf.maximum(words, 0), -1)


def pharaoh_strings(attention, source_words, target_words) -> tf.Tensor:
    """attention [batch, T, S] and the words of both sides --> [batch] "i-j ..." strings, the
    pairs of `details.word_alignment`, sorted and unique."""
    scores = tf.where(source_words[:, None, :] >= 0, attention, float("-inf"))
    best = tf.argmax(scores, axis=2, output_type=tf.int32)  # --> [batch, T]
    source = tf.gather(source_words, best, batch_dims=1)
    has_source = tf.reduce_any(source_words >= 0, axis=1, keepdims=True)
    valid = (target_words >= 0) & has_source
    width = tf.shape(target_words)[1] + 1
    big = tf.int32.max
    keys = tf.sort(tf.where(valid, source * width + target_words, big), axis=1)
    first = tf.pad(tf.not_equal(keys[:, 1:], keys[:, :-1]), [[0, 0], [1, 0]], constant_values=True)
    keep = first & (keys < big)
    pairs = tf.strings.join(
        [tf.strings.as_string(keys // width), "-", tf.strings.as_string(keys % width)]
    )
    return tf.strings.reduce_join(tf.ragged.boolean_mask(pairs, keep), axis=1, separator=" ")


def calibrated(calibration: Calibration, mean_log_probs: tf.Tensor) -> tf.Tensor:
    """`Calibration.__call__` in TensorFlow: np.interp over its points, or exp."""
    if not calibration.x:
        return tf.exp(mean_log_probs)
    x = tf.constant(calibration.x, tf.float32)
    y = tf.constant(calibration.y, tf.float32)
    upper = tf.searchsorted(x, mean_log_probs, side="right")  # x[upper - 1] <= v < x[upper]
    inside = tf.clip_by_value(upper, 1, tf.size(x) - 1)
    x0, x1 = tf.gather(x, inside - 1), tf.gather(x, inside)
    y0, y1 = tf.gather(y, inside - 1), tf.gather(y, inside)
    between = y0 + (y1 - y0) * (mean_log_probs - x0) / tf.maximum(x1 - x0, 1e-12)
    value = tf.where(upper == 0, y[0], tf.where(upper >= tf.size(x), y[-1], between))
    return tf.clip_by_value(value, 0.0, 1.0)


class GuidedSignature:
    """`guided` over `ServingFunctions` (`t2t_lite.serve.export`) and the run's calibration."""

    def __init__(self, functions, calibration: Calibration):
        self.functions = functions
        joins, continuations = functions.tokenizer.joins_previous()
        self.joins, self.continuations = tf.constant(joins), tf.constant(continuations)
        self.calibration = calibration

    def __call__(
        self,
        inputs,
        prefixes,
        constraints,
        no_repeat_ngram_size,
        repetition_penalty,
        min_length,
        disable_unk,
    ) -> dict[str, tf.Tensor]:
        f, s = self.functions, self.functions.settings
        within = tf.debugging.assert_less_equal(
            tf.shape(constraints)[1],
            MAX_CONSTRAINTS,
            message=f"constraints: more than {MAX_CONSTRAINTS} per sentence",
        )
        positive = tf.debugging.assert_positive(
            repetition_penalty, message="repetition_penalty: must be > 0 (1: off)"
        )
        with tf.control_dependencies([within, positive]):
            constraints = tf.identity(constraints)
        text = strip_whitespace(clean_utf8(tf.convert_to_tensor(inputs, tf.string)))
        ids, truncated = source_ids(f.tokenizer.encode(text), f.max_input_length)
        rows = tf.where(tf.strings.length(text) > 0)[:, 0]
        clean = strip_whitespace(clean_utf8(prefixes))
        phrases_text = strip_whitespace(clean_utf8(constraints))
        controls = Controls(no_repeat_ngram_size, repetition_penalty, min_length, disable_unk)

        def search():
            kept = tf.gather(ids, rows)
            lengths = transformer_step.output_lengths(f.model, kept, s.extra_length)
            prefix, terms = fitted_guides(
                f.tokenizer, tf.gather(clean, rows), tf.gather(phrases_text, rows), lengths
            )
            found = transformer_step.translate_ids(
                f.model,
                kept,
                beam_size=s.beam_size,
                alpha=s.alpha,
                extra_length=s.extra_length,
                constraint=f.constraint,
                prefix=prefix,
                terms=terms,
                continuations=self.continuations,
                controls=Controls(*(tf.gather(value, rows) for value in controls)),
            )
            return self._describe(kept, found.ids[:, 0], found.scores[:, 0], rows, text)

        def nothing():
            return self._empty()

        found = tf.cond(tf.size(rows) > 0, search, nothing)
        batch = tf.shape(ids, tf.int64)[:1]
        scattered = {
            name: tf.scatter_nd(
                rows[:, None], value, tf.concat([batch, tf.shape(value, tf.int64)[1:]], 0)
            )
            for name, value in found.items()
        }
        return {**scattered, "truncated": truncated}

    def _describe(self, source, output_ids, scores, rows, text) -> dict[str, tf.Tensor]:
        f = self.functions
        token_lp, attention = forced_pass(f.model, source, output_ids)
        real = output_ids > 0
        count = tf.maximum(tf.reduce_sum(tf.cast(real, tf.float32), axis=1), 1.0)
        alignment = pharaoh_strings(
            attention, token_word_ids(self.joins, source), token_word_ids(self.joins, output_ids)
        )
        outputs = f.tokenizer.decode(output_ids)
        if f.postprocess is not None:
            outputs = f.postprocess(tf.gather(text, rows), outputs[:, None])[:, 0]
        return {
            "outputs": outputs,
            "scores": scores,
            "tokens": graph_token_labels(f.tokenizer, output_ids),
            "token_probs": tf.where(real, tf.exp(token_lp), 0.0),
            "alignment": alignment,
            "confidence": calibrated(self.calibration, tf.reduce_sum(token_lp, 1) / count),
        }

    @staticmethod
    def _empty() -> dict[str, tf.Tensor]:
        return {
            "outputs": tf.zeros([0], tf.string),
            "scores": tf.zeros([0], tf.float32),
            "tokens": tf.zeros([0, 0], tf.string),
            "token_probs": tf.zeros([0, 0], tf.float32),
            "alignment": tf.zeros([0], tf.string),
            "confidence": tf.zeros([0], tf.float32),
        }

    @staticmethod
    def input_signature() -> list[tf.TensorSpec]:
        return [
            tf.TensorSpec([None], tf.string, name="inputs"),
            tf.TensorSpec([None], tf.string, name="prefixes"),
            tf.TensorSpec([None, None], tf.string, name="constraints"),
            tf.TensorSpec([None], tf.int32, name="no_repeat_ngram_size"),
            tf.TensorSpec([None], tf.float32, name="repetition_penalty"),
            tf.TensorSpec([None], tf.int32, name="min_length"),
            tf.TensorSpec([None], tf.bool, name="disable_unk"),
        ]
