"""A SavedModel's SignatureDefs as TF Serving reads them: the model metadata JSON it answers and
the checks its Classify and Regress APIs make of a signature before running it.

The SignatureDef protos come from the export's saved_model.pb and go out through protobuf's JSON
printer with the options TF Serving gives it (field names as in the proto, every field printed),
so `GET /v1/models/NAME/metadata` is what TF Serving answers for the same folder.
"""

from __future__ import annotations

import os
from typing import Any

from t2t_lite.serve.web.tensor_json import ServingError

CLASSIFY, REGRESS = "classify", "regress"


def load(path: str) -> dict[str, Any]:
    """{signature name: SignatureDef proto} of the SavedModel in `path` ({} without one)."""
    from tensorflow.core.protobuf import saved_model_pb2

    file = os.path.join(path, "saved_model.pb")
    if not os.path.isfile(file):
        return {}
    model = saved_model_pb2.SavedModel()
    with open(file, "rb") as f:
        model.ParseFromString(f.read())
    return dict(model.meta_graphs[0].signature_def)


def metadata_json(defs: dict[str, Any]) -> dict:
    """TF Serving's "signature_def" metadata: a SignatureDefMap as protobuf's JSON."""
    from google.protobuf import json_format

    def printed(proto) -> dict:
        return json_format.MessageToDict(
            proto, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
        )

    return {"signature_def": {name: printed(proto) for name, proto in defs.items()}}


def check_examples(doc: dict) -> None:
    """The "examples" of a classify or regress request, refused as TF Serving refuses them
    (its message says "classify" for both)."""
    from t2t_lite.serve.web.tensor_json import format_error

    examples = doc.get("examples")
    if "examples" not in doc:
        raise format_error(doc, "When method is classify, key 'examples' is expected and was "
                                "not found")  # fmt: skip
    if not isinstance(examples, list):
        raise format_error(doc, "Expecting 'examples' value to be an list/array")
    if not examples:
        raise format_error(doc, "'examples' value is an empty array")
    for example in ([doc["context"]] if "context" in doc else []) + examples:
        if not isinstance(example, dict):
            kind = "Array" if isinstance(example, list) else type(example).__name__
            raise ServingError(400, f"Example must be JSON object but got JSON {kind}")


def check_signature(defs: dict[str, Any], name: str, method: str) -> None:
    """TF Serving's checks of a signature for classify or regress (without its optional method
    name check): one input named "inputs", and one or two outputs ("classes" and/or "scores")
    for classify, one ("outputs") for regress. A t2t export's signatures fail them: the error
    TF Serving gives. One that passed would still not be run (`ServingError` 400)."""
    signature = name or "serving_default"
    if signature not in defs:
        raise ServingError(400, f"No signature was found with the name: {signature}")
    proto = defs[signature]
    inputs, outputs = proto.inputs, proto.outputs
    if len(inputs) != 1:
        raise ServingError(400, "Expected one input Tensor.")
    if method == CLASSIFY and len(outputs) not in (1, 2):
        raise ServingError(400, f"Expected one or two output Tensors, found {len(outputs)}")
    if method == REGRESS and len(outputs) != 1:
        raise ServingError(400, "Expected one output Tensor.")
    kind = "classification" if method == CLASSIFY else "regression"
    if "inputs" not in inputs:
        raise ServingError(400, f"No {kind} inputs found in SignatureDef: {proto}")
    if method == CLASSIFY and not {"classes", "scores"} & set(outputs):
        raise ServingError(
            400,
            'Expected classification signature outputs to contain at least one of "classes" '
            f'or "scores". Signature was: {proto}',
        )
    if method == REGRESS and "outputs" not in outputs:
        raise ServingError(400, f"No regression outputs found in SignatureDef: {proto}")
    raise ServingError(
        400, f"{signature}: a translation signature; t2t-serve runs it with :predict only"
    )
