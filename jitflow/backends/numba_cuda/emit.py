"""numba_cuda code generation: one Kernel (jitflow/compiler/ir.py) -> a module of CUDA kernels
and the host function that launches them, with one emitter per IR node kind.

The host function `run(ins, vs, rt)` takes device arrays (`ins`: the kernel's inputs, `vs`:
variable buffers, updated in place; rank-0 values are 1-element arrays) and the runtime `rt`
(allocation, launch sizes, copies); it checks dims first (raising `ValueError("jitflow:<op>:
<what>")` before anything is written, as numba_cpu does), launches one kernel per statement and
returns device arrays. Kernel shapes:

- elementwise statements (`Loop`, `AssignVar`, `Region`, fills): one thread per element in a
  grid-stride loop over the flat index, split into the loop indices;
- `Reduce`: a block per output element (grid-stride over them), its threads striding the
  reduced elements, then a tree reduction in shared memory (argmax/argmin carry the index);
- `MatMul`: a tiled product, TILE x TILE tiles of both operands in shared memory;
- `RowOp`: a block per row: block reductions of the row maximum and the sum of exps, then the
  outputs;
- `View`, `CopyVar`, `ShapeOf` and element checks are host work on device arrays.

`LibCall` (convolutions, pooling and their gradients) calls windowlib.py's kernels; a routine
it lacks raises `Unemittable` naming the op, and the driver runs that op on the host.
`MatMul` calls the runtime's vendor GEMM (vendor.py) for float operands where one was chosen.
"""
from __future__ import annotations

import math

import numpy as np

from jitflow.backends.base import ERROR_PREFIX
from jitflow.backends.numba_cuda.scalar_ops import TABLE
from jitflow.backends.pytext import const_text, dim_text, lit_text, np_name
from jitflow.compiler.ir import (Alloc, Apply, Arg, AssignVar, Const, CopyVar, DimValue, Index,
                                 Kernel, LibCall, Lit, Load, Loop, MatMul, NonZeroCheck,
                                 RangeCheck, Reduce, Region, RowOp, ShapeOf, Take, Value, View)

__all__ = ["generate_module", "Unemittable", "ERROR_PREFIX", "BLOCK", "TILE"]

BLOCK = "_BLOCK"     # threads per block of reductions and row ops (a module constant)
TILE = "_TILE"       # matmul tile side (a module constant)
_IND = "    "
_dim = dim_text
_np = np_name


class Unemittable(Exception):
    """The kernel has a node kind this backend cannot emit; `.ops` are the op indices."""

    def __init__(self, ops: list, why: str) -> None:
        super().__init__(why)
        self.ops = ops


_NB = {"float32": "numba.float32", "float64": "numba.float64", "int8": "numba.int8",
       "int16": "numba.int16", "int32": "numba.int32", "int64": "numba.int64",
       "uint8": "numba.uint8", "uint16": "numba.uint16", "uint32": "numba.uint32",
       "uint64": "numba.uint64", "bool": "numba.int32"}


class _Kernel:
    """The text of one `@cuda.jit` function being written."""

    def __init__(self, writer: "_Writer", name: str, op: int) -> None:
        self.w = writer
        self.name = name
        self.op = op
        self.lines: list = []
        self.tmp = 0

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(_IND * depth + text + f"  # {self.w.k.op_names[self.op]}")

    # -- expressions ------------------------------------------------------------------------
    def load(self, v: Value, idx: list, axes=None) -> str:
        if v.rank == 0:
            return f"{v.name}[0]"
        if axes is not None:
            parts = ["0" if one else idx[a] for one, a in zip(v.ones, axes)]
        else:
            rank = len(idx)
            parts = ["0" if one else idx[rank - v.rank + k] for k, one in enumerate(v.ones)]
        return f"{v.name}[{', '.join(parts)}]"

    def item(self, it, idx: list) -> str:
        kind = it[0]
        if kind == "fixed":
            return _dim(it[1]) if it[1] != 1 else "1"
        if kind == "lin":
            _, start, stride, k = it
            st = _dim(start)
            term = idx[k] if stride == 1 else f"{stride} * {idx[k]}"
            return term if st == "0" else f"{st} + {term}"
        if kind == "mod":
            return f"{idx[it[1]]} % {_dim(it[2])}"
        if kind == "take":
            _, v, axes = it
            return self.load(v, idx, axes if v.rank else None)
        raise KeyError(kind)

    def expr(self, e, idx: list, depth: int) -> str:
        """Emit temporaries for `e` (one per op) and return the text of its value."""
        if isinstance(e, Lit):
            return lit_text(e.value, e.dtype)
        if isinstance(e, Load):
            return self.load(e.value, idx, e.axes)
        if isinstance(e, Index):
            return idx[e.axis]
        if isinstance(e, Take):
            return f"{e.value.name}[{', '.join(self.item(it, idx) for it in e.items)}]"
        if isinstance(e, DimValue):
            return f"{_np(e.dtype)}({_dim(e.dim)})"
        assert isinstance(e, Apply)
        args = [self.expr(a, idx, depth) for a in e.args]
        text = scalar_text(e.fn, args, e.dtype, e.lit_dtype)
        if e.cast:
            text = f"{_np(e.dtype)}({text})"
        self.tmp += 1
        name = f"t{self.tmp}"
        self.emit(depth, f"{name} = {text}")
        return name

    def split(self, flat: str, dims: tuple, ones: tuple, depth: int, skip=()) -> list:
        """Index texts per dim from the flat index `flat` over the non-unit dims not in
        `skip` (C order)."""
        live = [k for k, one in enumerate(ones) if not one and k not in skip]
        idx = ["0"] * len(ones)
        if not live:
            return idx
        if len(live) == 1:
            idx[live[0]] = flat
            return idx
        self.emit(depth, f"r_ = {flat}")
        for k in reversed(live[1:]):
            self.emit(depth, f"i{k} = r_ % {_dim(dims[k])}")
            self.emit(depth, f"r_ = r_ // {_dim(dims[k])}")
            idx[k] = f"i{k}"
        idx[live[0]] = "r_"
        return idx

    def text(self, params: list) -> str:
        return ("@cuda.jit\n" + f"def {self.name}({', '.join(params)}):\n"
                + "\n".join(self.lines) + "\n")


def scalar_text(fn, args: list, dtype: str, lit_dtype: str) -> str:
    """The CUDA text of scalar expression `fn` over operand texts `args` (TABLE's spelling)."""
    def text(e) -> str:
        if isinstance(e, Arg):
            return args[e.index]
        if isinstance(e, Const):
            return const_text(e.value, lit_dtype)
        sub = [text(a) for a in e.args]
        form = TABLE[e.fn]
        if isinstance(form, tuple):
            form = form[1] if dtype.startswith("float") else form[0]
        if callable(form):
            return form(sub, dtype)
        return form.format(*sub, c0=const_text(0, lit_dtype), c1=const_text(1, lit_dtype))
    return text(fn)


def _size(dims: tuple, ones: tuple) -> str:
    live = [_dim(d) for d, one in zip(dims, ones) if not one]
    return " * ".join(live) if live else "1"


def _names(texts) -> list:
    """The array and dim names the kernel texts use, as parameters (sorted for stable text)."""
    import re
    found = set()
    for t in texts:
        code = re.sub(r"  # .*$", "", t)   # not the op-name tag
        found.update(re.findall(r"\b(?:[abvs]\d+|[de]\d+_\d+)\b", code))
    return sorted(found, key=lambda n: (n[0], [int(x) for x in re.findall(r"\d+", n)]))


class _Writer:
    def __init__(self, kernel: Kernel) -> None:
        self.k = kernel
        self.kernels: list = []     # kernel texts
        self.host: list = []        # host function body lines
        self.count = 0

    def hemit(self, text: str, op: int = -1) -> None:
        tag = f"  # {self.k.op_names[op]}" if op >= 0 else ""
        self.host.append(_IND + text + tag)

    def new(self, op: int) -> _Kernel:
        self.count += 1
        return _Kernel(self, f"_k{self.count}", op)

    def launch(self, kern: _Kernel, grid: str, block: str, extra=(), indent: int = 0) -> None:
        params = list(dict.fromkeys(_names(kern.lines) + list(extra)))
        self.kernels.append(kern.text(params))
        self.hemit(_IND * indent + f"{kern.name}[{grid}, {block}, rt.stream]"
                   f"({', '.join(params)})",
                   kern.op)

    def alloc(self, v: Value) -> None:
        shape = "(" + "".join(_dim(d) + ", " for d in v.dims) + ")" if v.rank else "(1,)"
        self.hemit(f"{v.name} = rt.empty({shape}, {_np(v.dtype)})", -1)

    # -- statements -------------------------------------------------------------------------
    def elementwise(self, out: Value, e, op: int, mode: str = "set") -> None:
        """out[idx] = (or +=, -=) e(idx) over out's dims, one thread per element."""
        kern = self.new(op)
        n = _size(out.dims, out.ones)
        kern.emit(1, f"for q in range(cuda.grid(1), {n}, cuda.gridsize(1)):")
        idx = kern.split("q", out.dims, out.ones, 2)
        val = kern.expr(e, idx, 2)
        dst = kern.load(out, idx)
        if mode == "set":
            kern.emit(2, f"{dst} = {val}")
        else:
            kern.emit(2, f"{dst} = {dst} {'+' if mode == 'add' else '-'} {val}")
        self.launch(kern, f"rt.grid({n})", "rt.block")

    def loop(self, s: Loop) -> None:
        self.alloc(s.out)
        self.elementwise(s.out, s.expr, s.op)

    def assign(self, s: AssignVar) -> None:
        self.elementwise(s.var, s.expr, s.op, s.mode)

    def copy(self, s: CopyVar) -> None:
        self.hemit(f"{s.out.name} = rt.copy({s.var.name})", s.op)

    def view(self, s: View) -> None:
        shape = ", ".join(_dim(d) for d in s.out.dims)
        self.hemit(f"{s.out.name} = {s.src.name}.reshape(({shape},))", s.op)

    def shape_of(self, s: ShapeOf) -> None:
        vals = ", ".join(_dim(d) for d in s.dims)
        self.hemit(f"{s.out.name} = rt.upload(np.array([{vals}], {_np(s.out.dtype)}))", s.op)

    def alloc_stmt(self, s: Alloc) -> None:
        self.alloc(s.out)
        if s.fill is not None:
            self.elementwise(s.out, s.fill, s.op)

    def region(self, s: Region) -> None:
        if s.where is not None:
            raise Unemittable([s.op], "no CUDA emitter for a region stored where a condition "
                                      "holds")
        kern = self.new(s.op)
        n = _size(s.dims, s.ones)
        kern.emit(1, f"for q in range(cuda.grid(1), {n}, cuda.gridsize(1)):")
        idx = kern.split("q", s.dims, s.ones, 2)
        val = kern.expr(s.expr, idx, 2)
        pos = [kern.item(it, idx) for it in s.items]
        if s.mode == "add":   # positions may repeat (gather gradients): atomic adds
            kern.emit(2, f"cuda.atomic.add({s.out.name}, ({', '.join(pos)},), {val})")
        else:
            kern.emit(2, f"{s.out.name}[{', '.join(pos)}] = {val}")
        self.launch(kern, f"rt.grid({n})", "rt.block")

    def element_check(self, v: Value, bad: str, op: int, what: str) -> None:
        """Raise the check error if any element `q` of `v` makes `bad` true (host work, on a
        copy of `v`; `bad` is a NumPy expression of the array `q`)."""
        self.hemit(f"q = rt.host({v.name}).reshape(-1)", op)
        self.hemit(f"if np.any({bad}):", op)
        self.hemit(f"    raise ValueError(\"{ERROR_PREFIX}{op}:{what}\")", op)

    def range_check(self, c: RangeCheck) -> None:
        bad = f"(q >= {_dim(c.dim)})"
        self.element_check(c.value, f"(q < 0) | {bad}" if c.lower else bad, c.op, c.what)

    def nonzero(self, c: NonZeroCheck) -> None:
        self.element_check(c.value, "q == 0", c.op, c.what)

    def lib_call(self, s: LibCall) -> None:
        """A window routine of windowlib.py (convolutions, pooling, their gradients)."""
        from jitflow.backends.numba_cuda.windowlib import ROUTINES
        if s.fn not in ROUTINES:
            raise Unemittable([s.op], f"no CUDA emitter for library routine {s.fn}")
        for o in s.outs:
            self.alloc(o)
        args = ", ".join(v.name for v in s.args)
        outs = ", ".join(v.name for v in s.outs)
        self.hemit(f"_wl.call({s.fn!r}, rt, [{args}], [{outs}], {tuple(s.params)!r})", s.op)

    # -- reductions --------------------------------------------------------------------------
    def reduce(self, s: Reduce) -> None:
        """One block per output element; when there are few outputs and many elements to
        reduce (a full sum, say), `rt.split` spreads each output over several blocks that
        write partial results, and a second kernel combines them (a fixed order, so a given
        shape always gives the same bits)."""
        out, op, how = s.out, s.op, s.how
        arg = how in ("argmax", "argmin")
        base = how[3:] if arg else how
        fdt = (s.in_dtype if arg else out.dtype).startswith("float")
        if base in ("sum", "mean", "prod", "l2"):
            accdt = "float64" if fdt else "int64"
        else:
            accdt = s.in_dtype if arg else out.dtype
        if accdt == "bool":
            accdt = "int32"
        if base in ("sum", "mean", "l2"):
            init = lit_text(0, accdt)
        elif base == "prod":
            init = lit_text(1, accdt)
        elif accdt.startswith("float"):
            init = lit_text(-math.inf if base == "max" else math.inf, accdt)
        elif out.dtype == "bool":
            init = "0" if base == "max" else "1"
        else:
            info = np.iinfo(accdt)
            init = f"{_np(accdt)}({info.min if base == 'max' else info.max})"
        axes = set(s.axes)
        rank = len(s.ones)
        kept = [k for k in range(rank) if k not in axes]
        red = [k for k in range(rank) if k in axes and not s.ones[k]]
        n_out = _size(tuple(s.dims[k] for k in kept), tuple(s.ones[k] for k in kept))
        n_red = _size(tuple(s.dims[k] for k in red), (False,) * len(red))
        cnt = " * ".join(_dim(s.dims[k]) for k in range(rank) if k in axes) or "1"
        sp, part, pidx = f"sp_{out.name}", f"pa_{out.name}", f"pi_{out.name}"

        def fold(kern: _Kernel, val: str, j: str, depth: int, squared: bool) -> None:
            """acc (and ix) <- acc combined with value `val` at index `j`."""
            if base == "l2" and squared:
                kern.emit(depth, f"acc = acc + {val} * {val}")
            elif base in ("sum", "mean", "l2"):
                kern.emit(depth, f"acc = acc + {val}")
            elif base == "prod":
                kern.emit(depth, f"acc = acc * {val}")
            elif arg:
                kern.emit(depth, f"v_ = {val}")
                kern.emit(depth, f"j_ = {j}")
                kern.emit(depth, "if " + _take_arg("v_", "j_", "acc", "ix", base) + ":")
                kern.emit(depth + 1, "acc = v_")
                kern.emit(depth + 1, "ix = j_")
            else:
                cmp = ">" if base == "max" else "<"
                v = f"(1 if {val} else 0)" if out.dtype == "bool" and squared else val
                kern.emit(depth, f"v_ = {v}")
                kern.emit(depth, f"if acc == acc and (v_ {cmp} acc or v_ != v_):")
                kern.emit(depth + 1, "acc = v_")

        def block_combine(kern: _Kernel) -> None:
            kern.emit(2, "sm[tid] = acc")
            if arg:
                kern.emit(2, "si[tid] = ix")
            kern.emit(2, "cuda.syncthreads()")
            kern.emit(2, f"h = {BLOCK} // 2")
            kern.emit(2, "while h > 0:")
            kern.emit(3, "if tid < h:")
            if base in ("sum", "mean", "l2"):
                kern.emit(4, "sm[tid] = sm[tid] + sm[tid + h]")
            elif base == "prod":
                kern.emit(4, "sm[tid] = sm[tid] * sm[tid + h]")
            elif arg:
                kern.emit(4, "if " + _take_arg("sm[tid + h]", "si[tid + h]", "sm[tid]",
                                               "si[tid]", base) + ":")
                kern.emit(5, "sm[tid] = sm[tid + h]")
                kern.emit(5, "si[tid] = si[tid + h]")
            else:
                cmp = ">" if base == "max" else "<"
                kern.emit(4, f"if sm[tid] == sm[tid] and (sm[tid + h] {cmp} sm[tid] "
                             "or sm[tid + h] != sm[tid + h]):")
                kern.emit(5, "sm[tid] = sm[tid + h]")
            kern.emit(3, "cuda.syncthreads()")
            kern.emit(3, "h = h // 2")

        def finish(kern: _Kernel) -> None:
            """Thread 0 writes output element `o` from the block's combined value."""
            kern.emit(2, "if tid == 0:")
            if arg:
                res = f"{_np(out.dtype)}(si[0])"
            elif base == "l2":
                res = f"{_np(out.dtype)}(sm[0] * 0.5)"
            elif base == "mean" and fdt:
                res = f"{_np(out.dtype)}(sm[0] / ({cnt}))"
            elif base == "mean":
                res = (f"{_np(out.dtype)}(sm[0] // ({cnt}) if sm[0] >= 0 "
                       f"else -((-sm[0]) // ({cnt})))")
            else:
                res = f"{_np(out.dtype)}(sm[0])"
            kern.emit(3, f"f_{out.name}[o] = {res}")
            kern.emit(2, "cuda.syncthreads()")

        def scan(split: bool) -> _Kernel:
            """The kernel that reads the input: one output per block (`split` False), or one
            chunk of one output per block, writing partials."""
            kern = self.new(op)
            kern.emit(1, f"sm = cuda.shared.array({BLOCK}, {_NB[accdt]})")
            if arg:
                kern.emit(1, f"si = cuda.shared.array({BLOCK}, numba.int64)")
            kern.emit(1, "tid = cuda.threadIdx.x")
            if split:
                kern.emit(1, f"for b_ in range(cuda.blockIdx.x, ({n_out}) * {sp}, "
                             "cuda.gridDim.x):")
                kern.emit(2, f"o = b_ // {sp}")
                kern.emit(2, f"c_ = b_ - o * {sp}")
            else:
                kern.emit(1, f"for o in range(cuda.blockIdx.x, {n_out}, cuda.gridDim.x):")
            oidx = kern.split("o", s.dims, s.ones, 2, skip=axes)
            oidx = [x.replace("r_", "ro_") for x in oidx]
            kern.lines = [ln.replace("r_ ", "ro_ ").replace("r_ =", "ro_ =")
                          for ln in kern.lines]
            kern.emit(2, f"acc = {init}")
            if arg:
                kern.emit(2, f"ix = {n_red}")
            if split:
                kern.emit(2, f"for p in range(c_ * {BLOCK} + tid, {n_red}, {sp} * {BLOCK}):")
            else:
                kern.emit(2, f"for p in range(tid, {n_red}, {BLOCK}):")
            ridx_live = kern.split("p", s.dims, tuple(k not in red for k in range(rank)), 3)
            idx = [ridx_live[k] if k in red else oidx[k] for k in range(rank)]
            val = kern.expr(s.expr, idx, 3)
            fold(kern, val, idx[red[-1]] if red else "0", 3, squared=True)
            block_combine(kern)
            if split:
                kern.emit(2, "if tid == 0:")
                kern.emit(3, f"{part}[b_] = sm[0]")
                if arg:
                    kern.emit(3, f"{pidx}[b_] = si[0]")
                kern.emit(2, "cuda.syncthreads()")
            else:
                finish(kern)
            return kern

        self.alloc(out)
        self.hemit(f"f_{out.name} = {out.name}.reshape({out.name}.size)", op)
        self.hemit(f"{sp} = rt.split({n_out}, {n_red})", op)
        self.hemit(f"if {sp} == 1:", op)
        self.launch(scan(False), f"rt.blocks({n_out})", BLOCK, extra=[f"f_{out.name}"],
                    indent=1)
        self.hemit("else:", op)
        self.hemit(f"    {part} = rt.empty((({n_out}) * {sp},), {_np(accdt)})", op)
        extra = [sp, part]
        if arg:
            self.hemit(f"    {pidx} = rt.empty((({n_out}) * {sp},), np.int64)", op)
            extra.append(pidx)
        self.launch(scan(True), f"rt.blocks(({n_out}) * {sp})", BLOCK, extra=extra, indent=1)
        comb = self.new(op)
        comb.emit(1, f"sm = cuda.shared.array({BLOCK}, {_NB[accdt]})")
        if arg:
            comb.emit(1, f"si = cuda.shared.array({BLOCK}, numba.int64)")
        comb.emit(1, "tid = cuda.threadIdx.x")
        comb.emit(1, f"for o in range(cuda.blockIdx.x, {n_out}, cuda.gridDim.x):")
        comb.emit(2, f"acc = {init}")
        if arg:
            comb.emit(2, f"ix = {n_red}")
        comb.emit(2, f"for c_ in range(tid, {sp}, {BLOCK}):")
        fold(comb, f"{part}[o * {sp} + c_]", f"{pidx}[o * {sp} + c_]", 3, squared=False)
        block_combine(comb)
        finish(comb)
        self.launch(comb, f"rt.blocks({n_out})", BLOCK, extra=[sp, part] + (
            [pidx] if arg else []) + [f"f_{out.name}"], indent=1)

    # -- contractions ------------------------------------------------------------------------
    def matmul(self, s: MatMul) -> None:
        out, a, b, op = s.out, s.a, s.b, s.op
        m, n = _dim(out.dims[0]), _dim(out.dims[1])
        ka = _dim(a.dims[0] if s.ta else a.dims[1])
        accdt = out.dtype if out.dtype.startswith("float") else "int64"
        kern = self.new(op)
        A = (lambda i, k: f"{a.name}[{k}, {i}]") if s.ta else (lambda i, k: f"{a.name}[{i}, {k}]")
        B = (lambda k, j: f"{b.name}[{j}, {k}]") if s.tb else (lambda k, j: f"{b.name}[{k}, {j}]")
        kern.emit(1, f"sa = cuda.shared.array(({TILE}, {TILE}), {_NB[accdt]})")
        kern.emit(1, f"sb = cuda.shared.array(({TILE}, {TILE}), {_NB[accdt]})")
        kern.emit(1, "tx = cuda.threadIdx.x")
        kern.emit(1, "ty = cuda.threadIdx.y")
        kern.emit(1, f"for bi in range(cuda.blockIdx.y, ({m} + {TILE} - 1) // {TILE}, "
                     "cuda.gridDim.y):")
        kern.emit(2, f"for bj in range(cuda.blockIdx.x, ({n} + {TILE} - 1) // {TILE}, "
                     "cuda.gridDim.x):")
        kern.emit(3, f"row = bi * {TILE} + ty")
        kern.emit(3, f"col = bj * {TILE} + tx")
        kern.emit(3, f"acc = {lit_text(0, accdt)}")
        kern.emit(3, f"for kt in range(0, {ka}, {TILE}):")
        kern.emit(4, f"if row < {m} and kt + tx < {ka}:")
        kern.emit(5, f"sa[ty, tx] = {A('row', 'kt + tx')}")
        kern.emit(4, "else:")
        kern.emit(5, f"sa[ty, tx] = {lit_text(0, accdt)}")
        kern.emit(4, f"if col < {n} and kt + ty < {ka}:")
        kern.emit(5, f"sb[ty, tx] = {B('kt + ty', 'col')}")
        kern.emit(4, "else:")
        kern.emit(5, f"sb[ty, tx] = {lit_text(0, accdt)}")
        kern.emit(4, "cuda.syncthreads()")
        kern.emit(4, f"for kk in range({TILE}):")
        kern.emit(5, "acc += sa[ty, kk] * sb[kk, tx]")
        kern.emit(4, "cuda.syncthreads()")
        kern.emit(3, f"if row < {m} and col < {n}:")
        kern.emit(4, f"{out.name}[row, col] = {_np(out.dtype)}(acc)")
        self.alloc(out)
        if out.dtype in ("float32", "float64") and a.dtype == b.dtype == out.dtype:
            # a vendor GEMM where the runtime has one (vendor.py), else the tiled kernel
            self.hemit("if rt.blas is not None:", op)
            self.hemit(f"    rt.blas.matmul({a.name}, {b.name}, {out.name}, {s.ta}, {s.tb}, "
                       "rt.stream)", op)
            self.hemit("else:", op)
            self.launch(kern, f"rt.tiles({n}, {m})", f"({TILE}, {TILE})", indent=1)
        else:
            self.launch(kern, f"rt.tiles({n}, {m})", f"({TILE}, {TILE})")

    # -- row ops ----------------------------------------------------------------------------
    def row(self, s: RowOp) -> None:
        x, op, how = s.x, s.op, s.how
        dt = x.dtype
        c = _dim(x.dims[-1])
        rows = " * ".join(_dim(d) for d in x.dims[:-1]) or "1"
        nm = x.name
        self.hemit(f"r_{nm} = {rows}", op)
        self.hemit(f"x2_{nm} = {nm}.reshape((r_{nm}, {c}))", op)
        extra = [f"r_{nm}", f"x2_{nm}"]
        views = []
        for o in s.outs:
            if o is None:
                views.append(None)
                continue
            self.alloc(o)
            if o.rank == x.rank:
                self.hemit(f"m2_{o.name} = {o.name}.reshape((r_{nm}, {c}))", op)
                views.append(f"m2_{o.name}")
            else:
                self.hemit(f"m1_{o.name} = {o.name}.reshape(r_{nm})", op)
                views.append(f"m1_{o.name}")
            extra.append(views[-1])
        if s.labels is not None:
            lab = s.labels
            if how == "xent":
                self.hemit(f"l2_{nm} = {lab.name}.reshape((r_{nm}, {c}))", op)
                extra.append(f"l2_{nm}")
            else:
                self.hemit(f"l1_{nm} = {lab.name}.reshape(r_{nm})", op)
                extra.append(f"l1_{nm}")
        kern = self.new(op)
        X = f"x2_{nm}"
        zero, ninf = lit_text(0, dt), lit_text(-math.inf, dt)
        kern.emit(1, f"sm = cuda.shared.array({BLOCK}, numba.float64)")
        kern.emit(1, "tid = cuda.threadIdx.x")
        kern.emit(1, f"for r in range(cuda.blockIdx.x, r_{nm}, cuda.gridDim.x):")
        kern.emit(2, f"m = {ninf}")
        kern.emit(2, f"for j in range(tid, {c}, {BLOCK}):")
        kern.emit(3, f"if {X}[r, j] > m:")
        kern.emit(4, f"m = {X}[r, j]")
        _block_reduce(kern, "m", "max", 2, _np(dt))
        kern.emit(2, "if math.isinf(m) or math.isnan(m):")
        kern.emit(3, f"m = {zero}")
        kern.emit(2, "s = 0.0")
        kern.emit(2, f"for j in range(tid, {c}, {BLOCK}):")
        kern.emit(3, f"s += math.exp({X}[r, j] - m)")
        _block_reduce(kern, "s", "sum", 2, "")
        kern.emit(2, f"ls = {_np(dt)}(math.log({_np(dt)}(s)))")
        if how == "softmax":
            kern.emit(2, f"inv = {_np(dt)}(s)")
            kern.emit(2, f"for j in range(tid, {c}, {BLOCK}):")
            kern.emit(3, f"{views[0]}[r, j] = math.exp({X}[r, j] - m) / inv")
        elif how == "log_softmax":
            kern.emit(2, f"for j in range(tid, {c}, {BLOCK}):")
            kern.emit(3, f"{views[0]}[r, j] = {X}[r, j] - m - ls")
        elif how == "sparse_xent":
            loss, bp = views
            kern.emit(2, f"k = l1_{nm}[r]")
            if loss is not None:
                kern.emit(2, "if tid == 0:")
                kern.emit(3, f"{loss}[r] = ls - ({X}[r, k] - m)")
            if bp is not None:
                kern.emit(2, f"for j in range(tid, {c}, {BLOCK}):")
                kern.emit(3, f"p = math.exp({X}[r, j] - m - ls)")
                kern.emit(3, f"{bp}[r, j] = p - {_np(dt)}(1) if j == k else p")
        else:
            loss, bp = views
            if loss is not None:
                kern.emit(2, "acc = 0.0")
                kern.emit(2, f"for j in range(tid, {c}, {BLOCK}):")
                # TF's form: sum(labels * (ls - z)) from +0 (an all-zero row is +0)
                kern.emit(3, f"acc += l2_{nm}[r, j] * (ls - ({X}[r, j] - m))")
                _block_reduce(kern, "acc", "sum", 2, "")
                kern.emit(2, "if tid == 0:")
                kern.emit(3, f"{loss}[r] = acc")
            if bp is not None:
                kern.emit(2, f"for j in range(tid, {c}, {BLOCK}):")
                kern.emit(3, f"{bp}[r, j] = math.exp({X}[r, j] - m - ls) - l2_{nm}[r, j]")
        kern.emit(2, "cuda.syncthreads()")
        self.launch(kern, f"rt.blocks(r_{nm})", BLOCK, extra=extra)


def _take_arg(v2: str, i2: str, v1: str, i1: str, base: str) -> str:
    """Whether (v2, i2) replaces (v1, i1) as the arg-max/min so far: the first NaN wins, then
    the first extreme (smaller index on ties)."""
    cmp = ">" if base == "max" else "<"
    return (f"({v2} != {v2} and ({v1} == {v1} or {i2} < {i1})) or ({v1} == {v1} and "
            f"({v2} {cmp} {v1} or ({v2} == {v1} and {i2} < {i1})))")


def _block_reduce(kern: _Kernel, var: str, how: str, depth: int, cast: str) -> None:
    """Combine every thread's `var` through shared `sm` (max or sum); all threads get it
    (converted by `cast`, a numpy type name, when given)."""
    kern.emit(depth, f"sm[tid] = {var}")
    kern.emit(depth, "cuda.syncthreads()")
    kern.emit(depth, f"h = {BLOCK} // 2")
    kern.emit(depth, "while h > 0:")
    kern.emit(depth + 1, "if tid < h:")
    if how == "max":
        kern.emit(depth + 2, "if sm[tid + h] > sm[tid]:")
        kern.emit(depth + 3, "sm[tid] = sm[tid + h]")
    else:
        kern.emit(depth + 2, "sm[tid] = sm[tid] + sm[tid + h]")
    kern.emit(depth + 1, "cuda.syncthreads()")
    kern.emit(depth + 1, "h = h // 2")
    kern.emit(depth, f"{var} = {cast}(sm[0])" if cast else f"{var} = sm[0]")
    kern.emit(depth, "cuda.syncthreads()")


STATEMENT_EMITTERS = {
    Loop: _Writer.loop, Reduce: _Writer.reduce, MatMul: _Writer.matmul,
    AssignVar: _Writer.assign, CopyVar: _Writer.copy, RowOp: _Writer.row,
    NonZeroCheck: _Writer.nonzero, RangeCheck: _Writer.range_check,
    ShapeOf: _Writer.shape_of, View: _Writer.view, Alloc: _Writer.alloc_stmt,
    Region: _Writer.region, LibCall: _Writer.lib_call,
}


def generate_module(kernel: Kernel, block: int, tile: int, simulator: bool = False) -> str:
    """The source of a module with the CUDA kernels of `kernel` and its host function
    `run(ins, vs, rt)`; `block` threads per block of reductions and row ops, `tile` the
    matmul tile side; for the simulator, `math` is simmath.py (IEEE results, no raising)."""
    w = _Writer(kernel)
    for v in kernel.inputs:
        w.hemit(f"{v.name} = ins[{v.slot}]")
        for k, one in enumerate(v.ones):
            if not one:
                w.hemit(f"d{v.slot}_{k} = {v.name}.shape[{k}]")
    for v in kernel.variables:
        w.hemit(f"{v.name} = vs[{v.slot}]")
        for k, one in enumerate(v.ones):
            if not one:
                w.hemit(f"e{v.slot}_{k} = {v.name}.shape[{k}]")
    dims = [c for c in kernel.checks if not isinstance(c, (NonZeroCheck, RangeCheck))]
    if dims:
        cond = " | ".join(f"({_dim(c.a)} != {_dim(c.b)})" for c in dims)
        w.hemit(f"if {cond}:", dims[0].op)
        w.hemit(f"    raise ValueError(\"{ERROR_PREFIX}{dims[0].op}:{dims[0].what}\")",
                dims[0].op)
    for c in kernel.checks:
        if isinstance(c, NonZeroCheck):
            w.nonzero(c)
        elif isinstance(c, RangeCheck):
            w.range_check(c)
    for s in kernel.stmts:
        emitter = STATEMENT_EMITTERS.get(type(s))
        if emitter is None:
            raise Unemittable([s.op], f"no CUDA emitter for {type(s).__name__}")
        emitter(w, s)
    res = []
    for r in kernel.results:
        if isinstance(r, Lit):
            res.append(f"rt.upload(np.array([{lit_text(r.value, r.dtype)}]))")
        elif r.kind == "in":
            res.append(f"rt.copy({r.name})")
        else:
            res.append(r.name)
    w.hemit("return (" + "".join(x + ", " for x in res) + ")")
    head = (("from jitflow.backends.numba_cuda import simmath as math\n" if simulator
             else "import math\n") + "\nimport numba\nimport numpy as np\nfrom numba import cuda\n"
            "from jitflow.backends.numba_cuda import devlib as _dl\n"
            "from jitflow.backends.numba_cuda import windowlib as _wl\n\n"
            f"{BLOCK} = {block}\n{TILE} = {tile}\n\n\n")
    return (head + "\n\n".join(w.kernels) + "\n\ndef run(ins, vs, rt):\n"
            + "\n".join(w.host) + "\n")
