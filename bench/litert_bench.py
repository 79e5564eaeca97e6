"""LiteRT against t2t-decode's greedy search on a trained run's test set: file size, BLEU, the
share of identical outputs and latency per sentence, printed as a markdown table.

    nice -n 10 python bench/litert_bench.py --output_dir=demo_out/train \
        --source=demo_out/test.en --reference=demo_out/test.de --repeats=3

The run is exported twice by `t2t_lite.serve.litert_export` (float32 and int8 weights, the
batch free, --max_input_length wide) into a temporary folder. BLEU (sacreBLEU) and the
identical outputs are over the whole test set: t2t-decode's greedy search (beam 1, alpha 0,
TensorFlow, the `Translator`, batches of 4096 tokens) in the run's precision and in float32 (a
copy of the weights, as the LiteRT models compute), against each LiteRT model (the runner's
length-sorted calls of --batch_size lines); identical outputs are counted against t2t-decode's
float32 search. Throughput: a second pass over the whole test set, timed (the first, untimed,
gave the outputs); for LiteRT also at each of --batch_sizes lines a call, alternating, the
median of --repeats passes each. The LiteRT models run in a
process without TensorFlow, as users run them.
Latency: the first --latency_lines sentences one at a time (batch 1) on each engine, the mean
per sentence of each run; `repeats` runs back to back after one untimed pass, their median
reported with its ratio to t2t-decode's. The SavedModel of t2t-export runs the same search
graph as the `Translator`. Writes the table and a JSON record to bench/results/.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import tempfile
import time

from absl import app, flags
from machine import machine  # bench/machine.py, beside this script

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "A trained run (SentencePiece vocabulary).", required=True)
flags.DEFINE_string("source", None, "Test sources, one per line.", required=True)
flags.DEFINE_string("reference", None, "Their references.", required=True)
flags.DEFINE_integer("max_input_length", 128, "The LiteRT models' input length (tokens + EOS).")
flags.DEFINE_integer("latency_lines", 100, "Sentences timed one at a time.")
flags.DEFINE_integer("repeats", 3, "Timed runs of each engine.")
flags.DEFINE_integer("threads", os.cpu_count(), "LiteRT's threads.")
flags.DEFINE_integer("batch_size", 16, "LiteRT: lines per call (the runner's default).")
flags.DEFINE_list("batch_sizes", ["1", "4", "16", "64"], "LiteRT: the lines a call compared.")
flags.DEFINE_string(
    "record", None, "Where the JSON (and a .md of the table) go; default bench/results/."
)


def per_sentence(translate, lines: list[str], repeats: int) -> float:
    """Median over `repeats` runs of the mean seconds per sentence, one sentence per call."""
    for line in lines[:3]:
        translate([line])  # traced or warmed, untimed
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for line in lines:
            translate([line])
        runs.append((time.perf_counter() - start) / len(lines))
    return statistics.median(runs)


def litert_side(path: str, sources, latency_lines, repeats: int, threads, batch_sizes):
    """A LiteRT model's translations of `sources` (calls of batch_sizes[0] lines), its seconds
    per sentence, and its sentences/s over `sources` per batch size (medians of `repeats`
    alternating passes), in the process `litert_outputs` starts: one without TensorFlow, as
    users run it (docs/deploy.md)."""
    from t2t_lite.serve.litert_runner import LiteRTTranslator

    litert = {b: LiteRTTranslator(path, num_threads=threads, batch_size=b) for b in batch_sizes}
    outputs = litert[batch_sizes[0]].translate(sources)
    seconds = per_sentence(litert[batch_sizes[0]].translate, latency_lines, repeats)
    rates = {b: [] for b in batch_sizes}
    for _ in range(repeats):
        for b, translator in litert.items():
            rates[b].append(rate(translator, sources))
    return outputs, seconds, {b: statistics.median(r) for b, r in rates.items()}


def rate(translator, sources: list[str]) -> float:
    """Sentences/s of one timed pass of `translator.translate` over `sources`."""
    start = time.perf_counter()
    translator.translate(sources)
    return len(sources) / (time.perf_counter() - start)


def litert_outputs(*args) -> tuple[list[str], float, dict[int, float]]:
    """`litert_side(*args)` in a fresh ("spawn") process, which imports this module (no
    TensorFlow at its top) and not the parent's TensorFlow."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(litert_side, args)


def export(run, folder: str) -> dict[str, str]:
    """The run's LiteRT models, float32 and int8 weights: quantization --> folder."""
    from t2t_lite.serve import litert_export

    return {
        q: litert_export.export_run(run, os.path.join(folder, q), quantization=q)[0]
        for q in litert_export.QUANTIZATIONS
    }


def decode_rows(run, sources, references, latency_lines) -> tuple[list[dict], list[str]]:
    """t2t-decode's greedy search with the run's precision and, where that is not float32,
    with a float32 copy (what the LiteRT models compute in). Returns the rows and the float32
    outputs, which the column of identical outputs compares against."""
    from t2t_lite.decode.translator import Translator
    from t2t_lite.metrics.bleu import sacre_bleu
    from t2t_lite.serve.litert_export import float32_model

    models = {run.model.dtype_policy.name: run.model}
    models.setdefault("float32", float32_model(run.model))
    rows, outputs = [], {}
    for name, model in models.items():
        decode = Translator(model, run.tokenizer, run.search)
        outputs[name] = decode.translate(sources)
        seconds = per_sentence(decode.translate, latency_lines, FLAGS.repeats)
        per_second = rate(decode, sources)
        bleu = sacre_bleu(outputs[name], [references]).bleu
        rows.append(
            {
                "engine": f"t2t-decode greedy (TensorFlow, {name})",
                "bytes": None,
                "bleu": bleu,
                "outputs": outputs[name],
                "seconds": seconds,
                "per_second": per_second,
            }
        )
    return rows, outputs["float32"]


def measure(argv_unused) -> dict:
    from t2t_lite.metrics.bleu import read_lines, sacre_bleu
    from t2t_lite.run.run import Run

    load_before = os.getloadavg()
    sources, references = read_lines(FLAGS.source), read_lines(FLAGS.reference)
    latency_lines = sources[: FLAGS.latency_lines]
    search = {"beam_size": 1, "alpha": 0.0, "max_input_length": FLAGS.max_input_length}
    run = Run.restore(FLAGS.output_dir, search=search)
    rows, float32 = decode_rows(run, sources, references, latency_lines)
    batch_sizes = [FLAGS.batch_size] + [
        b for b in map(int, FLAGS.batch_sizes) if b != FLAGS.batch_size
    ]
    with tempfile.TemporaryDirectory() as folder:
        for quantization, path in export(run, folder).items():
            outputs, seconds, rates = litert_outputs(
                path, sources, latency_lines, FLAGS.repeats, FLAGS.threads, batch_sizes
            )
            rows.append(
                {
                    "engine": f"LiteRT, {'float32' if quantization == 'none' else 'int8'} weights",
                    "bytes": os.path.getsize(os.path.join(path, "model.tflite")),
                    "bleu": sacre_bleu(outputs, [references]).bleu,
                    "outputs": outputs,
                    "seconds": seconds,
                    "per_second": rates[FLAGS.batch_size],
                    "by_batch_size": rates,
                }
            )
    for row in rows:
        outputs = row.pop("outputs")
        row["same"] = sum(a == b for a, b in zip(outputs, float32, strict=True)) / len(float32)
    return {
        "machine": machine(load_before),
        "sentences": len(sources),
        "rows": rows,
        "latency_lines": len(latency_lines),
        "repeats": FLAGS.repeats,
        "max_input_length": FLAGS.max_input_length,
        "threads": FLAGS.threads,
        "batch_size": FLAGS.batch_size,
    }


def table(record: dict) -> str:
    m = record["machine"]
    lines = [
        f"{m['date']}, commit {m['commit']}, {m['cpu']} ({m['cpus']} CPUs, load average "
        f"{m['load']}); {record['sentences']} test sentences; latency: {record['latency_lines']} "
        f"sentences one at a time, median of {record['repeats']} runs; LiteRT "
        f"{record['threads']} threads, {record['batch_size']} lines a call, input length "
        f"{record['max_input_length']}.",
        "",
        "| engine | model file | BLEU | outputs identical to t2t-decode greedy float32 "
        "| latency per sentence | ratio | test set, sentences/s | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base, base_rate = record["rows"][0]["seconds"], record["rows"][0]["per_second"]
    for row in record["rows"]:
        size = f"{row['bytes'] / 1e6:.1f} MB" if row["bytes"] else "(checkpoint)"
        lines.append(
            f"| {row['engine']} | {size} | {row['bleu']:.2f} | {100 * row['same']:.1f} % | "
            f"{1000 * row['seconds']:.1f} ms | {row['seconds'] / base:.2f}x | "
            f"{row['per_second']:.1f} | {row['per_second'] / base_rate:.2f}x |"
        )
    swept = [row for row in record["rows"] if "by_batch_size" in row]
    sizes = sorted(swept[0]["by_batch_size"]) if swept else []
    lines += ["", "LiteRT, test set sentences/s by lines a call (vs 1 a call):", ""]
    lines += ["| engine | " + " | ".join(map(str, sizes)) + " |", "|---" * (len(sizes) + 1) + "|"]
    for row in swept:
        rates = row["by_batch_size"]
        cells = [f"{rates[b]:.1f} ({rates[b] / rates[sizes[0]]:.2f}x)" for b in sizes]
        lines.append(f"| {row['engine']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv) -> None:
    record = measure(argv)
    text = table(record)
    print(text)
    path = FLAGS.record or os.path.join(
        os.path.dirname(__file__), "results", f"{record['machine']['date']}_litert.json"
    )
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    app.run(main)
