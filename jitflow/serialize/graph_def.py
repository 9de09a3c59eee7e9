"""Graphs as TensorFlow's `GraphDef` protocol buffers, both ways.

`graph_to_proto(graph)` writes each op as the node TensorFlow knows (through the converters in
`jitflow.serialize.tf_ops`), so TensorFlow imports the result; an op without a TensorFlow form
(gradient helpers, control-flow regions, ...) is written as a `jitflow.<type>` node whose
attributes are jitflow's own, JSON-encoded in the `_jitflow_attrs` attribute: jitflow reads it
back exactly, TensorFlow refuses it by name.

`import_graph_def(graph_def, ...)` reads a GraphDef written by TensorFlow or by jitflow (binary,
text or a GraphDef object) into the default graph: nodes in dependency order, each through its
converter, so every shape and dtype rule runs again. An op type jitflow does not know raises
ValueError naming it and the nodes that use it.
"""
from __future__ import annotations

import contextlib
import json
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Graph, Operation, Tensor, get_default_graph
from jitflow.serialize import functions as _functions  # noqa: F401  (While/If converters)
from jitflow.serialize import tf_ops
from jitflow.version import GRAPH_DEF_VERSION
from jitflow.serialize.tensor_util import (dtype_to_enum, enum_to_dtype, shape_from_proto,
                                           shape_proto)

__all__ = ["graph_to_proto", "import_graph_def", "parse_graph_def", "node_def",
           "GRAPH_DEF_PRODUCER", "NATIVE_PREFIX"]

GRAPH_DEF_PRODUCER = GRAPH_DEF_VERSION  # TF 1.15's attribute sets: what is written here
NATIVE_PREFIX = "jitflow."
NATIVE_ATTR = "_jitflow_attrs"


def tensor_name(t: Tensor) -> str:
    """How a GraphDef names a tensor as an input: "op" for output 0, "op:1" otherwise."""
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


class _Writer:
    """Writes ops as NodeDefs into `gd` (a GraphDef, or the scratch nodes of a graph function:
    see `jitflow.serialize.functions`, which makes a child writer per function)."""

    def __init__(self, graph: Graph, add_shapes: bool, parent: "Optional[_Writer]" = None,
                 rename: Optional[dict] = None, local_ops=None) -> None:
        from jitflow.serialize import protos
        self.protos = protos
        self.graph = graph
        self.gd = protos.GraphDef()
        self.gd.versions.producer = GRAPH_DEF_PRODUCER
        self.add_shapes = add_shapes
        self.parent = parent
        # tensors written under another name: a function's inputs (its arguments)
        self.rename: dict = rename if rename is not None else {}
        # the ops of the function being written (None: the graph): control inputs on other
        # ops are left out (a function cannot name nodes outside it)
        self.local_ops = local_ops
        # the library and the export's caches, shared with the parent writer
        self.library = parent.library if parent is not None else self.gd.library
        self.shared: dict = parent.shared if parent is not None else {}
        self.names = {op.name for op in graph.get_operations()}
        self._pending: list = []
        self._written = None
        self._op = None

    # attribute value makers
    def type(self, dtype):
        return self.protos.AttrValue(type=dtype_to_enum(dtype))

    def type_list(self, dts):
        v = self.protos.AttrValue()
        v.list.type.extend(dtype_to_enum(d) for d in dts)
        return v

    def i(self, n):
        return self.protos.AttrValue(i=int(n))

    def f(self, x):
        return self.protos.AttrValue(f=float(x))

    def b(self, x):
        return self.protos.AttrValue(b=bool(x))

    def s(self, x):
        return self.protos.AttrValue(s=x.encode() if isinstance(x, str) else bytes(x))

    def ints(self, xs):
        v = self.protos.AttrValue()
        v.list.SetInParent()
        v.list.i.extend(int(x) for x in xs)
        return v

    def shape(self, shape):
        v = self.protos.AttrValue()
        shape_proto(shape, v.shape)
        return v

    def tensor(self, tp):
        v = self.protos.AttrValue()
        v.tensor.CopyFrom(tp)
        return v

    def input_name(self, t: Tensor) -> str:
        name = self.rename.get(t)
        return tensor_name(t) if name is None else name

    def control_names(self, op: Operation) -> list:
        return ["^" + c.name for c in op.control_inputs
                if self.local_ops is None or c in self.local_ops]

    def extra_node(self, base: str, op_type: str, inputs: list, attrs: Optional[dict] = None):
        """Add a node of no op of the graph (a Const, a list op of a loop's trace ...) named
        `base` or `base_<n>`; returns its name."""
        node = self.gd.node.add(name=self._fresh(base), op=op_type)
        node.input.extend(inputs)
        for k, v in (attrs or {}).items():
            node.attr[k].CopyFrom(v)
        self._pending.append(node)
        return node.name

    def const(self, base: str, value: np.ndarray) -> str:
        """An extra Const node holding `value`; returns its name."""
        from jitflow.serialize.tensor_util import make_tensor_proto
        value = np.asarray(value)
        dt = _dtypes.string if value.dtype == object else _dtypes.as_dtype(value.dtype)
        return self.extra_node(base, "Const", [], {
            "dtype": self.type(dt), "value": self.tensor(make_tensor_proto(value, dt))})

    def types(self, dts):
        return self.type_list(dts)

    def shapes(self, shapes):
        v = self.protos.AttrValue()
        v.list.SetInParent()
        for s in shapes:
            shape_proto(s, v.list.shape.add())
        return v

    def func(self, name: str):
        v = self.protos.AttrValue()
        v.func.name = name
        return v

    def _fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self.names:
            name = f"{base}_{i}"
            i += 1
        self.names.add(name)
        return name

    def const_input(self, op: Operation, what: str, value: np.ndarray) -> str:
        """Add a Const node holding a static input of `op`; returns its name."""
        return self.const(f"{op.name}/{what}", value)

    def node(self, op: Operation, tf_type: str, inputs=None, attrs=None,
             data_inputs: bool = True) -> None:
        """Write `op` as a TensorFlow node (inputs: its data inputs unless given)."""
        n = self.gd.node.add(name=op.name, op=tf_type)
        n.input.extend(inputs if inputs is not None else [self.input_name(t) for t in op.inputs])
        n.input.extend(self.control_names(op))
        for k, v in (attrs or {}).items():
            n.attr[k].CopyFrom(v)
        colocation = op.attrs.get("_class")
        if colocation and "_class" not in n.attr and self.local_ops is None:
            # ["loc:@var"]: TF1's colocation groups (not in functions, whose nodes cannot
            # name the graph's)
            n.attr["_class"].list.s.extend(
                x.encode() if isinstance(x, str) else bytes(x) for x in colocation)
        self._written = n

    def write(self, op: Operation) -> None:
        self._pending: list = []
        self._written = None
        conv = tf_ops.EXPORTERS.get(op.type)
        ok = conv(self, op) if conv is not None else False
        if ok is False:
            for extra in self._pending:   # undo the Const nodes of a declined conversion
                self.gd.node.remove(extra)
                self.names.discard(extra.name)
            if self._written is not None:
                self.gd.node.remove(self._written)
            self._native(op)
        if self.add_shapes and self.local_ops is None:
            n = self.gd.node[-1]
            v = n.attr["_output_shapes"]
            for t in op.outputs:
                shape_proto(t.shape, v.list.shape.add())

    def _native(self, op: Operation) -> None:
        from jitflow.serialize.json_graph import encode_attr
        n = self.gd.node.add(name=op.name, op=NATIVE_PREFIX + op.type)
        n.input.extend(self.input_name(t) for t in op.inputs)
        n.input.extend(self.control_names(op))
        attrs = {k: encode_attr(v, f"attr '{k}' of op '{op.name}' ({op.type})")
                 for k, v in op.attrs.items()}
        n.attr[NATIVE_ATTR].s = json.dumps(attrs, sort_keys=True).encode()
        n.attr["_output_types"].list.type.extend(
            dtype_to_enum(t.dtype) if t.dtype.name in ("float16", "float32", "float64", "int8",
                                                       "int16", "int32", "int64", "uint8",
                                                       "uint16", "bool", "string") else 21
            for t in op.outputs)


def graph_to_proto(graph: Optional[Graph] = None, add_shapes: bool = False, ops=None):
    """The GraphDef proto of `graph` (or of the listed ops of it, in graph order).

    The ops of control-flow bodies (while loops, cond branches and their gradients) are
    written as the graph functions of the GraphDef's library, which the `While`/`If` nodes
    call (see `jitflow.serialize.functions`); what only a body can compute (it reads a loop
    variable) is left out of the graph's nodes.
    """
    from jitflow.serialize.functions import graph_level_ops
    graph = graph if graph is not None else get_default_graph()
    w = _Writer(graph, add_shapes)
    keep = graph_level_ops(graph)
    for op in (ops if ops is not None else graph.get_operations()):
        if op in keep:
            w.write(op)
    return w.gd


# -- reading --------------------------------------------------------------------------------------
def parse_graph_def(data):
    """A GraphDef proto from a proto object (ours or TensorFlow's), binary bytes, or the text
    format (str, or bytes that do not parse as binary)."""
    from google.protobuf import text_format
    from google.protobuf.message import DecodeError

    from jitflow.serialize import protos
    cls = protos.GraphDef
    if isinstance(data, cls):
        return data
    if hasattr(data, "SerializeToString") and hasattr(data, "node"):
        return cls.FromString(data.SerializeToString())
    if isinstance(data, str):
        gd = cls()
        text_format.Parse(data, gd, allow_unknown_field=True)
        return gd
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        try:
            return cls.FromString(data)
        except DecodeError:
            try:
                gd = cls()
                text_format.Parse(data.decode("utf-8"), gd, allow_unknown_field=True)
                return gd
            except (UnicodeDecodeError, text_format.ParseError) as e:
                raise ValueError(f"Not a GraphDef (neither binary nor text format): "
                                 f"{e}") from None
    raise TypeError(f"graph_def must be a GraphDef, got {type(data).__name__}")


class NodeImportError(ValueError):
    """A node of a GraphDef that jitflow cannot build (inside the import only: it leaves
    `import_graph_def` as a plain ValueError)."""


class _Reader:
    def __init__(self, graph: Graph, prefix: str, library: Optional[dict] = None) -> None:
        self.graph = graph
        self.prefix = prefix
        self.library = library if library is not None else {}   # function name -> FunctionDef
        self.node = None
        self.inputs: list = []

    @property
    def name(self) -> str:
        return self.prefix + self.node.name

    def unsupported(self, what: str):
        raise NodeImportError(f"graph_def node '{self.node.name}' (op {self.node.op}): {what} is "
                              "not supported by jitflow")

    def attr(self, key: str, default=None):
        if key not in self.node.attr:
            if default is None:
                self.unsupported(f"missing attribute '{key}'")
            return default
        v = self.node.attr[key]
        kind = v.WhichOneof("value")
        if kind == "s":
            return v.s.decode("utf-8", "surrogateescape")
        if kind == "list":
            lst = v.list
            for field in ("i", "f", "s", "b", "type"):
                if len(getattr(lst, field)):
                    return list(getattr(lst, field))
            return []
        if kind is None:
            return default
        return getattr(v, kind)

    def dtype_attr(self, key: str, default=None):
        if key not in self.node.attr:
            if default is None:
                self.unsupported(f"missing attribute '{key}'")
            return default
        return enum_to_dtype(self.node.attr[key].type, f"node {self.node.name}")

    def shape_attr(self, key: str):
        return shape_from_proto(self.node.attr[key].shape)

    def static_value(self, index: int, what: str):
        from jitflow.ops._array_args import get_static_value
        v = get_static_value(self.inputs[index])
        if v is None:
            self.unsupported(f"input {index} ('{what}') that is not a constant")
        return v

    def static_ints(self, index: int, what: str) -> list:
        return [int(x) for x in np.reshape(self.static_value(index, what), -1)]

    def create(self, op_type: str, inputs, attrs) -> list:
        return list(self.graph.create_op(op_type, list(inputs), attrs, name=self.name).outputs)

    @contextlib.contextmanager
    def scope(self):
        with self.graph.name_scope(self.name + "/"):
            yield


def _sorted_nodes(nodes: list) -> list:
    """The nodes in an order where every input comes first (Kahn's algorithm, stable)."""
    by_name = {n.name: n for n in nodes}
    deps = {}
    users: dict = {}
    for n in nodes:
        ds = set()
        for s in n.input:
            src = s[1:] if s.startswith("^") else s.split(":")[0]
            if src in by_name and src != n.name:
                ds.add(src)
        deps[n.name] = ds
        for d in ds:
            users.setdefault(d, []).append(n.name)
    ready = [n.name for n in nodes if not deps[n.name]]
    order = []
    waiting = {k: len(v) for k, v in deps.items()}
    i = 0
    while i < len(ready):
        name = ready[i]
        i += 1
        order.append(by_name[name])
        for u in users.get(name, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    if len(order) != len(nodes):
        stuck = sorted(k for k, v in waiting.items() if v > 0)[:5]
        raise ValueError(f"graph_def has a cycle (or a node feeding itself) through "
                         f"{', '.join(stuck)}: jitflow imports acyclic graphs only")
    return order


def import_graph_def(graph_def, input_map: Optional[dict] = None, return_elements=None,
                     name: Optional[str] = None, op_dict=None, producer_op_list=None):
    """`tf.import_graph_def`: add the nodes of `graph_def` to the default graph.

    `graph_def` is a GraphDef (jitflow's or TensorFlow's message), its binary or text
    serialization, or jitflow's JSON graph dict. Nodes are created under the name scope
    `name` (default "import"). `input_map` maps tensor names of `graph_def` ("x:0" or "x") to
    tensors of the default graph that replace them; `return_elements` lists names ("op" for an
    Operation, "op:0" for a Tensor) to return.
    """
    import os

    from jitflow.serialize import json_graph
    if isinstance(graph_def, os.PathLike) or (isinstance(graph_def, str) and "\n" not in graph_def
                                              and os.path.isfile(graph_def)):
        with open(graph_def, "rb") as f:   # a file name (jitflow's JSON, binary or text proto)
            graph_def = f.read()
        if graph_def.lstrip().startswith(b"{"):
            graph_def = graph_def.decode("utf-8")
    if isinstance(graph_def, dict) or (isinstance(graph_def, str)
                                       and graph_def.lstrip().startswith("{")):
        return json_graph.import_graph_def(graph_def, input_map, return_elements, name)
    gd = parse_graph_def(graph_def)
    nodes = list(gd.node)
    library = {f.signature.name: f for f in gd.library.function}
    from jitflow.serialize import frames
    if frames.has_frames(nodes):   # TF1's loop and cond frames, read as While/If nodes
        from jitflow.serialize import protos
        try:
            nodes = frames.functionalize(nodes, protos, library)
        except (ValueError, KeyError, IndexError) as e:
            raise ValueError(f"graph_def: its TF1 control flow (Enter/Exit/Switch/Merge "
                             f"frames) could not be read: {e}") from None
    known = set(tf_ops.IMPORTERS)
    from jitflow.ops.registry import REGISTRY
    unknown: dict = {}
    for n in nodes:
        ok = n.op in known or (n.op.startswith(NATIVE_PREFIX)
                               and n.op[len(NATIVE_PREFIX):] in REGISTRY)
        if not ok:
            unknown.setdefault(n.op, []).append(n.name)
    if unknown:
        parts = [f"'{t}' (node '{ns[0]}'" + (f" and {len(ns) - 1} more" if len(ns) > 1 else "")
                 + ")" for t, ns in sorted(unknown.items())]
        raise ValueError("graph_def contains op types jitflow does not support: "
                         + ", ".join(parts))
    graph = get_default_graph()
    mapping = json_graph._normalize_input_map(input_map, graph)
    names = {n.name for n in nodes}
    missing = [k for k in mapping if k.rpartition(":")[0] not in names]
    if missing:
        raise ValueError(f"Attempted to map inputs that were not found in graph_def: "
                         f"[{', '.join(missing)}]")
    prefix_name = "import" if name is None else name
    with graph.name_scope(prefix_name or None) as prefix:
        with graph.name_scope(None):
            try:
                created = _create(graph, _sorted_nodes(nodes), prefix, mapping, library)
            except NodeImportError as e:   # what callers see is a plain ValueError
                raise ValueError(str(e)) from None
    if return_elements is None:
        return None
    out = []
    for r in return_elements:
        op_name, idx = json_graph._split_input(r) if ":" in r else (r, None)
        entry = created.get(op_name)
        if entry is None:
            raise ValueError(f"Requested return_element {r!r} not found in graph_def.")
        op, outputs = entry
        if idx is None:
            out.append(op)
        elif idx >= len(outputs):
            raise ValueError(f"Requested return_element {r!r} not found in graph_def: node "
                             f"'{op_name}' has {len(outputs)} outputs.")
        else:
            out.append(mapping.get(f"{op_name}:{idx}", outputs[idx]))
    return out


def _create(graph: Graph, nodes: list, prefix: str, mapping: dict,
            library: Optional[dict] = None) -> dict:
    """Build the nodes; returns {node name: (Operation, [output tensors])}. `library` maps
    function names to the FunctionDefs control-flow nodes call."""
    from jitflow.serialize.json_graph import _split_input as _split
    from jitflow.serialize.json_graph import decode_attr
    created: dict = {}
    reader = _Reader(graph, prefix, library)
    for n in nodes:
        inputs, controls = [], []
        for s in n.input:
            src, idx = _split(s)
            if idx is None:
                controls.append(created[src][0])
                continue
            mapped = mapping.get(f"{src}:{idx}")
            if mapped is not None:
                inputs.append(mapped)
                continue
            if src not in created:
                raise ValueError(f"Node '{n.name}' has an input from '{src}', which is not in "
                                 "graph_def")
            outs = created[src][1]
            if idx >= len(outs):
                raise ValueError(f"Node '{n.name}' reads output {idx} of '{src}', which has "
                                 f"{len(outs)} outputs")
            inputs.append(outs[idx])
        reader.node, reader.inputs = n, inputs
        before = len(graph.get_operations())
        with graph.control_dependencies(controls or None) if controls else \
                contextlib.nullcontext():
            marked = _functions.import_marked(graph, n, inputs, prefix + n.name)
            if marked is not None:
                op, outputs = marked, list(marked.outputs)
            elif n.op.startswith(NATIVE_PREFIX):
                attrs = json.loads(n.attr[NATIVE_ATTR].s.decode()) if NATIVE_ATTR in n.attr \
                    else {}
                op = graph.create_op(n.op[len(NATIVE_PREFIX):], inputs,
                                     {k: decode_attr(v) for k, v in attrs.items()},
                                     name=prefix + n.name)
                outputs = list(op.outputs)
            else:
                try:
                    result = tf_ops.IMPORTERS[n.op](reader, n)
                except NodeImportError:
                    raise
                except (ValueError, TypeError, errors.OpError) as e:
                    raise ValueError(f"graph_def node '{n.name}' (op {n.op}): {e}") from None
                outputs = list(result) if result is not None else []
                op = _op_of(graph, prefix + n.name, outputs, before)
        created[n.name] = (op, outputs)
    return created


def _op_of(graph: Graph, full_name: str, outputs: list, before: int) -> Operation:
    """The op a node became: the one named as the node, else the last one it created."""
    try:
        return graph.get_operation_by_name(full_name)
    except KeyError:
        pass
    if outputs:
        return outputs[0].op
    ops = graph.get_operations()
    return ops[-1] if len(ops) > before else graph.create_op("NoOp", [], name=full_name)


def node_def(op: Operation):
    """The NodeDef `op` is written as in a GraphDef (`Operation.node_def`, `str(op)`)."""
    w = _Writer(op.graph, add_shapes=False)
    w.write(op)
    return w.gd.node[-1]   # the Const nodes of static inputs, if any, come before it
