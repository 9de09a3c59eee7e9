"""The `Optimizer` base class: gradients, slot variables and the update graph.

Every update is a plain graph op on the variables (`Assign`/`AssignSub` with the math as
ops). A slot's new value, as returned by its assign, feeds the variable's update, so the order
within a step is a data dependency and a whole training step is one graph a compiler can fuse.
"""
from __future__ import annotations

import weakref
from typing import Optional

import numpy as np

from jitflow.core.graph import (GraphKeys, Operation, Tensor, control_dependencies,
                                convert_to_tensor, get_default_graph, name_scope)

__all__ = ["Optimizer", "applied_gradients"]

#: the op `apply_gradients` returned -> the (gradient, variable) pairs it applies; lets a tool
#: compute those gradients elsewhere and feed them to the op (jitflow.dask.fit)
_APPLIED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def applied_gradients(op) -> Optional[tuple]:
    """The (gradient tensor, variable) pairs applied by `op`, an op returned by an optimizer's
    `apply_gradients` or `minimize`; None for any other op."""
    return _APPLIED.get(op)


def _var_key(var):
    """Slots are keyed by the variable's VariableV2 op (one key per variable per graph)."""
    return var.op


def _is_variable(v) -> bool:
    from jitflow.ops.state import Variable
    return isinstance(v, Variable)


class Optimizer:
    """Base class of the TF1 optimizers: `minimize` = `compute_gradients` + `apply_gradients`.

    Subclasses implement `_create_slots(var_list)`, `_prepare()`, `_apply_dense(grad, var)`
    (returning the op or tensor that updates `var`) and optionally `_finish(update_ops, name)`
    and `_apply_sparse(values, indices, var)` (used for gradients of gathers, see
    `jitflow.train.sparse_apply`).
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking: bool, name: str) -> None:
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        self._slots: dict = {}       # slot name -> {var key: slot Variable}
        self._non_slot_dict: dict = {}  # (name, graph) -> Variable

    def get_name(self) -> str:
        return self._name

    # -- the public protocol ---------------------------------------------------------------
    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=GATE_OP,
                 aggregation_method=None, colocate_gradients_with_ops: bool = False,
                 name: Optional[str] = None, grad_loss=None) -> Operation:
        """Add ops that minimize `loss` by updating `var_list` (default: trainable variables)."""
        grads_and_vars = self.compute_gradients(
            loss, var_list=var_list, gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        vars_with_grad = [v for g, v in grads_and_vars if g is not None]
        if not vars_with_grad:
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops that do not "
                "support gradients, between variables "
                f"{[str(v) for _, v in grads_and_vars]} and loss {loss}.")
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(self, loss, var_list=None, gate_gradients=GATE_OP,
                          aggregation_method=None, colocate_gradients_with_ops: bool = False,
                          grad_loss=None) -> list:
        """A list of (gradient or None, variable) pairs for `loss`."""
        from jitflow.core.gradients import gradients
        if callable(loss) and not isinstance(loss, Tensor):
            raise NotImplementedError("A callable loss is supported only in eager mode, which "
                                      "jitflow does not have.")
        if gate_gradients not in (Optimizer.GATE_NONE, Optimizer.GATE_OP,
                                  Optimizer.GATE_GRAPH):
            raise ValueError(f"gate_gradients must be one of: Optimizer.GATE_NONE, "
                             f"Optimizer.GATE_OP, Optimizer.GATE_GRAPH. Not {gate_gradients}")
        loss = convert_to_tensor(loss)
        _assert_valid_dtypes([loss])
        if grad_loss is not None:
            grad_loss = convert_to_tensor(grad_loss, dtype=loss.dtype)
        if var_list is None:
            var_list = loss.graph.get_collection(GraphKeys.TRAINABLE_VARIABLES)
        else:
            var_list = list(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        for v in var_list:
            if not _is_variable(v):
                raise TypeError(f"Argument is not a tf.Variable: {v!r}")
        _assert_valid_dtypes(var_list)
        grads = gradients(loss, var_list, grad_ys=grad_loss,
                          gate_gradients=(gate_gradients == Optimizer.GATE_OP),
                          aggregation_method=aggregation_method,
                          colocate_gradients_with_ops=colocate_gradients_with_ops)
        return list(zip(grads, var_list))

    def apply_gradients(self, grads_and_vars, global_step=None,
                        name: Optional[str] = None) -> Operation:
        """An op applying the gradients; with `global_step`, it is incremented afterwards."""
        grads_and_vars = tuple(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("No variables provided.")
        converted = []
        seen = set()
        for g, v in grads_and_vars:
            if not _is_variable(v):
                raise TypeError(f"Argument is not a tf.Variable: {v!r}")
            if g is not None:
                g = convert_to_tensor(g)
                if g.dtype != v.dtype:
                    raise ValueError(f"Gradient {g.name} has dtype {g.dtype.name}, variable "
                                     f"{v.name} has dtype {v.dtype.name}")
            if _var_key(v) in seen:
                raise ValueError(f"Duplicate variable in grads_and_vars: {v.name}")
            seen.add(_var_key(v))
            converted.append((g, v))
        var_list = [v for g, v in converted if g is not None]
        if not var_list:
            raise ValueError("No gradients provided for any variable: "
                             f"{[str(v) for _, v in converted]}.")
        graph = var_list[0].graph
        with graph.as_default():
            with graph.control_dependencies(None):
                self._create_slots(var_list)
            with name_scope(name, self._name) as scope:
                self._reset_hyper()
                self._prepare()
                update_ops = []
                for g, v in converted:
                    if g is None:
                        continue
                    with name_scope("update_" + v.op.name):
                        sparse = None
                        if type(self)._apply_sparse is not Optimizer._apply_sparse:
                            from jitflow.train.sparse_apply import sparse_gradient
                            sparse = sparse_gradient(g, v)
                        if sparse is None:
                            update_ops.append(self._apply_dense(g, v))
                        else:  # a gather's gradient: only the looked-up rows change
                            update_ops.append(self._apply_sparse(*sparse, v))
                if global_step is None:
                    apply_updates = self._finish(update_ops, scope)
                else:
                    from jitflow.ops.state import assign_add
                    with control_dependencies([self._finish(update_ops, "update")]):
                        apply_updates = assign_add(global_step, 1, name=scope,
                                                   read_value=False)
            _APPLIED[getattr(apply_updates, "op", apply_updates)] = tuple(
                (g, v) for g, v in converted if g is not None)
            train_ops = graph.get_collection_ref(GraphKeys.TRAIN_OP)
            if apply_updates not in train_ops:
                train_ops.append(apply_updates)
        return apply_updates

    # -- slots -------------------------------------------------------------------------------
    def get_slot(self, var, name: str):
        """The slot variable `name` created for `var`, or None."""
        named = self._slots.get(name)
        if not named:
            return None
        return named.get(_var_key(var))

    def get_slot_names(self) -> list:
        return sorted(self._slots)

    def variables(self) -> list:
        """The optimizer's slot and non-slot variables in the default graph, sorted by name."""
        graph = get_default_graph()
        out = [v for (_, g), v in self._non_slot_dict.items() if g is graph]
        for named in self._slots.values():
            out.extend(v for v in named.values() if v.graph is graph)
        return sorted(out, key=lambda v: v.name)

    def _slot_dict(self, slot_name: str) -> dict:
        return self._slots.setdefault(slot_name, {})

    def _get_or_make_slot(self, var, value, slot_name: str, op_name: str):
        """A slot variable `<var op name>/<op_name>`, not trainable, starting at `value` (a
        number filling var's shape, or a Tensor giving the initial value)."""
        named = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named:
            if isinstance(value, Tensor):
                named[key] = _make_slot_from_tensor(var, value, op_name)
            else:
                named[key] = _make_slot_variable(var, value, op_name)
        return named[key]

    def _get_or_make_slot_with_initializer(self, var, initializer, shape, dtype,
                                           slot_name: str, op_name: str):
        """A slot whose initial value is `initializer(shape, dtype=dtype)`."""
        named = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named:
            from jitflow.core.dtypes import as_dtype
            from jitflow.ops.state import Variable
            from jitflow.core.shapes import as_shape
            graph = var.graph
            dims = as_shape(shape).as_list()
            with graph.as_default(), graph.name_scope(""), graph.control_dependencies(None):
                named[key] = Variable(lambda: initializer(dims, dtype=as_dtype(dtype)),
                                      name=_slot_name(var, op_name), trainable=False)
        return named[key]

    def _zeros_slot(self, var, slot_name: str, op_name: str):
        return self._get_or_make_slot(var, 0.0, slot_name, op_name)

    def _create_non_slot_variable(self, initial_value: float, name: str, colocate_with):
        """A scalar variable shared by all updates of this optimizer (Adam's beta powers)."""
        from jitflow.ops.state import Variable
        graph = colocate_with.graph
        key = (name, graph)
        v = self._non_slot_dict.get(key)
        if v is None:
            if not (isinstance(initial_value, Tensor) or hasattr(initial_value, "_to_tensor")):
                # typed as TF types a constant: a Python float makes a float32 variable
                # whatever the model's dtype (TF1's Adam keeps float32 beta powers)
                initial_value = _tf_typed(initial_value)
            with graph.as_default(), graph.name_scope(""):
                v = Variable(initial_value, name=name, trainable=False)
            self._non_slot_dict[key] = v
        return v

    def _get_non_slot_variable(self, name: str, graph=None):
        graph = graph if graph is not None else get_default_graph()
        return self._non_slot_dict.get((name, graph))

    # -- for subclasses --------------------------------------------------------------------
    def _create_slots(self, var_list: list) -> None:
        pass

    def _prepare(self) -> None:
        pass

    def _apply_dense(self, grad: Tensor, var):
        raise NotImplementedError()

    def _apply_sparse(self, values: list, indices: list, var):
        """Update only the rows `indices` of `var` with gradient rows `values` (one pair per
        gather of `var`; optimizers with a sparse rule override this, the others apply the
        dense gradient)."""
        raise NotImplementedError()

    def _finish(self, update_ops: list, name_scope: str) -> Operation:
        from jitflow.ops.identity import group
        return group(*update_ops, name=name_scope)

    def _call_if_callable(self, param):
        return param() if callable(param) else param

    def _hyper(self, name: str, value, dtype) -> Tensor:
        """Hyper-parameter `name` as a tensor of `dtype`, made once per apply and dtype.

        TF1 converts each hyper-parameter to a tensor once (a Python float becomes float32)
        and casts it to each variable's dtype, so a float64 model trains with float32-rounded
        hyper-parameters (lr 0.1 acts as 0.10000000149011612): a number here becomes that
        value as a constant of `dtype` (no cast op to fuse); a tensor is cast when its dtype
        differs.
        """
        cache = self.__dict__.setdefault("_hyper_cache", {})
        key = (name, dtype)
        t = cache.get(key)
        if t is None:
            from jitflow.ops.math.casting import cast
            value = self._call_if_callable(value)
            if isinstance(value, Tensor) or hasattr(value, "_to_tensor"):
                t = cast(convert_to_tensor(value), dtype)
            else:
                t = convert_to_tensor(_tf_typed(value).astype(dtype.as_numpy_dtype), name=name)
            cache[key] = t
        return t

    def _reset_hyper(self) -> None:
        self.__dict__["_hyper_cache"] = {}


def _tf_typed(value) -> np.ndarray:
    """`value` as an array of the dtype TF's `convert_to_tensor` gives it: Python floats
    float32, Python ints int32 (int64 when they do not fit), NumPy values their own dtype."""
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    arr = np.asarray(value)
    if arr.dtype == np.float64:
        return arr.astype(np.float32)
    if arr.dtype == np.int64 and (arr.size == 0 or (arr.min() >= -2**31 and arr.max() < 2**31)):
        return arr.astype(np.int32)
    return arr


def _slot_name(var, op_name: str) -> str:
    """`<variable scope>/<var op name>/<op_name>`: TF1 makes slots inside the variable scope
    current where the optimizer applies its gradients (`OptimizeLoss/w/Momentum`)."""
    from jitflow.ops.variable_scope import get_variable_scope
    scope = get_variable_scope().name
    name = f"{var.op.name}/{op_name}"
    return f"{scope}/{name}" if scope else name


def _make_slot_from_tensor(var, value: Tensor, op_name: str):
    from jitflow.ops.state import Variable
    graph = var.graph
    name = _slot_name(var, op_name)
    with graph.as_default(), graph.name_scope(""), graph.control_dependencies(None):
        return Variable(value, name=name, trainable=False,
                        validate_shape=value.shape.is_fully_defined())


def _make_slot_variable(var, value: float, op_name: str):
    from jitflow.ops.sources import constant
    from jitflow.ops.state import Variable
    graph = var.graph
    npd = var.dtype.as_numpy_dtype
    if var.shape.is_fully_defined():
        shape = var.shape.as_list()

        def init():
            return constant(np.full(shape, value, dtype=npd), name="Const")
        validate = True
    else:
        from jitflow.ops.math.common import broadcast_like

        def init():
            return broadcast_like(constant(np.asarray(value, dtype=npd), name="Const"),
                                  var.initialized_value())
        validate = False
    name = _slot_name(var, op_name)
    with graph.as_default(), graph.name_scope(""), graph.control_dependencies(None):
        return Variable(init, name=name, trainable=False,
                        validate_shape=validate)


def _assert_valid_dtypes(tensors) -> None:
    for t in tensors:
        if not t.dtype.is_floating:
            raise ValueError(f"Invalid type {t.dtype.name} for {t.name}, expected: "
                             "[float16, float32, float64].")
