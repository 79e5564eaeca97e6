"""TF Serving's JSON for tensors (its `json_tensor.cc`, read as a reference): a predict request's
rows ("instances") or columns ("inputs") --> one value list per input, and a signature's output
tensors --> {"predictions": ...} or {"outputs": ...}, with TF Serving's error messages.

Strings come as JSON strings or as {"b64": base64} objects (bytes); an output whose name ends in
`_bytes` goes out as {"b64": ...}. Floats are written as TF Serving writes them: six significant
digits where that reads back the same float, nine otherwise, and NaN / Infinity as JSON's
extensions. Nested lists are walked without recursion, so a deep list is an error, not a crash.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import numpy as np

MAX_DEBUG_CHARS = 256  # TF Serving's kMaxJsonDebugStringBytes: a value quoted in an error


class ServingError(Exception):
    """A request TF Serving would refuse: the HTTP `status` of its gRPC code, and its message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def debug_string(value: Any) -> str:
    """A JSON value as TF Serving quotes it in an error: rapidjson's pretty writer (objects over
    lines indented by 4, arrays on one line), stopped once 256 characters are written."""
    out, size = [], 0
    # (value, depth, prefix): a stack of what is left to write, walked without recursion
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack and size < MAX_DEBUG_CHARS:
        item, depth, prefix = stack.pop()
        if isinstance(item, _Close):
            token = prefix + item.text
        elif isinstance(item, dict) and item:
            token = prefix + "{"
            stack.append((_Close("}"), depth, "\n" + "    " * depth))
            pad = "\n" + "    " * (depth + 1)
            for i, (key, child) in reversed(list(enumerate(item.items()))):
                stack.append((child, depth + 1, ("," if i else "") + pad + json.dumps(key) + ": "))
        elif isinstance(item, list) and item:
            token = prefix + "["
            stack.append((_Close("]"), depth, ""))
            children = reversed(list(enumerate(item)))
            stack.extend((child, depth + 1, ", " if i else "") for i, child in children)
        else:
            token = prefix + json.dumps(item, ensure_ascii=False)
        out.append(token)
        size += len(token)
    return "".join(out)


class _Close:
    """The end of an object or array still to be written by `debug_string`."""

    def __init__(self, text: str):
        self.text = text


def format_error(doc: Any, *parts: str) -> ServingError:
    return ServingError(400, f"JSON Value: {debug_string(doc)} {''.join(parts)}")


def parse_body(raw: bytes) -> dict:
    """The request body as a JSON object, refused as TF Serving's `ParseJson` refuses it."""
    if not raw:
        raise ServingError(400, "JSON Parse error: The document is empty")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as error:  # RecursionError: nested beyond Python's stack
        at = f" at offset: {error.pos}" if isinstance(error, json.JSONDecodeError) else ""
        message = error.msg if isinstance(error, json.JSONDecodeError) else "nested too deep"
        raise ServingError(400, f"JSON Parse error: {message}{at}") from None
    if not isinstance(doc, dict):
        raise format_error(doc, "Is not object")
    name = doc.get("signature_name", "")
    if not isinstance(name, str):
        raise format_error(
            doc, "not formatted correctly. 'signature_name' key must be a string value."
        )
    return doc


def _type_name(value: Any) -> str:
    """rapidjson's name of a JSON value's type, as TF Serving's messages give it."""
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "True" if value else "False"
    return {dict: "Object", list: "Array", str: "String"}.get(type(value), "Number")


def is_b64(value: Any) -> bool:
    """A {"b64": "<base64>"} object: bytes in JSON."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _leaf(value: Any, dtype: str) -> Any:
    """One JSON scalar as a value of `dtype` (a NumPy / TF dtype name), or TF Serving's error."""
    if dtype == "string":
        if is_b64(value):
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (binascii.Error, ValueError):
                raise ServingError(400, "Unable to base64 decode") from None
        if isinstance(value, dict):
            raise ServingError(
                400, f"JSON Value: {debug_string(value)} not formatted correctly for base64 data"
            )
        if isinstance(value, str):
            return value.encode("utf-8", "surrogatepass")
    elif dtype == "bool" and isinstance(value, bool):
        return value
    elif dtype.startswith(("int", "uint")) and type(value) is int:
        return value
    elif dtype.startswith(("float", "double")) and type(value) in (int, float):
        return float(value)
    raise ServingError(
        400,
        f"JSON Value: {debug_string(value)} Type: {_type_name(value)} is not of expected type: "
        f"{dtype}",
    )


def dense(value: Any, dtype: str) -> tuple[list[int], list]:
    """A JSON value --> (shape, flat values of `dtype`): the shape follows first elements, and
    every list must have that shape (TF Serving's `FillTensorProto`)."""
    shape, probe = [], value
    while isinstance(probe, list):
        shape.append(len(probe))
        if not probe:
            break
        probe = probe[0]
    flat, stack = [], [(value, 0)]
    while stack:
        item, level = stack.pop()
        if not isinstance(item, list):
            if level != len(shape):
                raise ServingError(
                    400,
                    f"JSON Value: {debug_string(item)} found at incorrect level: {level + 1} in "
                    f"the JSON DOM. Expected at level: {len(shape)}",
                )
            flat.append(_leaf(item, dtype))
            continue
        if level >= len(shape):
            raise ServingError(
                400, f"Encountered list at unexpected level: {level} expected < {len(shape)}"
            )
        if len(item) != shape[level]:
            raise ServingError(
                400,
                f"Encountered list at unexpected size: {len(item)} at level: {level} expected "
                f"size: {shape[level]}",
            )
        stack.extend((child, level + 1) for child in reversed(item))
    return shape, flat


def _column(items: list, name: str, dtype: str, objects: bool) -> tuple[list[int], list]:
    """Rows' values of one input --> the batched (shape, flat values)."""
    first, flat = None, []
    for index, item in enumerate(items):
        try:
            shape, values = dense(item, dtype)
        except ServingError as error:
            key = f" key: {name}" if objects else ""
            raise ServingError(
                400,
                f"Failed to process element: {index}{key} of 'instances' list. Error: "
                f"INVALID_ARGUMENT: {error}",
            ) from None
        if first is None:
            first = (shape, len(values))
        elif len(values) != first[1]:
            raise ServingError(400, f"Expecting tensor size: {first[1]} but got: {len(values)}")
        elif shape != first[0]:
            raise ServingError(
                400,
                f"Expecting shape [{','.join(map(str, first[0]))}] but got: "
                f"[{','.join(map(str, shape))}]",
            )
        flat.extend(values)
    return [len(items), *first[0]], flat


def _rows(doc: dict, dtypes: dict[str, str]) -> dict[str, tuple[list[int], list]]:
    instances = doc["instances"]
    if not isinstance(instances, list):
        raise format_error(doc, "Expecting 'instances' to be an list/array")
    if not instances:
        raise format_error(doc, "No values in 'instances' array")
    objects = isinstance(instances[0], dict) and not is_b64(instances[0])
    if not objects and len(dtypes) > 1:
        raise ServingError(
            400,
            "instances is a plain list, but expecting list of objects as multiple input "
            "tensors required as per tensorinfo_map",
        )
    if not objects:
        for index, item in enumerate(instances):
            if isinstance(item, dict) and not is_b64(item):
                raise ServingError(
                    400, f"Expecting value/list but got object at item {index} of input list"
                )
        name, dtype = next(iter(dtypes.items()))
        return {name: _column(instances, name, dtype, False)}
    for index, item in enumerate(instances):
        if not isinstance(item, dict) or is_b64(item):
            raise ServingError(400, f"Expecting object but got list at item {index} of input list")
        for key in item:
            if key not in dtypes:
                raise ServingError(
                    400,
                    f"Failed to process element: {index} key: {key} of 'instances' list. Error: "
                    f"INVALID_ARGUMENT: JSON object: does not have named input: {key}",
                )
        if set(item) != set(dtypes):
            raise ServingError(
                400,
                f"Failed to process element: {index} of 'instances' list. JSON object: "
                f"{debug_string(item)} keys must be equal to: {','.join(sorted(dtypes))}",
            )
    return {n: _column([row[n] for row in instances], n, d, True) for n, d in dtypes.items()}


def _columns(doc: dict, dtypes: dict[str, str]) -> dict[str, tuple[list[int], list]]:
    given = doc["inputs"]
    if not isinstance(given, dict) or is_b64(given):
        if len(dtypes) > 1:
            raise ServingError(
                400,
                "inputs is a plain value/list, but expecting an object as multiple input "
                "tensors required as per tensorinfo_map",
            )
        name, dtype = next(iter(dtypes.items()))
        return {name: dense(given, dtype)}
    for name in dtypes:
        if name not in given:
            raise ServingError(400, f"Missing named input: {name} in 'inputs' object.")
    return {name: dense(given[name], dtype) for name, dtype in dtypes.items()}


def request_tensors(doc: dict, dtypes: dict[str, str]) -> tuple[dict[str, np.ndarray], bool]:
    """A predict request's inputs ({input: dtype name} of the signature) --> {input: array},
    and whether it came as rows (the answer is then "predictions", else "outputs")."""
    rows, columns = "instances" in doc, "inputs" in doc
    if rows and columns:
        raise format_error(
            doc, "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to "
            "exist "
        )  # fmt: skip
    if not rows and not columns:
        raise ServingError(400, "Missing 'inputs' or 'instances' key")
    found = _rows(doc, dtypes) if rows else _columns(doc, dtypes)
    arrays = {}
    for name, (shape, flat) in found.items():
        kind = object if dtypes[name] == "string" else dtypes[name]
        arrays[name] = np.array(flat, dtype=kind).reshape(shape)
    return arrays, rows


def decimal(value: float, digits: int) -> float:
    """A float as TF Serving writes it: %g (six digits) where that reads back the same value in
    the tensor's precision (`digits`: 9 for float32, 17 for float64), else `digits` digits."""
    if not np.isfinite(value):
        return float(value)
    kind = np.float32 if digits == 9 else np.float64
    short = f"{value:g}"
    return float(short if kind(short) == value else f"{value:.{digits}g}")


def _json_values(name: str, array: np.ndarray) -> Any:
    """An output array --> nested JSON values as TF Serving writes them."""
    if array.dtype == object:  # tf.string
        if name.endswith("_bytes"):
            convert = lambda b: {"b64": base64.b64encode(b).decode("ascii")}  # noqa: E731
        else:
            convert = lambda b: b.decode("utf-8", "replace")  # noqa: E731
    elif array.dtype.kind == "f":
        digits = 9 if array.dtype.itemsize <= 4 else 17
        convert = lambda x: decimal(x, digits)  # noqa: E731
    else:
        convert = lambda x: x.item()  # noqa: E731
    if array.ndim == 0:
        return convert(array[()])
    flat = [convert(x) for x in array.reshape(-1)]
    return np.array(flat, dtype=object).reshape(array.shape).tolist()


def answer(outputs: dict[str, np.ndarray], rows: bool) -> dict:
    """A signature's outputs --> {"predictions": one item per row} (rows) or {"outputs": ...};
    with a single output its values stand alone, as TF Serving writes them."""
    values = {name: _json_values(name, array) for name, array in outputs.items()}
    if not rows:
        return {"outputs": values if len(values) > 1 else next(iter(values.values()))}
    counts = {name: array.shape[0] if array.ndim else None for name, array in outputs.items()}
    for name, count in counts.items():
        if count is None:
            raise ServingError(400, f"Tensor name: {name} has no shape information ")
        batch = next(iter(counts.values()))
        if count != batch:
            raise ServingError(
                400,
                f"Tensor name: {name} has inconsistent batch size: {count} expecting: {batch}",
            )
    batch = next(iter(counts.values()))
    if len(values) == 1:
        return {"predictions": next(iter(values.values()))}
    return {"predictions": [{k: v[i] for k, v in values.items()} for i in range(batch)]}
