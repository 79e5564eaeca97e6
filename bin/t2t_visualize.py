"""t2t-visualize: attention pictures of a trained model for one sentence.

t2t-visualize --output_dir=O --inputs="Click the OK button." --visualize_dir=O/attention
"""

from __future__ import annotations

import os

from absl import app, flags, logging

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Training output folder (hparams.json, checkpoints).")
flags.DEFINE_string("inputs", None, "The sentence to translate and picture.")
flags.DEFINE_string("visualize_dir", None, "Where PNGs and index.html go (default O/attention).")
flags.DEFINE_string("checkpoint", None, "Checkpoint path or folder (default: latest/averaged).")
flags.DEFINE_integer("beam_size", None, "Beam width (default: the problem's).")
flags.DEFINE_float("alpha", None, "Length-penalty alpha (default: the problem's).")
flags.mark_flags_as_required(["output_dir", "inputs"])


def main(argv):
    del argv
    from t2t_lite.decode.runner import DecodeConfig, load_translator
    from t2t_lite.decode.visualize import sentence_attention, write_pictures

    translator = load_translator(
        DecodeConfig(
            output_dir=FLAGS.output_dir,
            checkpoint=FLAGS.checkpoint,
            beam_size=FLAGS.beam_size,
            alpha=FLAGS.alpha,
        )
    )
    attention = sentence_attention(translator, FLAGS.inputs)
    directory = FLAGS.visualize_dir or os.path.join(FLAGS.output_dir, "attention")
    paths = write_pictures(attention, directory)
    logging.info("translation: %s", attention["translation"])
    print(f"{len(paths)} pictures and index.html in {directory}")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
