"""t2t-decode: translate (or score) lines with a trained model.

    t2t-decode --output_dir=runs/ende --decode_from_file=newstest2014.en --decode_to_file=out.de
    echo "Hello world." | t2t-decode --output_dir=runs/ende --beam_size=4 --alpha=0.6
    t2t-decode --output_dir=runs/ende                     # interactive prompt on a terminal
    t2t-decode --output_dir=runs/ende --decode_from_file=src.en --score_file=ref.de  # log-probs
    t2t-decode --output_dir=runs/ende --checkpoint=runs/ende,runs/ende2 < in.en  # an ensemble
    t2t-decode --output_dir=runs/ende --terminology=terms.tsv --alignment < in.en
    t2t-decode --output_dir=runs/ende --input_format=document < page.md > page.de.md

Reads the run's hparams.json and vocabulary, so decoding never disagrees with training. N lines
in give N lines out (an empty line gives an empty line; nbest > 1 writes Moses n-best lines).
"""

from __future__ import annotations

from absl import flags, logging

from t2t_lite.bin import cli, run_flags, search_flags
from t2t_lite.decode.replicas import STRATEGIES

FLAGS = flags.FLAGS
run_flags.define_run_flags(ensembles=True)
flags.DEFINE_string("problem", None, "Problem (default: the run's; another one is refused).")
flags.DEFINE_string("decode_from_file", None, "Input lines (default: stdin, or a prompt).")
flags.DEFINE_string("decode_to_file", None, "Output file, written atomically (default: stdout).")
flags.DEFINE_string(
    "score_file",
    None,
    "Target lines to score instead of decoding: writes log p(target line | input line) per line.",
)
search_flags.define_guidance_flags()
search_flags.define_jit_compile_flag()
search_flags.define_inter_threads_flag()
flags.adopt_module_key_flags(run_flags)
flags.adopt_module_key_flags(search_flags)
flags.DEFINE_integer("nbest", 1, "Hypotheses per input line (<= beam_size).", lower_bound=1)
flags.DEFINE_integer("batch_tokens", 4096, "Source tokens per batch.", lower_bound=1)
flags.DEFINE_enum("input_format", "lines", ["lines", "document"], "document: one text, in its "
                  "layout, markup kept (docs/control.md).")  # fmt: skip
flags.DEFINE_string("source_language", None, "A document's language (default: the problem's).")
flags.DEFINE_enum(
    "strategy", "default", STRATEGIES,
    "mirrored: split each batch across the local devices; auto: the same where there are several.",
)  # fmt: skip


def main() -> None:
    run_flags.check_run_flags(FLAGS.nbest)  # before TensorFlow loads
    cli.check_files(
        "decode_from_file", "score_file", "prefix_file", "constraints_file", "terminology"
    )
    from t2t_lite.decode.runner import DecodeConfig, run_decode  # TensorFlow: not for --help

    # Every field is a flag of the same name.
    config = DecodeConfig(**{name: FLAGS[name].value for name in DecodeConfig.__dataclass_fields__})
    written = run_decode(config, run_flags.from_flags(nbest=FLAGS.nbest))
    if config.decode_to_file:
        logging.info("wrote %d lines to %s", written, config.decode_to_file)


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
