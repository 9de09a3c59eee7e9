"""Compiled segments: one segment of a program, lowered for one input shape class to the
loop-level form (jitflow/compiler/loopgen.py), and the code that runs it.

A `Compiled` holds the kernel IR, its loop form, the constants passed as arguments, the rank-0
result conversions and its code, `run(ins, vs) -> tuple`, which is one of (best last):

- the fast path's quick code (llvmjit.py, level "quick": compiled in milliseconds),
- the fast path's optimized code (level "opt": vectorized, the speed of the Numba kernels),
- the Numba kernel printed from the same loop form (pyprint.py; JITFLOW_COMPILE=numba, and
  wherever the LLVM printer does not cover a kernel).

All of them compute the same operations in the same order with strict IEEE arithmetic: they
give the same bits, so which one ran a step never shows in a result. The Numba module text
(`source`, `tagged` for `inspect`) is printed when asked for. Generated Numba modules are
self-contained, importing only math, numpy, numba and the libraries mathlib.py and nnlib.py:

    def kernel(ins, vs) -> tuple
      ins: tuple of C-contiguous arrays: the run's feeds in feed-list order, then constant
           arrays (`names["inputs"]` names each: ("feed", tensor name) or ("const", op name))
      vs:  tuple of variable buffers, updated in place (`names["variables"]`: op names)
      returns one entry per `names["results"]` (tensor names): arrays, scalars for rank 0.

A kernel whose operands are large also gets a parallel Numba variant (prange loops), used from
`config.parallel_min()` elements on when `config.threads()` > 1.
"""
from __future__ import annotations

import os
import re
import time
import weakref

import numpy as np

from jitflow.backends.base import CodegenError, decode_check_error, fallback_warning
from jitflow.backends.numba_cpu import background as _bg
from jitflow.backends.numba_cpu import cache as _cache
from jitflow.compiler import ir as _ir
from jitflow.compiler import loopgen
from jitflow.compiler import lower as _lower
from jitflow.compiler.loops import Unsupported as LoopUnsupported
from jitflow.compiler.program import Segment
from jitflow.runtime import config

__all__ = ["STATS", "Compiled", "SegmentKernels", "generate_segment", "build_code",
           "call_kernel", "classes_key", "describe_change", "contig", "convert_results",
           "fallback", "DECORATOR", "PAR_DECORATOR", "PAR_STATE", "load_numba",
           "poison_enabled", "upgrade"]

STATS = _cache.STATS

# no cfunc wrapper: nothing takes a kernel's address as a C function, and building one costs
# Numba lowering and LLVM time for every kernel
DECORATOR = ('@numba.njit(cache={cache}, error_model="numpy", nogil=True, '
             'no_cfunc_wrapper=True)')
PAR_DECORATOR = DECORATOR[:-1] + ", parallel=True)"
TAG = re.compile(r"  # [^\n]*$", re.M)
_GUARDED: list = []   # [True] once the library routines' Numba caches are guarded

# GNU OpenMP's idle threads spin 300,000 rounds (milliseconds) after each parallel region by
# default: a training step that runs a parallel update every few milliseconds kept the second
# core of a 2-core machine busy all the time (a LeNet step at 1.99 cores instead of 1.14).
# 10,000 rounds still catch regions that follow closely: an Adam step on 1.1e6 floats took
# 0.19-0.23 ms with it, 0.19-0.20 ms with the default and 0.25-0.38 ms with sleeping threads.
_GOMP_SPINCOUNT = 10_000
PAR_STATE: dict = {}   # "ok": False once a parallel kernel could not be built or run here


def poison_enabled() -> bool:
    """JITFLOW_POISON=1: every buffer compiled code allocates starts as NaN or a sentinel."""
    return config.get("JITFLOW_POISON")


def guard_numba_caches() -> None:
    """Before Numba loads a kernel module: BLAS bound (mathlib would bind it the slow way), and
    Numba allowed to read only private cache files for the library routines (once)."""
    from jitflow.backends.numba_cpu import blas
    blas.bind()
    if not _GUARDED:
        _GUARDED.append(True)
        from jitflow.backends.numba_cpu import nnlib
        for fn in list(nnlib.CACHED):
            _cache._guard_numba_cache(fn)


_TOKENS: dict = {}


def _file_token(name: str) -> str:
    """The first 16 hex digits of the sha256 of this folder's file `name` (generated modules
    carry the tokens of the libraries they import: kernels cached on disk are keyed by their
    text, so a changed library never loads an old kernel)."""
    tok = _TOKENS.get(name)
    if tok is None:
        import hashlib
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
        with open(path, "rb") as fh:
            tok = _TOKENS[name] = hashlib.sha256(fh.read()).hexdigest()[:16]
    return tok


def module_source(fn_source: str) -> str:
    """A self-contained module around one generated function named `kernel`."""
    head = (f"# mathlib {_file_token('mathlib.py')} {_file_token('mathir.py')}\n"
            "from jitflow.backends.numba_cpu import mathlib as _jf\n")
    if "_nn." in fn_source:   # convolutions and pooling call the window-op library
        head += (f"# nnlib {_file_token('nnlib.py')}\n"
                 "from jitflow.backends.numba_cpu import nnlib as _nn\n")
    return ("import math\n\nimport numba\nimport numpy as np\n" + head + "\n\n"
            + DECORATOR + "\n" + fn_source)


class Compiled:
    """One segment compiled for one input shape class (see the module docstring)."""

    __slots__ = ("kernel", "lk", "consts", "names", "var_order", "out_conv", "conv_items",
                 "run", "level", "fn", "called", "broken", "error", "pending", "from_disk",
                 "par", "listeners", "_tagged", "_par_src", "__weakref__")

    def __init__(self, kernel, lk, consts, names, var_order) -> None:
        self.kernel = kernel
        self.lk = lk              # the loop form (None for a Numba-only variant's copy)
        self.consts = consts
        self.names = names
        self.var_order = var_order   # None: the variables in the segment's order
        self.run = None           # the best code ready: fn(ins, vs) -> tuple
        self.level = None         # "quick", "opt" or "numba"
        self.fn = None            # the Numba dispatcher, where one was loaded
        self.called = False
        self.broken = False       # no code runs it: this class uses the references
        self.error = None         # why a background build failed (raised under STRICT)
        self.pending = False      # an upgrade is queued on the compiler thread
        self.from_disk = False
        self.par = None           # the parallel variant (a Compiled) once requested
        self.listeners = weakref.WeakSet()   # warm paths holding `run`: told on upgrade
        self._tagged = None
        self._par_src = False
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

    # -- the Numba source, printed when asked for ----------------------------------------------
    @property
    def tagged(self) -> str:
        """The kernel's function, every line tagged with its op's name (`inspect`)."""
        if self._tagged is None:
            from jitflow.backends.numba_cpu import pyprint
            self._tagged = pyprint.print_function(self.lk, "kernel", poison=poison_enabled())
        return self._tagged

    @property
    def source(self) -> str:
        """The tagged module (what `export` writes)."""
        return module_source(self.tagged)

    @property
    def cache_source(self) -> str:
        """The module Numba compiles (tags removed: the text is the cache key)."""
        return module_source(TAG.sub("", self.tagged))

    @property
    def par_source(self):
        """The parallel variant's module text, or None when it has no parallel loop."""
        if self._par_src is False:
            self._par_src = None
            if config.threads() > 1 and PAR_STATE.get("ok", True) and self.lk is not None:
                from jitflow.backends.numba_cpu import pyprint
                lk = loopgen.lower_kernel(self.kernel, True, config.get("JITFLOW_LIBM"))
                par = pyprint.print_function(lk, "kernel", parallel=True,
                                             poison=poison_enabled())
                if "numba.prange" in par:
                    self._par_src = module_source(TAG.sub("", par)).replace(DECORATOR,
                                                                            PAR_DECORATOR)
        return self._par_src

    def entry(self, args: tuple, vs: tuple):
        """What a warm path calls for arguments of these types: the Numba overload's native
        entry (no dispatcher typing), or the fast path's code; None when there is none."""
        if self.level == "numba":
            try:
                from numba import typeof
                cres = self.fn.overloads.get((typeof(args), typeof(vs)))
            except Exception:  # noqa: BLE001  (anything unexpected: no warm path)
                cres = None
            return None if cres is None else cres.entry_point
        return self.run

    def upgraded(self, run, level: str) -> None:
        """Runs switch to `run` (code of `level`). Where both are native entries of the
        fast path, the entry runs `run`'s kernel from now on (warm paths keep what they
        hold); otherwise warm paths drop what they hold."""
        if self.run is not None and level in ("quick", "opt") and self.level in ("quick", "opt"):
            from jitflow.backends.numba_cpu import llvmjit
            if llvmjit.swap(self.run, run):
                self.level = level
                return
        self.run = run
        self.level = level
        for w in list(self.listeners):
            w.invalidate()


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
    """Lower one segment for the classes of the given arrays, to the kernel IR and the loop
    form (no code yet: see `build_code`). Raises lower.Unsupported."""
    cls_in = [(t, _ir.VClass(a.dtype.name, tuple(d == 1 for d in a.shape)))
              for t, a in zip(seg.in_tensors, in_arrays)]
    var_cls = {v: _ir.class_of(a) for v, a in zip(seg.var_ops, var_arrays)}
    kernel, consts = _lower.lower(seg.ops, cls_in, seg.out_tensors, var_cls)
    try:
        lk = loopgen.lower_kernel(kernel, libm=config.get("JITFLOW_LIBM"))
    except LoopUnsupported as e:
        raise _lower.Unsupported(str(e)) from None
    # the kernel's variable order is the order of first use; map to seg.var_ops order
    order = [seg.var_ops.index(v.var_op) for v in kernel.variables]
    names = {"inputs": [("feed", t.name) for t in seg.in_tensors]
             + [("const", op.name) for _, op in consts],
             "variables": [seg.var_ops[i].name for i in order],
             "results": [t.name for t in seg.out_tensors]}
    if config.debug_level() >= 1:
        config.debug(f"lowered {len(seg.ops)} ops: {reason}")
    return Compiled(kernel, lk, [(slot, contig(op.attrs["value"])) for slot, op in consts],
                    names, None if order == list(range(len(seg.var_ops))) else order)


def build_code(c: Compiled, seg: Segment, level: str) -> None:
    """Give `c` code of `level` ("quick", "opt" or "numba"), now; "auto" is the quick code,
    or the optimized code where that is already compiled (a later process: the disk cache)
    or cheap (a small kernel), with the optimized code then queued on the compiler thread.
    Where the LLVM printer does not cover the kernel, the Numba kernel (the same bits);
    CodegenError when neither can."""
    with _bg.foreground():   # no background compile holds LLVM meanwhile
        _build_code(c, seg, level)


def _build_code(c: Compiled, seg: Segment, level: str) -> None:
    STATS["kernels"] = STATS.get("kernels", 0) + 1
    if level != "numba":
        from jitflow.backends.numba_cpu import llvmjit
        t0 = time.perf_counter()
        try:
            prep = llvmjit.Prepared(c.lk, poison_enabled())
            if level == "auto":
                level = ("opt" if len(seg.ops) <= _OPT_NOW_OPS or prep.cached("opt")
                         else "quick")
            run = prep.build(level)
        except LoopUnsupported as e:
            STATS["numba_fallbacks"] = STATS.get("numba_fallbacks", 0) + 1
            if config.debug_level() >= 1:
                config.debug(f"segment of {len(seg.ops)} ops: no fast path ({e}): Numba")
        except Exception as e:  # noqa: BLE001  (a printer bug: Numba compiles it instead)
            STATS["numba_fallbacks"] = STATS.get("numba_fallbacks", 0) + 1
            if config.strict():
                raise CodegenError(f"the fast path could not build it: {e}", seg) from e
            fallback(seg, f"the fast path could not build it: {e}", bug=True)
        else:
            if config.debug_level() >= 1:
                config.debug(f"segment of {len(seg.ops)} ops: {level} code in "
                             f"{(time.perf_counter() - t0) * 1e3:.1f} ms")
            if config.debug_level() >= 4:
                config.debug("generated source:\n" + c.tagged
                             + "\nits LLVM IR:\n" + prep.lg.text)
            c.upgraded(run, level)
            if level == "quick" and _bg.mode() == "auto":
                upgrade(c, seg, prep)
            return
    _check_source(c, seg)
    load_numba(c)
    if config.debug_level() >= 1:
        config.debug(f"segment of {len(seg.ops)} ops: Numba kernel "
                     + ("from the disk cache" if c.from_disk else "(compiles on its first run)"))
    c.upgraded(c.fn, "numba")


# kernels of up to this many ops get their optimized code on their first run: it compiles in
# about the time the quick code does (a 1e6-element chain of 10 ops: 31 ms against 11 ms)
_OPT_NOW_OPS = 16


def _check_source(c: Compiled, seg: Segment) -> None:
    """Generated code is valid by construction; this proves it before Numba sees it."""
    source = c.cache_source
    try:
        compile(source, "<jitflow kernel>", "exec")
    except SyntaxError as e:
        raise CodegenError(f"generated source does not parse ({e.msg})", seg) from None


def load_numba(c: Compiled) -> None:
    """Give `c` its Numba dispatcher: from the in-memory cache, the disk cache, or a new
    module."""
    guard_numba_caches()
    if config.debug_level() >= 4:
        config.debug("generated source:\n" + c.tagged)
    mod = _cache.load_module(c.cache_source)
    c.fn = mod.kernel
    c.from_disk = mod.from_disk


OPT_SECONDS_PER_LINE = 3e-5


def upgrade(c: Compiled, seg: Segment, prep=None) -> None:
    """Queue `c`'s optimized code on the compiler thread; runs keep the code they have until
    it is ready (the same bits)."""
    if c.pending or c.level in ("opt", "numba"):
        return
    c.pending = True
    ref_c, ref_seg = weakref.ref(c), weakref.ref(seg)
    # the optimized compile's CPU time, from the IR's size (measured: about 30 us a line on
    # cold_workloads.py's 1,000-op graph, 3.2 s for its 50 kernels' 100k lines)
    cost = prep.lg.text.count("\n") * OPT_SECONDS_PER_LINE if prep is not None else 0.0
    _bg.submit(lambda: _upgrade_job(ref_c(), ref_seg(), prep), cost)


def _upgrade_job(c, seg, prep=None) -> None:
    """Build `c`'s optimized code (runs on the compiler thread); nothing when the kernel or
    its segment is no longer used."""
    if c is None or seg is None:
        STATS["background_skipped"] = STATS.get("background_skipped", 0) + 1
        return
    try:
        from jitflow.backends.numba_cpu import llvmjit
        t0 = time.perf_counter()
        if prep is None:
            prep = llvmjit.Prepared(c.lk, poison_enabled())
        run = prep.build("opt")
        if config.debug_level() >= 1:
            config.debug(f"segment of {len(seg.ops)} ops: optimized code ready after "
                         f"{time.perf_counter() - t0:.2f} s: runs switch to it")
        c.upgraded(run, "opt")
    except Exception as e:  # noqa: BLE001  (the quick code keeps serving)
        c.error = f"the optimizing compile failed: {e}"
        if not config.strict():
            fallback(seg, c.error, bug=True)
    finally:
        c.pending = False


def call_kernel(c: Compiled, ins: list, vars_: list, seg: Segment):
    """Run `c` on the segment's inputs (constants appended) and variable buffers."""
    if c.consts:
        args = list(ins)
        for _slot, v in c.consts:
            args.append(v)
    else:
        args = ins
    order = c.var_order
    vs = tuple(vars_) if order is None else tuple([vars_[i] for i in order])
    fn = c.run
    if c.called:
        try:
            return fn(tuple(args), vs)
        except ValueError as e:
            failed = decode_check_error(e, seg.ops)
            if failed is not None:
                raise failed from None
            raise
    numba = c.level == "numba"
    if numba:
        n0, h0 = len(fn.overloads), cache_hits(fn)
    try:
        out = fn(tuple(args), vs)
    except ValueError as e:
        failed = decode_check_error(e, seg.ops)
        if failed is not None:
            raise failed from None
        out = _first_call_failed(c, args, vs, seg, e)
    except Exception as e:  # noqa: BLE001  (unpickling a damaged cache entry raises anything)
        out = _first_call_failed(c, args, vs, seg, e)
    c.called = True
    if numba:
        count_build(fn, h0, n0)
    return out


def has_value_checks(kernel) -> bool:
    """Whether `kernel` checks element values (which can fail for new data of a shape that
    passed before): index ranges and integer divisors."""
    return any(isinstance(c, (_ir.RangeCheck, _ir.NonZeroCheck))
               for c in list(kernel.checks) + list(kernel.stmts))


# -- the parallel variant (Numba, compiled on the compiler thread) ------------------------------
def parallel_of(c: Compiled) -> Compiled:
    """The parallel variant of `c` (not loaded yet)."""
    p = Compiled(c.kernel, None, c.consts, c.names, c.var_order)
    p._tagged = c.tagged
    p._par_src = c.par_source
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


def parallel_failed(p: Compiled, err: Exception) -> None:
    """A parallel variant that cannot be built or run: the serial kernel is used; without a
    thread-safe threading layer no more parallel variants are made in this process."""
    p.broken = True
    if "threading layer" in str(err).lower():
        PAR_STATE["ok"] = False


def load_parallel(p: Compiled) -> None:
    """Load the parallel variant's Numba module (now)."""
    guard_numba_caches()
    mod = _cache.load_module(p._par_src)
    p.fn = mod.kernel
    p.from_disk = mod.from_disk
    p.upgraded(p.fn, "numba")


def compile_parallel_job(p, kinds: tuple, seg) -> None:
    """Load or compile the parallel variant `p` for arguments of `kinds` (on the compiler
    thread); nothing when it or its segment is no longer used."""
    if p is None or seg is None:
        STATS["background_skipped"] = STATS.get("background_skipped", 0) + 1
        return
    try:
        load_parallel(p)
        h0, n0 = cache_hits(p.fn), len(p.fn.overloads)
        p.fn.compile(numba_signature(kinds))
        count_build(p.fn, h0, n0)
    except Exception as e:  # noqa: BLE001
        parallel_failed(p, e)
    finally:
        p.pending = False


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


# -- Numba bookkeeping ---------------------------------------------------------------------------
def count_build(fn, hits_before: int, overloads_before: int) -> None:
    """Count what giving `fn` a new overload was: a Numba cache hit or a compile."""
    if cache_hits(fn) > hits_before:
        STATS["numba_cache_hits"] += 1
    elif len(fn.overloads) > overloads_before:
        STATS["compiles"] += 1


def raise_background_error(c) -> None:
    if isinstance(c, Compiled) and c.error is not None and config.strict():
        raise CodegenError(c.error, None)


def _first_call_failed(c: Compiled, args, vs, seg, err):
    """The first call of a kernel raised: for a Numba kernel, retry without Numba's (maybe
    damaged) cache entry; if it still fails, the segment runs through the references."""
    fn = c.run
    if c.level == "numba":
        from numba.core.errors import NumbaError
        if not isinstance(err, NumbaError) and _drop_numba_cache(fn):
            try:
                return fn(tuple(args), vs)
            except Exception as e:  # noqa: BLE001
                err = e
    text = str(err).strip()
    first = text.splitlines()[-1] if text else type(err).__name__
    what = "Numba" if c.level == "numba" else "the fast path"
    raise CodegenError(f"{what} could not compile or run it: {first[:200]}", seg) from None


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
