"""`tf.TensorArray`: a list of tensors that flows through a graph as one variant value.

Each operation returns a new TensorArray around a new *flow* tensor (dtype variant) holding a
`TAValue`: a Python list of arrays, an entry per index (None: not written yet). As in TF1,
where a TensorArray is a resource and the flow only orders its uses, the TensorArrays of one
lineage share their entries: a write stores a copy of its value in place (a constant cost per
write, whatever the size), each entry can be written once, and a TensorArray is made anew by
every run, so a failed run leaves nothing behind. Gradients never need an earlier version: an
entry, once written, does not change.

Gradients follow TF1's rules: the gradient of a TensorArray is a TensorArray of gradients
(an unwritten entry is zero): reading index i sends the read's gradient to entry i, stacking
unstacks the gradient, writing reads the gradient's entry back, and so on. Several gradients
of one TensorArray add entry by entry (`VariantAddN`).

The Python objects sharing a lineage (a TensorArray, what its writes return, the loop
variables a while loop rebuilds from it) share one record of the element shape, which writes
refine when `infer_shape` is on, as in TF1.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops._array_args import get_static_value
from jitflow.ops.functional import box, unbox
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape, as_shape

__all__ = ["TensorArray"]


class TAValue:
    """The run-time contents of a TensorArray (or of its gradient, where None means zero)."""

    __slots__ = ("items", "dynamic", "elem_shape", "dtype", "only")

    def __init__(self, items: list, dynamic: bool, elem_shape, dtype, only=None) -> None:
        self.items = items
        self.dynamic = dynamic
        self.elem_shape = elem_shape   # tuple when fully known, else None
        self.dtype = dtype
        self.only = only   # the one written index of a gradient made by a single read

    def zeros(self) -> "TAValue":
        return TAValue([None] * len(self.items), True, self.elem_shape, self.dtype)

    def add(self, other: "TAValue") -> "TAValue":
        n = max(len(self.items), len(other.items))
        a = self.items + [None] * (n - len(self.items))
        b = other.items + [None] * (n - len(other.items))
        items = [x if y is None else y if x is None else x + y for x, y in zip(a, b)]
        return TAValue(items, self.dynamic, self.elem_shape or other.elem_shape, self.dtype)

    def add_into(self, other: "TAValue") -> None:
        """Add `other`'s entries to this gradient's, in place (this value is the caller's
        own accumulator)."""
        if len(other.items) > len(self.items):
            self.items.extend([None] * (len(other.items) - len(self.items)))
        pairs = [(other.only, other.items[other.only])] if other.only is not None else \
            [(i, v) for i, v in enumerate(other.items) if v is not None]
        for i, v in pairs:
            x = self.items[i]
            self.items[i] = v if x is None else x + v
        self.elem_shape = self.elem_shape or other.elem_shape

    def copy(self) -> "TAValue":
        return TAValue(list(self.items), self.dynamic, self.elem_shape, self.dtype, self.only)

    def __repr__(self) -> str:
        return f"<TensorArray value of {len(self.items)}>"


def _ta(flow) -> TAValue:
    v = unbox(flow)
    if not isinstance(v, TAValue):
        raise errors.InvalidArgumentError(None, None, "expected a TensorArray value")
    return v


def _err(op, msg: str):
    return errors.InvalidArgumentError(None, op, f"{msg}\n\t [[node {op.name} ({op.type})]]")


def _ta_name(op) -> str:
    return op.attrs.get("tensor_array_name") or op.name


def _zero(op, ta: TAValue, like=None) -> np.ndarray:
    if like is not None:
        return np.zeros_like(like)
    if ta.elem_shape is None:
        raise _err(op, f"TensorArray {op.name}: cannot make zeros for an unwritten element of "
                       "unknown shape")
    return np.zeros(ta.elem_shape, ta.dtype)


# -- op definitions -----------------------------------------------------------------------------
_FLOW = [(_dtypes.variant, TensorShape([]))]


def _create_ref(op, size):
    n = int(size)
    if n < 0:
        raise _err(op, f"Size should be >= 0, got {n}")
    es = op.attrs["element_shape"]
    known = tuple(es.as_list()) if es.is_fully_defined() else None
    return box(TAValue([None] * n, op.attrs["dynamic_size"], known,
                       op.attrs["dtype"].as_numpy_dtype))


def _write_ref(op, flow, index, value):
    ta = _ta(flow)
    i = int(index)
    if i < 0:
        raise _err(op, f"Tried to write to index {i} but it is negative")
    items = ta.items
    if i >= len(items):
        if not ta.dynamic:
            raise _err(op, f"Tried to write to index {i} but array is not resizeable and size "
                           f"is: {len(items)}")
        items.extend([None] * (i + 1 - len(items)))
    if items[i] is not None:
        raise _err(op, f"Could not write to TensorArray index {i} because it has already been "
                       "written to.")
    v = np.array(value, dtype=ta.dtype, copy=True)
    if ta.elem_shape is not None and v.shape != ta.elem_shape:
        raise _err(op, f"Could not write to TensorArray index {i} because the value shape is "
                       f"{list(v.shape)} which is incompatible with the TensorArray's inferred "
                       f"element shape: {list(ta.elem_shape)}")
    items[i] = v
    ta.elem_shape = ta.elem_shape or v.shape
    return box(ta)


def _read_ref(op, flow, index):
    ta = _ta(flow)
    i = int(index)
    if i < 0 or i >= len(ta.items):
        raise _err(op, f"Tried to read from index {i} but array size is: {len(ta.items)}")
    v = ta.items[i]
    if v is None:
        raise _err(op, f"Could not read from TensorArray index {i} because it has not yet "
                       "been written to.")
    return v


def _gather_items(op, ta: TAValue, idx) -> np.ndarray:
    rows = []
    for i in idx:
        i = int(i)
        if i < 0 or i >= len(ta.items):
            raise _err(op, f"Tried to gather index {i} but array size is: {len(ta.items)}")
        v = ta.items[i]
        if v is None:
            if ta.elem_shape is None:
                raise _err(op, f"Could not read from TensorArray index {i} because it has not "
                               "yet been written to.")
            v = np.zeros(ta.elem_shape, ta.dtype)
        rows.append(v)
    if not rows:
        if ta.elem_shape is None:
            raise _err(op, "TensorArray has size zero, but element shape <unknown> is not fully "
                           "defined. Currently only static shapes are supported when packing "
                           "zero-size TensorArrays.")
        return np.zeros((0,) + tuple(ta.elem_shape), ta.dtype)
    shape = rows[0].shape
    for i, r in zip(idx, rows):
        if r.shape != shape:
            raise _err(op, f"TensorArray has inconsistent shapes. Index 0 has shape "
                           f"{list(shape)} but index {int(i)} has shape {list(r.shape)}")
    return np.stack(rows)


def _stack_ref(op, flow):
    ta = _ta(flow)
    return _gather_items(op, ta, range(len(ta.items)))


def _gather_ref(op, flow, indices):
    return _gather_items(op, _ta(flow), np.asarray(indices).reshape(-1))


def _scatter_into(op, ta: TAValue, idx, value) -> TAValue:
    value = np.asarray(value, ta.dtype)
    if value.ndim == 0 or value.shape[0] != len(idx):
        raise _err(op, f"Expected len(indices) == values.shape[0], but saw: {len(idx)} vs. "
                       f"{value.shape[0] if value.ndim else 0}")
    if ta.elem_shape is not None and value.shape[1:] != ta.elem_shape:
        raise _err(op, f"Could not scatter to TensorArray because the value shape is "
                       f"{list(value.shape[1:])} which is incompatible with the TensorArray's "
                       f"inferred element shape: {list(ta.elem_shape)}")
    rows = np.array(value, copy=True)   # one copy; the entries are its rows
    items = ta.items
    for k, i in enumerate(idx):
        i = int(i)
        if i < 0:
            raise _err(op, f"Tried to write to index {i} but it is negative")
        if i >= len(items):
            if not ta.dynamic:
                raise _err(op, f"Tried to write to index {i} but array is not resizeable and "
                               f"size is: {len(items)}")
            items.extend([None] * (i + 1 - len(items)))
        if items[i] is not None:
            raise _err(op, f"Could not write to TensorArray index {i} because it has already "
                           "been written to.")
        items[i] = rows[k]
    ta.elem_shape = ta.elem_shape or value.shape[1:]
    return ta


def _unstack_ref(op, flow, value):
    ta = _ta(flow)
    value = np.asarray(value)
    if value.ndim == 0:
        raise _err(op, "Cannot unstack a scalar into a TensorArray")
    n = value.shape[0]
    if not ta.dynamic and n > len(ta.items):
        raise _err(op, f"Tried to write to index {n - 1} but array is not resizeable and size "
                       f"is: {len(ta.items)}")
    return box(_scatter_into(op, ta, range(n), value))


def _scatter_ref(op, flow, indices, value):
    return box(_scatter_into(op, _ta(flow), np.asarray(indices).reshape(-1), value))


def _concat_ref(op, flow):
    ta = _ta(flow)
    parts = []
    for i, v in enumerate(ta.items):
        if v is None:
            raise _err(op, f"Could not read from TensorArray index {i} because it has not yet "
                           "been written to.")
        if v.ndim == 0:
            raise _err(op, "Concat saw a scalar shape at index 0 but requires at least vectors.")
        parts.append(v)
    lengths = np.array([p.shape[0] for p in parts], np.int64)
    if not parts:
        es = ta.elem_shape
        if es is None or len(es) == 0:
            raise _err(op, "Concat of an empty TensorArray needs a known element shape")
        return np.zeros((0,) + tuple(es[1:]), ta.dtype), lengths
    return np.concatenate(parts), lengths


def _split_ref(op, flow, value, lengths):
    ta = _ta(flow)
    value = np.asarray(value, ta.dtype)
    lengths = np.asarray(lengths, np.int64).reshape(-1)
    if value.ndim == 0:
        raise _err(op, "Expected value to be at least a vector")
    if lengths.sum() != value.shape[0]:
        raise _err(op, f"Expected sum of lengths to be equal to values.shape[0], but sum of "
                       f"lengths is {int(lengths.sum())} and value's shape is: "
                       f"{list(value.shape)}")
    n = len(lengths)
    if not ta.dynamic and n > len(ta.items):
        raise _err(op, f"Tried to split into {n} elements but array is not resizeable and size "
                       f"is: {len(ta.items)}")
    items = ta.items
    items.extend([None] * max(0, n - len(items)))
    for i in range(n):
        if items[i] is not None:
            raise _err(op, f"Could not write to TensorArray index {i} because it has already "
                           "been written to.")
    rows = np.array(value, copy=True)
    start = 0
    for i, ln in enumerate(lengths):
        items[i] = rows[start:start + ln]
        start += int(ln)
    return box(ta)


def _size_ref(op, flow):
    return np.int32(len(_ta(flow).items))


def _elem_infer(op):
    return [(op.attrs["dtype"], op.attrs["element_shape"])]


def _stacked_infer(op):
    es = op.attrs["element_shape"]
    n = op.attrs.get("size")
    if es.ndims is None:
        return [(op.attrs["dtype"], TensorShape(None))]
    return [(op.attrs["dtype"], TensorShape([n] + es.as_list()))]


def _concat_infer(op):
    es = op.attrs["element_shape"]
    shape = TensorShape(None) if es.ndims is None or es.ndims == 0 else \
        TensorShape([None] + es.as_list()[1:])
    return [(op.attrs["dtype"], shape), (_dtypes.int64, TensorShape([None]))]


# -- gradient ops: TensorArrays of gradients, None entries standing for zeros -------------------
def _grad_read_ref(op, g_flow, index, written):
    """Entry `index` of a gradient TensorArray (zeros shaped like the entry the forward write
    stored, read from the forward TensorArray that write made)."""
    g = unbox(g_flow)
    i = int(index)
    v = None if g is None or i >= len(g.items) else g.items[i]
    if v is None:
        return np.zeros_like(_ta(written).items[i])
    return v


def _grad_write_ref(op, flow, index, g):
    ta = _ta(flow)
    i = int(index)
    items = [None] * max(len(ta.items), i + 1)
    items[i] = np.asarray(g)
    return box(TAValue(items, True, ta.elem_shape, ta.dtype, only=i))


def _grad_gather_ref(op, g_flow, indices, like):
    g = unbox(g_flow)
    like = np.asarray(like)
    rows = []
    for i in np.asarray(indices).reshape(-1):
        v = None if g is None or int(i) >= len(g.items) else g.items[int(i)]
        rows.append(np.zeros(like.shape[1:], like.dtype) if v is None else v)
    return np.stack(rows) if rows else np.zeros_like(like)


def _grad_stack_ref(op, g_flow, like):
    like = np.asarray(like)
    return _grad_gather_ref(op, g_flow, np.arange(like.shape[0]), like)


def _grad_scatter_ref(op, flow, indices, g):
    ta = _ta(flow)
    idx = [int(i) for i in np.asarray(indices).reshape(-1)]
    items = [None] * max([len(ta.items)] + [i + 1 for i in idx])
    g = np.asarray(g)
    for k, i in enumerate(idx):
        items[i] = g[k] if items[i] is None else items[i] + g[k]
    return box(TAValue(items, True, ta.elem_shape, ta.dtype))


def _grad_unstack_ref(op, flow, g):
    ta = _ta(flow)
    g = np.asarray(g)
    return box(TAValue([g[i] for i in range(g.shape[0])], True, ta.elem_shape, ta.dtype))


def _grad_split_ref(op, flow, g, lengths):
    ta = _ta(flow)
    g = np.asarray(g)
    items, start = [], 0
    for n in np.asarray(lengths).reshape(-1):
        n = int(n)
        items.append(g[start:start + n])
        start += n
    return box(TAValue(items, True, None, ta.dtype))


def _grad_concat_ref(op, g_flow, like, lengths):
    g = unbox(g_flow)
    like = np.asarray(like)
    parts, start = [], 0
    for i, n in enumerate(np.asarray(lengths).reshape(-1)):
        n = int(n)
        v = None if g is None or i >= len(g.items) else g.items[i]
        parts.append(np.zeros((n,) + like.shape[1:], like.dtype) if v is None else v)
        start += n
    return np.concatenate(parts) if parts else np.zeros_like(like)


def _variant_add_ref(op, *xs):
    total = None
    for x in xs:
        v = unbox(x)
        if v is None:
            continue
        total = v if total is None else total.add(v)
    return box(total)


def _variant_zeros_ref(op, x):
    v = unbox(x)
    return box(v.zeros() if hasattr(v, "zeros") else None)


def _like_infer(i):
    return lambda op: [(op.inputs[i].dtype, op.inputs[i].shape)]


def _write_grad(op, g):
    # the written entry's shape comes from the TensorArray the write made (kept by a loop's
    # forward pass), so the read does not wait for the written value to be recomputed
    v = op.inputs[2]
    return [g, None, make_op("TensorArrayGradRead", [g, op.inputs[1], op.outputs[0]],
                             {"dtype": v.dtype, "shape": v.shape},
                             name="TensorArrayGradRead").outputs[0]]


def _read_grad(op, g):
    return [make_op("TensorArrayGradWrite", [op.inputs[0], op.inputs[1], g],
                    name="TensorArrayGradWrite").outputs[0], None]


def _stack_grad(op, g):
    return [make_op("TensorArrayGradUnstack", [op.inputs[0], g],
                    name="TensorArrayGradUnstack").outputs[0]]


def _unstack_grad(op, g):
    return [None, make_op("TensorArrayGradStack", [g, op.inputs[1]],
                          name="TensorArrayGradStack").outputs[0]]


def _gather_grad(op, g):
    return [make_op("TensorArrayGradScatter", [op.inputs[0], op.inputs[1], g],
                    name="TensorArrayGradScatter").outputs[0], None]


def _scatter_grad(op, g):
    return [g, None, make_op("TensorArrayGradGather", [g, op.inputs[1], op.inputs[2]],
                             name="TensorArrayGradGather").outputs[0]]


def _concat_grad(op, g, _g_lengths=None):
    return [make_op("TensorArrayGradSplit", [op.inputs[0], g, op.outputs[1]],
                    name="TensorArrayGradSplit").outputs[0]]


def _split_grad(op, g):
    return [None, make_op("TensorArrayGradConcat", [g, op.inputs[1], op.inputs[2]],
                          name="TensorArrayGradConcat").outputs[0], None]


def _reg(name, infer, ref, grad=None, doc=""):
    register(name, infer=infer, ref=ref, grad=grad, differentiable=grad is not None,
             kind="host", doc=doc)


_reg("TensorArrayV3", lambda op: _FLOW, _create_ref,
     doc="A new TensorArray of `size` unwritten entries (its flow value).")
_reg("TensorArrayWriteV3", lambda op: _FLOW, _write_ref, _write_grad,
     doc="The TensorArray with entry `index` set to `value`.")
_reg("TensorArrayReadV3", _elem_infer, _read_ref, _read_grad, doc="Entry `index`.")
_reg("TensorArrayStack", _stacked_infer, _stack_ref, _stack_grad,
     doc="All entries stacked along a new axis 0.")
_reg("TensorArrayGatherV3", _stacked_infer, _gather_ref, _gather_grad,
     doc="The entries at `indices`, stacked.")
_reg("TensorArrayUnstack", lambda op: _FLOW, _unstack_ref, _unstack_grad,
     doc="The TensorArray with entry i set to value[i].")
_reg("TensorArrayScatterV3", lambda op: _FLOW, _scatter_ref, _scatter_grad,
     doc="The TensorArray with entry indices[k] set to value[k].")
_reg("TensorArrayConcatV3", _concat_infer, _concat_ref, _concat_grad,
     doc="All entries concatenated along axis 0, and their lengths.")
_reg("TensorArraySplitV3", lambda op: _FLOW, _split_ref, _split_grad,
     doc="The TensorArray with value split along axis 0 by `lengths`.")
_reg("TensorArraySizeV3", lambda op: [(_dtypes.int32, TensorShape([]))], _size_ref,
     doc="The number of entries.")
_reg("TensorArrayGradRead", lambda op: [(op.attrs["dtype"], op.attrs["shape"])],
     _grad_read_ref)
_reg("TensorArrayGradWrite", lambda op: _FLOW, _grad_write_ref)
_reg("TensorArrayGradGather", _like_infer(2), _grad_gather_ref)
_reg("TensorArrayGradStack", _like_infer(1), _grad_stack_ref)
_reg("TensorArrayGradScatter", lambda op: _FLOW, _grad_scatter_ref)
_reg("TensorArrayGradUnstack", lambda op: _FLOW, _grad_unstack_ref)
_reg("TensorArrayGradSplit", lambda op: _FLOW, _grad_split_ref)
_reg("TensorArrayGradConcat", _like_infer(1), _grad_concat_ref)
_reg("VariantAddN", lambda op: _FLOW, _variant_add_ref, doc="Sum of TensorArray gradients.")
_reg("VariantZerosLike", lambda op: _FLOW, _variant_zeros_ref,
     doc="A TensorArray gradient of zeros.")


# -- the Python object ----------------------------------------------------------------------------
class _Meta:
    """What the TensorArrays of one lineage share: dtype, element shape, size, flags."""

    __slots__ = ("dtype", "element_shape", "dynamic_size", "infer_shape", "size", "name")

    def __init__(self, dtype, element_shape, dynamic_size, infer_shape, size, name) -> None:
        self.dtype = dtype
        self.element_shape = element_shape
        self.dynamic_size = dynamic_size
        self.infer_shape = infer_shape
        self.size = size
        self.name = name


class TensorArray:
    """`tf.TensorArray`: see the module docstring. Every method returns a new TensorArray (or
    a tensor); use the returned object, as TF1 requires."""

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None,
                 tensor_array_name: Optional[str] = None, handle=None, flow=None,
                 infer_shape: bool = True, element_shape=None,
                 colocate_with_first_write_call: bool = True, name: Optional[str] = None):
        dtype = _dtypes.as_dtype(dtype)
        if dtype is _dtypes.variant:
            raise TypeError("TensorArray of variants is not supported")
        es = as_shape(element_shape) if element_shape is not None else TensorShape(None)
        if handle is not None and flow is None and isinstance(handle, Tensor) and \
                handle.dtype is _dtypes.variant:
            flow = handle
        if flow is not None:
            if not isinstance(flow, Tensor) or flow.dtype is not _dtypes.variant:
                raise TypeError(f"flow must be a TensorArray flow tensor, got {flow!r}")
            self._flow = flow
            self._meta = _Meta(dtype, es, bool(dynamic_size), infer_shape, None,
                               tensor_array_name)
            return
        if size is None:
            raise ValueError("Size must be provided if handle is not provided")
        with name_scope(name, "TensorArray", [size]) as scope:
            size_t = convert_to_tensor(size, dtype=_dtypes.int32, name="size")
            if size_t.shape.ndims not in (None, 0):
                raise ValueError(f"TensorArray size must be a scalar, got shape {size_t.shape}")
            static = get_static_value(size_t)
            n = None if static is None or dynamic_size else int(static)
            self._meta = _Meta(dtype, es, bool(dynamic_size), infer_shape, n,
                               tensor_array_name or scope.rstrip("/"))
            self._flow = make_op("TensorArrayV3", [size_t],
                                 {"dtype": dtype, "element_shape": es,
                                  "dynamic_size": bool(dynamic_size),
                                  "clear_after_read": clear_after_read is not False,
                                  "tensor_array_name": tensor_array_name or ""},
                                 name="TensorArrayV3").outputs[0]

    # -- attributes ------------------------------------------------------------------------
    @property
    def flow(self) -> Tensor:
        return self._flow

    @property
    def handle(self) -> Tensor:
        return self._flow

    @property
    def dtype(self):
        return self._meta.dtype

    @property
    def element_shape(self) -> TensorShape:
        return self._meta.element_shape

    @property
    def dynamic_size(self) -> bool:
        return self._meta.dynamic_size

    def with_flow(self, flow: Tensor) -> "TensorArray":
        """A TensorArray of this lineage around `flow` (what while loops rebuild)."""
        ta = TensorArray.__new__(TensorArray)
        ta._flow = flow
        ta._meta = self._meta
        return ta

    def _merge_shape(self, shape: TensorShape) -> None:
        m = self._meta
        if not m.infer_shape:
            return
        if not m.element_shape.is_compatible_with(shape):
            raise ValueError(f"Inconsistent shapes: saw {shape} but expected "
                             f"{m.element_shape} (and infer_shape=True)")
        m.element_shape = m.element_shape.merge_with(shape)

    def _attrs(self, **kw) -> dict:
        m = self._meta
        d = {"dtype": m.dtype, "element_shape": m.element_shape}
        d.update(kw)
        return d

    def _value(self, value, what: str) -> Tensor:
        v = convert_to_tensor(value, dtype=None if isinstance(value, Tensor) else self.dtype)
        if v.dtype != self.dtype:
            raise TypeError(f"TensorArray dtype is {self.dtype.name} but Op is trying to "
                            f"{what} dtype {v.dtype.name}.")
        return v

    # -- operations --------------------------------------------------------------------------
    def write(self, index, value, name: Optional[str] = None) -> "TensorArray":
        with name_scope(name, "TensorArrayWrite", [self._flow, index, value]):
            v = self._value(value, "write")
            self._merge_shape(v.shape)
            i = convert_to_tensor(index, dtype=_dtypes.int32, name="index")
            f = make_op("TensorArrayWriteV3", [self._flow, i, v], name="TensorArrayWriteV3")
            return self.with_flow(f.outputs[0])

    def read(self, index, name: Optional[str] = None) -> Tensor:
        with name_scope(name, "TensorArrayRead", [self._flow, index]):
            i = convert_to_tensor(index, dtype=_dtypes.int32, name="index")
            return make_op("TensorArrayReadV3", [self._flow, i], self._attrs(),
                           name="TensorArrayReadV3").outputs[0]

    def stack(self, name: Optional[str] = None) -> Tensor:
        with name_scope(name, "TensorArrayStack", [self._flow]):
            return make_op("TensorArrayStack", [self._flow], self._attrs(size=self._meta.size),
                           name="TensorArrayGatherV3").outputs[0]

    def gather(self, indices, name: Optional[str] = None) -> Tensor:
        with name_scope(name, "TensorArrayGather", [self._flow, indices]):
            idx = convert_to_tensor(indices, dtype=_dtypes.int32, name="indices")
            n = idx.shape.as_list()[0] if idx.shape.ndims == 1 else None
            return make_op("TensorArrayGatherV3", [self._flow, idx], self._attrs(size=n),
                           name="TensorArrayGatherV3").outputs[0]

    def unstack(self, value, name: Optional[str] = None) -> "TensorArray":
        with name_scope(name, "TensorArrayUnstack", [self._flow, value]):
            v = self._value(value, "write")
            if v.shape.ndims == 0:
                raise ValueError("Shape must be at least rank 1 but is rank 0 for unstack")
            if v.shape.ndims is not None:
                self._merge_shape(TensorShape(v.shape.as_list()[1:]))
            f = make_op("TensorArrayUnstack", [self._flow, v], name="TensorArrayScatter")
            return self.with_flow(f.outputs[0])

    def scatter(self, indices, value, name: Optional[str] = None) -> "TensorArray":
        with name_scope(name, "TensorArrayScatter", [self._flow, indices, value]):
            v = self._value(value, "write")
            if v.shape.ndims is not None and v.shape.ndims > 0:
                self._merge_shape(TensorShape(v.shape.as_list()[1:]))
            idx = convert_to_tensor(indices, dtype=_dtypes.int32, name="indices")
            f = make_op("TensorArrayScatterV3", [self._flow, idx, v],
                        name="TensorArrayScatterV3")
            return self.with_flow(f.outputs[0])

    def concat(self, name: Optional[str] = None) -> Tensor:
        with name_scope(name, "TensorArrayConcat", [self._flow]):
            return make_op("TensorArrayConcatV3", [self._flow], self._attrs(),
                           name="TensorArrayConcatV3").outputs[0]

    def split(self, value, lengths, name: Optional[str] = None) -> "TensorArray":
        with name_scope(name, "TensorArraySplit", [self._flow, value, lengths]):
            v = self._value(value, "write")
            ln = convert_to_tensor(lengths, dtype=_dtypes.int64, name="lengths")
            f = make_op("TensorArraySplitV3", [self._flow, v, ln], name="TensorArraySplitV3")
            return self.with_flow(f.outputs[0])

    def size(self, name: Optional[str] = None) -> Tensor:
        with name_scope(name, "TensorArraySize", [self._flow]):
            return make_op("TensorArraySizeV3", [self._flow], name="TensorArraySizeV3").outputs[0]

    def identity(self) -> "TensorArray":
        return self.with_flow(self._flow)

    def close(self, name: Optional[str] = None):
        from jitflow.ops.identity import no_op
        return no_op(name=name or "TensorArrayClose")

    def __repr__(self) -> str:
        return f"<tf.TensorArray {self._flow.name} dtype={self.dtype.name}>"
