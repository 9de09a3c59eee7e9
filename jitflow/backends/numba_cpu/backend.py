"""The "numba" backend object (`Session(backend="numba")`, the default): plans become CPU
executables (executable.py). Creating it tunes the allocator and, outside
JITFLOW_COMPILE=sync, warms up tier 1 and Numba on the compiler thread while the user's graph
is still being built."""
from __future__ import annotations

import numpy as np

from jitflow.backends.numba_cpu import background as _bg
from jitflow.backends.numba_cpu.executable import Executable
from jitflow.backends.numba_cpu.kernels import vecmath_table
from jitflow.backends.numba_cpu.tiers import tier1_enabled
from jitflow.compiler.plan import Plan

__all__ = ["NumbaBackend"]


class NumbaBackend:
    """Backend compiling plans to fused Numba kernels (the default)."""

    name = "numba"

    def __init__(self) -> None:
        from jitflow.backends.numba_cpu.memory import tune_allocator
        tune_allocator()
        if _bg.mode() != "sync" and not _WARMED:
            _WARMED.append(True)
            if _bg.mode() == "tier1" or tier1_enabled():
                _bg.submit(_warm_up_tier1)   # first: tier 1 builds on the second run
            if _bg.mode() != "tier1":        # tier1 mode never compiles with Numba
                _bg.submit(_warm_up)

    def compile(self, plan: Plan) -> Executable:
        return Executable(plan, self)


_WARMED: list = []   # [True] once a warm-up job was submitted in this process


_WARM_SOURCE = """
def warm(ins, vs):
    a0 = ins[0]
    n = a0.size
    b1 = np.empty(a0.shape, np.float32)
    f_b1 = b1.reshape(n)
    f_a0 = a0.reshape(n)
    for i in range(n):
        f_b1[i] = _vm.tanh32(f_a0[i] * np.float32(0.5))
    b2 = np.empty((a0.shape[0], a0.shape[1]), np.float32)
    np.dot(b1, a0, b2)
    return (b2, np.float32(b2[0, 0]))
"""


def _warm_up_tier1() -> None:
    from jitflow.backends.numba_cpu import tier1
    try:
        tier1.warm_up()
    except Exception:  # noqa: BLE001  (tier 1 reports its own problems when it is used)
        pass


def _warm_up() -> None:
    """Numba's first compile in a process pays ~0.7 s of one-time set-up (its registries, the
    imports behind np.dot, the math helpers): pay it on the compiler thread while the user's
    graph is being built, not when the first kernel is needed."""
    import numba

    from jitflow.backends.numba_cpu import vecmath
    ns = {"np": np, "_vm": vecmath}
    exec(compile(_WARM_SOURCE, "<jitflow warm-up>", "exec"), ns)
    fn = numba.njit(error_model="numpy", fastmath={"contract"}, nogil=True)(ns["warm"])
    vecmath_table()
    a = np.ones((2, 2), np.float32)
    fn.compile((numba.typeof((a,)), numba.typeof(())))
