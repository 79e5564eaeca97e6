"""Resident memory of decoding: does it grow with the number of lines?

    .venv/bin/python bench/memory_bench.py --output_dir=RUN --lines=FILE --passes=2 \
        --report=bench/results/DATE_decode_memory.md

Restores a training run as t2t-decode does (`Run.restore`, `Translator.from_run`) and translates
the lines of FILE `--passes` times in one process, as a long-lived server or a long decode would.
The batches of a pass go from the shortest sentences to the longest (t2t-decode sorts by length),
so within the first pass memory rises with the batch shapes; a process that holds on to memory
per batch (a leak) also rises on every later pass, while one whose memory follows the shapes
ends every later pass where the first ended. The report gives the resident memory after loading
and after each pass, the peak, and the growth of each later pass.
"""

from __future__ import annotations

import datetime
import os
import time

from absl import app, flags
from machine import recorded_path

from t2t_lite.decode.translator import Translator
from t2t_lite.run.run import Run
from t2t_lite.runtime import atomic_io
from t2t_lite.runtime.progress import resident_memory

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "A training run (written by t2t-train).", required=True)
flags.DEFINE_string("lines", None, "A file of source lines to translate.", required=True)
flags.DEFINE_integer("passes", 2, "Translations of the whole file in one process.")
flags.DEFINE_integer("beam_size", 4, "Beam size.")
flags.DEFINE_string("report", None, "Write the markdown report here.")


def _gb(value: float) -> str:
    return f"{value / 1e9:.2f}"


def main(argv: list[str]) -> None:
    del argv
    if FLAGS.passes < 1:
        raise app.UsageError(f"--passes={FLAGS.passes} must be at least 1")
    with open(FLAGS.lines, encoding="utf-8") as f:
        lines = f.read().splitlines()
    names = [f"{FLAGS.lines}:{i + 1}" for i in range(len(lines))]
    run = Run.restore(FLAGS.output_dir, search={"beam_size": FLAGS.beam_size})
    translator = Translator.from_run(run)
    rows = [("restored", 0.0, *resident_memory())]
    for i in range(FLAGS.passes):
        start = time.perf_counter()
        translator.hypotheses(lines, names)
        rows.append((f"pass {i + 1}", time.perf_counter() - start, *resident_memory()))
    table = [
        f"Decoding memory (bench/memory_bench.py, {datetime.date.today()}): {len(lines):,} "
        f"lines of `{os.path.basename(FLAGS.lines)}`, beam {FLAGS.beam_size}, run "
        f"`{recorded_path(FLAGS.output_dir)}` "
        f"({os.path.relpath(run.checkpoint, FLAGS.output_dir)}), "
        f"{FLAGS.passes} passes in one process.",
        "",
        "| after | seconds | resident GB | peak GB |",
        "|---|---:|---:|---:|",
        *(f"| {name} | {s:.0f} | {_gb(rss)} | {_gb(peak)} |" for name, s, rss, peak in rows),
        "",
    ]
    first = rows[1][2]
    for name, _, rss, _ in rows[2:]:
        table.append(f"- {name} ended {(rss - first) / 1e6:+,.0f} MB from the end of pass 1.")
    text = "\n".join(table) + "\n"
    print(text)
    if FLAGS.report:
        atomic_io.write_text(FLAGS.report, text)


if __name__ == "__main__":
    app.run(main)
