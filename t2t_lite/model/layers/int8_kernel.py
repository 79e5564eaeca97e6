"""Which oneDNN kernel computes the 8-bit products (`int8_product`) on this CPU, and how it sums.

TensorFlow's x86 build multiplies uint8 inputs by int8 weights with oneDNN, whose kernel is
chosen at run time by the best instruction set the CPU has (oneDNN's "ISA"), capped by the
environment variable ONEDNN_MAX_CPU_ISA (DNNL_MAX_CPU_ISA in older releases):

| oneDNN ISA | CPU flag | instruction | how four u8 x s8 products are summed |
|---|---|---|---|
| avx512_core_amx | amx_int8 (Intel Xeon since Sapphire Rapids) | TDPBUSD on tiles | int32: exact |
| avx512_core_vnni | avx512_vnni (Intel Cascade Lake on, AMD Zen 4 on) | VPDPBUSD | int32: exact |
| avx2_vnni | avx_vnni | VPDPBUSD (VEX) | int32: exact |
| avx512_core | avx512bw | VPMADDUBSW, VPMADDWD | pairs in int16, saturating at 32,767 |
| avx2, sse41 | avx2, sse4_1 | VPMADDUBSW, PMADDUBSW | pairs in int16, saturating at 32,767 |

A pair of uint8 x int8 products reaches 2 x 255 x 127 = 64,770, so the last two rows clip
large sums (oneDNN's "Nuances of int8 computations" asks for 7-bit inputs there). Measured with
ONEDNN_VERBOSE=1 on an AMD EPYC with AVX-512 VNNI (TensorFlow 2.21, oneDNN 3.7.3): the default is
`brgemm:avx512_core_vnni`; ONEDNN_MAX_CPU_ISA=AVX512_CORE selects `brgemm:avx512_core` and
AVX2 `gemm_s8u8s32:jit`, both of which clip (docs/decoding.md).

What the table predicts is only a name for the log: `int8_product.available` checks the op's
actual sums on this CPU before any layer uses it.
"""

from __future__ import annotations

import os

from t2t_lite.runtime.cpu import cpu_flags

# oneDNN's ISA names, weakest first, as ONEDNN_MAX_CPU_ISA spells them (case-insensitive).
ISA_ORDER = (
    "sse41", "avx", "avx2", "avx2_vnni", "avx2_vnni_2", "avx512_core", "avx512_core_vnni",
    "avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx", "avx512_core_amx_fp16",
)  # fmt: skip
# The ISA whose int8 kernel each /proc/cpuinfo flag enables, strongest first.
_FLAG_ISA = (
    ("amx_int8", "avx512_core_amx"),
    ("avx512_vnni", "avx512_core_vnni"),
    ("avx_vnni", "avx2_vnni"),
    ("avx512bw", "avx512_core"),
    ("avx2", "avx2"),
    ("sse4_1", "sse41"),
)
EXACT_ISAS = ("avx2_vnni", "avx2_vnni_2", "avx512_core_vnni", "avx512_core_bf16",
              "avx512_core_fp16", "avx512_core_amx", "avx512_core_amx_fp16")  # fmt: skip


def isa(flags: set[str] | None = None, cap: str | None = None) -> str:
    """The oneDNN ISA whose int8 kernel runs here: the strongest one the CPU `flags` enable
    (default: this machine's), capped by `cap` (default: ONEDNN_MAX_CPU_ISA or DNNL_MAX_CPU_ISA;
    "ALL" or unset: no cap). "unknown" where the flags cannot be read (not Linux on x86)."""
    flags = cpu_flags() if flags is None else flags
    found = next((name for flag, name in _FLAG_ISA if flag in flags), "unknown")
    if cap is None:
        cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or ""
    cap = cap.strip().lower()
    if found == "unknown" or cap in ("", "all") or cap not in ISA_ORDER:
        return found
    return ISA_ORDER[min(ISA_ORDER.index(found), ISA_ORDER.index(cap))]


def sums(name: str) -> str:
    """How the kernel of ISA `name` sums u8 x s8 products: "int32" or "int16 pair"."""
    return "int32" if name in EXACT_ISAS else "int16 pair"


def forcible(flags: set[str] | None = None) -> list[str]:
    """ONEDNN_MAX_CPU_ISA values that make oneDNN run another kind of int8 kernel than its best
    on a CPU with `flags` (default: this machine's): the int32-sum kernel below AMX where the
    CPU has both, and a kernel that sums int16 pairs. Tests run the same checks under each."""
    flags = cpu_flags() if flags is None else flags
    best = isa(flags, cap="")
    caps = ["AVX512_CORE_VNNI"] if best == "avx512_core_amx" and "avx512_vnni" in flags else []
    clipping = "avx512_core" if "avx512bw" in flags else "avx2" if "avx2" in flags else None
    if clipping and clipping != best:
        caps.append(clipping.upper())
    return caps
