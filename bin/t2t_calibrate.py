"""t2t-calibrate: fit a run's sentence confidence on its dev split (confidence.json).

  t2t-calibrate --output_dir=runs/ende
  t2t-calibrate --output_dir=runs/ende --decode_from_file=test.en --reference=test.de

Translates the first --lines sentences of the dev split with the run's search, and fits the
confidence t2t-decode and t2t-serve report (expected sentence chrF / 100 given the mean token
log-prob) by isotonic regression. With --decode_from_file and --reference, it reports how well
the saved confidence ranks those held-out lines instead (Spearman correlation with chrF).
"""

from __future__ import annotations

from absl import flags

from t2t_lite.bin import cli, run_flags

FLAGS = flags.FLAGS
run_flags.define_run_flags()
flags.adopt_module_key_flags(run_flags)
flags.DEFINE_integer("lines", 1000, "Dev sentences to fit on.", lower_bound=10)
flags.DEFINE_string("decode_from_file", None, "Held-out source lines to evaluate on.")
flags.DEFINE_string("reference", None, "Their references (with --decode_from_file).")


def main() -> None:
    if bool(FLAGS.decode_from_file) != bool(FLAGS.reference):
        raise ValueError("--decode_from_file and --reference go together")
    run_flags.check_run_flags()
    cli.check_files("decode_from_file", "reference")
    from t2t_lite.decode import confidence  # TensorFlow: after the flags are checked
    from t2t_lite.decode.runner import read_input
    from t2t_lite.decode.translator import Translator
    from t2t_lite.train.evaluation import dev_texts

    if FLAGS.decode_from_file:
        sources, names = read_input(FLAGS.decode_from_file)
        references, _ = read_input(FLAGS.reference, "--reference")
        if len(references) != len(sources):
            raise ValueError(f"--reference has {len(references)} lines, the input {len(sources)}")
    run = run_flags.restore_run()
    translator = Translator.from_run(run)
    if not FLAGS.decode_from_file:
        sources, references = dev_texts(run.problem, run.data_dir, run.hparams, FLAGS.lines)
        names = [f"dev line {i + 1}" for i in range(len(sources))]
    found = translator.hypotheses(sources, names, details=True)
    measures, chrfs = confidence.measures_and_chrf(found, references)
    if FLAGS.decode_from_file:
        calibrated = [translator.calibration([m]) for m in measures]
        print(
            f"{translator.calibration.name}: Spearman correlation with sentence chrF over "
            f"{len(chrfs)} lines {confidence.spearman(calibrated, chrfs):.3f} (mean log-prob: "
            f"{confidence.spearman(measures, chrfs):.3f})"
        )
        return
    fitted = confidence.fit(measures, chrfs)
    path = fitted.save(run.output_dir)
    print(f"{path}: {fitted.name}; Spearman correlation with sentence chrF {fitted.spearman:.3f}")


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
