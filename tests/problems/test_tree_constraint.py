"""Constrained decoding of linearized trees: the mask against a reference written from the
definition of a well-formed tree, and searches with a random model that only return trees."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf
from decoding_helpers import np_log_softmax, tiny_model

from t2t_lite.decode import transformer_step
from t2t_lite.problems.parsing_trees import delinearize, linearize
from t2t_lite.problems.tree_constraint import TreeConstraint, token_kinds

VOCAB = ["<pad>", "<EOS>", "<unk>", "(S", ")S", "(NP", ")NP", "NN", "VB", ")XX", "dog"]
OUTPUT = 10  # logits cover ids 0..9; "dog" is a source word only


def reference_allowed(prefix: list[str], words: int, max_depth: int) -> set[str]:
    """What may follow `prefix`, by trying each token: a prefix is good when it can still be
    completed into one tree with exactly `words` tags (brackets matched, no empty phrase)."""

    def completable(tokens: list[str]) -> bool:
        stack, tags, last = [], 0, None
        for position, token in enumerate(tokens):
            if token.startswith("("):
                if (position > 0 and not stack) or len(stack) == max_depth:
                    return False  # a second root, or too deep
                stack.append(token[1:])
            elif token.startswith(")"):
                if not stack or stack[-1] != token[1:] or last.startswith("("):
                    return False  # nothing open, another label, or an empty phrase
                stack.pop()
            else:
                if not stack:
                    return False  # a tag outside the root phrase
                tags += 1
            last = token
        # Still completable: no more tags than words; an open phrase needs a tag to come if empty.
        needed = 1 if tokens and tokens[-1].startswith("(") else 0
        if not tokens:
            return words > 0
        return tags + needed <= words and (stack or tags == words)

    if not completable(prefix):
        return set()
    out = set()
    ended = prefix and completable(prefix) and _complete(prefix, words)
    if ended:
        out.add("<EOS>")
    for token in VOCAB[3:OUTPUT]:
        if token == ")XX":
            continue  # no "(XX" in the vocabulary
        if completable(prefix + [token]):
            out.add(token)
    return out


def _complete(tokens: list[str], words: int) -> bool:
    depth = 0
    for token in tokens:
        depth += token.startswith("(") - token.startswith(")")
    tags = sum(not t.startswith(("(", ")")) for t in tokens)
    return depth == 0 and tags == words


def _state_after(constraint, prefix, words, max_length=99):
    inputs = tf.constant([[9] * words + [1]], tf.int32)
    state = constraint.initial_state(inputs, max_length)
    state = constraint.update(state, tf.constant([0]))  # the start id
    for token in prefix:
        state = constraint.update(state, tf.constant([VOCAB.index(token)]))
    return state


def test_token_kinds():
    kinds, opener = token_kinds(VOCAB, 3)
    assert kinds == [0, 4, 0, 1, 2, 1, 2, 3, 3, 0, 3]
    assert opener == [-1, -1, -1, -1, 3, -1, 5, -1, -1, -1, -1]


@pytest.mark.parametrize("words", [1, 2, 3])
def test_mask_equals_reference_on_every_prefix(words):
    """Every prefix of up to 6 tokens the constraint allows, for sentences of 1-3 words."""
    constraint = TreeConstraint(VOCAB, reserved=3, max_depth=3)
    # Each prefix's state grows from its parent's by one update, as a search feeds it.
    frontier, checked = [([], _state_after(constraint, [], words))], 0
    for _ in range(7):
        grown = []
        for prefix, state in frontier:
            mask = constraint.allowed(state, OUTPUT).numpy()[0]
            got = {VOCAB[i] for i in np.flatnonzero(mask)}
            assert got == reference_allowed(prefix, words, 3), prefix
            checked += 1
            for t in sorted(got - {"<EOS>"}):
                child = constraint.update(state, tf.constant([VOCAB.index(t)]))
                grown.append(([*prefix, t], child))
        frontier = grown
    assert checked > 50


def test_phrases_open_only_while_the_shortest_completion_fits():
    """Two words, at most 5 tokens with EOS: `(S t t )S EOS` just fits, a nested phrase not."""
    constraint = TreeConstraint(VOCAB, reserved=3)

    def allowed(prefix, max_length):
        state = _state_after(constraint, prefix, 2, max_length)
        return {VOCAB[i] for i in np.flatnonzero(constraint.allowed(state, OUTPUT).numpy()[0])}

    assert allowed([], 5) == {"(S", "(NP"}
    assert allowed(["(S"], 5) == {"NN", "VB"}
    assert allowed(["(S"], 7) == {"NN", "VB", "(S", "(NP"}
    assert allowed(["(S", "NN"], 6) == {"NN", "VB"}
    assert allowed(["(S", "NN"], 7) == {"NN", "VB", "(S", "(NP"}
    assert allowed([], 4) == {"<EOS>"}  # no tree fits: the empty output (repaired later)


def test_tag_dictionary_and_phrases_in_a_row():
    """Word 9 (")XX", standing in for a word) may only be VB; any other id any tag. At most two
    phrases open in a row."""
    table = np.zeros([len(VOCAB), 9], bool)  # tags are ids 7 and 8
    table[:, [7, 8]] = True
    table[9, 7] = False
    constraint = TreeConstraint(VOCAB, reserved=3, max_opens=2, tag_table=table)
    inputs = tf.constant([[9, 10, 9, 1]], tf.int32)  # words: VB-only, any, VB-only
    state = constraint.update(constraint.initial_state(inputs, 99), tf.constant([0]))

    def allowed():
        return {VOCAB[i] for i in np.flatnonzero(constraint.allowed(state, OUTPUT).numpy()[0])}

    for token, expected in [
        ("(S", {"(S", "(NP", "VB"}),
        ("(NP", {"VB"}),  # two phrases opened in a row: a tag, and only word 9's
        ("VB", {"(S", "(NP", "NN", "VB", ")NP"}),  # word 10: any tag
        ("NN", {"(S", "(NP", "VB", ")NP"}),  # word 9 again
        (")NP", {"(S", "(NP", "VB"}),
        ("VB", {")S"}),
    ]:
        state = constraint.update(state, tf.constant([VOCAB.index(token)]))
        assert allowed() == expected, token


def test_stuck_row_may_end():
    """A hypothesis already past the words (the search gave it -inf) is never left with no
    token at all, which would make its log-probs NaN."""
    constraint = TreeConstraint(VOCAB, reserved=3)
    state = _state_after(constraint, ["(S", "NN", "NN"], 1)  # two tags for one word
    mask = constraint.allowed(state, OUTPUT).numpy()[0]
    assert mask.sum() >= 1


def _is_tree(tokens: list[str], words: list[str]) -> bool:
    """A well-formed linearized tree over `words` that `delinearize` leaves as it is."""
    return linearize(delinearize(tokens, words)) == " ".join(tokens)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_constrained_search_returns_only_trees_over_the_words(beam_size):
    """A random model (which, unconstrained, emits garbage) searched with the constraint: every
    output is a tree with one tag per source word; the reported log-probs are the model's own,
    not renormalized over the allowed tokens (the slow path: full forward passes)."""
    model = tiny_model(OUTPUT, seed=4)
    rng = np.random.default_rng(0)
    lengths = [1, 2, 3, 5, 4, 2]
    inputs = np.zeros([len(lengths), 6], np.int32)
    for row, n in enumerate(lengths):
        inputs[row, :n] = rng.integers(3, OUTPUT, n)
        inputs[row, n] = 1
    constraint = TreeConstraint(VOCAB, reserved=3)
    found = transformer_step.translate_ids(
        model, inputs, beam_size=beam_size, alpha=0.0, extra_length=20, constraint=constraint
    )
    plain = transformer_step.translate_ids(
        model, inputs, beam_size=beam_size, alpha=0.0, extra_length=20
    )
    outputs, broken = found.ids.numpy()[:, 0], 0
    for row, n in enumerate(lengths):
        ids = [i for i in outputs[row] if i > 1]
        assert outputs[row][len(ids)] == 1  # ends with EOS
        tokens = [VOCAB[i] for i in ids]
        assert _is_tree(tokens, ["w"] * n), tokens
        assert sum(not t.startswith(("(", ")")) for t in tokens) == n
        raw = [VOCAB[i] for i in plain.ids.numpy()[row, 0] if i > 1]
        broken += not _is_tree(raw, ["w"] * n)
        # Slow path: the constrained log-prob from one forward pass of the whole output.
        targets = np.array([ids + [1]], np.int32)
        logits = model({"inputs": inputs[row : row + 1], "targets": targets}).numpy()[0]
        limit = min(n + 1 + 20, model.max_positions)  # what translate_ids allows
        start = constraint.initial_state(inputs[row : row + 1], limit)
        state = constraint.update(start, tf.constant([0]))
        total = 0.0
        for position, token in enumerate(ids + [1]):
            assert constraint.allowed(state, OUTPUT).numpy()[0, token]
            total += np_log_softmax(logits[position])[token]  # not renormalized
            state = constraint.update(state, tf.constant([token]))
        assert found.log_probs.numpy()[row, 0] == pytest.approx(total, abs=1e-4)
    assert broken > 0  # without the constraint the same model does emit broken trees


def test_constrained_greedy_equals_masked_argmax():
    model = tiny_model(OUTPUT, seed=7)
    inputs = np.array([[5, 7, 8, 1], [9, 1, 0, 0]], np.int32)
    constraint = TreeConstraint(VOCAB, reserved=3)
    found = transformer_step.sample_ids(model, inputs, extra_length=12, constraint=constraint)
    for row in range(2):
        limit = int((inputs[row] > 0).sum()) + 12  # input length + extra_length
        start = constraint.initial_state(inputs[row : row + 1], limit)
        state = constraint.update(start, tf.constant([0]))
        ids: list[int] = []
        while not ids or ids[-1] != 1:
            targets = np.array([ids + [0]], np.int32)
            logits = model({"inputs": inputs[row : row + 1], "targets": targets}).numpy()[0, -1]
            mask = constraint.allowed(state, OUTPUT).numpy()[0]
            ids.append(int(np.argmax(np.where(mask, logits, -np.inf))))
            state = constraint.update(state, tf.constant([ids[-1]]))
        assert found.ids.numpy()[row, 0, : len(ids)].tolist() == ids


def test_enumerated_trees_are_exactly_the_complete_prefixes():
    """Cross-check of the reference itself: the complete sequences it allows for 2 words, up to
    5 tokens, are exactly the trees `linearize` can produce from the vocabulary's labels."""
    found = set()
    for n in range(1, 6):
        for tokens in itertools.product(["(S", ")S", "(NP", ")NP", "NN", "VB"], repeat=n):
            prefix = list(tokens)
            if all(
                prefix[i] in reference_allowed(prefix[:i], 2, 3) for i in range(len(prefix))
            ) and "<EOS>" in reference_allowed(prefix, 2, 3):
                found.add(" ".join(prefix))
    expected = {
        f"({a} {t1} {t2} ){a}" for a in ("S", "NP") for t1 in ("NN", "VB") for t2 in ("NN", "VB")
    }
    assert found == expected
