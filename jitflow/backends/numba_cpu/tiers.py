"""Tier choice for a kernel whose Numba code is not ready: tier 1 (tier1.py: LLVM IR written
from the kernel IR, compiled in milliseconds) or the references.

Outside JITFLOW_COMPILE=tier1 the first run of such a kernel goes to the references (the first
result comes soonest: nothing to build), the second to tier 1, and later ones to whichever of
the two was faster until the Numba kernel is ready (`call_tier1`).
"""
from __future__ import annotations

import time
import weakref

import numpy as np

from jitflow.backends.base import CodegenError, UseReferences, decode_check_error
from jitflow.backends.numba_cpu import background as _bg
from jitflow.backends.numba_cpu.kernels import STATS, Compiled, fallback
from jitflow.compiler.program import Segment
from jitflow.runtime import config

__all__ = ["tier1_enabled", "tier1_of", "call_tier1"]


def tier1_enabled() -> bool:
    """Whether kernels that are not compiled yet run on tier 1 (JITFLOW_TIER1=0: no)."""
    return config.get("JITFLOW_TIER1")


_T1_WAITING: "weakref.WeakSet" = weakref.WeakSet()   # kernels said to wait for routines


def tier1_of(c: Compiled, seg: Segment):
    """`c`'s tier-1 callable, built on first use; False when tier 1 does not cover it."""
    fn = c.tier1
    if fn is None:
        if _bg.mode() != "tier1" and not tier1_enabled():
            c.tier1 = False
            return False
        from jitflow.backends.numba_cpu import tier1 as _t1
        # a kernel calling window routines waits for their C entry points (built on their own
        # thread, in milliseconds once Numba has them on disk): the references meanwhile
        missing = _t1.missing_libs(c.kernel)
        if missing:
            if config.debug_level() >= 1 and c not in _T1_WAITING:
                _T1_WAITING.add(c)
                config.debug(f"segment of {len(seg.ops)} ops: tier 1 once {', '.join(missing)} "
                       "are built")
            return False
        t0 = time.perf_counter()
        try:
            fn = _t1.build(c.kernel, key=c.cache_source)
        except _t1.NotReady:
            return False   # asked again on the next run
        except _t1.Unsupported as e:
            fn = False
            STATS["tier1_unsupported"] = STATS.get("tier1_unsupported", 0) + 1
            if config.debug_level() >= 1:
                config.debug(f"segment of {len(seg.ops)} ops: no tier 1 ({e.args[0]})")
        except Exception as e:  # noqa: BLE001  (a tier-1 bug: the references run instead)
            if config.strict():
                raise CodegenError(f"tier 1 could not build it: {e}", seg) from e
            fn = False
            fallback(seg, f"tier 1 could not build it: {e}", bug=True)
        else:
            STATS["tier1_builds"] = STATS.get("tier1_builds", 0) + 1
            if config.debug_level() >= 1:
                config.debug(f"segment of {len(seg.ops)} ops runs on tier 1 (built in "
                       f"{(time.perf_counter() - t0) * 1e3:.1f} ms) until its kernel is ready")
        c.tier1 = fn
    return fn


def call_tier1(c: Compiled, ins: list, vars_: list, seg: Segment):
    """Run `c`'s kernel on tier 1 (same convention and errors as `call_kernel`): while its Numba
    kernel is not ready, or when Numba could not build it. `UseReferences` when tier 1 does
    not cover it or could not prepare the run (nothing was written then).

    Outside JITFLOW_COMPILE=tier1 the first run of a kernel goes to the references (the
    first result comes soonest: nothing to build), the second to tier 1, and later ones to
    whichever of the two was faster: tier-1 code is not vectorized and calls libm one
    element at a time, so on large arrays of transcendental functions NumPy is faster, while
    on arithmetic and on small arrays tier 1 is (`UseReferences(c)` asks the caller to time
    the references into `c.ref_cost`)."""
    if _bg.mode() != "tier1" and (c.ref_cost is None or c.t1_cost is not None
                                  and c.t1_cost > c.ref_cost):
        if c.ref_cost is None and c.tier1 is None and tier1_enabled():
            # the window routines' entry points start building now (their own thread)
            from jitflow.backends.numba_cpu import tier1 as _t1
            _t1.missing_libs(c.kernel)
        raise UseReferences(c)
    fn = tier1_of(c, seg)
    if fn is False:
        raise UseReferences()
    args = list(ins)
    for _slot, v in c.consts:
        args.append(v)
    order = c.var_order
    vs = tuple(vars_) if order is None else tuple([vars_[i] for i in order])
    # tier 1 addresses every operand as one aligned C-contiguous block (Numba's kernels also
    # take other layouts): other inputs are copied (the kernel only reads them), other
    # variable buffers (written in place) run through the references
    for k, a in enumerate(args):
        # (numpy scalars: a rank-0 random draw made before the call, for one)
        if type(a) is not np.ndarray or not (a.flags.c_contiguous and a.flags.aligned):
            args[k] = np.array(a, order="C", copy=True)
    for a in vs:
        f = a.flags
        if not (f.c_contiguous and f.aligned and f.writeable):
            raise UseReferences()
    STATS["tier1_runs"] = STATS.get("tier1_runs", 0) + 1
    try:
        t0 = time.perf_counter()
        out = fn(tuple(args), vs)
        c.t1_cost = time.perf_counter() - t0
        return out
    except ValueError as e:
        failed = decode_check_error(e, seg.ops)
        if failed is not None:
            raise failed from None
        if config.strict():
            raise
        raise UseReferences() from None
