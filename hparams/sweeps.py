"""Sweep definitions: rows of hparams (a named set and overrides) that `t2t-sweep` trains side
by side, and the shipped one, `table3_small`: the paper's Table 3 at CPU scale.

A definition is data, like an hparams set: `SWEEPS.get("table3_small")`, or a JSON file of the
same shape (`SweepDefinition.load`). Each row may carry the paper's own numbers (`PaperRow`), so
a report can set the two side by side.

table3_small scales every Table 3 row around `transformer_small_table3`: transformer_small's size
and CPU recipe with the paper's 8 heads (so d_k = d_v = 256 / 8 = 32) and regularization: N = 3
layers, d_model 256, d_ff 1024, half the paper's depth and width.
Each row keeps its relation to the base:
  (A) h as in the paper with h * d_k = d_model: d_k = d_v halved (512, 128, 32, 16 -> 256, 64,
      16, 8), so the attention's parameters and computation stay the base's;
  (B) d_k alone, at the paper's fraction of the base's d_k (16, 32 of 64 -> 8, 16 of 32);
  (C) N at the paper's fraction of 6 (2, 4, 8 -> 1, 2, 4 of 3); d_model, d_ff and d_k at the
      paper's multiple of the base (x0.5, x2);
  (D) dropout and label smoothing at the paper's values (0.0, 0.2): they are not sizes;
  (E) learned positional embeddings instead of sinusoids.
The "big" row is left out: it differs from base also in training length (300K steps against
100K), which a sweep's one budget per run cannot express.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from t2t_lite.registry import Registry

_ROW_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=-]*$")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PaperRow:
    """A row of the paper's Table 3 (newstest2013, WMT14 en-de), the cells it leaves empty
    filled in with the base model's values; `params_millions` is None where the paper gives
    no count (rows (A), (D), (E))."""

    num_layers: int = 6  # N
    d_model: int = 512
    d_ff: int = 2048
    num_heads: int = 8  # h
    d_k: int = 64
    d_v: int = 64
    dropout: float = 0.1  # P_drop
    label_smoothing: float = 0.1  # eps_ls
    position_encoding: str = "sinusoid"
    train_steps: int = 100_000
    dev_perplexity: float  # per word piece
    dev_bleu: float
    params_millions: float | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepRow:
    """One configuration: `hparams_set` with `overrides` (`k=v,k=v`), trained once per seed.

    `group` gathers rows that one report table and one picture show together (Table 3's
    (A)..(E)); `change` says in words what differs from the base row.
    """

    name: str
    hparams_set: str
    overrides: str = ""
    group: str = ""
    change: str = ""
    paper: PaperRow | None = None

    def __post_init__(self) -> None:
        if not _ROW_NAME.match(self.name):
            raise ValueError(
                f"sweep row name {self.name!r} must be letters, digits and _.+=- (it names a "
                "folder)"
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepDefinition:
    """Rows to train and compare; `base` names the row the others are compared against."""

    name: str
    rows: tuple[SweepRow, ...]
    base: str
    description: str = ""

    def __post_init__(self) -> None:
        names = [row.name for row in self.rows]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"sweep {self.name!r}: rows named more than once: {duplicates}")
        if self.base not in names:
            raise ValueError(f"sweep {self.name!r}: base row {self.base!r} is not one of {names}")

    def row(self, name: str) -> SweepRow:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"sweep {self.name!r} has no row {name!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SweepDefinition:
        """The inverse of `to_dict` (a JSON file's content); unknown keys are an error."""
        try:
            rows = []
            for row in values["rows"]:
                paper = row.get("paper")
                row = {**row, "paper": PaperRow(**paper) if paper else None}
                rows.append(SweepRow(**row))
            return cls(**{**values, "rows": tuple(rows)})
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a sweep definition: {e}") from None

    @classmethod
    def load(cls, path: str) -> SweepDefinition:
        """A definition from a JSON file (the shape of `to_dict`)."""
        with open(path, encoding="utf-8") as f:
            try:
                values = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: not JSON: {e}") from None
        try:
            return cls.from_dict(values)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None


SWEEPS: Registry[SweepDefinition] = Registry("sweep")

# --- table3_small --------------------------------------------------------------------------------

# The small base: N 3, d_model 256, d_ff 1024 with the paper's 8 heads and regularization.
TABLE3_SMALL_SET = "transformer_small_table3"


def _table3_row(name: str, group: str, change: str, paper: PaperRow, **changes: Any) -> SweepRow:
    overrides = ",".join(f"{key}={value}" for key, value in changes.items())
    return SweepRow(
        name=name,
        hparams_set=TABLE3_SMALL_SET,
        overrides=overrides,
        group=group,
        change=change,
        paper=paper,
    )


def _paper(**values: Any) -> PaperRow:
    return PaperRow(**values)


_TABLE3_ROWS = (
    _table3_row(
        "base", "base", "N 3, d_model 256, d_ff 1024, h 8, d_k = d_v = 32",
        _paper(dev_perplexity=4.92, dev_bleu=25.8, params_millions=65),
    ),
    # (A): heads, with h * d_k = h * d_v = d_model.
    _table3_row(
        "A_h1", "(A)", "h 1, d_k = d_v = 256",
        _paper(num_heads=1, d_k=512, d_v=512, dev_perplexity=5.29, dev_bleu=24.9),
        num_heads=1, d_k=256, d_v=256,
    ),
    _table3_row(
        "A_h4", "(A)", "h 4, d_k = d_v = 64",
        _paper(num_heads=4, d_k=128, d_v=128, dev_perplexity=5.00, dev_bleu=25.5),
        num_heads=4, d_k=64, d_v=64,
    ),
    _table3_row(
        "A_h16", "(A)", "h 16, d_k = d_v = 16",
        _paper(num_heads=16, d_k=32, d_v=32, dev_perplexity=4.91, dev_bleu=25.8),
        num_heads=16, d_k=16, d_v=16,
    ),
    _table3_row(
        "A_h32", "(A)", "h 32, d_k = d_v = 8",
        _paper(num_heads=32, d_k=16, d_v=16, dev_perplexity=5.01, dev_bleu=25.4),
        num_heads=32, d_k=8, d_v=8,
    ),
    # (B): smaller keys; d_v stays the base's.
    _table3_row(
        "B_dk8", "(B)", "d_k 8 (d_v 32)",
        _paper(d_k=16, dev_perplexity=5.16, dev_bleu=25.1, params_millions=58),
        d_k=8, d_v=32,
    ),
    _table3_row(
        "B_dk16", "(B)", "d_k 16 (d_v 32)",
        _paper(d_k=32, dev_perplexity=5.01, dev_bleu=25.4, params_millions=60),
        d_k=16, d_v=32,
    ),
    # (C): depth, then width.
    _table3_row(
        "C_n1", "(C)", "N 1",
        _paper(num_layers=2, dev_perplexity=6.11, dev_bleu=23.7, params_millions=36),
        num_encoder_layers=1, num_decoder_layers=1,
    ),
    _table3_row(
        "C_n2", "(C)", "N 2",
        _paper(num_layers=4, dev_perplexity=5.19, dev_bleu=25.3, params_millions=50),
        num_encoder_layers=2, num_decoder_layers=2,
    ),
    _table3_row(
        "C_n4", "(C)", "N 4",
        _paper(num_layers=8, dev_perplexity=4.88, dev_bleu=25.5, params_millions=80),
        num_encoder_layers=4, num_decoder_layers=4,
    ),
    _table3_row(
        "C_d128", "(C)", "d_model 128, d_k = d_v = 16",
        _paper(d_model=256, d_k=32, d_v=32, dev_perplexity=5.75, dev_bleu=24.5,
               params_millions=28),
        d_model=128, d_k=16, d_v=16,
    ),
    _table3_row(
        "C_d512", "(C)", "d_model 512, d_k = d_v = 64",
        _paper(d_model=1024, d_k=128, d_v=128, dev_perplexity=4.66, dev_bleu=26.0,
               params_millions=168),
        d_model=512, d_k=64, d_v=64,
    ),
    _table3_row(
        "C_ff512", "(C)", "d_ff 512",
        _paper(d_ff=1024, dev_perplexity=5.12, dev_bleu=25.4, params_millions=53),
        d_ff=512,
    ),
    _table3_row(
        "C_ff2048", "(C)", "d_ff 2048",
        _paper(d_ff=4096, dev_perplexity=4.75, dev_bleu=26.2, params_millions=90),
        d_ff=2048,
    ),
    # (D): regularization, at the paper's values.
    _table3_row(
        "D_drop0", "(D)", "P_drop 0.0",
        _paper(dropout=0.0, dev_perplexity=5.77, dev_bleu=24.6),
        dropout=0.0,
    ),
    _table3_row(
        "D_drop0.2", "(D)", "P_drop 0.2",
        _paper(dropout=0.2, dev_perplexity=4.95, dev_bleu=25.5),
        dropout=0.2,
    ),
    _table3_row(
        "D_ls0", "(D)", "eps_ls 0.0",
        _paper(label_smoothing=0.0, dev_perplexity=4.67, dev_bleu=25.3),
        label_smoothing=0.0,
    ),
    _table3_row(
        "D_ls0.2", "(D)", "eps_ls 0.2",
        _paper(label_smoothing=0.2, dev_perplexity=5.47, dev_bleu=25.7),
        label_smoothing=0.2,
    ),
    # (E): learned positions.
    _table3_row(
        "E_learned", "(E)", "learned positional embedding",
        _paper(position_encoding="learned", dev_perplexity=4.92, dev_bleu=25.7),
        position_encoding="learned",
    ),
)  # fmt: skip

TABLE3_SMALL = SweepDefinition(
    name="table3_small",
    rows=_TABLE3_ROWS,
    base="base",
    description="The paper's Table 3 rows (A)-(E) around transformer_small_table3 (8 heads), each "
    "row scaled to keep its relation to the base (hparams/sweeps.py).",
)

SWEEPS.add(TABLE3_SMALL.name, TABLE3_SMALL)
