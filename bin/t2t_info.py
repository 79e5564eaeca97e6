"""t2t-info: resolved hparams, parameter count and FLOPs of a named set; --list lists registries.

  t2t-info --hparams_set=transformer_big
  t2t-info --hparams_set=transformer_base --hparams=num_heads=16 --vocab_size=32000 --length=64
  t2t-info --list
  t2t-info --train_minutes=20 --data_dir=D
  t2t-info --version

Prints the resolved hparams as JSON, the trainable parameter count and the forward FLOPs. With
--train_minutes and --data_dir, the hparams set t2t-train would choose for that budget on this
machine and that data (train/model_choice.py): it times each candidate's training step, as
t2t-train does, and trains nothing.
"""

from __future__ import annotations

from absl import app, flags

from t2t_lite.bin import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("hparams_set", "transformer_base", "Name of a registered hparams set.")
flags.DEFINE_string("hparams", "", "Overrides, k=v,k=v.")
flags.DEFINE_integer("vocab_size", 37000, "Shared vocabulary size (the paper's en-de: 37000).")
flags.DEFINE_integer("length", 32, "Source and target length for the FLOPs estimate.")
flags.DEFINE_boolean("list", False, "List the registered hparams sets and problems, then exit.")
flags.DEFINE_float("train_minutes", 0.0, "With --data_dir: the budget's choice of model for it.")
flags.DEFINE_string("data_dir", None, "A t2t-datagen folder, for --train_minutes.")
flags.DEFINE_string("problem", None, "For --train_minutes; default: the one data_dir is for.")
flags.DEFINE_boolean(
    "version", False, "Print t2t_lite's version and those it runs on (TensorFlow, Keras, Python)."
)


def version_line() -> str:
    """t2t_lite's version, and the installed TensorFlow's, Keras' and Python's (read from the
    installed packages' metadata: TensorFlow is not loaded)."""
    import platform
    from importlib import metadata

    import t2t_lite

    parts = [f"{name} {metadata.version(name.lower())}" for name in ("TensorFlow", "Keras")]
    parts.append(f"Python {platform.python_version()}")
    return f"t2t_lite {t2t_lite.__version__} ({', '.join(parts)})"


def main() -> None:
    if FLAGS.version:
        print(version_line())
        return
    from t2t_lite.hparams import get_hparams

    if not (FLAGS.list or FLAGS.train_minutes or FLAGS.data_dir):
        get_hparams(FLAGS.hparams_set, FLAGS.hparams)  # an unknown set: before TensorFlow loads
    from t2t_lite.train.info import describe, list_registries  # TensorFlow: after --help

    if FLAGS.list:
        print(list_registries())
    elif FLAGS.train_minutes or FLAGS.data_dir:
        if not (FLAGS.train_minutes > 0 and FLAGS.data_dir):
            raise app.UsageError(
                "--train_minutes and --data_dir go together: the budget's choice of model needs "
                "both (e.g. --train_minutes=20 --data_dir=DATA)"
            )
        from t2t_lite.train.info import describe_choice

        print(describe_choice(FLAGS.data_dir, FLAGS.train_minutes, FLAGS.hparams, FLAGS.problem))
    else:
        print(describe(FLAGS.hparams_set, FLAGS.hparams, FLAGS.vocab_size, FLAGS.length))


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
