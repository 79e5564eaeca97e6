"""Runs the beam search that bench/gpu/export_decode.py exported, on a GPU, with jaxlib's XLA.

    python3 bench/gpu/run_decode.py --decode=/path/to/export --runs=10 --peak_tflops=989.4

Needs NumPy and jaxlib only (no TensorFlow, no t2t_lite). First the `check` shape: its best
hypotheses' scores must match TensorFlow's on the exporting machine (the output names the
largest relative difference and how many of the ids agree; the run stops above --tolerance).
Then the `time` shape: --warmup untimed searches, then --runs timed ones, each waited for.
Prints one `RESULT {json}` line: median seconds per search, output tokens/s (the best
hypotheses' tokens, EOS included), the steps the search took, and the model FLOP/s as a share of
--peak_tflops.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
import numpy as np
from run_step import compile_hlo
from values import initial_values


class Search:
    """The compiled search over one exported source shape; the weights stay on the device."""

    def __init__(self, folder: str, name: str, weights: list, device):
        path = os.path.join(folder, f"{name}.pb")
        self.executable, self.compile_seconds = compile_hlo(path, device)
        self.weights = weights
        source = np.load(os.path.join(folder, f"{name}_batch.npz"))["inputs"]
        self.source = [jax.device_put(source, device)]

    def __call__(self) -> tuple[np.ndarray, np.ndarray]:
        """ids [batch, width] and scores [batch] of the best hypotheses (waits for them)."""
        ids, scores = self.executable.execute(self.source + self.weights)[:2]
        return np.asarray(ids)[:, 0], np.asarray(scores)[:, 0]


def search_flops(manifest: dict, ids: np.ndarray) -> tuple[int, float]:
    """(the steps a search of the `time` shape took, its model FLOPs) from its best ids."""
    shape = manifest["shapes"]["time"]
    steps = int(np.max(np.count_nonzero(ids, axis=1)))
    hypothesis_tokens = shape["batch"][0] * manifest["beam_size"] * steps
    return steps, shape["flops_per_hypothesis_token"] * hypothesis_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decode", required=True, help="folder written by export_decode.py")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=2e-3, help="relative, on the scores")
    parser.add_argument("--peak_tflops", type=float, required=True, help="the device's peak")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)  # arguments keep TensorFlow's integer widths
    with open(os.path.join(args.decode, "manifest.json")) as f:
        manifest = json.load(f)
    device = jax.devices()[0]
    weights = [
        jax.device_put(v, device) for v in initial_values(args.decode, manifest["arguments"])
    ]
    check = Search(args.decode, "check", weights, device)
    ids, scores = check()
    reference = manifest["shapes"]["check"]
    expected = np.array(reference["tensorflow_scores"])
    difference = float(np.max(np.abs(scores - expected) / np.abs(expected)))
    same_ids = int(np.sum(np.all(ids == np.array(reference["tensorflow_ids"]), axis=1)))
    print(
        f"check: scores {scores.tolist()}, TensorFlow {expected.tolist()}, relative "
        f"{difference:.2e}; {same_ids} of {len(ids)} best hypotheses identical",
        file=sys.stderr,
    )
    if difference > args.tolerance:
        raise SystemExit(f"the GPU search differs from TensorFlow's by {difference:.2e}")
    timed = Search(args.decode, "time", weights, device)
    for _ in range(args.warmup):
        timed()
    seconds = []
    for i in range(args.runs):
        start = time.perf_counter()
        ids, _ = timed()
        seconds.append(time.perf_counter() - start)
        print(f"search {i + 1}/{args.runs}: {seconds[-1] * 1e3:.1f} ms", file=sys.stderr)
    shape, median = manifest["shapes"]["time"], statistics.median(seconds)
    tokens = int(np.count_nonzero(ids))
    steps, flops = search_flops(manifest, ids)
    tflops = flops / median / 1e12
    result = {
        "device": device.device_kind,
        "precision": manifest["hparams"]["precision"],
        "beam_size": manifest["beam_size"],
        "batch": shape["batch"],
        "runs": args.runs,
        "seconds_per_search": median,
        "steps": steps,
        "output_tokens": tokens,
        "output_tokens_per_s": tokens / median,
        "ms_per_step": median / steps * 1e3,
        "tflops": tflops,
        "mfu": tflops / args.peak_tflops,
        "check_relative_difference": difference,
        "check_identical": [same_ids, len(reference["tensorflow_ids"])],
        "compile_seconds": check.compile_seconds + timed.compile_seconds,
        "jax": jax.__version__,
        "exported_by_tensorflow": manifest["tensorflow"],
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
