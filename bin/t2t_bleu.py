"""t2t-bleu: sacreBLEU and the paper's tokenized, compound-split BLEU, side by side; chrF,
chrF++ and TER; and a paired significance test against a baseline's output.

  t2t-bleu --translation=newstest2014.decoded.de --reference=newstest2014.de
  t2t-bleu --translation=out.de --reference=ref1.de --reference=ref2.de --score_only
  t2t-bleu --translation=out.de --reference=ref.de --metrics=bleu,chrf,ter
  t2t-bleu --translation=new.de --reference=ref.de --metrics=bleu,chrf --baseline=old.de --paired_bs

The files are detokenized text, one sentence per line, in the same order. Repeat `--reference`
for several references. The scores are sacreBLEU's, each with its signature
(t2t_lite/metrics/scores.py).
"""

from __future__ import annotations

import sys

from absl import app, flags

from t2t_lite.bin import cli
from t2t_lite.metrics import bleu, scores

FLAGS = flags.FLAGS
flags.DEFINE_string("translation", None, "System output file.", required=True)
flags.DEFINE_multi_string("reference", None, "Reference file (repeat for several).", required=True)
flags.DEFINE_string(
    "tokenize", "13a", "sacreBLEU's tokenizer for the sacreBLEU score (13a, intl, zh, ...)."
)
flags.DEFINE_boolean(
    "score_only",
    False,
    "Print only the numbers: sacreBLEU and tokenized BLEU, then each other metric's.",
)
flags.DEFINE_string("metrics", "bleu", "Comma-separated: bleu, chrf, chrf++, ter.")
flags.DEFINE_string("baseline", None, "Another system's output of the same lines, to test against.")
flags.DEFINE_boolean("paired_bs", False, "With --baseline: sacreBLEU's paired bootstrap test.")
flags.DEFINE_boolean("paired_ar", False, "With --baseline: approximate randomization.")
flags.DEFINE_integer("paired_samples", 0, "Resamples or trials; 0: sacreBLEU's (1,000; 10,000).")


def _paired_type() -> str | None:
    """ "bs", "ar" or None, checked against --baseline."""
    if FLAGS.paired_bs and FLAGS.paired_ar:
        raise app.UsageError("--paired_bs and --paired_ar: choose one test")
    test_type = "bs" if FLAGS.paired_bs else "ar" if FLAGS.paired_ar else None
    if test_type and not FLAGS.baseline:
        raise app.UsageError(
            f"--paired_{test_type} needs --baseline=FILE, the output to test against"
        )
    if FLAGS.baseline and not test_type:
        raise app.UsageError("--baseline: give --paired_bs or --paired_ar, the test to run")
    if FLAGS.paired_samples < 0:
        raise app.UsageError(f"--paired_samples={FLAGS.paired_samples} must be 0 or more")
    return test_type


def main() -> None:
    try:
        names = scores.parse_metrics(FLAGS.metrics)
    except ValueError as error:
        raise app.UsageError(str(error)) from None
    test_type = _paired_type()
    hypotheses, references = bleu.read_files(FLAGS.translation, FLAGS.reference)
    others = [n for n in names if n != "bleu"]
    scored = scores.corpus_scores(hypotheses, references, others, FLAGS.tokenize)
    numbers = []
    if "bleu" in names:
        sacre = bleu.sacre_bleu(hypotheses, references, FLAGS.tokenize)
        tokenized = bleu.tokenized_bleu(hypotheses, references)
        numbers += [sacre.bleu, tokenized.bleu]
        if not FLAGS.score_only:
            sys.stdout.write(bleu.format_bleu(sacre, tokenized))
    numbers += [s.score for s in scored]
    if FLAGS.score_only:
        print(" ".join(f"{n:.2f}" for n in numbers))
    for s in [] if FLAGS.score_only else scored:
        print(f"{s.text}\n  signature    {s.signature}")
    if test_type:
        baseline, _ = bleu.read_files(FLAGS.baseline, FLAGS.reference)
        compared = scores.paired_test(
            baseline, hypotheses, references, names, test_type, FLAGS.paired_samples,
            FLAGS.tokenize,
        )  # fmt: skip
        sys.stdout.write(scores.format_compared(compared, test_type))


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
