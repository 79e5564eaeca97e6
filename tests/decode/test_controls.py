"""Repetition and length controls against exhaustive search with the same rule (a NumPy
re-implementation over the full forward pass), composed with a prefix and with terminology; off,
they change nothing; t2t-decode's flags and the Python API take them."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from command_helpers import command
from decoding_helpers import (
    all_hypotheses,
    np_log_softmax,
    padded,
    random_inputs,
    reference_nbest,
    tiny_model,
    write_tiny_run,
)

from t2t_lite.decode import transformer_step
from t2t_lite.decode.translator import Translator
from t2t_lite.hparams import SearchSettings
from t2t_lite.search.controls import Controls, _update, adjusted_logits, initial_state
from t2t_lite.search.terminology import phrases_met

INPUTS = np.array([[2, 3, 4, 1], [4, 4, 3, 1]], np.int32)  # outputs of at most 4 tokens
VOCAB = 5  # tokens 2 (UNK), 3 and 4, then EOS


def banned_tokens(prev: tuple[int, ...], controls: Controls) -> set[int]:
    """The tokens the rule bans after `prev`, by comparing every window (the slow way)."""
    n, banned = controls.no_repeat_ngram_size, set()
    if n > 0:
        key = prev[len(prev) - n + 1 :] if n > 1 else ()
        for j in range(len(prev) - n + 1):
            if len(key) == n - 1 and prev[j : j + n - 1] == key:
                banned.add(prev[j + n - 1])
    if len(prev) < controls.min_length:
        banned.add(1)
    if controls.disable_unk:
        banned.add(2)
    return banned


def np_adjusted(logits: np.ndarray, prev: tuple[int, ...], controls: Controls) -> np.ndarray:
    """One row of logits [vocab] after the rule: the penalty on the tokens in `prev`, then the
    bans, lifted where they would leave no token but padding."""
    z = logits.astype(np.float64)
    p = controls.repetition_penalty
    for token in set(prev):
        z[token] = z[token] / p if z[token] > 0 else z[token] * p
    kept = z.copy()
    kept[sorted(banned_tokens(prev, controls))] = -np.inf
    return kept if np.isfinite(kept[1:]).any() else z


def np_constrained(logits: np.ndarray, allowed: set[int] | None) -> np.ndarray:
    """`constraint.constrained_step_fn`'s row: the forbidden tokens' mass moved to padding."""
    if allowed is None:
        return logits
    out = np.full_like(logits, -np.inf)
    out[sorted(allowed)] = logits[sorted(allowed)]
    forbidden = [t for t in range(len(logits)) if t not in allowed]
    out[0] = np.log(np.exp(logits[forbidden].astype(np.float64)).sum())
    return out


def exhaustive(model, row, controls, allowed=lambda prev: None, alpha=0.6):
    """Every output of INPUTS[row], scored under the adjusted distribution, those it makes
    impossible left out: ([(score, hyp)] best first, hyp -> log-prob)."""
    hyps = all_hypotheses(vocab_size=VOCAB, max_length=4)
    targets = np.array([padded(h, 4) for h in hyps], np.int32)
    inputs = np.repeat(INPUTS[row : row + 1], len(hyps), 0)
    logits = model({"inputs": inputs, "targets": targets}).numpy()
    by_hyp = {}
    for i, h in enumerate(hyps):
        total = 0.0
        for step, token in enumerate(h):
            prev = h[:step]
            z = np_adjusted(np_constrained(logits[i, step], allowed(prev)), prev, controls)
            total += np_log_softmax(z)[token]
        if np.isfinite(total):
            by_hyp[h] = total
    return reference_nbest(by_hyp.get, list(by_hyp), alpha), by_hyp


def check_nbest(result, row, expected, count, rest_empty=True):
    ranked, by_hyp = expected
    n = min(count, len(ranked))
    ids = result.ids.numpy()[row]
    assert ids[:n].tolist() == [padded(h, 4) for _, h in ranked[:n]]
    np.testing.assert_allclose(
        result.scores.numpy()[row, :n], [s for s, _ in ranked[:n]], atol=1e-5
    )
    np.testing.assert_allclose(
        result.log_probs.numpy()[row, :n], [by_hyp[h] for _, h in ranked[:n]], atol=1e-5
    )
    if rest_empty and n == len(ranked):  # the outputs the controls ban are not in the n-best
        assert (result.scores.numpy()[row, n:] == -np.inf).all()


CASES = {
    "ngram1": Controls(no_repeat_ngram_size=1),
    "ngram2": Controls(no_repeat_ngram_size=2),
    "penalty": Controls(repetition_penalty=1.7),
    "reward": Controls(repetition_penalty=0.6),
    "min_length": Controls(min_length=3),
    "unk": Controls(disable_unk=True),
    "all": Controls(2, 1.3, 2, True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wide_beam_equals_exhaustive_search_with_the_same_rule(name):
    """A beam that holds every output returns the outputs the rule allows, ranked and scored as
    the full forward pass with the rule applied in NumPy scores them."""
    model = tiny_model(vocab_size=VOCAB, seed=3)
    controls = CASES[name]
    result = transformer_step.translate_ids(
        model, INPUTS, beam_size=128, alpha=0.6, extra_length=0, nbest=40, controls=controls
    )
    for row in range(2):
        expected = exhaustive(model, row, controls)
        assert len(expected[0]) < 121 or name in ("penalty", "reward")  # some outputs banned
        check_nbest(result, row, expected, 40)


def test_the_banned_outputs_are_the_ones_the_rule_names():
    """Literal cases of the rule: the n-gram, EOS and UNK bans after a given history."""
    assert banned_tokens((3, 4, 3), Controls(no_repeat_ngram_size=2)) == {4}
    assert banned_tokens((3, 4, 3), Controls(no_repeat_ngram_size=3)) == set()
    assert banned_tokens((3, 4, 3, 4), Controls(no_repeat_ngram_size=3)) == {3}
    assert banned_tokens((3, 4), Controls(no_repeat_ngram_size=1)) == {3, 4}
    assert banned_tokens((3,), Controls(min_length=2, disable_unk=True)) == {1, 2}
    # The graph's state after feeding 3 4 3 4 (the start id first) bans the same.
    state = initial_state(Controls(no_repeat_ngram_size=3, repetition_penalty=2.0), 1, 6)
    for token in (0, 3, 4, 3, 4):
        state = _update(state, tf.constant([token]))
    logits = tf.constant([[0.5, 1.0, -1.0, 4.0, -2.0, 3.0]])
    got = adjusted_logits(logits, state).numpy()[0]
    np.testing.assert_array_equal(got, [0.5, 1.0, -1.0, -np.inf, -4.0, 3.0])


def test_greedy_search_with_controls_equals_the_numpy_greedy_rule():
    model = tiny_model(vocab_size=12, seed=7)
    inputs = random_inputs(4, 6, 12, seed=2)
    controls = Controls(2, 1.4, 3, True)
    found = transformer_step.sample_ids(model, inputs, extra_length=4, controls=controls)
    limits = transformer_step.output_lengths(model, inputs, 4).numpy()
    for row in range(len(inputs)):
        out: tuple[int, ...] = ()
        while len(out) < limits[row] and (not out or out[-1] != 1):
            target = np.array([padded(out + (0,), 11)], np.int32)
            logits = model({"inputs": inputs[row : row + 1], "targets": target}).numpy()
            z = np_adjusted(logits[0, len(out)], out, controls)
            z[0] = -np.inf
            out += (int(np.argmax(z)),)
        got = [t for t in found.ids.numpy()[row, 0] if t]
        assert got == list(out)
        assert 2 not in got and (got[-1] != 1 or len(got) > 3)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_controls_off_change_nothing_bit_for_bit(beam_size):
    """Neutral values through the wrapper give the unwrapped search's ids and scores exactly;
    settings with every control off add no wrapper at all."""
    model = tiny_model(vocab_size=20, seed=11)
    inputs = random_inputs(5, 7, 20, seed=4)
    prefix = np.array([[5, 6], [0, 0], [7, 0], [0, 0], [3, 3]], np.int32)
    for guide in ({}, {"prefix": prefix}):
        plain = transformer_step.translate_ids(
            model, inputs, beam_size=beam_size, nbest=beam_size, compact=False, **guide
        )
        wrapped = transformer_step.translate_ids(
            model, inputs, beam_size=beam_size, nbest=beam_size, controls=Controls(), **guide
        )
        np.testing.assert_array_equal(wrapped.ids.numpy(), plain.ids.numpy())
        np.testing.assert_array_equal(wrapped.scores.numpy(), plain.scores.numpy())
    assert Controls.of(SearchSettings()) is None
    assert Controls.of(SearchSettings(min_length=2)) == Controls(min_length=2)


def test_a_prefix_wins_over_the_bans_and_counts_as_output():
    """With a prefix, the exhaustive reference runs the prefix constraint and then the rule: a
    prefix that repeats itself is kept (a ban never empties a row), and its tokens count for
    the penalty, the n-grams and the minimum length."""
    model = tiny_model(vocab_size=VOCAB, seed=3)
    prefix = np.array([[3, 3], [4, 0]], np.int32)
    controls = Controls(no_repeat_ngram_size=1, repetition_penalty=1.5, min_length=3)
    result = transformer_step.translate_ids(
        model, INPUTS, beam_size=128, extra_length=0, nbest=30, prefix=prefix, controls=controls
    )
    for row, start in enumerate([(3, 3), (4,)]):

        def allowed(prev, s=start):
            return {s[len(prev)]} if len(prev) < len(s) else set(range(1, VOCAB))

        expected = exhaustive(model, row, controls, allowed)
        assert all(h[: len(start)] == start for _, h in expected[0])
        check_nbest(result, row, expected, 30)
    assert result.ids.numpy()[0, 0, :2].tolist() == [3, 3]


def test_terms_compose_with_the_controls():
    """Terminology and the controls: the outputs holding the phrase come first, each scored
    under the rule, as exhaustive search ranks them."""
    model = tiny_model(vocab_size=VOCAB, seed=3)
    terms = np.array([[[4, 3]], [[3, 0]]], np.int32)
    controls = Controls(no_repeat_ngram_size=2, repetition_penalty=1.2)
    result = transformer_step.translate_ids(
        model, INPUTS, beam_size=128, extra_length=0, nbest=128, terms=terms, controls=controls
    )
    for row, phrase in enumerate([[4, 3], [3]]):

        def holds(h, p=phrase):
            return phrases_met(list(h), [p])[0]

        def allowed(prev, p=phrase):  # EOS only once the phrase is met
            return set(range(1 if holds(prev, p) else 2, VOCAB))

        ranked, by_hyp = exhaustive(model, row, controls, allowed)
        met = [(s, h) for s, h in ranked if holds(h)]
        assert met and len(met) < len(ranked)
        check_nbest(result, row, (met, by_hyp), len(met), rest_empty=False)  # unmet ones follow


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("controls")
    output_dir, _, _ = write_tiny_run(root, max_positions=16, seed=5)
    (root / "in.txt").write_text("1 2 3\n7 7 7 7\n\n4 5 6 7 8\n")
    return root, output_dir


def _decode(output_dir, *flags):
    return command("t2t_decode", f"--output_dir={output_dir}", *flags)


def test_t2t_decode_flags_and_the_python_api_agree(tiny_run):
    """t2t-decode's flags and `Translator.from_run`'s settings give the same translations (with
    XLA too), which obey the rule; the same run without them translates otherwise."""
    root, output_dir = tiny_run
    controls = {"no_repeat_ngram_size": 1, "min_length": 3, "disable_unk": True}
    lines = (root / "in.txt").read_text().splitlines()
    translator = Translator.from_run(str(output_dir), beam_size=2, **controls)
    expected = translator.translate(lines)
    flags = [f"--{k}={v}" for k, v in controls.items() if k != "disable_unk"] + ["--disable_unk"]
    done = _decode(
        output_dir,
        f"--decode_from_file={root / 'in.txt'}",
        f"--decode_to_file={root / 'out.txt'}",
        "--beam_size=2",
        *flags,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (root / "out.txt").read_text().splitlines() == expected
    compiled = Translator.from_run(str(output_dir), beam_size=2, jit_compile=True, **controls)
    assert compiled.translate(lines) == expected  # XLA: the state of fixed shapes
    plain = Translator.from_run(str(output_dir), beam_size=2).translate(lines)
    assert plain != expected
    for line, text in zip(lines, expected, strict=True):
        if line:
            words = text.split()
            assert len(words) == len(set(words)) and len(words) >= 3 and "<unk>" not in words


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("--repetition_penalty=0", "--repetition_penalty must be a number > 0"),
        ("--min_length=-1", "--min_length"),
    ],
)
def test_t2t_decode_refuses_a_bad_control_in_one_line(tiny_run, flag, words):
    done = _decode(tiny_run[1], flag)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("t2t-decode: error:") and words in errors[0]
