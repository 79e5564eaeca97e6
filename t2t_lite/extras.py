"""Optional dependencies: the packages that pyproject.toml's extras install, imported when used.

`pip install t2t_lite` leaves out what only some paths need (tensorflow-datasets for WMT14
through tfds, matplotlib for attention pictures, ...). Those paths import their package with
`import_extra`, so a missing one ends in a message naming the extra that installs it rather
than a bare `ModuleNotFoundError`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
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


def lazy_import(module: str) -> ModuleType:
    """`module`, executed when one of its attributes is first read (importlib.util.LazyLoader).

    The modules a command's flags are defined in use it for TensorFlow and Keras, so that
    `--help` and a flag error answer without loading them (about 5 s). Once executed it is the
    ordinary module; an `import` of it afterwards gets the same object.
    """
    if module in sys.modules:
        return sys.modules[module]
    spec = importlib.util.find_spec(module)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    lazy = importlib.util.module_from_spec(spec)
    sys.modules[module] = lazy
    spec.loader.exec_module(lazy)
    return lazy
