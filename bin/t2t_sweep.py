"""t2t-sweep: trains rows of hparams x seeds as t2t-train runs, evaluates each on dev, and writes
report.md, report.json and PNGs into --sweep_dir. Rerunning the command resumes a killed sweep.

  t2t-sweep --problem=translate_ende_lohelp --data_dir=D --sweep_dir=S --sweep=table3_small \\
      --train_minutes=5 --seeds=1,2
  t2t-sweep --problem=algorithmic_reverse --data_dir=D --sweep_dir=S \\
      --hparams_set=transformer_tiny --overrides='num_heads=1;num_heads=8' --train_steps=300
  t2t-sweep --sweep_dir=S --report_only
"""

from __future__ import annotations

from absl import app, flags

from t2t_lite.bin import cli
from t2t_lite.sweep.plan import TRAIN_FLAG_DEFAULTS

FLAGS = flags.FLAGS
flags.DEFINE_string("sweep_dir", None, "Folder of the runs and the report.", required=True)
flags.DEFINE_string("problem", None, "Registered problem (not needed with --report_only).")
flags.DEFINE_string("data_dir", None, "Folder written by t2t-datagen.")
flags.DEFINE_string("sweep", "", "A shipped sweep definition (table3_small) or a JSON file.")
flags.DEFINE_list("sets", [], "Rows: hparams sets, comma-separated.")
flags.DEFINE_multi_string("overrides", [], "Rows: override sets of --hparams_set, ';'-separated.")
flags.DEFINE_string("hparams_set", "transformer_small", "The set --overrides rows change.")
flags.DEFINE_string("hparams", "", "Overrides common to every row: k=v,k=v.")
flags.DEFINE_float("train_minutes", 0.0, "Training minutes of each run (a resume gets the rest).")
flags.DEFINE_integer("train_steps", 0, "Training steps of each run (0: the set's).")
flags.DEFINE_list("seeds", ["1"], "Seeds; every row is trained once per seed.")
flags.DEFINE_integer("eval_examples", 300, "Dev examples decoded for BLEU / F1 / accuracy.")
flags.DEFINE_boolean("report_only", False, "Rebuild the report from the runs; train nothing.")
flags.DEFINE_string("usr_dir", None, "Python module or package with your own problems.")
for _name, _default in TRAIN_FLAG_DEFAULTS.items():
    flags.DEFINE_integer(_name, _default, f"t2t-train's --{_name} for every run.")


def main() -> None:
    from t2t_lite.sweep import plan, report  # no TensorFlow: --report_only is quick

    if FLAGS.report_only:
        print(report.write_report(*plan.load_plan(FLAGS.sweep_dir)))
        return
    if not (FLAGS.problem and FLAGS.data_dir):
        raise app.UsageError("--problem and --data_dir are needed (except with --report_only)")
    from t2t_lite import problems
    from t2t_lite.sweep import runner

    if FLAGS.usr_dir:
        problems.import_usr_dir(FLAGS.usr_dir)
    problems.get_problem(FLAGS.problem).check_data_dir(FLAGS.data_dir)
    definition = plan.definition_from_flags(
        FLAGS.sweep, FLAGS.sets, FLAGS.overrides, FLAGS.hparams_set
    )
    config = plan.SweepConfig(
        **{name: FLAGS[name].value for name in ("sweep_dir", "problem", "data_dir", "hparams")},
        **{name: FLAGS[name].value for name in ("train_minutes", "train_steps", "eval_examples")},
        seeds=plan.parse_seeds(FLAGS.seeds),
        train_flags={name: FLAGS[name].value for name in TRAIN_FLAG_DEFAULTS},
        usr_dir=FLAGS.usr_dir or "",
    )
    print(runner.run_sweep(definition, config))


def run() -> None:
    from t2t_lite.sweep import runner

    cli.run(main, (runner.SweepFailed, runner.SweepInterrupted))  # one line, exit status 1


if __name__ == "__main__":
    run()
