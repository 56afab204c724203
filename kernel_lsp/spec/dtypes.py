"""Spec dtypes and the C types that hold them."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float64": np.dtype(np.float64),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
}
FLOAT_DTYPES = {"float32", "float16", "bfloat16", "float64"}

# C element types -> the spec dtypes they hold. Vector types (float4, half2, ...) hold several
# elements of the scalar type; a `float4*` is declared in the spec as float32 (element count).
C_TYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "__half": "float16",
    "half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "__nv_bfloat162": "bfloat16",
    "nv_bfloat162": "bfloat16",
    "__half2": "float16",
    "half2": "float16",
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "short": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "uint16_t": "uint16",
    "int": "int32",
    "signed": "int32",
    "signed int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long long": "int64",
    "long long int": "int64",
    "long": "int64",
    "int64_t": "int64",
    "unsigned long long": "uint64",
    "unsigned long": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
}
for _v, _s in (("float", "float32"), ("double", "float64"), ("int", "int32"), ("uint", "uint32")):
    for _k in (2, 3, 4):
        C_TYPES[f"{_v}{_k}"] = _s
C_TYPES["char4"] = "int8"
C_TYPES["uchar4"] = "uint8"


def c_type_dtype(c_type: str) -> str | None:
    """The spec dtype a C element/scalar type holds ("const float* __restrict__" -> "float32")."""
    base = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b", " ", c_type)
    base = " ".join(base.replace("*", " ").replace("&", " ").split())
    return C_TYPES.get(base)


def default_tolerance(dtype: str) -> tuple[float, float]:
    """(atol, rtol) used when an output does not give its own."""
    return {
        "float64": (1e-10, 1e-9),
        "float32": (1e-5, 1e-4),
        "float16": (1e-3, 1e-2),
        "bfloat16": (1e-2, 2e-2),
    }.get(dtype, (0.0, 0.0))
