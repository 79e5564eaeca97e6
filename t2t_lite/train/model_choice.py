"""The budget's choice of model: with `--train_minutes` and no `--hparams_set`, t2t-train picks
the width of the model for the compute this budget holds on this machine and the size of this
corpus.

The candidates are the problem's `budget_ladder` (problems/base.py), hparams sets narrowest
first (for translation transformer_budget_xs, _s, _m: transformer_small's recipe at widths 128,
192 and 256). Each is timed on this machine by a short probe of its own training step on the
run's data (`probe`): a few steps to trace, then steps for `PROBE_SECONDS`. From its step rate,
its target tokens per step and the budget's training seconds, a candidate expects

    tokens = steps/s * seconds * target tokens per step

and the rule (`choose`) trains the widest candidate whose tokens, discounted for repeats of the
corpus (`effective_tokens`), reach TOKENS_PER_PARAMETER times its parameters. A model that
processes too few tokens for its size is undertrained at the end of the budget, and a narrower
one that sees more of the data does better (Kaplan et al., 2020; Hoffmann et al., 2022: for a
fixed compute budget there is a best size, and it grows with the budget). The probe goes from
the widest candidate down and stops at the first that qualifies, so a fast machine times one
model; a candidate's seconds are those the budget has left after the probes up to its own, and
the probes' seconds come out of the budget (t2t-train logs them). When none qualifies, the
narrowest is trained. The constant was measured with 20-minute runs on lohelp en-de and en-fr
(docs/training.md, "The budget's choice of model").

Probes that cannot change the choice are not run. The narrowest candidate is never probed: once
every wider one has failed, it trains whatever its rate. And a candidate that would fail even at
the fastest rate a probed wider one allows it (`estimate`: the wider one's rate times their
ratio of FLOPs per token, times RATE_MARGIN) is passed over unprobed. On a slow machine, where
the probes cost most, that leaves one probe of the three.

The choice is written to budget.json ("model_choice") and is the run's hparams set in
hparams.json, so a resumed run keeps it whatever the machine is then. In a multi-worker run the
chief probes and every worker trains its choice (`Consensus.share`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

from absl import logging

# The rule's constant: the effective training target tokens a candidate must expect per
# parameter to be chosen (docs/training.md, "The budget's choice of model"). On lohelp en-de at
# 20 minutes, transformer_budget_s at 0.30 per parameter scored 5.2 test BLEU below _xs at 1.2
# (a slow stand-in); _m at 0.73 is the recipe measured at full speed on 2 cores. The bar lies
# between them.
TOKENS_PER_PARAMETER = 0.5
# Muennighoff et al. (2023), "Scaling Data-Constrained Language Models": a token seen again is
# worth less, with R*_D = 15.4 repetitions as the scale of its decay.
REPEAT_SCALE = 15.4
# A probe: steps run before timing (the first traces the step), then steps timed for at least
# PROBE_SECONDS and PROBE_MIN_STEPS, at most PROBE_MAX_STEPS.
PROBE_WARM_STEPS = 2
PROBE_SECONDS = 3.0
PROBE_MIN_STEPS = 3
PROBE_MAX_STEPS = 60
# A shorter budget is not probed (each probe traces a model, a few seconds): it trains the
# ladder's narrowest set.
PROBE_MIN_MINUTES = 3.0
# How much faster per FLOP a narrower candidate may run than a probed wider one, for passing it
# over unprobed: its rate is taken as at most the wider one's times their FLOPs ratio times this.
# Measured on slow stand-ins (docs/results/training.md): 0.74 to 1.02 between the rungs of the
# translation ladder (narrower models are less efficient per FLOP, their fixed costs larger).
RATE_MARGIN = 1.5


def effective_tokens(tokens: float, corpus_tokens: int) -> float:
    """Training tokens counted as new data: those of the first pass in full, each further pass
    worth less, as D' = U (1 + R* (1 - exp(-R / R*))) with U the corpus' tokens and R the passes
    after the first (Muennighoff et al., 2023)."""
    if corpus_tokens <= 0 or tokens <= corpus_tokens:
        return float(tokens)
    repeats = tokens / corpus_tokens - 1.0
    return corpus_tokens * (1.0 + REPEAT_SCALE * (1.0 - math.exp(-repeats / REPEAT_SCALE)))


@dataclasses.dataclass(frozen=True)
class Measured:
    """What a probe found of one candidate on this machine."""

    name: str
    parameters: int
    steps_per_second: float
    tokens_per_step: float  # target tokens
    seconds: float  # the probe's own time, tracing included


@dataclasses.dataclass(frozen=True)
class Assessed:
    """A measured candidate against the seconds it would train and the corpus."""

    measured: Measured
    seconds: float  # training seconds left to it
    corpus_tokens: int

    @property
    def steps(self) -> int:
        return int(self.measured.steps_per_second * self.seconds)

    @property
    def tokens(self) -> float:
        return self.steps * self.measured.tokens_per_step

    @property
    def passes(self) -> float:
        return self.tokens / max(self.corpus_tokens, 1)

    @property
    def tokens_per_parameter(self) -> float:
        """Effective training tokens per parameter, what the rule compares."""
        return effective_tokens(self.tokens, self.corpus_tokens) / self.measured.parameters

    @property
    def enough(self) -> bool:
        return self.tokens_per_parameter >= TOKENS_PER_PARAMETER

    def describe(self) -> str:
        m = self.measured
        return (
            f"{m.name} ({m.parameters / 1e6:.1f}M parameters, {m.steps_per_second:.2f} steps/s): "
            f"{self.steps:,} steps, {self.passes:.1f} passes, "
            f"{self.tokens_per_parameter:.2f} tokens per parameter"
        )

    def describe_best_case(self) -> str:
        """`describe` for an estimated best rate (`choose`'s passed-over candidates)."""
        m = self.measured
        return (
            f"{m.name} ({m.parameters / 1e6:.1f}M parameters, at most {m.steps_per_second:.2f} "
            f"steps/s by FLOPs): at most {self.tokens_per_parameter:.2f} tokens per parameter"
        )

    def to_json(self) -> dict:
        m = self.measured
        return {
            "hparams_set": m.name,
            "parameters": m.parameters,
            "steps_per_second": round(m.steps_per_second, 3),
            "target_tokens_per_step": round(m.tokens_per_step, 1),
            "probe_seconds": round(m.seconds, 2),
            "expected_steps": self.steps,
            "expected_passes": round(self.passes, 2),
            "tokens_per_parameter": round(self.tokens_per_parameter, 3),
        }


@dataclasses.dataclass(frozen=True)
class Choice:
    """The hparams set chosen, the candidates timed to choose it (widest first) and those passed
    over at an estimated best rate, or why none was timed."""

    hparams_set: str
    candidates: tuple[Assessed, ...]
    untimed: str = ""  # why no candidate was timed
    passed_over: tuple[Assessed, ...] = ()  # at the fastest rate they could have (`choose`)

    @property
    def probe_seconds(self) -> float:
        return sum(c.measured.seconds for c in self.candidates)

    def line(self) -> str:
        """The one log line that says what was chosen and why."""
        if not self.candidates:
            return f"model choice: {self.hparams_set}, {self.untimed}"
        why = "; ".join(
            [c.describe() for c in self.candidates]
            + [f"{c.describe_best_case()}: not timed" for c in self.passed_over]
        )
        if self.candidates[-1].measured.name == self.hparams_set:
            rule = f"the widest with at least {TOKENS_PER_PARAMETER:g} tokens per parameter"
        else:
            rule = (
                f"no wider set reaches {TOKENS_PER_PARAMETER:g} tokens per parameter: the "
                "narrowest, not timed (it trains at any rate)"
            )
        return (
            f"model choice: {self.hparams_set}, {rule} ({why}); probes took "
            f"{self.probe_seconds:.1f} s of the budget"
        )

    def to_json(self) -> dict:
        if not self.candidates:
            return {"hparams_set": self.hparams_set, "untimed": self.untimed}
        record = {
            "hparams_set": self.hparams_set,
            "tokens_per_parameter_needed": TOKENS_PER_PARAMETER,
            "probe_seconds": round(self.probe_seconds, 2),
            "candidates": [c.to_json() for c in self.candidates],
        }
        if self.passed_over:
            record["passed_over"] = [c.to_json() for c in self.passed_over]
        return record


def choose(
    ladder: tuple[str, ...],
    measure: Callable[[str], Measured],
    train_seconds: Callable[[str], float],
    corpus_tokens: int,
    estimate: Callable[[str, Measured], Measured] | None = None,
) -> Choice:
    """The widest set of `ladder` (narrowest first) whose expected tokens reach the rule's bar.

    `measure(name)` probes a candidate; `train_seconds(name)` is the seconds of the budget that
    candidate trains for, of which the probes so far (its own included) are spent. Probes go
    from the widest down and stop at the first that qualifies; the narrowest, reached, is
    chosen unprobed. `estimate(name, wider)`: the fastest rate candidate `name` could have,
    from a probed wider one's `Measured`; a candidate that fails the bar even at it is passed
    over unprobed. A ladder of one set, or a budget of under PROBE_MIN_MINUTES, is not probed
    (`untimed`)."""
    assessed: list[Assessed] = []
    passed: list[Assessed] = []
    probes = 0.0
    for name in reversed(ladder[1:]):
        if estimate is not None and assessed:
            seconds = max(0.0, train_seconds(name) - probes)
            best_case = Assessed(estimate(name, assessed[-1].measured), seconds, corpus_tokens)
            if not best_case.enough:
                passed.append(best_case)
                continue
        measured = measure(name)
        probes += measured.seconds
        candidate = Assessed(measured, max(0.0, train_seconds(name) - probes), corpus_tokens)
        assessed.append(candidate)
        if candidate.enough:
            return Choice(name, tuple(assessed), passed_over=tuple(passed))
    return Choice(ladder[0], tuple(assessed), passed_over=tuple(passed))


def untimed(ladder: tuple[str, ...], minutes: float) -> Choice | None:
    """The choice without probes, for a ladder of one set or a budget of under
    PROBE_MIN_MINUTES `minutes`; None when the ladder is to be probed."""
    if len(ladder) == 1:
        return Choice(ladder[0], (), "the problem's one set for a budget")
    if minutes < PROBE_MIN_MINUTES:
        reason = (
            f"the narrowest: a budget under {PROBE_MIN_MINUTES:g} minutes is not spent on "
            "timing the wider ones"
        )
        return Choice(ladder[0], (), reason)
    return None


def time_steps(step: Callable[[], float], clock=time.monotonic) -> tuple[float, float]:
    """Runs `step` (which returns the target tokens of its batch) PROBE_WARM_STEPS times, then
    until PROBE_SECONDS and PROBE_MIN_STEPS have passed (at most PROBE_MAX_STEPS); returns the
    timed steps per second and their mean target tokens per step."""
    for _ in range(PROBE_WARM_STEPS):
        step()
    started, steps, tokens = clock(), 0, 0.0
    while steps < PROBE_MAX_STEPS:
        tokens += step()
        steps += 1
        elapsed = clock() - started
        if steps >= PROBE_MIN_STEPS and elapsed >= PROBE_SECONDS:
            break
    elapsed = clock() - started
    return steps / max(elapsed, 1e-9), tokens / steps


def log_choice(choice: Choice) -> None:
    logging.info("%s", choice.line())
