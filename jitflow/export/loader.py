"""The loader of exported functions: reading and checking an export, then running only what
was checked.

This file is written twice: it is jitflow's own loader (`jitflow.load`, `jitflow.export.verify`,
`ExportError`, ... are its functions), and `jitflow.export` copies its text, less this
docstring, to the end of every exported module, so that the folder loads where jitflow is not
installed. Being both, it keeps these rules (tests/test_export.py checks them):
- it needs only the standard library and numpy (numba only runs where a module it loads
  compiles kernels) and never imports jitflow;
- it has no `from __future__` import (it is appended in the middle of a module) and no
  `__all__`;
- its imports are aliased with a leading underscore (`_np`, `_os`) and its other top-level
  names are checked against the generated kernels' names at export, so the copy neither
  shadows the kernels' globals nor is shadowed by them.

Inside an exported module, `load()` with no argument loads the folder holding that module and
requires the manifest to name it. Everywhere, `load` reads each file once, checks its sha256
against the manifest and uses only the checked bytes: the module is compiled from them (never
imported from the folder, so no bytecode from `__pycache__` runs, and with Numba's disk cache
off, so no `.nbi`/`.nbc` pickle from the folder is read), the state parsed from them with
`allow_pickle=False`.
"""
import hashlib as _hashlib
import io as _io
import json as _json
import linecache as _linecache
import os as _os
import sys as _sys
import tempfile as _tempfile
import threading as _threading
import types as _types

import numpy as _np

FORMAT = "jitflow.export"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
STATE = "state.npz"


class ExportError(RuntimeError):
    """An export folder is missing, corrupt, tampered with or of another format version."""


# -- the manifest -------------------------------------------------------------------------------
def _check_format(manifest, where: str) -> dict:
    """`manifest` if it is a manifest of this format and version; `where` names it in errors."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ExportError(f"{where} is not a {FORMAT} manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ExportError(f"{where} has format version {manifest.get('format_version')!r}; "
                          f"this loader reads version {FORMAT_VERSION}")
    return manifest


def read_manifest(path) -> dict:
    """The manifest of the export folder `path` (format and version checked)."""
    path = _os.fspath(path)
    file = _os.path.join(path, MANIFEST)
    try:
        with open(file, encoding="utf-8") as f:
            manifest = _json.load(f)
    except FileNotFoundError:
        raise ExportError(f"{path!r} is not an exported function: it has no "
                          f"{MANIFEST}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ExportError(f"{file} is corrupt: {e}") from None
    return _check_format(manifest, file)


def _table_problems(manifest: dict) -> list:
    """Problems with the manifest's table of files: missing, or not covering the module or the
    state file."""
    files = manifest.get("files")
    state = manifest.get("state")
    if not isinstance(files, dict) or not isinstance(state, dict):
        return [f"{MANIFEST}: no table of files and their sha256, or no state entry"]
    problems = []
    for what, name in (("module", manifest.get("module")), ("state file", state.get("file"))):
        if name is None:
            problems.append(f"the manifest names no {what}")
        elif not isinstance(name, str) or name not in files:
            problems.append(f"{name}: not covered by a hash in the manifest")
    return problems


def _name_problem(folder: str, name) -> "str | None":
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


def check_names(path, manifest: "dict | None" = None) -> list:
    """Problems with the file names in the manifest (each must be a plain file name inside the
    folder, not a link out of it); [] if none. Nothing named is read."""
    path = _os.fspath(path)
    manifest = read_manifest(path) if manifest is None else manifest
    problems = _table_problems(manifest)
    files, state = manifest.get("files"), manifest.get("state")
    if not isinstance(files, dict) or not isinstance(state, dict):
        return problems
    seen: list = []
    for name in (manifest.get("module"), state.get("file"), *files):
        if name is None or name in seen:
            continue
        seen.append(name)
        why = _name_problem(path, name)
        if why:
            problems.append(why)
    return problems


# -- the files' bytes ---------------------------------------------------------------------------
def _check_bytes(manifest: dict, read, keep: "dict | None" = None) -> list:
    """Problems with the files of the manifest's table: `read(name)` gives a file's bytes (None
    if it is missing), each is compared with its sha256 and, with `keep`, stored there."""
    problems = []
    for name, digest in sorted(manifest["files"].items()):
        data = read(name)
        if data is None:
            problems.append(f"{name}: missing")
        elif _hashlib.sha256(data).hexdigest() != digest:
            problems.append(f"{name}: sha256 mismatch (the file was changed or truncated)")
        elif keep is not None:
            keep[name] = bytes(data)
    return problems


def _reader(folder: str):
    """`read(name)` for `_check_bytes`: the file's bytes from `folder`, read once."""
    def read(name):
        try:
            with open(_os.path.join(folder, name), "rb") as f:
                return f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
    return read


def _verified(manifest: dict, problems: list, read, where: str) -> dict:
    """{file name: checked bytes}; raises ExportError naming every problem."""
    blobs: dict = {}
    if not problems:
        problems = _check_bytes(manifest, read, blobs)
    if problems:
        raise ExportError(f"export {where} failed its integrity check: " + "; ".join(problems))
    return blobs


def verify(path, manifest: "dict | None" = None) -> list:
    """Problems with the folder's files (names not plain file names inside the folder, files
    missing or not matching their sha256); [] if none."""
    path = _os.fspath(path)
    manifest = read_manifest(path) if manifest is None else manifest
    return check_names(path, manifest) or _check_bytes(manifest, _reader(path))


def read_verified(path, manifest: dict) -> dict:
    """{file name: bytes} of every file in the manifest, each read once and checked against its
    sha256; raises ExportError naming every problem."""
    path = _os.fspath(path)
    return _verified(manifest, check_names(path, manifest), _reader(path), repr(path))


# -- running checked bytes ----------------------------------------------------------------------
def compile_verified(data: bytes, digest: str):
    """Code of a module from its checked bytes, with Numba's disk cache off: `cache=True` (as
    jitflow 0.1 wrote it) becomes `cache=False`, and the code's file name names no file, so
    Numba cannot locate a cache for it (it would unpickle whatever __pycache__ holds)."""
    text = data.decode("utf-8").replace("numba.njit(cache=True", "numba.njit(cache=False")
    filename = f"<jitflow export {digest[:16]}>"
    _linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    return compile(text, filename, "exec", dont_inherit=True)


_MODULE_LOCK = _threading.Lock()


def module_from_verified(data: bytes, digest: str, origin: str):
    """The module compiled from checked bytes, registered in sys.modules under a name made of
    their sha256 (so the same bytes, from any folder, give one module). Threads loading the same
    bytes wait for the first; a module counts as loaded only once it has run."""
    name = f"_jitflow_export_{digest[:32]}"
    with _MODULE_LOCK:
        mod = _sys.modules.get(name)
        if mod is not None and getattr(mod, "_jitflow_sha256", None) == digest:
            return mod
        code = compile_verified(data, digest)
        mod = _types.ModuleType(name)
        mod.__file__ = origin
        _sys.modules[name] = mod
        try:
            exec(code, mod.__dict__)  # noqa: S102  (bytes checked against the manifest)
        except BaseException:
            _sys.modules.pop(name, None)
            raise
        mod._jitflow_sha256 = digest
        return mod


def _open(folder: str, manifest: dict, module, state_bytes: bytes, cls=None):
    """An ExportedFunction (or a `cls`) of `module`'s kernels, once its signature matches."""
    found = getattr(module, "SIGNATURE_ID", None)
    if found != manifest.get("signature_id") or not callable(getattr(module, "ENTRY", None)):
        raise ExportError(f"the manifest in {folder!r} does not match this module (signature "
                          f"{manifest.get('signature_id')!r}, module has {found!r})")
    return (cls or ExportedFunction)(folder, manifest, module.ENTRY, state_bytes)


def _own_module() -> "str | None":
    """The file name of the exported module this text is part of; None in jitflow, where it is
    the module jitflow.export.loader (only exported modules define ENTRY)."""
    return _os.path.basename(__file__) if "ENTRY" in globals() else None


def load(path=None):
    """Load an export folder, running nothing from it before every file is checked.

    The manifest's file names must be plain names inside the folder; each file is read once
    and its bytes checked against the manifest's sha256; the module is compiled from those
    bytes (not imported: no bytecode from `__pycache__`, no Numba cache files from the
    folder; once per process for the same bytes) and the state parsed from them without
    pickles. Returns a callable taking the feeds in order; it checks their dtypes and shapes
    (TypeError or ValueError naming the feed and the expected signature). `.state` holds the
    variables, updated in place by training steps; `.save_state()` writes them back.

    In an exported module, `path` defaults to the folder holding the module, whose manifest
    must name it: the kernels used are those compiled from the checked bytes of its file, not
    the module as imported (Python may have run that from bytecode in __pycache__).
    """
    own = _own_module()
    if path is None:
        if own is None:
            raise TypeError("load() needs the path of an export folder")
        path = _os.path.dirname(_os.path.abspath(__file__))
    path = _os.path.abspath(_os.fspath(path))
    manifest = read_manifest(path)
    blobs = read_verified(path, manifest)
    module = manifest["module"]
    if own is not None and module != own:
        raise ExportError(f"the manifest in {path!r} describes module {module!r}, not "
                          f"{own!r}")
    mod = module_from_verified(blobs[module], manifest["files"][module],
                               _os.path.join(path, module))
    return _open(path, manifest, mod, blobs[manifest["state"]["file"]])


def load_files(files: dict, label: str = "<in memory>"):
    """Load an export from its files' bytes ({file name: bytes}, as `export_files` gives
    them), with the checks `load` makes on a folder: the manifest's format and version, every
    file it names present and matching its sha256, the module compiled from those bytes (once
    per process for the same bytes) and the state parsed without pickles. `label` names the
    export in error messages. The function has no folder: its `save_state` raises."""
    try:
        manifest = _json.loads(files[MANIFEST])
    except KeyError:
        raise ExportError(f"{label} is not an exported function: it has no "
                          f"{MANIFEST}") from None
    except (ValueError, UnicodeDecodeError, TypeError) as e:
        raise ExportError(f"{label}: {MANIFEST} is corrupt: {e}") from None
    _check_format(manifest, f"{label}: {MANIFEST}")

    def read(name):
        data = files.get(name)
        return data if isinstance(data, (bytes, bytearray, memoryview)) else None

    blobs = _verified(manifest, _table_problems(manifest), read, label)
    module = manifest["module"]
    mod = module_from_verified(blobs[module], manifest["files"][module], f"{label}/{module}")
    return _open(label, manifest, mod, blobs[manifest["state"]["file"]], _FromBytes)


def open_verified(folder, manifest: dict, blobs: dict):
    """An ExportedFunction of the kernels of the exported module this text is part of.

    (The loader that jitflow 0.1 wrote into modules runs the module compiled from checked bytes
    and calls this, so a module written now also loads through an older module's `load`.)"""
    here = _types.SimpleNamespace(SIGNATURE_ID=globals().get("SIGNATURE_ID"),
                                  ENTRY=globals().get("ENTRY"))
    return _open(_os.fspath(folder), manifest, here, blobs[manifest["state"]["file"]])


# -- writing files ------------------------------------------------------------------------------
def npz_bytes(arrays: dict) -> bytes:
    """The .npz file holding `arrays` ({key: array}), in memory."""
    buf = _io.BytesIO()
    _np.savez(buf, **arrays)
    return buf.getvalue()


def manifest_bytes(manifest: dict) -> bytes:
    """The manifest.json text of `manifest`, as export writes it."""
    return _json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")


def write_atomically(path: str, data: bytes) -> None:
    """Write `data` to the file `path` through a temporary file beside it: readers see the old
    file or the new one, never a part."""
    fd, tmp = _tempfile.mkstemp(dir=_os.path.dirname(path) or ".", prefix=".tmp-")
    try:
        _os.chmod(tmp, 0o644)
        with _os.fdopen(fd, "wb") as f:
            f.write(data)
        _os.replace(tmp, path)
    finally:
        if _os.path.exists(tmp):
            _os.unlink(tmp)


# -- the loaded function ------------------------------------------------------------------------
def _dims_str(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _build(spec: dict, flat: list):
    """The fetch structure the manifest's `fetches` describe, holding the values in `flat`."""
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

    def __init__(self, folder: str, manifest: dict, entry, state_bytes: bytes):
        self.folder = self._locate(folder)
        self.manifest = manifest
        self._entry = entry
        self._feeds = [(f["name"], _np.dtype(f["dtype"]), f["shape"])
                       for f in manifest["feeds"]]
        self._outputs = [(o["from"][0], o["from"][1], _np.dtype(o["dtype"]).type)
                         for o in manifest["outputs"]]
        where = _os.path.join(self.folder, manifest["state"]["file"])
        try:
            with _np.load(_io.BytesIO(state_bytes), allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except Exception as e:  # noqa: BLE001  (zip and format errors of many kinds)
            raise ExportError(f"{where} is corrupt: {e}") from None
        entries = [(v["name"], v) for v in manifest["state"]["variables"]]
        entries += [(c["key"], c) for c in manifest["state"].get("constants", [])]
        loaded = {}
        for name, v in entries:
            arr = arrays.get(v["key"])
            if arr is None:
                raise ExportError(f"{where} has no value for {name!r}")
            if arr.dtype != _np.dtype(v["dtype"]) or list(arr.shape) != v["shape"]:
                raise ExportError(f"{where}: {name!r} is {arr.dtype}{list(arr.shape)}, the "
                                  f"manifest says {v['dtype']}{v['shape']}")
            loaded[name] = _np.array(arr, copy=True, order="C")
        self.state = {v["name"]: loaded[v["name"]] for v in manifest["state"]["variables"]}
        self._vars = tuple(self.state[v["name"]] for v in manifest["state"]["variables"])
        self._consts = {c["key"]: loaded[c["key"]]
                        for c in manifest["state"].get("constants", [])}
        self._inputs = [(kind, x if kind == "feed" else loaded[x])
                        for kind, x in manifest["inputs"]]

    @staticmethod
    def _locate(folder: str) -> str:
        return _os.path.abspath(folder)

    @property
    def signature(self) -> str:
        """`name(feed: dtype[dims], ...)` with `?` for dims of any size."""
        args = ", ".join(f"{n}: {d.name}{_dims_str(s)}" for n, d, s in self._feeds)
        return f"{self.manifest.get('name', 'f')}({args})"

    def _check(self, i: int, value):
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

    def save_state(self) -> None:
        """Write the current variable values to the folder (state file, then manifest)."""
        keys = {v["name"]: v["key"] for v in self.manifest["state"]["variables"]}
        arrays = {keys[n]: a for n, a in self.state.items()}
        arrays.update(self._consts)
        state_name = self.manifest["state"]["file"]
        data = npz_bytes(arrays)
        write_atomically(_os.path.join(self.folder, state_name), data)
        self.manifest["files"][state_name] = _hashlib.sha256(data).hexdigest()
        write_atomically(_os.path.join(self.folder, MANIFEST), manifest_bytes(self.manifest))

    def __repr__(self) -> str:
        return f"<exported {self.signature}>"


class _FromBytes(ExportedFunction):
    """An export loaded from bytes (`load_files`): `folder` is its label; it has no folder to
    save its state to."""

    @staticmethod
    def _locate(folder: str) -> str:
        return folder

    def save_state(self) -> None:
        raise ExportError(f"{self.folder} was loaded from bytes (load_files): it has no "
                          "folder to save its state to; export it with jitflow.export")
