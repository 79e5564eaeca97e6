"""t2t-evalb: bracket recall, precision, F1 and complete match of parse trees (EVALB, COLLINS.prm).

  t2t-evalb --gold=gold.trees --test=decoded.trees

Both files hold bracketed trees in the same order (one per line, or spread over lines as in the
treebank). Prints EVALB's per-sentence table and its summary; `--summary_only` drops the table.
"""

from __future__ import annotations

import dataclasses
import sys

from absl import app, flags

from t2t_lite.data.trees import TreeParseError
from t2t_lite.metrics import evalb

_GOLD = flags.DEFINE_string("gold", None, "File of gold trees.", required=True)
_TEST = flags.DEFINE_string("test", None, "Test (decoded) trees, same order.", required=True)
_CUTOFF = flags.DEFINE_integer("cutoff_length", 40, "Length limit of the second summary.")
_MAX_ERRORS = flags.DEFINE_integer(
    "max_errors", 10, "Stop after this many error sentences (EVALB's MAX_ERROR); -1: never."
)
_LABELED = flags.DEFINE_boolean("labeled", True, "Labelled brackets (false: spans only).")
_SUMMARY_ONLY = flags.DEFINE_boolean("summary_only", False, "Print only the summary.")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    params = dataclasses.replace(
        evalb.COLLINS,
        cutoff_length=_CUTOFF.value,
        max_errors=None if _MAX_ERRORS.value < 0 else _MAX_ERRORS.value,
        labeled=_LABELED.value,
    )
    try:
        result = evalb.evaluate_files(_GOLD.value, _TEST.value, params)
    except (OSError, TreeParseError, evalb.EvalbError) as error:
        sys.exit(f"t2t-evalb: {error}")
    for row in result.rows:
        if row.message:
            print(f"sentence {row.index}: {row.message}", file=sys.stderr)
    sys.stdout.write(evalb.format_report(result, rows=not _SUMMARY_ONLY.value))


def run() -> None:
    app.run(main)


if __name__ == "__main__":
    run()
