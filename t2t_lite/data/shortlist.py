"""A vocabulary shortlist (Marian's lexical shortlist, CTranslate2's vocabulary map): each batch
is searched over the target tokens that its source tokens translate to, plus the most frequent
target tokens, instead of the whole vocabulary.

The table comes from a data directory's training split. For each source token it keeps the
target tokens seen in the same sentence pairs, best first by the Dice coefficient
2 c(s, t) / (c(s) + c(t)), where c counts the pairs that contain a token (or both). Unlike
c(s, t) / c(s) it does not put the most frequent target tokens first for every source token;
those come in through the frequent list. It is built once per data directory and kept there
(`shortlist.npz`, with the vocabulary's SHA-256), so that every run trained on that data, and
the export of each, shares it.

A search with a shortlist (`t2t_lite.decode.transformer_step`) computes the output projection
and the softmax over the batch's columns alone (`Shortlist.columns`): its ids are positions in
that list, mapped back to the vocabulary when the search ends. The reserved ids come first, so
padding and EOS keep their ids. With every id in the list, the search is the full one
(tests/decode/test_shortlist.py).
"""

from __future__ import annotations

import dataclasses
import io
import os

import numpy as np
import tensorflow as tf
from absl import logging

from t2t_lite.data.pipeline import parse_examples
from t2t_lite.hparams.search_settings import KEEP_FREQUENT, KEEP_PER_SOURCE
from t2t_lite.runtime import atomic_io
from t2t_lite.vocabulary import PAD_ID, RESERVED_TOKENS

FILE = "shortlist.npz"
# Enough pairs to rank a vocabulary's tokens; the first ones of the split are read.
MAX_PAIRS = 2_000_000


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity, as tf.function needs
class Shortlist:
    """frequent: [F] target ids, most frequent first; translations: [source vocab, P] target
    ids per source id, best first, PAD_ID where a source id has fewer."""

    frequent: np.ndarray
    translations: np.ndarray
    target_vocab: int

    def sized(self, frequent: int, per_source: int) -> Shortlist:
        """The first `frequent` frequent ids and `per_source` translations of each source id."""
        return Shortlist(
            self.frequent[:frequent], self.translations[:, :per_source], self.target_vocab
        )

    def columns(self, inputs: tf.Tensor) -> tf.Tensor:
        """Source ids [batch, source] --> the batch's target ids [n], ascending: the reserved
        ids, the frequent ids and the translations of every source id in the batch."""
        ids = tf.concat(
            [
                tf.range(len(RESERVED_TOKENS), dtype=tf.int32),
                tf.constant(self.frequent, tf.int32),
                tf.reshape(tf.gather(tf.constant(self.translations, tf.int32), inputs), [-1]),
            ],
            axis=0,
        )
        present = tf.scatter_nd(ids[:, None], tf.ones_like(ids), [self.target_vocab])
        return tf.cast(tf.where(present > 0)[:, 0], tf.int32)

    def save(self, path: str, vocab_sha256: str) -> None:
        buffer = io.BytesIO()
        np.savez(
            buffer,
            frequent=self.frequent,
            translations=self.translations,
            target_vocab=self.target_vocab,
            vocab_sha256=vocab_sha256,
        )
        atomic_io.write_bytes(path, buffer.getvalue())


def build(
    pairs, source_vocab: int, target_vocab: int, keep_per_source: int = KEEP_PER_SOURCE
) -> Shortlist:
    """The table of (source ids, target ids) `pairs` (sequences of ints)."""
    counts = _cooccurrences(pairs, source_vocab, target_vocab)
    source_counts, target_counts, together = counts
    translations = np.full((source_vocab, keep_per_source), PAD_ID, np.int32)
    for source in range(source_vocab):
        start, end = together.indptr[source], together.indptr[source + 1]
        targets, both = together.indices[start:end], together.data[start:end]
        if not len(targets):
            continue
        dice = 2.0 * both / (source_counts[source] + target_counts[targets])
        # Best first; among equal scores the more frequent pair, then the lower id.
        order = np.lexsort((targets, -both, -dice))[:keep_per_source]
        translations[source, : len(order)] = targets[order]
    by_count = np.lexsort((np.arange(target_vocab), -target_counts))
    frequent = by_count[target_counts[by_count] > 0][:KEEP_FREQUENT].astype(np.int32)
    return Shortlist(frequent, translations, target_vocab)


def _cooccurrences(pairs, source_vocab: int, target_vocab: int):
    """(pairs holding each source id [source vocab], each target id [target vocab], both
    [source vocab, target vocab] sparse CSR)."""
    import scipy.sparse  # noqa: PLC0415 (only building a table needs it)

    def presence(rows, width):
        indptr = np.cumsum([0] + [len(r) for r in rows])
        indices = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        data = np.ones(len(indices), np.float32)
        return scipy.sparse.csr_matrix((data, indices, indptr), shape=(len(rows), width))

    sources, targets = [], []
    for source, target in pairs:
        sources.append(np.unique(np.asarray(source, np.int64)))
        targets.append(np.unique(np.asarray(target, np.int64)))
    s, t = presence(sources, source_vocab), presence(targets, target_vocab)
    together = (s.T @ t).tocsr()
    together.sort_indices()
    return (
        np.asarray(s.sum(axis=0)).ravel(),
        np.asarray(t.sum(axis=0)).ravel(),
        together,
    )


def training_pairs(files: list[str], max_pairs: int = MAX_PAIRS):
    """(inputs, targets) id arrays of the first `max_pairs` examples of TFRecord shards, EOS
    and reserved ids included (they fall in the shortlist anyway)."""
    dataset = tf.data.TFRecordDataset(files).take(max_pairs).batch(4096).map(parse_examples)
    for batch in dataset:
        yield from zip(batch["inputs"].numpy(), batch["targets"].numpy(), strict=True)


def load_or_build(data_dir: str, train_files: list[str], vocab_file: str, vocab_size: int):
    """The table of `data_dir` (its `shortlist.npz`), built from the training shards and kept
    there when missing or made for another vocabulary. A data directory that cannot be written
    keeps it in memory, with a warning."""
    path = os.path.join(data_dir, FILE)
    digest = atomic_io.file_sha256(vocab_file)
    if os.path.exists(path):
        with np.load(path) as stored:
            if str(stored["vocab_sha256"]) == digest:
                return Shortlist(
                    stored["frequent"], stored["translations"], int(stored["target_vocab"])
                )
        logging.warning("%s was built for another vocabulary: building it again", path)
    if not train_files:
        raise ValueError(f"--shortlist: {data_dir} has no training split to build a table from")
    logging.info("building the vocabulary shortlist of %s from its training split", data_dir)
    table = build(training_pairs(train_files), vocab_size, vocab_size)
    try:
        table.save(path, digest)
        logging.info("wrote %s", path)
    except OSError as error:
        logging.warning("could not keep the shortlist in %s (%s): kept in memory", path, error)
    return table
