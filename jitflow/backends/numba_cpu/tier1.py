"""Tier 1: a kernel IR (jitflow/compiler/ir.py) -> LLVM IR directly, compiled in milliseconds.

Numba's typing and lowering and LLVM's work on Numba's verbose IR make a kernel's first
compile cost a second or more. Tier 1 skips Numba: this module writes the LLVM IR of one
`Kernel` itself (lean: explicit loops, no reference counting, no exceptions), compiles it with
llvmlite at a low optimization level, and wraps it in a small Python function with the Numba
kernel's calling convention, `fn(ins, vs) -> tuple`. The driver runs a segment's first runs on
it while the Numba kernel (tier 2) compiles in the background (driver.py).

Division of work:
- Python (a generated wrapper) reads the operands' shapes, evaluates every symbolic dim the
  LLVM code needs (the same text the Numba kernel evaluates, pytext.dim_text), runs the dim
  checks (raising `ValueError("jitflow:<op>:<what>")` as the Numba kernel does), allocates
  every buffer with `np.empty`, and makes one call into the LLVM function
  `i32 kernel(i64* args)`; args holds the buffers' addresses, then the dims.
- The LLVM function runs the element checks (RangeCheck/NonZeroCheck: a failing one returns
  its number before anything is written, the wrapper raises its error) and the statements, in
  plan order, writing variables in place.

Semantics are the Numba kernel's (emit.py is the reference): Numba's scalar typing (narrow
integers computed in 64 bits, int / int is float64, typed literals), NumPy's NaN rules for
maximum/minimum, the reductions' accumulation order (32 lanes on an innermost-axis sum, the
same tail and pairwise combination), BLAS for float products. Whatever this module is not
sure about raises `Unsupported` at build time, and the segment keeps the previous behaviour
(references until Numba is ready).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct
import threading

import numpy as np

from jitflow.backends.numba_cpu.emit import (ERROR_PREFIX, _POISON, _calls_math, _constant_value,
                                             _exact_constant, poison_enabled)
from jitflow.backends.pytext import dim_text
from jitflow.compiler.ir import (Alloc, Apply, Arg, AssignVar, Check, Const, CopyVar,
                                 DimValue, Index, Kernel, LibCall, Lit, Load, Loop, MatMul,
                                 NonZeroCheck, RangeCheck, Reduce, Region, RowOp, ShapeOf, Take,
                                 Value, View)
from jitflow.runtime import config

__all__ = ["Unsupported", "NotReady", "build", "missing_libs", "STATS"]

#: counters: kernels built, kernels refused (by reason), calls
STATS: dict = {"built": 0, "unsupported": 0, "calls": 0, "reasons": {}}


class Unsupported(Exception):
    """Tier 1 does not cover this kernel (the segment keeps its other tiers)."""


class NotReady(Unsupported):
    """Tier 1 covers this kernel once the library routines it calls are built (nnlib_c.py:
    being built on their own thread now); ask again later."""


# -- types ------------------------------------------------------------------------------------
_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_FLOATS = {"float32": "float", "float64": "double"}
_DTYPES = set(_INTS) | set(_FLOATS) | {"bool"}
_LANES = 32     # emit.py's lanes of an innermost-axis sum
_CHUNK = 128    # emit.py's chunk of terms with math calls


def _storage(dt: str) -> str:
    """LLVM type of one stored element."""
    if dt in _FLOATS:
        return _FLOATS[dt]
    if dt == "bool":
        return "i8"
    return f"i{_INTS[dt]}"


def _reg(dt: str) -> str:
    """LLVM type of a value in registers: integers are i64 (Numba computes narrow integers in
    64 bits), bools i1."""
    if dt in _FLOATS:
        return _FLOATS[dt]
    return "i1" if dt == "bool" else "i64"


def _itemsize(dt: str) -> int:
    return np.dtype(dt).itemsize


def _check_dtype(dt: str) -> None:
    if dt not in _DTYPES:
        raise Unsupported(f"dtype {dt}")


def _fconst(v: float, dt: str) -> str:
    """An LLVM float constant (hex of the double; float32 values rounded first)."""
    if dt == "float32":
        v = struct.unpack("<f", struct.pack("<f", v))[0] if math.isfinite(v) and abs(v) < 3e38 \
            else float(np.float32(v))
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]


class _V:
    """A scalar in registers: LLVM text and Numba's type for it."""

    __slots__ = ("t", "dt")

    def __init__(self, t: str, dt: str) -> None:
        self.t = t
        self.dt = dt


# libm names of the math functions (float64 name; float32 adds "f") and LLVM intrinsics
_INTRINSIC = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "sqrt": "sqrt",
              "floor": "floor", "ceil": "ceil", "rint": "rint", "fabs": "fabs", "pow": "pow"}
_LIBM = ("tan", "tanh", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
         "erf", "log1p", "expm1")
_FCMP = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_ICMP = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}


# -- the generator ----------------------------------------------------------------------------
class _Gen:
    def __init__(self, kernel: Kernel) -> None:
        self.k = kernel
        self.entry: list = []      # entry block: argument loads, strides, allocas
        self.body: list = []
        self.n = 0
        self.cur = "body"
        self.slots: list = []      # args layout: ("ptr", name) or ("dim", dim)
        self.slot_of: dict = {}
        self.ptrs: dict = {}       # value name -> LLVM pointer text
        self.alias: dict = {}      # View out name -> src Value
        self.dims: dict = {}
        self.strides: dict = {}
        self.decls: set = set()
        self.errors: list = []     # error code - 1 -> (op, what)
        self.values: dict = {}     # name -> Value
        self.flat = None           # the output of the flat loop being written

    # -- text ---------------------------------------------------------------------------------
    def tmp(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def label(self, p: str) -> str:
        self.n += 1
        return f"{p}{self.n}"

    def e(self, line: str) -> None:
        self.body.append("  " + line)

    def op(self, text: str) -> str:
        t = self.tmp()
        self.e(f"{t} = {text}")
        return t

    def block(self, lab: str) -> None:
        self.body.append(f"{lab}:")
        self.cur = lab

    def _slot(self, key) -> int:
        i = self.slot_of.get(key)
        if i is None:
            i = self.slot_of[key] = len(self.slots)
            self.slots.append(key)
        return i

    def dim(self, d) -> str:
        """LLVM i64 text of symbolic dim `d` (loaded once in the entry block)."""
        if d == 1:
            return "1"
        if d[0] == "const":
            return str(int(d[1]))
        t = self.dims.get(d)
        if t is None:
            i = self._slot(("dim", d))
            self.n += 1
            p, t = f"%da{self.n}", f"%d{self.n}"
            self.entry.append(f"  {p} = getelementptr i64, ptr %args, i64 {i}")
            self.entry.append(f"  {t} = load i64, ptr {p}")
            self.dims[d] = t
        return t

    def ptr(self, v: Value) -> str:
        while v.name in self.alias:
            v = self.alias[v.name]
        t = self.ptrs.get(v.name)
        if t is None:
            self.values.setdefault(v.name, v)
            i = self._slot(("ptr", v.name))
            self.n += 1
            p, q, t = f"%pa{self.n}", f"%pi{self.n}", f"%p{self.n}"
            self.entry.append(f"  {p} = getelementptr i64, ptr %args, i64 {i}")
            self.entry.append(f"  {q} = load i64, ptr {p}")
            self.entry.append(f"  {t} = inttoptr i64 {q} to ptr")
            self.ptrs[v.name] = t
        return t

    def stride(self, v: Value, k: int) -> str:
        """Elements between consecutive positions along axis k of C-contiguous `v`."""
        key = (v.name, k)
        s = self.strides.get(key)
        if s is None:
            s = "1"
            for j in range(k + 1, v.rank):
                if v.ones[j]:
                    continue
                d = self.dim(v.dims[j])
                if s == "1":
                    s = d
                else:
                    self.n += 1
                    t = f"%s{self.n}"
                    self.entry.append(f"  {t} = mul i64 {s}, {d}")
                    s = t
            self.strides[key] = s
        return s

    def size(self, v: Value) -> str:
        """Element count of `v`."""
        s = "1"
        for d, one in zip(v.dims, v.ones):
            if one:
                continue
            dd = self.dim(d)
            s = dd if s == "1" else self.op(f"mul i64 {s}, {dd}")
        return s

    def alloca(self, ty: str) -> str:
        self.n += 1
        t = f"%a{self.n}"
        self.entry.append(f"  {t} = alloca {ty}")
        return t

    def declare(self, text: str) -> None:
        self.decls.add(text)

    # -- control flow -------------------------------------------------------------------------
    def loop(self, n: str, body, start: str = "0", step: int = 1) -> None:
        """for i in range(start, n, step): body(i)  (i an i64 text)."""
        pre = self.cur
        h, b, x = self.label("h"), self.label("b"), self.label("x")
        i, nxt = self.tmp(), self.tmp()
        self.e(f"br label %{h}")
        self.block(h)
        latch_at = len(self.body)
        self.body.append(None)   # the phi, once the latch block is known
        c = self.op(f"icmp slt i64 {i}, {n}")
        self.e(f"br i1 {c}, label %{b}, label %{x}")
        self.block(b)
        body(i)
        self.e(f"{nxt} = add i64 {i}, {step}")
        latch = self.cur
        self.e(f"br label %{h}")
        self.body[latch_at] = f"  {i} = phi i64 [{start}, %{pre}], [{nxt}, %{latch}]"
        self.block(x)

    def loops(self, dims: tuple, ones: tuple, body, skip=()) -> None:
        """Nested loops over the non-unit dims not in `skip`; body(idx), idx one text per dim
        ("0" for unit or skipped dims)."""
        idx = ["0"] * len(dims)
        live = [k for k in range(len(dims)) if not ones[k] and k not in skip]

        def level(j: int) -> None:
            if j == len(live):
                body(list(idx))
                return
            k = live[j]

            def inner(i: str) -> None:
                idx[k] = i
                level(j + 1)
            self.loop(self.dim(dims[k]), inner)
        level(0)

    def if_then(self, cond: str, then) -> None:
        t, x = self.label("t"), self.label("j")
        self.e(f"br i1 {cond}, label %{t}, label %{x}")
        self.block(t)
        then()
        self.e(f"br label %{x}")
        self.block(x)

    # -- memory -------------------------------------------------------------------------------
    def offset(self, v: Value, idx: list, axes=None) -> str:
        """Linear position in `v` of the loop index `idx` (Load's alignment rules)."""
        if self.flat is not None and v.rank:
            return idx[0]   # a flat loop: every array operand has the output's shape class
        off = "0"
        rank = len(idx)
        for k in range(v.rank):
            if v.ones[k]:
                continue
            i = idx[axes[k]] if axes is not None else idx[rank - v.rank + k]
            if i == "0":
                continue
            s = self.stride(v, k)
            term = i if s == "1" else self.op(f"mul i64 {i}, {s}")
            off = term if off == "0" else self.op(f"add i64 {off}, {term}")
        return off

    def addr(self, v: Value, off: str) -> str:
        base = self.ptr(v)
        if off == "0":
            return base
        return self.op(f"getelementptr {_storage(v.dtype)}, ptr {base}, i64 {off}")

    def load_at(self, v: Value, off: str) -> _V:
        st = _storage(v.dtype)
        x = self.op(f"load {st}, ptr {self.addr(v, off)}")
        if v.dtype == "bool":
            return _V(self.op(f"icmp ne i8 {x}, 0"), "bool")
        if v.dtype in _INTS and v.dtype != "int64":
            return _V(self.op(f"sext {st} {x} to i64"), v.dtype)
        return _V(x, v.dtype)

    def store_at(self, v: Value, off: str, val: _V) -> None:
        val = self.conv(val, v.dtype)
        x = val.t
        st = _storage(v.dtype)
        if v.dtype == "bool":
            x = self.op(f"zext i1 {x} to i8")
        elif v.dtype in _INTS and v.dtype != "int64":
            x = self.op(f"trunc i64 {x} to {st}")
        self.e(f"store {st} {x}, ptr {self.addr(v, off)}")

    # -- scalars ------------------------------------------------------------------------------
    def conv(self, v: _V, to: str) -> _V:
        """Numba's conversion of scalar `v` to `to` (np.<to>(v), or a store)."""
        fr = v.dt
        if fr == to:
            return v
        if to in _FLOATS:
            ft = _FLOATS[to]
            if fr in _FLOATS:
                if fr == "float32":
                    return _V(self.op(f"fpext float {v.t} to double"), to)
                return _V(self.op(f"fptrunc double {v.t} to float"), to)
            if fr == "bool":
                return _V(self.op(f"uitofp i1 {v.t} to {ft}"), to)
            return _V(self.op(f"sitofp i64 {v.t} to {ft}"), to)
        if to == "bool":
            if fr in _FLOATS:
                return _V(self.op(f"fcmp une {_FLOATS[fr]} {v.t}, 0.0"), to)
            return _V(self.op(f"icmp ne i64 {v.t}, 0"), to)
        bits = _INTS[to]
        if fr in _FLOATS:
            x = self.op(f"fptosi {_FLOATS[fr]} {v.t} to i{bits}")
            if bits != 64:
                x = self.op(f"sext i{bits} {x} to i64")
            return _V(x, to)
        if fr == "bool":
            return _V(self.op(f"zext i1 {v.t} to i64"), to)
        if bits == 64:
            return _V(v.t, to)
        x = self.op(f"trunc i64 {v.t} to i{bits}")
        return _V(self.op(f"sext i{bits} {x} to i64"), to)

    def lit(self, value, dt: str) -> _V:
        """A typed literal: np.<dt>(value)."""
        _check_dtype(dt)
        if isinstance(value, bool):
            value = int(value)
        if dt in _FLOATS:
            return _V(_fconst(float(value), dt), dt)
        if dt == "bool":
            return _V("true" if value else "false", dt)
        try:
            v = np.array(value).astype(dt)[()] if isinstance(value, float) else \
                np.dtype(dt).type(int(value))
        except (OverflowError, ValueError):
            raise Unsupported(f"literal {value!r} of {dt}") from None
        return _V(str(int(v)), dt)

    @staticmethod
    def unify(a: str, b: str, what: str) -> str:
        """Numba's result type of arithmetic on scalars of types a and b."""
        if a in _FLOATS and b in _FLOATS:
            return "float64" if "float64" in (a, b) else "float32"
        if a in _FLOATS or b in _FLOATS:
            f, o = (a, b) if a in _FLOATS else (b, a)
            if f == "float64":
                return f
            if o in ("int32", "int64"):
                return "float64"
            raise Unsupported(f"{what} of {a} and {b}")
        return "int64"

    def call(self, name: str, dt: str, args: list) -> str:
        """A math function of float type `dt`."""
        ft = _FLOATS[dt]
        if name in _INTRINSIC:
            fn = f"llvm.{_INTRINSIC[name]}.{'f32' if dt == 'float32' else 'f64'}"
        else:
            fn = name + ("f" if dt == "float32" else "")
        self.declare(f"declare {ft} @{fn}({', '.join([ft] * len(args))})")
        return self.op(f"call {ft} @{fn}({', '.join(f'{ft} {a}' for a in args)})")

    def fop(self, op: str, a: str, b: str, dt: str) -> str:
        flags = ""   # strict IEEE: every compiled tier rounds alike
        return self.op(f"{op}{flags} {_FLOATS[dt]} {a}, {b}")

    def arith(self, fn: str, a: _V, b: _V) -> _V:
        t = self.unify(a.dt, b.dt, fn)
        a, b = self.conv(a, t), self.conv(b, t)
        if t in _FLOATS:
            return _V(self.fop({"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}[fn],
                               a.t, b.t, t), t)
        return _V(self.op(f"{ {'add': 'add', 'sub': 'sub', 'mul': 'mul'}[fn]} i64 {a.t}, {b.t}"),
                  t)

    def fmath(self, name: str, a: _V) -> _V:
        """math.<name>(a): float32 stays float32, integers become float64."""
        if a.dt == "bool":
            raise Unsupported(f"{name} of a bool")
        if a.dt not in _FLOATS:
            a = self.conv(a, "float64")
        return _V(self.call(name, a.dt, [a.t]), a.dt)

    def truth(self, a: _V) -> str:
        if a.dt == "bool":
            return a.t
        return self.conv(a, "bool").t

    def select(self, c: str, a: _V, b: _V) -> _V:
        if a.dt != b.dt:
            if a.dt in _FLOATS and b.dt in _FLOATS or a.dt in _INTS and b.dt in _INTS:
                t = self.unify(a.dt, b.dt, "select")
                a, b = self.conv(a, t), self.conv(b, t)
            else:
                raise Unsupported(f"select of {a.dt} and {b.dt}")
        return _V(self.op(f"select i1 {c}, {_reg(a.dt)} {a.t}, {_reg(a.dt)} {b.t}"), a.dt)

    def cmp(self, fn: str, a: _V, b: _V) -> _V:
        if a.dt == "bool" and b.dt == "bool":
            pred = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}
            return _V(self.op(f"icmp {pred[fn]} i1 {a.t}, {b.t}"), "bool")
        if "bool" in (a.dt, b.dt):
            if a.dt in _FLOATS or b.dt in _FLOATS:
                raise Unsupported("comparison of a bool and a float")
            a, b = self.conv(a, "int64"), self.conv(b, "int64")
        t = self.unify(a.dt, b.dt, fn)
        a, b = self.conv(a, t), self.conv(b, t)
        if t in _FLOATS:
            return _V(self.op(f"fcmp {_FCMP[fn]} {_FLOATS[t]} {a.t}, {b.t}"), "bool")
        return _V(self.op(f"icmp {_ICMP[fn]} i64 {a.t}, {b.t}"), "bool")

    def scalar(self, fn, args: list, dtype: str, lit_dtype: str) -> _V:
        """Scalar expression `fn` (Arg/Const/Call) over operand values `args`; `dtype` is the
        op's result dtype (it picks integer or float forms, as scalar_ops.TABLE does)."""
        if isinstance(fn, Arg):
            return args[fn.index]
        if isinstance(fn, Const):
            return self.lit(fn.value, lit_dtype)
        sub = [self.scalar(a, args, dtype, lit_dtype) for a in fn.args]
        return self.call_op(fn.fn, sub, dtype, lit_dtype)

    def call_op(self, f: str, s: list, dtype: str, lit_dtype: str) -> _V:
        if f in ("id", "cast"):
            return s[0]
        if f == "add":
            acc = s[0]
            for x in s[1:]:
                acc = self.arith("add", acc, x)
            return acc
        if f in ("sub", "mul"):
            return self.arith(f, s[0], s[1])
        if f == "div":
            a, b = s
            if a.dt not in _FLOATS and b.dt not in _FLOATS:
                if "bool" in (a.dt, b.dt):
                    raise Unsupported("division of bools")
                a, b = self.conv(a, "float64"), self.conv(b, "float64")
            return self.arith("div", a, b)
        if f == "neg":
            a, = s
            if a.dt in _FLOATS:
                return _V(self.op(f"fneg {_FLOATS[a.dt]} {a.t}"), a.dt)
            if a.dt == "bool":
                raise Unsupported("negation of a bool")
            return _V(self.op(f"sub i64 0, {a.t}"), "int64")
        if f in ("pow", "atan2"):   # libm's, in the wider float type of the two
            a, b = s
            if a.dt not in _FLOATS or b.dt not in _FLOATS:
                raise Unsupported(f"{f} of integers")
            t = self.unify(a.dt, b.dt, f)
            a, b = self.conv(a, t), self.conv(b, t)
            return _V(self.call(f, t, [a.t, b.t]), t)
        if f in ("floordiv", "floormod", "truncdiv", "truncmod"):
            return self.division(f, s[0], s[1], dtype.startswith("float"))
        if f in ("maximum", "minimum"):
            a, b = s
            if "bool" in (a.dt, b.dt):
                raise Unsupported(f"{f} of bools")
            t = self.unify(a.dt, b.dt, f)
            a, b = self.conv(a, t), self.conv(b, t)
            if t in _FLOATS:
                ft = _FLOATS[t]
                # NumPy's rule (Numba's np.maximum): a NaN operand wins, the first one first
                a_nan = self.op(f"fcmp uno {ft} {a.t}, {a.t}")
                any_nan = self.op(f"fcmp uno {ft} {a.t}, {b.t}")
                nan_res = self.op(f"select i1 {a_nan}, {ft} {a.t}, {ft} {b.t}")
                ge = self.op(f"fcmp {'oge' if f == 'maximum' else 'ole'} {ft} {a.t}, {b.t}")
                plain = self.op(f"select i1 {ge}, {ft} {a.t}, {ft} {b.t}")
                return _V(self.op(f"select i1 {any_nan}, {ft} {nan_res}, {ft} {plain}"), t)
            ge = self.op(f"icmp {'sge' if f == 'maximum' else 'sle'} i64 {a.t}, {b.t}")
            return _V(self.op(f"select i1 {ge}, i64 {a.t}, i64 {b.t}"), t)
        if f == "abs":
            a, = s
            if a.dt in _FLOATS:
                return _V(self.call("fabs", a.dt, [a.t]), a.dt)
            if a.dt == "bool":
                raise Unsupported("abs of a bool")
            neg = self.op(f"icmp slt i64 {a.t}, 0")
            m = self.op(f"sub i64 0, {a.t}")
            return _V(self.op(f"select i1 {neg}, i64 {m}, i64 {a.t}"), a.dt)
        if f == "sign":
            a, = s
            if a.dt in _FLOATS:
                # np.sign: -1, 1, or the operand itself (0, -0, NaN)
                ft = _FLOATS[a.dt]
                gt = self.op(f"fcmp ogt {ft} {a.t}, 0.0")
                lt = self.op(f"fcmp olt {ft} {a.t}, 0.0")
                x = self.op(f"select i1 {lt}, {ft} {_fconst(-1.0, a.dt)}, {ft} {a.t}")
                return _V(self.op(f"select i1 {gt}, {ft} {_fconst(1.0, a.dt)}, {ft} {x}"),
                          a.dt)
            if a.dt == "bool":
                raise Unsupported("sign of a bool")
            gt = self.op(f"icmp sgt i64 {a.t}, 0")
            lt = self.op(f"icmp slt i64 {a.t}, 0")
            x = self.op(f"select i1 {lt}, i64 -1, i64 0")
            return _V(self.op(f"select i1 {gt}, i64 1, i64 {x}"), a.dt)
        if f in ("sqrt", "exp", "log", "sin", "cos", "floor", "ceil", "rint") or f in _LIBM:
            return self.fmath(f, s[0])
        if f == "sigmoid":
            x, = s
            if x.dt not in _FLOATS:
                raise Unsupported("sigmoid of an integer")
            c0, c1 = self.lit(0, lit_dtype), self.lit(1, lit_dtype)
            # ((1 if x >= 0 else exp(x)) / (1 + exp(-|x|)))
            ge = self.cmp("ge", x, c0)
            ex = self.fmath("exp", x)
            num = self.select(ge.t, c1, ex)
            ax = self.call_op("abs", [x], dtype, lit_dtype)
            en = self.fmath("exp", self.call_op("neg", [ax], dtype, lit_dtype))
            return self.arith("div", num, self.arith("add", c1, en))
        if f == "softplus":
            x, = s
            if x.dt not in _FLOATS:
                raise Unsupported("softplus of an integer")
            c0 = self.lit(0, lit_dtype)
            # max(x, 0) + log1p(exp(-|x|)); Python's max keeps x unless 0 > x
            gt = self.cmp("gt", c0, x)
            mx = self.select(gt.t, c0, x)
            ax = self.call_op("abs", [x], dtype, lit_dtype)
            en = self.fmath("exp", self.call_op("neg", [ax], dtype, lit_dtype))
            return self.arith("add", mx, self.fmath("log1p", en))
        if f in ("isnan", "isfinite", "isinf"):
            a, = s
            if a.dt not in _FLOATS:
                return _V("true" if f == "isfinite" else "false", "bool")
            ft = _FLOATS[a.dt]
            if f == "isnan":
                return _V(self.op(f"fcmp uno {ft} {a.t}, {a.t}"), "bool")
            ab = self.call("fabs", a.dt, [a.t])
            inf = _fconst(math.inf, a.dt)
            pred = "olt" if f == "isfinite" else "oeq"
            return _V(self.op(f"fcmp {pred} {ft} {ab}, {inf}"), "bool")
        if f in _FCMP:
            return self.cmp(f, s[0], s[1])
        if f in ("and", "or"):
            a, b = s
            if a.dt != "bool" or b.dt != "bool":
                raise Unsupported(f"{f} of non-bools")
            return _V(self.op(f"{f} i1 {a.t}, {b.t}"), "bool")
        if f == "not":
            return _V(self.op(f"xor i1 {self.truth(s[0])}, true"), "bool")
        if f == "select":
            return self.select(self.truth(s[0]), s[1], s[2])
        raise Unsupported(f"scalar op {f}")

    def division(self, f: str, a: _V, b: _V, float_form: bool) -> _V:
        if float_form:
            if a.dt not in _FLOATS and b.dt not in _FLOATS:
                a, b = self.conv(a, "float64"), self.conv(b, "float64")
            t = self.unify(a.dt, b.dt, f)
            a, b = self.conv(a, t), self.conv(b, t)
            ft = _FLOATS[t]
            if f == "truncmod":   # np.fmod
                return _V(self.op(f"frem {ft} {a.t}, {b.t}"), t)
            if f in ("floordiv", "truncdiv"):
                q = self.fop("fdiv", a.t, b.t, t)
                return _V(self.call("floor", t, [q]) if f == "floordiv" else self.trunc(q, t), t)
            # np.mod: fmod, moved to the divisor's sign; a zero result takes its sign
            r = self.op(f"frem {ft} {a.t}, {b.t}")
            nz = self.op(f"fcmp une {ft} {r}, 0.0")
            rneg = self.op(f"fcmp olt {ft} {r}, 0.0")
            bneg = self.op(f"fcmp olt {ft} {b.t}, 0.0")
            diff = self.op(f"xor i1 {rneg}, {bneg}")
            fix = self.op(f"and i1 {nz}, {diff}")
            r2 = self.fop("fadd", r, b.t, t)
            r3 = self.op(f"select i1 {fix}, {ft} {r2}, {ft} {r}")
            self.declare(f"declare {ft} @llvm.copysign.{'f32' if t == 'float32' else 'f64'}"
                         f"({ft}, {ft})")
            z = self.op(f"call {ft} @llvm.copysign.{'f32' if t == 'float32' else 'f64'}"
                        f"({ft} 0.0, {ft} {b.t})")
            zr = self.op(f"fcmp oeq {ft} {r}, 0.0")
            return _V(self.op(f"select i1 {zr}, {ft} {z}, {ft} {r3}"), t)
        if a.dt in _FLOATS or b.dt in _FLOATS or "bool" in (a.dt, b.dt):
            raise Unsupported(f"integer {f} of {a.dt} and {b.dt}")
        # Python's flooring (or C's truncating) integer division in 64 bits; a divisor of 0
        # gives 0 (Numba's numpy error model), -1 negates (no overflow trap)
        zero = self.op(f"icmp eq i64 {b.t}, 0")
        m1 = self.op(f"icmp eq i64 {b.t}, -1")
        bad = self.op(f"or i1 {zero}, {m1}")
        d = self.op(f"select i1 {bad}, i64 1, i64 {b.t}")
        q = self.op(f"sdiv i64 {a.t}, {d}")
        r = self.op(f"srem i64 {a.t}, {d}")
        if f in ("floordiv", "floormod"):
            rnz = self.op(f"icmp ne i64 {r}, 0")
            rneg = self.op(f"icmp slt i64 {r}, 0")
            dneg = self.op(f"icmp slt i64 {d}, 0")
            diff = self.op(f"xor i1 {rneg}, {dneg}")
            fix = self.op(f"and i1 {rnz}, {diff}")
            if f == "floordiv":
                q1 = self.op(f"sub i64 {q}, 1")
                res = self.op(f"select i1 {fix}, i64 {q1}, i64 {q}")
            else:
                r1 = self.op(f"add i64 {r}, {d}")
                res = self.op(f"select i1 {fix}, i64 {r1}, i64 {r}")
        else:
            res = q if f == "truncdiv" else r
        neg = self.op(f"sub i64 0, {a.t}")
        special = self.op(f"select i1 {m1}, i64 {neg if f.endswith('div') else '0'}, i64 0")
        return _V(self.op(f"select i1 {bad}, i64 {special}, i64 {res}"), "int64")

    def trunc(self, q: str, t: str) -> str:
        ft = _FLOATS[t]
        fn = f"llvm.trunc.{'f32' if t == 'float32' else 'f64'}"
        self.declare(f"declare {ft} @{fn}({ft})")
        return self.op(f"call {ft} @{fn}({ft} {q})")

    # -- expressions --------------------------------------------------------------------------
    def expr(self, e, idx: list) -> _V:
        if isinstance(e, Lit):
            return self.lit(e.value, e.dtype)
        if isinstance(e, Load):
            v = e.value
            _check_dtype(v.dtype)
            if v.rank == 0:
                return self.load_at(v, "0")
            return self.load_at(v, self.offset(v, idx, e.axes))
        if isinstance(e, Index):
            return _V(idx[e.axis], "int64")
        if isinstance(e, DimValue):
            _check_dtype(e.dtype)
            return self.conv(_V(self.dim(e.dim), "int64"), e.dtype)
        if isinstance(e, Take):
            v = e.value
            _check_dtype(v.dtype)
            return self.load_at(v, self.item_offset(v, e.items, idx))
        if isinstance(e, Apply):
            _check_dtype(e.dtype)
            _check_dtype(e.lit_dtype)
            args = [self.expr(a, idx) for a in e.args]
            val = self.scalar(e.fn, args, e.dtype, e.lit_dtype)
            if e.cast:
                val = self.conv(val, e.dtype)
            return val
        raise Unsupported(f"expression {type(e).__name__}")

    def item_offset(self, v: Value, items: tuple, idx: list) -> str:
        """Linear position in `v` of Take/Region items (negative positions count from the end,
        as Numba's indexing does)."""
        if len(items) != v.rank:
            raise Unsupported("items do not match the rank")
        off = "0"
        for k, it in enumerate(items):
            kind = it[0]
            if kind == "fixed":
                p = self.dim(it[1]) if it[1] != 1 else "1"
            elif kind == "lin":
                _, start, stride, j = it
                i = idx[j]
                term = i if stride == 1 else self.op(f"mul i64 {i}, {int(stride)}")
                st = self.dim(start) if start != 1 else "1"
                p = term if st == "0" else self.op(f"add i64 {st}, {term}")
            elif kind == "mod":
                d = self.dim(it[2])
                z = self.op(f"icmp eq i64 {d}, 0")
                dd = self.op(f"select i1 {z}, i64 1, i64 {d}")
                p = self.op(f"srem i64 {idx[it[1]]}, {dd}")
            elif kind == "take":
                _, iv, axes = it
                _check_dtype(iv.dtype)
                if iv.dtype not in _INTS:
                    raise Unsupported("non-integer indices")
                p = self.load_at(iv, "0" if iv.rank == 0 else
                                 self.offset(iv, idx, axes if iv.rank else None)).t
            else:
                raise Unsupported(f"item {kind}")
            size = "1" if v.ones[k] else self.dim(v.dims[k])
            if not (p.lstrip("-").isdigit() and int(p) >= 0):
                neg = self.op(f"icmp slt i64 {p}, 0")
                pw = self.op(f"add i64 {p}, {size}")
                p = self.op(f"select i1 {neg}, i64 {pw}, i64 {p}")
            if p == "0":
                continue
            s = self.stride(v, k)
            term = p if s == "1" else self.op(f"mul i64 {p}, {s}")
            off = term if off == "0" else self.op(f"add i64 {off}, {term}")
        return off

    # -- statements ---------------------------------------------------------------------------
    def stmt(self, s) -> None:
        fn = _EMITTERS.get(type(s))
        if fn is None:
            raise Unsupported(f"statement {type(s).__name__}")
        fn(self, s)

    def s_loop(self, s: Loop) -> None:
        out = s.out
        _check_dtype(out.dtype)
        if out.rank == 0:
            self.store_at(out, "0", self.conv(self.expr(s.expr, []), out.dtype))
            return
        self.store_loop(out, s.expr, "set")

    def store_loop(self, out: Value, e, mode: str) -> None:
        def body(idx):
            off = self.offset(out, idx)
            val = self.expr(e, idx)
            if mode != "set":
                cur = self.load_at(out, off)
                val = self.arith("add" if mode == "add" else "sub", cur, val)
            self.store_at(out, off, val)
        if _flat(e, out):
            # every operand has the output's shape class (equal dims, after the kernel's
            # checks): one loop over the elements, the same position in each
            self.flat = out
            try:
                self.loop(self.size(out), lambda i: body([i]))
            finally:
                self.flat = None
            return
        self.loops(out.dims, out.ones, body)

    def s_assign(self, s: AssignVar) -> None:
        v = s.var
        _check_dtype(v.dtype)
        if v.rank == 0:
            val = self.expr(s.expr, [])
            if s.mode != "set":
                val = self.arith("add" if s.mode == "add" else "sub", self.load_at(v, "0"), val)
            self.store_at(v, "0", val)
            return
        self.store_loop(v, s.expr, s.mode)

    def s_copy(self, s: CopyVar) -> None:
        _check_dtype(s.var.dtype)
        if s.var.rank == 0:
            self.store_at(s.out, "0", self.load_at(s.var, "0"))
            return
        n = self.size(s.var)
        nb = self.op(f"mul i64 {n}, {_itemsize(s.var.dtype)}")
        self.declare("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)")
        self.e(f"call void @llvm.memcpy.p0.p0.i64(ptr {self.ptr(s.out)}, ptr {self.ptr(s.var)},"
               f" i64 {nb}, i1 false)")

    def s_view(self, s: View) -> None:
        src = s.src
        while src.name in self.alias:
            src = self.alias[src.name]
        self.alias[s.out.name] = src
        self.values.setdefault(s.out.name, s.out)

    def s_shape(self, s: ShapeOf) -> None:
        pass   # the wrapper fills it

    def s_alloc(self, s: Alloc) -> None:
        _check_dtype(s.out.dtype)
        if s.fill is None:
            self.ptr(s.out)
            return
        val = self.conv(self.expr(s.fill, []), s.out.dtype)
        n = self.size(s.out)
        self.loop(n, lambda i: self.store_at(s.out, i, val))

    def s_libcall(self, s: LibCall) -> None:
        """A window routine (convolution, pooling) through its C entry point (nnlib_c.py):
        data pointer and 4 sizes per array, then the int parameters."""
        from jitflow.backends.numba_cpu import nnlib_c
        arrays = list(s.args) + list(s.outs)
        dt = arrays[0].dtype
        if nnlib_c.ARITY.get(s.fn) != len(arrays) or len(s.params) != nnlib_c.PARAMS or any(
                v.dtype != dt or v.rank != 4 for v in arrays) or dt not in nnlib_c.DTYPES:
            raise Unsupported(f"library call {s.fn}")
        addr = nnlib_c.address(s.fn, dt, wait=_wait_for_libs())
        if addr is None:
            raise NotReady(f"{s.fn} of {dt} is being built")
        if not addr:
            raise Unsupported(f"library call {s.fn} of {dt} could not be built")
        name = _symbol(f"nn_{s.fn}_{dt}", addr)
        self.declare(f"declare void @{name}({', '.join(['ptr'] * 9)})")
        args = []
        for v in arrays:
            sizes = self.alloca("[4 x i64]")
            for j in range(4):
                d = "1" if v.ones[j] else self.dim(v.dims[j])
                q = self.op(f"getelementptr [4 x i64], ptr {sizes}, i64 0, i64 {j}")
                self.e(f"store i64 {d}, ptr {q}")
            args += [self.ptr(v), sizes]
        args += ["null", "null"] * (4 - len(arrays))
        ps = self.alloca(f"[{len(s.params)} x i64]")
        for j, p in enumerate(s.params):
            q = self.op(f"getelementptr [{len(s.params)} x i64], ptr {ps}, i64 0, i64 {j}")
            self.e(f"store i64 {int(p)}, ptr {q}")
        args.append(ps)
        self.e(f"call void @{name}({', '.join('ptr ' + a for a in args)})")

    def s_region(self, s: Region) -> None:
        out = s.out
        _check_dtype(out.dtype)

        def body(idx):
            val = self.expr(s.expr, idx)
            off = self.item_offset(out, s.items, idx)
            if s.mode == "add":
                val = self.arith("add", self.load_at(out, off), val)
            self.store_at(out, off, val)
        self.loops(s.dims, s.ones, body)

    def element_check(self, v: Value, bad, op: int, what: str) -> None:
        _check_dtype(v.dtype)
        if v.dtype not in _INTS:
            raise Unsupported("element check of a non-integer")
        self.errors.append((op, what))
        code = len(self.errors)

        def body(i):
            q = self.load_at(v, i)
            c = bad(q.t)
            self.if_then(c, lambda: self.e(f"ret i32 {code}"))
        if v.rank == 0:
            body("0")
        else:
            self.loop(self.size(v), body)

    def s_nonzero(self, c: NonZeroCheck) -> None:
        self.element_check(c.value, lambda q: self.op(f"icmp eq i64 {q}, 0"), c.op, c.what)

    def s_range(self, c: RangeCheck) -> None:
        def bad(q):
            lo = self.op(f"icmp slt i64 {q}, 0")
            hi = self.op(f"icmp sge i64 {q}, {self.dim(c.dim)}")
            return self.op(f"or i1 {lo}, {hi}")
        self.element_check(c.value, bad, c.op, c.what)

    def s_matmul(self, s: MatMul) -> None:
        a, b, out = s.a, s.b, s.out
        for v in (a, b, out):
            _check_dtype(v.dtype)
            if v.rank != 2:
                raise Unsupported("matmul of rank != 2")
        d = lambda v, k: "1" if v.ones[k] else self.dim(v.dims[k])   # noqa: E731
        m = d(a, 1) if s.ta else d(a, 0)
        kk = d(a, 0) if s.ta else d(a, 1)
        n = d(b, 0) if s.tb else d(b, 1)
        if out.dtype in _FLOATS and a.dtype == b.dtype == out.dtype:
            self.blas(s, m, n, kk)
            return
        if out.dtype not in _INTS or a.dtype != out.dtype or b.dtype != out.dtype:
            raise Unsupported(f"matmul of {a.dtype} and {b.dtype}")
        # integers: out = 0, then i-k-j loops (emit.py's order)
        size = self.size(out)
        zero = _V("0", out.dtype)
        self.loop(size, lambda i: self.store_at(out, i, zero))
        ca, cb = d(a, 1), d(b, 1)

        def at(v, r, c, cols):
            rc = self.op(f"mul i64 {r}, {cols}")
            return self.op(f"add i64 {rc}, {c}")

        def row(i):
            def kth(k):
                q = self.load_at(a, at(a, k, i, ca) if s.ta else at(a, i, k, ca))

                def col(j):
                    o = at(out, i, j, n)
                    bv = self.load_at(b, at(b, j, k, cb) if s.tb else at(b, k, j, cb))
                    self.store_at(out, o, self.arith("add", self.load_at(out, o),
                                                     self.arith("mul", q, bv)))
                self.loop(n, col)
            self.loop(kk, kth)
        self.loop(m, row)

    def blas(self, s: MatMul, m: str, n: str, k: str) -> None:
        """out (m x n, row-major) = op(a) op(b) as the column-major product
        out^T = op(b)^T op(a)^T: one ?gemm call."""
        dt = s.out.dtype
        name = _blas_symbol("sgemm" if dt == "float32" else "dgemm")
        ft = _FLOATS[dt]
        self.declare(f"declare void @{name}(ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, "
                     "ptr, ptr, ptr)")
        a, b, out = s.a, s.b, s.out
        # nothing to compute for an empty output; an empty inner dim gives zeros
        mz = self.op(f"icmp eq i64 {m}, 0")
        nz = self.op(f"icmp eq i64 {n}, 0")
        empty = self.op(f"or i1 {mz}, {nz}")
        kz = self.op(f"icmp eq i64 {k}, 0")
        go, zero, done = self.label("mm"), self.label("mz"), self.label("md")
        chk = self.label("mc")
        self.e(f"br i1 {empty}, label %{done}, label %{chk}")
        self.block(chk)
        self.e(f"br i1 {kz}, label %{zero}, label %{go}")
        self.block(zero)
        size = self.op(f"mul i64 {m}, {n}")
        self.loop(size, lambda i: self.store_at(out, i, _V(_fconst(0.0, dt), dt)))
        self.e(f"br label %{done}")
        self.block(go)

        def i32(x):
            p = self.alloca("i32")
            t = self.op(f"trunc i64 {x} to i32")
            self.e(f"store i32 {t}, ptr {p}")
            return p

        def ch(c):
            p = self.alloca("i8")
            self.e(f"store i8 {ord(c)}, ptr {p}")
            return p
        # the first BLAS operand is b: row-major b is (b^T in column-major), leading dim
        # its row length; transposing it again when tb
        ldb = n if not s.tb else k
        lda = k if not s.ta else m
        al, be = self.alloca(ft), self.alloca(ft)
        self.e(f"store {ft} {_fconst(1.0, dt)}, ptr {al}")
        self.e(f"store {ft} 0.0, ptr {be}")
        args = [ch("T" if s.tb else "N"), ch("T" if s.ta else "N"), i32(n), i32(m), i32(k),
                al, self.ptr(b), i32(ldb), self.ptr(a), i32(lda), be, self.ptr(out), i32(n)]
        self.e(f"call void @{name}({', '.join('ptr ' + x for x in args)})")
        self.e(f"br label %{done}")
        self.block(done)

    def s_reduce(self, s: Reduce) -> None:
        out = s.out
        _check_dtype(out.dtype)
        how = s.how
        arg = how in ("argmax", "argmin")
        if arg:
            how = how[3:]
            _check_dtype(s.in_dtype)
        if how not in ("sum", "mean", "l2", "prod", "max", "min"):
            raise Unsupported(f"reduction {s.how}")
        fdt = (s.in_dtype if arg else out.dtype) in _FLOATS
        if how in ("sum", "mean", "prod", "l2"):
            accdt = "float64" if fdt else "int64"
        else:
            accdt = s.in_dtype if arg else out.dtype
        rank = len(s.ones)
        axes = set(s.axes)
        red = [k for k in range(rank) if k in axes and not s.ones[k]]
        keep = [k for k in range(rank) if k not in axes]
        trailing = all(k < min(axes) for k in keep) if axes else True
        if arg and not trailing:
            raise Unsupported("arg reduction over leading axes")
        if how in ("sum", "mean", "l2"):
            init = self.lit(0, accdt)
        elif how == "prod":
            init = self.lit(1, accdt)
        elif fdt:
            init = self.lit(-math.inf if how == "max" else math.inf, accdt)
        elif accdt == "bool":
            init = _V("false" if how == "max" else "true", "bool")
        else:
            info = np.iinfo(accdt)
            init = _V(str(int(info.min if how == "max" else info.max)), accdt)
        cnt = "1"
        for k in range(rank):
            if k in axes and not s.ones[k]:
                d = self.dim(s.dims[k])
                cnt = d if cnt == "1" else self.op(f"mul i64 {cnt}, {d}")
        constant = trailing and _exact_constant(s.expr, how)
        split = trailing and (how in ("sum", "mean", "l2") and red and red[-1] == rank - 1
                              and not constant)
        chunk = _CHUNK if split and _calls_math(s.expr) else _LANES
        rt = _reg(accdt)
        acc = self.alloca(rt)
        ix = self.alloca("i64") if arg else None
        lanes = self.alloca(f"[{_LANES} x {rt}]") if split else None
        opos = self.alloca("i64")
        self.e(f"store i64 0, ptr {opos}")

        def term(idx) -> _V:
            val = self.expr(s.expr, idx)
            if how == "l2":
                val = self.arith("mul", val, val)
            return val

        def combine(cur: _V, val: _V) -> _V:
            if how in ("sum", "mean", "l2"):
                return self.arith("add", cur, self.conv(val, accdt) if accdt in _FLOATS
                                  else val)
            if how == "prod":
                return self.conv(self.arith("mul", cur, val), accdt)
            raise AssertionError(how)

        def minmax(idx) -> None:
            val = self.expr(s.expr, idx)
            if val.dt != accdt:
                raise Unsupported(f"{s.how} of {val.dt} into {accdt}")
            cur = _V(self.op(f"load {rt}, ptr {acc}"), accdt)
            better = self.cmp("gt" if how == "max" else "lt", val, cur)
            if accdt in _FLOATS:
                vnan = self.op(f"fcmp uno {rt} {val.t}, {val.t}")
                if arg:
                    cok = self.op(f"fcmp ord {rt} {cur.t}, {cur.t}")
                    vnan = self.op(f"and i1 {vnan}, {cok}")
                upd = self.op(f"or i1 {better.t}, {vnan}")
            else:
                upd = better.t

            def then():
                self.e(f"store {rt} {val.t}, ptr {acc}")
                if arg:
                    self.e(f"store i64 {idx[red[-1]] if red else '0'}, ptr {ix}")
            self.if_then(upd, then)

        def finish() -> _V:
            if arg:
                return self.conv(_V(self.op(f"load i64, ptr {ix}"), "int64"), out.dtype)
            a = _V(self.op(f"load {rt}, ptr {acc}"), accdt)
            if how == "l2":
                return self.conv(self.arith("mul", a, self.lit(0.5, "float64")), out.dtype)
            if how == "mean":
                if fdt:
                    c = self.conv(_V(cnt, "int64"), "float64")
                    return self.conv(self.arith("div", a, c), out.dtype)
                # integers: truncated toward zero (C division); an empty mean gives 0
                q = self.division("truncdiv", a, _V(cnt, "int64"), False)
                return self.conv(q, out.dtype)
            return self.conv(a, out.dtype)

        def per_output(idx) -> None:
            idx = list(idx)
            if constant:
                c = self.lit(_constant_value(s.expr), accdt)
                v = self.arith("mul", c, self.conv(_V(cnt, "int64"), accdt)
                               if accdt in _FLOATS else _V(cnt, "int64"))
                self.e(f"store {rt} {v.t}, ptr {acc}")
            else:
                self.e(f"store {rt} {init.t}, ptr {acc}")
            if arg:
                self.e(f"store i64 0, ptr {ix}")
            if split:
                for q in range(_LANES):
                    p = self.op(f"getelementptr [{_LANES} x {rt}], ptr {lanes}, i64 0, i64 {q}")
                    self.e(f"store {rt} {init.t}, ptr {p}")
            if not constant:
                inner = red[:-1] if split else red

                def level(j: int) -> None:
                    if j < len(inner):
                        k = inner[j]

                        def body(i):
                            idx[k] = i
                            level(j + 1)
                        self.loop(self.dim(s.dims[k]), body)
                        return
                    if not split:
                        if how in ("max", "min"):
                            minmax(idx)
                        else:
                            cur = _V(self.op(f"load {rt}, ptr {acc}"), accdt)
                            self.e(f"store {rt} {combine(cur, term(idx)).t}, ptr {acc}")
                        return
                    kl = red[-1]
                    n = self.dim(s.dims[kl])
                    r = self.op(f"srem i64 {n}, {chunk}")
                    m = self.op(f"sub i64 {n}, {r}")

                    def lane(i):
                        idx[kl] = i
                        q = self.op(f"and i64 {i}, {_LANES - 1}")
                        p = self.op(f"getelementptr [{_LANES} x {rt}], ptr {lanes}, i64 0, "
                                    f"i64 {q}")
                        cur = _V(self.op(f"load {rt}, ptr {p}"), accdt)
                        self.e(f"store {rt} {combine(cur, term(idx)).t}, ptr {p}")
                    self.loop(m, lane)

                    def tail(i):
                        idx[kl] = i
                        cur = _V(self.op(f"load {rt}, ptr {acc}"), accdt)
                        self.e(f"store {rt} {combine(cur, term(idx)).t}, ptr {acc}")
                    self.loop(n, tail, start=m)
                level(0)
                if split:
                    vals = []
                    for q in range(_LANES):
                        p = self.op(f"getelementptr [{_LANES} x {rt}], ptr {lanes}, i64 0, "
                                    f"i64 {q}")
                        vals.append(_V(self.op(f"load {rt}, ptr {p}"), accdt))
                    while len(vals) > 1:
                        vals = [self.arith("add", x, y) for x, y in zip(vals[::2], vals[1::2])]
                    cur = _V(self.op(f"load {rt}, ptr {acc}"), accdt)
                    self.e(f"store {rt} {self.arith('add', cur, vals[0]).t}, ptr {acc}")
            res = finish()
            o = self.op(f"load i64, ptr {opos}")
            self.store_at(out, o, res)
            o1 = self.op(f"add i64 {o}, 1")
            self.e(f"store i64 {o1}, ptr {opos}")
        self.loops(s.dims, s.ones, per_output, skip=axes)

    def s_row(self, s: RowOp) -> None:
        """Softmax-family ops, per row of the last axis: max, sum of exps (float64), then the
        outputs (emit.py's _row_body, step for step)."""
        x, how = s.x, s.how
        dt = x.dtype
        if dt not in _FLOATS or how not in ("softmax", "log_softmax", "xent", "sparse_xent"):
            raise Unsupported(f"RowOp {how} of {dt}")
        for o in s.outs:
            if o is not None:
                _check_dtype(o.dtype)
        if s.labels is not None:
            _check_dtype(s.labels.dtype)
            if how == "sparse_xent" and s.labels.dtype not in _INTS:
                raise Unsupported("sparse labels not integers")
            if how == "xent" and s.labels.dtype != dt:
                raise Unsupported("labels of another dtype")
        ft = _FLOATS[dt]
        c = "1" if x.ones[-1] else self.dim(x.dims[-1])
        rows = "1"
        for d, one in zip(x.dims[:-1], x.ones[:-1]):
            if not one:
                dd = self.dim(d)
                rows = dd if rows == "1" else self.op(f"mul i64 {rows}, {dd}")
        mv, sv, acc = self.alloca(ft), self.alloca("double"), self.alloca("double")
        zero = _V(_fconst(0.0, dt), dt)
        outs = list(s.outs)

        def row(r):
            base = self.op(f"mul i64 {r}, {c}")
            at = lambda j: self.op(f"add i64 {base}, {j}")   # noqa: E731
            self.e(f"store {ft} {_fconst(-math.inf, dt)}, ptr {mv}")

            def mx(j):
                xv = self.load_at(x, at(j))
                m = _V(self.op(f"load {ft}, ptr {mv}"), dt)
                gt = self.cmp("gt", xv, m)
                self.if_then(gt.t, lambda: self.e(f"store {ft} {xv.t}, ptr {mv}"))
            self.loop(c, mx)
            m0 = _V(self.op(f"load {ft}, ptr {mv}"), dt)
            fin = self.call_op("isfinite", [m0], dt, dt)
            m = self.select(fin.t, m0, zero)
            self.e("store double 0.0, ptr " + sv)

            def sm(j):
                e = self.fmath("exp", self.arith("sub", self.load_at(x, at(j)), m))
                cur = _V(self.op(f"load double, ptr {sv}"), "float64")
                self.e(f"store double {self.arith('add', cur, self.conv(e, 'float64')).t}, "
                       f"ptr {sv}")
            self.loop(c, sm)
            ssum = _V(self.op(f"load double, ptr {sv}"), "float64")
            ls = self.conv(self.fmath("log", self.conv(ssum, dt)), dt)
            if how == "softmax":
                y = outs[0]
                inv = self.conv(ssum, dt)

                def st(j):
                    e = self.fmath("exp", self.arith("sub", self.load_at(x, at(j)), m))
                    self.store_at(y, at(j), self.arith("div", e, inv))
                self.loop(c, st)
                return
            if how == "log_softmax":
                y = outs[0]

                def st2(j):
                    v = self.arith("sub", self.arith("sub", self.load_at(x, at(j)), m), ls)
                    self.store_at(y, at(j), v)
                self.loop(c, st2)
                return
            loss, bp = outs
            lab = s.labels
            if how == "sparse_xent":
                kq = self.load_at(lab, r)
                neg = self.op(f"icmp slt i64 {kq.t}, 0")
                kw = self.op(f"add i64 {kq.t}, {c}")
                k = self.op(f"select i1 {neg}, i64 {kw}, i64 {kq.t}")
                if loss is not None:
                    xk = self.load_at(x, at(k))
                    self.store_at(loss, r, self.arith("sub", ls, self.arith("sub", xk, m)))
                if bp is not None:
                    def st3(j):
                        p = self.fmath("exp", self.arith(
                            "sub", self.arith("sub", self.load_at(x, at(j)), m), ls))
                        eq = self.op(f"icmp eq i64 {j}, {kq.t}")
                        p1 = self.arith("sub", p, self.lit(1, dt))
                        self.store_at(bp, at(j), self.select(eq, p1, p))
                    self.loop(c, st3)
                return
            if loss is not None:
                self.e(f"store double 0.0, ptr {acc}")

                def xl(j):
                    t = self.arith("mul", self.load_at(lab, at(j)), self.arith(
                        "sub", ls, self.arith("sub", self.load_at(x, at(j)), m)))
                    cur = _V(self.op(f"load double, ptr {acc}"), "float64")
                    self.e(f"store double {self.arith('add', cur, t).t}, ptr {acc}")
                self.loop(c, xl)
                self.store_at(loss, r, _V(self.op(f"load double, ptr {acc}"), "float64"))
            if bp is not None:
                def xb(j):
                    p = self.fmath("exp", self.arith(
                        "sub", self.arith("sub", self.load_at(x, at(j)), m), ls))
                    self.store_at(bp, at(j), self.arith("sub", p, self.load_at(lab, at(j))))
                self.loop(c, xb)
        self.loop(rows, row)

    # -- the function -------------------------------------------------------------------------
    def function(self, name: str) -> str:
        k = self.k
        for v in list(k.inputs) + list(k.variables):
            _check_dtype(v.dtype)
        for c in k.checks:
            if isinstance(c, (NonZeroCheck, RangeCheck)):
                self.stmt(c)
        for s in k.stmts:
            self.stmt(s)
        self.e("ret i32 0")
        lines = [f"define i32 @{name}(ptr noalias %args) nounwind {{", "entry:"]
        lines += self.entry
        lines.append("  br label %body")
        lines.append("body:")
        lines += self.body
        lines.append("}")
        return "\n".join(sorted(self.decls) + [""] + lines) + "\n"


def _flat(e, out: Value) -> bool:
    """Whether expression `e` stored over `out` can be one flat loop: it reads only scalars
    and arrays of exactly `out`'s rank and shape class through plain Loads (no positions:
    Index, Take, Loads with axes)."""
    if out.rank == 0:
        return False
    if isinstance(e, Load):
        v = e.value
        return v.rank == 0 or e.axes is None and v.rank == out.rank and v.ones == out.ones
    if isinstance(e, (Lit, DimValue)):
        return True
    if isinstance(e, Apply):
        return all(_flat(a, out) for a in e.args)
    return False


_EMITTERS = {
    Loop: _Gen.s_loop, Reduce: _Gen.s_reduce, MatMul: _Gen.s_matmul, AssignVar: _Gen.s_assign,
    CopyVar: _Gen.s_copy, View: _Gen.s_view, ShapeOf: _Gen.s_shape, Alloc: _Gen.s_alloc,
    Region: _Gen.s_region, NonZeroCheck: _Gen.s_nonzero, RangeCheck: _Gen.s_range,
    RowOp: _Gen.s_row, LibCall: _Gen.s_libcall,
}


# -- the Python wrapper -----------------------------------------------------------------------
def _shape_text(dims) -> str:
    return "(" + "".join(dim_text(d) + ", " for d in dims) + ")"


def _wrapper_source(k: Kernel, g: _Gen, lits: list) -> str:
    """The Python function around the LLVM one: shapes, checks, buffers, one call, results
    (literal results are appended to `lits`)."""
    poison = poison_enabled()
    L = ["def kernel(ins, vs):"]
    for v in k.inputs:
        L.append(f"    {v.name} = ins[{v.slot}]")
        if v.rank:
            L.append(f"    {''.join(f'd{v.slot}_{j}, ' for j in range(v.rank))}= {v.name}.shape")
    for v in k.variables:
        L.append(f"    {v.name} = vs[{v.slot}]")
        if v.rank:
            L.append(f"    {''.join(f'e{v.slot}_{j}, ' for j in range(v.rank))}= {v.name}.shape")
    dims = [c for c in k.checks if isinstance(c, Check)]
    if dims:
        cond = " or ".join(f"{dim_text(c.a)} != {dim_text(c.b)}" for c in dims)
        L.append(f"    if {cond}:")
        msg = f"{ERROR_PREFIX}{dims[0].op}:{dims[0].what}"
        L.append(f"        raise ValueError({msg!r})")

    def new(v: Value) -> str:
        shape = _shape_text(v.dims)
        dt = "_np.bool_" if v.dtype == "bool" else f"_np.{v.dtype}"
        if poison:
            return f"_np.full({shape}, {_POISON.get(v.dtype, '0')}, {dt})"
        return f"_np.empty({shape}, {dt})"
    made = {v.name for v in list(k.inputs) + list(k.variables)}
    for s in k.stmts:
        outs = []
        if isinstance(s, (Loop, Reduce, MatMul, CopyVar, Alloc)):
            outs = [s.out]
        elif isinstance(s, LibCall):
            outs = list(s.outs)
        elif isinstance(s, RowOp):
            outs = [o for o in s.outs if o is not None]
        elif isinstance(s, View):
            L.append(f"    {s.out.name} = {s.src.name}.reshape({_shape_text(s.out.dims)})")
            made.add(s.out.name)
            continue
        elif isinstance(s, ShapeOf):
            dt = f"_np.{s.out.dtype}"
            L.append(f"    {s.out.name} = _np.array({_shape_text(s.dims)}, {dt})")
            made.add(s.out.name)
            continue
        for o in outs:
            if o.name not in made:
                made.add(o.name)
                L.append(f"    {o.name} = {new(o)}")
    parts = []
    for kind, key in g.slots:
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
    for r in k.results:
        if isinstance(r, Lit):
            lits.append(np.array(r.value, r.dtype)[()])
            res.append(f"_LITS[{len(lits) - 1}]")
        elif r.rank == 0:
            res.append(f"{r.name}[()]")
        elif r.kind == "in":
            res.append(f"{r.name}.copy()")
        else:
            res.append(r.name)
    L.append(f"    return ({''.join(x + ', ' for x in res)})")
    return "\n".join(L) + "\n"


# -- LLVM -------------------------------------------------------------------------------------
_LOCK = threading.RLock()


def _codegen_opt() -> int:
    """LLVM's optimization level for tier 1 (JITFLOW_TIER1_OPT). 0, the default: a few cheap
    function passes and the code generator's fast instruction selector (level 2's code
    generator compiles ~6x slower for code ~1.5x faster; tier 1 runs only until the Numba
    kernel is ready). 2 or 3: LLVM's whole pipeline with its vectorizers too (measured: a
    1e6-element arithmetic chain 55 -> 12 ms per run, but a 1,400-op training step's first
    result 0.5 -> 3.5 s)."""
    try:
        return min(3, max(0, config.get("JITFLOW_TIER1_OPT")))
    except ValueError:
        return 0
_STATE: dict = {}
_BLAS: dict = {}   # BLAS routine -> address, and bound LLVM symbol -> address


def warm_up() -> None:
    """Load LLVM and make the engine now (~45 ms, once per process), so that the first kernel
    tier 1 builds pays only for itself: the backend runs this on the compiler thread when it
    is created, while the user's graph is still being built and initialized. (BLAS is bound
    by the first kernel with a product: loading it costs more than LLVM, for kernels that
    may never need it.)"""
    _engine()


def _engine():
    """The process-wide execution engine (made on first use)."""
    ee = _STATE.get("engine")
    if ee is not None:
        return ee
    with _LOCK:
        return _make_engine()


def _make_engine():
    ee = _STATE.get("engine")
    if ee is None:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        libm = ctypes.util.find_library("m")
        if libm:
            try:
                llvm.load_library_permanently(libm)
            except RuntimeError:
                pass
        target = llvm.Target.from_default_triple()
        tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                          features=llvm.get_host_cpu_features().flatten(),
                                          opt=_codegen_opt(), jit=True)
        ctx = llvm.create_context()
        ee = llvm.create_mcjit_compiler(llvm.parse_assembly("", context=ctx), tm)
        _STATE.update(engine=ee, tm=tm, llvm=llvm, ctx=ctx, n=0)
    return ee


def _symbol(name: str, addr: int) -> str:
    """The LLVM name bound to the native function at `addr` (a library's C entry point)."""
    sym = f"jitflow_t1_{name}"
    with _LOCK:
        if _BLAS.get(sym) != addr:
            _engine()
            _STATE["llvm"].add_symbol(sym, addr)
            _BLAS[sym] = addr
    return sym


def _wait_for_libs() -> bool:
    """Whether a kernel's library routines are built at once (JITFLOW_COMPILE=tier1: tier 1
    alone, deterministic) rather than on their own thread while the references run."""
    from jitflow.backends.numba_cpu import background
    return background.mode() == "tier1"


def missing_libs(kernel: Kernel) -> list:
    """The window routines `kernel` calls whose C entry points are not built yet (requests
    them: they build on their own thread). Empty under JITFLOW_COMPILE=tier1 (they are built
    when the kernel is)."""
    if _wait_for_libs():
        return []
    from jitflow.backends.numba_cpu import nnlib_c
    out = []
    for s in kernel.stmts:
        if isinstance(s, LibCall) and s.args and s.args[0].dtype in nnlib_c.DTYPES:
            if nnlib_c.address(s.fn, s.args[0].dtype) is None:
                out.append(s.fn)
    return out


def _blas_symbol(name: str) -> str:
    """The LLVM name bound to scipy's BLAS routine `name` (Fortran convention)."""
    with _LOCK:
        addr = _BLAS.get(name)
        if addr is None:
            cap = _cython_blas().__pyx_capi__[name]
            get_name = ctypes.pythonapi.PyCapsule_GetName
            get_name.restype = ctypes.c_char_p
            get_name.argtypes = [ctypes.py_object]
            get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
            get_ptr.restype = ctypes.c_void_p
            get_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
            addr = _BLAS[name] = get_ptr(cap, get_name(cap))
        return _symbol(name, addr)


def _cython_blas():
    """scipy.linalg.cython_blas, loaded without running scipy.linalg's __init__ (which
    imports most of scipy: ~0.4 s, more than tier 1's whole compile)."""
    import sys
    mod = sys.modules.get("scipy.linalg.cython_blas")
    if mod is not None:
        return mod
    try:
        import importlib.machinery
        import importlib.util
        import os
        import scipy
        folder = os.path.join(os.path.dirname(scipy.__file__), "linalg")
        files = [f for f in os.listdir(folder)
                 if f.startswith("cython_blas.") and f.endswith((".so", ".pyd"))]
        path = os.path.join(folder, files[0])
        loader = importlib.machinery.ExtensionFileLoader("scipy.linalg.cython_blas", path)
        spec = importlib.util.spec_from_file_location("scipy.linalg.cython_blas", path,
                                                      loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        sys.modules["scipy.linalg.cython_blas"] = mod
        return mod
    except Exception:  # noqa: BLE001  (any layout surprise: the ordinary import)
        try:
            from scipy.linalg import cython_blas
        except ImportError:
            raise Unsupported("no BLAS (scipy)") from None
        return cython_blas


def _optimize(mod) -> None:
    llvm = _STATE["llvm"]
    level = _codegen_opt()
    pb = _STATE.get("pb")
    if pb is None:
        pto = llvm.create_pipeline_tuning_options(speed_level=max(1, level))
        if level >= 2:
            pto.loop_vectorization = True
            pto.slp_vectorization = True
        pb = _STATE["pb"] = llvm.create_pass_builder(_STATE["tm"], pto)
    if level >= 2:
        # LLVM's whole pipeline at that level (vectorizers included): faster code, slower
        # compiles
        pb.getModulePassManager().run(mod, pb)
        return
    # scalars out of their stack slots, then the cheap clean-ups (the rest is the code
    # generator's)
    pm = llvm.create_new_function_pass_manager()
    pm.add_sroa_pass()
    pm.add_instruction_combine_pass()
    pm.add_simplify_cfg_pass()
    for f in mod.functions:
        if not f.is_declaration:
            pm.run(f, pb)


def compile_ir(text: str, name: str) -> int:
    """Compile LLVM IR text into the process engine; the address of function `name`."""
    with _LOCK:
        ee = _engine()
        llvm = _STATE["llvm"]
        mod = llvm.parse_assembly(text, context=_STATE["ctx"])
        mod.verify()
        _optimize(mod)
        ee.add_module(mod)
        ee.finalize_object()
        return ee.get_function_address(name)


_CACHE: dict = {}   # (kernel source, poison) -> callable (identical kernels share code)
_CFN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)


def build(kernel: Kernel, key=None):
    """The tier-1 callable of `kernel`: `fn(ins, vs) -> tuple`, the Numba kernel's convention
    (same results, same `ValueError("jitflow:<op>:<what>")` on failed checks). Identical
    kernels share their code: found by `key` (the kernel's Numba source, when there is one)
    before anything is generated, else by the generated LLVM IR and wrapper. Raises
    `Unsupported`."""
    # Numba's source is generic in its arguments' dtypes (Numba specializes on them): the key
    # adds the kernel's argument classes
    ck = None if key is None else (key, poison_enabled(), tuple(
        (v.kind, v.slot, v.dtype, v.ones) for v in list(kernel.inputs) + list(kernel.variables)))
    if ck is not None:
        fn = _CACHE.get(ck)
        if fn is not None:
            return fn
    try:
        g = _Gen(kernel)
        text = g.function(_NAME)
        lits: list = []
        src = _wrapper_source(kernel, g, lits)
    except Unsupported as e:
        STATS["unsupported"] += 1
        why = str(e.args[0]) if e.args else "?"
        STATS["reasons"][why] = STATS["reasons"].get(why, 0) + 1
        raise
    gk = (text, src, tuple((x.dtype.name, repr(x)) for x in lits), tuple(g.errors),
          poison_enabled())
    fn = _CACHE.get(gk)
    if fn is None:
        with _LOCK:
            _STATE["n"] = _STATE.get("n", 0) + 1
            name = f"jitflow_t1_{_STATE['n']}"
        text = text.replace(f"@{_NAME}(", f"@{name}(", 1)
        addr = compile_ir(text, name)
        cfn = _CFN(addr)
        errors = {i + 1: f"{ERROR_PREFIX}{op}:{what}" for i, (op, what) in enumerate(g.errors)}
        env = {"_np": np, "np": np, "_fn": cfn, "_ERRORS": errors, "_LITS": lits, "min": min,
               "max": max}
        exec(compile(src, "<jitflow tier-1 wrapper>", "exec"), env)
        fn = env["kernel"]
        fn.llvm_ir = text
        fn.wrapper_source = src
        STATS["built"] += 1
        _CACHE[gk] = fn
    if ck is not None:
        _CACHE[ck] = fn
    return fn


_NAME = "jitflow_t1_kernel"   # the function's name in generated IR, before it gets its own
