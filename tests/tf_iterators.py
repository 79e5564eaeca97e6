"""The `tf_iterators` fixture: weak references to the tf.data iterators a test makes, with
Python's cycle collector off for the test, so that an iterator still alive after a job raised is
held by a reference (a kept error's frames), not waiting for a collection."""

from __future__ import annotations

import gc
import weakref

import pytest


@pytest.fixture
def tf_iterators(monkeypatch):
    from tensorflow.python.data.ops import iterator_ops, multi_device_iterator_ops

    made: list[weakref.ref] = []
    for kind in (iterator_ops.OwnedIterator, multi_device_iterator_ops.OwnedMultiDeviceIterator):

        def tracked(self, *args, _init=kind.__init__, **kwargs):
            _init(self, *args, **kwargs)
            made.append(weakref.ref(self))

        monkeypatch.setattr(kind, "__init__", tracked)
    gc.disable()
    try:
        yield made
    finally:
        gc.enable()
