"""Shared pieces of the decoding tests: a tiny model, scripted step functions and a NumPy
exhaustive search to compare beam search against."""

from __future__ import annotations

import itertools

import keras
import numpy as np
import tensorflow as tf

from t2t_lite.hparams import get_hparams
from t2t_lite.model.transformer import MODEL_FIELDS, Transformer

# Lines of algorithmic_copy's words for t2t-decode, with empty and whitespace-only ones and
# lengths from 1 to 7 words, and a target line for each (--score_file).
MIXED_LINES = [
    "1 2 3", "", "4 5 6 7 8 9 1", "7", "9 9 8 7 6", "0 1", "  ", "3 3", "5 4 3 2 1 0",
    "8", "2 4 6", "1 1 1 1", "6 5",
]  # fmt: skip
MIXED_TARGETS = [
    "3 2 1", "5", "7 1 9 8", "", "6 7", "1 0", "4", "3", "0 1 2 3", "8 8", "6 4 2", "1", "5 6",
]  # fmt: skip

TINY = (
    "num_encoder_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,num_heads=2,"
    "max_positions=32,dropout=0.0"
)


def tiny_model(vocab_size: int, seed: int = 0, overrides: str = "") -> Transformer:
    """A random 1+1-layer Transformer with d_model 16; `overrides` like ",max_positions=8"."""
    keras.utils.set_random_seed(seed)
    model = Transformer.from_hparams(get_hparams("transformer_tiny", TINY + overrides), vocab_size)
    model.build()
    return model


def model_hparams(model: Transformer, base: str = "transformer_tiny"):
    """HParams that describe `model` (its plain arguments over the set `base`, its dtype policy
    as the precision), for a RunInfo a test writes beside the model's checkpoint."""
    config = model.get_config()
    fields = {k: v for k, v in config.items() if k in MODEL_FIELDS}
    fields["d_k"], fields["d_v"] = fields.pop("key_dim"), fields.pop("value_dim")
    return get_hparams(base).replace(**fields, precision=model.dtype_policy.name)


def masked_cross_entropy(logits: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """The targets' mean cross-entropy, padding (id 0) left out."""
    losses = keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True)
    mask = tf.cast(targets > 0, tf.float32)
    return tf.reduce_sum(losses * mask) / tf.reduce_sum(mask)


def train_in_one_loop(
    model, optimizer, sources: np.ndarray, targets: np.ndarray, loss=masked_cross_entropy
) -> np.ndarray:
    """Trains `model` one step per batch of sources, targets [steps, batch, length] (ids, 0 as
    padding) by `loss(logits, targets)`, with every step in one traced loop: no Python between
    the steps, the batches drawn up front. Returns each step's loss [steps]."""
    optimizer.build(model.trainable_variables)  # its slots before the loop that updates them

    def step(x, y):
        with tf.GradientTape() as tape:
            value = loss(model({"inputs": x, "targets": y}, training=True), y)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(value, variables), variables, strict=True))
        return value

    @tf.function
    def train(xs, ys):
        found = tf.TensorArray(tf.float32, size=tf.shape(xs)[0])
        for s in tf.range(tf.shape(xs)[0]):
            found = found.write(s, tf.cast(step(xs[s], ys[s]), tf.float32))
        return found.stack()

    return train(tf.constant(sources, tf.int32), tf.constant(targets, tf.int32)).numpy()


def np_log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def lp(length: int, alpha: float) -> float:
    return ((5.0 + length) / 6.0) ** alpha


def all_hypotheses(vocab_size: int, max_length: int) -> list[tuple[int, ...]]:
    """Every sequence search can produce: tokens 2..V-1 then EOS (1), or max_length tokens."""
    tokens = range(2, vocab_size)
    hyps = []
    for n in range(max_length):
        hyps += [p + (1,) for p in itertools.product(tokens, repeat=n)]
    hyps += list(itertools.product(tokens, repeat=max_length))
    return hyps


def scripted_step_fn(table: np.ndarray):
    """A step function reading logits from table [batch, steps, prev_token, vocab]: the logits
    at position i depend on the sentence, i and the previous token. Returns (step_fn, cache,
    calls) where calls[0] counts the steps taken (eager mode)."""
    table = tf.constant(table, tf.float32)
    calls = [0]

    def step_fn(ids, index, cache):
        calls[0] += 1
        rows = cache["row"]  # [batch * beams]
        where = tf.stack([rows, tf.fill(tf.shape(rows), index), ids], axis=1)
        return tf.gather_nd(table, where), cache

    batch = table.shape[0]
    return step_fn, {"row": tf.range(batch)}, calls


def rising_eos_table(batch: int, steps: int, vocab: int, seed: int) -> np.ndarray:
    """A scripted table whose EOS logit rises with the step at a rate of its sentence's, so
    that sentences finish at different steps."""
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(batch, steps, vocab, vocab)).astype(np.float32)
    rate = rng.uniform(0.2, 2.0, size=batch)
    table[..., 1] += (rate[:, None] * np.arange(steps) - 3.0)[:, :, None]
    return table


def table_log_prob(table: np.ndarray, row: int, hyp: tuple[int, ...]) -> float:
    """log p(hyp) under a scripted table, with pad made impossible (not renormalized)."""
    total, prev = 0.0, 0
    for i, token in enumerate(hyp):
        total += np_log_softmax(table[row, i, prev])[token]
        prev = token
    return total


def reference_nbest(score_fn, hyps, alpha: float) -> list[tuple[float, tuple[int, ...]]]:
    """Exhaustive search: (log_prob / lp, hyp) for every hypothesis, best first."""
    scored = [(score_fn(h) / lp(len(h), alpha), h) for h in hyps]
    return sorted(scored, key=lambda s: -s[0])


def padded(hyp: tuple[int, ...], length: int) -> list[int]:
    return list(hyp) + [0] * (length - len(hyp))


def check_one_eos(ids: np.ndarray, eos_id: int = 1) -> None:
    """Every hypothesis in ids [..., length] holds at most one EOS, at its last real token, and
    zeros only after its end."""
    for hyp in ids.reshape(-1, ids.shape[-1]).tolist():
        real = [t for t in hyp if t != 0]
        assert hyp[: len(real)] == real, f"zero inside a hypothesis: {hyp}"
        assert real.count(eos_id) <= 1 and (eos_id not in real or real[-1] == eos_id), hyp


def eos_after_input(step_fn, cache, inputs, slope: float = 1.0, vocab_size: int = 11):
    """Wraps a random model's step function so that EOS grows likely once the output is as long
    as the input: outputs then end at varied lengths, or run to the maximum. The input lengths
    ride in the cache, so beam search must tile and reorder a nested cache correctly."""
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(inputs, 0), tf.float32), axis=1)  # [batch]
    eos = tf.one_hot(1, vocab_size)

    def biased(ids, index, state):
        logits, inner = step_fn(ids, index, state["model"])
        bias = slope * (tf.cast(index + 1, tf.float32) - state["length"])  # --> [rows]
        return logits + bias[:, None] * eos, {"model": inner, "length": state["length"]}

    return biased, {"model": cache, "length": lengths}


def random_inputs(batch: int, max_length: int, vocab_size: int, seed: int) -> np.ndarray:
    """[batch, max_length + 1] zero-padded ids of 1..max_length random tokens then EOS."""
    rng = np.random.default_rng(seed)
    inputs = np.zeros((batch, max_length + 1), np.int32)
    for row, n in enumerate(rng.integers(1, max_length + 1, size=batch)):
        inputs[row, :n] = rng.integers(2, vocab_size, size=n)
        inputs[row, n] = 1
    return inputs


def write_tiny_run(
    root, max_positions: int = 8, seed: int = 21, model=None, problem: str = "algorithmic_copy"
):
    """A training run's folder as decode and export read it, for algorithmic_copy (words 0..9):
    root/data with the vocabulary, root/out with hparams.json and checkpoints/ckpt-1 of a random
    tiny model (or of `model`, a Transformer over those 13 ids, for `problem`). Returns
    (output_dir, model, data_dir)."""
    from t2t_lite.run.layout import CHECKPOINT_DIR
    from t2t_lite.run.run_info import RunInfo

    data_dir, output_dir = root / "data", root / "out"
    data_dir.mkdir()
    words = ["<pad>", "<EOS>", "<unk>"] + [str(i) for i in range(10)]
    (data_dir / "vocab.words.txt").write_text("\n".join(words))
    if model is None:
        model = tiny_model(13, seed=seed, overrides=f",max_positions={max_positions}")
    info = RunInfo(problem, str(data_dir), "transformer_tiny", model_hparams(model), 13)
    info.save(str(output_dir))
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), str(output_dir / CHECKPOINT_DIR), max_to_keep=1
    )
    manager.save()
    return output_dir, model, data_dir


def add_truncated_newer_checkpoint(folder) -> str:
    """Copies folder/ckpt-1 to ckpt-2 with half of its data file (a damaged newest checkpoint);
    returns the path of that data file."""
    import os

    for name in os.listdir(folder):
        if name.startswith("ckpt-1."):
            data = (folder / name).read_bytes()
            damaged = data[: len(data) // 2] if ".data-" in name else data
            (folder / name.replace("ckpt-1.", "ckpt-2.")).write_bytes(damaged)
    return str(folder / "ckpt-2.data-00000-of-00001")


def reverse_engine(**kwargs):
    """A document `Engine` (t2t_lite.document.document) whose translation of each sentence is
    its words reversed and upper-cased, with the alignment that says so."""
    from t2t_lite.document.document import Engine

    def translate(sentences):
        found = []
        for sentence in sentences:
            words = sentence.split()
            n = len(words)
            found.append((" ".join(reversed(words)).upper(), [(i, n - 1 - i) for i in range(n)]))
        return found

    return Engine(translate, **kwargs)


def decode_flags(**flags):
    """t2t-decode's flags (name=value) as `run_decode` takes them, (DecodeConfig, RunFlags):
    each to the field of its name, as bin/t2t_decode.py reads its flags into the two."""
    import dataclasses

    from t2t_lite.decode.runner import DecodeConfig
    from t2t_lite.run.run_flags import RunFlags

    decoding = {field.name for field in dataclasses.fields(DecodeConfig)}
    config = DecodeConfig(**{k: v for k, v in flags.items() if k in decoding})
    return config, RunFlags(**{k: v for k, v in flags.items() if k not in decoding})


def t2t_decode(source, target, **flags) -> list[str]:
    """The lines `t2t-decode --decode_from_file=SOURCE --decode_to_file=TARGET` with `flags`
    (name=value) writes, decoded in this process by `run_decode`, as bin/t2t_decode.py does."""
    from t2t_lite.decode.runner import run_decode

    run_decode(*decode_flags(decode_from_file=str(source), decode_to_file=str(target), **flags))
    with open(target, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]
