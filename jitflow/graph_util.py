"""`tf.graph_util`: freezing a graph (variables into constants) and extracting subgraphs.

Both work on GraphDef messages, as TensorFlow's do: `convert_variables_to_constants(sess,
graph_def, output_node_names)` keeps the nodes the outputs need and replaces every variable
among them (a `VariableV2` node, read through its `Identity`) by a `Const` holding its value in
`sess`; the result imports into TensorFlow or jitflow without a checkpoint.
"""
from __future__ import annotations

from typing import Iterable, Optional

__all__ = ["convert_variables_to_constants", "extract_sub_graph", "remove_training_nodes",
           "must_run_on_cpu", "tensor_shape_from_node_def_name"]


def _node_name(s: str) -> str:
    s = s[1:] if s.startswith("^") else s
    return s.split(":")[0]


def _as_proto(graph_def):
    from jitflow.core.graph import Graph
    from jitflow.serialize.graph_def import parse_graph_def
    if isinstance(graph_def, Graph):
        return graph_def.as_graph_def()
    return parse_graph_def(graph_def)


def extract_sub_graph(graph_def, dest_nodes: Iterable[str]):
    """The GraphDef of the nodes `dest_nodes` depend on (data and control), in their order."""
    from jitflow.serialize import protos
    gd = _as_proto(graph_def)
    if isinstance(dest_nodes, str):
        raise TypeError("dest_nodes must be a list of node names")
    by_name = {n.name: n for n in gd.node}
    for d in dest_nodes:
        if _node_name(d) not in by_name:
            raise AssertionError(f"{d} is not in graph")
    keep = set()
    stack = [_node_name(d) for d in dest_nodes]
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        stack.extend(_node_name(i) for i in by_name[name].input)
    out = protos.GraphDef()
    out.versions.CopyFrom(gd.versions)
    if gd.HasField("library"):
        out.library.CopyFrom(gd.library)
    out.node.extend(n for n in gd.node if n.name in keep)
    return out


def convert_variables_to_constants(sess, input_graph_def, output_node_names,
                                   variable_names_whitelist=None,
                                   variable_names_blacklist=None):
    """Freeze: the subgraph of `output_node_names` with its variables as constants."""
    from jitflow.serialize import protos
    from jitflow.serialize.tensor_util import make_tensor_proto
    gd = extract_sub_graph(_as_proto(input_graph_def), output_node_names)
    allow = None if variable_names_whitelist is None else set(variable_names_whitelist)
    deny = set(variable_names_blacklist or ())
    variables = [n.name for n in gd.node if n.op in ("VariableV2", "Variable")
                 and (allow is None or n.name in allow) and n.name not in deny]
    values = dict(zip(variables, sess.run([v + ":0" for v in variables]))) if variables else {}
    out = protos.GraphDef()
    out.versions.CopyFrom(gd.versions)
    if gd.HasField("library"):
        out.library.CopyFrom(gd.library)
    for n in gd.node:
        if n.name in values:
            c = out.node.add(name=n.name, op="Const")
            c.attr["dtype"].CopyFrom(n.attr["dtype"])
            c.attr["value"].tensor.CopyFrom(make_tensor_proto(values[n.name]))
            c.attr["value"].tensor.dtype = n.attr["dtype"].type
        elif n.op in ("Assign", "AssignAdd", "AssignSub") and _node_name(n.input[0]) in values:
            continue   # an initializer of a frozen variable (kept only if an output needs it)
        else:
            out.node.add().CopyFrom(n)
    return out


def remove_training_nodes(input_graph, protected_nodes: Optional[list] = None):
    """Drop `Identity`/`CheckNumerics` nodes (rewiring their consumers), as TensorFlow's."""
    from jitflow.serialize import protos
    gd = _as_proto(input_graph)
    protected = set(protected_nodes or ())
    skip = {n.name: n.input[0] for n in gd.node
            if n.op in ("Identity", "CheckNumerics") and n.name not in protected
            and len(n.input) == 1}

    def resolve(inp: str) -> str:
        ctrl = inp.startswith("^")
        name = _node_name(inp)
        seen = set()
        while name in skip and name not in seen and ":" not in inp:
            seen.add(name)
            inp = skip[name]
            name = _node_name(inp)
        return ("^" + name) if ctrl else inp
    out = protos.GraphDef()
    out.versions.CopyFrom(gd.versions)
    for n in gd.node:
        if n.name in skip:
            continue
        m = out.node.add()
        m.CopyFrom(n)
        del m.input[:]
        m.input.extend(resolve(i) for i in n.input)
    return out


def must_run_on_cpu(node, pin_variables_on_cpu: bool = False) -> bool:
    """jitflow places nothing: every node may run where the backend runs."""
    return False


def tensor_shape_from_node_def_name(graph, input_name: str):
    name = input_name if ":" in input_name else input_name + ":0"
    return graph.get_tensor_by_name(name).shape
