"""Whether TensorFlow runs its oneDNN ops in this process. TensorFlow turns them on by default
only on x86 CPUs with AVX-512 VNNI, AVX-512 BF16 or AMX, and TF_ENABLE_ONEDNN_OPTS overrides
that; the 8-bit product (int8_product) exists only where they run, and float products round
differently with and without them."""

from __future__ import annotations


def onednn_on() -> bool:
    from tensorflow.python.util import _pywrap_util_port  # TensorFlow's own switch

    return bool(_pywrap_util_port.IsMklEnabled())
