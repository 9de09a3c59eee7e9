"""`tf.contrib.framework`'s variable helpers: model variables, finding variables by scope,
name or suffix, choosing the variables to restore, and assigning values to variables.

A *model variable* is a variable in the MODEL_VARIABLES collection as well as in
GLOBAL_VARIABLES: the variables that define a model (weights, biases, batch-norm statistics),
as opposed to bookkeeping such as the global step or optimizer slots. Every contrib layer makes
its variables this way.
"""
from __future__ import annotations

import logging
import re
from typing import Callable, Optional

import jitflow as tf
from jitflow.contrib.framework.arg_scope import add_arg_scope
from jitflow.core.graph import GraphKeys
from jitflow.ops.state import Variable
from jitflow.ops.variable_scope import VariableScope, get_variable, get_variable_scope
from jitflow.train.training_util import (assert_global_step, create_global_step,
                                         get_global_step, get_or_create_global_step)

__all__ = [
    "add_model_variable", "assert_global_step", "assert_or_get_global_step",
    "assign_from_checkpoint_fn", "assign_from_values", "assign_from_values_fn",
    "create_global_step", "filter_variables", "get_global_step", "get_local_variables",
    "get_model_variables", "get_or_create_global_step", "get_trainable_variables",
    "get_unique_variable", "get_variable_full_name", "get_variables",
    "get_variables_by_name", "get_variables_by_suffix", "get_variables_to_restore",
    "global_variable", "local_variable", "model_variable", "variable",
]

_LOG = logging.getLogger("jitflow")


@add_arg_scope
def variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None,
             trainable: bool = True, collections=None, caching_device=None, device=None,
             partitioner=None, custom_getter=None, use_resource=None, synchronization=None,
             aggregation=None):
    """`tf.contrib.framework.variable`: `get_variable` in `collections` (default
    GLOBAL_VARIABLES); through `custom_getter` when given (a getter in a getter chain)."""
    if partitioner is not None:
        raise NotImplementedError("partitioned variables are not supported")
    collections = list(dict.fromkeys(collections if collections is not None
                                     else [GraphKeys.GLOBAL_VARIABLES]))
    with tf.get_default_graph().device(device or ""):
        if custom_getter is not None:
            return custom_getter(name, shape=shape, dtype=dtype, initializer=initializer,
                                 regularizer=regularizer, trainable=trainable,
                                 collections=collections,
                                 reuse=get_variable_scope().reuse)
        return get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                            regularizer=regularizer, trainable=trainable,
                            collections=collections)


@add_arg_scope
def model_variable(name: str, shape=None, dtype=tf.float32, initializer=None, regularizer=None,
                   trainable: bool = True, collections=None, caching_device=None, device=None,
                   partitioner=None, custom_getter=None, use_resource=None,
                   synchronization=None, aggregation=None):
    """`tf.contrib.framework.model_variable`: a variable in GLOBAL_VARIABLES and
    MODEL_VARIABLES (plus `collections`)."""
    collections = list(collections or []) + [GraphKeys.GLOBAL_VARIABLES,
                                              GraphKeys.MODEL_VARIABLES]
    return variable(name, shape=shape, dtype=dtype, initializer=initializer,
                    regularizer=regularizer, trainable=trainable, collections=collections,
                    caching_device=caching_device, device=device, partitioner=partitioner,
                    custom_getter=custom_getter, use_resource=use_resource)


def add_model_variable(var) -> None:
    """Add `var` to MODEL_VARIABLES (once)."""
    if var not in tf.get_collection(GraphKeys.MODEL_VARIABLES):
        tf.add_to_collection(GraphKeys.MODEL_VARIABLES, var)


def local_variable(initial_value, validate_shape: bool = True, name: Optional[str] = None,
                   use_resource=None) -> Variable:
    """A non-trainable variable in LOCAL_VARIABLES only."""
    return Variable(initial_value, trainable=False, collections=[GraphKeys.LOCAL_VARIABLES],
                    validate_shape=validate_shape, name=name)


def global_variable(initial_value, validate_shape: bool = True, name: Optional[str] = None,
                    use_resource=None) -> Variable:
    """A non-trainable variable in GLOBAL_VARIABLES only."""
    return Variable(initial_value, trainable=False, collections=[GraphKeys.GLOBAL_VARIABLES],
                    validate_shape=validate_shape, name=name)


def assert_or_get_global_step(graph=None, global_step_tensor=None):
    """`global_step_tensor` checked to be a global step, or the graph's global step."""
    if global_step_tensor is None:
        return get_global_step(graph)
    assert_global_step(global_step_tensor)
    return global_step_tensor


# -- finding variables ----------------------------------------------------------------------------
def get_variables(scope=None, suffix: Optional[str] = None,
                  collection: str = GraphKeys.GLOBAL_VARIABLES) -> list:
    """The variables of `collection` whose names start with `scope` (a regular expression or
    a VariableScope) and, given `suffix`, whose op names end with it."""
    if isinstance(scope, VariableScope):
        scope = scope.name
    if suffix is not None:
        if ":" not in suffix:
            suffix += ":"
        scope = (scope or "") + ".*" + suffix
    return tf.get_collection(collection, scope)


def get_model_variables(scope=None, suffix: Optional[str] = None) -> list:
    return get_variables(scope, suffix, GraphKeys.MODEL_VARIABLES)


def get_local_variables(scope=None, suffix: Optional[str] = None) -> list:
    return get_variables(scope, suffix, GraphKeys.LOCAL_VARIABLES)


def get_trainable_variables(scope=None, suffix: Optional[str] = None) -> list:
    return get_variables(scope, suffix, GraphKeys.TRAINABLE_VARIABLES)


def get_variables_by_suffix(suffix: str, scope=None) -> list:
    return get_variables(scope=scope, suffix=suffix)


def get_variables_by_name(given_name: str, scope=None) -> list:
    """The variables whose last name component is `given_name`."""
    suffix = "/" + given_name + ":|^" + given_name + ":"
    return get_variables(scope=scope, suffix=suffix)


def get_unique_variable(var_op_name: str):
    """The one variable whose op name is exactly `var_op_name` (ValueError otherwise)."""
    candidates = get_variables(scope=var_op_name)
    if not candidates:
        raise ValueError(f"Couldn't find variable {var_op_name}")
    for candidate in candidates:
        if candidate.op.name == var_op_name:
            return candidate
    raise ValueError(f"Variable {var_op_name} does not uniquely identify a variable")


def get_variables_to_restore(include=None, exclude=None) -> list:
    """The global variables under the scopes in `include` (all when None) and under none of
    the scopes in `exclude`: what a fine-tuning Saver restores."""
    if include is None:
        chosen = get_variables()
    else:
        if not isinstance(include, (list, tuple)):
            raise TypeError("include is provided but is not a list or a tuple.")
        chosen = [v for scope in include for v in get_variables(scope)]
    dropped = set()
    if exclude is not None:
        if not isinstance(exclude, (list, tuple)):
            raise TypeError("exclude is provided but is not a list or a tuple.")
        for scope in exclude:
            dropped.update(get_variables(scope))
    return [v for v in chosen if v not in dropped]


def get_variable_full_name(var) -> str:
    """The variable's op name (`scope/weights`)."""
    return var.op.name


def filter_variables(var_list, include_patterns=None, exclude_patterns=None,
                     reg_search: bool = True) -> list:
    """The variables whose names match one of `include_patterns` (all when None) and none of
    `exclude_patterns`; `re.search` or, with `reg_search=False`, `re.match`."""
    find = re.search if reg_search else re.match

    def hit(patterns, name):
        return any(find(p, name) for p in patterns)
    out = list(var_list)
    if include_patterns is not None:
        out = [v for v in out if hit(include_patterns, v.op.name)]
    if exclude_patterns is not None:
        out = [v for v in out if not hit(exclude_patterns, v.op.name)]
    return out


# -- assigning ------------------------------------------------------------------------------------
def _variable_named(var_name: str):
    found = tf.get_collection(GraphKeys.GLOBAL_VARIABLES, var_name)
    if not found:
        raise ValueError(f"Variable {var_name} wasn't found")
    if len(found) == 1:
        return found[0]
    for v in found:
        if v.op.name == var_name:
            return v
    raise ValueError(f"Variable {var_name} doesn't uniquely identify a variable")


def assign_from_values(var_names_to_values: dict) -> tuple:
    """(assign op, feed dict) that set each named variable to its NumPy value when run."""
    import numpy as np
    feed_dict = {}
    assigns = []
    for var_name, value in var_names_to_values.items():
        var = _variable_named(var_name)
        shape = var.get_shape()
        ph = tf.placeholder(var.dtype.base_dtype, shape, name="placeholder/" + var.op.name)
        assigns.append(var.assign(ph))
        feed_dict[ph] = np.asarray(value).reshape(shape.as_list())
    return tf.group(*assigns), feed_dict


def assign_from_values_fn(var_names_to_values: dict) -> Callable:
    """A function `fn(session)` that runs `assign_from_values`'s assignment."""
    assign_op, feed_dict = assign_from_values(var_names_to_values)

    def callback(session):
        return session.run(assign_op, feed_dict)
    return callback


def assign_from_checkpoint_fn(model_path: str, var_list, ignore_missing_vars: bool = False,
                              reshape_variables: bool = False) -> Optional[Callable]:
    """A function `fn(session)` restoring `var_list` (a list, or a dict {checkpoint name:
    variable}) from the checkpoint `model_path`; with `ignore_missing_vars`, variables the
    checkpoint lacks are skipped with a warning (None when none is left)."""
    if not var_list:
        raise ValueError("var_list cannot be empty")
    if ignore_missing_vars:
        reader = tf.train.NewCheckpointReader(model_path)
        by_name = var_list if isinstance(var_list, dict) else \
            {v.op.name: v for v in var_list}
        var_list = {}
        for name, var in by_name.items():
            if reader.has_tensor(name):
                var_list[name] = var
            else:
                _LOG.warning("Variable %s missing in checkpoint %s", name, model_path)
    if not var_list:
        _LOG.warning("No Variables to restore")
        return None
    saver = tf.train.Saver(var_list, reshape=reshape_variables)

    def callback(session):
        saver.restore(session, model_path)
    return callback
