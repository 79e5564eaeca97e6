"""The frozen, typed hyperparameters of a Transformer and strict `k=v` overrides."""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from typing import Any

NORM_POSITIONS = ("post", "pre")
POSITION_ENCODINGS = ("sinusoid", "sinusoid_concat", "learned")
LEARNING_RATE_SCHEDULES = ("rsqrt_warmup", "constant", "linear_budget")
BUDGET_DECAY_SHAPES = ("linear", "sqrt")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16", "auto")


@dataclasses.dataclass(frozen=True)
class HParams:
    """Hyperparameters of the model and its optimization, in the paper's terms.

    Defaults are the paper's base model (section 3 and 5). `d_k` / `d_v` of 0 mean
    `d_model // num_heads`, the paper's choice; Table 3 row (B) sets `d_k` alone.
    """

    # Architecture (section 3): N layers each side, widths d_model and d_ff.
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_model: int = 512  # embeddings and every sub-layer's output
    d_ff: int = 2048  # inner layer of the position-wise feed-forward networks (section 3.3)
    # Attention: h heads of width d_k (queries, keys) and d_v (values); 0 is d_model / h.
    num_heads: int = 8
    d_k: int = 0
    d_v: int = 0
    # Residual blocks: layer norm after the sum (the paper) or before the sublayer.
    norm_position: str = "post"  # or "pre", tensor2tensor's later default
    layer_norm_epsilon: float = 1e-6
    # Positions (section 3.5; "learned" is Table 3 row E) and the tied embeddings (section 3.4).
    position_encoding: str = "sinusoid"
    max_positions: int = 1024  # rows of the position table: the longest sequence it covers
    shared_embeddings: bool = True  # one embedding for source and target; logits reuse the target's
    # Regularization (section 5.4).
    dropout: float = 0.1  # P_drop, on every sub-layer's output and on the embedding sums
    attention_dropout: float = 0.0  # on the attention weights (tensor2tensor's; not the paper's)
    relu_dropout: float = 0.0  # on the feed-forward hidden activations (tensor2tensor's too)
    label_smoothing: float = 0.1  # epsilon_ls
    # alpha > 0: a training source word seen c times is read as its unknown-word signature
    # with probability alpha / (alpha + c) (t2t_lite.data.word_dropout; words vocabularies
    # with signatures only, the parsing problems').
    word_dropout: float = 0.0
    # > 0: `dropout` is off until the run expects at least this many passes over the training
    # targets, decided once after its first steps (t2t_lite.train.late_dropout); 0: from step 1.
    dropout_passes: float = 0.0
    # Optimization (section 5.3): the rate is learning_rate * d_model^-0.5 * min(...).
    # "constant": learning_rate throughout. "linear_budget" (t2t_lite.train.budget, what
    # `--train_minutes` chooses unless a schedule is given): the peak rsqrt_warmup reaches at
    # warmup_steps, held until budget_decay_fraction of the steps after the warmup is left, then
    # a linear decay to zero at the end of `budget_minutes` of training, or at the last of the
    # run's train_steps when budget_minutes is 0.
    learning_rate_schedule: str = "rsqrt_warmup"
    learning_rate: float = 1.0
    warmup_steps: int = 4000
    budget_minutes: float = 0.0  # the time budget of a linear_budget run
    # The share of linear_budget's steps after the warmup over which it decays to zero; the
    # rate holds at its peak before it. 1: the decay starts where the warmup ends.
    budget_decay_fraction: float = 1.0
    # How that decay falls: "linear", or "sqrt", the peak times 1 - sqrt(share of the decay
    # done), which drops faster at first and spends longer at low rates (Hägele et al., 2024).
    budget_decay_shape: str = "linear"
    # > 0: a linear_budget run's rate factor follows its expected step count, decided once
    # (t2t_lite.train.budget): `learning_rate` up to budget_short_steps, this factor from
    # budget_long_steps on, and in between linear in log(steps). 0: `learning_rate` always.
    budget_long_learning_rate: float = 0.0
    budget_short_steps: int = 1500
    budget_long_steps: int = 4400
    # > 0: this share of a --train_minutes budget is kept from training for tuning the search
    # (beam size, alpha) on dev at its end; the run's search defaults then (train/search_tuning.py).
    budget_tune_share: float = 0.0
    # A share of fewer seconds than this is not kept: the whole budget trains and the problem's
    # search stays (at 5 minutes transformer_small's 5 % is 15 s, which decoded the problem's own
    # setting and nothing else, docs/training.md).
    budget_tune_min_seconds: float = 30.0
    # > 0: Adam also keeps an exponential moving average of the weights with this momentum,
    # one candidate of the end-of-run choice (t2t_lite.train.final_choice).
    ema_momentum: float = 0.0
    # Adam (section 5.3), and an optional clip of the gradients.
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-9
    clip_grad_norm: float = 0.0  # largest global norm of the gradients; 0: no clipping
    # Batching (section 5.1).
    batch_size: int = 4096  # tokens per replica, counted on padded rows (data/pipeline.py)
    accum_steps: int = 1  # batches per replica whose gradients make one update
    max_length: int = 256  # tokens; longer examples are left out of the batches
    train_steps: int = 100000  # optimizer updates
    # Execution.
    # A Keras dtype policy: also mixed_float16, mixed_bfloat16, or auto (mixed_bfloat16 where the
    # hardware computes bfloat16 natively, else float32; t2t_lite/runtime/precision.py).
    precision: str = "float32"
    jit_compile: bool = False  # XLA-compiles the training step's forward and backward pass

    def __post_init__(self) -> None:
        _check_choice("norm_position", self.norm_position, NORM_POSITIONS)
        _check_choice("position_encoding", self.position_encoding, POSITION_ENCODINGS)
        _check_choice(
            "learning_rate_schedule", self.learning_rate_schedule, LEARNING_RATE_SCHEDULES
        )
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("budget_decay_shape", self.budget_decay_shape, BUDGET_DECAY_SHAPES)
        for name in (
            "num_encoder_layers",
            "num_decoder_layers",
            "d_model",
            "d_ff",
            "num_heads",
            "batch_size",
            "accum_steps",
            "max_length",
            "max_positions",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"hparam {name} must be positive, got {getattr(self, name)}")
        for name in (
            "dropout",
            "attention_dropout",
            "relu_dropout",
            "label_smoothing",
            "ema_momentum",
        ):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"hparam {name} must be in [0, 1), got {getattr(self, name)}")
        if not 0.0 < self.budget_decay_fraction <= 1.0:
            raise ValueError(
                f"hparam budget_decay_fraction must be in (0, 1], got {self.budget_decay_fraction}"
            )
        if self.budget_long_learning_rate < 0:
            raise ValueError(
                "hparam budget_long_learning_rate must be >= 0, got "
                f"{self.budget_long_learning_rate}"
            )
        if not 0 < self.budget_short_steps < self.budget_long_steps:
            raise ValueError(
                "hparams budget_short_steps and budget_long_steps must satisfy 0 < short < long, "
                f"got {self.budget_short_steps} and {self.budget_long_steps}"
            )
        if not 0.0 <= self.budget_tune_share <= 0.5:
            raise ValueError(
                f"hparam budget_tune_share must be in [0, 0.5], got {self.budget_tune_share}"
            )
        if self.budget_tune_min_seconds < 0:
            raise ValueError(
                f"hparam budget_tune_min_seconds must be >= 0, got {self.budget_tune_min_seconds}"
            )
        self._check_bounds()
        for name in ("dropout_passes", "word_dropout"):
            if getattr(self, name) < 0:
                raise ValueError(f"hparam {name} must be >= 0, got {getattr(self, name)}")
        if not (self.d_k or self.d_v) and self.d_model % self.num_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}; "
                "set d_k and d_v explicitly"
            )

    def _check_bounds(self) -> None:
        """Every number finite, and the sizes within `LIMITS`: a run folder from elsewhere is
        input, and its hparams.json must not make a command build a model no machine holds."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"hparam {field.name} must be a finite number, got {value}")
            if field.name in LIMITS and value > LIMITS[field.name]:
                raise ValueError(
                    f"hparam {field.name}={value} is above the limit of {LIMITS[field.name]:,}"
                )
        if self.layer_norm_epsilon <= 0:
            raise ValueError(
                f"hparam layer_norm_epsilon must be > 0, got {self.layer_norm_epsilon}"
            )

    @property
    def key_dim(self) -> int:
        """d_k: size of each head's queries and keys."""
        return self.d_k or self.d_model // self.num_heads

    @property
    def value_dim(self) -> int:
        """d_v: size of each head's values."""
        return self.d_v or self.d_model // self.num_heads

    def replace(self, **changes: Any) -> HParams:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> HParams:
        """Builds HParams from a dict, rejecting unknown keys and wrong types."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        for key in values:
            _check_known(key, known)
        return cls(**{k: _coerce(known[k], v, source="json") for k, v in values.items()})

    @classmethod
    def from_json(cls, text: str) -> HParams:
        return cls.from_dict(json.loads(text))

    def override(self, overrides: str) -> HParams:
        """Applies `k=v,k=v` overrides strictly: unknown keys and bad values raise ValueError."""
        known = {f.name: f for f in dataclasses.fields(self)}
        changes: dict[str, Any] = {}
        for item in filter(None, (s.strip() for s in overrides.split(","))):
            key, sep, text = item.partition("=")
            key = key.strip()
            if not sep:
                raise ValueError(f"hparams override {item!r} is not of the form key=value")
            _check_known(key, known)
            changes[key] = _parse(known[key], text.strip())
        return self.replace(**changes)


def override_keys(overrides: str) -> set[str]:
    """The keys a `k=v,k=v` overrides string sets (what the user chose, for rules that defer)."""
    return {item.partition("=")[0].strip() for item in overrides.split(",") if item.strip()}


def parse_bool(text: str) -> bool:
    """A boolean written as text: "true"/"1" -> True, "false"/"0" -> False (any case), and a
    ValueError for anything else (where `bool(text)` would call every non-empty string true)."""
    lowered = text.lower()
    if lowered not in ("true", "false", "1", "0"):
        raise ValueError(f"{text!r} is not a boolean (true, false, 1 or 0)")
    return lowered in ("true", "1")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"hparam {name}={value!r} is not one of {', '.join(choices)}")


def _check_known(key: str, known: dict[str, dataclasses.Field]) -> None:
    if key not in known:
        close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown hparam {key!r}{hint} Valid keys: {', '.join(sorted(known))}")


# Upper bounds of the sizes, far above any model of the paper (Table 3's largest: 6 layers,
# d_model 1024, d_ff 4096, 16 heads) and of a CPU or one GPU: what a crafted hparams.json may
# not ask for.
LIMITS = {
    "num_encoder_layers": 256,
    "num_decoder_layers": 256,
    "d_model": 65_536,
    "d_ff": 262_144,
    "num_heads": 1_024,
    "d_k": 65_536,
    "d_v": 65_536,
    "max_positions": 1_048_576,
    "max_length": 1_048_576,
    "batch_size": 16_777_216,
    "accum_steps": 65_536,
}


def _type_of(field: dataclasses.Field) -> type:
    # With `from __future__ import annotations` the annotation is a string.
    return {"int": int, "float": float, "bool": bool, "str": str}[str(field.type)]


def _parse(field: dataclasses.Field, text: str) -> Any:
    kind = _type_of(field)
    try:
        return parse_bool(text) if kind is bool else kind(text)
    except ValueError:
        raise ValueError(f"hparam {field.name} expects {kind.__name__}, got {text!r}") from None


def _coerce(field: dataclasses.Field, value: Any, source: str) -> Any:
    kind = _type_of(field)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"hparam {field.name} expects {kind.__name__} in {source}, got {value!r}")
    return value
