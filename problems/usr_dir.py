"""`--usr_dir`: the user's own problems, imported from a Python file or package.

Importing `--usr_dir` runs its code with the rights of the user who runs the command, as any
Python import does: pass only code you trust (the same holds for a `--usr_dir` named in someone
else's command line or script).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from types import ModuleType


def import_usr_dir(path: str) -> ModuleType:
    """Imports the user's Python package or module at `path` so its problems register; returns
    the module. Its import errors propagate.

    `path` is a folder with an `__init__.py` or a single `.py` file. It is imported under a name
    of its own (`t2t_usr_dir_<name>_<8 hex digits of the path's hash>`), so a file named like a
    module that is already loaded (`json.py`, `utils.py`) is still imported, once per path.
    Modules beside it can be imported by their names while it is being imported.
    """
    path = os.path.abspath(os.path.expanduser(path.rstrip("/")))
    if not os.path.exists(path):
        raise FileNotFoundError(f"--usr_dir {path} does not exist")
    parent, module = os.path.split(path)
    module = module.removesuffix(".py")
    init = os.path.join(path, "__init__.py")
    if os.path.isdir(path) and not os.path.isfile(init):
        raise ValueError(f"--usr_dir {path} is a folder without __init__.py")
    if not module.isidentifier():
        raise ValueError(f"--usr_dir {path}: {module!r} is not a valid Python module name")
    name = f"t2t_usr_dir_{module}_{hashlib.sha256(path.encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    if os.path.isdir(path):
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[path])
    else:
        spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"--usr_dir {path} is not a Python file or package")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    sys.path.insert(0, parent)
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(parent)
    return loaded
