"""C entry points of the window library (nnlib.py) for the LLVM path: convolutions and pooling.

The LLVM path (llvmgen.py, llvmjit.py) writes LLVM IR without Numba, so it cannot call nnlib's
Numba functions the way generated Numba kernels do. Here each nnlib routine gets a Numba C
callback with one signature per float dtype,

    void f(T *a0, int64 *s0, T *a1, int64 *s1, T *a2, int64 *s2, T *a3, int64 *s3, int64 *p)

(up to four rank-4 C-contiguous arrays, each a data pointer and its 4 sizes, unused ones null,
then the routine's int parameters), which wraps the pointers as arrays and calls the nnlib
routine itself: the same machine code path as the Numba kernels, so the same numbers.

Building one costs what compiling the nnlib routine costs (0.2-5 s the first time on a machine;
Numba caches both on disk, private files only, and later processes load them in milliseconds).
That must not hold up a run: `address(fn, dtype)` returns None until the entry point is built,
and the first request starts building it on a thread of its own (`wait=True` builds it at
once: the executable asks so before it prints a kernel that calls one).
"""
from __future__ import annotations

import os
import sys
import threading
import time

__all__ = ["address", "request", "wait_idle", "ARITY"]

#: arrays per routine (inputs, then outputs), in nnlib's argument order
ARITY = {"conv2d": 3, "conv2d_input_grad": 3, "conv2d_filter_grad": 3, "conv2d_w": 3,
         "conv2d_input_grad_w": 3, "conv2d_filter_grad_w": 3, "depthwise_conv2d": 3,
         "depthwise_input_grad": 3, "depthwise_filter_grad": 3, "max_pool": 2,
         "max_pool_grad": 4, "avg_pool": 2, "avg_pool_grad": 2}
#: int parameters per routine (strides, dilations or window, SAME as 0/1; the conv2d routines
#: then the EXPLICIT padding before the first row and column)
PARAMS = {fn: 7 if fn.startswith("conv2d") else 5 for fn in ARITY}
DTYPES = ("float32", "float64")

_LOCK = threading.Lock()
_DONE = threading.Condition(_LOCK)
_ADDR: dict = {}        # (fn, dtype) -> address, or 0 when it could not be built
_PENDING: list = []     # (fn, dtype) queued or building
_STATE = {"thread": None}
_KEEP: list = []        # the CFunc objects (their code lives as long as they do)


def _source(fn: str) -> str:
    n = ARITY[fn]
    arrays = ", ".join(f"numba.carray(a{i}, (s{i}[0], s{i}[1], s{i}[2], s{i}[3]))"
                       for i in range(n))
    # the int parameters as the Numba kernels pass them (SAME as 0/1)
    params = ", ".join(f"p[{j}]" for j in range(PARAMS[fn]))
    # nnlib's token in the name: Numba's cache keys entries by the function's file and name
    # only, and the entry holds nnlib's code too (a changed nnlib.py must not load an old one)
    from jitflow.backends.numba_cpu.nnlib import CACHE_TOKEN
    return (f"def c_{fn}_{CACHE_TOKEN}(a0, s0, a1, s1, a2, s2, a3, s3, p):\n"
            f"    _nn.{fn}({arrays}, {params})\n")


_FUNCS: dict = {}


def _pyfunc(fn: str):
    """The Python function Numba compiles for routine `fn` (one per routine, both dtypes)."""
    f = _FUNCS.get(fn)
    if f is None:
        import numba

        from jitflow.backends.numba_cpu import nnlib
        env = {"numba": numba, "_nn": nnlib}
        # the file name makes Numba's disk cache work for it (cache entries are keyed by the
        # function's file, qualified name and source line)
        exec(compile(_source(fn), __file__, "exec"), env)
        f = next(v for k, v in env.items() if k.startswith(f"c_{fn}_"))
        f.__module__ = __name__
        _FUNCS[fn] = f
    return f


def _build(fn: str, dtype: str) -> int:
    """Compile (or load from Numba's cache) the C entry point of `fn` for `dtype`."""
    from numba import types
    from numba.core import sigutils

    from jitflow.backends.numba_cpu import cache as _cache
    from jitflow.backends.numba_cpu import kernels
    kernels.guard_numba_caches()   # nnlib's own cache files: private ones only
    t = types.float32 if dtype == "float32" else types.float64
    pt, ps = types.CPointer(t), types.CPointer(types.int64)
    sig = sigutils.normalize_signature(types.void(pt, ps, pt, ps, pt, ps, pt, ps, ps))
    py = _pyfunc(fn)
    try:
        from numba.core.ccallback import CFunc
        cf = CFunc(py, sig, locals={}, options={"nopython": True, "nogil": True})
        if _CACHED:
            try:
                cf.enable_caching()
            except RuntimeError:   # no writable cache location: compiled in memory only
                pass
            else:
                _cache._guard_numba_cache(cf)
        cf.compile()
    except ImportError:   # a Numba without that class: the public decorator, no disk cache
        import numba
        cf = numba.cfunc(sig, nopython=True)(py)
    _KEEP.append(cf)
    return int(cf.address)


# Numba's disk cache needs a function defined in a real file: ours are compiled with this
# file's name, so a copy of this module elsewhere (an exported module) must not cache
_CACHED = __name__ == "jitflow.backends.numba_cpu.nnlib_c"


def address(fn: str, dtype: str, wait: bool = False):
    """The C entry point of nnlib routine `fn` for `dtype`: its address; None while it is
    being built (`request` was made); 0 when it cannot be built."""
    key = (fn, dtype)
    a = _ADDR.get(key)
    if a is not None:
        return a
    if fn not in ARITY or dtype not in DTYPES:
        return 0
    if wait:
        with _LOCK:
            if key not in _PENDING:
                _PENDING.append(key)
            _ensure_thread()
            while key not in _ADDR:
                _DONE.wait()
        return _ADDR[key]
    request(fn, dtype)
    return None


def request(fn: str, dtype: str) -> None:
    """Start building `fn`'s entry point for `dtype` on the library thread (no-op when it is
    built or queued)."""
    key = (fn, dtype)
    with _LOCK:
        if key in _ADDR:
            return
        if key not in _PENDING:
            _PENDING.append(key)
        _ensure_thread()


def _ensure_thread() -> None:
    if _STATE["thread"] is None or not _STATE["thread"].is_alive():
        t = threading.Thread(target=_worker, name="jitflow-nnlib", daemon=True)
        _STATE["thread"] = t
        t.start()


def _worker() -> None:
    from jitflow.backends.numba_cpu import background
    # Numba's typing and lowering beside a busy main thread: see background._worker
    background.short_switches(True)
    try:
        while True:
            with _LOCK:
                if not _PENDING:
                    _STATE["thread"] = None
                    _DONE.notify_all()
                    return
                key = _PENDING[0]
            t0 = time.perf_counter()
            try:
                addr = _build(*key)
            except Exception as e:  # noqa: BLE001  (the kernels that call it go to Numba)
                addr = 0
                why = f"failed: {type(e).__name__}: {e}"
            else:
                why = f"built in {time.perf_counter() - t0:.2f} s"
            from jitflow.runtime import config
            if config.debug_level() >= 1:
                print(f"[jitflow] window routine {key[0]} ({key[1]}) for the LLVM path {why}",
                      file=sys.stderr)
            with _LOCK:
                _ADDR[key] = addr
                _PENDING.remove(key)
                _DONE.notify_all()
    finally:
        background.short_switches(False)


def _after_fork_in_child() -> None:
    """A forked child has no builder thread (and maybe a lock a vanished thread held): new
    locks; what was pending is built again when next asked for."""
    global _LOCK, _DONE
    _LOCK = threading.Lock()
    _DONE = threading.Condition(_LOCK)
    _STATE["thread"] = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _shutdown() -> None:
    """At interpreter exit: build nothing more, and wait for the routine being built (Numba's
    compile must not be running in LLVM while the interpreter tears itself down)."""
    with _LOCK:
        del _PENDING[1:]
        _DONE.wait_for(lambda: not _PENDING)


_hook = getattr(threading, "_register_atexit", None)
if _hook is not None:
    _hook(_shutdown)


def wait_idle(timeout: float | None = None) -> bool:
    """Wait until nothing is being built (tests). True when idle."""
    with _LOCK:
        return _DONE.wait_for(lambda: not _PENDING, timeout)
