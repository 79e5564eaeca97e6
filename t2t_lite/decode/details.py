"""What a translation can say about itself: the probability of each output token, a word
alignment to the source, and a sentence confidence.

All three come from one teacher-forced pass of the model over (source, output) after the
search (`forced_pass`), so they are the same whichever search found the output.

- Token probabilities: p(token | source, the tokens before it), EOS included.
- Alignment: for each output token, the source token its encoder-decoder attention weighs most,
  averaged over the heads of one decoder layer: the second-to-last, or the only one (Garg et
  al., 2019, found the penultimate layer aligns best in a 6-layer decoder). Tokens are merged to
  words (`token_words`: a word is a token that does not join the text before it, and the tokens
  that join it); pairs are printed in Pharaoh form `i-j` (source word i, target word j, from
  0), sorted and unique, EOS left out.
- Confidence: `t2t_lite.decode.confidence`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from t2t_lite.decode.confidence import Calibration
from t2t_lite.decode.visualize import token_labels
from t2t_lite.model.layers.masks import padding_mask
from t2t_lite.vocabulary import EOS_ID


def alignment_layer(model) -> int:
    """The decoder layer whose encoder-decoder attention gives the alignment."""
    return max(model.num_decoder_layers - 2, 0)


def forced_pass(model, inputs: tf.Tensor, targets: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """inputs [batch, S], targets [batch, T] (zero-padded) --> (log p of each target token
    [batch, T] float32, zero at padding; encoder-decoder attention of `alignment_layer`
    averaged over heads [batch, T, S] float32)."""
    maps = model.attention_maps(inputs, targets)
    log_probs = tf.nn.log_softmax(tf.cast(maps["logits"], tf.float32), axis=-1)
    token_lp = tf.gather(log_probs, targets, batch_dims=2)
    token_lp = tf.where(padding_mask(targets), token_lp, 0.0)
    cross = maps["decoder_cross"][alignment_layer(model)]  # [batch, heads, T, S]
    return token_lp, tf.reduce_mean(tf.cast(cross, tf.float32), axis=1)


def token_words(joins: np.ndarray, ids: Sequence[int]) -> list[int]:
    """The word (from 0) each id belongs to: a new word starts at every id that does not join
    the text before it (`Tokenizer.joins_previous()[0]`, `joins`); -1 for EOS. The graph of the
    exported `guided` signature counts words the same way."""
    words, count = [], 0
    for token in ids:
        if token == EOS_ID:
            words.append(-1)
            continue
        if not joins[token] or count == 0:
            count += 1
        words.append(count - 1)
    return words


def word_alignment(
    attention: np.ndarray, source_words: Sequence[int], target_words: Sequence[int]
) -> list[tuple[int, int]]:
    """attention [T, S] (rows: output tokens, columns: source tokens) --> sorted unique
    (source word, target word) pairs: each output token to the source token it attends to most,
    EOS on either side left out."""
    columns = [j for j, w in enumerate(source_words) if w >= 0]
    pairs = set()
    if not columns:
        return []
    for t, target_word in enumerate(target_words):
        if target_word < 0 or t >= attention.shape[0]:
            continue
        best = columns[int(np.argmax(attention[t, columns]))]
        pairs.add((source_words[best], target_word))
    return sorted(pairs)


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """[(0, 0), (1, 2)] --> "0-0 1-2"."""
    return " ".join(f"{i}-{j}" for i, j in pairs)


def read_pharaoh(text: str) -> list[tuple[int, int]]:
    """ "0-0 1-2" --> [(0, 0), (1, 2)]."""
    return [(int(i), int(j)) for i, j in (pair.split("-") for pair in text.split())]


class Details(NamedTuple):
    """What `describe` says of one output."""

    tokens: tuple[str, ...]  # the output's pieces, "</s>" for EOS
    token_probs: tuple[float, ...]  # p of each token given the source and the tokens before
    alignment: str  # Pharaoh "i-j" word pairs
    confidence: float  # `Calibration` of the token log-probs


def describe(
    tokenizer,
    joins: np.ndarray,
    calibration: Calibration,
    sources: Sequence[Sequence[int]],
    outputs: Sequence[Sequence[int]],
    token_lp: np.ndarray,
    attention: np.ndarray,
) -> list[Details]:
    """Details of each (source ids, output ids) pair from `forced_pass`'s token_lp [n, T] and
    attention [n, T, S] of the same pairs."""
    found = []
    for r, (source, output) in enumerate(zip(sources, outputs, strict=True)):
        output = [int(t) for t in output if t > 0]
        lps = token_lp[r, : len(output)].astype(np.float64)
        pairs = word_alignment(attention[r], token_words(joins, source), token_words(joins, output))
        found.append(
            Details(
                tuple(token_labels(tokenizer, output)),
                tuple(float(p) for p in np.exp(lps)),
                pharaoh(pairs),
                calibration(lps),
            )
        )
    return found
