"""t2t-train: trains a Transformer on a problem; resumes from --output_dir's checkpoints.

  t2t-train --problem=algorithmic_reverse --hparams_set=transformer_tiny \\
      --data_dir=/tmp/data --output_dir=/tmp/run --train_steps=2000
  t2t-train --problem=translate_ende_lohelp --data_dir=D --output_dir=O --train_minutes=20
"""

from __future__ import annotations

from absl import app, flags

from t2t_lite.bin import cli, cluster_flags
from t2t_lite.train.config import FAILURES, METRIC_DIRECTIONS, TrainConfig

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(cluster_flags)
flags.DEFINE_string("problem", None, "Registered problem, e.g. algorithmic_reverse.", required=True)
flags.DEFINE_string(
    "hparams_set",
    None,
    "Named hparams set. Default: with --train_minutes, the budget's choice for this machine and "
    "corpus (t2t-info --train_minutes=M --data_dir=D shows it); a resumed run's own; else "
    "transformer_base.",
)
flags.DEFINE_string("hparams", "", "Overrides of the set: k=v,k=v (strict).")
flags.DEFINE_string("data_dir", None, "Folder written by t2t-datagen.", required=True)
flags.DEFINE_string("output_dir", None, "Checkpoints, hparams.json, summaries.", required=True)
flags.DEFINE_integer("train_steps", None, "Steps (default: the set's; none with --train_minutes).")
flags.DEFINE_integer("eval_every", 1000, "Evaluate on the dev split every N steps.")
flags.DEFINE_integer("eval_batches", 0, "Dev batches per evaluation; 0 = the whole split.")
flags.DEFINE_integer("save_every", 1000, "Write a checkpoint every N steps.")
flags.DEFINE_integer("keep_checkpoints", 5, "Keep the last K checkpoints.")
flags.DEFINE_float("keep_checkpoint_every_minutes", 0.0, "Also keep one per M minutes forever.")
flags.DEFINE_integer("log_every", 100, "Progress line and summaries every N steps.")
flags.DEFINE_integer("seed", 0, "Seed of initialization, dropout and data order.")
flags.DEFINE_boolean("deterministic", False, "Deterministic ops: resumed runs equal unbroken ones.")
flags.DEFINE_string("usr_dir", None, "Python module or package with your own problems.")
flags.DEFINE_enum("best_metric", "dev_loss", list(METRIC_DIRECTIONS), "Keeps output_dir/best/.")
flags.DEFINE_integer("early_stopping", 0, "Stop after N evaluations without a better best_metric.")
flags.DEFINE_integer("bleu_examples", 0, "sacreBLEU of greedy decoding on N dev examples.")
flags.DEFINE_float(
    "train_minutes",
    0.0,
    "A time budget of M minutes for the run: the learning rate peaks early and decays to zero "
    "when they are spent (unless --hparams sets learning_rate_schedule; then the clock only "
    "stops training), and the best of the last, averaged and EMA weights is kept in "
    "output_dir/final. A rerun resumes with the minutes left.",
)
flags.DEFINE_string("init_from", "", "Fine-tune: start from this run's (checkpoint's) weights.")
flags.DEFINE_boolean("init_optimizer", False, "With --init_from: its optimizer and step too.")
flags.DEFINE_integer(
    "lora_rank", 0, "With --init_from: train a rank-R LoRA adapter over its frozen weights."
)
flags.DEFINE_integer(
    "intra_threads",
    None,
    "Threads per TensorFlow op; 0: every CPU. Default: one, two ops at once, on a machine of 2 "
    "CPUs for a model up to width 256 (its steps are chains of small ops), else every CPU; "
    "TF_NUM_INTRAOP_THREADS's where the environment sets it (docs/training.md).",
    lower_bound=0,
)


def _check_hparams(problem) -> None:
    """--hparams_set and --hparams, or the ladder's widest set with --hparams (before any
    probe)."""
    from t2t_lite.hparams import get_hparams

    try:
        hparams = get_hparams(FLAGS.hparams_set or problem.budget_ladder[-1], FLAGS.hparams)
        problem.check_hparams(FLAGS.data_dir, hparams)  # before the run folder is written
    except (KeyError, ValueError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e  # (no quotes)
        raise app.UsageError(f"--hparams_set/--hparams: {message}") from None


def main() -> None:
    from t2t_lite import problems
    from t2t_lite.hparams import get_hparams

    if not FLAGS.usr_dir:  # before TensorFlow loads (a usr_dir's problems register below)
        problem = problems.get_problem(FLAGS.problem)
        problem.check_data_dir(FLAGS.data_dir)  # not another problem's data
        _check_hparams(problem)
    from t2t_lite.train import loop as training  # TensorFlow: after the flags are checked
    from t2t_lite.train.model_probe import hparams_set_for_run, set_training_threads

    if FLAGS.usr_dir:  # (its problems register; nothing of TensorFlow may run as they do)
        problems.import_usr_dir(FLAGS.usr_dir)
    fields = TrainConfig.__dataclass_fields__
    values = {name: FLAGS[name].value for name in fields if name in FLAGS}
    config = TrainConfig(**values, hparams_overrides=FLAGS.hparams)
    problem = problems.get_problem(FLAGS.problem)
    _check_hparams(problem)
    set_training_threads(problem, config, FLAGS.hparams_set)
    strategy = cluster_flags.strategy_from_flags()  # before any other TensorFlow op
    chosen = hparams_set_for_run(problem, config, FLAGS.hparams_set, strategy)
    hparams = get_hparams(chosen.name, FLAGS.hparams)
    given = FLAGS.hparams_set is not None  # (then logs what the budget would have chosen)
    training.train(problem, config, hparams, chosen.name, strategy, chosen.probe_seconds, given)


def run() -> None:
    cli.run(main, FAILURES)


if __name__ == "__main__":
    run()
