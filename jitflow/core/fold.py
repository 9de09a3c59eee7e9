"""The one static evaluator: values and shapes of tensors known without running the graph.

One iterative walk (`_evaluate`) over a tensor's producers answers three questions:

- `static_value(t)`: the value of `t` at build time (TF1's `constant_value`), by the ops'
  NumPy references on constants, the shapes of fully defined tensors and a few small
  shape-arithmetic ops (at most 8 ops deep: it never walks a long chain);
- `partial_shape(t)`: the shape a 1-D int tensor describes, None where unknown at build time
  (`tf.reshape(x, tf.stack([n, -1]))`);
- `shape_of(t, env, state)`: the run-time shape of `t` from the shapes of the feeds and
  variables, by the ops' own static shape rules (`OpDef.infer`) -- what lets a random op whose
  shape argument is `tf.shape(h)` draw before a native call; `computable(t, fed)` says at plan
  time whether it can answer (every unknown dim set to one stand-in size).

Imports no session and no compiler: graph building and the compiler both use it.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from jitflow.core.graph import Tensor
from jitflow.core.shapes import TensorShape

__all__ = ["static_value", "partial_shape", "shape_of", "computable", "MAX_OPS"]

#: ops whose references fold at build time when every input's value is known
FOLDABLE = {"Identity", "Pack", "StridedSlice", "Cast", "ConcatV2", "Reshape", "Slice",
            "GatherV2", "Add", "Sub", "Mul", "Range", "Fill", "ExpandDims", "Squeeze"}
MAX_OPS = 512          # ops walked back from the tensor whose shape is wanted
_VALUE_DEPTH = 8       # ops folded back from the tensor whose value is wanted
_STAND_IN = 7          # the size every unknown dim takes when `computable` tries the rules
_UNKNOWN = object()    # the walk cannot say


def _evaluate(t, leaf: Callable, rule: Callable, limit: int):
    """The evaluation of `t`: `leaf(u)` gives a tensor's result directly (or None to apply its
    op's `rule(op, [input results]) -> [output results]`, or `_UNKNOWN`); iterative, at most
    `limit` ops deep. Returns `_UNKNOWN` when some leaf or rule cannot say."""
    known: dict = {}
    stack = [(t, 0)]
    while stack:
        u, depth = stack[-1]
        if u in known:
            stack.pop()
            continue
        r = leaf(u)
        if r is _UNKNOWN:
            return _UNKNOWN
        if r is not None:
            known[u] = r
            stack.pop()
            continue
        op = u.op
        missing = [x for x in op.inputs if x not in known]
        if missing:
            if depth >= limit:
                return _UNKNOWN
            stack.extend((x, depth + 1) for x in missing)
            continue
        stack.pop()
        outs = rule(op, [known[x] for x in op.inputs])
        if outs is _UNKNOWN:
            return _UNKNOWN
        for out, r in zip(op.outputs, outs):
            known[out] = r
        if u not in known:
            return _UNKNOWN
    return known[t]


# -- values -------------------------------------------------------------------------------------
def _value_leaf(t):
    if not isinstance(t, Tensor):
        return None if hasattr(t, "_to_tensor") else np.asarray(t)
    op = t.op
    if op.type == "Const":
        return op.attrs["value"]
    npd = t.dtype.as_numpy_dtype if t.dtype.is_numpy_compatible else None
    x = op.inputs[t.value_index] if op.type == "ShapeN" else op.inputs[0] if op.inputs else None
    if op.type in ("Shape", "ShapeN") and x.shape.is_fully_defined():
        return np.array(x.shape.as_list(), dtype=npd)
    if op.type == "Size" and x.shape.is_fully_defined():
        return np.array(x.shape.num_elements(), dtype=npd)
    if op.type == "Rank" and x.shape.ndims is not None:
        return np.array(x.shape.ndims, dtype=npd)
    if op.type not in FOLDABLE or len(op.outputs) != 1:
        return _UNKNOWN
    return None


def _value_rule(op, vals):
    t = op.outputs[0]
    npd = t.dtype.as_numpy_dtype if t.dtype.is_numpy_compatible else None
    try:
        return [np.asarray(op.op_def.ref(op, *vals), dtype=npd)]
    except Exception:  # noqa: BLE001  (a runtime error stays a runtime error)
        return _UNKNOWN


def static_value(t, depth: int = _VALUE_DEPTH) -> Optional[np.ndarray]:
    """The value of `t` when it is known at build time, else None (see the module doc)."""
    if not isinstance(t, Tensor):
        return _value_leaf(t)
    r = _evaluate(t, _value_leaf, _value_rule, depth)
    return None if r is _UNKNOWN else r


def partial_shape(t: Tensor) -> TensorShape:
    """The shape a 1-D int tensor describes, with None for the elements unknown at build time."""
    v = static_value(t)
    if v is not None:
        return TensorShape([None if d < 0 else int(d) for d in np.reshape(v, -1)])
    op = t.op
    if op.type == "Shape":
        return op.inputs[0].shape
    if op.type == "Pack" and op.attrs.get("axis", 0) == 0:
        dims = []
        for x in op.inputs:
            c = static_value(x)
            dims.append(None if c is None or int(c) < 0 else int(c))
        return TensorShape(dims)
    if op.type == "ConcatV2":
        out = TensorShape([])
        for x in op.inputs:
            out = out.concatenate(partial_shape(x))
        return out
    n = t.shape.as_tuple()
    if n is None or len(n) != 1 or n[0] is None:
        return TensorShape(None)
    return TensorShape([None] * n[0])


# -- run-time shapes ----------------------------------------------------------------------------
class _Shaped:
    """A tensor seen with another (concrete) shape; everything else is the tensor's."""

    __slots__ = ("_t", "shape")

    def __init__(self, t, shape: TensorShape) -> None:
        self._t = t
        self.shape = shape

    def __getattr__(self, name):
        return getattr(self._t, name)


class _ShapedOp:
    """An op whose inputs are `_Shaped` (what its shape rule reads)."""

    __slots__ = ("_op", "inputs")

    def __init__(self, op, inputs: list) -> None:
        self._op = op
        self.inputs = inputs

    def __getattr__(self, name):
        return getattr(self._op, name)


def _shape_leaf(env: Optional[dict], state):
    def leaf(t):
        if env is not None and t in env:
            v = env[t]
            return _UNKNOWN if v is None else tuple(np.shape(v))
        op = t.op
        if op.type == "VariableV2":
            if state is not None and op in state:
                return tuple(np.shape(state[op]))
            shape = op.attrs["shape"]
            if shape.ndims is None:
                return _UNKNOWN
            return tuple(_STAND_IN if d is None else d for d in shape.as_tuple())
        if t.shape.is_fully_defined():
            return tuple(t.shape.as_list())
        if op.type == "Placeholder" or op.op_def.kind in ("host", "source"):
            return _UNKNOWN   # an unfed placeholder, a control-flow result: no rule applies
        return None
    return leaf


def _shape_rule(op, shapes):
    proxy = _ShapedOp(op, [_Shaped(x, TensorShape(list(s))) for x, s in zip(op.inputs, shapes)])
    try:
        outs = op.op_def.infer(proxy)
    except Exception:  # noqa: BLE001  (shapes that do not agree: the kernel reports it)
        return _UNKNOWN
    result = []
    for _, shape in outs:
        shape = shape if isinstance(shape, TensorShape) else TensorShape(shape)
        if not shape.is_fully_defined():
            return _UNKNOWN
        result.append(tuple(shape.as_list()))
    return result


def computable(t, fed) -> bool:
    """Whether `shape_of(t, ...)` can answer from the shapes of feeds and variables alone."""
    env = {}
    for x in fed:
        dims = x.shape.as_tuple()
        env[x] = None if dims is None else np.empty(
            [_STAND_IN if d is None else d for d in dims], np.int8)
    return _evaluate(t, _shape_leaf(env, None), _shape_rule, MAX_OPS) is not _UNKNOWN


def shape_of(t, env: dict, state) -> Optional[tuple]:
    """The runtime shape of `t` (see `computable`); None when its inputs do not agree."""
    r = _evaluate(t, _shape_leaf(env, state), _shape_rule, MAX_OPS)
    return None if r is _UNKNOWN else r
