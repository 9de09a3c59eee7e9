"""`tf.gfile` / `tf.io.gfile`: file access in TensorFlow's spelling, on local paths.

Both spellings are here: TF1's (`GFile`, `Open`, `FastGFile`, `Exists`, `MakeDirs`, `Glob`,
`ListDirectory`, `Remove`, `Rename`, `IsDirectory`, `Copy`, `Walk`, `Stat`,
`DeleteRecursively`, `MkDir`) and TF2's lower-case `tf.io.gfile` names. Errors are TensorFlow's:
`NotFoundError` for a missing file, `AlreadyExistsError` when a rename or copy would overwrite
without `overwrite=True`. Remote file systems (`gs://`, `s3://`, `hdfs://`) are not supported.
"""
from __future__ import annotations

import glob as _glob
import os
import shutil
from typing import Iterator

from jitflow.core import errors

__all__ = ["GFile", "Open", "FastGFile", "exists", "makedirs", "mkdir", "glob", "listdir",
           "remove", "rename", "isdir", "copy", "walk", "stat", "rmtree", "Exists", "MakeDirs",
           "MkDir", "Glob", "ListDirectory", "Remove", "Rename", "IsDirectory", "Copy", "Walk",
           "Stat", "DeleteRecursively", "FileStatistics"]


def _local(path) -> str:
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = path.decode("utf-8")
    if "://" in path:
        raise errors.UnimplementedError(None, None, f"File system scheme of '{path}' is not "
                                                    "supported by jitflow (local paths only)")
    return path


def _translate(e: OSError, path: str):
    if isinstance(e, FileNotFoundError):
        return errors.NotFoundError(None, None, f"{path}; No such file or directory")
    if isinstance(e, FileExistsError):
        return errors.AlreadyExistsError(None, None, f"{path}; File exists")
    if isinstance(e, PermissionError):
        return errors.PermissionDeniedError(None, None, f"{path}; Permission denied")
    return errors.UnknownError(None, None, f"{path}; {e}")


class GFile:
    """`tf.gfile.GFile(name, mode)`: a file object; text modes give str, "b" modes bytes."""

    def __init__(self, name, mode: str = "r") -> None:
        self.name = _local(name)
        self.mode = mode
        try:
            self._f = open(self.name, mode if "b" in mode else mode,
                           **({} if "b" in mode else {"encoding": "utf-8"}))
        except OSError as e:
            raise _translate(e, self.name) from None

    def read(self, n: int = -1):
        return self._f.read(n)

    def readline(self):
        return self._f.readline()

    def readlines(self):
        return self._f.readlines()

    def write(self, data) -> None:
        if "b" not in self.mode and isinstance(data, bytes):
            data = data.decode("utf-8")
        elif "b" in self.mode and isinstance(data, str):
            data = data.encode("utf-8")
        self._f.write(data)

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def size(self) -> int:
        return os.fstat(self._f.fileno()).st_size

    def __iter__(self):
        return iter(self._f)

    def __next__(self):
        return next(self._f)

    def __enter__(self) -> "GFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


Open = GFile
FastGFile = GFile


def exists(path) -> bool:
    return os.path.exists(_local(path))


def isdir(path) -> bool:
    return os.path.isdir(_local(path))


def makedirs(path) -> None:
    """Create `path` and its parents (no error when it exists)."""
    path = _local(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise _translate(e, path) from None


def mkdir(path) -> None:
    path = _local(path)
    try:
        os.mkdir(path)
    except OSError as e:
        raise _translate(e, path) from None


def glob(pattern) -> list:
    """The paths matching `pattern` (a list, or any of a list of patterns)."""
    if isinstance(pattern, (list, tuple)):
        return [p for q in pattern for p in glob(q)]
    return sorted(_glob.glob(_local(pattern)))


def listdir(path) -> list:
    path = _local(path)
    try:
        return sorted(os.listdir(path))
    except OSError as e:
        raise _translate(e, path) from None


def remove(path) -> None:
    path = _local(path)
    try:
        os.remove(path)
    except OSError as e:
        raise _translate(e, path) from None


def rmtree(path) -> None:
    path = _local(path)
    if not os.path.exists(path):
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory")
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def rename(src, dst, overwrite: bool = False) -> None:
    src, dst = _local(src), _local(dst)
    if not overwrite and os.path.exists(dst):
        raise errors.AlreadyExistsError(None, None, f"{dst}; File exists")
    try:
        os.replace(src, dst)
    except OSError as e:
        raise _translate(e, src) from None


def copy(src, dst, overwrite: bool = False) -> None:
    src, dst = _local(src), _local(dst)
    if not overwrite and os.path.exists(dst):
        raise errors.AlreadyExistsError(None, None, f"{dst}; File exists")
    try:
        shutil.copyfile(src, dst)
    except OSError as e:
        raise _translate(e, src) from None


def walk(top, topdown: bool = True, onerror=None) -> Iterator:
    """(dirname, subdirs, files) for each directory under `top` (nothing if it is missing)."""
    top = _local(top)
    for d, subdirs, files in os.walk(top, topdown=topdown, onerror=onerror):
        yield d, sorted(subdirs), sorted(files)


class FileStatistics:
    """What `stat` returns: `length`, `mtime_nsec`, `is_directory`."""

    def __init__(self, length: int, mtime_nsec: int, is_directory: bool) -> None:
        self.length = length
        self.mtime_nsec = mtime_nsec
        self.is_directory = is_directory

    def __repr__(self) -> str:
        return (f"FileStatistics(length={self.length}, mtime_nsec={self.mtime_nsec}, "
                f"is_directory={self.is_directory})")


def stat(path) -> FileStatistics:
    path = _local(path)
    try:
        st = os.stat(path)
    except OSError as e:
        raise _translate(e, path) from None
    return FileStatistics(st.st_size, st.st_mtime_ns, os.path.isdir(path))


Exists = exists
IsDirectory = isdir
MakeDirs = makedirs
MkDir = mkdir
Glob = glob
ListDirectory = listdir
Remove = remove
DeleteRecursively = rmtree
Rename = rename
Copy = copy
Walk = walk
Stat = stat
