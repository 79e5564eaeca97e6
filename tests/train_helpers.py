"""Helpers for the training tests, also run as a script in subprocesses (a process's devices and
TF_CONFIG are fixed before TensorFlow starts, and kill -9 needs a process of its own).

  python tests/train_helpers.py train OUTPUT_DIR STEPS SAVE_EVERY [HPARAMS]
  python tests/train_helpers.py mirrored   # prints JSON: 2-replica vs 1-device results
  python tests/train_helpers.py dev_bleu DATA_DIR   # prints JSON: dev BLEU on 2 replicas and 1
  python tests/train_helpers.py t2t_train_two_devices FLAGS...   # t2t-train on 2 logical CPUs
  python tests/train_helpers.py t2t_train_step_clock FLAGS...   # t2t-train on a step clock
"""

from __future__ import annotations

import json
import os
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_problem import FakeReverse  # noqa: E402

# Adam's first update is about lr * sign(g); a large epsilon makes it smooth in g, so that two
# ways of computing the same gradient give updates equal to rounding.
SMOOTH_ADAM = "learning_rate_schedule=constant,learning_rate=0.1,adam_epsilon=1.0"


def config(output_dir: str, steps: int, save_every: int, **kwargs):
    from t2t_lite.train.loop import TrainConfig

    defaults = dict(eval_every=10**6, log_every=10, deterministic=True, seed=3)
    return TrainConfig(
        output_dir=output_dir,
        data_dir="",
        train_steps=steps,
        save_every=save_every,
        **{**defaults, **kwargs},
    )


def run_training(output_dir: str, steps: int, save_every: int, overrides: str = "", **kwargs):
    from t2t_lite.hparams import get_hparams
    from t2t_lite.train import loop as training

    hparams = get_hparams("transformer_tiny", overrides)
    cfg = config(output_dir, steps, save_every, **{"hparams_overrides": overrides, **kwargs})
    return training.train(FakeReverse(), cfg, hparams, "transformer_tiny")


def one_batch(problem: FakeReverse, start: int, count: int, width: int) -> dict:
    """Examples [start, start+count) of the train split, trimmed to `width` positions."""
    inputs, targets = problem.arrays("train")
    sl = slice(start, start + count)
    return {"inputs": inputs[sl, :width], "targets": targets[sl, :width]}


def step_once(strategy, overrides: str, batches: list[dict], initial=None):
    """One train_step of a fresh Trainer fed `batches` in order; returns (result, deltas,
    initial weights)."""
    import tensorflow as tf

    from t2t_lite.hparams import get_hparams
    from t2t_lite.train.step import Trainer

    hparams = get_hparams("transformer_tiny", overrides)
    trainer = Trainer(hparams, FakeReverse().vocab_size, strategy)
    if initial is not None:
        trainer.model.set_weights(initial)
    before = trainer.model.get_weights()

    def dataset_fn(context):
        del context
        ds = tf.data.Dataset.from_tensors(batches[0])
        for batch in batches[1:]:
            ds = ds.concatenate(tf.data.Dataset.from_tensors(batch))
        return ds

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    result = {k: float(v) for k, v in trainer.train_step(iterator).items()}
    deltas = [a - b for a, b in zip(trainer.model.get_weights(), before, strict=True)]
    # Each replica's copy of each weight (one copy on one device): all updated alike.
    copies = [getattr(v.value, "values", (v.value,)) for v in trainer.model.trainable_variables]
    result["copies"] = len(copies[0])
    result["copies_diff"] = max(float(np.max(np.abs(c[0].numpy() - c[-1].numpy()))) for c in copies)
    return result, deltas, before


def padded_concat(a: dict, b: dict) -> dict:
    width = max(a["inputs"].shape[1], b["inputs"].shape[1])

    def pad(x):
        return np.pad(x, [[0, 0], [0, width - x.shape[1]]])

    return {k: np.concatenate([pad(a[k]), pad(b[k])]) for k in ("inputs", "targets")}


def mirrored_main() -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from t2t_lite.runtime.distribute import create_strategy

    two = create_strategy("mirrored")
    one = tf.distribute.MirroredStrategy(devices=["/cpu:0"])
    problem = FakeReverse()
    # Different lengths and token counts per replica: a mean of per-replica means would differ.
    a, b = one_batch(problem, 0, 40, 9), one_batch(problem, 40, 7, 5)
    res2, deltas2, initial = step_once(two, SMOOTH_ADAM, [a, b])
    res1, deltas1, _ = step_once(one, SMOOTH_ADAM, [padded_concat(a, b)], initial)
    # Two replicas accumulating two micro-batches each against one device with all four.
    c, d = one_batch(problem, 60, 20, 7), one_batch(problem, 90, 3, 9)
    res2a, deltas2a, _ = step_once(two, SMOOTH_ADAM + ",accum_steps=2", [a, b, c, d], initial)
    res1a, deltas1a, _ = step_once(
        one, SMOOTH_ADAM, [padded_concat(padded_concat(a, b), padded_concat(c, d))], initial
    )

    def max_diff(xs, ys):
        return max(float(np.max(np.abs(x - y))) for x, y in zip(xs, ys, strict=True))

    print(json.dumps({
        "replicas": two.num_replicas_in_sync, "two": res2, "one": res1,
        "auto": type(create_strategy("auto")).__name__,
        "max_delta_diff": max_diff(deltas1, deltas2),
        "max_delta": max(float(np.max(np.abs(x))) for x in deltas1),
        "two_accum": res2a, "one_all": res1a, "accum_delta_diff": max_diff(deltas1a, deltas2a),
    }))  # fmt: skip


def dev_bleu_main(data_dir: str) -> None:
    """Trains transformer_tiny briefly on two logical CPU devices, then prints the dev BLEU of
    its greedy decoding split over the two replicas and on one device."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras

    from t2t_lite import problems
    from t2t_lite.hparams import get_hparams
    from t2t_lite.runtime.distribute import create_strategy
    from t2t_lite.train.evaluation import dev_bleu
    from t2t_lite.train.step import Trainer

    keras.utils.set_random_seed(1)
    problem = problems.get_problem("algorithmic_reverse")
    problem.generate_data(data_dir, max_sequence_length=6, train_size=2000, dev_size=60)
    hparams = get_hparams("transformer_tiny", "warmup_steps=60,learning_rate=0.6")
    two = create_strategy("mirrored")
    trainer = Trainer(hparams, problem.tokenizer(data_dir).vocab_size, two)
    batches = iter(two.distribute_datasets_from_function(
        lambda context: problem.make_dataset(data_dir, "train", hparams, shuffle=True,
                                             repeat=True, seed=1, input_context=context)
    ))  # fmt: skip
    for _ in range(80):  # dev BLEU about 65 (93 at 150 steps)
        trainer.train_step(batches)
    config = types.SimpleNamespace(data_dir=data_dir, bleu_examples=50)
    print(json.dumps({
        "replicas": two.num_replicas_in_sync,
        "two": dev_bleu(trainer.model, hparams, problem, config, two),
        "one": dev_bleu(trainer.model, hparams, problem, config, None),
    }))  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1] == "train":
        from absl import logging

        logging.set_verbosity(logging.INFO)
        overrides = sys.argv[5] if len(sys.argv) > 5 else ""
        run_training(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), overrides)
    elif sys.argv[1] == "mirrored":
        mirrored_main()
    elif sys.argv[1] == "dev_bleu":
        dev_bleu_main(sys.argv[2])
    elif sys.argv[1] == "t2t_train_two_devices":  # t2t-train with its flags, on 2 logical CPUs
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
        from t2t_lite.bin import t2t_train

        sys.argv = ["t2t-train"] + sys.argv[2:]
        t2t_train.run()
    elif sys.argv[1] == "t2t_train_step_clock":  # its budget on tests/step_clock.py's clock
        from step_clock import StepClock

        from t2t_lite.bin import t2t_train

        StepClock().install()
        sys.argv = ["t2t-train"] + sys.argv[2:]
        t2t_train.run()
