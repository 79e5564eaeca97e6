"""The paper's numbers: parameter counts, the learning-rate formula, the loss, overfitting."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from command_helpers import run_python
from decoding_helpers import train_in_one_loop

from t2t_lite.hparams import HPARAMS_SETS, TABLE3_SETS, get_hparams
from t2t_lite.model.flops import forward_flops_per_token
from t2t_lite.model.losses import label_smoothed_cross_entropy
from t2t_lite.model.transformer import Transformer
from t2t_lite.train.info import count_parameters
from t2t_lite.train.schedules import RsqrtWarmupSchedule, create_optimizer, paper_learning_rate

from conftest import assert_close
from numpy_reference import label_smoothed_loss, label_smoothed_loss_gradient

VOCAB = 37000


@pytest.fixture(scope="module")
def base_params():
    return count_parameters(get_hparams("transformer_base"), VOCAB)


def test_base_and_big_parameter_counts(base_params):
    assert abs(base_params - 65e6) / 65e6 < 0.05
    big = count_parameters(get_hparams("transformer_big"), VOCAB)
    assert abs(big - 213e6) / 213e6 < 0.03


# Direction of each Table 3 row's parameter count against the base model (the paper's column).
TABLE3_DIRECTION = {
    "h1": 0,
    "h4": 0,
    "h16": 0,
    "h32": 0,
    "dk16": -1,
    "dk32": -1,
    "n2": -1,
    "n4": -1,
    "n8": 1,
    "d256": -1,
    "d1024": 1,
    "ff1024": -1,
    "ff4096": 1,
    "drop0": 0,
    "drop02": 0,
    "ls0": 0,
    "ls02": 0,
    "learned_pos": 0,
}


def test_every_table3_set_moves_in_the_papers_direction(base_params):
    assert set(TABLE3_DIRECTION) == {n.removeprefix("transformer_base_") for n in TABLE3_SETS}
    for name, hparams in TABLE3_SETS.items():
        params = count_parameters(hparams, VOCAB)
        change = (params - base_params) / base_params
        direction = TABLE3_DIRECTION[name.removeprefix("transformer_base_")]
        if direction == 0:  # the paper lists 65M; learned positions add a small table
            assert abs(change) < 0.01, (name, params)
        else:
            assert np.sign(change) == direction and abs(change) > 0.02, (name, params)


def test_every_registered_set_builds_and_runs():
    features = {"inputs": np.array([[3, 4, 1]]), "targets": np.array([[5, 1]])}
    for name in HPARAMS_SETS.names():
        if name in TABLE3_SETS:
            continue  # built by the test above
        model = Transformer.from_hparams(get_hparams(name), vocab_size=50)
        assert model(features).shape == (1, 2, 50), name


def test_learning_rate_formula():
    schedule = RsqrtWarmupSchedule(d_model=512, warmup_steps=4000)
    for step in (1, 100, 4000, 4001, 100000):
        expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
        assert float(schedule(step - 1)) == pytest.approx(expected, rel=1e-6)
        assert paper_learning_rate(step, 512, 4000) == pytest.approx(expected, rel=1e-12)
    assert float(schedule(3999)) == pytest.approx(6.988e-4, rel=1e-3)  # the peak, step 4000
    assert float(schedule(0)) == pytest.approx(512**-0.5 * 4000**-1.5)


def test_optimizer_is_papers_adam():
    optimizer = create_optimizer(get_hparams("transformer_base"))
    assert isinstance(optimizer, keras.optimizers.Adam)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    # Before the first update the optimizer's rate is the formula at the paper's step 1.
    assert float(optimizer.learning_rate) == pytest.approx(paper_learning_rate(1, 512, 4000))


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_label_smoothed_loss_matches_numpy(eps):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 4, 7)).astype(np.float32) * 3
    targets = np.array([[3, 4, 1, 0], [2, 1, 0, 0]])
    loss, nll, count = label_smoothed_cross_entropy(logits, targets, eps)
    expected = label_smoothed_loss(logits, targets, eps)
    assert_close(loss, expected[0])
    assert_close(nll, expected[1])
    assert float(count) == expected[2] == 5.0


@pytest.mark.parametrize("one_hot", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("on_smoothed,on_nll", [(1.0, 0.0), (0.0, 1.0), (2.0, -3.0)])
def test_label_smoothed_loss_gradient_matches_numpy(eps, on_smoothed, on_nll, one_hot):
    # The loss's closed-form gradient against the NumPy formula, for either sum and a mix, with
    # the reference term scattered (without XLA) or subtracted as a one-hot (under XLA).
    rng = np.random.default_rng(1)
    logits = tf.constant(rng.normal(size=(2, 4, 7)).astype(np.float32) * 3)
    targets = np.array([[3, 4, 1, 0], [2, 6, 0, 0]])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss, nll, _ = label_smoothed_cross_entropy(logits, targets, eps, one_hot)
        total = on_smoothed * loss + on_nll * nll
    expected = label_smoothed_loss_gradient(logits.numpy(), targets, eps, on_smoothed, on_nll)
    assert_close(tape.gradient(total, logits), expected)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_one_hot_loss_gradient_under_xla_equals_the_scatter(dtype):
    # The training step's two forms of the gradient, each where it runs: the scatter without
    # XLA, the one-hot under jit_compile (where its cast to bfloat16 fuses into the same pass).
    rng = np.random.default_rng(3)
    logits = tf.cast(rng.normal(size=(3, 11, 300)) * 4, dtype)
    targets = tf.constant(np.where(np.arange(11) < 8, rng.integers(1, 300, (3, 11)), 0))

    def gradient(one_hot):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            smoothed, nll, _ = label_smoothed_cross_entropy(logits, targets, 0.1, one_hot)
            total = smoothed + 0.25 * nll
        return tape.gradient(total, logits)

    scatter = gradient(False)
    fused = tf.function(lambda: gradient(True), jit_compile=True)()
    assert fused.dtype == scatter.dtype == logits.dtype
    scatter, fused = (tf.cast(g, tf.float32).numpy() for g in (scatter, fused))
    tolerance = 1e-6 if dtype == "float32" else 1e-2 * np.abs(scatter).max()
    np.testing.assert_allclose(fused, scatter, atol=tolerance)
    assert np.abs(scatter).max() > 0.5 and not fused[:, 8:].any()


def _plain_loss(logits, targets, eps):
    """The slow path: the loss written out in TensorFlow ops, differentiated by the tape."""
    vocab = logits.shape[-1]
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
    onehot = tf.one_hot(targets, vocab)
    smoothed_target = onehot * (1 - eps) + (1 - onehot) * eps / (vocab - 1)
    weights = tf.cast(targets != 0, tf.float32)
    smoothed = -tf.reduce_sum(smoothed_target * log_probs, -1)
    nll = -tf.reduce_sum(onehot * log_probs, -1)
    return tf.reduce_sum(smoothed * weights), tf.reduce_sum(nll * weights)


@pytest.mark.parametrize("dtype,tolerance", [("float32", 1e-5), ("bfloat16", 1e-2)])
def test_closed_form_loss_gradient_equals_the_plain_formula_under_the_tape(dtype, tolerance):
    # A [2 x 37 tokens, 1000] batch with padding, logits far from 0 (softmax needs its
    # normalizer), in float32 and in bfloat16, whose gradient comes back in bfloat16.
    rng = np.random.default_rng(2)
    logits = tf.cast(rng.normal(size=(2, 37, 1000)) * 8 + 40, dtype)
    targets = rng.integers(1, 1000, size=(2, 37))
    targets[1, 30:] = 0
    results = []
    for loss_fn in (label_smoothed_cross_entropy, _plain_loss):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            smoothed, nll = loss_fn(logits, tf.constant(targets), 0.1)[:2]
            total = smoothed - 0.5 * nll
        gradient = tape.gradient(total, logits)
        assert gradient.dtype == logits.dtype
        results.append((float(smoothed), float(nll), tf.cast(gradient, tf.float32).numpy()))
    (fast_smoothed, fast_nll, fast_grad), (plain_smoothed, plain_nll, plain_grad) = results
    np.testing.assert_allclose([fast_smoothed, fast_nll], [plain_smoothed, plain_nll], rtol=1e-5)
    np.testing.assert_allclose(fast_grad, plain_grad, atol=tolerance * np.abs(plain_grad).max())
    assert np.abs(plain_grad).max() > 0.1 and not fast_grad[1, 30:].any()


def test_flops_count_every_matrix_product():
    hp = get_hparams("transformer_tiny")  # d 64, d_ff 256, 4 heads, 2 + 2 layers
    d, f, v, s, t = 64, 256, 100, 10, 10
    per_layer_projections = 2 * 4 * d * d
    attention = 2 * 2 * s * d
    ffn = 2 * 2 * d * f
    encoder = s * 2 * (per_layer_projections + attention + ffn)
    decoder = t * 2 * (2 * per_layer_projections + 2 * attention + ffn)
    expected = (encoder + decoder + t * 2 * d * v) / t
    assert forward_flops_per_token(hp, v, s, t) == expected


def test_tiny_model_overfits_one_batch():
    hparams = get_hparams(
        "transformer_tiny",
        "label_smoothing=0.0,learning_rate_schedule=constant,learning_rate=0.003",
    )
    model = Transformer.from_hparams(hparams, vocab_size=30)
    model.build()
    rng = np.random.default_rng(0)
    inputs = np.concatenate([rng.integers(2, 30, (8, 9)), np.ones((8, 1))], 1).astype(np.int32)
    targets = np.concatenate([rng.integers(2, 30, (8, 7)), np.ones((8, 1))], 1).astype(np.int32)

    def loss(logits, targets):  # the training loss, no smoothing: the targets' mean NLL
        total, _, count = label_smoothed_cross_entropy(logits, targets, 0.0)
        return total / count

    # The one batch 300 times, the steps in one traced loop.
    sources, targets = (np.repeat(batch[None], 300, axis=0) for batch in (inputs, targets))
    losses = train_in_one_loop(model, create_optimizer(hparams), sources, targets, loss).tolist()
    assert losses[0] > 2.5  # about log(30) at the start
    assert min(losses) < 0.1, losses[-10:]


def test_t2t_info_prints_counts():
    result = run_python(
        "-m", "t2t_lite.bin.t2t_info", "--hparams_set=transformer_base",
        "--hparams=num_encoder_layers=2", "--vocab_size=1000",
    )  # fmt: skip
    model = Transformer.from_hparams(get_hparams("transformer_base", "num_encoder_layers=2"), 1000)
    model.build()
    assert f"trainable parameters: {model.count_params():,}" in result.stdout
    assert '"num_encoder_layers": 2' in result.stdout
    listing = run_python("-m", "t2t_lite.bin.t2t_info", "--list").stdout
    # The built-in problems (other tests register more in this process, not in the subprocess).
    builtin = ["algorithmic_copy", "algorithmic_reverse", "parsing_trees", "text2text",
               "translate_ende_lohelp", "translate_enfr_lohelp", "wmt14_ende", "wmt14_enfr",
               "wsj_parsing", "wsj_parsing_semi"]  # fmt: skip
    assert all(f"  {name}\n" in listing + "\n" for name in HPARAMS_SETS.names())
    assert all(f"  {name}\n" in listing + "\n" for name in builtin)
