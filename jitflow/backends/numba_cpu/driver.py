"""The "numba" backend: a plan becomes fused native kernels, driven by a thin Python layer.

Pipeline per run signature: the plan's ops are split into *segments* (maximal runs of ops with
a code generator) and *reference steps* (ops run through their NumPy reference: ops without a
generator, random ops, data-dependent ops). When every op has a generator the plan is one
segment, and a run is one native call. Each segment is lowered (fuse.py) for the shape class
of what flows in (dtype, rank, which dims are 1), generated (codegen.py), loaded through the
cache (cache.py) and called. A new size of a `None` dimension reuses the same machine code.

Semantics follow the interpreter (the oracle): variables are written in place in plan order
(reads see the value from before any later write, as the interpreter orders them); all shape
checks run before a kernel writes anything; a run that needs an uninitialized variable, or
that writes variables while also running reference steps, goes through paths that leave the
session's variables untouched on failure.

Generated module layout (also what `export_source` returns; the module is self-contained,
importing only math, numpy, numba):

    def kernel(ins, vs) -> tuple
      ins: tuple of C-contiguous arrays: the run's feeds in feed-list order, then constant
           arrays (`layout["inputs"]` names each: ("feed", tensor name) or ("const", op name))
      vs:  tuple of variable buffers, updated in place (`layout["variables"]`: op names)
      returns one entry per `layout["results"]` (tensor names): arrays, scalars for rank 0.
"""
from __future__ import annotations

import os
import re
import sys
import time
import warnings
import weakref
from typing import Optional

import numpy as np

from jitflow.backends.numba_cpu import background as _bg
from jitflow.backends.numba_cpu import cache as _cache
from jitflow.backends.numba_cpu.emit import ERROR_PREFIX, LIBRARY, generate_function
from jitflow.compiler import ir as _ir
from jitflow.compiler import lower as _lower
from jitflow.core import fold as _rs
from jitflow.compiler import partition as _partition
from jitflow.compiler.plan import Plan

__all__ = ["NumbaBackend", "Executable", "export_source", "STATS", "debug_level"]

STATS = _cache.STATS
_WARNED_OPS: set = set()
_MAX_EXACT = 256   # exact input shapes remembered per executable (each maps to a kernel)
# no cfunc wrapper: nothing takes a kernel's address as a C function, and building one costs
# Numba lowering and LLVM time for every kernel
_DECORATOR = ('@numba.njit(cache={cache}, error_model="numpy", fastmath={"contract"}, '
              'nogil=True, no_cfunc_wrapper=True)')
_TAG = re.compile(r"  # [^\n]*$", re.M)
_GUARDED: list = []   # [True] once the vecmath helpers' Numba caches are guarded


def threads() -> int:
    """How many threads large kernels may use (JITFLOW_THREADS; default: Numba's thread count,
    which is the machine's cores unless NUMBA_NUM_THREADS says otherwise). 1 turns the
    parallel kernel variants off."""
    for name in ("JITFLOW_THREADS", "NUMBA_NUM_THREADS"):
        v = os.environ.get(name, "").strip()
        if v:
            try:
                return max(1, int(v))
            except ValueError:
                pass
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parallel_min() -> int:
    """Elements of the largest operand from which a kernel runs its parallel variant
    (JITFLOW_PARALLEL_MIN; thread wake-ups cost more than they save below it)."""
    try:
        return max(1, int(os.environ.get("JITFLOW_PARALLEL_MIN", "") or _PARALLEL_MIN))
    except ValueError:
        return _PARALLEL_MIN


_PARALLEL_MIN = 1 << 20
_PAR_DECORATOR = _DECORATOR[:-1] + ", parallel=True)"
# GNU OpenMP's idle threads spin 300,000 rounds (milliseconds) after each parallel region by
# default: a training step that runs a parallel update every few milliseconds kept the second
# core of a 2-core machine busy all the time (a LeNet step at 1.99 cores instead of 1.14).
# 10,000 rounds still catch regions that follow closely: an Adam step on 1.1e6 floats took
# 0.19-0.23 ms with it, 0.19-0.20 ms with the default and 0.25-0.38 ms with sleeping threads.
_GOMP_SPINCOUNT = 10_000
_PAR_STATE: dict = {}   # "ok": False once a parallel kernel could not be built or run here


def debug_level() -> int:
    try:
        return int(os.environ.get("JITFLOW_DEBUG", "0") or 0)
    except ValueError:
        return 0


def _debug(msg: str) -> None:
    print(f"[jitflow] {msg}", file=sys.stderr)


def _vecmath_table() -> tuple:
    """(helper table {(fn, dtype): name}, import line) for the helpers of vecmath.py.
    Imports no Numba (see vecmath_names.py)."""
    from jitflow.backends.numba_cpu import vecmath_names as vn
    if vn.use_libm():
        return {}, ""
    names = {key: f"_vm.{name}" for key, name in vn.HELPERS.items()}
    return names, (f"# vecmath {vn.cache_token()}\n"
                   "from jitflow.backends.numba_cpu import vecmath as _vm\n")


def _guard_vecmath_caches() -> None:
    """Let Numba read only private cache files for the math helpers (once per process)."""
    if not _GUARDED:
        _GUARDED.append(True)
        from jitflow.backends.numba_cpu import nnlib, vecmath
        for fn in list(getattr(vecmath, "FUNCS", {}).values()) + list(nnlib.CACHED):
            _cache._guard_numba_cache(fn)


def module_source(fn_source: str, vm_import: str) -> str:
    """A self-contained module around one generated function named `kernel`."""
    return ("import math\n\nimport numba\nimport numpy as np\n" + vm_import + "\n\n"
            + _DECORATOR + "\n" + fn_source)


_NNLIB_TOKEN: list = []


def _nnlib_import_line() -> str:
    """The import of nnlib for a kernel that calls it, with a token that changes whenever
    nnlib.py changes (kernels cached on disk are keyed by their text). Imports no Numba."""
    if not _NNLIB_TOKEN:
        import hashlib
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nnlib.py")
        with open(path, "rb") as fh:
            _NNLIB_TOKEN.append(hashlib.sha256(fh.read()).hexdigest()[:16])
    return (f"# nnlib {_NNLIB_TOKEN[0]}\n"
            f"from jitflow.backends.numba_cpu import nnlib as {LIBRARY}\n")


# -- segments -----------------------------------------------------------------------------------
class _Segment:
    """A run of ops compiled together; compiled lazily per input shape class."""

    __slots__ = ("ops", "in_tensors", "out_tensors", "var_ops", "compiled", "last_key",
                 "first", "exact", "__weakref__")

    def __init__(self, ops, in_tensors, out_tensors, var_ops) -> None:
        self.ops = ops
        self.in_tensors = in_tensors
        self.out_tensors = out_tensors
        self.var_ops = var_ops
        self.compiled: dict = {}   # class key -> _Compiled
        self.last_key = None
        self.first = True
        # exact shapes of the operands -> their class's kernel (the driver's per-run lookup;
        # the operands' dtypes are the graph's, so shapes decide the class)
        self.exact: dict = {}


class _Compiled:
    __slots__ = ("fn", "kernel", "consts", "tagged", "source", "out_conv", "conv_items", "names",
                 "var_order", "par_source", "par",
                 "called", "broken", "ready", "error", "from_disk", "cache_source",
                 "tier1", "t1_cost", "ref_cost", "__weakref__")

    def __init__(self, fn, kernel, consts, tagged, source, names) -> None:
        self.fn = fn
        self.kernel = kernel
        self.consts = consts
        self.tagged = tagged
        self.source = source
        self.names = names
        self.called = False
        self.broken = False   # Numba could not compile or run it: this class uses references
        self.ready = True     # False while the background compiler works on it
        self.error = None     # why a background compile failed (raised under JITFLOW_STRICT)
        self.from_disk = False
        self.par_source = None   # the parallel variant's module text, when it has one
        self.par = None          # its _Compiled once requested
        self.tier1 = None   # the tier-1 callable while not ready (False: tier 1 cannot)
        # seconds of the last run on tier 1 and on the references, while not ready: the
        # faster of the two takes the runs until the Numba kernel is ready
        self.t1_cost = None
        self.ref_cost = None
        # rank-0 results come back as Python scalars: give them their numpy type
        conv = []
        for r in kernel.results:
            if isinstance(r, _ir.Lit) or r.rank == 0:
                dt = np.dtype("bool" if r.dtype == "bool" else r.dtype)
                conv.append(dt.type)
            else:
                conv.append(None)
        self.out_conv = conv
        self.conv_items = [(i, f) for i, f in enumerate(conv) if f is not None]


def _classes_key(arrays) -> tuple:
    return tuple((a.dtype.name, tuple(d == 1 for d in a.shape)) for a in arrays)


def _describe_change(names, old, new) -> str:
    for n, a, b in zip(names, old, new):
        if a == b:
            continue
        if a[0] != b[0]:
            return f"{n} changed dtype {a[0]} -> {b[0]}"
        if len(a[1]) != len(b[1]):
            return f"{n} changed rank {len(a[1])} -> {len(b[1])}"
        return f"{n} changed which dims are 1 {a[1]} -> {b[1]}"
    return "new input classes"


def generate_segment(seg: _Segment, in_arrays, var_arrays, reason: str) -> _Compiled:
    """Lower and generate one segment for the classes of the given arrays (no Numba: the
    result's `fn` is None until `load_compiled`)."""
    cls_in = [(t, _ir.VClass(a.dtype.name, tuple(d == 1 for d in a.shape)))
              for t, a in zip(seg.in_tensors, in_arrays)]
    var_cls = {v: _ir.class_of(a) for v, a in zip(seg.var_ops, var_arrays)}
    kernel, consts = _lower.lower(seg.ops, cls_in, seg.out_tensors, var_cls)
    # the kernel's variable order is the order of first use; map to seg.var_ops order
    order = [seg.var_ops.index(v.var_op) for v in kernel.variables]
    if _bg.mode() == "tier1":
        # tier 1 alone: no Numba source (tier 1 works from the kernel IR)
        if debug_level() >= 1:
            _debug(f"lowered {len(seg.ops)} ops for tier 1: {reason}")
        c = _Compiled(None, kernel, [(slot, _contig(op.attrs["value"])) for slot, op in consts],
                      "# JITFLOW_COMPILE=tier1: no Numba source (tier 1 runs the kernel IR)\n",
                      "", {"inputs": [("feed", t.name) for t in seg.in_tensors]
                               + [("const", op.name) for _, op in consts],
                               "variables": [seg.var_ops[i].name for i in order],
                               "results": [t.name for t in seg.out_tensors]})
        c.cache_source = None
        c.var_order = None if order == list(range(len(seg.var_ops))) else order
        return c
    vm_names, vm_import = _vecmath_table()
    tagged = generate_function(kernel, "kernel", vm_names)
    body = _TAG.sub("", tagged)
    if f"{LIBRARY}." in body:   # convolutions and pooling call the window-op library
        vm_import += _nnlib_import_line()
    source = module_source(body, vm_import)
    try:
        # generated code is valid by construction; this proves it before Numba sees it
        compile(source, "<jitflow kernel>", "exec")
    except SyntaxError as e:
        line = tagged.splitlines()[e.lineno - 1 - source.count("\n", 0, source.index("def "))] \
            if e.lineno else ""
        raise CodegenError(f"generated source does not parse ({e.msg}): {line.strip()}",
                           seg) from None
    lvl = debug_level()
    if lvl >= 1:
        _debug(f"compile {len(seg.ops)} ops: {reason}")
    if lvl >= 4:
        _debug("generated source:\n" + tagged)
    const_vals = [(slot, _contig(op.attrs["value"])) for slot, op in consts]
    names = {"inputs": [("feed", t.name) for t in seg.in_tensors]
             + [("const", op.name) for _, op in consts],
             "variables": [seg.var_ops[i].name for i in order],
             "results": [t.name for t in seg.out_tensors]}
    c = _Compiled(None, kernel, const_vals, tagged, module_source(tagged, vm_import), names)
    c.cache_source = source
    # None: the kernel takes the variables in the segment's order (the common case)
    c.var_order = None if order == list(range(len(seg.var_ops))) else order
    if threads() > 1 and _PAR_STATE.get("ok", True):
        par = _TAG.sub("", generate_function(kernel, "kernel", vm_names, parallel=True))
        if "numba.prange" in par:
            c.par_source = (module_source(par, vm_import)
                            .replace(_DECORATOR, _PAR_DECORATOR))
    return c


def _parallel_of(c: "_Compiled") -> "_Compiled":
    """The parallel variant of `c` (not loaded yet)."""
    p = _Compiled(None, c.kernel, c.consts, c.tagged, c.source, c.names)
    p.cache_source = c.par_source
    p.var_order = c.var_order
    return p


def _prepare_parallel() -> None:
    """Before the first parallel kernel: a threading layer that several Python threads may
    call at once (OpenMP or TBB; Numba's own workqueue layer is not), unless the user chose
    one, and how long idle OpenMP threads spin before they sleep (`_GOMP_SPINCOUNT`, unless
    OMP_WAIT_POLICY or GOMP_SPINCOUNT says)."""
    if "prepared" not in _PAR_STATE:
        import numba
        if not os.environ.get("NUMBA_THREADING_LAYER"):
            numba.config.THREADING_LAYER = "threadsafe"
        if not any(os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")):
            # GNU OpenMP reads this when Numba's OpenMP layer loads it, just after this
            os.environ["GOMP_SPINCOUNT"] = str(_GOMP_SPINCOUNT)
        _PAR_STATE["prepared"] = True


def _use_threads() -> None:
    import numba
    want = min(threads(), numba.config.NUMBA_NUM_THREADS)
    if numba.get_num_threads() != want:
        numba.set_num_threads(want)


def _parallel_failed(p: "_Compiled", err: Exception) -> None:
    """A parallel variant that cannot be built or run: the serial kernel is used; without a
    thread-safe threading layer no more parallel variants are made in this process."""
    p.broken = True
    if "threading layer" in str(err).lower():
        _PAR_STATE["ok"] = False


def load_compiled(c: _Compiled) -> None:
    """Give `c` its dispatcher: from the in-memory cache, the disk cache, or a new module."""
    _guard_vecmath_caches()
    mod = _cache.load_module(c.cache_source)
    c.fn = mod.kernel
    c.from_disk = mod.from_disk


def compile_segment(seg: _Segment, in_arrays, var_arrays, reason: str) -> _Compiled:
    """Lower, generate and load one segment for the classes of the given arrays."""
    c = generate_segment(seg, in_arrays, var_arrays, reason)
    load_compiled(c)
    return c


def _call(c: _Compiled, ins: list, vars_: list, seg: _Segment):
    if c.consts:
        args = list(ins)
        for _slot, v in c.consts:
            args.append(v)
    else:
        args = ins
    order = c.var_order
    vs = tuple(vars_) if order is None else tuple([vars_[i] for i in order])
    fn = c.fn
    counting = not c.called
    if counting:
        if c.tier1 and debug_level() >= 1:
            _debug(f"segment of {len(seg.ops)} ops: tier 1 -> Numba kernel")
        n0 = len(fn.overloads)
        h0 = _cache_hits(fn)
    try:
        out = fn(tuple(args), vs)
    except ValueError as e:
        msg = str(e)
        if msg.startswith(ERROR_PREFIX):
            _, idx, what = msg.split(":", 2)
            raise _CheckFailed(seg.ops[int(idx)], what) from None
        if not counting:
            raise
        out = _first_call_failed(fn, args, vs, seg, e)
    except Exception as e:  # noqa: BLE001  (unpickling a damaged cache entry raises anything)
        if not counting:
            raise
        out = _first_call_failed(fn, args, vs, seg, e)
    if counting:
        c.called = True
        _count_build(fn, h0, n0)
    return out


def tier1_enabled() -> bool:
    """Whether kernels that are not compiled yet run on tier 1 (JITFLOW_TIER1=0: no)."""
    return os.environ.get("JITFLOW_TIER1", "1").strip() not in ("0", "")


_T1_WAITING: "weakref.WeakSet" = weakref.WeakSet()   # kernels said to wait for routines


def _tier1_of(c: _Compiled, seg: _Segment):
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
            if debug_level() >= 1 and c not in _T1_WAITING:
                _T1_WAITING.add(c)
                _debug(f"segment of {len(seg.ops)} ops: tier 1 once {', '.join(missing)} "
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
            if debug_level() >= 1:
                _debug(f"segment of {len(seg.ops)} ops: no tier 1 ({e.args[0]})")
        except Exception as e:  # noqa: BLE001  (a tier-1 bug: the references run instead)
            if strict():
                raise CodegenError(f"tier 1 could not build it: {e}", seg) from e
            fn = False
            _fallback_warning(seg, f"tier 1 could not build it: {e}", bug=True)
        else:
            STATS["tier1_builds"] = STATS.get("tier1_builds", 0) + 1
            if debug_level() >= 1:
                _debug(f"segment of {len(seg.ops)} ops runs on tier 1 (built in "
                       f"{(time.perf_counter() - t0) * 1e3:.1f} ms) until its kernel is ready")
        c.tier1 = fn
    return fn


def _call_tier1(c: _Compiled, ins: list, vars_: list, seg: _Segment):
    """Run `c`'s kernel on tier 1 (same convention and errors as `_call`): while its Numba
    kernel is not ready, or when Numba could not build it. `_UseReferences` when tier 1 does
    not cover it or could not prepare the run (nothing was written then).

    Outside JITFLOW_COMPILE=tier1 the first run of a kernel goes to the references (the
    first result comes soonest: nothing to build), the second to tier 1, and later ones to
    whichever of the two was faster: tier-1 code is not vectorized and calls libm one
    element at a time, so on large arrays of transcendental functions NumPy is faster, while
    on arithmetic and on small arrays tier 1 is (`_UseReferences(c)` asks the caller to time
    the references into `c.ref_cost`)."""
    if _bg.mode() != "tier1" and (c.ref_cost is None or c.t1_cost is not None
                                  and c.t1_cost > c.ref_cost):
        if c.ref_cost is None and c.tier1 is None and tier1_enabled():
            # the window routines' entry points start building now (their own thread)
            from jitflow.backends.numba_cpu import tier1 as _t1
            _t1.missing_libs(c.kernel)
        raise _UseReferences(c)
    fn = _tier1_of(c, seg)
    if fn is False:
        raise _UseReferences()
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
            raise _UseReferences()
    STATS["tier1_runs"] = STATS.get("tier1_runs", 0) + 1
    try:
        t0 = time.perf_counter()
        out = fn(tuple(args), vs)
        c.t1_cost = time.perf_counter() - t0
        return out
    except ValueError as e:
        msg = str(e)
        if msg.startswith(ERROR_PREFIX):
            _, idx, what = msg.split(":", 2)
            raise _CheckFailed(seg.ops[int(idx)], what) from None
        if strict():
            raise
        raise _UseReferences() from None


def _run_steps(ops, env, ctx) -> None:
    """Run `ops` through their references."""
    from jitflow.runtime.reference import run_reference_step
    for op in ops:
        run_reference_step(op, env, ctx)


def _deferred_host_ops(plan: Plan, fed: set) -> set:
    """Host ops (summaries, string formatting) that no other op of the plan waits for: they
    run after the kernels on their results instead of splitting the plan. Not stateful ones,
    not ones that reach session state (control flow, TensorArrays: `needs_ctx`), not ones a
    control dependency orders, and not ones reading a variable the plan writes (they would see
    its value after the run, not where the plan reads it)."""
    consumers: dict = {}
    ordered: set = set()
    written: set = set()
    for op in plan.ops:
        for t in op.inputs:
            consumers.setdefault(t, []).append(op)
        ordered.update(op._control_inputs)
        if op.type in _WRITES:
            written.add(op.inputs[0].op)
    post: set = set()
    for op in reversed(plan.ops):
        d = op.op_def
        if (d.kind == "host" and not d.stateful and not d.needs_ctx and op not in ordered
                and not any(t in fed for t in op.outputs)
                and all(c in post for t in op.outputs for c in consumers.get(t, ()))
                and not any(t.op.type == "VariableV2" and t.op in written for t in op.inputs)):
            post.add(op)
    return post


_REFERENCES = "references"   # seg.compiled value: this class runs through the references
_WRITES = ("Assign", "AssignAdd", "AssignSub")


def _has_value_checks(kernel) -> bool:
    """Whether `kernel` checks element values (which can fail for new data of a shape that
    passed before): index ranges and integer divisors."""
    return any(isinstance(c, (_ir.RangeCheck, _ir.NonZeroCheck))
               for c in list(kernel.checks) + list(kernel.stmts))


def _signature(kinds: tuple) -> tuple:
    """Numba's types for kernel arguments described as ((dtype, ndim, writeable), ...) x 2:
    typeof of an empty stand-in array with the same dtype, rank and flags."""
    from numba import typeof
    out = []
    for group in kinds:
        arrays = []
        for dtype, ndim, writeable in group:
            a = np.empty((0,) * ndim, dtype)
            a.flags.writeable = writeable
            arrays.append(a)
        out.append(typeof(tuple(arrays)))
    return tuple(out)


def _compile_job(c: Optional["_Compiled"], kinds: tuple, seg: Optional["_Segment"]) -> None:
    """Background load or compile of one kernel (runs on the compiler thread); nothing when
    the kernel or its segment is no longer used."""
    if c is None or seg is None:
        STATS["background_skipped"] = STATS.get("background_skipped", 0) + 1
        return
    t0 = time.perf_counter()
    try:
        load_compiled(c)
        sig = _signature(kinds)
        # a module already on disk most likely has its machine code there too: load it here
        if (sig not in c.fn.overloads and not c.from_disk and _bg.mode() == "background"
                and _disk_cached(c.fn)):
            from jitflow.backends.numba_cpu import compile_worker
            compile_worker.compile_in_helper(c.cache_source, kinds)   # then a cache hit here
        h0, n0 = _cache_hits(c.fn), len(c.fn.overloads)
        c.fn.compile(sig)   # nothing to do when an identical kernel's job built it already
        _count_build(c.fn, h0, n0)
        if debug_level() >= 1:
            _debug(f"kernel of {len(seg.ops)} ops ready after {time.perf_counter() - t0:.2f} s "
                   "in the background: runs switch to native code")
    except Exception as e:  # noqa: BLE001
        text = str(e).strip()
        first = text.splitlines()[-1] if text else type(e).__name__
        c.error = f"Numba could not compile it: {first[:200]}"
        c.broken = True
        if not strict():
            _fallback_warning(seg, c.error, bug=True)
    finally:
        c.ready = True


def _undraw(drawn) -> None:
    """Put random generators back to the states saved as (generator, state) pairs."""
    for g, st in drawn:
        g.bit_generator.state = st


def _count_build(fn, hits_before: int, overloads_before: int) -> None:
    """Count what giving `fn` a new overload was: a Numba cache hit or a compile."""
    if _cache_hits(fn) > hits_before:
        STATS["numba_cache_hits"] += 1
    elif len(fn.overloads) > overloads_before:
        STATS["compiles"] += 1


def _disk_cached(fn) -> bool:
    """Whether dispatcher `fn` reads and writes Numba's disk cache."""
    cache = getattr(fn, "_cache", None)
    return cache is not None and type(cache).__name__ != "NullCache"


def _raise_background_error(c) -> None:
    if isinstance(c, _Compiled) and c.error is not None and strict():
        raise CodegenError(c.error, None)


class _UseReferences(Exception):
    """The segment has no working kernel for these input classes."""


class _CheckFailed(Exception):
    """A kernel's prologue found operands it cannot handle; nothing was written."""


class CodegenError(Exception):
    """Generated code that does not parse, or that Numba cannot compile or run: a compiler bug.

    In production the segment falls back to its references for that shape class (one warning
    naming its ops); with JITFLOW_STRICT=1 (the fuzzer, the tests) it is raised instead."""


def strict() -> bool:
    return os.environ.get("JITFLOW_STRICT", "") not in ("", "0")


def _fallback_warning(seg: "_Segment", why: str, bug: bool) -> None:
    """Warn once per reason that a segment runs through its references."""
    ops = ", ".join(f"{op.name} ({op.type})" for op in seg.ops[:4])
    more = f" and {len(seg.ops) - 4} more" if len(seg.ops) > 4 else ""
    what = "a code generation bug" if bug else "no kernel for this case"
    msg = (f"jitflow: {what} ({why}); ops {ops}{more} run through their NumPy references "
           "for these input shapes")
    STATS["reference_fallbacks"] = STATS.get("reference_fallbacks", 0) + 1
    key = (why, bug)
    if key not in _WARNED_OPS:
        _WARNED_OPS.add(key)
        warnings.warn(msg, RuntimeWarning, stacklevel=5)
    if debug_level() >= 1:
        _debug(msg)


def _first_call_failed(fn, args, vs, seg, err):
    """The first call of a kernel raised: retry without Numba's (maybe damaged) cache entry;
    if it still fails, the segment runs through the references (raises Unsupported)."""
    from numba.core.errors import NumbaError
    if not isinstance(err, NumbaError) and _drop_numba_cache(fn):
        try:
            return fn(tuple(args), vs)
        except Exception as e:  # noqa: BLE001
            err = e
    text = str(err).strip()
    first = text.splitlines()[-1] if text else type(err).__name__
    raise CodegenError(f"Numba could not compile or run it: {first[:200]}", seg) from None


def _drop_numba_cache(fn) -> bool:
    """Delete a dispatcher's unreadable Numba cache files and stop it using the cache."""
    from numba.core.caching import NullCache
    cache = getattr(fn, "_cache", None)
    impl = getattr(cache, "_cache_file", None)
    if impl is None or isinstance(cache, NullCache):
        return False
    base = impl._index_name[:-len(".nbi")]
    try:
        for f in os.listdir(impl._cache_path):
            if f.startswith(base + "."):
                os.unlink(os.path.join(impl._cache_path, f))
    except OSError:
        pass
    fn._cache = NullCache()
    return True


def _host_steps(plan: Plan, pre: set, compiles) -> tuple:
    """(host ops, quiet ops): the ops of `plan` that run on the host: those that do not
    compile (`compiles(op)` false), and the ops read only by host ops that are constants,
    variables, random draws or computed from host values alone (a string op's defaults, an
    epoch counter, an input producer's shuffle: no kernel just to hand a few values to the
    host). The quiet ones are host work by position, not a missing code generator (no
    warning)."""
    host = {op for op in plan.ops if op not in pre and not compiles(op)}
    if not host:
        return host, set()
    fed = set(plan.feeds)
    readers: dict = {}
    for op in plan.ops:
        for t in op.inputs:
            readers.setdefault(t.op, []).append(op)

    def feeds_host(op) -> bool:
        rs = readers.get(op)
        return bool(rs) and all(r in host for r in rs) and (
            op.type in ("Const", "VariableV2") or op.op_def.kind == "random"
            or all(t in fed or t.op in host for t in op.inputs))

    changed = True
    while changed:
        changed = False
        for op in plan.ops:
            if op not in host and op not in pre and feeds_host(op):
                host.add(op)
                changed = True
    # ops without a code generator that feed only host ops are host work too (no warning)
    return host, {op for op in host if feeds_host(op)}


def _host_first(plan: Plan, pre: set, host: set) -> list:
    """`plan.ops` with the host ops that need nothing computed natively moved to the front
    (an input pipeline's get_next, a string parse), so they do not cut the native ops that
    follow them into several kernels; still a topological order."""
    if not host:
        return list(plan.ops)
    fed = set(plan.feeds)
    early: set = set()
    for op in plan.ops:
        if op in host and all(t in fed or t.op in early or t.op in pre for t in op.inputs) \
                and all(c in early for c in op._control_inputs):
            early.add(op)
    # host ops whose results nothing but no-ops wait for (an optimizer's in-place sparse
    # update) go last, with those no-ops, so the native ops around them form one kernel
    fetched = {t.op for t in plan.fetches}
    waiting: dict = {}
    for op in plan.ops:
        for t in op.inputs:
            waiting.setdefault(t.op, set()).add(op)
        for c in op._control_inputs:
            waiting.setdefault(c, set()).add(op)
    late: set = set()
    for op in reversed(plan.ops):
        if op in fetched or op in early:
            continue
        after = waiting.get(op, ())
        if op.type == "NoOp" and all(w in late for w in after):
            if any(c in late or c in host for c in op._control_inputs):
                late.add(op)
        elif op in host and all(w.type == "NoOp" for w in after):
            late.add(op)
    # a no-op seen before the host op it waits for: second pass
    for op in reversed(plan.ops):
        if op.type == "NoOp" and op not in late and op not in fetched and all(
                w in late for w in waiting.get(op, ())) and any(
                c in late for c in op._control_inputs):
            late.add(op)
    head = [op for op in plan.ops if op in early]
    tail = [op for op in plan.ops if op in late]
    return head + [op for op in plan.ops if op not in early and op not in late] + tail


def _cache_hits(fn) -> int:
    stats = getattr(fn, "stats", None)
    hits = getattr(stats, "cache_hits", None)
    return sum(hits.values()) if hits else 0


# -- the executable ------------------------------------------------------------------------------
class Executable:
    """Runs one plan: a single native call when it can, else a driver around native segments."""

    def __init__(self, plan: Plan, backend: "NumbaBackend", whole: bool = False) -> None:
        self.plan = plan
        self.backend = backend
        self._interp = None
        self.debug = debug_level()
        self._fast = None
        self._shape_memo: dict = {}   # shapes of tf.shape(h) for hoisted random ops
        self._lean = None    # the body runner of control-flow sub-plans (run_body)
        self.whole = whole   # never split runs of compilable ops (export: one module)
        self.pre, self.steps = self._split(plan)
        self._setup()
        if self.debug >= 3:
            _debug("plan:\n" + plan.as_text())

    def _setup(self) -> None:
        plan = self.plan
        self.single = (len(self.steps) == 1 and isinstance(self.steps[0], _Segment))
        vars_ = []
        written = set()
        for s in self.steps:
            if isinstance(s, _Segment):
                for v in s.var_ops:
                    if v not in vars_:
                        vars_.append(v)
                for op in s.ops:
                    if op.type in ("Assign", "AssignAdd", "AssignSub"):
                        written.add(op.inputs[0].op)
        self.var_ops = vars_
        self.all_native = all(isinstance(s, _Segment) for s in self.steps)
        self._in_place_keys: set = set()   # input shapes whose runs write variables in place
        # the warm path of split plans (see `_Chain`): one per input shapes, made after a run
        # in which every step was a native kernel; False when the plan cannot have one
        self._chains = {} if (self.all_native and not self.single and not self.pre
                              and not self.post and self.debug < 2) else False
        self.extra_vars = [v for v in plan.variables if v not in vars_]
        self.written = [v for v in vars_ if v in written]
        self.exact: dict = {}
        feeds = list(plan.feeds)
        pre_out = [op.outputs[0] for op in self.pre]
        post_out = {t for op in self.post for t in op.outputs}
        # where each fetch comes from: 0 = feed value, 1 = variable (read after the run),
        # 2 = kernel result (single mode only), 3 = the driver's values, 4 = a deferred host op
        self.fetch_src = []
        seg = self.steps[0] if self.single else None
        for t in plan.fetches:
            if t in feeds:
                self.fetch_src.append((0, feeds.index(t)))
            elif t in post_out:
                self.fetch_src.append((4, t))
            elif t in pre_out:
                self.fetch_src.append((0, len(feeds) + pre_out.index(t)))
            elif t.op.type == "VariableV2":
                self.fetch_src.append((1, t.op))
            elif seg is not None:
                self.fetch_src.append((2, seg.out_tensors.index(t)))
            else:
                self.fetch_src.append((3, t))
        if seg is not None:
            src = []
            for t in seg.in_tensors:
                if t in feeds:
                    src.append(feeds.index(t))
                else:
                    src.append(len(feeds) + pre_out.index(t))
            self.in_pos = src

    # -- splitting ----------------------------------------------------------------------------
    def _compiles(self, op) -> bool:
        """Whether `op` goes into a native segment (else it is a reference step)."""
        return _lower.supported(op)

    def _split(self, plan: Plan) -> tuple:
        fed = set(plan.feeds)
        pre = []
        for op in plan.ops:
            # random ops whose inputs are known before the call are drawn first, with the
            # session's RNG, so they do not split the plan
            if (op.op_def.kind == "random" and len(op.outputs) == 1
                    and all(t in fed or t.op.type == "Const" or t.op.type == "Shape"
                            and _rs.computable(t.op.inputs[0], fed) for t in op.inputs)
                    and op.outputs[0] not in fed):
                pre.append(op)
        pre_set = set(pre)
        post = _deferred_host_ops(plan, fed)
        steps: list = []
        cur: list = []
        on_host, quiet = _host_steps(plan, pre_set | post, self._compiles)
        for op in _host_first(plan, pre_set | post, on_host):
            if op in pre_set or op in post:
                continue
            if op not in on_host:
                cur.append(op)
            else:
                # host ops (control flow, TensorArrays, input pipelines, strings) and the ops
                # only they read are host work by design, and random ops always draw with the
                # session's NumPy generators: no warning
                if (op.op_def.kind != "random" and not _lower.host_only(op)
                        and not _lower.supported(op) and op not in quiet
                        and op.type not in _WARNED_OPS):
                    _WARNED_OPS.add(op.type)
                    warnings.warn(f"jitflow: op type {op.type} has no code generator; it runs "
                                  "through its NumPy reference", RuntimeWarning, stacklevel=5)
                if cur:
                    steps.append(cur)
                    cur = []
                steps.append(op)
        if cur:
            steps.append(cur)
        # a run of no-ops alone (a train op after host updates) needs no kernel
        steps = [st for st in steps
                 if not (isinstance(st, list) and all(op.type == "NoOp" for op in st))]
        flat: list = []
        for s in steps:
            # long runs become several kernels, cut where repeated structure repeats
            flat.extend(_partition.split(s) if isinstance(s, list) and not self.whole
                        else [s])
        steps = flat
        # the step owning each tensor (repeated constants are owned by their first chunk)
        produced_at: dict = {op.outputs[0]: -1 for op in pre}
        for i, s in enumerate(steps):
            for op in (s if isinstance(s, list) else [s]):
                for t in op.outputs:
                    if t not in fed:
                        produced_at.setdefault(t, i)
        local_sets = [set(s) if isinstance(s, list) else {s} for s in steps]
        needed_after: dict = {}  # tensor -> last step index needing it (len(steps): fetched)
        for i, s in enumerate(steps):
            for op in (s if isinstance(s, list) else [s]):
                for t in op.inputs:
                    if t.op in local_sets[i] and t not in fed:
                        continue
                    needed_after[t] = max(needed_after.get(t, -1), i)
        for t in plan.fetches:
            needed_after[t] = len(steps)
        for op in post:
            for t in op.inputs:
                needed_after[t] = len(steps)
        self.post = [op for op in plan.ops if op in post]
        out = []
        for i, s in enumerate(steps):
            if not isinstance(s, list):
                out.append(s)
                continue
            ins, outs, var_ops = [], [], []
            local = local_sets[i]
            for op in s:
                for t in op.inputs:
                    src = t.op
                    if src.type == "VariableV2" and t not in fed:
                        if src not in var_ops:
                            var_ops.append(src)
                        continue
                    if (t in fed or src not in local) and t not in ins:
                        ins.append(t)
                if op.type == "VariableV2" and op not in var_ops:
                    var_ops.append(op)
            for op in s:
                for t in op.outputs:
                    if (t not in fed and produced_at.get(t) == i and needed_after.get(t, -1) > i
                            and t.op.type != "VariableV2"):
                        outs.append(t)
            out.append(_Segment(s, ins, outs, var_ops))
        return pre, out

    # -- running ------------------------------------------------------------------------------
    def __call__(self, feed_values, store):
        state = store.values
        try:
            bufs = [state[v] for v in self.var_ops]
            for v in self.extra_vars:
                state[v]
        except KeyError:
            return self._run_interpreter(feed_values, store)
        # the hoisted random ops draw before the kernel runs: if the run then goes to the
        # interpreter instead, it must draw the same numbers (each op has its own generator)
        drawn = [(g, g.bit_generator.state) for g in map(store.rng_for, self.pre)] \
            if self.pre else ()
        try:
            if self.single:
                return self._run_single(feed_values, bufs, state, store)
            return self._run_driver(feed_values, store)
        except _UseReferences as e:
            # the single segment has no kernel for these input classes yet, or none at all
            STATS["reference_segments"] = STATS.get("reference_segments", 0) + 1
            _undraw(drawn)
            return self._timed_references(e, self._run_interpreter, feed_values, store)
        except _CheckFailed as e:
            # Shapes the kernel was not generated for (or invalid ones): the interpreter
            # gives the answer, or the error TF1 gives, naming the op.
            _undraw(drawn)
            op, what = e.args
            if self.debug >= 1:
                _debug(f"{op.name} ({op.type}): {what}; running this step op by op")
            return self._run_interpreter(feed_values, store)

    @staticmethod
    def _timed_references(e: Exception, run, *args):
        """`run(*args)`; when `e` is a `_UseReferences` naming a kernel, its time goes into
        that kernel's `ref_cost` (see `_call_tier1`)."""
        c = e.args[0] if isinstance(e, _UseReferences) and e.args else None
        if c is None:
            return run(*args)
        t0 = time.perf_counter()
        out = run(*args)
        c.ref_cost = time.perf_counter() - t0
        return out

    def _run_interpreter(self, feed_values, store):
        if self._interp is None:
            from jitflow.backends.interpreter import Interpreter
            self._interp = Interpreter().compile(self.plan)
        out = self._interp(feed_values, store)
        held = {id(a) for a in store.values.values()}
        return [np.array(r, copy=True) if id(r) in held else r for r in out]

    def _run_single(self, feed_values, bufs, state, store):
        seg = self.steps[0]
        if self.pre:
            feed_values = list(feed_values) + self._draw_with_feeds(feed_values, store)
        ins = [feed_values[i] for i in self.in_pos]
        for k, a in enumerate(ins):
            # (a rank-0 random draw made before the call is a numpy scalar: the kernel reads
            # a 0-d array)
            if type(a) is not np.ndarray or not a.flags.c_contiguous:
                ins[k] = _contig(a)
        key = tuple([a.shape for a in ins] + [b.shape for b in bufs])
        c = self.exact.get(key)
        if c is None:
            c = self._compiled_for(seg, ins, bufs)
            if len(self.exact) >= _MAX_EXACT:
                self.exact.clear()   # many distinct sizes: refilling is one dict lookup each
            self.exact[key] = c
        if c is _REFERENCES:
            raise _UseReferences()
        if c.broken or not c.ready:
            _raise_background_error(c)
            out = _call_tier1(c, ins, bufs, seg)   # else _UseReferences
        elif self.debug >= 2:
            t0 = time.perf_counter()
            out = self._call_fastest(c, ins, bufs, seg)
            _debug(f"run {len(seg.ops)} ops in one native call: "
                   f"{(time.perf_counter() - t0) * 1e6:.1f} us")
        else:
            out = self._call_fastest(c, ins, bufs, seg)
        conv = c.out_conv
        post = self._run_post(feed_values, seg, _convert(c, out), store) if self.post \
            else None
        results = []
        for kind, i in self.fetch_src:
            if kind == 2:
                f = conv[i]
                results.append(out[i] if f is None else f(out[i]))
            elif kind == 0:
                results.append(feed_values[i])
            elif kind == 4:
                results.append(post[i])
            else:
                results.append(np.array(state[i], copy=True))
        return results

    def _run_post(self, feed_values, seg, outs, store) -> dict:
        """Run the deferred host ops (summaries, string formatting) on the kernel's results."""
        from jitflow.runtime.reference import RunContext, run_reference_step
        env = dict(zip(self.plan.feeds, feed_values))
        for op, v in zip(self.pre, feed_values[len(self.plan.feeds):]):
            env[op.outputs[0]] = v
        env.update(zip(seg.out_tensors, outs))
        ctx = RunContext(store)
        with np.errstate(all="ignore"):
            for op in self.post:
                run_reference_step(op, env, ctx)
        return env

    def _draw_with_feeds(self, feed_values, store) -> list:
        """Values of the hoisted random ops, drawn with the store's RNGs."""
        from jitflow.runtime.reference import RunContext, run_op_reference
        ctx = RunContext(store)
        env = dict(zip(self.plan.feeds, feed_values))
        vals = []
        for op in self.pre:
            args = [env[t] if t in env else t.op.attrs["value"] if t.op.type == "Const"
                    else self._runtime_shape(t, env, store) for t in op.inputs]
            vals.append(run_op_reference(op, args, ctx)[0])
        return vals

    def _runtime_shape(self, t, env, store) -> np.ndarray:
        """The value of a `tf.shape(h)` feeding a hoisted random op, from feed shapes (and
        variable shapes); remembered per shapes of what flows in."""
        state = store.values
        key = (t, tuple([np.shape(env[f]) for f in self.plan.feeds]),
               tuple([np.shape(state[v]) if v in state else None
                      for v in self.plan.variables]))
        dims = self._shape_memo.get(key)
        if dims is None:
            dims = _rs.shape_of(t.op.inputs[0], env, state)
            if dims is None:  # operands that do not agree: the interpreter reports it
                raise _CheckFailed(t.op, "shapes of the operands do not agree")
            if len(self._shape_memo) >= _MAX_EXACT:
                self._shape_memo.clear()
            self._shape_memo[key] = dims
        return np.array(dims, t.dtype.as_numpy_dtype)

    def _exact_kernel(self, step, ins, bufs):
        """The kernel for these exact operand shapes, remembered per step (up to _MAX_EXACT
        shapes; then the memory starts over)."""
        key = tuple([a.shape for a in ins] + [b.shape for b in bufs])
        c = step.exact.get(key)
        if c is None:
            c = self._compiled_for(step, ins, bufs)
            if len(step.exact) >= _MAX_EXACT:
                step.exact.clear()
            step.exact[key] = c
        return c

    def _compiled_for(self, seg: _Segment, ins, bufs):
        """The kernel of `seg` for the classes of `ins`/`bufs`, or `_REFERENCES` when that
        class has none (the segment's ops then run through their references)."""
        ckey = _classes_key(list(ins) + list(bufs))
        c = seg.compiled.get(ckey)
        if c is None:
            names = [t.name for t in seg.in_tensors] + [v.name for v in seg.var_ops]
            reason = ("new fetch set" if seg.last_key is None
                      else _describe_change(names, seg.last_key, ckey))
            later = _bg.mode() != "sync"
            try:
                c = (generate_segment if later else compile_segment)(seg, ins, bufs, reason)
            except _lower.Unsupported as e:
                _fallback_warning(seg, str(e.args[0]), bug=False)
                c = _REFERENCES
            except CodegenError as e:
                if strict():
                    raise
                _fallback_warning(seg, str(e.args[0]), bug=True)
                c = _REFERENCES
            if isinstance(c, _Compiled) and later:
                if _bg.mode() == "tier1":
                    c.ready = False   # never compiled by Numba: runs on tier 1 or references
                else:
                    self._compile_later(c, seg, ins, bufs)
            seg.compiled[ckey] = c
            seg.last_key = ckey
        return c

    def _compile_later(self, c: _Compiled, seg: _Segment, ins, bufs) -> None:
        """Have the compiler thread load `c` (from memory, the disk cache, or by compiling it)
        for the argument types of `ins`/`bufs`; runs use tier 1 (or, where tier 1 does not
        cover the kernel, the references) until it is ready."""
        args = list(ins) + [v for _, v in c.consts]
        order = c.var_order
        vs = list(bufs) if order is None else [bufs[i] for i in order]
        # what Numba types the arguments by (the arrays themselves are not kept)
        kinds = ([(a.dtype, a.ndim, a.flags.writeable) for a in args],
                 [(a.dtype, a.ndim, a.flags.writeable) for a in vs])
        c.ready = False
        if self.debug >= 1:
            _debug(f"compiling {len(seg.ops)} ops in the background; runs use tier 1 (or the "
                   "references) until it is ready")
        # the job holds only weak references: a kernel whose session is gone by the time the
        # compiler gets to it (a sweep over many small graphs) is not compiled at all
        ref_c, ref_seg = weakref.ref(c), weakref.ref(seg)
        _bg.submit(lambda: _compile_job(ref_c(), kinds, ref_seg()))

    def _call_checked(self, c: _Compiled, ins, bufs, seg: _Segment):
        """`_call`, turning a kernel Numba cannot compile or run into `_UseReferences`."""
        try:
            return _call(c, ins, bufs, seg)
        except CodegenError as e:
            if strict():
                raise
            _fallback_warning(seg, str(e.args[0]), bug=True)
            c.broken = True
            raise _UseReferences() from None

    def _run_driver(self, feed_values, store):
        from jitflow.runtime.reference import RunContext, run_reference_step
        t0 = time.perf_counter() if self.debug >= 2 else 0.0
        plan = self.plan
        env = dict(zip(plan.feeds, feed_values))
        for op, v in zip(self.pre, self._draw_with_feeds(feed_values, store)):
            env[op.outputs[0]] = v
        ctx = RunContext(store)
        # A run writes its variables in place when this input shape has run before with every
        # step native and no check that could still fail after the first write (see
        # `_note_in_place`); otherwise the kernels write copies, committed at the end, so a
        # failing run changes nothing.
        shape_key = None
        if self.all_native and (self.written or self._chains is not False):
            state = store.values
            shape_key = tuple([np.shape(a) for a in feed_values]
                              + [np.shape(state[v]) for v in self.var_ops])
        in_place = shape_key is not None and shape_key in self._in_place_keys
        # a chain runs only where the general path would write in place (or writes nothing)
        record = None
        if self._chains is not False and shape_key is not None and (in_place
                                                                   or not self.written):
            chain = self._chains.get(shape_key)
            if chain is not None:
                res = chain.run(feed_values, store.values)
                if res is not None:
                    return res
            record = []   # (again, when the chain could not take this run)
        if not in_place:
            for v in self.written:
                ctx.pending[v] = np.array(store.values[v], copy=True)
            STATS["variable_copies"] = STATS.get("variable_copies", 0) + len(self.written)
        native = []   # the kernel of each segment, when every step ran one
        with np.errstate(all="ignore"):
            for step in self.steps:
                if isinstance(step, _Segment):
                    # (the arrays earlier kernels returned need no conversion: tested inline,
                    # a call per input costs more than the check on a step's ~200 inputs)
                    ins = [a if type(a) is np.ndarray and a.flags.c_contiguous else _contig(a)
                           for a in map(env.__getitem__, step.in_tensors)]
                    bufs = []
                    for v in step.var_ops:
                        b = ctx.read_var(v)
                        if not (isinstance(b, np.ndarray) and b.flags.c_contiguous
                                and b.flags.writeable):
                            b = np.array(b, copy=True)
                            ctx.pending[v] = b
                        bufs.append(b)
                    c = self._exact_kernel(step, ins, bufs)
                    try:
                        if c is _REFERENCES:
                            raise _UseReferences()
                        if c.ready and not c.broken:
                            out = self._call_fastest(c, ins, bufs, step)
                        else:
                            _raise_background_error(c)
                            out = _call_tier1(c, ins, bufs, step)
                            native = None   # in place and chains: Numba kernels only
                    except _UseReferences as e:
                        if in_place:   # cannot happen: every kernel of this shape is ready
                            raise RuntimeError("jitflow: a kernel of an in-place run "
                                               "became unusable") from None
                        STATS["reference_segments"] = STATS.get("reference_segments", 0) + 1
                        self._timed_references(e, _run_steps, step.ops, env, ctx)
                        native = None
                        continue
                    if native is not None:
                        native.append((step, c))
                    if record is not None:
                        record.append((c, ins, bufs, out))
                    for t, v in zip(step.out_tensors, _convert(c, out)):
                        if t not in env:
                            env[t] = v
                    continue
                run_reference_step(step, env, ctx)
            for op in self.post:
                run_reference_step(op, env, ctx)
            results = []
            for t in plan.fetches:
                if t.op.type == "VariableV2" and t not in env:
                    results.append(np.array(ctx.read_var(t.op), copy=True))
                else:
                    results.append(env[t])
        ctx.commit()
        if shape_key is not None and not in_place and native:
            self._note_in_place(shape_key, native)
        if record is not None and native:
            chain = _Chain.make(self, feed_values, store.values, record)
            if chain is not None:
                if len(self._chains) >= _MAX_EXACT:
                    self._chains.clear()
                self._chains[shape_key] = chain
        if self.debug >= 2:
            n_native = sum(isinstance(s, _Segment) for s in self.steps)
            _debug(f"run {len(self.steps)} steps ({n_native} native): "
                   f"{(time.perf_counter() - t0) * 1e6:.1f} us")
        return results

    def _parallel(self, c: "_Compiled", seg: _Segment, ins, bufs):
        """The kernel to call: `c`'s parallel variant when the operands are large (at least
        `parallel_min()` elements) and it is ready, else `c`."""
        if c.par_source is None or not _PAR_STATE.get("ok", True):
            return c
        n = parallel_min()
        if not any(a.size >= n for a in ins) and not any(b.size >= n for b in bufs):
            return c
        p = c.par
        if p is None:
            p = c.par = _parallel_of(c)
            _prepare_parallel()
            if _bg.mode() == "sync":
                try:
                    load_compiled(p)
                except Exception as e:  # noqa: BLE001
                    _parallel_failed(p, e)
            else:
                self._compile_later(p, seg, ins, bufs)
        if p.broken or not p.ready or p.fn is None:
            return c
        _use_threads()
        return p

    def _call_fastest(self, c: "_Compiled", ins, bufs, seg: _Segment):
        """Call `c`, or its parallel variant for large operands (falling back to `c` if the
        variant fails to build or run)."""
        p = self._parallel(c, seg, ins, bufs)
        if p is not c:
            try:
                return _call(p, ins, bufs, seg)
            except _CheckFailed:
                raise
            except Exception as e:  # noqa: BLE001
                if strict():
                    raise
                _parallel_failed(p, e)
        return self._call_checked(c, ins, bufs, seg)

    def _note_in_place(self, key: tuple, native: list) -> None:
        """After a successful run where every step was a native kernel: later runs with the
        same input shapes may write variables in place when no kernel from the first writing
        one on has a check that depends on values (integer divisors, gather indices), since
        the shape checks passed for these shapes already."""
        writing = False
        for seg, c in native:
            writing = writing or any(op.type in _WRITES for op in seg.ops)
            if writing and _has_value_checks(c.kernel):
                return
        if len(self._in_place_keys) >= _MAX_EXACT:
            self._in_place_keys.clear()
        self._in_place_keys.add(key)

    # -- control-flow bodies ------------------------------------------------------------------
    def run_body(self, feed_values, store, ctx):
        """One run of a loop body or cond branch (called once per iteration): the driver's
        steps with values in a list of slots rather than a dict, each warm segment found by
        its input shapes, and host ops (TensorArray reads and writes, nested control flow)
        run in the enclosing run's context `ctx`. Plans that draw random numbers before the
        call or write variables take the general path."""
        lean = self._lean
        if lean is None:
            lean = self._lean = self._build_lean()
        if lean is False:
            return self(feed_values, store)
        steps, n_slots, fetches = lean
        vals = list(feed_values)
        vals.extend([None] * (n_slots - len(vals)))
        for step in steps:
            if step[0]:
                self._lean_segment(step, vals, ctx)
                continue
            _, op, args, outs = step
            a = [vals[i] if i >= 0 else (op.inputs[~i].op if op.op_def.needs_ctx
                                         else ctx.read_var(op.inputs[~i].op))
                 for i in args]
            try:
                if op.type in _TRUSTED_HOST:
                    # TensorArray reads and writes: outputs already of the declared types
                    res = (op.op_def.ref(op, *a),)
                elif op.op_def.kind == "host":   # no NumPy math of their own
                    res = _run_op_reference(op, a, ctx)
                else:
                    with np.errstate(all="ignore"):
                        res = _run_op_reference(op, a, ctx)
            except (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError) as e:
                from jitflow.core import errors
                raise errors.InvalidArgumentError(
                    None, op, f"{e}\n\t [[node {op.name} ({op.type})]]") from e
            for j, v in zip(outs, res):
                vals[j] = v
        return [vals[i] if i >= 0 else np.array(ctx.read_var(v), copy=True)
                for i, v in fetches]

    def _lean_segment(self, step, vals: list, ctx) -> None:
        _, seg, in_idx, out_idx = step
        ins = [vals[i] for i in in_idx]
        for k, a in enumerate(ins):
            if type(a) is not np.ndarray or not a.flags.c_contiguous:
                ins[k] = _contig(a)
        bufs = []
        for v in seg.var_ops:
            b = ctx.read_var(v)
            if not (isinstance(b, np.ndarray) and b.flags.c_contiguous and b.flags.writeable):
                b = np.array(b, copy=True)
            bufs.append(b)
        c = self._exact_kernel(seg, ins, bufs)
        try:
            if c is _REFERENCES:
                raise _UseReferences()
            if c.ready and not c.broken:
                out = self._call_fastest(c, ins, bufs, seg)
            else:
                _raise_background_error(c)
                out = _call_tier1(c, ins, bufs, seg)
        except (_UseReferences, _CheckFailed) as e:
            # no kernel for these inputs (or shapes it cannot take): the references give the
            # values, or the error TF1 gives, naming the op
            env = dict(zip(seg.in_tensors, ins))
            with np.errstate(all="ignore"):
                self._timed_references(e, _run_steps, seg.ops, env, ctx)
            for j, t in zip(out_idx, seg.out_tensors):
                vals[j] = env[t]
            return
        conv = c.out_conv
        for j, v, f in zip(out_idx, out, conv):
            vals[j] = v if f is None else f(v)

    def _build_lean(self):
        """(steps, number of value slots, fetch sources) for run_body, or False."""
        plan = self.plan
        if self.pre or self.written or self.debug >= 2:
            return False
        slot = {t: i for i, t in enumerate(plan.feeds)}
        steps = []
        for s in list(self.steps) + list(self.post):   # deferred host ops run last
            if isinstance(s, _Segment):
                if any(t not in slot for t in s.in_tensors):
                    return False
                ins = [slot[t] for t in s.in_tensors]
                outs = []
                for t in s.out_tensors:
                    slot.setdefault(t, len(slot))
                    outs.append(slot[t])
                steps.append((True, s, ins, outs))
                continue
            op = s
            if op.type == "VariableV2":
                continue
            args = []
            for k, t in enumerate(op.inputs):
                if t in slot:
                    args.append(slot[t])
                elif t.op.type == "VariableV2":
                    args.append(~k)
                else:
                    return False
            outs = []
            for t in op.outputs:
                slot.setdefault(t, len(slot))
                outs.append(slot[t])
            steps.append((False, op, args, outs))
        fetches = []
        for t in plan.fetches:
            if t in slot:
                fetches.append((slot[t], None))
            elif t.op.type == "VariableV2":
                fetches.append((-1, t.op))
            else:
                return False
        return steps, len(slot), fetches

    # -- the warm path ------------------------------------------------------------------------
    def fast_runner(self, spec, store, ordinary, positional: bool = False, miss=None):
        """A generated function running `spec` with one native call (see `_FastPath`), or None.

        `ordinary(args)` is the session's general path, taken for anything unusual. With
        `positional` the function is `make_callable`'s (positional feed values, closed-store
        check); without, `Session.run`'s (called with the feed_dict's values, already checked
        for a closed session). With `miss`, `Session.run`'s taking the feed_dict itself, which
        returns `miss` when the dict's keys are not this signature's feed tensors.
        """
        if not self.single or self.pre or self.post or self.debug >= 2:
            return None
        if self._fast is None:
            self._fast = _FastPath(self, spec, store, ordinary)
        return self._fast.function(positional, miss)

    # -- introspection ------------------------------------------------------------------------
    def sources(self, feed_values, store) -> list:
        """(segment, compiled) for each native segment: in single mode compiled for these
        feeds if needed (nothing runs); otherwise the segments compiled by earlier runs."""
        out = []
        state = store.values
        if self.single:
            seg = self.steps[0]
            env = dict(zip(self.plan.feeds, feed_values))
            ins = [_contig(env[t]) if t in env else _placeholder_value(t)
                   for t in seg.in_tensors]
            bufs = [state.get(v) for v in self.var_ops]
            if any(b is None for b in bufs):
                bufs = [b if b is not None else _placeholder_var(v)
                        for b, v in zip(bufs, self.var_ops)]
            c = self._compiled_for(seg, ins, bufs)
            if isinstance(c, _Compiled) and not c.broken:
                out.append((seg, c))
            return out
        for s in self.steps:
            if isinstance(s, _Segment):
                for c in s.compiled.values():
                    if isinstance(c, _Compiled) and not c.broken:
                        out.append((s, c))
        return out


class _Chain:
    """The warm path of a split plan for one set of input shapes: each segment's native entry
    point called in plan order on a flat list of values (the feeds, then every kernel's
    results), with none of the general driver's per-step work.

    Made from a run of the general path in which every step was a native kernel and
    variables were written in place (or none were): it records where each kernel input came
    from and which variable buffers the kernels took. A later run with the same input shapes
    takes the chain when the session still holds those buffers and the feeds the kernels read
    are arrays of the recorded kinds; anything else returns None and the general path runs.
    Kernels whose operands are large enough for a parallel variant keep the general path.
    """

    __slots__ = ("segs", "feed_checks", "var_checks", "fetches")

    @classmethod
    def make(cls, ex: "Executable", feed_values, state, record) -> Optional["_Chain"]:
        if len(record) != sum(isinstance(s, _Segment) for s in ex.steps):
            return None
        plan = ex.plan
        slot: dict = {t: i for i, t in enumerate(plan.feeds)}
        made: list = [None] * len(feed_values)   # slot -> (kernel output converted to 0-d)
        vals = list(feed_values)
        segs = []
        used_feeds = set()
        many = threads() > 1 and parallel_min()
        for (c, ins, bufs, out), step in zip(record, [s for s in ex.steps
                                                      if isinstance(s, _Segment)]):
            if c.par_source is not None and many and (
                    any(a.size >= many for a in ins) or any(b.size >= many for b in bufs)):
                return None
            if type(out) is not tuple or len(out) != len(step.out_tensors):
                return None
            in_slots = []
            for t, a in zip(step.in_tensors, ins):
                i = slot.get(t)
                if i is None:
                    return None
                v = vals[i]
                if made[i] is not None:   # a rank-0 result: the 0-d array the kernel took
                    if not (type(a) is np.ndarray and a.ndim == 0 and a.dtype == v.dtype):
                        return None
                elif a is not v:
                    return None
                if i < len(feed_values):
                    used_feeds.add(i)
                in_slots.append(i)
            order = c.var_order
            vs = tuple(bufs) if order is None else tuple([bufs[i] for i in order])
            ct = tuple([v for _, v in c.consts])
            args = tuple(ins) + ct
            ep = _entry_point(c.fn, (args, vs))
            if ep is c.fn:
                return None
            conv = dict(c.conv_items)
            base = len(vals)
            for k, (t, r) in enumerate(zip(step.out_tensors, out)):
                f = conv.get(k)
                vals.append(r if f is None else np.asarray(f(r)))
                made.append(f)
                slot.setdefault(t, base + k)
            segs.append((ep, tuple(in_slots), ct, vs, tuple(conv.items()),
                         step.ops))
        fetches = []
        for kind, x in ex.fetch_src:
            if kind == 0:
                fetches.append((0, x))
            elif kind == 1:
                fetches.append((1, x))
            elif kind == 3 and x in slot:
                i = slot[x]
                fetches.append((2 if made[i] is not None else 0, i))
            else:
                return None
        self = cls()
        self.segs = segs
        self.feed_checks = tuple((i, feed_values[i].dtype, feed_values[i].flags.writeable)
                                 for i in sorted(used_feeds))
        if not all(type(feed_values[i]) is np.ndarray for i, _, _ in self.feed_checks):
            return None
        self.var_checks = tuple((v, state[v]) for v in ex.var_ops)
        self.fetches = fetches
        return self

    def run(self, feed_values, state):
        """The run's results, or None when this run must take the general path."""
        for v, b in self.var_checks:
            if state.get(v) is not b:
                return None
        for i, dt, w in self.feed_checks:
            a = feed_values[i]
            if (type(a) is not np.ndarray or a.dtype != dt or not a.flags.c_contiguous
                    or a.flags.writeable != w or not a.flags.aligned):
                return None
        vals = list(feed_values)
        with np.errstate(all="ignore"):
            for ep, in_slots, ct, vs, conv, ops in self.segs:
                try:
                    out = ep(tuple([vals[i] for i in in_slots]) + ct, vs)
                except ValueError as e:
                    msg = str(e)
                    if msg.startswith(ERROR_PREFIX):
                        _, idx, what = msg.split(":", 2)
                        raise _CheckFailed(ops[int(idx)], what) from None
                    raise
                if conv:
                    out = list(out)
                    for k, f in conv:
                        out[k] = np.asarray(f(out[k]))
                vals.extend(out)
        res = []
        for kind, x in self.fetches:
            if kind == 0:
                res.append(vals[x])
            elif kind == 2:
                res.append(vals[x][()])
            else:
                res.append(np.array(state[x], copy=True))
        return res


def _describe(self, feed_values, store) -> str:
    """Readable view of what a run executes: generated sources and reference steps."""
    if self.single:
        found = self.sources(feed_values, store)
        if found:
            return found[0][1].tagged
        return "# no kernel for these input shapes: the plan runs through its references\n" \
            + self.plan.as_text()
    parts = []
    for s in self.steps:
        if isinstance(s, _Segment):
            kernels = [c for c in s.compiled.values() if isinstance(c, _Compiled)]
            if kernels:
                for c in kernels:
                    parts.append(c.tagged)
            else:
                parts.append(f"# native segment of {len(s.ops)} ops (compiled at first run): "
                             + ", ".join(op.name for op in s.ops))
        elif s.type != "VariableV2":
            parts.append(f"# reference step: {s.name} ({s.type})")
    return "\n".join(parts)


Executable.describe = _describe


# -- the warm path: generated runners ----------------------------------------------------------
_SCALAR_FEEDS = {"f": (float, int), "i": (int,), "u": (int,), "b": (bool,), "c": (complex, float)}
_MAX_FAST_ENTRIES = 64


class _FastPath:
    """The warm path of one run signature: a generated Python function per caller kind.

    The function inlines the feed checks (fast paths for Python scalars and for C-contiguous
    arrays of the right dtype and shape; anything else through the spec's own checks), finds
    the entry for the shapes of the fed `None` dimensions, checks the variable buffers are the
    ones the entry was made with, calls the kernel's native entry point (no dispatcher typing:
    the arguments have exactly the types the entry was made for) and rebuilds the fetch
    structure. Anything else -- a first call, a new shape, uninitialized or replaced variables,
    a kernel check failing, a value needing conversion to a non-contiguous array -- goes
    through `ordinary(args)`, the session's general path, after which an entry is made.
    """

    def __init__(self, ex: Executable, spec, store, ordinary) -> None:
        self.ex = ex
        self.spec = spec
        self.store = store
        self.state = store.values
        self.ordinary = ordinary
        self.entries: dict = {}
        self.checks = spec.checks
        self.pos = [spec.feed_pos[i] for i in ex.in_pos]
        # kernel results the fetches use, in fetch order (each entry holds their conversions)
        self.conv_idx = [i for kind, i in ex.fetch_src if kind == 2]

    # -- entries ----------------------------------------------------------------------------
    def promote(self, key, args):
        """Run `args` the ordinary way, then make the entry for `key` if the kernel is ready."""
        result = self.ordinary(args)
        entry = self._entry(args)
        if entry is not None:
            if len(self.entries) >= _MAX_FAST_ENTRIES:
                self.entries.clear()
            self.entries[key] = entry
        return result

    def _entry(self, args):
        ex, state = self.ex, self.state
        if not ex.single or ex.pre:
            return None
        vals = [c(a) for c, a in zip(self.checks, args)]
        ins = [vals[i] for i in self.pos]
        bufs = [state.get(v) for v in ex.var_ops]
        if any(b is None for b in bufs) or any(v not in state for v in ex.extra_vars):
            return None
        if not all(type(a) is np.ndarray and a.flags.carray for a in ins + bufs):
            return None
        c = ex.exact.get(tuple([a.shape for a in ins] + [b.shape for b in bufs]))
        if not isinstance(c, _Compiled) or not c.called or c.broken:
            return None
        order = c.var_order
        vs = tuple(bufs) if order is None else tuple([bufs[i] for i in order])
        ct = tuple([v for _, v in c.consts])
        ep = _entry_point(c.fn, (tuple(ins) + ct, vs))
        return (ep, ct, vs, *[_scalar_maker(c.out_conv[i]) for i in self.conv_idx], *bufs)

    # -- the generated function ---------------------------------------------------------------
    def function(self, positional: bool = False, miss=None):
        """The runner for `make_callable` (with `positional`) or for `Session.run` (given the
        feed values, or with `miss` the feed dict)."""
        spec, ex = self.spec, self.ex
        mapper = spec.mapper
        if len(ex.fetch_src) != len(mapper.tensors) or len(spec.fetch_pos) != len(mapper.tensors):
            return None
        names: dict = {"_ndarray": np.ndarray, "_asarray": np.asarray, "_state": self.state,
                       "_state_get": self.state.get, "_entries_get": self.entries.get,
                       "_promote": self.promote, "_slow": self.ordinary, "_prefix": ERROR_PREFIX,
                       "_var_value": _var_value}
        expr = mapper.expression(spec.plan.graph, spec.fetches, names)
        if expr is None:
            names["_build"] = mapper.build
            expr = "_build([" + ", ".join(f"r{j}" for j in range(len(mapper.tensors))) + "])"
        n = len(spec.feeds)
        vs = [f"v{i}" for i in range(n)]
        args = "args" if positional else "(" + "".join(v + ", " for v in vs) + ")"
        lines = []
        if positional:
            names["_store"] = self.store
            lines += ["def _runner(*args, **kwargs):",
                      "    if _store.closed:",
                      "        raise RuntimeError(\"Attempted to use a closed Session.\")",
                      f"    if len(args) != {n}:",
                      f"        raise TypeError(f\"callable expects {n} feed values, got "
                      "{len(args)}\")"]
            if n:
                lines.append("    " + "".join(v + ", " for v in vs) + "= args")
        elif miss is not None:
            names["_miss"] = miss
            lines += ["def _runner(feed):", f"    if len(feed) != {n}:", "        return _miss"]
            for i, t in enumerate(spec.feeds):
                names[f"_T{i}"] = t
                lines.append(f"    v{i} = feed.get(_T{i}, _miss)")
            if n:
                lines += ["    if " + " or ".join(f"{v} is _miss" for v in vs) + ":",
                          "        return _miss"]
        else:
            lines.append("def _runner(" + ", ".join(vs) + "):")
        used = set(self.pos)
        for i, t in enumerate(spec.feeds):
            lines += _feed_lines(i, t, spec.checks[i], names, args, i in used)
        if threads() > 1:
            # large operands take the ordinary path, which picks the parallel kernel variant
            names["_PARMIN"] = parallel_min()
            for k in sorted(used):
                if spec.feeds[k].shape.as_tuple() != ():
                    lines += [f"    if x{k}.size >= _PARMIN:", f"        return _slow({args})"]
        key = _key_source(spec.feeds, self.pos)
        convs = [f"cv{m}" for m in range(len(self.conv_idx))]
        bufs = [f"b{k}" for k in range(len(ex.var_ops))]
        lines += [f"    key = {key}",
                  "    e = _entries_get(key)",
                  "    if e is None:",
                  f"        return _promote(key, {args})",
                  "    " + ", ".join(["ep", "ct", "vs"] + convs + bufs) + " = e"]
        if bufs:
            for k, v in enumerate(ex.var_ops):
                names[f"_V{k}"] = v
            cond = " or ".join(f"_state_get(_V{k}) is not b{k}" for k in range(len(bufs)))
            lines += [f"    if {cond}:", f"        return _promote(key, {args})"]
        for k, v in enumerate(ex.extra_vars):
            names[f"_X{k}"] = v
            lines += [f"    if _X{k} not in _state:", f"        return _slow({args})"]
        ins = "(" + "".join(f"x{k}, " for k in self.pos) + ")"
        lines += ["    try:",
                  f"        out = ep({ins} + ct, vs)",
                  "    except ValueError as err:",
                  "        if str(err).startswith(_prefix):",
                  f"            return _slow({args})",
                  "        raise"]
        m = 0
        for j, ((kind, i), fp) in enumerate(zip(ex.fetch_src, spec.fetch_pos)):
            if kind == 2:
                lines.append(f"    r{j} = out[{i}] if cv{m} is None else cv{m} * out[{i}]")
                m += 1
            if fp is not None or kind == 0:
                k = fp if fp is not None else spec.feed_pos[i]
                lines.append(f"    r{j} = x{k}[()] if x{k}.ndim == 0 else x{k}")
            elif kind == 1:
                names[f"_W{j}"] = i
                lines.append(f"    r{j} = _var_value(_state[_W{j}])")
        lines.append(f"    return {expr}")
        source = "\n".join(lines) + "\n"
        exec(compile(source, f"<jitflow runner {len(spec.plan.ops)} ops>", "exec"), names)
        fn = names["_runner"]
        fn.source = source
        return fn


def _feed_lines(i: int, t, check, names: dict, args: str, to_kernel: bool) -> list:
    """Source lines turning feed `v<i>` for tensor `t` into `x<i>` as `check` does, with
    fast paths for Python scalars and for arrays that need no conversion."""
    dtype = np.dtype(t.dtype.as_numpy_dtype)
    dims = t.shape.as_tuple()
    names[f"_D{i}"] = dtype
    names[f"_CHK{i}"] = check
    lines = []
    scalars = _SCALAR_FEEDS.get(dtype.kind)
    cond = "if"
    if scalars and (dims is None or dims == ()):
        names[f"_F{i}"] = frozenset(scalars + (dtype.type,))
        lines += [f"    if type(v{i}) in _F{i}:", f"        x{i} = _asarray(v{i}, _D{i})"]
        cond = "elif"
    if dims is None:
        shape_ok = ""
    elif all(d is not None for d in dims):
        names[f"_SH{i}"] = tuple(dims)
        shape_ok = f" and v{i}.shape == _SH{i}"
    elif all(d is None for d in dims):
        shape_ok = f" and v{i}.ndim == {len(dims)}"
    else:
        known = "".join(f" and s{i}[{k}] == {d}" for k, d in enumerate(dims) if d is not None)
        shape_ok = f" and len(s{i} := v{i}.shape) == {len(dims)}{known}"
    lines += [f"    {cond} type(v{i}) is _ndarray and v{i}.dtype is _D{i}{shape_ok}"
              + (f" and v{i}.flags.carray:" if to_kernel else ":"),
              f"        x{i} = v{i}",
              "    else:",
              f"        x{i} = _CHK{i}(v{i})"]
    if to_kernel:
        lines += [f"        if not x{i}.flags.carray:", f"            return _slow({args})"]
    return lines


class _Convert:
    """`self * x` is `fn(x)`: the generated runners turn scalar results into numpy scalars
    with `*` (see `_scalar_maker`)."""

    __slots__ = ("fn",)

    def __init__(self, fn) -> None:
        self.fn = fn

    def __mul__(self, x):
        return self.fn(x)


def _scalar_maker(conv):
    """What a runner multiplies a kernel's rank-0 result (a Python scalar) by to get the numpy
    scalar `conv(x)`: for real floats and integers the dtype's one, as `one * x` rounds `x` to
    the dtype exactly as `conv(x)` does (NEP 50: a Python scalar takes the numpy scalar's
    type) in a third of the time; else a wrapper calling `conv`."""
    if conv is None:
        return None
    if np.dtype(conv).kind in "fiu":
        return conv(1)
    return _Convert(conv)


def _key_source(feeds, pos) -> str:
    """Source of a runner's entry key: which fed `None` dimensions are 1 (one bit each; a
    kernel is compiled per such class, so other sizes share its entry), plus the whole shape
    of feeds of unknown rank."""
    bits, shapes = [], []
    for k in dict.fromkeys(pos):
        dims = feeds[k].shape.as_tuple()
        if dims is None:
            shapes.append(f"x{k}.shape")
            continue
        for a, d in enumerate(dims):
            if d is None:
                size = f"len(x{k})" if a == 0 else f"x{k}.shape[{a}]"
                bits.append(f"({size} == 1)" + (f" << {len(bits)}" if bits else ""))
    key = " | ".join(bits) or "0"
    return f"({key}, " + "".join(s + ", " for s in shapes) + ")" if shapes else key


def _entry_point(fn, args):
    """The native entry of `fn`'s compiled overload for `args`: calling it skips the
    dispatcher's typing of the arguments. Falls back to `fn` itself."""
    try:
        from numba import typeof
        cres = fn.overloads.get(tuple(typeof(a) for a in args))
    except Exception:  # noqa: BLE001  (anything unexpected: keep the dispatcher)
        cres = None
    return fn if cres is None else cres.entry_point


def _var_value(a):
    """A fetched variable's value: a copy, never the session's buffer; numpy scalar at rank 0."""
    a = np.array(a, copy=True)
    return a[()] if a.ndim == 0 else a


def _contig(a) -> np.ndarray:
    """`a` as a C-contiguous array of its own rank (np.ascontiguousarray turns 0-d into 1-d)."""
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _placeholder_value(t):
    dims = t.shape.as_tuple() or ()
    return np.zeros([d if d is not None else 2 for d in dims], t.dtype.as_numpy_dtype)


def _placeholder_var(var_op):
    shape = var_op.attrs["shape"].as_tuple() or ()
    return np.zeros([d if d is not None else 2 for d in shape],
                    var_op.attrs["dtype"].as_numpy_dtype)


# host ops whose references return exactly their declared output (one array of the
# TensorArray's dtype, or the boxed TensorArray): run_body calls them without conversion
_TRUSTED_HOST = frozenset({"TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGradRead",
                           "TensorArrayGradWrite"})


def _run_op_reference(op, args, ctx):
    """The interpreter's run_op_reference (imported on first use: no import cycle)."""
    global _run_op_reference
    from jitflow.runtime.reference import run_op_reference
    _run_op_reference = run_op_reference
    return run_op_reference(op, args, ctx)


def _convert(c: _Compiled, out) -> list:
    """The kernel's results with its rank-0 results (Python scalars) as numpy scalars."""
    vals = list(out)
    for i, conv in c.conv_items:
        vals[i] = conv(vals[i])
    return vals


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
    _vecmath_table()
    a = np.ones((2, 2), np.float32)
    fn.compile((numba.typeof((a,)), numba.typeof(())))


def export_source(session, fetches, feed_list=(), feed_values: Optional[list] = None) -> dict:
    """The generated module for one run signature, for writing it out as a standalone module.

    Returns {"source": module text, "entry": "kernel", "layout": {"inputs": [...],
    "variables": [...], "results": [...]}, "constants": {op name: ndarray}}: see the module
    docstring for the calling convention. Feed values (optional) pick the shape class; without
    them every unknown dimension is assumed not to be 1. Raises NotImplementedError when the
    plan has ops that run through references.
    """
    feed_list = list(feed_list)
    runner = session.make_callable(fetches, feed_list)
    spec = runner.spec
    ex = spec.executable
    if isinstance(ex, Executable) and not ex.single:
        ex = Executable(ex.plan, ex.backend, whole=True)   # one module, however long
    if not isinstance(ex, Executable) or not ex.single or ex.pre or ex.post:
        raise NotImplementedError("export needs a plan where every op has a code generator "
                                  "and no random op")
    if feed_values is None:
        feed_values = []
        for t in spec.plan.feeds:
            dims = t.shape.as_tuple() or ()
            feed_values.append(np.zeros([d if d is not None else 2 for d in dims],
                                        t.dtype.as_numpy_dtype))
    else:
        pos = {t: i for i, t in enumerate(spec.feeds)}
        feed_values = [np.asarray(feed_values[pos[t]], t.dtype.as_numpy_dtype)
                       for t in spec.plan.feeds]
    found = ex.sources(feed_values, session._store)
    if not found:
        raise NotImplementedError("export needs a plan that compiles for these feed shapes; "
                                  "this one runs through its references")
    (seg, c), = found
    if not c.source:
        raise NotImplementedError("export needs Numba source, which JITFLOW_COMPILE=tier1 "
                                  "does not generate: export in another mode")
    return {"source": c.source.replace("{cache}", "False"), "entry": "kernel",
            "layout": dict(c.names),
            "constants": {op_name: arr for (_, arr), (_k, op_name) in
                          zip(c.consts, [n for n in c.names["inputs"] if n[0] == "const"])}}
