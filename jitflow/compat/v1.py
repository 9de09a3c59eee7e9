"""`tf.compat.v1`: the same namespace as `jitflow` (TF1 programs import either)."""
from __future__ import annotations

import jitflow as _jf


def __getattr__(name: str):
    try:
        return getattr(_jf, name)
    except AttributeError:
        raise AttributeError(f"module 'jitflow.compat.v1' has no attribute {name!r}") from None


def __dir__() -> list:
    return sorted(set(dir(_jf)))
