"""Writing an export: compile a run signature into one module and take the variables it reads
from the session (`export`, `export_files`), or give an export new variable values
(`with_state`). The module's text is assembled in `assemble`; what the files hold and how
they are checked is `loader`'s."""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import sys
from typing import Optional, Sequence

import numpy as np

from jitflow.core.graph import Operation, Tensor
from jitflow.export.assemble import inline_libraries, module_source
from jitflow.export.loader import (FORMAT, FORMAT_VERSION, MANIFEST, STATE, manifest_bytes,
                                   npz_bytes, write_atomically)

__all__ = ["export", "export_files", "with_state", "make_save"]


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
        write_atomically(os.path.join(path, fname), files[fname])
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
    source = module_source(program, manifest).encode("utf-8")
    arrays = {r["key"]: values[op] for r, op in zip(var_records, program["variables"])}
    arrays.update(program["constants"])
    state = npz_bytes(arrays)
    manifest["files"] = {module: hashlib.sha256(source).hexdigest(),
                         STATE: hashlib.sha256(state).hexdigest()}
    return {module: source, STATE: state, MANIFEST: manifest_bytes(manifest)}


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
    state = npz_bytes(arrays)
    manifest["files"][STATE] = hashlib.sha256(state).hexdigest()
    out = dict(files)
    out[STATE] = state
    out[MANIFEST] = manifest_bytes(manifest)
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
    source = inline_libraries(src["source"])
    if re.search(r"^\s*(import|from)\s+jitflow\b", source, re.M):
        raise NotImplementedError("export: the generated module imports jitflow, so it would "
                                  "not stand alone")
    return {"source": source, "entry": src["entry"], "inputs": inputs,
            "constants": constants, "variables": variables, "updates": updates,
            "results": list(layout["results"])}


# the helper libraries generated kernels import: (module, what its copy is called)
