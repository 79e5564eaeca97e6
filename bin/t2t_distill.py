"""t2t-distill: a data directory whose training targets are a teacher's translations, for a
student to train on (sequence-level knowledge distillation, Kim and Rush 2016).

    t2t-distill --teacher=runs/ende --data_dir=data/ende --output_data_dir=data/ende_student
    t2t-distill --teacher=runs/ende --data_dir=data/ende --output_data_dir=D2 --beam_size=8

Translates the training split of --data_dir with the teacher's search (its tuned beam and alpha
unless --beam_size or --alpha say otherwise) and writes --output_data_dir: the same vocabulary,
dev and test splits, and a train split whose targets are the translations, one example per
example, in order (an empty translation keeps the reference). Resumable: finished shards are
kept, and a rerun goes on from the first missing one. Then train a student on it, e.g.
`t2t-train --data_dir=data/ende_student --hparams_set=transformer_small_student ...`
(docs/training.md, "Distillation").
"""

from __future__ import annotations

import json

from absl import flags

from t2t_lite.bin import cli, run_flags, search_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("teacher", None, "The teacher's run folder (t2t-train's).", required=True)
flags.DEFINE_string(
    "checkpoint",
    None,
    run_flags.CHECKPOINT_HELP + " Several, comma-separated: an ensemble of teachers.",
)
flags.DEFINE_string(
    "data_dir",
    None,
    "The data directory (t2t-datagen's) whose train split is translated.",
    required=True,
)
flags.DEFINE_string(
    "output_data_dir",
    None,
    "Where the student's data directory goes (new, or resumed).",
    required=True,
)
flags.DEFINE_string(
    "usr_dir", None, "Python file or package registering the teacher's own problem (--usr_dir)."
)
search_flags.define_search_flags()
search_flags.define_quantize_flag()
search_flags.define_inter_threads_flag()
flags.adopt_module_key_flags(search_flags)
flags.DEFINE_integer("batch_tokens", 4096, "Source tokens per batch.", lower_bound=1)


def main() -> None:
    from t2t_lite.train.distill import DistillConfig, distill  # TensorFlow: not for --help

    config = DistillConfig(
        teacher=run_flags.from_flags(output_dir=FLAGS.teacher),
        output_data_dir=FLAGS.output_data_dir,
        batch_tokens=FLAGS.batch_tokens,
        inter_threads=FLAGS.inter_threads,
    )
    metadata = distill(config)
    print(json.dumps({split: entry["examples"] for split, entry in metadata["splits"].items()}))


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
