"""Repetition and length controls on a trained run's test set: BLEU, the share of outputs with a
repeated word 4-gram, and speed, against the search without them, in one process.

    python bench/repetition_bench.py --output_dir=demo_out/train --source=demo_out/test.en \
        --reference=demo_out/test.de

Each setting of SETTINGS is a `Translator` of the run with those search settings, traced once
on a few lines, then translating the test set once, timed. Writes a JSON record beside the
printed table.
"""

from __future__ import annotations

import json
import os
import time

from absl import app, flags
from machine import run_header  # bench/machine.py, beside this script

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "A trained run.", required=True)
flags.DEFINE_string("source", None, "Test sources, one per line.", required=True)
flags.DEFINE_string("reference", None, "Their references.", required=True)
flags.DEFINE_integer("beam_size", 4, "Beam width (alpha is the problem's).")
flags.DEFINE_string("record", None, "Where the JSON goes (default bench/results/...).")

SETTINGS = {
    "none": {},
    "no_repeat_ngram_size=4": {"no_repeat_ngram_size": 4},
    "no_repeat_ngram_size=3": {"no_repeat_ngram_size": 3},
    "repetition_penalty=1.2": {"repetition_penalty": 1.2},
}


def repeats_a_4gram(text: str) -> bool:
    """Whether some 4-gram of the text's words occurs twice in it."""
    words = text.split()
    grams = [tuple(words[i : i + 4]) for i in range(len(words) - 3)]
    return len(set(grams)) < len(grams)


def main(argv) -> None:
    import sacrebleu

    from t2t_lite.decode.translator import Translator
    from t2t_lite.run.run import Run

    run = Run.restore(FLAGS.output_dir, search={"beam_size": FLAGS.beam_size})
    with open(FLAGS.source, encoding="utf-8") as f:
        sources = f.read().splitlines()
    with open(FLAGS.reference, encoding="utf-8") as f:
        references = f.read().splitlines()
    rows = {}
    for name, setting in SETTINGS.items():
        settings = run.search.override(**setting)
        translator = Translator(
            run.model, run.tokenizer, settings, postprocess=run.problem.postprocess
        )
        translator.translate(sources[:16])  # traced
        start = time.perf_counter()
        outputs = translator.translate(sources)
        seconds = time.perf_counter() - start
        rows[name] = {
            "bleu": sacrebleu.corpus_bleu(outputs, [references]).score,
            "repeated_4gram": sum(map(repeats_a_4gram, outputs)) / len(outputs),
            "seconds": seconds,
        }
        print(name, rows[name], flush=True)
    record = {
        **run_header(run),
        "sentences": len(sources),
        "beam_size": FLAGS.beam_size,
        "references_with_repeated_4gram": sum(map(repeats_a_4gram, references)) / len(references),
        "settings": rows,
    }
    path = FLAGS.record or os.path.join(
        os.path.dirname(__file__), "results", time.strftime("%Y-%m-%d") + "_repetition.json"
    )
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    print(f"{record['cpu']}; {len(sources)} sentences; beam {FLAGS.beam_size}")
    print("| controls | BLEU | outputs with a repeated 4-gram | seconds | speed |")
    print("|---|---:|---:|---:|---:|")
    base = rows["none"]["seconds"]
    for name, row in rows.items():
        print(
            f"| {name} | {row['bleu']:.2f} | {100 * row['repeated_4gram']:.1f} % | "
            f"{row['seconds']:.1f} | {base / row['seconds']:.2f}x |"
        )
    share = record["references_with_repeated_4gram"]
    print(f"references with a repeated 4-gram: {100 * share:.1f} %")


if __name__ == "__main__":
    app.run(main)
