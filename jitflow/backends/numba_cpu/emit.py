"""numba_cpu code generation: one Kernel (jitflow/compiler/ir.py) -> the source of one Numba
function, with one emitter per IR node kind (`STATEMENT_EMITTERS`, `_Writer.expr`).

The function takes two tuples, `ins` (argument arrays) and `vs` (variable buffers, written in
place), and returns a tuple with one entry per requested result (arrays, or scalars for rank
0). Everything is explicit loops: elementwise regions are one loop nest (a flat loop when no
operand broadcasts), each elementwise op is one typed temporary (its scalar expression spelled
by scalar_ops.TABLE), and every line carries `# <op name>`. Dimension checks run first and raise
`ValueError("jitflow:<op>:<what>")`, which the caller turns into an `InvalidArgumentError`
naming the op.
"""
from __future__ import annotations

import math
import re

from jitflow.backends.base import ERROR_PREFIX
from jitflow.backends.numba_cpu.scalar_ops import TABLE, WHOLE_HELPERS
from jitflow.backends.pytext import const_text, dim_text, lit_text, np_name
from jitflow.compiler.ir import (Alloc, Apply, Arg, AssignVar, Call, Check, Const, CopyVar,
                                 DimValue, Index, Kernel, LibCall, Lit, Load, Loop, MatMul,
                                 NonZeroCheck, RangeCheck, Reduce, Region, RowOp, ShapeOf, Take,
                                 Value, View)
from jitflow.runtime import config

__all__ = ["generate_function", "ERROR_PREFIX"]

#: how generated code names the window-op library (nnlib.py; its import line is added when used)
LIBRARY = "_nn"
_IND = "    "
_np = np_name
_dim = dim_text
_lit = lit_text


def poison_enabled() -> bool:
    """JITFLOW_POISON=1: every buffer generated code allocates starts as NaN or a sentinel."""
    return config.get("JITFLOW_POISON")


# what poisoned buffers hold: NaN for floats, an unlikely pattern for integers
_POISON = {"float32": "np.nan", "float64": "np.nan", "bool": "True", "int8": "-86",
           "int16": "-21846", "int32": "-1431655766", "int64": "-6148914691236517206",
           "uint8": "170", "uint16": "43690", "uint32": "2863311530",
           "uint64": "12297829382473034410"}


def _nonnegative(d) -> bool:
    """Whether symbolic dim `d` is never negative by construction (an input's or variable's
    size, a non-negative constant, a clamped window or slice length, a product of those)."""
    if d == 1:
        return True
    k = d[0]
    if k == "const":
        return d[1] >= 0
    if k in ("in", "var", "slen"):
        return True
    if k == "window":
        return not d[5] or _nonnegative(d[1])
    if k == "prod":
        return all(_nonnegative(x) for x in d[1])
    return False


def empty_text(dims, dtype: str, lib: str = "") -> str:
    """Source of a new uninitialized array (poisoned under JITFLOW_POISON=1). With `lib`
    (vecmath's name in the kernel) and dims that cannot be negative, the library's `empty`:
    one inline allocation, without np.empty's checks and calls (each np.empty costs ~1 ms
    more of Numba and LLVM time, and each distinct signature ~70 ms)."""
    shape = "(" + "".join(_dim(d) + ", " for d in dims) + ")"
    if poison_enabled():
        return f"np.full({shape}, {_POISON.get(dtype, '0')}, {_np(dtype)})"
    if lib and all(_nonnegative(d) for d in dims):
        return f"{lib}.empty({shape}, {_np(dtype)})"
    return f"np.empty({shape}, {_np(dtype)})"


class _Writer:
    def __init__(self, kernel: Kernel, vecmath: dict, parallel: bool = False) -> None:
        self.k = kernel
        self.lines: list = []
        self.tmp = 0
        self.vecmath = vecmath
        self.top_views: set = set()   # names whose flat view exists at the top level
        self.forward: dict = {}       # in a merged flat loop: name -> its element's temporary
        # the parallel variant: the outermost loop of element stores and of row reductions is
        # a `numba.prange` (iterations write distinct elements and share no accumulator)
        self.parallel = parallel
        self.transposed = _shared_transposes(kernel) if kernel is not None else {}

    def _range(self, par: bool) -> str:
        return "numba.prange" if par and self.parallel else "range"

    def emit(self, depth: int, text: str, op: int = -1) -> None:
        tag = f"  # {self.k.op_names[op]}" if op >= 0 else ""
        self.lines.append(_IND * depth + text + tag)

    # -- expressions ----------------------------------------------------------------------
    def load(self, v: Value, idx: list, flat: bool, axes=None) -> str:
        if axes is not None and v.rank > 0:
            parts = ["0" if one else idx[a] for one, a in zip(v.ones, axes)]
            return f"{v.name}[{', '.join(parts)}]"
        if v.rank == 0:
            return f"{v.name}[()]" if v.kind == "var" else v.name
        if flat:
            return self.forward.get(v.name) or f"f_{v.name}[{idx[0]}]"
        rank = len(idx)
        parts = []
        for k, one in enumerate(v.ones):
            parts.append("0" if one else idx[rank - v.rank + k])
        return f"{v.name}[{', '.join(parts)}]"

    def expr(self, e, idx: list, flat: bool, depth: int) -> str:
        """Emit temporaries for `e` (one per op) and return the text of its value."""
        if isinstance(e, Lit):
            return _lit(e.value, e.dtype)
        if isinstance(e, Load):
            return self.load(e.value, idx, flat, e.axes)
        if isinstance(e, Index):
            return idx[e.axis]
        if isinstance(e, Take):
            return self.take(e, idx)
        if isinstance(e, DimValue):
            return f"{_np(e.dtype)}({_dim(e.dim)})"
        assert isinstance(e, Apply)
        args = [self.expr(a, idx, flat, depth) for a in e.args]
        text = self.scalar(e.fn, args, e.dtype, e.lit_dtype)
        if e.cast:
            text = f"{_np(e.dtype)}({text})"
        self.tmp += 1
        name = f"t{self.tmp}"
        self.emit(depth, f"{name} = {text}", e.op)
        return name

    def scalar(self, fn, args: list, dtype: str, lit_dtype: str) -> str:
        """The text of scalar expression `fn` (ir.Arg/Const/Call) over operand texts `args`:
        scalar_ops.TABLE's spelling, with vecmath's vectorizable helpers where they exist."""
        def text(e) -> str:
            if isinstance(e, Arg):
                return args[e.index]
            if isinstance(e, Const):
                return const_text(e.value, lit_dtype)
            sub = [text(a) for a in e.args]
            if e.fn in WHOLE_HELPERS:
                helper = self.vecmath.get((e.fn, dtype))
                if helper is not None:
                    return f"{helper}({sub[0]})"
            form = TABLE[e.fn]
            if callable(form):
                return form(sub)
            if isinstance(form, tuple):
                form = form[1] if dtype.startswith("float") else form[0]
            return form.format(*sub, c0=const_text(0, lit_dtype), c1=const_text(1, lit_dtype))
        return self.map_functions(text(fn), dtype)

    def map_functions(self, text: str, dtype: str) -> str:
        for (fn, dt), helper in self.vecmath.items():
            if dt == dtype:
                text = text.replace(f"math.{fn}(", f"{helper}(")
        return text

    @staticmethod
    def loads(e, acc: list, remapped: bool = False) -> list:
        if isinstance(e, Load):
            if remapped or e.axes is None:
                acc.append(e.value)
            else:
                acc.append(None)
        elif isinstance(e, Apply):
            for a in e.args:
                _Writer.loads(a, acc, remapped)
        elif isinstance(e, (Index, Take)) and not remapped:
            acc.append(None)
        return acc

    def can_flatten(self, e, ones: tuple) -> bool:
        """A flat loop works when every array operand has exactly the output's shape class."""
        vals = self.loads(e, [])
        return all(v is None and False or v is not None and (
            v.rank == 0 or v.rank == len(ones) and v.ones == ones) for v in vals)

    def open_loops(self, dims: tuple, ones: tuple, depth: int, op: int, skip=(),
                   par: bool = False) -> tuple:
        """Loops over the non-unit dims not in `skip`; with `par` in the parallel variant the
        outermost is a prange. Returns (index text per dim, depth inside)."""
        idx = []
        for k, (d, one) in enumerate(zip(dims, ones)):
            if one or k in skip:
                idx.append("0")
                continue
            self.emit(depth, f"for i{k} in {self._range(par)}({_dim(d)}):", op)
            par = False
            idx.append(f"i{k}")
            depth += 1
        return idx, depth

    def alloc(self, v: Value, depth: int, op: int) -> None:
        """`v = np.empty(shape, dtype)`; under JITFLOW_POISON=1 filled with NaN (floats) or a
        sentinel (integers), so that a read of an element the kernel never wrote shows."""
        self.emit(depth, f"{v.name} = {empty_text(v.dims, v.dtype, self.library())}", op)

    def scratch(self, n: int, dtype: str) -> str:
        """Source of a new uninitialized 1-d scratch array of `n` elements (never poisoned:
        every element is written before it is read)."""
        lib = self.library()
        return f"{lib}.empty(({n},), {_np(dtype)})" if lib else f"np.empty({n}, {_np(dtype)})"

    def element_check(self, v: Value, bad: str, depth: int, op: int, what: str) -> None:
        """Raise the kernel's check error if any element `q` of `v` makes `bad` true (run
        before anything is written: index ranges, integer divisors)."""
        if v.rank == 0:
            self.emit(depth, f"q = {v.name + '[()]' if v.kind == 'var' else v.name}", op)
        else:
            self.emit(depth, f"for i in range({v.name}.size):", op)
            depth += 1
            self.emit(depth, f"q = {self.flat_text(v.name)}[i]", op)
        self.emit(depth, f"if {bad}:", op)
        self.emit(depth + 1, f"raise ValueError(\"{ERROR_PREFIX}{op}:{what}\")", op)

    def nonzero(self, c: NonZeroCheck, depth: int) -> None:
        self.element_check(c.value, "q == 0", depth, c.op, c.what)

    def library(self) -> str:
        """How kernels name the math library (vecmath.py; '' under JITFLOW_LIBM=1, when
        kernels do not import it)."""
        return next(iter(self.vecmath.values())).rsplit(".", 1)[0] if self.vecmath else ""

    def flat_text(self, name: str, n: str = "") -> str:
        """The 1-d view of the C-contiguous array `name` (of `n` elements): the library's
        `flat` (a struct rebuild), else `reshape` (checks and helper calls: ~10 ms of compile
        time each). vecmath registers `flat` with Numba's alias analysis, so its dead-code
        and parfor passes see stores through the view as stores into the array."""
        lib = self.library()
        if lib:
            return f"{lib}.flat({name})"
        return f"{name}.reshape({n or name + '.size'})"

    def flat_views(self, vals, n: str, depth: int, op: int) -> None:
        """`f_<name>`, the flat view of each array in `vals`. A view made in the function's
        top level is made once and reused by later flat loops (every name is bound to one
        array, and the flat loop's operands all have its size): each `reshape` costs Numba
        compile time."""
        seen = set()
        for v in vals:
            if v.rank > 0 and v.name not in seen:
                seen.add(v.name)
                if depth == 1 and v.name in self.top_views:
                    continue
                self.emit(depth, f"f_{v.name} = {self.flat_text(v.name, n)}", op)
                if depth == 1:
                    self.top_views.add(v.name)

    # -- statements -----------------------------------------------------------------------
    def loop(self, s: Loop, depth: int) -> None:
        out, op = s.out, s.op
        if out.rank == 0:
            val = self.expr(s.expr, [], False, depth)
            self.emit(depth, f"{out.name} = {_np(out.dtype)}({val})", op)
            return
        self.alloc(out, depth, op)
        self.store_loop(out, s.expr, depth, op, f"{out.name}", mode="set")

    def store_loop(self, out: Value, e, depth: int, op: int, target: str, mode: str) -> None:
        if self.can_flatten(e, out.ones):
            n = f"n{out.name}"
            self.emit(depth, f"{n} = {target}.size", op)
            self.flat_views([out] + self.loads(e, [], True), n, depth, op)
            self.emit(depth, f"for i in {self._range(depth == 1)}({n}):", op)
            val = self.expr(e, ["i"], True, depth + 1)
            dst = f"f_{out.name}[i]"
        else:
            idx, d2 = self.open_loops(out.dims, out.ones, depth, op, par=depth == 1)
            val = self.expr(e, idx, False, d2)
            dst = f"{out.name}[{', '.join(idx)}]"
            depth = d2 - 1
        if mode == "set":
            self.emit(depth + 1, f"{dst} = {val}", op)
        else:
            sign = "+" if mode == "add" else "-"
            self.emit(depth + 1, f"{dst} = {dst} {sign} {val}", op)

    def flat_store(self, s):
        """(target, expression, mode) of a statement that stores one expression over a whole
        array as a flat loop, else None."""
        if isinstance(s, Loop) and s.out.rank > 0 and self.can_flatten(s.expr, s.out.ones):
            return s.out, s.expr, "set"
        if isinstance(s, AssignVar) and s.var.rank > 0 and self.can_flatten(s.expr, s.var.ones):
            return s.var, s.expr, s.mode
        return None

    def merged_loop(self, group: list, depth: int) -> None:
        """Consecutive flat stores over arrays of one size as one loop (each loop costs Numba
        and LLVM ~25 ms to compile, each statement in it a few). Every statement touches only
        element i of its arrays, so the per-element order of reads and writes, and therefore
        every result, is that of the separate loops. An element stored earlier in the
        iteration is read from its temporary."""
        stores = [self.flat_store(s) for s in group]
        for s, (out, _, _) in zip(group, stores):
            if isinstance(s, Loop):
                self.alloc(out, depth, s.op)
        op0 = group[0].op
        n = f"n{stores[0][0].name}"
        self.emit(depth, f"{n} = {stores[0][0].name}.size", op0)
        for s, (out, e, _) in zip(group, stores):
            self.flat_views([out] + self.loads(e, [], True), n, depth, s.op)
        self.emit(depth, f"for i in {self._range(depth == 1)}({n}):", op0)
        self.forward = {}
        for s, (out, e, mode) in zip(group, stores):
            val = self.expr(e, ["i"], True, depth + 1)
            dst = f"f_{out.name}[i]"
            if mode != "set":
                val = f"{dst} {'+' if mode == 'add' else '-'} {val}"
            if not _TEMP.match(val):
                self.tmp += 1
                self.emit(depth + 1, f"t{self.tmp} = {val}", s.op)
                val = f"t{self.tmp}"
            self.emit(depth + 1, f"{dst} = {val}", s.op)
            self.forward[out.name] = val
        self.forward = {}

    def assign(self, s: AssignVar, depth: int) -> None:
        v = s.var
        if v.rank == 0:
            val = self.expr(s.expr, [], False, depth)
            if s.mode == "set":
                self.emit(depth, f"{v.name}[()] = {val}", s.op)
            else:
                sign = "+" if s.mode == "add" else "-"
                self.emit(depth, f"{v.name}[()] = {v.name}[()] {sign} {val}", s.op)
            return
        self.store_loop(v, s.expr, depth, s.op, v.name, s.mode)

    def copy(self, s: CopyVar, depth: int) -> None:
        if s.var.rank == 0:
            self.emit(depth, f"{s.out.name} = {s.var.name}[()]", s.op)
        else:
            self.emit(depth, f"{s.out.name} = {s.var.name}.copy()", s.op)

    def matmul(self, s: MatMul, depth: int) -> None:
        self.alloc(s.out, depth, s.op)
        a = s.a.name + (".T" if s.ta else "")
        b = s.b.name + (".T" if s.tb else "")
        shared = self.transposed.get(id(s))
        if shared is not None:
            name, first = shared
            if first:
                self.emit(depth, f"{name} = np.ascontiguousarray({b})", s.op)
            b = name
        if s.out.dtype.startswith("float"):
            lib = self.library()
            if lib and s.tb and not s.ta and shared is None:
                # a @ b.T: the library picks the faster BLAS orientation for the shape
                self.emit(depth, f"{lib}.dot_nt({s.a.name}, {s.b.name}, {s.out.name})", s.op)
                return
            self.emit(depth, f"np.dot({a}, {b}, {s.out.name})", s.op)
            return
        # integers: no BLAS; loops in i-k-j order, accumulating into the output rows
        o, op = s.out.name, s.op
        self.emit(depth, f"a_{o} = {a}", op)
        self.emit(depth, f"b_{o} = {b}", op)
        self.emit(depth, f"{o}.fill(0)", op)
        self.emit(depth, f"for i in range(a_{o}.shape[0]):", op)
        self.emit(depth + 1, f"for k in range(a_{o}.shape[1]):", op)
        self.emit(depth + 2, f"q = a_{o}[i, k]", op)
        self.emit(depth + 2, f"for j in range(b_{o}.shape[1]):", op)
        self.emit(depth + 3, f"{o}[i, j] += q * b_{o}[k, j]", op)

    def row(self, s: RowOp, depth: int) -> None:
        """Softmax-family ops: per row, max, sum of exps, then the outputs."""
        x, op, how = s.x, s.op, s.how
        c = _dim(x.dims[-1])
        rows = " * ".join(_dim(d) for d in x.dims[:-1]) or "1"
        nm = x.name
        self.emit(depth, f"r_{nm} = {rows}", op)
        self.emit(depth, f"x2_{nm} = {nm}.reshape((r_{nm}, {c}))", op)
        views = []
        scalar_loss = None
        for o in s.outs:
            if o is not None and o.rank == 0:
                # a rank-0 loss (rank-1 logits) is a local scalar: fill a 1-element row buffer
                scalar_loss = o
                one = empty_text((('const', 1),), o.dtype, self.library())
                self.emit(depth, f"m1_{o.name} = {one}", op)
                views.append(("loss", o))
            elif o is not None:
                self.alloc(o, depth, op)
                if o.rank == x.rank:
                    self.emit(depth, f"m2_{o.name} = {o.name}.reshape((r_{nm}, {c}))", op)
                    views.append(("row", o))
                else:
                    self.emit(depth, f"m1_{o.name} = {o.name}.reshape(r_{nm})", op)
                    views.append(("loss", o))
            else:
                views.append(None)
        if s.labels is not None:
            lab = s.labels
            if how == "xent":
                self.emit(depth, f"l2_{nm} = {lab.name}.reshape((r_{nm}, {c}))", op)
            else:
                self.emit(depth, f"l1_{nm} = {lab.name}.reshape(r_{nm})", op)
        self.emit(depth, f"for r in range(r_{nm}):", op)
        d = depth + 1
        self._row_body(s, views, d, nm, c)
        if scalar_loss is not None:
            self.emit(depth, f"{scalar_loss.name} = m1_{scalar_loss.name}[0]", op)

    def _row_body(self, s: RowOp, views: list, d: int, nm: str, c: str) -> None:
        x, op, how = s.x, s.op, s.how
        dt = x.dtype
        exp = self.map_functions("math.exp(", dt)
        log = self.map_functions("math.log(", dt)
        zero, ninf = _lit(0, dt), _lit(-math.inf, dt)
        self.emit(d, f"m = {ninf}", op)
        self.emit(d, f"for j in range({c}):", op)
        self.emit(d + 1, f"if x2_{nm}[r, j] > m:", op)
        self.emit(d + 2, f"m = x2_{nm}[r, j]", op)
        self.emit(d, "if not np.isfinite(m):", op)
        self.emit(d + 1, f"m = {zero}", op)
        self.emit(d, "s = 0.0", op)
        self.emit(d, f"for j in range({c}):", op)
        self.emit(d + 1, f"s += {exp}x2_{nm}[r, j] - m)", op)
        self.emit(d, f"ls = {_np(dt)}({log}{_np(dt)}(s)))", op)
        if how == "softmax":
            (_, y), = views
            self.emit(d, f"inv = {_np(dt)}(s)", op)
            self.emit(d, f"for j in range({c}):", op)
            self.emit(d + 1, f"m2_{y.name}[r, j] = {exp}x2_{nm}[r, j] - m) / inv", op)
            return
        if how == "log_softmax":
            (_, y), = views
            self.emit(d, f"for j in range({c}):", op)
            self.emit(d + 1, f"m2_{y.name}[r, j] = x2_{nm}[r, j] - m - ls", op)
            return
        loss, bp = views
        if how == "sparse_xent":
            self.emit(d, f"k = l1_{nm}[r]", op)
            if loss is not None:
                self.emit(d, f"m1_{loss[1].name}[r] = ls - (x2_{nm}[r, k] - m)", op)
            if bp is not None:
                self.emit(d, f"for j in range({c}):", op)
                self.emit(d + 1, f"p = {exp}x2_{nm}[r, j] - m - ls)", op)
                self.emit(d + 1, f"m2_{bp[1].name}[r, j] = p - {_np(dt)}(1) if j == k else p",
                          op)
            return
        if loss is not None:
            self.emit(d, "acc = 0.0", op)
            self.emit(d, f"for j in range({c}):", op)
            # TF's form: sum(labels * (ls - z)) from +0 (an all-zero row is +0)
            self.emit(d + 1, f"acc += l2_{nm}[r, j] * (ls - (x2_{nm}[r, j] - m))", op)
            self.emit(d, f"m1_{loss[1].name}[r] = acc", op)
        if bp is not None:
            self.emit(d, f"for j in range({c}):", op)
            self.emit(d + 1, f"m2_{bp[1].name}[r, j] = {exp}x2_{nm}[r, j] - m - ls) - "
                             f"l2_{nm}[r, j]", op)

    def shape_of(self, s: ShapeOf, depth: int) -> None:
        self.alloc(s.out, depth, s.op)
        for k, d in enumerate(s.dims):
            self.emit(depth, f"{s.out.name}[{k}] = {_dim(d)}", s.op)

    def view(self, s: View, depth: int) -> None:
        shape = ", ".join(_dim(d) for d in s.out.dims)
        self.emit(depth, f"{s.out.name} = {s.src.name}.reshape(({shape},))", s.op)

    def range_check(self, c: RangeCheck, depth: int) -> None:
        self.element_check(c.value, f"q < 0 or q >= {_dim(c.dim)}", depth, c.op, c.what)

    def item(self, it, idx: list) -> str:
        """The position text of one `Take`/`Region` item."""
        kind = it[0]
        if kind == "fixed":
            return _dim(it[1]) if it[1] != 1 else "1"
        if kind == "lin":
            _, start, stride, k = it
            i = idx[k]
            st = _dim(start)
            term = i if stride == 1 else f"{stride} * {i}"
            return term if st == "0" else f"{st} + {term}"
        if kind == "mod":
            return f"{idx[it[1]]} % {_dim(it[2])}"
        if kind == "take":
            _, v, axes = it
            return self.load(v, idx, False, axes) if v.rank else self.load(v, idx, False)
        raise KeyError(kind)

    def take(self, e: Take, idx: list) -> str:
        """The text reading one element of a Take."""
        return f"{e.value.name}[{', '.join(self.item(it, idx) for it in e.items)}]"

    def alloc_stmt(self, s: Alloc, depth: int) -> None:
        self.alloc(s.out, depth, s.op)
        if s.fill is not None:
            self.emit(depth, f"{s.out.name}.fill({self.expr(s.fill, [], False, depth)})", s.op)

    def region(self, s: Region, depth: int) -> None:
        idx, d2 = self.open_loops(s.dims, s.ones, depth, s.op)
        val = self.expr(s.expr, idx, False, d2)
        dst = f"{s.out.name}[{', '.join(self.item(it, idx) for it in s.items)}]"
        if s.mode == "add":
            self.emit(d2, f"{dst} += {val}", s.op)
        else:
            self.emit(d2, f"{dst} = {val}", s.op)

    def lib_call(self, s: LibCall, depth: int) -> None:
        for o in s.outs:
            self.alloc(o, depth, s.op)
        # the parameters as int64 values, not literals: one compiled routine per dtype serves
        # every stride and padding (and tier 1, which calls the same routine: nnlib_c.py);
        # the inputs typed writable, so that read-only ones share that routine too
        args = [f"{LIBRARY}.readable({v.name})" for v in s.args] + [o.name for o in s.outs] + [
            f"np.int64({int(p)})" for p in s.params]
        self.emit(depth, f"{LIBRARY}.{s.fn}({', '.join(args)})", s.op)

    def column_sum(self, s: Reduce, how: str, axes: set, depth: int) -> bool:
        """A sum/mean over leading axes of a stored float array as one call of the math
        library's column sum (vecmath.colsum); False when that does not apply (also under
        JITFLOW_LIBM=1, when kernels do not import the library)."""
        v = _column_sum_operand(s, how, axes)
        if not self.vecmath or v is None:
            return False
        out, op = s.out, s.op
        rows = " * ".join(_dim(s.dims[k]) for k in sorted(axes))
        cols = " * ".join(_dim(s.dims[k]) for k in range(len(s.ones)) if k not in axes)
        lib = self.library()
        self.alloc(out, depth, op)
        # the operand as (rows, cols) and the output as (cols,): no reshape where they are
        # that already, the output's flat view otherwise (each reshape costs ~8 ms of
        # Numba and LLVM time)
        src = v.name if v.rank == 2 and len(axes) == 1 else \
            f"{v.name}.reshape(({rows}, {cols}))"
        dst = out.name if out.rank == 1 else f"{lib}.flat({out.name})" if out.rank else \
            f"{out.name}.reshape({cols})"
        self.emit(depth, f"{lib}.colsum({src}, {dst}, {how == 'mean'})", op)
        return True

    def reduce(self, s: Reduce, depth: int) -> None:
        out, op, how = s.out, s.op, s.how
        rank = len(s.ones)
        arg = how in ("argmax", "argmin")
        if arg:
            how = how[3:]
        fdt = (s.in_dtype if arg else out.dtype).startswith("float")
        accdt = ("float64" if fdt else "int64") if how in ("sum", "mean", "prod", "l2") else (
            s.in_dtype if arg else out.dtype)
        if how in ("sum", "mean", "l2"):
            init = _lit(0, accdt)
        elif how == "prod":
            init = _lit(1, accdt)
        elif fdt:
            init = _lit(-math.inf if how == "max" else math.inf, accdt)
        elif accdt == "bool":  # Any, All
            init = "False" if how == "max" else "True"
        else:
            init = f"np.iinfo({_np(accdt)}).{'min' if how == 'max' else 'max'}"
        axes = set(s.axes)
        red = [k for k in range(rank) if k in axes and not s.ones[k]]
        cnt = " * ".join(_dim(s.dims[k]) for k in range(rank) if k in axes) or "1"

        def combine(acc: str, val: str, d: int) -> None:
            if how in ("sum", "mean"):
                self.emit(d, f"{acc} = {acc} + {val}", op)
            elif how == "l2":
                self.emit(d, f"{acc} = {acc} + {val} * {val}", op)
            elif how == "prod":
                self.emit(d, f"{acc} = {acc} * {val}", op)
            else:
                cmp = ">" if how == "max" else "<"
                if arg:
                    self.emit(d, f"if {val} {cmp} {acc} or ({val} != {val} and {acc} == {acc}):",
                              op)
                    self.emit(d + 1, f"{acc} = {val}", op)
                    self.emit(d + 1, f"ix = i{red[-1]}" if red else "ix = 0", op)
                else:
                    self.emit(d, f"if {val} {cmp} {acc} or {val} != {val}:", op)
                    self.emit(d + 1, f"{acc} = {val}", op)

        def finish(acc: str) -> str:
            if arg:
                return f"{_np(out.dtype)}(ix)"
            if how == "l2":
                return f"{_np(out.dtype)}({acc} * 0.5)"
            if how == "mean":
                if fdt:
                    return f"{_np(out.dtype)}({acc} / ({cnt}))"
                # integers: truncated toward zero, as C division (TF1)
                return (f"{_np(out.dtype)}({acc} // ({cnt}) if {acc} >= 0 "
                        f"else -((-{acc}) // ({cnt})))")
            return f"{_np(out.dtype)}({acc})"

        keep = [k for k in range(rank) if k not in axes]
        trailing = all(k < min(axes) for k in keep) if axes else True
        acc = f"acc{out.name}"
        if trailing:
            kept = [k for k in range(rank) if k not in axes and not s.ones[k]]
            # the parallel variant runs the rows of a reduction with kept dims on threads:
            # the output position is computed, and each row has its own lanes
            par = self.parallel and depth == 1 and out.rank > 0 and bool(kept)
            if out.rank > 0:
                self.alloc(out, depth, op)
                self.emit(depth, f"f_{out.name} = {self.flat_text(out.name)}", op)
                if not par:
                    self.emit(depth, f"o{out.name} = 0", op)
            split = (how in ("sum", "mean", "l2") and red and red[-1] == rank - 1
                     and not _exact_constant(s.expr, how))
            if split and not par:
                # partial sums in _LANES lanes along the innermost axis: independent add chains
                # (a sequential float sum runs at one add's latency per element); the terms
                # are computed a chunk at a time into a buffer, a loop the vectorizer takes
                self.emit(depth, f"l{acc} = {self.scratch(_LANES, accdt)}", op)
                if _calls_math(s.expr):
                    self.emit(depth, f"b{acc} = {self.scratch(_CHUNK, accdt)}", op)
            idx_k, d2 = self.open_loops(s.dims, s.ones, depth, op, skip=axes, par=par)
            if par:
                strides, lin = "1", []
                for k in reversed(kept):
                    lin.append(f"i{k}" if strides == "1" else f"i{k} * {strides}")
                    strides = f"{_dim(s.dims[k])}" if strides == "1" else \
                        f"{strides} * {_dim(s.dims[k])}"
                self.emit(d2, f"o{out.name} = {' + '.join(reversed(lin))}", op)
                if split:
                    self.emit(d2, f"l{acc} = {self.scratch(_LANES, accdt)}", op)
                    if _calls_math(s.expr):
                        self.emit(d2, f"b{acc} = {self.scratch(_CHUNK, accdt)}", op)
            constant = _exact_constant(s.expr, how)
            if constant:
                # the sum of a constant (a gradient's count of elements): c * count, exact
                self.emit(d2, f"{acc} = {_lit(_constant_value(s.expr), accdt)} * ({cnt})", op)
                red = []
            else:
                self.emit(d2, f"{acc} = {init}", op)
            if arg:
                self.emit(d2, "ix = 0", op)
            idx = list(idx_k)
            d3 = d2
            if split:
                self.emit(d2, f"for q in range({_LANES}):", op)
                self.emit(d2 + 1, f"l{acc}[q] = {init}", op)
            for k in (red[:-1] if split else red):
                self.emit(d3, f"for i{k} in range({_dim(s.dims[k])}):", op)
                idx[k] = f"i{k}"
                d3 += 1
            if split and _calls_math(s.expr):
                # terms with math calls: chunks of _CHUNK terms computed into b{acc} (in the
                # accumulator's type, exact; l2 squares in the input's type first, as the
                # scalar form does), a loop the vectorizer takes, then added into the lanes,
                # term j into lane j % _LANES; a short last chunk goes to the scalar sum
                kl = red[-1]
                n = _dim(s.dims[kl])
                self.emit(d3, f"for j{kl} in range(0, {n}, {_CHUNK}):", op)
                self.emit(d3 + 1, f"c_ = min({_CHUNK}, {n} - j{kl})", op)
                self.emit(d3 + 1, "for q in range(c_):", op)
                idx[kl] = f"(j{kl} + q)"
                val = self.expr(s.expr, idx, False, d3 + 2)
                self.emit(d3 + 2, f"b{acc}[q] = {val} * {val}" if how == "l2"
                          else f"b{acc}[q] = {val}", op)
                self.emit(d3 + 1, f"if c_ == {_CHUNK}:", op)
                self.emit(d3 + 2, f"for p_ in range(0, {_CHUNK}, {_LANES}):", op)
                self.emit(d3 + 3, f"for q in range({_LANES}):", op)
                self.emit(d3 + 4, f"l{acc}[q] = l{acc}[q] + b{acc}[p_ + q]", op)
                self.emit(d3 + 1, "else:", op)
                self.emit(d3 + 2, "for q in range(c_):", op)
                self.emit(d3 + 3, f"{acc} = {acc} + b{acc}[q]", op)
                # the lanes in a fixed pairwise order, then the last chunk's sum
                self.emit(d2, f"{acc} = {acc} + {_pairwise(f'l{acc}', _LANES)}", op)
            elif split:
                # cheap terms: computed in the lanes' loop
                kl = red[-1]
                n = _dim(s.dims[kl])
                self.emit(d3, f"m{acc} = {n} - {n} % {_LANES}", op)
                self.emit(d3, f"for j{kl} in range(0, m{acc}, {_LANES}):", op)
                self.emit(d3 + 1, f"for q in range({_LANES}):", op)
                idx[kl] = f"(j{kl} + q)"
                val = self.expr(s.expr, idx, False, d3 + 2)
                self.emit(d3 + 2, f"a_ = l{acc}[q]", op)
                combine("a_", val, d3 + 2)
                self.emit(d3 + 2, f"l{acc}[q] = a_", op)
                self.emit(d3, f"for i{kl} in range(m{acc}, {n}):", op)
                idx[kl] = f"i{kl}"
                val = self.expr(s.expr, idx, False, d3 + 1)
                combine(acc, val, d3 + 1)
                # the lanes in a fixed pairwise order, then the tail's sum
                self.emit(d2, f"{acc} = {acc} + {_pairwise(f'l{acc}', _LANES)}", op)
            elif not constant:
                val = self.expr(s.expr, idx, False, d3)
                combine(acc, val, d3)
            if out.rank > 0:
                self.emit(d2, f"f_{out.name}[o{out.name}] = {finish(acc)}", op)
                if not par:
                    self.emit(d2, f"o{out.name} += 1", op)
            else:
                self.emit(d2, f"{out.name} = {finish(acc)}", op)
            return
        if self.column_sum(s, how, axes, depth):
            return
        shape = ", ".join("1" if k in axes else _dim(s.dims[k]) for k in range(rank))
        self.emit(depth, f"{acc} = np.empty(({shape},), {_np(accdt)})", op)
        self.emit(depth, f"{acc}.fill({init})", op)
        idx, d2 = self.open_loops(s.dims, s.ones, depth, op)
        val = self.expr(s.expr, idx, False, d2)
        aidx = ", ".join("0" if k in axes else idx[k] for k in range(rank))
        self.emit(d2, f"a_ = {acc}[{aidx}]", op)
        combine("a_", val, d2)
        self.emit(d2, f"{acc}[{aidx}] = a_", op)
        self.alloc(out, depth, op)
        self.emit(depth, f"f_{out.name} = {self.flat_text(out.name)}", op)
        self.emit(depth, f"f_{acc} = {self.flat_text(acc)}", op)
        self.emit(depth, f"for j in range({out.name}.size):", op)
        self.emit(depth + 1, f"f_{out.name}[j] = {finish(f'f_{acc}[j]')}", op)


# partial sums of an innermost-axis reduction, term j into lane j % _LANES, then pairwise. 32
# float64 lanes (four 512-bit registers): LLVM vectorizes the lanes' loop (each lane keeps its
# own order, so the result does not change with vectorization); with 8 it left the loop scalar
# (a 1024x1024 row reduction on one thread: 460 us with 8 lanes, 190 us with 32)
_LANES = 32
_CHUNK = 128  # terms of such a reduction computed per vectorizable loop (a multiple of _LANES)


def _calls_math(e) -> bool:
    """Whether expression `e` calls a math function (exp, tanh, sigmoid...): terms costly
    enough that computing them in a loop of their own, which vectorizes, pays."""
    def fn_calls(f) -> bool:
        if isinstance(f, Call):
            form = TABLE.get(f.fn)
            forms = form if isinstance(form, tuple) else (form,)
            if f.fn in WHOLE_HELPERS or any(isinstance(x, str) and "math." in x
                                            for x in forms):
                return True
            return any(fn_calls(a) for a in f.args)
        return False
    if isinstance(e, Apply):
        return fn_calls(e.fn) or any(_calls_math(a) for a in e.args)
    return False


def _shared_transposes(kernel: Kernel) -> dict:
    """id(MatMul) -> (name, first) for float products whose right operand is the transpose of
    a variable or input that two or more products of the kernel use (between writes to it):
    the first copies the transpose once into a contiguous `name`, and every one multiplies by
    it (BLAS's kernels for a transposed right operand are ~1.5x slower on small products, and
    an RNN's backward kernels multiply by the same transposed weights at every step)."""
    epoch: dict = {}
    uses: dict = {}
    for s in kernel.stmts:
        if isinstance(s, AssignVar):
            epoch[s.var.name] = epoch.get(s.var.name, 0) + 1
        elif (isinstance(s, MatMul) and s.tb and s.out.dtype.startswith("float")
              and s.b.kind in ("var", "in")):
            uses.setdefault((s.b.name, epoch.get(s.b.name, 0)), []).append(s)
    plan = {}
    for (name, ep), group in uses.items():
        if len(group) > 1:
            for i, s in enumerate(group):
                plan[id(s)] = (f"tr{ep}_{name}", i == 0)
    return plan


def _pairwise(name: str, n: int) -> str:
    """`name[0] + ... + name[n-1]` summed pairwise, as text (n a power of two)."""
    terms = [f"{name}[{q}]" for q in range(n)]
    while len(terms) > 1:
        terms = [f"({a} + {b})" for a, b in zip(terms[::2], terms[1::2])]
    return terms[0]


def _column_sum_operand(s: Reduce, how: str, axes: set):
    """The stored array a sum/mean over the leading axes `axes` of `s` reads as it is (same
    rank and shape class, float), or None."""
    e = s.expr
    rank = len(s.ones)
    if (how not in ("sum", "mean") or not isinstance(e, Load) or e.axes is not None
            or axes != set(range(len(axes))) or len(axes) >= rank):
        return None
    v = e.value
    if v.rank != rank or v.ones != s.ones or v.dtype != s.out.dtype or v.kind == "var":
        return None
    return v if v.dtype in ("float32", "float64") else None


def _constant_value(e):
    """The value of the constant term `e`: a literal, or an op whose scalar expression is one
    number or passes through a constant operand (a gradient's BroadcastLike of 1); else
    None. Casts only to floats (an integer cast could wrap)."""
    if isinstance(e, Lit):
        return None if e.dtype == "bool" else e.value
    if not isinstance(e, Apply) or e.dtype == "bool" or (
            e.cast and not e.dtype.startswith("float")):
        return None
    if isinstance(e.fn, Const):
        v = e.fn.value
        return None if isinstance(v, bool) else v
    if isinstance(e.fn, Arg):
        return _constant_value(e.args[e.fn.index])
    return None


def _exact_constant(e, how: str) -> bool:
    """A sum or mean of the constant `e` (see _constant_value), whose sum is exact in the
    accumulator (a small integer value, non-negative for unsigned types): computed as
    value * count instead of by a loop (a split sum is 5 loops, ~0.1 s of compile time)."""
    v = _constant_value(e)
    if how not in ("sum", "mean") or v is None:
        return False
    v = float(v)
    return v.is_integer() and abs(v) <= 2 ** 20 and not (v < 0 and e.dtype.startswith("u"))


_TEMP = re.compile(r"t\d+$")
MERGE_MAX = 24   # statements in one merged flat loop


def _flat_groups(w: _Writer, kernel: Kernel) -> list:
    """`kernel.stmts` in runs: consecutive flat stores over arrays of one size (equal after
    the kernel's dim checks) form one run, every other statement is a run of its own."""
    parent: dict = {}

    def find(d):
        while parent.get(d, d) != d:
            d = parent[d]
        return d

    for c in kernel.checks:
        if isinstance(c, Check):
            a, b = find(c.a), find(c.b)
            if a != b:
                parent[a] = b

    def size_key(v: Value) -> tuple:
        return tuple(find(d) for d, one in zip(v.dims, v.ones) if not one)

    groups: list = []
    key = None
    for s in kernel.stmts:
        st = w.flat_store(s)
        k = None if st is None else size_key(st[0])
        if k is not None and k == key and len(groups[-1]) < MERGE_MAX:
            groups[-1].append(s)
        else:
            groups.append([s])
        key = k
    return groups


#: one emitter per IR statement kind: (writer, statement, depth)
STATEMENT_EMITTERS = {
    Loop: _Writer.loop, Reduce: _Writer.reduce, MatMul: _Writer.matmul,
    AssignVar: _Writer.assign, CopyVar: _Writer.copy, RowOp: _Writer.row,
    NonZeroCheck: _Writer.nonzero, RangeCheck: _Writer.range_check,
    ShapeOf: _Writer.shape_of, View: _Writer.view, Alloc: _Writer.alloc_stmt,
    Region: _Writer.region, LibCall: _Writer.lib_call,
}


def generate_function(kernel: Kernel, name: str, vecmath: dict | None = None,
                      parallel: bool = False) -> str:
    """The source of one `@njit` function computing `kernel` (decorator not included); with
    `parallel`, the variant whose top-level element loops and row reductions are prange loops
    (compiled with `parallel=True`)."""
    w = _Writer(kernel, vecmath or {}, parallel)
    w.lines.append(f"def {name}(ins, vs):")
    for v in kernel.inputs:
        if v.rank == 0:
            w.emit(1, f"{v.name} = ins[{v.slot}][()]")
        else:
            w.emit(1, f"{v.name} = ins[{v.slot}]")
            for k, one in enumerate(v.ones):
                if not one:
                    w.emit(1, f"d{v.slot}_{k} = {v.name}.shape[{k}]")
    for v in kernel.variables:
        w.emit(1, f"{v.name} = vs[{v.slot}]")
        for k, one in enumerate(v.ones):
            if not one:
                w.emit(1, f"e{v.slot}_{k} = {v.name}.shape[{k}]")
    # the dimension checks are one test and one raise (each branch costs Numba compile time);
    # the error names the first check's op: the caller reruns the step on the interpreter,
    # which reports the exact op and shapes
    dims = [c for c in kernel.checks if not isinstance(c, (NonZeroCheck, RangeCheck))]
    if dims:
        cond = " | ".join(f"({_dim(c.a)} != {_dim(c.b)})" for c in dims)
        w.emit(1, f"if {cond}:", dims[0].op)
        w.emit(2, f"raise ValueError(\"{ERROR_PREFIX}{dims[0].op}:{dims[0].what}\")",
               dims[0].op)
    for c in kernel.checks:
        if isinstance(c, NonZeroCheck):
            w.nonzero(c, 1)
        elif isinstance(c, RangeCheck):
            w.range_check(c, 1)
    for group in _flat_groups(w, kernel):
        if len(group) > 1:
            w.merged_loop(group, 1)
            continue
        s, = group
        emitter = STATEMENT_EMITTERS.get(type(s))
        if emitter is None:  # pragma: no cover
            raise TypeError(f"numba_cpu has no emitter for {type(s).__name__}")
        emitter(w, s, 1)
    res = []
    for r in kernel.results:
        if isinstance(r, Lit):
            res.append(_lit(r.value, r.dtype))
        elif r.kind == "in" and r.rank > 0:
            res.append(f"{r.name}.copy()")
        else:
            res.append(r.name)
    w.emit(1, "return (" + "".join(x + ", " for x in res) + ")")
    return "\n".join(w.lines) + "\n"
