"""What `t2t-serve` does: load a backend (a training run or a SavedModel), then serve the page
and the API with uvicorn."""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping, Sequence

from absl import logging

from t2t_lite.run.run_flags import RunFlags
from t2t_lite.serve.web.adapters import parse_adapters as parse_adapters  # t2t-serve's
from t2t_lite.serve.web.api import Limits
from t2t_lite.serve.web.app import create_app, is_loopback
from t2t_lite.serve.web.backend import Backend


def load_backend(
    run: RunFlags | None = None,
    export_dir: str | None = None,
    jit_compile: bool = False,
    model_name: str | None = None,
    adapters: Mapping[str, str] | None = None,
    version_labels: Mapping[str, str] | None = None,
) -> Backend:
    """A `RunBackend` of the run that `run` restores (`RunFlags.restore`, as t2t-decode
    restores it; `jit_compile` as t2t-decode's flag) or a `SavedModelBackend` for
    `export_dir`, served under TF Serving's REST API as `model_name` (default: the export
    folder's name), its version named by `version_labels` ({label: version}); exactly one of
    `run.output_dir` and `export_dir`. `adapters` ({name: adapter run}) adds LoRA adapters over
    the run, chosen per request (t2t_lite.serve.web.adapters), each restored with the run's
    flags (`RunFlags.for_run`)."""
    run = run or RunFlags()
    if bool(run.output_dir) == bool(export_dir):
        raise ValueError(
            "give exactly one of --output_dir (a training run) and --export_dir (a SavedModel)"
        )
    if version_labels and not export_dir:
        raise ValueError("--version_labels: only with --export_dir (TF Serving's REST API)")
    if export_dir:
        given = [name for name in run.given() if name != "--usr_dir"]  # a problem: harmless
        given += ["--jit_compile"] * jit_compile + ["--adapters"] * bool(adapters)
        if given:
            raise ValueError(
                f"{', '.join(sorted(given))}: only with --output_dir; a SavedModel's checkpoint, "
                "vocabulary, search settings and weights are fixed at export (t2t-export "
                "--quantize=int8 writes int8 weights)"
            )
        from t2t_lite.serve.web.saved_model_backend import SavedModelBackend

        return SavedModelBackend(export_dir, model_name, dict(version_labels or {}))
    from t2t_lite.serve.web.run_backend import RunBackend

    backend = RunBackend(run.restore(), jit_compile=jit_compile)
    if adapters:
        from t2t_lite.serve.web.adapters import load_adapters

        load_adapters(backend, adapters, lambda folder: run.for_run(folder).restore(), jit_compile)
    return backend


def loopback_warning(host: str, port: int) -> str | None:
    """The warning printed when `host` is reachable from other machines, else None."""
    if is_loopback(host):
        return None
    return (
        f"t2t-serve: warning: --host={host} is not a loopback address: anyone who can reach "
        f"this machine on port {port} can run the model and read the run's facts (paths "
        "included); t2t-serve has no authentication. Serve on 127.0.0.1 and put a proxy with "
        "access control in front to share it (its Host name must be in --allowed_hosts)."
    )


def listen(host: str = "127.0.0.1", port: int = 8080) -> socket.socket:
    """A socket bound to host:port (0: a free port), taken before the model loads so that a
    port in use is one line at once; an OSError naming --host/--port otherwise."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(
            f"--host={host} --port={port}: cannot listen there ({error.strerror or error}); "
            "pass another --port (0 picks a free one) or stop what holds it"
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def parse_names(text: str, flag: str) -> dict[str, str]:
    """A flag's "NAME=VALUE,NAME=VALUE" --> {name: value}; a ValueError names a bad item."""
    found: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name or not value or name in found:
            raise ValueError(f"{flag}: {item!r} is not NAME=VALUE (names once each)")
        found[name] = value
    return found


def serve(
    backend: Backend, limits: Limits, sock: socket.socket, allowed_hosts: Sequence[str] = ()
) -> None:
    """Serves the page and API of `backend` on `sock` (from `listen`) until interrupted, to
    requests whose Host is a loopback name, the bound address (not 0.0.0.0 or ::) or one of
    `allowed_hosts`."""
    import uvicorn

    host, port = sock.getsockname()[:2]
    warning = loopback_warning(host, port)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    bound = () if host in ("0.0.0.0", "::") else (host,)  # every address: no name of its own
    app = create_app(backend, limits, allowed_hosts=(*allowed_hosts, *bound))
    shown = f"[{host}]" if ":" in host else host
    logging.info("serving %s", backend.facts().get("problem"))
    print(f"t2t-serve: http://{shown}:{port}/ (API: http://{shown}:{port}/docs)", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
