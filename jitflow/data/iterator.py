"""Iterators over datasets: the ops that start a pipeline and take elements from it.

`IteratorV2` names an iterator (its handle: the key of its state in the session);
`MakeIterator(handle, *inputs)` starts a dataset with the values of its input tensors and
keeps the running pipeline in the session (`Session._resources`: its variable store's
`resources`); `IteratorGetNext(handle)` takes the next element, raising OutOfRangeError at the
end. A one-shot iterator (`OneShotIterator(*inputs)`) starts itself on first use. All are host
ops: a training step fed by `get_next` still compiles, the element arrays being inputs of its
kernels.

The Dataset objects live in a per-process registry; ops hold only its token (as `py_func`
does), so graphs with pipelines serialize.
"""
from __future__ import annotations

import itertools
import threading
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core import structure as nest
from jitflow.data.dataset import Dataset, _Run
from jitflow.data.function import SparseSpec, Spec
from jitflow.core.graph import Tensor, convert_to_tensor, get_default_graph, make_op, name_scope
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape, as_shape

__all__ = ["Iterator", "make_one_shot_iterator", "make_initializable_iterator",
           "get_output_types", "get_output_shapes", "get_output_classes"]

_DATASETS: dict = {}
_TOKENS = itertools.count()
_HANDLE = [(_dtypes.variant, TensorShape([]))]


def _register_dataset(ds: Dataset) -> str:
    token = f"dataset_{next(_TOKENS)}"
    _DATASETS[token] = ds
    return token


def _dataset_of(op) -> Dataset:
    ds = _DATASETS.get(op.attrs["dataset"])
    if ds is None:
        raise errors.UnknownError(None, op, f"dataset {op.attrs['dataset']} of '{op.name}' is "
                                            "not found (datasets live in the process that "
                                            "created them)")
    return ds


class _IteratorState:
    """A running pipeline: its generator of elements, pulled under a lock."""

    def __init__(self, dataset: Dataset, values: dict, store) -> None:
        self.lock = threading.Lock()
        self.gen = dataset._gen(_Run(store, values))
        self.done = False

    def next(self, op) -> tuple:
        with self.lock:
            if not self.done:
                try:
                    return next(self.gen)
                except StopIteration:
                    self.done = True
            raise errors.OutOfRangeError(None, op, "End of sequence\n\t [[node "
                                                   f"{op.name} (IteratorGetNext)]]")


def _key(name) -> tuple:
    return ("iterator", name.decode() if isinstance(name, bytes) else str(name))


def _handle(name: str) -> np.ndarray:
    return np.array(name.encode(), dtype=object)


def _start(op, dataset: Dataset, name: str, values, ctx) -> None:
    vals = dict(zip(dataset._inputs(), values))
    ctx.store.resources[_key(name)] = _IteratorState(dataset, vals, ctx.store)


# -- ops ------------------------------------------------------------------------------------------
def _iterator_name(op) -> str:
    return op.attrs.get("shared_name") or op.name


register("IteratorV2", infer=lambda op: _HANDLE,
         ref=lambda op, ctx: _handle(_iterator_name(op)), needs_ctx=True, stateful=True,
         differentiable=False, kind="host", default_name="Iterator",
         doc="An iterator's handle (the key of its running pipeline in the session).")


def _make_ref(op, handle, *values, ctx):
    _start(op, _dataset_of(op), handle.item().decode(), values, ctx)


register("MakeIterator", infer=lambda op: [], ref=_make_ref, needs_ctx=True, stateful=True,
         differentiable=False, kind="host",
         doc="Inputs (handle, *dataset inputs): start the dataset (again) for the iterator.")


def _one_shot_ref(op, *values, ctx):
    name = op.name
    res = ctx.store.resources
    if _key(name) not in res:
        with ctx.store.lock:
            if _key(name) not in res:
                _start(op, _dataset_of(op), name, values, ctx)
    return _handle(name)


register("OneShotIterator", infer=lambda op: _HANDLE, ref=_one_shot_ref, needs_ctx=True,
         stateful=True, differentiable=False, kind="host",
         doc="Inputs (*dataset inputs): the handle of an iterator started on first use.")


def _get_next_infer(op):
    return list(zip(op.attrs["output_types"], op.attrs["output_shapes"]))


def _wire(element, sparse: list) -> list:
    """An element's components as the op's outputs (a SparseTensorValue: its three arrays)."""
    if not sparse or not any(sparse):
        return list(element)
    out: list = []
    for v, sp in zip(element, sparse):
        out.extend((v.indices, v.values, v.dense_shape) if sp else (v,))
    return out


def _get_next_ref(op, handle, ctx):
    key = _key(handle.item() if isinstance(handle, np.ndarray) else handle)
    state = ctx.store.resources.get(key)
    if state is None:
        raise errors.FailedPreconditionError(
            None, op, "GetNext() failed because the iterator has not been initialized. Ensure "
                      "that you have run the initializer operation for this iterator before "
                      f"getting the next element.\n\t [[node {op.name} (IteratorGetNext)]]")
    element = _wire(state.next(op), op.attrs.get("sparse_components"))
    out = []
    for i, (v, t) in enumerate(zip(element, op.outputs)):
        arr = np.asarray(v)
        npd = t.dtype.as_numpy_dtype
        if arr.dtype != npd:
            arr = arr.astype(npd)
        elif not arr.flags.owndata:
            arr = arr.copy()  # the caller may keep or change it: never a view of the data
        if not t.shape.is_compatible_with(TensorShape(arr.shape)):
            raise errors.InvalidArgumentError(
                None, op, f"Component {i} of the element has shape {list(arr.shape)}, "
                          f"incompatible with the iterator's shape {t.shape}\n\t [[node "
                          f"{op.name} (IteratorGetNext)]]")
        out.append(arr)
    return tuple(out)


register("IteratorGetNext", infer=_get_next_infer, ref=_get_next_ref, needs_ctx=True,
         stateful=True, differentiable=False, kind="host",
         doc="Input handle: the next element of the iterator (OutOfRangeError at the end).")
register("IteratorToStringHandle", infer=lambda op: [(_dtypes.string, TensorShape([]))],
         ref=lambda op, h: np.array(h.item(), dtype=object), differentiable=False, kind="host",
         doc="The iterator's handle as a string (to feed a `from_string_handle` iterator).")
register("IteratorFromStringHandleV2", infer=lambda op: _HANDLE,
         ref=lambda op, s: np.array(s.item() if isinstance(s, np.ndarray) else s, dtype=object),
         differentiable=False, kind="host",
         doc="A handle from a string made by IteratorToStringHandle.")


# -- the Iterator object --------------------------------------------------------------------------
def _flat_specs(output_types, output_shapes, output_classes=None) -> list:
    types = nest.flatten(output_types)
    if output_shapes is None:
        shapes = [TensorShape(None)] * len(types)
    else:
        shapes = [as_shape(s) for s in nest.flatten_up_to(output_types, output_shapes)]
    sparse = [False] * len(types)
    if output_classes is not None:
        from jitflow.ops.sparse import SparseTensor
        sparse = [c is SparseTensor for c in nest.flatten_up_to(output_types, output_classes)]
    return [(SparseSpec if sp else Spec)(t, s) for t, s, sp in zip(types, shapes, sparse)]


def _shape_of_structure(output_types, output_shapes):
    if output_shapes is None:
        return nest.map_structure(lambda _: TensorShape(None), output_types)
    flat = [as_shape(s) for s in nest.flatten_up_to(output_types, output_shapes)]
    return nest.pack_sequence_as(output_types, flat)


class Iterator:
    """`tf.data.Iterator`: a handle on a running pipeline and the ops that use it."""

    def __init__(self, iterator_resource: Tensor, initializer, output_types, output_shapes,
                 output_classes=None) -> None:
        self._iterator_resource = iterator_resource
        self._initializer = initializer
        self._types = nest.map_structure(_dtypes.as_dtype, output_types)
        self._shapes = _shape_of_structure(self._types, output_shapes)
        self._specs = _flat_specs(self._types, self._shapes, output_classes)

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name: Optional[str] = None,
                       output_classes=None) -> "Iterator":
        """An iterator not bound to a dataset: `make_initializer(dataset)` binds one."""
        with name_scope(None, "Iterator"):
            attrs = _structure_attrs(output_types, output_shapes)
            attrs["shared_name"] = shared_name or ""
            res = make_op("IteratorV2", [], attrs, name="Iterator",
                          graph=get_default_graph()).outputs[0]
        return Iterator(res, None, output_types, output_shapes, output_classes)

    @staticmethod
    def from_string_handle(string_handle, output_types, output_shapes=None,
                           output_classes=None) -> "Iterator":
        """An iterator over whichever iterator's `string_handle()` is fed to `string_handle`."""
        h = convert_to_tensor(string_handle, dtype=_dtypes.string)
        res = make_op("IteratorFromStringHandleV2", [h],
                      _structure_attrs(output_types, output_shapes),
                      name="IteratorFromStringHandleV2").outputs[0]
        return Iterator(res, None, output_types, output_shapes, output_classes)

    @property
    def initializer(self):
        if self._initializer is None:
            raise ValueError("Iterator does not have an initializer.")
        return self._initializer

    @property
    def output_types(self):
        return self._types

    @property
    def output_shapes(self):
        return self._shapes

    @property
    def output_classes(self):
        from jitflow.ops.sparse import SparseTensor
        return nest.pack_sequence_as(self._types, [SparseTensor if s.is_sparse else Tensor
                                                   for s in self._specs])

    @property
    def element_spec(self):
        return nest.pack_sequence_as(self._types, self._specs)

    def make_initializer(self, dataset: Dataset, name: Optional[str] = None):
        """An op (re)starting this iterator on `dataset` (same types, compatible shapes)."""
        _check_compatible(self, dataset)
        token = _register_dataset(dataset)
        with name_scope(name, "make_initializer") as scope:
            return make_op("MakeIterator", [self._iterator_resource] + dataset._inputs(),
                           {"dataset": token}, name=scope[:-1] if scope else "MakeIterator")

    def get_next(self, name: Optional[str] = None):
        """The next element's tensors, in the dataset's structure; running them past the end
        raises OutOfRangeError."""
        attrs = _wire_attrs(self._specs)
        op = make_op("IteratorGetNext", [self._iterator_resource], attrs,
                     name=name or "IteratorGetNext")
        outs, leaves = list(op.outputs), []
        for s in self._specs:
            if s.is_sparse:
                from jitflow.ops.sparse import SparseTensor
                leaves.append(SparseTensor(*outs[:3]))
                outs = outs[3:]
            else:
                leaves.append(outs.pop(0))
        return nest.pack_sequence_as(self._types, leaves)

    def string_handle(self, name: Optional[str] = None) -> Tensor:
        """This iterator's handle as a string tensor (for `from_string_handle`)."""
        return make_op("IteratorToStringHandle", [self._iterator_resource],
                       name=name or "IteratorToStringHandle").outputs[0]


def _wire_attrs(specs) -> dict:
    """IteratorGetNext's attrs: a dtype and shape per output (three for a sparse component)."""
    types, shapes = [], []
    for s in specs:
        for d, sh in (s.parts() if s.is_sparse else [(s.dtype, s.shape)]):
            types.append(d)
            shapes.append(sh)
    attrs = {"output_types": types, "output_shapes": shapes}
    if any(s.is_sparse for s in specs):
        attrs["sparse_components"] = [s.is_sparse for s in specs]
    return attrs


def _structure_attrs(output_types, output_shapes) -> dict:
    specs = _flat_specs(nest.map_structure(_dtypes.as_dtype, output_types), output_shapes)
    return {"output_types": [s.dtype for s in specs], "output_shapes": [s.shape for s in specs]}


def _check_compatible(it: Iterator, ds: Dataset) -> None:
    try:
        nest.assert_same_structure(it._types, ds.output_types)
    except (TypeError, ValueError):
        raise TypeError(f"Expected output types {it._types} but got dataset with output types "
                        f"{ds.output_types}.") from None
    mine, theirs = it._specs, nest.flatten(ds._structure)
    if [(s.dtype, s.is_sparse) for s in mine] != [(s.dtype, s.is_sparse) for s in theirs]:
        raise TypeError(f"Expected output types {it._types} but got dataset with output types "
                        f"{ds.output_types}.")
    if not all(a.shape.is_compatible_with(b.shape) for a, b in zip(mine, theirs)):
        raise TypeError(f"Expected output shapes compatible with {it._shapes} but got dataset "
                        f"with output shapes {ds.output_shapes}.")


def make_initializable_iterator(dataset: Dataset, shared_name: Optional[str] = None) -> Iterator:
    """`tf.data.make_initializable_iterator`: an iterator started by its `initializer`."""
    it = Iterator.from_structure(dataset.output_types, dataset.output_shapes, shared_name)
    it._specs = list(nest.flatten(dataset._structure))
    it._initializer = it.make_initializer(dataset)
    return it


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    """`tf.data.make_one_shot_iterator`: an iterator that starts on its first `get_next`."""
    specs = nest.flatten(dataset._structure)
    attrs = {"dataset": _register_dataset(dataset), **_wire_attrs(specs)}
    g = dataset._graph
    with g.as_default(), g.control_dependencies(None):
        res = make_op("OneShotIterator", dataset._inputs(), attrs, name="OneShotIterator",
                      graph=g).outputs[0]
    it = Iterator(res, None, dataset.output_types, dataset.output_shapes)
    it._specs = list(specs)
    return it


def get_output_types(dataset_or_iterator):
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator):
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator):
    return dataset_or_iterator.output_classes
