"""jitflow's readable JSON form of graphs and meta graphs (`serialize.as_graph_def_json`): good
for diffs; TensorFlow's protobuf formats are in graph_def.py and meta_graph.py.

A graph def lists the ops in creation order, each with its name, type, inputs (`"op:idx"`,
control inputs as `"^op"`), attributes and output dtypes; `import_graph_def` rebuilds the ops
through `Graph.create_op`, so every shape and dtype rule runs again on import. A meta graph
adds the collections and the variables (which op is the variable, its initializer and its
read snapshot), so a training program saved in one process resumes in another by names alone:

    tf.train.export_meta_graph("model.meta")          # process 1 (plus a Saver checkpoint)
    saver = tf.train.import_meta_graph("model.meta")  # process 2
    saver.restore(sess, ckpt)
    train_op = tf.get_collection("train_op")[0]

Attribute values are encoded generically (ints, floats, bools, strings, None, lists, tuples,
dicts, slices, DType, TensorShape, NumPy arrays and scalars), so a new op needs nothing here.
"""
from __future__ import annotations

import base64
import json
import math
import os
import tempfile
import warnings
from typing import Any, Optional, Union

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Graph, GraphKeys, Operation, Tensor, get_default_graph
from jitflow.core.shapes import TensorShape

__all__ = [
    "GRAPH_DEF_VERSION", "META_GRAPH_VERSION", "as_graph_def", "import_graph_def",
    "write_graph", "read_graph_def", "export_meta_graph", "import_meta_graph",
    "variable_from_ops", "encode_attr", "decode_attr",
]

GRAPH_DEF_VERSION = 1
META_GRAPH_VERSION = 1
_GRAPH_FORMAT = "jitflow.GraphDef"
_META_FORMAT = "jitflow.MetaGraphDef"
_INLINE_LIMIT = 16  # arrays with at most this many elements are stored as readable lists


# -- attribute values -------------------------------------------------------------------------
def encode_attr(value: Any, where: str = "attr") -> Any:
    """Encode one attribute value as JSON data; tagged dicts (`{"$dtype": ...}`) mark types."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, _dtypes.DType):
        return {"$dtype": value.name}
    if isinstance(value, TensorShape):
        dims = value.as_tuple()
        return {"$shape": None if dims is None else list(dims)}
    if isinstance(value, np.ndarray):
        return {"$ndarray": _encode_array(value)}
    if isinstance(value, np.generic):
        return {"$scalar": _encode_array(np.asarray(value))}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, tuple):
        return {"$tuple": [encode_attr(v, where) for v in value]}
    if isinstance(value, list):
        return [encode_attr(v, where) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"Cannot serialize {where}: dict keys must be strings")
        return {"$dict": {k: encode_attr(v, where) for k, v in value.items()}}
    if isinstance(value, slice):
        return {"$slice": [encode_attr(value.start, where), encode_attr(value.stop, where),
                           encode_attr(value.step, where)]}
    if value is Ellipsis:
        return {"$ellipsis": True}
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return {"$dtype": _dtypes.as_dtype(value).name}
    raise TypeError(f"Cannot serialize {where}: values of type {type(value).__name__} have no "
                    "graph-def encoding")


def decode_attr(data: Any) -> Any:
    """Inverse of `encode_attr`."""
    if isinstance(data, list):
        return [decode_attr(v) for v in data]
    if not isinstance(data, dict):
        return data
    if len(data) != 1:
        raise ValueError(f"Malformed attribute value {data!r}")
    (tag, v), = data.items()
    if tag == "$dtype":
        return _dtypes.as_dtype(v)
    if tag == "$shape":
        return TensorShape(v)
    if tag == "$ndarray":
        return _decode_array(v)
    if tag == "$scalar":
        return _decode_array(v)[()]
    if tag == "$float":
        return float(v)
    if tag == "$bytes":
        return base64.b64decode(v)
    if tag == "$tuple":
        return tuple(decode_attr(x) for x in v)
    if tag == "$dict":
        return {k: decode_attr(x) for k, x in v.items()}
    if tag == "$slice":
        return slice(*(decode_attr(x) for x in v))
    if tag == "$ellipsis":
        return Ellipsis
    raise ValueError(f"Unknown attribute encoding {tag!r}")


def _encode_array(arr: np.ndarray) -> dict:
    if arr.dtype.kind in "SUO":
        items = [x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else str(x)
                 for x in arr.reshape(-1).tolist()]
        return {"dtype": "string", "shape": list(arr.shape), "list": items,
                "bytes": any(isinstance(x, bytes) for x in arr.reshape(-1).tolist())}
    dtype = _dtypes.as_dtype(arr.dtype).name
    if arr.size <= _INLINE_LIMIT:
        flat = arr.reshape(-1)
        if arr.dtype.kind == "f":
            items = [float(x) if math.isfinite(x) else repr(float(x)) for x in flat.tolist()]
        else:
            items = flat.tolist()
        return {"dtype": dtype, "shape": list(arr.shape), "list": items}
    data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    return {"dtype": dtype, "shape": list(arr.shape),
            "base64": base64.b64encode(data).decode("ascii")}


def _decode_array(d: dict) -> np.ndarray:
    shape = tuple(d["shape"])
    if d["dtype"] == "string":
        items = d["list"]
        if d.get("bytes"):
            items = [x.encode("utf-8", "surrogateescape") for x in items]
        arr = np.empty(len(items), dtype=object)
        arr[:] = items
        arr = arr.reshape(shape)
    else:
        npd = np.dtype(_dtypes.as_dtype(d["dtype"]).as_numpy_dtype)
        if "base64" in d:
            raw = base64.b64decode(d["base64"])
            arr = np.frombuffer(raw, dtype=npd.newbyteorder("<")).astype(npd).reshape(shape)
        else:
            items = [float(x) if isinstance(x, str) else x for x in d["list"]]
            arr = np.array(items, dtype=npd).reshape(shape)
    arr = np.array(arr, copy=True)
    arr.setflags(write=False)
    return arr


# -- GraphDef ---------------------------------------------------------------------------------
def _shape_list(shape: TensorShape):
    dims = shape.as_tuple()
    return None if dims is None else list(dims)


def as_graph_def(graph: Optional[Graph] = None, add_shapes: bool = False) -> dict:
    """The graph as a JSON-serializable dict (what `Graph.as_graph_def()` returns).

    Each node holds `name`, `op`, `input` (`"op:idx"` and `"^op"` for control inputs),
    `attr` (encoded values) and `output` (each output's dtype, plus its shape with
    `add_shapes=True`; shapes use `None` for unknown dims and for an unknown rank).
    """
    graph = graph if graph is not None else get_default_graph()
    nodes = []
    for op in graph.get_operations():
        attrs = {}
        for k, v in op.attrs.items():
            attrs[k] = encode_attr(v, f"attr '{k}' of op '{op.name}' ({op.type})")
        outs = []
        for t in op.outputs:
            o: dict = {"dtype": t.dtype.name}
            if add_shapes:
                o["shape"] = _shape_list(t.shape)
            outs.append(o)
        nodes.append({"name": op.name, "op": op.type,
                      "input": [t.name for t in op.inputs]
                      + ["^" + c.name for c in op._control_inputs],
                      "attr": attrs, "output": outs})
    return {"format": _GRAPH_FORMAT, "version": GRAPH_DEF_VERSION, "node": nodes}


def _load_json(obj, what: str) -> dict:
    if isinstance(obj, (str, bytes, os.PathLike)):
        text = obj
        if isinstance(obj, os.PathLike) or (isinstance(obj, str)
                                             and not obj.lstrip().startswith("{")):
            with open(obj, encoding="utf-8") as f:
                text = f.read()
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"Cannot parse {what}: {e}") from None
    if not isinstance(obj, dict):
        raise TypeError(f"{what} must be a dict (as returned by as_graph_def / "
                        f"export_meta_graph), JSON text or a file path, got {type(obj).__name__}")
    return obj


def _check_format(d: dict, fmt: str, version: int, what: str) -> None:
    if d.get("format") != fmt:
        raise ValueError(f"Not a {what}: format is {d.get('format')!r}, expected {fmt!r}")
    if d.get("version") != version:
        raise ValueError(f"Unsupported {what} version {d.get('version')!r}; this jitflow reads "
                         f"version {version}")


def read_graph_def(path_or_text) -> dict:
    """Load a graph def written by `write_graph` (a path or JSON text)."""
    gd = _load_json(path_or_text, "graph_def")
    _check_format(gd, _GRAPH_FORMAT, GRAPH_DEF_VERSION, "graph def")
    return gd


def _atomic_write_text(path: str, text: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_graph(graph_or_graph_def: Union[Graph, dict], logdir: str, name: str,
                as_text: bool = True) -> str:
    """`tf.train.write_graph`: write the graph def as JSON to `logdir/name`; returns the path.

    The file is written to a temporary name and renamed, so readers never see half a file.
    `as_text=False` writes compact JSON (there is no binary protobuf form).
    """
    gd = graph_or_graph_def
    if isinstance(gd, Graph):
        gd = as_graph_def(gd)
    elif not isinstance(gd, dict):
        raise TypeError(f"write_graph needs a Graph or a graph def dict, got "
                        f"{type(gd).__name__}")
    path = os.path.join(logdir, name)
    text = json.dumps(gd, indent=1 if as_text else None, separators=None if as_text
                      else (",", ":"))
    _atomic_write_text(path, text + "\n")
    return path


def _split_input(s: str):
    """'^op' -> (op, None); 'op:1' -> (op, 1); 'op' -> (op, 0)."""
    if s.startswith("^"):
        return s[1:], None
    op, sep, idx = s.rpartition(":")
    if sep and idx.isdigit():
        return op, int(idx)
    return s, 0


def import_graph_def(graph_def, input_map: Optional[dict] = None, return_elements=None,
                     name: Optional[str] = None, op_dict=None, producer_op_list=None):
    """`tf.import_graph_def`: add the ops of `graph_def` to the default graph.

    Ops are created under the name scope `name` (default "import": `import/add`). `input_map`
    maps tensor names of `graph_def` ("x:0" or "x") to tensors of the default graph that
    replace them. `return_elements` lists names ("op" for an Operation, "op:0" for a Tensor)
    to return from the imported graph. Unknown op types raise ValueError naming them.
    """
    from jitflow.ops.registry import REGISTRY
    gd = _load_json(graph_def, "graph_def")
    _check_format(gd, _GRAPH_FORMAT, GRAPH_DEF_VERSION, "graph def")
    nodes = gd.get("node", [])
    unknown = sorted({n["op"] for n in nodes if n["op"] not in REGISTRY})
    if unknown:
        raise ValueError(f"graph_def contains op types this jitflow does not know: "
                         f"{', '.join(unknown)}")
    graph = get_default_graph()
    mapping = _normalize_input_map(input_map, graph)
    names = {n["name"] for n in nodes}
    missing = [k for k in mapping if k.rpartition(":")[0] not in names]
    if missing:
        raise ValueError(f"Attempted to map inputs that were not found in graph_def: "
                         f"[{', '.join(missing)}]")
    prefix_name = "import" if name is None else name
    with graph.name_scope(prefix_name or None) as prefix:
        with graph.name_scope(None):
            created = _create_nodes(graph, nodes, prefix, mapping)
    if return_elements is None:
        return None
    out = []
    for r in return_elements:
        op_name, idx = _split_input(r) if ":" in r else (r, None)
        op = created.get(op_name)
        if op is None:
            raise ValueError(f"Requested return_element {r!r} not found in graph_def.")
        if idx is None:
            out.append(op)
        elif idx >= len(op.outputs):
            raise ValueError(f"Requested return_element {r!r} not found in graph_def: op "
                             f"'{op_name}' has {len(op.outputs)} outputs.")
        else:
            key = f"{op_name}:{idx}"
            out.append(mapping.get(key, op.outputs[idx]))
    return out


def _normalize_input_map(input_map, graph: Graph) -> dict:
    mapping: dict = {}
    for k, v in (input_map or {}).items():
        if not isinstance(k, str):
            raise TypeError(f"input_map keys must be tensor names (strings), got {k!r}")
        key = k if ":" in k else k + ":0"
        if hasattr(v, "_as_graph_element") and not isinstance(v, (Tensor, Operation)):
            v = v._as_graph_element()
        if not isinstance(v, Tensor):
            raise TypeError(f"input_map values must be Tensors, got {v!r} for {k!r}")
        if v.graph is not graph:
            raise ValueError(f"input_map value for {k!r} is not in the default graph")
        mapping[key] = v
    return mapping


def _create_nodes(graph: Graph, nodes: list, prefix: str, mapping: dict) -> dict:
    """Create the nodes in order; returns {name in graph_def: new Operation}."""
    created: dict = {}
    late_controls: list = []
    for n in nodes:
        inputs = []
        controls = []
        for s in n.get("input", []):
            src, idx = _split_input(s)
            if idx is None:
                if src in created:
                    controls.append(created[src])
                else:
                    late_controls.append((n["name"], src))
                continue
            mapped = mapping.get(f"{src}:{idx}")
            if mapped is not None:
                inputs.append(mapped)
                continue
            op = created.get(src)
            if op is None:
                raise ValueError(f"Node '{n['name']}' has an input from '{src}', which is not "
                                 "defined before it in graph_def")
            if idx >= len(op.outputs):
                raise ValueError(f"Node '{n['name']}' reads output {idx} of '{src}', which "
                                 f"has {len(op.outputs)} outputs")
            inputs.append(op.outputs[idx])
        attrs = {k: decode_attr(v) for k, v in n.get("attr", {}).items()}
        op = graph.create_op(n["op"], inputs, attrs, name=prefix + n["name"],
                             control_inputs=controls)
        _check_outputs(op, n, apply_shapes=not mapping)
        created[n["name"]] = op
    for dst, src in late_controls:
        if src not in created:
            raise ValueError(f"Node '{dst}' has a control input '^{src}' not in graph_def")
        created[dst]._add_control_input(created[src])
    return created


def _check_outputs(op: Operation, node: dict, apply_shapes: bool) -> None:
    want = node.get("output")
    if want is None:
        return
    got = [t.dtype.name for t in op.outputs]
    if [o["dtype"] for o in want] != got:
        raise ValueError(f"Imported node '{node['name']}' ({node['op']}) produces dtypes {got}, "
                         f"but graph_def says {[o['dtype'] for o in want]}")
    for t, o in zip(op.outputs, want):
        if apply_shapes and o.get("shape", None) is not None:
            t.set_shape(o["shape"])


# -- Variables from existing ops ----------------------------------------------------------------
def variable_from_ops(variable: Union[Tensor, Operation], initializer: Operation,
                      snapshot: Tensor, initial_value: Optional[Tensor] = None,
                      trainable: bool = True):
    """Wrap existing ops into a `tf.Variable` object without creating any op.

    `variable` is the VariableV2 op (or its output), `initializer` its `Assign` op, `snapshot`
    its `read` Identity. This is how imported graphs get their variables back; the object is
    not added to any collection (the caller decides).
    """
    from jitflow.ops.state import Variable
    var_t = variable.outputs[0] if isinstance(variable, Operation) else variable
    if not (isinstance(var_t, Tensor) and var_t.op.type == "VariableV2"):
        raise TypeError(f"variable_from_ops needs a VariableV2 op, got {variable!r}")
    if not isinstance(initializer, Operation):
        raise TypeError(f"initializer must be an Operation, got {initializer!r}")
    if not isinstance(snapshot, Tensor):
        raise TypeError(f"snapshot must be a Tensor, got {snapshot!r}")
    if initial_value is None and initializer.type == "Assign" and len(initializer.inputs) == 2:
        initial_value = initializer.inputs[1]
    v = Variable.__new__(Variable)
    v._variable = var_t
    v._initializer_op = initializer
    v._snapshot = snapshot
    v._initial_value = initial_value
    v._trainable = bool(trainable)
    v._graph = var_t.graph
    v.constraint = None
    v._save_slice_info = None
    return v


# -- MetaGraphDef -----------------------------------------------------------------------------
def _variable_record(v) -> dict:
    init_val = v.initial_value
    return {"variable": v.op.name, "initializer": v.initializer.name,
            "snapshot": v.value().name,
            "initial_value": None if init_val is None else init_val.name,
            "trainable": bool(v.trainable)}


def _encode_collection(key: str, items: list, variables: dict):
    from jitflow.ops.state import Variable
    out = []
    for item in items:
        if isinstance(item, Variable):
            variables.setdefault(item.op.name, item)
            out.append({"variable": item.op.name})
        elif isinstance(item, Tensor):
            out.append({"tensor": item.name})
        elif isinstance(item, Operation):
            out.append({"operation": item.name})
        else:
            try:
                out.append({"value": encode_attr(item, f"collection {key!r}")})
            except TypeError:
                warnings.warn(f"Collection {key!r} holds a {type(item).__name__}, which cannot "
                              "be exported; it is left out of the meta graph.", stacklevel=3)
                return None
    return out


def export_meta_graph(filename: Optional[str] = None, meta_info_def=None, graph_def=None,
                      saver_def=None, collection_list=None, as_text: bool = False,
                      graph: Optional[Graph] = None, export_scope: Optional[str] = None,
                      clear_devices: bool = False, clear_extraneous_savers: bool = False,
                      strip_default_attrs: bool = False, save_debug_info: bool = False,
                      **kwargs) -> dict:
    """`tf.train.export_meta_graph`: the graph, its variables and collections as one dict.

    Written as JSON to `filename` when given (atomically). Collections of variables, tensors,
    operations and plain values are kept by name; anything else is left out with a warning.
    """
    graph = graph if graph is not None else get_default_graph()
    if export_scope:
        raise NotImplementedError("export_meta_graph(export_scope=...) is not supported")
    gd = graph_def if graph_def is not None else as_graph_def(graph)
    keys = collection_list if collection_list is not None else graph.get_all_collection_keys()
    variables: dict = {}
    collections = {}
    for key in keys:
        enc = _encode_collection(key, graph.get_collection(key), variables)
        if enc is not None:
            collections[key] = enc
    from jitflow import __version__
    meta = {"format": _META_FORMAT, "version": META_GRAPH_VERSION,
            "meta_info_def": {"jitflow_version": __version__, "graph_seed": graph.seed,
                              **(meta_info_def if isinstance(meta_info_def, dict) else {})},
            "graph_def": gd,
            "variables": [_variable_record(v) for v in variables.values()],
            "collection_def": collections,
            "saver_def": saver_def if isinstance(saver_def, dict) else None}
    if filename:
        _atomic_write_text(str(filename), json.dumps(meta, indent=1 if as_text else None) + "\n")
    return meta


def import_meta_graph(meta_graph_or_file, clear_devices: bool = False,
                      import_scope: Optional[str] = None, **kwargs):
    """`tf.train.import_meta_graph`: rebuild a meta graph in the default graph.

    Variables come back as `tf.Variable` objects in their collections, other collections as
    the imported tensors and ops. Returns a `tf.train.Saver` over the imported global
    variables (keyed by their original names, so a checkpoint of the exporting program
    restores), or None when the graph has no variables.
    """
    meta = _load_json(meta_graph_or_file, "meta graph")
    _check_format(meta, _META_FORMAT, META_GRAPH_VERSION, "meta graph")
    scope = import_scope or ""
    graph = get_default_graph()
    seed = meta.get("meta_info_def", {}).get("graph_seed")
    if seed is not None and graph.seed is None:
        graph.seed = seed  # random ops then draw what the exporting program drew
    created = import_graph_def(meta["graph_def"], name=scope,
                               return_elements=[n["name"] for n in meta["graph_def"]["node"]])
    ops = {n["name"]: op for n, op in zip(meta["graph_def"]["node"], created)}

    def tensor(name):
        op_name, idx = _split_input(name)
        return ops[op_name].outputs[idx]

    variables = {}
    for rec in meta.get("variables", []):
        variables[rec["variable"]] = variable_from_ops(
            ops[rec["variable"]], ops[rec["initializer"]], tensor(rec["snapshot"]),
            None if rec.get("initial_value") is None else tensor(rec["initial_value"]),
            rec.get("trainable", True))
    for key, items in meta.get("collection_def", {}).items():
        for item in items:
            if "variable" in item:
                graph.add_to_collection(key, variables[item["variable"]])
            elif "tensor" in item:
                graph.add_to_collection(key, tensor(item["tensor"]))
            elif "operation" in item:
                graph.add_to_collection(key, ops[item["operation"]])
            else:
                graph.add_to_collection(key, decode_attr(item["value"]))
    saved = [item["variable"]
             for item in meta.get("collection_def", {}).get(GraphKeys.GLOBAL_VARIABLES, [])
             if "variable" in item]
    if not saved:
        return None
    from jitflow.train import Saver
    if scope:
        return Saver(var_list={name: variables[name] for name in saved})
    return Saver(var_list=[variables[name] for name in saved])
