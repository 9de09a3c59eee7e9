"""`tf.summary`: summary ops and `FileWriter`, writing TensorBoard event files.

A summary op's output is a scalar string tensor: a serialized `Summary` protocol buffer,
computed by the op's NumPy reference. `FileWriter` frames `Event` messages as TFRecords
(`events.out.tfevents.<time>.<host>`). The messages are jitflow's declarations of TensorFlow's
(`jitflow.serialize.protos`), so `tf.Summary`, `tf.Event` and `tf.SessionLog` are protobuf
message classes, loaded the first time one is used. `summary_iterator` reads event files back.
"""
from __future__ import annotations

import functools
import os
import re
import struct
import time
import warnings
import zlib
from typing import Iterator, Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import GraphKeys, Tensor, convert_to_tensor, get_default_graph, make_op, \
    name_scope
from jitflow.ops.registry import register
from jitflow.serialize.crc32c import masked_value as masked_crc32c
from jitflow.serialize.crc32c import value as crc32c
from jitflow.serialize.tfrecord import encode_record as tfrecord
from jitflow.core.shapes import TensorShape

__all__ = [
    "scalar", "histogram", "image", "text", "merge", "merge_all", "FileWriter",
    "FileWriterCache", "summary_iterator", "crc32c", "masked_crc32c", "tfrecord",
]   # and, loaded on first use, the message classes Summary, Event, SessionLog, ...

_LAZY = {"Summary": "Summary", "Event": "Event", "SessionLog": "SessionLog",
         "SummaryMetadata": "SummaryMetadata", "HistogramProto": "HistogramProto",
         "TaggedRunMetadata": "TaggedRunMetadata", "LogMessage": "LogMessage"}


def __getattr__(name: str):
    if name in _LAZY:
        from jitflow.serialize import protos
        return getattr(protos, _LAZY[name])
    raise AttributeError(f"module 'jitflow.summary' has no attribute {name!r}")


def _protos():
    from jitflow.serialize import protos
    return protos


@functools.lru_cache(maxsize=None)
def _histogram_limits() -> np.ndarray:
    """TF's default histogram bucket limits: +-1e-12 * 1.1^k up to 1e20, 0 and +-DBL_MAX."""
    pos = []
    v = 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    pos.append(np.finfo(np.float64).max)
    pos = np.array(pos)
    return np.concatenate([-pos[::-1], [0.0], pos])



def _histo_proto(values: np.ndarray):
    """TF's HistogramProto of `values` (runs of empty buckets collapsed as TF encodes them)."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size and not np.all(np.isfinite(x)):
        from jitflow.core.errors import InvalidArgumentError
        raise InvalidArgumentError(None, None, "Nan in summary histogram")
    limits_all = _histogram_limits()
    counts = np.bincount(np.searchsorted(limits_all, x, side="right"),
                         minlength=len(limits_all))[:len(limits_all)]
    limits, buckets = [], []
    i, n = 0, len(limits_all)
    while i < n:
        end, count = limits_all[i], counts[i]
        i += 1
        if count <= 0:
            while i < n and counts[i] <= 0:
                end, count = limits_all[i], counts[i]
                i += 1
        limits.append(end)
        buckets.append(float(count))
    # sums accumulate in order (cumsum), as TF's histogram adds values one by one
    return _protos().HistogramProto(
        min=float(x.min()) if x.size else 0.0, max=float(x.max()) if x.size else 0.0,
        num=float(x.size), sum=float(np.cumsum(x)[-1]) if x.size else 0.0,
        sum_squares=float(np.cumsum(x * x)[-1]) if x.size else 0.0,
        bucket_limit=limits, bucket=buckets)


def _png(img: np.ndarray) -> bytes:
    """A minimal PNG encoder for uint8 [h, w, c] images, c in 1 (gray), 3 (RGB), 4 (RGBA)."""
    h, w, c = img.shape
    color = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    raw = b"".join(b"\x00" + img[r].tobytes() for r in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _to_uint8(batch: np.ndarray) -> np.ndarray:
    """TF's image summary scaling, per image: with no negative values the largest maps to
    255; otherwise the largest magnitude maps to 127 around an offset of 128 (truncated)."""
    if batch.dtype == np.uint8:
        return batch
    out = np.empty(batch.shape, np.uint8)
    for i, img in enumerate(batch.astype(np.float32)):
        finite = img[np.isfinite(img)]
        lo = float(finite.min()) if finite.size else 0.0
        hi = float(finite.max()) if finite.size else 0.0
        neg = lo < 0
        m = max(abs(lo), abs(hi))
        scale = np.float32((127.0 if neg else 255.0) / m) if m else np.float32(0)
        vals = np.where(np.isfinite(img), img, 0) * scale + np.float32(128.0 if neg else 0.0)
        out[i] = np.clip(vals, 0, 255).astype(np.uint8)
    return out


# -- summary ops ---------------------------------------------------------------------------------
def _serialized(summary) -> np.ndarray:
    return np.array(summary.SerializeToString(), dtype=object)


def _scalar_ref(op, x):
    x = np.asarray(x)
    if x.ndim != 0:
        from jitflow.core.errors import InvalidArgumentError
        raise InvalidArgumentError(None, op, f"tags and values not the same shape: [] != "
                                   f"{list(x.shape)} (tag '{op.attrs['tag']}')")
    S = _protos().Summary
    return _serialized(S(value=[S.Value(tag=op.attrs["tag"], simple_value=float(x))]))


def _histogram_ref(op, x):
    S = _protos().Summary
    return _serialized(S(value=[S.Value(tag=op.attrs["tag"], histo=_histo_proto(x))]))


def _image_ref(op, x):
    x = np.asarray(x)
    tag, n = op.attrs["tag"], op.attrs["max_outputs"]
    S = _protos().Summary
    values = []
    for i, img in enumerate(_to_uint8(x[:n])):
        name = f"{tag}/image/{i}" if n > 1 else f"{tag}/image"
        h, w, c = img.shape
        im = S.Image(height=h, width=w, colorspace=c, encoded_image_string=_png(img))
        values.append(S.Value(tag=name, image=im))
    return _serialized(S(value=values))


def _text_ref(op, x):
    from jitflow.serialize.tensor_util import make_tensor_proto
    p = _protos()
    meta = p.SummaryMetadata()
    meta.plugin_data.plugin_name = "text"
    value = p.Summary.Value(tag=op.attrs["tag"], metadata=meta,
                            tensor=make_tensor_proto(np.asarray(x, dtype=object),
                                                     _dtypes.string))
    return _serialized(p.Summary(value=[value]))


def _merge_ref(op, *parts):
    from google.protobuf.message import DecodeError

    from jitflow.core.errors import InvalidArgumentError
    S = _protos().Summary
    merged = S()
    tags = set()
    for p in parts:
        try:
            s = S.FromString(bytes(np.asarray(p, dtype=object).item()))
        except DecodeError:
            raise InvalidArgumentError(None, op, "Could not parse one of the summary inputs") \
                from None
        for v in s.value:
            if v.tag in tags:
                raise InvalidArgumentError(None, op, f"Duplicate tag {v.tag} found in summary "
                                                     "inputs")
            tags.add(v.tag)
        merged.value.extend(s.value)
    return _serialized(merged)


_STRING = [(_dtypes.string, TensorShape([]))]
for _t, _r in (("ScalarSummary", _scalar_ref), ("HistogramSummary", _histogram_ref),
               ("ImageSummary", _image_ref), ("TextSummary", _text_ref),
               ("MergeSummary", _merge_ref)):
    register(_t, infer=lambda op: _STRING, ref=_r, differentiable=False, kind="host",
             doc="A serialized Summary protocol buffer (scalar string).")


def _clean_tag(name: Optional[str]) -> Optional[str]:
    """TF1's tag cleaning: characters other than [-/\\w.] become '_', no leading '/'."""
    if name is None:
        return None
    return re.sub(r"[^-/\w\.]", "_", name).lstrip("/")


def _summary_op(op_type: str, name: str, tensor, collections, family, attrs=None) -> Tensor:
    name, family = _clean_tag(name), _clean_tag(family)
    with name_scope(f"{family}/{name}" if family else name, values=[tensor]) as scope:
        x = convert_to_tensor(tensor)
        # with a family TF1 prefixes the scope with it once more (the TensorBoard tab)
        tag = f"{family}/{scope.rstrip('/')}" if family else scope.rstrip("/")
        out = make_op(op_type, [x], {"tag": tag, **(attrs or {})}, name=scope).outputs[0]
    for key in (collections if collections is not None else [GraphKeys.SUMMARIES]):
        out.graph.add_to_collection(key, out)
    return out


def scalar(name: str, tensor, collections=None, family=None) -> Tensor:
    """`tf.summary.scalar`: a summary of one real number, tagged with the scoped name."""
    x = convert_to_tensor(tensor)
    if x.shape.ndims not in (None, 0):
        raise ValueError(f"Tensor must be a scalar for scalar summary {name}: shape {x.shape}")
    if not (x.dtype.is_floating or x.dtype.is_integer or x.dtype.is_bool):
        raise TypeError(f"scalar summary of a {x.dtype.name} tensor")
    return _summary_op("ScalarSummary", name, x, collections, family)


def histogram(name: str, values, collections=None, family=None) -> Tensor:
    """`tf.summary.histogram`: TF's exponential-bucket histogram of `values`."""
    return _summary_op("HistogramSummary", name, values, collections, family)


def image(name: str, tensor, max_outputs: int = 3, collections=None, family=None) -> Tensor:
    """`tf.summary.image`: up to `max_outputs` PNG images of a [batch, h, w, c] tensor."""
    x = convert_to_tensor(tensor)
    if x.shape.ndims not in (None, 4) or (x.shape.ndims == 4
                                           and x.shape.as_list()[-1] not in (None, 1, 3, 4)):
        raise ValueError(f"Tensor must be 4-D with last dim 1, 3, or 4, not {x.shape}")
    return _summary_op("ImageSummary", name, x, collections, family,
                       {"max_outputs": int(max_outputs)})


def text(name: str, tensor, collections=None) -> Tensor:
    """`tf.summary.text`: a string tensor for TensorBoard's text dashboard."""
    x = convert_to_tensor(tensor) if isinstance(tensor, Tensor) else _string_const(tensor)
    if x.dtype != _dtypes.string:
        raise ValueError("Expected tensor to have dtype string")
    return _summary_op("TextSummary", name, x, collections, None)


def _string_const(value) -> Tensor:
    from jitflow.ops.sources import constant
    arr = np.array(value, dtype=object)
    flat = [v.encode() if isinstance(v, str) else v for v in arr.reshape(-1)]
    return constant(np.array(flat, dtype=object).reshape(arr.shape), dtype=_dtypes.string)


def merge(inputs, collections=None, name: Optional[str] = None) -> Tensor:
    """`tf.summary.merge`: one serialized Summary holding the values of all `inputs`."""
    ts = [convert_to_tensor(t) for t in inputs]
    with name_scope(name, "Merge", ts):
        out = make_op("MergeSummary", ts, name=name or "MergeSummary",
                      graph=get_default_graph() if not ts else None).outputs[0]
    for key in collections or ():
        out.graph.add_to_collection(key, out)
    return out


def merge_all(key: str = GraphKeys.SUMMARIES, scope=None, name: Optional[str] = None):
    """`tf.summary.merge_all`: merge of the collection's summaries, or None if it is empty."""
    items = get_default_graph().get_collection(key, scope)
    if not items:
        return None
    return merge(items, name=name)


# -- event files ------------------------------------------------------------------------------
def summary_iterator(path: str) -> Iterator:
    """`tf.train.summary_iterator`: the Event messages of an event file, in order (every record
    CRC-checked: a damaged file raises DataLossError)."""
    from jitflow.serialize.tfrecord import read_records
    Event = _protos().Event
    for record in read_records(str(path)):
        yield Event.FromString(record)


def _graph_def_bytes(graph) -> bytes:
    """The graph's GraphDef (a structure-only one when an attribute cannot be written)."""
    from jitflow.serialize.graph_def import graph_to_proto, tensor_name
    try:
        return graph_to_proto(graph).SerializeToString()
    except TypeError as e:
        warnings.warn(f"FileWriter.add_graph: {e}; writing the graph's structure only",
                      stacklevel=3)
    gd = _protos().GraphDef()
    for op in graph.get_operations():
        gd.node.add(name=op.name, op=op.type,
                    input=[tensor_name(t) for t in op.inputs]
                    + ["^" + c.name for c in op.control_inputs])
    return gd.SerializeToString()


class FileWriter:
    """`tf.summary.FileWriter`: appends Events to `<logdir>/events.out.tfevents.<time>.<host>`.

    Events are written through a buffered file; `flush()` pushes them to disk, `close()` ends
    the file (a later `add_*` reopens a new one, as `reopen()` does).
    """

    def __init__(self, logdir: str, graph=None, max_queue: int = 10, flush_secs: int = 120,
                 graph_def=None, filename_suffix: Optional[str] = None, session=None) -> None:
        self._logdir = str(logdir)
        self._suffix = filename_suffix or ""
        self._file = None
        self._closed = False
        self._open()
        if graph is not None or graph_def is not None:
            self.add_graph(graph, graph_def=graph_def)
            if graph is not None:   # TF1 writes the meta graph too
                from jitflow.serialize.meta_graph import export_meta_graph
                try:
                    self.add_meta_graph(export_meta_graph(graph=graph))
                except TypeError as e:
                    warnings.warn(f"FileWriter: meta graph not written: {e}", stacklevel=2)

    def _open(self) -> None:
        import socket
        os.makedirs(self._logdir, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}{self._suffix}"
        path = os.path.join(self._logdir, name)
        self._path = path
        self._file = open(path, "ab")
        self._closed = False
        self._write(_protos().Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event) -> None:
        if self._closed:
            self._open()
        self._file.write(tfrecord(event.SerializeToString()))

    def get_logdir(self) -> str:
        return self._logdir

    def add_event(self, event) -> None:
        self._write(event)

    def _event(self, global_step):
        return _protos().Event(wall_time=time.time(), step=int(global_step or 0))

    def add_summary(self, summary, global_step=None) -> None:
        """Write a serialized Summary (a summary op's fetched value) or a `Summary`."""
        Summary = _protos().Summary
        if isinstance(summary, np.ndarray):
            summary = summary.item()
        if isinstance(summary, (bytes, bytearray)):
            summary = Summary.FromString(bytes(summary))
        elif hasattr(summary, "SerializeToString") and not isinstance(summary, Summary):
            summary = Summary.FromString(summary.SerializeToString())  # TensorFlow's message
        if not isinstance(summary, Summary):
            raise TypeError(f"add_summary expects a serialized Summary, got {type(summary)}")
        event = self._event(global_step)
        event.summary.CopyFrom(summary)
        self._write(event)

    def add_session_log(self, session_log, global_step=None) -> None:
        event = self._event(global_step)
        event.session_log.MergeFromString(session_log.SerializeToString())
        self._write(event)

    def add_graph(self, graph, global_step=None, graph_def=None) -> None:
        """Write the graph's GraphDef for TensorBoard."""
        if graph is None and graph_def is None:
            raise ValueError("add_graph needs a graph")
        if graph is not None:
            data = _graph_def_bytes(graph)
        else:
            data = graph_def.SerializeToString() if hasattr(graph_def, "SerializeToString") \
                else bytes(graph_def)
        event = self._event(global_step)
        event.graph_def = data
        self._write(event)

    def add_meta_graph(self, meta_graph_def, global_step=None) -> None:
        event = self._event(global_step)
        event.meta_graph_def = meta_graph_def.SerializeToString()
        self._write(event)

    def add_run_metadata(self, run_metadata, tag: str, global_step=None) -> None:
        """Record a RunMetadata (a traced run's step statistics) under `tag`, for TensorBoard."""
        event = self._event(global_step)
        event.tagged_run_metadata.tag = tag
        event.tagged_run_metadata.run_metadata = run_metadata.SerializeToString()
        self._write(event)

    def flush(self) -> None:
        if not self._closed and self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if not self._closed and self._file is not None:
            self._file.close()
        self._closed = True

    def reopen(self) -> None:
        if self._closed:
            self._open()

    def __enter__(self) -> "FileWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class FileWriterCache:
    """`tf.summary.FileWriterCache`: one FileWriter per logdir."""

    _cache: dict = {}

    @staticmethod
    def get(logdir: str) -> FileWriter:
        key = os.path.abspath(str(logdir))
        w = FileWriterCache._cache.get(key)
        if w is None:
            w = FileWriterCache._cache[key] = FileWriter(logdir, graph=get_default_graph())
        return w

    @staticmethod
    def clear() -> None:
        for w in FileWriterCache._cache.values():
            w.close()
        FileWriterCache._cache.clear()
