"""`tf.summary`: summary ops and `FileWriter`, writing TensorBoard event files.

A summary op's output is a scalar string tensor: a serialized `Summary` protocol buffer,
computed by the op's NumPy reference. `FileWriter` frames `Event` messages as TFRecords
(`events.out.tfevents.<time>.<host>`). Both wire formats are written by hand here (protobuf
field encoding, masked CRC32C), so there is no protobuf dependency.
"""
from __future__ import annotations

import functools
import os
import re
import struct
import time
import zlib
from typing import Optional

import numpy as np

from jitflow import dtypes as _dtypes
from jitflow.graph import GraphKeys, Tensor, convert_to_tensor, get_default_graph, make_op, \
    name_scope
from jitflow.ops.registry import register
from jitflow.shapes import TensorShape

__all__ = [
    "scalar", "histogram", "image", "text", "merge", "merge_all", "FileWriter",
    "FileWriterCache", "Summary", "Event", "SessionLog",
]


# -- protobuf wire format ------------------------------------------------------------------------
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 values are 10-byte varints
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _f_varint(field: int, n: int) -> bytes:
    return _key(field, 0) + _varint(int(n))


def _f_double(field: int, x: float) -> bytes:
    return _key(field, 1) + struct.pack("<d", float(x))


def _f_float(field: int, x: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", float(x))


def _f_bytes(field: int, b) -> bytes:
    if isinstance(b, str):
        b = b.encode()
    return _key(field, 2) + _varint(len(b)) + bytes(b)


def _f_packed_doubles(field: int, xs) -> bytes:
    return _f_bytes(field, np.asarray(xs, dtype="<f8").tobytes())


# -- Summary messages ----------------------------------------------------------------------------
class _Message:
    """A small stand-in for a protobuf message: keyword fields, `SerializeToString`."""

    _fields: tuple = ()

    def __init__(self, **kwargs) -> None:
        for f in self._fields:
            setattr(self, f, kwargs.pop(f, None))
        if kwargs:
            raise ValueError(f"{type(self).__name__} has no field(s) {sorted(kwargs)}")

    def __repr__(self) -> str:
        body = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields
                         if getattr(self, f) is not None)
        return f"{type(self).__name__}({body})"


class Summary(_Message):
    """`tf.Summary`: a list of `Summary.Value(tag=..., simple_value=...)`; also accepts
    `image=Summary.Image(...)` and `histo=HistogramProto`-like values."""

    _fields = ("value",)

    class Value(_Message):
        _fields = ("tag", "simple_value", "image", "histo", "tensor", "metadata")

        def SerializeToString(self) -> bytes:  # noqa: N802  (protobuf spelling)
            out = _f_bytes(1, self.tag or "")
            if self.metadata is not None:
                out += _f_bytes(9, self.metadata)
            if self.simple_value is not None:
                out += _f_float(2, self.simple_value)
            if self.image is not None:
                out += _f_bytes(4, self.image.SerializeToString())
            if self.histo is not None:
                out += _f_bytes(5, self.histo if isinstance(self.histo, bytes)
                                else self.histo.SerializeToString())
            if self.tensor is not None:
                out += _f_bytes(8, self.tensor)
            return out

    class Image(_Message):
        _fields = ("height", "width", "colorspace", "encoded_image_string")

        def SerializeToString(self) -> bytes:  # noqa: N802
            return (_f_varint(1, self.height or 0) + _f_varint(2, self.width or 0)
                    + _f_varint(3, self.colorspace or 0)
                    + _f_bytes(4, self.encoded_image_string or b""))

    def __init__(self, value=None) -> None:
        super().__init__(value=list(value or []))

    def SerializeToString(self) -> bytes:  # noqa: N802
        return b"".join(_f_bytes(1, v.SerializeToString()) for v in self.value)


class SessionLog(_Message):
    """`tf.SessionLog`: status START=1, STOP=2, CHECKPOINT=3."""

    _fields = ("status", "checkpoint_path", "msg")
    STATUS_UNSPECIFIED, START, STOP, CHECKPOINT = 0, 1, 2, 3

    def SerializeToString(self) -> bytes:  # noqa: N802
        out = _f_varint(1, self.status or 0)
        if self.checkpoint_path:
            out += _f_bytes(2, self.checkpoint_path)
        if self.msg:
            out += _f_bytes(3, self.msg)
        return out


class Event(_Message):
    """`tf.Event`: wall_time, step and one of file_version, graph_def, summary, session_log."""

    _fields = ("wall_time", "step", "file_version", "graph_def", "summary", "session_log")

    def SerializeToString(self) -> bytes:  # noqa: N802
        out = _f_double(1, self.wall_time if self.wall_time is not None else time.time())
        if self.step:
            out += _f_varint(2, self.step)
        if self.file_version is not None:
            out += _f_bytes(3, self.file_version)
        if self.graph_def is not None:
            out += _f_bytes(4, self.graph_def)
        if self.summary is not None:
            s = self.summary
            out += _f_bytes(5, s if isinstance(s, bytes) else s.SerializeToString())
        if self.session_log is not None:
            out += _f_bytes(6, self.session_log.SerializeToString())
        return out


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



def _histo_proto(values: np.ndarray) -> bytes:
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size and not np.all(np.isfinite(x)):
        from jitflow.errors import InvalidArgumentError
        raise InvalidArgumentError(None, None, "Nan in summary histogram")
    limits_all = _histogram_limits()
    counts = np.bincount(np.searchsorted(limits_all, x, side="right"),
                         minlength=len(limits_all))[:len(limits_all)]
    limits, buckets = [], []
    i, n = 0, len(limits_all)
    while i < n:  # runs of empty buckets collapse into one, as TF encodes them
        end, count = limits_all[i], counts[i]
        i += 1
        if count <= 0:
            while i < n and counts[i] <= 0:
                end, count = limits_all[i], counts[i]
                i += 1
        limits.append(end)
        buckets.append(float(count))
    mn = float(x.min()) if x.size else 0.0
    mx = float(x.max()) if x.size else 0.0
    # sums accumulate in order (cumsum), as TF's histogram adds values one by one
    total = float(np.cumsum(x)[-1]) if x.size else 0.0
    squares = float(np.cumsum(x * x)[-1]) if x.size else 0.0
    return (_f_double(1, mn) + _f_double(2, mx) + _f_double(3, x.size)
            + _f_double(4, total) + _f_double(5, squares)
            + _f_packed_doubles(6, limits) + _f_packed_doubles(7, buckets))


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


def _string_tensor_proto(values: np.ndarray) -> bytes:
    arr = np.asarray(values, dtype=object)
    shape = b"".join(_f_bytes(2, _f_varint(1, d)) for d in arr.shape)
    out = _f_varint(1, 7) + _f_bytes(2, shape)  # DT_STRING
    for s in arr.reshape(-1):
        out += _f_bytes(8, s if isinstance(s, bytes) else str(s).encode())
    return out


# -- summary ops ---------------------------------------------------------------------------------
def _scalar_ref(op, x):
    x = np.asarray(x)
    if x.ndim != 0:
        from jitflow.errors import InvalidArgumentError
        raise InvalidArgumentError(None, op, f"tags and values not the same shape: [] != "
                                   f"{list(x.shape)} (tag '{op.attrs['tag']}')")
    value = Summary.Value(tag=op.attrs["tag"], simple_value=float(x))
    return np.array(Summary(value=[value]).SerializeToString(), dtype=object)


def _histogram_ref(op, x):
    value = _f_bytes(1, op.attrs["tag"]) + _f_bytes(5, _histo_proto(x))
    return np.array(_f_bytes(1, value), dtype=object)


def _image_ref(op, x):
    x = np.asarray(x)
    tag, n = op.attrs["tag"], op.attrs["max_outputs"]
    out = b""
    images = _to_uint8(x[:n])
    for i, img in enumerate(images):
        name = f"{tag}/image/{i}" if n > 1 else f"{tag}/image"
        h, w, c = img.shape
        im = Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=_png(img))
        out += _f_bytes(1, Summary.Value(tag=name, image=im).SerializeToString())
    return np.array(out, dtype=object)


def _text_ref(op, x):
    meta = _f_bytes(1, _f_bytes(1, "text"))  # SummaryMetadata.plugin_data.plugin_name
    value = Summary.Value(tag=op.attrs["tag"], metadata=meta,
                          tensor=_string_tensor_proto(np.asarray(x, dtype=object)))
    return np.array(Summary(value=[value]).SerializeToString(), dtype=object)


def _merge_ref(op, *parts):
    # A Summary has one repeated field, so serialized Summaries concatenate into their merge.
    return np.array(b"".join(bytes(np.asarray(p, dtype=object).item()) for p in parts),
                    dtype=object)


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
    from jitflow.ops.array import constant
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


# -- TFRecord event files -----------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _crc32c_table() -> list:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table



def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of TFRecord framing."""
    crc = 0xFFFFFFFF
    table = _crc32c_table()
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data: bytes) -> bytes:
    """One TFRecord: length, masked CRC of the length, data, masked CRC of the data."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked_crc32c(length)) + data
            + struct.pack("<I", masked_crc32c(data)))


def _graph_def_bytes(graph) -> bytes:
    """A GraphDef with each node's name, op and inputs (attributes are left out)."""
    out = b""
    for op in graph.get_operations():
        node = _f_bytes(1, op.name) + _f_bytes(2, op.type)
        for t in op.inputs:
            node += _f_bytes(3, t.name[:-2] if t.name.endswith(":0") else t.name)
        for c in op.control_inputs:
            node += _f_bytes(3, "^" + c.name)
        out += _f_bytes(1, node)
    return out


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

    def _open(self) -> None:
        import socket
        os.makedirs(self._logdir, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}{self._suffix}"
        path = os.path.join(self._logdir, name)
        self._path = path
        self._file = open(path, "ab")
        self._closed = False
        self._write(Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event: Event) -> None:
        if self._closed:
            self._open()
        self._file.write(tfrecord(event.SerializeToString()))

    def get_logdir(self) -> str:
        return self._logdir

    def add_event(self, event: Event) -> None:
        self._write(event)

    def add_summary(self, summary, global_step=None) -> None:
        """Write a serialized Summary (a summary op's fetched value) or a `Summary`."""
        if isinstance(summary, np.ndarray):
            summary = summary.item()
        if isinstance(summary, Summary):
            summary = summary.SerializeToString()
        if not isinstance(summary, (bytes, bytearray)):
            raise TypeError(f"add_summary expects a serialized Summary, got {type(summary)}")
        self._write(Event(wall_time=time.time(), step=int(global_step or 0),
                          summary=bytes(summary)))

    def add_session_log(self, session_log: SessionLog, global_step=None) -> None:
        self._write(Event(wall_time=time.time(), step=int(global_step or 0),
                          session_log=session_log))

    def add_graph(self, graph, global_step=None, graph_def=None) -> None:
        """Write the graph's structure (node names, ops and inputs) for TensorBoard."""
        if graph is None and graph_def is None:
            raise ValueError("add_graph needs a graph")
        data = _graph_def_bytes(graph) if graph is not None else bytes(graph_def)
        self._write(Event(wall_time=time.time(), step=int(global_step or 0), graph_def=data))

    def add_run_metadata(self, run_metadata, tag: str, global_step=None) -> None:
        """Record a tagged (empty) RunMetadata: jitflow collects no step statistics."""
        tagged = _f_bytes(1, tag) + _f_bytes(2, b"")
        event = Event(wall_time=time.time(), step=int(global_step or 0))
        self._file_write_raw(event.SerializeToString() + _f_bytes(8, tagged))

    def _file_write_raw(self, data: bytes) -> None:
        if self._closed:
            self._open()
        self._file.write(tfrecord(data))

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
