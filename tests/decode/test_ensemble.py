"""Ensembles: the same model twice is the model; two models against NumPy (exhaustive search and
scoring over teacher-forced forward passes); --checkpoint=A,B in t2t-decode."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from decoding_helpers import (
    all_hypotheses,
    eos_after_input,
    model_hparams,
    np_log_softmax,
    padded,
    random_inputs,
    reference_nbest,
    t2t_decode,
    tiny_model,
)

from t2t_lite.decode import transformer_step
from t2t_lite.model.ensemble import Ensemble, normalized_weights
from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run import Run, member_location
from t2t_lite.run.run_info import RunInfo
from t2t_lite.search import beam as search


def _mixture_log_probs(models, weights, inputs, targets) -> np.ndarray:
    """log sum_i w_i p_i(token | prefix) [batch, target, vocab] from full forward passes, in
    float64 NumPy."""
    probs = sum(
        w * np.exp(np_log_softmax(m({"inputs": inputs, "targets": targets}).numpy()))
        for m, w in zip(models, weights, strict=True)
    )
    return np.log(probs)


def _token_log_probs(log_probs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """[batch, target, vocab], [batch, target] --> [batch] summed over the non-zero targets."""
    picked = np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    return np.where(targets > 0, picked, 0.0).sum(-1)


@pytest.mark.parametrize("use_cache", [True, False])
def test_ensemble_of_a_model_with_itself_equals_the_model(use_cache):
    model = tiny_model(vocab_size=11, seed=5)
    inputs = random_inputs(12, 6, 11, seed=1)
    settings = dict(beam_size=3, alpha=0.6, extra_length=4, nbest=2, use_cache=use_cache)
    alone = transformer_step.translate_ids(model, inputs, **settings)
    for members in ([model], [model, model], [model, model, model]):
        together = transformer_step.translate_ids(Ensemble(members), inputs, **settings)
        np.testing.assert_array_equal(together.ids.numpy(), alone.ids.numpy())
        np.testing.assert_allclose(together.scores.numpy(), alone.scores.numpy(), atol=1e-5)
        np.testing.assert_allclose(together.log_probs.numpy(), alone.log_probs.numpy(), atol=1e-5)
    # With EOS made likely past the input's length, outputs end at varied lengths.
    biased = []
    for members in (model, Ensemble([model, model])):
        step_fn, cache = transformer_step.model_step_fn(members, inputs, 9, use_cache)
        step_fn, cache = eos_after_input(step_fn, cache, inputs)
        biased.append(search.beam_search(step_fn, cache, 12, 3, 0.6, 9, nbest=2))
    targets = biased[0].ids.numpy()[:, 0]
    assert (targets == 1).any(axis=-1).all()  # every best output ends with EOS, at varied places
    np.testing.assert_array_equal(biased[1].ids.numpy(), biased[0].ids.numpy())
    np.testing.assert_allclose(biased[1].scores.numpy(), biased[0].scores.numpy(), atol=1e-5)
    np.testing.assert_allclose(
        transformer_step.score_ids(Ensemble([model, model]), inputs, targets).numpy(),
        transformer_step.score_ids(model, inputs, targets).numpy(),
        atol=1e-5,
    )


def test_two_model_ensemble_equals_exhaustive_numpy_search():
    """Vocab 5, length 4: all 121 outputs, ranked by the weighted mixture of two models'
    probabilities at each step, as a beam of 128 must rank them."""
    models = [tiny_model(vocab_size=5, seed=3), tiny_model(vocab_size=5, seed=8)]
    weights = normalized_weights([1.0, 3.0], 2)
    assert weights == (0.25, 0.75)
    inputs = np.array([[2, 3, 4, 1], [4, 4, 1, 0]], np.int32)
    hyps = all_hypotheses(vocab_size=5, max_length=4)
    ensemble = Ensemble(models, [1.0, 3.0])
    step_fn, cache = transformer_step.model_step_fn(ensemble, inputs, 4)
    result = search.beam_search(step_fn, cache, 2, 128, 0.6, 4, nbest=121)
    targets = np.array([padded(h, 4) for h in hyps], np.int32)
    for row in range(2):
        repeated = np.repeat(inputs[row : row + 1], len(hyps), 0)
        log_probs = _mixture_log_probs(models, weights, repeated, targets)  # [121, 4, 5]
        by_hyp = dict(zip(hyps, _token_log_probs(log_probs, targets), strict=True))
        expected = reference_nbest(by_hyp.get, hyps, 0.6)
        assert result.ids.numpy()[row].tolist() == [padded(h, 4) for _, h in expected]
        np.testing.assert_allclose(result.scores.numpy()[row], [s for s, _ in expected], atol=1e-5)
        np.testing.assert_allclose(
            result.log_probs.numpy()[row], [by_hyp[h] for _, h in expected], atol=1e-5
        )


def test_ensemble_step_and_scores_match_numpy():
    models = [tiny_model(vocab_size=9, seed=s) for s in (1, 2, 4)]
    weights = normalized_weights([2.0, 1.0, 1.0], 3)
    ensemble = Ensemble(models, [2.0, 1.0, 1.0])
    inputs = random_inputs(5, 5, 9, seed=3)
    targets = random_inputs(5, 6, 9, seed=4)
    expected = _mixture_log_probs(models, weights, inputs, targets)  # [5, 7, 9]
    got = transformer_step.score_ids(ensemble, inputs, targets).numpy()
    np.testing.assert_allclose(got, _token_log_probs(expected, targets), atol=1e-4)
    # The cached step, fed the targets one by one, gives the same per-step log-probs.
    step_fn, cache = transformer_step.model_step_fn(ensemble, inputs, targets.shape[1])
    fed = np.pad(targets, [[0, 0], [1, 0]])[:, :-1]  # the start id 0, then the targets
    for i in range(targets.shape[1]):
        log_probs, cache = step_fn(tf.constant(fed[:, i]), tf.constant(i), cache)
        np.testing.assert_allclose(log_probs.numpy(), expected[:, i], atol=1e-5)


def test_members_and_weights_are_checked():
    with pytest.raises(ValueError, match="3 values for 2 checkpoints"):
        normalized_weights([1, 2, 3], 2)
    with pytest.raises(ValueError, match="must be positive"):
        normalized_weights([1, 0], 2)
    with pytest.raises(ValueError, match="vocab_size"):
        Ensemble([tiny_model(7), tiny_model(9)])
    small = Ensemble([tiny_model(7), tiny_model(7, overrides=",max_positions=12")])
    assert small.max_positions == 12


WORDS = [str(i) for i in range(10)]


def _run(root, name: str, seed: int, words=WORDS) -> str:
    """A run folder with hparams.json and two checkpoints of a random tiny model (words
    vocabulary in its own data folder)."""
    data_dir, output_dir = root / f"{name}_data", root / name
    data_dir.mkdir()
    (data_dir / "vocab.words.txt").write_text("\n".join(["<pad>", "<EOS>", "<unk>", *words]))
    model = tiny_model(13, seed=seed, overrides=",max_positions=12")
    RunInfo("algorithmic_copy", str(data_dir), "transformer_tiny", model_hparams(model), 13).save(
        str(output_dir)
    )
    checkpoint = tf.train.Checkpoint(model=model)
    manager = tf.train.CheckpointManager(checkpoint, str(output_dir / CHECKPOINT_DIR), 2)
    manager.save()
    for variable in model.trainable_variables:  # a second, different checkpoint
        variable.assign(variable * 0.9)
    manager.save()
    return str(output_dir)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ensemble")
    return {
        "a": _run(root, "a", 21),
        "b": _run(root, "b", 22),
        "other": _run(root, "other", 23, words=[w + "x" for w in WORDS]),
        "root": root,
    }


LINES = ["1 2 3", "", "4 5 6 7 8", "9", "3 3 2"]


def _decode(runs, tmp_path, checkpoint, **flags) -> list[str]:
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(LINES) + "\n")
    return t2t_decode(
        source,
        target,
        output_dir=runs["a"],
        checkpoint=checkpoint,
        beam_size=3,
        alpha=0.6,
        extra_length=3,
        **flags,
    )


def test_t2t_decode_ensemble_of_two_runs(runs, tmp_path):
    a_ckpt = f"{runs['a']}/{CHECKPOINT_DIR}/ckpt-1"
    checkpoint = f"{a_ckpt},{runs['b']}"  # a checkpoint path of one run, another run's folder
    run = Run.restore(runs["a"], checkpoint, ensemble_weights=[1, 2])
    assert isinstance(run.model, Ensemble) and run.model.weights == pytest.approx((1 / 3, 2 / 3))
    assert run.checkpoint == f"{a_ckpt},{runs['b']}/{CHECKPOINT_DIR}/ckpt-2"
    tokenizer = run.tokenizer
    got = _decode(runs, tmp_path, checkpoint, ensemble_weights=["1", "2"], nbest=2)
    assert len(got) == 2 * len(LINES) and got[2:4] == ["1 |||  ||| 0.000000"] * 2
    ids = [tokenizer.encode_py(line) + [1] for line in LINES if line]
    inputs = np.array([padded(tuple(r), 6) for r in ids], np.int32)
    found = transformer_step.translate_ids(
        run.model, inputs, beam_size=3, alpha=0.6, extra_length=3, nbest=2
    )
    best = [line.split(" ||| ") for line in got if not line.startswith("1 |||")]
    texts = [
        tokenizer.decode_py(h.tolist()) for h in found.ids.numpy().reshape(-1, found.ids.shape[-1])
    ]
    assert [text for _, text, _ in best] == texts
    np.testing.assert_allclose(
        [float(s) for *_, s in best], found.scores.numpy().ravel(), atol=1e-5
    )

    (tmp_path / "ref.txt").write_text("\n".join(["3 2 1", "", "8 7", "9 9", "2"]) + "\n")
    scores = _decode(
        runs, tmp_path, checkpoint, score_file=str(tmp_path / "ref.txt"), ensemble_weights=[1, 2]
    )
    rows = [i for i, line in enumerate(LINES) if line]
    targets = [tokenizer.encode_py(t) + [1] for t in ("3 2 1", "8 7", "9 9", "2")]
    target_ids = np.array([padded(tuple(t), 4) for t in targets], np.int32)
    members = [m for m in run.model.models]
    expected = _token_log_probs(
        _mixture_log_probs(members, (1 / 3, 2 / 3), inputs, target_ids), target_ids
    )
    np.testing.assert_allclose([float(scores[i]) for i in rows], expected, atol=1e-4)


def test_ensemble_of_one_run_with_itself_decodes_as_the_run(runs, tmp_path):
    alone = _decode(runs, tmp_path, None)
    assert _decode(runs, tmp_path, f"{runs['a']},{runs['a']}") == alone
    assert member_location(runs["a"], runs["b"]) == (runs["b"], None)
    checkpoints = f"{runs['a']}/{CHECKPOINT_DIR}"
    assert member_location(runs["a"], checkpoints) == (runs["a"], checkpoints)


def test_different_vocabularies_and_weights_are_refused(runs):
    with pytest.raises(ValueError, match=f"runs {runs['a']} and {runs['other']} have different"):
        Run.restore(runs["a"], f"{runs['a']},{runs['other']}")
    with pytest.raises(ValueError, match="--ensemble_weights has 3 values for 2 checkpoints"):
        Run.restore(runs["a"], f"{runs['a']},{runs['b']}", ensemble_weights=[1, 1, 1])
    with pytest.raises(OSError, match="nowhere"):  # the missing member is named
        Run.restore(runs["a"], f"{runs['a']},{runs['root']}/nowhere/ckpt-3")


def test_what_an_ensemble_cannot_do_is_refused(runs):
    from t2t_lite.serve import export

    run = Run.restore(runs["a"], f"{runs['a']},{runs['b']}")
    with pytest.raises(ValueError, match="ensemble, which only t2t-decode searches"):
        export.ServingFunctions.from_run(run)
    with pytest.raises(ValueError, match="pass one --checkpoint"):
        run.model.attention_maps(np.array([[3, 1]]), np.array([[4, 1]]))
