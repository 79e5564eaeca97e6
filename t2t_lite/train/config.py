"""How a run trains, as t2t-train's flags say it: `TrainConfig`, the metrics that can pick the
best model, and the ends of a run that are not a mistake in its flags. Nothing here imports
TensorFlow, so that t2t-train defines its flags and answers `--help` without it.
"""

from __future__ import annotations

import dataclasses
import sys

# Ends of a run that are not a mistake in its flags (t2t-train: one line, exit status 1).
from t2t_lite.run.checkpoints import CheckpointError
from t2t_lite.runtime.cluster import CLUSTERS as CLUSTERS  # t2t-train's --cluster
from t2t_lite.runtime.cluster import SLURM_PORT_BASE as SLURM_PORT_BASE
from t2t_lite.runtime.cluster import LostWorkerError
from t2t_lite.runtime.distribute import STRATEGIES as STRATEGIES  # t2t-train's --strategy

# Metrics that can choose the best checkpoint, and whether higher is better.
METRIC_DIRECTIONS = {
    "dev_loss": False,
    "dev_perplexity": False,
    "dev_accuracy": True,
    "dev_bleu": True,
    "dev_chrf": True,
    "dev_ter": False,
}
# Those scored on decoded dev sentences, which need --bleu_examples.
DECODED_METRICS = ("dev_bleu", "dev_chrf", "dev_ter")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How to run training (the hparams say what to train). Mirrors t2t-train's flags."""

    output_dir: str
    data_dir: str
    # 0 with train_minutes: no step limit, the minutes end the run; None: the hparams set's
    # train_steps, or 0 with train_minutes (`resolve_run`).
    train_steps: int | None = None
    # Every N steps: evaluate on dev, write a checkpoint, log a progress line.
    eval_every: int = 1000
    save_every: int = 1000
    log_every: int = 100
    # The last K checkpoints are kept, and one every M minutes (0: none) forever.
    keep_checkpoints: int = 5
    keep_checkpoint_every_minutes: float = 0.0
    # deterministic: deterministic ops, so that a resumed run equals an unbroken one.
    seed: int = 0
    deterministic: bool = False
    eval_batches: int = 0  # 0: the whole dev split
    best_metric: str = "dev_loss"
    early_stopping: int = 0  # evaluations without improvement before stopping; 0: never
    bleu_examples: int = 0  # >0: sacreBLEU of greedy decoding on this many dev examples
    # >0: stop (evaluate, save) once this many minutes of training have passed in this process;
    # rerunning the command resumes towards train_steps.
    train_minutes: float = 0.0
    # Fine-tuning: a new run starts from this run's (or checkpoint's) weights; init_optimizer
    # also takes its optimizer state and step count (t2t_lite.train.init_from).
    init_from: str = ""
    init_optimizer: bool = False
    # >0: a LoRA adapter of this rank over --init_from's frozen weights; the run saves the
    # adapter alone (t2t_lite.run.adapter).
    lora_rank: int = 0
    usr_dir: str = ""  # the --usr_dir that registered the problem, recorded in hparams.json
    # Threads per TensorFlow op; None: t2t_lite.runtime.threads.training_threads_per_op's rule,
    # applied by `model_probe.set_training_threads` before TensorFlow starts.
    intra_threads: int | None = None
    # The --hparams overrides as given ("k=v,k=v"): what the caller chose, which the budget's
    # schedule and the late-dropout rule leave as it is (`resolve_run`).
    hparams_overrides: str = ""

    def __post_init__(self) -> None:
        for name in ("train_steps", "eval_every", "save_every", "keep_checkpoints", "log_every"):
            if name == "train_steps" and self.train_steps is None:
                continue  # resolved from the hparams set by `resolve_run`
            no_limit = name == "train_steps" and self.train_steps == 0 and self.train_minutes > 0
            if getattr(self, name) <= 0 and not no_limit:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}")
        if self.best_metric not in METRIC_DIRECTIONS:
            raise ValueError(
                f"--best_metric={self.best_metric!r} is not one of {', '.join(METRIC_DIRECTIONS)}"
            )
        if self.lora_rank < 0 or (self.lora_rank and not self.init_from):
            raise ValueError(
                f"--lora_rank={self.lora_rank}: an adapter needs a positive rank and the run it "
                "adapts, --init_from=RUN"
            )
        if self.lora_rank and self.init_optimizer:
            raise ValueError(
                "--init_optimizer: an adapter run (--lora_rank) trains new weights, so it has "
                "no optimizer state to take from its parent; drop one of the two flags"
            )
        if self.best_metric in DECODED_METRICS and not self.bleu_examples:
            raise ValueError(f"--best_metric={self.best_metric} needs --bleu_examples > 0")

    @property
    def step_limit(self) -> int:
        """The last step: train_steps, or no limit when the minutes alone end the run."""
        return self.train_steps or sys.maxsize


class ConflictingRunError(ValueError):
    """The flags of a resumed run differ from the output_dir's hparams.json."""


class NonFiniteError(FloatingPointError):
    """The loss or the gradient of a step was NaN or infinite; the update was not applied."""


class TrainingInterrupted(Exception):
    """SIGTERM or SIGINT stopped training after a checkpoint was saved."""


FAILURES = (
    NonFiniteError,
    CheckpointError,
    TrainingInterrupted,
    ConflictingRunError,
    LostWorkerError,
)
