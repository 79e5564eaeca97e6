"""In-graph tokenizers with one interface, built on tensorflow-text.

Every tokenizer maps a batch of strings to int32 ids and back with TensorFlow ops only, so the
same object serves datagen, decoding and the exported SavedModel. Ids 0, 1 and 2 are reserved for
padding, end of sentence and unknown pieces in every vocabulary; `encode` never appends EOS and
`decode` stops at the first EOS or padding id.

The vocabulary lives in one file in the data directory; its name says its type:
`vocab.bpe.model` (SentencePiece BPE), `vocab.wordpiece.txt` (WordPiece), `vocab.words.txt`
(whole words, for symbol problems). `load_tokenizer(data_dir)` finds it.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from t2t_lite.data.word_signatures import SIGNATURE_PREFIX, word_signatures
from t2t_lite.vocabulary import EOS_ID, PAD_ID, RESERVED_TOKENS, UNK_ID

VOCAB_FILES = {
    "bpe": "vocab.bpe.model",
    "wordpiece": "vocab.wordpiece.txt",
    "words": "vocab.words.txt",
}


def trim_ids(ids: tf.Tensor | tf.RaggedTensor) -> tf.RaggedTensor:
    """[batch, length] int ids --> ragged [batch, (n)]: the ids before the first EOS or pad."""
    if isinstance(ids, tf.RaggedTensor):
        ids = ids.to_tensor(default_value=PAD_ID)
    ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
    # A token survives while every token so far is a real one (neither PAD 0 nor EOS 1).
    real = tf.cast(ids > EOS_ID, tf.int32)
    lengths = tf.reduce_sum(tf.math.cumprod(real, axis=1), axis=1)
    return tf.RaggedTensor.from_tensor(ids, lengths=lengths)


class Tokenizer(tf.Module):
    """Strings <--> int32 ids, in-graph. Subclasses implement `_encode` and `_decode`."""

    def __init__(self, path: str, vocab_size: int, name: str | None = None):
        super().__init__(name=name)
        self.path = path
        self.vocab_size = int(vocab_size)

    def encode(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """[batch] tf.string --> ragged int32 [batch, (tokens)], without EOS."""
        return self._encode(tf.convert_to_tensor(strings, tf.string))

    def decode(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """[batch, length] ids (dense or ragged), cut at the first EOS/pad --> [batch] tf.string."""
        return self._decode(trim_ids(ids))

    def encode_py(self, text: str) -> list[int]:
        """One Python string --> its ids (the in-graph op, so both paths always agree)."""
        return self.encode(tf.constant([text]))[0].numpy().tolist()

    def decode_py(self, ids: list[int]) -> str:
        """Ids --> text, stopping at the first EOS or padding id."""
        ids_tensor = tf.constant([list(ids) or [PAD_ID]], tf.int32)
        return self.decode(ids_tensor)[0].numpy().decode("utf-8")

    def joins_previous(self) -> tuple[np.ndarray, np.ndarray]:
        """([vocab_size] bool, [vocab_size] bool): the ids whose text joins the text before
        them with no space between (as "ing" after "walk", or "." after "end"), and those of
        them that start with a letter or digit (`word_continuations`). Found by decoding every
        id after a one-letter word in one batch, so every tokenizer answers alike; padding and
        EOS join nothing."""
        ids = np.arange(self.vocab_size, dtype=np.int32)
        word = self.encode_py("a")[-1:] or [UNK_ID]
        alone = self.decode(tf.constant(ids[:, None])).numpy()
        after = self.decode(tf.constant([[*word, i] for i in ids], tf.int32)).numpy()
        base = self.decode(tf.constant([word], tf.int32)).numpy()[0]
        joins = np.array([a == base + t for a, t in zip(after, alone, strict=True)])
        joins[[PAD_ID, EOS_ID]] = False
        letter = np.array([t[:1].decode("utf-8", "replace").isalnum() for t in alone])
        return joins, joins & letter

    def word_continuations(self) -> np.ndarray:
        """[vocab_size] bool: the ids that continue the word before them (`joins_previous`)."""
        return self.joins_previous()[1]

    def _encode(self, strings: tf.Tensor) -> tf.RaggedTensor:
        raise NotImplementedError

    def _decode(self, ids: tf.RaggedTensor) -> tf.Tensor:
        raise NotImplementedError


def read_vocab_list(path: str) -> list[str]:
    """The tokens of a vocabulary file, one per line, id order (reserved tokens first)."""
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n") for line in f]
    if len(tokens) < len(RESERVED_TOKENS):
        raise ValueError(
            f"{path}: a vocabulary needs at least the reserved tokens {RESERVED_TOKENS}"
        )
    return tokens


class WordTokenizer(Tokenizer):
    """Whitespace-separated words looked up in a fixed list. An unknown word maps to its
    signature's id when the list has signatures (`t2t_lite.data.word_signatures`, which parsing
    vocabularies include), else to id 2."""

    def __init__(self, path: str):
        tokens = read_vocab_list(path)
        super().__init__(path, len(tokens), name="word_tokenizer")
        self._tokens = tf.constant(tokens)
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                self._tokens, tf.range(len(tokens), dtype=tf.int32)
            ),
            default_value=UNK_ID,
        )
        self.signatures = any(token.startswith(SIGNATURE_PREFIX) for token in tokens)

    def tokens(self) -> list[str]:
        """The list's tokens in id order."""
        return [token.decode("utf-8") for token in self._tokens.numpy()]

    def signature_ids(self) -> np.ndarray:
        """[vocab] int32: the id of each token of the list read as an unknown word, its
        signature's (UNK_ID where the list lacks that signature; `t2t_lite.data.word_dropout`)."""
        return self._table.lookup(word_signatures(self._tokens)).numpy()

    def _encode(self, strings: tf.Tensor) -> tf.RaggedTensor:
        words = tf.strings.split(strings)  # --> ragged [batch, (words)]
        return tf.ragged.map_flat_values(self._lookup, words)

    def _lookup(self, words: tf.Tensor) -> tf.Tensor:
        ids = self._table.lookup(words)  # [n]
        if not self.signatures:
            return ids
        return tf.where(ids == UNK_ID, self._table.lookup(word_signatures(words)), ids)

    def _decode(self, ids: tf.RaggedTensor) -> tf.Tensor:
        words = tf.ragged.map_flat_values(tf.gather, self._tokens, ids)
        return tf.strings.reduce_join(words, axis=-1, separator=" ")


class SentencePieceTokenizer(Tokenizer):
    """SentencePiece (BPE) model file read by `tensorflow_text.SentencepieceTokenizer`."""

    def __init__(self, path: str):
        with open(path, "rb") as f:
            model = f.read()
        self._sp = tf_text.SentencepieceTokenizer(model=model, out_type=tf.int32)
        super().__init__(path, int(self._sp.vocab_size()), name="sentencepiece_tokenizer")

    def _encode(self, strings: tf.Tensor) -> tf.RaggedTensor:
        return self._sp.tokenize(strings)

    def _decode(self, ids: tf.RaggedTensor) -> tf.Tensor:
        return self._sp.detokenize(ids)


class WordPieceTokenizer(Tokenizer):
    """WordPiece over whitespace-separated words with `tensorflow_text.FastWordpieceTokenizer`.

    Words are split at whitespace only (not at punctuation), so "world." becomes "world" "##.":
    decoding joins pieces back exactly and words with one space, which keeps detokenized output
    fit for sacreBLEU.
    """

    def __init__(self, path: str):
        tokens = read_vocab_list(path)
        super().__init__(path, len(tokens), name="wordpiece_tokenizer")
        self._wp = tf_text.FastWordpieceTokenizer(
            vocab=tokens,
            suffix_indicator="##",
            unknown_token=RESERVED_TOKENS[UNK_ID],
            no_pretokenization=True,
            support_detokenization=True,
            token_out_type=tf.int32,
        )

    def _encode(self, strings: tf.Tensor) -> tf.RaggedTensor:
        words = tf.strings.split(strings)  # --> ragged [batch, (words)]
        return self._wp.tokenize(words).merge_dims(1, 2)  # [batch, (words), (pieces)] --> [b, (n)]

    def _decode(self, ids: tf.RaggedTensor) -> tf.Tensor:
        return self._wp.detokenize(ids)


_CLASSES = {"bpe": SentencePieceTokenizer, "wordpiece": WordPieceTokenizer, "words": WordTokenizer}


def vocab_path(data_dir: str, vocab_type: str) -> str:
    """Where a vocabulary of this type lives in `data_dir`."""
    if vocab_type not in VOCAB_FILES:
        raise ValueError(f"unknown vocab type {vocab_type!r}; expected one of {list(VOCAB_FILES)}")
    return os.path.join(data_dir, VOCAB_FILES[vocab_type])


def load_tokenizer(data_dir: str) -> Tokenizer:
    """Loads the one vocabulary file found in `data_dir` as its tokenizer."""
    found = {
        t: p for t, name in VOCAB_FILES.items() if os.path.isfile(p := os.path.join(data_dir, name))
    }
    if len(found) != 1:
        what = "no vocabulary" if not found else f"several vocabularies {sorted(found)}"
        names = ", ".join(VOCAB_FILES.values())
        raise FileNotFoundError(
            f"{what} in {data_dir} (expected exactly one of {names}); run t2t-datagen first"
        )
    ((vocab_type, path),) = found.items()
    return _CLASSES[vocab_type](path)


__all__ = [
    "RESERVED_TOKENS",
    "UNK_ID",
    "VOCAB_FILES",
    "SentencePieceTokenizer",
    "Tokenizer",
    "WordPieceTokenizer",
    "WordTokenizer",
    "load_tokenizer",
    "trim_ids",
    "vocab_path",
]
