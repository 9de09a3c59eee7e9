"""Pictures of graphs: Graphviz DOT text, and rendering it with the `dot` program.

    from jitflow import viz
    text = viz.to_dot(loss, feed_dict={x: xs})            # the ops `loss` needs
    viz.render(text, "loss.svg")                         # needs Graphviz's `dot`
    viz.to_dot(train_op, feed, session=sess, kernels=True)  # the compiled plan's kernels

Ops are grouped in clusters per name scope; edges carry the tensor's dtype and static shape
(`?` for an unknown dim); control edges are dashed. With `kernels=True` each fused kernel of
the session's compiled plan is drawn as a cluster instead.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Optional, Union

from jitflow.core.graph import Graph, Operation, Tensor, get_default_graph

__all__ = ["to_dot", "render", "GraphvizNotFoundError"]

_STYLE = {
    "Placeholder": 'shape=box, style="rounded,filled", fillcolor="#cfe8ff"',
    "PlaceholderWithDefault": 'shape=box, style="rounded,filled", fillcolor="#cfe8ff"',
    "Const": 'shape=box, style=filled, fillcolor="#eeeeee", fontsize=10',
    "VariableV2": 'shape=cylinder, style=filled, fillcolor="#ffe9b3"',
    "NoOp": 'shape=octagon',
}
_STATE_STYLE = 'shape=box, style=filled, fillcolor="#ffd0c8"'
_DEFAULT_STYLE = 'shape=ellipse'
_FEED_STYLE = 'shape=box, style="rounded,filled,bold", fillcolor="#cfe8ff"'


class GraphvizNotFoundError(RuntimeError):
    """Graphviz's `dot` program is needed to render pictures and is not installed."""


def _q(s: str) -> str:
    """A DOT quoted string."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _tensor_label(t: Tensor) -> str:
    dims = t.shape.as_tuple()
    shape = "[*]" if dims is None else "[" + ",".join("?" if d is None else str(d)
                                                       for d in dims) + "]"
    return f"{t.dtype.name}{shape}"


def _short(op: Operation) -> str:
    """The op's name inside its scope (the cluster around it shows the scope)."""
    return op.name.rsplit("/", 1)[-1]


def _node_style(op: Operation) -> str:
    style = _STYLE.get(op.type)
    if style is not None:
        return style
    if op.op_def.stateful and op.op_def.kind == "state":
        return _STATE_STYLE
    return _DEFAULT_STYLE


def _select(graph_or_fetches, feed_dict):
    """(graph, ops to draw, fed tensors, fetched tensors, plan or None)."""
    if graph_or_fetches is None or isinstance(graph_or_fetches, Graph):
        graph = graph_or_fetches if graph_or_fetches is not None else get_default_graph()
        return graph, graph.get_operations(), [], [], None
    from jitflow.compiler.plan import build_plan
    from jitflow.core.session import _FetchMapper
    graph = _graph_of_fetches(graph_or_fetches)
    mapper = _FetchMapper(graph, graph_or_fetches)
    feeds = []
    for k in (feed_dict or {}):
        if hasattr(k, "_as_graph_element") and not isinstance(k, (Tensor, Operation)):
            k = k._as_graph_element()
        feeds.append(graph.as_graph_element(k, allow_tensor=True, allow_operation=False))
    plan = build_plan(graph, mapper.tensors, mapper.targets, feeds)
    return graph, list(plan.ops), list(plan.feeds), list(mapper.tensors), plan


def _graph_of_fetches(fetches) -> Graph:
    stack = [fetches]
    while stack:
        f = stack.pop()
        if isinstance(f, dict):
            stack.extend(f.values())
        elif isinstance(f, (list, tuple)):
            stack.extend(f)
        elif isinstance(getattr(f, "graph", None), Graph):
            return f.graph
    return get_default_graph()


def to_dot(graph_or_fetches=None, feed_dict: Optional[dict] = None, session=None,
           kernels: bool = False, show_shapes: bool = True, name: str = "jitflow") -> str:
    """Graphviz DOT text of a graph, or of the subgraph that `fetches` need.

    `graph_or_fetches`: a Graph (None: the default graph) draws every op; anything that
    `Session.run` accepts as fetches draws only the ops that run (stopping at the tensors
    in `feed_dict`, whose values do not matter, only its keys). `kernels=True` (with
    `session`) groups the ops into the fused kernels of the session's compiled plan.
    """
    if kernels:
        if session is None or graph_or_fetches is None or isinstance(graph_or_fetches, Graph):
            raise ValueError("to_dot(kernels=True) needs fetches and the session that "
                             "compiles them: to_dot(fetches, feed_dict, session=sess, "
                             "kernels=True)")
        ops, feeds, fetched, groups = _kernel_groups(session, graph_or_fetches, feed_dict)
    else:
        _graph, ops, feeds, fetched, _plan = _select(graph_or_fetches, feed_dict)
        groups = None
    drawn = set(ops)
    fed = set(feeds)
    lines = [f"digraph {_q(name)} {{",
             "  graph [rankdir=TB, compound=true, fontname=Helvetica, fontsize=11];",
             "  node [fontname=Helvetica, fontsize=11];",
             "  edge [fontname=Helvetica, fontsize=9, color=\"#555555\"];"]
    label_of = _short if groups is None else (lambda op: op.name)
    node_lines = {op: f"{_q(op.name)} [label={_q(label_of(op) + chr(10) + op.type)}, "
                      f"tooltip={_q(op.name)}, {_node_style(op)}];" for op in ops}
    if groups is not None:
        grouped: set = set()
        for i, (kname, kops, parts) in enumerate(groups):
            lines.append(f"  subgraph {_q(f'cluster_kernel_{i}')} {{")
            lines.append(f"    label={_q(kname)}; style=\"rounded,filled\"; "
                         "fillcolor=\"#f4f8ff\"; color=\"#4a78c2\";")
            for j, (pname, pops) in enumerate(parts):
                lines.append(f"    subgraph {_q(f'cluster_kernel_{i}_{j}')} {{")
                lines.append(f"      label={_q(pname)}; style=\"rounded,filled\"; "
                             "fillcolor=\"#dde9ff\"; color=\"#7a9ad2\";")
                for op in pops:
                    if op in node_lines and op not in grouped:
                        lines.append("      " + node_lines[op])
                        grouped.add(op)
                lines.append("    }")
            for op in kops:
                if op in node_lines and op not in grouped:
                    lines.append("    " + node_lines[op])
                    grouped.add(op)
            lines.append("  }")
        lines.extend("  " + node_lines[op] for op in ops if op not in grouped)
    else:
        _emit_scopes(lines, ops, node_lines)
    # feeds that come from ops outside the drawn set appear as feed nodes
    feed_nodes = {}
    for t in feeds:
        if t.op not in drawn:
            fid = f"feed:{t.name}"
            feed_nodes[t] = fid
            lines.append(f"  {_q(fid)} [label={_q('feed ' + t.name)}, {_FEED_STYLE}];")
    for op in ops:
        for t in op.inputs:
            if t in feed_nodes:
                src = feed_nodes[t]
            elif t.op in drawn:
                src = t.op.name
            else:
                continue
            label = f", label={_q(_tensor_label(t))}" if show_shapes else ""
            extra = ", style=bold" if t in fed else ""
            lines.append(f"  {_q(src)} -> {_q(op.name)} [tooltip={_q(t.name)}{label}{extra}];")
        for c in op._control_inputs:
            if c in drawn:
                lines.append(f"  {_q(c.name)} -> {_q(op.name)} [style=dashed, arrowhead=odot];")
    for t in fetched:
        fid = f"fetch:{t.name}"
        lines.append(f"  {_q(fid)} [label={_q('fetch ' + t.name)}, shape=plaintext];")
        src = feed_nodes.get(t, t.op.name)
        label = f" [label={_q(_tensor_label(t))}]" if show_shapes else ""
        lines.append(f"  {_q(src)} -> {_q(fid)}{label};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _emit_scopes(lines: list, ops: list, node_lines: dict) -> None:
    """Nested clusters, one per name scope, in the order scopes first appear."""
    tree: dict = {"ops": [], "children": {}}
    for op in ops:
        node = tree
        parts = op.name.split("/")[:-1]
        for p in parts:
            node = node["children"].setdefault(p, {"ops": [], "children": {}})
        node["ops"].append(op)
    counter = [0]

    def emit(node, path: str, indent: str) -> None:
        for op in node["ops"]:
            lines.append(indent + node_lines[op])
        for part, child in node["children"].items():
            sub = f"{path}/{part}" if path else part
            counter[0] += 1
            lines.append(f"{indent}subgraph {_q(f'cluster_{counter[0]}')} {{")
            lines.append(f"{indent}  label={_q(part)}; tooltip={_q(sub)}; style=rounded; "
                         "color=\"#999999\";")
            emit(child, sub, indent + "  ")
            lines.append(indent + "}")

    emit(tree, "", "  ")


def _kernel_groups(session, fetches, feed_dict) -> tuple:
    """(ops, feeds, fetched, kernels) for `fetches` as the session's backend compiles them.

    Each kernel is (label, its ops, [(label, ops) per fused region]): a fused region is one
    loop nest, reduction, matmul or variable update of the generated code, with every op
    inlined into it. Ops that run through their NumPy reference stay outside the clusters.
    """
    import numpy as np
    feed_keys = list(feed_dict or {})
    spec = session.make_callable(fetches, feed_keys).spec
    plan, ex = spec.plan, spec.executable
    if not hasattr(ex, "sources") or not hasattr(ex, "steps"):
        raise NotImplementedError(f"The {session.backend!r} backend does not fuse ops into "
                                  "kernels; use a compiling backend (Session(backend="
                                  "'numba')) to draw kernels")
    given = {t: feed_dict[k] for t, k in zip(spec.feeds, feed_keys)}
    values = []
    for t in plan.feeds:
        v = given.get(t)
        if v is None:
            dims = t.shape.as_tuple() or ()
            v = np.zeros([d if d is not None else 2 for d in dims], t.dtype.as_numpy_dtype)
        values.append(np.asarray(v, dtype=t.dtype.as_numpy_dtype))
    compiled = {id(seg): c for seg, c in ex.sources(values, session._store)}
    by_name = {op.name: op for op in plan.ops}
    kernels = []
    for seg in ex.steps:
        if not hasattr(seg, "ops"):
            continue  # a reference step
        c = compiled.get(id(seg))
        parts = []
        if c is not None:
            k = c.kernel
            for n, stmt in enumerate(k.stmts):
                idx = {stmt.op}
                stack = [getattr(stmt, "expr", None)]
                while stack:
                    e = stack.pop()
                    if e is None:
                        continue
                    if hasattr(e, "fn") and hasattr(e, "op"):   # an ir.Apply
                        idx.add(e.op)
                    stack.extend(getattr(e, "args", ()) or ())
                ops_ = [by_name[k.op_names[i]] for i in sorted(idx)
                        if k.op_names[i] in by_name]
                what = type(stmt).__name__.lower()
                parts.append((f"{what} {n}: {k.op_names[stmt.op]}", ops_))
        label = f"kernel {len(kernels)}: {len(seg.ops)} ops" + ("" if c is not None
                                                               else " (not compiled yet)")
        kernels.append((label, list(seg.ops), parts))
    return list(plan.ops), list(plan.feeds), list(spec.mapper.tensors), kernels


def render(dot_or_graph: Union[str, Graph, object], path: str,
           format: Optional[str] = None) -> str:
    """Render DOT text (or a graph / fetches, drawn with `to_dot`) to an image file.

    The format comes from the file suffix (`.svg`, `.png`, `.pdf`) unless given. Needs
    Graphviz's `dot` program; raises GraphvizNotFoundError saying how to install it.
    Returns `path`.
    """
    text = dot_or_graph if isinstance(dot_or_graph, str) else to_dot(dot_or_graph)
    fmt = format or os.path.splitext(path)[1].lstrip(".").lower()
    if not fmt:
        raise ValueError(f"Cannot tell the image format from {path!r}; give a suffix "
                         "(.svg, .png, .pdf) or format=")
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizNotFoundError(
            "Rendering needs Graphviz's `dot` program, which is not installed. Install it "
            "with `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` "
            "(macOS) or `conda install graphviz`; or write the DOT text from to_dot() to a "
            "file and render it elsewhere.")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix="." + fmt)
    os.close(fd)
    try:
        proc = subprocess.run([exe, f"-T{fmt}", "-o", tmp], input=text.encode("utf-8"),
                              capture_output=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"dot failed to render {path!r} (exit {proc.returncode}): "
                               f"{proc.stderr.decode(errors='replace').strip()}")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
