"""Optional dependencies: the packages that pyproject.toml's extras install, imported when used.

`pip install t2t_lite` leaves out what only some paths need (tensorflow-datasets for WMT14
through tfds, matplotlib for attention pictures, ...). Those paths import their package with
`import_extra`, so a missing one ends in a message naming the extra that installs it rather
than a bare `ModuleNotFoundError`.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtraError(ImportError):
    """An optional package is not installed; the message names the extra that installs it.

    The t2t-* commands report it as a one-line error (`t2t_lite.bin.cli`).
    """


def import_extra(module: str, package: str, extra: str, needed_by: str) -> ModuleType:
    """Imports `module` (from the distribution `package`), or raises `MissingExtraError`:
    "<needed_by> needs <package>: pip install 't2t_lite[<extra>]'"."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        # Only the module itself missing; an import error inside an installed package is a bug
        # (or a broken install) that should keep its own message.
        top = module.split(".")[0]
        if not isinstance(error, ModuleNotFoundError) or error.name not in (top, module, None):
            raise
        raise MissingExtraError(
            f"{needed_by} needs {package}: pip install 't2t_lite[{extra}]'", name=module
        ) from error
