"""LoRA adapters against the full fine-tune on the Calc domain adaptation of the results journal,
docs/results/training.md ("A domain adaptation, measured"; the table of "Adapters against the
full fine-tune, measured").

One command makes the two data folders, trains the parent (every LibreOffice help module but
Calc, 3,000 steps), fine-tunes it on Calc in full (800 steps) and trains LoRA adapters of each
rank and learning rate over it (the same 800 steps), then decodes Calc's test split with each
(beam 4, alpha 0.6) and scores it with sacreBLEU. Finished stages are skipped on a rerun, so a
killed measurement resumes; the table goes to WORK_DIR/lora_calc.json and stdout.

  python scripts/lora_calc.py --help_dir=/usr/share/libreoffice/help --work_dir=W \\
      --ranks=8,32 --learning_rates=0.2,1.0
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

from budget_recipes import run  # noqa: E402  (this folder's: one way to run a command)

PROBLEM = "translate_ende_lohelp"
HPARAMS = "precision=mixed_bfloat16,norm_position=pre,dropout=0.0,batch_size=1024"
PARENT = HPARAMS + ",warmup_steps=200,learning_rate=0.4"
FINE_TUNE = HPARAMS + ",warmup_steps=100"  # + the learning rate (the recipe's: 0.2)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def make_data(args) -> None:
    log = os.path.join(args.work_dir, "datagen.log")
    help_dir = f"help_dir={args.help_dir}"
    parent, calc = (os.path.join(args.work_dir, name) for name in ("parent_data", "calc_data"))
    if not os.path.isfile(os.path.join(parent, "metadata.json")):
        run(["t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={parent}",
             f"--problem_options={help_dir},modules=-scalc"], log)  # fmt: skip
    if not os.path.isfile(os.path.join(calc, "metadata.json")):
        vocab = os.path.join(parent, "vocab.bpe.model")
        run(["t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={calc}",
             f"--problem_options={help_dir},modules=scalc,vocab_model={vocab}"], log)  # fmt: skip


def test_split(args) -> tuple[str, str]:
    """Calc's test sentences as text files (source, reference), written once."""
    from t2t_lite.problems import get_problem
    from t2t_lite.runtime import atomic_io

    data_dir = os.path.join(args.work_dir, "calc_data")
    source, target = (os.path.join(args.work_dir, f"calc_test.{side}") for side in ("en", "de"))
    if not os.path.isfile(target):
        problem = get_problem(PROBLEM)
        with open(os.path.join(data_dir, "datagen.json")) as f:
            options = problem.resolve_options(json.load(f)["options"])
        problem.prepare(data_dir, options)
        pairs = list(problem.text_pairs("test", options))
        for path, side in ((source, 0), (target, 1)):
            atomic_io.write_text(path, "".join(pair[side] + "\n" for pair in pairs))
    return source, target


def train(args, name: str, data: str, steps: int, hparams: str, *extra: str) -> float:
    """Trains WORK_DIR/name unless it has its last checkpoint; returns the seconds it took."""
    out = os.path.join(args.work_dir, name)
    record = os.path.join(out, "lora_calc_train.json")
    if os.path.isfile(record):
        with open(record) as f:
            return json.load(f)["seconds"]
    before, start = load(), time.time()
    run(["t2t-train", f"--problem={PROBLEM}", f"--data_dir={os.path.join(args.work_dir, data)}",
         f"--output_dir={out}", "--hparams_set=transformer_small", f"--train_steps={steps}",
         f"--hparams={hparams}", *extra], os.path.join(args.work_dir, f"{name}.log"))  # fmt: skip
    seconds = time.time() - start
    with open(record, "w") as f:
        json.dump({"seconds": seconds, "load_before": before, "load_after": load()}, f)
    return seconds


def checkpoint_bytes(output_dir: str, folder: str = "checkpoints") -> int:
    """Bytes of the run's newest checkpoint in `folder`: checkpoints/ holds the trained weights
    and their Adam moments, best/ the weights alone (an adapter run's: the adapter alone)."""
    import tensorflow as tf

    path = tf.train.latest_checkpoint(os.path.join(output_dir, folder))
    folder = os.path.dirname(path)
    prefix = os.path.basename(path) + "."
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
               if f.startswith(prefix))  # fmt: skip


def score(args, name: str, source: str, reference: str) -> float:
    out = os.path.join(args.work_dir, name)
    translation = os.path.join(out, "calc_test.translated")
    log = os.path.join(args.work_dir, f"{name}.log")
    if not os.path.isfile(translation):
        run(["t2t-decode", f"--output_dir={out}", f"--decode_from_file={source}",
             f"--decode_to_file={translation}", "--beam_size=4", "--alpha=0.6"], log)  # fmt: skip
    bleu = run(["t2t-bleu", f"--translation={translation}", f"--reference={reference}"], log)
    return float(re.search(r"BLEU = ([0-9.]+)", bleu).group(1))


def trainable(args, name: str) -> int:
    """The weights a run trained: an adapter's (adapter.json), or every weight of the model."""
    out = os.path.join(args.work_dir, name)
    adapter = os.path.join(out, "adapter.json")
    if os.path.isfile(adapter):
        with open(adapter) as f:
            return json.load(f)["trainable_weights"]
    from t2t_lite.run.run import restore_model

    model, _, _ = restore_model(out)
    return sum(int(w.shape.num_elements()) for w in model.trainable_weights)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--help_dir", required=True, help="An unpacked LibreOffice help tree.")
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--ranks", default="8,32")
    parser.add_argument("--learning_rates", default="0.2,1.0", help="Of the adapters.")
    parser.add_argument("--parent_steps", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=800)
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    make_data(args)
    source, reference = test_split(args)
    runs = {"parent": train(args, "parent", "parent_data", args.parent_steps, PARENT)}
    parent = os.path.join(args.work_dir, "parent")
    runs["full"] = train(
        args, "full", "calc_data", args.steps, FINE_TUNE + ",learning_rate=0.2",
        f"--init_from={parent}",
    )  # fmt: skip
    for rank in (int(r) for r in args.ranks.split(",")):
        for rate in args.learning_rates.split(","):
            runs[f"lora_r{rank}_lr{rate}"] = train(
                args, f"lora_r{rank}_lr{rate}", "calc_data", args.steps,
                f"{FINE_TUNE},learning_rate={rate}", f"--init_from={parent}",
                f"--lora_rank={rank}",
            )  # fmt: skip
    rows = []
    for name, seconds in runs.items():
        rows.append({
            "run": name,
            "calc_test_bleu": score(args, name, source, reference),
            "trainable_weights": trainable(args, name),
            "checkpoint_bytes": checkpoint_bytes(os.path.join(args.work_dir, name)),
            "weights_bytes": checkpoint_bytes(os.path.join(args.work_dir, name), "best"),
            "train_seconds": round(seconds, 1),
        })  # fmt: skip
    full = next(row for row in rows if row["run"] == "full")
    parent_bleu = rows[0]["calc_test_bleu"]
    for row in rows:
        row["weights_pct_of_full"] = round(
            100 * row["trainable_weights"] / full["trainable_weights"], 2
        )
        gain = full["calc_test_bleu"] - parent_bleu
        row["gain_pct_of_full"] = round(100 * (row["calc_test_bleu"] - parent_bleu) / gain, 1)
    with open(os.path.join(args.work_dir, "lora_calc.json"), "w") as f:
        json.dump({"load_average_at_end": load(), "rows": rows}, f, indent=2)
    print("| run | Calc test BLEU | gain, % of full | trainable weights | % of full | "
          "weights on disk | checkpoint with Adam | training |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        size, minutes = row["checkpoint_bytes"] / 2**20, row["train_seconds"] / 60
        weights = row["weights_bytes"] / 2**20
        print(f"| {row['run']} | {row['calc_test_bleu']:.2f} | {row['gain_pct_of_full']:.1f} | "
              f"{row['trainable_weights']:,} | {row['weights_pct_of_full']:.2f} | "
              f"{weights:.2f} MiB | {size:.2f} MiB | {minutes:.1f} min |")  # fmt: skip


if __name__ == "__main__":
    main()
