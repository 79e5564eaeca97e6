"""What t2t-info prints: a named set resolved, its parameter count and FLOPs; the registries."""

from __future__ import annotations

from t2t_lite.hparams import HPARAMS_SETS, get_hparams
from t2t_lite.model.flops import forward_flops_per_token


def count_parameters(hparams, vocab_size: int) -> int:
    """The parameters of the built model (`parameter_count`)."""
    from t2t_lite.model.ensemble import parameter_count
    from t2t_lite.model.transformer import Transformer

    model = Transformer.from_hparams(hparams, vocab_size)
    model.build()
    return parameter_count(model)


def describe(hparams_set: str, overrides: str, vocab_size: int, length: int) -> str:
    hparams = get_hparams(hparams_set, overrides)
    params = count_parameters(hparams, vocab_size)
    flops = forward_flops_per_token(hparams, vocab_size, length, length)
    return "\n".join(
        [
            f"hparams set: {hparams_set}" + (f" with {overrides}" if overrides else ""),
            hparams.to_json(),
            f"vocab_size: {vocab_size}",
            f"trainable parameters: {params:,} ({params / 1e6:.1f}M)",
            f"forward FLOPs per target token (source = target = {length} tokens): "
            f"{flops:,.0f} ({flops / 1e6:.1f} MFLOPs; training about 3x)",
        ]
    )


def list_registries() -> str:
    from t2t_lite.problems import PROBLEMS

    lines = [f"hparams sets ({len(HPARAMS_SETS)}):"]
    lines += [f"  {name}" for name in HPARAMS_SETS.names()]
    lines += [f"problems ({len(PROBLEMS)}):"]
    lines += [f"  {name}" for name in PROBLEMS.names()]
    return "\n".join(lines)
