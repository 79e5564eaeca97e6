"""Run by tests/serve/test_export.py in a fresh process: `import tensorflow_text`, load the
SavedModel and translate, as a user or another service would, with nothing of t2t_lite
imported.

    python fresh_process_translate.py SAVED_MODEL_DIR LINES_FILE

Prints JSON: the ops registered by TensorFlow alone ("core") and added by tensorflow-text
("text"), and serving_default's outputs and scores for the file's lines.
"""

import json
import sys

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api


def registered() -> set[str]:
    """Names of every op registered in this process."""
    buffer = c_api.TF_GetAllOpList()
    try:
        data = bytes(c_api.TF_GetBuffer(buffer))
    finally:
        c_api.TF_DeleteBuffer(buffer)
    ops = op_def_pb2.OpList()
    ops.ParseFromString(data)
    return {op.name for op in ops.op}


core = registered()
import tensorflow_text  # noqa: E402, F401  (registers the tokenizer ops)

text_ops = registered() - core
model = tf.saved_model.load(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    lines = f.read().split("\n")[:-1]
found = model.signatures["serving_default"](inputs=tf.constant(lines))
json.dump(
    {
        "core": sorted(core),
        "text": sorted(text_ops),
        "outputs": [o.decode("utf-8") for o in found["outputs"].numpy()],
        "scores": found["scores"].numpy().tolist(),
    },
    sys.stdout,
)
