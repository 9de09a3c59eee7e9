"""DOT pictures: nodes, edges, scope clusters, pruning to fetches, rendering."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import jitflow as tf
from jitflow import viz

HAVE_DOT = shutil.which("dot") is not None
_EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)" \[(.*)\];$')
_NODE = re.compile(r'^\s*"([^"]+)" \[label=')


def parse(text: str):
    """(nodes, {(src, dst): attrs}, cluster labels) of DOT text written by to_dot."""
    nodes, edges, clusters = [], {}, []
    for line in text.splitlines():
        m = _EDGE.match(line)
        if m:
            edges[(m.group(1), m.group(2))] = m.group(3)
            continue
        m = _NODE.match(line)
        if m:
            nodes.append(m.group(1))
        m = re.match(r'^\s*label="([^"]*)"; tooltip="([^"]*)"; style=rounded', line)
        if m:
            clusters.append(m.group(2))
    return nodes, edges, clusters


def _model():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    with tf.name_scope("layer1"):
        w = tf.constant([[1.0], [2.0], [3.0]], name="w")
        h = tf.matmul(x, w, name="h")
        with tf.name_scope("act"):
            a = tf.square(h, name="sq")
    out = tf.add(a, 1.0, name="out")
    unused = tf.negative(x, name="unused")
    return x, h, a, out, unused


def test_whole_graph_has_every_op_edge_and_scope():
    x, h, a, out, unused = _model()
    text = viz.to_dot(tf.get_default_graph())
    assert text.startswith('digraph "jitflow" {') and text.rstrip().endswith("}")
    nodes, edges, clusters = parse(text)
    assert sorted(nodes) == sorted(op.name for op in tf.get_default_graph().get_operations())
    for op in tf.get_default_graph().get_operations():
        for t in op.inputs:
            assert (t.op.name, op.name) in edges
    assert "layer1" in clusters and "layer1/act" in clusters
    assert 'label="float32[?,1]"' in edges[(h.op.name, a.op.name)]
    assert 'label="float32[?,3]"' in edges[("x", "unused")]
    # the nested scope's cluster sits inside the outer one
    outer = text.index('tooltip="layer1";')
    inner = text.index('tooltip="layer1/act";')
    assert outer < inner
    assert viz.to_dot() == text  # None draws the default graph


def test_fetches_draw_only_what_runs_and_feeds_cut_the_graph():
    x, h, a, out, unused = _model()
    nodes, edges, _ = parse(viz.to_dot(out))
    assert "unused" not in nodes and "out" in nodes and "x" in nodes
    assert ("out", "fetch:out:0") in edges
    # feeding h cuts off x and the matmul's inputs
    nodes, edges, _ = parse(viz.to_dot([out], feed_dict={h: None}))
    assert "x" not in nodes and h.op.name not in nodes
    assert (f"feed:{h.name}", a.op.name) in edges
    assert "style=bold" in edges[(f"feed:{h.name}", a.op.name)]


def test_control_edges_are_dashed_and_shapes_optional():
    a = tf.constant(1.0, name="a")
    with tf.control_dependencies([a]):
        b = tf.no_op(name="b")
    _, edges, _ = parse(viz.to_dot(b))
    assert "style=dashed" in edges[("a", "b")]
    _, edges, _ = parse(viz.to_dot(tf.get_default_graph(), show_shapes=False))
    assert all("label=" not in e for e in edges.values())


def test_kernels_need_a_session_and_a_compiling_backend():
    x, h, a, out, unused = _model()
    with pytest.raises(ValueError, match="session=sess"):
        viz.to_dot(out, kernels=True)
    with tf.Session(backend="interpreter") as sess:
        with pytest.raises(NotImplementedError, match="does not fuse"):
            viz.to_dot(out, {x: None}, session=sess, kernels=True)


def test_render_without_dot_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    with pytest.raises(viz.GraphvizNotFoundError, match="apt-get install graphviz"):
        viz.render("digraph g {}", str(tmp_path / "g.svg"))
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match="suffix"):
        viz.render("digraph g {}", str(tmp_path / "noext"))


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz `dot` is not installed")
def test_render_svg_and_png(tmp_path):
    _model()
    text = viz.to_dot(tf.get_default_graph())
    # dot accepts the text as it is
    subprocess.run(["dot", "-Tcanon"], input=text.encode(), check=True, capture_output=True)
    svg = viz.render(text, str(tmp_path / "g.svg"))
    content = open(svg).read()
    assert "<svg" in content and "layer1" in content
    png = viz.render(tf.get_default_graph(), str(tmp_path / "sub" / "g.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(RuntimeError, match="dot failed"):
        viz.render("digraph {", str(tmp_path / "bad.svg"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.svg", "sub"]


def clusters(text: str) -> dict:
    """{cluster label: node names inside it, nested clusters included}."""
    out: dict = {}
    stack: list = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("subgraph "):
            stack.append(None)
        elif s.startswith("label=") and stack and stack[-1] is None:
            stack[-1] = re.match(r'label="([^"]*)"', s).group(1)
            out[stack[-1]] = set()
        elif s == "}" and stack:
            stack.pop()
        else:
            m = _NODE.match(line)
            if m:
                for label in stack:
                    out[label].add(m.group(1))
    return out


def test_kernels_are_drawn_as_clusters_of_fused_ops():
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    y = tf.exp(x * 2.0 + 1.0, name="e")
    s = tf.reduce_sum(y, name="s")
    with tf.Session(backend="numba") as sess:
        text = viz.to_dot([s], {x: None}, session=sess, kernels=True)
    groups = clusters(text)
    kernel = [k for k in groups if k.startswith("kernel 0:")]
    assert len(kernel) == 1
    assert {"mul", "add", "e", "s"} <= groups[kernel[0]]
    region = next(k for k, v in groups.items() if "e" in v and k != kernel[0])
    assert {"mul", "add", "e"} <= groups[region]  # the chain is one fused region
    nodes, edges, _ = parse(text)
    assert len(nodes) == len(set(nodes))
    assert ("feed:x:0", "mul") in edges and ("s", "fetch:s:0") in edges
    if HAVE_DOT:
        subprocess.run(["dot", "-Tcanon"], input=text.encode(), check=True,
                       capture_output=True)
