"""`tf.contrib.layers.utils` (also `slim.utils`): output collections with aliases (slim's
"end points"), constant values of flags, and argument helpers the layers share.

TF 1.15 stores a tensor's aliases in a `tensor.aliases` attribute; jitflow's tensors have
fixed slots, so the aliases live in a weak table here (`get_tensor_aliases` reads it).
"""
from __future__ import annotations

import numbers
import weakref
from typing import Optional

import numpy as np

import jitflow as tf
from jitflow.core.graph import Tensor

__all__ = ["collect_named_outputs", "append_tensor_alias", "get_tensor_aliases",
           "gather_tensors_aliases", "convert_collection_to_dict", "constant_value",
           "smart_cond", "static_cond", "get_variable_collections", "two_element_tuple",
           "n_positive_integers", "last_dimension", "channel_dimension"]

_ALIASES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def append_tensor_alias(tensor: Tensor, alias: str) -> Tensor:
    """Record `alias` (a trailing '/' dropped) as a name of `tensor`."""
    if alias.endswith("/"):
        alias = alias[:-1]
    _ALIASES.setdefault(tensor, []).append(alias)
    return tensor


def get_tensor_aliases(tensor: Tensor) -> list:
    """The aliases of `tensor`, or its name (without ':0') when it has none."""
    if tensor in _ALIASES:
        return list(_ALIASES[tensor])
    name = tensor.name
    return [name[:-2] if name.endswith(":0") else name]


def gather_tensors_aliases(tensors) -> list:
    return [a for t in tensors for a in get_tensor_aliases(t)]


def collect_named_outputs(collections, alias: str, outputs: Tensor) -> Tensor:
    """Add `outputs` under `alias` to `collections` (none: do nothing); returns `outputs`."""
    if collections:
        append_tensor_alias(outputs, alias)
        tf.add_to_collections(collections, outputs)
    return outputs


def convert_collection_to_dict(collection: str, clear_collection: bool = False) -> dict:
    """{alias: tensor} of a collection of named outputs (slim's end_points)."""
    out = {}
    for t in tf.get_collection(collection):
        for alias in get_tensor_aliases(t):
            out[alias] = t
    if clear_collection:
        tf.get_default_graph().clear_collection(collection)
    return out


def constant_value(value_or_tensor, dtype=None):
    """The value of a Python value or of a tensor known at build time; None if unknown."""
    if isinstance(value_or_tensor, Tensor) or hasattr(value_or_tensor, "_to_tensor"):
        t = tf.convert_to_tensor(value_or_tensor)
        if dtype is not None and t.dtype != tf.as_dtype(dtype):
            raise ValueError(f"{t.name} must be of dtype {tf.as_dtype(dtype).name}, got "
                             f"{t.dtype.name}")
        v = tf.get_static_value(t)
        return None if v is None else (v.item() if np.ndim(v) == 0 else v)
    return value_or_tensor


def static_cond(pred, fn1, fn2):
    """fn1() if pred else fn2(), for a Python predicate."""
    if not callable(fn1) or not callable(fn2):
        raise TypeError("fn1 and fn2 must be callable.")
    return fn1() if pred else fn2()


def smart_cond(pred, fn1, fn2, name: Optional[str] = None):
    """fn1() or fn2() chosen at build time when `pred` is known, else a `tf.cond`."""
    value = constant_value(pred)
    if value is not None:
        return static_cond(bool(value), fn1, fn2)
    return tf.cond(pred, fn1, fn2, name=name)


def get_variable_collections(variables_collections, name: str):
    """The collections for variable `name`: `variables_collections[name]` for a dict, else
    the list itself."""
    if isinstance(variables_collections, dict):
        return variables_collections.get(name)
    return variables_collections


def two_element_tuple(int_or_tuple) -> tuple:
    """(a, b) from an int (both) or a 2-element list/tuple/TensorShape."""
    if isinstance(int_or_tuple, (list, tuple)):
        if len(int_or_tuple) != 2:
            raise ValueError(f"Must be a list with 2 elements: {int_or_tuple}")
        return int(int_or_tuple[0]), int(int_or_tuple[1])
    if isinstance(int_or_tuple, numbers.Integral):
        return int(int_or_tuple), int(int_or_tuple)
    if isinstance(int_or_tuple, tf.TensorShape) and len(int_or_tuple) == 2:
        dims = int_or_tuple.as_list()
        return dims[0], dims[1]
    raise ValueError("Must be an int, a list with 2 elements or a TensorShape of length 2")


def n_positive_integers(n: int, value) -> tuple:
    """`value` (an int or a sequence of n ints) as n positive ints."""
    if isinstance(value, numbers.Integral):
        value = (int(value),) * n
    else:
        value = tuple(int(v) for v in value)
        if len(value) != n:
            raise ValueError(f"Expected sequence of {n} positive integers, but received "
                             f"{value!r}")
    if any(v <= 0 for v in value):
        raise ValueError(f"Expected sequence of {n} positive integers, but received {value!r}")
    return value


def _dimension(shape, index: int, min_rank: int):
    shape = tf.TensorShape(shape)
    if shape.ndims is None:
        raise ValueError("Dims of shape must be known but is None")
    if shape.ndims < min_rank:
        raise ValueError(f"Rank of shape must be at least {min_rank} not: {shape.ndims}")
    value = shape.as_list()[index]
    if value is None:
        raise ValueError(f"Dimension {index} of shape {shape} must be known but is None")
    return value


def last_dimension(shape, min_rank: int = 1) -> int:
    """The last dimension of `shape`, which must be known (ValueError otherwise)."""
    return _dimension(shape, -1, min_rank)


def channel_dimension(shape, data_format: str, min_rank: int = 1) -> int:
    """The channel dimension of `shape` (last for NHWC-like formats, 1 for NC...)."""
    return _dimension(shape, 1 if data_format.startswith("NC") else -1, min_rank)
