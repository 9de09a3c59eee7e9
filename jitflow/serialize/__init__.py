"""Reading and writing TensorFlow's file formats, and jitflow's readable JSON graph form.

- `protos`: TensorFlow's message types, declared by jitflow (protobuf is imported on first use);
- `graph_def`, `tf_ops`: graphs as TensorFlow GraphDefs, both ways (`as_graph_def`,
  `import_graph_def`, `write_graph`);
- `meta_graph`: MetaGraphDefs (`export_meta_graph`, `import_meta_graph`);
- `bundle`, `table`, `crc32c`, `tfrecord`, `tensor_util`: checkpoints, TFRecords, TensorProtos;
- `json_graph`: the JSON form of a graph (readable diffs: `as_graph_def_json`).
"""
from __future__ import annotations

import os
from typing import Optional, Union

from jitflow.core.graph import Graph
from jitflow.serialize.json_graph import (_split_input, decode_attr, encode_attr,  # noqa: F401
                                          variable_from_ops)

__all__ = ["as_graph_def", "as_graph_def_json", "import_graph_def", "write_graph",
           "read_graph_def", "export_meta_graph", "import_meta_graph", "variable_from_ops",
           "encode_attr", "decode_attr"]


def as_graph_def(graph: Optional[Graph] = None, add_shapes: bool = False):
    """The graph as a TensorFlow `GraphDef` message (see `jitflow.serialize.graph_def`)."""
    from jitflow.serialize.graph_def import graph_to_proto
    return graph_to_proto(graph, add_shapes=add_shapes)


def as_graph_def_json(graph: Optional[Graph] = None, add_shapes: bool = False) -> dict:
    """The graph as jitflow's JSON-serializable dict: one readable entry per op."""
    from jitflow.serialize.json_graph import as_graph_def as _json
    return _json(graph, add_shapes=add_shapes)


def import_graph_def(graph_def, input_map: Optional[dict] = None, return_elements=None,
                     name: Optional[str] = None, op_dict=None, producer_op_list=None):
    """`tf.import_graph_def` (see `jitflow.serialize.graph_def.import_graph_def`)."""
    from jitflow.serialize.graph_def import import_graph_def as _import
    return _import(graph_def, input_map, return_elements, name, op_dict, producer_op_list)


def read_graph_def(path_or_data):
    """A GraphDef read from a file (binary or text) or from bytes/text; jitflow's JSON graph
    files give their dict."""
    from jitflow.serialize.graph_def import parse_graph_def
    data = path_or_data
    if isinstance(data, os.PathLike) or (isinstance(data, str) and os.path.isfile(data)):
        with open(data, "rb") as f:
            data = f.read()
    if isinstance(data, (bytes, str)) and data.lstrip()[:1] in (b"{", "{"):
        from jitflow.serialize.json_graph import read_graph_def as _json
        return _json(data if isinstance(data, str) else data.decode("utf-8"))
    return parse_graph_def(data)


def write_graph(graph_or_graph_def: Union[Graph, object], logdir: str, name: str,
                as_text: bool = True) -> str:
    """`tf.train.write_graph`: write a GraphDef to `logdir/name` (text format by default,
    binary with `as_text=False`), atomically; returns the path. A JSON graph dict is written
    as JSON."""
    from google.protobuf import text_format

    from jitflow.serialize.json_graph import _atomic_write_text
    from jitflow.serialize.json_graph import write_graph as _json_write
    gd = graph_or_graph_def
    if isinstance(gd, dict):
        return _json_write(gd, logdir, name, as_text)
    if isinstance(gd, Graph):
        gd = as_graph_def(gd)
    if not hasattr(gd, "SerializeToString"):
        raise TypeError(f"write_graph needs a Graph or a GraphDef, got {type(gd).__name__}")
    path = os.path.join(str(logdir), name)
    if as_text:
        _atomic_write_text(path, text_format.MessageToString(gd))
    else:
        _atomic_write_bytes(path, gd.SerializeToString())
    return path


def _atomic_write_bytes(path: str, data: bytes) -> None:
    import tempfile
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def export_meta_graph(filename=None, *args, **kwargs):
    """`tf.train.export_meta_graph` (see `jitflow.serialize.meta_graph`)."""
    from jitflow.serialize.meta_graph import export_meta_graph as _export
    return _export(filename, *args, **kwargs)


def import_meta_graph(meta_graph_or_file, clear_devices: bool = False,
                      import_scope: Optional[str] = None, **kwargs):
    """`tf.train.import_meta_graph` (see `jitflow.serialize.meta_graph`)."""
    from jitflow.serialize.meta_graph import import_meta_graph as _import
    return _import(meta_graph_or_file, clear_devices, import_scope, **kwargs)
