"""Signatures of unknown words: a word outside a words vocabulary keeps its shape.

A words vocabulary (`vocab.words.txt`) holds whole words; a word outside it used to be `<unk>`,
whatever it looked like. A parser then has to guess the part of speech of "Montalvo", "teeth"
and "completing" from the context alone. With signatures the vocabulary also lists tokens such
as `<unk:C>` (a capitalized unknown word), `<unk:c_ing>` (lower case, ending in -ing) or
`<unk:d0>` (a number), the classic treatment of rare words in treebank parsers; the tokenizer
maps an unknown word to its signature's id when the vocabulary has that signature, and to
`<unk>` otherwise.

A signature is `<unk:` + shape + flags + suffix + `>`:
  - shape: `A` all capitals (no lower-case letter, at least two letters), `C` an upper-case
    first letter, `c` a lower-case first letter, `d` a digit first, `o` anything else;
  - flags: `0` when the word has a digit, `-` when it has a hyphen;
  - suffix: `_` and the first of `SUFFIXES` that the lower-cased word ends with, after at least
    two other characters; nothing when none does.

Everything is TensorFlow string ops, so datagen, decoding and an exported SavedModel compute
the same signatures.
"""

from __future__ import annotations

from t2t_lite.extras import lazy_import

tf = lazy_import("tensorflow")

SIGNATURE_PREFIX = "<unk:"
# The shape of a word: the first of these (letter, pattern) that matches, else "o". "A": at
# least two capitals and no lower-case letter.
SHAPES = (
    ("A", r"[^\p{Ll}]*\p{Lu}[^\p{Ll}]*\p{Lu}[^\p{Ll}]*"),
    ("C", r"\p{Lu}.*"),
    ("c", r"\p{Ll}.*"),
    ("d", r"[0-9].*"),
)
# Derivational and inflectional endings of English, longer and more telling ones first: the
# first match wins ("-ness" before "-s", "-ity" and "-ly" before "-y").
SUFFIXES = (
    "ment", "ness", "less", "able", "ible", "ing", "ion", "ity", "ive", "ous", "ful", "ist",
    "ism", "ize", "est", "ed", "ly", "er", "al", "ic", "es", "s", "y",
)  # fmt: skip


def _matches(words: tf.Tensor, pattern: str) -> tf.Tensor:
    return tf.strings.regex_full_match(words, pattern)


def word_signatures(words: tf.Tensor) -> tf.Tensor:
    """[n] tf.string words --> [n] tf.string signatures (`<unk:...>`, see the module text)."""
    words = tf.convert_to_tensor(words, tf.string)
    shape = tf.fill(tf.shape(words), "o")
    for letter, pattern in reversed(SHAPES):  # the first pattern that matches wins
        shape = tf.where(_matches(words, pattern), letter, shape)
    digit = tf.where(_matches(words, r".*[0-9].*"), "0", "")
    hyphen = tf.where(_matches(words, r".*-.*"), "-", "")
    lower = tf.strings.lower(words, encoding="utf-8")
    # [n, suffixes]: which endings each word has; the first one that matches is its suffix.
    ends = tf.stack([_matches(lower, r".{2,}" + ending) for ending in SUFFIXES], axis=1)
    first = tf.argmax(tf.cast(ends, tf.int32), axis=1, output_type=tf.int32)
    suffix = tf.where(
        tf.reduce_any(ends, axis=1), "_" + tf.gather(tf.constant(SUFFIXES), first), ""
    )
    return tf.strings.join([SIGNATURE_PREFIX, shape, digit, hyphen, suffix, ">"])


def word_signatures_py(words: list[str]) -> list[str]:
    """`word_signatures` of a Python list (the same ops), for building vocabularies."""
    if not words:
        return []
    return [s.decode("utf-8") for s in word_signatures(tf.constant(words)).numpy()]
