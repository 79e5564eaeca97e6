"""A run that starts from a parent of another depth: each of its encoder and decoder layers takes
the weights of one of the parent's layers ("shrink and fine-tune", Shleifer & Rush 2020), and
everything else (embeddings, final norms) is taken as it is.

The layers copied are maximally spaced and keep the parent's first and last: a 1-layer decoder
from a 3-layer one takes layer 0; 3 of 12 take 0, 6 and 11; a deeper student repeats layers in
order (6 from 3: 0, 0, 1, 1, 2, 2). This is how a distilled student (`transformer_small_student`,
6 + 1 layers) starts from its teacher (`t2t-train --init_from=TEACHER`) instead of from random
weights. Variables are named by their object path under "model", as a checkpoint of
`tf.train.Checkpoint(model=...)` names them (model/decoder/layer_0/feed_forward/hidden/bias).
"""

from __future__ import annotations

import re

import keras
import tensorflow as tf

# An encoder or decoder layer's variable: (stack, layer index) and the path within the layer.
LAYER = re.compile(r"^model/(encoder|decoder)/layer_(\d+)/")


def spaced_layers(parent: int, student: int) -> list[int]:
    """The parent's layer each of `student` layers copies: maximally spaced, first and last
    kept, rounded half up (one layer: the first)."""
    if parent < 1 or student < 1:
        raise ValueError(f"layer counts must be positive, got {parent} and {student}")
    if student == 1:
        return [0]
    return [int(i * (parent - 1) / (student - 1) + 0.5) for i in range(student)]


def layer_counts(paths) -> dict[str, int]:
    """{"encoder": n, "decoder": m}: the layers of each stack among the variable paths."""
    counts: dict[str, int] = {}
    for path in paths:
        match = LAYER.match(path)
        if match:
            counts[match[1]] = max(counts.get(match[1], 0), int(match[2]) + 1)
    return counts


def layer_maps(parent_paths, student_paths) -> dict[str, list[int]]:
    """For each stack of the student, the parent's layer each of its layers copies: the same
    index when the depths are equal (or the parent has no such stack), else `spaced_layers`."""
    parent, student = layer_counts(parent_paths), layer_counts(student_paths)
    maps = {}
    for stack, count in student.items():
        same = parent.get(stack, count) == count
        maps[stack] = list(range(count)) if same else spaced_layers(parent[stack], count)
    return maps


def changes_depth(maps: dict[str, list[int]]) -> bool:
    """Whether `maps` copies any layer to another index (the depths differ)."""
    return any(chosen != list(range(len(chosen))) for chosen in maps.values())


def parent_path(path: str, maps: dict[str, list[int]]) -> str:
    """The parent's variable that the student's variable `path` takes."""
    match = LAYER.match(path)
    if not match:
        return path
    return f"model/{match[1]}/layer_{maps[match[1]][int(match[2])]}/{path[match.end() :]}"


def model_variables(model: tf.Module) -> dict[str, tf.Variable]:
    """Object path under "model" --> variable, for each variable a checkpoint of `model` saves."""
    root = tf.train.Checkpoint(model=model)
    view = tf.train.TrackableView(root)
    stack, seen, found = [(root, "")], set(), {}
    while stack:
        node, name = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, (tf.Variable, keras.Variable)):
            found[name] = node
            continue
        for child_name, child in view.children(node).items():
            stack.append((child, f"{name}/{child_name}" if name else child_name))
    return found


def copy_layers(model: tf.Module, path: str, parent_keys: dict[str, str], maps) -> None:
    """Assigns each variable of `model` its parent's value (`parent_path`) from the checkpoint
    `path`, whose object paths `parent_keys` maps to checkpoint keys."""
    reader = tf.train.load_checkpoint(path)
    variables = model_variables(model)
    missing = sorted(name for name in variables if parent_path(name, maps) not in parent_keys)
    if missing:
        raise ValueError(f"--init_from={path}: the parent has no variable for {missing[:10]}")
    for name, variable in variables.items():
        variable.assign(reader.get_tensor(parent_keys[parent_path(name, maps)]))


def describe(maps: dict[str, list[int]], parent_paths) -> str:
    """'encoder layers 0,0,1,1,2,2 of the parent's 3; decoder layer 0 of 3' for the log."""
    parent = layer_counts(parent_paths)
    return "; ".join(
        f"{stack} layer{'s' if len(chosen) > 1 else ''} {','.join(map(str, chosen))} of the "
        f"parent's {parent.get(stack, len(chosen))}"
        for stack, chosen in sorted(maps.items(), reverse=True)
    )
