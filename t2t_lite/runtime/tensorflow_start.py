"""TensorFlow's start-up lines, held back for every program that imports t2t_lite.

While its two libraries load, TensorFlow's C++ prints notes on file descriptor 2 that no setting
stops (they come before absl::InitializeLog, so TF_CPP_MIN_LOG_LEVEL does not apply to them):
"All log messages before absl::InitializeLog() is called", "oneDNN custom operations are on",
the CPU feature note and, on a machine without an NVIDIA driver, the CUDA probe's "Could not
find cuda drivers" and "failed call to cuInit". `hold_startup_lines()` (called when the t2t_lite
package is imported) puts a finder first on sys.meta_path that gives TensorFlow's import, when
it comes, a loader holding descriptor 2 while it runs; what it printed is passed on except
those lines. Nothing is imported before that: `"tensorflow" in sys.modules` still says whether
TensorFlow is loaded (the LiteRT runner and its tests ask). As it loads, it
sets TF_CPP_MIN_LOG_LEVEL to 1 (C++ INFO lines off) when the variable is unset. A user who sets
TF_CPP_MIN_LOG_LEVEL=0 sees every line, and a program that imported TensorFlow before t2t_lite
is left as it is.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

_NO_NVIDIA_DRIVER = not os.path.exists("/proc/driver/nvidia/version")
_STARTUP_LINES = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called"
    r"|\] oneDNN custom operations are on"
    r"|cpu_feature_guard\.cc:\d+\]|^To enable the following instructions: "
    + (r"|\] Could not find cuda drivers|\] failed call to cuInit" if _NO_NVIDIA_DRIVER else "")
)


def startup_noise(line: str) -> bool:
    """Whether `line` is one of TensorFlow's start-up lines that are held back."""
    return bool(_STARTUP_LINES.search(line))


def _every_line_wanted() -> bool:
    """TF_CPP_MIN_LOG_LEVEL=0, set by the user (or by a command's --verbose), shows them all."""
    return os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0"


class _QuietLoader(importlib.abc.Loader):
    """TensorFlow's own loader, with file descriptor 2 held while it runs and while the devices
    are listed (the CUDA probe); afterwards every line but the start-up ones goes to stderr."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # read as the libraries load
        if _every_line_wanted():
            self.loader.exec_module(module)
            return
        sys.stderr.flush()
        held, kept = tempfile.TemporaryFile(), os.dup(2)
        os.dup2(held.fileno(), 2)
        try:
            self.loader.exec_module(module)
            module.config.list_physical_devices()
        finally:
            sys.stderr.flush()
            os.dup2(kept, 2)
            os.close(kept)
            held.seek(0)
            text = held.read().decode("utf-8", "replace")
            held.close()
            lines = text.splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not startup_noise(line)))
            sys.stderr.flush()


class _QuietFinder(importlib.abc.MetaPathFinder):
    """Finds TensorFlow as the other finders do, the first time it is imported, and wraps its
    loader in `_QuietLoader`; then steps aside."""

    def find_spec(self, name, path, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once, and not while the other finders look
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


def hold_startup_lines() -> None:
    """Registers TensorFlow to load quietly when it is first imported (see the module's
    docstring)."""
    if "tensorflow" in sys.modules or any(isinstance(f, _QuietFinder) for f in sys.meta_path):
        return  # already loaded (its lines, if any, are out), or already registered
    sys.meta_path.insert(0, _QuietFinder())
