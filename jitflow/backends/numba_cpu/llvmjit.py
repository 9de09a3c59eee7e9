"""The fast path: kernels in the loop-level form compiled to native code by LLVM directly
(llvmlite), without Numba, and the Python callable around each.

`build(lk, level)` prints the kernel (llvmgen.py), compiles it in this process's LLVM engine of
that level and returns `fn(ins, vs) -> tuple`, the Numba kernels' calling convention (same
results, same `ValueError("jitflow:<op>:<what>")` on a failed check). Levels:

- "quick": a few cheap function passes and the code generator's fast instruction selector;
  milliseconds, for the first runs of a kernel;
- "opt": the math functions inlined, the same cheap passes and the code generator's
  optimizing instruction selector and register allocator (the speed of the Numba kernels:
  the loops are printed vectorized), compiled on the compiler thread while "quick" code
  serves.

Both compile the same IR with strict IEEE arithmetic: they give the same bits, and the same as
the Numba kernels printed from the same loop form (pyprint.py).

The wrapper is Python: it reads the operands' shapes, evaluates every symbolic dim the IR
needs (pytext.dim_text: the same text the Numba kernel evaluates), runs the dim checks,
allocates every buffer and makes one call into the LLVM function through ctypes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

import numpy as np

from jitflow.backends.base import ERROR_PREFIX
from jitflow.backends.numba_cpu import blas, mathir
from jitflow.backends.numba_cpu import cache as _cache
from jitflow.backends.numba_cpu.llvmgen import LLVMKernel, print_llvm
from jitflow.backends.numba_cpu.pyprint import POISON
from jitflow.backends.pytext import dim_text
from jitflow.compiler.loops import Buf, Lit, Load, Local, LoopKernel, Unsupported
from jitflow.runtime import config

__all__ = ["build", "compile_ir", "warm_up", "NotReady", "STATS", "LEVELS"]

LEVELS = ("quick", "opt")
#: counters: kernels built per level, cache hits
STATS: dict = {"built": 0, "quick": 0, "opt": 0, "shared": 0}


class NotReady(Unsupported):
    """The kernel calls window routines whose entry points are still being built
    (nnlib_c.py); ask again later."""


# -- engines --------------------------------------------------------------------------------------
_LOCK = threading.RLock()
_STATE: dict = {}


def warm_up() -> None:
    """Load LLVM and make the quick engine now (~45 ms, once per process)."""
    _host()
    _engine("quick")


def _llvm():
    llvm = _STATE.get("llvm")
    if llvm is None:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        libm = ctypes.util.find_library("m")
        if libm:
            try:
                llvm.load_library_permanently(libm)
            except RuntimeError:
                pass
        _STATE["llvm"] = llvm
    return llvm


def _host() -> str:
    """LLVM's version and the host CPU's name and features, asked once: every LLVM call waits
    for llvmlite's process-wide lock, which a compile on the compiler thread holds."""
    h = _STATE.get("host")
    if h is None:
        llvm = _llvm()
        h = _STATE["host"] = (f"{llvm.llvm_version_info}|{llvm.get_host_cpu_name()}|"
                              f"{llvm.get_host_cpu_features().flatten()}")
    return h


def vector_bytes() -> int:
    """The bytes per vector loops are printed for (JITFLOW_VECTOR_BYTES, else the host's)."""
    n = config.get("JITFLOW_VECTOR_BYTES")
    if n is not None:
        return max(0, int(n))
    v = _STATE.get("vbytes")
    if v is None:
        feats = _llvm().get_host_cpu_features()
        v = _STATE["vbytes"] = (64 if feats.get("avx512f") else 32 if feats.get("avx")
                                else 16)
    return v


def _engine(level: str):
    """The process's execution engine for `level` (made on first use)."""
    ee = _STATE.get(("engine", level))
    if ee is not None:
        return ee
    with _LOCK:
        ee = _STATE.get(("engine", level))
        if ee is None:
            llvm = _llvm()
            target = llvm.Target.from_default_triple()
            tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                              features=llvm.get_host_cpu_features().flatten(),
                                              opt=0 if level == "quick" else 3, jit=True)
            ctx = llvm.create_context()
            ee = llvm.create_mcjit_compiler(llvm.parse_assembly("", context=ctx), tm)
            _STATE[("engine", level)] = ee
            _STATE[("tm", level)] = tm
            _STATE[("ctx", level)] = ctx
    return ee


def _optimize(mod, level: str) -> None:
    """`level`'s IR passes. Both levels take the stack slots' scalars into registers and clean
    up (SROA, instcombine, simplifycfg); "opt" first inlines the math functions. The vector
    work is the printer's (explicit `<lanes x T>` loops), so LLVM's loop and SLP vectorizers
    and its unroller add compile time without speed: measured on the 1,000-op random graph
    (`benchmarks/compile_scaling.py` kind), O3 took 6.6 s of CPU for a 3.47 ms step, this
    pipeline 2.3 s for 3.5-3.7 ms. `JITFLOW_OPT_PIPELINE=o3` runs LLVM's O3 instead."""
    llvm = _llvm()
    tm = _STATE[("tm", level)]
    o3 = level == "opt" and config.get("JITFLOW_OPT_PIPELINE") == "o3"
    key = ("pb", level, o3)
    pb = _STATE.get(key)
    if pb is None:
        pto = llvm.create_pipeline_tuning_options(speed_level=3 if o3 else 1)
        if o3:
            pto.loop_vectorization = True
            pto.slp_vectorization = True
        pb = _STATE[key] = llvm.create_pass_builder(tm, pto)
    if o3:
        pb.getModulePassManager().run(mod, pb)
        return
    if level != "quick":
        mpm = llvm.create_new_module_pass_manager()
        mpm.add_always_inliner_pass()
        mpm.run(mod, pb)
    pm = llvm.create_new_function_pass_manager()
    pm.add_sroa_pass()
    pm.add_instruction_combine_pass()
    pm.add_simplify_cfg_pass()
    for f in mod.functions:
        if not f.is_declaration:
            pm.run(f, pb)


def compile_ir(text: str, name: str, level: str, libraries=(), key: str = None) -> int:
    """Compile LLVM IR text into the engine of `level`, linking in the IR texts `libraries`
    (jitflow's math functions); the address of function `name`. The machine code is kept in
    the kernel cache's private folder (`objects/`), keyed by everything that decides it, and
    loaded from there by later processes."""
    key = key or _object_key(text, libraries, level)
    d = _cache.blob_dir("objects")
    data = _cache.read_blob(d, key + ".o") if d is not None else None
    with _LOCK:
        ee = _engine(level)
        llvm = _llvm()
        if data is None:
            ctx = _STATE[("ctx", level)]
            mod = llvm.parse_assembly(text, context=ctx)
            for lib in libraries:
                mod.link_in(llvm.parse_assembly(lib, context=ctx))
            mod.verify()
            _optimize(mod, level)
            data = _STATE[("tm", level)].emit_object(mod)
            STATS["objects_compiled"] = STATS.get("objects_compiled", 0) + 1
            if d is not None:
                _cache.write_blob(d, key + ".o", data)
        else:
            STATS["objects_loaded"] = STATS.get("objects_loaded", 0) + 1
        ee.add_object_file(llvm.ObjectFileRef.from_data(data))
        ee.finalize_object()
        return ee.get_function_address(name)


def _object_key(text: str, libraries, level: str) -> str:
    """The cache key of a kernel's machine code: its IR, the library IR linked in, the level,
    LLVM's version and the host CPU (name and features)."""
    import hashlib
    h = hashlib.sha256()
    pipeline = config.get("JITFLOW_OPT_PIPELINE") if level == "opt" else ""
    h.update(f"{_OBJECT_FORMAT}|{level}|{pipeline}|{_host()}|".encode())
    h.update(text.encode())
    for lib in libraries:
        h.update(b"|" + lib.encode())
    return h.hexdigest()[:40]


_OBJECT_FORMAT = "2"


def optimized_ir(text: str, libraries=(), level: str = "opt") -> str:
    """The IR of `text` (with `libraries` linked in) after `level`'s passes (inspection and
    tests: what the code generator sees)."""
    with _LOCK:
        _engine(level)
        llvm = _llvm()
        ctx = _STATE[("ctx", level)]
        mod = llvm.parse_assembly(text, context=ctx)
        for lib in libraries:
            mod.link_in(llvm.parse_assembly(lib, context=ctx))
        _optimize(mod, level)
        return str(mod)


# -- symbols the kernels call ---------------------------------------------------------------------
def _math_name(fn: str, dtype: str, lanes: int = 0) -> str:
    """The name of jitflow's math function (fn, dtype) on `lanes` lanes (mathir.py: linked in
    by compile_ir)."""
    if (fn, dtype) not in mathir.FUNCTIONS:
        raise Unsupported(f"math function {fn} of {dtype}")
    return f'"{mathir.function_name(fn, dtype, lanes)}"'


def _nnlib_symbol(fn: str, dtype: str) -> str:
    from jitflow.backends.numba_cpu import nnlib_c
    addr = nnlib_c.address(fn, dtype)      # the executable waited for it (_first_code)
    if addr is None:
        raise NotReady(f"{fn} of {dtype} is being built")
    if not addr:
        raise Unsupported(f"library call {fn} of {dtype} could not be built")
    sym = f"jitflow_nn_{fn}_{dtype}"
    with _LOCK:
        if _STATE.get(("sym", sym)) != addr:
            _llvm().add_symbol(sym, addr)
            _STATE[("sym", sym)] = addr
    return sym


# -- the Python wrapper ---------------------------------------------------------------------------
def _shape_text(dims) -> str:
    return "(" + "".join(dim_text(d) + ", " for d in dims) + ")"


def _wrapper_source(lk: LoopKernel, lg: LLVMKernel, lits: list, poison: bool) -> str:
    """The Python function around the LLVM one: shapes, checks, buffers, one call, results
    (literal results are appended to `lits`)."""
    L = ["def kernel(ins, vs):"]
    for b in lk.inputs:
        L.append(f"    {b.name} = ins[{b.slot}]")
        if b.rank:
            L.append(f"    {''.join(f'd{b.slot}_{j}, ' for j in range(b.rank))}= {b.name}.shape")
    for b in lk.variables:
        L.append(f"    {b.name} = vs[{b.slot}]")
        if b.rank:
            L.append(f"    {''.join(f'e{b.slot}_{j}, ' for j in range(b.rank))}= {b.name}.shape")
    if lk.dim_checks:
        cond = " or ".join(f"{dim_text(a)} != {dim_text(b)}" for a, b, _, _ in lk.dim_checks)
        L.append(f"    if {cond}:")
        op, what = lk.dim_checks[0][2], lk.dim_checks[0][3]
        L.append(f"        raise ValueError({f'{ERROR_PREFIX}{op}:{what}'!r})")

    def new(b: Buf) -> str:
        shape = _shape_text(b.dims)
        dt = "_np.bool_" if b.dtype == "bool" else f"_np.{b.dtype}"
        if poison and b.poison:
            return f"_np.full({shape}, {POISON.get(b.dtype, '0')}, {dt})"
        return f"_np.empty({shape}, {dt})"
    made = {b.name for b in list(lk.inputs) + list(lk.variables)}
    for b in lk.buffers:
        if b.name not in made:
            made.add(b.name)
            L.append(f"    {b.name} = {new(b)}")
    for src, out in lk.views:
        if out.name not in made:
            made.add(out.name)
            L.append(f"    {out.name} = {src.name}.reshape({_shape_text(out.dims)})")
    for i, dt in lk.scalar_results:
        L.append(f"    r{i} = _np.empty((), _np.{'bool_' if dt == 'bool' else dt})")
        made.add(f"r{i}")
    parts = []
    for kind, key in lg.slots:
        if kind == "ptr":
            if key not in made:
                raise Unsupported(f"no buffer for {key}")
            parts.append(f"{key}.ctypes.data")
        else:
            parts.append(dim_text(key))
    L.append(f"    _a = _np.array(({''.join(p + ', ' for p in parts)}), _np.int64)")
    L.append("    _rc = _fn(_a.ctypes.data)")
    L.append("    if _rc:")
    L.append("        raise ValueError(_ERRORS[_rc])")
    res = []
    for i, r in enumerate(lk.results):
        if isinstance(r, Buf):
            res.append(f"{r.name}.copy()" if r.kind == "in" else r.name)
        elif isinstance(r, Lit) and i not in dict(lk.scalar_results):
            lits.append(np.array(r.value, lk.result_dtypes[i])[()])
            res.append(f"_LITS[{len(lits) - 1}]")
        else:
            res.append(f"r{i}[()]")
    L.append(f"    return ({''.join(x + ', ' for x in res)})")
    return "\n".join(L) + "\n"


_CACHE: dict = {}   # (IR text, wrapper source, level) -> callable (identical kernels share)
_ADDRESSES: dict = {}   # (symbol, level) -> address: machine code already in an engine
_CFN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
_NAME = "jitflow_kernel"


class Prepared:
    """A kernel printed for the fast path, ready to be built at either level (the IR is the
    same; only the passes differ)."""

    def __init__(self, lk: LoopKernel, poison: bool = False) -> None:
        blas.bind()
        self.lk = lk
        self.lg = print_llvm(lk, _NAME, _math_name, _nnlib_symbol, vector_bytes())
        self.lits: list = []
        self.src = _wrapper_source(lk, self.lg, self.lits, poison)
        self.libraries = [mathir.function_ir(f, d, n) for f, d, n in sorted(self.lg.math)]

    def key(self, level: str) -> str:
        return _object_key(self.lg.text, self.libraries, level)

    def cached(self, level: str) -> bool:
        """Whether `level`'s machine code is at hand (in this process, or on disk)."""
        key = self.key(level)
        if ("jitflow_k_" + key[:24], level) in _ADDRESSES:
            return True
        d = _cache.blob_dir("objects")
        return d is not None and os.path.exists(os.path.join(d, key + ".o"))

    def build(self, level: str):
        """The callable `fn(ins, vs) -> tuple` at `level`. Identical kernels share it."""
        lits = self.lits
        key = (self.lg.text, self.src, level, tuple((x.dtype.name, repr(x)) for x in lits))
        fn = _CACHE.get(key)
        if fn is not None:
            STATS["shared"] += 1
            return fn
        okey = self.key(level)
        # named by content: the same kernel has the same symbol in every process (its
        # machine code is cached), and two kernels never share one
        name = "jitflow_k_" + okey[:24]
        text = self.lg.text.replace(f"@{_NAME}(", f"@{name}(", 1)
        with _LOCK:
            addr = _ADDRESSES.get((name, level))
            if addr is None:
                addr = _ADDRESSES[(name, level)] = compile_ir(text, name, level,
                                                               self.libraries, okey)
        cfn = _CFN(addr)
        lk = self.lk
        errors = {i + 1: f"{ERROR_PREFIX}{op}:{what}" for i, (op, what) in enumerate(lk.errors)}
        env = {"_np": np, "np": np, "_fn": cfn, "_ERRORS": errors, "_LITS": lits, "min": min,
               "max": max}
        exec(compile(self.src, f"<jitflow {level} kernel>", "exec"), env)
        fn = env["kernel"]
        fn.llvm_ir = text
        fn.libraries = self.libraries
        fn.wrapper_source = self.src
        fn.level = level
        STATS["built"] += 1
        STATS[level] += 1
        _CACHE[key] = fn
        return fn


def build(lk: LoopKernel, level: str = "quick", poison: bool = False):
    """The fast-path callable of kernel `lk` at `level` (see `Prepared`)."""
    return Prepared(lk, poison).build(level)


_ = Load, Local
