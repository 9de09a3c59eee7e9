"""Kernel IR (ir.py) -> the loop-level form (loops.py): the one place that decides how a CPU
kernel loops.

- Elementwise stores are one flat loop when every operand has the output's shape class, else a
  loop nest over the output's non-unit dims; consecutive flat stores over arrays of one size
  (equal after the kernel's dim checks) share one loop, a value stored earlier in the
  iteration read from its temporary.
- Reductions along the innermost axis (sum, mean, l2) accumulate in `LANES` float64 (int64)
  partial sums, term j into lane j % LANES, the lanes then combined pairwise and the tail (or,
  when the terms call math functions, the last partial chunk of `CHUNK` terms) added last;
  other reductions accumulate in order. Sums of an exact constant are value * count.
- Float products are one BLAS gemm (`Call("gemm")`), oriented as the shapes say (a few rows
  times a wide transposed matrix computes the transposed product); integer products are i-k-j
  loops.
- Softmax-family row ops: per row, the maximum, the sum of exps in float64, then the outputs.
- Window ops call the window library (`Call("nnlib.<routine>")`).
With `parallel`, the outermost loop of each top-level element store and of each row reduction
with kept dims is marked parallel (its iterations write disjoint elements and each row keeps
its own lanes), so the parallel variant computes the same values.
"""
from __future__ import annotations

import math

from jitflow.compiler import ir
from jitflow.compiler.loops import (FLOATS, Alloc, Buf, Call, Copy, DimOf, Fail, For, If, Let,
                                    Lit, Load, Local, LoopKernel, Prim, Scalars, Set, Store,
                                    Unsupported, Var, View, reg_type)

__all__ = ["lower_kernel", "LANES", "CHUNK", "MERGE_MAX", "NT_MAX_ROWS", "NT_MIN_INNER"]

# partial sums of an innermost-axis reduction, term j into lane j % LANES, then pairwise. 32
# float64 lanes (four 512-bit registers): the vectorizer keeps each lane's own order, so the
# result does not change with vectorization (a 1024x1024 row reduction on one thread: 460 us
# with 8 lanes, 190 us with 32)
LANES = 32
CHUNK = 128      # terms with math calls computed per vectorizable loop (a multiple of LANES)
MERGE_MAX = 24   # statements in one merged flat loop
# a @ b.T with few rows runs well below BLAS's peak; the transposed product b @ a.T (then a
# transposing copy) is faster from about 256 columns of a and an output 4 times wider than
# tall (the CNN's fc1 input gradient 32 x 1024 times 1024 x 3136: 4.3 ms against 2.6 ms)
NT_MAX_ROWS = 64
NT_MIN_INNER = 256


def lower_kernel(kernel: ir.Kernel, parallel: bool = False, libm: bool = False) -> LoopKernel:
    """The loop-level form of `kernel`; with `parallel`, the parallel variant's. `libm`:
    math functions through libm (JITFLOW_LIBM) instead of jitflow's math library."""
    return _Gen(kernel, parallel, libm).run()


def _prod(dims) -> object:
    """A dim: the product of `dims` (1 when empty)."""
    dims = [d for d in dims if d != 1]
    if not dims:
        return 1
    if len(dims) == 1:
        return dims[0]
    return ("prod", tuple(dims))


#: the name prefixes of the kernel IR's values (lower.py: a<slot>, v<slot>, b<n>, s<n>)
_IR_PREFIXES = ("a", "b", "s", "v")


class _Gen:
    def __init__(self, kernel: ir.Kernel, parallel: bool, libm: bool) -> None:
        self.k = kernel
        self.parallel = parallel
        self.libm = libm
        self.lk = LoopKernel()
        self.lk.op_names = list(kernel.op_names)
        self.bufs: dict = {}        # ir Value name -> Buf
        self.scalars: dict = {}     # rank-0 ir Value name -> Local
        self.n = 0
        self.block: list = self.lk.body
        self.op = -1
        self.sc = Scalars(self._share, libm)
        self.forward: dict = {}     # in a merged flat loop: buf name -> Local of its element
        self.flat_out = None        # the output of the flat loop being generated

    # -- names and blocks -----------------------------------------------------------------------
    def tmp(self, prefix: str = "t") -> str:
        # a, b, s and v followed by digits name the kernel IR's values (lower.py): a local
        # named like one would shadow it
        assert prefix not in _IR_PREFIXES, prefix
        self.n += 1
        return f"{prefix}{self.n}"

    def emit(self, stmt) -> None:
        self.block.append(stmt)

    def let(self, expr, prefix: str = "t"):
        """`expr` as a new local (returned)."""
        if isinstance(expr, (Lit, Local, DimOf)):
            return expr
        name = self.tmp(prefix)
        self.emit(Let(name, expr, self.op))
        return Local(name, expr.dt)

    def _share(self, expr):
        return self.let(expr)

    def var(self, dt: str, init, prefix: str = "acc") -> Local:
        name = self.tmp(prefix)
        self.emit(Var(name, dt, init, self.op))
        return Local(name, dt)

    def loop(self, stop, body, start=None, step: int = 1, parallel: bool = False,
             var: str = None) -> None:
        """for <var> in range(start, stop, step): body(index Local)."""
        name = var or self.tmp("i")
        outer = self.block
        self.block = []
        body(Local(name, "int64"))
        inner = self.block
        self.block = outer
        self.emit(For(name, Lit(0, "int64") if start is None else start, stop, inner, self.op,
                      step, parallel and self.parallel))

    def cond(self, c, then, orelse=None) -> None:
        outer = self.block
        self.block = []
        then()
        t = self.block
        e = []
        if orelse is not None:
            self.block = []
            orelse()
            e = self.block
        self.block = outer
        self.emit(If(c, t, e, self.op))

    def dim(self, d):
        """An int64 expression for symbolic dim `d`."""
        if d == 1:
            return Lit(1, "int64")
        if d[0] == "const":
            return Lit(int(d[1]), "int64")
        return DimOf(d)

    def mul(self, a, b):
        if isinstance(a, Lit) and a.value == 1:
            return b
        if isinstance(b, Lit) and b.value == 1:
            return a
        return Prim("mul", [a, b], "int64")

    def add(self, a, b):
        if isinstance(a, Lit) and a.value == 0:
            return b
        if isinstance(b, Lit) and b.value == 0:
            return a
        return Prim("add", [a, b], "int64")

    # -- buffers --------------------------------------------------------------------------------
    def buf_of(self, v: ir.Value) -> Buf:
        b = self.bufs.get(v.name)
        if b is None:
            kind = {"in": "in", "var": "var"}.get(v.kind, "tmp")
            b = Buf(v.name, kind, v.slot, v.dtype, v.dims, v.ones)
            self.bufs[v.name] = b
        return b

    def alloc(self, v: ir.Value) -> Buf:
        b = self.buf_of(v)
        self.emit(Alloc(b, self.op))
        self.lk.buffers.append(b)
        return b

    def scratch(self, n: int, dt: str, prefix: str = "l") -> Buf:
        b = Buf(self.tmp(prefix), "scratch", -1, dt, (("const", n),), (n == 1,))
        b.poison = False
        self.emit(Alloc(b, self.op))
        self.lk.scratch.append(b)
        return b

    def size(self, v) -> object:
        """An int64 expression: the element count of `v` (a Buf or ir Value)."""
        return self.dim(_prod([d for d, one in zip(v.dims, v.ones) if not one]))

    # -- expressions ----------------------------------------------------------------------------
    def load(self, v: ir.Value, idx: list, flat: bool, axes=None):
        if v.rank == 0:
            if v.kind == "var":
                return Load(self.buf_of(v), [])
            loc = self.scalars.get(v.name)
            if loc is None:
                raise Unsupported(f"no value for {v.name}")
            return loc
        b = self.buf_of(v)
        if flat:
            f = self.forward.get(b.name)
            if f is not None:
                return f
            return Load(b, [idx[0]], flat=True)
        if axes is not None:
            parts = [Lit(0, "int64") if one else idx[a] for one, a in zip(v.ones, axes)]
        else:
            rank = len(idx)
            parts = [Lit(0, "int64") if one else idx[rank - v.rank + k]
                     for k, one in enumerate(v.ones)]
        return Load(b, parts)

    def expr(self, e, idx: list, flat: bool):
        """The loop-form expression of IR expression `e` at loop index `idx` (one local per
        elementwise op, as each op is one statement)."""
        if isinstance(e, ir.Lit):
            return self.sc.lit(e.value, e.dtype)
        if isinstance(e, ir.Load):
            return self.load(e.value, idx, flat, e.axes)
        if isinstance(e, ir.Index):
            return idx[e.axis]
        if isinstance(e, ir.Take):
            return self.take(e, idx)
        if isinstance(e, ir.DimValue):
            return self.sc.to_dtype(self.dim(e.dim), e.dtype)
        assert isinstance(e, ir.Apply)
        args = [self.expr(a, idx, flat) for a in e.args]
        outer, self.op = self.op, e.op   # the op's own lines carry its name
        try:
            val = self.scalar(e.fn, args, e.dtype, e.lit_dtype)
            if e.cast:
                val = self.sc.to_dtype(val, e.dtype)
            return self.let(val)
        finally:
            self.op = outer

    def scalar(self, fn, args: list, dtype: str, lit_dtype: str):
        if isinstance(fn, ir.Arg):
            return args[fn.index]
        if isinstance(fn, ir.Const):
            return self.sc.lit(fn.value, lit_dtype)
        sub = [self.scalar(a, args, dtype, lit_dtype) for a in fn.args]
        return self.sc.call(fn.fn, sub, dtype, lit_dtype)

    def item(self, v: Buf, k: int, it, idx: list):
        """The position along axis k of `v` of one Take/Region item (negative positions count
        from the end, once, as indexing does)."""
        kind = it[0]
        if kind == "fixed":
            p = self.dim(it[1]) if it[1] != 1 else Lit(1, "int64")
        elif kind == "lin":
            _, start, stride, j = it
            term = idx[j] if stride == 1 else self.mul(idx[j], Lit(int(stride), "int64"))
            p = self.add(self.dim(start) if start != 1 else Lit(1, "int64"), term)
        elif kind == "mod":
            d = self.let(self.dim(it[2]))
            z = Prim("icmp.eq", [d, Lit(0, "int64")], "bool")
            dd = Prim("select", [z, Lit(1, "int64"), d], "int64")
            p = Prim("srem", [idx[it[1]], dd], "int64")
        elif kind == "take":
            _, iv, axes = it
            if reg_type(iv.dtype) != "int64" or iv.dtype == "bool":
                raise Unsupported("non-integer indices")
            p = self.load(iv, idx, False, axes if iv.rank else None)
        else:
            raise Unsupported(f"item {kind}")
        if isinstance(p, Lit) and p.value >= 0 or kind in ("lin", "fixed", "mod") and (
                kind == "mod" or _nonnegative(it[1]) and (kind == "fixed" or it[2] >= 0)):
            return p   # never negative: no wrap
        p = self.let(p)
        size = Lit(1, "int64") if v.ones[k] else self.dim(v.dims[k])
        neg = Prim("icmp.slt", [p, Lit(0, "int64")], "bool")
        return self.let(Prim("select", [neg, Prim("add", [p, size], "int64"), p], "int64"))

    def take(self, e: ir.Take, idx: list):
        v = e.value
        if len(e.items) != v.rank:
            raise Unsupported("items do not match the rank")
        b = self.buf_of(v)
        return Load(b, [self.item(b, k, it, idx) for k, it in enumerate(e.items)])

    # -- flat loops -----------------------------------------------------------------------------
    @staticmethod
    def loads(e, acc: list, remapped: bool = False) -> list:
        if isinstance(e, ir.Load):
            acc.append(e.value if remapped or e.axes is None else None)
        elif isinstance(e, ir.Apply):
            for a in e.args:
                _Gen.loads(a, acc, remapped)
        elif isinstance(e, (ir.Index, ir.Take)) and not remapped:
            acc.append(None)
        return acc

    def can_flatten(self, e, ones: tuple) -> bool:
        """A flat loop works when every array operand has exactly the output's shape class."""
        return all(v is not None and (v.rank == 0 or v.rank == len(ones) and v.ones == ones)
                   for v in self.loads(e, []))

    def flat_store(self, s):
        """(target, expression, mode) of a statement that stores one expression over a whole
        array as a flat loop, else None."""
        if isinstance(s, ir.Loop) and s.out.rank > 0 and self.can_flatten(s.expr, s.out.ones):
            return s.out, s.expr, "set"
        if (isinstance(s, ir.AssignVar) and s.var.rank > 0
                and self.can_flatten(s.expr, s.var.ones)):
            return s.var, s.expr, s.mode
        return None

    def combine_store(self, out: Buf, index: list, val, mode: str, flat: bool):
        """The value to store at `index` of `out` for `mode` ("set", "add", "sub")."""
        if mode == "set":
            return val
        cur = Load(out, index, flat=flat)
        return self.let(self.sc.arith("add" if mode == "add" else "sub", cur, val))

    def store_loop(self, v: ir.Value, e, mode: str, top: bool) -> None:
        out = self.buf_of(v)
        if self.can_flatten(e, v.ones):
            n = self.let(self.size(v), "n")

            def body(i):
                val = self.expr(e, [i], True)
                val = self.combine_store(out, [i], val, mode, True)
                self.emit(Store(out, [i], self.sc.to_dtype(val, out.dtype), self.op,
                                flat=True))
            self.loop(n, body, parallel=top)
            return
        idx = [Lit(0, "int64")] * v.rank
        live = [k for k in range(v.rank) if not v.ones[k]]

        def level(j: int, par: bool) -> None:
            if j == len(live):
                val = self.expr(e, list(idx), False)
                val = self.combine_store(out, list(idx), val, mode, False)
                self.emit(Store(out, list(idx), self.sc.to_dtype(val, out.dtype), self.op))
                return
            k = live[j]

            def inner(i):
                idx[k] = i
                level(j + 1, False)
            self.loop(self.dim(v.dims[k]), inner, parallel=par, var=f"i{k}")
        level(0, top)

    def merged(self, group: list) -> None:
        """Consecutive flat stores over arrays of one size as one loop. Every statement
        touches only element i of its arrays, so the per-element order of reads and writes,
        and so every result, is that of the separate loops."""
        stores = [self.flat_store(s) for s in group]
        for s, (out, _, _) in zip(group, stores):
            if isinstance(s, ir.Loop):
                self.op = s.op
                self.alloc(out)
        self.op = group[0].op
        n = self.let(self.size(stores[0][0]), "n")

        def body(i):
            self.forward = {}
            for s, (out, e, mode) in zip(group, stores):
                self.op = s.op
                b = self.buf_of(out)
                val = self.expr(e, [i], True)
                if mode != "set":
                    val = self.sc.arith("add" if mode == "add" else "sub",
                                        Load(b, [i], flat=True), val)
                val = self.let(self.sc.to_dtype(val, b.dtype))
                self.emit(Store(b, [i], val, self.op, flat=True))
                self.forward[b.name] = val
            self.forward = {}
        self.loop(n, body, parallel=True)

    # -- statements -----------------------------------------------------------------------------
    def s_loop(self, s: ir.Loop, top: bool) -> None:
        out = s.out
        if out.rank == 0:
            val = self.expr(s.expr, [], False)
            name = out.name
            self.emit(Let(name, self.sc.to_dtype(val, out.dtype), self.op))
            self.scalars[name] = Local(name, reg_type(out.dtype))
            return
        self.alloc(out)
        self.store_loop(out, s.expr, "set", top)

    def s_assign(self, s: ir.AssignVar, top: bool) -> None:
        v = s.var
        if v.rank == 0:
            b = self.buf_of(v)
            val = self.expr(s.expr, [], False)
            val = self.combine_store(b, [], val, s.mode, False)
            self.emit(Store(b, [], self.sc.to_dtype(val, b.dtype), self.op))
            return
        self.store_loop(v, s.expr, s.mode, top)

    def s_copy(self, s: ir.CopyVar, top: bool) -> None:
        if s.var.rank == 0:
            src = self.buf_of(s.var) if s.var.kind == "var" else None
            val = Load(src, []) if src is not None else self.load(s.var, [], False)
            self.emit(Let(s.out.name, val, self.op))
            self.scalars[s.out.name] = Local(s.out.name, val.dt)
            return
        out = self.buf_of(s.out)
        self.lk.buffers.append(out)
        self.emit(Copy(out, self.buf_of(s.var), self.op))

    def s_view(self, s: ir.View, top: bool) -> None:
        out, src = self.buf_of(s.out), self.buf_of(s.src)
        self.lk.views.append((src, out))
        self.emit(View(out, src, self.op))

    def s_shape(self, s: ir.ShapeOf, top: bool) -> None:
        out = self.alloc(s.out)
        for k, d in enumerate(s.dims):
            self.emit(Store(out, [Lit(k, "int64")], self.sc.to_dtype(self.dim(d), out.dtype),
                            self.op))

    def s_alloc(self, s: ir.Alloc, top: bool) -> None:
        out = self.alloc(s.out)
        if s.fill is not None:
            val = self.let(self.sc.to_dtype(self.expr(s.fill, [], False), out.dtype))
            self.loop(self.let(self.size(s.out), "n"),
                      lambda i: self.emit(Store(out, [i], val, self.op, flat=True)))

    def s_region(self, s: ir.Region, top: bool) -> None:
        out = self.buf_of(s.out)
        idx = [Lit(0, "int64")] * len(s.dims)
        live = [k for k in range(len(s.dims)) if not s.ones[k]]

        def level(j: int) -> None:
            if j == len(live):
                def store() -> None:
                    val = self.expr(s.expr, list(idx), False)
                    pos = [self.item(out, k, it, list(idx)) for k, it in enumerate(s.items)]
                    val = self.combine_store(out, pos, val, s.mode, False)
                    self.emit(Store(out, pos, self.sc.to_dtype(val, out.dtype), self.op))
                if s.where is None:
                    store()
                else:
                    self.cond(self.sc.conv(self.expr(s.where, list(idx), False), "bool"),
                              store)
                return
            k = live[j]

            def inner(i):
                idx[k] = i
                level(j + 1)
            self.loop(self.dim(s.dims[k]), inner, var=f"i{k}")
        level(0)

    def element_check(self, v: ir.Value, bad, what: str) -> None:
        """Fail with error (op, what) if any element q of `v` makes `bad(q)` true."""
        if reg_type(v.dtype) != "int64" or v.dtype == "bool":
            raise Unsupported("element check of a non-integer")
        code = self.lk.error(self.op, what)
        b = self.buf_of(v)

        def body(q):
            self.cond(bad(q), lambda: self.emit(Fail(code, self.op)))
        if v.rank == 0:
            body(self.let(self.load(v, [], False), "q"))
            return
        self.loop(self.let(self.size(v), "n"),
                  lambda i: body(self.let(Load(b, [i], flat=True), "q")), var="i")

    def s_nonzero(self, c: ir.NonZeroCheck, top: bool = False) -> None:
        self.element_check(c.value, lambda q: Prim("icmp.eq", [q, Lit(0, "int64")], "bool"),
                           c.what)

    def s_range(self, c: ir.RangeCheck, top: bool = False) -> None:
        def bad(q):
            hi = Prim("icmp.sge", [q, self.dim(c.dim)], "bool")
            if not c.lower:
                return hi
            lo = Prim("icmp.slt", [q, Lit(0, "int64")], "bool")
            return Prim("or", [lo, hi], "bool")
        self.element_check(c.value, bad, c.what)

    def s_libcall(self, s: ir.LibCall, top: bool) -> None:
        for o in s.outs:
            self.alloc(o)
        self.emit(Call(f"nnlib.{s.fn}", [[self.buf_of(v) for v in s.args],
                                         [self.buf_of(o) for o in s.outs],
                                         [int(p) for p in s.params]], self.op))

    # -- products -------------------------------------------------------------------------------
    def s_matmul(self, s: ir.MatMul, top: bool) -> None:
        a, b, out = (self.buf_of(v) for v in (s.a, s.b, s.out))
        for v in (a, b, out):
            if v.rank != 2:
                raise Unsupported("matmul of rank != 2")
        dd = lambda v, k: Lit(1, "int64") if v.ones[k] else self.dim(v.dims[k])  # noqa: E731
        m = self.let(dd(a, 1) if s.ta else dd(a, 0), "m")
        kk = self.let(dd(a, 0) if s.ta else dd(a, 1), "k")
        n = self.let(dd(b, 0) if s.tb else dd(b, 1), "n")
        self.alloc(s.out)
        if out.dtype in FLOATS and a.dtype == b.dtype == out.dtype:
            shared = self.transposed.get(id(s))
            if shared is not None:
                name, first = shared
                if first:
                    # the transposed right operand, once, in a contiguous buffer
                    t = Buf(name, "tmp", -1, b.dtype, (b.dims[1], b.dims[0]),
                            (b.ones[1], b.ones[0]))
                    t.poison = False
                    self.bufs[name] = t
                    self.emit(Alloc(t, self.op))
                    self.lk.buffers.append(t)
                    r0, c0 = self.let(dd(b, 0), "r"), self.let(dd(b, 1), "c")
                    self.loop(r0, lambda i: self.loop(c0, lambda j: self.emit(Store(
                        t, [j, i], Load(b, [i, j]), self.op))))
                self.gemm(s.ta, False, False, a, self.bufs[name], out, m, n, kk)
                return
            if s.tb and not s.ta:
                # a @ b.T: BLAS runs a short, wide one faster as (b @ a.T).T
                few = Prim("and", [Prim("and", [
                    Prim("icmp.sle", [m, Lit(NT_MAX_ROWS, "int64")], "bool"),
                    Prim("icmp.sge", [kk, Lit(NT_MIN_INNER, "int64")], "bool")], "bool"),
                    Prim("icmp.sge", [n, Prim("mul", [Lit(4, "int64"), m], "int64")],
                         "bool")], "bool")

                def transposed():
                    t = Buf(self.tmp("nt"), "tmp", -1, out.dtype, (s.b.dims[0], s.a.dims[0]),
                            (b.ones[0], a.ones[0]))
                    t.poison = False
                    self.emit(Alloc(t, self.op))
                    self.lk.buffers.append(t)
                    self.gemm(False, True, False, b, a, t, n, m, kk)
                    self.loop(m, lambda i: self.loop(n, lambda j: self.emit(Store(
                        out, [i, j], Load(t, [j, i]), self.op))))
                self.cond(few, transposed, lambda: self.gemm(s.ta, s.tb, False, a, b, out,
                                                             m, n, kk))
                return
            self.gemm(s.ta, s.tb, False, a, b, out, m, n, kk)
            return
        if reg_type(out.dtype) != "int64" or a.dtype != out.dtype or b.dtype != out.dtype:
            raise Unsupported(f"matmul of {a.dtype} and {b.dtype}")
        # integers: no BLAS; out = 0, then i-k-j loops accumulating into the output rows
        zero = self.sc.lit(0, out.dtype)
        self.loop(self.let(self.size(s.out), "n"),
                  lambda i: self.emit(Store(out, [i], zero, self.op, flat=True)))

        def row(i):
            def kth(k):
                q = self.let(Load(a, [k, i] if s.ta else [i, k]), "q")

                def col(j):
                    cur = Load(out, [i, j])
                    bv = Load(b, [j, k] if s.tb else [k, j])
                    val = self.sc.arith("add", cur, self.sc.arith("mul", q, bv))
                    self.emit(Store(out, [i, j], self.sc.to_dtype(val, out.dtype), self.op))
                self.loop(n, col, var="j")
            self.loop(kk, kth, var="k")
        self.loop(m, row, var="i")

    def gemm(self, ta: bool, tb: bool, _acc: bool, a: Buf, b: Buf, out: Buf, m, n, k) -> None:
        """out (m x n) = op(a) @ op(b): one BLAS call (an empty inner dim gives zeros)."""
        self.emit(Call("gemm", [ta, tb, m, n, k, a, b, out], self.op))

    # -- row ops --------------------------------------------------------------------------------
    def s_row(self, s: ir.RowOp, top: bool) -> None:
        x = self.buf_of(s.x)
        how, dt = s.how, s.x.dtype
        if dt not in FLOATS or how not in ("softmax", "log_softmax", "xent", "sparse_xent"):
            raise Unsupported(f"RowOp {how} of {dt}")
        c = self.let(Lit(1, "int64") if s.x.ones[-1] else self.dim(s.x.dims[-1]), "c")
        rows = self.let(self.dim(_prod([d for d, one in zip(s.x.dims[:-1], s.x.ones[:-1])
                                        if not one])), "rows")
        outs = []
        for o in s.outs:
            if o is None:
                outs.append(None)
            elif o.rank == 0:
                # a rank-0 loss (rank-1 logits): a one-element buffer, read after the rows
                one = Buf(self.tmp("m1_"), "tmp", -1, o.dtype, (("const", 1),), (True,))
                self.emit(Alloc(one, self.op))
                self.lk.buffers.append(one)
                outs.append(("scalar", o, one))
            else:
                outs.append(("buf", o, self.alloc(o)))
        lab = self.buf_of(s.labels) if s.labels is not None else None
        if how == "sparse_xent" and reg_type(lab.dtype) != "int64":
            raise Unsupported("sparse labels not integers")
        if how == "xent" and lab.dtype != dt:
            raise Unsupported("labels of another dtype")
        sc = self.sc

        def flat(b: Buf, r, j):
            return Load(b, [self.let(Prim("add", [Prim("mul", [r, c], "int64"), j], "int64"),
                                     "p")], flat=True)

        def put(o, r, j, val):
            b = o[2]
            if j is None:
                self.emit(Store(b, [Lit(0, "int64") if o[0] == "scalar" else r],
                                sc.to_dtype(val, b.dtype), self.op, flat=True))
            else:
                p = self.let(Prim("add", [Prim("mul", [r, c], "int64"), j], "int64"), "p")
                self.emit(Store(b, [p], sc.to_dtype(val, b.dtype), self.op, flat=True))

        def exp(v):
            return self.let(self.scalar(ir.Call("exp", (ir.Arg(0),)), [v], dt, dt))

        def row(r):
            m = self.var(dt, Lit(-math.inf, dt), "m")

            def mx(j):
                xv = self.let(flat(x, r, j), "x")
                self.cond(Prim("fcmp.ogt", [xv, m], "bool"),
                          lambda: self.emit(Set(m.name, xv, self.op)))
            self.loop(c, mx, var="j")
            fin = Prim("fcmp.olt", [Prim("fabs", [m], dt), Lit(math.inf, dt)], "bool")
            mm = self.let(Prim("select", [fin, m, Lit(0.0, dt)], dt), "mm")
            ssum = self.var("float64", Lit(0.0, "float64"), "ss")

            def sm(j):
                e = exp(self.let(sc.arith("sub", flat(x, r, j), mm)))
                self.emit(Set(ssum.name, sc.arith("add", ssum, sc.conv(e, "float64")),
                              self.op))
            self.loop(c, sm, var="j")
            ls = self.let(sc.to_dtype(self.scalar(ir.Call("log", (ir.Arg(0),)),
                                                  [sc.conv(ssum, dt)], dt, dt), dt), "ls")
            if how == "softmax":
                y = outs[0]
                inv = self.let(sc.conv(ssum, dt), "inv")

                def st(j):
                    e = exp(self.let(sc.arith("sub", flat(x, r, j), mm)))
                    put(y, r, j, sc.arith("div", e, inv))
                self.loop(c, st, var="j")
                return
            if how == "log_softmax":
                y = outs[0]
                self.loop(c, lambda j: put(y, r, j, sc.arith("sub", self.let(sc.arith(
                    "sub", flat(x, r, j), mm)), ls)), var="j")
                return
            loss, bp = outs
            if how == "sparse_xent":
                kq = self.let(Load(lab, [r], flat=True), "kq")
                neg = Prim("icmp.slt", [kq, Lit(0, "int64")], "bool")
                k = self.let(Prim("select", [neg, Prim("add", [kq, c], "int64"), kq],
                                  "int64"), "k")
                if loss is not None:
                    xk = self.let(flat(x, r, k), "xk")
                    put(loss, r, None, sc.arith("sub", ls, self.let(sc.arith("sub", xk, mm))))
                if bp is not None:
                    def st3(j):
                        p = exp(self.let(sc.arith("sub", self.let(sc.arith(
                            "sub", flat(x, r, j), mm)), ls)))
                        eq = Prim("icmp.eq", [j, kq], "bool")
                        p1 = self.let(sc.arith("sub", p, sc.lit(1, dt)))
                        put(bp, r, j, Prim("select", [eq, p1, p], dt))
                    self.loop(c, st3, var="j")
                return
            if loss is not None:
                acc = self.var("float64", Lit(0.0, "float64"), "acc")

                def xl(j):
                    # TF's form: sum(labels * (ls - z)) from +0 (an all-zero row is +0)
                    z = self.let(sc.arith("sub", flat(x, r, j), mm))
                    t = self.let(sc.arith("mul", flat(lab, r, j),
                                          self.let(sc.arith("sub", ls, z))))
                    self.emit(Set(acc.name, sc.arith("add", acc, t), self.op))
                self.loop(c, xl, var="j")
                put(loss, r, None, acc)
            if bp is not None:
                def xb(j):
                    p = exp(self.let(sc.arith("sub", self.let(sc.arith(
                        "sub", flat(x, r, j), mm)), ls)))
                    put(bp, r, j, sc.arith("sub", p, flat(lab, r, j)))
                self.loop(c, xb, var="j")
        self.loop(rows, row, var="r")
        for o in outs:
            if o is not None and o[0] == "scalar":
                _, v, one = o
                self.emit(Let(v.name, Load(one, [Lit(0, "int64")], flat=True), self.op))
                self.scalars[v.name] = Local(v.name, reg_type(v.dtype))

    # -- reductions -----------------------------------------------------------------------------
    def s_reduce(self, s: ir.Reduce, top: bool) -> None:
        out = s.out
        how = s.how
        arg = how in ("argmax", "argmin")
        if arg:
            how = how[3:]
        if how not in ("sum", "mean", "l2", "prod", "max", "min"):
            raise Unsupported(f"reduction {s.how}")
        fdt = (s.in_dtype if arg else out.dtype) in FLOATS
        if how in ("sum", "mean", "prod", "l2"):
            accdt = "float64" if fdt else "int64"
        else:
            accdt = reg_type(s.in_dtype if arg else out.dtype)
        rank = len(s.ones)
        axes = set(s.axes)
        red = [k for k in range(rank) if k in axes and not s.ones[k]]
        keep = [k for k in range(rank) if k not in axes]
        trailing = all(k < min(axes) for k in keep) if axes else True
        if arg and not trailing:
            raise Unsupported("arg reduction over leading axes")
        sc = self.sc
        if how in ("sum", "mean", "l2"):
            init = sc.lit(0, accdt)
        elif how == "prod":
            init = sc.lit(1, accdt)
        elif fdt:
            init = Lit(-math.inf if how == "max" else math.inf, accdt)
        elif accdt == "bool":
            init = Lit(how != "max", "bool")
        else:
            import numpy as np
            info = np.iinfo(s.in_dtype if arg else out.dtype)
            init = Lit(int(info.min if how == "max" else info.max), "int64")
        cnt = self.dim(_prod([s.dims[k] for k in range(rank) if k in axes]))

        def term(idx):
            val = self.expr(s.expr, idx, False)
            if how == "l2":
                val = self.let(sc.arith("mul", val, val))
            return val

        def combine(cur, val):
            if how in ("sum", "mean", "l2"):
                return sc.arith("add", cur, sc.conv(val, accdt) if accdt in FLOATS else val)
            if how == "prod":
                return sc.conv(sc.arith("mul", cur, val), accdt)
            raise AssertionError(how)

        def minmax(acc: Local, ix, idx) -> None:
            val = self.expr(s.expr, idx, False)
            if val.dt != accdt:
                raise Unsupported(f"{s.how} of {val.dt} into {accdt}")
            better = sc.cmp("gt" if how == "max" else "lt", val, acc)
            if accdt in FLOATS:
                vnan = Prim("fcmp.uno", [val, val], "bool")
                if arg:
                    vnan = Prim("and", [vnan, Prim("fcmp.ord", [acc, acc], "bool")], "bool")
                upd = Prim("or", [better, vnan], "bool")
            else:
                upd = better

            def then():
                self.emit(Set(acc.name, val, self.op))
                if arg:
                    self.emit(Set(ix.name, idx[red[-1]] if red else Lit(0, "int64"), self.op))
            self.cond(upd, then)

        def finish(acc: Local, ix):
            if arg:
                return sc.to_dtype(ix, out.dtype)
            if how == "l2":
                return sc.to_dtype(sc.arith("mul", acc, Lit(0.5, "float64")), out.dtype)
            if how == "mean":
                if fdt:
                    return sc.to_dtype(sc.arith("div", acc, sc.conv(cnt, "float64")),
                                       out.dtype)
                # integers: truncated toward zero (C division); an empty mean gives 0
                return sc.to_dtype(sc.division("truncdiv", acc, cnt, False), out.dtype)
            return sc.to_dtype(acc, out.dtype)

        if not trailing:
            self.reduce_leading(s, how, accdt, init, combine, finish, cnt, axes)
            return
        ob = self.alloc(out) if out.rank > 0 else None
        kept = [k for k in range(rank) if k not in axes and not s.ones[k]]
        par = self.parallel and top and out.rank > 0 and bool(kept)
        opos = None if ob is None or par else self.var("int64", Lit(0, "int64"), "o")
        constant = _exact_constant(s.expr, how)
        split = (how in ("sum", "mean", "l2") and bool(red) and red[-1] == rank - 1
                 and not constant)
        math_terms = split and _calls_math(s.expr)
        lanes = None
        if split and not par:
            lanes = self.scratch(LANES, accdt, "l")
        chunk_buf = None
        if math_terms and not par:
            chunk_buf = self.scratch(CHUNK, accdt, "cb")
        idx = [Lit(0, "int64")] * rank

        def per_output() -> None:
            nonlocal lanes, chunk_buf
            if par:
                # the output position, computed (each row on its own thread)
                pos = Lit(0, "int64")
                stride = Lit(1, "int64")
                for k in reversed(kept):
                    pos = self.add(self.mul(idx[k], stride), pos)
                    stride = self.mul(stride, self.dim(s.dims[k]))
                here = self.let(pos, "o")
                if split:
                    lanes = self.scratch(LANES, accdt, "l")
                    if math_terms:
                        chunk_buf = self.scratch(CHUNK, accdt, "cb")
            else:
                here = opos
            if constant:
                c = sc.lit(_constant_value(s.expr), accdt)
                v = sc.arith("mul", c, sc.conv(cnt, accdt) if accdt in FLOATS else cnt)
                acc = self.var(accdt, v)
            else:
                acc = self.var(accdt, init)
            ix = self.var("int64", Lit(0, "int64"), "ix") if arg else None
            if not constant:
                if split:
                    self.loop(Lit(LANES, "int64"), lambda q: self.emit(
                        Store(lanes, [q], init, self.op, flat=True)), var="q")
                inner = red[:-1] if split else red

                def level(j: int) -> None:
                    if j < len(inner):
                        k = inner[j]

                        def body(i):
                            idx[k] = i
                            level(j + 1)
                        self.loop(self.dim(s.dims[k]), body, var=f"i{k}")
                        return
                    if not split:
                        if how in ("max", "min"):
                            minmax(acc, ix, list(idx))
                        else:
                            self.emit(Set(acc.name, combine(acc, term(list(idx))), self.op))
                        return
                    kl = red[-1]
                    nn = self.let(self.dim(s.dims[kl]), "n")
                    if math_terms:
                        self.lanes_of_chunks(acc, lanes, chunk_buf, nn, kl, idx, term, combine)
                    else:
                        self.lanes_of_terms(acc, lanes, nn, kl, idx, term, combine)
                level(0)
                if split:
                    # the lanes in a fixed pairwise order, then the tail's sum
                    vals = [Load(lanes, [Lit(q, "int64")], flat=True) for q in range(LANES)]
                    while len(vals) > 1:
                        vals = [sc.arith("add", a, b) for a, b in zip(vals[::2], vals[1::2])]
                    self.emit(Set(acc.name, sc.arith("add", acc, vals[0]), self.op))
            res = finish(acc, ix)
            if ob is None:
                self.emit(Let(out.name, res, self.op))
                self.scalars[out.name] = Local(out.name, reg_type(out.dtype))
                return
            self.emit(Store(ob, [here], res, self.op, flat=True))
            if not par:
                self.emit(Set(opos.name, Prim("add", [opos, Lit(1, "int64")], "int64"),
                              self.op))

        def level_keep(j: int, first: bool) -> None:
            if j == len(kept):
                per_output()
                return
            k = kept[j]

            def body(i):
                idx[k] = i
                level_keep(j + 1, False)
            self.loop(self.dim(s.dims[k]), body, parallel=par and first, var=f"i{k}")
        level_keep(0, True)

    def lanes_of_terms(self, acc, lanes, n, kl, idx, term, combine) -> None:
        """Cheap terms: term j into lane j % LANES for the first n - n % LANES terms, the tail
        into `acc` (the caller then adds the lanes pairwise)."""
        m = self.let(Prim("sub", [n, Prim("srem", [n, Lit(LANES, "int64")], "int64")],
                          "int64"), "m")

        def blocks(j0):
            def lane(q):
                idx[kl] = self.let(Prim("add", [j0, q], "int64"), "j")
                cur = self.let(Load(lanes, [q], flat=True), "ln")
                self.emit(Store(lanes, [q], combine(cur, term(list(idx))), self.op, flat=True))
            self.loop(Lit(LANES, "int64"), lane, var="q")
        self.loop(m, blocks, step=LANES, var=f"j{kl}")

        def tail(i):
            idx[kl] = i
            self.emit(Set(acc.name, combine(acc, term(list(idx))), self.op))
        self.loop(n, tail, start=m, var=f"i{kl}")

    def lanes_of_chunks(self, acc, lanes, chunk, n, kl, idx, term, combine) -> None:
        """Terms with math calls: chunks of CHUNK terms computed into `chunk` (a loop the
        vectorizer takes), then added into the lanes, term j into lane j % LANES; a short last
        chunk is added into `acc` in order."""
        sc = self.sc

        def per_chunk(j0):
            cnt = self.let(Prim("select", [
                Prim("icmp.slt", [Lit(CHUNK, "int64"), Prim("sub", [n, j0], "int64")],
                     "bool"), Lit(CHUNK, "int64"), Prim("sub", [n, j0], "int64")], "int64"),
                "c")

            def fill(q):
                idx[kl] = self.let(Prim("add", [j0, q], "int64"), "j")
                v = term(list(idx))
                self.emit(Store(chunk, [q], sc.conv(v, chunk.dtype) if chunk.dtype in FLOATS
                                else v, self.op, flat=True))
            self.loop(cnt, fill, var="q")
            full = Prim("icmp.eq", [cnt, Lit(CHUNK, "int64")], "bool")

            def whole():
                def group(p):
                    def lane(q):
                        cur = self.let(Load(lanes, [q], flat=True), "ln")
                        t = Load(chunk, [self.let(Prim("add", [p, q], "int64"))], flat=True)
                        self.emit(Store(lanes, [q], sc.arith("add", cur, t), self.op,
                                        flat=True))
                    self.loop(Lit(LANES, "int64"), lane, var="q")
                self.loop(Lit(CHUNK, "int64"), group, step=LANES, var="p")

            def partial():
                def add(q):
                    self.emit(Set(acc.name, sc.arith("add", acc, Load(chunk, [q], flat=True)),
                                  self.op))
                self.loop(cnt, add, var="q")
            self.cond(full, whole, partial)
        self.loop(n, per_chunk, step=CHUNK, var=f"j{kl}")

    def reduce_leading(self, s, how, accdt, init, combine, finish, cnt, axes) -> None:
        """A reduction over axes that are not all trailing: an accumulator array of the kept
        shape, the terms added in the input's order, then the outputs."""
        rank = len(s.ones)
        sc = self.sc
        acc_dims = tuple(1 if k in axes else s.dims[k] for k in range(rank))
        acc_ones = tuple(True if k in axes else s.ones[k] for k in range(rank))
        accb = Buf(self.tmp("acc"), "tmp", -1, accdt, acc_dims, acc_ones)
        accb.poison = False
        self.emit(Alloc(accb, self.op))
        self.lk.buffers.append(accb)
        n_acc = self.let(self.size(accb), "n")
        self.loop(n_acc, lambda i: self.emit(Store(accb, [i], init, self.op, flat=True)))
        idx = [Lit(0, "int64")] * rank
        live = [k for k in range(rank) if not s.ones[k]]

        def level(j: int) -> None:
            if j == len(live):
                aidx = [Lit(0, "int64") if k in axes else idx[k] for k in range(rank)]
                cur = self.let(Load(accb, aidx), "ln")
                val = self.expr(s.expr, list(idx), False)
                if how in ("max", "min"):
                    better = sc.cmp("gt" if how == "max" else "lt", val, cur)
                    if accdt in FLOATS:
                        better = Prim("or", [better, Prim("fcmp.uno", [val, val], "bool")],
                                      "bool")
                    new = Prim("select", [better, val, cur], accdt)
                else:
                    if how == "l2":
                        val = self.let(sc.arith("mul", val, val))
                    new = combine(cur, val)
                self.emit(Store(accb, aidx, new, self.op))
                return
            k = live[j]

            def inner(i):
                idx[k] = i
                level(j + 1)
            self.loop(self.dim(s.dims[k]), inner, var=f"i{k}")
        level(0)
        out = self.alloc(s.out)
        n_out = self.let(self.size(s.out), "n")

        def fin(j):
            a = self.let(Load(accb, [j], flat=True), "ln")
            self.emit(Store(out, [j], finish(a, None), self.op, flat=True))
        self.loop(n_out, fin, var="j")

    # -- the kernel -----------------------------------------------------------------------------
    def run(self) -> LoopKernel:
        k, lk = self.k, self.lk
        for v in k.inputs:
            b = self.buf_of(v)
            lk.inputs.append(b)
            if v.rank == 0:
                self.scalars[v.name] = Local(v.name, reg_type(v.dtype))
        for v in k.variables:
            lk.variables.append(self.buf_of(v))
        self.transposed = _shared_transposes(k)
        lk.dim_checks = [(c.a, c.b, c.op, c.what) for c in k.checks
                         if not isinstance(c, (ir.NonZeroCheck, ir.RangeCheck))]
        if lk.dim_checks:
            c = lk.dim_checks[0]
            lk.error(c[2], c[3])   # error 1: the dim checks (named by the first)
        for c in k.checks:
            self.op = c.op
            if isinstance(c, ir.NonZeroCheck):
                self.s_nonzero(c)
            elif isinstance(c, ir.RangeCheck):
                self.s_range(c)
        for group in self.flat_groups():
            if len(group) > 1:
                self.merged(group)
                continue
            s, = group
            self.op = s.op
            fn = _STATEMENTS.get(type(s))
            if fn is None:
                raise Unsupported(f"statement {type(s).__name__}")
            fn(self, s, True)
        for r in k.results:
            lk.result_dtypes.append(r.dtype)
            if not isinstance(r, ir.Lit) and r.rank == 0:
                lk.scalar_results.append((len(lk.results), r.dtype))
            if isinstance(r, ir.Lit):
                lk.results.append(self.sc.lit(r.value, r.dtype) if r.dtype != "bool"
                                  else Lit(bool(r.value), "bool"))
            elif r.rank == 0:
                loc = self.scalars.get(r.name)
                if loc is None and r.kind == "var":
                    loc = Load(self.buf_of(r), [])
                if loc is None:
                    raise Unsupported(f"no value for {r.name}")
                lk.results.append(loc)
            else:
                lk.results.append(self.buf_of(r))
        return lk

    def flat_groups(self) -> list:
        """`kernel.stmts` in runs: consecutive flat stores over arrays of one size (equal after
        the kernel's dim checks) form one run, every other statement a run of its own."""
        parent: dict = {}

        def find(d):
            while parent.get(d, d) != d:
                d = parent[d]
            return d
        for c in self.k.checks:
            if isinstance(c, ir.Check):
                a, b = find(c.a), find(c.b)
                if a != b:
                    parent[a] = b

        def size_key(v) -> tuple:
            return tuple(find(d) for d, one in zip(v.dims, v.ones) if not one)
        groups: list = []
        key = None
        for s in self.k.stmts:
            st = self.flat_store(s)
            kk = None if st is None else size_key(st[0])
            if kk is not None and kk == key and len(groups[-1]) < MERGE_MAX:
                groups[-1].append(s)
            else:
                groups.append([s])
            key = kk
        return groups


_STATEMENTS = {
    ir.Loop: _Gen.s_loop, ir.Reduce: _Gen.s_reduce, ir.MatMul: _Gen.s_matmul,
    ir.AssignVar: _Gen.s_assign, ir.CopyVar: _Gen.s_copy, ir.RowOp: _Gen.s_row,
    ir.NonZeroCheck: _Gen.s_nonzero, ir.RangeCheck: _Gen.s_range, ir.ShapeOf: _Gen.s_shape,
    ir.View: _Gen.s_view, ir.Alloc: _Gen.s_alloc, ir.Region: _Gen.s_region,
    ir.LibCall: _Gen.s_libcall,
}


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
    if k == "min":
        return _nonnegative(d[1]) and _nonnegative(d[2])
    return False


def _calls_math(e) -> bool:
    """Whether expression `e` calls a math function (exp, tanh, sigmoid...): terms costly
    enough that computing them in a loop of their own, which vectorizes, pays."""
    cheap = {"id", "cast", "add", "sub", "mul", "div", "neg", "maximum", "minimum", "abs",
             "sign", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "select",
             "isnan", "isfinite", "isinf", "floordiv", "floormod", "truncdiv", "truncmod"}

    def fn_calls(f) -> bool:
        if isinstance(f, ir.Call):
            return f.fn not in cheap or any(fn_calls(a) for a in f.args)
        return False
    if isinstance(e, ir.Apply):
        return fn_calls(e.fn) or any(_calls_math(a) for a in e.args)
    return False


def _shared_transposes(kernel: ir.Kernel) -> dict:
    """id(MatMul) -> (name, first) for float products whose right operand is the transpose of
    a variable or input that two or more products of the kernel use (between writes to it):
    the first copies the transpose once into a contiguous `name`, and every one multiplies by
    it (BLAS's kernels for a transposed right operand are ~1.5x slower on small products, and
    an RNN's backward kernels multiply by the same transposed weights at every step)."""
    epoch: dict = {}
    uses: dict = {}
    for s in kernel.stmts:
        if isinstance(s, ir.AssignVar):
            epoch[s.var.name] = epoch.get(s.var.name, 0) + 1
        elif (isinstance(s, ir.MatMul) and s.tb and s.out.dtype.startswith("float")
              and s.b.kind in ("var", "in")):
            uses.setdefault((s.b.name, epoch.get(s.b.name, 0)), []).append(s)
    plan = {}
    for (name, ep), group in uses.items():
        if len(group) > 1:
            for i, s in enumerate(group):
                plan[id(s)] = (f"tr{ep}_{name}", i == 0)
    return plan


def _constant_value(e):
    """The value of the constant term `e`: a literal, or an op whose scalar expression is one
    number or passes through a constant operand (a gradient's BroadcastLike of 1); else
    None. Casts only to floats (an integer cast could wrap)."""
    if isinstance(e, ir.Lit):
        return None if e.dtype == "bool" else e.value
    if not isinstance(e, ir.Apply) or e.dtype == "bool" or (
            e.cast and not e.dtype.startswith("float")):
        return None
    if isinstance(e.fn, ir.Const):
        v = e.fn.value
        return None if isinstance(v, bool) else v
    if isinstance(e.fn, ir.Arg):
        return _constant_value(e.args[e.fn.index])
    return None


def _exact_constant(e, how: str) -> bool:
    """A sum or mean of the constant `e` whose sum is exact in the accumulator (a small
    integer value, non-negative for unsigned types): computed as value * count instead of by
    a loop."""
    v = _constant_value(e)
    if how not in ("sum", "mean") or v is None:
        return False
    v = float(v)
    return v.is_integer() and abs(v) <= 2 ** 20 and not (v < 0 and e.dtype.startswith("u"))
