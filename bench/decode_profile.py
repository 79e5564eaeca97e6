"""Where a decoding step's time goes on a CPU: TensorFlow's profiler over the benchmark's greedy
and beam-4 searches (the model and batch of bench/peers/protocol.py, EOS forbidden so that every
output runs to 32 tokens, as `run_bench.py --parts=decode` times them), op time by kind.

    nice -n 10 python bench/decode_profile.py --dtypes=float32,int8 --calls=3

Each search is traced and run twice untimed, then `calls` times under `tf.profiler`. The host
plane of the trace holds one event per op execution (`name:type`) on the executor's threads;
ops are put in kinds by type. "Wall" is the time of one call of the search (the eager call
around its function); "no op running" the part of it in which no op of the search ran on any
thread (the executor's scheduling, the while loop's bookkeeping and Python), from the union of
the op intervals. Op time is summed over threads, so two threads at once count twice. Writes a
markdown table and a JSON record to bench/results/.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl import app, flags
from machine import machine, write_record  # bench/machine.py, beside this script

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "peers"))
import protocol as P  # noqa: E402  (bench/peers/protocol.py: the one benchmark configuration)

from t2t_lite.decode import sampling, search, transformer_step  # noqa: E402
from t2t_lite.hparams import get_hparams  # noqa: E402
from t2t_lite.model import quantize  # noqa: E402
from t2t_lite.model.transformer import Transformer  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("dtypes", ["float32", "int8"], "float32, bfloat16 or int8 (int8 weights).")
flags.DEFINE_list("tasks", ["greedy", "beam"], "greedy and/or beam (beam 4).")
flags.DEFINE_integer("calls", 3, "Profiled calls of each search.")
flags.DEFINE_string("record", None, "Where the JSON (and a .md) go; default bench/results/.")

# Op type --> kind; types not listed are "other".
KINDS = {
    "matrix products": (
        "MatMul", "BatchMatMulV2", "BatchMatMulV3", "_MklMatMul", "_MklBatchMatMulV2",
        "_FusedMatMul", "_MklFusedMatMul", "_MklNativeFusedMatMul", "_MklNativeBatchMatMulV2",
        "Einsum", "_MklEinsum", "QuantizedMatMulWithBiasAndDequantize",
        "_MklQuantizedMatMulWithBiasAndDequantize", "QuantizeV2", "_MklQuantizeV2",
    ),
    "cache growth (concat)": ("ConcatV2", "_MklConcatV2"),
    "gathers (beam reorder, embeddings)": ("GatherV2", "ResourceGather", "GatherNd"),
    "top-k": ("TopKV2",),
    "softmax and reductions": (
        "Softmax", "_MklSoftmax", "LogSoftmax", "Max", "Sum", "Mean", "Min", "ArgMax", "All",
        "Any", "Prod",
    ),
    "element-wise": (
        "AddV2", "Add", "_MklAdd", "_MklAddV2", "Mul", "_MklMul", "Sub", "_MklSub", "RealDiv",
        "Rsqrt", "Sqrt", "SquaredDifference", "_MklSquaredDifference", "Relu", "_MklRelu",
        "Select", "SelectV2", "Cast", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
        "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "Maximum", "_MklMaximum",
        "Minimum", "Exp", "Log", "Neg", "Pow", "FloorDiv", "FloorMod", "Abs", "Square",
        "IsFinite", "OnesLike", "ZerosLike",
    ),
    "shapes and layout": (
        "Reshape", "_MklReshape", "Transpose", "_MklTranspose", "Shape", "ShapeN", "Size",
        "StridedSlice", "Slice", "Pack", "Unpack", "ExpandDims", "Squeeze", "Fill", "Range",
        "Tile", "BroadcastTo", "Pad", "PadV2", "Const", "OneHot", "Cumsum", "TensorScatterUpdate",
        "ScatterNd", "Where", "Reverse", "ReverseV2",
    ),
    "loop control": (
        "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond", "Identity",
        "IdentityN", "_Retval", "_Arg", "NoOp", "ReadVariableOp", "_Recv", "_Send",
    ),
}  # fmt: skip
KIND_OF = {op: kind for kind, ops in KINDS.items() for op in ops}


def make_search(task: str, dtype: str, patch=None):
    """The benchmark's model in `dtype` and its search as a traced function of source ids;
    `patch(model)` runs before the search is traced (`decode_ab.py`)."""
    precision = "mixed_bfloat16" if dtype == "bfloat16" else "float32"
    hparams = get_hparams(
        "transformer_small",
        f"norm_position=post,num_encoder_layers={P.LAYERS},num_decoder_layers={P.LAYERS},"
        f"d_model={P.D_MODEL},num_heads={P.HEADS},d_ff={P.D_FF},dropout=0.0,"
        f"precision={precision}",
    )
    tf.keras.utils.set_random_seed(0)
    model = Transformer.from_hparams(hparams, P.VOCAB)
    model.build()
    quantize.quantize_model(model, "int8" if dtype == "int8" else "none")
    if patch is not None:
        patch(model)
    no_eos = -1e9 * tf.one_hot(P.EOS_ID, P.VOCAB)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def decode_batch(inputs):
        step_fn, cache = transformer_step.model_step_fn(model, inputs, P.TARGET_LENGTH)

        def step(ids, index, state):
            logits, state = step_fn(ids, index, state)
            return logits + no_eos, state

        batch = tf.shape(inputs)[0]
        if task == "greedy":
            return sampling.greedy_search(step, cache, batch, P.TARGET_LENGTH).ids
        return search.beam_search(step, cache, batch, P.BEAM, P.ALPHA, P.TARGET_LENGTH).ids

    return decode_batch


def read_trace(folder: str):
    """The host plane's op events [(type, start ps, end ps)] and the calls' [(start, end)]."""
    try:
        from tsl.profiler.protobuf import xplane_pb2
    except ImportError:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2
    space = xplane_pb2.XSpace()
    with open(sorted(glob.glob(f"{folder}/**/*.xplane.pb", recursive=True))[-1], "rb") as f:
        space.ParseFromString(f.read())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    ops, calls = [], []
    for line in plane.lines:
        for event in line.events:
            name = plane.event_metadata[event.metadata_id].name
            start = line.timestamp_ns * 1000 + event.offset_ps
            span = (start, start + event.duration_ps)
            if name.startswith("EagerLocalExecute: __inference_decode_batch"):
                calls.append(span)
            elif ":" in name and "::" not in name and not name.startswith("Eager"):
                ops.append((name.rsplit(":", 1)[1], *span))
    return ops, calls


def covered(intervals: list[tuple[int, int]]) -> int:
    """The length of the union of [start, end) intervals."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def profile(task: str, dtype: str) -> dict:
    decode_batch = make_search(task, dtype)
    source = tf.constant(P.batch()[0])
    for _ in range(2):
        decode_batch(source).numpy()
    folder = tempfile.mkdtemp(prefix="decode_profile_")
    tf.profiler.experimental.start(folder)
    for _ in range(FLAGS.calls):
        decode_batch(source).numpy()
    tf.profiler.experimental.stop()
    ops, calls = read_trace(folder)
    wall = sum(end - start for start, end in calls) / len(calls)
    inside = [(s, e) for _, s, e in ops if any(a <= s < b for a, b in calls)]
    by_kind = collections.Counter()
    by_type = collections.Counter()
    for op, start, end in ops:
        by_kind[KIND_OF.get(op, "other")] += end - start
        by_type[op] += end - start
    scale = 1e-9 / len(calls)  # ps --> ms per call
    steps = P.TARGET_LENGTH
    return {
        "task": task,
        "dtype": dtype,
        "wall_ms": wall * 1e-9,
        "step_ms": wall * 1e-9 / steps,
        "no_op_ms": (wall - covered(inside) / len(calls)) * 1e-9,
        "op_ms": {k: v * scale for k, v in by_kind.most_common()},
        "top_types_ms": {k: v * scale for k, v in by_type.most_common(12)},
        "op_executions_per_step": len(ops) / len(calls) / steps,
        "target_tokens_per_second": P.TARGET_TOKENS / (wall * 1e-12),
    }


def table(rows: list[dict]) -> str:
    kinds = [*KINDS, "other"]
    head = "| per call of 32 steps | " + " | ".join(f"{r['task']} {r['dtype']}" for r in rows)
    lines = [head + " |", "|---|" + "---:|" * len(rows)]

    def add(label, values):
        lines.append(f"| {label} | " + " | ".join(values) + " |")

    add("wall (ms)", [f"{r['wall_ms']:.1f}" for r in rows])
    add("per step (ms)", [f"{r['step_ms']:.2f}" for r in rows])
    add("target tokens/s", [f"{r['target_tokens_per_second']:,.0f}" for r in rows])
    add("op executions per step", [f"{r['op_executions_per_step']:.0f}" for r in rows])
    add("no op running (ms, % of wall)", [
        f"{r['no_op_ms']:.1f} ({100 * r['no_op_ms'] / r['wall_ms']:.0f} %)" for r in rows
    ])  # fmt: skip
    for kind in kinds:
        add(f"{kind} (ms, % of op time)", [_share(r, kind) for r in rows])
    return "\n".join(lines)


def _share(row: dict, kind: str) -> str:
    total = sum(row["op_ms"].values())
    value = row["op_ms"].get(kind, 0.0)
    return f"{value:.1f} ({100 * value / total:.0f} %)"


def main(argv) -> None:
    del argv
    load = os.getloadavg()
    rows = []
    for dtype in FLAGS.dtypes:
        for task in FLAGS.tasks:
            rows.append(profile(task, dtype))
            print(json.dumps(rows[-1]), flush=True)
    about = machine(load)
    text = (
        f"Decoding profile, benchmark model (2+2 layers, d_model {P.D_MODEL}, vocabulary "
        f"{P.VOCAB}), {P.BATCH} sentences x {P.TARGET_LENGTH} steps; {about['cpu']} "
        f"({about['cpus']} CPUs), TensorFlow {tf.__version__}, commit {about['commit']}, "
        f"{about['date']}; {FLAGS.calls} profiled calls each; load {about['load']}\n\n"
        f"{table(rows)}\n"
    )
    print(text)
    write_record(FLAGS.record, "decode_profile", about, {"rows": rows}, text)


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    app.run(main)
