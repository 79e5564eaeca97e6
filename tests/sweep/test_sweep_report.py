"""The sweep report from runs' records: summaries over seeds, the paper's direction against the
sweep's, the sentences, the pictures, and the same report when rebuilt."""

import json
import os
import sys

import pytest

from t2t_lite.extras import MissingExtraError
from t2t_lite.hparams.sweeps import TABLE3_SMALL
from t2t_lite.runtime.cpu import describe_machine, machine_kind
from t2t_lite.sweep import compare, plots, records, report
from t2t_lite.sweep.plan import SweepConfig, plan_runs

# Dev perplexities by (row, seed); the base is 10.0 +- 0.1.
PERPLEXITY = {
    ("base", 1): 9.9, ("base", 2): 10.1,
    ("A_h1", 1): 10.9, ("A_h1", 2): 11.1,  # higher, as the paper's 5.29 against 4.92
    ("C_n4", 1): 9.0, ("C_n4", 2): 9.2,  # lower; the paper's 4.88 is the same within 1%
    ("E_learned", 1): 10.05,  # one seed: the same, as the paper's
}  # fmt: skip


def evaluation(perplexity: float, seed: int) -> dict:
    return {"dev_loss": 0.0, "dev_perplexity": perplexity, "dev_accuracy": 0.5, "step": 1200 + seed,
            "params": 7_568_384, "metric": "bleu", "bleu": 20.0 + seed,
            "train_examples": 30000}  # fmt: skip


@pytest.fixture
def swept(tmp_path):
    data_dir = tmp_path / "data"
    config = SweepConfig(sweep_dir=str(tmp_path / "sweep"), problem="translate_ende_lohelp",
                         data_dir=str(data_dir), seeds=(1, 2), train_minutes=5.0)  # fmt: skip
    for run in plan_runs(TABLE3_SMALL, config):
        if (run.row.name, run.seed) in PERPLEXITY:
            value = evaluation(PERPLEXITY[run.row.name, run.seed], run.seed)
            records.write_done(run, config, value, minutes=5.0)
    return config


def test_directions():
    assert compare.direction(0.37, 4.92) == compare.HIGHER
    assert compare.direction(-0.04, 4.92) == compare.SAME  # within 1%
    assert compare.direction(-0.5, 10.0, spread=0.6) == compare.SAME  # within the seeds' spread
    assert compare.direction(-0.5, 10.0, spread=0.1) == compare.LOWER


def test_report_numbers_and_verdicts(swept):
    path = report.write_report(TABLE3_SMALL, swept)
    with open(os.path.join(swept.sweep_dir, "report.json")) as f:
        built = json.load(f)
    command = "--sweep=table3_small --train_minutes=5 --seeds=1,2"
    assert command in built["command"] and f"```\n{built['command']}\n```" in open(path).read()
    # The report names no machine's folders: the command has placeholders, explained above it.
    assert "--data_dir=DATA_DIR --sweep_dir=SWEEP_DIR" in built["command"]
    assert (
        "Made by (DATA_DIR: what `t2t-datagen --problem=translate_ende_lohelp` wrote"
        in open(path).read()
    )
    for name in ("report.md", "report.json"):
        assert str(swept.data_dir) not in open(os.path.join(swept.sweep_dir, name)).read()
    rows = {row["name"]: row for row in built["rows"]}
    assert rows["base"]["dev_perplexity"]["mean"] == pytest.approx(10.0)
    assert rows["base"]["dev_perplexity"]["std"] == pytest.approx(0.1414, abs=1e-4)
    assert rows["base"]["metric"]["values"] == [21.0, 22.0] and built["metric"] == "bleu"
    assert (
        rows["A_h1"]["comparison"]["reproduced"] and rows["A_h1"]["comparison"]["here"] == "higher"
    )
    assert (
        rows["E_learned"]["comparison"]["here"] == "same"
        and rows["E_learned"]["dev_perplexity"]["std"] is None
    )
    c_n4 = rows["C_n4"]["comparison"]
    assert (c_n4["paper"], c_n4["here"], c_n4["reproduced"]) == ("same", "lower", False)
    assert rows["C_n1"]["dev_perplexity"]["n"] == 0
    assert (rows["C_n1"]["comparison"]["paper"], rows["C_n1"]["comparison"]["here"]) == (
        "higher",
        None,
    )
    assert rows["base"]["comparison"] is None
    groups = {group["group"]: group for group in built["groups"]}
    assert groups["(A)"]["sentence"].startswith("(A): 1 of 1 row follows the paper's direction")
    assert groups["(C)"]["sentence"].startswith("(C): 0 of 1 row follows")
    assert groups["(C)"]["notes"] == [
        "C_n4 (N 4): dev perplexity 9.100 ± 0.141 against the base's 10.000 ± 0.141 (-9.0%, "
        "lower); the paper's row has 4.88 against 4.92 (-0.8%, the same within the tolerance). "
        "Possible reasons, from this sweep's scale: about 1,202 steps per run against the paper's "
        "100,000; 30,000 training pairs against about 4.5M sentence pairs (WMT14 en-de)."
    ]
    assert len(built["unfinished"]) == 2 * len(TABLE3_SMALL.rows) - len(PERPLEXITY)
    text = open(path).read()
    assert "| row | change | params | seeds | steps | dev PPL | BLEU | paper PPL |" in text
    assert (
        "| A_h1 | h 1, d_k = d_v = 256 | 7.57M | 2 | 1,202 | 11.000 ± 0.141 | 21.50 ± 0.71 | 5.29 |"
        in text
    )
    assert "higher / higher (as the paper)" in text and "![(C)](C.png)" in text
    assert "| C_n1 | N 1 | n/a | 0 | n/a | n/a | n/a | 6.11 | 23.7 | 36 | higher / n/a |" in text
    for name in ("A", "B", "C", "D", "E"):
        assert open(os.path.join(swept.sweep_dir, f"{name}.png"), "rb").read(4) == b"\x89PNG"


def test_the_panel_against_the_paper(swept):
    report.write_report(TABLE3_SMALL, swept)
    with open(os.path.join(swept.sweep_dir, "report.json")) as f:
        built = json.load(f)
    rows = {row["name"]: row for row in built["rows"]}
    group = next(group for group in built["groups"] if group["group"] == "(A)")
    assert group["rows"] == ["base", "A_h1", "A_h4", "A_h16", "A_h32"]
    points = plots.against_paper([rows[name] for name in group["rows"]])
    # A_h1: 11.0 against 10.0 (+10 %), spread hypot(0.1414, 0.1414) = 0.2 (2 % of the base).
    assert points["here_rows"] == [1]
    assert points["here"] == pytest.approx([10.0]) and points["here_error"] == pytest.approx([2.0])
    assert points["paper_rows"] == [1, 2, 3, 4]
    paper = [100 * (ppl - 4.92) / 4.92 for ppl in (5.29, 5.00, 4.91, 5.01)]
    assert points["paper"] == pytest.approx(paper)


def test_the_report_rebuilds_the_same(swept):
    report.write_report(TABLE3_SMALL, swept)
    files = ("report.json", "report.md")
    first = [open(os.path.join(swept.sweep_dir, name)).read() for name in files]
    report.write_report(TABLE3_SMALL, swept)
    assert [open(os.path.join(swept.sweep_dir, name)).read() for name in files] == first


def test_without_matplotlib_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtraError, match=r"pip install 't2t_lite\[viz\]'"):
        report.check_plotting()


def test_a_full_disk_while_writing_the_report_keeps_the_last_one(swept, monkeypatch):
    import errno

    from t2t_lite.runtime import atomic_io

    path = report.write_report(TABLE3_SMALL, swept)
    before = {n: open(os.path.join(swept.sweep_dir, n), "rb").read() for n in ("report.md",)}

    def full(tmp, target):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_io, "commit", full)
    with pytest.raises(OSError, match=r"could not write .*/sweep/.*: No space left on device \("):
        report.write_report(TABLE3_SMALL, swept)
    assert open(path, "rb").read() == before["report.md"]
    assert not [n for n in os.listdir(swept.sweep_dir) if n.endswith(".tmp")]


def test_the_report_names_where_the_runs_ran_and_warns_of_mixed_cpus(swept):
    here = machine_kind(describe_machine())
    finished = sorted(f"{row}-seed{seed}" for row, seed in PERPLEXITY)
    built = report.build_report(TABLE3_SMALL, swept)
    assert {kind: sorted(names) for kind, names in built["machines"].items()} == {here: finished}
    text = report.render_markdown(built)
    assert f"Ran on {here}: 7 runs.\n" in text and "depend on the CPU" not in text
    # One run finished on another kind of CPU (a sweep resumed elsewhere), one before runs
    # recorded their machine: the report says which and warns that steps differ by CPU.
    runs = {run.name: run for run in plan_runs(TABLE3_SMALL, swept)}
    other = {"cpu": "AMD EPYC 9B14", "matrix_unit": "avx512_bf16", "cpus": 2}
    for name, machine in (("A_h1-seed2", other), ("C_n4-seed2", None)):
        path = os.path.join(runs[name].output_dir, records.DONE_FILE)
        done = records.read_json(path)
        done["machine"] = machine
        with open(path, "w") as f:
            json.dump(done, f)
    built = report.build_report(TABLE3_SMALL, swept)
    assert built["machines"]["AMD EPYC 9B14, avx512_bf16"] == ["A_h1-seed2"]
    assert built["machines"]["not recorded"] == ["C_n4-seed2"]
    rows = {row["name"]: row for row in built["rows"]}
    assert rows["A_h1"]["seeds"]["2"]["machine"] == "AMD EPYC 9B14, avx512_bf16"
    assert rows["A_h1"]["seeds"]["1"]["machine"] == here
    text = report.render_markdown(built)
    assert f"Ran on {here}: 5 runs; AMD EPYC 9B14, avx512_bf16: 1 run; not recorded: 1 run." in text
    assert "a run's steps depend on the CPU as well as on its row" in text


# Each seed's dev outputs against the references: the runs' chrF and TER come from them.
REFERENCES = ["the dog is barking .", "the cat sat on the mat"]
OUTPUTS = {1: ["the dog barks .", "a cat sat on a mat"], 2: ["the dog barking", "the cat sat"]}


def test_chrf_and_ter_beside_bleu_where_the_runs_record_them(swept):
    from sacrebleu.metrics import CHRF, TER

    from t2t_lite.sweep.evaluation import translation_scores

    runs = {run.name: run for run in plan_runs(TABLE3_SMALL, swept)}
    # The base's runs record chrF and TER (as evaluate_run does for translation); A_h1's seed 2
    # was recorded before they were, and has none.
    for name in ("base-seed1", "base-seed2", "A_h1-seed1"):
        path = os.path.join(runs[name].output_dir, records.DONE_FILE)
        done = records.read_json(path)
        done["evaluation"].update(translation_scores(OUTPUTS[runs[name].seed], REFERENCES))
        with open(path, "w") as f:
            json.dump(done, f)
    built = report.build_report(TABLE3_SMALL, swept)
    rows = {row["name"]: row for row in built["rows"]}
    chrf = [CHRF().corpus_score(OUTPUTS[seed], [REFERENCES]).score for seed in (1, 2)]
    ter = [TER().corpus_score(OUTPUTS[seed], [REFERENCES]).score for seed in (1, 2)]
    assert rows["base"]["chrf"]["values"] == pytest.approx(chrf)
    assert rows["base"]["ter"]["values"] == pytest.approx(ter)
    assert rows["A_h1"]["chrf"]["n"] == 1 and rows["C_n4"]["chrf"]["n"] == 0
    text = report.render_markdown(built)
    assert (
        "| row | change | params | seeds | steps | dev PPL | BLEU | chrF | TER | paper PPL |"
        in text
    )
    mean, std = sum(chrf) / 2, abs(chrf[0] - chrf[1]) / 2**0.5
    ter_mean, ter_std = sum(ter) / 2, abs(ter[0] - ter[1]) / 2**0.5
    assert f"| 21.50 ± 0.71 | {mean:.2f} ± {std:.2f} | {ter_mean:.2f} ± {ter_std:.2f} |" in text
    assert f"| 21.50 ± 0.71 | {chrf[0]:.2f} | {ter[0]:.2f} |" in text  # A_h1: one seed
    assert "| 21.50 ± 0.71 | n/a | n/a |" in text  # C_n4: none recorded
    assert "BLEU (with chrF and TER) of the first" in text
