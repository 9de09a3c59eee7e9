"""`tf.variable_scope` and `tf.get_variable`: named, shareable variables.

A variable scope prefixes the names of variables made by `get_variable` and decides whether
they are created (`reuse=False`), looked up (`reuse=True`) or either (`tf.AUTO_REUSE`).
Entering one also opens a name scope for ops, which is made unique on re-entry (`layer_1/`)
while the variables keep `layer/`. Each graph keeps its own scope stack and variable store.
"""
from __future__ import annotations

import enum
from contextlib import ExitStack
from typing import Callable, Optional

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import (GraphKeys, _graph_of, convert_to_tensor, get_default_graph,
                                name_scope)
from jitflow.ops.init_ops import _as_initializer, glorot_uniform_initializer, zeros_initializer
from jitflow.ops.state import Variable
from jitflow.core.shapes import TensorShape, as_shape

__all__ = ["AUTO_REUSE", "VariableScope", "variable_scope", "get_variable",
           "get_variable_scope", "get_local_variable", "variable_op_scope"]


class _ReuseMode(enum.Enum):
    """`tf.AUTO_REUSE`: get_variable creates the variable if missing, else returns it."""

    AUTO_REUSE = 1

    def __repr__(self) -> str:
        return "tf.AUTO_REUSE"


AUTO_REUSE = _ReuseMode.AUTO_REUSE


class VariableScope:
    """The defaults that `get_variable` uses inside a `variable_scope`."""

    def __init__(self, reuse, name: str = "", initializer=None, regularizer=None,
                 caching_device=None, partitioner=None, custom_getter=None,
                 name_scope: str = "", dtype=_dtypes.float32, use_resource=None,
                 constraint=None) -> None:
        self._name = name
        self._reuse = reuse
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._dtype = _dtypes.as_dtype(dtype)
        self._use_resource = use_resource
        self._constraint = constraint

    @property
    def name(self) -> str:
        return self._name

    @property
    def original_name_scope(self) -> str:
        return self._name_scope

    @property
    def reuse(self):
        return self._reuse

    @property
    def initializer(self):
        return self._initializer

    @property
    def dtype(self) -> _dtypes.DType:
        return self._dtype

    @property
    def regularizer(self):
        return self._regularizer

    @property
    def custom_getter(self):
        return self._custom_getter

    @property
    def caching_device(self):
        return self._caching_device

    @property
    def partitioner(self):
        return self._partitioner

    @property
    def use_resource(self):
        return self._use_resource

    @property
    def constraint(self):
        return self._constraint

    def reuse_variables(self) -> None:
        """From now on, `get_variable` in this scope looks variables up instead of creating."""
        self._reuse = True

    def set_initializer(self, initializer) -> None:
        self._initializer = initializer

    def set_dtype(self, dtype) -> None:
        self._dtype = _dtypes.as_dtype(dtype)

    def set_regularizer(self, regularizer) -> None:
        self._regularizer = regularizer

    def set_custom_getter(self, custom_getter) -> None:
        self._custom_getter = custom_getter

    def set_caching_device(self, caching_device) -> None:
        self._caching_device = caching_device

    def set_partitioner(self, partitioner) -> None:
        self._partitioner = partitioner

    def set_use_resource(self, use_resource) -> None:
        self._use_resource = use_resource

    def get_variable(self, var_store, name: str, shape=None, dtype=None, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     caching_device=None, partitioner=None, validate_shape: bool = True,
                     use_resource=None, custom_getter=None, constraint=None, **kwargs):
        """Create or look up `<scope name>/<name>` in `var_store` (the graph's store)."""
        if regularizer is None:
            regularizer = self._regularizer
        if reuse is None:
            reuse = self._reuse
        full_name = f"{self._name}/{name}" if self._name else name
        with name_scope(None):  # variable names depend on the variable scope only
            if dtype is not None and initializer is not None and not callable(initializer):
                init_dtype = convert_to_tensor(initializer).dtype.base_dtype
                if init_dtype != _dtypes.as_dtype(dtype):
                    raise ValueError(f"Initializer type '{init_dtype!r}' and explicit dtype "
                                     f"'{_dtypes.as_dtype(dtype)!r}' don't match.")
            if initializer is None:
                initializer = self._initializer
            if dtype is None:
                dtype = self._dtype
            if constraint is None:
                constraint = self._constraint
            getter = _make_getter(var_store)
            for cg in (self._custom_getter, custom_getter):
                if cg is not None:
                    getter = _wrap_getter(cg, getter)
            return getter(full_name, shape=shape, dtype=dtype, initializer=initializer,
                          regularizer=regularizer, reuse=reuse, trainable=trainable,
                          collections=collections, validate_shape=validate_shape,
                          constraint=constraint)

    def __repr__(self) -> str:
        return f"<VariableScope '{self._name}' reuse={self._reuse!r}>"


def _wrap_getter(custom_getter: Callable, getter: Callable) -> Callable:
    def wrapped(name, *args, **kwargs):
        return custom_getter(getter, name, *args, **kwargs)
    return wrapped


def _make_getter(var_store: dict) -> Callable:
    def getter(name, shape=None, dtype=_dtypes.float32, initializer=None, regularizer=None,
               reuse=None, trainable=None, collections=None, validate_shape=True,
               constraint=None, **kwargs):
        return _get_single_variable(var_store, name, shape, dtype, initializer, regularizer,
                                    reuse, trainable, collections, validate_shape, constraint)
    return getter


def _get_single_variable(store: dict, name: str, shape, dtype, initializer, regularizer,
                         reuse, trainable, collections, validate_shape, constraint):
    from_value = initializer is not None and not callable(initializer)
    if shape is not None and from_value:
        raise ValueError("If initializer is a constant, do not specify shape.")
    dtype = _dtypes.as_dtype(dtype)
    shape = as_shape(shape) if shape is not None else TensorShape(None)
    if name in store:
        if reuse is False:
            raise ValueError(f"Variable {name} already exists, disallowed. Did you mean to set "
                             "reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
        found = store[name]
        if not shape.is_compatible_with(found.get_shape()):
            raise ValueError(f"Trying to share variable {name}, but specified shape {shape} "
                             f"and found shape {found.get_shape()}.")
        if not dtype.is_compatible_with(found.dtype):
            raise ValueError(f"Trying to share variable {name}, but specified dtype "
                             f"{dtype.name} and found dtype {found.dtype.name}.")
        return found
    if reuse is True:
        raise ValueError(f"Variable {name} does not exist, or was not created with "
                         "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                         "VarScope?")
    if initializer is None:
        if dtype.is_floating:
            initializer = glorot_uniform_initializer()
        elif dtype.is_integer or dtype.is_bool:
            initializer = zeros_initializer()
        else:
            raise ValueError(f"An initializer for variable {name} of {dtype.name} is required")
    if from_value:
        init_val, var_dtype = initializer, None
    else:
        initializer = _as_initializer(initializer)
        if shape.is_fully_defined():
            dims = shape.as_list()

            def init_val():
                return initializer(dims, dtype=dtype, partition_info=None)
            var_dtype = dtype
        else:
            try:
                init_val = initializer
                var_dtype = None
                import inspect
                sig = inspect.signature(initializer)
                if any(p.default is inspect.Parameter.empty and
                       p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                       for p in sig.parameters.values()):
                    raise TypeError
            except (TypeError, ValueError):
                raise ValueError(f"Shape of a new variable ({name}) must be fully defined, but "
                                 f"instead was {shape}.") from None
    if trainable is None:
        trainable = True
    v = Variable(initial_value=init_val, name=name, trainable=trainable,
                 collections=collections, validate_shape=validate_shape, dtype=var_dtype,
                 constraint=constraint)
    store[name] = v
    if regularizer is not None:
        with name_scope(f"{name}/Regularizer/"):
            loss = regularizer(v)
        if loss is not None:
            v.graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return v


# -- the per-graph scope stack ------------------------------------------------------------------
def _state(graph):
    """(scope stack, scope-name counts) of `graph`; the root scope is created on first use."""
    if not graph._var_scope_stack:
        graph._var_scope_stack.append(VariableScope(False))
    return graph._var_scope_stack, graph._var_scope_counts


def get_variable_scope() -> VariableScope:
    """The current variable scope of the default graph."""
    stack, _ = _state(get_default_graph())
    return stack[-1]


def _unique_scope_name(graph, prefix: str) -> str:
    stack, counts = _state(graph)
    cur = stack[-1].name
    full = f"{cur}/{prefix}" if cur else prefix
    if counts.get(full, 0) == 0:
        return prefix
    i = 1
    while counts.get(f"{full}_{i}", 0) > 0:
        i += 1
    return f"{prefix}_{i}"


class variable_scope:  # noqa: N801  (TF1 spelling)
    """`tf.variable_scope(name_or_scope, default_name=None, values=None, initializer=None,
    regularizer=None, caching_device=None, partitioner=None, custom_getter=None, reuse=None,
    dtype=None, use_resource=None, constraint=None, auxiliary_name_scope=True)`.

    `reuse`: True, tf.AUTO_REUSE, or None/False to inherit the enclosing scope's setting.
    """

    def __init__(self, name_or_scope, default_name: Optional[str] = None, values=None,
                 initializer=None, regularizer=None, caching_device=None, partitioner=None,
                 custom_getter=None, reuse=None, dtype=None, use_resource=None,
                 constraint=None, auxiliary_name_scope: bool = True) -> None:
        if name_or_scope is None and default_name is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if name_or_scope is not None and not isinstance(name_or_scope, (str, VariableScope)):
            raise TypeError("VariableScope: name_or_scope must be a string or VariableScope.")
        if reuse is False:
            reuse = None  # False means "inherit", as in TF1
        if name_or_scope is None and reuse:
            raise ValueError("reuse=True cannot be used without a name_or_scope")
        self._name_or_scope = name_or_scope
        self._default_name = default_name
        self._values = values
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._reuse = reuse
        self._dtype = dtype
        self._use_resource = use_resource
        self._constraint = constraint
        self._aux = auxiliary_name_scope
        self._exit: Optional[ExitStack] = None

    def __enter__(self) -> VariableScope:
        es = ExitStack()
        try:
            graph = _graph_of(self._values or ())
            if graph is not get_default_graph():
                es.enter_context(graph.as_default())
            scope = self._enter(graph, es)
        except BaseException:
            es.close()
            raise
        self._exit = es
        return scope

    def __exit__(self, *exc) -> None:
        es, self._exit = self._exit, None
        es.__exit__(*exc)

    def _enter(self, graph, es: ExitStack) -> VariableScope:
        stack, counts = _state(graph)
        old = stack[-1]
        nos = self._name_or_scope
        if nos is None:
            ns = es.enter_context(name_scope(self._default_name)) if self._aux else ""
            name = _unique_scope_name(graph, self._default_name)
            nos, old_ns = name, ns
        elif isinstance(nos, str):
            ns = es.enter_context(name_scope(nos)) if self._aux else ""
            old_ns = ns
        else:
            if self._aux:
                es.enter_context(name_scope(nos.name.split("/")[-1]))
            old_ns = nos.original_name_scope
        if isinstance(nos, VariableScope):
            new_name = nos.name
            scope = VariableScope(
                self._reuse if self._reuse else nos.reuse, name=new_name,
                initializer=nos.initializer, regularizer=nos.regularizer,
                caching_device=nos.caching_device, partitioner=nos.partitioner,
                custom_getter=nos.custom_getter, name_scope=old_ns, dtype=nos.dtype,
                use_resource=nos.use_resource, constraint=nos.constraint)
            saved_counts = dict(counts)
            counts[new_name] = counts.get(new_name, 0) + 1

            def restore():
                counts.clear()
                counts.update(saved_counts)
        else:
            new_name = f"{old.name}/{nos}" if old.name else nos
            scope = VariableScope(
                self._reuse or old.reuse, name=new_name, initializer=old.initializer,
                regularizer=old.regularizer, caching_device=old.caching_device,
                partitioner=old.partitioner, custom_getter=old.custom_getter,
                name_scope=old_ns, dtype=old.dtype, use_resource=old.use_resource,
                constraint=old.constraint)
            counts[new_name] = counts.get(new_name, 0) + 1

            def restore():
                # Sub-scopes opened inside are forgotten, so re-entering `layer` makes
                # `layer/dense` again (not `layer/dense_1`).
                for k in counts:
                    if k.startswith(new_name + "/"):
                        counts[k] = 0
        if self._initializer is not None:
            scope.set_initializer(self._initializer)
        if self._regularizer is not None:
            scope.set_regularizer(self._regularizer)
        if self._caching_device is not None:
            scope.set_caching_device(self._caching_device)
        if self._partitioner is not None:
            scope.set_partitioner(self._partitioner)
        if self._use_resource is not None:
            scope.set_use_resource(self._use_resource)
        if self._constraint is not None:
            scope._constraint = self._constraint
        if self._dtype is not None:
            scope.set_dtype(self._dtype)
        if self._custom_getter is not None:
            scope.set_custom_getter(_compose_getters(self._custom_getter,
                                                     scope.custom_getter))
        stack.append(scope)

        def pop():
            if scope in stack:
                stack.remove(scope)
            restore()
        es.callback(pop)
        return scope


def _compose_getters(inner: Callable, outer: Optional[Callable]) -> Callable:
    if outer is None:
        return inner

    def composed(getter, *args, **kwargs):
        return inner(lambda *a, **k: outer(getter, *a, **k), *args, **kwargs)
    return composed


def variable_op_scope(values, name_or_scope, default_name=None, initializer=None,
                      regularizer=None, caching_device=None, partitioner=None,
                      custom_getter=None, reuse=None, dtype=None, use_resource=None,
                      constraint=None) -> variable_scope:
    """Deprecated TF1 spelling of `variable_scope(name_or_scope, default_name, values)`."""
    return variable_scope(name_or_scope, default_name=default_name, values=values,
                          initializer=initializer, regularizer=regularizer,
                          caching_device=caching_device, partitioner=partitioner,
                          custom_getter=custom_getter, reuse=reuse, dtype=dtype,
                          use_resource=use_resource, constraint=constraint)


def get_variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable: Optional[bool] = None, collections=None, caching_device=None,
                 partitioner=None, validate_shape: bool = True, use_resource=None,
                 custom_getter=None, constraint=None, synchronization=None,
                 aggregation=None) -> Variable:
    """`tf.get_variable`: the variable `<scope>/<name>`, created or reused per the scope.

    Raises ValueError when it exists and the scope does not reuse ("... already exists,
    disallowed ...") or is missing and the scope reuses ("... does not exist ...").
    """
    graph = get_default_graph()
    scope = get_variable_scope()
    return scope.get_variable(graph._variable_store, name, shape=shape, dtype=dtype,
                              initializer=initializer, regularizer=regularizer,
                              trainable=trainable, collections=collections,
                              caching_device=caching_device, partitioner=partitioner,
                              validate_shape=validate_shape, use_resource=use_resource,
                              custom_getter=custom_getter, constraint=constraint)


def get_local_variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None,
                       trainable: bool = False, collections=None, **kwargs) -> Variable:
    """`tf.get_local_variable`: like get_variable, in the LOCAL_VARIABLES collection."""
    collections = list(collections or []) + [GraphKeys.LOCAL_VARIABLES]
    return get_variable(name, shape, dtype, initializer, regularizer, False, collections,
                        **kwargs)
