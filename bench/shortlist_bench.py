"""The vocabulary shortlist (`--shortlist`) on a trained run's test set: BLEU, identical outputs
and target tokens per second against the full vocabulary, in the run's precision and int8, beam
4 and greedy, printed as a markdown table.

    nice -n 10 python bench/shortlist_bench.py --output_dir=demo_out/train \
        --source=demo_out/test.en --reference=demo_out/test.de --shortlists=100,50 --repeats=3

Every setting translates the whole test set with the `Translator` (batches of --batch_tokens
source tokens) once untimed (tracing), then `repeats` times, the full vocabulary and each
shortlist taking turns, so that a change in the machine's load falls on all of them; the
median time is reported. Coverage: the share of the reference's tokens that are in their
sentence's shortlist (a sentence alone; a batch's shortlist is the union of its sentences', so
at least that), and the mean size of a sentence's shortlist.
Writes the table and a JSON record to bench/results/.
"""

from __future__ import annotations

import os
import statistics
import time

from absl import app, flags
from machine import machine, write_record  # bench/machine.py, beside this script

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "A trained run.", required=True)
flags.DEFINE_string("source", None, "Test sources, one per line.", required=True)
flags.DEFINE_string("reference", None, "Their references.", required=True)
flags.DEFINE_multi_string("shortlists", ["100,50"], "FREQUENT,PER_SOURCE settings to measure.")
flags.DEFINE_list("beams", ["4", "1"], "Beam sizes (1: greedy, alpha 0).")
flags.DEFINE_list("quantize", ["none", "int8"], "Weights: the run's, and int8.")
flags.DEFINE_integer("repeats", 3, "Timed passes of each setting.")
flags.DEFINE_integer("batch_tokens", 4096, "Source tokens per batch (t2t-decode's default).")
flags.DEFINE_string("record", None, "Where the JSON (and a .md) go; default bench/results/.")


def coverage(run, table, sources: list[str], references: list[str]) -> tuple[float, float]:
    """The share of reference tokens inside their own sentence's shortlist, and the mean size
    of a sentence's shortlist."""
    import tensorflow as tf

    inside = total = size = 0
    for source, reference in zip(sources, references, strict=True):
        ids = run.tokenizer.encode_py(source) + [1]
        columns = set(table.columns(tf.constant([ids], tf.int32)).numpy().tolist())
        wanted = run.tokenizer.encode_py(reference)
        inside += sum(t in columns for t in wanted)
        total += len(wanted)
        size += len(columns)
    return inside / max(total, 1), size / max(len(sources), 1)


def measure(translators: dict, sources: list[str], repeats: int) -> dict[str, dict]:
    """{name: {"outputs", "seconds" (median), "tokens"}} with the translators taking turns."""
    found = {
        name: {"outputs": t.translate(sources), "times": []} for name, t in translators.items()
    }
    for _ in range(repeats):
        for name, translator in translators.items():
            start = time.perf_counter()
            translator.translate(sources)
            found[name]["times"].append(time.perf_counter() - start)
    for name, entry in found.items():
        entry["seconds"] = statistics.median(entry.pop("times"))
        tokenizer = translators[name].tokenizer
        entry["tokens"] = sum(len(tokenizer.encode_py(o)) + 1 for o in entry["outputs"])
    return found


def bench(sources, references) -> list[dict]:
    import sacrebleu

    from t2t_lite.decode.translator import Translator
    from t2t_lite.hparams.search_settings import parse_shortlist
    from t2t_lite.run.run import Run

    rows = []
    for quantize in FLAGS.quantize:
        for beam in map(int, FLAGS.beams):
            search = {"beam_size": beam, "alpha": 0.6 if beam > 1 else 0.0}
            runs = {"full": Run.restore(FLAGS.output_dir, search=search, quantize=quantize)}
            for sizes in FLAGS.shortlists:
                settings = {**search, "shortlist": parse_shortlist(sizes)}
                runs[sizes] = Run.restore(FLAGS.output_dir, search=settings, quantize=quantize)
            found = measure(
                {k: Translator.from_run(r, FLAGS.batch_tokens) for k, r in runs.items()},
                sources,
                FLAGS.repeats,
            )
            full = found["full"]
            for name, entry in found.items():
                bleu = sacrebleu.corpus_bleu(entry["outputs"], [references]).score
                same = sum(a == b for a, b in zip(entry["outputs"], full["outputs"], strict=True))
                rows.append({
                    "weights": quantize if quantize != "none" else runs[name].hparams.precision,
                    "beam": beam, "shortlist": name, "bleu": round(bleu, 2),
                    "identical": round(same / len(sources), 4),
                    "seconds": round(entry["seconds"], 3),
                    "tokens_per_second": round(entry["tokens"] / entry["seconds"], 1),
                    "speedup": round(full["seconds"] / entry["seconds"], 3),
                })  # fmt: skip
                if name != "full":
                    covered, size = coverage(runs[name], runs[name].shortlist, sources, references)
                    rows[-1].update(coverage=round(covered, 4), sentence_columns=round(size, 1))
                print(rows[-1], flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| weights | beam | shortlist | BLEU | identical | target tokens/s | vs full | coverage "
        "| ids per sentence |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        covered = (
            f"{100 * r['coverage']:.1f} % | {r['sentence_columns']:,.0f}"
            if "coverage" in r
            else " |"
        )
        lines.append(
            f"| {r['weights']} | {r['beam']} | {r['shortlist']} | {r['bleu']:.2f} | "
            f"{100 * r['identical']:.1f} % | {r['tokens_per_second']:,.0f} | "
            f"{r['speedup']:.2f}x | {covered} |"
        )
    return "\n".join(lines)


def main(argv) -> None:
    del argv
    load = os.getloadavg()
    with open(FLAGS.source, encoding="utf-8") as f:
        sources = [line.rstrip("\n") for line in f]
    with open(FLAGS.reference, encoding="utf-8") as f:
        references = [line.rstrip("\n") for line in f]
    rows = bench(sources, references)
    about = machine(load)
    text = (
        f"Shortlist on {len(sources)} test sentences in batches of {FLAGS.batch_tokens} source "
        f"tokens, {about['cpu']} ({about['cpus']} CPUs), "
        f"commit {about['commit']}, {about['date']}, medians of {FLAGS.repeats}; load "
        f"{about['load']}\n\n{table(rows)}\n"
    )
    print(text)
    write_record(FLAGS.record, "shortlist", about, {"repeats": FLAGS.repeats, "rows": rows}, text)


if __name__ == "__main__":
    app.run(main)
