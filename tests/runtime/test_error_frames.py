import gc
import traceback
import weakref

import pytest

from t2t_lite.runtime.error_frames import clear_error_frames, frames_cleared


class Held:
    """Something a frame holds (weakly referable, unlike a list)."""


def _fails_holding(held: list, message: str):
    item = Held()
    held.append(weakref.ref(item))
    raise ValueError(message)


def _fails_twice(held: list):
    try:
        _fails_holding(held, "first")
    except ValueError as first:
        raise RuntimeError("second") from first


def test_a_kept_error_no_longer_holds_its_frames_locals():
    gc.disable()  # what is freed is freed by its references going, not by a collection
    try:
        held: list = []
        with pytest.raises(RuntimeError) as kept:
            with frames_cleared():
                _fails_twice(held)
        assert str(kept.value) == "second" and str(kept.value.__cause__) == "first"
        assert len(held) == 1 and held[0]() is None
        # The lines are kept for the traceback a user sees.
        assert kept.traceback[-1].name == "_fails_twice"
        assert kept.traceback[-1].statement.lines[0].strip().startswith("raise RuntimeError")
        cause = traceback.extract_tb(kept.value.__cause__.__traceback__)
        assert [frame.name for frame in cause][-1] == "_fails_holding"

        held = []
        with pytest.raises(RuntimeError) as kept:
            _fails_twice(held)
        assert held[0]() is not None  # without it, the kept error holds the local
        clear_error_frames(kept.value)
        assert held[0]() is None
    finally:
        gc.enable()


def test_the_running_frame_keeps_its_locals():
    mine = Held()
    try:
        raise ValueError("here")
    except ValueError as error:
        clear_error_frames(error)  # this frame is running: left as it is
    assert isinstance(mine, Held)
