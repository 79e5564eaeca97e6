"""Frozen settings: the model's `HParams` with the registry of named sets, and the decoders'
`SearchSettings`."""

from t2t_lite.hparams.hparams_base import HParams
from t2t_lite.hparams.search_settings import SearchSettings
from t2t_lite.hparams.transformer_sets import HPARAMS_SETS, TABLE3_SETS


def get_hparams(name: str, overrides: str = "") -> HParams:
    """Returns the named set with strict `k=v,k=v` overrides applied."""
    return HPARAMS_SETS.get(name).override(overrides)


__all__ = ["HParams", "HPARAMS_SETS", "SearchSettings", "TABLE3_SETS", "get_hparams"]
