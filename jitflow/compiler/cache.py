"""Compiled-kernel cache: in memory per process, and content-addressed files on disk.

A generated module is identified by the hash of its source (which contains no op names, so
graphs of the same structure share it). On disk it is `<cache dir>/jf_<hash>.py`, written to a
temporary file and then linked into place (never rewritten: Numba keys its own cache on the
file's mtime and size), registered in `sys.modules` before it is executed, and compiled with
`njit(cache=True)`, so a new process loads the machine code instead of compiling again.

- `JITFLOW_CACHE_DIR` picks the directory (default `$XDG_CACHE_HOME/jitflow`, else
  `~/.cache/jitflow`); `JITFLOW_CACHE=0` turns the disk cache off.
- A file whose content does not match its name (corrupt, truncated) is replaced.
- A directory that cannot be written falls back to in-memory compilation, with one warning.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import types
import warnings

__all__ = ["load_module", "cache_dir", "disk_enabled", "STATS", "clear_memory"]

_MEMORY: dict = {}
STATS = {"modules_built": 0, "disk_loads": 0, "memory_hits": 0, "compiles": 0,
         "numba_cache_hits": 0}
_WARNED: set = set()
_VERSION = "1"


def disk_enabled() -> bool:
    return os.environ.get("JITFLOW_CACHE", "1") not in ("0", "false", "no", "off")


def cache_dir() -> str:
    d = os.environ.get("JITFLOW_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jitflow")


def clear_memory() -> None:
    """Forget the modules loaded in this process (tests use it to exercise the disk cache)."""
    _MEMORY.clear()


def source_hash(source: str) -> str:
    import numba
    h = hashlib.sha256()
    h.update(f"{_VERSION}|{numba.__version__}|".encode())
    h.update(source.encode())
    return h.hexdigest()[:32]


def load_module(source: str) -> types.ModuleType:
    """The module for `source` (`{cache}` in it is replaced by the njit cache flag)."""
    key = source_hash(source)
    mod = _MEMORY.get(key)
    if mod is not None:
        STATS["memory_hits"] += 1
        return mod
    mod = None
    if disk_enabled():
        mod = _load_from_disk(key, source)
    if mod is None:
        mod = _load_in_memory(key, source)
    _MEMORY[key] = mod
    return mod


def _warn_once(msg: str) -> None:
    if msg not in _WARNED:
        _WARNED.add(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)


def _load_in_memory(key: str, source: str) -> types.ModuleType:
    STATS["modules_built"] += 1
    mod = types.ModuleType(f"jitflow_kernel_{key}")
    mod.__file__ = f"<jitflow kernel {key}>"
    code = compile(source.replace("{cache}", "False"), mod.__file__, "exec")
    exec(code, mod.__dict__)
    return mod


def _load_from_disk(key: str, source: str):
    text = source.replace("{cache}", "True")
    d = cache_dir()
    path = os.path.join(d, f"jf_{key}.py")
    try:
        os.makedirs(d, exist_ok=True)
        if not _file_matches(path, text):
            _write_atomically(d, path, text)
        else:
            STATS["disk_loads"] += 1
        name = f"jitflow_kernels.jf_{key}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception:
            sys.modules.pop(name, None)
            raise
        return mod
    except (OSError, RuntimeError) as e:
        _warn_once(f"jitflow: kernel cache directory {d!r} is not usable ({e}); compiling in "
                   "memory only (set JITFLOW_CACHE_DIR to a writable directory or "
                   "JITFLOW_CACHE=0)")
        return None


def _file_matches(path: str, text: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read() == text
    except (OSError, UnicodeDecodeError):
        return False


def _write_atomically(d: str, path: str, text: str) -> None:
    """Write `text` to `path` via a temporary file; an existing bad file is replaced."""
    STATS["modules_built"] += 1
    fd, tmp = tempfile.mkstemp(prefix=".jf_", suffix=".tmp", dir=d)
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
