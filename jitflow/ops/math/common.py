"""What the math ops share, and the helpers other op modules import.

- the dtype groups (`_FLOATS`, `_INTS`, `_NUMERIC`) and the shared rules: `check_dtype` (TF1's
  build-time TypeError), the shape rules `binary_infer`/`unary_infer`, operand conversion
  (`convert_pair`, `_tf_operand_order`), `binary_op`/`unary_op` (an op in a scope named as TF1
  names it), `scalar_like` and `_binary_examples` (the registry examples of a binary op);
- `unbroadcast`: a gradient summed back to an input's shape (op `Unbroadcast`; its gradient
  is `BroadcastLike`), used by the gradient of every broadcasting op;
- `broadcast_reduced`: a reduction result broadcast back over the reduced axes (op
  `BroadcastReduced`, the gradient of reductions);
- `add_n`/`accumulate_n` (op `AddN`, which also sums gradients) and `stop_gradient`.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.compiler.ir import X0, Check, Load
from jitflow.compiler.lower import Pending, Unsupported
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import broadcast_static

__all__ = [
    "unbroadcast", "binary_op", "unary_op", "add_n", "stop_gradient", "accumulate_n",
]

NAMESPACES = {
    "math": [
        "add_n", "accumulate_n",
    ],
}


_FLOATS = ("float16", "float32", "float64")
_INTS = ("int8", "int16", "int32", "int64", "uint8")
_NUMERIC = _FLOATS + _INTS


# -- shared rules ---------------------------------------------------------------------------------
def check_dtype(op, t: Tensor, allowed, arg: str = "x") -> None:
    """TF1's build-time TypeError for an input dtype an op does not support."""
    if t.dtype.name not in allowed:
        raise TypeError(f"Value passed to parameter '{arg}' has DataType {t.dtype.name} not in "
                        f"list of allowed values: {', '.join(allowed)} (op '{op.type}')")


def binary_infer(op, out_dtype=None, allowed=None):
    """Both inputs of one dtype; the output broadcasts their shapes."""
    x, y = op.inputs
    if x.dtype != y.dtype:
        raise TypeError(f"Input 'y' of '{op.type}' Op has type {y.dtype.name} that does not "
                        f"match type {x.dtype.name} of argument 'x'.")
    if allowed is not None:
        check_dtype(op, x, allowed)
    shape = broadcast_static(x.shape, y.shape, f" for '{op.name}' (op: '{op.type}')")
    return [(out_dtype or x.dtype, shape)]


def unary_infer(op, allowed=None, out_dtype=None):
    x = op.inputs[0]
    if allowed is not None:
        check_dtype(op, x, allowed)
    return [(out_dtype or x.dtype, x.shape)]


def _binary_rule(allowed=None, out_dtype=None):
    return lambda op: binary_infer(op, out_dtype, allowed)


def _unary_rule(allowed=None, out_dtype=None):
    return lambda op: unary_infer(op, allowed, out_dtype)


def convert_pair(x, y):
    """Convert two operands; a Python/NumPy value takes the dtype of the tensor beside it.

    Constants made here are named `x`/`y` inside the current scope, as TF1 names them.
    """
    x_is_t = isinstance(x, Tensor) or hasattr(x, "_to_tensor")
    y_is_t = isinstance(y, Tensor) or hasattr(y, "_to_tensor")
    if x_is_t and y_is_t:
        # two tensors keep their dtypes: a mismatch is the op's TypeError, as in TF1
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y")
    elif x_is_t:
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=x.dtype.base_dtype, name="y")
    elif y_is_t:
        y = convert_to_tensor(y, name="y")
        x = convert_to_tensor(x, dtype=y.dtype.base_dtype, name="x")
    else:
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=x.dtype, name="y")
    return x, y


def _tf_operand_order(op_type: str, x, y) -> None:
    """TF converts a function's operands in order: a Python or NumPy first operand keeps its
    own dtype (a float is float32, an int int32), so a tensor second operand of another dtype
    is a TypeError (`tf.add(1.5, x_float64)`). The operators (`1.5 + x`) convert the Python side
    to the tensor's dtype instead, and so does `tf.divide`."""
    x_is_t = isinstance(x, Tensor) or hasattr(x, "_to_tensor")
    y_is_t = isinstance(y, Tensor) or hasattr(y, "_to_tensor")
    if x_is_t or not y_is_t or getattr(y, "dtype", None) is None:
        return
    if isinstance(x, (np.ndarray, np.generic)):
        name = x.dtype.name
    else:
        try:
            kind = np.asarray(x).dtype.kind
        except Exception:  # noqa: BLE001  (left to the conversion's own error)
            return
        name = {"f": "float32", "i": "int32", "u": "int32", "b": "bool",
                "c": "complex128"}.get(kind)
    want = y.dtype.base_dtype.name
    if name is not None and name != want:
        raise TypeError(f"Input 'y' of '{op_type}' Op has type {want} that does not match "
                        f"type {name} of argument 'x'.")


def binary_op(op_type: str, x, y, name: Optional[str] = None,
              default_name: Optional[str] = None) -> Tensor:
    """Create a binary op in a scope named like the op (TF1: `mul/y` then `mul`)."""
    with name_scope(name, default_name or op_type, [x, y]) as scope:
        x, y = convert_pair(x, y)
        return make_op(op_type, [x, y], name=scope).outputs[0]


def unary_op(op_type: str, x, name: Optional[str] = None,
             default_name: Optional[str] = None) -> Tensor:
    with name_scope(name, default_name or op_type, [x]) as scope:
        x = convert_to_tensor(x, name="x")
        return make_op(op_type, [x], name=scope).outputs[0]


def scalar_like(value, t: Tensor) -> Tensor:
    """A rank-0 constant of `t`'s dtype (for gradient rules and composed ops)."""
    return convert_to_tensor(np.asarray(value, dtype=t.dtype.as_numpy_dtype), name="Const")


# -- unbroadcast: sum a gradient back to an input's shape -----------------------------------------
def unbroadcast_axes(g_ones, x_ones) -> tuple:
    """The axes of a gradient (axis k of g is 1 where g_ones[k]) that Unbroadcast sums to
    reach an input of x_ones' rank: the leading ones, and those where x is 1 and g is not."""
    lead = len(g_ones) - len(x_ones)
    return tuple(range(lead)) + tuple(
        k + lead for k, one in enumerate(x_ones) if one and not g_ones[k + lead])


def _unbroadcast_ref(op, g, x):
    shape = np.shape(x)
    g = np.asarray(g)
    if g.shape == shape:
        return g
    axes = unbroadcast_axes([d == 1 for d in g.shape], [d == 1 for d in shape])
    return np.sum(g, axis=axes, keepdims=False).reshape(shape).astype(g.dtype, copy=False)


def _lower_unbroadcast(low, op, pos: int) -> None:
    """A sum over the broadcast axes (`ir.Reduce`); with none, an inlinable identity."""
    g, x = op.inputs
    _, _, g_ones, g_dims, _ = low.expr(g, shape_only=True)
    _, _, x_ones, x_dims, _ = low.expr(x, shape_only=True)
    lead = len(g_ones) - len(x_ones)
    if lead < 0:
        raise Unsupported("unbroadcast to a higher rank")
    axes = unbroadcast_axes(g_ones, x_ones)
    for k, one in enumerate(x_ones):
        if not one and not g_ones[k + lead] and g_dims[k + lead] != x_dims[k]:
            low.checks.append(Check(g_dims[k + lead], x_dims[k], pos, "Incompatible shapes"))
    if not axes and lead == 0:
        # the same shape (checked above): described by g's dims, so that a stored g is shared
        # rather than copied
        src = low.expr(g)
        low.identity_of(op, pos, src, x_ones, src.dims if src.ones == x_ones else x_dims)
        return
    low.reduce(op, pos, "sum", axes, False, out_dims=(x_ones, x_dims))


def _unbroadcast_reduced_axes(op):
    g, x = (t.shape.as_tuple() for t in op.inputs[:2])
    if g is None or x is None:
        return None
    if len(g) < len(x):   # not a valid Unbroadcast: its lowering refuses it
        return ()
    return unbroadcast_axes([d == 1 for d in g], [d == 1 for d in x])


register("Unbroadcast",
         infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         ref=_unbroadcast_ref, grad=lambda op, g: [_broadcast_like(g, op.inputs[0]), None],
         lower=_lower_unbroadcast, shape_only=(1,), inline=True,
         kind="reduce", reduced_axes=_unbroadcast_reduced_axes,
         doc="Sum input 0 over the axes along which it was broadcast from input 1's shape "
             "(the gradient of broadcasting).",
         examples=[Example(lambda g, x: unbroadcast(g, x), [(2, 3), (1, 3)],
                           lambda g, x: g.sum(axis=0, keepdims=True), id="keep"),
                   Example(lambda g, x: unbroadcast(g, x), [(4, 2, 3), (2, 1)],
                           lambda g, x: g.sum(axis=(0, 2))[:, None], id="lead")])


def _broadcast_like_ref(op, x, like):
    return np.broadcast_to(x, np.shape(like)).copy()


register("BroadcastLike",
         infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         ref=_broadcast_like_ref,
         grad=lambda op, g: [unbroadcast(g, op.inputs[0]), None],
         kind="elementwise", scalar=X0,
         doc="Broadcast input 0 to input 1's shape (input 1 only gives the shape).",
         examples=[Example(lambda a, b: broadcast_like(a, b), [(3,), (2, 3)],
                           lambda a, b: np.broadcast_to(a, b.shape))])


def _broadcast_like(x: Tensor, like: Tensor) -> Tensor:
    if x.shape.is_fully_defined() and x.shape == like.shape:
        return x
    return make_op("BroadcastLike", [x, like], name="BroadcastLike").outputs[0]


def broadcast_like(x: Tensor, like: Tensor) -> Tensor:
    """`x` broadcast (NumPy rules) to the shape of `like` (which only gives the shape)."""
    return _broadcast_like(x, like)


def zeros_like_of(t: Tensor) -> Tensor:
    """Zeros with `t`'s dtype and (run-time) shape, as a broadcast scalar."""
    return _broadcast_like(scalar_like(0, t), t)


def unbroadcast(grad: Optional[Tensor], x: Tensor) -> Optional[Tensor]:
    """Reduce `grad` (shaped like a broadcast result) to the shape of input `x`."""
    if grad is None:
        return None
    if grad.shape.is_fully_defined() and grad.shape == x.shape:
        return grad
    return make_op("Unbroadcast", [grad, x], name="Unbroadcast").outputs[0]


# -- BroadcastReduced: re-insert reduced axes (gradient of reductions) ----------------------------
def _broadcast_reduced_infer(op):
    g, like = op.inputs
    return [(g.dtype, like.shape)]


def _broadcast_reduced_ref(op, g, like):
    g = np.asarray(g)
    shape = np.shape(like)
    keep = list(shape)
    for a in op.attrs["axis"]:
        keep[a] = 1
    return np.broadcast_to(g.reshape(keep), shape).copy()


def _broadcast_reduced_grad(op, g):
    from jitflow.ops.reduce import reduce_sum
    return [reduce_sum(g, axis=list(op.attrs["axis"])), None]


def _lower_broadcast_reduced(low, op, pos: int) -> None:
    """A load of the stored reduction result with its reduced axes mapped away (`Load.axes`),
    inlined into the consumer."""
    g, like = op.inputs
    _, _, l_ones, l_dims, _ = low.expr(like, shape_only=True)
    rank = len(l_ones)
    axes = tuple(sorted(a + rank if a < 0 else a for a in op.attrs["axis"]))
    out = op.outputs[0]
    lit = low.literal(g)
    if lit is not None:
        # a scalar (the gradient of a rank-0 loss) broadcast to `like`'s shape
        if not low.is_fed(out):
            low.place(out, Pending(lit, lit.dtype, tuple(l_ones), l_dims, frozenset(), pos),
                      pos)
        return
    gv = low.value(g, pos)
    if gv.rank == rank:
        amap = tuple(range(rank))
    elif gv.rank == rank - len(axes):
        amap = tuple(k for k in range(rank) if k not in axes)
    else:
        raise Unsupported("BroadcastReduced ranks")
    for j, k in enumerate(amap):
        if not gv.ones[j] and not l_ones[k] and gv.dims[j] != l_dims[k]:
            low.checks.append(Check(gv.dims[j], l_dims[k], pos, "Incompatible shapes"))
    if low.is_fed(out):
        return
    low.place(out, Pending(Load(gv, amap), gv.dtype, tuple(l_ones), l_dims, frozenset(), pos),
              pos)


register("BroadcastReduced", infer=_broadcast_reduced_infer, ref=_broadcast_reduced_ref,
         grad=_broadcast_reduced_grad, kind="other",
         lower=_lower_broadcast_reduced, shape_only=(1,), inline=(1,),
         doc="Insert size-1 axes `axis` into input 0 (a reduction result without keepdims) and "
             "broadcast it to input 1's shape: the gradient of a reduction.",
         examples=[Example(lambda g, x: broadcast_reduced(g, x, (1,)), [(2, 4), (2, 3, 4)],
                           lambda g, x: np.broadcast_to(g[:, None, :], x.shape)),
                   Example(lambda g, x: broadcast_reduced(g, x, (0, 2)), [(3,), (2, 3, 4)],
                           lambda g, x: np.broadcast_to(g[None, :, None], x.shape), id="two")])


def broadcast_reduced(g: Tensor, like: Tensor, axis) -> Tensor:
    """Undo a reduction's shape: `g` with the reduced `axis` re-inserted, broadcast to `like`."""
    return make_op("BroadcastReduced", [g, like], {"axis": tuple(axis)},
                   name="BroadcastReduced").outputs[0]


# -- AddN, StopGradient ---------------------------------------------------------------------------
def _add_n_infer(op):
    first = op.inputs[0]
    shape = first.shape
    for t in op.inputs[1:]:
        if t.dtype != first.dtype:
            raise TypeError(f"Inputs of 'AddN' must all have one dtype: got {first.dtype.name} "
                            f"and {t.dtype.name}")
        if not shape.is_compatible_with(t.shape):
            raise ValueError(f"Shapes must be equal rank, but are {shape} and {t.shape} for "
                             f"'{op.name}' (op: 'AddN')")
        shape = shape.merge_with(t.shape)
    check_dtype(op, first, _NUMERIC, "inputs")
    return [(first.dtype, shape)]


def _add_n_ref(op, *xs):
    out = np.array(xs[0], copy=True)
    for x in xs[1:]:
        out = out + x
    return out


register("AddN", infer=_add_n_infer, ref=_add_n_ref,
         grad=lambda op, g: [g] * len(op.inputs), kind="elementwise",
         scalar="add",
         examples=[Example(lambda a, b, c: add_n([a, b, c]), [(2, 3)] * 3,
                           lambda a, b, c: a + b + c, ("float32", "float64", "int32")),
                   Example(lambda a, b: add_n([a, b]), [(4,), (4,)],
                           lambda a, b: a + b, id="two")])


def add_n(inputs, name: Optional[str] = None) -> Tensor:
    """`tf.add_n`: the elementwise sum of a list of same-shaped tensors (op `AddN`)."""
    if isinstance(inputs, Tensor) or not inputs:
        raise ValueError("inputs must be a list of at least one Tensor with the same dtype "
                         "and shape")
    inputs = [convert_to_tensor(x) for x in inputs]
    if len(inputs) == 1:
        from jitflow.ops.identity import identity
        return identity(inputs[0], name=name) if name else inputs[0]
    return make_op("AddN", inputs, name=name or "AddN").outputs[0]


register("StopGradient", infer=unary_infer, ref=lambda op, x: np.asarray(x),
         differentiable=False, kind="elementwise", scalar=X0,
         doc="Identity whose input receives no gradient.",
         examples=[Example(lambda a: stop_gradient(a), [(2, 3)], lambda a: a,
                           ("float32", "float64", "int32"), grad=False)])


def stop_gradient(input, name: Optional[str] = None) -> Tensor:
    """`tf.stop_gradient`: the value of `input`, treated as a constant by `tf.gradients`."""
    x = convert_to_tensor(input)
    return make_op("StopGradient", [x], name=name or "StopGradient").outputs[0]


def _binary_examples(fn, npfn, dtypes=("float32", "float64", "int32"), domain="real",
                     grad=True):
    """Same-shape, broadcast and scalar cases for a binary op."""
    return [
        Example(lambda a, b: fn(a, b), [(2, 3), (2, 3)], npfn, dtypes, domain, grad, id="same"),
        Example(lambda a, b: fn(a, b), [(2, 3), (3,)], npfn, dtypes, domain, grad, id="bcast"),
        Example(lambda a, b: fn(a, b), [(4, 1), (1, 3)], npfn, dtypes, domain, grad, id="outer"),
        Example(lambda a, b: fn(a, b), [(2, 3), ()], npfn, dtypes, domain, grad, id="scalar"),
    ]


def accumulate_n(inputs, shape=None, tensor_dtype=None, name: Optional[str] = None) -> Tensor:
    """`tf.accumulate_n`: the elementwise sum of `inputs` (an `AddN`)."""
    return add_n(inputs, name=name)
