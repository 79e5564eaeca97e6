"""Tokenizers: in-graph encode/decode round trips, reserved ids, EOS trimming, Python paths."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.data import (
    SentencePieceTokenizer,
    WordPieceTokenizer,
    WordTokenizer,
    build_vocab,
    load_tokenizer,
    trim_ids,
)
from t2t_lite.data.vocab_builders import learn_wordpiece, word_counts

CORPUS = [
    "The cat sat on the mat.",
    "A dog barked at the cat, loudly.",
    "Die Katze sa\u00df auf der Matte.",
    "Le chien a aboy\u00e9 apr\u00e8s le chat.",
    "Numbers like 42 and 3.14 appear too.",
] * 40


def test_trim_ids_stops_at_first_eos_or_pad():
    ids = tf.constant([[5, 6, 1, 7], [3, 0, 4, 4], [1, 9, 9, 9], [4, 5, 6, 7]])
    assert trim_ids(ids).to_list() == [[5, 6], [3], [], [4, 5, 6, 7]]
    ragged = tf.ragged.constant([[5, 1, 6], [7]])
    assert trim_ids(ragged).to_list() == [[5], [7]]


def test_word_tokenizer(tmp_path):
    build_vocab(str(tmp_path), "words", [], 0, words=["a", "b", "c"])
    tok = load_tokenizer(str(tmp_path))
    assert isinstance(tok, WordTokenizer) and tok.vocab_size == 6
    ids = tok.encode(tf.constant(["a c  b", "zzz a"]))
    assert ids.dtype == tf.int32 and ids.to_list() == [[3, 5, 4], [2, 3]]
    decoded = tok.decode(tf.constant([[3, 5, 1, 4], [4, 0, 0, 0]]))
    np.testing.assert_array_equal(decoded.numpy(), [b"a c", b"b"])
    assert tok.encode_py("b a") == [4, 3] and tok.decode_py([5, 3, 1, 4]) == "c a"


@pytest.mark.parametrize(
    "vocab_type, cls", [("bpe", SentencePieceTokenizer), ("wordpiece", WordPieceTokenizer)]
)
def test_subword_round_trip(tmp_path, vocab_type, cls):
    build_vocab(str(tmp_path), vocab_type, iter(CORPUS), 120)
    tok = load_tokenizer(str(tmp_path))
    assert isinstance(tok, cls)
    assert 30 < tok.vocab_size <= 130
    sentences = tf.constant(CORPUS[:5])
    ids = tok.encode(sentences)
    flat = ids.flat_values.numpy()
    # Reserved ids never come out of encode; all ids are inside the vocabulary.
    assert flat.min() > 2 and flat.max() < tok.vocab_size
    np.testing.assert_array_equal(tok.decode(ids).numpy(), sentences.numpy())
    # EOS and padding end the decoded text, dense input works too.
    dense = ids.to_tensor()
    with_eos = tf.concat([dense[:, :2], tf.ones_like(dense[:, :1]), dense[:, 2:]], axis=1)
    first_two = tok.decode(ids[:, :2])
    np.testing.assert_array_equal(tok.decode(with_eos).numpy(), first_two.numpy())
    assert tok.encode_py(CORPUS[1]) == ids[1].numpy().tolist()
    assert tok.decode_py(tok.encode_py(CORPUS[3]) + [1, 7, 7]) == CORPUS[3]


def test_wordpiece_unknown_character_is_unk(tmp_path):
    build_vocab(str(tmp_path), "wordpiece", iter(CORPUS), 120)
    tok = load_tokenizer(str(tmp_path))
    assert tok.encode_py("\u4e2d") == [2]


def test_load_tokenizer_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no vocabulary in .*run t2t-datagen"):
        load_tokenizer(str(tmp_path))
    build_vocab(str(tmp_path), "words", [], 0, words=["a"])
    build_vocab(str(tmp_path), "wordpiece", iter(CORPUS), 100)
    with pytest.raises(FileNotFoundError, match="several vocabularies"):
        load_tokenizer(str(tmp_path))


@pytest.mark.parametrize("vocab_type", ["words", "bpe", "wordpiece"])
def test_tokenizer_survives_a_saved_model(tmp_path, vocab_type):
    """Export reuses the tokenizer in-graph: save it in a SavedModel, reload, same ids and text."""
    # "<unk:c>": the words tokenizer's signature fallback is in the graph too ("sat", "on").
    words = ["the", "cat", "mat.", "<unk:c>"] if vocab_type == "words" else None
    build_vocab(str(tmp_path / "vocab"), vocab_type, iter(CORPUS), 120, words=words)
    tok = load_tokenizer(str(tmp_path / "vocab"))
    module = tf.Module()
    module.tokenizer = tok
    module.round_trip = tf.function(
        lambda s: tok.decode(tok.encode(s).to_tensor()),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    text = tf.constant(["the cat sat on the mat.", "the mat."])
    expected = tok.decode(tok.encode(text).to_tensor()).numpy()
    np.testing.assert_array_equal(loaded.round_trip(text).numpy(), expected)
    if vocab_type != "words":
        np.testing.assert_array_equal(expected, text.numpy())
    else:
        np.testing.assert_array_equal(expected, [b"the cat <unk:c> <unk:c> the mat.", b"the mat."])


def test_wordpiece_size_never_exceeds_the_target():
    counts = word_counts(CORPUS)
    sizes = {n: len(learn_wordpiece(counts, n)) for n in (80, 120, 400)}
    # 107 pieces is everything this corpus offers at a count threshold of 1.
    assert sizes == {80: 80, 120: 107, 400: 107}
    with pytest.raises(ValueError, match="characters of the text need more than 20 tokens"):
        learn_wordpiece(counts, 20)
