"""Export a compiled run signature as a standalone folder: module, state and manifest.

    jitflow.export(sess, [loss, train_op], [x, y], "step/")   # or make_callable(...).save()
    step = jitflow.load("step/")        # checks feeds; calling it updates its state
    step.save_state()                   # writes the variables back (atomically)

The folder holds
- `<name>.py`: the generated kernels (readable, explicit loops, `njit(cache=False)`) and a tiny
  loader, importing only numpy and numba, so the folder works where jitflow is not installed
  (the module docstring shows the three lines);
- `state.npz`: the variables the function reads or updates (weights, optimizer slots);
- `manifest.json`: format version, feeds (names, dtypes, shapes with None dims), the fetch
  structure, the variables and which of them it updates, versions, and the sha256 of every
  file.

Loading runs only checked bytes: every name in the manifest must be a plain file name inside
the folder (no separators, no `..`, no link out of it), and each file is read once, its
sha256 checked against the manifest, and only those bytes are used: the module is compiled
from them (never imported, so no bytecode from `__pycache__` runs) with Numba's disk cache off
(no `.nbi`/`.nbc` pickle from the folder is read), the state parsed from them with
`allow_pickle=False`. A missing, changed or truncated file fails loudly before anything runs.

What the hashes prove: that the files are the ones the manifest describes, which catches
accidental or partial corruption (a copy cut short, a disk error) and tampering with a folder
*whose manifest you trust* (kept apart, or compared with a known digest). They do not prove
who wrote the export: anyone who can write the folder can write a matching manifest, so load
exports only from folders that only you (or people you trust) can write.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import sys
import tempfile
import threading
import types
from typing import Optional, Sequence

import numpy as np

from jitflow.core.graph import Operation, Tensor

__all__ = ["export", "load", "export_files", "load_files", "with_state", "make_save",
           "read_manifest", "verify", "check_names", "ExportError",
           "FORMAT", "FORMAT_VERSION", "LOADER_SOURCE"]

FORMAT = "jitflow.export"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
STATE = "state.npz"


class ExportError(RuntimeError):
    """An export folder is missing, corrupt, tampered with or of another format version."""


# The loader written at the end of every exported module. It is plain Python text (it must run
# without jitflow). `jitflow.load` uses its checks and its ExportedFunction too, taking only the
# kernels (ENTRY) from the folder's module, after compiling that module from verified bytes.
LOADER_SOURCE = r'''
# ---- loader (written by jitflow.export; needs only numpy and numba) -----------------------
import hashlib as _hashlib
import io as _io
import json as _json
import linecache as _linecache
import os as _os
import tempfile as _tempfile

import numpy as _np

FORMAT = "jitflow.export"
FORMAT_VERSION = 1


class ExportError(RuntimeError):
    """An export folder is missing, corrupt, tampered with or of another format version."""


def _sha256(path):
    h = _hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(folder):
    """The folder's manifest.json, after checking its format and version."""
    path = _os.path.join(folder, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = _json.load(f)
    except FileNotFoundError:
        raise ExportError(f"{folder!r} is not an exported function: it has no "
                          "manifest.json") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ExportError(f"{path} is corrupt: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ExportError(f"{path} is not a {FORMAT} manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ExportError(f"{path} has format version {manifest.get('format_version')!r}; "
                          f"this loader reads version {FORMAT_VERSION}")
    return manifest


def _name_problem(folder, name):
    """Why `name`, a file the manifest names, is not a plain file name inside `folder`."""
    if not isinstance(name, str) or not name:
        return f"{name!r}: not a file name"
    seps = [s for s in ("/", "\\", _os.sep, _os.altsep) if s]
    if (any(s in name for s in seps) or name in (".", "..") or "\0" in name
            or _os.path.isabs(name)):
        return f"{name}: not a plain file name inside the folder"
    real = _os.path.realpath(_os.path.join(folder, name))
    if _os.path.dirname(real) != _os.path.realpath(folder):
        return f"{name}: resolves outside the folder (to {real})"
    return None


def check_names(folder, manifest):
    """Problems with the file names in the manifest; checked before any file is read."""
    files = manifest.get("files")
    state = manifest.get("state")
    if not isinstance(files, dict) or not isinstance(state, dict):
        return ["manifest.json: no table of files and their sha256, or no state entry"]
    named = {"module": manifest.get("module"), "state file": state.get("file")}
    problems = []
    for what, name in named.items():
        if name is None:
            problems.append(f"the manifest names no {what}")
        elif name not in files:
            problems.append(f"{name}: not covered by a hash in the manifest")
    for name in dict.fromkeys([*named.values(), *files]):
        why = None if name is None else _name_problem(folder, name)
        if why:
            problems.append(why)
    return problems


def _check_files(folder, manifest, keep=None):
    """Problems with the files (names, then missing or not matching their sha256). With
    `keep` (a dict), each file is read once and its checked bytes are stored there."""
    problems = check_names(folder, manifest)
    if problems:
        return problems
    for name, digest in sorted(manifest["files"].items()):
        try:
            with open(_os.path.join(folder, name), "rb") as f:
                data = f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            problems.append(f"{name}: missing")
            continue
        if _hashlib.sha256(data).hexdigest() != digest:
            problems.append(f"{name}: sha256 mismatch (the file was changed or truncated)")
        elif keep is not None:
            keep[name] = data
    return problems


def verify(folder, manifest):
    """A list of problems: names not inside the folder, files missing or not matching their
    sha256 in the manifest."""
    return _check_files(folder, manifest)


def read_verified(folder, manifest):
    """{file name: bytes} of every file in the manifest, each read once and checked against its
    sha256; raises ExportError naming every problem."""
    blobs = {}
    problems = _check_files(folder, manifest, blobs)
    if problems:
        raise ExportError(f"export {folder!r} failed its integrity check: "
                          + "; ".join(problems))
    return blobs


def compile_verified(data, digest):
    """Code of a module from its checked bytes, with Numba's disk cache off: `cache=True` (as
    jitflow 0.1 wrote it) becomes `cache=False`, and the code's file name names no file, so
    Numba cannot locate a cache for it (it would unpickle whatever __pycache__ holds)."""
    text = data.decode("utf-8").replace("numba.njit(cache=True", "numba.njit(cache=False")
    filename = f"<jitflow export {digest[:16]}>"
    _linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    return compile(text, filename, "exec", dont_inherit=True)


def _dims_str(shape):
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _build(spec, flat):
    if "tensor" in spec:
        return flat[spec["tensor"]]
    if "op" in spec:
        return None
    if "list" in spec:
        return [_build(s, flat) for s in spec["list"]]
    if "tuple" in spec:
        return tuple(_build(s, flat) for s in spec["tuple"])
    return {k: _build(s, flat) for k, s in spec["dict"]}


class ExportedFunction:
    """A loaded export: call it with the feeds, in the manifest's order."""

    def __init__(self, folder, manifest, entry, state_bytes):
        self.folder = _os.path.abspath(folder)
        self.manifest = manifest
        self._entry = entry
        self._feeds = [(f["name"], _np.dtype(f["dtype"]), f["shape"])
                       for f in manifest["feeds"]]
        self._outputs = [(o["from"][0], o["from"][1], _np.dtype(o["dtype"]).type)
                         for o in manifest["outputs"]]
        path = _os.path.join(self.folder, manifest["state"]["file"])
        try:
            with _np.load(_io.BytesIO(state_bytes), allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except Exception as e:  # noqa: BLE001  (zip and format errors of many kinds)
            raise ExportError(f"{path} is corrupt: {e}") from None
        entries = [(v["name"], v) for v in manifest["state"]["variables"]]
        entries += [(c["key"], c) for c in manifest["state"].get("constants", [])]
        loaded = {}
        for name, v in entries:
            arr = arrays.get(v["key"])
            if arr is None:
                raise ExportError(f"{path} has no value for {name!r}")
            if arr.dtype != _np.dtype(v["dtype"]) or list(arr.shape) != v["shape"]:
                raise ExportError(f"{path}: {name!r} is {arr.dtype}{list(arr.shape)}, the "
                                  f"manifest says {v['dtype']}{v['shape']}")
            loaded[name] = _np.array(arr, copy=True, order="C")
        self.state = {v["name"]: loaded[v["name"]] for v in manifest["state"]["variables"]}
        self._vars = tuple(self.state[v["name"]] for v in manifest["state"]["variables"])
        self._consts = {c["key"]: loaded[c["key"]]
                        for c in manifest["state"].get("constants", [])}
        self._inputs = [(kind, x if kind == "feed" else loaded[x])
                        for kind, x in manifest["inputs"]]

    @property
    def signature(self):
        """`name(feed: dtype[dims], ...)` with `?` for dims of any size."""
        args = ", ".join(f"{n}: {d.name}{_dims_str(s)}" for n, d, s in self._feeds)
        return f"{self.manifest.get('name', 'f')}({args})"

    def _check(self, i, value):
        name, dtype, shape = self._feeds[i]
        if isinstance(value, (_np.ndarray, _np.generic)):
            if value.dtype != dtype:
                raise TypeError(f"feed {name!r} must have dtype {dtype.name}, got "
                                f"{value.dtype.name}; expected {self.signature}")
            arr = _np.asarray(value)
        else:
            try:
                arr = _np.asarray(value, dtype=dtype)
            except (TypeError, ValueError) as e:
                raise TypeError(f"feed {name!r} cannot be converted to {dtype.name} ({e}); "
                                f"expected {self.signature}") from None
        if arr.ndim != len(shape) or any(d is not None and d != s
                                         for d, s in zip(shape, arr.shape)):
            raise ValueError(f"feed {name!r} must have shape {_dims_str(shape)}, got "
                             f"{list(arr.shape)}; expected {self.signature}")
        # (np.ascontiguousarray would turn a rank-0 feed into rank 1)
        return arr if arr.flags.c_contiguous else arr.copy(order="C")

    def __call__(self, *args):
        if len(args) != len(self._feeds):
            raise TypeError(f"{self.signature} takes {len(self._feeds)} feeds, got "
                            f"{len(args)}")
        fs = [self._check(i, a) for i, a in enumerate(args)]
        ins = tuple(fs[x] if kind == "feed" else x for kind, x in self._inputs)
        res = self._entry(ins, self._vars)
        flat = []
        for src, i, typ in self._outputs:
            v = res[i] if src == "result" else fs[i]
            flat.append(v[()] if isinstance(v, _np.ndarray) and v.ndim == 0
                        else v if isinstance(v, _np.ndarray) else typ(v))
        return _build(self.manifest["fetches"], flat)

    def save_state(self):
        """Write the current variable values to the folder (state file, then manifest)."""
        keys = {v["name"]: v["key"] for v in self.manifest["state"]["variables"]}
        arrays = {keys[n]: a for n, a in self.state.items()}
        arrays.update(self._consts)
        state_name = self.manifest["state"]["file"]
        fd, tmp = _tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".npz")
        try:
            _os.chmod(tmp, 0o644)
            with _os.fdopen(fd, "wb") as f:
                _np.savez(f, **arrays)
            digest = _sha256(tmp)
            _os.replace(tmp, _os.path.join(self.folder, state_name))
        finally:
            if _os.path.exists(tmp):
                _os.unlink(tmp)
        self.manifest["files"][state_name] = digest
        fd, tmp = _tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        try:
            _os.chmod(tmp, 0o644)
            with _os.fdopen(fd, "w", encoding="utf-8") as f:
                _json.dump(self.manifest, f, indent=1, sort_keys=True)
            _os.replace(tmp, _os.path.join(self.folder, "manifest.json"))
        finally:
            if _os.path.exists(tmp):
                _os.unlink(tmp)

    def __repr__(self):
        return f"<exported {self.signature}>"


def load(folder=None):
    """Load the export this module belongs to (default: the folder holding this file).

    Every file is read once and checked against the manifest; the kernels used are compiled
    from the checked bytes of this module's file, not taken from the module as imported
    (Python may have run that from bytecode in __pycache__)."""
    folder = _os.path.dirname(_os.path.abspath(__file__)) if folder is None else folder
    manifest = read_manifest(folder)
    blobs = read_verified(folder, manifest)
    module = manifest["module"]
    if module != _os.path.basename(__file__):
        raise ExportError(f"the manifest in {folder!r} describes module {module!r}, not "
                          f"{_os.path.basename(__file__)!r}")
    checked = {"__name__": __name__ + "_checked", "__file__": __file__}
    exec(compile_verified(blobs[module], manifest["files"][module]), checked)
    return checked["open_verified"](folder, manifest, blobs)


def open_verified(folder, manifest, blobs):
    """An ExportedFunction of this module's kernels, with its state from checked bytes."""
    if manifest.get("signature_id") != SIGNATURE_ID:
        raise ExportError(f"the manifest in {folder!r} does not match this module "
                          f"(signature {manifest.get('signature_id')!r}, module has "
                          f"{SIGNATURE_ID!r})")
    return ExportedFunction(folder, manifest, ENTRY, blobs[manifest["state"]["file"]])
'''


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- reading ----------------------------------------------------------------------------------
_LOADER: dict = {}


def _loader() -> dict:
    """The loader's functions and classes (LOADER_SOURCE run once), raising our ExportError."""
    if not _LOADER:
        ns: dict = {"__file__": "<loader>", "__name__": "jitflow.export.loader"}
        exec(compile(LOADER_SOURCE, "<jitflow export loader>", "exec"), ns)  # noqa: S102
        ns["ExportError"] = ExportError
        _LOADER.update(ns)
    return _LOADER


def read_manifest(path: str) -> dict:
    """The manifest of the export folder `path` (format and version checked)."""
    return _loader()["read_manifest"](os.fspath(path))


def verify(path: str, manifest: Optional[dict] = None) -> list:
    """Problems with the folder's files (names not plain file names inside the folder, files
    missing or not matching their sha256); [] if none."""
    manifest = read_manifest(path) if manifest is None else manifest
    return _loader()["verify"](os.fspath(path), manifest)


def check_names(path: str, manifest: Optional[dict] = None) -> list:
    """Problems with the file names in the manifest (each must be a plain file name inside the
    folder, not a link out of it); [] if none. Nothing named is read."""
    manifest = read_manifest(path) if manifest is None else manifest
    return _loader()["check_names"](os.fspath(path), manifest)


def load(path: str):
    """Load an export folder, running nothing from it before every file is checked.

    The manifest's file names must be plain names inside the folder; each file is read once
    and its bytes checked against the manifest's sha256; the module is compiled from those
    bytes (not imported: no bytecode from `__pycache__`, no Numba cache files from the
    folder) and the state parsed from them without pickles. Returns a callable taking the feeds
    in order; it checks their dtypes and shapes (TypeError or ValueError naming the feed and the
    expected signature). `.state` holds the variables, updated in place by training steps;
    `.save_state()` writes them back to the folder.
    """
    path = os.path.abspath(os.fspath(path))
    loader = _loader()
    manifest = loader["read_manifest"](path)
    blobs = loader["read_verified"](path, manifest)
    module = manifest["module"]
    mod = _module_from_verified(blobs[module], manifest["files"][module],
                                os.path.join(path, module))
    if getattr(mod, "SIGNATURE_ID", None) != manifest.get("signature_id") \
            or not callable(getattr(mod, "ENTRY", None)):
        raise ExportError(f"the manifest in {path!r} does not match this module (signature "
                          f"{manifest.get('signature_id')!r}, module has "
                          f"{getattr(mod, 'SIGNATURE_ID', None)!r})")
    return loader["ExportedFunction"](path, manifest, mod.ENTRY,
                                      blobs[manifest["state"]["file"]])


_MODULE_LOCK = threading.Lock()


def _module_from_verified(data: bytes, digest: str, path: str) -> types.ModuleType:
    """The module compiled from checked bytes, registered in sys.modules under a name made of
    their sha256 (so the same bytes, from any folder, give the same module). Threads loading
    the same bytes wait for the first: a module is registered only once it has run."""
    name = f"_jitflow_export_{digest[:32]}"
    with _MODULE_LOCK:
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "_jitflow_sha256", None) == digest:
            return mod
        code = _loader()["compile_verified"](data, digest)
        mod = types.ModuleType(name)
        mod.__file__ = path
        mod._jitflow_sha256 = digest
        sys.modules[name] = mod
        try:
            exec(code, mod.__dict__)  # noqa: S102  (bytes checked against the manifest)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return mod


def load_files(files: dict, label: str = "<in memory>"):
    """Load an export from its files' bytes ({file name: bytes}, as `export_files` gives
    them), with the checks `load` makes on a folder: the manifest's format and version, every
    file it names present and matching its sha256, the module compiled from those bytes (once
    per process for the same bytes) and the state parsed without pickles. `label` names the
    export in error messages. The function has no folder: its `save_state` raises."""
    try:
        manifest = json.loads(files[MANIFEST])
    except KeyError:
        raise ExportError(f"{label} is not an exported function: it has no "
                          f"{MANIFEST}") from None
    except (ValueError, UnicodeDecodeError, TypeError) as e:
        raise ExportError(f"{label}: {MANIFEST} is corrupt: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ExportError(f"{label}: {MANIFEST} is not a {FORMAT} manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ExportError(f"{label}: {MANIFEST} has format version "
                          f"{manifest.get('format_version')!r}; this loader reads version "
                          f"{FORMAT_VERSION}")
    table = manifest.get("files")
    state = manifest.get("state")
    if not isinstance(table, dict) or not isinstance(state, dict):
        raise ExportError(f"{label}: {MANIFEST} has no table of files and their sha256, or "
                          "no state entry")
    module, state_file = manifest.get("module"), state.get("file")
    problems = []
    for what, fname in (("module", module), ("state file", state_file)):
        if fname not in table:
            problems.append(f"the {what} {fname!r} is not covered by a hash in the manifest")
    for fname, digest in sorted(table.items()):
        data = files.get(fname)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            problems.append(f"{fname}: missing")
        elif hashlib.sha256(data).hexdigest() != digest:
            problems.append(f"{fname}: sha256 mismatch (changed or truncated)")
    if problems:
        raise ExportError(f"export {label} failed its integrity check: " + "; ".join(problems))
    mod = _module_from_verified(bytes(files[module]), table[module], f"{label}/{module}")
    if getattr(mod, "SIGNATURE_ID", None) != manifest.get("signature_id") \
            or not callable(getattr(mod, "ENTRY", None)):
        raise ExportError(f"the manifest of {label} does not match its module (signature "
                          f"{manifest.get('signature_id')!r}, module has "
                          f"{getattr(mod, 'SIGNATURE_ID', None)!r})")
    return _in_memory_class()(label, manifest, mod.ENTRY, bytes(files[state_file]))


def _in_memory_class():
    """ExportedFunction, less `save_state` (an export loaded from bytes has no folder)."""
    loader = _loader()
    cls = loader.get("_InMemoryFunction")
    if cls is None:
        base = loader["ExportedFunction"]

        def __init__(self, label, manifest, entry, state_bytes):
            base.__init__(self, label, manifest, entry, state_bytes)
            self.folder = label

        def save_state(self):
            raise ExportError(f"{self.folder} was loaded from bytes (load_files): it has no "
                              "folder to save its state to; export it with jitflow.export")

        cls = loader["_InMemoryFunction"] = type("ExportedFunction", (base,),
                                                 {"__init__": __init__,
                                                  "save_state": save_state,
                                                  "__module__": base.__module__})
    return cls


# -- writing ----------------------------------------------------------------------------------
def _fetch_spec(fetches, index: dict, flat: list):
    """Encode the fetch structure; tensors get their position in the flat output list."""
    if isinstance(fetches, Operation):
        return {"op": fetches.name}
    if isinstance(fetches, Tensor):
        if fetches not in index:
            index[fetches] = len(flat)
            flat.append(fetches)
        return {"tensor": index[fetches]}
    if hasattr(fetches, "_as_graph_element"):
        return _fetch_spec(fetches._as_graph_element(), index, flat)
    if isinstance(fetches, list):
        return {"list": [_fetch_spec(f, index, flat) for f in fetches]}
    if isinstance(fetches, tuple):
        return {"tuple": [_fetch_spec(f, index, flat) for f in fetches]}
    if isinstance(fetches, dict):
        if not all(isinstance(k, str) for k in fetches):
            raise TypeError("export: dict fetches need string keys")
        return {"dict": [[k, _fetch_spec(v, index, flat)] for k, v in fetches.items()]}
    raise TypeError(f"export: cannot export fetch {fetches!r}; give Tensors, Operations or "
                    "lists, tuples and dicts of them")


def _resolve_fetches(graph, fetches):
    if isinstance(fetches, (list, tuple)) and not hasattr(fetches, "_fields"):
        return type(fetches)(_resolve_fetches(graph, f) for f in fetches)
    if isinstance(fetches, dict):
        return {k: _resolve_fetches(graph, v) for k, v in fetches.items()}
    return graph.as_graph_element(fetches, allow_tensor=True, allow_operation=True)


def _module_name(name: str) -> str:
    stem = re.sub(r"\W", "_", name).strip("_") or "exported"
    if stem[0].isdigit():
        stem = "f_" + stem
    return stem + ".py"


def _atomic_write(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def export(sess, fetches, feed_list: Sequence = (), path: str = "exported",
           name: str = "exported", feed_values: Optional[Sequence] = None) -> str:
    """Write the compiled function computing `fetches` from `feed_list` to the folder `path`.

    The variables the function reads are taken from `sess` (they must be initialized);
    calling the loaded function with the feeds in `feed_list` order returns the fetches in
    their structure, updating the exported state as a `sess.run` would. `feed_values`
    (optional sample feeds) pick the shape class compiled for; without them every unknown
    dimension is taken to be larger than 1 (a `None` dim of size 1 that broadcasts against
    another dim then fails the kernel's checks). Returns `path`.
    """
    files = export_files(sess, fetches, feed_list, name=name, feed_values=feed_values)
    manifest = json.loads(files[MANIFEST])
    os.makedirs(path, exist_ok=True)
    # the manifest last: a folder whose manifest names these files holds all of them
    for fname in (manifest["module"], STATE, MANIFEST):
        _atomic_write(os.path.join(path, fname), files[fname])
    return path


def export_files(sess, fetches, feed_list: Sequence = (), name: str = "exported",
                 feed_values: Optional[Sequence] = None) -> dict:
    """The files `export` writes, in memory: {module file name: bytes, "state.npz": bytes,
    "manifest.json": bytes}.

    For shipping a run signature to other processes (`jitflow.dask`) without a folder: load
    the dict with `load_files`, and give it new variable values with `with_state`.
    """
    import numba

    from jitflow import __version__
    graph = sess.graph
    fetches = _resolve_fetches(graph, fetches)
    feeds = [graph.as_graph_element(f, allow_tensor=True, allow_operation=False)
             for f in feed_list]
    if len(set(feeds)) != len(feeds):
        raise ValueError("export: a tensor appears twice in feed_list")
    index: dict = {}
    flat: list = []
    spec = _fetch_spec(fetches, index, flat)
    program = _compile_program(sess, flat, _targets(fetches), feeds,
                               None if feed_values is None else list(feed_values))
    values = _state_values(sess, program["variables"])
    feed_pos = {t: i for i, t in enumerate(feeds)}
    result_pos = {n: i for i, n in enumerate(program["results"])}
    outputs = []
    for t in flat:
        if t in feed_pos:
            src = ["feed", feed_pos[t]]
        elif t.name in result_pos:
            src = ["result", result_pos[t.name]]
        else:
            raise NotImplementedError(f"export: the compiled kernel does not return {t.name}")
        outputs.append({"name": t.name, "dtype": t.dtype.name, "shape": _dims(t), "from": src})
    updates = set(program["updates"])
    var_records = [{"name": op.name, "key": f"v{i}", "dtype": op.attrs["dtype"].name,
                    "shape": list(values[op].shape), "updated": op in updates}
                   for i, op in enumerate(program["variables"])]
    const_records = [{"key": k, "dtype": a.dtype.name, "shape": list(a.shape)}
                     for k, a in program["constants"].items()]
    module = _module_name(name)
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "name": name, "module": module,
        "feeds": [{"name": t.name, "dtype": t.dtype.name, "shape": _dims(t)} for t in feeds],
        "fetches": spec, "outputs": outputs,
        "inputs": [list(x) for x in program["inputs"]],
        "state": {"file": STATE, "variables": var_records, "constants": const_records},
        "updates": [r["name"] for r in var_records if r["updated"]],
        "versions": {"jitflow": __version__, "numba": numba.__version__,
                     "numpy": np.__version__,
                     "python": ".".join(map(str, sys.version_info[:3]))},
    }
    ident = json.dumps([manifest["feeds"], outputs, manifest["inputs"], manifest["state"],
                        program["source"]], sort_keys=True)
    manifest["signature_id"] = hashlib.sha256(ident.encode("utf-8")).hexdigest()[:16]
    source = _module_source(program, manifest).encode("utf-8")
    arrays = {r["key"]: values[op] for r, op in zip(var_records, program["variables"])}
    arrays.update(program["constants"])
    state = _npz_bytes(arrays)
    manifest["files"] = {module: hashlib.sha256(source).hexdigest(),
                         STATE: hashlib.sha256(state).hexdigest()}
    return {module: source, STATE: state,
            MANIFEST: json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")}


def _npz_bytes(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def with_state(files: dict, values: dict) -> dict:
    """`files` (from `export_files`) with the variables set to `values` ({variable name:
    array}; variables not named keep their value): a new state file and a manifest naming its
    sha256. The module is unchanged, so a process that compiled it once reuses it. Raises
    ValueError naming the variable for a value of another dtype or shape, KeyError for a
    name the export does not hold."""
    manifest = json.loads(files[MANIFEST])
    records = {v["name"]: v for v in manifest["state"]["variables"]}
    unknown = sorted(set(values) - set(records))
    if unknown:
        raise KeyError(f"with_state: the export holds no variable {unknown[0]!r} (it holds "
                       f"{sorted(records)})")
    old = files[STATE]
    arrays = {}
    with np.load(io.BytesIO(old), allow_pickle=False) as data:
        for name, rec in records.items():
            if name not in values:
                arrays[rec["key"]] = data[rec["key"]]
                continue
            arr = np.asarray(values[name])
            if arr.dtype != np.dtype(rec["dtype"]) or list(arr.shape) != rec["shape"]:
                raise ValueError(f"with_state: variable {name!r} is {rec['dtype']}"
                                 f"{rec['shape']} in the export, got {arr.dtype.name}"
                                 f"{list(arr.shape)}")
            arrays[rec["key"]] = arr
        for c in manifest["state"].get("constants", []):
            arrays[c["key"]] = data[c["key"]]
    state = _npz_bytes(arrays)
    manifest["files"][STATE] = hashlib.sha256(state).hexdigest()
    out = dict(files)
    out[STATE] = state
    out[MANIFEST] = json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")
    return out


def make_save(sess, fetches, feed_list: Sequence = ()):
    """A `save(path, name="exported")` function exporting this run signature.

    `Session.make_callable` attaches it to the callable it returns, so
    `sess.make_callable(fetches, feed_list).save(path)` is `export(sess, fetches, feed_list,
    path)`; the state exported is the session's at the time `save` is called.
    """
    feed_list = list(feed_list or ())

    def save(path: str, name: str = "exported", feed_values: Optional[Sequence] = None) -> str:
        return export(sess, fetches, feed_list, path, name=name, feed_values=feed_values)

    return save


def _dims(t: Tensor):
    d = t.shape.as_tuple()
    if d is None:
        raise ValueError(f"export: tensor {t.name} has an unknown rank; give it a static rank "
                         "(e.g. with set_shape) to export it")
    return list(d)


def _targets(fetches) -> list:
    out: list = []
    stack = [fetches]
    while stack:
        f = stack.pop()
        if isinstance(f, Operation):
            out.append(f)
        elif isinstance(f, dict):
            stack.extend(f.values())
        elif isinstance(f, (list, tuple)):
            stack.extend(f)
    return out


def _state_values(sess, var_ops) -> dict:
    from jitflow.core import errors
    values = {}
    for op in var_ops:
        v = sess._state.get(op)
        if v is None:
            raise errors.FailedPreconditionError(
                None, op, f"export: variable {op.name} is not initialized in the session; run "
                          "its initializer (or restore a checkpoint) before exporting")
        values[op] = np.array(v, copy=True, order="C")
    return values


_STATE_OP_SKIP = ("VariableV2", "IsVariableInitialized", "ReportUninitializedVariables")


def _compile_program(sess, flat: list, targets: list, feeds: list,
                     feed_values: Optional[list] = None) -> dict:
    """The compiler's module text and argument layout for this run signature.

    Returns {"source", "entry", "inputs": [("feed", i) | ("const", key)], "constants":
    {key: array}, "variables": [VariableV2 ops], "updates": [...], "results": [names]}.
    """
    try:
        from jitflow.backends.numba_cpu.export_source import export_source
    except ImportError:
        raise NotImplementedError("export needs the numba backend (jitflow.backends.numba_cpu), "
                                  "which is not available") from None
    fetches = list(flat) + list(targets)
    if getattr(sess, "backend", None) != "numba":
        # Compile with a numba session on the same graph; the state still comes from `sess`.
        from jitflow.core.session import Session
        compiling = Session(graph=sess.graph, backend="numba")
        compiling._store.values.update(sess._store.snapshot())
    else:
        compiling = sess
    from jitflow.compiler.lower import Unsupported as unsupported
    try:
        src = export_source(compiling, fetches, feeds, feed_values)
    except NotImplementedError as e:
        raise NotImplementedError(f"export: {e} (ops without a code generator, such as random "
                                  "ops, run through NumPy references and cannot be "
                                  "exported)") from None
    except unsupported as e:
        raise NotImplementedError(f"export: the compiler cannot generate one kernel for these "
                                  f"fetches ({e.args[0] if e.args else e})") from None
    layout = src["layout"]
    graph = sess.graph
    feed_pos = {t.name: i for i, t in enumerate(feeds)}
    inputs: list = []
    constants: dict = {}
    for kind, name in layout["inputs"]:
        if kind == "feed":
            inputs.append(("feed", feed_pos[name]))
        elif kind == "const":
            key = f"c{len(constants)}"
            constants[key] = np.asarray(src["constants"][name])
            inputs.append(("const", key))
        else:
            raise NotImplementedError(f"export: unknown kernel input kind {kind!r}")
    variables = [graph.get_operation_by_name(n) for n in layout["variables"]]
    plan = compiling.make_callable(fetches, feeds).spec.plan
    updates = []
    for op in plan.ops:
        if (op.op_def.stateful and op.type not in _STATE_OP_SKIP and op.inputs
                and op.inputs[0].op.type == "VariableV2" and op.inputs[0].op not in updates):
            updates.append(op.inputs[0].op)
    source = _inline_vecmath(src["source"])
    if re.search(r"^\s*(import|from)\s+jitflow\b", source, re.M):
        raise NotImplementedError("export: the generated module imports jitflow, so it would "
                                  "not stand alone")
    return {"source": source, "entry": src["entry"], "inputs": inputs,
            "constants": constants, "variables": variables, "updates": updates,
            "results": list(layout["results"])}


# the helper libraries generated kernels import: (module, what its copy is called), a library
# before the ones it imports
_LIBRARIES = (("mathlib", "the kernels' primitives"), ("mathir", "the math library's IR"),
              ("nnlib", "window-op helpers"))


def _library_import(lib: str):
    return re.compile(rf"^from jitflow\.backends\.numba_cpu import {lib}(?: as (\w+))?"
                      rf"(?:  #[^\n]*)?\n"
                      rf"|^from jitflow\.backends\.numba_cpu\.{lib} import [\w, ]+"
                      rf"(?:  #[^\n]*)?\n", re.M)


def _strip_import(text: str, pattern, aliases: set) -> str:
    """`text` without the library's import lines and its `alias.` prefixes."""
    text = pattern.sub("", text)
    for alias in aliases:
        text = re.sub(rf"\b{alias}\.", "", text)
    return text


def _inline_vecmath(source: str) -> str:
    """Replace the kernel's imports of jitflow's helper libraries (mathlib, mathir, nnlib) by
    copies, and the libraries' imports of each other likewise.

    Each library needs only numpy, numba and llvmlite; its text goes into the exported module
    (without its docstring), and `_jf.exp` becomes `exp`. Top-level names of the copies must
    not collide with each other, the generated code or the loader; a collision is an error.
    """
    import ast
    import importlib
    import inspect

    copies = []   # [lib, what, text], in the order found
    kernel = source
    for lib, what in _LIBRARIES:
        pattern = _library_import(lib)
        texts = [kernel] + [c[2] for c in copies]
        found = [m for t in texts for m in pattern.finditer(t)]
        if not found:
            continue
        aliases = {m.group(1) or lib for m in found if not m.group(0).startswith(
            f"from jitflow.backends.numba_cpu.{lib} ")}
        module = importlib.import_module(f"jitflow.backends.numba_cpu.{lib}")
        helpers = inspect.getsource(module)
        body = ast.parse(helpers).body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            helpers = "\n".join(helpers.splitlines()[body[0].end_lineno:])
        helpers = re.sub(r"^from __future__ import annotations\n", "", helpers, flags=re.M)
        helpers = _without_cache_token(helpers)
        kernel = _strip_import(kernel, pattern, aliases)
        for c in copies:
            c[2] = _strip_import(c[2], pattern, aliases)
        copies.append([lib, what, helpers])
    if not copies:
        return source
    ours = _top_level_names(kernel) | _top_level_names(LOADER_SOURCE) | {"SIGNATURE_ID",
                                                                          "ENTRY"}
    shared = {"math", "np", "numba", "os", "__all__", "FUNCS", "types", "intrinsic",
              "ctypes", "lir", "llb", "cgutils", "ir"}
    seen: set = set()
    for lib, _, helpers in copies:
        names = _top_level_names(helpers)
        clash = (names & (ours | seen)) - shared
        if clash:
            raise NotImplementedError(f"export: cannot inline {lib}: names {sorted(clash)} "
                                      "clash with the generated module")
        seen |= names
    text = ""
    for lib, what, helpers in reversed(copies):
        text += (f"# ---- {what} (a copy of jitflow.backends.numba_cpu.{lib}) ".ljust(99, "-")
                 + "\n"
                 + helpers.strip() + "\n\n\n")
    return text + "# ---- kernels ".ljust(99, "-") + "\n" + kernel


def _without_cache_token(helpers: str) -> str:
    """The helpers' text without `CACHE_TOKEN` and `_hash_self` (which reads the module's own
    file: an export reads its files once, verified, and needs no cache key)."""
    import ast
    drop = set()
    for node in ast.parse(helpers).body:
        named = (isinstance(node, ast.FunctionDef) and node.name == "_hash_self"
                 or isinstance(node, ast.Assign) and any(
                     isinstance(t, ast.Name) and t.id == "CACHE_TOKEN" for t in node.targets))
        if named:
            drop.update(range(node.lineno - 1, node.end_lineno))
    lines = helpers.splitlines()
    return "\n".join(line for i, line in enumerate(lines) if i not in drop) + "\n"


def _top_level_names(source: str) -> set:
    import ast
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


_DOC = '''"""{name}: a function exported by jitflow {version}. Needs only numpy and numba.

Feeds: {feeds}
Fetches: {fetches}
Updates: {updates}

Use it without jitflow (the folder holds this file, manifest.json and state.npz):

    import sys; sys.path.insert(0, "/path/to/this/folder")
    import {stem}
    f = {stem}.load()   # checks every file's sha256; f(*feeds) -> fetches, f.save_state()

`load` runs only bytes it has checked, but `import` may first run bytecode that Python cached
in __pycache__: where others can write this folder, load it with `jitflow.load(folder)`,
which checks every file before running any of it.
"""
'''


def _module_source(program: dict, manifest: dict) -> str:
    """The exported module: the generated kernels, the entry point, the loader."""
    from jitflow import __version__
    stem = os.path.splitext(manifest["module"])[0]
    doc = _DOC.format(
        name=manifest["name"], version=__version__, stem=stem,
        feeds=", ".join(f"{f['name']} {f['dtype']}{f['shape']}" for f in manifest["feeds"])
        or "none",
        fetches=", ".join(o["name"] for o in manifest["outputs"]) or "none",
        updates=", ".join(manifest["updates"]) or "nothing")
    entry = program["entry"]
    return (doc + "\n# ---- generated kernels --------------------------------------------------"
            "-----------------\n" + program["source"].rstrip() + "\n\n\n"
            f"SIGNATURE_ID = {manifest['signature_id']!r}\n"
            f"ENTRY = {entry}\n" + LOADER_SOURCE)




class _CallableModule(types.ModuleType):
    """`jitflow.export(sess, ...)` calls `export`, and `jitflow.export.load` etc. still work."""

    def __call__(self, *args, **kwargs):
        return export(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
