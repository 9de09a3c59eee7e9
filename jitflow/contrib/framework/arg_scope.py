"""`tf.contrib.framework.arg_scope`: default keyword arguments for a set of layer functions.

    with arg_scope([layers.conv2d, layers.fully_connected], weights_regularizer=reg):
        net = layers.conv2d(x, 32, [3, 3])          # gets weights_regularizer=reg

A function takes part once it is decorated with `add_arg_scope` (every contrib layer is).
Arguments given at the call win over the scope's. A scope is a dict {function key: kwargs};
`arg_scope(scope_dict)` re-enters a scope saved from an earlier `with ... as scope`.
The stack is process-wide, as in TF 1.15.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Callable, Iterator

__all__ = ["arg_scope", "add_arg_scope", "current_arg_scope", "has_arg_scope",
           "arg_scoped_arguments", "arg_scope_func_key"]

_STACK: list = [{}]
_DECORATED: dict = {}   # function key -> the names of its keyword arguments


def current_arg_scope() -> dict:
    """The innermost scope: {function key: {argument: default}}."""
    if not _STACK:
        _STACK.append({})
    return _STACK[-1]


def arg_scope_func_key(op) -> str:
    """The key a function is known by in a scope (the same for a function and its decorated
    form)."""
    return getattr(op, "_key_op", str(op))


def _keyword_names(func: Callable) -> tuple:
    params = inspect.signature(func).parameters.values()
    return tuple(p.name for p in params if p.default is not inspect.Parameter.empty)


@contextlib.contextmanager
def arg_scope(list_ops_or_scope, **kwargs) -> Iterator[dict]:
    """Set `kwargs` as defaults of every function in `list_ops_or_scope` (a list or tuple of
    `add_arg_scope` functions) inside the block, on top of the enclosing scope's defaults; or
    re-enter a scope dict yielded by an earlier arg_scope (then no kwargs)."""
    if isinstance(list_ops_or_scope, dict):
        if kwargs:
            raise ValueError("When attempting to re-use a scope by suppling a dictionary, "
                             "kwargs must be empty.")
        scope = list_ops_or_scope.copy()
    else:
        if not isinstance(list_ops_or_scope, (list, tuple)):
            raise TypeError("list_ops_or_scope must either be a list/tuple or reused scope "
                            "(i.e. dict)")
        scope = current_arg_scope().copy()
        for op in list_ops_or_scope:
            if not has_arg_scope(op):
                name = getattr(op, "__name__", repr(op))
                raise ValueError(f"{name} is not decorated with @add_arg_scope")
            key = arg_scope_func_key(op)
            merged = dict(scope.get(key, {}))
            merged.update(kwargs)
            scope[key] = merged
    _STACK.append(scope)
    try:
        yield scope
    finally:
        _STACK.pop()


def add_arg_scope(func: Callable) -> Callable:
    """Decorate `func` so that calls inside an `arg_scope` naming it get the scope's keyword
    defaults (explicit keyword arguments override them)."""
    key = arg_scope_func_key(func)

    @functools.wraps(func)
    def func_with_args(*args, **kwargs):
        defaults = current_arg_scope().get(key)
        if defaults:
            merged = dict(defaults)
            merged.update(kwargs)
            kwargs = merged
        return func(*args, **kwargs)

    _DECORATED[key] = _keyword_names(func)
    func_with_args._key_op = key
    return func_with_args


def has_arg_scope(func) -> bool:
    """Whether `func` was decorated with `add_arg_scope`."""
    return arg_scope_func_key(func) in _DECORATED


def arg_scoped_arguments(func) -> tuple:
    """The keyword arguments an arg_scope can set for `func`."""
    if not has_arg_scope(func):
        raise ValueError(f"{getattr(func, '__name__', func)!r} is not decorated with "
                         "@add_arg_scope")
    return _DECORATED[arg_scope_func_key(func)]
