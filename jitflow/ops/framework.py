"""TF1 framework helpers of the top-level namespace: `is_tensor`, `init_scope`, `container`,
`colocate_with`, `IndexedSlices`, `custom_gradient`, `make_template`, `py_function`,
`tables_initializer`, `get_logger`, `timestamp`, the remaining `assert_*` checks and
`add_check_numerics_ops`.
"""
from __future__ import annotations

import contextlib
import itertools
import logging as _logging
import time
from typing import Callable, Optional

import numpy as np

from jitflow.core import dtypes as _dtypes

from jitflow.core.graph import (GraphKeys, Operation, Tensor, convert_to_tensor, get_default_graph,
                                make_op, name_scope)
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape

__all__ = ["is_tensor", "init_scope", "container", "colocate_with", "IndexedSlices",
           "custom_gradient", "make_template", "py_function", "tables_initializer",
           "initialize_all_tables", "get_logger", "timestamp", "assert_integer", "assert_scalar",
           "assert_type", "assert_same_float_dtype", "assert_rank_at_least", "assert_rank_in",
           "assert_near", "assert_proper_iterable", "assert_variables_initialized",
           "add_check_numerics_ops", "no_regularizer", "convert_to_tensor_or_indexed_slices",
           "grad_pass_through"]

NAMESPACES = {"initializers": [("tables_initializer", "tables_initializer")],
              "debugging": ["assert_integer", "assert_scalar", "assert_type",
                            "assert_same_float_dtype", "assert_rank_at_least",
                            "assert_rank_in", "assert_near", "assert_proper_iterable"]}


def is_tensor(x) -> bool:
    """`tf.is_tensor`: whether `x` is a graph tensor (or a tensor-like object)."""
    return isinstance(x, (Tensor, IndexedSlices)) or hasattr(x, "_to_tensor") or \
        type(x).__name__ == "SparseTensor"


@contextlib.contextmanager
def init_scope():
    """`tf.init_scope`: leave control dependencies (graph mode has no eager context)."""
    with get_default_graph().control_dependencies(None):
        yield


@contextlib.contextmanager
def container(container_name: str):
    """`tf.container`: accepted; resources are per session here."""
    yield container_name


def colocate_with(op, ignore_existing: bool = False):
    """`tf.colocate_with`: accepted; placement is the backend's choice."""
    return get_default_graph().colocate_with(op, ignore_existing)


class IndexedSlices:
    """`tf.IndexedSlices`: rows `values` at `indices` of a tensor of `dense_shape`
    (converted to a dense tensor where a tensor is needed)."""

    def __init__(self, values, indices, dense_shape=None) -> None:
        self.values = convert_to_tensor(values)
        self.indices = convert_to_tensor(indices)
        self.dense_shape = None if dense_shape is None else convert_to_tensor(dense_shape)

    dtype = property(lambda self: self.values.dtype)
    graph = property(lambda self: self.values.graph)
    op = property(lambda self: self.values.op)
    name = property(lambda self: self.values.name)

    @property
    def shape(self) -> TensorShape:
        d = self.values.shape
        if self.dense_shape is not None and self.dense_shape.op.type == "Const":
            return TensorShape([int(v) for v in self.dense_shape.op.attrs["value"]])
        return TensorShape(None) if d.ndims is None else TensorShape([None] + d.as_list()[1:])

    def _to_tensor(self, dtype=None, name=None) -> Tensor:
        from jitflow.ops.scatter import unsorted_segment_sum
        if self.dense_shape is None:
            raise ValueError("IndexedSlices without dense_shape cannot be made dense")
        if self.dense_shape.op.type != "Const":
            raise NotImplementedError("IndexedSlices: a dense_shape known when the graph is "
                                      "built is needed to make it dense")
        n = int(np.reshape(self.dense_shape.op.attrs["value"], -1)[0])
        return unsorted_segment_sum(self.values, self.indices, n, name=name)

    def __repr__(self) -> str:
        return f"IndexedSlices(indices={self.indices!r}, values={self.values!r})"


def convert_to_tensor_or_indexed_slices(value, dtype=None, name: Optional[str] = None):
    """`tf.convert_to_tensor_or_indexed_slices`."""
    if isinstance(value, IndexedSlices):
        return value
    return convert_to_tensor(value, dtype=dtype, name=name)


# -- custom_gradient ------------------------------------------------------------------------------
_GRAD_FNS: dict = {}
_TOKENS = itertools.count()


def _custom_infer(op):
    n = op.attrs["n_in"]
    return [(t.dtype, t.shape) for t in op.inputs[n:]]


def _custom_ref(op, *args):
    n = op.attrs["n_in"]
    outs = tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else a
                 for a in args[n:])
    return outs if len(outs) != 1 else outs[0]


def _custom_grad(op, *grads):
    n = op.attrs["n_in"]
    fn = _GRAD_FNS.get(op.attrs["token"])
    if fn is None:
        raise LookupError(f"custom gradient {op.attrs['token']} is not in this process")
    gs = fn(*grads)
    if not isinstance(gs, (list, tuple)):
        gs = [gs]
    gs = list(gs)
    if len(gs) != n:
        raise ValueError(f"custom_gradient: the gradient function returned {len(gs)} "
                         f"gradients for {n} inputs")
    return gs + [None] * (len(op.inputs) - n)


register("CustomGradient", infer=_custom_infer, ref=_custom_ref, grad=_custom_grad,
         kind="other", doc="Inputs (x..., y...): y, whose gradient with respect to x is a "
                           "Python function (attr token).")


def custom_gradient(f: Callable) -> Callable:
    """`tf.custom_gradient`: `f(*x)` returns (y, grad_fn); the result is y, and the gradient
    of y with respect to x is grad_fn(dy) instead of the gradient through f's ops."""
    def wrapped(*args, **kwargs):
        xs = [convert_to_tensor(a) for a in args]
        y, grad_fn = f(*xs, **kwargs)
        ys = list(y) if isinstance(y, (list, tuple)) else [y]
        ys = [convert_to_tensor(t) for t in ys]
        token = f"custom_gradient_{next(_TOKENS)}"
        _GRAD_FNS[token] = grad_fn
        op = make_op("CustomGradient", xs + ys, {"n_in": len(xs), "token": token},
                     name="CustomGradient")
        outs = list(op.outputs)
        return type(y)(outs) if isinstance(y, (list, tuple)) else outs[0]
    wrapped.__name__ = getattr(f, "__name__", "custom_gradient")
    wrapped.__doc__ = f.__doc__
    return wrapped


def grad_pass_through(f: Callable) -> Callable:
    """`tf.grad_pass_through`: f's value with the identity as its gradient."""
    def wrapped(x):
        return custom_gradient(lambda t: (f(t), lambda dy: dy))(x)
    return wrapped


# -- make_template ---------------------------------------------------------------------------------
class _Template:
    """A function whose first call creates variables in its own scope; later calls share
    them."""

    def __init__(self, name: str, func: Callable, create_scope_now: bool, kwargs: dict) -> None:
        from jitflow.ops.variable_scope import variable_scope
        self._name = name
        self._func = func
        self._kwargs = kwargs
        self._scope = None
        if create_scope_now:
            with variable_scope(None, default_name=name) as vs:
                self._scope = vs

    @property
    def variable_scope(self):
        return self._scope

    @property
    def variable_scope_name(self) -> str:
        return self._scope.name if self._scope is not None else ""

    def __call__(self, *args, **kwargs):
        from jitflow.ops.variable_scope import variable_scope
        kw = dict(self._kwargs, **kwargs)
        if self._scope is None:
            with variable_scope(None, default_name=self._name) as vs:
                self._scope = vs
                self._first = True
                return self._func(*args, **kw)
        with variable_scope(self._scope, reuse=True):
            return self._func(*args, **kw)


def make_template(name_: str, func_: Callable, create_scope_now_: bool = False,
                  unique_name_: Optional[str] = None, custom_getter_=None, **kwargs):
    """`tf.make_template`: `func_` wrapped so that every call shares the variables of the
    first."""
    return _Template(unique_name_ or name_, func_, create_scope_now_, kwargs)


# -- py_function, tables_initializer, logger, timestamp ------------------------------------------
def py_function(func: Callable, inp, Tout, name: Optional[str] = None):  # noqa: N803
    """`tf.py_function` in graph mode: like `tf.py_func`, arguments as NumPy values."""
    from jitflow.ops.script_ops import py_func
    return py_func(func, inp, Tout, stateful=True, name=name)


def tables_initializer(name: str = "init_all_tables") -> Operation:
    """`tf.tables_initializer`: runs the TABLE_INITIALIZERS collection (a no-op without
    lookup tables)."""
    from jitflow.ops.identity import group, no_op
    inits = get_default_graph().get_collection(GraphKeys.TABLE_INITIALIZERS)
    return group(*inits, name=name) if inits else no_op(name=name)


initialize_all_tables = tables_initializer


def get_logger() -> _logging.Logger:
    """`tf.get_logger`: the "tensorflow" logger."""
    return _logging.getLogger("tensorflow")


register("Timestamp", infer=lambda op: [(_dtypes.float64, TensorShape([]))],
         ref=lambda op: np.float64(time.time()), stateful=True, differentiable=False,
         kind="host", doc="Seconds since the epoch when the op runs.")


def timestamp(name: Optional[str] = None) -> Tensor:
    """`tf.timestamp`: the time (seconds since the epoch, float64) when the op runs."""
    return make_op("Timestamp", [], name=name or "Timestamp",
                   graph=get_default_graph()).outputs[0]


def no_regularizer(_) -> None:
    """`tf.no_regularizer`: a regularizer that adds nothing."""
    return None


# -- the remaining assert_* ----------------------------------------------------------------------
def _no_op(name):
    from jitflow.ops.identity import no_op
    return no_op(name=name)


def assert_integer(x, message=None, name=None):
    """`tf.assert_integer`: a build-time TypeError unless x has an integer dtype."""
    x = convert_to_tensor(x)
    if not x.dtype.is_integer:
        raise TypeError(f"{message or ''} Expected integer type for {x.name}, got "
                        f"{x.dtype.name}".strip())
    return _no_op(name or "assert_integer")


def assert_type(tensor, tf_type, message=None, name=None):
    """`tf.assert_type`: a build-time TypeError unless `tensor` has dtype `tf_type`."""
    t = convert_to_tensor(tensor)
    if t.dtype != _dtypes.as_dtype(tf_type):
        raise TypeError(f"{message or ''} {t.name} must be of type {_dtypes.as_dtype(tf_type)}"
                        f"; got {t.dtype}".strip())
    return _no_op(name or "assert_type")


def assert_same_float_dtype(tensors=None, dtype=None):
    """`tf.assert_same_float_dtype`: the common float dtype of `tensors` (float32 if none);
    ValueError for a mix or a non-float."""
    found = _dtypes.as_dtype(dtype) if dtype is not None else None
    for t in tensors or ():
        d = t.dtype
        if found is None:
            found = d
        elif d != found:
            raise ValueError(f"Expected {found}, got {d} for tensor {t}.")
    found = found or _dtypes.float32
    if not found.is_floating:
        raise ValueError(f"Expected floating point type, got {found}.")
    return found


def assert_scalar(tensor, name=None, message=None):
    """`tf.assert_scalar`: the tensor, after a build-time check that its rank is 0."""
    t = convert_to_tensor(tensor)
    if t.shape.ndims not in (None, 0):
        raise ValueError(f"{message or ''} Expected scalar shape for {t.name}, saw shape: "
                         f"{t.shape}.".strip())
    return t


def assert_rank_at_least(x, rank, data=None, summarize=None, message=None, name=None):
    """`tf.assert_rank_at_least`: a build-time ValueError when x's rank is known and lower."""
    x = convert_to_tensor(x)
    if x.shape.ndims is not None and x.shape.ndims < int(rank):
        raise ValueError(f"{message or ''} Tensor {x.name} must have rank at least {rank}. "
                         f"Received rank {x.shape.ndims}, shape {x.shape}".strip())
    return _no_op(name or "assert_rank_at_least")


def assert_rank_in(x, ranks, data=None, summarize=None, message=None, name=None):
    """`tf.assert_rank_in`: a build-time ValueError when x's rank is known and not listed."""
    x = convert_to_tensor(x)
    if x.shape.ndims is not None and x.shape.ndims not in [int(r) for r in ranks]:
        raise ValueError(f"{message or ''} Tensor {x.name} must have rank in {list(ranks)}. "
                         f"Received rank {x.shape.ndims}, shape {x.shape}".strip())
    return _no_op(name or "assert_rank_in")


def assert_near(x, y, rtol=None, atol=None, data=None, summarize=None, message=None,
                name=None):
    """`tf.assert_near`: an Assert op checking |x - y| <= atol + rtol * |y| elementwise."""
    from jitflow.ops.control_flow import Assert
    from jitflow.ops.math.common import convert_pair
    from jitflow.ops.math.compare import less_equal
    from jitflow.ops.math.unary import abs as abs_
    from jitflow.ops.reduce import reduce_all
    with name_scope(name, "assert_near", [x, y]):
        x, y = convert_pair(x, y)
        eps = float(np.finfo(x.dtype.as_numpy_dtype).eps)
        rt = 10 * eps if rtol is None else rtol
        at = 10 * eps if atol is None else atol
        cond = reduce_all(less_equal(abs_(x - y), at + rt * abs_(y)))
        if data is None:
            data = [message or "", "x and y not equal to tolerance rtol = %s, atol = %s"
                    % (rt, at), "x (%s) = " % x.name, x, "y (%s) = " % y.name, y]
        return Assert(cond, data, summarize=summarize)


def assert_proper_iterable(values) -> None:
    """`tf.assert_proper_iterable`: TypeError for a tensor, ndarray, string or non-iterable."""
    if isinstance(values, (Tensor, np.ndarray, str, bytes)) or type(values).__name__ == \
            "SparseTensor":
        raise TypeError(f"Expected argument 'values' to be a \"proper\" iterable. Found: "
                        f"{type(values)}")
    if not hasattr(values, "__iter__"):
        raise TypeError(f"Expected argument 'values' to be iterable. Found: {type(values)}")


def assert_variables_initialized(var_list=None):
    """`tf.assert_variables_initialized`: an op raising FailedPreconditionError when run
    while a variable of `var_list` (default: all) is uninitialized."""
    from jitflow.ops.state import report_uninitialized_variables
    from jitflow.ops.math.compare import equal
    from jitflow.ops.shape_ops import size
    from jitflow.ops.control_flow import Assert
    names = report_uninitialized_variables(var_list)
    return Assert(equal(size(names), 0), ["Uninitialized variables:", names])


def add_check_numerics_ops():
    """`tf.add_check_numerics_ops`: a check_numerics op for every float tensor of the
    graph, grouped (running it raises InvalidArgumentError at the first nan or inf)."""
    from jitflow.ops.identity import check_numerics, group
    g = get_default_graph()
    checks = []
    for op in list(g.get_operations()):
        for t in op.outputs:
            if t.dtype.is_floating and op.type not in ("VariableV2",):
                checks.append(check_numerics(t, f"{op.name}:{t.value_index}"))
    return group(*checks, name="CheckNumerics")



