"""MetaGraphDefs: a graph with its variables and collections (the `.meta` file of a checkpoint).

`export_meta_graph` writes TensorFlow's binary (or text) MetaGraphDef: the GraphDef, the
collections (variables as `VariableDef`s in the collections TensorFlow keeps variables in,
tensors and ops by name, numbers and strings as lists) and, for jitflow, the graph seed.
TensorFlow's `import_meta_graph` reads it (graphs whose ops all have a TensorFlow form: see
`jitflow.serialize.graph_def`) and makes its own Saver over the variables.

`import_meta_graph` reads a MetaGraphDef written by TensorFlow or by jitflow (or jitflow 0.1's
JSON meta graph): TensorFlow's save/restore subgraph (the nodes under the scope its saver_def
names, SaveV2, RestoreV2 ..., and what depends on them) is left out, and a jitflow Saver over
the imported global variables is returned.
"""
from __future__ import annotations

import os
import warnings
from typing import Optional

from jitflow.core.graph import Graph, Operation, Tensor, get_default_graph

__all__ = ["export_meta_graph", "import_meta_graph", "read_meta_graph_file",
           "VARIABLE_COLLECTIONS"]

# the collections whose items TensorFlow stores (and restores) as VariableDef messages
VARIABLE_COLLECTIONS = ("variables", "trainable_variables", "local_variables", "model_variables",
                        "moving_average_variables", "global_step", "metric_variables",
                        "concatenated_variables")
_SEED_URL = "type.jitflow/graph_seed"
META_GRAPH_VERSION = "v1.0"


def _variable_def(v):
    from jitflow.serialize import protos
    init = v.initial_value
    return protos.VariableDef(variable_name=v.name, initializer_name=v.initializer.name,
                              snapshot_name=v.value().name,
                              initial_value_name="" if init is None else init.name,
                              trainable=bool(v.trainable), is_resource=False)


def _collection(meta, key: str, items: list) -> None:
    from jitflow.ops.state import Variable
    if not items:
        return
    if all(isinstance(i, Variable) for i in items) and key in VARIABLE_COLLECTIONS:
        meta.collection_def[key].bytes_list.value.extend(
            _variable_def(v).SerializeToString() for v in items)
        return
    if all(isinstance(i, (Tensor, Operation, Variable)) for i in items):
        meta.collection_def[key].node_list.value.extend(
            i.name for i in items)   # a Variable by its tensor's name ("w:0")
        return
    if all(isinstance(i, bool) or not isinstance(i, (int, float, str, bytes)) for i in items):
        pass
    elif all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        meta.collection_def[key].int64_list.value.extend(items)
        return
    elif all(isinstance(i, (int, float)) and not isinstance(i, bool) for i in items):
        meta.collection_def[key].float_list.value.extend(float(i) for i in items)
        return
    elif all(isinstance(i, (str, bytes)) for i in items):
        meta.collection_def[key].bytes_list.value.extend(
            i.encode() if isinstance(i, str) else i for i in items)
        return
    warnings.warn(f"Collection {key!r} holds a {type(items[0]).__name__}, which cannot be "
                  "exported; it is left out of the meta graph.", stacklevel=4)


def export_meta_graph(filename: Optional[str] = None, meta_info_def=None, graph_def=None,
                      saver_def=None, collection_list=None, as_text: bool = False,
                      graph: Optional[Graph] = None, export_scope: Optional[str] = None,
                      clear_devices: bool = False, clear_extraneous_savers: bool = False,
                      strip_default_attrs: bool = False, save_debug_info: bool = False,
                      **kwargs):
    """`tf.train.export_meta_graph`: the MetaGraphDef of the graph, written to `filename`
    (binary, or text format with `as_text=True`) atomically when given."""
    from jitflow import __version__
    from jitflow.serialize import as_graph_def, protos
    graph = graph if graph is not None else get_default_graph()
    if export_scope:
        raise NotImplementedError("export_meta_graph(export_scope=...) is not supported")
    meta = protos.MetaGraphDef()
    info = meta.meta_info_def
    info.meta_graph_version = META_GRAPH_VERSION
    info.tensorflow_version = "1.15.0"   # the TF1 API generation this graph follows
    info.tensorflow_git_version = f"jitflow {__version__}"
    if meta_info_def is not None and hasattr(meta_info_def, "SerializeToString"):
        info.MergeFromString(meta_info_def.SerializeToString())
    if graph.seed is not None:
        info.any_info.type_url = _SEED_URL
        info.any_info.value = str(int(graph.seed)).encode()
    if graph_def is None:
        meta.graph_def.CopyFrom(as_graph_def(graph))
    else:
        meta.graph_def.MergeFromString(graph_def.SerializeToString())
    if saver_def is not None and hasattr(saver_def, "SerializeToString"):
        meta.saver_def.MergeFromString(saver_def.SerializeToString())
    keys = collection_list if collection_list is not None else graph.get_all_collection_keys()
    for key in keys:
        _collection(meta, key, graph.get_collection(key))
    if filename:
        from jitflow.train.saver import _atomic_write
        from google.protobuf import text_format
        data = (text_format.MessageToString(meta).encode() if as_text
                else meta.SerializeToString())
        filename = os.fspath(filename)
        if os.path.dirname(filename):   # TF creates the folders of the file, as write_graph
            os.makedirs(os.path.dirname(filename), exist_ok=True)
        _atomic_write(filename, data)
    return meta


def read_meta_graph_file(filename):
    """A MetaGraphDef from a binary or text file."""
    from google.protobuf import text_format
    from google.protobuf.message import DecodeError

    from jitflow.serialize import protos
    with open(filename, "rb") as f:
        data = f.read()
    meta = protos.MetaGraphDef()
    try:
        meta.ParseFromString(data)
        return meta
    except DecodeError:
        pass
    try:
        text_format.Parse(data.decode("utf-8"), meta, allow_unknown_field=True)
    except (UnicodeDecodeError, text_format.ParseError) as e:
        raise IOError(f"Cannot parse file {filename}: {e}") from None
    return meta


def _without_saver_ops(meta) -> list:
    """The nodes of the meta graph less TensorFlow's saver subgraph (the nodes under the
    scope of saver_def's tensors) and all nodes that depend on it."""
    nodes = list(meta.graph_def.node)
    scope = ""
    if meta.HasField("saver_def") and meta.saver_def.filename_tensor_name:
        scope = meta.saver_def.filename_tensor_name.split("/")[0] + "/"
    if not scope:
        return nodes
    dropped = {n.name for n in nodes if n.name.startswith(scope)}
    changed = True
    while changed:
        changed = False
        for n in nodes:
            if n.name in dropped:
                continue
            if any((s[1:] if s.startswith("^") else s.split(":")[0]) in dropped
                   for s in n.input):
                dropped.add(n.name)
                changed = True
    return [n for n in nodes if n.name not in dropped]


def import_meta_graph(meta_graph_or_file, clear_devices: bool = False,
                      import_scope: Optional[str] = None, **kwargs):
    """`tf.train.import_meta_graph`: rebuild a meta graph in the default graph; returns a
    Saver over its global variables (None when it has none)."""
    from jitflow.serialize import json_graph, protos
    from jitflow.serialize.graph_def import import_graph_def
    src = meta_graph_or_file
    if isinstance(src, dict):
        return json_graph.import_meta_graph(src, clear_devices, import_scope, **kwargs)
    if isinstance(src, (str, os.PathLike)):
        with open(src, "rb") as f:
            head = f.read(1)
        if head == b"{":
            return json_graph.import_meta_graph(os.fspath(src), clear_devices, import_scope,
                                                **kwargs)
        meta = read_meta_graph_file(src)
    elif hasattr(src, "SerializeToString"):
        meta = protos.MetaGraphDef.FromString(src.SerializeToString())
    else:
        raise TypeError(f"import_meta_graph needs a MetaGraphDef or a file name, got "
                        f"{type(src).__name__}")
    graph = get_default_graph()
    info = meta.meta_info_def
    if info.any_info.type_url == _SEED_URL and graph.seed is None:
        graph.seed = int(info.any_info.value.decode())
    gd = protos.GraphDef()
    gd.CopyFrom(meta.graph_def)
    del gd.node[:]
    nodes = _without_saver_ops(meta)
    gd.node.extend(nodes)
    scope = import_scope or ""
    created = import_graph_def(gd, name=scope, return_elements=[n.name for n in nodes],
                               input_map=kwargs.get("input_map"))
    ops = {n.name: op for n, op in zip(nodes, created)}

    def element(name: str):
        op_name, _, idx = name.partition(":")
        op = ops[op_name]
        return op.outputs[int(idx)] if idx else op

    variables = _import_variables(meta, ops, element)
    by_tensor = {v.name[len(scope) + 1 if scope else 0:]: v for v in variables.values()}
    for key, col in meta.collection_def.items():
        kind = col.WhichOneof("kind")
        if kind == "bytes_list" and key in VARIABLE_COLLECTIONS:
            for raw in col.bytes_list.value:
                vd = protos.VariableDef.FromString(raw)
                graph.add_to_collection(key, variables[vd.variable_name])
        elif kind == "node_list":
            for name in col.node_list.value:
                if name in by_tensor:
                    graph.add_to_collection(key, by_tensor[name])
                elif name.split(":")[0] in ops:
                    graph.add_to_collection(key, element(name))
        elif kind == "int64_list":
            for v in col.int64_list.value:
                graph.add_to_collection(key, int(v))
        elif kind == "float_list":
            for v in col.float_list.value:
                graph.add_to_collection(key, float(v))
        elif kind == "bytes_list":
            for v in col.bytes_list.value:
                graph.add_to_collection(key, bytes(v))
    saved = [variables[protos.VariableDef.FromString(raw).variable_name]
             for raw in meta.collection_def["variables"].bytes_list.value] \
        if "variables" in meta.collection_def else []
    if not saved:
        return None
    from jitflow.train import Saver
    if scope:
        return Saver(var_list={v.op.name[len(scope) + 1:]: v for v in saved})
    return Saver(var_list=saved)


def _import_variables(meta, ops: dict, element) -> dict:
    from jitflow.serialize import protos
    from jitflow.serialize.json_graph import variable_from_ops
    out = {}
    for key in VARIABLE_COLLECTIONS:
        if key not in meta.collection_def:
            continue
        for raw in meta.collection_def[key].bytes_list.value:
            vd = protos.VariableDef.FromString(raw)
            if vd.variable_name in out:
                continue
            if vd.is_resource:
                raise NotImplementedError(f"Variable {vd.variable_name} is a resource variable; "
                                          "jitflow imports TF1 reference variables only")
            trainable = vd.trainable or vd.variable_name in _trainable_names(meta)
            out[vd.variable_name] = variable_from_ops(
                element(vd.variable_name), element(vd.initializer_name),
                element(vd.snapshot_name),
                element(vd.initial_value_name) if vd.initial_value_name else None, trainable)
    return out


def _trainable_names(meta) -> set:
    from jitflow.serialize import protos
    if "trainable_variables" not in meta.collection_def:
        return set()
    return {protos.VariableDef.FromString(raw).variable_name
            for raw in meta.collection_def["trainable_variables"].bytes_list.value}

