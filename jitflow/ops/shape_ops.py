"""Shape ops: Shape, ShapeN, Size, Rank, Reshape, Transpose, ExpandDims and Squeeze.
"""
from __future__ import annotations

import builtins
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.compiler import lower as _lower
from jitflow.compiler.ir import (Check, CopyVar, DimValue,
                                 Lit, Load, Take, View)
from jitflow.compiler.lower import (Operand as _Operand, Pending, ShapeInfo, Unsupported,
                                    is_static, static_size)
from jitflow.core.graph import Tensor, convert_to_tensor, make_op
from jitflow.ops._array_args import _args, _err, _int_list_arg, _partial_shape, _tf_shape
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__ = ["shape", "shape_n", "size", "rank", "reshape", "transpose", "expand_dims", "squeeze"]


# -- Shape, ShapeN, Size, Rank ------------------------------------------------------------------
def _check_out_type(dtype) -> _dtypes.DType:
    dtype = _dtypes.as_dtype(dtype)
    if dtype not in (_dtypes.int32, _dtypes.int64):
        raise TypeError(f"Value for attr 'out_type' of {dtype.name} is not in the list of "
                        "allowed values: int32, int64")
    return dtype


def _shape_infer(op):
    r = op.inputs[0].shape.ndims
    return [(op.attrs["out_type"], TensorShape([r]))]


def _lower_shape(low, op, pos: int) -> None:
    """The symbolic dims of the input, materialized only when a consumer needs the values."""
    _, _, ones, dims, _ = low.expr(op.inputs[0], shape_only=True)
    out = op.outputs[0]
    if not low.is_fed(out):
        low.set(out, ShapeInfo(dims, ones, out.dtype.name, pos))


def _lower_size_rank(low, op, pos: int) -> None:
    """ShapeN as Shape; Rank a literal; Size a literal or the product of runtime dims."""
    if op.type == "ShapeN":
        for x, out in zip(op.inputs, op.outputs):
            _, _, ones, dims, _ = low.expr(x, shape_only=True)
            if not low.is_fed(out):
                low.set(out, ShapeInfo(dims, ones, out.dtype.name, pos))
        return
    out = op.outputs[0]
    if low.is_fed(out):
        return
    _, _, ones, dims, _ = low.expr(op.inputs[0], shape_only=True)
    dt = out.dtype.name
    if op.type == "Rank":
        low.set(out, Lit(len(ones), dt))
    elif all(is_static(d) for d in dims):
        n = 1
        for d in dims:
            n *= static_size(d)
        low.set(out, Lit(n, dt))
    else:
        low.place(out, Pending(DimValue(("prod", dims), dt), dt, (), (), frozenset(), pos), pos)


def _ranked(*ts) -> bool:
    return all(t.shape.ndims is not None for t in ts)


register("Shape", infer=_shape_infer,
         lower=_lower_shape, shape_only=(0,),
         inline=True,
         ref=lambda op, x: np.array(np.shape(x), op.attrs["out_type"].as_numpy_dtype),
         differentiable=False, kind="shape",
         examples=[Example(build=lambda x: shape(x), inputs=[(2, 3)],
                           expect=lambda x: np.array([2, 3]))])
register("ShapeN", infer=lambda op: [(op.attrs["out_type"], TensorShape([t.shape.ndims]))
                                     for t in op.inputs],
         lower=_lower_size_rank,
         shape_only=builtins.range(1 << 16),
         ref=lambda op, *xs: tuple(np.array(np.shape(x), op.attrs["out_type"].as_numpy_dtype)
                                   for x in xs),
         differentiable=False, kind="shape",
         examples=[Example(build=lambda x, y: shape_n([x, y])[1], inputs=[(2,), (4, 1)],
                           expect=lambda x, y: np.array([4, 1]))])
register("Size", infer=lambda op: [(op.attrs["out_type"], TensorShape([]))],
         lower=_lower_size_rank, shape_only=(0,),
         ref=lambda op, x: np.array(np.size(x), op.attrs["out_type"].as_numpy_dtype),
         differentiable=False, kind="shape",
         examples=[Example(build=lambda x: size(x), inputs=[(2, 3)], expect=lambda x: 6)])
register("Rank", infer=lambda op: [(_dtypes.int32, TensorShape([]))],
         lower=_lower_size_rank, shape_only=(0,),
         ref=lambda op, x: np.array(np.ndim(x), np.int32),
         differentiable=False, kind="shape",
         examples=[Example(build=lambda x: rank(x), inputs=[(2, 3, 1)], expect=lambda x: 3)])


def shape(input, name: Optional[str] = None, out_type=_dtypes.int32) -> Tensor:
    """`tf.shape`: the runtime shape of `input` as a 1-D int32 tensor."""
    x = convert_to_tensor(input)
    return make_op("Shape", [x], {"out_type": _check_out_type(out_type)}, name=name).outputs[0]


def shape_n(input, out_type=_dtypes.int32, name: Optional[str] = None) -> list:
    """`tf.shape_n`: the shapes of several tensors (one op)."""
    xs = [convert_to_tensor(x) for x in input]
    return list(make_op("ShapeN", xs, {"out_type": _check_out_type(out_type)},
                        name=name).outputs)


def size(input, name: Optional[str] = None, out_type=_dtypes.int32) -> Tensor:
    """`tf.size`: the number of elements of `input`."""
    x = convert_to_tensor(input)
    return make_op("Size", [x], {"out_type": _check_out_type(out_type)}, name=name).outputs[0]


def rank(input, name: Optional[str] = None) -> Tensor:
    """`tf.rank`: the number of dimensions of `input` (int32)."""
    x = convert_to_tensor(input)
    return make_op("Rank", [x], name=name).outputs[0]


# -- Reshape ------------------------------------------------------------------------------------
def _reshape_infer(op):
    x = op.inputs[0]
    static = op.attrs.get("shape")
    if static is None:
        partial = _partial_shape(op.inputs[1])
        if partial.ndims is None:
            return [(x.dtype, TensorShape(None))]
        want = list(partial.as_tuple())
    else:
        want = list(static)
        if sum(1 for d in want if d == -1) > 1:
            i, j = [k for k, d in enumerate(want) if d == -1][:2]
            raise ValueError(f"Cannot infer shape for '{op.name}' (op: 'Reshape'): only one "
                             f"input size may be -1, not both {i} and {j}")
        if any(d < -1 for d in want):
            raise ValueError(f"Size {min(want)} must be non-negative, not {min(want)} for "
                             f"'{op.name}' (op: 'Reshape')")
        want = [None if d == -1 else d for d in want]
    n_in = x.shape.num_elements()
    known = [d for d in want if d is not None]
    prod = int(np.prod(known)) if known else 1
    unknown = [i for i, d in enumerate(want) if d is None]
    if static is not None and unknown and 0 in known:
        # a -1 beside a 0 is inferred from the input's non-zero dims at run time (TF)
        return [(x.dtype, TensorShape(want))]
    in_dims = x.shape.as_tuple()
    if n_in is None and in_dims is not None and not unknown:
        in_known = int(np.prod([d for d in in_dims if d is not None]))
        if in_known > 0 and prod % in_known:
            raise ValueError(f"Dimension size must be evenly divisible by {in_known} but is "
                             f"{prod} for '{op.name}' (op: 'Reshape') with input shapes: "
                             f"{_tf_shape(x.shape)}, [{len(want)}].")
    if n_in is not None:
        if not unknown and prod != n_in:
            raise ValueError(f"Cannot reshape a tensor with {n_in} elements to shape "
                             f"{_tf_shape(want)} ({prod} elements) for '{op.name}' (op: "
                             f"'Reshape') with input shapes: {_tf_shape(x.shape)}, "
                             f"[{len(want)}].")
        if len(unknown) == 1 and static is not None:
            if prod == 0 or n_in % prod:
                raise ValueError(f"Dimension size must be evenly divisible by {prod} but is "
                                 f"{n_in} for '{op.name}' (op: 'Reshape') with input shapes: "
                                 f"{_tf_shape(x.shape)}, [{len(want)}].")
            want[unknown[0]] = n_in // prod
    return [(x.dtype, TensorShape(want))]


def _reshape_ref(op, x, *dyn):
    (want,) = _args(op, dyn, "shape")
    x = np.asarray(x)
    want = list(want)
    if want.count(-1) > 1:
        raise _err("Only one input size may be -1", op)
    if -1 in want:
        # TF's rule: with a 0 among the requested sizes, the -1 is inferred from the input's
        # non-zero dims (an empty input can still be reshaped), else it must divide evenly
        has_zero = 0 in want
        product = int(np.prod([d for d in want if d not in (-1, 0)]))
        elems, in_zero = 1, False
        for d in x.shape:
            if d > 0 or not has_zero:
                elems *= d
            else:
                in_zero = True
        missing = elems // product
        if not in_zero and product * missing != elems:
            raise _err(f"Input to reshape is a tensor with {x.size} values, but the requested "
                       f"shape requires a multiple of {product}", op)
        want[want.index(-1)] = missing
    known = int(np.prod(want)) if want else 1
    if known != x.size:
        raise _err(f"Input to reshape is a tensor with {x.size} values, but the requested shape "
                   f"has {known}", op)
    return x.reshape(want)


def _reshape_like(g: Tensor, x: Tensor) -> Tensor:
    """Reshape `g` to the (runtime) shape of `x`."""
    if x.shape.is_fully_defined():
        return reshape(g, x.shape.as_list())
    return reshape(g, shape(x))


def _view_target(low, op, pos: int, ones: tuple, dims: tuple) -> tuple:
    """(ones, dims) of the output of Reshape/ExpandDims/Squeeze of an operand of class
    `ones`/`dims`, with the checks its sizes need (a failing one where TF raises)."""
    r = len(ones)
    if op.type == "ExpandDims":
        a = op.attrs["axis"]
        if not -r - 1 <= a <= r:
            low.fail(pos, "Tried to expand dim index out of range")
            a = 0
        a = a if a >= 0 else a + r + 1
        return ones[:a] + (True,) + ones[a:], dims[:a] + (1,) + dims[a:]
    if op.type == "Squeeze":
        axes = op.attrs["squeeze_dims"]
        if not axes:
            # every dim of size 1: the class knows the sizes of what flows in; a computed size
            # that is 1 at run time without the class knowing (a slice's length) must not be
            # kept, so such kept dims are checked to differ from 1
            axes = [k for k in builtins.range(r) if ones[k]]
            for k in builtins.range(r):
                if not ones[k] and not is_static(dims[k]) and dims[k][0] not in ("in", "var"):
                    low.checks.append(Check(("ok", 1, dims[k], ("const", 2)), ("const", 0),
                                            pos, "Squeeze of a dimension of size 1"))
        if any(not -r <= a < r for a in axes):
            low.fail(pos, "Tried to squeeze dim index out of range")
            axes = []
        axes = {a % r for a in axes}
        for a in axes:
            if not ones[a]:
                low.checks.append(Check(dims[a], 1, pos, "Can not squeeze dim: expected a "
                                                         "dimension of 1"))
        return (tuple(o for k, o in enumerate(ones) if k not in axes),
                tuple(d for k, d in enumerate(dims) if k not in axes))
    if len(op.inputs) == 2:
        inf = low.shape_info(op.inputs[1])
        if inf is None:
            raise Unsupported("reshape to a computed shape")
        if inf.dims != dims:
            low.checks.append(Check(("prod", dims), ("prod", inf.dims), pos,
                                    "Input to reshape has the wrong number of values"))
        return inf.ones, inf.dims
    want = [int(d) for d in op.attrs["shape"]]
    known = 1
    for d in want:
        if d != -1:
            known *= d
    if want.count(-1) > 1 or known == 0 and -1 in want:
        raise Unsupported("reshape target")
    if -1 in want:
        low.checks.append(Check(("mod", dims, known), ("const", 0), pos,
                                "Input to reshape has a size that does not divide"))
        static = op.outputs[0].shape.as_tuple() or (None,) * len(want)
        # a -1 that static shapes already know to be 1 (or the only element of a scalar)
        # is a unit dim of the class
        if r == 0 or any(d == -1 and static[k] == 1 for k, d in enumerate(want)):
            want = [1 if d == -1 else d for d in want]
            low.checks.append(Check(("prod", dims), ("const", known), pos,
                                    "Input to reshape has the wrong number of values"))
        out = tuple(("div", dims, known) if d == -1 else (1 if d == 1 else ("const", d))
                    for d in want)
    else:
        low.checks.append(Check(("prod", dims), ("const", known), pos,
                                "Input to reshape has the wrong number of values"))
        out = tuple(1 if d == 1 else ("const", d) for d in want)
    return tuple(d == 1 for d in out), out


def _lower_view(low, op, pos: int) -> None:
    """Reshape, ExpandDims, Squeeze: the stored input with other dims (`ir.View`); to or from
    a scalar, its one element (an expression)."""
    x, out = op.inputs[0], op.outputs[0]
    part = low.expr(x, shape_only=True)
    ones, dims = _view_target(low, op, pos, part.ones, part.dims)
    if low.is_fed(out):
        return
    if not part.ones or not ones:
        # one element: the scalar itself, or the element of a tensor whose dims are all 1
        # (those the class does not know to be 1 are checked by the prod check above)
        if part.ones:
            src = low.stored(x, pos)
            expr = Take(src, tuple(("fixed", ("const", 0)) for _ in src.ones))
            reads = low.reads_of(src)
        else:
            e = low.expr(x)
            expr, reads = e.expr, e.reads
        low.identity_of(op, pos, _Operand(expr, part.dtype, ones, dims, reads), ones, dims)
        return
    src = low.value(x, pos)
    if src.kind == "var":
        c = low.buf(src.dtype, src.ones, src.dims)
        low.emit(CopyVar(c, src, pos))
        src = c
    v = low.buf(src.dtype, ones, dims)
    v.view = True
    low.emit(View(v, src, pos))
    low.set(out, v)


def _view_lowerable(op) -> bool:
    if op.type == "Reshape" and len(op.inputs) == 2:
        return op.inputs[1].op.type == "Shape" and _lower.supported(op.inputs[1].op)
    if op.type == "Reshape":
        return op.attrs.get("shape") is not None
    return len(op.inputs) == 1


register("Reshape", infer=_reshape_infer, ref=_reshape_ref,
         lower=_lower_view, lowerable=_view_lowerable, shape_only=(1,),
         inline=builtins.range(1, 1 << 16),
         grad=lambda op, g: [_reshape_like(g, op.inputs[0])] + [None] * (len(op.inputs) - 1),
         kind="shape",
         examples=[Example(build=lambda x: reshape(x, [3, -1]), inputs=[(2, 3)],
                           expect=lambda x: x.reshape(3, 2)),
                   Example(build=lambda x: reshape(x, shape(x)[::-1]), inputs=[(2, 3)],
                           expect=lambda x: x.reshape(3, 2), id="dynamic"),
                   Example(build=lambda x: reshape(x, []), inputs=[(1, 1)],
                           expect=lambda x: x.reshape(()), id="scalar")])


def reshape(tensor, shape, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.reshape`: at most one dimension may be -1 (inferred)."""
    x = convert_to_tensor(tensor)
    static, dyn = _int_list_arg(shape, "shape")
    inputs = [x] + ([dyn] if dyn is not None else [])
    return make_op("Reshape", inputs, {"shape": static}, name=name).outputs[0]


# -- Transpose ----------------------------------------------------------------------------------
def _perm_of(op, ndim):
    perm = op.attrs["perm"]
    return tuple(builtins.range(ndim - 1, -1, -1)) if perm is None else perm


def _transpose_infer(op):
    x = op.inputs[0]
    dims = x.shape.as_tuple()
    perm = op.attrs["perm"]
    if len(op.inputs) == 2:  # a perm known at run time: the rank only
        p = op.inputs[1]
        if p.shape.ndims not in (None, 1):
            raise ValueError(f"Shape must be rank 1 but is rank {p.shape.ndims} for "
                             f"'{op.name}' (op: 'Transpose') with input shapes: "
                             f"{_tf_shape(x.shape)}, {_tf_shape(p.shape)}.")
        n = len(dims) if dims is not None else (p.shape.as_tuple() or (None,))[0]
        return [(x.dtype, TensorShape(None if n is None else [None] * n))]
    if dims is None:
        return [(x.dtype, TensorShape(None if perm is None else [None] * len(perm)))]
    perm = _perm_of(op, len(dims))
    if len(perm) != len(dims):
        raise ValueError(f"Dimension must be {len(dims)} but is {len(perm)} for '{op.name}' "
                         f"(op: 'Transpose') with input shapes: {_tf_shape(x.shape)}, "
                         f"[{len(perm)}].")
    n = len(dims)
    if sorted(p % n if -n <= p < n else -1 for p in perm) != list(builtins.range(n)):
        raise ValueError(f"{list(perm)} is not a valid permutation of {len(dims)} dimensions "
                         f"for '{op.name}' (op: 'Transpose')")
    return [(x.dtype, TensorShape([dims[p] for p in perm]))]


def _transpose_grad(op, g):
    perm = op.attrs["perm"]
    if len(op.inputs) == 2:
        from jitflow.ops.sequence import invert_permutation
        return [transpose(g, invert_permutation(op.inputs[1])), None]
    if perm is None:
        return [transpose(g)]
    n = len(perm)
    inv = [0] * n
    for i, p in enumerate(perm):
        inv[p % n] = i
    return [transpose(g, inv)]


def _lower_transpose(low, op, pos: int) -> None:
    """A load of the stored input with permuted loop axes (`Load.axes`), inlined."""
    x, out = op.inputs[0], op.outputs[0]
    r = low.rank(x)
    perm = op.attrs.get("perm")
    if perm is not None and (len(perm) != r or sorted(int(p) % r if -r <= p < r else -1
                                                      for p in perm) != list(builtins.range(r))):
        low.fail(pos, "Transpose: not a permutation of the input's dimensions")
        perm = None
    if r == 0:
        if not low.is_fed(out):
            e = low.expr(x)
            low.identity_of(op, pos, e, (), ())
        return
    src = low.value(x, pos)
    perm = tuple(builtins.range(r - 1, -1, -1)) if perm is None else tuple(int(p) % r for p in perm)
    inv = [0] * r
    for j, p in enumerate(perm):
        inv[p] = j
    ones = tuple(src.ones[p] for p in perm)
    dims = tuple(src.dims[p] for p in perm)
    if low.is_fed(out):
        return
    low.place(out, Pending(Load(src, tuple(inv)), src.dtype, ones, dims, low.reads_of(src),
                           pos), pos)


def _transpose_lowerable(op) -> bool:
    return len(op.inputs) == 1


def _transpose_ref(op, x, perm=None):
    if perm is None:
        return np.transpose(x, _perm_of(op, np.ndim(x)))
    perm = np.asarray(perm).reshape(-1)
    n = np.ndim(x)
    if len(perm) != n or sorted(int(p) for p in perm) != list(builtins.range(n)):
        raise _err(f"transpose expects a vector of size {n}. But input(1) is a vector of size "
                   f"{len(perm)}" if len(perm) != n else
                   f"{perm.tolist()} is not a permutation of {n} dimensions", op)
    return np.transpose(x, [int(p) for p in perm])


register("Transpose", infer=_transpose_infer,
         lower=_lower_transpose, lowerable=_transpose_lowerable,
         ref=_transpose_ref,
         grad=_transpose_grad, kind="other",
         examples=[Example(build=lambda x: transpose(x), inputs=[(2, 3, 4)],
                           expect=lambda x: x.transpose()),
                   Example(build=lambda x: transpose(x, [1, 2, 0]), inputs=[(2, 3, 4)],
                           expect=lambda x: x.transpose(1, 2, 0), id="perm"),
                   Example(build=lambda x: transpose(x, shape(shape(x)) - _range_like(x)),
                           inputs=[(2, 3, 4)], expect=lambda x: x.transpose(),
                           id="runtime_perm")])


def _range_like(x: Tensor) -> Tensor:
    """[1, 2, ..., rank] as a tensor computed at run time (for the run-time perm example)."""
    from jitflow.ops.sources import range as _range
    return _range(1, rank(x) + 1)


def transpose(a, perm=None, name: str = "transpose", conjugate: bool = False) -> Tensor:
    """`tf.transpose`: permute dimensions (default: reversed; `perm` may be a tensor known only
    at run time); `conjugate` is a no-op for the real dtypes jitflow supports."""
    x = convert_to_tensor(a)
    if perm is not None:
        static, dyn = _int_list_arg(perm, "perm")
        if dyn is not None:  # known only at run time: an input (never lowered)
            return make_op("Transpose", [x, dyn], {"perm": None}, name=name).outputs[0]
        perm = static
    return make_op("Transpose", [x], {"perm": perm}, name=name).outputs[0]


# -- ExpandDims, Squeeze ------------------------------------------------------------------------
def _expand_infer(op):
    x = op.inputs[0]
    dims = x.shape.as_tuple()
    axis = op.attrs["axis"]
    if dims is None:
        return [(x.dtype, TensorShape(None))]
    r = len(dims)
    if not -r - 1 <= axis <= r:
        raise ValueError(f"Tried to expand dim index {axis} for tensor with {r} dimensions. "
                         f"for '{op.name}' (op: 'ExpandDims')")
    a = axis if axis >= 0 else axis + r + 1
    return [(x.dtype, TensorShape(dims[:a] + (1,) + dims[a:]))]


register("ExpandDims", infer=_expand_infer,
         lower=_lower_view, lowerable=_view_lowerable, inline=builtins.range(1, 1 << 16),
         ref=lambda op, x: np.expand_dims(x, op.attrs["axis"]),
         grad=lambda op, g: [_reshape_like(g, op.inputs[0])], kind="shape",
         examples=[Example(build=lambda x: expand_dims(x, -1), inputs=[(2, 3)],
                           expect=lambda x: x[..., None]),
                   Example(build=lambda x: expand_dims(x, dim=0), inputs=[(3,)],
                           expect=lambda x: x[None], id="dim")])


def expand_dims(input, axis=None, name: Optional[str] = None, dim=None) -> Tensor:
    """`tf.expand_dims`: insert a size-1 dimension at `axis` (legacy spelling `dim`)."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    x = convert_to_tensor(input)
    static, dyn = _int_list_arg(axis, "axis")
    if dyn is not None or len(static) != 1:
        raise TypeError("expand_dims: `axis` must be a single int known at build time")
    return make_op("ExpandDims", [x], {"axis": static[0]}, name=name).outputs[0]


def _squeeze_infer(op):
    x = op.inputs[0]
    dims = x.shape.as_tuple()
    axes = op.attrs["squeeze_dims"]
    if dims is None:
        return [(x.dtype, TensorShape(None))]
    r = len(dims)
    if not axes:
        if any(d is None for d in dims):
            return [(x.dtype, TensorShape(None))]
        return [(x.dtype, TensorShape([d for d in dims if d != 1]))]
    keep = []
    norm = set()
    for a in axes:
        if not -r <= a < r:
            raise ValueError(f"Tried to squeeze dim index {a} for tensor with {r} dimensions. "
                             f"for '{op.name}' (op: 'Squeeze')")
        norm.add(a % r)
    for i, d in enumerate(dims):
        if i in norm:
            if d is not None and d != 1:
                raise ValueError(f"Can not squeeze dim[{i}], expected a dimension of 1, got "
                                 f"{d} for '{op.name}' (op: 'Squeeze') with input shapes: "
                                 f"{_tf_shape(x.shape)}.")
        else:
            keep.append(d)
    return [(x.dtype, TensorShape(keep))]


def _squeeze_ref(op, x):
    x = np.asarray(x)
    axes = op.attrs["squeeze_dims"]
    if not axes:
        return np.squeeze(x)
    for a in axes:
        if x.shape[a] != 1:
            raise _err(f"Can not squeeze dim[{a % x.ndim}], expected a dimension of 1, got "
                       f"{x.shape[a]}", op)
    return np.squeeze(x, axis=tuple(axes))


register("Squeeze", infer=_squeeze_infer, ref=_squeeze_ref,
         lower=_lower_view, lowerable=_view_lowerable, inline=builtins.range(1, 1 << 16),
         grad=lambda op, g: [_reshape_like(g, op.inputs[0])], kind="shape",
         examples=[Example(build=lambda x: squeeze(x), inputs=[(1, 3, 1)],
                           expect=lambda x: x.reshape(3)),
                   Example(build=lambda x: squeeze(x, [-1]), inputs=[(1, 3, 1)],
                           expect=lambda x: x.reshape(1, 3), id="axis")])


def squeeze(input, axis=None, name: Optional[str] = None, squeeze_dims=None) -> Tensor:
    """`tf.squeeze`: remove size-1 dimensions (all, or those in `axis`/`squeeze_dims`)."""
    if squeeze_dims is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'squeeze_dims' and 'axis'")
        axis = squeeze_dims
    if isinstance(axis, int):
        axis = [axis]
    x = convert_to_tensor(input)
    return make_op("Squeeze", [x], {"squeeze_dims": tuple(int(a) for a in (axis or ()))},
                   name=name).outputs[0]
