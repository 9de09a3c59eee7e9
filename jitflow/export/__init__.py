"""Export a compiled run signature as a standalone folder: module, state and manifest.

    jitflow.export(sess, [loss, train_op], [x, y], "step/")   # or make_callable(...).save()
    step = jitflow.load("step/")        # checks feeds; calling it updates its state
    step.save_state()                   # writes the variables back (atomically)

The folder holds
- `<name>.py`: the generated kernels (readable, explicit loops, `njit(cache=False)`) and a copy
  of the loader (`jitflow/export/loader.py`, the code `jitflow.load` runs), importing only
  numpy and numba, so the folder works where jitflow is not installed (the module docstring
  shows the three lines);
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

The package: `loader` (reading, checking, loading, the loaded function: standard library and
numpy only, copied into every exported module), `writer` (compiling a run signature, taking
its state, writing the files) and `assemble` (the exported module's text).
"""
from __future__ import annotations

import sys
import types

from jitflow.export.assemble import loader_source
from jitflow.export.loader import (FORMAT, FORMAT_VERSION, MANIFEST, STATE,  # noqa: F401
                                   ExportError, check_names, load, load_files, read_manifest,
                                   verify)
# (_state_values: jitflow.dask takes a session's variables as export does)
from jitflow.export.writer import (_compile_program, _fetch_spec, _state_values,  # noqa: F401
                                   export, export_files, make_save, with_state)

__all__ = ["export", "load", "export_files", "load_files", "with_state", "make_save",
           "read_manifest", "verify", "check_names", "ExportError",
           "FORMAT", "FORMAT_VERSION", "LOADER_SOURCE"]


def __getattr__(name: str):
    # the loader's text, as exported modules carry it: read from loader.py on first use
    if name == "LOADER_SOURCE":
        return loader_source()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """`jitflow.export(sess, ...)` calls `export`, and `jitflow.export.load` etc. still work."""

    def __call__(self, *args, **kwargs):
        return export(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
