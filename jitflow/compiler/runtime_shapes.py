"""Shapes of intermediate tensors computed from the feed and variable shapes, before a run.

A random op whose shape argument is `tf.shape(h)` (dropout's `random_uniform(tf.shape(h))`)
can be drawn with the session's RNG before the native call, as statically shaped random ops
are, when the shape of `h` follows from the shapes of what flows in. It is found by running the
ops' own static shape rules (`OpDef.infer`) on the concrete shapes of the feeds and variables:
whatever the graph's shape inference can say about `h` once every input shape is known --
elementwise broadcasting, matmuls, convolutions, pooling, reshapes, reductions, transposes.

`computable` decides this when the plan is made, by running the same rules with every unknown
dimension set to one stand-in size: an op whose output shape then still has unknown dims (its
shape depends on values: `tf.where`, `unique`, a reshape to a computed shape) keeps the random
op a reference step.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.shapes import TensorShape

__all__ = ["computable", "shape_of", "MAX_OPS"]

MAX_OPS = 512          # ops walked back from the tensor whose shape is wanted
_STAND_IN = 7          # the size every unknown dim takes when `computable` tries the rules


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


_UNKNOWABLE = object()   # a fed tensor of unknown rank: no shape until it is fed


def _leaf(t, env: Optional[dict], state: Optional[dict]):
    """The shape of `t` when it needs no rule (a tuple), `_UNKNOWABLE`, or None."""
    if env is not None and t in env:
        v = env[t]
        return _UNKNOWABLE if v is None else tuple(np.shape(v))
    if t.op.type == "VariableV2":
        if state is not None and t.op in state:
            return tuple(np.shape(state[t.op]))
        shape = t.op.attrs["shape"]
        if shape.ndims is None:
            return _UNKNOWABLE
        return tuple(_STAND_IN if d is None else d for d in shape.as_tuple())
    if t.shape.is_fully_defined():
        return tuple(t.shape.as_list())
    return None


def _evaluate(t, env: Optional[dict], state: Optional[dict]) -> Optional[tuple]:
    """The shape of `t` by the ops' shape rules from the leaves' shapes (iterative), or None
    when a rule cannot say (or raises: the shapes do not agree)."""
    known: dict = {}
    stack = [t]
    walked = 0
    while stack:
        u = stack[-1]
        if u in known:
            stack.pop()
            continue
        leaf = _leaf(u, env, state)
        if leaf is _UNKNOWABLE:
            return None
        if leaf is not None:
            known[u] = leaf
            stack.pop()
            continue
        op = u.op
        if op.type in ("Placeholder", "VariableV2") or op.op_def.kind in ("host", "source"):
            return None   # an unfed placeholder, a control-flow result: no rule applies
        missing = [x for x in op.inputs if x not in known]
        if missing:
            walked += 1
            if walked > MAX_OPS:
                return None
            stack.extend(missing)
            continue
        stack.pop()
        proxy = _ShapedOp(op, [_Shaped(x, TensorShape(list(known[x]))) for x in op.inputs])
        try:
            outs = op.op_def.infer(proxy)
        except Exception:  # noqa: BLE001  (shapes that do not agree: the kernel reports it)
            return None
        for out, (_, shape) in zip(op.outputs, outs):
            shape = shape if isinstance(shape, TensorShape) else TensorShape(shape)
            if not shape.is_fully_defined():
                return None
            known[out] = tuple(shape.as_list())
        if u not in known:
            return None
    return known[t]


def computable(t, fed) -> bool:
    """Whether `shape_of(t, ...)` can answer from the shapes of feeds and variables alone."""
    env = {}
    for x in fed:
        dims = x.shape.as_tuple()
        env[x] = None if dims is None else np.empty(
            [_STAND_IN if d is None else d for d in dims], np.int8)
    return _evaluate(t, env, None) is not None


def shape_of(t, env: dict, state: dict) -> Optional[tuple]:
    """The runtime shape of `t` (see `computable`); None when its inputs do not agree."""
    return _evaluate(t, env, state)
