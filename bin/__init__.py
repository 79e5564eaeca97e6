"""The t2t-* commands.

Importing this package keeps TensorFlow's start-up lines out of a command's output, unless the
user passed --verbose: the C++ notes that TensorFlow's two libraries print while they load ("All
log messages before absl::InitializeLog() is called", "oneDNN custom operations are on", the CPU
feature note) and, on a machine without an NVIDIA driver, the CUDA probe's "Could not find cuda
drivers" and "failed call to cuInit". They are written to file descriptor 2 by C++ before any
setting can stop them, so TensorFlow is registered here to load on first use
(importlib.util.LazyLoader) with descriptor 2 held meanwhile; what it printed is passed on
except those lines. It runs before any command imports TensorFlow, and a command that never
uses TensorFlow never loads it.
"""

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
    """Whether `line` is one of TensorFlow's start-up lines that the commands hold back."""
    return bool(_STARTUP_LINES.search(line))


class _QuietLoader(importlib.abc.Loader):
    """TensorFlow's own loader, with file descriptor 2 held while it runs and while the devices
    are listed (the CUDA probe); afterwards every line but the start-up ones goes to stderr."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
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


def _load_tensorflow_quietly() -> None:
    if "tensorflow" in sys.modules:
        return
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or spec.loader is None:
        return  # the import itself will say what is missing
    spec.loader = importlib.util.LazyLoader(_QuietLoader(spec.loader))
    module = importlib.util.module_from_spec(spec)
    sys.modules["tensorflow"] = module
    spec.loader.exec_module(module)


if "--verbose" not in sys.argv:
    if _NO_NVIDIA_DRIVER:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    _load_tensorflow_quietly()
