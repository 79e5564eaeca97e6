"""matplotlib for the pictures the commands draw (attention maps, sweep reports): pyplot on the
file-only Agg backend, and a figure written as a PNG atomically.

matplotlib is an optional extra (`viz`); without it `pyplot()` raises `MissingExtraError`, whose
message names `pip install 't2t_lite[viz]'` and what needed it.
"""

from __future__ import annotations

import io

from t2t_lite.extras import import_extra
from t2t_lite.runtime import atomic_io


def pyplot(purpose: str):
    """matplotlib's pyplot on the Agg backend; `purpose` ends the missing-extra message."""
    matplotlib = import_extra("matplotlib", "matplotlib", "viz", purpose)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_png(figure, path: str, dpi: int) -> None:
    """Writes `figure` to `path` as a PNG (whole or not at all) and closes it."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    pyplot("closing a figure").close(figure)
    atomic_io.write_bytes(path, buffer.getvalue())
