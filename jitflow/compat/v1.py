"""`tf.compat.v1`: the same namespace as `jitflow` (TF1 programs import either)."""
from __future__ import annotations


def __getattr__(name: str):
    import jitflow   # the package this namespace mirrors (importing it at the top: a cycle)
    try:
        return getattr(jitflow, name)
    except AttributeError:
        raise AttributeError(f"module 'jitflow.compat.v1' has no attribute {name!r}") from None


def __dir__() -> list:
    import jitflow   # see __getattr__
    return sorted(set(dir(jitflow)))
