"""`tf.train.Saver` and the checkpoint files, in TensorFlow's V2 format.

A checkpoint with prefix `P` is two files, as TensorFlow writes them (and reads them):
- `P.data-00000-of-00001`: the tensors' bytes back to back;
- `P.index`: a table naming, for each saved name, its dtype, shape, place in the data file and
  the CRC-32C of its bytes (see `jitflow.serialize.bundle` and `jitflow.serialize.table`).
Every checksum is verified on reading: a damaged file raises `DataLossError` naming it, before
any variable is written. Checkpoints written by jitflow 0.1 (a JSON index and an `.npz` data
file, sha256-checked) are still read. `P.meta` is a binary `MetaGraphDef`.
The `checkpoint` state file in the same directory is a text-format `CheckpointState`
(`model_checkpoint_path: "..."`, `all_model_checkpoint_paths: "..."` lines).

Every file is written atomically (temp file in the same directory, fsync, `os.replace`) and the
state file last, so a crash during a save leaves the previous checkpoint as the latest. Old
checkpoints beyond `max_to_keep` are deleted only after the state file no longer names them.
All of a checkpoint's files (data, index, `.meta`, state file) are written mode 0600.

A temporary file is named `.<file>.jftmp-<host>-<pid>-<random>.tmp` (host: a hash of the host
name). A save first removes the temporary files an earlier save of the same checkpoint name
left behind when it crashed: those whose writer process on this host is gone, and any older
than an hour (a writer on another host, or a pid reused since).
"""
from __future__ import annotations

import glob
import hashlib
import io
import json
import numbers
import os
import re
import socket
import tempfile
import time
import warnings
from typing import Optional

import numpy as np

from jitflow.core import errors
from jitflow.core.graph import GraphKeys, Tensor, get_default_graph

__all__ = ["Saver", "CheckpointState", "latest_checkpoint", "get_checkpoint_state",
           "checkpoint_exists", "update_checkpoint_state", "list_variables", "load_variable",
           "load_checkpoint", "CheckpointReader", "NewCheckpointReader"]

_FORMAT = "jitflow-checkpoint"  # jitflow 0.1's JSON index (still read)
_VERSION = 1
V1, V2 = 1, 2  # SaverDef.CheckpointFormatVersion
_DATA_SUFFIX = ".data-00000-of-00001"
_INDEX_SUFFIX = ".index"


# -- atomic file writes ---------------------------------------------------------------------------
def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_TMP_MARK = ".jftmp-"
_TMP_NAME = re.compile(r"^\.(?P<target>.+)\.jftmp-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-"
                       r"[a-z0-9_]+\.tmp$")
_OLD_TMP_NAME = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp$")   # jitflow 0.1
_STALE_SECONDS = 3600.0


def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def _tmp_prefix(path: str) -> str:
    """The start of the name of a temporary file this process writes on its way to `path`."""
    return f".{os.path.basename(path)}{_TMP_MARK}{_host_tag()}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _stale_temp(name: str, path: str, now: float) -> bool:
    """Whether `name` is a temporary file of ours that no save is still writing."""
    m = _TMP_NAME.match(name)
    try:
        age = now - os.lstat(path).st_mtime
    except OSError:
        return False
    if m is None:
        return _OLD_TMP_NAME.match(name) is not None and age > _STALE_SECONDS
    pid = int(m.group("pid"))
    if m.group("host") == _host_tag() and pid != os.getpid() and not _pid_alive(pid):
        return True
    return age > _STALE_SECONDS


def remove_stale_temp_files(directory: str, names) -> list:
    """Delete the temporary files that crashed saves left in `directory` for files whose names
    start with one of `names`; returns the paths removed. A file a live writer on this host may
    still be writing, or younger than an hour from elsewhere, is kept."""
    directory = directory or "."
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    now = time.time()
    removed = []
    for entry in entries:
        if not (entry.startswith(".") and entry.endswith(".tmp")):
            continue
        if not any(entry[1:].startswith(n) for n in names):
            continue
        path = os.path.join(directory, entry)
        if _stale_temp(entry, path, now):
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def _atomic_write(path: str, data) -> None:
    """Write `data` (bytes, or a list of byte chunks) to `path` (mode 0600) so that readers
    see either the old file or the whole new one."""
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(path), suffix=".tmp", dir=d)   # made 0600
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in ([data] if isinstance(data, (bytes, bytearray, memoryview)) else data):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(d)


# -- the checkpoint state file --------------------------------------------------------------------
class CheckpointState:
    """The parsed `checkpoint` file: the latest prefix and all kept prefixes (oldest first)."""

    def __init__(self, model_checkpoint_path: str = "", all_model_checkpoint_paths=(),
                 all_model_checkpoint_timestamps=(), last_preserved_timestamp: float = 0.0):
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = list(all_model_checkpoint_paths)
        self.all_model_checkpoint_timestamps = list(all_model_checkpoint_timestamps)
        self.last_preserved_timestamp = last_preserved_timestamp

    def __repr__(self) -> str:
        return _state_text(self)


_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "'": "'"}


def _unquote(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), s)


def _state_text(state: CheckpointState) -> str:
    """The state as a text-format CheckpointState message (TensorFlow's `checkpoint` file)."""
    from google.protobuf import text_format

    from jitflow.serialize import protos
    msg = protos.CheckpointState(
        model_checkpoint_path=state.model_checkpoint_path,
        all_model_checkpoint_paths=state.all_model_checkpoint_paths,
        all_model_checkpoint_timestamps=state.all_model_checkpoint_timestamps,
        last_preserved_timestamp=state.last_preserved_timestamp)
    return text_format.MessageToString(msg, as_utf8=True)


_LINE = re.compile(r'^\s*(\w+)\s*:\s*(?:"((?:[^"\\]|\\.)*)"|([-+0-9.eE]+))\s*$')


def _parse_state(text: str, filename: str) -> CheckpointState:
    """Parse a `checkpoint` file: TensorFlow's text-format CheckpointState."""
    from google.protobuf import text_format

    from jitflow.serialize import protos
    msg = protos.CheckpointState()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError:
        return _parse_state_lines(text, filename)
    return CheckpointState(msg.model_checkpoint_path, list(msg.all_model_checkpoint_paths),
                           list(msg.all_model_checkpoint_timestamps),
                           msg.last_preserved_timestamp)


def _parse_state_lines(text: str, filename: str) -> CheckpointState:
    """The line parser of jitflow 0.1 (its error message names the bad line)."""
    state = CheckpointState()
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            raise errors.DataLossError(None, None, f"Unable to parse checkpoint state file "
                                                   f"{filename}: {line!r}")
        key, sval, nval = m.groups()
        if key == "model_checkpoint_path":
            state.model_checkpoint_path = _unquote(sval or "")
        elif key == "all_model_checkpoint_paths":
            state.all_model_checkpoint_paths.append(_unquote(sval or ""))
        elif key == "all_model_checkpoint_timestamps":
            state.all_model_checkpoint_timestamps.append(float(nval))
        elif key == "last_preserved_timestamp":
            state.last_preserved_timestamp = float(nval)
    return state


def _relative_to(path: str, save_dir: str, relative: bool) -> str:
    """How a prefix is written in the state file (TF1's rules for relative paths)."""
    if relative and os.path.isabs(path):
        return os.path.relpath(path, save_dir or ".")
    if not os.path.isabs(save_dir) and not os.path.isabs(path):
        return os.path.relpath(path, save_dir or ".")
    return path


def update_checkpoint_state(save_dir: str, model_checkpoint_path: str,
                            all_model_checkpoint_paths=None,
                            latest_filename: Optional[str] = None,
                            all_model_checkpoint_timestamps=None,
                            last_preserved_timestamp: Optional[float] = None,
                            save_relative_paths: bool = False) -> None:
    """Atomically (re)write the state file in `save_dir`."""
    save_dir = os.fspath(save_dir)
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)
    state = CheckpointState(
        _relative_to(model_checkpoint_path, save_dir, save_relative_paths),
        [_relative_to(p, save_dir, save_relative_paths) for p in paths],
        list(all_model_checkpoint_timestamps or []), last_preserved_timestamp or 0.0)
    filename = os.path.join(save_dir, latest_filename or "checkpoint")
    _atomic_write(filename, _state_text(state).encode("utf-8"))


def get_checkpoint_state(checkpoint_dir, latest_filename: Optional[str] = None):
    """The CheckpointState of `checkpoint_dir`, or None when it has no state file.

    Relative paths in the file are taken relative to `checkpoint_dir`.
    """
    checkpoint_dir = os.fspath(checkpoint_dir)
    filename = os.path.join(checkpoint_dir, latest_filename or "checkpoint")
    try:
        with open(filename, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    state = _parse_state(text, filename)
    if not state.model_checkpoint_path:
        raise ValueError(f"Invalid checkpoint state loaded from {checkpoint_dir}")

    def absolute(p: str) -> str:
        return p if os.path.isabs(p) else os.path.join(checkpoint_dir, p)
    state.model_checkpoint_path = absolute(state.model_checkpoint_path)
    state.all_model_checkpoint_paths = [absolute(p) for p in state.all_model_checkpoint_paths]
    return state


def checkpoint_exists(checkpoint_prefix) -> bool:
    """Whether a checkpoint with this prefix (its `.index` file) exists."""
    checkpoint_prefix = os.fspath(checkpoint_prefix)
    return os.path.isfile(checkpoint_prefix + _INDEX_SUFFIX)


def latest_checkpoint(checkpoint_dir, latest_filename: Optional[str] = None) -> Optional[str]:
    """The prefix of the newest checkpoint named by the state file, if its files exist."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is not None and state.model_checkpoint_path:
        if checkpoint_exists(state.model_checkpoint_path):
            return state.model_checkpoint_path
    return None


# -- the checkpoint files -------------------------------------------------------------------------
def _write_checkpoint(prefix: str, named_arrays: list) -> None:
    """TensorFlow's V2 bundle: the data file first, then the index that vouches for it."""
    from jitflow.serialize.bundle import encode_bundle
    chunks, index = encode_bundle(named_arrays)
    _atomic_write(prefix + _DATA_SUFFIX, chunks)
    _atomic_write(prefix + _INDEX_SUFFIX, index)


def _write_legacy_checkpoint(prefix: str, named_arrays: list) -> None:
    """jitflow 0.1's format (JSON index, sha256-checked `.npz` data); kept for tests of the
    reader."""
    buf = io.BytesIO()
    np.savez(buf, **{f"t{i}": a for i, (_, a) in enumerate(named_arrays)})
    data = buf.getvalue()
    index = {
        "format": _FORMAT, "version": _VERSION,
        "data_file": os.path.basename(prefix) + _DATA_SUFFIX,
        "data_sha256": hashlib.sha256(data).hexdigest(),
        "tensors": {name: {"key": f"t{i}", "dtype": a.dtype.name, "shape": list(a.shape)}
                    for i, (name, a) in enumerate(named_arrays)},
    }
    _atomic_write(prefix + _DATA_SUFFIX, data)
    _atomic_write(prefix + _INDEX_SUFFIX, json.dumps(index, indent=1).encode("utf-8"))


class CheckpointReader:
    """Reads one checkpoint: `get_variable_to_shape_map()`, `get_variable_to_dtype_map()`,
    `get_tensor(name)`, `has_tensor(name)` (TensorFlow's `NewCheckpointReader`).

    Reads TensorFlow's V2 format (written by TensorFlow or by jitflow) and jitflow 0.1's JSON
    format. Tensors are read on demand, each checked against its CRC.
    """

    def __init__(self, prefix) -> None:
        prefix = os.fspath(prefix)
        if prefix.endswith(_INDEX_SUFFIX):
            prefix = prefix[:-len(_INDEX_SUFFIX)]
        self._prefix = prefix
        index_file = prefix + _INDEX_SUFFIX
        try:
            with open(index_file, "rb") as f:
                raw = f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise errors.NotFoundError(
                None, None, f"Unsuccessful TensorSliceReader constructor: Failed to find any "
                            f"matching files for {prefix} (no checkpoint index file "
                            f"{index_file})") from None
        self._bundle = None
        self._index = None
        self._data = None
        if raw.lstrip().startswith(b"{"):
            self._index = _legacy_index(raw, index_file)
        else:
            from jitflow.serialize.bundle import BundleReader
            self._bundle = BundleReader(prefix, raw)

    def get_variable_to_shape_map(self) -> dict:
        if self._bundle is not None:
            return self._bundle.shapes()
        return {n: list(e["shape"]) for n, e in self._index["tensors"].items()}

    def get_variable_to_dtype_map(self) -> dict:
        from jitflow.core.dtypes import as_dtype
        if self._bundle is not None:
            return {n: self._bundle.dtype(n) for n in self._bundle.entries}
        return {n: as_dtype(e["dtype"]) for n, e in self._index["tensors"].items()}

    def has_tensor(self, name: str) -> bool:
        if self._bundle is not None:
            return name in self._bundle.entries
        return name in self._index["tensors"]

    def get_tensor(self, name: str) -> np.ndarray:
        """The saved value of `name` (NotFoundError when the checkpoint has no such key)."""
        if not self.has_tensor(name):
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint "
                                                   f"{self._prefix}")
        if self._bundle is not None:
            return self._bundle.read(name)
        return np.array(self._legacy_arrays()[self._index["tensors"][name]["key"]])

    def debug_string(self) -> bytes:
        lines = [f"{n} ({d.name}) {self.get_variable_to_shape_map()[n]}"
                 for n, d in sorted(self.get_variable_to_dtype_map().items())]
        return ("\n".join(lines) + "\n").encode()

    def _legacy_arrays(self):
        if self._data is None:
            data_file = self._prefix + _DATA_SUFFIX
            try:
                with open(data_file, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                raise errors.NotFoundError(
                    None, None, f"Checkpoint data file {data_file} not found") from None
            if hashlib.sha256(data).hexdigest() != self._index.get("data_sha256"):
                raise errors.DataLossError(None, None, f"Checksum mismatch in checkpoint data "
                                                       f"file {data_file}")
            try:
                self._data = np.load(io.BytesIO(data), allow_pickle=False)
            except ValueError as e:
                raise errors.DataLossError(None, None, f"Unreadable checkpoint data file "
                                                       f"{data_file}: {e}") from None
        return self._data


def _legacy_index(raw: bytes, index_file: str) -> dict:
    try:
        index = json.loads(raw.decode("utf-8"))
        ok = isinstance(index, dict) and index.get("format") == _FORMAT
    except (ValueError, UnicodeDecodeError):
        ok = False
    if not ok:
        raise errors.DataLossError(None, None, f"Unable to open table file {index_file}: "
                                               "not an sstable (bad magic number)")
    return index


def NewCheckpointReader(filepattern) -> CheckpointReader:  # noqa: N802  (TF1's name)
    return CheckpointReader(filepattern)


def _prefix_of(ckpt_dir_or_file) -> str:
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        latest = latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given "
                             f"directory {path}")
        return latest
    return path


def load_checkpoint(ckpt_dir_or_file) -> CheckpointReader:
    """A reader of the checkpoint (the latest one when given a directory)."""
    return CheckpointReader(_prefix_of(ckpt_dir_or_file))


def list_variables(ckpt_dir_or_file) -> list:
    """[(name, shape)] of the checkpoint's tensors, sorted by name."""
    shapes = load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map()
    return sorted(shapes.items())


def load_variable(ckpt_dir_or_file, name: str) -> np.ndarray:
    if name.endswith(":0"):
        name = name[:-2]
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


# -- Saver ----------------------------------------------------------------------------------------
def _var_op(v):
    """The VariableV2 op of a Variable or of its ref tensor."""
    from jitflow.ops.state import Variable
    if isinstance(v, Variable):
        return v.op
    if isinstance(v, Tensor) and v.op.type == "VariableV2":
        return v.op
    raise TypeError(f"Variable to save is not a Variable: {v!r}")


def _saveables(var_list) -> list:
    """[(checkpoint name, VariableV2 op)] from a list or a {name: variable} dict."""
    if isinstance(var_list, dict):
        items = []
        for name, v in var_list.items():
            if not isinstance(name, str):
                raise TypeError(f"Checkpoint names must be strings, got {name!r}")
            items.append((name, _var_op(v)))
    else:
        items = [(_var_op(v).name, _var_op(v)) for v in var_list]
    seen: dict = {}
    for name, op in items:
        if name in seen:
            raise ValueError(f"At least two variables have the same name: {name}")
        seen[name] = op
    return items


class Saver:
    """Saves and restores variables by name (TF1's `tf.train.Saver`).

    `max_to_keep` prunes only the checkpoints this Saver wrote (as in TF1): a new Saver, say in
    a restarted process, starts with an empty list and leaves the checkpoints an earlier process
    wrote on disk (its state file then names only its own). To take them over, call
    `recover_last_checkpoints(get_checkpoint_state(dir).all_model_checkpoint_paths)`.
    Each save first removes temporary files that a crashed save of the same checkpoint name
    left in the directory (see the module docstring).
    """

    def __init__(self, var_list=None, reshape: bool = False, sharded: bool = False,
                 max_to_keep: Optional[int] = 5, keep_checkpoint_every_n_hours: float = 10000.0,
                 name: Optional[str] = None, restore_sequentially: bool = False,
                 saver_def=None, builder=None, defer_build: bool = False,
                 allow_empty: bool = False, write_version=2, pad_step_number: bool = False,
                 save_relative_paths: bool = False, filename: Optional[str] = None) -> None:
        if var_list is None:
            var_list = get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES)
        if write_version not in (V1, V2):
            raise ValueError(f"write_version must be SaverDef.V1 or SaverDef.V2, got "
                             f"{write_version!r}")
        if write_version == V1:
            warnings.warn("Saver(write_version=V1): jitflow writes checkpoints in the V2 "
                          "format only (TensorFlow reads both)", stacklevel=2)
        self._write_version = V2
        self._items = _saveables(var_list)
        if not self._items and not allow_empty:
            raise ValueError("No variables to save")
        self._max_to_keep = max_to_keep
        self._keep_hours = keep_checkpoint_every_n_hours
        self._next_keep_time = time.time() + keep_checkpoint_every_n_hours * 3600
        self._pad_step_number = pad_step_number
        self._save_relative_paths = save_relative_paths
        self._name = name or "save"
        self._filename = filename
        self._last_checkpoints: list = []  # [(prefix, timestamp)], oldest first
        self._meta_graph_suffix = "meta"
        self.saver_def = None

    # -- bookkeeping ----------------------------------------------------------------------
    @property
    def last_checkpoints(self) -> list:
        """The prefixes of the checkpoints not yet deleted, oldest first."""
        return [p for p, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints: list) -> None:
        self._last_checkpoints = [(p, None) for p in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time: list) -> None:
        self._last_checkpoints = list(last_checkpoints_with_time)

    def recover_last_checkpoints(self, checkpoint_paths: list) -> None:
        """Adopt existing checkpoints (e.g. `get_checkpoint_state(...).all_model_...`)."""
        found = []
        for p in checkpoint_paths:
            if checkpoint_exists(p):
                found.append((p, os.path.getmtime(p + _INDEX_SUFFIX)))
        self._last_checkpoints = sorted(found, key=lambda x: x[1])

    def build(self) -> None:
        """Accepted for compatibility (nothing is deferred)."""

    def as_saver_def(self):
        return self.saver_def

    # -- save -----------------------------------------------------------------------------
    def save(self, sess, save_path, global_step=None, latest_filename: Optional[str] = None,
             meta_graph_suffix: str = "meta", write_meta_graph: bool = True,
             write_state: bool = True, strip_default_attrs: bool = False,
             save_debug_info: bool = False) -> str:
        """Write the variables' values in `sess`; returns the checkpoint prefix."""
        if not hasattr(sess, "_state") or not hasattr(sess, "graph"):
            raise TypeError(f"'sess' must be a Session; {sess!r}")
        save_path = os.fspath(save_path)
        latest_filename = latest_filename or "checkpoint"
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        if global_step is not None:
            if not isinstance(global_step, numbers.Integral):
                global_step = int(sess.run(global_step))
            step = f"{int(global_step):08d}" if self._pad_step_number else str(int(global_step))
            prefix = f"{save_path}-{step}"
        else:
            prefix = save_path
        save_dir = os.path.dirname(save_path)
        if save_dir and not os.path.isdir(save_dir):
            # TF's writer creates the checkpoint's folder, one level only
            try:
                os.mkdir(save_dir)
            except FileExistsError:
                pass
            except OSError:
                raise ValueError(f"Parent directory of {save_path} doesn't exist, can't "
                                 "save.") from None
            if not os.path.isdir(save_dir):
                raise ValueError(f"Parent directory of {save_path} doesn't exist, can't save.")

        named = []
        for name, op in self._items:
            if op.graph is not sess.graph:
                raise ValueError(f"Variable {op.name} is not in the session's graph")
            value = sess._state.get(op)
            if value is None:
                raise errors.FailedPreconditionError(
                    None, op, f"Attempting to use uninitialized value {op.name}\n\t "
                              f"[[node {op.name}]]")
            value = np.asarray(value, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
            if value.dtype.kind not in "biufOS":
                raise TypeError(f"Cannot checkpoint variable {op.name} of dtype {value.dtype}")
            named.append((name, value))
        remove_stale_temp_files(save_dir, [os.path.basename(save_path), latest_filename])
        _write_checkpoint(prefix, named)

        if write_meta_graph:
            self._export_meta(prefix + "." + meta_graph_suffix, sess.graph)
        self._meta_graph_suffix = meta_graph_suffix
        if write_state:
            pruned = self._record(prefix)
            update_checkpoint_state(
                save_dir, prefix, self.last_checkpoints, latest_filename,
                all_model_checkpoint_timestamps=[t for _, t in self._last_checkpoints
                                                 if t is not None],
                save_relative_paths=self._save_relative_paths)
            for p in pruned:
                self._delete_files(p)
        return prefix

    def _record(self, prefix: str) -> list:
        """Add `prefix` as newest; returns the prefixes to delete (beyond max_to_keep)."""
        self._last_checkpoints = [(p, t) for p, t in self._last_checkpoints if p != prefix]
        self._last_checkpoints.append((prefix, time.time()))
        pruned = []
        if not self._max_to_keep:
            return pruned
        while len(self._last_checkpoints) > self._max_to_keep:
            p, t = self._last_checkpoints.pop(0)
            if t is not None and t > self._next_keep_time:
                self._next_keep_time += self._keep_hours * 3600
                continue
            pruned.append(p)
        return pruned

    def _delete_files(self, prefix: str) -> None:
        paths = [prefix + _INDEX_SUFFIX, prefix + "." + self._meta_graph_suffix]
        paths += glob.glob(glob.escape(prefix) + ".data-?????-of-?????")
        for p in paths:
            try:
                os.remove(p)
            except OSError:
                pass

    def _export_meta(self, filename: str, graph) -> None:
        """Write the binary MetaGraphDef like the other checkpoint files: atomically, 0600."""
        from jitflow.serialize.meta_graph import export_meta_graph
        export_meta_graph(filename, graph=graph)

    def export_meta_graph(self, filename: Optional[str] = None, **kwargs):
        """`Saver.export_meta_graph`: the graph's meta graph (see jitflow.serialize)."""
        from jitflow.serialize import export_meta_graph
        return export_meta_graph(filename=filename, **kwargs)

    # -- restore --------------------------------------------------------------------------
    def restore(self, sess, save_path) -> None:
        """Load every saved variable of this Saver from the checkpoint `save_path` into `sess`.

        All names, shapes and dtypes are checked before any variable is written.
        """
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        if not hasattr(sess, "_load_variable"):
            raise TypeError(f"'sess' must be a Session; {sess!r}")
        save_path = os.fspath(save_path)
        if not checkpoint_exists(save_path):
            raise ValueError(f"The passed save_path is not a valid checkpoint: {save_path}")
        reader = CheckpointReader(save_path)
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
        for name, op in self._items:
            if name not in shapes:
                raise errors.NotFoundError(
                    None, op, f"Key {name} not found in checkpoint {save_path} (restoring "
                              f"variable {op.name})")
            want = op.attrs["shape"]
            if not want.is_compatible_with(shapes[name]):
                raise errors.InvalidArgumentError(
                    None, op, f"Assign requires shapes of both tensors to match. lhs shape= "
                              f"{want.as_list() if want.ndims is not None else '<unknown>'} "
                              f"rhs shape= {shapes[name]} (variable {op.name}, checkpoint key "
                              f"{name} in {save_path})")
            if dtypes[name] != op.attrs["dtype"]:
                raise errors.InvalidArgumentError(
                    None, op, f"tensor_name = {name}; expected dtype {op.attrs['dtype'].name} "
                              f"does not equal original dtype {dtypes[name].name} "
                              f"(checkpoint {save_path})")
        values = [(op, reader.get_tensor(name)) for name, op in self._items]
        for op, value in values:
            sess._load_variable(op, value)
