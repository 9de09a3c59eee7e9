"""The graph core: Graph, Operation, Tensor, the default-graph stack, name and control scopes.

An Operation is a node: an op type (a key of the op registry), input tensors, control inputs
and attributes. A Tensor is one output of an Operation. The Graph owns the operations, gives
them unique TF1-style names (`add`, `add_1`, `scope/mul`) and holds the collections.
"""
from __future__ import annotations

import contextlib
import re
import threading
from typing import Any, Iterator, Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.shapes import TensorShape, as_shape

__all__ = [
    "Graph", "Operation", "Tensor", "GraphKeys", "get_default_graph", "reset_default_graph",
    "name_scope", "control_dependencies", "convert_to_tensor", "make_op",
]

_VALID_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$")
_VALID_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_.\\/>-]*$")


class GraphKeys:
    """Standard collection names."""

    GLOBAL_VARIABLES = "variables"
    VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    LOSSES = "losses"
    SAVERS = "savers"
    GLOBAL_STEP = "global_step"
    TRAIN_OP = "train_op"
    UPDATE_OPS = "update_ops"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"


# ---------------------------------------------------------------------------------------------
class Tensor:
    """One output of an Operation: a symbolic handle with a static dtype and shape."""

    __slots__ = ("op", "value_index", "dtype", "_shape", "__weakref__")
    __array_priority__ = 100  # ndarray <op> Tensor defers to the Tensor's reflected method

    def __init__(self, op: "Operation", value_index: int, dtype: _dtypes.DType,
                 shape: TensorShape) -> None:
        self.op = op
        self.value_index = value_index
        self.dtype = dtype
        self._shape = shape

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self) -> "Graph":
        return self.op.graph

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape) -> None:
        self._shape = self._shape.merge_with(as_shape(shape))

    @property
    def device(self) -> str:
        return ""

    def consumers(self) -> list:
        return [op for op in self.op.graph._ops if self in op.inputs]

    def eval(self, feed_dict=None, session=None):
        """The value of this tensor in `session` (default: the default session)."""
        return session_for(session, self.graph, "evaluate tensor").run(self, feed_dict)

    def _as_graph_element(self) -> "Tensor":
        return self

    def __repr__(self) -> str:
        return f"<tf.Tensor '{self.name}' shape={self._shape} dtype={self.dtype.name}>"

    def __str__(self) -> str:
        shape = "" if self._shape.ndims is None else f", shape={self._shape}"
        return f'Tensor("{self.name}"{shape}, dtype={self.dtype.name})'

    def __bool__(self):
        raise TypeError("Using a `tf.Tensor` as a Python `bool` is not allowed. Use `if t is not "
                        "None:` instead of `if t:` to test if a tensor is defined.")

    def __iter__(self):
        raise TypeError("Tensor objects are only iterable when eager execution is enabled. To "
                        "iterate over this tensor use tf.unstack or tf.split.")

    def __len__(self):
        raise TypeError(f"len is not well defined for symbolic Tensors. ({self.name})")

    # identity hashing, in C: tensors and ops key the session's memo and state dicts
    __hash__ = object.__hash__

    # Operator overloads are installed by jitflow.ops (see `_install_operators` there).


# ---------------------------------------------------------------------------------------------
class Operation:
    """A node of the graph."""

    __slots__ = ("graph", "name", "type", "inputs", "outputs", "_control_inputs", "attrs",
                 "_id", "op_def", "__weakref__")

    def __init__(self, graph: "Graph", op_type: str, name: str, inputs, attrs: dict,
                 control_inputs, op_def) -> None:
        self.graph = graph
        self.type = op_type
        self.name = name
        self.inputs = tuple(inputs)
        self.attrs = attrs
        self._control_inputs = list(control_inputs)
        self.op_def = op_def
        self.outputs: tuple = ()
        self._id = graph._next_id()

    @property
    def control_inputs(self) -> list:
        return list(self._control_inputs)

    def _add_control_input(self, op: "Operation") -> None:
        if op not in self._control_inputs:
            self._control_inputs.append(op)
            self.graph._version += 1

    @property
    def device(self) -> str:
        return ""

    @property
    def node_def(self):
        """The op as TensorFlow's `NodeDef` message (what a GraphDef holds for it)."""
        from jitflow.serialize.graph_def import node_def   # TF's formats, a library above
        return node_def(self)

    def colocation_groups(self) -> list:
        """The colocation groups of the op (`[b"loc:@name"]`: its own unless it was created
        colocated with another, as a variable's initializer and read are)."""
        return list(self.attrs.get("_class") or [b"loc:@" + self.name.encode()])

    def get_attr(self, name: str):
        try:
            return self.attrs[name]
        except KeyError:
            raise ValueError(f"Operation '{self.name}' has no attr named '{name}'.") from None

    def values(self) -> tuple:
        return self.outputs

    def run(self, feed_dict=None, session=None) -> None:
        """Run this operation in `session` (default: the default session)."""
        session_for(session, self.graph, "run operation").run(self, feed_dict)

    def _as_graph_element(self) -> "Operation":
        return self

    def __repr__(self) -> str:
        return f"<tf.Operation '{self.name}' type={self.type}>"

    def __str__(self) -> str:
        """The NodeDef in protobuf's text format, as TF1 prints an op."""
        return str(self.node_def)

    # identity hashing, in C: tensors and ops key the session's memo and state dicts
    __hash__ = object.__hash__


# ---------------------------------------------------------------------------------------------
class _ControlController:
    __slots__ = ("control_inputs", "created")

    def __init__(self, control_inputs) -> None:
        self.control_inputs = control_inputs
        self.created: set = set()


class Graph:
    """A TF1 dataflow graph: operations, unique names, scopes, collections."""

    def __init__(self) -> None:
        self._ops: list[Operation] = []
        self._ops_by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._name_stack = ""
        self._control_stack: list[_ControlController] = []
        self._collections: dict[str, list] = {}
        self._finalized = False
        self._version = 0
        self._id_counter = 0
        self.seed: Optional[int] = None
        self._lock = threading.RLock()
        self._variable_store: dict = {}   # get_variable: full name -> Variable
        self._var_scope_stack: list = []  # VariableScope objects (jitflow.ops.variable_scope)
        self._var_scope_counts: dict = {}  # scope name -> times entered (unique default names)
        self._attr_scope: dict = {}

    # -- identity --------------------------------------------------------------------------
    def _next_id(self) -> int:
        self._id_counter += 1
        return self._id_counter

    @property
    def version(self) -> int:
        return self._version

    @property
    def finalized(self) -> bool:
        return self._finalized

    def finalize(self) -> None:
        """Make the graph read-only: adding an op afterwards raises RuntimeError."""
        self._finalized = True

    def _unsafe_unfinalize(self) -> None:
        self._finalized = False

    def _check_not_finalized(self) -> None:
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")

    @contextlib.contextmanager
    def as_default(self) -> Iterator["Graph"]:
        """Make this graph the default graph of the current thread inside the block."""
        stack = _graph_stack()
        stack.append(self)
        try:
            yield self
        finally:
            # Tolerate out-of-order exits as TF1 does, but always remove this entry.
            for i in range(len(stack) - 1, -1, -1):
                if stack[i] is self:
                    del stack[i]
                    break

    # -- names -----------------------------------------------------------------------------
    def get_name_scope(self) -> str:
        return self._name_stack

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """TF1's naming: prefix the current scope; on a clash append `_1`, `_2`, ..."""
        if self._name_stack:
            name = self._name_stack + "/" + name
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while key in self._names_in_use:
                key = f"{base}_{i}"
                i += 1
            if mark_as_used:
                self._names_in_use[key] = 1
            name = f"{name}_{i - 1}"
        return name

    @contextlib.contextmanager
    def name_scope(self, name: Optional[str]) -> Iterator[str]:
        """Enter a name scope; yields the scope prefix ending in '/' (or '' at top level)."""
        if name:
            name = str(name)
            pattern = _VALID_SCOPE_NAME if self._name_stack else _VALID_OP_NAME
            if not pattern.match(name):
                raise ValueError(f"'{name}' is not a valid scope name")
        old = self._name_stack
        if not name:
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
        else:
            new = self.unique_name(name)
        self._name_stack = new
        try:
            yield new + "/" if new else ""
        finally:
            self._name_stack = old

    # -- control dependencies ----------------------------------------------------------------
    @contextlib.contextmanager
    def control_dependencies(self, control_inputs) -> Iterator[None]:
        """Ops created in the block run after `control_inputs`; `None` clears outer ones."""
        if control_inputs is None:
            old = self._control_stack
            self._control_stack = []
            try:
                yield
            finally:
                self._control_stack = old
            return
        ops = []
        for c in control_inputs:
            if hasattr(c, "_control_dependency_op"):
                c = c._control_dependency_op()
            el = self.as_graph_element(c, allow_tensor=True, allow_operation=True)
            op = el.op if isinstance(el, Tensor) else el
            if op not in ops:
                ops.append(op)
        ctl = _ControlController(ops)
        self._control_stack.append(ctl)
        try:
            yield
        finally:
            self._control_stack.remove(ctl)

    def _control_inputs_for(self, input_ops) -> list:
        out: list = []
        for ctl in self._control_stack:
            if any(op in ctl.created for op in input_ops):
                continue  # dominated: an input already depends on this block's ops
            for c in ctl.control_inputs:
                if c not in input_ops and c not in out:
                    out.append(c)
        return out

    # -- op creation -----------------------------------------------------------------------
    def create_op(self, op_type: str, inputs, attrs: Optional[dict] = None,
                  name: Optional[str] = None, control_inputs=None) -> Operation:
        """Add an op of a registered type; its output dtypes and shapes come from its rule."""
        # the registry (a layer above) holds every op type's shape rule
        from jitflow.ops.registry import get_op_def
        self._check_not_finalized()
        op_def = get_op_def(op_type)
        for t in inputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"Input of '{op_type}' must be a Tensor, got {t!r}")
            if t.graph is not self:
                raise ValueError(f"Tensor {t!r} must be from the same graph as the op being "
                                 f"created ({op_type}).")
        with self._lock:
            if name is None:
                name = op_def.default_name
            if name.endswith("/"):
                full = name[:-1]  # a scope name used as the op name (TF1 idiom)
                self._names_in_use.setdefault(full.lower(), 1)
            else:
                if not _VALID_OP_NAME.match(name.split("/")[-1] or "x"):
                    raise ValueError(f"'{name}' is not a valid node name")
                full = self.unique_name(name)
            if full in self._ops_by_name:
                raise ValueError(f"Duplicate node name in graph: '{full}'")
            input_ops = [t.op for t in inputs]
            ctrl = self._control_inputs_for(input_ops)
            for c in control_inputs or ():
                c = c.op if isinstance(c, Tensor) else c
                if c not in ctrl:
                    ctrl.append(c)
            attrs = dict(attrs or {})
            override = self._attr_scope.get("_gradient_override")
            if override and op_type in override:
                attrs["_gradient_op_type"] = override[op_type]
            op = Operation(self, op_type, full, inputs, attrs, ctrl, op_def)
            specs = op_def.infer(op)
            op.outputs = tuple(Tensor(op, i, _dtypes.as_dtype(d), as_shape(s))
                               for i, (d, s) in enumerate(specs))
            self._ops.append(op)
            self._ops_by_name[full] = op
            for ctl in self._control_stack:
                ctl.created.add(op)
            self._version += 1
        return op

    # -- lookup ----------------------------------------------------------------------------
    def get_operations(self) -> list:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings (or similar), not {type(name).__name__}")
        return self.as_graph_element(name, allow_tensor=False, allow_operation=True)

    def get_tensor_by_name(self, name: str) -> Tensor:
        if not isinstance(name, str):
            raise TypeError(f"Tensor names are strings (or similar), not {type(name).__name__}")
        return self.as_graph_element(name, allow_tensor=True, allow_operation=False)

    def as_graph_element(self, obj, allow_tensor: bool = True, allow_operation: bool = True):
        """Resolve a Tensor, Operation, name string or Variable-like object in this graph."""
        if hasattr(obj, "_as_graph_element") and not isinstance(obj, (Tensor, Operation)):
            obj = obj._as_graph_element()
        types = " or ".join(n for n, ok in (("Tensor", allow_tensor),
                                            ("Operation", allow_operation)) if ok)
        if isinstance(obj, str):
            if ":" in obj:
                if not allow_tensor:
                    raise ValueError(f"Name '{obj}' appears to refer to a Tensor, not a {types}.")
                op_name, _, idx = obj.rpartition(":")
                try:
                    idx = int(idx)
                except ValueError:
                    raise ValueError(f"The name {obj!r} looks like a Tensor name, but is not a "
                                     "valid one.") from None
                op = self._ops_by_name.get(op_name)
                if op is None:
                    raise KeyError(f"The name '{obj}' refers to a Tensor which does not exist. "
                                   f"The operation, '{op_name}', does not exist in the graph.")
                if idx >= len(op.outputs):
                    raise KeyError(f"The name '{obj}' refers to a Tensor which does not exist. "
                                   f"The operation, '{op_name}', exists but only has "
                                   f"{len(op.outputs)} outputs.")
                return op.outputs[idx]
            if not allow_operation:
                raise ValueError(f"The name '{obj}' looks like an (invalid) Operation name, not "
                                 f"a {types}. Tensor names must be of the form "
                                 "\"<op_name>:<output_index>\".")
            op = self._ops_by_name.get(obj)
            if op is None:
                raise KeyError(f"The name '{obj}' refers to an Operation not in the graph.")
            return op
        if isinstance(obj, Tensor) and allow_tensor:
            if obj.graph is not self:
                raise ValueError(f"Tensor {obj} is not an element of this graph.")
            return obj
        if isinstance(obj, Operation) and allow_operation:
            if obj.graph is not self:
                raise ValueError(f"Operation {obj} is not an element of this graph.")
            return obj
        raise TypeError(f"Can not convert a {type(obj).__name__} into a {types}.")

    # -- collections -----------------------------------------------------------------------
    def add_to_collection(self, name: str, value) -> None:
        self._check_not_finalized()
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names, value) -> None:
        names = (names,) if isinstance(names, str) else set(names)
        for n in names:
            self.add_to_collection(n, value)

    def get_collection_ref(self, name: str) -> list:
        return self._collections.setdefault(name, [])

    def get_collection(self, name: str, scope: Optional[str] = None) -> list:
        items = self._collections.get(name, [])
        if scope is None:
            return list(items)
        pat = re.compile(scope)
        return [v for v in items if hasattr(v, "name") and pat.match(v.name)]

    def get_all_collection_keys(self) -> list:
        return [k for k, v in self._collections.items() if v]

    def clear_collection(self, name: str) -> None:
        self._collections.pop(name, None)

    # -- misc TF1 API ----------------------------------------------------------------------
    @contextlib.contextmanager
    def device(self, device_name) -> Iterator[None]:
        """Accepted for compatibility; placement is chosen by the session's backend."""
        yield

    @contextlib.contextmanager
    def colocate_with(self, op, ignore_existing: bool = False) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map) -> Iterator[None]:
        old = self._attr_scope.get("_gradient_override", {})
        self._attr_scope["_gradient_override"] = {**old, **op_type_map}
        try:
            yield
        finally:
            self._attr_scope["_gradient_override"] = old

    @property
    def building_function(self) -> bool:
        return False

    # -- text form -------------------------------------------------------------------------
    def _op_line(self, op: Operation) -> str:
        outs = ", ".join(f"{t.dtype.name}{_shape_str(t.shape)}" for t in op.outputs) or "()"
        args = ", ".join(t.name for t in op.inputs)
        ctrl = "".join(f" ^{c.name}" for c in op._control_inputs)
        attrs = "".join(f" {k}={_attr_str(v)}" for k, v in sorted(op.attrs.items())
                        if not k.startswith("_"))
        return f"{op.name} = {op.type}({args}){ctrl}{attrs} -> {outs}"

    def as_text(self) -> str:
        """A stable, readable listing: one op per line in creation order."""
        return "\n".join(self._op_line(op) for op in self._ops)

    def as_graph_def(self, from_version=None, add_shapes: bool = False):
        """The graph as a TensorFlow `GraphDef` message (see jitflow.serialize.graph_def)."""
        from jitflow.serialize import as_graph_def   # TF's formats, a library above
        return as_graph_def(self, add_shapes=add_shapes)

    def __repr__(self) -> str:
        return f"<jitflow.Graph with {len(self._ops)} ops>"


def _shape_str(shape: TensorShape) -> str:
    dims = shape.as_tuple()
    if dims is None:
        return "[*]"
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _attr_str(v) -> str:
    if isinstance(v, np.ndarray):
        if v.size <= 4:
            return np.array2string(v, separator=",").replace("\n", "")
        return f"<{v.dtype}{list(v.shape)}>"
    if isinstance(v, _dtypes.DType):
        return v.name
    return repr(v)


# ---------------------------------------------------------------------------------------------
_local = threading.local()
_global_default: list = [None]


def _graph_stack() -> list:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def get_default_graph() -> Graph:
    """The innermost `as_default()` graph of this thread, else the global default graph."""
    stack = _graph_stack()
    if stack:
        return stack[-1]
    if _global_default[0] is None:
        _global_default[0] = Graph()
    return _global_default[0]


# -- the session hook: graph building imports no session -------------------------------------------
def _no_session(*args):
    raise ValueError("No session module is loaded: `import jitflow` installs one")


_SESSION_HOOKS: dict = {"session_for": _no_session, "clear": lambda: None}


def set_session_hooks(session_for, clear_default_sessions) -> None:
    """Installed by jitflow.core.session: `session_for(session, graph, what)` picks the session that
    `Tensor.eval`, `Operation.run` and `Variable.load` use (the default one when `session` is
    None); `clear_default_sessions()` runs in `reset_default_graph`."""
    _SESSION_HOOKS["session_for"] = session_for
    _SESSION_HOOKS["clear"] = clear_default_sessions


def session_for(session, graph: "Graph", what: str):
    """The session for `eval`/`run`/`load` of an element of `graph` (see `set_session_hooks`)."""
    return _SESSION_HOOKS["session_for"](session, graph, what)


def reset_default_graph() -> None:
    """Replace the global default graph with a new, empty one."""
    if _graph_stack():
        raise AssertionError("Do not use tf.reset_default_graph() to clear nested graphs. If "
                             "you need a cleared graph, exit the nesting and create a new graph.")
    _SESSION_HOOKS["clear"]()
    _global_default[0] = Graph()


def _graph_of(values) -> Graph:
    """The graph the given inputs live in (the default graph when none is a graph element)."""
    graph = None
    for v in values:
        g = getattr(v, "graph", None)
        if isinstance(g, Graph):
            if graph is None:
                graph = g
            elif g is not graph:
                raise ValueError(f"{v!r} must be from the same graph as the other inputs.")
    return graph if graph is not None else get_default_graph()


@contextlib.contextmanager
def name_scope(name, default_name: Optional[str] = None, values=None) -> Iterator[str]:
    """`tf.name_scope(name, default_name=None, values=None)`: yields the scope prefix."""
    n = name if name is not None else default_name
    if n is None and name is None and default_name is None and values is None:
        n = None
    g = _graph_of(values or ())
    if values and g is not get_default_graph():
        with g.as_default(), g.name_scope(n) as scope:
            yield scope
    else:
        with g.name_scope(n) as scope:
            yield scope


def control_dependencies(control_inputs):
    """`tf.control_dependencies` on the default graph."""
    return get_default_graph().control_dependencies(control_inputs)


def make_op(op_type: str, inputs, attrs: Optional[dict] = None, name: Optional[str] = None,
            graph: Optional[Graph] = None) -> Operation:
    """Create an op in the inputs' graph (or `graph`, or the default graph)."""
    g = graph if graph is not None else _graph_of(inputs)
    return g.create_op(op_type, inputs, attrs, name)


def _infer_numpy(value) -> np.ndarray:
    """TF1's dtype inference for constants: Python floats -> float32, ints -> int32, str and
    bytes -> a string tensor (an object array of bytes)."""
    if _dtypes.is_string_value(value):
        return _dtypes.as_bytes_array(value)
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind in "SUO":
            raise TypeError(f"Failed to convert object of type {type(value).__name__} to Tensor.")
        return arr
    try:
        arr = np.asarray(value)
    except ValueError as e:
        raise ValueError(f"Failed to convert {value!r} to a Tensor: {e}") from None
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64:
        if arr.size == 0 or (arr.min() >= -2**31 and arr.max() < 2**31):
            arr = arr.astype(np.int32)
    elif arr.dtype.kind in "SUO":
        raise TypeError(f"Failed to convert object of type {type(value).__name__} to Tensor. "
                        f"Contents: {value!r}. Consider casting elements to a supported type.")
    return arr


def convert_to_tensor(value, dtype=None, name: Optional[str] = None,
                      preferred_dtype=None) -> Tensor:
    """Return `value` as a Tensor: tensors pass through, Python/NumPy values become constants."""
    dtype = None if dtype is None else _dtypes.as_dtype(dtype)
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype != dtype:
            raise ValueError(f"Tensor conversion requested dtype {dtype.name} for Tensor with "
                             f"dtype {value.dtype.name}: {value!r}")
        return value
    if hasattr(value, "_to_tensor"):
        return value._to_tensor(dtype=dtype, name=name)
    if isinstance(value, (list, tuple)) and _contains_tensor(value):
        from jitflow.ops._array_args import _autopack   # a Pack op (the ops are above)
        return _autopack(value, dtype, name or "packed")
    if isinstance(value, Operation):
        raise TypeError(f"Can't convert Operation '{value.name}' to Tensor (target dtype="
                        f"{dtype}, name={name!r}, as_ref=False)")
    # a Const op (the ops are a layer above the graph)
    from jitflow.ops.sources import constant
    if dtype is None:
        if preferred_dtype is not None:
            try:
                return convert_to_tensor(value, preferred_dtype, name)
            except (TypeError, ValueError):
                pass
        arr = _infer_numpy(value)
        return constant(arr, dtype=arr.dtype, name=name or "Const")
    # With a target dtype, Python floats go straight to it (no float32 rounding on the way).
    arr = np.asarray(value)
    if arr.dtype.kind in "SUO":
        arr = _infer_numpy(value)  # raises TF1's TypeError for non-numeric values
    if (arr.dtype == object) != (dtype == _dtypes.string):
        raise TypeError(f"Expected {dtype.name}, got {value!r} of type "
                        f"'{type(value).__name__}' instead.")
    if arr.dtype.kind == "f" and dtype.is_integer:
        raise TypeError(f"Expected {dtype.name}, got {value!r} of type "
                        f"'{type(value).__name__}' instead.")
    if arr.dtype.kind == "b" and not dtype.is_bool or dtype.is_bool and arr.dtype.kind != "b":
        raise TypeError(f"Expected {dtype.name}, got {value!r} of type "
                        f"'{type(value).__name__}' instead.")
    return constant(arr, dtype=dtype, name=name or "Const")


def _contains_tensor(value) -> bool:
    """Whether a (nested) list/tuple holds a tensor: TF1 then packs it with `tf.stack`."""
    return any(is_tensor_like(v) or (isinstance(v, (list, tuple)) and _contains_tensor(v))
               for v in value)


def is_tensor_like(x: Any) -> bool:
    return isinstance(x, Tensor) or hasattr(x, "_to_tensor")
