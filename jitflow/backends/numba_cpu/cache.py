"""Compiled-kernel cache: in memory per process (bounded), and content-addressed files on disk.

A generated module is identified by the hash of its source (which contains no op names, so
graphs of the same structure share it). On disk it is `<cache dir>/jf_<hash>.py`, written to a
temporary file and then linked into place (never rewritten: Numba keys its own cache on the
file), compiled from the text jitflow generated (the file must hold exactly that text; Python's
bytecode cache is never read) into a module registered in `sys.modules`, with
`njit(cache=True)`, so a new process loads the machine code instead of compiling again.

The disk cache runs code from files (Numba's `.nbi`/`.nbc` are pickles), so it must be private:
- `JITFLOW_CACHE_DIR` picks the directory (default `$XDG_CACHE_HOME/jitflow`, else
  `~/.cache/jitflow`); `JITFLOW_CACHE=0` turns the disk cache off.
- jitflow creates the directory and its `__pycache__` with mode 0700 and writes its files 0600
  (the generated modules, and Numba's index and data files).
- A directory (or its `__pycache__`) that is not owned by this user or that group or others
  can write is refused with one RuntimeWarning: kernels are then compiled in memory only, for
  the rest of the process. (A 0755 directory of this user's is fine.)
- Numba reads an index or data file only if it is a regular file of this user's that group and
  others cannot write (anything else was planted, or left by another tool: it is skipped).
- A file whose content does not match its name (corrupt, truncated) is replaced.
- A directory that cannot be written falls back to in-memory compilation, with one warning.

In memory, compiled kernels are kept in an LRU bounded by `JITFLOW_MEMORY_CACHE_ENTRIES`
(default 256) and `JITFLOW_MEMORY_CACHE_MB` (default 256, against an estimate of the Python
objects a compiled kernel keeps: measured at ~120 bytes per byte of generated source). An
evicted kernel is freed once no live session uses it, and is compiled (or loaded from disk)
again when next needed. The machine code itself stays: Numba's JIT engine never releases a
module it has loaded (about 1.5 MB per kernel compiled, 0.3 MB per kernel loaded from the disk
cache, measured on small graphs), so a process that compiles ever new kernels still grows.
"""
from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import stat
import sys
import tempfile
import threading
import types
import warnings
import weakref
from jitflow.runtime import config
from typing import Optional

__all__ = ["load_module", "cache_dir", "disk_enabled", "memory_limits", "STATS",
           "clear_memory"]

#: key -> _Loaded, least recently used first
_MEMORY: "collections.OrderedDict[str, _Loaded]" = collections.OrderedDict()
_SIZES: dict = {}              # key -> estimated bytes
_TOTAL = [0]                   # estimated bytes of everything in _MEMORY
_LOCK = threading.Lock()
STATS = {"modules_built": 0, "disk_loads": 0, "memory_hits": 0, "compiles": 0,
         "numba_cache_hits": 0, "evictions": 0}
_WARNED: set = set()
_REFUSED: dict = {}            # directory -> why it is not used in this process
_VERSION = "1"
_BYTES_PER_SOURCE_BYTE = 120   # Python objects a compiled kernel keeps, per byte of its source
_BYTES_PER_ENTRY = 16 * 1024


class _Loaded:
    """What `load_module` gives: the compiled `kernel` (a Numba dispatcher) and its module.

    The dispatcher is kept out of the module's globals: Numba's finalizer of a dispatcher holds
    its compile results, which hold the function and so its globals; a dispatcher named in its
    own globals could therefore never be freed."""

    __slots__ = ("kernel", "module", "from_disk")

    def __init__(self, kernel, module: types.ModuleType) -> None:
        self.kernel = kernel
        self.module = module
        self.from_disk = False   # its file was already on disk: Numba's cache likely has it


def disk_enabled() -> bool:
    return config.get("JITFLOW_CACHE")


def cache_dir() -> str:
    d = config.raw("JITFLOW_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jitflow")


def memory_limits() -> tuple:
    """(entries, bytes) the in-memory cache may hold, from JITFLOW_MEMORY_CACHE_ENTRIES and
    JITFLOW_MEMORY_CACHE_MB; the newest kernel is always kept."""
    entries = config.get("JITFLOW_MEMORY_CACHE_ENTRIES")
    mb = config.get("JITFLOW_MEMORY_CACHE_MB")
    return max(1, entries), int(max(0.0, mb) * 2 ** 20)


def clear_memory() -> None:
    """Forget the modules loaded in this process (tests use it to exercise the disk cache)."""
    with _LOCK:
        _MEMORY.clear()
        _SIZES.clear()
        _TOTAL[0] = 0


def source_hash(source: str) -> str:
    """The cache key of a kernel module: its text, jitflow's and Numba's versions and the LLVM
    optimisation level (NUMBA_OPT), so code built at another level is never loaded."""
    import numba
    h = hashlib.sha256()
    h.update(f"{_VERSION}|{numba.__version__}|O{int(numba.config.OPT)}|".encode())
    h.update(source.encode())
    return h.hexdigest()[:32]


def load_module(source: str) -> _Loaded:
    """The compiled module for `source` (`{cache}` in it is replaced by the njit cache flag);
    its `.kernel` is the generated function."""
    key = source_hash(source)
    with _LOCK:
        loaded = _MEMORY.get(key)
        if loaded is not None:
            _MEMORY.move_to_end(key)
            STATS["memory_hits"] += 1
            return loaded
    loaded = _load_from_disk(key, source) if disk_enabled() else None
    if loaded is None:
        loaded = _load_in_memory(key, source)
    _remember(key, loaded, _BYTES_PER_ENTRY + _BYTES_PER_SOURCE_BYTE * len(source))
    return loaded


def _remember(key: str, loaded: _Loaded, size: int) -> None:
    """Put `loaded` in the LRU as the newest entry, evicting the oldest beyond the limits."""
    max_entries, max_bytes = memory_limits()
    with _LOCK:
        _TOTAL[0] -= _SIZES.pop(key, 0)   # another thread loaded the same key meanwhile
        _MEMORY[key] = loaded
        _MEMORY.move_to_end(key)
        _SIZES[key] = size
        _TOTAL[0] += size
        while len(_MEMORY) > 1 and (len(_MEMORY) > max_entries or _TOTAL[0] > max_bytes):
            old, _ = _MEMORY.popitem(last=False)
            _TOTAL[0] -= _SIZES.pop(old)
            STATS["evictions"] += 1


def _warn_once(msg: str) -> None:
    if msg not in _WARNED:
        _WARNED.add(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)


def _take_kernel(mod: types.ModuleType) -> _Loaded:
    return _Loaded(mod.__dict__.pop("kernel"), mod)


def _load_in_memory(key: str, source: str) -> _Loaded:
    STATS["modules_built"] += 1
    mod = types.ModuleType(f"jitflow_kernel_{key}")
    mod.__file__ = f"<jitflow kernel {key}>"
    code = compile(source.replace("{cache}", "False"), mod.__file__, "exec")
    exec(code, mod.__dict__)
    return _take_kernel(mod)


def _load_from_disk(key: str, source: str) -> Optional[_Loaded]:
    text = source.replace("{cache}", "True")
    d = os.path.abspath(cache_dir())
    if d in _REFUSED:
        return None
    path = os.path.join(d, f"jf_{key}.py")
    try:
        why = _private_dir(d)
        if why is not None:
            _refuse(d, why)
            return None
        known = _file_matches(path, text)
        if not known:
            _write_atomically(d, path, text)
        else:
            STATS["disk_loads"] += 1
        # compiled from our own text (the file holds the same): Python's bytecode cache is
        # neither read nor written; Numba needs the file for its cache (source stamp)
        code = compile(text, path, "exec", dont_inherit=True)
        name = f"jitflow_kernels.jf_{key}"
        mod = types.ModuleType(name)
        mod.__file__ = path
        # registered first: Numba imports it by name when it loads cached machine code
        sys.modules[name] = mod
        try:
            exec(code, mod.__dict__)
        except Exception:
            if sys.modules.get(name) is mod:
                del sys.modules[name]
            raise
        loaded = _take_kernel(mod)
        loaded.from_disk = known
        _guard_numba_cache(loaded.kernel)
        weakref.finalize(loaded.kernel, _forget_module, name, mod)
        return loaded
    except (OSError, RuntimeError) as e:
        _warn_once(f"jitflow: kernel cache directory {d!r} is not usable ({e}); compiling in "
                   "memory only (set JITFLOW_CACHE_DIR to a writable directory or "
                   "JITFLOW_CACHE=0)")
        return None


def _forget_module(name: str, mod: types.ModuleType) -> None:
    """Drop a disk-cached module from sys.modules once its kernel is gone (if still ours)."""
    if sys.modules.get(name) is mod:
        del sys.modules[name]


# -- a private cache directory ----------------------------------------------------------------
def _private_dir(d: str) -> Optional[str]:
    """Create `d` and `d/__pycache__` (mode 0700) if missing; why they are unsafe, or None."""
    for path in (d, os.path.join(d, "__pycache__")):
        if not os.path.isdir(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            try:
                os.mkdir(path, 0o700)
                os.chmod(path, 0o700)   # whatever the umask
            except FileExistsError:
                pass                    # made meanwhile: judged below like any other
        why = _not_private(path, directory=True)
        if why:
            return f"{path} is {why}"
    return None


def _not_private(path: str, directory: bool) -> Optional[str]:
    """Why `path` may hold files written by someone else: not this user's, or group or others
    can write it (directories are followed through links, files are not)."""
    st = os.stat(path) if directory else os.lstat(path)
    if directory and not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if not directory and not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    getuid = getattr(os, "getuid", None)
    if getuid is not None and st.st_uid != getuid():
        return f"owned by uid {st.st_uid}, not by this user (uid {getuid()})"
    if st.st_mode & 0o022:
        who = ("group and others" if st.st_mode & 0o022 == 0o022
               else "group" if st.st_mode & 0o020 else "others")
        return f"writable by {who} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _refuse(d: str, why: str) -> None:
    _REFUSED[d] = why
    warnings.warn(f"jitflow: kernel cache directory {d!r} is not safe to load compiled code "
                  f"from: {why}; compiling in memory only in this process (use a directory "
                  "only you can write: chmod go-w it, or set JITFLOW_CACHE_DIR)",
                  RuntimeWarning, stacklevel=4)


def _private_file(path: str) -> bool:
    """Whether Numba may read the cache file `path` (missing: yes, Numba handles that)."""
    try:
        why = _not_private(path, directory=False)
    except FileNotFoundError:
        return True
    except OSError as e:
        why = str(e)
    if why:
        _warn_once(f"jitflow: ignoring Numba cache file {path} ({why})")
        return False
    return True


def _guard_numba_cache(fn) -> None:
    """Numba's cache files of dispatcher `fn` are pickles: let it read only private files,
    and write its own 0600."""
    impl = getattr(getattr(fn, "_cache", None), "_cache_file", None)
    if impl is None:
        return   # not caching
    needed = ("_load_index", "_load_data", "_open_for_write", "_index_path", "_data_path")
    if not all(hasattr(impl, a) for a in needed):
        from numba.core.caching import NullCache
        fn._cache = NullCache()   # a Numba we do not know: no disk cache, not an unchecked one
        return
    load_index, load_data, open_for_write = impl._load_index, impl._load_data, \
        impl._open_for_write

    def checked_index():
        return load_index() if _private_file(impl._index_path) else {}

    def checked_data(name):
        if not _private_file(impl._data_path(name)):
            raise OSError(f"{name} is not a private file")   # Numba: as if missing
        return load_data(name)

    @contextlib.contextmanager
    def private_write(path):
        with open_for_write(path) as f:
            os.fchmod(f.fileno(), 0o600)
            yield f

    impl._load_index = checked_index
    impl._load_data = checked_data
    impl._open_for_write = private_write


# -- blobs: compiled objects the fast path keeps (llvmjit.py) -------------------------------------
_BLOB_MAGIC = b"jitflow-blob 1 "


def blob_dir(sub: str) -> Optional[str]:
    """The private folder `<cache dir>/<sub>` for compiled blobs, or None (no disk cache, or
    a folder someone else may write: refused with one warning)."""
    if not disk_enabled():
        return None
    d = os.path.abspath(cache_dir())
    if d in _REFUSED:
        return None
    try:
        why = _private_dir(d)
        if why is None:
            path = os.path.join(d, sub)
            if not os.path.isdir(path):
                try:
                    os.mkdir(path, 0o700)
                except FileExistsError:
                    pass
            why = _not_private(path, directory=True)
            if why is not None:
                why = f"{path} is {why}"
    except OSError as e:
        _warn_once(f"jitflow: kernel cache directory {d!r} is not usable ({e}); compiling in "
                   "memory only")
        return None
    if why is not None:
        _refuse(d, why)
        return None
    return os.path.join(d, sub)


def read_blob(d: str, name: str) -> Optional[bytes]:
    """The payload of blob `name` in private folder `d`, or None: missing, not a private
    file, or damaged (its sha256 does not match: the entry is removed, to be rebuilt)."""
    path = os.path.join(d, name)
    try:
        why = _not_private(path, directory=False)
    except FileNotFoundError:
        return None
    except OSError:
        return None
    if why:
        _warn_once(f"jitflow: ignoring cache file {path} ({why})")
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    head, _, payload = data.partition(b"\n")
    if (not head.startswith(_BLOB_MAGIC)
            or head[len(_BLOB_MAGIC):].decode("ascii", "replace")
            != hashlib.sha256(payload).hexdigest()):
        STATS["damaged_blobs"] = STATS.get("damaged_blobs", 0) + 1
        try:
            os.unlink(path)
        except OSError:
            pass
        return None
    return payload


def write_blob(d: str, name: str, payload: bytes) -> None:
    """Store `payload` as blob `name` in private folder `d` (mode 0600, atomically: a reader
    sees the whole file or none)."""
    head = _BLOB_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n"
    fd, tmp = tempfile.mkstemp(prefix=".jf_", suffix=".tmp", dir=d)   # created 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(head + payload)
        os.replace(tmp, os.path.join(d, name))
    except OSError:
        pass
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# -- files --------------------------------------------------------------------------------------
def _file_matches(path: str, text: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read() == text
    except (OSError, UnicodeDecodeError):
        return False


def _write_atomically(d: str, path: str, text: str) -> None:
    """Write `text` to `path` (mode 0600) via a temporary file; a bad file is replaced."""
    STATS["modules_built"] += 1
    fd, tmp = tempfile.mkstemp(prefix=".jf_", suffix=".tmp", dir=d)   # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if os.path.exists(path):
            # corrupt entry: drop it and Numba's index for it, then link the good one in
            _remove_entry(d, path)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process won the race with the same content
        except OSError:
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _remove_entry(d: str, path: str) -> None:
    base = os.path.splitext(os.path.basename(path))[0]
    try:
        os.unlink(path)
    except OSError:
        pass
    pyc = os.path.join(d, "__pycache__")
    if os.path.isdir(pyc):
        for f in os.listdir(pyc):
            if f.startswith(base + "."):
                try:
                    os.unlink(os.path.join(pyc, f))
                except OSError:
                    pass
