"""Speed and quality of a teacher and its distilled student on a test set: BLEU against
sentences per second, in float32, bfloat16 and int8, with and without the vocabulary shortlist,
and CTranslate2 int8 running both; a markdown table and a PNG of BLEU against speed.

    python bench/student_bench.py --teacher=demo_out/train --student=demo_out/student \
        --source=demo_out/test.en --reference=demo_out/test.de

Each setting runs in its own process, pinned to --cores CPUs (`taskset`; TensorFlow's and
CTranslate2's thread pools take that many), on the most of them once per --inter_threads (batches
searched at once, each op on cores / inter_threads threads: `t2t-decode --inter_threads`,
CTranslate2's `inter_threads` and `intra_threads`). A setting translates the whole test set once,
with beam 4 (--beam_size; 1 is greedy search; the student at each of --student_beams, as a
distilled student may search narrower, Kim and Rush 2016; --patience, both engines' stopping rule)
and the run's alpha (the one its budget
tuned on dev, else the problem's 0.6) in batches of --batch_tokens source tokens (4,096,
t2t-decode's default; both engines), for BLEU (sacreBLEU), then
the first --timed_lines sentences `repeats` more times, timed; the median is reported. t2t_lite
decodes with the `Translator` (what t2t-decode runs): "float32" is a float32 copy of a
mixed-precision run's weights, "bfloat16" the mixed bfloat16 policy, "int8" `--quantize=int8`.
CTranslate2 runs the `t2t-export --format=ctranslate2 --ct2_quantization=int8` folder of the run
(its length penalty is length^alpha, docs/serving.md), with the shortlist as its vocabulary map
(`use_vmap`). Size: the model's weights as they decode (a mixed bfloat16 model keeps float32
variables), or CTranslate2's model.bin.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags
from machine import machine, recorded_path, recorded_row, write_record

FLAGS = flags.FLAGS
flags.DEFINE_string("teacher", None, "The teacher's run.")
flags.DEFINE_string("student", None, "The student's run (none: the teacher's rows only).")
flags.DEFINE_string("source", None, "Test sources, one per line.")
flags.DEFINE_string("reference", None, "Their references.")
flags.DEFINE_string("shortlist", "100,50", "The shortlist setting measured.")
flags.DEFINE_list("cores", ["2", "1"], "CPUs per setting; settings with 1 are those of ONE_CORE.")
flags.DEFINE_integer("timed_lines", 300, "Sentences of each timed pass.")
flags.DEFINE_integer("repeats", 3, "Timed passes.")
flags.DEFINE_integer(
    "batch_tokens", 4096, "Source tokens per batch, in both engines.", lower_bound=1
)
flags.DEFINE_integer("beam_size", 4, "The search of every setting (1: greedy).")
flags.DEFINE_float(
    "patience", 0.0, "Beam search's patience in both engines (0: t2t_lite's exact bound, "
    "CTranslate2's default of 1).", lower_bound=0.0,
)  # fmt: skip
flags.DEFINE_list("student_beams", [], "The student's beams, each a row set (none: --beam_size).")
flags.DEFINE_list("inter_threads", ["1"], "Batches searched at once on 2 CPUs, each a row set.")
flags.DEFINE_list("weights", ["float32", "bfloat16", "int8"], "t2t_lite's weights measured.")
flags.register_validator(
    "weights",
    lambda weights: "float32" in weights,
    "--weights must include float32: the table's speeds are ratios to the teacher's float32",
)
flags.DEFINE_string("worker", None, "Internal: one setting as JSON.")
flags.DEFINE_string("replot", None, "Draw the PNG of this JSON record again, and nothing else.")
flags.DEFINE_string("record", None, "Where the JSON, .md and .png go; default bench/results/.")

# The settings measured on one CPU as well: each model's slowest and fastest.
ONE_CORE = {("t2t_lite", "float32", False), ("t2t_lite", "int8", True),
            ("ctranslate2", "int8", False), ("ctranslate2", "int8", True)}  # fmt: skip


def t2t_translate(setting: dict):
    """(translate(lines) --> texts, weights in bytes) of a t2t_lite setting."""
    from t2t_lite.decode.translator import Translator
    from t2t_lite.hparams.search_settings import parse_shortlist
    from t2t_lite.model.transformer import Transformer
    from t2t_lite.run.run import Run

    shortlist = parse_shortlist(setting["shortlist"] or "")
    search = {"beam_size": setting["beam_size"], "shortlist": shortlist,
              "patience": setting.get("patience", 0.0)}  # the run's alpha  # fmt: skip
    quantize = "int8" if setting["weights"] == "int8" else None
    run = Run.restore(setting["run"], search=search, quantize=quantize)
    model, policy = run.model, {"float32": "float32", "bfloat16": "mixed_bfloat16"}
    if setting["weights"] in policy and model.dtype_policy.name != policy[setting["weights"]]:
        copy = Transformer.from_config({**model.get_config(), "dtype": policy[setting["weights"]]})
        copy.build()
        copy.set_weights(model.get_weights())
        model = copy
    translator = Translator(
        model, run.tokenizer, run.search, FLAGS.batch_tokens, run.problem.postprocess,
        shortlist=run.shortlist, inter_threads=setting["inter_threads"],
    )  # fmt: skip
    size = sum(v.numpy().nbytes for v in model.weights)
    return translator.translate, int(size)


def ct2_translate(setting: dict):
    import ctranslate2
    import sentencepiece

    folder = setting["folder"]
    with open(os.path.join(folder, "t2t_export.json")) as f:
        info = json.load(f)
    pieces = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(folder, info["vocabulary"])
    )
    inter = setting["inter_threads"]
    translator = ctranslate2.Translator(
        folder, device="cpu", inter_threads=inter, intra_threads=max(1, setting["cores"] // inter)
    )

    def translate(lines):
        tokens = [pieces.encode(line.strip(), out_type=str) for line in lines]
        results = translator.translate_batch(
            tokens, beam_size=setting["beam_size"], length_penalty=setting["alpha"],
            patience=setting.get("patience") or 1.0, max_batch_size=FLAGS.batch_tokens,
            batch_type="tokens",
            max_input_length=info["max_positions"], max_decoding_length=info["max_positions"],
            use_vmap=bool(setting["shortlist"]),
        )  # fmt: skip
        return [pieces.decode(r.hypotheses[0]) for r in results]

    return translate, os.path.getsize(os.path.join(folder, "model.bin"))


def work(setting: dict) -> dict:
    """One setting, in this (pinned) process."""
    import sacrebleu

    from t2t_lite.runtime.threads import split_cpus

    if setting["engine"] == "t2t_lite":
        split_cpus(setting["inter_threads"])  # before TensorFlow runs

    with open(FLAGS.source, encoding="utf-8") as f:
        sources = [line.rstrip("\n") for line in f]
    with open(FLAGS.reference, encoding="utf-8") as f:
        references = [line.rstrip("\n") for line in f]
    make = ct2_translate if setting["engine"] == "ctranslate2" else t2t_translate
    translate, size = make(setting)
    outputs = translate(sources)
    timed = sources[: FLAGS.timed_lines]
    seconds = []
    for _ in range(FLAGS.repeats):
        start = time.perf_counter()
        translate(timed)
        seconds.append(time.perf_counter() - start)
    bleu = sacrebleu.corpus_bleu(outputs, [references]).score
    return {**setting, "bleu": round(bleu, 2), "size_mb": round(size / 2**20, 1),
            "sentences_per_second": round(len(timed) / statistics.median(seconds), 2)}  # fmt: skip


def ct2_export(run: str, folder: str) -> str:
    program = os.path.join(os.path.dirname(sys.executable), "t2t-export")
    command = [program, f"--output_dir={run}", f"--export_dir={folder}", "--format=ctranslate2",
               "--ct2_quantization=int8", f"--shortlist={FLAGS.shortlist}"]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
    return os.path.join(folder, "1")


def settings(folder: str) -> list[dict]:
    from t2t_lite.run.run import tuned_search

    found = []
    for model in ("teacher", "student"):
        run = getattr(FLAGS, model)
        if run is None:  # the teacher alone, as on a machine without the student
            continue
        exported = ct2_export(run, os.path.join(folder, model))
        alpha = tuned_search(run).get("alpha", 0.6)  # the problem's default otherwise
        for beam in beams(model):
            for weights, short in [(w, s) for w in FLAGS.weights for s in (False, True)]:
                found.append({"model": model, "engine": "t2t_lite", "run": run,
                              "weights": weights, "shortlist": FLAGS.shortlist if short else None,
                              "beam_size": beam, "patience": FLAGS.patience})  # fmt: skip
            for short in (None, FLAGS.shortlist):  # its vocabulary map (vmap.txt), used or not
                found.append({"model": model, "engine": "ctranslate2", "weights": "int8",
                              "folder": exported, "shortlist": short, "alpha": alpha,
                              "beam_size": beam, "patience": FLAGS.patience})  # fmt: skip
    return found


def beams(model: str) -> list[int]:
    """The beams `model` is measured at: --beam_size, or --student_beams for the student."""
    if model == "student" and FLAGS.student_beams:
        return [int(beam) for beam in FLAGS.student_beams]
    return [FLAGS.beam_size]


def machine_shares() -> list[tuple[int, int]]:
    """(CPUs, batches searched at once) of each row of a setting: --inter_threads on the most
    CPUs, one batch at a time on fewer."""
    most = max(map(int, FLAGS.cores))
    return [(cores, inter) for cores in map(int, FLAGS.cores)
            for inter in (map(int, FLAGS.inter_threads) if cores == most else [1])]  # fmt: skip


def one_core(setting: dict) -> bool:
    return (setting["engine"], setting["weights"], bool(setting["shortlist"])) in ONE_CORE


def spawn(setting: dict) -> dict:
    cpus = ",".join(str(i) for i in range(setting["cores"]))
    command = ["taskset", "-c", cpus, sys.executable, __file__, f"--worker={json.dumps(setting)}",
               f"--source={FLAGS.source}", f"--reference={FLAGS.reference}",
               f"--timed_lines={FLAGS.timed_lines}", f"--repeats={FLAGS.repeats}",
               f"--batch_tokens={FLAGS.batch_tokens}"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"{setting}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def plot(rows: list[dict], path: str) -> None:
    from t2t_lite.runtime.figures import pyplot, write_png

    plt = pyplot("the speed and quality plot")
    figure, axes = plt.subplots(figsize=(8, 4.8))
    # The rows of the most CPUs, and of those the most batches at once (the table has all).
    most = max(r["cores"] for r in rows)
    inter = max(r.get("inter_threads", 1) for r in rows if r["cores"] == most)
    shown = [r for r in rows if r["cores"] == most and r.get("inter_threads", 1) == inter]
    for index, row in enumerate(sorted(shown, key=lambda r: r["sentences_per_second"])):
        marker = "o" if row["model"] == "teacher" else "s"
        color = "tab:red" if row["engine"] == "ctranslate2" else "tab:blue"
        axes.scatter(row["sentences_per_second"], row["bleu"], marker=marker, color=color)
        offset = (5, 6 if index % 2 else -10)  # neighbours' labels above and below in turn
        axes.annotate(label(row), (row["sentences_per_second"], row["bleu"]), fontsize=7,
                      xytext=offset, textcoords="offset points")  # fmt: skip
    axes.set_xscale("log")
    axes.margins(x=0.12)  # room for the labels of the fastest points
    at_once = f", {inter} batches at once" if inter > 1 else ""
    axes.set_xlabel(f"sentences per second, {search_name()}, {most} CPUs{at_once} (log scale)")
    axes.set_ylabel("test BLEU")
    axes.set_title("teacher (circles) and student (squares); blue t2t_lite, red CTranslate2")
    write_png(figure, path, dpi=120)


def search_name() -> str:
    """The search of the settings, as the table and the plot name it."""
    name = f"beam {FLAGS.beam_size}" if FLAGS.beam_size > 1 else "greedy search"
    name += f", patience {FLAGS.patience:g}" if FLAGS.patience and FLAGS.beam_size > 1 else ""
    if beams("student") != [FLAGS.beam_size]:
        name += f" (the student: beam {', '.join(map(str, beams('student')))})"
    return name


def label(row: dict) -> str:
    engine = "CT2 " if row["engine"] == "ctranslate2" else ""
    short = " +SL" if row["shortlist"] else ""
    beam = f" b{row['beam_size']}" if beams("student") != [FLAGS.beam_size] else ""
    return f"{row['model']}{beam} {engine}{row['weights']}{short}"


def table(rows: list[dict], base: float) -> str:
    lines = ["| model | beam | engine | weights | shortlist | BLEU | size (MiB) | cores "
             "| batches at once | sentences/s | vs teacher float32 |",
             "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['beam_size']} | {r['engine']} | {r['weights']} | "
            f"{r['shortlist'] or ''} | "
            f"{r['bleu']:.2f} | {r['size_mb']:.1f} | {r['cores']} | "
            f"{r.get('inter_threads', 1)} | "
            f"{r['sentences_per_second']:.1f} | {r['sentences_per_second'] / base:.2f}x |"
        )
    return "\n".join(lines)


def main(argv) -> None:
    del argv
    if FLAGS.worker:
        print(json.dumps(work(json.loads(FLAGS.worker))))
        return
    if FLAGS.replot:
        with open(FLAGS.replot) as f:
            plot(json.load(f)["rows"], FLAGS.replot.removesuffix(".json") + ".png")
        return
    load = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for setting in settings(folder):
            for cores, inter in machine_shares():
                if cores == 1 and not one_core(setting):
                    continue
                share = {"cores": cores, "inter_threads": inter}
                rows.append(recorded_row(spawn({**setting, **share})))
                print(json.dumps(rows[-1]), flush=True)
    about = machine(load)
    base = next(r for r in rows if r["model"] == "teacher" and r["weights"] == "float32"
                and not r["shortlist"] and r["cores"] == 2
                and r["inter_threads"] == 1)["sentences_per_second"]  # fmt: skip
    text = (f"Teacher and student on {recorded_path(FLAGS.source)}, {search_name()}: "
            f"{about['cpu']}, commit {about['commit']}, "
            f"{about['date']}; medians of {FLAGS.repeats} timed passes of {FLAGS.timed_lines} "
            f"sentences; load {about['load']}\n\n{table(rows, base)}\n")  # fmt: skip
    print(text)
    kind = "student" if FLAGS.beam_size == 4 else f"student_beam{FLAGS.beam_size}"
    kind += f"_patience{FLAGS.patience:g}" if FLAGS.patience else ""
    if beams("student") != [FLAGS.beam_size]:
        kind += "_student_beams" + "_".join(map(str, beams("student")))
    if FLAGS.inter_threads != ["1"]:
        kind += "_inter_threads" + "_".join(FLAGS.inter_threads)
    if FLAGS.batch_tokens != FLAGS["batch_tokens"].default:
        kind += f"_batch{FLAGS.batch_tokens}"
    name = f"{about['date']}_{kind}"
    write_record(FLAGS.record, kind, about, {"rows": rows}, text)
    record = FLAGS.record or os.path.join(os.path.dirname(__file__), "results", name)
    plot(rows, record + ".png")


if __name__ == "__main__":
    app.run(main)
