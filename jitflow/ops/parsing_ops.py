"""Parsing `tf.train.Example` and `tf.train.SequenceExample` records (`tf.parse_example`,
`tf.parse_single_example`, `tf.io.parse_single_sequence_example`, `tf.io.parse_sequence_example`)
with their feature configurations (`tf.FixedLenFeature`, `tf.VarLenFeature`,
`tf.FixedLenSequenceFeature`).

The ops are host ops: their references decode each serialized record with the protobuf message
classes of `jitflow.serialize.protos` and gather the features into dense arrays (a
FixedLenFeature: its default where a record lacks it; a FixedLenSequenceFeature: padded to the
longest record) and SparseTensors (a VarLenFeature). Bad records raise InvalidArgumentError
with TensorFlow's messages. Outputs are ordered as TensorFlow's ops order them: each sparse
feature's indices, then values, then dense shapes, then the dense values.
"""
from __future__ import annotations

import collections
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.core.shapes import TensorShape, as_shape
from jitflow.ops.registry import register

__all__ = ["FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "parse_example",
           "parse_single_example", "parse_single_sequence_example"]

NAMESPACES = {"io": ["FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature",
                     "parse_example", "parse_single_example", "parse_single_sequence_example",
                     "parse_sequence_example"]}

_KIND = {"string": "bytes_list", "float32": "float_list", "int64": "int64_list"}
_KIND_TYPE = {"bytes_list": "string", "float_list": "float", "int64_list": "int64"}
_ALLOWED = "float32, int64, string"


# -- the feature configurations -------------------------------------------------------------
class FixedLenFeature(collections.namedtuple("FixedLenFeature",
                                             ["shape", "dtype", "default_value"])):
    """A feature with a fixed number of values: a dense tensor of `shape` per record
    (`default_value` where a record lacks it; without one, the feature is required)."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class FixedLenSequenceFeature(collections.namedtuple(
        "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"])):
    """A feature with any number of values of `shape`: a dense [n, *shape] tensor per record,
    padded with `default_value` (or zeros) to the longest record of a batch."""

    def __new__(cls, shape, dtype, allow_missing: bool = False, default_value=None):
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature with any number of values: a SparseTensor."""


def _check_dtype(dtype, what: str):
    d = _dtypes.as_dtype(dtype)
    if d.name not in _KIND:
        raise TypeError(f"Value passed to parameter '{what}' has DataType {d.name} not in list "
                        f"of allowed values: {_ALLOWED}")
    return d


def _shape_list(shape, key: str, feature, sequence: bool) -> list:
    dims = as_shape(shape).as_tuple()
    if dims is None:
        raise ValueError(f"The shape of feature {key} must be known, got {shape!r}")
    if None in dims:
        if not sequence and dims[0] is None:
            raise ValueError(f"First dimension of shape for feature {key} unknown. Consider "
                             f"using FixedLenSequenceFeature. Received feature={feature}.")
        raise ValueError(f"All dimensions of shape for feature {key} need to be known but "
                         f"received {shape}.")
    return list(dims)


class _Config:
    """The features of one parse, split as the ops take them."""

    def __init__(self) -> None:
        self.sparse_keys: list = []
        self.sparse_types: list = []
        self.dense_keys: list = []
        self.dense_types: list = []
        self.dense_shapes: list = []   # a sequence feature: [None, *shape]
        self.dense_defaults: list = []  # Tensors; empty: required (or zero padding)


def _default_tensor(feature, dtype, dims: list, key: str, sequence: bool) -> Tensor:
    """The default of a dense feature as a tensor (empty: none)."""
    from jitflow.ops.sources import constant
    d = feature.default_value
    if d is None:
        return constant(np.zeros([0], object if dtype == _dtypes.string
                                 else dtype.as_numpy_dtype), dtype=dtype, name=f"key_{key}")
    if isinstance(d, Tensor):
        from jitflow.ops.shape_ops import reshape
        t = convert_to_tensor(d, dtype=dtype)
        return t if sequence else reshape(t, dims, name=f"key_{key}")
    arr = _dtypes.as_bytes_array(d) if dtype == _dtypes.string else None
    t = convert_to_tensor(d if arr is None else arr, dtype=dtype, name=f"key_{key}")
    value = np.asarray(t.op.attrs["value"]) if t.op.type == "Const" else None
    if sequence or value is None:
        return t
    want = int(np.prod(dims, dtype=np.int64))
    if value.size != want:
        raise ValueError(f"Cannot reshape a tensor with {value.size} elements to shape {dims} "
                         f"({want} elements) for the default_value of feature {key}")
    return convert_to_tensor(value.reshape(dims) if arr is None else
                             _dtypes.as_bytes_array(value.reshape(dims)), dtype=dtype,
                             name=f"key_{key}")


def _split(features, for_sequence_lists: bool = False, where: str = "") -> _Config:
    cfg = _Config()
    for key in sorted(features):
        f = features[key]
        if isinstance(f, VarLenFeature):
            cfg.sparse_keys.append(key)
            cfg.sparse_types.append(_check_dtype(f.dtype, "sparse_types"))
        elif isinstance(f, FixedLenSequenceFeature):
            if for_sequence_lists:
                if f.default_value is not None:
                    raise ValueError(f"Value feature_list.dense_defaults[{key}] must be None")
            elif not f.allow_missing:
                raise ValueError("Unsupported: FixedLenSequenceFeature requires allow_missing "
                                 "to be True.")
            d = _check_dtype(f.dtype, "dense_defaults")
            dims = _shape_list(f.shape, key, f, True)
            cfg.dense_keys.append(key)
            cfg.dense_types.append(d)
            cfg.dense_shapes.append([None] + dims)
            cfg.dense_defaults.append(_default_tensor(f, d, dims, key, True))
        elif isinstance(f, FixedLenFeature):
            if for_sequence_lists:
                raise ValueError(f"Unsupported FixedLenFeature {f} for key '{key}'")
            d = _check_dtype(f.dtype, "dense_defaults")
            dims = _shape_list(f.shape, key, f, False)
            cfg.dense_keys.append(key)
            cfg.dense_types.append(d)
            cfg.dense_shapes.append(dims)
            cfg.dense_defaults.append(_default_tensor(f, d, dims, key, False))
        else:
            raise ValueError(f"Invalid feature {key}:{f!r}{where}: expected FixedLenFeature, "
                             f"FixedLenSequenceFeature or VarLenFeature")
    return cfg


# -- reading records ------------------------------------------------------------------------
def _messages():
    # the message classes belong to TensorFlow's file formats (a layer above; protobuf is
    # imported only when a record is parsed)
    from jitflow.serialize import protos
    return protos


def _bytes_list(v) -> list:
    return [b if isinstance(b, bytes) else str(b).encode() for b in
            np.asarray(v, dtype=object).reshape(-1)]


def _name_of(names: list, i: int) -> str:
    return names[i] if names and i < len(names) and names[i] else "<unknown>"


def _feature_values(feature, kind: str) -> np.ndarray:
    vals = getattr(feature, kind).value
    if kind == "bytes_list":
        out = np.empty(len(vals), dtype=object)
        out[:] = list(vals)
        return out
    return np.asarray(vals, dtype=np.float32 if kind == "float_list" else np.int64)


def _present(feature_map, key: str):
    """The feature named `key`, or None where it is absent or has no list set."""
    if key not in feature_map:
        return None
    f = feature_map[key]
    return f if f.WhichOneof("kind") is not None else None


def _invalid(op, msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, op, f"{msg}\n\t [[node {op.name} ({op.type})]]")


class _Fill:
    """Builds the outputs of one key over the records of a batch."""

    @staticmethod
    def sparse(rows: list, lead: tuple, dtype) -> tuple:
        """rows: [(index prefix, values)] -> (indices, values, dense_shape)."""
        width = max((len(v) for _, v in rows), default=0)
        n = sum(len(v) for _, v in rows)
        idx = np.zeros((n, len(lead) + 1), np.int64)
        vals = np.empty(n, dtype=object if dtype == _dtypes.string else dtype.as_numpy_dtype)
        k = 0
        for prefix, v in rows:
            m = len(v)
            if m:
                idx[k:k + m, :-1] = prefix
                idx[k:k + m, -1] = np.arange(m)
                vals[k:k + m] = v
                k += m
        return idx, vals, np.array(list(lead) + [width], np.int64)

    @staticmethod
    def padded(rows: list, lead: tuple, inner: list, dtype, pad) -> np.ndarray:
        """rows: [[n_i, *inner] arrays] -> [*lead, max n, *inner], padded with `pad`."""
        longest = max((r.shape[0] for r in rows), default=0)
        npd = object if dtype == _dtypes.string else dtype.as_numpy_dtype
        out = np.empty((len(rows), longest, *inner), dtype=npd)
        out[...] = pad
        for i, r in enumerate(rows):
            out[i, :r.shape[0]] = r
        return out.reshape(tuple(lead) + (longest, *inner))


def _pad_value(default: np.ndarray, dtype):
    if default.size:
        return default
    return b"" if dtype == _dtypes.string else 0


def _parse_records(op, serialized, names, defaults, cfg_attrs: dict) -> tuple:
    """The Example parse of `serialized` (any shape): (sparse rows per key, dense per key)."""
    protos = _messages()
    ser = np.asarray(serialized, dtype=object)
    lead = ser.shape
    flat = _bytes_list(ser)
    single = ser.ndim == 0
    names = [n.decode("utf-8", "replace") for n in _bytes_list(names)]
    sk, st = cfg_attrs["sparse_keys"], cfg_attrs["sparse_types"]
    dk, dt, ds = cfg_attrs["dense_keys"], cfg_attrs["dense_types"], cfg_attrs["dense_shapes"]
    sparse_rows = [[] for _ in sk]
    dense_rows = [[] for _ in dk]
    index = list(np.ndindex(*lead))
    for i, s in enumerate(flat):
        try:
            ex = protos.Example.FromString(s)
        except Exception:   # protobuf's DecodeError (its class depends on the implementation)
            shown = s.decode("utf-8", "replace")
            raise _invalid(op, f"Could not parse example input, value: '{shown}'") from None
        fmap = ex.features.feature
        where = ("Key: {key}.  " if single else
                 f"Name: {_name_of(names, i)}, Key: {{key}}, Index: {i}.  ")
        for j, (key, dtype) in enumerate(zip(sk, st)):
            f = _present(fmap, key)
            if f is None:
                sparse_rows[j].append((index[i], ()))
                continue
            kind = f.WhichOneof("kind")
            if kind != _KIND[dtype.name]:
                raise _invalid(op, where.format(key=key) + f"Data types don't match. Expected "
                               f"type: {_KIND_TYPE[_KIND[dtype.name]]}, Actual type: "
                               f"{_KIND_TYPE[kind]}")
            sparse_rows[j].append((index[i], _feature_values(f, kind)))
        for j, (key, dtype, shape) in enumerate(zip(dk, dt, ds)):
            f = _present(fmap, key)
            want_kind = _KIND[dtype.name]
            sequence = bool(shape) and shape[0] is None
            inner = list(shape[1:]) if sequence else list(shape)
            default = np.asarray(defaults[j], dtype=object if dtype == _dtypes.string
                                 else dtype.as_numpy_dtype)
            if f is None:
                if sequence:
                    dense_rows[j].append(np.zeros((0, *inner), dtype=default.dtype))
                    continue
                if default.size == 0 and int(np.prod(inner, dtype=np.int64)) != 0:
                    prefix = "" if single else f"Name: {_name_of(names, i)}, "
                    raise _invalid(op, f"{prefix}Feature: {key} (data type: "
                                       f"{_KIND_TYPE[want_kind]}) is required but could not "
                                       f"be found.")
                dense_rows[j].append(default.reshape(inner))
                continue
            kind = f.WhichOneof("kind")
            if kind != want_kind:
                raise _invalid(op, where.format(key=key) + f"Data types don't match. Data "
                               f"type: {_KIND_TYPE[kind]} but expected type: "
                               f"{_KIND_TYPE[want_kind]}")
            vals = _feature_values(f, kind)
            if sequence:
                stride = int(np.prod(inner, dtype=np.int64))
                if stride and vals.size % stride:
                    if single:
                        raise _invalid(op, f"Error while parsing feature with key {key}: "
                                           f"number of elements should be divisible by "
                                           f"{stride}, found {vals.size} instead")
                    shown = ",".join(["?"] + [str(d) for d in inner])
                    raise _invalid(op, where.format(key=key) + f"Number of "
                                   f"{_KIND_TYPE[kind]} values is not a multiple of stride "
                                   f"length. Saw {vals.size} values but output shape is: "
                                   f"[{shown}]")
                dense_rows[j].append(vals.reshape((vals.size // stride if stride else 0,
                                                   *inner)))
                continue
            if vals.size != int(np.prod(inner, dtype=np.int64)):
                if single:
                    raise _invalid(op, f"Key: {key}.  Can't parse serialized Example: Some "
                                       f"{kind} slice was not parsed.")
                raise _invalid(op, where.format(key=key) + f"Number of {_KIND_TYPE[kind]} "
                               f"values != expected.  Values size: {vals.size} but output "
                               f"shape: [{','.join(str(d) for d in inner)}]")
            dense_rows[j].append(vals.reshape(inner))
    return lead, sparse_rows, dense_rows


def _example_outputs(lead, sparse_rows, dense_rows, attrs: dict, defaults) -> tuple:
    sparse = [_Fill.sparse(rows, lead, t) for rows, t in zip(sparse_rows, attrs["sparse_types"])]
    dense = []
    for rows, t, shape, d in zip(dense_rows, attrs["dense_types"], attrs["dense_shapes"],
                                 defaults):
        npd = object if t == _dtypes.string else t.as_numpy_dtype
        if shape and shape[0] is None:
            pad = _pad_value(np.asarray(d, dtype=npd), t)
            dense.append(_Fill.padded(rows, lead, list(shape[1:]), t, pad))
        else:
            out = np.empty(tuple(lead) + tuple(shape), dtype=npd)
            for k, r in zip(np.ndindex(*lead), rows):
                out[k + (Ellipsis,)] = r   # (a 0-d object array would be stored whole)
            dense.append(out)
    return (tuple(s[0] for s in sparse) + tuple(s[1] for s in sparse)
            + tuple(s[2] for s in sparse) + tuple(dense))


# -- ParseExampleV2 -------------------------------------------------------------------------
def _lead_dims(op, serialized: Tensor, max_rank: int) -> Optional[tuple]:
    r = serialized.shape.ndims
    if r is not None and r > max_rank:
        raise ValueError(f"Shape must be at most rank {max_rank} but is rank {r} for "
                         f"'{op.name}' (serialized of shape {serialized.shape})")
    if serialized.dtype != _dtypes.string:
        raise TypeError(f"serialized of '{op.name}' must be a string tensor, got "
                        f"{serialized.dtype.name}")
    return serialized.shape.as_tuple()


def _sparse_specs(lead, types) -> tuple:
    rank = None if lead is None else len(lead) + 1
    return ([(_dtypes.int64, TensorShape([None, rank]))] * len(types),
            [(t, TensorShape([None])) for t in types],
            [(_dtypes.int64, TensorShape([rank]))] * len(types))


def _dense_spec(lead, t, shape):
    return (t, TensorShape(None) if lead is None else TensorShape(list(lead) + list(shape)))


def _parse_example_infer(op):
    a = op.attrs
    lead = _lead_dims(op, op.inputs[0], 1)
    i, v, s = _sparse_specs(lead, a["sparse_types"])
    return i + v + s + [_dense_spec(lead, t, sh) for t, sh in zip(a["dense_types"],
                                                                  a["dense_shapes"])]


def _parse_example_ref(op, serialized, names, *defaults):
    lead, srows, drows = _parse_records(op, serialized, names, defaults, op.attrs)
    return _example_outputs(lead, srows, drows, op.attrs, defaults)


register("ParseExampleV2", infer=_parse_example_infer, ref=_parse_example_ref,
         differentiable=False, kind="host",
         doc="Inputs (serialized, names, *dense_defaults): the features of serialized "
             "tf.train.Example records (attrs sparse_keys/types, dense_keys/types/shapes).")


def _names_tensor(names) -> Tensor:
    from jitflow.ops.sources import constant
    if names is None:
        return constant(np.zeros([0], dtype=object), dtype=_dtypes.string, name="names")
    if not isinstance(names, Tensor):
        names = _dtypes.as_bytes_array(names, "example_names")
    return convert_to_tensor(names, dtype=_dtypes.string, name="names")


def _check_features(features) -> None:
    if not features:
        raise ValueError(f"Argument `features` cannot be None or falsy. Got {features}")
    if not isinstance(features, dict):
        raise TypeError(f"`features` must be a dict of feature names to configurations, got "
                        f"{type(features).__name__}")


def _parse(serialized, features, names, name: Optional[str], default_name: str,
           single: bool) -> dict:
    _check_features(features)
    with name_scope(name, default_name):
        ser = convert_to_tensor(serialized, dtype=_dtypes.string, name="serialized")
        if single and ser.shape.ndims not in (None, 0):
            raise ValueError("Input serialized must be a scalar")
        nm = _names_tensor(names)
        cfg = _split(features)
        attrs = {"sparse_keys": cfg.sparse_keys, "sparse_types": cfg.sparse_types,
                 "dense_keys": cfg.dense_keys, "dense_types": cfg.dense_types,
                 "dense_shapes": cfg.dense_shapes}
        op = make_op("ParseExampleV2", [ser, nm] + cfg.dense_defaults, attrs,
                     name="ParseExampleV2")
    return _results(op.outputs, cfg)


def _results(outputs, cfg: _Config) -> dict:
    from jitflow.ops.sparse import SparseTensor
    ns = len(cfg.sparse_keys)
    out = {}
    for j, key in enumerate(cfg.sparse_keys):
        out[key] = SparseTensor(outputs[j], outputs[ns + j], outputs[2 * ns + j])
    for j, key in enumerate(cfg.dense_keys):
        out[key] = outputs[3 * ns + j]
    return out


def parse_example(serialized, features: dict, name: Optional[str] = None,
                  example_names=None) -> dict:
    """`tf.parse_example` / `tf.io.parse_example`: the features of a batch of serialized
    Example records, as a dict of dense tensors [batch, *shape] and SparseTensors."""
    return _parse(serialized, features, example_names, name, "ParseExample", False)


def parse_single_example(serialized, features: dict, name: Optional[str] = None,
                         example_names=None) -> dict:
    """`tf.parse_single_example` / `tf.io.parse_single_example`: the features of one
    serialized Example record (a string scalar)."""
    return _parse(serialized, features, example_names, name, "ParseSingleExample", True)


# -- ParseSequenceExampleV2 -----------------------------------------------------------------
_SEQ_ATTRS = ("context_sparse_keys", "context_sparse_types", "context_dense_keys",
              "context_dense_types", "context_dense_shapes", "feature_list_sparse_keys",
              "feature_list_sparse_types", "feature_list_dense_keys",
              "feature_list_dense_types", "feature_list_dense_shapes",
              "feature_list_dense_missing_assumed_empty")


def _parse_sequence_infer(op):
    a = op.attrs
    lead = _lead_dims(op, op.inputs[0], 1)
    ci, cv, cs = _sparse_specs(lead, a["context_sparse_types"])
    cd = [_dense_spec(lead, t, sh) for t, sh in zip(a["context_dense_types"],
                                                    a["context_dense_shapes"])]
    fl_lead = None if lead is None else tuple(lead) + (None,)
    fi, fv, fs = _sparse_specs(fl_lead, a["feature_list_sparse_types"])
    fd = [_dense_spec(lead, t, sh) for t, sh in zip(a["feature_list_dense_types"],
                                                    a["feature_list_dense_shapes"])]
    lengths = [(_dtypes.int64, TensorShape(None) if lead is None else TensorShape(list(lead)))
               ] * len(a["feature_list_dense_keys"])
    return ci + cv + cs + cd + fi + fv + fs + fd + lengths


def _context(op, ex, names, i, a, defaults, crows_s, crows_d, prefix) -> None:
    fmap = ex.context.feature
    who = f"Name: {_name_of(names, i)}, "
    for j, (key, dtype) in enumerate(zip(a["context_sparse_keys"], a["context_sparse_types"])):
        f = _present(fmap, key)
        if f is not None and f.WhichOneof("kind") != _KIND[dtype.name]:
            raise _invalid(op, f"{who}Context feature: {key}.  Data types don't match. "
                               f"Expected type: {_KIND_TYPE[_KIND[dtype.name]]}")
        crows_s[j].append((prefix, () if f is None else
                           _feature_values(f, f.WhichOneof("kind"))))
    for j, (key, dtype, shape) in enumerate(zip(a["context_dense_keys"],
                                                a["context_dense_types"],
                                                a["context_dense_shapes"])):
        f = _present(fmap, key)
        default = np.asarray(defaults[j], dtype=object if dtype == _dtypes.string
                             else dtype.as_numpy_dtype)
        want = int(np.prod(shape, dtype=np.int64))
        if f is None:
            if default.size == 0 and want:
                raise _invalid(op, f"Inconsistent max number of elements for feature {key}: "
                                   f"expected {want}, but found 0")
            crows_d[j].append(default.reshape(shape))
            continue
        kind = f.WhichOneof("kind")
        if kind != _KIND[dtype.name]:
            raise _invalid(op, f"{who}Context feature: {key}.  Data types don't match. "
                               f"Expected type: {_KIND_TYPE[_KIND[dtype.name]]}")
        vals = _feature_values(f, kind)
        if vals.size != want:
            raise _invalid(op, f"{who}Key: {key}, Index: {i}.  Number of values != expected.  "
                               f"values size: {vals.size} but output shape: "
                               f"[{','.join(str(d) for d in shape)}]")
        crows_d[j].append(vals.reshape(shape))


def _feature_lists(op, ex, names, i, a, frows_s, steps_s, frows_d, lengths,
                   prefix) -> None:
    fl = ex.feature_lists.feature_list
    who = f"Name: {_name_of(names, i)}, "
    for j, (key, dtype) in enumerate(zip(a["feature_list_sparse_keys"],
                                         a["feature_list_sparse_types"])):
        steps = fl[key].feature if key in fl else []
        for t, f in enumerate(steps):
            kind = f.WhichOneof("kind")
            if kind is not None and kind != _KIND[dtype.name]:
                raise _invalid(op, f"{who}Feature list: {key}, Index: {t}.  Data types don't "
                                   f"match. Expected type: {_KIND_TYPE[_KIND[dtype.name]]}")
            frows_s[j].append((tuple(prefix) + (t,), () if kind is None
                               else _feature_values(f, kind)))
        steps_s[j].append(len(steps))
    missing_ok = set(a["feature_list_dense_missing_assumed_empty"])
    for j, (key, dtype, shape) in enumerate(zip(a["feature_list_dense_keys"],
                                                a["feature_list_dense_types"],
                                                a["feature_list_dense_shapes"])):
        inner = list(shape[1:])
        want = int(np.prod(inner, dtype=np.int64))
        if key not in fl:
            if key not in missing_ok:
                raise _invalid(op, f"{who}Feature list '{key}' is required but could not be "
                                   f"found.  Did you mean to include it in "
                                   f"feature_list_dense_missing_assumed_empty or "
                                   f"feature_list_dense_defaults?")
            steps = []
        else:
            steps = fl[key].feature
        rows = []
        for t, f in enumerate(steps):
            kind = f.WhichOneof("kind")
            if kind != _KIND[dtype.name]:
                raise _invalid(op, f"{who}Feature list: {key}, Index: {t}.  Data types don't "
                                   f"match. Expected type: {_KIND_TYPE[_KIND[dtype.name]]}")
            vals = _feature_values(f, kind)
            if vals.size != want:
                raise _invalid(op, f"{who}Key: {key}, Index: {t}.  Number of values != "
                                   f"expected.  values size: {vals.size} but output shape: "
                                   f"[{','.join(str(d) for d in inner)}]")
            rows.append(vals.reshape(inner))
        npd = object if dtype == _dtypes.string else dtype.as_numpy_dtype
        arr = np.empty((len(rows), *inner), dtype=npd)
        for t, r in enumerate(rows):
            arr[t, ...] = r
        frows_d[j].append(arr)
        lengths[j].append(len(rows))


def _parse_sequence_ref(op, serialized, names, *defaults):
    protos = _messages()
    a = op.attrs
    ser = np.asarray(serialized, dtype=object)
    lead = ser.shape
    flat = _bytes_list(ser)
    names = [n.decode("utf-8", "replace") for n in _bytes_list(names)]
    index = list(np.ndindex(*lead))
    crows_s = [[] for _ in a["context_sparse_keys"]]
    crows_d = [[] for _ in a["context_dense_keys"]]
    frows_s = [[] for _ in a["feature_list_sparse_keys"]]
    steps_s = [[] for _ in a["feature_list_sparse_keys"]]
    frows_d = [[] for _ in a["feature_list_dense_keys"]]
    lengths = [[] for _ in a["feature_list_dense_keys"]]
    for i, s in enumerate(flat):
        try:
            ex = protos.SequenceExample.FromString(s)
        except Exception:   # protobuf's DecodeError (its class depends on the implementation)
            raise _invalid(op, f"Invalid protocol message input, example id: "
                               f"{_name_of(names, i)}") from None
        _context(op, ex, names, i, a, defaults, crows_s, crows_d, index[i])
        _feature_lists(op, ex, names, i, a, frows_s, steps_s, frows_d, lengths, index[i])
    ctx = _example_outputs(lead, crows_s, crows_d,
                           {"sparse_types": a["context_sparse_types"],
                            "dense_types": a["context_dense_types"],
                            "dense_shapes": a["context_dense_shapes"]}, defaults)
    # feature-list sparse: indices [*lead, step, j], dense shape [*lead, longest, widest]
    fsp = []
    for rows, steps, t in zip(frows_s, steps_s, a["feature_list_sparse_types"]):
        fsp.append(_Fill.sparse(rows, tuple(lead) + (max(steps, default=0),), t))
    fdense = [_Fill.padded(rows, lead, list(shape[1:]), t, _pad_value(np.zeros(0), t))
              for rows, t, shape in zip(frows_d, a["feature_list_dense_types"],
                                        a["feature_list_dense_shapes"])]
    lens = [np.asarray(x, np.int64).reshape(lead) for x in lengths]
    return (ctx + tuple(x[0] for x in fsp) + tuple(x[1] for x in fsp)
            + tuple(x[2] for x in fsp) + tuple(fdense) + tuple(lens))


register("ParseSequenceExampleV2", infer=_parse_sequence_infer, ref=_parse_sequence_ref,
         differentiable=False, kind="host",
         doc="Inputs (serialized, names, *context_dense_defaults): the context and feature "
             "lists of serialized tf.train.SequenceExample records.")


def _parse_sequence(serialized, context_features, sequence_features, names, name,
                    default_name: str, single: bool) -> tuple:
    if not context_features and not sequence_features:
        raise ValueError("Both context_features and sequence_features are None, but at least "
                         "one should have values.")
    context_features = context_features or {}
    sequence_features = sequence_features or {}
    for what, f in (("context_features", context_features),
                    ("sequence_features", sequence_features)):
        if not isinstance(f, dict):
            raise TypeError(f"`{what}` must be a dict of feature names to configurations, got "
                            f"{type(f).__name__}")
    with name_scope(name, default_name):
        ser = convert_to_tensor(serialized, dtype=_dtypes.string, name="serialized")
        if single and ser.shape.ndims not in (None, 0):
            raise ValueError("Input serialized must be a scalar")
        nm = _names_tensor(names)
        for key, f in context_features.items():
            if isinstance(f, FixedLenSequenceFeature):
                raise ValueError(f"Unsupported FixedLenSequenceFeature {f} for key '{key}' in "
                                 f"context_features")
        ctx = _split(context_features)
        fl = _split(sequence_features, for_sequence_lists=True)
        assumed_empty = [k for k in fl.dense_keys if sequence_features[k].allow_missing]
        attrs = {"context_sparse_keys": ctx.sparse_keys,
                 "context_sparse_types": ctx.sparse_types,
                 "context_dense_keys": ctx.dense_keys, "context_dense_types": ctx.dense_types,
                 "context_dense_shapes": ctx.dense_shapes,
                 "feature_list_sparse_keys": fl.sparse_keys,
                 "feature_list_sparse_types": fl.sparse_types,
                 "feature_list_dense_keys": fl.dense_keys,
                 "feature_list_dense_types": fl.dense_types,
                 "feature_list_dense_shapes": fl.dense_shapes,
                 "feature_list_dense_missing_assumed_empty": assumed_empty}
        op = make_op("ParseSequenceExampleV2", [ser, nm] + ctx.dense_defaults, attrs,
                     name="ParseSequenceExampleV2")
    outs = list(op.outputs)
    nc = 3 * len(ctx.sparse_keys) + len(ctx.dense_keys)
    nf = 3 * len(fl.sparse_keys) + len(fl.dense_keys)
    context = _results(outs[:nc], ctx)
    lists = _results(outs[nc:nc + nf], fl)
    lengths = dict(zip(fl.dense_keys, outs[nc + nf:]))
    return context, lists, lengths


def parse_single_sequence_example(serialized, context_features=None, sequence_features=None,
                                  example_name=None, name: Optional[str] = None) -> tuple:
    """`tf.io.parse_single_sequence_example`: (context, feature lists) of one serialized
    SequenceExample: context features as `parse_single_example` gives them, each feature
    list as a [steps, *shape] tensor (FixedLenSequenceFeature) or a SparseTensor [steps, n]
    (VarLenFeature)."""
    context, lists, _ = _parse_sequence(serialized, context_features, sequence_features,
                                        None if example_name is None else example_name,
                                        name, "ParseSingleSequenceExample", True)
    return context, lists


def parse_sequence_example(serialized, context_features=None, sequence_features=None,
                           example_names=None, name: Optional[str] = None) -> tuple:
    """`tf.io.parse_sequence_example`: (context, feature lists, lengths) of a batch of
    serialized SequenceExamples; feature lists padded to the longest, `lengths` giving each
    record's number of steps for every FixedLenSequenceFeature."""
    return _parse_sequence(serialized, context_features, sequence_features, example_names,
                           name, "ParseSequenceExample", False)
