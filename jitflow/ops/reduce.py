"""Reductions: Sum, Mean, Max, Min, Prod, Any, All, ArgMax, ArgMin and their TF1 wrappers.

Every reduction op stores its attrs normalized: `axis` is a sorted tuple of distinct
non-negative ints (all axes when the caller gave None), `keepdims` a bool. When the input's rank
is unknown at build time, `axis` is None for "all axes" and may hold negative axes (counted from
the end when the op runs). Axes must be known when the graph is built (Python ints, lists, or
tensors whose value is known then).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.compiler.ir import Load, Reduce
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.casting import cast
from jitflow.ops.math.common import (
    _FLOATS, _NUMERIC, broadcast_like, broadcast_reduced, check_dtype, scalar_like, stop_gradient,
)
from jitflow.ops.math.compare import equal, not_equal, where_v2
from jitflow.ops.math.unary import exp, is_finite, log, square
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__ = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_any",
           "reduce_all", "reduce_logsumexp", "argmax", "argmin", "count_nonzero", "arg_max",
           "arg_min"]

NAMESPACES = {"math": [n for n in __all__ if not n.startswith("arg_")]
              + ["reduce_variance", "reduce_std"]}


# -- axis handling -------------------------------------------------------------------------------
def _static_axis(axis):
    """A Python value for `axis` (tensors known at build time are folded, others refused)."""
    if isinstance(axis, Tensor):
        from jitflow.ops._array_args import get_static_value
        value = get_static_value(axis)
        if value is None:
            raise NotImplementedError("reduction axes must be known when the graph is built "
                                      f"(got the computed tensor {axis.name})")
        axis = value
    if isinstance(axis, np.ndarray):
        axis = axis.tolist()
    return axis


def normalize_axis(x: Tensor, axis, what: str = "reduction") -> Optional[tuple]:
    """`axis` as a sorted tuple of distinct non-negative ints (None: all axes, rank unknown)."""
    axis = _static_axis(axis)
    rank = x.shape.ndims
    if axis is None:
        return None if rank is None else tuple(range(rank))
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    out = set()
    for a in axes:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"{what} axis must be an int, got {a!r}")
        a = int(a)
        if rank is None:
            pass  # kept as given (negative counts from the end when the op runs)
        elif not -rank <= a < rank:
            raise ValueError(f"Invalid {what} dimension {a} for input with {rank} dimensions.")
        elif a < 0:
            a += rank
        out.add(a)
    return tuple(sorted(out))


def _legacy(new, old, new_name: str, old_name: str):
    if new is not None and old is not None:
        raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'.")
    return new if new is not None else old


def _reduced_shape(shape: TensorShape, axis, keepdims: bool) -> TensorShape:
    if shape.ndims is None:
        return TensorShape(None)
    if axis is None:
        axis = tuple(range(shape.ndims))
    dims = shape.as_tuple()
    if keepdims:
        return TensorShape([1 if i in axis else d for i, d in enumerate(dims)])
    return TensorShape([d for i, d in enumerate(dims) if i not in axis])


# -- the reduction ops ---------------------------------------------------------------------------
def _reduce_infer(allowed):
    def infer(op):
        x = op.inputs[0]
        check_dtype(op, x, allowed, "input")
        return [(x.dtype, _reduced_shape(x.shape, op.attrs["axis"], op.attrs["keepdims"]))]
    return infer


def _mean_ref(op, x):
    x = np.asarray(x)
    axis, keep = op.attrs["axis"], op.attrs["keepdims"]
    if x.dtype.kind in "iu":
        s = np.sum(x, axis=axis, keepdims=keep, dtype=np.int64)
        n = x.size // max(np.size(s), 1)
        if n == 0:
            # an integer mean of no elements: 0, as the compiled kernels give (TF's CPU kernel
            # divides by zero and kills the process)
            return np.zeros(np.shape(s), x.dtype)
        return (np.sign(s) * (np.abs(s) // n)).astype(x.dtype)  # truncates, as C division
    return np.mean(x, axis=axis, keepdims=keep).astype(x.dtype)


def _np_reduce(fn):
    def ref(op, x):
        x = np.asarray(x)
        return np.asarray(fn(x, axis=op.attrs["axis"], keepdims=op.attrs["keepdims"]),
                          dtype=x.dtype)
    return ref


def _np_extreme(largest: bool):
    """Max or Min: an empty reduction gives the identity (-inf / +inf, the integer limits),
    as TF's reducers do, rather than NumPy's error."""
    def ref(op, x):
        x = np.asarray(x)
        if x.dtype.kind == "f":
            init = -np.inf if largest else np.inf
        elif x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            init = info.min if largest else info.max
        else:
            init = not largest
        fn = np.max if largest else np.min
        return np.asarray(fn(x, axis=op.attrs["axis"], keepdims=op.attrs["keepdims"],
                             initial=init), dtype=x.dtype)
    return ref


def _expand(g: Tensor, x: Tensor, op) -> Tensor:
    """A reduction's output-shaped `g` re-expanded to the input's shape."""
    axis = op.attrs["axis"]
    if op.attrs["keepdims"] or axis is None or g.shape.ndims == 0:
        return broadcast_like(g, x)
    return broadcast_reduced(g, x, axis)


def _sum_grad(op, g):
    return [_expand(g, op.inputs[0], op)]


def _reduced_count(x: Tensor, axis) -> Tensor:
    """The number of elements one output of a reduction over `axis` sums (a scalar or a
    keepdims-shaped tensor when some reduced dims are unknown)."""
    dims = x.shape.as_tuple()
    if dims is not None:
        sel = range(len(dims)) if axis is None else axis
        n = 1
        for i in sel:
            if dims[i] is None:
                break
            n *= dims[i]
        else:
            return scalar_like(n, x)
    ones = broadcast_like(scalar_like(1, x), x)
    return reduce_sum(ones, axis=None if axis is None else list(axis), keepdims=True)


def _mean_grad(op, g):
    x = op.inputs[0]
    return [_expand(g, x, op) / _reduced_count(x, op.attrs["axis"])]


def _minmax_grad(op, g):
    """TF1's rule: the gradient is shared equally among the elements equal to the extremum."""
    x, y = op.inputs[0], op.outputs[0]
    y_full = _expand(y, x, op)
    ind = cast(equal(y_full, x), g.dtype)
    axis = op.attrs["axis"]
    num = reduce_sum(ind, axis=None if axis is None else list(axis), keepdims=True)
    return [ind / num * _expand(g, x, op)]


def _prod_grad_ref(op, x, g):
    """d prod / d x_i = product of the other elements, computed without dividing by x_i."""
    x = np.asarray(x)
    axis = op.attrs["axis"]
    axis = tuple(range(x.ndim)) if axis is None else tuple(sorted(a % x.ndim for a in axis))
    keep = [1 if i in axis else d for i, d in enumerate(x.shape)]
    g = np.broadcast_to(np.reshape(g, keep), x.shape)
    rest = [i for i in range(x.ndim) if i not in axis]
    perm = rest + list(axis)
    xt = np.transpose(x, perm)
    flat = xt.reshape(xt.shape[:len(rest)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=x.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    others = (left * right).reshape(xt.shape)
    return np.transpose(others, np.argsort(perm)) * g


def _np_products_of_others(x, g):
    """For rows of x (axis 1): g[i] times the product of row i without element j."""
    out = np.empty(x.shape, dtype=np.float64)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = np.prod(np.delete(x[i], j)) * g[i]
    return out


register("ProdGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_prod_grad_ref, grad=lambda op, h: _no_second_order(op), kind="other",
         doc="Gradient of Prod: g times the product of the other reduced elements (exact with "
             "zeros in the input).",
         examples=[Example(lambda x, g: make_op("ProdGrad", [x, g], {"axis": (1,),
                                                                      "keepdims": False}
                                                ).outputs[0], [(3, 4), (3,)],
                           _np_products_of_others, grad=False)])


def _no_second_order(op):
    raise NotImplementedError(f"jitflow has no gradient for {op.type} (a second derivative "
                              f"through '{op.name}')")


def _prod_grad(op, g):
    x = op.inputs[0]
    return [make_op("ProdGrad", [x, g], dict(op.attrs), name="ProdGrad").outputs[0]]


def _reduce_examples(fn, npfn, dtypes=("float32", "float64", "int32"), domain="real",
                     grad=True, int_mean=False):
    cases = [((3, 4), None, False, "all"), ((3, 4), 0, False, "ax0"),
             ((3, 4), 1, True, "ax1_keep"), ((2, 3, 4), (0, 2), False, "ax02"),
             ((2, 3, 4), -1, True, "neg_keep")]
    out = []
    for shape, axis, keep, ident in cases:
        out.append(Example(
            (lambda a, axis=axis, keep=keep: fn(a, axis=axis, keepdims=keep)), [shape],
            (lambda a, axis=axis, keep=keep: npfn(a, axis=axis, keepdims=keep)), dtypes, domain,
            grad, id=ident))
    return out


def _np_int_mean(a, axis, keepdims):
    if a.dtype.kind in "iu":
        s = np.sum(a, axis=axis, keepdims=keepdims)
        n = a.size // np.size(s)
        return np.trunc(s / n)
    return np.mean(a.astype(np.float64), axis=axis, keepdims=keepdims)


def _lower_reduce(how: str):
    """A reduction of input 0 (an expression: the ops producing it fuse into the loop) along
    attr axis with `how` (an `ir.Reduce`); Any and All are max and min of booleans."""
    def lower(low, op, pos: int) -> None:
        low.reduce(op, pos, how, op.attrs["axis"], bool(op.attrs["keepdims"]))
    return lower


_BOOL = ("bool",)
register("Sum", infer=_reduce_infer(_NUMERIC), ref=_np_reduce(np.sum), grad=_sum_grad,
         kind="reduce", lower=_lower_reduce("sum"), inline=True,
         examples=_reduce_examples(lambda a, **k: reduce_sum(a, **k), np.sum))
register("Mean", infer=_reduce_infer(_NUMERIC), ref=_mean_ref, grad=_mean_grad, kind="reduce",
         lower=_lower_reduce("mean"), inline=True,
         doc="Mean; integer inputs give the sum divided by the count, truncated (as TF1).",
         examples=_reduce_examples(lambda a, **k: reduce_mean(a, **k), _np_int_mean))
register("Max", infer=_reduce_infer(_NUMERIC), ref=_np_extreme(True), grad=_minmax_grad,
         kind="reduce", lower=_lower_reduce("max"), inline=True,
         examples=_reduce_examples(lambda a, **k: reduce_max(a, **k), np.max))
register("Min", infer=_reduce_infer(_NUMERIC), ref=_np_extreme(False), grad=_minmax_grad,
         kind="reduce", lower=_lower_reduce("min"), inline=True,
         examples=_reduce_examples(lambda a, **k: reduce_min(a, **k), np.min))
register("Prod", infer=_reduce_infer(_NUMERIC), ref=_np_reduce(np.prod), grad=_prod_grad,
         kind="reduce", lower=_lower_reduce("prod"), inline=True,
         examples=_reduce_examples(lambda a, **k: reduce_prod(a, **k), np.prod,
                                                  domain="nonzero"))
register("Any", infer=_reduce_infer(_BOOL), ref=_np_reduce(np.any), differentiable=False,
         kind="reduce", lower=_lower_reduce("max"), inline=True,
         examples=_reduce_examples(lambda a, **k: reduce_any(a, **k), np.any,
                                                  ("bool",), "bool", False))
register("All", infer=_reduce_infer(_BOOL), ref=_np_reduce(np.all), differentiable=False,
         kind="reduce", lower=_lower_reduce("min"), inline=True,
         examples=_reduce_examples(lambda a, **k: reduce_all(a, **k), np.all,
                                                  ("bool",), "bool", False))


def _reduce(op_type: str, input_tensor, axis, keepdims, name, reduction_indices, keep_dims):
    axis = _legacy(axis, reduction_indices, "axis", "reduction_indices")
    keepdims = _legacy(keepdims, keep_dims, "keepdims", "keep_dims")
    x = convert_to_tensor(input_tensor, name="input_tensor")
    attrs = {"axis": normalize_axis(x, axis), "keepdims": bool(keepdims)}
    return make_op(op_type, [x], attrs, name=name or op_type).outputs[0]


def reduce_sum(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
               reduction_indices=None, keep_dims=None) -> Tensor:
    """`tf.reduce_sum`: the sum over `axis` (all axes when None) (op `Sum`)."""
    return _reduce("Sum", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_mean(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
                reduction_indices=None, keep_dims=None) -> Tensor:
    """`tf.reduce_mean` (op `Mean`); integer inputs give a truncated integer mean, as TF1."""
    return _reduce("Mean", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_max(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
               reduction_indices=None, keep_dims=None) -> Tensor:
    """`tf.reduce_max` (op `Max`)."""
    return _reduce("Max", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_min(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
               reduction_indices=None, keep_dims=None) -> Tensor:
    """`tf.reduce_min` (op `Min`)."""
    return _reduce("Min", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_prod(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
                reduction_indices=None, keep_dims=None) -> Tensor:
    """`tf.reduce_prod` (op `Prod`)."""
    return _reduce("Prod", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_any(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
               reduction_indices=None, keep_dims=None) -> Tensor:
    """`tf.reduce_any`: logical or over `axis` of a bool tensor (op `Any`)."""
    return _reduce("Any", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_all(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
               reduction_indices=None, keep_dims=None) -> Tensor:
    """`tf.reduce_all`: logical and over `axis` of a bool tensor (op `All`)."""
    return _reduce("All", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_logsumexp(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
                     reduction_indices=None, keep_dims=None) -> Tensor:
    """`tf.reduce_logsumexp`: log(sum(exp(x))) computed after subtracting the maximum, so
    large inputs do not overflow (composed as TF1 composes it)."""
    axis = _legacy(axis, reduction_indices, "axis", "reduction_indices")
    keepdims = bool(_legacy(keepdims, keep_dims, "keepdims", "keep_dims"))
    with name_scope(name, "ReduceLogSumExp", [input_tensor]) as scope:
        x = convert_to_tensor(input_tensor, name="input_tensor")
        check_dtype(x.op, x, _FLOATS, "input_tensor")
        raw_max = reduce_max(x, axis, keepdims=True)
        my_max = stop_gradient(where_v2(is_finite(raw_max), raw_max, scalar_like(0, raw_max)))
        result = log(reduce_sum(exp(x - my_max), axis, keepdims=keepdims))
        if not keepdims:
            raw = reduce_max(x, axis, keepdims=False)
            my_max = stop_gradient(where_v2(is_finite(raw), raw, scalar_like(0, raw)))
        return make_op("Add", [result, my_max], name=scope).outputs[0]


def reduce_variance(input_tensor, axis=None, keepdims: bool = False,
                    name: Optional[str] = None) -> Tensor:
    """`tf.math.reduce_variance`: mean squared deviation from the mean over `axis`."""
    with name_scope(name, "reduce_variance", [input_tensor]):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        means = reduce_mean(x, axis, keepdims=True)
        return reduce_mean(square(x - means), axis, keepdims=keepdims)


def reduce_std(input_tensor, axis=None, keepdims: bool = False,
               name: Optional[str] = None) -> Tensor:
    """`tf.math.reduce_std`: the square root of `reduce_variance`."""
    from jitflow.ops.math.unary import sqrt
    with name_scope(name, "reduce_std", [input_tensor]):
        return sqrt(reduce_variance(input_tensor, axis, keepdims))


def count_nonzero(input_tensor, axis=None, keepdims=None, dtype=_dtypes.int64,
                  name: Optional[str] = None, reduction_indices=None,
                  keep_dims=None) -> Tensor:
    """`tf.count_nonzero`: how many elements over `axis` are not zero (int64 by default)."""
    axis = _legacy(axis, reduction_indices, "axis", "reduction_indices")
    keepdims = bool(_legacy(keepdims, keep_dims, "keepdims", "keep_dims"))
    with name_scope(name, "count_nonzero", [input_tensor]):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        zero = scalar_like(False if x.dtype.is_bool else 0, x)
        nz = cast(not_equal(x, zero), _dtypes.int64)
        return cast(reduce_sum(nz, axis, keepdims=keepdims), dtype)


# -- ArgMax / ArgMin -----------------------------------------------------------------------------
def _arg_infer(op):
    x = op.inputs[0]
    check_dtype(op, x, _NUMERIC, "input")
    a = op.attrs["axis"]
    if x.shape.ndims is None:
        return [(op.attrs["output_type"], TensorShape(None))]
    dims = x.shape.as_tuple()
    return [(op.attrs["output_type"], TensorShape(dims[:a] + dims[a + 1:]))]


def _arg_ref(npfn):
    def ref(op, x):
        x = np.asarray(x)
        if x.shape[op.attrs["axis"]] == 0:
            raise ValueError(f"Reduction axis {op.attrs['axis']} is empty in shape {x.shape}")
        return npfn(x, axis=op.attrs["axis"]).astype(op.attrs["output_type"].as_numpy_dtype)
    return ref


def _arg_examples(fn, npfn):
    return [Example(lambda a: fn(a, axis=1), [(3, 4)], lambda a: npfn(a, axis=1),
                    ("float32", "float64", "int32"), grad=False, id="ax1"),
            Example(lambda a: fn(a, 0, output_type="int32"), [(3, 4)],
                    lambda a: npfn(a, axis=0), grad=False, id="ax0_int32"),
            Example(lambda a: fn(a, dimension=-1), [(2, 3, 4)], lambda a: npfn(a, axis=-1),
                    grad=False, id="dimension")]


def _lower_arg(low, op, pos: int) -> None:
    """ArgMax/ArgMin: an "argmax"/"argmin" reduction along attr axis; along an axis other than
    the last, of a view of the stored input with that axis moved last."""
    how = op.type.lower()
    r = op.inputs[0].shape.ndims
    a = op.attrs["axis"] % r
    if a == r - 1:
        return low.reduce(op, pos, how, (op.attrs["axis"],), False)
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    perm = [k for k in range(r) if k != a] + [a]
    axes = [0] * r
    for j, k in enumerate(perm):
        axes[k] = j
    ones = tuple(src.ones[k] for k in perm)
    dims = tuple(src.dims[k] for k in perm)
    v = low.buf(out.dtype.name, ones[:-1], dims[:-1])
    low.emit(Reduce(v, Load(src, tuple(axes)), dims, ones, (r - 1,), how, pos, src.dtype))
    low.set(out, v)


def _arg_lowerable(op) -> bool:
    r = op.inputs[0].shape.ndims
    return (r is not None and r >= 1 and isinstance(op.attrs.get("axis"), (int, np.integer))
            and op.inputs[0].dtype.name != "bool")


register("ArgMax", infer=_arg_infer, ref=_arg_ref(np.argmax), differentiable=False,
         lower=_lower_arg, lowerable=_arg_lowerable, inline=True,
         kind="reduce", doc="Index of the first largest element along attr axis.",
         examples=_arg_examples(lambda *a, **k: argmax(*a, **k), np.argmax))
register("ArgMin", infer=_arg_infer, ref=_arg_ref(np.argmin), differentiable=False,
         lower=_lower_arg, lowerable=_arg_lowerable, inline=True,
         kind="reduce", doc="Index of the first smallest element along attr axis.",
         examples=_arg_examples(lambda *a, **k: argmin(*a, **k), np.argmin))


def _arg(op_type, input, axis, name, dimension, output_type):
    axis = _legacy(axis, dimension, "axis", "dimension")
    axis = 0 if axis is None else _static_axis(axis)
    if isinstance(axis, (list, tuple)):
        if len(axis) != 1:
            raise ValueError(f"{op_type} takes one axis, got {axis!r}")
        axis = axis[0]
    x = convert_to_tensor(input, name="input")
    (a,) = normalize_axis(x, int(axis), "argmax/argmin")
    out_type = _dtypes.as_dtype(output_type)
    if out_type not in (_dtypes.int32, _dtypes.int64):
        raise TypeError(f"output_type must be int32 or int64, got {out_type.name}")
    return make_op(op_type, [x], {"axis": a, "output_type": out_type},
                   name=name or op_type).outputs[0]


def argmax(input, axis=None, name: Optional[str] = None, dimension=None,
           output_type=_dtypes.int64) -> Tensor:
    """`tf.argmax`: index of the largest value along `axis` (default 0; legacy `dimension`)."""
    return _arg("ArgMax", input, axis, name, dimension, output_type)


def argmin(input, axis=None, name: Optional[str] = None, dimension=None,
           output_type=_dtypes.int64) -> Tensor:
    """`tf.argmin`: index of the smallest value along `axis` (default 0; legacy `dimension`)."""
    return _arg("ArgMin", input, axis, name, dimension, output_type)


def arg_max(input, dimension, output_type=_dtypes.int64,  # noqa: A002
            name: Optional[str] = None) -> Tensor:
    """`tf.arg_max`, TF1's older spelling of `tf.argmax` (`dimension` is required)."""
    return _arg("ArgMax", input, None, name, dimension, output_type)


def arg_min(input, dimension, output_type=_dtypes.int64,  # noqa: A002
            name: Optional[str] = None) -> Tensor:
    """`tf.arg_min`, TF1's older spelling of `tf.argmin` (`dimension` is required)."""
    return _arg("ArgMin", input, None, name, dimension, output_type)
