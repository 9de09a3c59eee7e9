"""Sources: constants, placeholders, fills (zeros, ones, fill, zeros_like, ones_like), ranges,
linspace, one_hot and eye.
"""
from __future__ import annotations

import builtins
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.compiler import lower as _lower
from jitflow.compiler.ir import (X0, X1, X2, X3, Apply, Arg, Const, Index, Lit, Load, S)
from jitflow.compiler.lower import Pending, Unsupported, const_dim
from jitflow.core.graph import Tensor, convert_to_tensor, get_default_graph, make_op, name_scope
from jitflow.ops._array_args import (get_static_value, _args, _const, _err, _int_list_arg,
                                     _shape_of, _tf_shape)
from jitflow.ops.shape_ops import shape
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape, as_shape, shape_tf_str

__all__ = ["get_static_value", "constant", "placeholder", "placeholder_with_default", "zeros",
           "ones", "zeros_like", "ones_like", "fill", "range", "linspace", "lin_space", "one_hot",
           "eye"]
NAMESPACES = {"linalg": ["eye"]}


# -- Const ---------------------------------------------------------------------------------
register(
    "Const",
    lower=lambda low, op, pos: low.constant(op, op.attrs["value"]),
    infer=lambda op: [(op.attrs["dtype"], op.attrs["value"].shape)],
    ref=lambda op: op.attrs["value"],
    differentiable=False, kind="source",
    examples=[Example(build=lambda: constant([[1.5, 2.0], [3.0, -1.0]]), inputs=[],
                      expect=lambda: np.array([[1.5, 2.0], [3.0, -1.0]]), dtypes=((),),
                      id="matrix"),
              Example(build=lambda: constant(7.0, shape=[2, 3]), inputs=[],
                      expect=lambda: np.full((2, 3), 7.0), dtypes=((),), id="fill")],
    doc="A constant; attrs: value (ndarray), dtype.")


def _constant_array(value, dtype, shape, verify_shape: bool) -> np.ndarray:
    if dtype is not None and _dtypes.as_dtype(dtype) == _dtypes.string:
        arr = _dtypes.as_bytes_array(value, "tf.constant")
        dtype = _dtypes.string
    elif dtype is not None:
        dtype = _dtypes.as_dtype(dtype)
        if _dtypes.is_string_value(value):
            raise TypeError(f"Expected {dtype.name}, got {value!r} of type "
                            f"'{type(value).__name__}' instead.")
        src = np.asarray(value)
        if src.dtype.kind == "f" and dtype.is_integer and np.any(src != np.floor(src)):
            raise TypeError(f"Expected {dtype.name}, got {value!r} of type "
                            f"'{type(value).__name__}' instead.")
        arr = np.asarray(src, dtype=dtype.as_numpy_dtype)
    else:
        from jitflow.core.graph import _infer_numpy
        arr = _infer_numpy(value)
        dtype = _dtypes.as_dtype(arr.dtype)
    if shape is not None:
        shape = tuple(int(d) for d in as_shape(shape).as_list())
        n = int(np.prod(shape))
        if verify_shape and arr.shape != shape:
            raise TypeError(f"Expected Tensor's shape: {shape}, got {arr.shape}.")
        if arr.size == 1:
            arr = np.full(shape, arr.reshape(()), dtype=arr.dtype)
        elif arr.size == n:
            arr = arr.reshape(shape)
        elif arr.size > n:
            raise TypeError(f"Too many elements provided. Needed at most {n}, but received "
                            f"{arr.size}")
        elif arr.size == 0:
            raise ValueError(f"Cannot create a tensor of shape {list(shape)} from an empty "
                             "value")
        else:  # TF1 pads the values with their last element
            flat = arr.reshape(-1)
            arr = np.concatenate([flat, np.full(n - flat.size, flat[-1], flat.dtype)])
            arr = arr.reshape(shape)
    arr = np.array(arr, dtype=dtype.as_numpy_dtype, copy=True)
    arr.setflags(write=False)
    return arr


def constant(value, dtype=None, shape=None, name: str = "Const",
             verify_shape: bool = False) -> Tensor:
    """`tf.constant`: a tensor holding `value` (broadcast or reshaped to `shape` if given).

    As in TF1 graph mode, a value with fewer elements than `shape` is padded with its last
    element; `verify_shape=True` demands the exact shape.
    """
    arr = _constant_array(value, dtype, shape, verify_shape)
    return make_op("Const", [], {"value": arr, "dtype": _dtypes.as_dtype(arr.dtype)},
                   name=name, graph=get_default_graph()).outputs[0]


# -- Placeholder ---------------------------------------------------------------------------
def _no_feed(op, ctx=None):
    from jitflow.core.errors import InvalidArgumentError
    shape = op.attrs["shape"]
    where = "" if shape.ndims is None else f" and shape {shape_tf_str(shape)}"
    raise InvalidArgumentError(
        None, op, f"You must feed a value for placeholder tensor '{op.name}' with dtype "
        f"{_dtypes.type_string(op.attrs['dtype'])}{where}")


register("Placeholder", infer=lambda op: [(op.attrs["dtype"], op.attrs["shape"])],
         lower=_lower.computes_nothing,   # a kernel argument
         ref=_no_feed, differentiable=False, kind="source")


def placeholder(dtype, shape=None, name: Optional[str] = None) -> Tensor:
    """`tf.placeholder`: a tensor that must be fed; `None` dims accept any size."""
    dtype = _dtypes.as_dtype(dtype)
    return make_op("Placeholder", [], {"dtype": dtype, "shape": as_shape(shape)},
                   name=name or "Placeholder", graph=get_default_graph()).outputs[0]


def _pwd_infer(op):
    x = op.inputs[0]
    shape = op.attrs["shape"]
    if not shape.is_compatible_with(x.shape):
        raise ValueError(f"Shapes {x.shape} and {shape} are incompatible for "
                         f"placeholder_with_default '{op.name}'")
    return [(x.dtype, shape)]


register("PlaceholderWithDefault", infer=_pwd_infer, ref=lambda op, x: x,
         grad=lambda op, g: [g], kind="elementwise", scalar=X0)


def placeholder_with_default(input, shape, name: Optional[str] = None) -> Tensor:
    """A placeholder that yields `input` when it is not fed."""
    x = convert_to_tensor(input)
    return make_op("PlaceholderWithDefault", [x], {"shape": as_shape(shape)},
                   name=name).outputs[0]


# -- fills: zeros, ones, fill, zeros_like, ones_like -------------------------------------------
def _fill_infer(op):
    value = op.inputs[0]
    if value.shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {value.shape.ndims} for "
                         f"'{op.name}' (op: 'Fill') with input shapes: [?], "
                         f"{_tf_shape(value.shape)}.")
    return [(value.dtype, _shape_of(op, "dims", 1))]


def _fill_ref(op, value, *dyn):
    (dims,) = _args(op, dyn, "dims")
    if any(d < 0 for d in dims):
        raise _err(f"dims must be non-negative, got {list(dims)}", op)
    return np.full(dims, value, dtype=op.outputs[0].dtype.as_numpy_dtype)


def _lower_fill(low, op, pos: int) -> None:
    """The fill value (an expression) over the target shape: inlined into the consumer."""
    out = op.outputs[0]
    if low.is_fed(out):
        return
    expr, dtype, v_ones, _, reads = low.expr(op.inputs[0])
    if v_ones:
        raise Unsupported("fill value is not a scalar")
    static = op.attrs.get("dims")
    if static is not None:
        ones = tuple(d == 1 for d in static)
        dims = tuple(const_dim(d) if d else ("const", 0) for d in static)
    else:
        inf = low.shape_info(op.inputs[1])
        packed = _packed_dims(op.inputs[1])
        if inf is not None:
            ones, dims = inf.ones, inf.dims
        elif packed is not None:
            ones, dims = [], []
            for d in packed:
                if isinstance(d, int):
                    ones.append(d == 1)
                    dims.append(const_dim(d) if d else ("const", 0))
                else:
                    _, _, x_ones, x_dims, _ = low.expr(d[0], shape_only=True)
                    ones.append(x_ones[d[1]])
                    dims.append(x_dims[d[1]])
            ones, dims = tuple(ones), tuple(dims)
        else:
            raise Unsupported("fill to a computed shape")
    low.place(out, Pending(expr, dtype, ones, dims, reads, pos), pos)


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


def _fill_lowerable(op) -> bool:
    return op.inputs[0].shape.ndims == 0 and (
        op.attrs.get("dims") is not None or op.inputs[1].op.type == "Shape"
        and op.inputs[1].op.inputs[0].shape.ndims is not None
        or _packed_dims(op.inputs[1]) is not None)


register("Fill", infer=_fill_infer, ref=_fill_ref,
         lower=_lower_fill, lowerable=_fill_lowerable, shape_only=(1,), inline=(0,),
         grad=lambda op, g: [_unbroadcast(g, op.inputs[0])] + [None] * (len(op.inputs) - 1),
         kind="other",
         examples=[Example(build=lambda v: fill([2, 3], v), inputs=[()],
                           expect=lambda v: np.full((2, 3), v)),
                   Example(build=lambda x: fill(shape(x), constant(2.5, x.dtype)) + x,
                           inputs=[(3, 2)],
                           expect=lambda x: x + 2.5, id="dynamic")])


def _unbroadcast(g, x):
    from jitflow.ops.math.common import unbroadcast
    return unbroadcast(g, x)


def fill(dims, value, name: Optional[str] = None) -> Tensor:
    """`tf.fill`: a tensor of shape `dims` with every element `value` (op `Fill`)."""
    static, dyn = _int_list_arg(dims, "dims")
    with name_scope(name, "Fill", [value]) as scope:
        v = convert_to_tensor(value, name="value")
        inputs = [v] + ([dyn] if dyn is not None else [])
        return make_op("Fill", inputs, {"dims": static}, name=scope).outputs[0]


def _element(value: int, dtype: _dtypes.DType):
    """0 or 1 as an element of `dtype`: a string's zero is the empty string, and strings have
    no one (TF1's TypeError)."""
    if dtype == _dtypes.string:
        if value == 0:
            return b""
        raise TypeError(f"Expected string, but got {value} of type 'int'.")
    return value


def _filled(shape_arg, dtype, value, name, default_name) -> Tensor:
    dtype = _dtypes.as_dtype(dtype)
    value = _element(value, dtype)
    static, dyn = _int_list_arg(shape_arg, "shape")
    if dyn is None:
        arr = np.full(static, value, dtype=dtype.as_numpy_dtype)
        return constant(arr, dtype=dtype, name=name or default_name)
    with name_scope(name, default_name, [dyn]) as scope:
        v = constant(value, dtype=dtype)
        return make_op("Fill", [v, dyn], {"dims": None}, name=scope).outputs[0]


def zeros(shape, dtype=_dtypes.float32, name: Optional[str] = None) -> Tensor:
    """`tf.zeros`: a constant when `shape` is static, else a `Fill`."""
    return _filled(shape, dtype, 0, name, "zeros")


def ones(shape, dtype=_dtypes.float32, name: Optional[str] = None) -> Tensor:
    """`tf.ones`: a constant when `shape` is static, else a `Fill`."""
    return _filled(shape, dtype, 1, name, "ones")


def _like_infer(op):
    return [(op.attrs["dtype"], op.inputs[0].shape)]


def _zeros_like_ref(op, x):
    dtype = op.attrs["dtype"]
    if dtype == _dtypes.string:
        return np.full(np.shape(x), b"", dtype=object)
    return np.zeros(np.shape(x), dtype.as_numpy_dtype)


register("ZerosLike", infer=_like_infer, ref=_zeros_like_ref,
         differentiable=False, kind="elementwise", scalar=Const(0),
         examples=[Example(build=lambda x: zeros_like(x, optimize=False), inputs=[(2, 3)],
                           expect=lambda x: np.zeros_like(x))])
register("OnesLike", infer=_like_infer,
         ref=lambda op, x: np.ones(np.shape(x), op.attrs["dtype"].as_numpy_dtype),
         differentiable=False, kind="elementwise", scalar=Const(1),
         examples=[Example(build=lambda x: ones_like(x, optimize=False), inputs=[(2, 3)],
                           expect=lambda x: np.ones_like(x))])


def _like(op_type, value, tensor, dtype, name, optimize, default_name) -> Tensor:
    with name_scope(name, default_name, [tensor]) as scope:
        t = convert_to_tensor(tensor, name="tensor")
        dtype = t.dtype if dtype is None else _dtypes.as_dtype(dtype)
        value = _element(value, dtype)
        if optimize and t.shape.is_fully_defined():
            arr = np.full(t.shape.as_list(), value, dtype=dtype.as_numpy_dtype)
            return constant(arr, dtype=dtype, name=scope)
        return make_op(op_type, [t], {"dtype": dtype}, name=scope).outputs[0]


def zeros_like(tensor, dtype=None, name: Optional[str] = None, optimize: bool = True) -> Tensor:
    """`tf.zeros_like`: zeros of `tensor`'s shape (a constant when the shape is static)."""
    return _like("ZerosLike", 0, tensor, dtype, name, optimize, "zeros_like")


def ones_like(tensor, dtype=None, name: Optional[str] = None, optimize: bool = True) -> Tensor:
    """`tf.ones_like`: ones of `tensor`'s shape (a constant when the shape is static)."""
    return _like("OnesLike", 1, tensor, dtype, name, optimize, "ones_like")


# -- Range, LinSpace, OneHot, eye -----------------------------------------------------------------
def _range_len(start, limit, delta) -> int:
    if delta == 0:
        raise ValueError(f"Requires delta != 0: {delta}")
    if (delta > 0 and start > limit) or (delta < 0 and start < limit):
        raise ValueError(f"Requires start <= limit when delta > 0: {start}/{limit}"
                         if delta > 0 else
                         f"Requires start >= limit when delta < 0: {start}/{limit}")
    return int(np.ceil(abs((limit - start) / delta)))


def _range_infer(op):
    vals = [_const(t, 8) for t in op.inputs]
    dtype = op.attrs["dtype"]
    if any(v is None for v in vals):
        return [(dtype, TensorShape([None]))]
    start, limit, delta = (v.item() for v in vals)
    return [(dtype, TensorShape([_range_len(start, limit, delta)]))]


def _range_ref(op, start, limit, delta):
    start, limit, delta = (np.asarray(v).item() for v in (start, limit, delta))
    try:
        n = _range_len(start, limit, delta)
    except ValueError as e:
        raise _err(str(e), op) from None
    npd = op.attrs["dtype"].as_numpy_dtype
    return (start + delta * np.arange(n, dtype=np.float64 if np.dtype(npd).kind == "f"
                                      else np.int64)).astype(npd)


def _lower_range(low, op, pos: int) -> None:
    """start + delta * i over the (static) length: inlined into the consumer."""
    out = op.outputs[0]
    if low.is_fed(out):
        return
    vals = [low.literal(t) for t in op.inputs]
    if any(v is None for v in vals):
        raise Unsupported("range of computed bounds")
    dt = out.dtype.name
    n = out.shape.as_tuple()[0]
    wide = "float64" if dt.startswith("float") else "int64"
    expr = Apply(S.add(X0, S.mul(X1, X2)), [Lit(vals[0].value, wide), Lit(vals[2].value, wide),
                                            Index(0)], dt, pos, True)
    low.place(out, Pending(expr, dt, (n == 1,), (const_dim(n) if n else ("const", 0),),
                           frozenset(), pos), pos)


register("Range", infer=_range_infer, ref=_range_ref, differentiable=False, kind="source",
         lower=_lower_range, lowerable=lambda op: op.outputs[0].shape.is_fully_defined()
         and all(t.op.type == "Const" for t in op.inputs),
         examples=[Example(build=lambda: range(2, 11, 3), inputs=[], dtypes=((),),
                           expect=lambda: np.arange(2, 11, 3)),
                   Example(build=lambda: range(1.0, 0.0, -0.25), inputs=[], dtypes=((),),
                           expect=lambda: np.arange(1.0, 0.0, -0.25), id="float")])


_RANGE_ORDER = [_dtypes.int32, _dtypes.int64, _dtypes.float32, _dtypes.float64]


def range(start, limit=None, delta=1, dtype=None, name: str = "range") -> Tensor:  # noqa: A001
    """`tf.range`: [start, limit) in steps of `delta`; ints -> int32, any float -> float32."""
    if limit is None:
        start, limit = 0, start
    with name_scope(name, "Range", [start, limit, delta]) as scope:
        ts = []
        for v, n in ((start, "start"), (limit, "limit"), (delta, "delta")):
            if isinstance(v, Tensor) or hasattr(v, "_to_tensor") or dtype is None:
                ts.append(convert_to_tensor(v, name=n))
            else:
                ts.append(constant(v, dtype=dtype, name=n))
        if dtype is None:
            dtype = max((t.dtype for t in ts), key=lambda d: _RANGE_ORDER.index(d)
                        if d in _RANGE_ORDER else -1)
        dtype = _dtypes.as_dtype(dtype)
        if dtype not in _RANGE_ORDER:
            raise TypeError(f"Value for attr 'Tidx' of {dtype.name} is not in the list of "
                            "allowed values: float32, float64, int32, int64")
        from jitflow.ops.math.casting import cast
        ts = [cast(t, dtype) for t in ts]
        return make_op("Range", ts, {"dtype": dtype}, name=scope).outputs[0]


def _linspace_infer(op):
    start, stop = op.inputs[:2]
    if start.dtype not in (_dtypes.float32, _dtypes.float64):
        raise TypeError(f"Value for attr 'T' of {start.dtype.name} is not in the list of "
                        "allowed values: float32, float64")
    if stop.dtype != start.dtype:
        raise TypeError(f"Input 'stop' of 'LinSpace' Op has type {stop.dtype.name} that does "
                        f"not match type {start.dtype.name} of argument 'start'.")
    num = op.attrs["num"]
    return [(start.dtype, TensorShape([num]))]


def _linspace_ref(op, start, stop):
    num = op.attrs["num"]
    return np.linspace(np.float64(start), np.float64(stop), num).astype(
        op.outputs[0].dtype.as_numpy_dtype)


def _lower_linspace(low, op, pos: int) -> None:
    """NumPy's linspace arithmetic in float64 at each position i (start + i * step, or
    start + i / div * delta when the step underflows to 0; the last element is stop), cast to
    the output dtype: the same bits as the reference, inlined into the consumer."""
    out = op.outputs[0]
    if low.is_fed(out):
        return
    num = int(op.attrs["num"])
    a, b = (low.expr(t) for t in op.inputs[:2])
    wide = [Apply(S.cast(X0), [e.expr], "float64", pos, True) for e in (a, b)]
    i = Apply(S.cast(X0), [Index(0)], "float64", pos, True)
    dt = out.dtype.name
    if num == 1:
        # div is 0: numpy multiplies by delta (0 * delta + start)
        expr = Apply(S.add(S.mul(X2, S.sub(X1, X0)), X0), wide + [i], dt, pos, True)
    else:
        div = Lit(float(num - 1), "float64")
        step = S.div(S.sub(X1, X0), X3)
        y = S.add(S.select(S.eq(step, 0.0), S.mul(S.div(X2, X3), S.sub(X1, X0)),
                           S.mul(X2, step)), X0)
        last = Lit(float(num - 1), "float64")
        expr = Apply(S.select(S.eq(X2, Arg(4)), X1, y), wide + [i, div, last], dt, pos, True,
                     "float64")
    low.place(out, Pending(expr, dt, (num == 1,), (1 if num == 1 else ("const", num),),
                           a.reads | b.reads, pos), pos)


register("LinSpace", infer=_linspace_infer, ref=_linspace_ref, differentiable=False,
         kind="other", lower=_lower_linspace, inline=(0, 1),
         lowerable=lambda op: int(op.attrs["num"]) >= 1
         and all(t.shape.ndims == 0 for t in op.inputs[:2]),
         examples=[Example(build=lambda a, b: linspace(a, b, 5), inputs=[(), ()],
                           expect=lambda a, b: np.linspace(a, b, 5))])


def linspace(start, stop, num, name: Optional[str] = None) -> Tensor:
    """`tf.linspace` / `tf.lin_space`: `num` evenly spaced values from start to stop."""
    static, dyn = _int_list_arg(num, "num")
    if dyn is not None:
        raise TypeError("linspace: `num` must be known when the graph is built")
    num = static[0]
    if num <= 0:
        raise ValueError(f"Requires num > 0: {num}")
    with name_scope(name, "LinSpace", [start, stop]) as scope:
        if isinstance(start, Tensor):
            a = start
            b = convert_to_tensor(stop, dtype=a.dtype, name="stop")
        else:
            b = convert_to_tensor(stop, name="stop") if isinstance(stop, Tensor) else None
            a = convert_to_tensor(start, dtype=b.dtype if b is not None else None,
                                  name="start")
            if b is None:
                b = convert_to_tensor(stop, dtype=a.dtype, name="stop")
        return make_op("LinSpace", [a, b], {"num": num}, name=scope).outputs[0]


lin_space = linspace


def _one_hot_infer(op):
    idx = op.inputs[0]
    if not idx.dtype.is_integer:
        raise TypeError(f"Value for attr 'TI' of {idx.dtype.name} is not in the list of "
                        "allowed values: uint8, int32, int64")
    on, off = op.inputs[1:]
    if on.dtype != off.dtype:
        raise TypeError(f"Input 'off_value' of 'OneHot' Op has type {off.dtype.name} that "
                        f"does not match type {on.dtype.name} of argument 'on_value'.")
    dims = idx.shape.as_tuple()
    if dims is None:
        return [(on.dtype, TensorShape(None))]
    axis = op.attrs["axis"]
    if not -1 <= axis <= len(dims):
        raise ValueError(f"Expected axis to be -1 or between [0, {len(dims)}).  But received: "
                         f"{axis}")
    dims = list(dims)
    dims.insert(len(dims) if axis == -1 else axis, op.attrs["depth"])
    return [(on.dtype, TensorShape(dims))]


def _one_hot_ref(op, idx, on, off):
    depth, axis = op.attrs["depth"], op.attrs["axis"]
    idx = np.asarray(idx)
    hot = idx[..., None] == np.arange(depth)
    out = np.where(hot, on, off).astype(op.outputs[0].dtype.as_numpy_dtype)
    if axis != -1 and axis != idx.ndim:
        out = np.moveaxis(out, -1, axis)
    return out


def _lower_one_hot(low, op, pos: int) -> None:
    """on if index == position along the new last axis else off (`ir.Index`)."""
    idx = low.value(op.inputs[0], pos)
    on = low.expr(op.inputs[1])
    off = low.expr(op.inputs[2])
    depth = int(op.attrs["depth"])
    r = idx.rank
    out = op.outputs[0]
    dtype = out.dtype.name
    ones = idx.ones + (depth == 1,)
    dims = idx.dims + (1 if depth == 1 else ("const", depth),)
    expr = Apply(S.select(S.eq(X0, X3), X1, X2),
                 [Load(idx, tuple(builtins.range(r))), on.expr, off.expr, Index(r)], dtype, pos)
    if low.is_fed(out):
        return
    low.place(out, Pending(expr, dtype, ones, dims, on.reads | off.reads, pos), pos)


def _one_hot_lowerable(op) -> bool:
    r = op.inputs[0].shape.ndims
    return (r is not None and op.attrs.get("axis") in (-1, r)
            and all(x.shape.ndims == 0 for x in op.inputs[1:]))


register("OneHot", infer=_one_hot_infer, ref=_one_hot_ref, differentiable=False, kind="other",
         lower=_lower_one_hot, lowerable=_one_hot_lowerable, inline=builtins.range(1, 1 << 16),
         examples=[Example(build=lambda i: one_hot(i, 4), inputs=[(5,)], dtypes=("int32",),
                           domain="index", index_max=4,
                           expect=lambda i: np.eye(4)[i]),
                   Example(build=lambda i: one_hot(i, 3, on_value=5, off_value=-1, axis=0),
                           inputs=[(2, 2)], dtypes=("int64",), domain="index",
                           expect=lambda i: np.moveaxis(np.where(np.eye(3)[i] > 0, 5, -1),
                                                        -1, 0), id="axis0")])


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None,
            name: Optional[str] = None) -> Tensor:
    """`tf.one_hot`: index `i` becomes a depth-`depth` vector with `on_value` at `i`.

    Out-of-range indices (including negative ones) give all-`off_value` rows.
    """
    static, dyn = _int_list_arg(depth, "depth")
    if dyn is not None:
        raise TypeError("one_hot: `depth` must be known when the graph is built")
    depth = static[0]
    with name_scope(name, "one_hot", [indices, on_value, off_value]) as scope:
        idx = convert_to_tensor(indices, name="indices")
        if dtype is None:
            for v in (on_value, off_value):
                if isinstance(v, Tensor):
                    dtype = v.dtype
                    break
            else:
                if on_value is not None or off_value is not None:
                    v = on_value if on_value is not None else off_value
                    dtype = convert_to_tensor(v).dtype if not isinstance(v, Tensor) else v.dtype
                else:
                    dtype = _dtypes.float32
        dtype = _dtypes.as_dtype(dtype)
        on = convert_to_tensor(1 if on_value is None else on_value, dtype=dtype,
                               name="on_value")
        off = convert_to_tensor(0 if off_value is None else off_value, dtype=dtype,
                                name="off_value")
        return make_op("OneHot", [idx, on, off],
                       {"depth": int(depth), "axis": -1 if axis is None else int(axis)},
                       name=scope).outputs[0]


def eye(num_rows, num_columns=None, batch_shape=None, dtype=_dtypes.float32,
        name: Optional[str] = None) -> Tensor:
    """`tf.eye`: an identity matrix (or a batch of them), built as a constant."""
    dtype = _dtypes.as_dtype(dtype)
    n = int(num_rows)
    m = n if num_columns is None else int(num_columns)
    arr = np.eye(n, m, dtype=dtype.as_numpy_dtype)
    if batch_shape is not None:
        bs = tuple(int(d) for d in batch_shape)
        arr = np.broadcast_to(arr, bs + (n, m))
    with name_scope(name, "eye") as scope:
        return constant(arr, dtype=dtype, name=scope)
