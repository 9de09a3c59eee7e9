"""Variables and their ops. Values live in the Session, never in the graph.

`VariableV2` names a slot of session state. Its output is a reference: ops declared with
`needs_ctx` receive the variable op itself (to read or write through the run context); every
other consumer receives the variable's value at the moment it runs.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import (GraphKeys, Operation, Tensor, convert_to_tensor, get_default_graph,
                                session_for,
                                make_op, name_scope)
from jitflow.compiler import lower as _lower
from jitflow.ops.identity import group, identity
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape, as_shape

__all__ = [
    "Variable", "global_variables", "trainable_variables", "local_variables",
    "global_variables_initializer", "initialize_all_variables", "variables_initializer",
    "local_variables_initializer", "initialize_local_variables",
    "report_uninitialized_variables", "is_variable_initialized", "assign", "assign_add",
    "assign_sub", "moving_average_variables", "model_variables", "all_variables",
    "initialize_variables", "scatter_update", "scatter_add", "scatter_sub",
]
NAMESPACES = {"initializers": [("global_variables", "global_variables_initializer"),
                               ("local_variables", "local_variables_initializer"),
                               ("variables", "variables_initializer")]}


register("VariableV2", infer=lambda op: [(op.attrs["dtype"], op.attrs["shape"])],
         ref=lambda op, ctx: ctx.read_var(op), needs_ctx=True, stateful=True,
         differentiable=False, kind="state", default_name="Variable",
         lower=_lower.computes_nothing)   # a kernel argument: the session's buffer


def _assign_infer(op):
    ref, value = op.inputs
    if ref.op.type != "VariableV2":
        raise TypeError(f"'{op.type}' Op requires that input 'ref' be a mutable tensor "
                        f"(a Variable), got {ref.name}")
    if value.dtype != ref.dtype:
        raise TypeError(f"Input 'value' of '{op.type}' Op has type {value.dtype.name} that does "
                        f"not match type {ref.dtype.name} of argument 'ref'.")
    if op.attrs.get("validate_shape", True) and not ref.shape.is_compatible_with(value.shape):
        raise ValueError(f"Dimensions must be equal for '{op.name}' (op: '{op.type}') with input "
                         f"shapes: {ref.shape}, {value.shape}.")
    return [(ref.dtype, ref.shape)]


def _check_assign_shape(op, var_op, value):
    from jitflow.core.errors import InvalidArgumentError
    want = var_op.attrs["shape"]
    if op.attrs.get("validate_shape", True) and not want.is_compatible_with(np.shape(value)):
        raise InvalidArgumentError(
            None, op, f"Assign requires shapes of both tensors to match. lhs shape= "
                      f"{list(want.as_list())} rhs shape= {list(np.shape(value))} "
                      f"[[node {op.name}]]")


def _assign_ref(op, var_op, value, ctx):
    _check_assign_shape(op, var_op, value)
    return ctx.write_var(var_op, np.array(value, dtype=var_op.attrs["dtype"].as_numpy_dtype))


def _check_update_shape(op, old, value):
    if np.shape(value) != np.shape(old) and np.broadcast_shapes(np.shape(old),
                                                                 np.shape(value)) != np.shape(old):
        from jitflow.core.errors import InvalidArgumentError
        raise InvalidArgumentError(
            None, op, f"Cannot update variable with shape {list(np.shape(old))} using a Tensor "
                      f"with shape {list(np.shape(value))}, shapes must be equal. "
                      f"[[node {op.name}]]")


def _assign_add_ref(op, var_op, value, ctx):
    old = ctx.read_var(var_op)
    _check_update_shape(op, old, value)
    return ctx.write_var(var_op, old + value)


def _assign_sub_ref(op, var_op, value, ctx):
    old = ctx.read_var(var_op)
    _check_update_shape(op, old, value)
    return ctx.write_var(var_op, old - value)


def _lower_assign(mode: str):
    """Assign ("set"), AssignAdd ("add"), AssignSub ("sub"): the variable's buffer updated in
    place by the fuser (which orders it after the reads it must not disturb)."""
    return lambda low, op, pos: low.assign(op, pos, mode)


for _t, _r, _mode in (("Assign", _assign_ref, "set"), ("AssignAdd", _assign_add_ref, "add"),
                      ("AssignSub", _assign_sub_ref, "sub")):
    register(_t, infer=_assign_infer, ref=_r, needs_ctx=True, stateful=True,
             differentiable=False, kind="state", lower=_lower_assign(_mode),
             lowerable=lambda op: bool(op.attrs.get("validate_shape", True)), inline=(1,))


def _scatter_infer(op):
    ref, indices, updates = op.inputs
    if ref.op.type != "VariableV2":
        raise TypeError(f"'{op.type}' Op requires that input 'ref' be a mutable tensor "
                        f"(a Variable), got {ref.name}")
    if not indices.dtype.is_integer:
        raise TypeError(f"indices must be int32 or int64, got {indices.dtype.name}")
    if updates.dtype != ref.dtype:
        raise TypeError(f"Input 'updates' of '{op.type}' Op has type {updates.dtype.name} that "
                        f"does not match type {ref.dtype.name} of argument 'ref'.")
    rd, idd, ud = ref.shape.as_tuple(), indices.shape.as_tuple(), updates.shape.as_tuple()
    if None not in (rd, idd, ud):
        want = TensorShape(idd + rd[1:])
        if not want.is_compatible_with(TensorShape(ud)):
            raise ValueError(f"Shapes must be equal rank: updates {updates.shape} must be "
                             f"indices.shape + ref.shape[1:] = {want} for '{op.name}' (op: "
                             f"'{op.type}')")
    return [(ref.dtype, ref.shape)]


def _scatter_ref(kind):
    def ref(op, var_op, indices, updates, ctx):
        from jitflow.core.errors import InvalidArgumentError
        out = np.array(ctx.read_var(var_op), copy=True)
        indices = np.asarray(indices)
        bad = (indices < 0) | (indices >= out.shape[0])
        if np.any(bad):
            pos = np.argwhere(bad)[0]
            raise InvalidArgumentError(
                None, op, f"indices[{','.join(str(int(p)) for p in pos)}] = "
                          f"{int(indices[tuple(pos)])} is not in [0, {out.shape[0]})")
        flat = indices.reshape(-1)
        upd = np.reshape(updates, (flat.size,) + out.shape[1:])
        if kind == "update":
            out[flat] = upd
        elif kind == "add":
            np.add.at(out, flat, upd)
        else:
            np.subtract.at(out, flat, upd)
        return ctx.write_var(var_op, out)
    return ref


for _t, _k in (("ScatterUpdate", "update"), ("ScatterAdd", "add"), ("ScatterSub", "sub")):
    register(_t, infer=_scatter_infer, ref=_scatter_ref(_k), needs_ctx=True, stateful=True,
             differentiable=False, kind="state")


def _or_initial_ref(op, var_op, initial, ctx):
    if ctx.is_initialized(var_op):
        return np.array(ctx.read_var(var_op), copy=True)
    return initial


register("VariableOrInitialValue",
         infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_or_initial_ref, needs_ctx=True, stateful=True, differentiable=False,
         kind="state", default_name="cond",
         doc="The variable's value if it is initialized, else input 1 (initialized_value).")


register("IsVariableInitialized", infer=lambda op: [(_dtypes.bool_, TensorShape([]))],
         ref=lambda op, var_op, ctx: np.bool_(ctx.is_initialized(var_op)), needs_ctx=True,
         stateful=True, differentiable=False, kind="state")


def _report_ref(op, *var_ops, ctx):
    names = [v.name.encode() for v in var_ops if not ctx.is_initialized(v)]
    return np.array(names, dtype=object)


register("ReportUninitializedVariables",
         infer=lambda op: [(_dtypes.string, TensorShape([None]))],
         ref=_report_ref, needs_ctx=True, stateful=True, differentiable=False, kind="state")


# -- the Variable object ----------------------------------------------------------------------
class Variable:
    """A TF1 (ref) variable: a VariableV2 op, its `Assign` initializer and a `read` snapshot."""

    __array_priority__ = 100  # ndarray <op> Variable defers to the Variable's reflected method

    def __init__(self, initial_value=None, trainable: bool = True, collections=None,
                 validate_shape: bool = True, caching_device=None, name: Optional[str] = None,
                 variable_def=None, dtype=None, expected_shape=None, import_scope=None,
                 constraint=None, use_resource=None, synchronization=None, aggregation=None,
                 shape=None) -> None:
        if variable_def is not None:
            raise NotImplementedError("Variable(variable_def=...) is not supported")
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        graph = get_default_graph()
        init_from_fn = callable(initial_value)
        self._trainable = bool(trainable)
        self.constraint = constraint
        with name_scope(name, "Variable", None if init_from_fn else [initial_value]) as scope:
            graph = get_default_graph() if init_from_fn else _graph_of_value(initial_value)
            with graph.as_default(), graph.control_dependencies(None):
                if init_from_fn:
                    with name_scope("Initializer"):
                        value = initial_value()
                else:
                    value = initial_value
                self._initial_value = convert_to_tensor(value, dtype=dtype,
                                                        name="initial_value")
                if shape is not None:
                    var_shape = as_shape(shape)
                elif validate_shape:
                    var_shape = self._initial_value.shape
                else:
                    var_shape = TensorShape(None)
                if validate_shape and not var_shape.is_fully_defined():
                    raise ValueError(f"initial_value must have a shape specified: "
                                     f"{self._initial_value}")
                vdtype = self._initial_value.dtype
                self._variable = make_op("VariableV2", [], {"dtype": vdtype, "shape": var_shape},
                                         name=scope).outputs[0]
                # colocated with the variable, as TF1 records it (`_class` in the NodeDef)
                loc = {"_class": [b"loc:@" + self._variable.op.name.encode()]}
                self._initializer_op = make_op(
                    "Assign", [self._variable, self._initial_value],
                    {"validate_shape": validate_shape, **loc}, name="Assign")
                self._snapshot = make_op("Identity", [self._variable], dict(loc),
                                         name="read").outputs[0]
        self._graph = graph
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        collections = list(collections)
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections.append(GraphKeys.TRAINABLE_VARIABLES)
        graph.add_to_collections(collections, self)
        self._save_slice_info = None

    # -- identity --------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._variable.name

    @property
    def op(self) -> Operation:
        return self._variable.op

    @property
    def graph(self):
        return self._graph

    @property
    def dtype(self):
        return self._variable.dtype

    @property
    def shape(self) -> TensorShape:
        return self._variable.shape

    def get_shape(self) -> TensorShape:
        return self._variable.shape

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def device(self) -> str:
        return ""

    @property
    def initializer(self) -> Operation:
        return self._initializer_op

    @property
    def initial_value(self) -> Tensor:
        return self._initial_value

    def initialized_value(self) -> Tensor:
        """The variable's value if it is initialized, else its initial value: use it to
        initialize another variable from this one in the same initializer run."""
        with self._graph.as_default(), self._graph.control_dependencies(None):
            return make_op("VariableOrInitialValue",
                           [self._variable, self._initial_value]).outputs[0]

    def value(self) -> Tensor:
        return self._snapshot

    def read_value(self) -> Tensor:
        """A new read of the variable, ordered after the enclosing control dependencies."""
        return identity(self._variable, name="read")

    def _ref(self) -> Tensor:
        return self._variable

    def _as_graph_element(self) -> Tensor:
        return self._variable

    def _to_tensor(self, dtype=None, name=None) -> Tensor:
        if dtype is not None and _dtypes.as_dtype(dtype) != self.dtype:
            raise ValueError(f"Incompatible type conversion requested to type "
                             f"'{_dtypes.as_dtype(dtype).name}' for variable of type "
                             f"'{self.dtype.name}'")
        return self._snapshot

    def _control_dependency_op(self) -> Operation:
        return self._variable.op

    # -- updates ---------------------------------------------------------------------------
    def assign(self, value, use_locking=None, name=None, read_value: bool = True):
        return assign(self, value, name=name, read_value=read_value)

    def assign_add(self, delta, use_locking=None, name=None, read_value: bool = True):
        return assign_add(self, delta, name=name, read_value=read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value: bool = True):
        return assign_sub(self, delta, name=name, read_value=read_value)

    def load(self, value, session=None) -> None:
        """Write `value` into this variable's state in `session` without running an op."""
        sess = session_for(session, self.graph, "load variable")
        sess._load_variable(self.op, value)

    def eval(self, session=None):
        return self._snapshot.eval(session=session)

    def set_shape(self, shape) -> None:
        self._variable.set_shape(shape)
        self._snapshot.set_shape(shape)

    def __repr__(self) -> str:
        return (f"<tf.Variable '{self.name}' shape={self.shape} "
                f"dtype={self.dtype.name}_ref>")

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self):
        raise TypeError("'Variable' object is not iterable.")

    def __bool__(self):
        return self._snapshot.__bool__()


def _graph_of_value(value):
    if isinstance(value, Tensor):
        return value.graph
    if isinstance(value, Variable):
        return value.graph
    return get_default_graph()


def _delegate(name):
    def method(self, *args):
        return getattr(self._snapshot, name)(*args)
    method.__name__ = name
    return method


_OVERLOADS = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__",
              "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__rand__",
              "__or__", "__ror__", "__xor__", "__rxor__", "__invert__", "__getitem__")


def install_variable_operators() -> None:
    """Give Variable every operator Tensor has (called once all op modules are loaded)."""
    for n in _OVERLOADS:
        if hasattr(Tensor, n):
            setattr(Variable, n, _delegate(n))
    Variable.__getitem__ = _variable_getitem


# -- sliced assignment: v[1:3].assign(x) --------------------------------------------------------
class _VariableSlice(Tensor):
    """A slice of a variable's value that can also be assigned, as `v[1:3].assign(x)` in TF1."""

    __slots__ = ()

    def assign(self, value, name: Optional[str] = None) -> Tensor:
        """Write `value` into this slice of the variable; the result is the variable's new
        value."""
        op = self.op
        var_t = op.inputs[0].op.inputs[0]  # strided_slice(w/read) -> w
        value = convert_to_tensor(value, dtype=var_t.dtype)
        return make_op("StridedSliceAssign", [var_t, value] + list(op.inputs[1:]),
                       dict(op.attrs), name=name).outputs[0]


def _variable_getitem(self, spec) -> Tensor:
    t = self._snapshot[spec]
    if t.op.type == "StridedSlice" and t.op.inputs[0] is self._snapshot:
        t.__class__ = _VariableSlice
    return t


def _slice_view(op):
    """The StridedSlice this assignment writes through, as a stand-in for the shape rule."""
    import types
    return types.SimpleNamespace(inputs=[op.inputs[0]] + list(op.inputs[2:]), attrs=op.attrs,
                                 name=op.name, type="StridedSlice")


def _ss_assign_infer(op):
    from jitflow.ops.slicing import _ss_infer
    ref, value = op.inputs[:2]
    if ref.op.type != "VariableV2":
        raise TypeError(f"'StridedSliceAssign' Op requires that input 'ref' be a mutable "
                        f"tensor (a Variable), got {ref.name}")
    (_, sliced), = _ss_infer(_slice_view(op))
    if not sliced.is_compatible_with(value.shape):
        raise ValueError(f"Sliced l-value shape {sliced} does not match r-value shape "
                         f"{value.shape} for '{op.name}' (op: 'StridedSliceAssign')")
    return [(ref.dtype, ref.shape)]


def _ss_assign_ref(op, var_op, value, *dyn, ctx):
    from jitflow.core.errors import InvalidArgumentError
    from jitflow.ops.slicing import _ss_index
    out = np.array(ctx.read_var(var_op), copy=True)
    idx = _ss_index(op, out.ndim, dyn)
    if out[idx].shape != np.shape(value):
        raise InvalidArgumentError(
            None, op, f"sliced l-value shape {list(out[idx].shape)} does not match r-value "
                      f"shape {list(np.shape(value))}")
    out[idx] = value
    return ctx.write_var(var_op, out)


register("StridedSliceAssign", infer=_ss_assign_infer, ref=_ss_assign_ref, needs_ctx=True,
         stateful=True, differentiable=False, kind="state",
         doc="Write input 1 into the strided slice of the variable (attrs as StridedSlice).")


# -- assign ops -------------------------------------------------------------------------------
def _assign_op(op_type, ref, value, name, read_value, validate_shape=True):
    var_t = ref._variable if isinstance(ref, Variable) else ref
    if not (isinstance(var_t, Tensor) and var_t.op.type == "VariableV2"):
        raise TypeError(f"{op_type} requires a Variable, got {ref!r}")
    value = convert_to_tensor(value, dtype=var_t.dtype)
    attrs = {"validate_shape": validate_shape} if op_type == "Assign" else {}
    op = make_op(op_type, [var_t, value], attrs, name=name)
    return op.outputs[0] if read_value else op


def assign(ref, value, validate_shape=None, use_locking=None, name=None, read_value=True):
    """`tf.assign`: store `value` in the variable; the result is the new value."""
    return _assign_op("Assign", ref, value, name, read_value,
                      True if validate_shape is None else validate_shape)


def assign_add(ref, value, use_locking=None, name=None, read_value=True):
    return _assign_op("AssignAdd", ref, value, name, read_value)


def assign_sub(ref, value, use_locking=None, name=None, read_value=True):
    return _assign_op("AssignSub", ref, value, name, read_value)


def _scatter_op(op_type, ref, indices, updates, name):
    var_t = ref._variable if isinstance(ref, Variable) else ref
    if not (isinstance(var_t, Tensor) and var_t.op.type == "VariableV2"):
        raise TypeError(f"{op_type} requires a Variable, got {ref!r}")
    with name_scope(name, op_type, [var_t]) as scope:
        i = convert_to_tensor(indices, name="indices")
        u = convert_to_tensor(updates, dtype=var_t.dtype, name="updates")
        return make_op(op_type, [var_t, i, u], name=scope).outputs[0]


def scatter_update(ref, indices, updates, use_locking=True, name=None) -> Tensor:
    """`tf.scatter_update`: ref[indices] = updates; the result is the new value."""
    return _scatter_op("ScatterUpdate", ref, indices, updates, name)


def scatter_add(ref, indices, updates, use_locking=False, name=None) -> Tensor:
    """`tf.scatter_add`: ref[indices] += updates (duplicate indices add up)."""
    return _scatter_op("ScatterAdd", ref, indices, updates, name)


def scatter_sub(ref, indices, updates, use_locking=False, name=None) -> Tensor:
    """`tf.scatter_sub`: ref[indices] -= updates (duplicate indices add up)."""
    return _scatter_op("ScatterSub", ref, indices, updates, name)


# -- collections and initializers -------------------------------------------------------------
def global_variables(scope: Optional[str] = None) -> list:
    return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


def all_variables() -> list:
    return global_variables()


def trainable_variables(scope: Optional[str] = None) -> list:
    return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope: Optional[str] = None) -> list:
    return get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope: Optional[str] = None) -> list:
    return get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def moving_average_variables(scope: Optional[str] = None) -> list:
    return get_default_graph().get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def variables_initializer(var_list, name: str = "init") -> Operation:
    """An op that runs the initializers of `var_list`."""
    if var_list:
        return group(*[v.initializer for v in var_list], name=name)
    return get_default_graph().create_op("NoOp", [], name=name)


initialize_variables = variables_initializer


def global_variables_initializer() -> Operation:
    return variables_initializer(global_variables())


def initialize_all_variables() -> Operation:
    """Deprecated TF1 spelling of `global_variables_initializer`."""
    return global_variables_initializer()


def local_variables_initializer() -> Operation:
    return variables_initializer(local_variables(), name="init")


initialize_local_variables = local_variables_initializer


def is_variable_initialized(variable) -> Tensor:
    var_t = variable._variable if isinstance(variable, Variable) else variable
    return make_op("IsVariableInitialized", [var_t]).outputs[0]


def report_uninitialized_variables(var_list=None,
                                   name: str = "report_uninitialized_variables") -> Tensor:
    """A 1-D string tensor with the names (op names) of the uninitialized variables."""
    if var_list is None:
        var_list = global_variables() + local_variables()
    refs = [v._variable if isinstance(v, Variable) else v for v in var_list]
    return make_op("ReportUninitializedVariables", refs, name=name,
                   graph=get_default_graph()).outputs[0]
