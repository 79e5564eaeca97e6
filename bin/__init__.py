"""The t2t-* commands.

TensorFlow's start-up lines are held back by the t2t_lite package itself
(`t2t_lite.runtime.tensorflow_start`), for the commands as for any program. Here the commands
add: --verbose shows every line TensorFlow prints (TF_CPP_MIN_LOG_LEVEL=0); otherwise, on a
machine without an NVIDIA driver, TensorFlow's C++ warnings and errors about the missing GPU are
kept out too (TF_CPP_MIN_LOG_LEVEL=3 unless the user set a level). It runs before any command
imports TensorFlow, and a command that never uses TensorFlow never loads it.
"""

import os
import sys

if "--verbose" in sys.argv:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
elif not os.path.exists("/proc/driver/nvidia/version"):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
