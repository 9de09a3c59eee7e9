"""Compiled segments: one segment of a program, lowered for one input shape class, generated as
Numba source, loaded (memory cache, disk cache or a new compile) and called.

A `Compiled` holds the kernel IR, the generated module (tagged with op names for `inspect`,
untagged for the cache), the constants passed as arguments, the rank-0 result conversions and
the tier state (`tier1`, `ready`, `broken`, costs: see tiers.py). Generated modules are
self-contained, importing only math, numpy, numba and the libraries vecmath.py and nnlib.py:

    def kernel(ins, vs) -> tuple
      ins: tuple of C-contiguous arrays: the run's feeds in feed-list order, then constant
           arrays (`names["inputs"]` names each: ("feed", tensor name) or ("const", op name))
      vs:  tuple of variable buffers, updated in place (`names["variables"]`: op names)
      returns one entry per `names["results"]` (tensor names): arrays, scalars for rank 0.

A kernel whose operands are large also gets a parallel variant (prange loops), used from
`config.parallel_min()` elements on when `config.threads()` > 1.
"""
from __future__ import annotations

import os
import re
import time
from typing import Optional

import numpy as np

from jitflow.backends.base import CodegenError, decode_check_error, fallback_warning
from jitflow.backends.numba_cpu import background as _bg
from jitflow.backends.numba_cpu import cache as _cache
from jitflow.backends.numba_cpu import vecmath_names
from jitflow.backends.numba_cpu.emit import poison_enabled
from jitflow.compiler import ir as _ir
from jitflow.compiler import lower as _lower
from jitflow.compiler.program import Segment
from jitflow.runtime import config

__all__ = ["STATS", "Compiled", "SegmentKernels", "generate_segment", "load_compiled",
           "compile_segment", "call_kernel", "classes_key", "describe_change", "contig",
           "convert_results", "fallback", "DECORATOR", "PAR_DECORATOR", "PAR_STATE"]

STATS = _cache.STATS


# no cfunc wrapper: nothing takes a kernel's address as a C function, and building one costs
# Numba lowering and LLVM time for every kernel
DECORATOR = ('@numba.njit(cache={cache}, error_model="numpy", nogil=True, '
             'no_cfunc_wrapper=True)')


TAG = re.compile(r"  # [^\n]*$", re.M)


_GUARDED: list = []   # [True] once the vecmath helpers' Numba caches are guarded


PAR_DECORATOR = DECORATOR[:-1] + ", parallel=True)"


# GNU OpenMP's idle threads spin 300,000 rounds (milliseconds) after each parallel region by
# default: a training step that runs a parallel update every few milliseconds kept the second
# core of a 2-core machine busy all the time (a LeNet step at 1.99 cores instead of 1.14).
# 10,000 rounds still catch regions that follow closely: an Adam step on 1.1e6 floats took
# 0.19-0.23 ms with it, 0.19-0.20 ms with the default and 0.25-0.38 ms with sleeping threads.
_GOMP_SPINCOUNT = 10_000


PAR_STATE: dict = {}   # "ok": False once a parallel kernel could not be built or run here


def vecmath_table() -> tuple:
    """(helper table {(fn, dtype): name}, import line) for the helpers of vecmath.py.
    Imports no Numba (see vecmath_names.py)."""
    from jitflow.backends.numba_cpu import vecmath_names as vn
    if vn.use_libm():
        return {}, ""
    names = {key: f"_vm.{name}" for key, name in vn.HELPERS.items()}
    return names, (f"# vecmath {vn.cache_token()}\n"
                   "from jitflow.backends.numba_cpu import vecmath as _vm\n")


def guard_vecmath_caches() -> None:
    """Let Numba read only private cache files for the math helpers (once per process)."""
    from jitflow.backends.numba_cpu import blas
    blas.bind()   # before mathlib (which kernels import) would bind it the slow way
    if not _GUARDED:
        _GUARDED.append(True)
        from jitflow.backends.numba_cpu import nnlib, vecmath
        for fn in list(getattr(vecmath, "FUNCS", {}).values()) + list(nnlib.CACHED):
            _cache._guard_numba_cache(fn)


def mathlib_import_line() -> str:
    """The import of mathlib.py in a kernel module, with a token that changes whenever
    mathlib.py or vecmath.py changes (kernels cached on disk are keyed by their text)."""
    return (f"# mathlib {_file_token('mathlib.py')} {vecmath_names.cache_token()}\n"
            "from jitflow.backends.numba_cpu import mathlib as _jf\n")


_TOKENS: dict = {}


def _file_token(name: str) -> str:
    tok = _TOKENS.get(name)
    if tok is None:
        import hashlib
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
        with open(path, "rb") as fh:
            tok = _TOKENS[name] = hashlib.sha256(fh.read()).hexdigest()[:16]
    return tok


def module_source(fn_source: str, vm_import: str) -> str:
    """A self-contained module around one generated function named `kernel`."""
    return ("import math\n\nimport numba\nimport numpy as np\n" + vm_import + "\n\n"
            + DECORATOR + "\n" + fn_source)


_NNLIB_TOKEN: list = []


def nnlib_import_line() -> str:
    """The import of nnlib for a kernel that calls it, with a token that changes whenever
    nnlib.py changes (kernels cached on disk are keyed by their text). Imports no Numba."""
    if not _NNLIB_TOKEN:
        import hashlib
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nnlib.py")
        with open(path, "rb") as fh:
            _NNLIB_TOKEN.append(hashlib.sha256(fh.read()).hexdigest()[:16])
    return (f"# nnlib {_NNLIB_TOKEN[0]}\n"
            "from jitflow.backends.numba_cpu import nnlib as _nn\n")


class Compiled:
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
        self.par = None          # its Compiled once requested
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


def classes_key(arrays) -> tuple:
    return tuple((a.dtype.name, tuple(d == 1 for d in a.shape)) for a in arrays)


def describe_change(names, old, new) -> str:
    for n, a, b in zip(names, old, new):
        if a == b:
            continue
        if a[0] != b[0]:
            return f"{n} changed dtype {a[0]} -> {b[0]}"
        if len(a[1]) != len(b[1]):
            return f"{n} changed rank {len(a[1])} -> {len(b[1])}"
        return f"{n} changed which dims are 1 {a[1]} -> {b[1]}"
    return "new input classes"


def generate_segment(seg: Segment, in_arrays, var_arrays, reason: str) -> Compiled:
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
        if config.debug_level() >= 1:
            config.debug(f"lowered {len(seg.ops)} ops for tier 1: {reason}")
        c = Compiled(None, kernel, [(slot, contig(op.attrs["value"])) for slot, op in consts],
                      "# JITFLOW_COMPILE=tier1: no Numba source (tier 1 runs the kernel IR)\n",
                      "", {"inputs": [("feed", t.name) for t in seg.in_tensors]
                               + [("const", op.name) for _, op in consts],
                               "variables": [seg.var_ops[i].name for i in order],
                               "results": [t.name for t in seg.out_tensors]})
        c.cache_source = None
        c.var_order = None if order == list(range(len(seg.var_ops))) else order
        return c
    from jitflow.backends.numba_cpu import pyprint
    from jitflow.compiler import loopgen
    from jitflow.compiler.loops import Unsupported as LoopUnsupported
    libm = vecmath_names.use_libm()
    poison = poison_enabled()
    try:
        lk = loopgen.lower_kernel(kernel, libm=libm)
    except LoopUnsupported as e:
        raise _lower.Unsupported(str(e)) from None
    vm_import = mathlib_import_line()
    tagged = pyprint.print_function(lk, "kernel", poison=poison)
    body = TAG.sub("", tagged)
    if "_nn." in body:   # convolutions and pooling call the window-op library
        vm_import += nnlib_import_line()
    source = module_source(body, vm_import)
    try:
        # generated code is valid by construction; this proves it before Numba sees it
        compile(source, "<jitflow kernel>", "exec")
    except SyntaxError as e:
        line = tagged.splitlines()[e.lineno - 1 - source.count("\n", 0, source.index("def "))] \
            if e.lineno else ""
        raise CodegenError(f"generated source does not parse ({e.msg}): {line.strip()}",
                           seg) from None
    lvl = config.debug_level()
    if lvl >= 1:
        config.debug(f"compile {len(seg.ops)} ops: {reason}")
    if lvl >= 4:
        config.debug("generated source:\n" + tagged)
    const_vals = [(slot, contig(op.attrs["value"])) for slot, op in consts]
    names = {"inputs": [("feed", t.name) for t in seg.in_tensors]
             + [("const", op.name) for _, op in consts],
             "variables": [seg.var_ops[i].name for i in order],
             "results": [t.name for t in seg.out_tensors]}
    c = Compiled(None, kernel, const_vals, tagged, module_source(tagged, vm_import), names)
    c.cache_source = source
    # None: the kernel takes the variables in the segment's order (the common case)
    c.var_order = None if order == list(range(len(seg.var_ops))) else order
    if config.threads() > 1 and PAR_STATE.get("ok", True):
        par = TAG.sub("", pyprint.print_function(loopgen.lower_kernel(kernel, True, libm),
                                                 "kernel", parallel=True, poison=poison))
        if "numba.prange" in par:
            c.par_source = (module_source(par, vm_import)
                            .replace(DECORATOR, PAR_DECORATOR))
    return c


def parallel_of(c: "Compiled") -> "Compiled":
    """The parallel variant of `c` (not loaded yet)."""
    p = Compiled(None, c.kernel, c.consts, c.tagged, c.source, c.names)
    p.cache_source = c.par_source
    p.var_order = c.var_order
    return p


def prepare_parallel() -> None:
    """Before the first parallel kernel: a threading layer that several Python threads may
    call at once (OpenMP or TBB; Numba's own workqueue layer is not), unless the user chose
    one, and how long idle OpenMP threads spin before they sleep (`_GOMP_SPINCOUNT`, unless
    OMP_WAIT_POLICY or GOMP_SPINCOUNT says)."""
    if "prepared" not in PAR_STATE:
        import numba
        if not os.environ.get("NUMBA_THREADING_LAYER"):
            numba.config.THREADING_LAYER = "threadsafe"
        if not any(os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")):
            # GNU OpenMP reads this when Numba's OpenMP layer loads it, just after this
            os.environ["GOMP_SPINCOUNT"] = str(_GOMP_SPINCOUNT)
        PAR_STATE["prepared"] = True


def use_threads() -> None:
    import numba
    want = min(config.threads(), numba.config.NUMBA_NUM_THREADS)
    if numba.get_num_threads() != want:
        numba.set_num_threads(want)


def parallel_failed(p: "Compiled", err: Exception) -> None:
    """A parallel variant that cannot be built or run: the serial kernel is used; without a
    thread-safe threading layer no more parallel variants are made in this process."""
    p.broken = True
    if "threading layer" in str(err).lower():
        PAR_STATE["ok"] = False


def load_compiled(c: Compiled) -> None:
    """Give `c` its dispatcher: from the in-memory cache, the disk cache, or a new module."""
    guard_vecmath_caches()
    mod = _cache.load_module(c.cache_source)
    c.fn = mod.kernel
    c.from_disk = mod.from_disk


def compile_segment(seg: Segment, in_arrays, var_arrays, reason: str) -> Compiled:
    """Lower, generate and load one segment for the classes of the given arrays."""
    c = generate_segment(seg, in_arrays, var_arrays, reason)
    load_compiled(c)
    return c


def call_kernel(c: Compiled, ins: list, vars_: list, seg: Segment):
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
        if c.tier1 and config.debug_level() >= 1:
            config.debug(f"segment of {len(seg.ops)} ops: tier 1 -> Numba kernel")
        n0 = len(fn.overloads)
        h0 = cache_hits(fn)
    try:
        out = fn(tuple(args), vs)
    except ValueError as e:
        failed = decode_check_error(e, seg.ops)
        if failed is not None:
            raise failed from None
        if not counting:
            raise
        out = _first_call_failed(fn, args, vs, seg, e)
    except Exception as e:  # noqa: BLE001  (unpickling a damaged cache entry raises anything)
        if not counting:
            raise
        out = _first_call_failed(fn, args, vs, seg, e)
    if counting:
        c.called = True
        count_build(fn, h0, n0)
    return out


def has_value_checks(kernel) -> bool:
    """Whether `kernel` checks element values (which can fail for new data of a shape that
    passed before): index ranges and integer divisors."""
    return any(isinstance(c, (_ir.RangeCheck, _ir.NonZeroCheck))
               for c in list(kernel.checks) + list(kernel.stmts))


def numba_signature(kinds: tuple) -> tuple:
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


def compile_job(c: Optional["Compiled"], kinds: tuple, seg: Optional["Segment"]) -> None:
    """Background load or compile of one kernel (runs on the compiler thread); nothing when
    the kernel or its segment is no longer used."""
    if c is None or seg is None:
        STATS["background_skipped"] = STATS.get("background_skipped", 0) + 1
        return
    t0 = time.perf_counter()
    try:
        load_compiled(c)
        sig = numba_signature(kinds)
        # a module already on disk most likely has its machine code there too: load it here
        if (sig not in c.fn.overloads and not c.from_disk and _bg.mode() == "background"
                and disk_cached(c.fn)):
            from jitflow.backends.numba_cpu import compile_worker
            compile_worker.compile_in_helper(c.cache_source, kinds)   # then a cache hit here
        h0, n0 = cache_hits(c.fn), len(c.fn.overloads)
        c.fn.compile(sig)   # nothing to do when an identical kernel's job built it already
        count_build(c.fn, h0, n0)
        if config.debug_level() >= 1:
            config.debug(f"kernel of {len(seg.ops)} ops ready after "
                         f"{time.perf_counter() - t0:.2f} s in the background: runs switch "
                         "to native code")
    except Exception as e:  # noqa: BLE001
        text = str(e).strip()
        first = text.splitlines()[-1] if text else type(e).__name__
        c.error = f"Numba could not compile it: {first[:200]}"
        c.broken = True
        if not config.strict():
            fallback(seg, c.error, bug=True)
    finally:
        c.ready = True


def count_build(fn, hits_before: int, overloads_before: int) -> None:
    """Count what giving `fn` a new overload was: a Numba cache hit or a compile."""
    if cache_hits(fn) > hits_before:
        STATS["numba_cache_hits"] += 1
    elif len(fn.overloads) > overloads_before:
        STATS["compiles"] += 1


def disk_cached(fn) -> bool:
    """Whether dispatcher `fn` reads and writes Numba's disk cache."""
    cache = getattr(fn, "_cache", None)
    return cache is not None and type(cache).__name__ != "NullCache"


def raise_background_error(c) -> None:
    if isinstance(c, Compiled) and c.error is not None and config.strict():
        raise CodegenError(c.error, None)


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


def cache_hits(fn) -> int:
    stats = getattr(fn, "stats", None)
    hits = getattr(stats, "cache_hits", None)
    return sum(hits.values()) if hits else 0


def contig(a) -> np.ndarray:
    """`a` as a C-contiguous array of its own rank (np.ascontiguousarray turns 0-d into 1-d)."""
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def convert_results(c: Compiled, out) -> list:
    """The kernel's results with its rank-0 results (Python scalars) as numpy scalars."""
    vals = list(out)
    for i, conv in c.conv_items:
        vals[i] = conv(vals[i])
    return vals



class SegmentKernels:
    """What one executable compiled for one segment: a `Compiled` (or `REFERENCES`) per input
    shape class, the class of the last compile (for the debug message saying what changed),
    and the kernel for each exact set of operand shapes seen (the per-run lookup)."""

    __slots__ = ("compiled", "last_key", "exact")

    def __init__(self) -> None:
        self.compiled: dict = {}
        self.last_key = None
        self.exact: dict = {}


def fallback(seg, why: str, bug: bool) -> None:
    fallback_warning(seg, why, bug, STATS)
