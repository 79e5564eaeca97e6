"""t2t-bleu: sacreBLEU and the paper's tokenized, compound-split BLEU, side by side.

  t2t-bleu --translation=newstest2014.decoded.de --reference=newstest2014.de
  t2t-bleu --translation=out.de --reference=ref1.de --reference=ref2.de --score_only

Both files are detokenized text, one sentence per line, in the same order. Repeat
`--reference` for several references.
"""

from __future__ import annotations

import sys

from absl import flags

from t2t_lite.bin import cli
from t2t_lite.metrics import bleu

FLAGS = flags.FLAGS
flags.DEFINE_string("translation", None, "System output file.", required=True)
flags.DEFINE_multi_string("reference", None, "Reference file (repeat for several).", required=True)
flags.DEFINE_string(
    "tokenize", "13a", "sacreBLEU's tokenizer for the sacreBLEU score (13a, intl, zh, ...)."
)
flags.DEFINE_boolean("score_only", False, "Print only the two numbers: sacreBLEU, tokenized BLEU.")


def main() -> None:
    sacre, tokenized = bleu.bleu_files(FLAGS.translation, FLAGS.reference, FLAGS.tokenize)
    if FLAGS.score_only:
        print(f"{sacre.bleu:.2f} {tokenized.bleu:.2f}")
    else:
        sys.stdout.write(bleu.format_bleu(sacre, tokenized))


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
