"""Shapes of intermediate tensors computed from the feed and variable shapes, before a run.

A random op whose shape argument is `tf.shape(h)` (dropout's `random_uniform(tf.shape(h))`)
can be drawn with the session's RNG before the native call, as statically shaped random ops
are, when the shape of `h` follows from the shapes of what flows in: feeds, variables, fully
defined static shapes, elementwise broadcasting and matmuls. Anything else stays a reference
step.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["computable", "shape_of", "MAX_DEPTH"]

MAX_DEPTH = 64
_PASS = ("Identity", "StopGradient", "Relu", "Sigmoid", "Tanh")


def _rule(op) -> Optional[str]:
    if op.type in ("MatMul",) and len(op.inputs) == 2:
        return "matmul"
    if op.type in _PASS or (op.op_def.kind == "elementwise" and op.op_def.template is not None
                            and op.type != "BroadcastTo"):
        return "broadcast"
    return None


def computable(t, fed, depth: int = MAX_DEPTH) -> bool:
    """Whether `shape_of(t, ...)` can answer from feeds and variables alone."""
    if t in fed or t.op.type == "VariableV2" or t.shape.is_fully_defined():
        return True
    if depth == 0 or _rule(t.op) is None or len(t.op.outputs) != 1:
        return False
    return all(computable(x, fed, depth - 1) for x in t.op.inputs)


def shape_of(t, env: dict, state: dict) -> Optional[tuple]:
    """The runtime shape of `t` (see `computable`); None when its inputs do not agree."""
    if t in env:
        return np.shape(env[t])
    op = t.op
    if op.type == "VariableV2":
        return np.shape(state[op])
    if t.shape.is_fully_defined():
        return tuple(t.shape.as_list())
    shapes = [shape_of(x, env, state) for x in op.inputs]
    if any(s is None for s in shapes):
        return None
    if _rule(op) == "matmul":
        (a, b) = shapes
        if len(a) != 2 or len(b) != 2:
            return None
        m = a[1] if op.attrs.get("transpose_a") else a[0]
        n = b[0] if op.attrs.get("transpose_b") else b[1]
        return (m, n)
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None
