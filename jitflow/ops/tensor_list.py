"""TensorFlow 2's list and optional ops, with their semantics: what graphs written with control
flow v2 hold, and the form jitflow writes its TensorArrays and loop traces in.

A list is a variant value (`ListValue`): its entries (None: not set yet; read as zeros of the
element shape, as TensorFlow reads an uninitialized element) and its element dtype and shape.
As jitflow's TensorArrays, the lists of one lineage share their storage: setting an entry or
pushing one changes the list in place (graphs use each list once, as TensorFlow's TensorArray
class does); popping is a view of the list less its last entry, so a list popped by two loops
(two gradients of one forward loop) is read whole by each.

An optional (`OptionalFromValue`, `OptionalNone`) wraps any tuple of values into one variant:
jitflow writes each iteration's record of a loop's trace as a list of optionals.

The graph API does not make these ops (`tf.TensorArray` makes jitflow's own TensorArray ops);
`jitflow.serialize` builds them from GraphDefs.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.shapes import TensorShape
from jitflow.ops.functional import box, unbox
from jitflow.ops.registry import register

__all__: list = []


class ListValue:
    """The run-time value of a list: `n` entries of the shared `items` (entries past `n` belong
    to the longer lists this one was popped from)."""

    __slots__ = ("items", "n", "dtype", "elem_shape")

    def __init__(self, items: list, dtype, elem_shape: Optional[tuple], n: Optional[int] = None):
        self.items = items
        self.n = len(items) if n is None else n
        self.dtype = dtype            # a NumPy dtype (object for variants)
        self.elem_shape = elem_shape  # tuple of ints, -1 for an unknown dim; None: unknown rank

    def entries(self) -> list:
        return self.items if self.n == len(self.items) else self.items[:self.n]

    def own(self) -> list:
        """The entries as a list this value may change in place (a popped view copies)."""
        if self.n != len(self.items):
            self.items = self.items[:self.n]
        return self.items

    # the protocol of gradient values (see jitflow.ops.functional: zeros_for, add_values)
    def zeros(self) -> "ListValue":
        return ListValue([None] * self.n, self.dtype, self.elem_shape)

    def add(self, other: "ListValue") -> "ListValue":
        if other.n != self.n:
            raise errors.InvalidArgumentError(
                None, None, f"Trying to add two lists of tensors with different lengths. One is "
                f"{self.n} and the other is {other.n}")
        items = [b if a is None else a if b is None else a + b
                 for a, b in zip(self.entries(), other.entries())]
        return ListValue(items, self.dtype, self.elem_shape or other.elem_shape)

    def add_into(self, other: "ListValue") -> None:
        items = self.own()
        for i, b in enumerate(other.entries()):
            if b is not None:
                a = items[i]
                items[i] = b if a is None else a + b

    def copy(self) -> "ListValue":
        return ListValue(list(self.entries()), self.dtype, self.elem_shape)

    def __repr__(self) -> str:
        return f"<list of {self.n} tensors>"


class OptionalValue:
    """An optional's value: a tuple of values, or None (`OptionalNone`)."""

    __slots__ = ("values",)

    def __init__(self, values: Optional[tuple]) -> None:
        self.values = values


def _err(op, msg: str):
    return errors.InvalidArgumentError(None, op, f"{msg}\n\t [[node {op.name} ({op.type})]]")


def _list(op, v) -> ListValue:
    x = unbox(v)
    if not isinstance(x, ListValue):
        raise _err(op, f"{op.name}: input is not a list (got {type(x).__name__})")
    return x


def _npdtype(dtype) -> np.dtype:
    return np.dtype(object) if dtype in (_dtypes.variant, _dtypes.string) else \
        np.dtype(dtype.as_numpy_dtype)


def _shape_value(v) -> Optional[tuple]:
    """An element_shape input's value as a tuple (-1: unknown dim), None for unknown rank."""
    a = np.asarray(v)
    if a.ndim == 0:
        return None if int(a) == -1 else ()
    return tuple(int(d) for d in a.reshape(-1))


def _merge(a: Optional[tuple], b: Optional[tuple]) -> Optional[tuple]:
    if a is None:
        return b
    if b is None or len(a) != len(b):
        return a
    return tuple(x if x >= 0 else y for x, y in zip(a, b))


def _known(shape: Optional[tuple]) -> bool:
    return shape is not None and all(d >= 0 for d in shape)


def _check_item(op, lst: ListValue, v: np.ndarray) -> None:
    es = lst.elem_shape
    if es is not None and (len(es) != v.ndim or any(d >= 0 and d != s
                                                     for d, s in zip(es, v.shape))):
        raise _err(op, f"Tried to set a tensor with incompatible shape at a list index. Item "
                       f"element shape: {list(v.shape)} list shape: {list(es)}")


def _item(op, lst: ListValue, v):
    if lst.dtype == np.dtype(object):
        return v
    a = np.array(v, dtype=lst.dtype, copy=True)
    _check_item(op, lst, a)
    return a


def _zeros_item(op, lst: ListValue, shape: Optional[tuple], i: int):
    es = _merge(lst.elem_shape, shape)
    if not _known(es):
        raise _err(op, f"Trying to read an uninitialized tensor (index {i}) of a list whose "
                       f"element shape {es} is not fully defined")
    if lst.dtype == np.dtype(object):
        return box(None)
    return np.zeros(es, lst.dtype)


def _get(op, lst: ListValue, i: int, shape=None):
    if i < 0 or i >= lst.n:
        raise _err(op, f"Trying to access element {i} in a list with {lst.n} elements.")
    v = lst.items[i]
    return _zeros_item(op, lst, shape, i) if v is None else v


# -- shape rules ----------------------------------------------------------------------------------
_VARIANT = [(_dtypes.variant, TensorShape([]))]


def _attr_shape(op) -> TensorShape:
    s = op.attrs.get("element_shape")
    return s if isinstance(s, TensorShape) else TensorShape(None)


def _elem_infer(op):
    return [(op.attrs["element_dtype"], _attr_shape(op))]


def _stacked_infer(op):
    es = _attr_shape(op)
    n = op.attrs.get("num_elements")
    n = None if n is None or n < 0 else n
    return [(op.attrs["element_dtype"], TensorShape(None) if es.ndims is None
             else TensorShape([n] + es.as_list()))]


# -- references -----------------------------------------------------------------------------------
def _new_list(op, shape, n: int) -> np.ndarray:
    es = _shape_value(shape)
    return box(ListValue([None] * n, _npdtype(op.attrs["element_dtype"]), es))


def _empty_ref(op, shape, max_n):
    return _new_list(op, shape, 0)


def _reserve_ref(op, shape, n):
    n = int(n)
    if n < 0:
        raise _err(op, f"The size of a list must be >= 0, got {n}")
    return _new_list(op, shape, n)


def _from_tensor_ref(op, tensor, shape):
    t = np.asarray(tensor)
    if t.ndim == 0:
        raise _err(op, "Tensor must be at least a vector, but saw shape: []")
    es = _merge(_shape_value(shape), tuple(t.shape[1:]))
    rows = np.array(t, copy=True)
    lst = ListValue([rows[i] for i in range(t.shape[0])], rows.dtype, es)
    return box(lst)


def _get_item_ref(op, lst, index, shape):
    return _get(op, _list(op, lst), int(index), _shape_value(shape))


def _set_item_ref(op, lst, index, item):
    x = _list(op, lst)
    i = int(index)
    if i < 0 or (i >= x.n and not op.attrs.get("resize_if_index_out_of_bounds", False)):
        raise _err(op, f"Trying to modify element {i} in a list with {x.n} elements.")
    items = x.own()
    if i >= len(items):
        items.extend([None] * (i + 1 - len(items)))
        x.n = len(items)
    items[i] = _item(op, x, item)
    return box(x)


def _push_back_ref(op, lst, item):
    x = _list(op, lst)
    items = x.own()
    items.append(_item(op, x, item))
    x.n = len(items)
    return box(x)


def _pop_back_ref(op, lst, shape):
    x = _list(op, lst)
    if x.n == 0:
        raise _err(op, "Trying to pop from an empty list.")
    v = x.items[x.n - 1]
    if v is None:
        v = _zeros_item(op, x, _shape_value(shape), x.n - 1)
    return box(ListValue(x.items, x.dtype, x.elem_shape, x.n - 1)), v


def _stack_items(op, x: ListValue, idx, shape) -> np.ndarray:
    rows = [_get(op, x, int(i), shape) for i in idx]
    if not rows:
        es = _merge(x.elem_shape, shape)
        if not _known(es):
            raise _err(op, "Tried to stack elements of an empty list with non-fully-defined "
                           f"element_shape: {es}")
        return np.zeros((0,) + es, x.dtype)
    first = np.shape(rows[0])
    for i, r in zip(idx, rows):
        if np.shape(r) != first:
            raise _err(op, f"Incompatible shapes in the list: element 0 has shape "
                           f"{list(first)} but element {int(i)} has shape {list(np.shape(r))}")
    return np.stack(rows)


def _stack_ref(op, lst, shape):
    x = _list(op, lst)
    n = op.attrs.get("num_elements", -1)
    if n is not None and n >= 0 and n != x.n:
        raise _err(op, f"Operation expected a list with {n} elements but got a list with "
                       f"{x.n} elements.")
    return _stack_items(op, x, range(x.n), _shape_value(shape))


def _gather_ref(op, lst, indices, shape):
    return _stack_items(op, _list(op, lst), np.asarray(indices).reshape(-1),
                        _shape_value(shape))


def _scatter_into(op, x: ListValue, tensor, indices) -> ListValue:
    t = np.asarray(tensor, x.dtype)
    idx = [int(i) for i in np.asarray(indices).reshape(-1)]
    if t.ndim == 0 or t.shape[0] != len(idx):
        raise _err(op, f"Expected len(indices) == tensor.shape[0], but saw: {len(idx)} vs. "
                       f"{t.shape[0] if t.ndim else 0}")
    items = x.own()
    rows = np.array(t, copy=True)
    for k, i in enumerate(idx):
        if i < 0:
            raise _err(op, f"Indices in TensorListScatter must all be non-negative, got {i}")
        if i >= len(items):
            items.extend([None] * (i + 1 - len(items)))
        _check_item(op, x, rows[k])
        items[i] = rows[k]
    x.n = len(items)
    return x


def _scatter_existing_ref(op, lst, tensor, indices):
    return box(_scatter_into(op, _list(op, lst), tensor, indices))


def _scatter_v2_ref(op, tensor, indices, shape, n):
    t = np.asarray(tensor)
    es = _merge(_shape_value(shape), tuple(t.shape[1:]) if t.ndim else None)
    x = ListValue([None] * max(int(n), 0), t.dtype, es)
    return box(_scatter_into(op, x, t, indices))


def _length_ref(op, lst):
    return np.int32(_list(op, lst).n)


def _element_shape_ref(op, lst):
    es = _list(op, lst).elem_shape
    npd = np.dtype(op.attrs["shape_type"].as_numpy_dtype)
    return np.array(-1, npd) if es is None else np.array(es, npd)


def _concat_ref(op, lst, shape, leading_dims):
    x = _list(op, lst)
    es = _merge(x.elem_shape, _shape_value(shape))
    lead = [int(d) for d in np.asarray(leading_dims).reshape(-1)]
    parts = []
    for i in range(x.n):
        v = x.items[i]
        if v is None:
            if es is None or any(d < 0 for d in es[1:]) or (es[0] < 0 and not lead):
                raise _err(op, "Trying to concat list with uninitialized tensors but "
                               "element_shape is not fully defined")
            first = es[0] if es[0] >= 0 else lead[i]
            v = np.zeros((first,) + es[1:], x.dtype)
        if np.ndim(v) == 0:
            raise _err(op, "Concat saw a scalar shape at index 0 but requires at least vectors.")
        parts.append(v)
    lengths = np.array([p.shape[0] for p in parts], np.int64)
    if not parts:
        if es is None or len(es) == 0 or not _known(es[1:]):
            raise _err(op, "Concat of an empty list needs a known element shape")
        return np.zeros((0,) + es[1:], x.dtype), lengths
    return np.concatenate(parts), lengths


def _split_ref(op, tensor, shape, lengths):
    t = np.asarray(tensor)
    ln = [int(v) for v in np.asarray(lengths).reshape(-1)]
    if t.ndim == 0:
        raise _err(op, "Tensor must be at least a vector, but saw shape: []")
    if sum(ln) != t.shape[0]:
        raise _err(op, f"Expected sum of lengths to be equal to values.shape[0], but sum of "
                       f"lengths is {sum(ln)} and value's shape is: {list(t.shape)}")
    rows = np.array(t, copy=True)
    items, start = [], 0
    for n in ln:
        items.append(rows[start:start + n])
        start += n
    return box(ListValue(items, rows.dtype, _shape_value(shape)))


def _resize_ref(op, lst, size):
    x = _list(op, lst)
    n = int(size)
    if n < 0:
        raise _err(op, f"TensorListResize expects size to be non-negative. Got: {n}")
    items = list(x.entries()[:n]) + [None] * max(0, n - x.n)
    return box(ListValue(items, x.dtype, x.elem_shape))


def _optional_from_ref(op, *values):
    return box(OptionalValue(tuple(values)))


def _optional_none_ref(op):
    return box(OptionalValue(None))


def _optional(op, v) -> OptionalValue:
    x = unbox(v)
    if not isinstance(x, OptionalValue):
        raise _err(op, f"{op.name}: input is not an optional (got {type(x).__name__})")
    return x


def _optional_get_ref(op, opt):
    x = _optional(op, opt)
    if x.values is None:
        raise _err(op, "The optional variant does not have a value.")
    n = len(op.attrs["output_types"])
    if len(x.values) != n:
        raise _err(op, f"The optional holds {len(x.values)} values, expected {n}")
    return x.values if n != 1 else x.values[0]


def _optional_has_ref(op, opt):
    return np.bool_(_optional(op, opt).values is not None)


def _reg(name: str, infer, ref, doc: str) -> None:
    register(name, infer=infer, ref=ref, differentiable=False, kind="host", doc=doc)


_reg("EmptyTensorList", lambda op: _VARIANT, _empty_ref, "An empty list.")
_reg("TensorListReserve", lambda op: _VARIANT, _reserve_ref,
     "A list of `num_elements` uninitialized entries.")
_reg("TensorListFromTensor", lambda op: _VARIANT, _from_tensor_ref,
     "A list of the rows of `tensor`.")
_reg("TensorListGetItem", _elem_infer, _get_item_ref,
     "Entry `index` (zeros of the element shape where it is not set).")
_reg("TensorListSetItem", lambda op: _VARIANT, _set_item_ref, "The list with entry `index` set.")
_reg("TensorListPushBack", lambda op: _VARIANT, _push_back_ref,
     "The list with `tensor` appended.")
_reg("TensorListPopBack", lambda op: _VARIANT + _elem_infer(op), _pop_back_ref,
     "The list less its last entry, and that entry.")
_reg("TensorListStack", _stacked_infer, _stack_ref, "All entries stacked along a new axis 0.")
_reg("TensorListGather", _stacked_infer, _gather_ref, "The entries at `indices`, stacked.")
_reg("TensorListScatterIntoExistingList", lambda op: _VARIANT, _scatter_existing_ref,
     "The list with entry indices[k] set to tensor[k] (grown as needed).")
_reg("TensorListScatterV2", lambda op: _VARIANT, _scatter_v2_ref,
     "A new list with entry indices[k] set to tensor[k].")
_reg("TensorListLength", lambda op: [(_dtypes.int32, TensorShape([]))], _length_ref,
     "The number of entries.")
_reg("TensorListElementShape", lambda op: [(op.attrs["shape_type"], TensorShape(None))],
     _element_shape_ref, "The element shape (-1 for unknown dims; -1 alone: unknown rank).")
_reg("TensorListConcatV2",
     lambda op: [(op.attrs["element_dtype"], TensorShape(None) if _attr_shape(op).ndims in
                  (None, 0) else TensorShape([None] + _attr_shape(op).as_list()[1:])),
                 (_dtypes.int64, TensorShape([None]))],
     _concat_ref, "All entries concatenated along axis 0, and their lengths.")
_reg("TensorListSplit", lambda op: _VARIANT, _split_ref,
     "A list of the pieces of `tensor` split along axis 0 by `lengths`.")
_reg("TensorListResize", lambda op: _VARIANT, _resize_ref,
     "The list cut or grown (uninitialized entries) to `size` entries.")
_reg("OptionalFromValue", lambda op: _VARIANT, _optional_from_ref,
     "An optional holding its inputs.")
_reg("OptionalNone", lambda op: _VARIANT, _optional_none_ref, "An optional holding nothing.")
_reg("OptionalGetValue",
     lambda op: [(d, s) for d, s in zip(op.attrs["output_types"], op.attrs["output_shapes"])],
     _optional_get_ref, "The values an optional holds (an error where it holds none).")
_reg("OptionalHasValue", lambda op: [(_dtypes.bool, TensorShape([]))], _optional_has_ref,
     "Whether an optional holds values.")
