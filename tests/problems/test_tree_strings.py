"""The parsing postprocess in TensorFlow ops (problems/tree_strings.py) against the Python one.

Every check compares `graph_postprocess`, traced with unknown batch and n, with the slow path
`TreebankProblem.postprocess` on the same (source, output) pairs.
"""

from __future__ import annotations

import random

import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from t2t_lite.data.trees import Tree, parse_tree
from t2t_lite.problems import get_problem
from t2t_lite.problems.parsing_trees import linearize
from t2t_lite.problems.tree_strings import graph_postprocess, is_exact

SPECS = [tf.TensorSpec([None], tf.string), tf.TensorSpec([None, None], tf.string)]
GRAPH = tf.function(graph_postprocess, input_signature=SPECS)
EXACT = tf.function(is_exact, input_signature=SPECS)
PROBLEM = get_problem("parsing_trees")

# Normalized trees (as datagen writes them) in several shapes.
TREES = [
    "(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))",  # nested phrases
    "(S (VP (VP (VB Go))) (. !))",  # a unary chain, "!" tagged "."
    "(NP (NP (NP (NN x))))",  # a one-word sentence in a unary chain
    "(TOP (UH Hi))",  # a one-word sentence, the root around a lone pre-terminal
    "(S (NP (NNP Bob)) (VP (VBD said) (, ,) (`` ``) (S (NP (PRP it)) (: --) (VP (VBD rained))) "
    "('' '')) (. .))",  # punctuation
    "(S (NP (CD 1990)) (, --) (NP (NN end)) (: -) (: ;) (NN ...) (. ?))",  # wrong Penn tags
    # punctuation tags on words with letters or digits (any script), quotes, ambiguous marks
    "(S (NN ,) (. hello) (: 1990) (, A-1) (NN \u201c) (NN \u2026) (. \u00e9t\u00e9) "
    "(. \u0663) (`` \u00b2) (POS ') (HYPH -) (: \u2014))",
    "(S (PRN (-LRB- -LRB-) (NP (NN aside)) (-RRB- -RRB-)) (. .))",  # the treebank's brackets
]
# Words with brackets cannot be read by parse_tree; nothing escapes them when written.
PAREN_TREE = Tree(
    "S",
    [
        Tree("PRN", [Tree("-LRB-", ["("]), Tree("NN", ["x"]), Tree("-RRB-", [")"])]),
        Tree("NP", [Tree("NN", [":)"]), Tree("NN", ["a(b)"]), Tree(",", [")c"])]),
    ],
)
WORDS = ["the", "dog", "John", "1990", "\u00e9t\u00e9", "-", "--", ",", ".", "?", "!", "''",
         "``", "'", ";", ":", "...", "(", ")", ":)", "-LRB-", "-RRB-", "\u201c", "\u2026",
         "a)b", "x(", "3.5", '"', "\u2014"]  # fmt: skip
TAGS = ["NN", "DT", "VBZ", "CD", ",", ".", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "POS"]
LABELS = ["S", "NP", "VP", "PP", "SBAR", "PRN", "FRAG", "TOP"]


def _run(sources: list[str], outputs: list[list[str]]) -> tuple[list[list[str]], list[list]]:
    """(graph strings, is_exact) for [batch] sources and [batch][n] outputs."""
    s = tf.constant(sources, tf.string, shape=[len(sources)])
    o = tf.constant(outputs, tf.string, shape=[len(outputs), len(outputs[0]) if outputs else 0])
    got = [[text.decode() for text in row] for row in GRAPH(s, o).numpy()]
    return got, EXACT(s, o).numpy().tolist()


def _expected(sources: list[str], outputs: list[list[str]]) -> list[list[str]]:
    pairs = zip(sources, outputs, strict=True)
    return [[PROBLEM.postprocess(source, o) for o in row] for source, row in pairs]


def _check(sources: list[str], outputs: list[list[str]]) -> list[list[str]]:
    """Asserts the graph equals the Python postprocess and is_exact holds; returns it."""
    got, exact = _run(sources, outputs)
    assert got == _expected(sources, outputs)
    assert all(all(row) for row in exact)
    return got


def _pair(tree: Tree) -> tuple[str, str]:
    return " ".join(tree.leaves()), linearize(tree)


@pytest.mark.parametrize("text", TREES)
def test_literal_trees(text):
    source, output = _pair(parse_tree(text))
    (got,) = _check([source], [[output]])
    # Well formed: the tree comes back over the same words, with fixed punctuation tags.
    assert parse_tree(got[0]).leaves() == source.split()


def test_fixed_punctuation_tags():
    source, output = _pair(parse_tree(TREES[6]))
    assert _check([source], [[output]]) == [
        [
            "(S (, ,) (XX hello) (XX 1990) (XX A-1) (`` \u201c) (: \u2026) (XX \u00e9t\u00e9) "
            "(XX \u0663) (XX \u00b2) (POS ') (HYPH -) (: \u2014))"
        ]
    ]


def test_words_with_brackets_are_not_escaped():
    source, output = _pair(PAREN_TREE)
    # A word beginning with ")" loses the space before it (tree_to_string's " )" -> ")").
    assert _check([source], [[output]]) == [
        ["(S (PRN (-LRB- () (NN x) (-RRB-))) (NP (NN :)) (NN a(b)) (XX)c)))"]
    ]


def test_root_labels_and_closing_labels():
    sources = ["a b", "a b", "a b", "a"]
    outputs = [["( NN (NP NN )NP )"], ["(S NN NN )NP"], ["(S NN (NP NN ) )"]]
    outputs.append(["(X (Y (Z NN )Z )Y )X"])
    assert _check(sources, outputs) == [
        ["(S (NN a) (NP (NN b)))"],
        ["(S (NN a) (NN b))"],
        ["(S (NN a) (NP (NN b)))"],
        ["(X (Y (Z (NN a))))"],
    ]


def test_empty_source_and_empty_outputs():
    sources = ["", "a , b", "Hi .", "x"]
    outputs = [["", " "], ["", "\t"], ["", "(S UH . )S"], ["(S NN )S", ""]]
    assert _check(sources, outputs) == [
        ["(S)", "(S)"],
        ["(S (XX a) (, ,) (XX b))"] * 2,
        ["(S (XX Hi) (. .))", "(S (UH Hi) (. .))"],
        ["(S (NN x))", "(S (XX x))"],
    ]


def test_python_whitespace_separates_words_and_tokens():
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    sources = [f"{space}a{space}b{space}" for space in spaces]
    outputs = [[f"(S{space}NN {space}NN{space})S", ""] for space in spaces]
    assert _check(sources, outputs)[0] == ["(S (NN a) (NN b))", "(S (XX a) (XX b))"]


def test_letters_and_digits_are_pythons_isalnum():
    # Code points as words tagged "," (kept unless the word has a letter or digit, or is
    # punctuation with its own tag), 2000 words a sentence: every fifth code point, and Kawi
    # (Unicode 15), where RE2's \p{L} and Python 3.11's isalnum disagree.
    codes = [*range(0, 0x110000, 5), *range(0x11F00, 0x11F60)]
    chars = [chr(c) for c in codes if not 0xD800 <= c < 0xE000 and not chr(c).isspace()]
    sources, outputs = [], []
    for start in range(0, len(chars), 2000):
        chunk = chars[start : start + 2000]
        sources.append(" ".join(chunk))
        outputs.append(["(S " + " ".join([","] * len(chunk)) + " )S"])
    _check(sources, outputs)


def _random_phrase(rng: random.Random, words: list[str], depth: int = 0) -> Tree:
    """A phrase over `words` (at least one): random groups, pre-terminals and unary chains."""
    children, i = [], 0
    while i < len(words):
        size = 1 if depth > 4 or rng.random() < 0.5 else rng.randint(1, len(words) - i)
        if size == 1 and rng.random() < 0.7:
            children.append(Tree(rng.choice(TAGS), [words[i]]))
        else:
            children.append(_random_phrase(rng, words[i : i + size], depth + 1))
        i += size
    return Tree(rng.choice(LABELS), children)


def test_random_trees_in_batches():
    rng = random.Random(0)
    sources, outputs = [], []
    for _ in range(200):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 15))]
        sources.append(" ".join(words))
        # Three hypotheses over the same words, now and then an empty one (an unfilled slot).
        row = [linearize(_random_phrase(rng, words)) for _ in range(3)]
        outputs.append([o if rng.random() > 0.1 else "" for o in row])
    sources[7], outputs[7] = "", ["", "", ""]
    _check(sources, outputs)
    _check(sources[:50], [row[:1] for row in outputs[:50]])  # n = 1, another batch size


@pytest.mark.parametrize("shape", [(0, 3), (2, 0), (0, 0)])
def test_empty_batches(shape):
    sources = tf.fill([shape[0]], "a b")
    outputs = tf.fill(shape, "(S NN NN )S")
    assert GRAPH(sources, outputs).shape == shape
    assert EXACT(sources, outputs).shape == shape


def test_malformed_outputs_are_not_exact_and_give_the_flat_tree():
    outputs = ["(S NN )S", "(S NN NN NN )S", "(S NN NN", "(S NN NN )S )S", "(A NN )A (B NN )B",
               "NN NN", "(S (X )X NN NN )S", "NN (S NN )S", ")S (S NN NN )S",
               "(S NN )S NN"]  # fmt: skip
    got, exact = _run(["a b"], [outputs])
    assert exact == [[False] * len(outputs)]
    assert got == [["(S (XX a) (XX b))"] * len(outputs)]


def _mutated(rng: random.Random, tokens: list[str]) -> str:
    """`tokens` with one random change, often one that no constraint would allow."""
    i = rng.randrange(len(tokens))
    change = rng.randrange(5)
    if change == 0:  # a closing bracket with another label or none
        tokens = [rng.choice([")", ")X"]) if t[0] == ")" else t for t in tokens]
    elif change == 1 and tokens[i][0] == "(":  # a bare "(" opens the default root label
        tokens[i] = "("
    elif change == 2:
        del tokens[i]
    elif change == 3:
        tokens.insert(i, rng.choice(["(S", ")S", ")", "NN", ","]))
    return " ".join(tokens)


def test_is_exact_is_sound_on_mutated_outputs():
    # Wherever is_exact holds, graph and Python agree, also for outputs a constraint would
    # never give (labels that do not match, a bare "(" or ")"); elsewhere graph is the flat tree.
    rng = random.Random(1)
    sources, outputs = [], []
    for _ in range(100):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
        sources.append(" ".join(words))
        trees = [linearize(_random_phrase(rng, words)).split() for _ in range(5)]
        outputs.append([_mutated(rng, tokens) for tokens in trees])
    got, exact = _run(sources, outputs)
    expected = _expected(sources, outputs)
    flat = _expected(sources, [[""]] * len(sources))
    counts = [0, 0]
    for gs, es, xs, (f,) in zip(got, expected, exact, flat, strict=True):
        for g, e, x in zip(gs, es, xs, strict=True):
            assert g == (e if x else f)
            counts[x] += 1
    assert min(counts) > 100


class _Postprocess(tf.Module):
    @tf.function(input_signature=SPECS)
    def __call__(self, sources: tf.Tensor, outputs: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"trees": graph_postprocess(sources, outputs)}


def test_saved_model_round_trip(tmp_path):
    module = _Postprocess()
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.__call__})
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((tmp_path / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    assert not ops & {"PyFunc", "PyFuncStateless", "EagerPyFunc"}

    sources, outputs = zip(*(_pair(parse_tree(t)) for t in TREES[:4]), strict=True)
    batch = [[o, ""] for o in outputs]
    serve = tf.saved_model.load(str(tmp_path)).signatures["serving_default"]
    trees = serve(sources=tf.constant(sources), outputs=tf.constant(batch))["trees"].numpy()
    assert [[t.decode() for t in row] for row in trees] == _expected(list(sources), batch)
