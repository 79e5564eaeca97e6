"""t2t-avg-checkpoints: averages the last N checkpoints of a run into output_dir/averaged/.

  t2t-avg-checkpoints --output_dir=/tmp/run --num_last=5            # the paper's base model
  t2t-avg-checkpoints --output_dir=/tmp/run --num_last=20 --min_minutes=10
t2t-decode and t2t-export then read output_dir/averaged/ (the newest of averaged/ and
checkpoints/ by default, or --checkpoint=output_dir/averaged).
"""

from __future__ import annotations

import os

from absl import app, flags, logging

F = flags.FLAGS
flags.DEFINE_string("output_dir", None, "A directory written by t2t-train.")
flags.DEFINE_integer("num_last", 5, "How many of the newest checkpoints to average.")
flags.DEFINE_float("min_minutes", 0.0, "Only checkpoints written at least M minutes apart.")
flags.DEFINE_string("averaged_dir", None, "Where to write (default: output_dir/averaged).")
flags.mark_flag_as_required("output_dir")


def main(argv):
    del argv
    from t2t_lite.runtime import checkpoints, run_info

    info = run_info.RunInfo.load(F.output_dir)
    source = os.path.join(F.output_dir, run_info.CHECKPOINT_DIR)
    paths = checkpoints.select_for_averaging(source, F.num_last, F.min_minutes)
    target = F.averaged_dir or os.path.join(F.output_dir, run_info.AVERAGED_DIR)
    path = checkpoints.average_checkpoints(run_info.build_model(info), paths, target)
    logging.info("averaged %d checkpoints (%s) into %s", len(paths), ", ".join(paths), path)
    print(path)


def run():
    app.run(main)


if __name__ == "__main__":
    run()
