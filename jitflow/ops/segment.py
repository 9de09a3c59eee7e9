"""Segment reductions (`tf.segment_sum` .. `tf.unsorted_segment_sqrt_n`, `tf.sparse_segment_*`)
and the special functions and small compositions of `tf.math` that TF1 programs use
(`lgamma`, `digamma`, `erfc`, `polygamma`, `xlogy`, `bincount`, `confusion_matrix`, ...).

Segment ops reduce the rows of `data` that share a segment id. The sorted forms (`segment_*`)
have as many output rows as the largest id plus one; the unsorted forms take `num_segments`
(empty segments give the reduction's identity: 0 for sums, the dtype's lowest/highest value for
max/min, 1 for products, as TF). Their references run on every backend; gradients follow TF.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

_SEGMENT = ["segment_sum", "segment_mean", "segment_max", "segment_min", "segment_prod",
            "unsorted_segment_max", "unsorted_segment_min", "unsorted_segment_prod",
            "unsorted_segment_mean", "unsorted_segment_sqrt_n"]
_SPECIAL = ["lgamma", "digamma", "erfc", "polygamma", "lbeta", "xlogy", "xdivy",
            "multiply_no_nan", "reciprocal_no_nan", "divide_no_nan", "bincount",
            "confusion_matrix", "is_non_decreasing", "is_strictly_increasing",
            "reduce_euclidean_norm", "cumulative_logsumexp", "polyval", "zero_fraction"]
__all__ = _SEGMENT + ["sparse_segment_sum", "sparse_segment_mean", "sparse_segment_sqrt_n",
                      "lgamma", "digamma", "erfc", "polygamma", "lbeta", "bincount",
                      "confusion_matrix", "is_non_decreasing", "is_strictly_increasing"]
NAMESPACES = {"math": _SEGMENT + _SPECIAL,
              "sparse": [("segment_sum", "sparse_segment_sum"),
                         ("segment_mean", "sparse_segment_mean"),
                         ("segment_sqrt_n", "sparse_segment_sqrt_n")]}

_HOW = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def _identity(how: str, dtype) -> object:
    dt = np.dtype(dtype)
    if how in ("sum", "mean", "sqrt_n"):
        return 0
    if how == "prod":
        return 1
    if dt.kind == "f":
        return -np.inf if how == "max" else np.inf
    info = np.iinfo(dt)
    return info.min if how == "max" else info.max


def _segment_infer(op):
    data, ids = op.inputs[:2]
    if not ids.dtype.is_integer:
        raise TypeError(f"segment_ids of '{op.name}' must be int32 or int64, got "
                        f"{ids.dtype.name}")
    dd, idd = data.shape.as_tuple(), ids.shape.as_tuple()
    if dd is not None and idd is not None:
        if len(idd) > len(dd) or any(a is not None and b is not None and a != b
                                     for a, b in zip(dd, idd)):
            raise ValueError(f"segment_ids shape {ids.shape} must be a prefix of data shape "
                             f"{data.shape} for '{op.name}'")
    n = op.attrs.get("num_segments")
    if dd is None or idd is None:
        return [(data.dtype, TensorShape(None))]
    return [(data.dtype, TensorShape([n] + list(dd[len(idd):])))]


def _segment_ref(op, data, ids):
    data, ids = np.asarray(data), np.asarray(ids)
    how = op.attrs["how"]
    n = op.attrs.get("num_segments")
    flat = ids.reshape(-1)
    rows = data.reshape((flat.size,) + data.shape[ids.ndim:])
    if op.type == "SegmentReduce":
        if flat.size and (np.any(flat < 0) or np.any(np.diff(flat) < 0)):
            raise errors.InvalidArgumentError(
                None, op, f"segment ids are not increasing\n\t [[node {op.name}]]")
        n = int(flat.max()) + 1 if flat.size else 0
    else:
        if np.any(flat >= n):
            bad = int(flat[flat >= n][0])
            raise errors.InvalidArgumentError(
                None, op, f"segment_ids[{int(np.argmax(flat >= n))}] = {bad} is out of range "
                          f"[0, {n})\n\t [[node {op.name}]]")
        keep = flat >= 0  # negative ids are dropped
        flat, rows = flat[keep], rows[keep]
    base = "sum" if how in ("mean", "sqrt_n") else how
    out = np.full((n,) + rows.shape[1:], _identity(base, data.dtype), dtype=data.dtype)
    _HOW[base].at(out, flat, rows)
    if how in ("mean", "sqrt_n"):
        counts = np.bincount(flat, minlength=n).astype(np.float64)
        div = counts if how == "mean" else np.sqrt(counts)
        div = np.maximum(div, 1).reshape((n,) + (1,) * (rows.ndim - 1))
        out = (out / div).astype(data.dtype)
    if op.type == "SegmentReduce" and how in ("max", "min"):
        empty = np.bincount(flat, minlength=n) == 0
        out[empty] = 0  # TF's sorted max/min give 0 for an id with no rows
    return out


def _counts(op, ids, data, n_rows: Tensor):
    from jitflow.ops.sources import ones_like
    ones = ones_like(ids, dtype=data.dtype)
    return _make(op.type, "sum", ones, ids, op.attrs.get("num_segments"), None)


def _segment_grad(op, g):
    from jitflow.ops.slicing import gather
    from jitflow.ops.math.casting import cast
    from jitflow.ops.math.compare import equal
    from jitflow.ops.math.unary import sqrt
    data, ids = op.inputs
    how = op.attrs["how"]
    safe_ids = ids
    if op.type == "UnsortedSegmentReduce":
        from jitflow.ops.math.common import scalar_like
        from jitflow.ops.math.compare import maximum
        safe_ids = maximum(ids, scalar_like(0, ids))  # dropped rows get no gradient (masked)
    if how == "sum":
        grad = gather(g, safe_ids)
    elif how in ("mean", "sqrt_n"):
        c = _counts(op, ids, data, None)
        c = _expand_like(c, g)
        grad = gather(g / (c if how == "mean" else sqrt(c)), safe_ids)
    elif how in ("max", "min"):
        y = op.outputs[0]
        picked = equal(data, gather(y, safe_ids))
        mask = cast(picked, data.dtype)
        chosen = _make(op.type, "sum", mask, ids, op.attrs.get("num_segments"), None)
        grad = gather(g / chosen, safe_ids) * mask
    else:
        grad = make_op("SegmentProdGrad", [data, ids, g], dict(op.attrs),
                       name="SegmentProdGrad").outputs[0]
        return [grad, None]
    if op.type == "UnsortedSegmentReduce":
        from jitflow.ops.math.common import scalar_like
        from jitflow.ops.math.compare import greater_equal, where_v2
        from jitflow.ops.sources import zeros_like
        keep = greater_equal(ids, scalar_like(0, ids))
        grad = where_v2(_expand_like(keep, grad), grad, zeros_like(grad))
    return [grad, None]


def _expand_like(t: Tensor, like: Tensor) -> Tensor:
    """`t` with trailing unit dims so it broadcasts against `like`'s rows."""
    from jitflow.ops.shape_ops import expand_dims
    extra = (like.shape.ndims or 1) - (t.shape.ndims or 1)
    for _ in range(max(extra, 0)):
        t = expand_dims(t, -1)
    return t


def _prod_grad_ref(op, data, ids, g):
    data, ids, g = np.asarray(data), np.asarray(ids), np.asarray(g)
    flat = ids.reshape(-1)
    rows = data.reshape((flat.size,) + data.shape[ids.ndim:])
    out = np.zeros_like(rows)
    for s in np.unique(flat[flat >= 0]):
        idx = np.flatnonzero(flat == s)
        block = rows[idx]
        for j, k in enumerate(idx):  # the product of the other rows of the segment
            others = np.prod(np.delete(block, j, axis=0), axis=0)
            out[k] = g[s] * others
    return out.reshape(data.shape)


register("SegmentProdGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_prod_grad_ref, differentiable=False, kind="other",
         doc="Inputs (data, segment_ids, output gradient): each row's gradient is the "
             "product of the other rows of its segment times the segment's gradient.")

_EX_IDS = np.array([0, 0, 1, 2], np.int32)  # no empty segment: finite differences
for _t in ("SegmentReduce", "UnsortedSegmentReduce"):
    register(_t, infer=_segment_infer, ref=_segment_ref, grad=_segment_grad, kind="other",
             doc="Inputs (data, segment_ids): the rows of each segment reduced by attr "
                 "`how` (sum, mean, max, min, prod, sqrt_n).",
             examples=[Example(lambda d, how=h, t=_t: _make(t, how, d, _EX_IDS,
                                                            3 if t != "SegmentReduce" else None,
                                                            None),
                               [(4, 3)], lambda d, how=h: _np_segment(d, _EX_IDS, how, 3),
                               domain="nonzero", id=h)
                       for h in ("sum", "mean", "max", "prod")])


def _np_segment(d, ids, how, n):
    out = []
    for s in range(n):
        rows = d[ids == s]
        if how == "sum":
            out.append(rows.sum(0))
        elif how == "mean":
            out.append(rows.mean(0))
        elif how == "max":
            out.append(rows.max(0))
        else:
            out.append(rows.prod(0))
    return np.array(out)


def _make(op_type: str, how: str, data, segment_ids, num_segments, name):
    d = data if isinstance(data, Tensor) else convert_to_tensor(data, name="data")
    i = segment_ids if isinstance(segment_ids, Tensor) else convert_to_tensor(
        segment_ids, name="segment_ids")
    attrs = {"how": how}
    if op_type == "UnsortedSegmentReduce":
        from jitflow.ops._array_args import _int_list_arg
        static, dyn = _int_list_arg(num_segments, "num_segments")
        if dyn is not None:
            raise TypeError("num_segments must be known when the graph is built")
        attrs["num_segments"] = static[0]
    return make_op(op_type, [d, i], attrs, name=name or op_type).outputs[0]


def _sorted(how: str):
    def fn(data, segment_ids, name: Optional[str] = None) -> Tensor:
        with name_scope(name, f"Segment{how.capitalize()}", [data, segment_ids]) as scope:
            return _make("SegmentReduce", how, data, segment_ids, None, scope[:-1])
    fn.__name__ = f"segment_{how}"
    fn.__doc__ = (f"`tf.segment_{how}`: the {how} of the rows of `data` sharing a segment id "
                  "(ids sorted; as many rows as the largest id plus one).")
    return fn


def _unsorted(how: str):
    def fn(data, segment_ids, num_segments, name: Optional[str] = None) -> Tensor:
        with name_scope(name, f"UnsortedSegment{how.capitalize()}",
                        [data, segment_ids]) as scope:
            return _make("UnsortedSegmentReduce", how, data, segment_ids, num_segments,
                         scope[:-1])
    fn.__name__ = f"unsorted_segment_{how}"
    fn.__doc__ = (f"`tf.unsorted_segment_{how}`: the {how} of the rows of `data` per segment "
                  "id in [0, num_segments) (negative ids dropped).")
    return fn


segment_sum, segment_mean, segment_max, segment_min, segment_prod = (
    _sorted(h) for h in ("sum", "mean", "max", "min", "prod"))
(unsorted_segment_max, unsorted_segment_min, unsorted_segment_prod, unsorted_segment_mean,
 unsorted_segment_sqrt_n) = (_unsorted(h) for h in ("max", "min", "prod", "mean", "sqrt_n"))


def _sparse_segment(how: str):
    def fn(data, indices, segment_ids, name: Optional[str] = None,
           num_segments=None) -> Tensor:
        from jitflow.ops.slicing import gather
        with name_scope(name, f"SparseSegment{how.capitalize()}", [data, indices,
                                                                   segment_ids]) as scope:
            rows = gather(data, indices)
            if num_segments is not None:
                return _make("UnsortedSegmentReduce", how, rows, segment_ids, num_segments,
                             scope[:-1])
            return _make("SegmentReduce", how, rows, segment_ids, None, scope[:-1])
    fn.__name__ = f"sparse_segment_{how}"
    fn.__doc__ = (f"`tf.sparse.segment_{how}`: segment_{how} of the rows of `data` at "
                  "`indices`.")
    return fn


sparse_segment_sum, sparse_segment_mean, sparse_segment_sqrt_n = (
    _sparse_segment(h) for h in ("sum", "mean", "sqrt_n"))


# -- special functions ----------------------------------------------------------------------------
_FLOAT_TYPES = ("float16", "float32", "float64")


def _special_infer(op):
    for t in op.inputs:
        if t.dtype.name not in _FLOAT_TYPES:
            raise TypeError(f"Value passed to parameter 'x' has DataType {t.dtype.name} not in "
                            f"list of allowed values: {', '.join(_FLOAT_TYPES)}")
    if len(op.inputs) == 2:
        from jitflow.core.shapes import broadcast_static
        return [(op.inputs[1].dtype, broadcast_static(op.inputs[0].shape, op.inputs[1].shape))]
    return [(op.inputs[0].dtype, op.inputs[0].shape)]


def _scipy():
    import scipy.special
    return scipy.special


def _typed(fn):
    return lambda op, *xs: np.asarray(fn(*xs)).astype(op.outputs[0].dtype.as_numpy_dtype)


register("Lgamma", infer=_special_infer, ref=_typed(lambda x: _scipy().gammaln(x)),
         grad=lambda op, g: [g * digamma(op.inputs[0])], kind="elementwise",
         doc="log |Gamma(x)|.",
         examples=[Example(lambda x: lgamma(x), [(3, 2)],
                           lambda x: _scipy().gammaln(x), domain="positive")])
register("Digamma", infer=_special_infer, ref=_typed(lambda x: _scipy().digamma(x)),
         grad=lambda op, g: [g * polygamma(1.0, op.inputs[0])], kind="elementwise",
         doc="The derivative of lgamma.",
         examples=[Example(lambda x: digamma(x), [(3, 2)],
                           lambda x: _scipy().digamma(x), domain="positive")])


def _polygamma_ref(a, x):
    a, x = np.broadcast_arrays(np.asarray(a), np.asarray(x))
    return _scipy().polygamma(a.astype(int), x)


def _polygamma_grad(op, g):
    from jitflow.ops.math.arithmetic import add
    from jitflow.ops.math.common import scalar_like
    a, x = op.inputs
    return [None, g * polygamma(add(a, scalar_like(1, a)), x)]


register("Polygamma", infer=_special_infer, ref=_typed(_polygamma_ref), grad=_polygamma_grad,
         kind="elementwise", doc="The a-th derivative of digamma at x.",
         examples=[Example(lambda x: polygamma(2.0, x), [(3,)],
                           lambda x: _scipy().polygamma(2, x), domain="positive")])


def _erfc_grad(op, g):
    from jitflow.ops.math.common import scalar_like
    from jitflow.ops.math.unary import exp, square
    x = op.inputs[0]
    return [g * scalar_like(-2.0 / np.sqrt(np.pi), x) * exp(-square(x))]


register("Erfc", infer=_special_infer, ref=_typed(lambda x: _scipy().erfc(x)), grad=_erfc_grad,
         kind="elementwise", doc="1 - erf(x), accurate for large x.",
         examples=[Example(lambda x: erfc(x), [(2, 3)], lambda x: _scipy().erfc(x))])


def _unary(op_type: str, x, name, default: str) -> Tensor:
    with name_scope(name, default, [x]) as scope:
        t = convert_to_tensor(x, name="x")
        return make_op(op_type, [t], name=scope[:-1]).outputs[0]


def lgamma(x, name: Optional[str] = None) -> Tensor:
    """`tf.lgamma`: log of the absolute value of Gamma(x)."""
    return _unary("Lgamma", x, name, "Lgamma")


def digamma(x, name: Optional[str] = None) -> Tensor:
    """`tf.digamma`: d/dx lgamma(x)."""
    return _unary("Digamma", x, name, "Digamma")


def erfc(x, name: Optional[str] = None) -> Tensor:
    """`tf.erfc`: the complementary error function."""
    return _unary("Erfc", x, name, "Erfc")


def polygamma(a, x, name: Optional[str] = None) -> Tensor:
    """`tf.polygamma`: the a-th derivative of digamma (a a non-negative integer value)."""
    from jitflow.ops.math.common import convert_pair
    with name_scope(name, "Polygamma", [a, x]) as scope:
        a, x = convert_pair(a, x)
        return make_op("Polygamma", [a, x], name=scope[:-1]).outputs[0]


def lbeta(x, name: Optional[str] = None) -> Tensor:
    """`tf.math.lbeta`: log of the multivariate Beta function along the last axis."""
    from jitflow.ops.reduce import reduce_sum
    with name_scope(name, "lbeta", [x]):
        x = convert_to_tensor(x, name="x")
        return reduce_sum(lgamma(x), axis=-1) - lgamma(reduce_sum(x, axis=-1))


# -- compositions ---------------------------------------------------------------------------------
def _zero_where(cond, value):
    from jitflow.ops.sources import zeros_like
    from jitflow.ops.math.compare import where_v2
    return where_v2(cond, zeros_like(value), value)


def xlogy(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.math.xlogy`: x * log(y), and 0 where x is 0."""
    from jitflow.ops.math.common import convert_pair, scalar_like
    from jitflow.ops.math.compare import equal
    from jitflow.ops.math.unary import log
    with name_scope(name, "xlogy", [x, y]):
        x, y = convert_pair(x, y)
        return _zero_where(equal(x, scalar_like(0, x)), x * log(y))


def xdivy(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.math.xdivy`: x / y, and 0 where x is 0."""
    from jitflow.ops.math.common import convert_pair, scalar_like
    from jitflow.ops.math.compare import equal
    with name_scope(name, "xdivy", [x, y]):
        x, y = convert_pair(x, y)
        return _zero_where(equal(x, scalar_like(0, x)), x / y)


def multiply_no_nan(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.math.multiply_no_nan`: x * y, and 0 where y is 0 (even if x is inf or nan)."""
    from jitflow.ops.math.common import convert_pair, scalar_like
    from jitflow.ops.math.compare import equal
    with name_scope(name, "multiply_no_nan", [x, y]):
        x, y = convert_pair(x, y)
        return _zero_where(equal(y, scalar_like(0, y)), x * y)


def reciprocal_no_nan(x, name: Optional[str] = None) -> Tensor:
    """`tf.math.reciprocal_no_nan`: 1 / x, and 0 where x is 0."""
    from jitflow.ops.math.arithmetic import div_no_nan
    from jitflow.ops.math.common import scalar_like
    x = convert_to_tensor(x, name="x")
    return div_no_nan(scalar_like(1, x), x, name=name or "reciprocal_no_nan")


def divide_no_nan(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.math.divide_no_nan`: x / y, and 0 where y is 0."""
    from jitflow.ops.math.arithmetic import div_no_nan
    return div_no_nan(x, y, name=name)


def reduce_euclidean_norm(input_tensor, axis=None, keepdims: bool = False,
                          name: Optional[str] = None) -> Tensor:
    """`tf.math.reduce_euclidean_norm`: sqrt of the sum of squares along `axis`."""
    from jitflow.ops.math.unary import sqrt, square
    from jitflow.ops.reduce import reduce_sum
    with name_scope(name, "reduce_euclidean_norm", [input_tensor]):
        return sqrt(reduce_sum(square(convert_to_tensor(input_tensor)), axis=axis,
                               keepdims=keepdims))


def _monotone(x, strict: bool, name) -> Tensor:
    from jitflow.ops.shape_ops import reshape
    from jitflow.ops.math.compare import greater, greater_equal
    from jitflow.ops.reduce import reduce_all
    with name_scope(name, "is_strictly_increasing" if strict else "is_non_decreasing", [x]):
        flat = reshape(convert_to_tensor(x), [-1])
        diff = (greater if strict else greater_equal)(flat[1:], flat[:-1])
        return reduce_all(diff)


def is_non_decreasing(x, name: Optional[str] = None) -> Tensor:
    """`tf.math.is_non_decreasing`: whether x (flattened) never decreases."""
    return _monotone(x, False, name)


def is_strictly_increasing(x, name: Optional[str] = None) -> Tensor:
    """`tf.math.is_strictly_increasing`: whether x (flattened) always increases."""
    return _monotone(x, True, name)


def cumulative_logsumexp(x, axis=0, exclusive: bool = False, reverse: bool = False,
                         name: Optional[str] = None) -> Tensor:
    """`tf.math.cumulative_logsumexp`: log(cumsum(exp(x))) along `axis`, shifted by the
    maximum so large values do not overflow."""
    from jitflow.ops.math.common import stop_gradient
    from jitflow.ops.math.cumulative import cumsum
    from jitflow.ops.math.unary import exp, log
    from jitflow.ops.reduce import reduce_max
    with name_scope(name, "CumulativeLogsumexp", [x]):
        x = convert_to_tensor(x, name="x")
        m = stop_gradient(reduce_max(x, axis=axis, keepdims=True))
        return log(cumsum(exp(x - m), axis=axis, exclusive=exclusive, reverse=reverse)) + m


def polyval(coeffs, x, name: Optional[str] = None) -> Tensor:
    """`tf.math.polyval`: coeffs[0] * x^(n-1) + ... + coeffs[n-1] (Horner's rule)."""
    with name_scope(name, "polyval", [x]):
        x = convert_to_tensor(x, name="x")
        if not coeffs:
            from jitflow.ops.sources import zeros_like
            return zeros_like(x)
        acc = convert_to_tensor(coeffs[0], dtype=None if isinstance(coeffs[0], Tensor)
                                else x.dtype)
        for c in coeffs[1:]:
            acc = acc * x + c
        return acc


def zero_fraction(value, name: Optional[str] = None) -> Tensor:
    """`tf.math.zero_fraction`: the fraction of zeros in `value`."""
    from jitflow.ops.nn.basic import zero_fraction as zf
    return zf(value, name=name)


def _bincount_infer(op):
    return [(op.attrs["dtype"], TensorShape([None]))]


def _bincount_ref(op, arr, *rest):
    arr = np.asarray(arr).reshape(-1)
    if arr.size and arr.min() < 0:
        raise errors.InvalidArgumentError(None, op, "Input arr must be non-negative!")
    w = np.asarray(rest[0]).reshape(-1) if op.attrs["weighted"] else None
    n = int(arr.max()) + 1 if arr.size else 0
    lo, hi = op.attrs["minlength"], op.attrs["maxlength"]
    if lo is not None:
        n = max(n, lo)
    if hi is not None:
        n = min(n, hi)
        keep = arr < hi
        arr = arr[keep]
        w = None if w is None else w[keep]
    return np.bincount(arr, weights=w, minlength=n)[:n].astype(
        op.attrs["dtype"].as_numpy_dtype)


register("Bincount", infer=_bincount_infer, ref=_bincount_ref, differentiable=False,
         kind="other", doc="Counts (or summed weights) of each value of a non-negative int "
                           "array.")


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=_dtypes.int32,
             name: Optional[str] = None, axis=None, binary_output: bool = False) -> Tensor:
    """`tf.math.bincount`: how often each value 0..max(arr) occurs (or the sum of `weights`
    there), between `minlength` and `maxlength` long."""
    if axis is not None or binary_output:
        raise NotImplementedError("bincount: axis and binary_output are not supported")
    with name_scope(name, "bincount", [arr, weights]) as scope:
        a = convert_to_tensor(arr, name="arr")
        ins = [a]
        dt = _dtypes.as_dtype(dtype)
        if weights is not None:
            w = convert_to_tensor(weights, name="weights")
            ins.append(w)
            dt = w.dtype
        attrs = {"weighted": weights is not None, "dtype": dt,
                 "minlength": None if minlength is None else int(minlength),
                 "maxlength": None if maxlength is None else int(maxlength)}
        return make_op("Bincount", ins, attrs, name=scope[:-1]).outputs[0]


def confusion_matrix(labels, predictions, num_classes=None, weights=None,
                     dtype=_dtypes.int32, name: Optional[str] = None) -> Tensor:
    """`tf.math.confusion_matrix`: counts (or weights) of each (label, prediction) pair, a
    [num_classes, num_classes] matrix (num_classes from the data when None)."""
    from jitflow.ops.join import stack
    from jitflow.ops.scatter import scatter_nd
    from jitflow.ops.sources import ones_like
    from jitflow.ops.math.casting import cast
    from jitflow.ops.math.compare import maximum
    from jitflow.ops.reduce import reduce_max
    with name_scope(name, "confusion_matrix", [labels, predictions, weights]):
        lab = cast(convert_to_tensor(labels, name="labels"), _dtypes.int64)
        pred = cast(convert_to_tensor(predictions, name="predictions"), _dtypes.int64)
        if num_classes is None:
            n = maximum(reduce_max(lab), reduce_max(pred)) + 1
        else:
            n = convert_to_tensor(np.int64(num_classes)) if not isinstance(num_classes, Tensor) \
                else cast(num_classes, _dtypes.int64)
        dt = _dtypes.as_dtype(dtype)
        values = ones_like(lab, dtype=dt) if weights is None else \
            cast(convert_to_tensor(weights, name="weights"), dt)
        return scatter_nd(stack([lab, pred], axis=1), values, stack([n, n]))
