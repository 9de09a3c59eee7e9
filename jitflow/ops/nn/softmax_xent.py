"""Softmax and log-softmax, their lowering into the kernel IR, and the cross-entropies
(`softmax_cross_entropy_with_logits` and `_v2`, the sparse form, `sigmoid_` and
`weighted_cross_entropy_with_logits`).

Softmax, LogSoftmax and the two softmax cross-entropy ops have kind "row": each output element
depends on one whole row (the slice along attr `axis`, normally the last), so they lower into
one `ir.RowOp` per op, from which a code generator emits one loop nest per row (max, sum of
exps, then the outputs). Their references subtract the row maximum, so large logits give no
overflow.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.compiler.ir import X0, X1, Apply, Check, Lit, Load, Loop, RangeCheck, RowOp, S
from jitflow.compiler.lower import Pending, Unsupported, const_dim, is_static, static_size
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.arithmetic import add
from jitflow.ops.math.casting import cast
from jitflow.ops.math.common import (
    _FLOATS, broadcast_reduced, check_dtype, scalar_like, stop_gradient, unbroadcast,
)
from jitflow.ops.math.compare import greater_equal, where_v2
from jitflow.ops.math.unary import abs, exp, log1p
from jitflow.ops.nn.activations import relu
from jitflow.ops.reduce import _legacy, normalize_axis, reduce_sum
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape, broadcast_static, shape_tf_str

__all__: list = []

NAMESPACES = {
    "nn": [
        "softmax", "log_softmax", "softmax_cross_entropy_with_logits",
        "softmax_cross_entropy_with_logits_v2", "sparse_softmax_cross_entropy_with_logits",
        "sigmoid_cross_entropy_with_logits", "weighted_cross_entropy_with_logits",
    ],
    "math": [
        "softmax", "log_softmax",
    ],
}


# -- softmax and log-softmax ----------------------------------------------------------------------
def _np_shifted(x, axis):
    """(z, lse): the logits less their row max, and log(sum(exp(z))) along `axis`."""
    x = np.asarray(x)
    # `initial`: an empty row (a size-0 axis) has no max; its result is empty, as in TF
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    z = x - np.where(np.isfinite(m), m, 0)
    return z, np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def _np_log_softmax(x, axis):
    z, lse = _np_shifted(x, axis)
    return z - lse


def _np_softmax(x, axis):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    e = np.exp(x - np.where(np.isfinite(m), m, 0))
    return e / np.sum(e, axis=axis, keepdims=True)


def _row_infer(op):
    x = op.inputs[0]
    check_dtype(op, x, _FLOATS, "logits")
    if x.shape.ndims == 0:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0 for '{op.name}' "
                         f"(op: '{op.type}') with input shapes: [].")
    return [(x.dtype, x.shape)]


def _softmax_grad(op, g):
    y, axis = op.outputs[0], op.attrs["axis"]
    s = reduce_sum(g * y, axis, keepdims=True)
    return [(g - s) * y]


def _log_softmax_grad(op, g):
    y, axis = op.outputs[0], op.attrs["axis"]
    return [g - exp(y) * reduce_sum(g, axis, keepdims=True)]


def _row_examples(fn, npfn):
    return [Example(lambda a: fn(a), [(3, 4)], lambda a: npfn(a, -1), id="last"),
            Example(lambda a: fn(a, axis=0), [(3, 4)], lambda a: npfn(a, 0), id="axis0"),
            Example(lambda a: fn(a, dim=1), [(2, 3, 4)], lambda a: npfn(a, 1), id="dim")]


# -- lowering of the softmax family into the kernel IR --------------------------------------------
def _lower_row(how: str):
    """Softmax ("softmax"), LogSoftmax ("log_softmax") and the cross-entropies ("xent",
    "sparse_xent") as one `ir.RowOp` over the rows of their last axis; along another axis,
    rows of a transposed copy; over an axis of size 1, elementwise."""
    def lower(low, op, pos: int) -> None:
        if how in ("softmax", "log_softmax") and op.attrs["axis"] not in (
                -1, op.inputs[0].shape.ndims - 1):
            return _lower_row_inner_axis(low, op, pos, how)
        x = low.value(op.inputs[0], pos)
        if how in ("xent", "sparse_xent"):
            # no classes: TF raises (see _no_classes), so such runs are the reference's
            c = x.dims[-1]
            if is_static(c) and static_size(c) == 0:
                raise Unsupported("cross-entropy over no classes")
            low.check_in_range(1, c, const_dim(1 << 62), pos, "Must have at least one class")
        if x.ones[-1] and how == "sparse_xent":
            raise Unsupported("sparse xent over a unit axis")
        labels = None
        if how == "xent":
            labels = _dense_labels(low, op, pos, x)
            if x.ones[-1]:
                return _lower_row_unit(low, op, pos, how, x, labels)
        elif x.ones[-1]:
            return _lower_row_unit(low, op, pos, how, x, None)
        elif how == "sparse_xent":
            labels = low.value(op.inputs[1], pos)
            if labels.kind != "in" or labels.ones != x.ones[:-1]:
                raise Unsupported("sparse xent labels must be an input")
            for a, b in zip(labels.dims, x.dims[:-1]):
                if a != b:
                    low.checks.append(Check(a, b, pos, "Incompatible shapes"))
            low.checks.append(RangeCheck(labels, x.dims[-1], pos, "Received a label value "
                                         "outside the valid range"))
        outs = []
        for i, t in enumerate(op.outputs):
            loss = how in ("xent", "sparse_xent") and i == 0
            ones, dims = (x.ones[:-1], x.dims[:-1]) if loss else (x.ones, x.dims)
            if low.is_fed(t) or not low.uses.get(t, 0):
                outs.append(None)
                if not low.is_fed(t):  # only its shape may be asked for
                    low.set(t, Pending(Lit(0, t.dtype.name), t.dtype.name, ones, dims,
                                       frozenset(), pos, consumed=True))
                continue
            v = low.buf(t.dtype.name, ones, dims)
            outs.append(v)
            low.set(t, v)
        if any(o is not None for o in outs):
            low.emit(RowOp(how, outs, x, labels, pos))
    return lower


def _dense_labels(low, op, pos: int, x):
    """The labels of a dense cross-entropy: stored, of the logits' shape (checked)."""
    lab = low.value(op.inputs[1], pos)
    if lab.ones != x.ones:
        raise Unsupported("xent labels broadcast")
    for a, b in zip(lab.dims, x.dims):
        if a != b:
            low.checks.append(Check(a, b, pos, "Incompatible shapes"))
    return lab


def _lower_row_unit(low, op, pos: int, how: str, x, lab) -> None:
    """A softmax-family op over an axis of size 1 is elementwise: softmax is exp(x - x)
    (1, or NaN where x is not finite, as the row formula gives), log_softmax x - x, the
    cross-entropy loss labels * (x - x) + 0 and its backprop exp(x - x) - labels."""
    r, dt = x.rank, x.dtype
    reads = frozenset(v.var_op for v in (x, lab) if v is not None and v.kind == "var")
    drop = tuple(range(r - 1)) + (0,)   # loads of a row result: the unit axis is index 0
    for i, t in enumerate(op.outputs):
        loss = how == "xent" and i == 0
        ones, dims = (x.ones[:-1], x.dims[:-1]) if loss else (x.ones, x.dims)
        if low.is_fed(t) or not low.uses.get(t, 0):
            if not low.is_fed(t):
                low.set(t, Pending(Lit(0, dt), dt, ones, dims, frozenset(), pos, consumed=True))
            continue
        if how == "softmax":
            expr = Apply(S.exp(S.sub(X0, X0)), [Load(x)], dt, pos, True)
        elif how == "log_softmax":
            expr = Apply(S.sub(X0, X0), [Load(x)], dt, pos)
        elif loss:
            # TF's labels * (lse - z) summed from +0: here lse = 0 and z = x - x
            expr = Apply(S.add(S.mul(X0, S.sub(X1, X1)), 0.0), [Load(lab, drop), Load(x, drop)],
                         dt, pos)
        else:
            expr = Apply(S.sub(S.exp(S.sub(X1, X1)), X0), [Load(lab), Load(x)], dt, pos, True)
        low.place(t, Pending(expr, dt, ones, dims, reads, pos), pos)


def _lower_row_inner_axis(low, op, pos: int, how: str) -> None:
    """Softmax/LogSoftmax along an axis other than the last: rows of a transposed copy."""
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    perm = tuple(k for k in range(r) if k != a) + (a,)   # axis `a` last
    axes = [0] * r
    for j, k in enumerate(perm):
        axes[k] = j
    ones = tuple(src.ones[k] for k in perm)
    dims = tuple(src.dims[k] for k in perm)
    if ones[-1]:  # one element per row: 1 (log: 0), nan where x is not finite
        fn = S.add(S.sub(X0, X0), X1) if how == "softmax" else S.sub(X0, X0)
        expr = Apply(fn, [Load(src), Lit(1, src.dtype)], src.dtype, pos)
        low.place(out, Pending(expr, src.dtype, src.ones, src.dims, low.reads_of(src), pos),
                  pos)
        return
    xt = low.buf(src.dtype, ones, dims)
    low.emit(Loop(xt, Load(src, tuple(axes)), pos))
    yt = low.buf(out.dtype.name, ones, dims)
    low.emit(RowOp(how, [yt], xt, None, pos))
    # yt's dim j is the source's dim perm[j]: read it back in the source's axis order
    low.place(out, Pending(Load(yt, perm), yt.dtype, src.ones, src.dims, frozenset(), pos), pos)


def _row_lowerable(op) -> bool:
    r = op.inputs[0].shape.ndims
    if r is None or r < 1 or op.inputs[0].dtype.name not in _FLOATS:
        return False
    if op.type == "SparseSoftmaxCrossEntropyWithLogits":
        return True
    if op.type == "SoftmaxCrossEntropyWithLogits":
        return op.attrs.get("axis") in (r - 1, -1) and op.inputs[1].shape.ndims == r
    return -r <= op.attrs["axis"] < r


register("Softmax", infer=_row_infer, ref=lambda op, x: _np_softmax(x, op.attrs["axis"]),
         grad=_softmax_grad, kind="row", lower=_lower_row("softmax"), lowerable=_row_lowerable,
         doc="exp(x) / sum(exp(x)) along attr axis.",
         examples=_row_examples(lambda a, **k: softmax(a, **k),
                                lambda a, ax: np.exp(a) / np.exp(a).sum(ax, keepdims=True)))
register("LogSoftmax", infer=_row_infer,
         ref=lambda op, x: _np_log_softmax(x, op.attrs["axis"]), grad=_log_softmax_grad,
         kind="row", lower=_lower_row("log_softmax"), lowerable=_row_lowerable,
         doc="x - log(sum(exp(x))) along attr axis.",
         examples=_row_examples(lambda a, **k: log_softmax(a, **k),
                                lambda a, ax: a - np.log(np.exp(a).sum(ax, keepdims=True))))


def _row_op(op_type, logits, axis, name, dim):
    axis = _legacy(axis, dim, "axis", "dim")
    with name_scope(name, op_type, [logits]) as scope:
        x = convert_to_tensor(logits, name="logits")
        if axis not in (None, -1) and x.shape.ndims is None:
            # TF1 swaps the axis to the end, which needs the rank: it fails while building
            raise TypeError(f"{op_type} over axis {axis} needs logits of known rank; "
                            f"'{x.name}' has unknown rank")
        (a,) = normalize_axis(x, -1 if axis is None else axis, "softmax")
        return make_op(op_type, [x], {"axis": a}, name=scope).outputs[0]


def softmax(logits, axis=None, name: Optional[str] = None, dim=None) -> Tensor:
    """`tf.nn.softmax` along `axis` (default the last; legacy `dim`) (op `Softmax`)."""
    return _row_op("Softmax", logits, axis, name, dim)


def log_softmax(logits, axis=None, name: Optional[str] = None, dim=None) -> Tensor:
    """`tf.nn.log_softmax` along `axis` (default the last; legacy `dim`) (op `LogSoftmax`)."""
    return _row_op("LogSoftmax", logits, axis, name, dim)


# -- cross entropy --------------------------------------------------------------------------------
def _xent_infer(op):
    logits, labels = op.inputs
    check_dtype(op, logits, _FLOATS, "features")
    if labels.dtype != logits.dtype:
        raise TypeError(f"Input 'labels' of '{op.type}' Op has type {labels.dtype.name} that "
                        f"does not match type {logits.dtype.name} of argument 'features'.")
    shape = broadcast_static(logits.shape, labels.shape, f" for '{op.name}' (op: '{op.type}')")
    if shape.ndims is None and logits.shape.ndims is not None:
        # labels of unknown rank: TF's loss takes the logits' shape (its wrapper reshapes the
        # loss to them); only their 1s may broadcast to more (fuzz seed 23004303)
        shape = TensorShape([None if d == 1 else d for d in logits.shape.as_tuple()])
    if shape.ndims is not None and shape.ndims != logits.shape.ndims:
        raise ValueError(f"labels of shape {labels.shape} must not have a higher rank than "
                         f"logits of shape {logits.shape} for '{op.name}'")
    axis = op.attrs["axis"]
    loss = TensorShape(None) if shape.ndims is None else TensorShape(
        [d for i, d in enumerate(shape.as_tuple()) if i != axis])
    return [(logits.dtype, loss), (logits.dtype, shape)]


def _no_classes(logits, sparse: bool, axis: int = -1) -> None:
    """TF's errors for cross-entropies over a class axis of size 0. Its wrappers flatten the
    logits to [-1, classes] by Reshape's rule (the -1 taken from the input's non-zero dims),
    the sparse kernel then refuses zero classes, and the dense loss is reshaped back to the
    outer dims, which fails where one of them is 0 (fuzz seed 23001741)."""
    shape = np.shape(logits)
    if not shape or shape[axis] != 0 or (not sparse and len(shape) < 2):
        return
    rows = shape[0] if sparse and len(shape) == 2 else int(np.prod([d for d in shape if d]))
    if sparse:
        raise ValueError(f"Must have at least one class, but got logits shape [{rows},0]")
    if 0 in shape[:axis % len(shape)] + shape[axis % len(shape) + 1:]:
        raise ValueError(f"Input to reshape is a tensor with {rows} values, but the requested "
                         f"shape has 0")


def _xent_ref(op, logits, labels):
    axis = op.attrs["axis"]
    _no_classes(logits, False, axis)
    z, lse = _np_shifted(logits, axis)
    # TF's form, sum(labels * (lse - z)) accumulated from +0: a row whose terms are all zeros
    # gives +0, whatever the labels' signs
    loss = np.sum(labels * (lse - z), axis=axis, initial=0).astype(z.dtype, copy=False)
    return loss, np.exp(z - lse) - labels


def _xent_grad(op, g_loss, g_backprop=None):
    logits, labels = op.inputs
    if g_loss is None:
        return [None, None]
    axis = op.attrs["axis"]
    g = broadcast_reduced(g_loss, op.outputs[1], (axis,))
    g_logits = unbroadcast(g * op.outputs[1], logits)
    g_labels = unbroadcast(-g * log_softmax(logits, axis=axis), labels)
    return [g_logits, g_labels]


# labels of the v1 example: a constant (v1 gives labels no gradient), rows summing to 1
_V1_LABELS = np.linspace(0.1, 1.0, 30).reshape(2, 3, 5)
_V1_LABELS = _V1_LABELS / _V1_LABELS.sum(axis=-1, keepdims=True)


def _np_xent(labels, logits, axis=-1):
    logits = logits.astype(np.float64)
    lse = np.log(np.sum(np.exp(logits), axis=axis, keepdims=True))
    return -np.sum(labels * (logits - lse), axis=axis)


register("SoftmaxCrossEntropyWithLogits", infer=_xent_infer, ref=_xent_ref, grad=_xent_grad,
         kind="row", lower=_lower_row("xent"), lowerable=_row_lowerable,
         doc="Inputs (logits, labels); outputs the loss per row and its gradient "
             "softmax(logits) - labels (the `backprop` output).",
         examples=[Example(lambda lab, lg: softmax_cross_entropy_with_logits_v2(
                               labels=softmax(lab), logits=lg), [(3, 4), (3, 4)],
                           lambda lab, lg: _np_xent(_np_softmax(lab, -1), lg), id="v2"),
                   Example(lambda lab, lg: softmax_cross_entropy_with_logits_v2(
                               labels=softmax(lab, axis=0), logits=lg, axis=0), [(3, 4), (3, 4)],
                           lambda lab, lg: _np_xent(_np_softmax(lab, 0), lg, 0), id="axis0"),
                   Example(lambda lg: softmax_cross_entropy_with_logits(
                               labels=_V1_LABELS, logits=lg), [(2, 3, 5)],
                           lambda lg: _np_xent(_V1_LABELS, lg), id="v1_rank3")])


def _sparse_xent_infer(op):
    logits, labels = op.inputs
    check_dtype(op, logits, _FLOATS, "features")
    check_dtype(op, labels, ("int32", "int64"), "labels")
    lr, br = logits.shape.ndims, labels.shape.ndims
    if lr is not None and br is not None:
        if br != lr - 1:
            raise ValueError(f"Rank mismatch: Rank of labels (received {br}) should equal rank "
                             f"of logits minus 1 (received {lr}).")
        if not TensorShape(logits.shape.as_tuple()[:-1]).is_compatible_with(labels.shape):
            raise ValueError(f"Shapes {shape_tf_str(labels.shape)} and "
                             f"{shape_tf_str(logits.shape)} are incompatible for '{op.name}': "
                             f"labels must have the shape of logits without the last axis")
    loss = TensorShape(None) if lr is None else TensorShape(logits.shape.as_tuple()[:-1])
    if br is not None:
        loss = loss.merge_with(labels.shape)
    return [(logits.dtype, loss), (logits.dtype, logits.shape)]


def _sparse_xent_ref(op, logits, labels):
    logits, labels = np.asarray(logits), np.asarray(labels)
    _no_classes(logits, True)
    n = logits.shape[-1]
    bad = (labels < 0) | (labels >= n)
    if np.any(bad):
        v = labels[bad].flat[0]
        raise ValueError(f"Received a label value of {v} which is outside the valid range of "
                         f"[0, {n}).  Label values: {' '.join(map(str, labels.flat))}")
    z, lse = _np_shifted(logits, -1)
    picked = np.take_along_axis(z, labels[..., None].astype(np.intp), axis=-1)[..., 0]
    onehot = np.arange(n) == labels[..., None]
    return lse[..., 0] - picked, np.exp(z - lse) - onehot


def _sparse_xent_grad(op, g_loss, g_backprop=None):
    if g_loss is None:
        return [None, None]
    bp = op.outputs[1]
    rank = bp.shape.ndims
    return [broadcast_reduced(g_loss, bp, (-1,) if rank is None else (rank - 1,)) * bp, None]


_SPARSE_LABELS = np.array([0, 2, 1, 2], dtype=np.int32)


def _np_sparse_xent(logits, labels):
    logits = logits.astype(np.float64)
    lse = np.log(np.sum(np.exp(logits), axis=-1))
    return lse - np.take_along_axis(logits, labels[..., None], -1)[..., 0]


register("SparseSoftmaxCrossEntropyWithLogits", infer=_sparse_xent_infer, ref=_sparse_xent_ref,
         grad=_sparse_xent_grad, kind="row", lower=_lower_row("sparse_xent"),
         lowerable=_row_lowerable,
         doc="Inputs (logits, int labels); outputs the loss per row and softmax - onehot.",
         examples=[Example(lambda lg: sparse_softmax_cross_entropy_with_logits(
                               labels=_SPARSE_LABELS, logits=lg), [(4, 3)],
                           lambda lg: _np_sparse_xent(lg, _SPARSE_LABELS)),
                   Example(lambda lg: sparse_softmax_cross_entropy_with_logits(
                               labels=np.int64([[1, 0], [3, 2]]), logits=lg), [(2, 2, 4)],
                           lambda lg: _np_sparse_xent(lg, np.int64([[1, 0], [3, 2]])),
                           id="rank3")])


def softmax_cross_entropy_with_logits_v2(labels, logits, axis=None, name: Optional[str] = None,
                                         dim=None) -> Tensor:
    """`tf.nn.softmax_cross_entropy_with_logits_v2`: -sum(labels * log_softmax(logits)) along
    `axis`; differentiable with respect to both logits and labels. As in TF, the logits
    gradient is softmax(logits) - labels, exact when each row of labels sums to 1."""
    axis = _legacy(axis, dim, "axis", "dim")
    with name_scope(name, "softmax_cross_entropy_with_logits", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=None if isinstance(labels, Tensor)
                                   else logits.dtype, name="labels")
        if labels.dtype != logits.dtype:
            labels = cast(labels, logits.dtype)  # TF casts the labels to the logits' dtype
        lr, br = logits.shape.ndims, labels.shape.ndims
        # same shapes (or ranks unknown when the graph is built): the op itself, along `axis`
        if lr is None or br is None or (lr == br
                                        and logits.shape.is_compatible_with(labels.shape)):
            (a,) = normalize_axis(logits, -1 if axis is None else axis, "softmax")
            op = make_op("SoftmaxCrossEntropyWithLogits", [logits, labels], {"axis": a},
                         name=scope)
            return op.outputs[0]
        return _xent_flattened(labels, logits, axis, scope)


def _xent_flattened(labels: Tensor, logits: Tensor, axis, scope: str) -> Tensor:
    """TF's rule for labels and logits of other shapes: both are flattened to
    [-1, classes] (classes along the last axis), the 2-D op broadcasts them, and the loss takes
    the shape of the logits without their last axis (labels [b, 1, c] with logits [b, c] run;
    an outer size that is neither equal nor 1 is an error)."""
    from jitflow.ops.shape_ops import reshape, shape as shape_of
    from jitflow.ops.slicing import strided_slice
    lr = logits.shape.ndims
    if axis is not None and axis != -1 and (lr is None or axis != lr - 1):
        raise ValueError(f"softmax_cross_entropy_with_logits: axis {axis} needs labels of the "
                         f"logits' shape {logits.shape}, got {labels.shape}")

    def flat(t: Tensor) -> Tensor:
        dims = t.shape.as_tuple()
        if dims is not None and len(dims) >= 1 and dims[-1] is not None:
            return reshape(t, [-1, dims[-1]])
        return reshape(t, stack_shape(t))

    def stack_shape(t: Tensor) -> Tensor:
        from jitflow.ops.join import concat
        last = strided_slice(shape_of(t), [-1], [0], [1], end_mask=1)
        return concat([np.array([-1], np.int32), last], 0)

    cost = make_op("SoftmaxCrossEntropyWithLogits", [flat(logits), flat(labels)],
                   {"axis": 1}, name="SoftmaxCrossEntropyWithLogits").outputs[0]
    dims = logits.shape.as_tuple()
    if dims is not None and sum(d is None for d in dims[:-1]) <= 1:
        return reshape(cost, [-1 if d is None else d for d in dims[:-1]], name=scope)
    out_shape = strided_slice(shape_of(logits), [0], [-1], [1], begin_mask=1)
    out = reshape(cost, out_shape, name=scope)
    if dims is not None:
        out.set_shape(dims[:-1])
    return out


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1,
                                      name: Optional[str] = None, axis=None) -> Tensor:
    """`tf.nn.softmax_cross_entropy_with_logits` (TF1, deprecated form): as `_v2`, but no
    gradient flows into `labels`."""
    if _sentinel is not None:
        raise ValueError("Only call `softmax_cross_entropy_with_logits` with named arguments "
                         "(labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    axis = axis if axis is not None else dim
    with name_scope(name, "softmax_cross_entropy_with_logits_sg", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=None if isinstance(labels, Tensor)
                                   else logits.dtype, name="labels")
        labels = stop_gradient(labels, name="labels_stop_gradient")
        return softmax_cross_entropy_with_logits_v2(labels, logits, axis=axis, name=scope)


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                             name: Optional[str] = None) -> Tensor:
    """`tf.nn.sparse_softmax_cross_entropy_with_logits`: labels are class indices (int32 or
    int64) of rank one less than logits; an index outside [0, classes) is an
    InvalidArgumentError when the graph runs."""
    if _sentinel is not None:
        raise ValueError("Only call `sparse_softmax_cross_entropy_with_logits` with named "
                         "arguments (labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    with name_scope(name, "SparseSoftmaxCrossEntropyWithLogits", [labels, logits]) as scope:
        labels = convert_to_tensor(labels, name="labels")
        logits = convert_to_tensor(logits, name="logits")
        op = make_op("SparseSoftmaxCrossEntropyWithLogits", [logits, labels], name=scope)
        return op.outputs[0]


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                      name: Optional[str] = None) -> Tensor:
    """`tf.nn.sigmoid_cross_entropy_with_logits`: max(x, 0) - x * z + log(1 + exp(-|x|)),
    the form that neither overflows nor loses precision for large |x|."""
    if _sentinel is not None:
        raise ValueError("Only call `sigmoid_cross_entropy_with_logits` with named arguments "
                         "(labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    with name_scope(name, "logistic_loss", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=None if isinstance(labels, Tensor)
                                   else logits.dtype, name="labels")
        if labels.dtype != logits.dtype:
            raise TypeError(f"labels ({labels.dtype.name}) and logits ({logits.dtype.name}) "
                            "must have the same dtype")
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"logits and labels must have the same shape ({logits.shape} vs "
                             f"{labels.shape})")
        zero = scalar_like(0, logits)
        cond = greater_equal(logits, zero)
        relu_logits = where_v2(cond, logits, zero)
        neg_abs_logits = where_v2(cond, -logits, logits)
        return add(relu_logits - logits * labels, log1p(exp(neg_abs_logits)), name=scope)


def weighted_cross_entropy_with_logits(labels=None, logits=None, pos_weight=None,
                                       name: Optional[str] = None, targets=None) -> Tensor:
    """`tf.nn.weighted_cross_entropy_with_logits`: sigmoid cross-entropy whose positive term
    is weighted by `pos_weight`, in the stable form
    (1 - z) * x + (1 + (q - 1) * z) * (log(1 + exp(-|x|)) + max(-x, 0))."""
    labels = _legacy(labels, targets, "labels", "targets")
    if labels is None or logits is None or pos_weight is None:
        raise ValueError("labels, logits and pos_weight must be given")
    with name_scope(name, "logistic_loss", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=None if isinstance(labels, Tensor)
                                   else logits.dtype, name="targets")
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"logits and targets must have the same shape ({logits.shape} vs "
                             f"{labels.shape})")
        one = scalar_like(1, logits)
        log_weight = one + (pos_weight - one) * labels
        return add((one - labels) * logits,
                   log_weight * (log1p(exp(-abs(logits))) + relu(-logits)), name=scope)
