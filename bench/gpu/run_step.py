"""Runs the training step that bench/gpu/export_step.py exported, on a GPU, with jaxlib's XLA.

    python3 bench/gpu/run_step.py --step=/path/to/export --steps=20 --peak_tflops=989.4

Needs NumPy and jaxlib only (no TensorFlow, no t2t_lite). First the `check` shape: three steps
from the exported values, whose losses must match TensorFlow's own on the exporting machine
(the output names the largest relative difference, and the run stops above --tolerance). Then
the `time` shape: --warmup untimed steps, then --steps timed ones, each waited for. Prints one
`RESULT {json}` line: median seconds per step, target tokens/s, TFLOP/s (3x the forward FLOPs of
t2t_lite.model.flops) and that as a share of --peak_tflops.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time

import jax
import numpy as np
from jax._src import xla_bridge
from jax._src.interpreters import mlir
from jax._src.lib import _jax, xla_client
from jax._src.lib.mlir import ir
from values import initial_values

# TensorFlow's HLO copies each returned value; jaxlib's converter keeps those as mhlo.copy, which
# newer jaxlib no longer legalizes. A copy is an identity: a same-type stablehlo.convert.
COPY = re.compile(r"(%\S+) = mhlo\.copy (%\S+) : (tensor<[^>]*>)$", re.MULTILINE)


def stablehlo_text(hlo_proto: bytes) -> str:
    """The HLO module as StableHLO text, copies rewritten as identities."""
    with mlir.make_ir_context():
        text = str(ir.Module.parse(_jax.mlir.hlo_to_stablehlo(hlo_proto)))
    text = COPY.sub(r'\1 = "stablehlo.convert"(\2) : (\3) -> \3', text)
    if "mhlo.copy" in text:
        raise RuntimeError("an mhlo.copy of an unexpected form is left in the module")
    return text


def compile_hlo(path: str, device):
    """The HLO module at `path` (TensorFlow's hlo_serialized) compiled for `device`: returns
    (the loaded executable, compile seconds)."""
    with open(path, "rb") as f:
        module = stablehlo_text(f.read())
    backend = xla_bridge.get_backend()
    start = time.perf_counter()
    devices = xla_client.DeviceList((device,)) if hasattr(xla_client, "DeviceList") else [device]
    executable = backend.compile_and_load(module, devices, xla_client.CompileOptions())
    return executable, time.perf_counter() - start


class Step:
    """The compiled step: call with the batch; the variables stay on the device between calls."""

    def __init__(self, folder: str, name: str, manifest: dict, values: list, device):
        path = os.path.join(folder, f"{name}.pb")
        self.executable, self.compile_seconds = compile_hlo(path, device)
        self.updated = [i for i, r in enumerate(manifest["arguments"]) if r["kind"] == "variable"]
        self.arguments = [jax.device_put(v, device) for v in values]
        batch = np.load(os.path.join(folder, f"{name}_batch.npz"))
        self.batch = [jax.device_put(batch[k], device) for k in ("inputs", "targets")]

    def __call__(self) -> float:
        outputs = self.executable.execute(self.batch + self.arguments)
        loss, updates = outputs[0], outputs[2:]
        if len(updates) != len(self.updated):
            raise RuntimeError(
                f"{len(updates)} updated resources for {len(self.updated)} variables"
            )
        for index, value in zip(self.updated, updates, strict=True):
            self.arguments[index] = value
        return float(np.asarray(loss))  # waits for the step


def checked(folder: str, manifest: dict, values: list, device, tolerance: float):
    """The `check` step after three steps whose losses matched TensorFlow's to `tolerance`
    (relative; stops the run otherwise): (the step, its losses, the largest difference)."""
    check = Step(folder, "check", manifest, values, device)
    losses = [check() for _ in range(3)]
    reference = manifest["shapes"]["check"]["tensorflow_losses"]
    difference = max(abs(a - b) / abs(b) for a, b in zip(losses, reference, strict=True))
    print(
        f"{folder} check: losses {losses}, TensorFlow {reference}, relative {difference:.2e}",
        file=sys.stderr,
    )
    if difference > tolerance:
        raise SystemExit(f"{folder}: the GPU step differs from TensorFlow's by {difference:.2e}")
    return check, losses, difference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", required=True, help="folder written by export_step.py")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=2e-3, help="relative, on the loss")
    parser.add_argument("--peak_tflops", type=float, required=True, help="the device's peak")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)  # the step counters are int64
    with open(os.path.join(args.step, "manifest.json")) as f:
        manifest = json.load(f)
    device = jax.devices()[0]
    values = initial_values(args.step, manifest["arguments"])
    check, losses, difference = checked(args.step, manifest, values, device, args.tolerance)
    timed = Step(args.step, "time", manifest, values, device)
    for _ in range(args.warmup):
        timed()
    seconds, last = [], 0.0
    for i in range(args.steps):
        start = time.perf_counter()
        last = timed()
        seconds.append(time.perf_counter() - start)
        print(
            f"step {i + 1}/{args.steps}: {seconds[-1] * 1e3:.1f} ms, loss {last:.4f}",
            file=sys.stderr,
        )
    shape = manifest["shapes"]["time"]
    median = statistics.median(seconds)
    tflops = shape["train_flops"] / median / 1e12
    result = {
        "device": device.device_kind,
        "precision": manifest["hparams"]["precision"],
        "batch": shape["batch"],
        "target_tokens": shape["target_tokens"],
        "steps": args.steps,
        "seconds_per_step": median,
        "target_tokens_per_s": shape["target_tokens"] / median,
        "tflops": tflops,
        "mfu": tflops / args.peak_tflops,
        "last_loss": last,
        "check_losses": losses,
        "check_relative_difference": difference,
        "compile_seconds": check.compile_seconds + timed.compile_seconds,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "jax": jax.__version__,
        "exported_by_tensorflow": manifest["tensorflow"],
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
