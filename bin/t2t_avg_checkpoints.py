"""t2t-avg-checkpoints: averages the last N checkpoints of a run into output_dir/averaged/.

  t2t-avg-checkpoints --output_dir=/tmp/run --num_last=5            # the paper's base model
  t2t-avg-checkpoints --output_dir=/tmp/run --num_last=20 --min_minutes=10

t2t-decode and t2t-export then read output_dir/averaged/ (the newest of averaged/ and
checkpoints/ by default, or --checkpoint=output_dir/averaged).
"""

from __future__ import annotations

from absl import flags, logging

from t2t_lite.bin import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "A directory written by t2t-train.", required=True)
flags.DEFINE_integer("num_last", 5, "How many of the newest checkpoints to average.")
flags.DEFINE_float("min_minutes", 0.0, "Only checkpoints written at least M minutes apart.")
flags.DEFINE_string("averaged_dir", None, "Where to write (default: output_dir/averaged).")


def main() -> None:
    from t2t_lite.run.run_info import RunInfo

    RunInfo.load(FLAGS.output_dir)  # a folder that is no run: refused before TensorFlow loads
    from t2t_lite.run.averaging import average_run  # TensorFlow: after --help

    path, paths = average_run(
        FLAGS.output_dir, FLAGS.num_last, FLAGS.min_minutes, FLAGS.averaged_dir
    )
    logging.info("averaged %d checkpoints (%s) into %s", len(paths), ", ".join(paths), path)
    print(path)


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
