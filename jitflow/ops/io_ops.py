"""Readers (`tf.TextLineReader`, `tf.WholeFileReader`, `tf.FixedLengthRecordReader`,
`tf.TFRecordReader`): records from files whose names come from a queue
(`tf.train.string_input_producer`); and whole files (`tf.read_file`, `tf.write_file`).

`reader.read(filename_queue)` gives (key, value) string scalars: the next record of the current
file, taking the next file name from the queue (blocking) when the file is done; once the queue
is closed and empty it raises OutOfRangeError. The reader's position belongs to the session.
Readers are host ops.
"""
from __future__ import annotations

import glob as _glob
import threading
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, get_default_graph, make_op
from jitflow.ops.data_flow import queue_state
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape

__all__ = ["ReaderBase", "TextLineReader", "WholeFileReader", "FixedLengthRecordReader",
           "IdentityReader", "TFRecordReader", "matching_files", "read_file", "write_file"]

NAMESPACES = {"io": ["matching_files", ("match_filenames_once", "_match_filenames_once"),
                     "read_file", "write_file"]}

_HANDLE = [(_dtypes.variant, TensorShape([]))]
_KEY = (_dtypes.string, TensorShape([]))


class _ReaderState:
    """Where a reader is: its current file's records and counters (one per session)."""

    def __init__(self, op) -> None:
        self.op_type = op.type
        self.attrs = dict(op.attrs)
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.records = None   # iterator of (key, value) for the current file
        self.produced = 0
        self.completed = 0

    def session_closed(self) -> None:
        pass

    def _open(self, work: bytes):
        name = work.decode("utf-8", "surrogateescape")
        t = self.op_type
        if t == "IdentityReaderV2":
            return iter([(work, work)])
        if t == "TFRecordReaderV2":
            return self._records(name)
        try:
            with open(name, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"{name}; No such file or directory") \
                from None
        if t == "WholeFileReaderV2":
            return iter([(work, data)])
        if t == "FixedLengthRecordReaderV2":
            a = self.attrs
            body = data[a["header_bytes"]:len(data) - a["footer_bytes"]]
            size, hop = a["record_bytes"], a["hop_bytes"] or a["record_bytes"]
            return ((f"{name}:{i}".encode(), body[p:p + size]) for i, p in
                    enumerate(range(0, len(body) - size + 1, hop)))
        return self._lines(name, data)

    def _records(self, name: str):
        # the framing and its checks live with TensorFlow's file formats (a layer above)
        from jitflow.serialize import tfrecord
        with tfrecord.open_compressed(name, self.attrs["compression_type"]) as f:
            for offset, data in tfrecord.iter_records(f, name):
                yield f"{name}:{offset}".encode(), data

    def _lines(self, name: str, data: bytes):
        skip = self.attrs["skip_header_lines"]
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        for i, line in enumerate(lines):
            if i < skip:
                continue
            if line.endswith(b"\r"):
                line = line[:-1]
            yield f"{name}:{i + 1}".encode(), line

    def read(self, op, queue_op, ctx, n: int) -> list:
        out: list = []
        with self.lock:
            while len(out) < n:
                if self.records is not None:
                    rec = next(self.records, None)
                    if rec is not None:
                        out.append(rec)
                        self.produced += 1
                        continue
                    self.records = None
                    self.completed += 1
                q = queue_state(queue_op, ctx)
                try:
                    row = q.dequeue(op, 1, False)[0]
                except errors.OutOfRangeError:
                    if out and n > 1:
                        return out  # read_up_to: what there was
                    raise
                self.records = self._open(np.asarray(row[0]).item())
        return out


def _reader_state(op, ctx) -> _ReaderState:
    res = ctx.store.resources
    key = ("reader", op.attrs.get("shared_name") or op.name)
    st = res.get(key)
    if st is None:
        with ctx.store.lock:
            st = res.get(key)
            if st is None:
                st = res[key] = _ReaderState(op)
    return st


for _t in ("TextLineReaderV2", "WholeFileReaderV2", "FixedLengthRecordReaderV2",
           "IdentityReaderV2", "TFRecordReaderV2"):
    register(_t, infer=lambda op: _HANDLE,
             ref=lambda op, ctx: (_reader_state(op, ctx),
                                  np.array(op.name.encode(), dtype=object))[1],
             needs_ctx=True, stateful=True, differentiable=False, kind="host",
             doc="A reader's handle; its position lives in the session.")


def _read_ref(op, reader, queue, *n, ctx):
    st = _reader_state(op.inputs[0].op, ctx)
    if op.type == "ReaderReadV2":
        (key, value), = st.read(op, op.inputs[1].op, ctx, 1)
        return np.array(key, dtype=object), np.array(value, dtype=object)
    count = int(n[0])
    if count <= 0:
        raise errors.InvalidArgumentError(None, op, f"num_records must be positive, got {count}")
    recs = st.read(op, op.inputs[1].op, ctx, count)
    keys = np.empty(len(recs), dtype=object)
    vals = np.empty(len(recs), dtype=object)
    for i, (k, v) in enumerate(recs):
        keys[i], vals[i] = k, v
    return keys, vals


register("ReaderReadV2", infer=lambda op: [_KEY, _KEY], ref=_read_ref, needs_ctx=True,
         stateful=True, differentiable=False, kind="host",
         doc="Inputs (reader, filename queue): the next (key, value) record.")
register("ReaderReadUpToV2",
         infer=lambda op: [(_dtypes.string, TensorShape([None]))] * 2, ref=_read_ref,
         needs_ctx=True, stateful=True, differentiable=False, kind="host",
         doc="Inputs (reader, filename queue, num_records): up to num_records records.")


def _counter_ref(what: str):
    def ref(op, reader, ctx):
        st = _reader_state(op.inputs[0].op, ctx)
        return np.int64(getattr(st, what))
    return ref


register("ReaderNumRecordsProducedV2", infer=lambda op: [(_dtypes.int64, TensorShape([]))],
         ref=_counter_ref("produced"), needs_ctx=True, stateful=True, differentiable=False,
         kind="host", doc="How many records the reader has produced.")
register("ReaderNumWorkUnitsCompletedV2", infer=lambda op: [(_dtypes.int64, TensorShape([]))],
         ref=_counter_ref("completed"), needs_ctx=True, stateful=True, differentiable=False,
         kind="host", doc="How many files the reader has finished.")
register("ReaderResetV2", infer=lambda op: [],
         ref=lambda op, r, ctx: _reader_state(op.inputs[0].op, ctx).reset(),
         needs_ctx=True, stateful=True, differentiable=False, kind="host",
         doc="Start the reader afresh.")


class ReaderBase:
    """A reader of records from the files named by a queue."""

    _op_type = ""

    def __init__(self, attrs: dict, name: Optional[str]) -> None:
        g = get_default_graph()
        with g.control_dependencies(None):
            self._reader_ref = make_op(self._op_type, [], attrs, name=name or self._default,
                                       graph=g).outputs[0]

    _default = "Reader"
    reader_ref = property(lambda self: self._reader_ref)

    @property
    def supports_serialize(self) -> bool:
        return False

    @staticmethod
    def _queue_ref(queue) -> Tensor:
        ref = getattr(queue, "queue_ref", queue)
        if not isinstance(ref, Tensor) or ref.op.type not in (
                "FIFOQueueV2", "RandomShuffleQueueV2", "PaddingFIFOQueueV2"):
            raise TypeError("reader.read needs a queue of file names (e.g. from "
                            "tf.train.string_input_producer)")
        return ref

    def read(self, queue, name: Optional[str] = None) -> tuple:
        """(key, value): the next record, from the next file of `queue` when one is done."""
        op = make_op("ReaderReadV2", [self._reader_ref, self._queue_ref(queue)],
                     name=name or "ReaderReadV2")
        return op.outputs[0], op.outputs[1]

    def read_up_to(self, queue, num_records, name: Optional[str] = None) -> tuple:
        """(keys, values): up to `num_records` records."""
        from jitflow.core.graph import convert_to_tensor
        n = convert_to_tensor(num_records, dtype=_dtypes.int64, name="num_records")
        op = make_op("ReaderReadUpToV2", [self._reader_ref, self._queue_ref(queue), n],
                     name=name or "ReaderReadUpToV2")
        return op.outputs[0], op.outputs[1]

    def num_records_produced(self, name: Optional[str] = None) -> Tensor:
        return make_op("ReaderNumRecordsProducedV2", [self._reader_ref],
                       name=name or "ReaderNumRecordsProducedV2").outputs[0]

    def num_work_units_completed(self, name: Optional[str] = None) -> Tensor:
        return make_op("ReaderNumWorkUnitsCompletedV2", [self._reader_ref],
                       name=name or "ReaderNumWorkUnitsCompletedV2").outputs[0]

    def reset(self, name: Optional[str] = None):
        return make_op("ReaderResetV2", [self._reader_ref], name=name or "ReaderResetV2")


class TextLineReader(ReaderBase):
    """`tf.TextLineReader`: the lines of each file (key "file:line"), after
    `skip_header_lines`."""

    _op_type = "TextLineReaderV2"
    _default = "TextLineReader"

    def __init__(self, skip_header_lines: Optional[int] = None,
                 name: Optional[str] = None) -> None:
        super().__init__({"skip_header_lines": int(skip_header_lines or 0)}, name)


class WholeFileReader(ReaderBase):
    """`tf.WholeFileReader`: each file's whole contents (key: the file name)."""

    _op_type = "WholeFileReaderV2"
    _default = "WholeFileReader"

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__({}, name)


class IdentityReader(ReaderBase):
    """`tf.IdentityReader`: each work item (file name) as both key and value."""

    _op_type = "IdentityReaderV2"
    _default = "IdentityReader"

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__({}, name)


class FixedLengthRecordReader(ReaderBase):
    """`tf.FixedLengthRecordReader`: records of `record_bytes` bytes (CIFAR-10's binary
    files), after `header_bytes`, before `footer_bytes`, every `hop_bytes`."""

    _op_type = "FixedLengthRecordReaderV2"
    _default = "FixedLengthRecordReader"

    def __init__(self, record_bytes: int, header_bytes: Optional[int] = None,
                 footer_bytes: Optional[int] = None, hop_bytes: Optional[int] = None,
                 name: Optional[str] = None, encoding: Optional[str] = None) -> None:
        if encoding:
            raise NotImplementedError("FixedLengthRecordReader: compressed files are not "
                                      "supported")
        super().__init__({"record_bytes": int(record_bytes),
                          "header_bytes": int(header_bytes or 0),
                          "footer_bytes": int(footer_bytes or 0),
                          "hop_bytes": int(hop_bytes or 0)}, name)


class TFRecordReader(ReaderBase):
    """`tf.TFRecordReader`: the records of TFRecord files (key "file:offset"), compressed as
    `options` says (a `tf.io.TFRecordOptions`, "GZIP", "ZLIB" or None)."""

    _op_type = "TFRecordReaderV2"
    _default = "TFRecordReaderV2"

    def __init__(self, name: Optional[str] = None, options=None) -> None:
        # the options' spellings belong to TensorFlow's file formats (a layer above)
        from jitflow.serialize.tfrecord import compression_string
        super().__init__({"compression_type": compression_string(options)}, name)


# -- matching_files -----------------------------------------------------------------------------
def _matching_ref(op, pattern):
    pats = [p.decode() if isinstance(p, bytes) else str(p)
            for p in np.asarray(pattern, dtype=object).reshape(-1)]
    names = sorted({n for p in pats for n in _glob.glob(p)})
    out = np.empty(len(names), dtype=object)
    out[:] = [n.encode() for n in names]
    return out


register("MatchingFiles", infer=lambda op: [(_dtypes.string, TensorShape([None]))],
         ref=_matching_ref, differentiable=False, kind="host",
         doc="The sorted file names matching a glob pattern (or a vector of them).")


def matching_files(pattern, name: Optional[str] = None) -> Tensor:
    """`tf.io.matching_files`: the file names matching `pattern`, sorted."""
    p = convert_to_tensor(pattern, dtype=_dtypes.string, name="pattern")
    return make_op("MatchingFiles", [p], name=name or "MatchingFiles").outputs[0]


def _match_filenames_once(pattern, name: Optional[str] = None):
    """`tf.io.match_filenames_once` (= `tf.train.match_filenames_once`)."""
    # one implementation, the tf.train one (a library above the ops)
    from jitflow.train.input import match_filenames_once
    return match_filenames_once(pattern, name=name)


# -- whole files ---------------------------------------------------------------------------------
def _file_name(op, value) -> str:
    v = np.asarray(value, dtype=object)
    if v.ndim != 0:
        raise errors.InvalidArgumentError(None, op, f"filename must be a scalar, got shape "
                                                    f"{list(v.shape)}")
    v = v.item()
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def _read_file_ref(op, filename):
    name = _file_name(op, filename)
    try:
        with open(name, "rb") as f:
            return np.array(f.read(), dtype=object)
    except FileNotFoundError:
        raise errors.NotFoundError(None, op, f"{name}; No such file or directory") from None
    except IsADirectoryError:
        raise errors.FailedPreconditionError(None, op, f"{name}; Is a directory") from None


def _write_file_ref(op, filename, contents):
    import os
    name = _file_name(op, filename)
    c = np.asarray(contents, dtype=object)
    if c.ndim != 0:
        raise errors.InvalidArgumentError(None, op, f"contents must be scalar, got shape "
                                                    f"{list(c.shape)}")
    data = c.item()
    parent = os.path.dirname(name)
    if parent:
        os.makedirs(parent, exist_ok=True)   # as TensorFlow: missing folders are made
    with open(name, "wb") as f:
        f.write(data if isinstance(data, bytes) else str(data).encode())


def _scalar_string_infer(what: str):
    def infer(op):
        for t, label in zip(op.inputs, ("filename", "contents")):
            if t.dtype != _dtypes.string:
                raise TypeError(f"{what}: {label} must be a string tensor, got {t.dtype.name}")
            if t.shape.ndims not in (None, 0):
                raise ValueError(f"Shape must be rank 0 but is rank {t.shape.ndims} for "
                                 f"'{op.name}' ({what}: {label} of shape {t.shape})")
        return [(_dtypes.string, TensorShape([]))] if what == "ReadFile" else []
    return infer


register("ReadFile", infer=_scalar_string_infer("ReadFile"), ref=_read_file_ref,
         stateful=True, differentiable=False, kind="host",
         doc="The bytes of the file named by a string scalar.")
register("WriteFile", infer=_scalar_string_infer("WriteFile"), ref=_write_file_ref,
         stateful=True, differentiable=False, kind="host",
         doc="Inputs (filename, contents): write the bytes to the file (folders made).")


def read_file(filename, name: Optional[str] = None) -> Tensor:
    """`tf.read_file` / `tf.io.read_file`: the contents of a file, as a string scalar."""
    f = convert_to_tensor(filename, dtype=_dtypes.string, name="filename")
    return make_op("ReadFile", [f], name=name or "ReadFile").outputs[0]


def write_file(filename, contents, name: Optional[str] = None):
    """`tf.write_file` / `tf.io.write_file`: an op writing `contents` to the file (its folders
    are made), replacing it."""
    f = convert_to_tensor(filename, dtype=_dtypes.string, name="filename")
    c = convert_to_tensor(contents, dtype=_dtypes.string, name="contents")
    return make_op("WriteFile", [f, c], name=name or "WriteFile")
