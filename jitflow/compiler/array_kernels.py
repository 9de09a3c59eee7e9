"""Array ops in kernels: slicing, gather, concat/stack/unstack/split and their gradients.

Lowering (what fuse.py's `Lowerer` calls through `LOWER`) and CPU emitters (what codegen.py
calls through `EMIT`) for ops that move elements rather than compute them. Two IR pieces:

- `Take(value, items)`: an expression reading `value` at computed positions, one item per dim
  of `value`: ("loop", k) the loop index k, ("lin", start, stride, k) start + stride * i_k,
  ("fixed", dim) one position, ("take", indices, axes) a position read from an index array;
- `Region(out, expr, dims, ones, items, mode)`: a statement looping over `dims` and storing
  (or adding) `expr` at `out[items]`; `Alloc(out, zero)` allocates its target first.

Positions that depend on runtime sizes are symbolic dims (rendered by `dim_text`), so a new
batch size reuses the same code. Index validity (gather) and slice bounds are checks run before
anything is written; a failing check reruns the step in the interpreter, which raises TF1's
error.
"""
from __future__ import annotations

from dataclasses import dataclass

from jitflow.compiler.fuse import (Apply, Check, Lit, Load, Pending, RangeCheck, Reduce, Value,
                                   _Unsupported)

__all__ = ["Take", "Region", "Alloc", "LOWER", "SUPPORTED", "SHAPE_ONLY", "INLINE_INTO",
           "EMIT", "DIM_TEXT", "take_text"]


@dataclass(eq=False)
class Take:
    """Expression: `value` read at computed positions (see the module docstring)."""

    value: Value
    items: tuple


@dataclass(eq=False)
class Alloc:
    """Statement: allocate `out`, filled with the scalar expression `fill` unless None."""

    out: Value
    fill: object
    op: int


@dataclass(eq=False)
class Region:
    """Statement: for every index i over `dims`, out[items(i)] = (or +=) expr(i)."""

    out: Value
    expr: object
    dims: tuple
    ones: tuple
    items: tuple
    mode: str
    op: int


# -- symbolic dims -----------------------------------------------------------------------------
def _is_static(d) -> bool:
    return d == 1 or d[0] == "const"


def _static(d) -> int:
    return 1 if d == 1 else d[1]


def _const(n: int):
    return 1 if n == 1 else ("const", int(n))


def _add(a, b):
    if _is_static(a) and _is_static(b):
        return _const(_static(a) + _static(b))
    return ("arith", "+", a, b)


def _slice_start_len(d: int, b: int, e: int, s: int, bm: bool, em: bool) -> tuple:
    """Python's slice semantics for one axis of size d: (start, length)."""
    start, stop, step = slice(None if bm else b, None if em else e, s).indices(d)
    return start, len(range(start, stop, step))


def dim_text(d, dim) -> str:
    """The source text of the array-op dim kinds; `dim` renders nested dims."""
    k = d[0]
    if k == "arith":
        return f"({dim(d[2])} {d[1]} {dim(d[3])})"
    if k in ("sstart", "slen"):
        n, b, e, s, bm, em = dim(d[1]), d[2], d[3], d[4], d[5], d[6]
        lo, hi = ("0", n) if s > 0 else ("-1", f"({n} - 1)")
        st = (("0" if s > 0 else f"({n} - 1)") if bm else
              f"min(max({b} + {n} if {b} < 0 else {b}, {lo}), {hi})")
        if k == "sstart":
            return st if bm and s > 0 else f"({st})"
        en = ((n if s > 0 else "-1") if em else
              f"min(max({e} + {n} if {e} < 0 else {e}, {lo}), {hi})")
        if s > 0:
            return f"max(0, ({en} - {st} + {s - 1}) // {s})"
        return f"max(0, ({st} - {en} + {-s - 1}) // {-s})"
    if k == "sidx":
        return f"({d[2]} + {dim(d[1])} if {d[2]} < 0 else {d[2]})"
    if k == "ok":  # ("ok", lo, x, hi): 1 when lo <= x < hi
        return f"(1 if {dim(d[1])} <= {dim(d[2])} < {dim(d[3])} else 0)"
    raise KeyError(k)


DIM_TEXT = {"arith": dim_text, "sstart": dim_text, "slen": dim_text, "sidx": dim_text,
            "ok": dim_text}


def _ok_check(low, lo, x, hi, pos: int, what: str) -> None:
    """Check lo <= x < hi (dims), statically when all three are known."""
    if all(_is_static(v) for v in (lo, x, hi)):
        if not _static(lo) <= _static(x) < _static(hi):
            low.checks.append(Check(1, ("const", 0), pos, what))  # always fails
        return
    low.checks.append(Check(("ok", lo, x, hi), 1, pos, what))


def _eq_check(low, a, b, pos: int, what: str) -> None:
    if a != b:
        low.checks.append(Check(a, b, pos, what))


# -- helpers -----------------------------------------------------------------------------------
def _refine(t, ones: tuple, dims: tuple) -> tuple:
    """Use the static shape of `t`: its known sizes replace symbolic ones (a size 1 becomes a
    unit dim of the shape class, as the consumers' shape rules assume)."""
    static = t.shape.as_tuple()
    if static is None or len(static) != len(ones):
        return ones, dims
    ones, dims = list(ones), list(dims)
    for k, s in enumerate(static):
        if s is not None and not _is_static(dims[k]):
            ones[k] = s == 1
            dims[k] = _const(s) if s != 0 else ("const", 0)
    return tuple(ones), tuple(dims)


def _src(low, t, pos: int) -> Value:
    inf = low.info.get(t)
    e = getattr(inf, "expr", None)
    if (isinstance(inf, Pending) and isinstance(e, Apply) and e.template == "{0}"
            and not e.cast and isinstance(e.args[0], Load) and e.args[0].axes is None
            and e.args[0].value.ones == inf.ones and e.args[0].value.dims == inf.dims):
        inf.consumed = True  # an identity (a variable's read): index its source directly
        return e.args[0].value
    v = low._value(t, pos)
    if not isinstance(v, Value) or v.rank == 0:
        raise _Unsupported("an array op of a scalar")
    return v


def _reads(v: Value) -> frozenset:
    return frozenset([v.var_op]) if v.kind == "var" else frozenset()


def _entries_of(op, rank: int) -> list:
    """StridedSlice/Slice as per-axis entries: ("new",), ("all",), ("int", b) or
    ("slice", b, e, s, begin-masked, end-masked)."""
    if op.type in ("Slice", "SliceGrad"):
        out = []
        for b, s in zip(op.attrs["begin"], op.attrs["size"]):
            out.append(("slice1", int(b), int(s)))
        return out
    from jitflow.ops.array import _ss_masks, _strided_spec
    a = op.attrs
    entries = _strided_spec(a["begin"], a["end"], a["strides"], _ss_masks(op), rank)
    out = []
    for e in entries:
        if e[0] == "slice":
            out.append(("slice", 0 if e[1] is None else int(e[1]),
                        0 if e[2] is None else int(e[2]), int(e[3]), e[1] is None,
                        e[2] is None))
        else:
            out.append(e)
    return out


def _slice_axes(low, entries, src_ones, src_dims, pos: int, what: str) -> tuple:
    """(out ones, out dims, per-src-axis (kind, start/pos, stride, out axis)) of a slice."""
    ones, dims, axes = [], [], []
    di = 0
    for e in entries:
        if e[0] == "new":
            ones.append(True)
            dims.append(1)
            continue
        d = src_dims[di]
        k = len(dims)
        if e[0] == "all":
            ones.append(src_ones[di])
            dims.append(d)
            axes.append(("lin", ("const", 0), 1, k))
        elif e[0] == "int":
            b = e[1]
            if _is_static(d):
                n = _static(d)
                if not -n <= b < n:
                    low.checks.append(Check(1, ("const", 0), pos, what))
                axes.append(("fixed", ("const", b % n if n else 0)))
            else:
                x = ("const", b) if b >= 0 else ("arith", "+", ("const", b), d)
                _ok_check(low, ("const", 0), x, d, pos, what)
                axes.append(("fixed", ("sidx", d, b)))
        elif e[0] == "slice1":  # Slice: begin in [0, d], begin + size <= d
            b, s = e[1], e[2]
            if _is_static(d):
                n = _static(d)
                ln = n - b if s == -1 else s
                if not (0 <= b <= n and 0 <= ln and b + ln <= n):
                    low.checks.append(Check(1, ("const", 0), pos, what))
                    ln = max(ln, 0)
                size = _const(ln) if ln != 0 else ("const", 0)
            else:
                _ok_check(low, ("const", 0), ("const", b), ("arith", "+", d, ("const", 1)),
                          pos, what)
                if s == -1:
                    size = ("arith", "-", d, ("const", b))
                else:
                    _ok_check(low, ("const", 0), ("const", b + s),
                              ("arith", "+", d, ("const", 1)), pos, what)
                    size = _const(s) if s != 0 else ("const", 0)
            ones.append(size == 1)
            dims.append(size)
            axes.append(("lin", ("const", b), 1, k))
        else:
            _, b, en, s, bm, em = e
            if bm and em and s == 1:  # the whole axis
                ones.append(src_ones[di])
                dims.append(d)
                axes.append(("lin", ("const", 0), 1, k))
            elif _is_static(d):
                start, ln = _slice_start_len(_static(d), b, en, s, bm, em)
                st = ("const", start)
                size = _const(ln) if ln != 0 else ("const", 0)
            else:
                st = ("sstart", d, b, en, s, bm, em)
                size = ("slen", d, b, en, s, bm, em)
            if not (bm and em and s == 1):
                ones.append(size == 1)
                dims.append(size)
                axes.append(("lin", st, s, k))
        di += 1
    return tuple(ones), tuple(dims), axes


# -- lowering ------------------------------------------------------------------------------------
def _lower_slice(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    src = _src(low, op.inputs[0], pos)
    entries = _entries_of(op, src.rank)
    ones, dims, axes = _slice_axes(low, entries, src.ones, src.dims, pos,
                                   "slice index out of bounds")
    items = []
    for (kind, a, *rest), one in zip(axes, src.ones):
        if one:
            items.append(("fixed", ("const", 0)))
        else:
            items.append((kind, a, *rest))
    expr = Take(src, tuple(items))
    ones, dims = _refine(out, ones, dims)
    low._place(out, Pending(expr, src.dtype, ones, dims, _reads(src), pos), pos)


def _lower_slice_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    g_expr, dtype, g_ones, g_dims, _ = low._expr(op.inputs[0])
    _, _, x_ones, x_dims, _ = low._expr(op.inputs[1], shape_only=True)
    entries = _entries_of(op, len(x_ones))
    ones, dims, axes = _slice_axes(low, entries, x_ones, x_dims, pos,
                                   "slice index out of bounds")
    if len(ones) != len(g_ones):
        raise _Unsupported("slice gradient rank")
    for a, b, oa, ob in zip(g_dims, dims, g_ones, ones):
        if not (oa and ob):
            _eq_check(low, a, b, pos, "Incompatible shapes")
    v = low._buf(dtype, x_ones, x_dims)
    low.stmts.append(Alloc(v, Lit(0, dtype), pos))
    items = []
    for (kind, a, *rest), one in zip(axes, x_ones):
        items.append(("fixed", ("const", 0)) if one and kind == "lin" else (kind, a, *rest))
    low.stmts.append(Region(v, g_expr, g_dims, g_ones, tuple(items), "set", pos))
    low.info[out] = v


def _range_check(low, idx: Value, dim, pos: int, what: str) -> None:
    if idx.kind == "in":
        low.checks.append(RangeCheck(idx, dim, pos, what))
        return
    from jitflow.compiler.fuse import AssignVar
    if any(isinstance(s, AssignVar) for s in low.stmts):
        raise _Unsupported("indices computed after a variable write")
    low.stmts.append(RangeCheck(idx, dim, pos, what))


def _indices(low, t, pos: int):
    """The indices of a gather: a Value, or a Python int for a scalar constant."""
    inf = low.info.get(t)
    if isinstance(inf, Lit):
        return int(inf.value)
    v = low._value(t, pos)
    if not isinstance(v, Value):
        raise _Unsupported("gather indices")
    return v


def _lower_gather(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    params = _src(low, op.inputs[0], pos)
    r = params.rank
    a = op.attrs["axis"] % r
    idx = _indices(low, op.inputs[1], pos)
    what = "indices is not in [0, dim)"
    d = params.dims[a]
    if isinstance(idx, int):
        _ok_check(low, ("const", 0), ("const", idx), d, pos, what)
        n_i, i_ones, i_dims = 0, (), ()
        ax_item = ("fixed", ("const", idx))
    else:
        _range_check(low, idx, d, pos, what)
        n_i, i_ones, i_dims = idx.rank, idx.ones, idx.dims
        ax_item = ("take", idx, tuple(range(a, a + n_i)))
    ones = params.ones[:a] + i_ones + params.ones[a + 1:]
    dims = params.dims[:a] + i_dims + params.dims[a + 1:]
    items = []
    for k in range(r):
        if k == a:
            items.append(ax_item)
        elif params.ones[k]:
            items.append(("fixed", ("const", 0)))
        else:
            items.append(("lin", ("const", 0), 1, k if k < a else k + n_i - 1))
    reads = _reads(params) | (_reads(idx) if isinstance(idx, Value) else frozenset())
    ones, dims = _refine(out, ones, dims)
    low._place(out, Pending(Take(params, tuple(items)), params.dtype, ones, dims, reads, pos),
               pos)


def _lower_gather_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    g_expr, dtype, g_ones, g_dims, _ = low._expr(op.inputs[0])
    _, _, p_ones, p_dims, _ = low._expr(op.inputs[2], shape_only=True)
    r = len(p_ones)
    a = op.attrs["axis"] % r
    idx = _indices(low, op.inputs[1], pos)
    what = "indices is not in [0, dim)"
    if isinstance(idx, int):
        _ok_check(low, ("const", 0), ("const", idx), p_dims[a], pos, what)
        n_i, ax_item = 0, ("fixed", ("const", idx))
    else:
        _range_check(low, idx, p_dims[a], pos, what)
        n_i = idx.rank
        ax_item = ("take", idx, tuple(range(a, a + n_i)))
    if len(g_ones) != r - 1 + n_i:
        raise _Unsupported("gather gradient rank")
    v = low._buf(dtype, p_ones, p_dims)
    low.stmts.append(Alloc(v, Lit(0, dtype), pos))
    items = []
    for k in range(r):
        if k == a:
            items.append(ax_item)
        elif p_ones[k]:
            items.append(("fixed", ("const", 0)))
        else:
            kg = k if k < a else k + n_i - 1
            _eq_check(low, g_dims[kg], p_dims[k], pos, "Incompatible shapes")
            items.append(("lin", ("const", 0), 1, kg))
    low.stmts.append(Region(v, g_expr, g_dims, g_ones, tuple(items), "add", pos))
    low.info[out] = v


def _join(low, op, pos: int, axis: int, new_axis: bool) -> None:
    """ConcatV2 (new_axis False) and Pack (True): one region store per input."""
    out = op.outputs[0]
    if out in low.fed:
        return
    parts = [low._expr(t) for t in op.inputs]
    r0 = len(parts[0][2])
    r = r0 + 1 if new_axis else r0
    a = axis % r
    dtype = out.dtype.name
    ones, dims = list(parts[0][2]), list(parts[0][3])
    for p in parts[1:]:
        if len(p[2]) != r0:
            raise _Unsupported("join of different ranks")
        for k in range(r0):
            if k == a and not new_axis:
                continue
            if p[3][k] != dims[k]:
                low.checks.append(Check(dims[k], p[3][k], pos, "Dimensions of inputs should "
                                        "match"))
    offsets = []
    if new_axis:
        offsets = [("const", i) for i in range(len(parts))]
        ones.insert(a, len(parts) == 1)
        dims.insert(a, _const(len(parts)))
    else:
        total = ("const", 0)
        for p in parts:
            offsets.append(total)
            total = _add(total, p[3][a])
        ones[a] = total == 1
        dims[a] = total
    v = low._buf(dtype, *_refine(out, tuple(ones), tuple(dims)))
    low.stmts.append(Alloc(v, None, pos))
    for p, off in zip(parts, offsets):
        items = []
        for k in range(r):
            if new_axis and k == a:
                items.append(("fixed", off))
                continue
            kp = k - 1 if new_axis and k > a else k
            start = off if (k == a and not new_axis) else ("const", 0)
            if p[2][kp]:
                items.append(("fixed", start))
            else:
                items.append(("lin", start, 1, kp))
        low.stmts.append(Region(v, p[0], p[3], p[2], tuple(items), "set", pos))
    low.info[out] = v


def _lower_concat(low, op, pos: int) -> None:
    _join(low, op, pos, op.attrs["axis"], False)


def _lower_pack(low, op, pos: int) -> None:
    _join(low, op, pos, op.attrs["axis"], True)


def _lower_unpack(low, op, pos: int) -> None:
    src = _src(low, op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    num = int(op.attrs["num"])
    _eq_check(low, src.dims[a], _const(num), pos, "Input shape axis must equal num")
    ones = src.ones[:a] + src.ones[a + 1:]
    dims = src.dims[:a] + src.dims[a + 1:]
    for j, out in enumerate(op.outputs):
        if out in low.fed:
            continue
        items = []
        for k in range(r):
            if k == a:
                items.append(("fixed", ("const", j if not src.ones[a] else 0)))
            elif src.ones[k]:
                items.append(("fixed", ("const", 0)))
            else:
                items.append(("lin", ("const", 0), 1, k if k < a else k - 1))
        o1, d1 = _refine(out, ones, dims)
        low._place(out, Pending(Take(src, tuple(items)), src.dtype, o1, d1, _reads(src), pos),
                   pos)


def _lower_split(low, op, pos: int) -> None:
    src = _src(low, op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    d = src.dims[a]
    sizes = list(op.attrs["sizes"])
    what = "Determined shape must match input shape along split_dim"
    if op.attrs["even"]:
        n = len(sizes)
        if _is_static(d):
            if _static(d) % n:
                low.checks.append(Check(1, ("const", 0), pos, what))
            sizes = [_const(_static(d) // n) if _static(d) // n else ("const", 0)] * n
        else:
            low.checks.append(Check(("mod", (d,), n), ("const", 0), pos, what))
            sizes = [("div", (d,), n) if n > 1 else d] * n
    else:
        known = sum(s for s in sizes if s != -1)
        if -1 in sizes:
            rest = (_const(_static(d) - known) if _is_static(d) and _static(d) - known > 0
                    else ("arith", "-", d, ("const", known)))
            _ok_check(low, ("const", 0), ("const", known), ("arith", "+", d, ("const", 1)),
                      pos, what)
        else:
            rest = None
            _eq_check(low, d, _const(known), pos, what)
        sizes = [rest if s == -1 else (_const(s) if s else ("const", 0)) for s in sizes]
    start = ("const", 0)
    for out, s in zip(op.outputs, sizes):
        if out not in low.fed:
            items = []
            for k in range(r):
                if src.ones[k]:
                    items.append(("fixed", ("const", 0)))
                else:
                    items.append(("lin", start if k == a else ("const", 0), 1, k))
            ones = tuple(s == 1 if k == a else src.ones[k] for k in range(r))
            dims = tuple(s if k == a else src.dims[k] for k in range(r))
            ones, dims = _refine(out, ones, dims)
            low._place(out, Pending(Take(src, tuple(items)), src.dtype, ones, dims,
                                    _reads(src), pos), pos)
        start = _add(start, s)


def _lower_concat_grad_slice(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    src = _src(low, op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    i = op.attrs["index"]
    shapes = [low._expr(t, shape_only=True) for t in op.inputs[1:]]
    start = ("const", 0)
    for p in shapes[:i]:
        start = _add(start, p[3][a])
    _, _, ones, dims, _ = shapes[i]
    total = start
    for p in shapes[i:]:
        total = _add(total, p[3][a])
    _eq_check(low, src.dims[a], total, pos, "Incompatible shapes")
    ones, dims = _refine(out, ones, dims)
    items = []
    for k in range(r):
        if src.ones[k]:
            items.append(("fixed", ("const", 0)))
        else:
            items.append(("lin", start if k == a else ("const", 0), 1, k))
    low._place(out, Pending(Take(src, tuple(items)), src.dtype, ones, dims, _reads(src), pos),
               pos)


def lower_arg_inner_axis(low, op, pos: int) -> None:
    """ArgMax/ArgMin along an axis other than the last: reduce a view with that axis last."""
    out = op.outputs[0]
    if out in low.fed:
        return
    src = _src(low, op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    perm = [k for k in range(r) if k != a] + [a]
    axes = [0] * r
    for j, k in enumerate(perm):
        axes[k] = j
    ones = tuple(src.ones[k] for k in perm)
    dims = tuple(src.dims[k] for k in perm)
    v = low._buf(out.dtype.name, ones[:-1], dims[:-1])
    low.stmts.append(Reduce(v, Load(src, tuple(axes)), dims, ones, (r - 1,), op.type.lower(),
                            pos, src.dtype))
    low.info[out] = v


def _tile_dim(one: bool, d, m: int) -> tuple:
    if m == 1:
        return one, d
    if m == 0:
        return False, ("const", 0)
    return False, (("const", m) if one else ("arith", "*", d, ("const", m)))


def _lower_tile(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    src = _src(low, op.inputs[0], pos)
    mult = [int(m) for m in op.attrs["multiples"]]
    shaped = [_tile_dim(o, d, m) for o, d, m in zip(src.ones, src.dims, mult)]
    ones, dims = _refine(out, tuple(o for o, _ in shaped), tuple(d for _, d in shaped))
    items = tuple(("fixed", ("const", 0)) if one else
                  (("lin", ("const", 0), 1, k) if m == 1 else ("mod", k, d))
                  for k, (one, d, m) in enumerate(zip(src.ones, src.dims, mult)))
    low._place(out, Pending(Take(src, items), src.dtype, ones, dims, _reads(src), pos), pos)


def _lower_tile_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    g_expr, dtype, g_ones, g_dims, _ = low._expr(op.inputs[0])
    _, _, x_ones, x_dims, _ = low._expr(op.inputs[1], shape_only=True)
    if len(g_ones) != len(x_ones):
        raise _Unsupported("tile gradient rank")
    v = low._buf(dtype, x_ones, x_dims)
    low.stmts.append(Alloc(v, Lit(0, dtype), pos))
    items = tuple(("fixed", ("const", 0)) if one else ("mod", k, d)
                  for k, (one, d) in enumerate(zip(x_ones, x_dims)))
    low.stmts.append(Region(v, g_expr, g_dims, g_ones, items, "add", pos))
    low.info[out] = v


def _lower_fill(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    from jitflow.compiler.fuse import ShapeInfo
    expr, dtype, v_ones, _, reads = low._expr(op.inputs[0])
    if v_ones:
        raise _Unsupported("fill value is not a scalar")
    static = op.attrs.get("dims")
    if static is not None:
        ones = tuple(d == 1 for d in static)
        dims = tuple(_const(d) if d else ("const", 0) for d in static)
    else:
        inf = low.info.get(op.inputs[1])
        packed = _packed_dims(op.inputs[1])
        if isinstance(inf, ShapeInfo):
            ones, dims = inf.ones, inf.dims
        elif packed is not None:
            ones, dims = [], []
            for d in packed:
                if isinstance(d, int):
                    ones.append(d == 1)
                    dims.append(_const(d) if d else ("const", 0))
                else:
                    _, _, x_ones, x_dims, _ = low._expr(d[0], shape_only=True)
                    ones.append(x_ones[d[1]])
                    dims.append(x_dims[d[1]])
            ones, dims = tuple(ones), tuple(dims)
        else:
            raise _Unsupported("fill to a computed shape")
    low._place(out, Pending(expr, dtype, ones, dims, reads, pos), pos)


def _packed_dims(t):
    """The dims of a shape built as `tf.stack([tf.shape(x)[k], 128, ...])` (what
    `cell.zero_state(tf.shape(x)[0], ...)` makes): a list of ints and (x, k), or None."""
    op = t.op
    if op.type != "Pack" or op.attrs.get("axis", 0) != 0:
        return None
    out = []
    for s in op.inputs:
        if s.op.type == "Const":
            v = s.op.attrs["value"]
            if getattr(v, "ndim", 0) != 0:
                return None
            out.append(int(v))
            continue
        a = s.op.attrs
        if (s.op.type != "StridedSlice" or a.get("shrink_axis_mask") != 1
                or a.get("begin_mask") or a.get("end_mask") or a.get("ellipsis_mask")
                or a.get("new_axis_mask") or tuple(a.get("strides") or ()) != (1,)
                or s.op.inputs[0].op.type != "Shape"):
            return None
        x = s.op.inputs[0].op.inputs[0]
        r = x.shape.ndims
        k = (a.get("begin") or (None,))[0]
        if r is None or k is None:
            return None
        k = k + r if k < 0 else k
        if not 0 <= k < r:
            return None
        out.append((x, k))
    return out


def _permuted(src: Value, a: int) -> tuple:
    """Axes moving axis `a` last: (axes for Load(src) in the permuted loop, ones, dims)."""
    r = src.rank
    perm = [k for k in range(r) if k != a] + [a]
    axes = [0] * r
    for j, k in enumerate(perm):
        axes[k] = j
    return (tuple(axes), tuple(src.ones[k] for k in perm), tuple(src.dims[k] for k in perm),
            tuple(perm))


def lower_row_inner_axis(low, op, pos: int) -> None:
    """Softmax/LogSoftmax along an axis other than the last: rows of a transposed copy."""
    from jitflow.compiler.fuse import _ROW_HOW, Loop, RowOp
    out = op.outputs[0]
    if out in low.fed:
        return
    src = _src(low, op.inputs[0], pos)
    a = op.attrs["axis"] % src.rank
    axes, ones, dims, perm = _permuted(src, a)
    if ones[-1]:  # one element per row: 1 (log: 0), nan where x is not finite
        tmpl = "(({0} - {0}) + {1})" if op.type == "Softmax" else "({0} - {0})"
        expr = Apply(tmpl, [Load(src), Lit(1, src.dtype)], src.dtype, pos)
        low._place(out, Pending(expr, src.dtype, src.ones, src.dims, _reads(src), pos), pos)
        return
    xt = low._buf(src.dtype, ones, dims)
    low.stmts.append(Loop(xt, Load(src, axes), pos))
    yt = low._buf(out.dtype.name, ones, dims)
    low.stmts.append(RowOp(_ROW_HOW[op.type], [yt], xt, None, pos))
    # yt's dim j is the source's dim perm[j]: read it back in the source's axis order
    low._place(out, Pending(Load(yt, perm), yt.dtype, src.ones, src.dims, frozenset(), pos),
               pos)


def _lower_reverse(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    src = _src(low, op.inputs[0], pos)
    rev = {a % src.rank for a in op.attrs["axis"]}
    items = []
    for k, (one, d) in enumerate(zip(src.ones, src.dims)):
        if one:
            items.append(("fixed", ("const", 0)))
        elif k in rev:
            last = _const(_static(d) - 1) if _is_static(d) else ("arith", "-", d, ("const", 1))
            items.append(("lin", last, -1, k))
        else:
            items.append(("lin", ("const", 0), 1, k))
    low._place(out, Pending(Take(src, tuple(items)), src.dtype, src.ones, src.dims,
                            _reads(src), pos), pos)


def _lower_pad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    x_expr, dtype, x_ones, x_dims, _ = low._expr(op.inputs[0])
    c_expr, _, c_ones, _, _ = low._expr(op.inputs[1])
    if c_ones:
        raise _Unsupported("pad value is not a scalar")
    pads = op.attrs["paddings"]
    ones, dims, items = [], [], []
    for k, (one, d, (lo, hi)) in enumerate(zip(x_ones, x_dims, pads)):
        n = _add(_add(d, _const(lo) if lo else ("const", 0)), _const(hi) if hi else ("const", 0))
        ones.append(n == 1)
        dims.append(n)
        items.append(("fixed", _const(lo) if lo else ("const", 0)) if one
                     else ("lin", ("const", lo), 1, k))
    ones, dims = _refine(out, tuple(ones), tuple(dims))
    v = low._buf(dtype, ones, dims)
    low.stmts.append(Alloc(v, c_expr, pos))
    low.stmts.append(Region(v, x_expr, x_dims, x_ones, tuple(items), "set", pos))
    low.info[out] = v


def _lower_pad_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    src = _src(low, op.inputs[0], pos)
    _, _, ones, dims, _ = low._expr(op.inputs[1], shape_only=True)
    items = []
    for k, (one, (lo, _hi)) in enumerate(zip(src.ones, op.attrs["paddings"])):
        items.append(("fixed", ("const", 0)) if one else ("lin", ("const", lo), 1, k))
    low._place(out, Pending(Take(src, tuple(items)), src.dtype, ones, dims, _reads(src), pos),
               pos)


@dataclass(eq=False)
class DimValue:
    """Expression: the runtime value of a symbolic dim (Size)."""

    dim: object
    dtype: str


def _lower_size_rank(low, op, pos: int) -> None:
    from jitflow.compiler.fuse import ShapeInfo
    if op.type == "ShapeN":
        for x, out in zip(op.inputs, op.outputs):
            _, _, ones, dims, _ = low._expr(x, shape_only=True)
            if out not in low.fed:
                low.info[out] = ShapeInfo(dims, ones, out.dtype.name, pos)
        return
    out = op.outputs[0]
    if out in low.fed:
        return
    _, _, ones, dims, _ = low._expr(op.inputs[0], shape_only=True)
    dt = out.dtype.name
    if op.type == "Rank":
        low.info[out] = Lit(len(ones), dt)
    elif all(_is_static(d) for d in dims):
        n = 1
        for d in dims:
            n *= _static(d)
        low.info[out] = Lit(n, dt)
    else:
        low._place(out, Pending(DimValue(("prod", dims), dt), dt, (), (), frozenset(), pos),
                   pos)


def _lower_range(low, op, pos: int) -> None:
    out = op.outputs[0]
    if out in low.fed:
        return
    from jitflow.compiler.fuse import Index
    vals = [low.info.get(t) for t in op.inputs]
    if not all(isinstance(v, Lit) for v in vals):
        raise _Unsupported("range of computed bounds")
    dt = out.dtype.name
    n = out.shape.as_tuple()[0]
    wide = "float64" if dt.startswith("float") else "int64"
    expr = Apply("({0} + {1} * {2})", [Lit(vals[0].value, wide), Lit(vals[2].value, wide),
                                         Index(0)], dt, pos, True)
    low._place(out, Pending(expr, dt, (n == 1,), (_const(n) if n else ("const", 0),),
                            frozenset(), pos), pos)


def _dim_value_text(w, e: DimValue, idx, dim) -> str:
    return f"{'np.bool_' if e.dtype == 'bool' else 'np.' + e.dtype}({dim(e.dim)})"


def _lower_batch_matmul(low, op, pos: int) -> None:
    """BatchMatMulV2 as a sum over k of a[..., i, k] * b[..., k, j] (batch dims broadcast)."""
    out = op.outputs[0]
    if out in low.fed:
        return
    a, b = _src(low, op.inputs[0], pos), _src(low, op.inputs[1], pos)
    if a.rank < 2 or b.rank < 2:
        raise _Unsupported("batch matmul of vectors")
    nb = max(a.rank, b.rank) - 2
    parts = [(None, None, v.ones[:-2], v.dims[:-2], None) for v in (a, b)]
    b_ones, b_dims = low._broadcast(parts, pos)
    ta, tb = bool(op.attrs["adj_x"]), bool(op.attrs["adj_y"])
    # loop axes: batch..., i (nb), j (nb + 1), k (nb + 2)
    i, j, k = nb, nb + 1, nb + 2
    ax_a = tuple(range(nb - (a.rank - 2), nb)) + ((k, i) if ta else (i, k))
    ax_b = tuple(range(nb - (b.rank - 2), nb)) + ((j, k) if tb else (k, j))
    m_one, m = (a.ones[-1], a.dims[-1]) if ta else (a.ones[-2], a.dims[-2])
    ka_one, ka = (a.ones[-2], a.dims[-2]) if ta else (a.ones[-1], a.dims[-1])
    n_one, n = (b.ones[-2], b.dims[-2]) if tb else (b.ones[-1], b.dims[-1])
    kb_one, kb = (b.ones[-1], b.dims[-1]) if tb else (b.ones[-2], b.dims[-2])
    if ka != kb:
        low.checks.append(Check(ka, kb, pos, "Matrix size-incompatible"))
    expr = Apply("({0} * {1})", [Load(a, ax_a), Load(b, ax_b)], a.dtype, pos)
    ones = b_ones + (m_one, n_one, ka_one and kb_one)
    dims = b_dims + (m, n, ka if not ka_one else kb)
    v = low._buf(out.dtype.name, ones[:-1], dims[:-1])
    low.stmts.append(Reduce(v, expr, dims, ones, (k,), "sum", pos, a.dtype))
    low.info[out] = v


LOWER = {"StridedSlice": _lower_slice, "Slice": _lower_slice,
         "StridedSliceGrad": _lower_slice_grad, "SliceGrad": _lower_slice_grad,
         "GatherV2": _lower_gather, "GatherGrad": _lower_gather_grad,
         "ConcatV2": _lower_concat, "Pack": _lower_pack, "Unpack": _lower_unpack,
         "Split": _lower_split, "ConcatGradSlice": _lower_concat_grad_slice,
         "Tile": _lower_tile, "TileGrad": _lower_tile_grad, "Fill": _lower_fill,
         "ReverseV2": _lower_reverse, "PadV2": _lower_pad, "PadGrad": _lower_pad_grad,
         "Size": _lower_size_rank, "Rank": _lower_size_rank, "ShapeN": _lower_size_rank,
         "Range": _lower_range, "BatchMatMulV2": _lower_batch_matmul}

# inputs read only for their shape
SHAPE_ONLY = {"StridedSliceGrad": (1,), "SliceGrad": (1,), "GatherGrad": (2,),
              "ConcatGradSlice": range(1, 1 << 16), "TileGrad": (1,), "Fill": (1,),
              "PadGrad": (1,), "Size": (0,), "Rank": (0,), "ShapeN": range(1 << 16)}
# inputs that may stay inlined expressions (they are looped over in order, never indexed)
INLINE_INTO = {"StridedSliceGrad": (0,), "SliceGrad": (0,), "GatherGrad": (0,),
               "ConcatV2": None, "Pack": None, "TileGrad": (0,), "Fill": (0,),
               "PadV2": None}


# -- what compiles -------------------------------------------------------------------------------
def _ranked(*ts) -> bool:
    return all(t.shape.ndims is not None for t in ts)


def _static_slice(op) -> bool:
    if op.type in ("Slice", "SliceGrad"):
        n = 2 if op.type == "Slice" else 3
        return (len(op.inputs) == n - 1 and op.attrs.get("begin") is not None
                and op.attrs.get("size") is not None)
    n = 1 if op.type == "StridedSlice" else 2
    if len(op.inputs) != n or any(op.attrs.get(k) is None for k in ("begin", "end", "strides")):
        return False
    try:
        _entries_of(op, op.inputs[n - 1].shape.ndims)
    except ValueError:
        return False
    return True


def _sup_slice(op) -> bool:
    x = op.inputs[0]
    return _ranked(x) and x.shape.ndims > 0 and _static_slice(op)


def _sup_slice_grad(op) -> bool:
    return _ranked(*op.inputs[:2]) and op.inputs[1].shape.ndims > 0 and _static_slice(op)


def _sup_gather(op) -> bool:
    p, i = op.inputs[:2]
    return len(op.inputs) == 2 and _ranked(p, i) and p.shape.ndims > 0


def _sup_gather_grad(op) -> bool:
    return _ranked(*op.inputs) and op.inputs[2].shape.ndims > 0


def _sup_join(op) -> bool:
    return _ranked(*op.inputs) and len(op.inputs) > 0 and (
        op.type == "Pack" or op.inputs[0].shape.ndims > 0)


def _sup_unary(op) -> bool:
    return len(op.inputs) == 1 and _ranked(op.inputs[0]) and op.inputs[0].shape.ndims > 0


SUPPORTED = {"StridedSlice": _sup_slice, "Slice": _sup_slice,
             "StridedSliceGrad": _sup_slice_grad, "SliceGrad": _sup_slice_grad,
             "GatherV2": _sup_gather, "GatherGrad": _sup_gather_grad,
             "ConcatV2": _sup_join, "Pack": _sup_join, "Unpack": _sup_unary,
             "Split": _sup_unary, "ConcatGradSlice": lambda op: _ranked(*op.inputs),
             "Tile": lambda op: len(op.inputs) == 1 and _sup_unary(op),
             "TileGrad": lambda op: _ranked(*op.inputs) and op.inputs[1].shape.ndims > 0,
             "Fill": lambda op: op.inputs[0].shape.ndims == 0 and (
                 op.attrs.get("dims") is not None or op.inputs[1].op.type == "Shape"
                 and _ranked(op.inputs[1].op.inputs[0])
                 or _packed_dims(op.inputs[1]) is not None),
             "ReverseV2": _sup_unary,
             "PadV2": lambda op: op.attrs["mode"] == "CONSTANT" and _ranked(op.inputs[0])
             and op.inputs[0].shape.ndims > 0,
             "PadGrad": lambda op: op.attrs["mode"] == "CONSTANT" and _ranked(*op.inputs)
             and op.inputs[1].shape.ndims > 0,
             "Size": lambda op: _ranked(*op.inputs), "Rank": lambda op: _ranked(*op.inputs),
             "ShapeN": lambda op: _ranked(*op.inputs),
             "Range": lambda op: op.outputs[0].shape.is_fully_defined()
             and all(t.op.type == "Const" for t in op.inputs),
             "BatchMatMulV2": lambda op: _ranked(*op.inputs) and all(
                 t.shape.ndims >= 2 for t in op.inputs) and op.inputs[0].dtype.name != "bool"}


# -- CPU emitters ------------------------------------------------------------------------------
def _item_text(w, it, idx, dim) -> str:
    kind = it[0]
    if kind == "fixed":
        return dim(it[1]) if it[1] != 1 else "1"
    if kind == "lin":
        _, start, stride, k = it
        i = idx[k]
        s = dim(start)
        term = i if stride == 1 else f"{stride} * {i}"
        return term if s == "0" else f"{s} + {term}"
    if kind == "mod":
        return f"{idx[it[1]]} % {dim(it[2])}"
    if kind == "take":
        _, v, axes = it
        return w.load(v, idx, False, axes) if v.rank else w.load(v, idx, False)
    raise KeyError(kind)


def take_text(w, e: Take, idx: list, dim) -> str:
    """The source text reading one element of a Take."""
    parts = [_item_text(w, it, idx, dim) for it in e.items]
    src = e.value.name
    return f"{src}[{', '.join(parts)}]"


def _emit_alloc(w, s: Alloc, depth: int, dim) -> None:
    w.alloc(s.out, depth, s.op)
    if s.fill is not None:
        w.emit(depth, f"{s.out.name}.fill({w.expr(s.fill, [], False, depth)})", s.op)


def _emit_region(w, s: Region, depth: int, dim) -> None:
    idx, d2 = w.open_loops(s.dims, s.ones, depth, s.op)
    val = w.expr(s.expr, idx, False, d2)
    dst = f"{s.out.name}[{', '.join(_item_text(w, it, idx, dim) for it in s.items)}]"
    if s.mode == "add":
        w.emit(d2, f"{dst} += {val}", s.op)
    else:
        w.emit(d2, f"{dst} = {val}", s.op)


def _emit_range_check(w, c: RangeCheck, depth: int, dim) -> None:
    w.element_check(c.value, f"q < 0 or q >= {dim(c.dim)}", depth, c.op, c.what)


EXPR = {Take: take_text, DimValue: _dim_value_text}
EMIT = {Alloc: _emit_alloc, Region: _emit_region, RangeCheck: _emit_range_check}
