"""The run directory: every file and folder that t2t-train and the commands after it write in an
output_dir, named once here.

    output_dir/
      hparams.json           RunInfo: problem, data_dir, hparams set, resolved hparams, vocab size
                             (run_info.py)
      checkpoints/           tf.train.CheckpointManager's ckpt-N files and its `checkpoint` state
                             file; the model is stored under the key "model" (checkpoints.py)
      last_checkpoint.json   the last checkpoint t2t-train saved: a run whose checkpoints are all
                             gone is refused rather than restarted from step 0
      best/                  the checkpoint with the best dev metric so far, and best.json
      averaged/              t2t-avg-checkpoints' averaged checkpoint, and averaged.json naming
                             the checkpoints averaged (averaging.py)
      final/                 the model a budget run kept at its end, and choice.json saying why
                             (t2t_lite.train.final_choice)
      budget.json            a budget run's minutes spent and steps expected (train/budget.py),
                             and the model the budget chose (train/model_probe.py)
      peak_rate.json         the budget run's learning-rate decisions (train/budget.py)
      dropout.json           the late-dropout decisions (train/late_dropout.py)
      search.json            the search settings a budget run tuned on dev at its end, which
                             the commands decode with unless flags say otherwise
                             (train/search_tuning.py)
      confidence.json        t2t-calibrate's fit of the sentence confidence on the dev split
                             (decode/confidence.py, which names it)
      adapter.json           an adapter run's rank and parent: its run folder, checkpoint and
                             the SHA-256 of its weights (adapter.py); its checkpoints then
                             hold the LoRA weights alone
      machines.json          the machines the run trained on: each process's CPU, its matrix
                             unit and GPUs, from its first step (the model card names them)
      summaries/             TensorBoard event files of the training and dev metrics
      train.lock             the t2t-train writing the run, its PID; removed when it ends (lock.py)

A checkpoint folder (checkpoints/, best/, averaged/, final/) holds `ckpt-<step>.index` and
`.data-*` files and TensorFlow's `checkpoint` state file; a save in progress writes
`ckpt-<step>_temp/` first.
"""

from __future__ import annotations

RUN_INFO_FILE = "hparams.json"
CHECKPOINT_DIR = "checkpoints"
LAST_CHECKPOINT_FILE = "last_checkpoint.json"
BEST_DIR = "best"
BEST_INFO = "best.json"
AVERAGED_DIR = "averaged"
AVERAGED_INFO = "averaged.json"
FINAL_DIR = "final"
CHOICE_FILE = "choice.json"
BUDGET_FILE = "budget.json"
RATE_FILE = "peak_rate.json"
DROPOUT_FILE = "dropout.json"
SEARCH_FILE = "search.json"
ADAPTER_FILE = "adapter.json"
MACHINES_FILE = "machines.json"
SUMMARIES_DIR = "summaries"
LOCK_FILE = "train.lock"
# In every checkpoint folder: TensorFlow's state file, listing the folder's checkpoints.
STATE_FILE = "checkpoint"

# The folders a run's model may be restored from, in the order `checkpoints.checkpoint_candidates`
# considers them when their newest checkpoints were written at the same time.
MODEL_DIRS = (FINAL_DIR, AVERAGED_DIR, CHECKPOINT_DIR)
