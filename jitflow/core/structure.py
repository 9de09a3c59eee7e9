"""Nested structures (`tf.nest`): tuples, lists, dicts and namedtuples of leaves.

Dicts are walked in sorted key order, as TF does, so a flat list and its structure always pair
up the same way.
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["is_nested", "flatten", "pack_sequence_as", "map_structure",
           "assert_same_structure", "flatten_up_to"]


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def is_nested(x) -> bool:
    """Whether `x` is a structure (tuple, list, dict, namedtuple) rather than a leaf."""
    return isinstance(x, (tuple, list, dict))


def _children(x) -> list:
    if isinstance(x, dict):
        return [x[k] for k in sorted(x)]
    return list(x)


def flatten(structure) -> list:
    """The leaves of `structure`, depth first (dict values in sorted key order)."""
    if not is_nested(structure):
        return [structure]
    out: list = []
    stack = [iter(_children(structure))]
    while stack:
        for item in stack[-1]:
            if is_nested(item):
                stack.append(iter(_children(item)))
                break
            out.append(item)
        else:
            stack.pop()
    return out


def _rebuild(template, values: list):
    if isinstance(template, dict):
        keys = sorted(template)
        d = dict(zip(keys, values))
        return type(template)((k, d[k]) for k in template) if type(template) is not dict \
            else {k: d[k] for k in template}
    if _is_namedtuple(template):
        return type(template)(*values)
    if isinstance(template, tuple):
        return tuple(values)
    return list(values)


def pack_sequence_as(structure, flat_sequence):
    """`flat_sequence` arranged in the shape of `structure`."""
    flat = list(flat_sequence)
    n = len(flatten(structure))
    if n != len(flat):
        raise ValueError(f"Could not pack sequence. Structure had {n} elements, but "
                         f"flat_sequence had {len(flat)} elements.")
    pos = [0]

    def build(t):
        if not is_nested(t):
            v = flat[pos[0]]
            pos[0] += 1
            return v
        return _rebuild(t, [build(c) for c in _children(t)])
    return build(structure)


def assert_same_structure(a, b, check_types: bool = True) -> None:
    """Raise ValueError (TypeError for differing sequence types) unless `a` and `b` nest alike."""
    if is_nested(a) != is_nested(b):
        raise ValueError(f"The two structures don't have the same nested structure.\n\n"
                         f"First structure: {a!r}\n\nSecond structure: {b!r}")
    if not is_nested(a):
        return
    if check_types and type(a) is not type(b) and not (
            isinstance(a, dict) and isinstance(b, dict)):
        raise TypeError(f"The two structures don't have the same sequence type. First "
                        f"structure has type {type(a)}, while second structure has type "
                        f"{type(b)}.")
    if isinstance(a, dict) and sorted(a) != sorted(b):
        raise ValueError(f"The two dictionaries don't have the same set of keys: "
                         f"{sorted(a)} vs {sorted(b)}")
    ca, cb = _children(a), _children(b)
    if len(ca) != len(cb):
        raise ValueError(f"The two structures don't have the same number of elements.\n\n"
                         f"First structure: {a!r}\n\nSecond structure: {b!r}")
    for x, y in zip(ca, cb):
        assert_same_structure(x, y, check_types)


def map_structure(func: Callable, *structures, **kwargs) -> Any:
    """`func` applied leaf by leaf to structures of the same shape."""
    check_types = kwargs.pop("check_types", True)
    if kwargs:
        raise ValueError(f"Only valid keyword argument is check_types, got {sorted(kwargs)}")
    if not structures:
        raise ValueError("Must provide at least one structure")
    for s in structures[1:]:
        assert_same_structure(structures[0], s, check_types)
    flats = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [func(*xs) for xs in zip(*flats)])


def flatten_up_to(shallow, structure) -> list:
    """The sub-structures of `structure` at the leaves of `shallow`."""
    if not is_nested(shallow):
        return [structure]
    if not is_nested(structure):
        raise TypeError(f"If shallow structure is a sequence, input must also be a sequence. "
                        f"Input has type: {type(structure).__name__}.")
    cs, ct = _children(shallow), _children(structure)
    if len(cs) != len(ct):
        raise ValueError(f"The two structures don't have the same number of elements: "
                         f"{len(cs)} vs {len(ct)}")
    out: list = []
    for s, t in zip(cs, ct):
        out.extend(flatten_up_to(s, t))
    return out
