"""`t2t-serve --output_dir=BASE --adapters=calc=RUN1,writer=RUN2`: LoRA adapters (t2t-train
--lora_rank) over the served base, one chosen per request by its `adapter` field.

Each adapter is restored as `t2t-decode` restores its run, base + adapter
(`t2t_lite.run.adapter`), into a model of its own, and is refused unless the base weights it
was trained on are the served run's (the SHA-256 of the weights, both named). Models share
nothing, so requests for different adapters run side by side like requests for the base, each
through its own translator cache and its lock; memory grows by one model per adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from t2t_lite.serve.web.api import ApiError


def parse_adapters(text: str) -> dict[str, str]:
    """--adapters' "NAME=RUN,NAME=RUN" --> {name: run folder}; a ValueError names a bad item."""
    found: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        name, sep, folder = item.partition("=")
        if not sep or not name.strip() or not folder.strip() or name.strip() in found:
            raise ValueError(
                f"--adapters: {item!r} is not NAME=RUN (names once each), e.g. "
                "--adapters=calc=runs/calc_lora,writer=runs/writer_lora"
            )
        found[name.strip()] = folder.strip()
    return found


def load_adapters(base, adapters: Mapping[str, str], restore, jit_compile: bool = False) -> None:
    """Adds each adapter run of `adapters` ({name: run folder}) to the `RunBackend` `base`,
    restored by `restore(folder)` (`Run.restore` with the server's settings)."""
    from t2t_lite.model import lora  # TensorFlow: not for the app's import
    from t2t_lite.run.adapter import AdapterMismatchError, AdapterRecord, is_adapter_run
    from t2t_lite.run.run_info import RunInfo
    from t2t_lite.serve.web.run_backend import RunBackend

    if adapters and base.run.quantize != "none":
        raise ValueError(
            "--adapters: serve the base and its adapters unquantized (drop --quantize), or "
            "export each adapter merged (t2t-export --merge_lora --quantize=int8)"
        )
    identity = lora.weights_sha256(base.run.model) if adapters else ""
    for name, folder in adapters.items():
        if not is_adapter_run(folder):
            raise ValueError(
                f"--adapters={name}={folder}: not an adapter run (no adapter.json); train one "
                "with t2t-train --init_from=BASE --lora_rank=R"
            )
        record = AdapterRecord.load(folder, RunInfo.load(folder).hparams.d_model)
        if record.parent_sha256 != identity:
            raise AdapterMismatchError(
                f"--adapters={name}={folder}: the adapter was trained on base weights sha256 "
                f"{record.parent_sha256[:16]}, but the served --output_dir={base.run.output_dir} "
                f"has sha256 {identity[:16]}; serve the base it was trained on "
                f"({record.parent_dir})"
            )
        base.adapters[name] = RunBackend(restore(folder), jit_compile=jit_compile)


def chosen(backend, name: str | None) -> Any:
    """The backend a request's `adapter` field names: `backend` itself for None, else one of
    its adapters; an ApiError 422 names an unknown adapter and the known ones."""
    if name is None:
        return backend
    known = getattr(backend, "adapters", {})
    if name not in known:
        listed = ", ".join(sorted(known)) or "none: start t2t-serve with --adapters=NAME=RUN"
        raise ApiError(422, "adapter", f"adapter: {name!r} is not one of this server's ({listed})")
    return known[name]
