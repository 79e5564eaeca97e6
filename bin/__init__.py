"""The t2t-* commands.

Importing this package quiets TensorFlow's C++ start-up lines on machines without an NVIDIA
driver (the CUDA probe's "failed call to cuInit" error and the CPU feature notes), unless the
user set TF_CPP_MIN_LOG_LEVEL or passed --verbose. It runs before any command imports TensorFlow.
"""

import os
import sys

if "--verbose" not in sys.argv and not os.path.exists("/proc/driver/nvidia/version"):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
