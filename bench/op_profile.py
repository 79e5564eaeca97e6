"""Op time by kind from TensorFlow's profiler on a CPU: the trace's host plane holds one event
per op execution (`name:type`) on the executor's threads, and each op type is put in a kind.
Used by `decode_profile.py` (a search) and `train_profile.py` (a training step)."""

from __future__ import annotations

import collections
import glob

from machine import machine, write_record  # bench/machine.py, beside this script

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
    "optimizer (Adam)": (
        "ResourceApplyAdam", "ApplyAdam", "AssignVariableOp", "AssignAddVariableOp",
    ),
    "loop control": (
        "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond", "Identity",
        "IdentityN", "_Retval", "_Arg", "NoOp", "ReadVariableOp", "_Recv", "_Send",
    ),
}  # fmt: skip
KIND_OF = {op: kind for kind, ops in KINDS.items() for op in ops}


def read_trace(folder: str, function: str):
    """The host plane's op events [(type, start ps, end ps)] and the [(start, end)] of the calls
    of the tf.function named `function`."""
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
            if name.startswith(f"EagerLocalExecute: __inference_{function}"):
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


def summarize(ops, calls, per_call: int = 1) -> dict:
    """Wall ms of a call, ms in which no op of a call ran ("no op running": the executor's
    scheduling, loop bookkeeping and Python), op ms by kind and the 12 costliest types (summed
    over threads, per call), and op executions per call / `per_call` (per step)."""
    wall = sum(end - start for start, end in calls) / len(calls)
    inside = [(s, e) for _, s, e in ops if any(a <= s < b for a, b in calls)]
    by_kind = collections.Counter()
    by_type = collections.Counter()
    for op, start, end in ops:
        by_kind[KIND_OF.get(op, "other")] += end - start
        by_type[op] += end - start
    scale = 1e-9 / len(calls)  # ps --> ms per call
    return {
        "wall_ms": wall * 1e-9,
        "no_op_ms": (wall - covered(inside) / len(calls)) * 1e-9,
        "op_ms": {k: v * scale for k, v in by_kind.most_common()},
        "top_types_ms": {k: v * scale for k, v in by_type.most_common(12)},
        "op_executions": len(ops) / len(calls) / per_call,
    }


def table(title: str, rows: list[dict], columns: list[str], before=(), after=()) -> str:
    """A markdown table with a column per `summarize` row: the `before` lines ((label, cell
    function of a row) pairs), "no op running", each kind's op time and share, then `after`."""
    lines = [f"| {title} | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(rows)]

    def no_op(r: dict) -> str:
        return f"{r['no_op_ms']:.1f} ({100 * r['no_op_ms'] / r['wall_ms']:.0f} %)"

    kinds = [
        (f"{kind} (ms, % of op time)", lambda r, k=kind: share(r, k)) for kind in [*KINDS, "other"]
    ]
    for label, cell in [*before, ("no op running (ms, % of wall)", no_op), *kinds, *after]:
        lines.append(f"| {label} | " + " | ".join(cell(r) for r in rows) + " |")
    return "\n".join(lines)


def share(row: dict, kind: str) -> str:
    """A kind's op ms and its % of all op time in `row` (a `summarize` result)."""
    total = sum(row["op_ms"].values())
    value = row["op_ms"].get(kind, 0.0)
    return f"{value:.1f} ({100 * value / total:.0f} %)"


def write_profile(
    name: str,
    load,
    what: str,
    profiled: str,
    rows: list[dict],
    text: str,
    *,
    tensorflow: str,
    record: str | None,
) -> None:
    """Prints and records (`machine.write_record`, under `name`, at `record`) a profile's
    markdown: `what` was profiled on which CPU, the `tensorflow` version, commit and date,
    `profiled` (how many calls), the load averages since `load`, then the table `text`."""
    about = machine(load)
    page = (
        f"{what}; {about['cpu']} ({about['cpus']} CPUs), TensorFlow {tensorflow}, commit "
        f"{about['commit']}, {about['date']}; {profiled}; load {about['load']}\n\n{text}\n"
    )
    print(page)
    write_record(record, name, about, {"rows": rows}, page)
