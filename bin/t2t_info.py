"""t2t-info: resolved hparams, parameter count and FLOPs of a named set; --list lists registries."""

from __future__ import annotations

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("hparams_set", "transformer_base", "Name of a registered hparams set.")
flags.DEFINE_string("hparams", "", "Overrides, k=v,k=v.")
flags.DEFINE_integer("vocab_size", 37000, "Shared vocabulary size (the paper's en-de: 37000).")
flags.DEFINE_integer("length", 32, "Source and target length for the FLOPs estimate.")
flags.DEFINE_bool("list", False, "List the registered hparams sets and problems, then exit.")


def main(argv):
    del argv
    from t2t_lite.train.info import describe, list_registries

    print(
        list_registries()
        if FLAGS.list
        else describe(FLAGS.hparams_set, FLAGS.hparams, FLAGS.vocab_size, FLAGS.length)
    )


def run():
    app.run(main)


if __name__ == "__main__":
    run()
