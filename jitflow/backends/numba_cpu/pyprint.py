"""The Python printer: a kernel in the loop-level form (jitflow/compiler/loops.py) as the source
of one Numba function, `kernel(ins, vs) -> tuple`.

It prints what the form says and nothing else: float arithmetic and comparisons as Python
operators on typed values (Numba lowers each to the one instruction), conversions as numpy
scalar types, and every other primitive as a `_jf.<name>` intrinsic of mathlib.py that emits
the exact instruction the LLVM printer emits. Every line is tagged `# <op name>`. Dimension
checks run first and raise `ValueError("jitflow:<op>:<what>")`, which the caller turns into
TF1's error naming the op.
"""
from __future__ import annotations

import math

from jitflow.backends.base import ERROR_PREFIX
from jitflow.backends.pytext import dim_text, np_name
from jitflow.compiler.loops import (Alloc, Buf, Call, Copy, DimOf, Fail, For, If, Let, Lit,
                                    Load, Local, LoopKernel, Prim, Set, Store, Var, View)

__all__ = ["print_function", "MATHLIB", "NNLIB", "POISON"]

MATHLIB = "_jf"   # how kernels name mathlib.py
NNLIB = "_nn"     # and the window library (nnlib.py)
_IND = "    "

# what poisoned buffers hold: NaN for floats, an unlikely pattern for integers
POISON = {"float32": "np.nan", "float64": "np.nan", "bool": "True", "int8": "-86",
          "int16": "-21846", "int32": "-1431655766", "int64": "-6148914691236517206",
          "uint8": "170", "uint16": "43690", "uint32": "2863311530",
          "uint64": "12297829382473034410"}

_BINOPS = {"fadd": "+", "fsub": "-", "fmul": "*", "fdiv": "/", "add": "+", "sub": "-",
           "mul": "*", "and": "&", "or": "|", "xor": "^"}
_CMPS = {"oeq": "==", "une": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">=",
         "eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">=",
         "ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}
_INTRINSICS = {"frem", "sdiv", "srem", "floor", "ceil", "rint", "trunc", "sqrt", "fabs",
               "copysign", "fma", "exp", "log", "tanh", "sigmoid", "log1p", "expm1", "pow"}


def _lit(v: Lit) -> str:
    if v.dt == "bool":
        return "True" if v.value else "False"
    if v.dt == "int64":
        return str(int(v.value))
    x = float(v.value)
    if math.isnan(x):
        return f"{np_name(v.dt)}(np.nan)"
    if math.isinf(x):
        return f"{np_name(v.dt)}({'-' if x < 0 else ''}np.inf)"
    return f"{np_name(v.dt)}({x!r})"


class _Printer:
    def __init__(self, lk: LoopKernel, parallel: bool, poison: bool) -> None:
        self.lk = lk
        self.parallel = parallel
        self.poison = poison
        self.lines: list = []
        self.flat_views: set = set()   # buffers whose flat view `f_<name>` is in scope
        self.flat_used = _flat_buffers(lk.body)

    def emit(self, depth: int, text: str, op: int = -1) -> None:
        tag = f"  # {self.lk.op_names[op]}" if 0 <= op < len(self.lk.op_names) else ""
        self.lines.append(_IND * depth + text + tag)

    # -- expressions ----------------------------------------------------------------------------
    def ref(self, b: Buf, index: list, flat: bool) -> str:
        if b.rank == 0:
            return f"{b.name}[()]"
        if flat:
            if b.kind == "scratch" or b.rank == 1:
                return f"{b.name}[{self.x(index[0])}]"
            return f"f_{b.name}[{self.x(index[0])}]"
        return f"{b.name}[{', '.join(self.x(i) for i in index)}]"

    def x(self, e) -> str:
        if isinstance(e, Lit):
            return _lit(e)
        if isinstance(e, Local):
            return e.name
        if isinstance(e, DimOf):
            return dim_text(e.dim)
        if isinstance(e, Load):
            text = self.ref(e.buf, e.index, e.flat)
            # narrow integers widen to int64 on load, as the loop form computes them
            return f"np.int64({text})" if e.dt == "int64" and e.buf.dtype != "int64" else text
        assert isinstance(e, Prim), e
        op, a = e.op, e.args
        if op in _BINOPS:
            return f"({self.x(a[0])} {_BINOPS[op]} {self.x(a[1])})"
        if op in ("fneg",):
            return f"(-{self.x(a[0])})"
        if op == "not":
            return f"(not {self.x(a[0])})"
        if op == "select":
            return f"({self.x(a[1])} if {self.x(a[0])} else {self.x(a[2])})"
        if op.startswith(("fcmp.", "icmp.")):
            pred = op.split(".", 1)[1]
            if pred in ("uno", "ord"):
                return f"{MATHLIB}.{'uno' if pred == 'uno' else 'ord_'}({self.x(a[0])}, " \
                       f"{self.x(a[1])})"
            return f"({self.x(a[0])} {_CMPS[pred]} {self.x(a[1])})"
        if op in _INTRINSICS:
            return f"{MATHLIB}.{op}({', '.join(self.x(v) for v in a)})"
        if op.startswith("libm."):
            return f"{MATHLIB}.libm_{op[5:]}({', '.join(self.x(v) for v in a)})"
        return self.conversion(op, a[0], e.dt)

    def conversion(self, op: str, a, dt: str) -> str:
        v = self.x(a)
        if op in ("fpext", "fptrunc", "sitofp", "uitofp"):
            return f"{np_name(dt)}({v})"
        if op in ("fptosi", "zext"):
            return f"np.int64({v})"
        if op == "tobool":
            zero = "0" if a.dt != "float32" and a.dt != "float64" else _lit(Lit(0.0, a.dt))
            return f"({v} != {zero})"
        kind, bits = op.split(".")
        inner = f"np.{'u' if kind in ('uwrap', 'fptoui') else ''}int{bits}"
        return f"np.int64({inner}({v}))"

    # -- statements -----------------------------------------------------------------------------
    def block(self, stmts: list, depth: int) -> None:
        for s in stmts:
            self.stmt(s, depth)

    def stmt(self, s, depth: int) -> None:
        op = s.op
        if isinstance(s, (Let, Set)):
            self.emit(depth, f"{s.name} = {self.x(s.expr)}", op)
        elif isinstance(s, Var):
            init = s.init
            text = self.x(init)
            if init.dt != s.dt:
                text = f"{np_name(s.dt)}({text})" if s.dt != "bool" else text
            self.emit(depth, f"{s.name} = {text}", op)
        elif isinstance(s, Store):
            self.emit(depth, f"{self.ref(s.buf, s.index, s.flat)} = {self.x(s.expr)}", op)
        elif isinstance(s, For):
            rng = "numba.prange" if s.parallel and self.parallel else "range"
            start = self.x(s.start)
            args = self.x(s.stop) if start == "0" and s.step == 1 else \
                f"{start}, {self.x(s.stop)}" + (f", {s.step}" if s.step != 1 else "")
            self.emit(depth, f"for {s.var} in {rng}({args}):", op)
            if not s.body:
                self.emit(depth + 1, "pass", op)
            self.block(s.body, depth + 1)
        elif isinstance(s, If):
            self.emit(depth, f"if {self.x(s.cond)}:", op)
            self.block(s.then, depth + 1)
            if not s.then:
                self.emit(depth + 1, "pass", op)
            if s.orelse:
                self.emit(depth, "else:", op)
                self.block(s.orelse, depth + 1)
        elif isinstance(s, Fail):
            o, what = self.lk.errors[s.code - 1]
            self.emit(depth, f"raise ValueError(\"{ERROR_PREFIX}{o}:{what}\")", op)
        elif isinstance(s, Alloc):
            self.alloc(s.buf, depth, op)
        elif isinstance(s, View):
            self.emit(depth, f"{s.out.name} = {s.src.name}.reshape({_shape(s.out.dims)})", op)
            self.flat_view(s.out, depth, op)
        elif isinstance(s, Copy):
            self.emit(depth, f"{s.out.name} = {s.src.name}.copy()", op)
            self.flat_view(s.out, depth, op)
        elif isinstance(s, Call):
            self.call(s, depth)
        else:  # pragma: no cover
            raise TypeError(f"no printer for {type(s).__name__}")

    def alloc(self, b: Buf, depth: int, op: int) -> None:
        shape = _shape(b.dims)
        if self.poison and b.poison:
            text = f"np.full({shape}, {POISON.get(b.dtype, '0')}, {np_name(b.dtype)})"
        else:
            text = f"{MATHLIB}.empty({shape}, {np_name(b.dtype)})"
        self.emit(depth, f"{b.name} = {text}", op)
        self.flat_view(b, depth, op)

    def flat_view(self, b: Buf, depth: int, op: int) -> None:
        if b.name in self.flat_used and b.rank > 1 and b.kind != "scratch":
            self.emit(depth, f"f_{b.name} = {MATHLIB}.flat({b.name})", op)

    def call(self, s: Call, depth: int) -> None:
        if s.fn == "gemm":
            ta, tb, m, n, k, a, b, out = s.args
            self.emit(depth, f"{MATHLIB}.gemm({ta}, {tb}, {self.x(m)}, {self.x(n)}, "
                             f"{self.x(k)}, {a.name}, {b.name}, {out.name})", s.op)
            return
        if s.fn.startswith("nnlib."):
            # the int parameters as int64 values: one compiled routine per dtype serves every
            # stride and padding; inputs typed writable, so read-only ones share it too
            ins, outs, params = s.args
            args = [f"{NNLIB}.readable({v.name})" for v in ins] + [v.name for v in outs] + \
                [f"np.int64({int(p)})" for p in params]
            self.emit(depth, f"{NNLIB}.{s.fn[6:]}({', '.join(args)})", s.op)
            return
        raise TypeError(f"unknown library call {s.fn}")

    def function(self, name: str) -> str:
        lk = self.lk
        self.lines.append(f"def {name}(ins, vs):")
        for b in lk.inputs:
            if b.rank == 0:
                self.emit(1, f"{b.name} = ins[{b.slot}][()]")
                continue
            self.emit(1, f"{b.name} = ins[{b.slot}]")
            for k, one in enumerate(b.ones):
                if not one:
                    self.emit(1, f"d{b.slot}_{k} = {b.name}.shape[{k}]")
            self.flat_view(b, 1, -1)
        for b in lk.variables:
            self.emit(1, f"{b.name} = vs[{b.slot}]")
            for k, one in enumerate(b.ones):
                if not one:
                    self.emit(1, f"e{b.slot}_{k} = {b.name}.shape[{k}]")
            self.flat_view(b, 1, -1)
        # the dimension checks are one test and one raise (each branch costs Numba compile
        # time); the error names the first check's op: the caller reruns the step op by op,
        # which reports the exact op and shapes
        if lk.dim_checks:
            cond = " | ".join(f"({dim_text(a)} != {dim_text(b)})"
                              for a, b, _, _ in lk.dim_checks)
            op, what = lk.dim_checks[0][2], lk.dim_checks[0][3]
            self.emit(1, f"if {cond}:", op)
            self.emit(2, f"raise ValueError(\"{ERROR_PREFIX}{op}:{what}\")", op)
        self.block(lk.body, 1)
        res = []
        for r in lk.results:
            if isinstance(r, Buf):
                res.append(f"{r.name}.copy()" if r.kind == "in" else r.name)
            else:
                res.append(self.x(r))
        self.emit(1, "return (" + "".join(x + ", " for x in res) + ")")
        return "\n".join(self.lines) + "\n"


def _shape(dims) -> str:
    """A shape tuple's text: `(n,)`, `(a, b)`."""
    parts = [dim_text(d) for d in dims]
    return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"


def _flat_buffers(stmts: list) -> set:
    """Names of the buffers some statement indexes flat."""
    out: set = set()

    def expr(e) -> None:
        if isinstance(e, Load):
            if e.flat:
                out.add(e.buf.name)
            for i in e.index:
                expr(i)
        elif isinstance(e, Prim):
            for a in e.args:
                expr(a)

    def walk(ss) -> None:
        for s in ss:
            if isinstance(s, Store):
                if s.flat:
                    out.add(s.buf.name)
                for i in s.index:
                    expr(i)
                expr(s.expr)
            elif isinstance(s, (Let, Set)):
                expr(s.expr)
            elif isinstance(s, Var):
                expr(s.init)
            elif isinstance(s, For):
                expr(s.start)
                expr(s.stop)
                walk(s.body)
            elif isinstance(s, If):
                expr(s.cond)
                walk(s.then)
                walk(s.orelse)
    walk(stmts)
    return out


def print_function(lk: LoopKernel, name: str = "kernel", parallel: bool = False,
                   poison: bool = False) -> str:
    """The source of one `@njit` function computing `lk` (decorator not included); with
    `parallel`, loops marked parallel are `numba.prange` (compiled with `parallel=True`)."""
    return _Printer(lk, parallel, poison).function(name)
