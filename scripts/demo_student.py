"""`make demo-student`: `make demo`'s teacher distilled into a student that is fast by design.

The demo's teacher (transformer_small, 3 + 3 layers, in demo_out/train) -> t2t-distill of the
training split (its translations as the targets) -> t2t-train of transformer_small_student (6 + 1
layers: a deep encoder, a one-layer decoder) on them with a time budget, starting from the
teacher's layers (--init_from: encoder layers 0,0,1,1,2,2 and decoder layer 0) -> t2t-decode of the
held-out test split by the teacher, the student, and the student with int8 weights and a
vocabulary shortlist -> t2t-bleu of each,
and their BLEU and decoding speed side by side. Each step is the command a user would type,
printed before it runs. Rerunning resumes: t2t-distill keeps its finished shards, t2t-train
resumes with the minutes left, and a translation newer than its model is kept.

  python scripts/demo_student.py [--work_dir=demo_out] [--train_minutes=15]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from demo import PROBLEM, run, write_test_split

# The search every model is scored with: beam 4, as `make demo` scores its teacher, and each
# run's own length penalty (the alpha its budget tuned on dev, search.json, else the problem's).
SEARCH = ["--beam_size=4"]
# The fast student's search: int8 weights and a vocabulary shortlist (docs/decoding.md).
FAST = ["--quantize=int8", "--shortlist=100,50"]


def finished_model(run_dir: str) -> str:
    """The file whose time says when a run's model was last made: the end of a budget run's
    choice (final/choice.json), else its newest checkpoint record."""
    for name in (os.path.join("final", "choice.json"), "last_checkpoint.json"):
        path = os.path.join(run_dir, name)
        if os.path.isfile(path):
            return path
    return ""


def distill(work: str, teacher: str, data_dir: str) -> str:
    """t2t-distill of the demo's training split, two batches at once (1.45x one at a time on
    2 CPUs, the same targets: docs/decoding.md); returns the student's data_dir."""
    student_data = os.path.join(work, "student_data")
    run(["t2t-distill", f"--teacher={teacher}", f"--data_dir={data_dir}",
         f"--output_data_dir={student_data}", "--inter_threads=2"])  # fmt: skip
    return student_data


def train(args, data_dir: str, output_dir: str, teacher: str) -> None:
    """t2t-train of the student with the demo's budget and settings (demo.py's `train`), from
    the teacher's weights (the layers of another depth copied: t2t_lite.train.layer_copy)."""
    run(["t2t-train", f"--problem={PROBLEM}", f"--data_dir={data_dir}",
         f"--output_dir={output_dir}", f"--hparams_set={args.hparams_set}",
         f"--init_from={teacher}", f"--hparams={args.hparams}",
         f"--train_minutes={args.train_minutes}", "--save_every=100", "--eval_every=1000",
         "--log_every=50"])  # fmt: skip


def evaluate(name: str, run_dir: str, output: str, extra: list[str], paths: dict) -> dict:
    """t2t-decode of the test split (kept when newer than the model) and t2t-bleu of it; the
    record {"sentences_per_second", "bleu"}, kept in paths["records"] under `name`."""
    records = {}
    if os.path.isfile(paths["records"]):
        with open(paths["records"]) as f:
            records = json.load(f)
    if name in records and newer(output, finished_model(run_dir)):
        print(f"\n{output}: translated after the model was made; kept")
    else:
        log = run(["t2t-decode", f"--output_dir={run_dir}", f"--decode_from_file={paths['source']}",
                   f"--decode_to_file={output}", *SEARCH, *extra])  # fmt: skip
        speed = re.findall(r"sentences done, ([0-9.]+) sentences/s", log)
        records[name] = {"sentences_per_second": float(speed[-1]) if speed else None}
    bleu = run(["t2t-bleu", f"--translation={output}", f"--reference={paths['reference']}"])
    match = re.search(r"BLEU[^=]*= ([0-9.]+)", bleu)
    records[name]["bleu"] = match.group(1) if match else "?"
    with open(paths["records"], "w") as f:
        json.dump(records, f, indent=2)
    return records[name]


def newer(path: str, than: str) -> bool:
    """Whether `path` exists and was written after the file `than` ("": never)."""
    return bool(than) and os.path.isfile(path) and os.path.getmtime(path) > os.path.getmtime(than)


def layers(run_dir: str) -> str:
    """'transformer_small, 3 + 3 layers' from a run's hparams.json."""
    with open(os.path.join(run_dir, "hparams.json")) as f:
        info = json.load(f)
    hparams = info["hparams"]
    encoder, decoder = hparams["num_encoder_layers"], hparams["num_decoder_layers"]
    return f"{info['hparams_set']}, {encoder} + {decoder} layers"


def summary(results: dict, teacher: str, student: str, student_data: str) -> None:
    with open(os.path.join(student_data, "metadata.json")) as f:
        metadata = json.load(f)
    train = metadata["splits"]["train"]["examples"]
    kept = metadata["distilled"]["kept_reference"]
    print("\n== demo-student summary ==")
    print(f"distilled training data: {train:,} pairs, {kept} empty translations kept their "
          f"references ({student_data})")  # fmt: skip
    rows = [("teacher", layers(teacher)), ("student", layers(student)),
            ("student fast", layers(student) + ", " + " ".join(FAST))]  # fmt: skip
    for (name, what), result in zip(rows, results.values(), strict=True):
        speed = result["sentences_per_second"]
        shown = f"{speed:.1f} sentences/s" if speed else "speed not measured"
        print(f"{name:13} {what}: test BLEU {result['bleu']}, {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work_dir", default="demo_out", help="make demo's --work_dir.")
    parser.add_argument("--train_minutes", type=float, default=15.0)
    parser.add_argument("--hparams_set", default="transformer_small_student")
    parser.add_argument("--hparams", default="", help="Overrides of the set (none by default).")
    args = parser.parse_args()
    work = os.path.abspath(args.work_dir)
    data_dir, teacher = os.path.join(work, "data"), os.path.join(work, "train")
    student = os.path.join(work, "student")
    if not os.path.isfile(os.path.join(teacher, "final", "choice.json")):
        sys.exit(f"demo-student: no finished teacher in {teacher}: run `make demo` first")
    student_data = distill(work, teacher, data_dir)
    train(args, student_data, student, teacher)
    source, reference, _ = write_test_split(data_dir, work)
    paths = {"source": source, "reference": reference,
             "records": os.path.join(work, "demo_student.json")}  # fmt: skip
    results = {
        "teacher": evaluate("teacher", teacher, os.path.join(work, "test.teacher.de"), [], paths),
        "student": evaluate("student", student, os.path.join(work, "test.student.de"), [],
                            paths),
        "student_fast": evaluate("student_fast", student,
                                 os.path.join(work, "test.student.fast.de"), FAST, paths),
    }  # fmt: skip
    summary(results, teacher, student, student_data)


if __name__ == "__main__":
    main()
