"""`tf.gradients`: reverse-mode differentiation that builds graph ops.

The traversal walks only the ops that lie on a path from some x to some y, in reverse
topological order (Kahn's algorithm over pending consumer counts, so no recursion and any graph
depth works). Each op's gradient rule comes from its registry entry: `op.op_def.grad(op,
*output_grads)` returns one Tensor-or-None per input. Contributions from several consumers of one
tensor are summed with `add_n`.

A Variable in `xs` stands for its VariableV2 output: gradients reach it through every `Identity`
read of it (`w/read`, later `read_value()` reads), as TF1 differentiates ref variables.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Graph, Operation, Tensor, convert_to_tensor, make_op

__all__ = ["gradients", "hessians", "AggregationMethod", "UnconnectedGradients",
           "RegisterGradient", "NotDifferentiable", "no_gradient"]

# Gradient functions registered by name with `RegisterGradient` (None: not differentiable).
# An op uses one when its attr `_gradient_op_type` names it (set from
# `Graph.gradient_override_map` when the op is created) or when its type is registered here.
_USER_GRADIENTS: dict = {}


class RegisterGradient:
    """Decorator `@tf.RegisterGradient("Name")`: `f(op, *output_grads)` -> input grads."""

    def __init__(self, op_type: str) -> None:
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, f):
        if self._op_type in _USER_GRADIENTS:
            raise KeyError(f"Registering two gradient with name '{self._op_type}'! ")
        _USER_GRADIENTS[self._op_type] = f
        return f


def NotDifferentiable(op_type: str) -> None:  # noqa: N802  (TF1's name)
    """Declare that ops of `op_type` pass no gradient to their inputs."""
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")
    if op_type in _USER_GRADIENTS:
        raise KeyError(f"Registering two gradient with name '{op_type}'! ")
    _USER_GRADIENTS[op_type] = None


no_gradient = NotDifferentiable


def _grad_fn(op: Operation):
    """(is differentiable, rule or None) for `op`: user registrations first, then the registry."""
    for key in (op.attrs.get("_gradient_op_type"), op.type):
        if key is not None and key in _USER_GRADIENTS:
            fn = _USER_GRADIENTS[key]
            return fn is not None, fn
    return op.op_def.differentiable, op.op_def.grad


class UnconnectedGradients:
    """What `gradients` returns for an x that no y depends on: None (TF1's default) or zeros."""

    NONE = "none"
    ZERO = "zero"


class AggregationMethod:
    """How several gradient contributions to one tensor are summed (TF1's constants).

    jitflow always uses a single `AddN`; the other methods are accepted for compatibility.
    """

    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


def _as_list(x) -> list:
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _x_tensor(x) -> Tensor:
    """The tensor to differentiate with respect to: a Variable maps to its VariableV2 output."""
    ref = getattr(x, "_variable", None)
    if isinstance(ref, Tensor):
        return ref
    if isinstance(x, Tensor):
        return x
    if hasattr(x, "_as_graph_element"):
        el = x._as_graph_element()
        if isinstance(el, Tensor):
            return el
    raise TypeError(f"Expected a Tensor or Variable in xs, got {x!r}")


def _y_tensor(y) -> Tensor:
    if isinstance(y, Operation):
        raise TypeError(f"Expected a Tensor in ys, got Operation '{y.name}'")
    return convert_to_tensor(y)


def _graph_of(tensors) -> Graph:
    graph = None
    for t in tensors:
        if graph is None:
            graph = t.graph
        elif t.graph is not graph:
            raise ValueError(f"{t!r} must be from the same graph as the other ys and xs.")
    return graph


def _consumers(graph: Graph) -> dict:
    """Tensor -> list of ops reading it (data edges only), built in one pass over the graph."""
    out: dict = {}
    for op in graph._ops:
        for t in op.inputs:
            lst = out.get(t)
            if lst is None:
                out[t] = [op]
            elif lst[-1] is not op:
                lst.append(op)
    return out


def _between_ops(ys: list, xs: list, consumers: dict) -> set:
    """The ops on some path from an x to a y (data edges only)."""
    reached: set = set()
    stack = [op for x in xs for op in consumers.get(x, ())]
    while stack:
        op = stack.pop()
        if op in reached:
            continue
        reached.add(op)
        for t in op.outputs:
            stack.extend(c for c in consumers.get(t, ()) if c not in reached)
    between: set = set()
    stack = [y.op for y in ys if y.op in reached]
    while stack:
        op = stack.pop()
        if op in between:
            continue
        between.add(op)
        stack.extend(t.op for t in op.inputs if t.op in reached and t.op not in between)
    return between


def _sum(contribs: list, name: str) -> Tensor:
    """Sum gradient contributions (one AddN; pairwise adds if AddN is not registered)."""
    if len(contribs) == 1:
        return contribs[0]
    if contribs[0].dtype is _dtypes.variant:  # TensorArray gradients
        return make_op("VariantAddN", contribs, name=name).outputs[0]
    from jitflow.ops.registry import REGISTRY
    if "AddN" in REGISTRY:
        return make_op("AddN", contribs, name=name).outputs[0]
    total = contribs[0]
    for c in contribs[1:]:
        total = make_op("Add", [total, c], name="add").outputs[0]
    return total


def _ones_like(y: Tensor, name: str) -> Tensor:
    """The default grad_y: ones with y's dtype and run-time shape."""
    one = convert_to_tensor(np.ones((), dtype=y.dtype.as_numpy_dtype), name=name)
    if y.shape.ndims == 0:
        return one
    return make_op("BroadcastLike", [one, y], name=name).outputs[0]


def _zeros_like(t: Tensor) -> Tensor:
    if t.dtype is _dtypes.variant:
        return make_op("VariantZerosLike", [t], name="zeros_like").outputs[0]
    zero = convert_to_tensor(np.zeros((), dtype=t.dtype.as_numpy_dtype), name="zeros")
    return make_op("BroadcastLike", [zero, t], name="zeros_like").outputs[0]


def _is_float(t: Tensor) -> bool:
    """Whether `t` carries a gradient: floats, and variants (TensorArrays of floats)."""
    return t.dtype.is_floating or t.dtype is _dtypes.variant


def gradients(ys, xs, grad_ys=None, name: str = "gradients",
              colocate_gradients_with_ops: bool = False, gate_gradients: bool = False,
              aggregation_method=None, stop_gradients=None,
              unconnected_gradients=UnconnectedGradients.NONE) -> list:
    """Symbolic derivatives of `sum(ys)` with respect to each of `xs`.

    Returns one Tensor per x, or None where x does not reach any y, is integer-valued, or
    only reaches through ops that are non-differentiable or in `stop_gradients` (zeros
    instead, for float xs, with `unconnected_gradients="zero"`). `grad_ys`
    weights each y (default: ones). `colocate_gradients_with_ops`, `gate_gradients` and
    `aggregation_method` are accepted for compatibility; they change nothing here.
    """
    ys = [_y_tensor(y) for y in _as_list(ys)]
    xs_in = _as_list(xs)
    xs_t = [_x_tensor(x) for x in xs_in]
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    else:
        grad_ys = _as_list(grad_ys)
        if len(grad_ys) != len(ys):
            raise ValueError(f"Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
    stops = [_x_tensor(s) for s in _as_list(stop_gradients)] if stop_gradients is not None \
        else []
    if unconnected_gradients not in (UnconnectedGradients.NONE, UnconnectedGradients.ZERO):
        raise ValueError(f"Unknown value for unconnected_gradients: {unconnected_gradients!r}")
    graph = _graph_of(ys + xs_t + stops)
    with graph.as_default(), graph.name_scope(name or "gradients"):
        out = _backprop(graph, ys, xs_t, grad_ys, stops)
        if unconnected_gradients == UnconnectedGradients.ZERO:
            out = [_zeros_like(x) if g is None and _is_float(x) else g
                   for g, x in zip(out, xs_t)]
        return out


def _backprop(graph: Graph, ys: list, xs: list, grad_ys: list, stops: list) -> list:
    consumers = _consumers(graph)
    between = _between_ops(ys, xs, consumers)
    stop_ops = {t.op for t in stops}
    x_set = set(xs)

    # The default and given output gradients of each y.
    grads: dict = {}  # tensor -> list of contributions, then the summed tensor
    for i, (y, gy) in enumerate(zip(ys, grad_ys)):
        if gy is None:
            gy = _ones_like(y, f"grad_ys_{i}")
        else:
            gy = convert_to_tensor(gy, dtype=y.dtype, name=f"grad_ys_{i}")
            if not gy.shape.is_compatible_with(y.shape):
                raise ValueError(f"Incompatible shapes between op input and calculated input "
                                 f"gradient. Forward operation: {y.op.name}. Input index: 0. "
                                 f"Original input shape: {y.shape}. Calculated input gradient "
                                 f"shape: {gy.shape}")
        grads.setdefault(y, []).append(gy)

    # pending[op]: how many input edges of ops in `between` still wait for op's gradients.
    pending: dict = {op: 0 for op in between}
    for op in between:
        for t in op.inputs:
            if t.op in pending:
                pending[t.op] += 1
    ready = [op for op, n in pending.items() if n == 0]
    ready.sort(key=lambda op: op._id)

    def summed(t: Tensor) -> Optional[Tensor]:
        g = grads.get(t)
        if g is None:
            return None
        if isinstance(g, list):
            g = _sum(g, "AddN") if g else None
            grads[t] = g
        return g

    while ready:
        op = ready.pop()
        for t in op.inputs:
            if t.op in pending:
                pending[t.op] -= 1
                if pending[t.op] == 0:
                    ready.append(t.op)
        out_grads = [summed(t) for t in op.outputs]
        if all(g is None for g in out_grads) or op in stop_ops:
            continue
        differentiable, fn = _grad_fn(op)
        if not differentiable:
            continue
        if fn is None:
            raise LookupError(f"No gradient defined for operation '{op.name}' (op type: "
                              f"{op.type})")
        in_grads = _call_grad(graph, op, fn, out_grads)
        for index, (t, g) in enumerate(zip(op.inputs, in_grads)):
            if g is None or not _is_float(t):
                continue
            if t.op in pending or t in x_set:
                g = convert_to_tensor(g)
                if not g.shape.is_compatible_with(t.shape):
                    raise ValueError(
                        f"Incompatible shapes between op input and calculated input gradient. "
                        f"Forward operation: {op.name}. Input index: {index}. Original input "
                        f"shape: {t.shape}. Calculated input gradient shape: {g.shape}")
                grads.setdefault(t, []).append(g)

    out = []
    for x in xs:
        out.append(summed(x) if _is_float(x) else None)
    return out


def _call_grad(graph: Graph, op: Operation, fn, out_grads: list) -> list:
    """Run the op's gradient rule in scope `<op name>_grad`; missing float grads are zeros."""
    with graph.name_scope(op.name + "_grad"):
        filled = []
        for t, g in zip(op.outputs, out_grads):
            if g is None and _is_float(t):
                g = _zeros_like(t)
            filled.append(g)
        in_grads = fn(op, *filled)
    in_grads = list(in_grads) if in_grads is not None else []
    if len(in_grads) != len(op.inputs):
        raise ValueError(f"Num gradients {len(in_grads)} generated for op {op.name} "
                         f"({op.type}) do not match num inputs {len(op.inputs)}")
    return in_grads


def hessians(ys, xs, name: str = "hessians", colocate_gradients_with_ops: bool = False,
             gate_gradients: bool = False, aggregation_method=None) -> list:
    """Second derivatives of `sum(ys)`: for each x, a tensor of shape x.shape + x.shape.

    Row i is the gradient of the i-th element of the first gradient, taken as the gradient
    of that gradient weighted by a one-hot `grad_ys` (no slicing ops needed). Needs x's shape
    fully defined.
    """
    from jitflow.ops.sources import constant
    xs_list = _as_list(xs)
    graph = _graph_of([_y_tensor(y) for y in _as_list(ys)] + [_x_tensor(x) for x in xs_list])
    out = []
    with graph.as_default(), graph.name_scope(name or "hessians"):
        firsts = gradients(ys, xs_list, name="first")
        for x, g in zip(xs_list, firsts):
            xt = _x_tensor(x)
            if g is None:
                out.append(None)
                continue
            if not xt.shape.is_fully_defined():
                raise ValueError(f"hessians needs a fully defined shape for {xt.name}, got "
                                 f"{xt.shape}")
            shape = tuple(xt.shape.as_list())
            n = int(np.prod(shape, dtype=np.int64))
            npd = xt.dtype.as_numpy_dtype
            rows = []
            for i in range(n):
                onehot = np.zeros(n, dtype=npd)
                onehot[i] = 1
                row = gradients(g, x, grad_ys=constant(onehot.reshape(shape), name="onehot"),
                                name="second")[0]
                if row is None:
                    row = _zeros_like(xt)
                rows.append(row)
            out.append(_stack_rows(rows, shape + shape))
    return out


def _stack_rows(rows: list, shape: tuple) -> Tensor:
    """Stack n row tensors (each shaped like x) into one tensor of `shape`."""
    import jitflow.ops as ops
    stack = getattr(ops, "stack", None)
    reshape = getattr(ops, "reshape", None)
    if stack is None or reshape is None:
        raise NotImplementedError("tf.hessians needs tf.stack and tf.reshape")
    return reshape(stack(rows), list(shape))
