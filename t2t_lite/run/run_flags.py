"""`RunFlags`: the values of the flags that locate a training run and say how it decodes, and
the one way from them to a restored `Run`.

Every command that restores a run (t2t-decode, t2t-export, t2t-serve, t2t-visualize,
t2t-calibrate, t2t-distill's teacher) reads its flags into a `RunFlags` (`t2t_lite.bin.run_flags`
defines them once) and restores with `RunFlags.restore`; tests build one with the flags' names
and values. Search settings left None take the problem's defaults (and the beam size and alpha
that the run tuned on dev).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from t2t_lite.hparams.search_settings import CONTROL_FLAGS, parse_sampling, parse_shortlist
from t2t_lite.runtime.distribute import decode_strategy

# The search settings that are flags of their own, by the `SearchSettings` field's name.
SEARCH_FLAGS = ("beam_size", "alpha", "patience", "extra_length", "constrained", "nbest")
SEARCH_FLAGS += CONTROL_FLAGS


@dataclasses.dataclass(frozen=True)
class RunFlags:
    """--output_dir, --checkpoint (several, comma-separated: an ensemble, weighted by
    --ensemble_weights), --data_dir (the vocabulary's folder; default the run's) and --usr_dir;
    the search flags (--beam_size, --alpha, --patience, --extra_length, --constrained, --nbest,
    --sampling "temperature:0.8,top_k:40", --shortlist "FREQUENT,PER_SOURCE", and the repetition and
    length controls --no_repeat_ngram_size, --repetition_penalty, --min_length, --disable_unk);
    --quantize; t2t-decode's
    --problem (another than the run's is refused) and --strategy (replicas that decode)."""

    output_dir: str | None = None
    checkpoint: str | None = None
    data_dir: str | None = None
    usr_dir: str | None = None
    beam_size: int | None = None
    alpha: float | None = None
    patience: float | None = None
    extra_length: int | None = None
    constrained: bool | None = None
    nbest: int | None = None
    sampling: str | None = None
    shortlist: str | None = None
    no_repeat_ngram_size: int | None = None
    repetition_penalty: float | None = None
    min_length: int | None = None
    disable_unk: bool | None = None
    quantize: str = "none"
    ensemble_weights: Sequence[float | str] | None = None
    problem: str | None = None
    strategy: str = "default"

    def search_overrides(self) -> dict[str, Any]:
        """The search settings these flags set, None where unset, for `Run.restore(search=...)`;
        a ValueError names a malformed --sampling or --shortlist."""
        overrides: dict[str, Any] = {name: getattr(self, name) for name in SEARCH_FLAGS}
        if self.sampling is not None:
            overrides.update(parse_sampling(self.sampling))
        if self.shortlist is not None:
            overrides["shortlist"] = parse_shortlist(self.shortlist)
        return overrides

    def given(self) -> list[str]:
        """The flags set to other than their defaults, as `--name`, sorted."""
        default = RunFlags()
        return sorted(
            f"--{field.name}"
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != getattr(default, field.name)
        )

    def for_run(self, output_dir: str) -> RunFlags:
        """These flags for another run folder (t2t-serve's adapter runs): the same vocabulary,
        search and weights flags, the folder's own newest checkpoint."""
        return dataclasses.replace(self, output_dir=output_dir, checkpoint=None,
                                   ensemble_weights=None)  # fmt: skip

    def restore(self, search: Mapping[str, Any] | None = None, **options: Any):
        """`Run.restore` of --output_dir: --usr_dir imported first (its problems register),
        the search flags over the problem's settings (`search` on top: settings a command sets
        itself), --quantize, --ensemble_weights and --strategy applied; a --problem other than
        the run's is refused (ValueError). `options` go to `Run.restore` (merge_lora)."""
        from t2t_lite.problems import import_usr_dir
        from t2t_lite.run.run import Run  # TensorFlow: not for checking flags

        if not self.output_dir:
            raise ValueError("--output_dir: the training run to restore is missing")
        if self.usr_dir:
            import_usr_dir(self.usr_dir)
        run = Run.restore(
            self.output_dir,
            self.checkpoint,
            self.data_dir,
            search={**self.search_overrides(), **(search or {})},
            ensemble_weights=self.ensemble_weights,
            quantize=self.quantize,
            strategy=decode_strategy(self.strategy),
            **options,
        )
        if self.problem and self.problem != run.problem.name:
            raise ValueError(
                f"--problem={self.problem}, but the run in {self.output_dir} was trained on "
                f"{run.problem.name}"
            )
        return run
