"""Word dropout: in training, a source word is now and then read as an unknown word.

A words vocabulary with signatures (`t2t_lite.data.word_signatures`, the parsing problems')
reads a word outside it as its signature, `<unk:c_ing>` and the like. Without word dropout the
signatures learn only from the training words too rare for an id of their own (7 % of GUM's
training words in `make demo-parse`'s vocabulary), while the documents a parser reads later can
hold more (one word in eight on GUM's test documents, tagged at 80 % against 97 % for the known
ones by the demo's model). With `word_dropout` alpha > 0, a training source word seen c times
is read as its signature with probability alpha / (alpha + c), as Kiperwasser and Goldberg
(2016) replaced words by an unknown-word token: rare words most often, frequent ones almost
never, so the signatures also learn from the contexts of known words.

The replacements follow the run's seed and each batch's place in the training stream
(`tf.random.stateless_uniform`), so the stream stays a deterministic function of the seed and a
resumed run that skips the batches already trained sees the same words as an uninterrupted one.
Evaluation and decoding read the words as they are.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from t2t_lite.data.word_signatures import SIGNATURE_PREFIX
from t2t_lite.extras import lazy_import
from t2t_lite.vocabulary import RESERVED_TOKENS

tf = lazy_import("tensorflow")


def source_counts(files: list[str], vocab_size: int) -> np.ndarray:
    """[vocab_size] int64: how often each id occurs in the source ("inputs") of the examples
    in the TFRecord shards `files`."""
    from t2t_lite.data.pipeline import parse_examples

    counts = np.zeros(vocab_size, np.int64)
    for batch in tf.data.TFRecordDataset(files).batch(4096).map(parse_examples):
        ids = batch["inputs"].flat_values.numpy()
        counts += np.bincount(ids, minlength=vocab_size)[:vocab_size]
    return counts


def drop_probabilities(tokens: list[str], counts: np.ndarray, alpha: float) -> np.ndarray:
    """[vocab] float32: alpha / (alpha + c) for each word id seen c > 0 times; 0 for the reserved
    ids, the signatures and the ids never seen in the sources."""
    counts = np.asarray(counts, np.float64)
    reserved = len(RESERVED_TOKENS)
    words = np.array(
        [i >= reserved and not t.startswith(SIGNATURE_PREFIX) for i, t in enumerate(tokens)]
    )
    seen = words & (counts > 0)
    probability = np.where(seen, alpha / (alpha + np.maximum(counts, 1.0)), 0.0)
    return probability.astype(np.float32)


def check_tokenizer(tokenizer, alpha: float) -> None:
    """ValueError unless `tokenizer` is a words vocabulary with signatures, which a word dropped
    by `word_dropout` = alpha is read as."""
    from t2t_lite.data.tokenizers import WordTokenizer

    if not (isinstance(tokenizer, WordTokenizer) and tokenizer.signatures):
        raise ValueError(
            f"hparam word_dropout={alpha:g} reads dropped words as their signatures, which only a "
            f"words vocabulary with signatures of unknown words has (the parsing problems'); "
            f"{tokenizer.path} has none: leave word_dropout at 0 for this problem"
        )


def training_transform(
    tokenizer, files: list[str], alpha: float, seed: int
) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """`dropout_transform` for the training shards `files` read with `tokenizer`, a words
    vocabulary with signatures (ValueError for any other: nothing to read a dropped word as)."""
    check_tokenizer(tokenizer, alpha)
    counts = source_counts(files, tokenizer.vocab_size)
    probability = drop_probabilities(tokenizer.tokens(), counts, alpha)
    return dropout_transform(tokenizer.signature_ids(), probability, seed)


def dropout_transform(
    signature_ids: np.ndarray, probability: np.ndarray, seed: int
) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """A transformation of a stream of batches {"inputs": [b, s], ...}: each input id i becomes
    signature_ids[i] with probability[i], drawn from (seed, the batch's index in the stream)."""
    signature_of = tf.constant(signature_ids, tf.int32)
    dropped_with = tf.constant(probability, tf.float32)

    def drop(index: tf.Tensor, batch: dict) -> dict:
        inputs = batch["inputs"]
        key = tf.stack([tf.constant(seed, tf.int64), tf.cast(index, tf.int64)])
        draws = tf.random.stateless_uniform(tf.shape(inputs), seed=key)
        dropped = draws < tf.gather(dropped_with, inputs)
        return {**batch, "inputs": tf.where(dropped, tf.gather(signature_of, inputs), inputs)}

    def transform(ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.enumerate().map(drop, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    return transform
