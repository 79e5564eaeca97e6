"""Checkpoints written before the layers took the Keras 3 layer contract still load.

The fixtures (fixtures/make_tiny_v0.py, written at commit 466b973) hold
`tf.train.Checkpoint(model=model)` of seeded tiny Transformers and their logits. The object
graph path of each variable comes from attribute names (encoder/layer_0/self_attention/
query_dense/_kernel, ...), so the current model must restore them exactly, and still write the
same paths and shapes: the optimizer's slots in a training checkpoint follow the same variables.
"""

import importlib.util
import os

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.hparams import get_hparams
from t2t_lite.model import Transformer

FIXTURES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def _fixture_script():
    """fixtures/make_tiny_v0.py: the fixtures' names, hparams overrides, inputs and vocab."""
    path = os.path.join(FIXTURES_DIR, "make_tiny_v0.py")
    spec = importlib.util.spec_from_file_location("make_tiny_v0", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIXTURE = _fixture_script()


def _model(name: str) -> Transformer:
    model = Transformer.from_hparams(
        get_hparams("transformer_tiny", FIXTURE.FIXTURES[name]), FIXTURE.VOCAB
    )
    model.build()
    return model


def _layout(prefix: str) -> dict:
    """{variable key: shape} of a checkpoint, without the object graph entry."""
    return {name: shape for name, shape in tf.train.list_variables(prefix) if "/" in name}


@pytest.mark.parametrize("name", sorted(FIXTURE.FIXTURES))
def test_old_checkpoint_restores_exactly(name, tmp_path):
    directory = os.path.join(FIXTURES_DIR, name)
    with open(os.path.join(directory, "overrides.txt")) as f:
        assert f.read().split() == ["transformer_tiny", FIXTURE.FIXTURES[name]]
    model = _model(name)
    status = tf.train.Checkpoint(model=model).read(os.path.join(directory, "ckpt"))
    status.assert_existing_objects_matched()
    status.assert_consumed()  # every saved value found its variable, and every variable a value
    logits = model({"inputs": FIXTURE.INPUTS, "targets": FIXTURE.TARGETS})
    expected = np.load(os.path.join(directory, "logits.npy"))
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)
    # A checkpoint written now has the same variable paths and shapes as the old one.
    written = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    assert _layout(written) == _layout(os.path.join(directory, "ckpt"))
