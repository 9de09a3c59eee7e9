"""The loop-level form: a kernel (ir.py) as explicit loops over typed scalar operations.

Every CPU printer prints this form and decides nothing: the Python printer (Numba source),
the LLVM printer (the fast path) and the parallel variant print the same statements, so they
compute the same operations in the same order, and with strict IEEE arithmetic (no fast-math
flags, FMAs only where an `fma` is written) they give the same bits. What a kernel computes is
decided here, once: the loops and their order, the accumulation order of reductions (lanes,
chunks, the pairwise combine), the NaN rules of maximum/minimum, integer division by zero,
conversions, the checks and their order.

**Types.** Scalars in registers are `float32`, `float64`, `int64` (every integer is computed in
64 bits, as Numba does, and wrapped to its dtype where an op says so) and `bool`. Buffers hold
any numeric dtype; a load widens to the register type, a store narrows.

**Expressions** (`Expr`): `Lit(value, dt)`, `Local(name, dt)`, `DimOf(dim)` (a symbolic dim of
ir.py, int64), `Load(buf, index)` and `Prim(op, args, dt)`, `op` one of `PRIMS`: IEEE float
arithmetic, 64-bit integer arithmetic, comparisons, `select`, conversions, LLVM's exact
intrinsics (floor, sqrt, fma...), jitflow's math library (exp, log, tanh, sigmoid, log1p,
expm1, pow32: backends/numba_cpu/mathlib.py) and named libm functions.

**Statements**: `Let` (a new scalar, assigned once), `Set` (a mutable scalar declared with
`Var`), `Store`, `For`, `If`, `Fail` (a check failed: nothing was written), `Call` (a library
routine: BLAS, the window library), `Alloc`, `View`, `Copy`. Every statement carries the index
of the op it belongs to (`op`), for the printers' `# op name` tags.

**Buffers** (`Buf`) are C-contiguous arrays with symbolic dims: a `Load`/`Store` index is one
index per dim (unit dims take 0) or, with `flat`, one index into the elements.
"""
from __future__ import annotations

import math
import struct
from typing import Optional

import numpy as np

__all__ = ["walk", "Lit", "Local", "DimOf", "Load", "Prim", "Let", "Var", "Set", "Store", "For",
           "If", "Fail", "Call", "Alloc", "View", "Copy", "Buf", "LoopKernel", "PRIMS", "FLOATS",
           "REG", "Scalars", "Unsupported", "reg_type", "float_bits"]

FLOATS = ("float32", "float64")
_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16,
         "uint32": 32, "uint64": 64}
STORAGE = set(_INTS) | set(FLOATS) | {"bool"}
REG = ("float32", "float64", "int64", "bool")


class Unsupported(Exception):
    """This kernel cannot be written in the loop-level form (its ops run another way)."""


def reg_type(dt: str) -> str:
    """The register type of values of dtype `dt`."""
    if dt in FLOATS or dt == "bool":
        return dt
    if dt in _INTS:
        if dt == "uint64":
            raise Unsupported("uint64 arithmetic")
        return "int64"
    raise Unsupported(f"dtype {dt}")


def float_bits(v: float, dt: str) -> float:
    """`v` rounded to `dt` (what a literal of that dtype holds)."""
    if dt == "float32":
        return float(np.float32(v))
    return float(v)


# -- expressions ----------------------------------------------------------------------------------
class Expr:
    __slots__ = ("dt",)


class Lit(Expr):
    """A typed literal."""

    __slots__ = ("value",)

    def __init__(self, value, dt: str) -> None:
        self.dt = dt
        if dt in FLOATS:
            value = float_bits(float(value), dt)
        elif dt == "bool":
            value = bool(value)
        else:
            value = int(value)
        self.value = value

    def __repr__(self) -> str:
        return f"Lit({self.value!r}, {self.dt})"


class Local(Expr):
    """A scalar named by a `Let` or a `Var`."""

    __slots__ = ("name",)

    def __init__(self, name: str, dt: str) -> None:
        self.name = name
        self.dt = dt

    def __repr__(self) -> str:
        return f"Local({self.name})"


class DimOf(Expr):
    """The runtime value of a symbolic dim (int64)."""

    __slots__ = ("dim",)

    def __init__(self, dim) -> None:
        self.dim = dim
        self.dt = "int64"


class Load(Expr):
    """`buf` at `index` (a list: one int64 expression per dim, or one with `flat`), widened to
    its register type."""

    __slots__ = ("buf", "index", "flat")

    def __init__(self, buf: "Buf", index: list, flat: bool = False) -> None:
        self.buf = buf
        self.index = index
        self.flat = flat
        self.dt = reg_type(buf.dtype)


class Prim(Expr):
    """Primitive `op` (see PRIMS) over `args`, of register type `dt`."""

    __slots__ = ("op", "args")

    def __init__(self, op: str, args: list, dt: str) -> None:
        self.op = op
        self.args = args
        self.dt = dt

    def __repr__(self) -> str:
        return f"{self.op}({', '.join(map(repr, self.args))}):{self.dt}"


#: primitive op -> (operand count, kind). Semantics are LLVM's instruction of the same name on
#: the operands' register types (no fast-math flags):
#:   "f": float arithmetic (both operands of the result type), "i": int64 arithmetic (wraps;
#:   "sdiv"/"srem" only where the lowering has ruled out 0 and -1 trouble), "fcmp.*"/"icmp.*":
#:   comparisons -> bool, "b": bool logic, "select": (bool, a, b), "cast": conversions named by
#:   their result (see `Scalars.conv`), "x": exact intrinsics, "m": jitflow's math library,
#:   "libm.<name>": a C math function of the operand's float type.
PRIMS = {
    "fadd": (2, "f"), "fsub": (2, "f"), "fmul": (2, "f"), "fdiv": (2, "f"), "frem": (2, "f"),
    "fneg": (1, "f"),
    "add": (2, "i"), "sub": (2, "i"), "mul": (2, "i"), "sdiv": (2, "i"), "srem": (2, "i"),
    "and": (2, "b"), "or": (2, "b"), "xor": (2, "b"), "not": (1, "b"),
    "select": (3, "s"),
    # conversions: "fpext" f32->f64, "fptrunc" f64->f32, "sitofp" int->float, "uitofp"
    # bool->float, "fptosi" float->int64 (through the named width: "fptosi.32" wraps through
    # int32), "wrap.N" int64 -> N-bit two's complement (and back), "zext" bool->int64,
    # "tobool" float/int -> bool (!= 0)
    "fpext": (1, "c"), "fptrunc": (1, "c"), "sitofp": (1, "c"), "uitofp": (1, "c"),
    "fptosi": (1, "c"), "zext": (1, "c"), "tobool": (1, "c"),
    "floor": (1, "x"), "ceil": (1, "x"), "rint": (1, "x"), "trunc": (1, "x"), "sqrt": (1, "x"),
    "fabs": (1, "x"), "copysign": (2, "x"), "fma": (3, "x"),
    "exp": (1, "m"), "log": (1, "m"), "tanh": (1, "m"), "sigmoid": (1, "m"), "log1p": (1, "m"),
    "expm1": (1, "m"), "pow": (2, "m"),
}
for _bits in (8, 16, 32):
    PRIMS[f"wrap.{_bits}"] = (1, "c")
    PRIMS[f"uwrap.{_bits}"] = (1, "c")
    PRIMS[f"fptosi.{_bits}"] = (1, "c")
    PRIMS[f"fptoui.{_bits}"] = (1, "c")
for _p in ("oeq", "une", "olt", "ole", "ogt", "oge", "uno", "ord"):
    PRIMS[f"fcmp.{_p}"] = (2, "p")
for _p in ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"):
    PRIMS[f"icmp.{_p}"] = (2, "p")
#: C math functions without a jitflow implementation (float32 calls the "f" form)
LIBM = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
        "erf", "atan2", "pow", "exp", "log", "tanh", "log1p", "expm1")
for _f in LIBM:
    PRIMS[f"libm.{_f}"] = (2 if _f in ("atan2", "pow") else 1, "l")
#: math functions jitflow implements itself (vectorizable; the same bits on every printer),
#: by dtype
MATH = {("exp", "float32"), ("exp", "float64"), ("log", "float32"), ("log", "float64"),
        ("tanh", "float32"), ("tanh", "float64"), ("sigmoid", "float32"),
        ("sigmoid", "float64"), ("log1p", "float32"), ("log1p", "float64"),
        ("expm1", "float32"), ("expm1", "float64"), ("pow", "float32")}


# -- statements -----------------------------------------------------------------------------------
class Stmt:
    __slots__ = ("op",)


class Let(Stmt):
    """name = expr (assigned once; its scope is the enclosing block)."""

    __slots__ = ("name", "expr")

    def __init__(self, name: str, expr: Expr, op: int) -> None:
        self.name = name
        self.expr = expr
        self.op = op


class Var(Stmt):
    """A mutable scalar `name` of type `dt`, starting at `init` (accumulators, positions)."""

    __slots__ = ("name", "dt", "init")

    def __init__(self, name: str, dt: str, init: Expr, op: int) -> None:
        self.name = name
        self.dt = dt
        self.init = init
        self.op = op


class Set(Stmt):
    """name = expr, for a `Var`."""

    __slots__ = ("name", "expr")

    def __init__(self, name: str, expr: Expr, op: int) -> None:
        self.name = name
        self.expr = expr
        self.op = op


class Store(Stmt):
    """buf[index] = expr (narrowed to buf's dtype)."""

    __slots__ = ("buf", "index", "expr", "flat")

    def __init__(self, buf: "Buf", index: list, expr: Expr, op: int,
                 flat: bool = False) -> None:
        self.buf = buf
        self.index = index
        self.expr = expr
        self.op = op
        self.flat = flat


class For(Stmt):
    """for var in range(start, stop, step): body. `parallel`: iterations touch disjoint
    elements and share no scalar (the parallel variant runs them on threads)."""

    __slots__ = ("var", "start", "stop", "step", "body", "parallel")

    def __init__(self, var: str, start: Expr, stop: Expr, body: list, op: int, step: int = 1,
                 parallel: bool = False) -> None:
        self.var = var
        self.start = start
        self.stop = stop
        self.step = step
        self.body = body
        self.op = op
        self.parallel = parallel


class If(Stmt):
    __slots__ = ("cond", "then", "orelse")

    def __init__(self, cond: Expr, then: list, orelse: Optional[list], op: int) -> None:
        self.cond = cond
        self.then = then
        self.orelse = orelse or []
        self.op = op


class Fail(Stmt):
    """A check failed: the kernel returns error `code` (1-based index into the kernel's
    `errors`) having written nothing the caller keeps."""

    __slots__ = ("code",)

    def __init__(self, code: int, op: int) -> None:
        self.code = code
        self.op = op


class Call(Stmt):
    """A library routine: `fn` names it. "gemm": args (ta, tb, m, n, k, a, b, out), out (m x n)
    = op(a) @ op(b) (Python bools, int64 expressions, buffers; zeros when k is 0);
    "nnlib.<routine>": args ([input bufs], [output bufs], [int params]), the window library's
    routine (its outputs allocated before)."""

    __slots__ = ("fn", "args")

    def __init__(self, fn: str, args: list, op: int) -> None:
        self.fn = fn
        self.args = args
        self.op = op


class Alloc(Stmt):
    """`buf` comes into existence here (uninitialized, or poisoned under JITFLOW_POISON)."""

    __slots__ = ("buf",)

    def __init__(self, buf: "Buf", op: int) -> None:
        self.buf = buf
        self.op = op


class View(Stmt):
    """`out` is `src`'s elements with other dims (same memory)."""

    __slots__ = ("out", "src")

    def __init__(self, out: "Buf", src: "Buf", op: int) -> None:
        self.out = out
        self.src = src
        self.op = op


class Copy(Stmt):
    """`out` is a new copy of `src` (same dims)."""

    __slots__ = ("out", "src")

    def __init__(self, out: "Buf", src: "Buf", op: int) -> None:
        self.out = out
        self.src = src
        self.op = op


class Buf:
    """A C-contiguous array: `kind` "in" (argument `slot` of `ins`), "var" (of `vs`, written
    in place), "tmp" (made by the kernel, maybe returned), "scratch" (a small fixed-size work
    array, `dims` constant); `ones[k]`: dim k is 1 by shape class."""

    __slots__ = ("name", "kind", "slot", "dtype", "dims", "ones", "poison")

    def __init__(self, name: str, kind: str, slot: int, dtype: str, dims: tuple,
                 ones: tuple) -> None:
        if dtype not in STORAGE:
            raise Unsupported(f"dtype {dtype}")
        self.name = name
        self.kind = kind
        self.slot = slot
        self.dtype = dtype
        self.dims = tuple(dims)
        self.ones = tuple(ones)
        self.poison = kind == "tmp"

    @property
    def rank(self) -> int:
        return len(self.dims)

    def __repr__(self) -> str:
        return f"Buf({self.name})"


class LoopKernel:
    """One kernel in the loop-level form.

    `inputs`/`variables`: the argument buffers (rank-0 inputs are scalars read once: see
    `scalar_inputs`); `dim_checks`: (a, b, op, what) dims that must be equal, tested before
    anything runs (failure: error 1 names the first); `body`: the statements; `results`:
    per requested output a Buf, a Local (rank 0) or a Lit; `errors`: (op index, what) per
    error code; `op_names`: op index -> name (tags)."""

    def __init__(self) -> None:
        self.inputs: list = []
        self.variables: list = []
        self.dim_checks: list = []
        self.body: list = []
        self.results: list = []
        self.errors: list = []
        self.op_names: list = []
        self.buffers: list = []    # every Buf the body allocates ("tmp"), in order
        self.scratch: list = []    # every "scratch" Buf
        self.views: list = []      # (src, out) of every View
        self.result_dtypes: list = []   # the dtype of each result
        self.scalar_results: list = []  # (index, dtype) of the rank-0 results computed

    def error(self, op: int, what: str) -> int:
        """The code of error (op, what), added on first use."""
        key = (op, what)
        if key in self.errors:
            return self.errors.index(key) + 1
        self.errors.append(key)
        return len(self.errors)


# -- scalar semantics: Numba's typing of the kernel IR's scalar ops, as primitives -------------
def _f(op: str, a: Expr, b: Expr) -> Prim:
    return Prim(op, [a, b], a.dt)


class Scalars:
    """Builds the primitive expression of one scalar op of the kernel IR, with the typing and
    semantics the CPU kernels have always had (Numba's: narrow integers computed in 64 bits,
    int / int is float64, float32 op float64 is float64, float32 op int32/int64 is float64,
    NumPy's NaN rules for maximum/minimum, Python's flooring integer division with 0 for a zero
    divisor). `new_local(expr)` gives the kernel a name for a shared subexpression."""

    def __init__(self, new_local, libm: bool = False) -> None:
        self.new_local = new_local
        self.libm = libm   # JITFLOW_LIBM: math functions through libm, not jitflow's library

    def own_math(self, name: str, dt: str) -> bool:
        """Whether math function `name` of `dt` is jitflow's (else libm's)."""
        return not self.libm and (name, dt) in MATH

    # -- types ------------------------------------------------------------------------------
    @staticmethod
    def unify(a: str, b: str, what: str) -> str:
        if a in FLOATS and b in FLOATS:
            return "float64" if "float64" in (a, b) else "float32"
        if a in FLOATS or b in FLOATS:
            f, o = (a, b) if a in FLOATS else (b, a)
            if f == "float64" or o == "int64":
                return "float64"
            raise Unsupported(f"{what} of {a} and {b}")
        return "int64"

    def conv(self, v: Expr, to: str, wrap_to: Optional[str] = None) -> Expr:
        """`v` as register type `to` (Numba's np.<to>(v)); with `wrap_to` a narrow integer
        dtype, wrapped to its width (and back to int64)."""
        fr = v.dt
        if to == "bool":
            if fr == "bool":
                return v
            if fr in FLOATS:
                return Prim("tobool", [v], "bool")
            return Prim("tobool", [v], "bool")
        if to in FLOATS:
            if fr == to:
                return v
            if fr in FLOATS:
                return Prim("fpext" if to == "float64" else "fptrunc", [v], to)
            if fr == "bool":
                return Prim("uitofp", [v], to)
            return Prim("sitofp", [v], to)
        # to int64 (optionally wrapped to a narrower dtype)
        bits = _INTS.get(wrap_to, 64) if wrap_to else 64
        signed = not (wrap_to or "").startswith("uint")
        if fr in FLOATS:
            if bits == 64:
                return Prim("fptosi", [v], "int64")
            return Prim(f"{'fptosi' if signed else 'fptoui'}.{bits}", [v], "int64")
        if fr == "bool":
            return Prim("zext", [v], "int64")
        if bits == 64:
            return v
        return Prim(f"{'wrap' if signed else 'uwrap'}.{bits}", [v], "int64")

    def to_dtype(self, v: Expr, dtype: str) -> Expr:
        """`v` converted to the register form of `dtype` (a narrow integer dtype wraps)."""
        rt = reg_type(dtype)
        if rt == "int64" and dtype != "int64":
            return self.conv(v, "int64", wrap_to=dtype)
        return self.conv(v, rt)

    @staticmethod
    def lit(value, dt: str) -> Lit:
        """A typed literal of dtype `dt` (np.<dt>(value))."""
        if isinstance(value, bool):
            value = int(value)
        if dt in FLOATS:
            return Lit(float(value), dt)
        if dt == "bool":
            return Lit(bool(value), "bool")
        if dt not in _INTS:
            raise Unsupported(f"literal of {dt}")
        try:
            v = (np.array(value).astype(dt)[()] if isinstance(value, float)
                 else np.dtype(dt).type(int(value)))
        except (OverflowError, ValueError):
            raise Unsupported(f"literal {value!r} of {dt}") from None
        if dt == "uint64" and int(v) >= 2 ** 63:
            raise Unsupported("uint64 literal above int64")
        return Lit(int(v), "int64")

    # -- operations -------------------------------------------------------------------------
    def arith(self, fn: str, a: Expr, b: Expr) -> Expr:
        t = self.unify(a.dt, b.dt, fn)
        a, b = self.conv(a, t), self.conv(b, t)
        if t in FLOATS:
            return Prim({"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}[fn],
                        [a, b], t)
        if fn == "div":
            raise AssertionError("integer div is lowered by division()")
        return Prim(fn, [a, b], t)

    def share(self, e: Expr) -> Expr:
        """`e` as a local when it is used more than once (so it is computed once)."""
        if isinstance(e, (Lit, Local, DimOf)):
            return e
        return self.new_local(e)

    def cmp(self, fn: str, a: Expr, b: Expr) -> Expr:
        if a.dt == "bool" and b.dt == "bool":
            pred = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}
            return Prim(f"icmp.{pred[fn]}", [a, b], "bool")
        if "bool" in (a.dt, b.dt):
            if a.dt in FLOATS or b.dt in FLOATS:
                raise Unsupported("comparison of a bool and a float")
            a, b = self.conv(a, "int64"), self.conv(b, "int64")
        t = self.unify(a.dt, b.dt, fn)
        a, b = self.conv(a, t), self.conv(b, t)
        if t in FLOATS:
            pred = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt",
                    "ge": "oge"}[fn]
            return Prim(f"fcmp.{pred}", [a, b], "bool")
        pred = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}[fn]
        return Prim(f"icmp.{pred}", [a, b], "bool")

    def select(self, c: Expr, a: Expr, b: Expr) -> Expr:
        if c.dt != "bool":
            c = self.conv(c, "bool")
        if a.dt != b.dt:
            if a.dt in FLOATS and b.dt in FLOATS or a.dt == "int64" and b.dt == "int64":
                t = self.unify(a.dt, b.dt, "select")
                a, b = self.conv(a, t), self.conv(b, t)
            elif a.dt != "bool" and b.dt != "bool":
                t = self.unify(a.dt, b.dt, "select")
                a, b = self.conv(a, t), self.conv(b, t)
            else:
                raise Unsupported(f"select of {a.dt} and {b.dt}")
        return Prim("select", [c, a, b], a.dt)

    def fmath(self, name: str, a: Expr) -> Expr:
        """math.<name>(a): float32 stays float32, integers become float64."""
        if a.dt == "bool":
            raise Unsupported(f"{name} of a bool")
        if a.dt not in FLOATS:
            a = self.conv(a, "float64")
        if self.own_math(name, a.dt):
            return Prim(name, [a], a.dt)
        if name in ("sqrt", "floor", "ceil", "rint", "trunc", "fabs"):
            return Prim(name, [a], a.dt)
        if name in LIBM or name in ("exp", "log", "tanh", "log1p", "expm1"):
            return Prim(f"libm.{name}", [a], a.dt)
        raise Unsupported(f"math function {name}")

    def call(self, f: str, s: list, dtype: str, lit_dtype: str) -> Expr:
        """Scalar op `f` of ir.SCALAR_OPS over operand expressions `s`; `dtype` is the op's
        result dtype (it picks integer or float forms), `lit_dtype` types its constants."""
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
            if a.dt not in FLOATS and b.dt not in FLOATS:
                if "bool" in (a.dt, b.dt):
                    raise Unsupported("division of bools")
                a, b = self.conv(a, "float64"), self.conv(b, "float64")
            return self.arith("div", a, b)
        if f == "neg":
            a, = s
            if a.dt in FLOATS:
                return Prim("fneg", [a], a.dt)
            if a.dt == "bool":
                raise Unsupported("negation of a bool")
            return Prim("sub", [Lit(0, "int64"), a], "int64")
        if f == "pow":
            a, b = s
            if a.dt not in FLOATS or b.dt not in FLOATS:
                raise Unsupported("pow of integers")
            t = self.unify(a.dt, b.dt, f)
            a, b = self.conv(a, t), self.conv(b, t)
            return Prim("pow" if self.own_math("pow", t) else "libm.pow", [a, b], t)
        if f == "atan2":
            a, b = s
            if a.dt not in FLOATS or b.dt not in FLOATS:
                raise Unsupported("atan2 of integers")
            t = self.unify(a.dt, b.dt, f)
            return Prim("libm.atan2", [self.conv(a, t), self.conv(b, t)], t)
        if f in ("floordiv", "floormod", "truncdiv", "truncmod"):
            return self.division(f, s[0], s[1], dtype.startswith("float"))
        if f in ("maximum", "minimum"):
            a, b = s
            if "bool" in (a.dt, b.dt):
                raise Unsupported(f"{f} of bools")
            t = self.unify(a.dt, b.dt, f)
            a, b = self.share(self.conv(a, t)), self.share(self.conv(b, t))
            if t in FLOATS:
                # NumPy's rule: a NaN operand wins, the first one first
                a_nan = Prim("fcmp.uno", [a, a], "bool")
                any_nan = Prim("fcmp.uno", [a, b], "bool")
                nan_res = Prim("select", [a_nan, a, b], t)
                ge = Prim("fcmp.oge" if f == "maximum" else "fcmp.ole", [a, b], "bool")
                plain = Prim("select", [ge, a, b], t)
                return Prim("select", [any_nan, nan_res, plain], t)
            ge = Prim("icmp.sge" if f == "maximum" else "icmp.sle", [a, b], "bool")
            return Prim("select", [ge, a, b], t)
        if f == "abs":
            a, = s
            if a.dt in FLOATS:
                return Prim("fabs", [a], a.dt)
            if a.dt == "bool":
                raise Unsupported("abs of a bool")
            a = self.share(a)
            neg = Prim("icmp.slt", [a, Lit(0, "int64")], "bool")
            return Prim("select", [neg, Prim("sub", [Lit(0, "int64"), a], "int64"), a],
                        "int64")
        if f == "sign":
            a, = s
            a = self.share(a)
            if a.dt in FLOATS:
                # np.sign: -1, 1, or the operand itself (0, -0, NaN)
                gt = Prim("fcmp.ogt", [a, Lit(0.0, a.dt)], "bool")
                lt = Prim("fcmp.olt", [a, Lit(0.0, a.dt)], "bool")
                x = Prim("select", [lt, Lit(-1.0, a.dt), a], a.dt)
                return Prim("select", [gt, Lit(1.0, a.dt), x], a.dt)
            if a.dt == "bool":
                raise Unsupported("sign of a bool")
            gt = Prim("icmp.sgt", [a, Lit(0, "int64")], "bool")
            lt = Prim("icmp.slt", [a, Lit(0, "int64")], "bool")
            x = Prim("select", [lt, Lit(-1, "int64"), Lit(0, "int64")], "int64")
            return Prim("select", [gt, Lit(1, "int64"), x], "int64")
        if f in ("sqrt", "exp", "log", "sin", "cos", "floor", "ceil", "rint", "tan", "tanh",
                 "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf",
                 "log1p", "expm1"):
            return self.fmath(f, s[0])
        if f == "sigmoid":
            x, = s
            if x.dt not in FLOATS:
                raise Unsupported("sigmoid of an integer")
            if self.own_math("sigmoid", x.dt):
                return Prim("sigmoid", [x], x.dt)
            # e = exp(-|x|); (1 if x >= 0 else e) / (1 + e): no overflow, subnormals kept
            x = self.share(x)
            e = self.share(self.fmath("exp", Prim("fneg", [Prim("fabs", [x], x.dt)], x.dt)))
            num = Prim("select", [Prim("fcmp.oge", [x, Lit(0.0, x.dt)], "bool"),
                                  Lit(1.0, x.dt), e], x.dt)
            return Prim("fdiv", [num, Prim("fadd", [Lit(1.0, x.dt), e], x.dt)], x.dt)
        if f == "softplus":
            x, = s
            if x.dt not in FLOATS:
                raise Unsupported("softplus of an integer")
            x = self.share(x)
            c0 = self.lit(0, lit_dtype)
            # max(x, 0) + log1p(exp(-|x|)); Python's max keeps x unless 0 > x
            gt = self.cmp("gt", c0, x)
            mx = self.select(gt, c0, x)
            en = self.fmath("exp", Prim("fneg", [Prim("fabs", [x], x.dt)], x.dt))
            return self.arith("add", mx, self.fmath("log1p", en))
        if f in ("isnan", "isfinite", "isinf"):
            a, = s
            if a.dt not in FLOATS:
                return Lit(f == "isfinite", "bool")
            if f == "isnan":
                a = self.share(a)
                return Prim("fcmp.uno", [a, a], "bool")
            ab = Prim("fabs", [a], a.dt)
            pred = "fcmp.olt" if f == "isfinite" else "fcmp.oeq"
            return Prim(pred, [ab, Lit(math.inf, a.dt)], "bool")
        if f in ("eq", "ne", "lt", "le", "gt", "ge"):
            return self.cmp(f, s[0], s[1])
        if f in ("and", "or"):
            a, b = s
            if a.dt != "bool" or b.dt != "bool":
                raise Unsupported(f"{f} of non-bools")
            return Prim(f, [a, b], "bool")
        if f == "not":
            return Prim("not", [self.conv(s[0], "bool")], "bool")
        if f == "select":
            return self.select(s[0], s[1], s[2])
        raise Unsupported(f"scalar op {f}")

    def division(self, f: str, a: Expr, b: Expr, float_form: bool) -> Expr:
        if float_form:
            if a.dt not in FLOATS and b.dt not in FLOATS:
                a, b = self.conv(a, "float64"), self.conv(b, "float64")
            t = self.unify(a.dt, b.dt, f)
            a, b = self.conv(a, t), self.conv(b, t)
            if f == "truncmod":   # np.fmod
                return Prim("frem", [a, b], t)
            if f in ("floordiv", "truncdiv"):
                q = Prim("fdiv", [a, b], t)
                return Prim("floor" if f == "floordiv" else "trunc", [q], t)
            # np.mod: fmod, moved to the divisor's sign; a zero result takes its sign
            b = self.share(b)
            r = self.share(Prim("frem", [a, b], t))
            zero = Lit(0.0, t)
            nz = Prim("fcmp.une", [r, zero], "bool")
            diff = Prim("xor", [Prim("fcmp.olt", [r, zero], "bool"),
                                Prim("fcmp.olt", [b, zero], "bool")], "bool")
            fix = Prim("and", [nz, diff], "bool")
            r3 = Prim("select", [fix, Prim("fadd", [r, b], t), r], t)
            z = Prim("copysign", [zero, b], t)
            return Prim("select", [Prim("fcmp.oeq", [r, zero], "bool"), z, r3], t)
        if a.dt in FLOATS or b.dt in FLOATS or "bool" in (a.dt, b.dt):
            raise Unsupported(f"integer {f} of {a.dt} and {b.dt}")
        # Python's flooring (or C's truncating) integer division in 64 bits; a divisor of 0
        # gives 0 (Numba's numpy error model), -1 negates (no overflow trap)
        a, b = self.share(a), self.share(b)
        zero = Prim("icmp.eq", [b, Lit(0, "int64")], "bool")
        m1 = self.share(Prim("icmp.eq", [b, Lit(-1, "int64")], "bool"))
        bad = self.share(Prim("or", [zero, m1], "bool"))
        d = self.share(Prim("select", [bad, Lit(1, "int64"), b], "int64"))
        q = Prim("sdiv", [a, d], "int64")
        r = self.share(Prim("srem", [a, d], "int64"))
        if f in ("floordiv", "floormod"):
            rnz = Prim("icmp.ne", [r, Lit(0, "int64")], "bool")
            diff = Prim("xor", [Prim("icmp.slt", [r, Lit(0, "int64")], "bool"),
                                Prim("icmp.slt", [d, Lit(0, "int64")], "bool")], "bool")
            fix = Prim("and", [rnz, diff], "bool")
            if f == "floordiv":
                res = Prim("select", [fix, Prim("sub", [q, Lit(1, "int64")], "int64"), q],
                           "int64")
            else:
                res = Prim("select", [fix, Prim("add", [r, d], "int64"), r], "int64")
        else:
            res = q if f == "truncdiv" else r
        neg = Prim("sub", [Lit(0, "int64"), a], "int64")
        special = Prim("select", [m1, neg if f.endswith("div") else Lit(0, "int64"),
                                  Lit(0, "int64")], "int64")
        return Prim("select", [bad, special, res], "int64")


def double_bits(v: float) -> int:
    """The IEEE bits of a float64 (for printers that spell literals exactly)."""
    return struct.unpack("<Q", struct.pack("<d", float(v)))[0]


def walk(stmts: list):
    """Every statement of `stmts`, nested ones included (depth first)."""
    for s in stmts:
        yield s
        if isinstance(s, For):
            yield from walk(s.body)
        elif isinstance(s, If):
            yield from walk(s.then)
            yield from walk(s.orelse)
