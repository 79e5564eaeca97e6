"""t2t-evalb: bracket recall, precision, F1 and complete match of parse trees (EVALB, COLLINS.prm).

  t2t-evalb --gold=gold.trees --test=decoded.trees
  t2t-evalb --gold=gold.trees --test=decoded.trees --summary_only --cutoff_length=100

Both files hold bracketed trees in the same order (one per line, or spread over lines as in the
treebank). Prints EVALB's per-sentence table and its summary; `--summary_only` drops the table.
"""

from __future__ import annotations

import dataclasses
import sys

from absl import flags

from t2t_lite.bin import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("gold", None, "File of gold trees.", required=True)
flags.DEFINE_string("test", None, "Test (decoded) trees, same order.", required=True)
flags.DEFINE_integer("cutoff_length", 40, "Length limit of the second summary.")
flags.DEFINE_integer(
    "max_errors", 10, "Stop after this many error sentences (EVALB's MAX_ERROR); -1: never."
)
flags.DEFINE_boolean("labeled", True, "Labelled brackets (false: spans only).")
flags.DEFINE_boolean("summary_only", False, "Print only the summary.")


def main() -> None:
    from t2t_lite.metrics import evalb

    params = dataclasses.replace(
        evalb.COLLINS,
        cutoff_length=FLAGS.cutoff_length,
        max_errors=None if FLAGS.max_errors < 0 else FLAGS.max_errors,
        labeled=FLAGS.labeled,
    )
    try:
        result = evalb.evaluate_files(FLAGS.gold, FLAGS.test, params)
    except (evalb.TreeParseError, evalb.EvalbError) as error:  # bad input: one line, exit 2
        raise ValueError(str(error)) from None
    for row in result.rows:
        if row.message:
            print(f"sentence {row.index}: {row.message}", file=sys.stderr)
    sys.stdout.write(evalb.format_report(result, rows=not FLAGS.summary_only))


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
