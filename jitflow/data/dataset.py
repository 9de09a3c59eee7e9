"""`tf.data.Dataset`: input pipelines as a chain of transformations run on the host.

A Dataset is a description: its element structure (dtypes and static shapes), the graph tensors
it needs (`_inputs()`: tensors passed to `from_tensor_slices`, a fed batch size, captured
tensors of its functions) and `_gen(run)`, a generator of elements (tuples of NumPy arrays, one
per component) given those tensors' values. An iterator's initializer op evaluates the inputs
and starts the generator; `get_next` pulls one element per run. Everything here is host work:
the arrays it yields are handed to the compiled step as inputs.
"""
from __future__ import annotations

import glob as _glob
import itertools
import os
from typing import Callable, Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core import structure as nest
from jitflow.data.function import Spec, TracedFunction, spec_like
from jitflow.core.graph import Tensor, convert_to_tensor, get_default_graph
from jitflow.core.shapes import TensorShape, as_shape
from jitflow.serialize import tfrecord

__all__ = ["Dataset", "DatasetV1", "TextLineDataset", "FixedLengthRecordDataset",
           "TFRecordDataset", "Options",
           "AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY"]

AUTOTUNE = -1
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


class Options:
    """`tf.data.Options`: accepted; jitflow's pipelines have no tunable options."""

    def __init__(self) -> None:
        self.experimental_deterministic = None

    def merge(self, other) -> "Options":
        return self


class _Run:
    """What a pipeline sees while it runs: the session's variable store and the values of its
    input tensors."""

    __slots__ = ("store", "values")

    def __init__(self, store, values: dict) -> None:
        self.store = store
        self.values = values

    def get(self, v):
        """The value of a dataset argument (a graph tensor's, or the Python value itself)."""
        if isinstance(v, Tensor):
            return self.values[v]
        return v


def _specs_of(structure) -> list:
    return nest.flatten(structure)


def _as_component(value, name: str):
    """A dataset argument as a NumPy array (Python/NumPy data) or a Tensor (graph data)."""
    if isinstance(value, Tensor) or hasattr(value, "_to_tensor"):
        return convert_to_tensor(value, name=name)
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in
                                                nest.flatten(list(value))):
        return convert_to_tensor(value, name=name)
    from jitflow.core.graph import _infer_numpy
    arr = _infer_numpy(value)
    return np.array(arr, copy=True)


def _spec_of_component(c) -> Spec:
    if isinstance(c, Tensor):
        return Spec(c.dtype, c.shape)
    return Spec(_dtypes.as_dtype(c.dtype), c.shape)


def _normalize(element):
    """A user structure for a dataset: tuples, dicts and namedtuples nest; a list is data."""
    if isinstance(element, dict):
        return {k: _normalize(v) for k, v in element.items()}
    if isinstance(element, tuple):
        vals = [_normalize(v) for v in element]
        return type(element)(*vals) if hasattr(element, "_fields") else tuple(vals)
    return _LeafBox(element)


class _LeafBox:
    """A leaf while normalizing (so lists inside are not walked as structure)."""

    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value


def _leaves(element) -> tuple:
    """(structure template, flat components as arrays or tensors)."""
    norm = _normalize(element)
    boxes = [b for b in nest.flatten(norm)]
    comps = [_as_component(b.value, f"component_{i}") for i, b in enumerate(boxes)]
    return norm, comps


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _dim(a, b):
    """Merge two static dims (None where they differ)."""
    return a if a == b else None


def _most_specific(s1: TensorShape, s2: TensorShape) -> TensorShape:
    if s1.ndims is None or s2.ndims is None or s1.ndims != s2.ndims:
        return TensorShape(None)
    return TensorShape([_dim(a, b) for a, b in zip(s1.as_tuple(), s2.as_tuple())])


# -- the base class -------------------------------------------------------------------------------
class Dataset:
    """A sequence of elements (`tf.data.Dataset`, TF1's DatasetV1 API)."""

    _structure = None

    # -- element structure ---------------------------------------------------------------------
    @property
    def output_types(self):
        return nest.map_structure(lambda s: s.dtype, self._structure)

    @property
    def output_shapes(self):
        return nest.map_structure(lambda s: s.shape, self._structure)

    @property
    def output_classes(self):
        from jitflow.ops.sparse import SparseTensor
        return nest.map_structure(lambda s: SparseTensor if s.is_sparse else Tensor,
                                  self._structure)

    @property
    def element_spec(self):
        return self._structure

    def _children(self) -> list:
        return []

    def _own_inputs(self) -> list:
        return []

    def _inputs(self) -> list:
        """Every graph tensor the pipeline needs, in a fixed order, without repeats."""
        out: list = []
        seen: set = set()
        stack = [self]
        while stack:
            d = stack.pop()
            for t in d._own_inputs():
                if isinstance(t, Tensor) and t not in seen:
                    seen.add(t)
                    out.append(t)
            stack.extend(reversed(d._children()))
        return out

    def _gen(self, run: _Run):
        raise NotImplementedError

    @property
    def _graph(self):
        ts = self._inputs()
        return ts[0].graph if ts else get_default_graph()

    def __iter__(self):
        raise RuntimeError("__iter__() is only supported inside of tf.function or when eager "
                           "execution is enabled; in a TF1 graph use an iterator "
                           "(make_one_shot_iterator, make_initializable_iterator).")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} shapes: {self.output_shapes}, types: {self.output_types}>"

    # -- sources -------------------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors) -> "Dataset":
        """The slices of `tensors` along their first dimension (a tuple or dict of them gives
        tuple or dict elements; a list is one tensor)."""
        return _TensorSlices(tensors)

    @staticmethod
    def from_tensors(tensors) -> "Dataset":
        """One element: `tensors` themselves."""
        return _Tensors(tensors)

    @staticmethod
    def from_sparse_tensor_slices(sparse_tensor):
        raise NotImplementedError("from_sparse_tensor_slices: sparse datasets are not "
                                  "supported")

    @staticmethod
    def range(*args, output_type=_dtypes.int64) -> "Dataset":
        """`range(stop)`, `range(start, stop[, step])`: int64 scalars."""
        return _Range(args, output_type)

    @staticmethod
    def from_generator(generator: Callable, output_types, output_shapes=None, args=None,
                       output_signature=None) -> "Dataset":
        """Elements produced by calling `generator(*args)` when the iterator is initialized;
        each is converted to `output_types` and checked against `output_shapes`."""
        return _FromGenerator(generator, output_types, output_shapes, args)

    @staticmethod
    def zip(datasets) -> "Dataset":
        """Elements that are tuples (or the given nesting) of the datasets' elements; as long
        as the shortest."""
        return _Zip(datasets)

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None) -> "Dataset":
        """The file names matching `file_pattern` (a glob; a list of them), shuffled unless
        `shuffle=False`."""
        if isinstance(file_pattern, Tensor):
            raise NotImplementedError("list_files: the pattern must be a Python string")
        patterns = [file_pattern] if isinstance(file_pattern, (str, bytes)) else file_pattern
        names = sorted({n for p in patterns
                        for n in _glob.glob(p.decode() if isinstance(p, bytes) else p)})
        if not names:
            raise errors.InvalidArgumentError(None, None,
                                              f"No files matched pattern: {file_pattern}")
        ds = Dataset.from_tensor_slices(np.array([n.encode() for n in names], dtype=object))
        if shuffle is None or shuffle:
            ds = ds.shuffle(len(names), seed=seed)
        return ds

    # -- transformations -----------------------------------------------------------------------
    def map(self, map_func: Callable, num_parallel_calls=None,
            deterministic=None) -> "Dataset":
        """`map_func` applied to each element (traced once into the graph)."""
        return _Map(self, map_func)

    def map_with_legacy_function(self, map_func, num_parallel_calls=None) -> "Dataset":
        return _Map(self, map_func)

    def filter(self, predicate: Callable) -> "Dataset":
        """The elements for which `predicate` (a scalar bool tensor) is true."""
        return _Filter(self, predicate)

    def flat_map(self, map_func: Callable) -> "Dataset":
        """The elements of the datasets `map_func` returns, one after the other."""
        return _FlatMap(self, map_func)

    def interleave(self, map_func: Callable, cycle_length=AUTOTUNE, block_length=1,
                   num_parallel_calls=None, deterministic=None) -> "Dataset":
        """`flat_map` that takes `block_length` elements in turn from `cycle_length` of the
        returned datasets at a time."""
        return _Interleave(self, map_func, cycle_length, block_length)

    def batch(self, batch_size, drop_remainder: bool = False) -> "Dataset":
        """Consecutive elements stacked into batches of `batch_size` (the last may be smaller
        unless `drop_remainder`)."""
        return _Batch(self, batch_size, drop_remainder)

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None,
                     drop_remainder: bool = False) -> "Dataset":
        """Batches whose components are padded (with `padding_values`, default 0 or b"") to
        `padded_shapes` (None or -1 dims: the longest in the batch)."""
        return _PaddedBatch(self, batch_size, padded_shapes, padding_values, drop_remainder)

    def unbatch(self) -> "Dataset":
        """The rows of each element's components as separate elements."""
        return _Unbatch(self)

    def shuffle(self, buffer_size, seed=None,
                reshuffle_each_iteration: Optional[bool] = None) -> "Dataset":
        """Elements drawn at random from a buffer of `buffer_size` (TF's algorithm: a full
        buffer, one random pick replaced by the next element); a new order every epoch unless
        `reshuffle_each_iteration=False`."""
        return _Shuffle(self, buffer_size, seed,
                        True if reshuffle_each_iteration is None else reshuffle_each_iteration)

    def repeat(self, count=None) -> "Dataset":
        """The elements `count` times over (forever for None or -1)."""
        return _Repeat(self, count)

    def prefetch(self, buffer_size) -> "Dataset":
        """Accepted for compatibility: elements are produced when `get_next` runs."""
        return _PassThrough(self)

    def cache(self, filename: str = "") -> "Dataset":
        """The first full pass is kept in memory and replayed by later epochs."""
        return _Cache(self)

    def take(self, count) -> "Dataset":
        """At most `count` elements (all for -1)."""
        return _Take(self, count)

    def skip(self, count) -> "Dataset":
        """All but the first `count` elements (none for -1)."""
        return _Skip(self, count)

    def shard(self, num_shards, index) -> "Dataset":
        """Every `num_shards`-th element, starting at `index`."""
        return _Shard(self, num_shards, index)

    def concatenate(self, dataset: "Dataset") -> "Dataset":
        """This dataset's elements, then `dataset`'s (same types and nesting)."""
        return _Concatenate(self, dataset)

    def enumerate(self, start=0) -> "Dataset":
        """(index, element) pairs, counting from `start` (int64)."""
        return Dataset.zip((Dataset.range(start, np.iinfo(np.int64).max), self))

    def apply(self, transformation_func: Callable) -> "Dataset":
        """`transformation_func(self)`, which must return a Dataset."""
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError("`transformation_func` must return a Dataset.")
        return out

    def with_options(self, options) -> "Dataset":
        return self

    def options(self) -> Options:
        return Options()

    # -- iterators -----------------------------------------------------------------------------
    def make_one_shot_iterator(self):
        """An iterator that initializes itself on its first `get_next`."""
        from jitflow.data.iterator import make_one_shot_iterator
        return make_one_shot_iterator(self)

    def make_initializable_iterator(self, shared_name: Optional[str] = None):
        """An iterator to start (again) by running its `initializer` op."""
        from jitflow.data.iterator import make_initializable_iterator
        return make_initializable_iterator(self, shared_name)


DatasetV1 = Dataset


# -- sources --------------------------------------------------------------------------------------
class _TensorSlices(Dataset):
    def __init__(self, tensors) -> None:
        norm, self._comps = _leaves(tensors)
        if not self._comps:
            raise ValueError("from_tensor_slices needs at least one tensor")
        specs = []
        n = None
        for c in self._comps:
            s = _spec_of_component(c)
            if s.shape.ndims == 0:
                raise ValueError("Unbatching a tensor is only supported for rank >= 1")
            dims = s.shape.as_tuple()
            if dims is not None:
                if n is not None and dims[0] is not None and dims[0] != n:
                    raise ValueError(f"Dimensions {n} and {dims[0]} are not compatible")
                n = dims[0] if dims[0] is not None else n
                specs.append(Spec(s.dtype, dims[1:]))
            else:
                specs.append(Spec(s.dtype, None))
        self._structure = nest.pack_sequence_as(norm, specs)

    def _own_inputs(self) -> list:
        return self._comps

    def _gen(self, run):
        vals = [np.asarray(run.get(c)) for c in self._comps]
        n = vals[0].shape[0] if vals[0].ndim else 0
        for v in vals[1:]:
            if v.ndim == 0 or v.shape[0] != n:
                raise _invalid(f"Dimensions {n} and {v.shape[0] if v.ndim else 0} are not "
                               "compatible (from_tensor_slices components must have the same "
                               "first dimension)")
        for i in range(n):
            yield tuple(v[i] for v in vals)


class _Tensors(Dataset):
    def __init__(self, tensors) -> None:
        norm, self._comps = _leaves(tensors)
        self._structure = nest.pack_sequence_as(norm, [_spec_of_component(c)
                                                       for c in self._comps])

    def _own_inputs(self) -> list:
        return self._comps

    def _gen(self, run):
        yield tuple(np.asarray(run.get(c)) for c in self._comps)


def _scalar_arg(value, dtype, name: str):
    """A scalar dataset argument: a Python int, or a scalar tensor evaluated at init time."""
    if isinstance(value, Tensor) or hasattr(value, "_to_tensor"):
        t = convert_to_tensor(value, name=name)
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"{name} must be a scalar, got shape {t.shape}")
        return t
    return int(value)


class _Range(Dataset):
    def __init__(self, args, output_type) -> None:
        if not 1 <= len(args) <= 3:
            raise ValueError(f"Invalid arguments to range: {args}")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (
            (args[0], args[1], 1) if len(args) == 2 else args)
        self._args = [_scalar_arg(a, _dtypes.int64, n)
                      for a, n in zip((start, stop, step), ("start", "stop", "step"))]
        self._dtype = _dtypes.as_dtype(output_type)
        self._structure = Spec(self._dtype, [])

    def _own_inputs(self) -> list:
        return self._args

    def _gen(self, run):
        start, stop, step = (int(run.get(a)) for a in self._args)
        if step == 0:
            raise _invalid("step must be a non-zero integer.")
        npd = self._dtype.as_numpy_dtype
        for i in range(start, stop, step):
            yield (np.asarray(i, dtype=npd),)


class _FromGenerator(Dataset):
    def __init__(self, generator, output_types, output_shapes, args) -> None:
        if not callable(generator):
            raise TypeError("`generator` must be callable.")
        if output_shapes is None:
            output_shapes = nest.map_structure(lambda _: TensorShape(None), output_types)
        else:
            output_shapes = _shapes_like(output_types, output_shapes)
        self._gen_fn = generator
        self._args = [] if args is None else [_as_component(a, f"arg_{i}")
                                             for i, a in enumerate(args)]
        self._types = output_types
        flat_types = nest.flatten(output_types)
        flat_shapes = nest.flatten_up_to(output_types, output_shapes)
        self._specs = [Spec(t, s) for t, s in zip(flat_types, flat_shapes)]
        self._structure = nest.pack_sequence_as(output_types, self._specs)

    def _own_inputs(self) -> list:
        return self._args

    def _gen(self, run):
        args = [run.get(a) for a in self._args]
        args = [a.item() if isinstance(a, np.ndarray) and a.ndim == 0 else a for a in args]
        for value in self._gen_fn(*args):
            if not nest.is_nested(self._types) and nest.is_nested(value) \
                    and not isinstance(value, list):
                flat = [value]
            else:
                try:
                    flat = nest.flatten_up_to(self._types, value)
                except (TypeError, ValueError):
                    raise _invalid(f"`generator` yielded an element that did not match the "
                                   f"expected structure. The expected structure was "
                                   f"{self._types}, but the yielded element was "
                                   f"{value}.") from None
            out = []
            for v, s in zip(flat, self._specs):
                try:
                    arr = (_dtypes.as_bytes_array(v) if s.dtype == _dtypes.string
                           else _typed(v, s.dtype))
                except (TypeError, ValueError):
                    raise _invalid(f"TypeError: `generator` yielded an element that could not "
                                   f"be converted to the expected type. The expected type was "
                                   f"{s.dtype.name}, but the yielded element was {v}.") \
                        from None
                if not s.shape.is_compatible_with(TensorShape(arr.shape)):
                    raise _invalid(f"`generator` yielded an element of shape {arr.shape} "
                                   f"where an element of shape {s.shape} was expected.")
                out.append(arr)
            yield tuple(out)


def _typed(v, dtype) -> np.ndarray:
    arr = np.asarray(v)
    if arr.dtype.kind in "SUO":
        raise TypeError("string where a number is expected")
    npd = np.dtype(dtype.as_numpy_dtype)
    if arr.dtype.kind == "f" and npd.kind in "iu" and np.any(arr != np.floor(arr)):
        raise TypeError("float where an integer is expected")
    return arr.astype(npd, copy=False)


def _shapes_like(types, shapes):
    if not nest.is_nested(types):
        return as_shape(shapes)
    if isinstance(types, dict):
        return {k: _shapes_like(types[k], shapes[k]) for k in types}
    vals = [_shapes_like(t, s) for t, s in zip(nest._children(types), nest._children(shapes))]
    return nest._rebuild(types, vals)


def _filenames(value) -> list:
    if isinstance(value, np.ndarray):
        return [f.decode() if isinstance(f, bytes) else str(f) for f in value.reshape(-1)]
    return [value.decode() if isinstance(value, bytes) else value]


def _open(name: str, compression: str):
    return tfrecord.open_compressed(name, compression)


def _compression(c) -> str:
    if isinstance(c, Tensor):
        raise NotImplementedError("compression_type must be a Python string, not a Tensor")
    c = "" if c is None else (c.decode() if isinstance(c, bytes) else str(c))
    if c not in ("", "GZIP", "ZLIB"):
        raise ValueError(f"Unsupported compression_type: {c}")
    return c


class TextLineDataset(Dataset):
    """`tf.data.TextLineDataset`: the lines of text files (bytes, without the line end)."""

    def __init__(self, filenames, compression_type=None, buffer_size=None,
                 num_parallel_reads=None) -> None:
        self._files = _string_arg(filenames, "filenames")
        self._compression = _compression(compression_type)
        self._structure = Spec(_dtypes.string, [])

    def _own_inputs(self) -> list:
        return [self._files]

    def _gen(self, run):
        for name in _filenames(run.get(self._files)):
            with _open(name, self._compression) as f:
                for line in f:
                    if line.endswith(b"\n"):
                        line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
                    yield (np.array(line, dtype=object),)


class FixedLengthRecordDataset(Dataset):
    """`tf.data.FixedLengthRecordDataset`: records of `record_bytes` bytes from binary files
    (after `header_bytes`, before `footer_bytes`), as strings."""

    def __init__(self, filenames, record_bytes: int, header_bytes: Optional[int] = None,
                 footer_bytes: Optional[int] = None, buffer_size=None,
                 compression_type=None, num_parallel_reads=None) -> None:
        self._files = _string_arg(filenames, "filenames")
        self._record = int(record_bytes)
        self._header = int(header_bytes or 0)
        self._footer = int(footer_bytes or 0)
        self._compression = _compression(compression_type)
        if self._record <= 0:
            raise ValueError("record_bytes must be positive")
        self._structure = Spec(_dtypes.string, [])

    def _own_inputs(self) -> list:
        return [self._files]

    def _gen(self, run):
        for name in _filenames(run.get(self._files)):
            with _open(name, self._compression) as f:
                data = f.read()
            body = data[self._header:len(data) - self._footer]
            for i in range(len(body) // self._record):
                yield (np.array(body[i * self._record:(i + 1) * self._record], dtype=object),)


class TFRecordDataset(Dataset):
    """`tf.data.TFRecordDataset`: the records of TFRecord files (compressed as
    `compression_type` says: "", "GZIP" or "ZLIB"), as strings, file after file."""

    def __init__(self, filenames, compression_type=None, buffer_size=None,
                 num_parallel_reads=None, name=None) -> None:
        if isinstance(filenames, Dataset):
            raise NotImplementedError("TFRecordDataset: give the file names as a string, a list "
                                      "or a string tensor (use Dataset.interleave to read "
                                      "the files of a dataset)")
        self._files = _string_arg(filenames, "filenames")
        shape = self._files.shape if isinstance(self._files, Tensor) else \
            TensorShape(np.shape(self._files))
        if shape.ndims is not None and shape.ndims > 1:
            raise ValueError(f"`filenames` must be a scalar or a vector, got shape {shape}")
        self._compression = _compression(compression_type)
        self._structure = Spec(_dtypes.string, [])

    def _own_inputs(self) -> list:
        return [self._files]

    def _gen(self, run):
        for name in _filenames(run.get(self._files)):
            with _open(name, self._compression) as f:
                for _, data in tfrecord.iter_records(f, name):
                    yield (np.array(data, dtype=object),)


def _string_arg(value, name: str):
    if isinstance(value, Tensor):
        if value.dtype != _dtypes.string:
            raise TypeError(f"`{name}` must be a string tensor, got {value.dtype.name}")
        return value
    return _dtypes.as_bytes_array(value, name)


# -- transformations ------------------------------------------------------------------------------
class _Unary(Dataset):
    def __init__(self, input_dataset: Dataset) -> None:
        if not isinstance(input_dataset, Dataset):
            raise TypeError(f"Expected a Dataset, got {type(input_dataset).__name__}")
        self._input = input_dataset
        self._structure = input_dataset._structure

    def _children(self) -> list:
        return [self._input]


class _PassThrough(_Unary):
    def _gen(self, run):
        return self._input._gen(run)


class _Map(_Unary):
    def __init__(self, input_dataset, fn) -> None:
        super().__init__(input_dataset)
        self._fn = TracedFunction(fn, input_dataset._structure, input_dataset._graph, "map")
        self._structure = self._fn.output_structure

    def _own_inputs(self) -> list:
        return self._fn.captured

    def _gen(self, run):
        cap = [run.values[t] for t in self._fn.captured]
        fn, store = self._fn, run.store
        for el in self._input._gen(run):
            yield tuple(fn(store, el, cap))


class _Filter(_Unary):
    def __init__(self, input_dataset, predicate) -> None:
        super().__init__(input_dataset)
        self._fn = TracedFunction(predicate, input_dataset._structure, input_dataset._graph,
                                  "filter")
        out = nest.flatten(self._fn.output_structure)
        if len(out) != 1 or out[0].dtype != _dtypes.bool_ or out[0].shape.ndims not in (0,
                                                                                        None):
            raise ValueError(f"`predicate` return type must be convertible to a scalar boolean "
                             f"tensor. Was {self._fn.output_structure}.")

    def _own_inputs(self) -> list:
        return self._fn.captured

    def _gen(self, run):
        cap = [run.values[t] for t in self._fn.captured]
        fn, store = self._fn, run.store
        for el in self._input._gen(run):
            if bool(fn(store, el, cap)[0]):
                yield el


class _FlatMap(_Unary):
    def __init__(self, input_dataset, fn) -> None:
        super().__init__(input_dataset)
        self._fn = TracedFunction(fn, input_dataset._structure, input_dataset._graph,
                                  "flat_map", returns_dataset=True)
        self._structure = self._fn.dataset._structure

    def _own_inputs(self) -> list:
        return self._fn.captured

    def _inner(self, run, el, cap):
        vals = self._fn(run.store, el, cap)
        return self._fn.dataset._gen(_Run(run.store, dict(zip(self._fn.fetches, vals))))

    def _gen(self, run):
        cap = [run.values[t] for t in self._fn.captured]
        for el in self._input._gen(run):
            yield from self._inner(run, el, cap)


class _Interleave(_FlatMap):
    def __init__(self, input_dataset, fn, cycle_length, block_length) -> None:
        super().__init__(input_dataset, fn)
        self._cycle = _scalar_arg(cycle_length, _dtypes.int64, "cycle_length")
        self._block = _scalar_arg(block_length, _dtypes.int64, "block_length")

    def _own_inputs(self) -> list:
        return self._fn.captured + [self._cycle, self._block]

    def _gen(self, run):
        cap = [run.values[t] for t in self._fn.captured]
        cycle, block = int(run.get(self._cycle)), int(run.get(self._block))
        if cycle == AUTOTUNE or cycle <= 0:
            cycle = os.cpu_count() or 1
        source = self._input._gen(run)
        active: list = []
        exhausted = False
        while True:
            while not exhausted and len(active) < cycle:
                el = next(source, None)
                if el is None:
                    exhausted = True
                    break
                active.append(self._inner(run, el, cap))
            if not active:
                return
            i = 0
            while i < len(active):
                it = active[i]
                done = False
                for _ in range(block):
                    v = next(it, None)
                    if v is None:
                        done = True
                        break
                    yield v
                if done:
                    active.pop(i)
                    if not exhausted:
                        el = next(source, None)
                        if el is None:
                            exhausted = True
                        else:
                            active.insert(i, self._inner(run, el, cap))
                            i += 1
                else:
                    i += 1


def _batch_shape(spec: Spec, batch, drop: bool) -> TensorShape:
    lead = batch if drop and isinstance(batch, int) else None
    if spec.shape.ndims is None:
        return TensorShape(None)
    return TensorShape([lead] + list(spec.shape.as_tuple()))


class _Batch(_Unary):
    def __init__(self, input_dataset, batch_size, drop_remainder) -> None:
        super().__init__(input_dataset)
        self._size = _scalar_arg(batch_size, _dtypes.int64, "batch_size")
        self._drop = bool(drop_remainder)
        self._structure = nest.map_structure(
            lambda s: spec_like(s, s.dtype, _batch_shape(s, self._size, self._drop)),
            input_dataset._structure)
        self._sparse = [s.is_sparse for s in _specs_of(input_dataset._structure)]

    def _own_inputs(self) -> list:
        return [self._size]

    def _rows(self, run):
        n = int(run.get(self._size))
        if n <= 0:
            raise _invalid(f"Batch size must be greater than zero, got {n}")
        it = self._input._gen(run)
        while True:
            rows = list(itertools.islice(it, n))
            if not rows or (self._drop and len(rows) < n):
                return
            yield rows

    def _gen(self, run):
        for rows in self._rows(run):
            out = []
            for c in range(len(rows[0])):
                if self._sparse[c]:
                    out.append(_batch_sparse([r[c] for r in rows], c))
                    continue
                first = np.shape(rows[0][c])
                for j, r in enumerate(rows):
                    if np.shape(r[c]) != first:
                        raise _invalid(f"Cannot batch tensors with different shapes in "
                                       f"component {c}. First element had shape "
                                       f"{list(first)} and element {j} had shape "
                                       f"{list(np.shape(r[c]))}.")
                out.append(np.stack([r[c] for r in rows]))
            yield tuple(out)


def _batch_sparse(values: list, c: int):
    """SparseTensorValues stacked along a new first axis (dense shape: the largest of each
    dimension), as TensorFlow batches sparse components."""
    from jitflow.ops.sparse import SparseTensorValue
    ranks = {len(np.asarray(v.dense_shape)) for v in values}
    if len(ranks) != 1:
        raise _invalid(f"Cannot batch sparse tensors of different ranks in component {c}: "
                       f"{sorted(ranks)}")
    rank = ranks.pop()
    shapes = np.array([np.asarray(v.dense_shape, np.int64) for v in values])
    idx = [np.hstack([np.full((len(v.values), 1), i, np.int64),
                      np.asarray(v.indices, np.int64).reshape(len(v.values), rank)])
           for i, v in enumerate(values)]
    vals = np.concatenate([np.asarray(v.values) for v in values])
    dense = np.concatenate([[len(values)], shapes.max(axis=0) if len(shapes) else []])
    return SparseTensorValue(np.concatenate(idx).astype(np.int64), vals,
                             dense.astype(np.int64))


def _no_sparse(structure, what: str) -> None:
    if any(s.is_sparse for s in _specs_of(structure)):
        raise NotImplementedError(f"{what}: datasets with SparseTensor components are not "
                                  f"supported (map, filter, batch, shuffle, repeat and the "
                                  f"like are)")


class _PaddedBatch(_Batch):
    def __init__(self, input_dataset, batch_size, padded_shapes, padding_values,
                 drop_remainder) -> None:
        _no_sparse(input_dataset._structure, "padded_batch")
        super().__init__(input_dataset, batch_size, drop_remainder)
        in_specs = _specs_of(input_dataset._structure)
        if padded_shapes is None:
            shapes = [s.shape if s.shape.ndims is not None else None for s in in_specs]
            if any(s is None for s in shapes):
                raise ValueError("padded_batch needs padded_shapes for components of unknown "
                                 "rank")
            shapes = [TensorShape([None] * s.ndims) for s in shapes]
        else:
            shapes = [as_shape([None if d is not None and int(d) == -1 else d for d in s]
                               if isinstance(s, (list, tuple)) else s)
                      for s in nest.flatten_up_to(input_dataset._structure, padded_shapes)]
        if padding_values is None:
            pads = [b"" if s.dtype == _dtypes.string else 0 for s in in_specs]
        else:
            pads = nest.flatten_up_to(input_dataset._structure, padding_values)
        self._pads = []
        for s, p in zip(in_specs, pads):
            if isinstance(p, Tensor):
                raise NotImplementedError("padded_batch: padding_values must be Python values")
            self._pads.append(_dtypes.as_bytes_array(p) if s.dtype == _dtypes.string
                              else np.asarray(p, dtype=s.dtype.as_numpy_dtype))
        for s, ps in zip(in_specs, shapes):
            if s.shape.ndims is not None and ps.ndims != s.shape.ndims:
                raise ValueError(f"The padded shape {ps} is not compatible with the "
                                 f"corresponding input component shape {s.shape}.")
        self._padded = shapes
        lead = self._size if self._drop and isinstance(self._size, int) else None
        self._structure = nest.pack_sequence_as(
            input_dataset._structure,
            [Spec(s.dtype, [lead] + list(ps.as_tuple())) for s, ps in zip(in_specs, shapes)])

    def _gen(self, run):
        for rows in self._rows(run):
            out = []
            for c, (ps, pad) in enumerate(zip(self._padded, self._pads)):
                vals = [np.asarray(r[c]) for r in rows]
                longest = [max(v.shape[d] for v in vals) for d in range(vals[0].ndim)]
                target = []
                for d, want in enumerate(ps.as_tuple()):
                    if want is None:
                        target.append(longest[d])
                    elif longest[d] > want:
                        raise _invalid(f"Attempted to pad to a smaller size than the input "
                                       f"element: component {c} dimension {d} has size "
                                       f"{longest[d]} > padded size {want}.")
                    else:
                        target.append(want)
                batch = np.empty([len(vals)] + target, dtype=vals[0].dtype)
                batch[...] = pad
                for j, v in enumerate(vals):
                    batch[(j,) + tuple(slice(0, n) for n in v.shape)] = v
                out.append(batch)
            yield tuple(out)


class _Unbatch(_Unary):
    def __init__(self, input_dataset) -> None:
        _no_sparse(input_dataset._structure, "unbatch")
        super().__init__(input_dataset)
        specs = _specs_of(input_dataset._structure)
        for s in specs:
            if s.shape.ndims == 0:
                raise ValueError("Cannot unbatch an input with scalar components.")
        self._structure = nest.pack_sequence_as(
            input_dataset._structure,
            [Spec(s.dtype, None if s.shape.ndims is None else s.shape.as_tuple()[1:])
             for s in specs])

    def _gen(self, run):
        for el in self._input._gen(run):
            n = np.shape(el[0])[0]
            for c in el:
                if np.shape(c)[0] != n:
                    raise _invalid("Input element must have the same batch size in each "
                                   "component.")
            for i in range(n):
                yield tuple(c[i] for c in el)


class _Shuffle(_Unary):
    def __init__(self, input_dataset, buffer_size, seed, reshuffle) -> None:
        super().__init__(input_dataset)
        self._buffer = _scalar_arg(buffer_size, _dtypes.int64, "buffer_size")
        g = input_dataset._graph
        self._seed = _seed_pair(g, seed)
        self._reshuffle = bool(reshuffle)

    def _own_inputs(self) -> list:
        return [self._buffer]

    def _rng(self, run) -> np.random.Generator:
        """The generator of this pass: new for each initialization; with reshuffling, later
        epochs (a repeat around the shuffle) continue it, without, they restart it from the
        same seed (drawn once when no seed is set)."""
        key = ("shuffle", id(self))
        state = run.values.get(key)
        if state is None:
            seed = self._seed if self._seed is not None else np.random.SeedSequence().entropy
            rng = np.random.default_rng(seed)
            run.values[key] = (seed, rng)
            return rng
        seed, rng = state
        if not self._reshuffle:
            rng = np.random.default_rng(seed)
            run.values[key] = (seed, rng)
        return rng

    def _gen(self, run):
        size = int(run.get(self._buffer))
        if size <= 0:
            raise _invalid(f"buffer_size must be greater than zero, got {size}")
        draws = _Draws(self._rng(run))
        buf: list = []
        it = self._input._gen(run)
        for el in it:
            buf.append(el)
            if len(buf) == size:
                break
        for el in it:
            i = draws.index(len(buf))
            yield buf[i]
            buf[i] = el
        while buf:
            i = draws.index(len(buf))
            yield buf[i]
            buf[i] = buf[-1]
            buf.pop()


class _Draws:
    """Uniform indices below n, from uniform floats drawn in blocks (one generator call per
    256 elements instead of one per element)."""

    __slots__ = ("rng", "u", "k")

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.u: list = []
        self.k = 0

    def index(self, n: int) -> int:
        if self.k == len(self.u):
            self.u = self.rng.random(256).tolist()
            self.k = 0
        v = self.u[self.k]
        self.k += 1
        return min(int(v * n), n - 1)


def _seed_pair(graph, op_seed) -> Optional[list]:
    """TF1's seeding: with neither seed, random; else (graph seed or a default, op seed or a
    per-graph counter)."""
    if graph.seed is None and op_seed is None:
        return None
    return [(graph.seed if graph.seed is not None else 87654321) % 2 ** 63,
            (int(op_seed) if op_seed is not None else graph._next_id()) % 2 ** 63]


class _Repeat(_Unary):
    def __init__(self, input_dataset, count) -> None:
        super().__init__(input_dataset)
        self._count = _scalar_arg(-1 if count is None else count, _dtypes.int64, "count")

    def _own_inputs(self) -> list:
        return [self._count]

    def _gen(self, run):
        n = int(run.get(self._count))
        epoch = 0
        while n < 0 or epoch < n:
            empty = True
            for el in self._input._gen(run):
                empty = False
                yield el
            epoch += 1
            if empty:
                return  # repeating nothing gives nothing (and must not spin forever)


class _Cache(_Unary):
    def _gen(self, run):
        key = ("cache", id(self))
        kept = run.values.get(key)
        if kept is not None:
            yield from kept
            return
        items = []
        for el in self._input._gen(run):
            items.append(el)
            yield el
        run.values[key] = items


class _Take(_Unary):
    def __init__(self, input_dataset, count) -> None:
        super().__init__(input_dataset)
        self._count = _scalar_arg(count, _dtypes.int64, "count")

    def _own_inputs(self) -> list:
        return [self._count]

    def _gen(self, run):
        n = int(run.get(self._count))
        it = self._input._gen(run)
        return it if n < 0 else itertools.islice(it, n)


class _Skip(_Unary):
    def __init__(self, input_dataset, count) -> None:
        super().__init__(input_dataset)
        self._count = _scalar_arg(count, _dtypes.int64, "count")

    def _own_inputs(self) -> list:
        return [self._count]

    def _gen(self, run):
        n = int(run.get(self._count))
        it = self._input._gen(run)
        if n < 0:
            for _ in it:
                pass
            return
        yield from itertools.islice(it, n, None)


class _Shard(_Unary):
    def __init__(self, input_dataset, num_shards, index) -> None:
        super().__init__(input_dataset)
        self._n = _scalar_arg(num_shards, _dtypes.int64, "num_shards")
        self._i = _scalar_arg(index, _dtypes.int64, "index")
        if isinstance(self._n, int) and isinstance(self._i, int) and not 0 <= self._i < self._n:
            raise ValueError("index must be in [0, num_shards)")

    def _own_inputs(self) -> list:
        return [self._n, self._i]

    def _gen(self, run):
        n, i = int(run.get(self._n)), int(run.get(self._i))
        return itertools.islice(self._input._gen(run), i, None, n)


class _Zip(Dataset):
    def __init__(self, datasets) -> None:
        flat = nest.flatten(datasets)
        for d in flat:
            if not isinstance(d, Dataset):
                raise TypeError(f"The argument to `Dataset.zip()` must be a (nested) structure "
                                f"of `Dataset` objects, got {type(d).__name__}")
        self._datasets = flat
        self._template = datasets
        self._structure = nest.pack_sequence_as(datasets, [d._structure for d in flat])

    def _children(self) -> list:
        return list(self._datasets)

    def _gen(self, run):
        for parts in zip(*[d._gen(run) for d in self._datasets]):
            yield tuple(c for p in parts for c in p)


class _Concatenate(Dataset):
    def __init__(self, a: Dataset, b: Dataset) -> None:
        sa, sb = _specs_of(a._structure), _specs_of(b._structure)
        try:
            nest.assert_same_structure(a._structure, b._structure)
        except (TypeError, ValueError):
            raise TypeError(f"Two datasets to concatenate have different types "
                            f"{a.output_types} and {b.output_types}") from None
        if [(s.dtype, s.is_sparse) for s in sa] != [(s.dtype, s.is_sparse) for s in sb]:
            raise TypeError(f"Two datasets to concatenate have different types "
                            f"{a.output_types} and {b.output_types}")
        self._a, self._b = a, b
        self._structure = nest.pack_sequence_as(
            a._structure, [spec_like(x, x.dtype, _most_specific(x.shape, y.shape))
                           for x, y in zip(sa, sb)])

    def _children(self) -> list:
        return [self._a, self._b]

    def _gen(self, run):
        yield from self._a._gen(run)
        yield from self._b._gen(run)

