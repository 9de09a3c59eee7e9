"""The "numba" backend object (`Session(backend="numba")`, the default): plans become CPU
executables (executable.py). Creating it tunes the allocator and warms up the compiler the
mode uses (LLVM, or Numba in JITFLOW_COMPILE=numba) on the compiler thread while the user's
graph is still being built."""
from __future__ import annotations

import numpy as np

from jitflow.backends.numba_cpu import background as _bg
from jitflow.backends.numba_cpu.executable import Executable
from jitflow.compiler.plan import Plan

__all__ = ["NumbaBackend"]


class NumbaBackend:
    """The CPU backend (`backend="numba"`, the default): plans become executables whose
    segments run as native kernels (the fast path's LLVM code, or Numba kernels)."""

    name = "numba"

    def __init__(self) -> None:
        from jitflow.backends.numba_cpu.memory import tune_allocator
        tune_allocator()
        if not _WARMED:
            _WARMED.append(True)
            # load LLVM (and Numba, in numba mode) on the compiler thread while the user's
            # graph is still being built
            _bg.submit(_warm_up_numba if _bg.mode() == "numba" else _warm_up_llvm)

    def compile(self, plan: Plan) -> Executable:
        return Executable(plan, self)


_WARMED: list = []   # [True] once a warm-up job was submitted in this process


def _warm_up_llvm() -> None:
    from jitflow.backends.numba_cpu import llvmjit
    try:
        llvmjit.warm_up()
    except Exception:  # noqa: BLE001  (the fast path reports its own problems when used)
        pass


def _warm_up_numba() -> None:
    """Numba's first compile in a process pays ~0.7 s of one-time set-up (its registries,
    the math library): pay it on the compiler thread while the user's graph is being built,
    not when the first kernel is needed."""
    import numba

    from jitflow.backends.numba_cpu import kernels, mathlib
    kernels.guard_numba_caches()

    def warm(x):
        return mathlib.tanh(x * np.float32(0.5))
    fn = numba.njit(error_model="numpy", nogil=True)(warm)
    fn.compile((numba.float32,))
