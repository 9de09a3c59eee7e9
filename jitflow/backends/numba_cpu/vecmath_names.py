"""What code generators need to know about the math helpers in vecmath.py, without importing
Numba (which vecmath needs): the helpers' names, the JITFLOW_LIBM switch and a token that
changes whenever vecmath.py changes (part of the key of kernels cached on disk). Keeping
Numba out of plan-and-generate lets a run proceed on the references while the compiler thread
imports Numba and compiles (tests/compiler/test_vecmath.py checks the table against
vecmath.HELPERS)."""
from __future__ import annotations

import hashlib
import os
from jitflow.runtime import config

__all__ = ["HELPERS", "use_libm", "cache_token"]

#: (op, dtype name) -> helper name in jitflow.backends.numba_cpu.vecmath
HELPERS = {
    ("exp", "float32"): "exp32", ("exp", "float64"): "exp64",
    ("log", "float32"): "log32", ("log", "float64"): "log64",
    ("tanh", "float32"): "tanh32", ("tanh", "float64"): "tanh64",
    ("sigmoid", "float32"): "sigmoid32", ("sigmoid", "float64"): "sigmoid64",
    ("log1p", "float32"): "log1p32", ("log1p", "float64"): "log1p64",
    ("expm1", "float32"): "expm1_32", ("expm1", "float64"): "expm1_64",
    ("pow", "float32"): "pow32",
}

_TOKEN: list = []


def use_libm() -> bool:
    """True when JITFLOW_LIBM=1: code generators call libm's `math.*` instead."""
    return config.get("JITFLOW_LIBM")


def cache_token() -> str:
    """The first 16 hex digits of vecmath.py's sha256 (what vecmath.CACHE_TOKEN holds)."""
    if not _TOKEN:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vecmath.py")
        with open(path, "rb") as fh:
            _TOKEN.append(hashlib.sha256(fh.read()).hexdigest()[:16])
    return _TOKEN[0]
