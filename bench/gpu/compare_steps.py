"""Times exported training steps against each other on a GPU, in alternating blocks of steps.

    python3 bench/gpu/compare_steps.py --steps=/path/a,/path/b --blocks=5 --block_steps=10

Needs NumPy and jaxlib only. Each folder is an export of bench/gpu/export_step.py (the same
model and batch; one code change between them). All are compiled in one process, each first
runs its `check` shape against TensorFlow's losses (as run_step.py does), then the `time`
shapes run in turn, --block_steps steps at a time for --blocks rounds, so that a drift of the
GPU's clock falls on every variant alike. Prints one `COMPARE {json}` line: each variant's median
ms per step over its blocks, and each one's speed relative to the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
from run_step import Step, checked
from values import initial_values


def load(folder: str, device, tolerance: float) -> Step:
    """The folder's compiled `time` step, after its `check` losses matched TensorFlow's."""
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    values = initial_values(folder, manifest["arguments"])
    checked(folder, manifest, values, device, tolerance)
    return Step(folder, "time", manifest, values, device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", required=True, help="comma-separated export folders")
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--block_steps", type=int, default=10)
    parser.add_argument("--tolerance", type=float, default=2e-3, help="relative, on the loss")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    device = jax.devices()[0]
    folders = args.steps.split(",")
    steps = [load(folder, device, args.tolerance) for folder in folders]
    for step in steps:  # warm-up
        for _ in range(3):
            step()
    blocks: list[list[float]] = [[] for _ in steps]
    for block in range(args.blocks):
        for index, step in enumerate(steps):
            start = time.perf_counter()
            for _ in range(args.block_steps):
                step()  # each waits for its loss
            blocks[index].append((time.perf_counter() - start) / args.block_steps * 1e3)
        print(f"block {block + 1}: " + ", ".join(f"{b[-1]:.2f}" for b in blocks), file=sys.stderr)
    medians = [statistics.median(b) for b in blocks]
    result = {
        "device": device.device_kind,
        "flags": os.environ.get("XLA_FLAGS", ""),
        "variants": [os.path.basename(os.path.normpath(f)) for f in folders],
        "ms_per_step": medians,
        "blocks_ms": blocks,
        "speed_vs_first": [medians[0] / m for m in medians],
        "jax": jax.__version__,
    }
    print("COMPARE " + json.dumps(result))


if __name__ == "__main__":
    main()
