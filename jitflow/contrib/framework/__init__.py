"""`tf.contrib.framework`: `arg_scope` and `add_arg_scope`, the variable helpers
(`get_variables`, `model_variable`, `get_variables_to_restore`, `assign_from_checkpoint_fn`,
...), and the few tensor utilities TF1 programs take from it (`nest`, `sort`, `argsort`,
`is_tensor`)."""
from __future__ import annotations

import jitflow as _tf
from jitflow.contrib.framework.arg_scope import (add_arg_scope, arg_scope,
                                                 arg_scope_func_key, arg_scoped_arguments,
                                                 current_arg_scope, has_arg_scope)
from jitflow.contrib.framework.variables import (
    add_model_variable, assert_global_step, assert_or_get_global_step,
    assign_from_checkpoint_fn, assign_from_values, assign_from_values_fn, create_global_step,
    filter_variables, get_global_step, get_local_variables, get_model_variables,
    get_or_create_global_step, get_trainable_variables, get_unique_variable,
    get_variable_full_name, get_variables, get_variables_by_name, get_variables_by_suffix,
    get_variables_to_restore, global_variable, local_variable, model_variable, variable,
)

nest = _tf.nest
sort = _tf.sort
argsort = _tf.argsort
is_tensor = _tf.is_tensor

__all__ = [
    "add_arg_scope", "arg_scope", "arg_scope_func_key", "arg_scoped_arguments",
    "current_arg_scope", "has_arg_scope", "add_model_variable", "assert_global_step",
    "assert_or_get_global_step", "assign_from_checkpoint_fn", "assign_from_values",
    "assign_from_values_fn", "create_global_step", "filter_variables", "get_global_step",
    "get_local_variables", "get_model_variables", "get_or_create_global_step",
    "get_trainable_variables", "get_unique_variable", "get_variable_full_name",
    "get_variables", "get_variables_by_name", "get_variables_by_suffix",
    "get_variables_to_restore", "global_variable", "local_variable", "model_variable",
    "variable", "nest", "sort", "argsort", "is_tensor",
]
