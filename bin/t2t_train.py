"""t2t-train: trains a Transformer on a problem; resumes from --output_dir's checkpoints.

  t2t-train --problem=algorithmic_reverse --hparams_set=transformer_tiny \
      --data_dir=/tmp/data --output_dir=/tmp/run --train_steps=2000
"""

from __future__ import annotations

import sys

from absl import app, flags, logging

from t2t_lite.runtime.distribute import STRATEGIES
from t2t_lite.train.evaluation import METRIC_DIRECTIONS

F = flags.FLAGS
flags.DEFINE_string("problem", None, "Registered problem name, e.g. algorithmic_reverse.")
flags.DEFINE_string("hparams_set", "transformer_base", "Named hparams set.")
flags.DEFINE_string("hparams", "", "Overrides of the set: k=v,k=v (strict).")
flags.DEFINE_string("data_dir", None, "Folder written by t2t-datagen.")
flags.DEFINE_string("output_dir", None, "Checkpoints, hparams.json and summaries go here.")
flags.DEFINE_integer("train_steps", None, "Total optimizer steps (default: the set's).")
flags.DEFINE_integer("eval_every", 1000, "Evaluate on the dev split every N steps.")
flags.DEFINE_integer("eval_batches", 0, "Dev batches per evaluation; 0 = the whole split.")
flags.DEFINE_integer("save_every", 1000, "Write a checkpoint every N steps.")
flags.DEFINE_integer("keep_checkpoints", 5, "Keep the last K checkpoints.")
flags.DEFINE_float("keep_checkpoint_every_minutes", 0.0, "Also keep one per M minutes forever.")
flags.DEFINE_integer("log_every", 100, "Progress line and summaries every N steps.")
flags.DEFINE_integer("seed", 0, "Seed of initialization, dropout and data order.")
flags.DEFINE_bool(
    "deterministic", False, "Deterministic ops: a resumed run equals an unbroken one."
)
flags.DEFINE_string("usr_dir", None, "Python module or package with your own problems.")
flags.DEFINE_enum("strategy", "auto", STRATEGIES, "auto: multi_worker if TF_CONFIG has >1 task.")
flags.DEFINE_enum("best_metric", "dev_loss", list(METRIC_DIRECTIONS), "Keeps output_dir/best/.")
flags.DEFINE_integer("early_stopping", 0, "Stop after N evaluations without a better best_metric.")
flags.DEFINE_integer("bleu_examples", 0, "sacreBLEU of greedy decoding on N dev examples.")
flags.DEFINE_float(
    "train_minutes", 0.0, "Stop (evaluate, save) after this many minutes; rerun to resume."
)
flags.mark_flags_as_required(["problem", "data_dir", "output_dir"])


def main(argv):
    del argv
    from t2t_lite import problems
    from t2t_lite.hparams import get_hparams
    from t2t_lite.runtime import distribute
    from t2t_lite.runtime.checkpoints import CheckpointError
    from t2t_lite.train import loop as training

    strategy = distribute.create_strategy(F.strategy)  # before any other TensorFlow op
    if F.usr_dir:
        problems.import_usr_dir(F.usr_dir)
    try:
        hparams = get_hparams(F.hparams_set, F.hparams)
    except (KeyError, ValueError) as e:
        raise app.UsageError(f"--hparams_set/--hparams: {e}") from None
    try:
        config = training.TrainConfig(
            output_dir=F.output_dir,
            data_dir=F.data_dir,
            train_steps=F.train_steps or hparams.train_steps,
            **{name: getattr(F, name) for name in _PASSED_THROUGH},
        )
        problem = problems.get_problem(F.problem)
    except (KeyError, ValueError) as e:
        raise app.UsageError(str(e)) from None
    try:
        training.train(problem, config, hparams, F.hparams_set, strategy)
    except (training.NonFiniteError, CheckpointError, training.TrainingInterrupted,
            training.ConflictingRunError) as e:  # fmt: skip
        logging.error("%s", e)
        sys.exit(1)


_PASSED_THROUGH = (
    "eval_every", "eval_batches", "save_every", "keep_checkpoints", "keep_checkpoint_every_minutes",
    "log_every", "seed", "deterministic", "best_metric", "early_stopping", "bleu_examples",
    "train_minutes",
)  # fmt: skip


def run():
    app.run(main)


if __name__ == "__main__":
    run()
