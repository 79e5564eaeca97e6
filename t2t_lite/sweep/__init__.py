"""t2t-sweep's engine: rows of hparams times seeds trained as t2t-train runs, each evaluated,
and reported side by side (beside the paper's Table 3 for the `table3_small` definition).

plan.py (what to train), records.py (what a run folder says: done, resume, new), runner.py (the
t2t-train processes), evaluation.py (a run's dev results), compare.py (the paper's direction
against the sweep's), report.py and plots.py (report.md, report.json, PNGs).
"""
