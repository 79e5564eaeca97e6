"""Signatures of unknown words: literal signatures, the same in a graph, and the words
tokenizer's fallback to them."""

import numpy as np
import tensorflow as tf

from t2t_lite.data import build_vocab, load_tokenizer
from t2t_lite.data.word_signatures import word_signatures, word_signatures_py

EXPECTED = {
    "Montalvo": "<unk:C>",
    "teeth": "<unk:c>",
    "completing": "<unk:c_ing>",
    "walked": "<unk:c_ed>",
    "happiness": "<unk:c_ness>",  # "-ness" before "-s"
    "quickly": "<unk:c_ly>",  # "-ly" before "-y"
    "votes": "<unk:c_es>",
    "ran": "<unk:c>",
    "bed": "<unk:c>",  # an ending needs two characters before it
    "NATO": "<unk:A>",
    "U.S.": "<unk:A>",
    "A": "<unk:C>",  # one capital is not "all capitals"
    "CD-ROM": "<unk:A->",
    "IBM's": "<unk:C_s>",
    "3.14": "<unk:d0>",
    "1990s": "<unk:d0_s>",
    "F-16": "<unk:C0->",  # one capital letter
    "well-known": "<unk:c->",
    "--": "<unk:o->",
    "$": "<unk:o>",
    "\u00c4pfel": "<unk:C>",  # upper and lower case beyond ASCII
    "\u00e9lan": "<unk:c>",
    "GR\u00dcNDUNG": "<unk:A>",
}


def test_signatures_of_known_shapes():
    words = list(EXPECTED)
    assert word_signatures_py(words) == list(EXPECTED.values())
    assert word_signatures_py([]) == []


def test_signatures_in_a_graph_equal_eager():
    words = tf.constant(list(EXPECTED))
    graph = tf.function(word_signatures, input_signature=[tf.TensorSpec([None], tf.string)])
    np.testing.assert_array_equal(graph(words).numpy(), word_signatures(words).numpy())


def test_word_tokenizer_falls_back_to_signatures(tmp_path):
    words = ["the", "cat", "<unk:c>", "<unk:c_ing>"]
    build_vocab(str(tmp_path), "words", [], 0, words=words)
    tok = load_tokenizer(str(tmp_path))
    assert tok.signatures
    # "sat" -> <unk:c>, "sitting" -> <unk:c_ing>; "Tom" has no signature here -> <unk> (2).
    assert tok.encode_py("the cat sat sitting Tom") == [3, 4, 5, 6, 2]
    assert tok.decode_py(tok.encode_py("cat sitting")) == "cat <unk:c_ing>"
    plain = tmp_path / "plain"
    build_vocab(str(plain), "words", [], 0, words=["the", "cat"])
    tok = load_tokenizer(str(plain))
    assert not tok.signatures and tok.encode_py("the cat sat") == [3, 4, 2]
