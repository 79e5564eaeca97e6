"""t2t-visualize: attention pictures of a trained model for one sentence.

  t2t-visualize --output_dir=O --inputs="Click the OK button." --visualize_dir=O/attention
  t2t-visualize --output_dir=O --inputs="John has a dog ." --beam_size=4

Restores the run as t2t-decode does, translates the sentence with the same search, and draws
every layer's and head's attention (encoder, decoder, encoder-decoder) into PNGs and index.html.
"""

from __future__ import annotations

import os

from absl import flags, logging

from t2t_lite.bin import cli, run_flags, search_flags
from t2t_lite.extras import import_extra

FLAGS = flags.FLAGS
run_flags.define_run_flags()
flags.adopt_module_key_flags(run_flags)
flags.adopt_module_key_flags(search_flags)
flags.DEFINE_string("inputs", None, "The sentence to translate and picture.", required=True)
flags.DEFINE_string("visualize_dir", None, "Where PNGs and index.html go (default O/attention).")


def main() -> None:
    # without matplotlib: refused first, no run needed
    import_extra("matplotlib", "matplotlib", "viz", "drawing attention pictures")
    run_flags.check_run_flags()  # before TensorFlow loads
    from t2t_lite.decode.translator import Translator
    from t2t_lite.decode.visualize import sentence_attention, write_pictures

    run = run_flags.restore_run()
    translator = Translator.from_run(run)
    attention = sentence_attention(translator, FLAGS.inputs)
    directory = FLAGS.visualize_dir or os.path.join(FLAGS.output_dir, "attention")
    paths = write_pictures(attention, directory)
    logging.info("translation: %s", attention["translation"])
    print(f"{len(paths)} pictures and index.html in {directory}")


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
