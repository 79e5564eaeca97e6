"""t2t-bleu: sacreBLEU and the paper's tokenized, compound-split BLEU, side by side.

  t2t-bleu --translation=newstest2014.decoded.de --reference=newstest2014.de

Both files are detokenized text, one sentence per line, in the same order. Repeat
`--reference` for several references.
"""

from __future__ import annotations

import sys

from absl import app, flags

from t2t_lite.metrics import bleu

_TRANSLATION = flags.DEFINE_string("translation", None, "System output file.", required=True)
_REFERENCE = flags.DEFINE_multi_string(
    "reference", None, "Reference file (repeat for several).", required=True
)
_TOKENIZE = flags.DEFINE_string(
    "tokenize", "13a", "sacreBLEU's tokenizer for the sacreBLEU score (13a, intl, zh, ...)."
)
_SCORE_ONLY = flags.DEFINE_boolean(
    "score_only", False, "Print only the two numbers: sacreBLEU, tokenized BLEU."
)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        sacre, tokenized = bleu.bleu_files(_TRANSLATION.value, _REFERENCE.value, _TOKENIZE.value)
    except (OSError, ValueError) as error:
        sys.exit(f"t2t-bleu: {error}")
    if _SCORE_ONLY.value:
        print(f"{sacre.bleu:.2f} {tokenized.bleu:.2f}")
    else:
        sys.stdout.write(bleu.format_bleu(sacre, tokenized))


def run() -> None:
    app.run(main)


if __name__ == "__main__":
    run()
