"""t2t-info: resolved hparams, parameter count and FLOPs of a named set; --list lists registries.

  t2t-info --hparams_set=transformer_big
  t2t-info --hparams_set=transformer_base --hparams=num_heads=16 --vocab_size=32000 --length=64
  t2t-info --list

Prints the resolved hparams as JSON, the trainable parameter count and the forward FLOPs.
"""

from __future__ import annotations

from absl import flags

from t2t_lite.bin import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("hparams_set", "transformer_base", "Name of a registered hparams set.")
flags.DEFINE_string("hparams", "", "Overrides, k=v,k=v.")
flags.DEFINE_integer("vocab_size", 37000, "Shared vocabulary size (the paper's en-de: 37000).")
flags.DEFINE_integer("length", 32, "Source and target length for the FLOPs estimate.")
flags.DEFINE_boolean("list", False, "List the registered hparams sets and problems, then exit.")


def main() -> None:
    from t2t_lite.train.info import describe, list_registries  # TensorFlow: after --help

    if FLAGS.list:
        print(list_registries())
    else:
        print(describe(FLAGS.hparams_set, FLAGS.hparams, FLAGS.vocab_size, FLAGS.length))


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
