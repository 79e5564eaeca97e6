"""The Keras 3 layer contract (the one keras-hub's layers keep), checked for any t2t_lite layer.

`check_layer_contract(layer, args, kwargs, num_weights)` runs the layer on sample inputs and
checks that:
  * it is registered serializable under the package "t2t_lite";
  * `get_config()` is flat, plain JSON: `json.dumps` works, and no value is a dict (or holds
    one) except the entries Keras' own base config adds (the dtype policy);
  * `from_config(get_config())`, and Keras' `serialize_keras_object` / `deserialize_keras_object`
    by registered name, rebuild a layer of the same class with an equal config;
  * `compute_output_shape`, where the layer has it (every t2t_lite layer but the model),
    gives the shape its call returns;
  * the rebuilt layer has `num_weights` weights of the same shapes and, given the original's
    weights, computes the same outputs.
"""

from __future__ import annotations

import json

import keras
import numpy as np

PACKAGE = "t2t_lite"
# Config entries Keras' base `Layer.get_config()` writes as nested dicts.
KERAS_NESTED_KEYS = frozenset({"dtype"})


def registered_layer_classes(package: str = PACKAGE) -> set[type]:
    """Every Layer (Models included) registered serializable under `package`."""
    return {
        cls
        for name, cls in keras.saving.get_custom_objects().items()
        if name.startswith(f"{package}>")
        and isinstance(cls, type)
        and issubclass(cls, keras.layers.Layer)
    }


def _holds_dict(value) -> bool:
    if isinstance(value, dict):
        return True
    return isinstance(value, list | tuple) and any(_holds_dict(v) for v in value)


def _flatten(outputs) -> list[np.ndarray]:
    return [np.asarray(x) for x in keras.tree.flatten(outputs)]


def _own_output_shape(cls: type) -> bool:
    """Whether a t2t_lite class (not Keras) defines `compute_output_shape` for `cls`."""
    return any(
        "compute_output_shape" in vars(c) and c.__module__.startswith("t2t_lite")
        for c in cls.__mro__
    )


def check_layer_contract(
    layer: keras.layers.Layer, args: tuple, kwargs: dict | None = None, num_weights: int = 0
) -> keras.layers.Layer:
    """Checks the contract above for `layer` called as `layer(*args, **kwargs)`; returns the
    layer rebuilt from its config, holding a copy of the original's weights."""
    kwargs = kwargs or {}
    cls = type(layer)
    assert keras.saving.get_registered_name(cls) == f"{PACKAGE}>{cls.__name__}"
    output = layer(*args, **kwargs)  # builds the layer if it was not built
    expected = _flatten(output)
    if _own_output_shape(cls):
        # keras-hub's layers say their output shape without running; it must be the real one.
        shapes = [tuple(np.shape(a)) for a in args]
        assert tuple(layer.compute_output_shape(*shapes)) == tuple(np.shape(output))
    assert len(layer.weights) == num_weights, [w.path for w in layer.weights]

    config = layer.get_config()
    nested = [k for k, v in config.items() if _holds_dict(v) and k not in KERAS_NESTED_KEYS]
    assert not nested, f"config entries not flat: {nested}"
    text = json.dumps(config)  # raises on anything that is not plain JSON
    clone = cls.from_config(json.loads(text))
    assert type(clone) is cls
    assert clone.get_config() == config

    revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(revived) is cls
    assert revived.get_config() == config

    clone(*args, **kwargs)  # builds the clone's weights
    assert [tuple(w.shape) for w in clone.weights] == [tuple(w.shape) for w in layer.weights]
    clone.set_weights(layer.get_weights())
    actual = _flatten(clone(*args, **kwargs))
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)
    return clone
