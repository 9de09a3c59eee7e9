"""Array ops: sources (constants, placeholders, fills, ranges), structure (identity, group) and
shape ops (reshape, transpose, concat, slicing, gather, tile, pad, ...).

Arguments that TF1 takes as tensors (a shape, multiples, begin/size) are stored as attributes
when their value is known at build time, so shape rules and code generators see plain ints.
Only when such an argument is a runtime tensor does it become an extra op input; each rule
reads it through `_args`, which takes the attribute if set and otherwise the next input.
"""
from __future__ import annotations

import builtins
from typing import Optional

import numpy as np

from jitflow import dtypes as _dtypes
from jitflow.compiler import lower as _lower
from jitflow.compiler.ir import (X0, X1, X2, X3, Alloc, Apply, Check, Const, CopyVar, DimValue,
                                 Index, Lit, Load, Region, S, Take, Value, View)
from jitflow.compiler.lower import (Pending, ShapeInfo, Unsupported, add_dims, const_dim,
                                    is_static, static_size)
from jitflow.graph import Tensor, convert_to_tensor, get_default_graph, make_op, name_scope
from jitflow.ops.registry import Example, register
from jitflow.shapes import Dimension, TensorShape, as_shape, shape_tf_str

__all__ = [
    "constant", "placeholder", "placeholder_with_default", "identity", "identity_n", "no_op",
    "group", "tuple_", "get_static_value", "zeros", "ones", "zeros_like", "ones_like", "fill",
    "range", "linspace", "lin_space", "one_hot", "eye", "shape", "shape_n", "size", "rank",
    "reshape", "transpose", "expand_dims", "squeeze", "concat", "stack", "pack", "unstack",
    "unpack", "split", "slice", "strided_slice", "gather", "gather_nd", "tile", "pad",
    "reverse", "reverse_v2", "broadcast_to", "boolean_mask", "newaxis", "scatter_nd",
    "unsorted_segment_sum", "sequence_mask", "meshgrid", "unique", "invert_permutation", "roll",
    "Print", "check_numerics", "verify_tensor_all_finite",
]
NAMESPACES = {"": [("tuple", "tuple_"), ("print", "print_")],
              "math": ["unsorted_segment_sum", "invert_permutation"],
              "linalg": ["eye"]}

newaxis = None


def _err(message: str, op=None):
    from jitflow.errors import InvalidArgumentError
    return InvalidArgumentError(None, op, message)


# -- build-time values of tensors ---------------------------------------------------------------
_FOLDABLE = {"Identity", "Pack", "StridedSlice", "Cast", "ConcatV2", "Reshape", "Slice",
             "GatherV2", "Add", "Sub", "Mul", "Range", "Fill", "ExpandDims", "Squeeze"}


def get_static_value(tensor) -> Optional[np.ndarray]:
    """The value of `tensor` when it is known at build time (TF1's `constant_value`), else None.

    Follows constants, the shape of fully defined tensors and a few small shape-arithmetic ops
    (at most 8 deep, so it never walks a long chain).
    """
    return _const(tensor, 8)


def _const(t, depth: int) -> Optional[np.ndarray]:
    if not isinstance(t, Tensor):
        if hasattr(t, "_to_tensor"):
            return None
        return np.asarray(t)
    op = t.op
    if op.type == "Const":
        return op.attrs["value"]
    npd = t.dtype.as_numpy_dtype if t.dtype.is_numpy_compatible else None
    if op.type == "Shape" and op.inputs[0].shape.is_fully_defined():
        return np.array(op.inputs[0].shape.as_list(), dtype=npd)
    if op.type == "Size" and op.inputs[0].shape.is_fully_defined():
        return np.array(op.inputs[0].shape.num_elements(), dtype=npd)
    if op.type == "Rank" and op.inputs[0].shape.ndims is not None:
        return np.array(op.inputs[0].shape.ndims, dtype=npd)
    if op.type == "ShapeN" and op.inputs[t.value_index].shape.is_fully_defined():
        return np.array(op.inputs[t.value_index].shape.as_list(), dtype=npd)
    if op.type in _FOLDABLE and depth > 0 and len(op.outputs) == 1:
        vals = [_const(x, depth - 1) for x in op.inputs]
        if any(v is None for v in vals):
            return None
        try:
            return np.asarray(op.op_def.ref(op, *vals), dtype=npd)
        except Exception:  # noqa: BLE001  (a runtime error stays a runtime error)
            return None
    return None


def _partial_shape(t: Tensor) -> TensorShape:
    """The shape a 1-D int tensor describes, with None for the elements unknown at build time."""
    v = _const(t, 8)
    if v is not None:
        return TensorShape([None if d < 0 else int(d) for d in np.reshape(v, -1)])
    op = t.op
    if op.type == "Shape":
        return op.inputs[0].shape
    if op.type == "Pack" and op.attrs.get("axis", 0) == 0:
        dims = []
        for x in op.inputs:
            c = _const(x, 8)
            dims.append(None if c is None or int(c) < 0 else int(c))
        return TensorShape(dims)
    if op.type == "ConcatV2":
        out = TensorShape([])
        for x in op.inputs:
            out = out.concatenate(_partial_shape(x))
        return out
    n = t.shape.as_tuple()
    if n is None or len(n) != 1 or n[0] is None:
        return TensorShape(None)
    return TensorShape([None] * n[0])


def _int_list_arg(value, what: str):
    """A shape-like argument: (static tuple of ints, None) or (None, int32/int64 tensor)."""
    if isinstance(value, TensorShape):
        value = value.as_list()
    if isinstance(value, (list, tuple)):
        value = [v.value if isinstance(v, Dimension) else v for v in value]
        if any(v is None for v in value):
            raise ValueError(f"{what} has an unknown dimension: {value!r}")
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) or hasattr(v, "_to_tensor")
                                                for v in value):
        value = _packed(list(value))
    if isinstance(value, Tensor) or hasattr(value, "_to_tensor"):
        t = convert_to_tensor(value)
        c = _const(t, 8)
        if c is not None:
            return tuple(int(d) for d in np.reshape(c, -1)), None
        if not t.dtype.is_integer:
            raise TypeError(f"{what} must be an int32 or int64 tensor, got {t.dtype.name}")
        return None, t
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        if not np.all(arr == np.floor(arr)):
            raise TypeError(f"{what} must be integers, got {value!r}")
    if arr.dtype.kind not in "iuf" and arr.size:
        raise TypeError(f"{what} must be integers, got {value!r}")
    return tuple(int(d) for d in arr.reshape(-1)), None


def _autopack(values, dtype, name: str) -> Tensor:
    """A (nested) list holding tensors as one tensor (`tf.stack` of the rows, op "packed");
    Python numbers take the dtype of the tensors beside them."""
    def first_dtype(v):
        for e in v:
            if isinstance(e, (list, tuple)):
                d = first_dtype(e)
                if d is not None:
                    return d
            elif isinstance(e, Tensor) or hasattr(e, "_to_tensor"):
                return convert_to_tensor(e).dtype
        return None
    dt = dtype if dtype is not None else first_dtype(values)

    def pack(v):
        return stack([pack(e) if isinstance(e, (list, tuple)) else convert_to_tensor(e, dt)
                      for e in v])
    with name_scope(None, name) as scope:
        rows = [pack(e) if isinstance(e, (list, tuple)) else convert_to_tensor(e, dt)
                for e in values]
        return stack(rows, name=scope)


def _args(op, dyn, *keys):
    """The values of `keys`: the attribute when static, else the next dynamic input's value."""
    out = []
    it = iter(dyn)
    for k in keys:
        v = op.attrs.get(k)
        if v is None:
            v = tuple(int(d) for d in np.reshape(next(it), -1))
        out.append(v)
    return out


def _shape_of(op, key: str, index: int) -> TensorShape:
    """A shape argument's static view: the attr, or the partial value of input `index`."""
    v = op.attrs.get(key)
    if v is not None:
        return TensorShape(v)
    return _partial_shape(op.inputs[index])


def _tf_shape(shape) -> str:
    return shape_tf_str(shape)


def _norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for a tensor of rank {rank} "
                         f"(must be in [{-rank}, {rank}))")
    return axis % rank if rank else 0


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
    if dtype is not None:
        dtype = _dtypes.as_dtype(dtype)
        src = np.asarray(value)
        if src.dtype.kind == "f" and dtype.is_integer and np.any(src != np.floor(src)):
            raise TypeError(f"Expected {dtype.name}, got {value!r} of type "
                            f"'{type(value).__name__}' instead.")
        arr = np.asarray(src, dtype=dtype.as_numpy_dtype)
    else:
        from jitflow.graph import _infer_numpy
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
    from jitflow.errors import InvalidArgumentError
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


# -- Identity, IdentityN, NoOp, group, tuple ---------------------------------------------------
def _identity_ref(op, x):
    # Identity of a variable (`w/read`) returns a snapshot the caller can keep.
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


register("Identity", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_identity_ref, grad=lambda op, g: [g], kind="elementwise", scalar=X0,
         examples=[Example(build=lambda x: identity(x), inputs=[(2, 3)], expect=lambda x: x)])


def identity(input, name: Optional[str] = None) -> Tensor:
    """`tf.identity`."""
    x = convert_to_tensor(input)
    return make_op("Identity", [x], name=name).outputs[0]


register("IdentityN", infer=lambda op: [(t.dtype, t.shape) for t in op.inputs],
         ref=lambda op, *xs: tuple(_identity_ref(op, x) for x in xs),
         grad=lambda op, *gs: list(gs), kind="other",
         examples=[Example(build=lambda x, y: identity_n([x, y])[1] * 2.0,
                           inputs=[(2,), (3,)], expect=lambda x, y: y * 2)])


def identity_n(input, name: Optional[str] = None) -> list:
    """`tf.identity_n`: identities of a list of tensors (one op, one output each)."""
    xs = [convert_to_tensor(x) for x in input]
    return list(make_op("IdentityN", xs, name=name).outputs)


register("NoOp", infer=lambda op: [], ref=lambda op: (), differentiable=False, kind="other",
         lower=_lower.computes_nothing)


def no_op(name: Optional[str] = None):
    """An op that does nothing; useful as a target with control inputs."""
    return get_default_graph().create_op("NoOp", [], name=name)


def group(*inputs, name: Optional[str] = None):
    """An op that runs all `inputs` (tensors or ops) and produces nothing."""
    ops = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            ops.extend(x)
        elif isinstance(x, dict):
            ops.extend(x.values())
        else:
            ops.append(x)
    g = get_default_graph()
    with name_scope(name, "group_deps") as scope:
        with g.control_dependencies(ops):
            return g.create_op("NoOp", [], name=scope)


def tuple_(tensors, name: Optional[str] = None, control_inputs=None) -> list:
    """`tf.tuple`: identities of `tensors` that are available only once all of them are."""
    tensors = [convert_to_tensor(t) if t is not None else None for t in tensors]
    with name_scope(name, "tuple") as scope:
        gate = group(*[t for t in tensors if t is not None], *(control_inputs or []))
        with get_default_graph().control_dependencies([gate]):
            return [identity(t, name=f"{scope}control_dependency") if t is not None else None
                    for t in tensors]


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
        if inf is None:
            raise Unsupported("fill to a computed shape")
        ones, dims = inf.ones, inf.dims
    low.place(out, Pending(expr, dtype, ones, dims, reads, pos), pos)


def _fill_lowerable(op) -> bool:
    return op.inputs[0].shape.ndims == 0 and (
        op.attrs.get("dims") is not None or op.inputs[1].op.type == "Shape"
        and op.inputs[1].op.inputs[0].shape.ndims is not None)


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
    from jitflow.ops.math import unbroadcast
    return unbroadcast(g, x)


def fill(dims, value, name: Optional[str] = None) -> Tensor:
    """`tf.fill`: a tensor of shape `dims` with every element `value` (op `Fill`)."""
    static, dyn = _int_list_arg(dims, "dims")
    with name_scope(name, "Fill", [value]) as scope:
        v = convert_to_tensor(value, name="value")
        inputs = [v] + ([dyn] if dyn is not None else [])
        return make_op("Fill", inputs, {"dims": static}, name=scope).outputs[0]


def _filled(shape_arg, dtype, value, name, default_name) -> Tensor:
    dtype = _dtypes.as_dtype(dtype)
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


register("ZerosLike", infer=_like_infer,
         ref=lambda op, x: np.zeros(np.shape(x), op.attrs["dtype"].as_numpy_dtype),
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
        from jitflow.ops.math import cast
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


register("LinSpace", infer=_linspace_infer, ref=_linspace_ref, differentiable=False,
         kind="other",
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
         lower=_lower_shape, lowerable=lambda op: _ranked(op.inputs[0]), shape_only=(0,),
         inline=True,
         ref=lambda op, x: np.array(np.shape(x), op.attrs["out_type"].as_numpy_dtype),
         differentiable=False, kind="shape",
         examples=[Example(build=lambda x: shape(x), inputs=[(2, 3)],
                           expect=lambda x: np.array([2, 3]))])
register("ShapeN", infer=lambda op: [(op.attrs["out_type"], TensorShape([t.shape.ndims]))
                                     for t in op.inputs],
         lower=_lower_size_rank, lowerable=lambda op: _ranked(*op.inputs),
         shape_only=builtins.range(1 << 16),
         ref=lambda op, *xs: tuple(np.array(np.shape(x), op.attrs["out_type"].as_numpy_dtype)
                                   for x in xs),
         differentiable=False, kind="shape",
         examples=[Example(build=lambda x, y: shape_n([x, y])[1], inputs=[(2,), (4, 1)],
                           expect=lambda x, y: np.array([4, 1]))])
register("Size", infer=lambda op: [(op.attrs["out_type"], TensorShape([]))],
         lower=_lower_size_rank, lowerable=lambda op: _ranked(*op.inputs), shape_only=(0,),
         ref=lambda op, x: np.array(np.size(x), op.attrs["out_type"].as_numpy_dtype),
         differentiable=False, kind="shape",
         examples=[Example(build=lambda x: size(x), inputs=[(2, 3)], expect=lambda x: 6)])
register("Rank", infer=lambda op: [(_dtypes.int32, TensorShape([]))],
         lower=_lower_size_rank, lowerable=lambda op: _ranked(*op.inputs), shape_only=(0,),
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


def _lower_view(low, op, pos: int) -> None:
    """Reshape, ExpandDims, Squeeze: the stored input with other dims (`ir.View`)."""
    src = low.value(op.inputs[0], pos)
    if src.rank == 0:
        raise Unsupported("view of a scalar")
    if src.kind == "var":
        c = low.buf(src.dtype, src.ones, src.dims)
        low.emit(CopyVar(c, src, pos))
        src = c
    r = src.rank
    if op.type == "ExpandDims":
        a = op.attrs["axis"]
        a = a if a >= 0 else a + r + 1
        ones = src.ones[:a] + (True,) + src.ones[a:]
        dims = src.dims[:a] + (1,) + src.dims[a:]
    elif op.type == "Squeeze":
        axes = op.attrs["squeeze_dims"]
        if not axes:
            axes = [k for k in builtins.range(r) if src.ones[k]]
        axes = {a % r for a in axes}
        if any(not src.ones[a] for a in axes):
            raise Unsupported("squeeze of a dimension that is not 1")
        ones = tuple(o for k, o in enumerate(src.ones) if k not in axes)
        dims = tuple(d for k, d in enumerate(src.dims) if k not in axes)
    elif len(op.inputs) == 2:
        inf = low.shape_info(op.inputs[1])
        if inf is None:
            raise Unsupported("reshape to a computed shape")
        dims, ones = inf.dims, inf.ones
        if dims != src.dims:
            low.checks.append(Check(("prod", src.dims), ("prod", dims), pos,
                                    "Input to reshape has the wrong number of values"))
    else:
        want = [int(d) for d in op.attrs["shape"]]
        known = 1
        for d in want:
            if d != -1:
                known *= d
        if want.count(-1) > 1 or known == 0 and -1 in want:
            raise Unsupported("reshape target")
        if -1 in want:
            low.checks.append(Check(("mod", src.dims, known), ("const", 0), pos,
                                    "Input to reshape has a size that does not divide"))
            static = op.outputs[0].shape.as_tuple() or (None,) * len(want)
            # a -1 that static shapes already know to be 1 is a unit dim of the class
            if any(d == -1 and static[k] == 1 for k, d in enumerate(want)):
                want = [1 if d == -1 else d for d in want]
                low.checks.append(Check(("prod", src.dims), ("const", known), pos,
                                        "Input to reshape has the wrong number of values"))
            dims = tuple(("div", src.dims, known) if d == -1 else (1 if d == 1 else
                                                                   ("const", d))
                         for d in want)
        else:
            low.checks.append(Check(("prod", src.dims), ("const", known), pos,
                                    "Input to reshape has the wrong number of values"))
            dims = tuple(1 if d == 1 else ("const", d) for d in want)
        ones = tuple(d == 1 for d in want)
    out = op.outputs[0]
    if low.is_fed(out):
        return
    v = low.buf(src.dtype, ones, dims)
    v.view = True
    low.emit(View(v, src, pos))
    low.set(out, v)


def _view_lowerable(op) -> bool:
    r = op.inputs[0].shape.ndims
    ro = op.outputs[0].shape.ndims
    if r is None or ro is None or r == 0 or ro == 0:
        return False
    if op.type == "Reshape":
        if len(op.inputs) == 2:
            return op.inputs[1].op.type == "Shape" and _lower.supported(op.inputs[1].op)
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
    if perm is None:
        return [transpose(g)]
    n = len(perm)
    inv = [0] * n
    for i, p in enumerate(perm):
        inv[p % n] = i
    return [transpose(g, inv)]


def _lower_transpose(low, op, pos: int) -> None:
    """A load of the stored input with permuted loop axes (`Load.axes`), inlined."""
    src = low.value(op.inputs[0], pos)
    r = src.rank
    perm = op.attrs.get("perm")
    perm = tuple(builtins.range(r - 1, -1, -1)) if perm is None else tuple(int(p) % r for p in perm)
    inv = [0] * r
    for j, p in enumerate(perm):
        inv[p] = j
    ones = tuple(src.ones[p] for p in perm)
    dims = tuple(src.dims[p] for p in perm)
    out = op.outputs[0]
    if low.is_fed(out):
        return
    low.place(out, Pending(Load(src, tuple(inv)), src.dtype, ones, dims, low.reads_of(src),
                           pos), pos)


def _transpose_lowerable(op) -> bool:
    r = op.inputs[0].shape.ndims
    ro = op.outputs[0].shape.ndims
    return r is not None and ro is not None and r != 0 and ro != 0 and len(op.inputs) == 1


register("Transpose", infer=_transpose_infer,
         lower=_lower_transpose, lowerable=_transpose_lowerable,
         ref=lambda op, x: np.transpose(x, _perm_of(op, np.ndim(x))),
         grad=_transpose_grad, kind="other",
         examples=[Example(build=lambda x: transpose(x), inputs=[(2, 3, 4)],
                           expect=lambda x: x.transpose()),
                   Example(build=lambda x: transpose(x, [1, 2, 0]), inputs=[(2, 3, 4)],
                           expect=lambda x: x.transpose(1, 2, 0), id="perm")])


def transpose(a, perm=None, name: str = "transpose", conjugate: bool = False) -> Tensor:
    """`tf.transpose`: permute dimensions (default: reversed); `conjugate` is a no-op for the
    real dtypes jitflow supports."""
    x = convert_to_tensor(a)
    if perm is not None:
        static, dyn = _int_list_arg(perm, "perm")
        if dyn is not None:
            raise TypeError("transpose: `perm` must be known when the graph is built")
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


# -- ConcatV2, Pack, Unpack, Split ---------------------------------------------------------------
def _concat_infer(op):
    xs = op.inputs
    axis = op.attrs["axis"]
    dtype = xs[0].dtype
    rank_ = None
    for t in xs:
        if t.dtype != dtype:
            raise TypeError(f"ConcatOp: expected all inputs of type {dtype.name}, got "
                            f"{t.dtype.name} for '{op.name}'")
        if t.shape.ndims is not None:
            rank_ = t.shape.ndims
    if rank_ is None:
        return [(dtype, TensorShape(None))]
    if rank_ == 0:
        raise ValueError(f"Can't concatenate scalars (use tf.stack instead) for '{op.name}' "
                         f"(op: 'ConcatV2')")
    a = _norm_axis(axis, rank_)
    out = [None] * rank_
    total = 0
    for t in xs:
        dims = t.shape.as_tuple()
        if dims is None:
            total = None
            continue
        if len(dims) != rank_:
            raise ValueError(f"Shape must be rank {rank_} but is rank {len(dims)} for "
                             f"'{op.name}' (op: 'ConcatV2') with input shapes: "
                             + ", ".join(_tf_shape(s.shape) for s in xs) + ".")
        for i, d in enumerate(dims):
            if i == a:
                continue
            if out[i] is not None and d is not None and out[i] != d:
                raise ValueError(f"Dimension {i} in both shapes must be equal, but are "
                                 f"{out[i]} and {d}. Shapes are "
                                 f"{_tf_shape(xs[0].shape)} and {_tf_shape(t.shape)}. for "
                                 f"'{op.name}' (op: 'ConcatV2')")
            out[i] = d if out[i] is None else out[i]
        if total is not None:
            total = None if dims[a] is None else total + dims[a]
    out[a] = total
    return [(dtype, TensorShape(out))]


def _concat_ref(op, *xs):
    try:
        return np.concatenate(xs, axis=op.attrs["axis"])
    except ValueError as e:
        raise _err(f"ConcatOp : {e}", op) from None


def _join(low, op, pos: int, axis: int, new_axis: bool) -> None:
    """ConcatV2 (new_axis False) and Pack (True): one region store per input."""
    out = op.outputs[0]
    if low.is_fed(out):
        return
    parts = [low.expr(t) for t in op.inputs]
    r0 = len(parts[0][2])
    r = r0 + 1 if new_axis else r0
    a = axis % r
    dtype = out.dtype.name
    ones, dims = list(parts[0][2]), list(parts[0][3])
    for p in parts[1:]:
        if len(p[2]) != r0:
            raise Unsupported("join of different ranks")
        for k in builtins.range(r0):
            if k == a and not new_axis:
                continue
            if p[3][k] != dims[k]:
                low.checks.append(Check(dims[k], p[3][k], pos, "Dimensions of inputs should "
                                        "match"))
    offsets = []
    if new_axis:
        offsets = [("const", i) for i in builtins.range(len(parts))]
        ones.insert(a, len(parts) == 1)
        dims.insert(a, const_dim(len(parts)))
    else:
        total = ("const", 0)
        for p in parts:
            offsets.append(total)
            total = add_dims(total, p[3][a])
        ones[a] = total == 1
        dims[a] = total
    v = low.buf(dtype, *low.refine(out, tuple(ones), tuple(dims)))
    low.emit(Alloc(v, None, pos))
    for p, off in zip(parts, offsets):
        items = []
        for k in builtins.range(r):
            if new_axis and k == a:
                items.append(("fixed", off))
                continue
            kp = k - 1 if new_axis and k > a else k
            start = off if (k == a and not new_axis) else ("const", 0)
            if p[2][kp]:
                items.append(("fixed", start))
            else:
                items.append(("lin", start, 1, kp))
        low.emit(Region(v, p[0], p[3], p[2], tuple(items), "set", pos))
    low.set(out, v)


def _lower_concat(low, op, pos: int) -> None:
    _join(low, op, pos, op.attrs["axis"], False)


def _lower_pack(low, op, pos: int) -> None:
    _join(low, op, pos, op.attrs["axis"], True)


def _lower_unpack(low, op, pos: int) -> None:
    src = low.stored(op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    num = int(op.attrs["num"])
    low.check_equal(src.dims[a], const_dim(num), pos, "Input shape axis must equal num")
    ones = src.ones[:a] + src.ones[a + 1:]
    dims = src.dims[:a] + src.dims[a + 1:]
    for j, out in enumerate(op.outputs):
        if low.is_fed(out):
            continue
        items = []
        for k in builtins.range(r):
            if k == a:
                items.append(("fixed", ("const", j if not src.ones[a] else 0)))
            elif src.ones[k]:
                items.append(("fixed", ("const", 0)))
            else:
                items.append(("lin", ("const", 0), 1, k if k < a else k - 1))
        o1, d1 = low.refine(out, ones, dims)
        low.place(out, Pending(Take(src, tuple(items)), src.dtype, o1, d1, low.reads_of(src), pos),
                   pos)


def _lower_split(low, op, pos: int) -> None:
    src = low.stored(op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    d = src.dims[a]
    sizes = list(op.attrs["sizes"])
    what = "Determined shape must match input shape along split_dim"
    if op.attrs["even"]:
        n = len(sizes)
        if is_static(d):
            if static_size(d) % n:
                low.checks.append(Check(1, ("const", 0), pos, what))
            sizes = [const_dim(static_size(d) // n) if static_size(d) // n else ("const", 0)] * n
        else:
            low.checks.append(Check(("mod", (d,), n), ("const", 0), pos, what))
            sizes = [("div", (d,), n) if n > 1 else d] * n
    else:
        known = sum(s for s in sizes if s != -1)
        if -1 in sizes:
            rest = (const_dim(static_size(d) - known) if is_static(d) and static_size(d) - known > 0
                    else ("arith", "-", d, ("const", known)))
            low.check_in_range(("const", 0), ("const", known), ("arith", "+", d, ("const", 1)),
                      pos, what)
        else:
            rest = None
            low.check_equal(d, const_dim(known), pos, what)
        sizes = [rest if s == -1 else (const_dim(s) if s else ("const", 0)) for s in sizes]
    start = ("const", 0)
    for out, s in zip(op.outputs, sizes):
        if not low.is_fed(out):
            items = []
            for k in builtins.range(r):
                if src.ones[k]:
                    items.append(("fixed", ("const", 0)))
                else:
                    items.append(("lin", start if k == a else ("const", 0), 1, k))
            ones = tuple(s == 1 if k == a else src.ones[k] for k in builtins.range(r))
            dims = tuple(s if k == a else src.dims[k] for k in builtins.range(r))
            ones, dims = low.refine(out, ones, dims)
            low.place(out, Pending(Take(src, tuple(items)), src.dtype, ones, dims,
                                    low.reads_of(src), pos), pos)
        start = add_dims(start, s)


def _lower_concat_grad_slice(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    i = op.attrs["index"]
    shapes = [low.expr(t, shape_only=True) for t in op.inputs[1:]]
    start = ("const", 0)
    for p in shapes[:i]:
        start = add_dims(start, p[3][a])
    _, _, ones, dims, _ = shapes[i]
    total = start
    for p in shapes[i:]:
        total = add_dims(total, p[3][a])
    low.check_equal(src.dims[a], total, pos, "Incompatible shapes")
    ones, dims = low.refine(out, ones, dims)
    items = []
    for k in builtins.range(r):
        if src.ones[k]:
            items.append(("fixed", ("const", 0)))
        else:
            items.append(("lin", start if k == a else ("const", 0), 1, k))
    low.place(out, Pending(Take(src, tuple(items)), src.dtype, ones, dims, low.reads_of(src), pos),
               pos)


def _sup_join(op) -> bool:
    return _ranked(*op.inputs) and len(op.inputs) > 0 and (
        op.type == "Pack" or op.inputs[0].shape.ndims > 0)


def _sup_unary(op) -> bool:
    return len(op.inputs) == 1 and _ranked(op.inputs[0]) and op.inputs[0].shape.ndims > 0


register("ConcatGradSlice",
         lower=_lower_concat_grad_slice, lowerable=lambda op: _ranked(*op.inputs),
         shape_only=builtins.range(1, 1 << 16),
         infer=lambda op: [(op.inputs[0].dtype, op.inputs[1 + op.attrs["index"]].shape)],
         ref=lambda op, g, *xs: _concat_grad_slice(op, g, xs),
         grad=lambda op, g: [None] * len(op.inputs), differentiable=False, kind="other",
         doc="The part of a ConcatV2 gradient belonging to input `index` (inputs give sizes).")


def _concat_grad_slice(op, g, xs):
    a = op.attrs["axis"] % np.ndim(g)
    i = op.attrs["index"]
    start = sum(np.shape(x)[a] for x in xs[:i])
    idx = [np.s_[:]] * np.ndim(g)
    idx[a] = np.s_[start:start + np.shape(xs[i])[a]]
    return np.array(np.asarray(g)[tuple(idx)])


def _concat_grad(op, g):
    axis = op.attrs["axis"]
    xs = op.inputs
    sizes = [t.shape[axis % t.shape.ndims].value if t.shape.ndims else None for t in xs]
    if all(s is not None for s in sizes) and g.shape.ndims is not None:
        return list(split(g, sizes, axis=axis))
    return [make_op("ConcatGradSlice", [g, *xs], {"axis": axis, "index": i}).outputs[0]
            for i in builtins.range(len(xs))]


register("ConcatV2", infer=_concat_infer, ref=_concat_ref, grad=_concat_grad, kind="other",
         lower=_lower_concat, lowerable=_sup_join, inline=True,
         examples=[Example(build=lambda x, y: concat([x, y], 1), inputs=[(2, 3), (2, 1)],
                           expect=lambda x, y: np.concatenate([x, y], 1)),
                   Example(build=lambda x, y: concat([x, y, x], -1), inputs=[(2,), (1,)],
                           expect=lambda x, y: np.concatenate([x, y, x]), id="three")])


def concat(values, axis, name: str = "concat") -> Tensor:
    """`tf.concat(values, axis)`: join tensors along an existing axis."""
    if isinstance(axis, (list, tuple)) and not isinstance(values, (list, tuple)):
        raise TypeError("tf.concat takes (values, axis): the argument order changed in "
                        f"TensorFlow 1.0; got values={values!r} and axis={axis!r}")
    if not isinstance(values, (list, tuple)):
        values = [values]
    static, dyn = _int_list_arg(axis, "axis")
    if dyn is not None or len(static) != 1:
        raise TypeError("concat: `axis` must be a single int known at build time")
    with name_scope(name, "concat", list(values)) as scope:
        xs = [convert_to_tensor(v) for v in values]
        if len(xs) == 1:
            r = xs[0].shape.ndims
            if r is not None:
                _norm_axis(static[0], r)
            return identity(xs[0], name=scope)
        return make_op("ConcatV2", xs, {"axis": static[0]}, name=scope).outputs[0]


def _pack_infer(op):
    xs = op.inputs
    dtype = xs[0].dtype
    sh = TensorShape(None)
    for t in xs:
        if t.dtype != dtype:
            raise TypeError(f"Pack: expected all inputs of type {dtype.name}, got "
                            f"{t.dtype.name} for '{op.name}'")
        if not sh.is_compatible_with(t.shape):
            raise ValueError(f"Shapes must be equal rank, but are {sh.ndims} and "
                             f"{t.shape.ndims}; From merging shape 0 with other shapes. for "
                             f"'{op.name}' (op: 'Pack') with input shapes: "
                             + ", ".join(_tf_shape(s.shape) for s in xs) + ".")
        sh = sh.merge_with(t.shape)
    if sh.ndims is None:
        return [(dtype, TensorShape(None))]
    r = sh.ndims + 1
    a = _norm_axis(op.attrs["axis"], r)
    dims = list(sh.as_tuple())
    dims.insert(a, len(xs))
    return [(dtype, TensorShape(dims))]


register("Pack", infer=_pack_infer,
         lower=_lower_pack, lowerable=_sup_join, inline=True,
         ref=lambda op, *xs: np.stack(xs, axis=op.attrs["axis"]),
         grad=lambda op, g: unstack(g, num=len(op.inputs), axis=op.attrs["axis"]),
         kind="other",
         examples=[Example(build=lambda x, y: stack([x, y]), inputs=[(2, 3), (2, 3)],
                           expect=lambda x, y: np.stack([x, y])),
                   Example(build=lambda x, y: stack([x, y, x], axis=-1), inputs=[(2,), (2,)],
                           expect=lambda x, y: np.stack([x, y, x], -1), id="last")])


def stack(values, axis: int = 0, name: str = "stack") -> Tensor:
    """`tf.stack` (formerly `tf.pack`): join tensors along a new axis (op `Pack`)."""
    with name_scope(name, "stack", list(values)) as scope:
        xs = [convert_to_tensor(v) for v in values]
        dt = next((x.dtype for x in xs if x.op.type != "Const"), xs[0].dtype if xs else None)
        xs = [x if x.dtype == dt or x.op.type != "Const" else
              constant(x.op.attrs["value"], dtype=dt) for x in xs]
        return make_op("Pack", xs, {"axis": int(axis)}, name=scope).outputs[0]


pack = stack


def _unpack_infer(op):
    x = op.inputs[0]
    dims = x.shape.as_tuple()
    num = op.attrs["num"]
    if dims is None:
        return [(x.dtype, TensorShape(None))] * num
    a = _norm_axis(op.attrs["axis"], len(dims))
    if dims[a] is not None and dims[a] != num:
        raise ValueError(f"Dimension {a} must be {num} but is {dims[a]}")
    rest = TensorShape(dims[:a] + dims[a + 1:])
    return [(x.dtype, rest)] * num


def _unpack_ref(op, x):
    x = np.asarray(x)
    a = op.attrs["axis"]
    if x.shape[a] != op.attrs["num"]:
        raise _err(f"Input shape axis {a} must equal {op.attrs['num']}, got shape "
                   f"{list(x.shape)}", op)
    return tuple(np.array(v) for v in np.moveaxis(x, a, 0))


def _fill_missing(grads, outputs):
    return [g if g is not None else zeros_like(o) for g, o in zip(grads, outputs)]


register("Unpack", infer=_unpack_infer, ref=_unpack_ref,
         lower=_lower_unpack, lowerable=_sup_unary,
         grad=lambda op, *gs: [stack(_fill_missing(gs, op.outputs), axis=op.attrs["axis"])],
         kind="other",
         examples=[Example(build=lambda x: unstack(x)[1], inputs=[(3, 2)],
                           expect=lambda x: x[1]),
                   Example(build=lambda x: unstack(x, axis=1)[0] * unstack(x, axis=1)[2],
                           inputs=[(2, 3)], expect=lambda x: x[:, 0] * x[:, 2], id="axis1")])


def unstack(value, num: Optional[int] = None, axis: int = 0, name: str = "unstack") -> list:
    """`tf.unstack` (formerly `tf.unpack`): split along `axis` into rank-(R-1) tensors."""
    x = convert_to_tensor(value)
    if num is None:
        dims = x.shape.as_tuple()
        if dims is None:
            raise ValueError(f"Cannot infer num from shape {x.shape}")
        num = dims[_norm_axis(axis, len(dims))]
        if num is None:
            raise ValueError(f"Cannot infer num from shape {x.shape}")
    return list(make_op("Unpack", [x], {"num": int(num), "axis": int(axis)},
                        name=name).outputs)


unpack = unstack


def _split_infer(op):
    x = op.inputs[0]
    sizes = op.attrs["sizes"]
    dims = x.shape.as_tuple()
    if dims is None:
        return [(x.dtype, TensorShape(None))] * len(sizes)
    a = _norm_axis(op.attrs["axis"], len(dims))
    d = dims[a]
    sizes = list(sizes)
    if op.attrs["even"]:
        n = len(sizes)
        if d is not None:
            if d % n:
                raise ValueError(f"Dimension size must be evenly divisible by {n} but is {d} "
                                 f"for '{op.name}' (op: 'Split') with input shapes: [], "
                                 f"{_tf_shape(x.shape)}.")
            sizes = [d // n] * n
        else:
            sizes = [None] * n
    else:
        if sizes.count(-1) > 1:
            raise ValueError(f"Cannot infer split sizes for '{op.name}': only one size may be "
                             "-1")
        known = sum(s for s in sizes if s != -1)
        if d is not None:
            if -1 in sizes:
                if known > d:
                    raise ValueError(f"Determined shape must either match input shape along "
                                     f"split_dim exactly if fully specified, or be less than "
                                     f"the size of the input along split_dim if not fully "
                                     f"specified.  Got: {known}")
                sizes[sizes.index(-1)] = d - known
            elif known != d:
                raise ValueError(f"Determined shape must either match input shape along "
                                 f"split_dim exactly if fully specified, or be less than the "
                                 f"size of the input along split_dim if not fully specified.  "
                                 f"Got: {known}")
        else:
            sizes = [None if s == -1 else s for s in sizes]
    out = []
    for s in sizes:
        dd = list(dims)
        dd[a] = s
        out.append((x.dtype, TensorShape(dd)))
    return out


def _split_ref(op, x):
    x = np.asarray(x)
    a = op.attrs["axis"] % x.ndim
    d = x.shape[a]
    sizes = list(op.attrs["sizes"])
    if op.attrs["even"]:
        n = len(sizes)
        if d % n:
            raise _err(f"Number of ways to split should evenly divide the split dimension, but "
                       f"got split_dim {a} (size = {d}) and num_split {n}", op)
        sizes = [d // n] * n
    elif -1 in sizes:
        sizes[sizes.index(-1)] = d - sum(s for s in sizes if s != -1)
    if sum(sizes) != d or min(sizes) < 0:
        raise _err(f"Determined shape must either match input shape along split_dim exactly if "
                   f"fully specified, or be less than the size of the input along split_dim "
                   f"if not fully specified.  Got: {sum(sizes)}", op)
    cuts = np.cumsum(sizes)[:-1]
    return tuple(np.array(p) for p in np.split(x, cuts, axis=a))


register("Split", infer=_split_infer, ref=_split_ref,
         lower=_lower_split, lowerable=_sup_unary,
         grad=lambda op, *gs: [concat(_fill_missing(gs, op.outputs), op.attrs["axis"])],
         kind="other",
         examples=[Example(build=lambda x: split(x, 3, axis=1)[2], inputs=[(2, 6)],
                           expect=lambda x: x[:, 4:]),
                   Example(build=lambda x: split(x, [1, -1, 2])[1], inputs=[(6, 2)],
                           expect=lambda x: x[1:4], id="sizes")])


def split(value, num_or_size_splits, axis=0, num: Optional[int] = None,
          name: str = "split") -> list:
    """`tf.split`: an int splits evenly (op `Split`), a list gives sizes (one may be -1)."""
    x = convert_to_tensor(value)
    static_axis, dyn = _int_list_arg(axis, "axis")
    if dyn is not None or len(static_axis) != 1:
        raise TypeError("split: `axis` must be a single int known at build time")
    axis = static_axis[0]
    if isinstance(num_or_size_splits, int) or np.ndim(num_or_size_splits) == 0 and not \
            isinstance(num_or_size_splits, Tensor):
        n = int(num_or_size_splits)
        if n <= 0:
            raise ValueError(f"num_or_size_splits must be positive, got {n}")
        attrs = {"sizes": (0,) * n, "even": True, "axis": axis}
    else:
        sizes, dyn = _int_list_arg(num_or_size_splits, "num_or_size_splits")
        if dyn is not None:
            raise TypeError("split: sizes must be known when the graph is built")
        if num is not None and num != len(sizes):
            raise ValueError(f"num={num} does not match {len(sizes)} split sizes")
        attrs = {"sizes": tuple(sizes), "even": False, "axis": axis}
    return list(make_op("Split", [x], attrs, name=name).outputs)


# -- Slice ----------------------------------------------------------------------------------------
def _slice_bounds(begin, size_, dims):
    out = []
    for b, s, d in zip(begin, size_, dims):
        if d is None:
            out.append(None if s == -1 else s)
            continue
        if b < 0 or b > d:
            raise ValueError(f"Expected begin[{len(out)}] in [0, {d}], but got {b}")
        e = d if s == -1 else b + s
        if s < -1 or e > d:
            raise ValueError(f"Expected size[{len(out)}] in [0, {d - b}], but got {s}")
        out.append(e - b)
    return out


def _slice_infer(op):
    x = op.inputs[0]
    dims = x.shape.as_tuple()
    begin = op.attrs["begin"]
    size_ = op.attrs["size"]
    n = len(begin) if begin is not None else (len(size_) if size_ is not None else None)
    if dims is None:
        return [(x.dtype, TensorShape(None if n is None else [None] * n))]
    if n is not None and n != len(dims):
        raise ValueError(f"Shape must be rank {len(dims)} but is rank 1 for '{op.name}' (op: "
                         f"'Slice'): begin and size must have {len(dims)} elements, got {n}")
    if begin is None or size_ is None:
        if size_ is not None:
            return [(x.dtype, TensorShape([None if s == -1 else s for s in size_]))]
        return [(x.dtype, TensorShape([None] * len(dims)))]
    try:
        out = _slice_bounds(begin, size_, dims)
    except ValueError as e:
        raise ValueError(f"{e} for '{op.name}' (op: 'Slice')") from None
    return [(x.dtype, TensorShape(out))]


def _slice_index(op, xshape, dyn):
    begin, size_ = _args(op, dyn, "begin", "size")
    try:
        sizes = _slice_bounds(begin, size_, xshape)
    except ValueError as e:
        raise _err(str(e), op) from None
    return tuple(np.s_[b:b + s] for b, s in zip(begin, sizes))


def _slice_ref(op, x, *dyn):
    x = np.asarray(x)
    return np.array(x[_slice_index(op, x.shape, dyn)])


def _slice_grad_ref(op, g, x, *dyn):
    out = np.zeros(np.shape(x), dtype=np.asarray(g).dtype)
    out[_slice_index(op, np.shape(x), dyn)] = g
    return out


def _slice_start_len(d: int, b: int, e: int, s: int, bm: bool, em: bool) -> tuple:
    """Python's slice semantics for one axis of size d: (start, length)."""
    start, stop, step = builtins.slice(None if bm else b, None if em else e, s).indices(d)
    return start, len(builtins.range(start, stop, step))


def _entries_of(op, rank: int) -> list:
    """StridedSlice/Slice as per-axis entries: ("new",), ("all",), ("int", b) or
    ("slice", b, e, s, begin-masked, end-masked)."""
    if op.type in ("Slice", "SliceGrad"):
        out = []
        for b, s in zip(op.attrs["begin"], op.attrs["size"]):
            out.append(("slice1", int(b), int(s)))
        return out
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
            if is_static(d):
                n = static_size(d)
                if not -n <= b < n:
                    low.checks.append(Check(1, ("const", 0), pos, what))
                axes.append(("fixed", ("const", b % n if n else 0)))
            else:
                x = ("const", b) if b >= 0 else ("arith", "+", ("const", b), d)
                low.check_in_range(("const", 0), x, d, pos, what)
                axes.append(("fixed", ("sidx", d, b)))
        elif e[0] == "slice1":  # Slice: begin in [0, d], begin + size <= d
            b, s = e[1], e[2]
            if is_static(d):
                n = static_size(d)
                ln = n - b if s == -1 else s
                if not (0 <= b <= n and 0 <= ln and b + ln <= n):
                    low.checks.append(Check(1, ("const", 0), pos, what))
                    ln = max(ln, 0)
                size = const_dim(ln) if ln != 0 else ("const", 0)
            else:
                low.check_in_range(("const", 0), ("const", b), ("arith", "+", d, ("const", 1)),
                          pos, what)
                if s == -1:
                    size = ("arith", "-", d, ("const", b))
                else:
                    low.check_in_range(("const", 0), ("const", b + s),
                              ("arith", "+", d, ("const", 1)), pos, what)
                    size = const_dim(s) if s != 0 else ("const", 0)
            ones.append(size == 1)
            dims.append(size)
            axes.append(("lin", ("const", b), 1, k))
        else:
            _, b, en, s, bm, em = e
            if bm and em and s == 1:  # the whole axis
                ones.append(src_ones[di])
                dims.append(d)
                axes.append(("lin", ("const", 0), 1, k))
            elif is_static(d):
                start, ln = _slice_start_len(static_size(d), b, en, s, bm, em)
                st = ("const", start)
                size = const_dim(ln) if ln != 0 else ("const", 0)
            else:
                st = ("sstart", d, b, en, s, bm, em)
                size = ("slen", d, b, en, s, bm, em)
            if not (bm and em and s == 1):
                ones.append(size == 1)
                dims.append(size)
                axes.append(("lin", st, s, k))
        di += 1
    return tuple(ones), tuple(dims), axes


def _lower_slice(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
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
    ones, dims = low.refine(out, ones, dims)
    low.place(out, Pending(expr, src.dtype, ones, dims, low.reads_of(src), pos), pos)


def _lower_slice_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    g_expr, dtype, g_ones, g_dims, _ = low.expr(op.inputs[0])
    _, _, x_ones, x_dims, _ = low.expr(op.inputs[1], shape_only=True)
    entries = _entries_of(op, len(x_ones))
    ones, dims, axes = _slice_axes(low, entries, x_ones, x_dims, pos,
                                   "slice index out of bounds")
    if len(ones) != len(g_ones):
        raise Unsupported("slice gradient rank")
    for a, b, oa, ob in zip(g_dims, dims, g_ones, ones):
        if not (oa and ob):
            low.check_equal(a, b, pos, "Incompatible shapes")
    v = low.buf(dtype, x_ones, x_dims)
    low.emit(Alloc(v, Lit(0, dtype), pos))
    items = []
    for (kind, a, *rest), one in zip(axes, x_ones):
        items.append(("fixed", ("const", 0)) if one and kind == "lin" else (kind, a, *rest))
    low.emit(Region(v, g_expr, g_dims, g_ones, tuple(items), "set", pos))
    low.set(out, v)


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


register("SliceGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         lower=_lower_slice_grad, lowerable=_sup_slice_grad, shape_only=(1,), inline=(0,),
         ref=_slice_grad_ref,
         grad=lambda op, g: [_slice_like(op, g)] + [None] * (len(op.inputs) - 1),
         kind="other", doc="Scatter a Slice gradient into zeros shaped like input 1.")


def _slice_like(op, g):
    """Slice `g` as the Slice (or its grad) described by `op`'s begin/size did."""
    dyn = list(op.inputs[2:])
    return make_op("Slice", [g] + dyn, {"begin": op.attrs["begin"],
                                        "size": op.attrs["size"]}).outputs[0]


def _slice_grad_rule(grad_op: str):
    """The gradient of a slicing op: `grad_op` scatters g into zeros shaped like the input."""
    def rule(op, g):
        x = op.inputs[0]
        dyn = list(op.inputs[1:])
        gx = make_op(grad_op, [g, x] + dyn, dict(op.attrs)).outputs[0]
        return [gx] + [None] * len(dyn)
    return rule


_slice_grad = _slice_grad_rule("SliceGrad")


register("Slice", infer=_slice_infer, ref=_slice_ref, grad=_slice_grad, kind="other",
         lower=_lower_slice, lowerable=_sup_slice,
         examples=[Example(build=lambda x: slice(x, [1, 0], [1, -1]), inputs=[(3, 4)],
                           expect=lambda x: x[1:2, :]),
                   Example(build=lambda x: slice(x, [0, 1, 1], [2, 1, 2]), inputs=[(2, 3, 3)],
                           expect=lambda x: x[0:2, 1:2, 1:3], id="3d")])


def slice(input_, begin, size, name: Optional[str] = None) -> Tensor:  # noqa: A001
    """`tf.slice`: `size[i]` elements from `begin[i]` along each axis (-1: to the end)."""
    x = convert_to_tensor(input_)
    b, bd = _int_list_arg(begin, "begin")
    s, sd = _int_list_arg(size, "size")
    inputs = [x] + [t for t in (bd, sd) if t is not None]
    return make_op("Slice", inputs, {"begin": b, "size": s}, name=name).outputs[0]


# -- StridedSlice and Tensor.__getitem__ -------------------------------------------------------
def _strided_spec(begin, end, strides, masks, ndim):
    """Expand a strided-slice spec to (numpy index tuple builder entries, dims consumed)."""
    bm, em, elm, nm, sm = masks
    n = len(begin)
    consumed = sum(1 for i in builtins.range(n)
                   if not (elm >> i) & 1 and not (nm >> i) & 1)
    entries = []
    seen_ellipsis = False
    for i in builtins.range(n):
        if (elm >> i) & 1:
            if seen_ellipsis:
                raise ValueError("Multiple ellipses in slice spec not allowed")
            seen_ellipsis = True
            entries.extend([("all",)] * max(ndim - consumed, 0))
        elif (nm >> i) & 1:
            entries.append(("new",))
        elif (sm >> i) & 1:
            entries.append(("int", begin[i]))
        else:
            if strides[i] == 0:
                raise ValueError("strides[%d] must be non-zero" % i)
            entries.append(("slice", None if (bm >> i) & 1 else begin[i],
                            None if (em >> i) & 1 else end[i], strides[i]))
    used = sum(1 for e in entries if e[0] != "new")
    if used > ndim:
        raise ValueError(f"Index out of range using input dim {ndim}; input has only {ndim} "
                         "dims")
    entries.extend([("all",)] * (ndim - used))
    return entries


def _entries_index(entries):
    idx = []
    for e in entries:
        if e[0] == "all":
            idx.append(np.s_[:])
        elif e[0] == "new":
            idx.append(None)
        elif e[0] == "int":
            idx.append(e[1])
        else:
            idx.append(np.s_[e[1]:e[2]:e[3]])
    return tuple(idx)


_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def _ss_masks(op):
    return tuple(op.attrs[k] for k in _MASKS)


def _ss_infer(op):
    x = op.inputs[0]
    dims = x.shape.as_tuple()
    begin, end, strides = (op.attrs[k] for k in ("begin", "end", "strides"))
    if begin is None:
        vals = [_const(t, 8) for t in op.inputs[1:4]]
        begin, end, strides = (None if v is None else tuple(int(a) for a in v) for v in vals)
    masks = _ss_masks(op)
    if dims is None:
        return [(x.dtype, TensorShape(None))]
    if begin is None or end is None or strides is None:
        # Only the mask structure is known: slices become unknown dims.
        n = len(op.inputs[1].shape.as_list()) if op.inputs[1].shape.ndims == 1 and \
            op.inputs[1].shape[0].value is not None else None
        if n is None:
            return [(x.dtype, TensorShape(None))]
        z = (0,) * n
        entries = _strided_spec(z, z, (1,) * n, masks, len(dims))
        out = []
        di = 0
        for e in entries:
            if e[0] == "new":
                out.append(1)
                continue
            if e[0] == "all":
                out.append(dims[di])
            elif e[0] == "slice":
                out.append(None)
            di += 1
        return [(x.dtype, TensorShape(out))]
    try:
        entries = _strided_spec(begin, end, strides, masks, len(dims))
    except ValueError as e:
        raise ValueError(f"{e} for '{op.name}' (op: 'StridedSlice')") from None
    out = []
    di = 0
    for e in entries:
        if e[0] == "new":
            out.append(1)
            continue
        d = dims[di]
        if e[0] == "all":
            out.append(d)
        elif e[0] == "int":
            if d is not None and not -d <= e[1] < d:
                raise ValueError(f"slice index {e[1]} of dimension {di} out of bounds. for "
                                 f"'{op.name}' (op: 'StridedSlice') with input shapes: "
                                 f"{_tf_shape(x.shape)}")
        else:
            out.append(None if d is None else
                       len(builtins.range(*builtins.slice(
                           e[1], e[2], e[3]).indices(d))))
        di += 1
    return [(x.dtype, TensorShape(out))]


def _ss_index(op, ndim, dyn):
    begin, end, strides = _args(op, dyn, "begin", "end", "strides")
    return _entries_index(_strided_spec(begin, end, strides, _ss_masks(op), ndim))


def _ss_ref(op, x, *dyn):
    x = np.asarray(x)
    try:
        idx = _ss_index(op, x.ndim, dyn)
    except ValueError as e:
        raise _err(str(e), op) from None
    di = 0
    for e in idx:
        if e is None:
            continue
        if isinstance(e, (int, np.integer)) and not -x.shape[di] <= e < x.shape[di]:
            raise _err(f"slice index {e} of dimension {di} out of bounds.", op)
        di += 1
    return np.array(x[idx])


def _ss_grad_ref(op, g, x, *dyn):
    out = np.zeros(np.shape(x), dtype=np.asarray(g).dtype)
    idx = _ss_index(op, out.ndim, dyn)
    out[idx] = np.reshape(g, out[idx].shape)
    return out


def _ss_like(op, g):
    return make_op("StridedSlice", [g] + list(op.inputs[2:]), dict(op.attrs)).outputs[0]


register("StridedSliceGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         lower=_lower_slice_grad, lowerable=_sup_slice_grad, shape_only=(1,), inline=(0,),
         ref=_ss_grad_ref,
         grad=lambda op, g: [_ss_like(op, g)] + [None] * (len(op.inputs) - 1),
         kind="other", doc="Scatter a StridedSlice gradient into zeros shaped like input 1.")


_ss_grad = _slice_grad_rule("StridedSliceGrad")


register("StridedSlice", infer=_ss_infer, ref=_ss_ref, grad=_ss_grad, kind="other",
         lower=_lower_slice, lowerable=_sup_slice,
         examples=[Example(build=lambda x: x[1:, ::-2], inputs=[(3, 5)],
                           expect=lambda x: x[1:, ::-2]),
                   Example(build=lambda x: x[..., 1, None], inputs=[(2, 3, 4)],
                           expect=lambda x: x[..., 1, None], id="ellipsis"),
                   Example(build=lambda x: x[-1], inputs=[(4, 2)], expect=lambda x: x[-1],
                           id="int"),
                   Example(build=lambda x: x[shape(x)[0] - 2], inputs=[(3, 2)],
                           expect=lambda x: x[1], id="tensor-index"),
                   Example(build=lambda x: strided_slice(x, [0, 3], [2, 0], [1, -1],
                                                         end_mask=1), inputs=[(3, 5)],
                           expect=lambda x: x[0:, 3:0:-1], id="masks")])


def strided_slice(input_, begin, end, strides=None, begin_mask: int = 0, end_mask: int = 0,
                  ellipsis_mask: int = 0, new_axis_mask: int = 0, shrink_axis_mask: int = 0,
                  var=None, name: Optional[str] = None) -> Tensor:
    """`tf.strided_slice`: NumPy-style basic slicing described by begin/end/strides and masks."""
    x = convert_to_tensor(input_)
    if strides is None:
        strides = [1] * (len(begin) if not isinstance(begin, Tensor) else
                         begin.shape.as_list()[0])
    parts = [_int_list_arg(v, n) for v, n in ((begin, "begin"), (end, "end"),
                                             (strides, "strides"))]
    attrs = {k: int(v) for k, v in zip(_MASKS, (begin_mask, end_mask, ellipsis_mask,
                                                new_axis_mask, shrink_axis_mask))}
    if all(d is None for _, d in parts):
        attrs.update(begin=parts[0][0], end=parts[1][0], strides=parts[2][0])
        inputs = [x]
    else:
        attrs.update(begin=None, end=None, strides=None)
        inputs = [x] + [d if d is not None else constant(np.array(s, np.int32))
                        for s, d in parts]
    return make_op("StridedSlice", inputs, attrs, name=name).outputs[0]


def _is_index_tensor(s) -> bool:
    return isinstance(s, Tensor) and s.dtype.is_integer and s.shape.ndims in (None, 0)


def _getitem(tensor, slice_spec):
    """`Tensor.__getitem__`: ints, slices (any step), None/newaxis, Ellipsis, scalar int
    tensors; built as one `strided_slice` op."""
    if not isinstance(slice_spec, (list, tuple)) or isinstance(slice_spec, Tensor):
        slice_spec = [slice_spec]
    elif isinstance(slice_spec, list):
        raise TypeError("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) "
                        "and scalar tf.int32/tf.int64 tensors are valid indices, got "
                        f"{slice_spec!r}")
    begin, end, strides = [], [], []
    masks = dict.fromkeys(_MASKS, 0)
    for i, s in enumerate(slice_spec):
        bit = 1 << i
        if isinstance(s, builtins.slice):
            for part, lst, m in ((s.start, begin, "begin_mask"), (s.stop, end, "end_mask")):
                if part is None:
                    lst.append(0)
                    masks[m] |= bit
                else:
                    lst.append(_index_value(part, slice_spec))
            strides.append(1 if s.step is None else _index_value(s.step, slice_spec))
        elif s is Ellipsis:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["ellipsis_mask"] |= bit
        elif s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["new_axis_mask"] |= bit
        else:
            v = _index_value(s, slice_spec)
            begin.append(v)
            if isinstance(v, Tensor):
                from jitflow.ops.math import add
                end.append(add(v, constant(1, dtype=v.dtype)))
            else:
                end.append(v + 1)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
    with name_scope(None, "strided_slice", [tensor]) as scope:
        return strided_slice(tensor, _packed(begin), _packed(end), _packed(strides),
                             name=scope, **masks)


def _index_value(s, spec):
    if isinstance(s, (bool, np.bool_)):
        raise TypeError(f"Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) "
                        f"and scalar tf.int32/tf.int64 tensors are valid indices, got {spec!r}")
    if isinstance(s, (int, np.integer)):
        return int(s)
    if hasattr(s, "_to_tensor"):
        s = s._to_tensor()
    if _is_index_tensor(s):
        return s
    raise TypeError(f"Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and "
                    f"scalar tf.int32/tf.int64 tensors are valid indices, got {s!r}")


def _packed(values):
    if not any(isinstance(v, Tensor) for v in values):
        return list(values)
    from jitflow.ops.math import cast
    return stack([cast(v, _dtypes.int32) if isinstance(v, Tensor) else
                  constant(v, dtype=_dtypes.int32) for v in values])


Tensor.__getitem__ = _getitem


# -- Gather, GatherNd ---------------------------------------------------------------------------
def _gather_infer(op):
    params, indices = op.inputs
    if not indices.dtype.is_integer:
        raise TypeError(f"Value for attr 'Tindices' of {indices.dtype.name} is not in the list "
                        "of allowed values: int32, int64")
    pd, idd = params.shape.as_tuple(), indices.shape.as_tuple()
    if pd is None or idd is None:
        return [(params.dtype, TensorShape(None))]
    a = op.attrs["axis"]
    if not -len(pd) <= a < len(pd):
        raise ValueError(f"Shape must be at least rank {a + 1} but is rank {len(pd)} for "
                         f"'{op.name}' (op: 'GatherV2')")
    a %= len(pd)
    return [(params.dtype, TensorShape(pd[:a] + idd + pd[a + 1:]))]


def _check_indices(op, idx, limit, what="indices"):
    bad = (idx < 0) | (idx >= limit)
    if np.any(bad):
        pos = np.argwhere(bad)[0]
        where = ",".join(str(int(p)) for p in pos)
        raise _err(f"{what}[{where}] = {int(idx[tuple(pos)])} is not in [0, {limit})", op)


def _gather_ref(op, params, indices):
    params = np.asarray(params)
    indices = np.asarray(indices)
    a = op.attrs["axis"] % params.ndim
    _check_indices(op, indices, params.shape[a])
    return np.take(params, indices, axis=a)


def _gather_grad_ref(op, g, indices, params):
    a = op.attrs["axis"] % np.ndim(params)
    g = np.asarray(g)
    out = np.zeros(np.shape(params), dtype=g.dtype)
    pm = np.moveaxis(out, a, 0)
    nidx = np.ndim(indices)
    gm = np.moveaxis(g.reshape(g.shape[:a] + (-1,) + g.shape[a + nidx:]), a, 0)
    np.add.at(pm, np.reshape(indices, -1), gm)
    return out


def _indices(low, t, pos: int):
    """The indices of a gather: a Value, or a Python int for a scalar constant."""
    lit = low.literal(t)
    if lit is not None:
        return int(lit.value)
    v = low.value(t, pos)
    if not isinstance(v, Value):
        raise Unsupported("gather indices")
    return v


def _lower_gather(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    params = low.stored(op.inputs[0], pos)
    r = params.rank
    a = op.attrs["axis"] % r
    idx = _indices(low, op.inputs[1], pos)
    what = "indices is not in [0, dim)"
    d = params.dims[a]
    if isinstance(idx, int):
        low.check_in_range(("const", 0), ("const", idx), d, pos, what)
        n_i, i_ones, i_dims = 0, (), ()
        ax_item = ("fixed", ("const", idx))
    else:
        low.range_check(idx, d, pos, what)
        n_i, i_ones, i_dims = idx.rank, idx.ones, idx.dims
        ax_item = ("take", idx, tuple(builtins.range(a, a + n_i)))
    ones = params.ones[:a] + i_ones + params.ones[a + 1:]
    dims = params.dims[:a] + i_dims + params.dims[a + 1:]
    items = []
    for k in builtins.range(r):
        if k == a:
            items.append(ax_item)
        elif params.ones[k]:
            items.append(("fixed", ("const", 0)))
        else:
            items.append(("lin", ("const", 0), 1, k if k < a else k + n_i - 1))
    reads = low.reads_of(params) | low.reads_of(idx)
    ones, dims = low.refine(out, ones, dims)
    low.place(out, Pending(Take(params, tuple(items)), params.dtype, ones, dims, reads, pos),
               pos)


def _lower_gather_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    g_expr, dtype, g_ones, g_dims, _ = low.expr(op.inputs[0])
    _, _, p_ones, p_dims, _ = low.expr(op.inputs[2], shape_only=True)
    r = len(p_ones)
    a = op.attrs["axis"] % r
    idx = _indices(low, op.inputs[1], pos)
    what = "indices is not in [0, dim)"
    if isinstance(idx, int):
        low.check_in_range(("const", 0), ("const", idx), p_dims[a], pos, what)
        n_i, ax_item = 0, ("fixed", ("const", idx))
    else:
        low.range_check(idx, p_dims[a], pos, what)
        n_i = idx.rank
        ax_item = ("take", idx, tuple(builtins.range(a, a + n_i)))
    if len(g_ones) != r - 1 + n_i:
        raise Unsupported("gather gradient rank")
    v = low.buf(dtype, p_ones, p_dims)
    low.emit(Alloc(v, Lit(0, dtype), pos))
    items = []
    for k in builtins.range(r):
        if k == a:
            items.append(ax_item)
        elif p_ones[k]:
            items.append(("fixed", ("const", 0)))
        else:
            kg = k if k < a else k + n_i - 1
            low.check_equal(g_dims[kg], p_dims[k], pos, "Incompatible shapes")
            items.append(("lin", ("const", 0), 1, kg))
    low.emit(Region(v, g_expr, g_dims, g_ones, tuple(items), "add", pos))
    low.set(out, v)


def _sup_gather(op) -> bool:
    p, i = op.inputs[:2]
    return len(op.inputs) == 2 and _ranked(p, i) and p.shape.ndims > 0


def _sup_gather_grad(op) -> bool:
    return _ranked(*op.inputs) and op.inputs[2].shape.ndims > 0


register("GatherGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[2].shape)],
         lower=_lower_gather_grad, lowerable=_sup_gather_grad, shape_only=(2,), inline=(0,),
         ref=_gather_grad_ref,
         grad=lambda op, g: [gather(g, op.inputs[1], axis=op.attrs["axis"]), None, None],
         kind="other",
         doc="Sum a GatherV2 gradient into zeros shaped like `params` (input 2) by index.")


def _gather_grad(op, g):
    params, indices = op.inputs
    return [make_op("GatherGrad", [g, indices, params], {"axis": op.attrs["axis"]}).outputs[0],
            None]


register("GatherV2", infer=_gather_infer, ref=_gather_ref, grad=_gather_grad, kind="other",
         lower=_lower_gather, lowerable=_sup_gather,
         examples=[Example(build=lambda p, i: gather(p, i), inputs=[(4, 3), (5,)],
                           dtypes=(("float32", "int32"), ("float64", "int64")),
                           domain="index", index_max=4, expect=lambda p, i: p[i]),
                   Example(build=lambda p, i: gather(p, i, axis=1), inputs=[(2, 3), (2, 2)],
                           dtypes=(("float32", "int32"),), domain="index",
                           expect=lambda p, i: np.take(p, i, axis=1), id="axis1")])


def gather(params, indices, validate_indices=None, name: Optional[str] = None,
           axis=0) -> Tensor:
    """`tf.gather`: slices of `params` along `axis` at `indices` (op `GatherV2`).

    An index outside [0, dim) raises InvalidArgumentError when the op runs.
    """
    with name_scope(name, "GatherV2", [params, indices]) as scope:
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        static, dyn = _int_list_arg(axis, "axis")
        if dyn is not None:
            raise TypeError("gather: `axis` must be known when the graph is built")
        return make_op("GatherV2", [p, i], {"axis": static[0]}, name=scope).outputs[0]


def _gather_nd_infer(op):
    params, indices = op.inputs
    if not indices.dtype.is_integer:
        raise TypeError(f"Value for attr 'Tindices' of {indices.dtype.name} is not in the list "
                        "of allowed values: int32, int64")
    pd, idd = params.shape.as_tuple(), indices.shape.as_tuple()
    if pd is None or idd is None or idd[-1] is None:
        return [(params.dtype, TensorShape(None))]
    k = idd[-1]
    if k > len(pd):
        raise ValueError(f"indices.shape[-1] must be <= params.rank, but saw indices shape: "
                         f"{_tf_shape(idd)} and params shape: {_tf_shape(pd)} for "
                         f"'{op.name}' (op: 'GatherNd')")
    return [(params.dtype, TensorShape(idd[:-1] + pd[k:]))]


def _gather_nd_index(op, params, indices):
    indices = np.asarray(indices)
    k = indices.shape[-1]
    for j in builtins.range(k):
        col = indices[..., j]
        bad = (col < 0) | (col >= params.shape[j])
        if np.any(bad):
            pos = np.argwhere(bad)[0]
            where = ",".join(str(int(p)) for p in pos)
            vals = ", ".join(str(int(v)) for v in indices[tuple(pos)])
            raise _err(f"indices[{where}] = [{vals}] does not index into param shape "
                       f"{list(params.shape)}", op)
    return tuple(indices[..., j] for j in builtins.range(k))


def _gather_nd_ref(op, params, indices):
    params = np.asarray(params)
    return np.array(params[_gather_nd_index(op, params, indices)])


def _gather_nd_grad_ref(op, g, indices, params):
    out = np.zeros(np.shape(params), dtype=np.asarray(g).dtype)
    np.add.at(out, _gather_nd_index(op, out, indices), g)
    return out


register("GatherNdGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[2].shape)],
         ref=_gather_nd_grad_ref,
         grad=lambda op, g: [gather_nd(g, op.inputs[1]), None, None], kind="other",
         doc="Sum a GatherNd gradient into zeros shaped like `params` (input 2).")
register("GatherNd", infer=_gather_nd_infer, ref=_gather_nd_ref,
         grad=lambda op, g: [make_op("GatherNdGrad", [g, op.inputs[1], op.inputs[0]])
                             .outputs[0], None],
         kind="other",
         examples=[Example(build=lambda p, i: gather_nd(p, i), inputs=[(3, 3, 2), (4, 2)],
                           dtypes=(("float32", "int32"),), domain="index",
                           expect=lambda p, i: p[i[:, 0], i[:, 1]])])


def gather_nd(params, indices, name: Optional[str] = None, batch_dims: int = 0) -> Tensor:
    """`tf.gather_nd`: the last axis of `indices` indexes the leading axes of `params`."""
    if batch_dims:
        raise NotImplementedError("gather_nd: batch_dims is not supported")
    with name_scope(name, "GatherNd", [params, indices]) as scope:
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        return make_op("GatherNd", [p, i], name=scope).outputs[0]


# -- Tile, Pad, Reverse, BroadcastTo ------------------------------------------------------------
def _tile_infer(op):
    x = op.inputs[0]
    mult = op.attrs["multiples"]
    dims = x.shape.as_tuple()
    if mult is None:
        return [(x.dtype, TensorShape(None if dims is None else [None] * len(dims)))]
    if dims is None:
        return [(x.dtype, TensorShape([None] * len(mult)))]
    if len(mult) != len(dims):
        raise ValueError(f"Shape must be rank {len(dims)} but is rank 1 for '{op.name}' (op: "
                         f"'Tile'): multiples has {len(mult)} elements, input has rank "
                         f"{len(dims)}")
    return [(x.dtype, TensorShape([None if d is None else d * m for d, m in zip(dims, mult)]))]


def _tile_ref(op, x, *dyn):
    (mult,) = _args(op, dyn, "multiples")
    if np.ndim(x) != len(mult):
        raise _err(f"Expected multiples argument to be a vector of length {np.ndim(x)} but got "
                   f"length {len(mult)}", op)
    return np.tile(x, mult)


def _tile_grad_ref(op, g, x):
    g = np.asarray(g)
    xs = np.shape(x)
    mult = [gd // xd if xd else 0 for gd, xd in zip(g.shape, xs)]
    split_shape = [v for m, d in zip(mult, xs) for v in (m, d)]
    return g.reshape(split_shape).sum(axis=tuple(builtins.range(0, 2 * len(xs),
                                                                              2)))


def _tile_dim(one: bool, d, m: int) -> tuple:
    if m == 1:
        return one, d
    if m == 0:
        return False, ("const", 0)
    return False, (("const", m) if one else ("arith", "*", d, ("const", m)))


def _lower_tile(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    mult = [int(m) for m in op.attrs["multiples"]]
    shaped = [_tile_dim(o, d, m) for o, d, m in zip(src.ones, src.dims, mult)]
    ones, dims = low.refine(out, tuple(o for o, _ in shaped), tuple(d for _, d in shaped))
    items = tuple(("fixed", ("const", 0)) if one else
                  (("lin", ("const", 0), 1, k) if m == 1 else ("mod", k, d))
                  for k, (one, d, m) in enumerate(zip(src.ones, src.dims, mult)))
    low.place(out, Pending(Take(src, items), src.dtype, ones, dims, low.reads_of(src), pos), pos)


def _lower_tile_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    g_expr, dtype, g_ones, g_dims, _ = low.expr(op.inputs[0])
    _, _, x_ones, x_dims, _ = low.expr(op.inputs[1], shape_only=True)
    if len(g_ones) != len(x_ones):
        raise Unsupported("tile gradient rank")
    v = low.buf(dtype, x_ones, x_dims)
    low.emit(Alloc(v, Lit(0, dtype), pos))
    items = tuple(("fixed", ("const", 0)) if one else ("mod", k, d)
                  for k, (one, d) in enumerate(zip(x_ones, x_dims)))
    low.emit(Region(v, g_expr, g_dims, g_ones, items, "add", pos))
    low.set(out, v)


register("TileGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         lower=_lower_tile_grad, shape_only=(1,), inline=(0,),
         lowerable=lambda op: _ranked(*op.inputs) and op.inputs[1].shape.ndims > 0,
         ref=_tile_grad_ref,
         grad=lambda op, g: [_tile_like(g, op.inputs[0], op.inputs[1]), None], kind="other",
         doc="Sum a Tile gradient over the copies, back to the shape of input 1.")


def _tile_like(g, big, small):
    if big.shape.is_fully_defined() and small.shape.is_fully_defined():
        return tile(g, [b // s if s else 0 for b, s in zip(big.shape.as_list(),
                                                            small.shape.as_list())])
    return tile(g, make_op("TileMultiples", [shape(big), shape(small)]).outputs[0])


register("TileMultiples", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=lambda op, a, b: np.where(np.asarray(b) > 0, np.asarray(a) // np.maximum(b, 1), 0),
         differentiable=False, kind="other",
         doc="Elementwise shape(big) // shape(small): the multiples of a tile.")


register("Tile", infer=_tile_infer, ref=_tile_ref,
         lower=_lower_tile, lowerable=lambda op: len(op.inputs) == 1 and _sup_unary(op),
         grad=lambda op, g: [make_op("TileGrad", [g, op.inputs[0]]).outputs[0]]
         + [None] * (len(op.inputs) - 1),
         kind="other",
         examples=[Example(build=lambda x: tile(x, [2, 3]), inputs=[(2, 2)],
                           expect=lambda x: np.tile(x, (2, 3)))])


def tile(input, multiples, name: Optional[str] = None) -> Tensor:
    """`tf.tile`: repeat `input` `multiples[i]` times along axis i."""
    x = convert_to_tensor(input)
    static, dyn = _int_list_arg(multiples, "multiples")
    inputs = [x] + ([dyn] if dyn is not None else [])
    return make_op("Tile", inputs, {"multiples": static}, name=name).outputs[0]


def _pad_infer(op):
    x, cval = op.inputs
    pads = op.attrs["paddings"]
    dims = x.shape.as_tuple()
    if cval.dtype != x.dtype:
        raise TypeError(f"Input 'constant_values' of 'PadV2' Op has type {cval.dtype.name} that "
                        f"does not match type {x.dtype.name} of argument 'input'.")
    if dims is None:
        return [(x.dtype, TensorShape([None] * len(pads)))]
    if len(pads) != len(dims):
        raise ValueError(f"Shape must be rank {len(dims)} but paddings has {len(pads)} rows "
                         f"for '{op.name}' (op: 'PadV2') with input shapes: "
                         f"{_tf_shape(x.shape)}, [{len(pads)},2].")
    mode = op.attrs["mode"]
    out = []
    for d, (lo, hi) in zip(dims, pads):
        if lo < 0 or hi < 0:
            raise ValueError(f"Paddings must be non-negative: {lo} {hi}")
        if mode != "CONSTANT" and d is not None:
            lim = d - 1 if mode == "REFLECT" else d
            if lo > lim or hi > lim:
                raise ValueError(f"paddings must be no greater than the dimension size: {lo}, "
                                 f"{hi} greater than {lim} for '{op.name}' (op: 'MirrorPad')")
        out.append(None if d is None else d + lo + hi)
    return [(x.dtype, TensorShape(out))]


_NP_MODE = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "symmetric"}


def _pad_ref(op, x, cval):
    pads = op.attrs["paddings"]
    mode = op.attrs["mode"]
    if mode == "CONSTANT":
        return np.pad(x, pads, mode="constant", constant_values=cval)
    return np.pad(x, pads, mode=_NP_MODE[mode])


def _pad_grad_ref(op, g, x):
    g = np.asarray(g)
    pads = op.attrs["paddings"]
    if op.attrs["mode"] == "CONSTANT":
        return np.array(g[tuple(np.s_[lo:lo + d] for (lo, _), d in zip(pads, np.shape(x)))])
    # Mirror modes: each output position copies one input position per axis; sum back.
    out = g
    for ax, ((lo, hi), d) in enumerate(zip(pads, np.shape(x))):
        src = np.pad(np.arange(d), (lo, hi), mode=_NP_MODE[op.attrs["mode"]])
        moved = np.moveaxis(out, ax, 0)
        acc = np.zeros((d,) + moved.shape[1:], dtype=g.dtype)
        np.add.at(acc, src, moved)
        out = np.moveaxis(acc, 0, ax)
    return np.array(out)


def _lower_pad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    x_expr, dtype, x_ones, x_dims, _ = low.expr(op.inputs[0])
    c_expr, _, c_ones, _, _ = low.expr(op.inputs[1])
    if c_ones:
        raise Unsupported("pad value is not a scalar")
    pads = op.attrs["paddings"]
    ones, dims, items = [], [], []
    for k, (one, d, (lo, hi)) in enumerate(zip(x_ones, x_dims, pads)):
        n = add_dims(add_dims(d, const_dim(lo) if lo else ("const", 0)),
                     const_dim(hi) if hi else ("const", 0))
        ones.append(n == 1)
        dims.append(n)
        items.append(("fixed", const_dim(lo) if lo else ("const", 0)) if one
                     else ("lin", ("const", lo), 1, k))
    ones, dims = low.refine(out, tuple(ones), tuple(dims))
    v = low.buf(dtype, ones, dims)
    low.emit(Alloc(v, c_expr, pos))
    low.emit(Region(v, x_expr, x_dims, x_ones, tuple(items), "set", pos))
    low.set(out, v)


def _lower_pad_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    _, _, ones, dims, _ = low.expr(op.inputs[1], shape_only=True)
    items = []
    for k, (one, (lo, _hi)) in enumerate(zip(src.ones, op.attrs["paddings"])):
        items.append(("fixed", ("const", 0)) if one else ("lin", ("const", lo), 1, k))
    low.place(out, Pending(Take(src, tuple(items)), src.dtype, ones, dims, low.reads_of(src), pos),
               pos)


register("PadGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         lower=_lower_pad_grad, shape_only=(1,),
         lowerable=lambda op: op.attrs["mode"] == "CONSTANT" and _ranked(*op.inputs)
         and op.inputs[1].shape.ndims > 0,
         ref=_pad_grad_ref,
         grad=lambda op, g: [make_op("PadV2", [g, zeros([], g.dtype)], dict(op.attrs))
                             .outputs[0], None],
         kind="other", doc="The gradient of PadV2: the interior of the padded gradient.")


def _pad_grad(op, g):
    x = op.inputs[0]
    gx = make_op("PadGrad", [g, x], dict(op.attrs)).outputs[0]
    if op.attrs["mode"] != "CONSTANT":
        return [gx, None]
    from jitflow.ops.math import unbroadcast
    border = make_op("PadBorderSum", [g, x], dict(op.attrs)).outputs[0]
    return [gx, unbroadcast(border, op.inputs[1])]


def _pad_border_ref(op, g, x):
    g = np.asarray(g)
    inner = _pad_grad_ref(op, g, x)
    return np.asarray(g.sum() - inner.sum(), dtype=g.dtype)


register("PadBorderSum", infer=lambda op: [(op.inputs[0].dtype, TensorShape([]))],
         ref=_pad_border_ref, differentiable=False, kind="other",
         doc="The sum of a padded gradient over the padding: the constant value's gradient.")


register("PadV2", infer=_pad_infer, ref=_pad_ref, grad=_pad_grad, kind="other",
         lower=_lower_pad, inline=True,
         lowerable=lambda op: op.attrs["mode"] == "CONSTANT" and _ranked(op.inputs[0])
         and op.inputs[0].shape.ndims > 0,
         examples=[Example(build=lambda x: pad(x, [[1, 0], [2, 1]]), inputs=[(2, 3)],
                           expect=lambda x: np.pad(x, [[1, 0], [2, 1]])),
                   Example(build=lambda x: pad(x, [[1, 2]], constant_values=3), inputs=[(3,)],
                           expect=lambda x: np.pad(x, [[1, 2]], constant_values=3),
                           id="value"),
                   Example(build=lambda x: pad(x, [[2, 1], [0, 1]], mode="REFLECT"),
                           inputs=[(3, 3)],
                           expect=lambda x: np.pad(x, [[2, 1], [0, 1]], mode="reflect"),
                           id="reflect"),
                   Example(build=lambda x: pad(x, [[2, 1]], mode="symmetric"), inputs=[(3,)],
                           expect=lambda x: np.pad(x, [[2, 1]], mode="symmetric"),
                           id="symmetric")])


def pad(tensor, paddings, mode: str = "CONSTANT", name: Optional[str] = None,
        constant_values=0) -> Tensor:
    """`tf.pad`: `paddings[i] = [before, after]`; modes CONSTANT, REFLECT and SYMMETRIC."""
    mode = mode.upper()
    if mode not in _NP_MODE:
        raise ValueError(f"Unknown padding mode: {mode}")
    p = get_static_value(paddings) if isinstance(paddings, Tensor) else np.asarray(paddings)
    if p is None:
        raise TypeError("pad: `paddings` must be known when the graph is built")
    p = np.asarray(p)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"paddings must be a matrix with 2 columns: {p.tolist()}")
    with name_scope(name, "Pad", [tensor]) as scope:
        x = convert_to_tensor(tensor, name="input")
        c = convert_to_tensor(constant_values, dtype=x.dtype, name="constant_values")
        attrs = {"paddings": tuple((int(a), int(b)) for a, b in p), "mode": mode}
        return make_op("PadV2", [x, c], attrs, name=scope).outputs[0]


def _same_shape_axes_infer(op):
    """Output like the input; every attr `axis` entry must be valid for its rank."""
    x = op.inputs[0]
    r = x.shape.ndims
    if r is not None:
        for a in op.attrs["axis"]:
            _norm_axis(a, r)
    return [(x.dtype, x.shape)]


def _lower_reverse(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    rev = {a % src.rank for a in op.attrs["axis"]}
    items = []
    for k, (one, d) in enumerate(zip(src.ones, src.dims)):
        if one:
            items.append(("fixed", ("const", 0)))
        elif k in rev:
            last = (const_dim(static_size(d) - 1) if is_static(d)
                    else ("arith", "-", d, ("const", 1)))
            items.append(("lin", last, -1, k))
        else:
            items.append(("lin", ("const", 0), 1, k))
    low.place(out, Pending(Take(src, tuple(items)), src.dtype, src.ones, src.dims,
                            low.reads_of(src), pos), pos)


register("ReverseV2", infer=_same_shape_axes_infer,
         lower=_lower_reverse, lowerable=_sup_unary,
         ref=lambda op, x: np.array(np.flip(x, axis=op.attrs["axis"])),
         grad=lambda op, g: [reverse(g, op.attrs["axis"])], kind="other",
         examples=[Example(build=lambda x: reverse(x, [1]), inputs=[(2, 3)],
                           expect=lambda x: x[:, ::-1]),
                   Example(build=lambda x: reverse(x, [0, -1]), inputs=[(2, 3)],
                           expect=lambda x: x[::-1, ::-1], id="both")])


def reverse(tensor, axis, name: Optional[str] = None) -> Tensor:
    """`tf.reverse` (op `ReverseV2`): flip the given axes."""
    x = convert_to_tensor(tensor)
    static, dyn = _int_list_arg(axis, "axis")
    if dyn is not None:
        raise TypeError("reverse: `axis` must be known when the graph is built")
    return make_op("ReverseV2", [x], {"axis": tuple(static)}, name=name).outputs[0]


reverse_v2 = reverse


def _broadcast_to_infer(op):
    x = op.inputs[0]
    target = _shape_of(op, "shape", 1)
    if target.ndims is None or x.shape.ndims is None:
        return [(x.dtype, target)]
    from jitflow.shapes import broadcast_static
    try:
        out = broadcast_static(x.shape, target)
    except ValueError:
        out = None
    if out is None or out.ndims != target.ndims or not target.is_compatible_with(out):
        raise ValueError(f"Incompatible shapes for broadcasting: {_tf_shape(x.shape)} and "
                         f"{_tf_shape(target)} for '{op.name}' (op: 'BroadcastTo')")
    return [(x.dtype, TensorShape([t if t is not None else o
                                   for t, o in zip(target.as_tuple(), out.as_tuple())]))]


def _broadcast_to_ref(op, x, *dyn):
    (target,) = _args(op, dyn, "shape")
    try:
        return np.array(np.broadcast_to(x, target))
    except ValueError:
        raise _err(f"Incompatible shapes: {list(np.shape(x))} vs. {list(target)}", op) from None


def _lower_broadcast_to(low, op, pos: int) -> None:
    """An elementwise identity broadcast to the static target shape."""
    target = op.attrs.get("shape")
    if len(op.inputs) != 1 or target is None or any(
            not isinstance(d, (int, np.integer)) or d < 0 for d in target):
        raise Unsupported("BroadcastTo with a computed shape")
    ones = tuple(int(d) == 1 for d in target)
    dims = tuple(1 if int(d) == 1 else ("const", int(d)) for d in target)
    low.elementwise(op, pos, target=(ones, dims))


register("BroadcastTo", infer=_broadcast_to_infer, ref=_broadcast_to_ref,
         lower=_lower_broadcast_to, inline=True,
         grad=lambda op, g: [_unbroadcast(g, op.inputs[0])] + [None] * (len(op.inputs) - 1),
         kind="elementwise",
         examples=[Example(build=lambda x: broadcast_to(x, [2, 3, 4]), inputs=[(3, 1)],
                           expect=lambda x: np.broadcast_to(x, (2, 3, 4)))])


def broadcast_to(input, shape, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.broadcast_to`: broadcast `input` to `shape` with NumPy's rules."""
    x = convert_to_tensor(input)
    static, dyn = _int_list_arg(shape, "shape")
    inputs = [x] + ([dyn] if dyn is not None else [])
    return make_op("BroadcastTo", inputs, {"shape": static}, name=name).outputs[0]


# -- boolean_mask -------------------------------------------------------------------------------
def _bm_infer(op):
    x, mask = op.inputs
    if mask.dtype != _dtypes.bool_:
        raise TypeError(f"mask must be a bool tensor, got {mask.dtype.name}")
    dims, md = x.shape.as_tuple(), mask.shape.as_tuple()
    a = op.attrs["axis"]
    if md is None:
        raise ValueError("Number of mask dimensions must be specified, even if some "
                         "dimensions are None.  E.g. shape=[None] is ok, but shape=None is "
                         "not.")
    k = len(md)
    if k == 0:
        raise ValueError("mask cannot be scalar.")
    if dims is None:
        return [(x.dtype, TensorShape(None))]
    if not TensorShape(dims[a:a + k]).is_compatible_with(TensorShape(md)):
        raise ValueError(f"Shapes {_tf_shape(dims[a:a + k])} and {_tf_shape(md)} are "
                         "incompatible")
    return [(x.dtype, TensorShape(dims[:a] + (None,) + dims[a + k:]))]


def _bm_ref(op, x, mask):
    x = np.asarray(x)
    mask = np.asarray(mask)
    a = op.attrs["axis"]
    if x.shape[a:a + mask.ndim] != mask.shape:
        raise _err(f"mask shape {list(mask.shape)} does not match tensor shape "
                   f"{list(x.shape)} at axis {a}", op)
    return np.array(x[(np.s_[:],) * a + (mask,)])


def _bm_grad_ref(op, g, x, mask):
    out = np.zeros(np.shape(x), dtype=np.asarray(g).dtype)
    out[(np.s_[:],) * op.attrs["axis"] + (np.asarray(mask),)] = g
    return out


register("BooleanMaskGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         ref=_bm_grad_ref,
         grad=lambda op, g: [make_op("BooleanMask", [g, op.inputs[2]], dict(op.attrs))
                             .outputs[0], None, None],
         kind="other", doc="Scatter a boolean_mask gradient back to the masked positions.")
register("BooleanMask", infer=_bm_infer, ref=_bm_ref,
         grad=lambda op, g: [make_op("BooleanMaskGrad", [g, op.inputs[0], op.inputs[1]],
                                     dict(op.attrs)).outputs[0], None],
         kind="other",
         examples=[Example(build=lambda x, m: boolean_mask(x, m), inputs=[(4, 2), (4,)],
                           dtypes=(("float32", "bool"), ("float64", "bool")),
                           expect=lambda x, m: x[m]),
                   Example(build=lambda x, m: boolean_mask(x, m, axis=1),
                           inputs=[(2, 3, 2), (3, 2)], dtypes=(("float32", "bool"),),
                           expect=lambda x, m: x[:, m], id="axis1")])


def boolean_mask(tensor, mask, name: str = "boolean_mask", axis=None) -> Tensor:
    """`tf.boolean_mask`: the entries of `tensor` where `mask` (leading dims at `axis`) holds.

    The result's masked dimension is unknown (None) until the op runs.
    """
    with name_scope(name, "boolean_mask", [tensor, mask]) as scope:
        x = convert_to_tensor(tensor, name="tensor")
        m = convert_to_tensor(mask, name="mask")
        a = 0 if axis is None else int(axis)
        if a < 0 and x.shape.ndims is not None:
            a += x.shape.ndims
        return make_op("BooleanMask", [x, m], {"axis": a}, name=scope).outputs[0]


# -- scatter_nd, unsorted_segment_sum ----------------------------------------------------------
def _scatter_nd_infer(op):
    indices, updates = op.inputs[:2]
    if not indices.dtype.is_integer:
        raise TypeError(f"Value for attr 'Tindices' of {indices.dtype.name} is not in the list "
                        "of allowed values: int32, int64")
    out = _shape_of(op, "shape", 2)
    idd, ud, od = indices.shape.as_tuple(), updates.shape.as_tuple(), out.as_tuple()
    if None not in (idd, ud, od) and idd[-1] is not None:
        want = TensorShape(idd[:-1] + od[idd[-1]:])
        if not want.is_compatible_with(TensorShape(ud)):
            raise ValueError(f"The shape of updates {_tf_shape(ud)} must be indices.shape[:-1] "
                             f"+ shape[indices.shape[-1]:] = {_tf_shape(want)} for "
                             f"'{op.name}' (op: 'ScatterNd')")
    return [(updates.dtype, out)]


def _scatter_nd_ref(op, indices, updates, *dyn):
    (shape_,) = _args(op, dyn, "shape")
    out = np.zeros(shape_, dtype=np.asarray(updates).dtype)
    np.add.at(out, _gather_nd_index(op, out, indices), updates)  # duplicates are summed
    return out


register("ScatterNd", infer=_scatter_nd_infer, ref=_scatter_nd_ref,
         grad=lambda op, g: [None, gather_nd(g, op.inputs[0])] + [None] * (len(op.inputs) - 2),
         kind="other",
         examples=[Example(build=lambda u: scatter_nd([[1], [3], [1]], u, [5, 2]),
                           inputs=[(3, 2)],
                           expect=lambda u: np.stack([np.zeros(2), u[0] + u[2], np.zeros(2),
                                                      u[1], np.zeros(2)]))])


def scatter_nd(indices, updates, shape, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.scatter_nd`: zeros of `shape` with `updates` added at `indices` (sums duplicates)."""
    with name_scope(name, "ScatterNd", [indices, updates]) as scope:
        i = convert_to_tensor(indices, name="indices")
        u = convert_to_tensor(updates, name="updates")
        static, dyn = _int_list_arg(shape, "shape")
        inputs = [i, u] + ([dyn] if dyn is not None else [])
        return make_op("ScatterNd", inputs, {"shape": static}, name=scope).outputs[0]


def _segment_infer(op):
    data, ids = op.inputs
    if not ids.dtype.is_integer:
        raise TypeError(f"segment_ids must be int32 or int64, got {ids.dtype.name}")
    dd, idd = data.shape.as_tuple(), ids.shape.as_tuple()
    if dd is None or idd is None:
        return [(data.dtype, TensorShape(None))]
    if not TensorShape(dd[:len(idd)]).is_compatible_with(TensorShape(idd)):
        raise ValueError(f"segment_ids.shape = {_tf_shape(idd)} does not match the leading "
                         f"dimensions of data.shape = {_tf_shape(dd)}")
    return [(data.dtype, TensorShape((op.attrs["num_segments"],) + dd[len(idd):]))]


def _segment_ref(op, data, ids):
    data, ids = np.asarray(data), np.asarray(ids)
    n = op.attrs["num_segments"]
    if data.shape[:ids.ndim] != ids.shape:
        raise _err(f"data.shape = {list(data.shape)} does not start with segment_ids.shape = "
                   f"{list(ids.shape)}", op)
    out = np.zeros((n,) + data.shape[ids.ndim:], dtype=data.dtype)
    flat = ids.reshape(-1)
    if np.any(flat >= n):
        bad = int(np.argmax(flat >= n))
        raise _err(f"segment_ids[{bad}] = {int(flat[bad])} is out of range [0, {n})", op)
    keep = flat >= 0  # negative ids are dropped, as in TF1
    np.add.at(out, flat[keep], data.reshape((-1,) + data.shape[ids.ndim:])[keep])
    return out


def _segment_grad(op, g):
    data, ids = op.inputs
    safe = make_op("SegmentIdsClip", [ids], {"num_segments": op.attrs["num_segments"]})
    gathered = gather(g, safe.outputs[0])
    mask = make_op("SegmentIdsMask", [ids, data]).outputs[0]
    from jitflow.ops.math import multiply
    return [multiply(gathered, mask), None]


register("SegmentIdsClip", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=lambda op, ids: np.clip(ids, 0, op.attrs["num_segments"] - 1),
         differentiable=False, kind="other", doc="Negative segment ids mapped to 0.")
def _ids_mask_infer(op):
    ids, data = op.inputs
    ri, rd = ids.shape.ndims, data.shape.ndims
    if ri is None or rd is None:
        return [(data.dtype, TensorShape(None))]
    return [(data.dtype, TensorShape(ids.shape.as_tuple() + (1,) * (rd - ri)))]


def _ids_mask_ref(op, ids, data):
    keep = np.asarray(ids) >= 0
    return keep.reshape(keep.shape + (1,) * (np.ndim(data) - keep.ndim)).astype(
        np.asarray(data).dtype)


register("SegmentIdsMask", infer=_ids_mask_infer, ref=_ids_mask_ref, differentiable=False,
         kind="other",
         doc="1 where a segment id is kept (>= 0), shaped to broadcast against the data.")
register("UnsortedSegmentSum", infer=_segment_infer, ref=_segment_ref, grad=_segment_grad,
         kind="other",
         examples=[Example(build=lambda d, i: unsorted_segment_sum(d, i, 4),
                           inputs=[(5, 2), (5,)], dtypes=(("float32", "int32"),),
                           domain="index", index_max=4,
                           expect=lambda d, i: np.stack([d[i == k].sum(0)
                                                         for k in builtins.range(4)]))])


def unsorted_segment_sum(data, segment_ids, num_segments, name: Optional[str] = None) -> Tensor:
    """`tf.unsorted_segment_sum`: out[k] = sum of data rows whose segment id is k (negative
    ids are dropped)."""
    static, dyn = _int_list_arg(num_segments, "num_segments")
    if dyn is not None:
        raise TypeError("unsorted_segment_sum: num_segments must be known at build time")
    with name_scope(name, "UnsortedSegmentSum", [data, segment_ids]) as scope:
        d = convert_to_tensor(data, name="data")
        i = convert_to_tensor(segment_ids, name="segment_ids")
        return make_op("UnsortedSegmentSum", [d, i], {"num_segments": static[0]},
                       name=scope).outputs[0]


# -- sequence_mask, meshgrid, unique, invert_permutation, roll ---------------------------------
def _sequence_mask_infer(op):
    lengths = op.inputs[0]
    if not lengths.dtype.is_integer:
        raise TypeError(f"lengths must be integers, got {lengths.dtype.name}")
    dims = lengths.shape.as_tuple()
    if dims is None:
        return [(op.attrs["dtype"], TensorShape(None))]
    return [(op.attrs["dtype"], TensorShape(dims + (op.attrs["maxlen"],)))]


def _sequence_mask_ref(op, lengths):
    lengths = np.asarray(lengths)
    n = op.attrs["maxlen"]
    if n is None:
        n = int(lengths.max()) if lengths.size else 0
    mask = np.arange(n) < lengths[..., None]
    return mask.astype(op.attrs["dtype"].as_numpy_dtype)


register("SequenceMask", infer=_sequence_mask_infer, ref=_sequence_mask_ref,
         differentiable=False, kind="other",
         examples=[Example(build=lambda n: sequence_mask(n, 4, dtype=_dtypes.float32),
                           inputs=[(3,)], dtypes=("int32",), domain="index", index_max=5,
                           expect=lambda n: (np.arange(4) < n[:, None]).astype(float))])


def sequence_mask(lengths, maxlen=None, dtype=_dtypes.bool_, name: Optional[str] = None):
    """`tf.sequence_mask`: mask[..., j] = j < lengths[...]; maxlen defaults to max(lengths)."""
    if maxlen is not None:
        static, dyn = _int_list_arg(maxlen, "maxlen")
        if dyn is not None:
            raise TypeError("sequence_mask: maxlen must be known at build time")
        maxlen = static[0]
    with name_scope(name, "SequenceMask", [lengths]) as scope:
        x = convert_to_tensor(lengths, name="lengths")
        return make_op("SequenceMask", [x], {"maxlen": maxlen,
                                             "dtype": _dtypes.as_dtype(dtype)},
                       name=scope).outputs[0]


def meshgrid(*args, **kwargs) -> list:
    """`tf.meshgrid(*args, indexing="xy", name="meshgrid")`: N-D coordinate grids."""
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        raise TypeError(f"Invalid keyword arguments: {sorted(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise ValueError("indexing parameter must be either 'xy' or 'ij'")
    with name_scope(name, "meshgrid", list(args)):
        xs = [reshape(convert_to_tensor(a), [-1]) for a in args]
        n = len(xs)
        order = list(builtins.range(n))
        if indexing == "xy" and n > 1:
            order[0], order[1] = 1, 0
        dims = [xs[k].shape[0].value for k in order]
        if all(d is not None for d in dims):
            full = dims
        else:
            full = stack([size(xs[k]) for k in order])
        outs = []
        for i, x in enumerate(xs):
            pos = order.index(i)
            shp = [1] * n
            shp[pos] = -1
            outs.append(broadcast_to(reshape(x, shp), full))
        return outs


def _unique_infer(op):
    x = op.inputs[0]
    if x.shape.ndims not in (None, 1):
        raise ValueError(f"unique expects a 1D vector, got shape {x.shape}")
    return [(x.dtype, TensorShape([None])), (op.attrs["out_idx"], x.shape)]


def _unique_ref(op, x):
    x = np.asarray(x)
    _, first, inverse = np.unique(x, return_index=True, return_inverse=True)
    order = np.argsort(first)          # values in order of first appearance, as TF1
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(order.size)
    idx_dtype = op.attrs["out_idx"].as_numpy_dtype
    return x[np.sort(first)], rank_of[inverse.reshape(-1)].astype(idx_dtype)


register("Unique", infer=_unique_infer, ref=_unique_ref, differentiable=False, kind="other",
         examples=[Example(build=lambda x: unique(x)[1], inputs=[(6,)], dtypes=("int32",),
                           domain="index", index_max=3,
                           expect=lambda x: np.array([list(dict.fromkeys(x)).index(v)
                                                      for v in x]))])


def unique(x, out_idx=_dtypes.int32, name: Optional[str] = None):
    """`tf.unique`: (y, idx) with y the distinct values in order of first appearance and
    x == y[idx]."""
    import collections
    t = convert_to_tensor(x)
    op = make_op("Unique", [t], {"out_idx": _check_out_type(out_idx)}, name=name)
    return collections.namedtuple("Unique", ["y", "idx"])(*op.outputs)


def _invert_perm_ref(op, x):
    x = np.asarray(x)
    if sorted(x.tolist()) != list(builtins.range(x.size)):
        raise _err(f"{x.tolist()} is not a permutation of 0..{x.size - 1}", op)
    out = np.empty_like(x)
    out[x] = np.arange(x.size, dtype=x.dtype)
    return out


register("InvertPermutation", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_invert_perm_ref, differentiable=False, kind="other")


def invert_permutation(x, name: Optional[str] = None) -> Tensor:
    """`tf.invert_permutation`: y[x[i]] = i."""
    return make_op("InvertPermutation", [convert_to_tensor(x)], name=name).outputs[0]


register("Roll", infer=_same_shape_axes_infer,
         ref=lambda op, x: np.roll(x, op.attrs["shift"], axis=op.attrs["axis"]),
         grad=lambda op, g: [roll(g, [-s for s in op.attrs["shift"]], op.attrs["axis"])],
         kind="other",
         examples=[Example(build=lambda x: roll(x, [1, -2], [0, 1]), inputs=[(3, 4)],
                           expect=lambda x: np.roll(x, (1, -2), axis=(0, 1)))])


def roll(input, shift, axis, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.roll`: shift elements cyclically along the given axes."""
    x = convert_to_tensor(input)
    sh, d1 = _int_list_arg(shift, "shift")
    ax, d2 = _int_list_arg(axis, "axis")
    if d1 is not None or d2 is not None:
        raise TypeError("roll: shift and axis must be known at build time")
    if len(sh) != len(ax):
        raise ValueError(f"shift and axis must have the same size: {len(sh)} vs {len(ax)}")
    return make_op("Roll", [x], {"shift": tuple(sh), "axis": tuple(ax)}, name=name).outputs[0]


# -- Print, check_numerics ------------------------------------------------------------------------
def _format_value(v, summarize: int) -> str:
    v = np.asarray(v)
    flat = v.reshape(-1)
    body = " ".join(str(x) for x in flat[:summarize])
    if flat.size > summarize:
        body += "..."
    return f"[{body}]" if v.ndim else body


def _print_ref(op, x, *data):
    import sys
    msg = op.attrs["message"] + "".join(_format_value(d, op.attrs["summarize"]) for d in data)
    print(msg, file=sys.stderr)
    return x


register("Print", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_print_ref, grad=lambda op, g: [g] + [None] * (len(op.inputs) - 1),
         stateful=True, kind="other",
         doc="Identity on input 0 that writes `message` and the data inputs to stderr.")


def Print(input_, data, message=None, first_n=None, summarize=None,  # noqa: N802
          name: Optional[str] = None) -> Tensor:
    """`tf.Print`: passes `input_` through and prints `message` and `data` to stderr each time
    it runs (`first_n` is accepted and ignored)."""
    x = convert_to_tensor(input_)
    ds = [convert_to_tensor(d) for d in data]
    attrs = {"message": message or "", "summarize": 3 if summarize is None else int(summarize)}
    return make_op("Print", [x] + ds, attrs, name=name).outputs[0]


register("PrintV2", infer=lambda op: [], ref=lambda op, *xs: _print_v2(op, xs),
         stateful=True, differentiable=False, kind="other",
         doc="Write the inputs (and literal strings) to stderr; produces no output.")


def _print_v2(op, xs) -> tuple:
    import sys
    parts = [text if i is None else _format_value(xs[i], op.attrs["summarize"])
             for i, text in op.attrs["template"]]
    print(op.attrs["sep"].join(parts), end=op.attrs["end"], file=sys.stderr)
    return ()


def print_(*inputs, **kwargs):
    """`tf.print`: an op that prints its inputs (tensors and Python values) when run."""
    sep = kwargs.pop("sep", " ")
    end = kwargs.pop("end", "\n")
    summarize = kwargs.pop("summarize", 3)
    name = kwargs.pop("name", None)
    kwargs.pop("output_stream", None)
    tensors, template = [], []
    for v in inputs:
        if isinstance(v, Tensor) or hasattr(v, "_to_tensor"):
            template.append((len(tensors), ""))
            tensors.append(convert_to_tensor(v))
        else:
            template.append((None, str(v)))
    return make_op("PrintV2", tensors, {"template": tuple(template), "sep": sep, "end": end,
                                        "summarize": int(summarize)}, name=name,
                   graph=get_default_graph() if not tensors else None)


def _check_numerics_ref(op, x):
    x = np.asarray(x)
    if not np.all(np.isfinite(x)):
        kind = "NaN" if np.any(np.isnan(x)) else "Inf"
        raise _err(f"{op.attrs['message']} : Tensor had {kind} values", op)
    return x


def _check_numerics_infer(op):
    x = op.inputs[0]
    if not x.dtype.is_floating:
        raise TypeError(f"Value for attr 'T' of {x.dtype.name} is not in the list of allowed "
                        "values: float16, float32, float64")
    return [(x.dtype, x.shape)]


register("CheckNumerics", infer=_check_numerics_infer, ref=_check_numerics_ref,
         grad=lambda op, g: [g], stateful=True, kind="other",
         doc="Identity that raises InvalidArgumentError when its input has NaN or Inf.")


def check_numerics(tensor, message: str, name: Optional[str] = None) -> Tensor:
    """`tf.check_numerics`: `tensor`, or InvalidArgumentError at run time if it has NaN/Inf."""
    x = convert_to_tensor(tensor)
    return make_op("CheckNumerics", [x], {"message": message}, name=name).outputs[0]


def verify_tensor_all_finite(t, msg: str, name: Optional[str] = None) -> Tensor:
    """`tf.verify_tensor_all_finite`: check_numerics under its TF1 name."""
    with name_scope(name, "VerifyFinite", [t]) as scope:
        return check_numerics(t, msg, name=scope)
