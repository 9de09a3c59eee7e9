"""Write tests/data/control_flow.pb: a GraphDef with while loops and conds as TensorFlow writes
them with control flow v2 (`StatelessWhile`/`StatelessIf` nodes whose bodies are functions of the
GraphDef's library), and control_flow_expected.npz with TensorFlow's outputs (needs TensorFlow:
the `bench` extra).

    python tests/data/make_control_flow.py [OUTDIR]     # default: tests/data

Also control_flow_v1.pb (and its _expected.npz): the same graph without the TensorArray, written
with control flow v2 off (TF1's Enter/Exit/Switch/Merge frames), and rnn_v1.pb: an RNN over TF1
TensorArrays in a TF1-frame loop (`write_rnn_v1`).

The graph (feeds x: float32 [3], n: int32 scalar; what `control_flow_reference` in
tests/serialize/test_control_flow_graph_def.py computes by hand):
- loop/: i from 0 while i < n (at most 6 times): acc = cond(i even, acc * x + 1, acc * 0.5 - x);
  an inner loop adds 0.5 to a scalar j times, j from 0 to i; total += that scalar; a
  TensorArray of n rows gets row i = acc (rows never written read as zeros);
- top/: cond(sum(acc) > 10, acc * 2, acc + total).
"""
from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FEEDS = [(np.array([1.5, -0.5, 2.0], np.float32), 4), (np.array([0.2, 0.1, -1.0], np.float32), 9),
         (np.array([3.0, 1.0, 0.0], np.float32), 0)]
OUTPUTS = ["loop_i", "loop_acc", "loop_total", "loop_rows", "result"]


def _build(tf, tensor_array: bool = True):
    x = tf.placeholder(tf.float32, [3], name="x")
    n = tf.placeholder(tf.int32, [], name="n")

    def body(i, acc, total, ta):
        acc = tf.cond(tf.equal(i % 2, 0), lambda: acc * x + 1.0, lambda: acc * 0.5 - x)
        _, inner = tf.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + 0.5),
                                 [tf.constant(0), tf.constant(0.0)])
        return i + 1, acc, total + inner, ta.write(i, acc) if tensor_array else ta

    with tf.name_scope("loop"):
        ta = tf.TensorArray(tf.float32, size=n, element_shape=[3]) if tensor_array else \
            tf.zeros([n, 3])
        i, acc, total, ta = tf.while_loop(lambda i, a, t, ta: i < n, body,
                                          (tf.constant(0), tf.ones([3]), tf.constant(0.0), ta),
                                          maximum_iterations=6)
    tf.identity(i, name="loop_i")
    tf.identity(acc, name="loop_acc")
    tf.identity(total, name="loop_total")
    tf.identity(ta.stack() if tensor_array else ta, name="loop_rows")
    with tf.name_scope("top"):
        r = tf.cond(tf.reduce_sum(acc) > 10.0, lambda: acc * 2.0, lambda: acc + total)
    tf.identity(r, name="result")


def write_control_flow(out_dir: str = HERE, v2: bool = True) -> tuple:
    """Write the GraphDef and TensorFlow's outputs for FEEDS; returns (path, {key: array}).
    With `v2=False`: control_flow_v1.pb, TF1's frames (without the TensorArray: loop_rows is
    then zeros, TF1's TensorArrays being resources jitflow does not read)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tf
    from tensorflow.python.ops import control_flow_util
    tf.disable_eager_execution()
    saved = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = v2   # only while building: nothing global
    try:
        with tf.Graph().as_default() as g:
            _build(tf, tensor_array=v2)
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = saved
    expected = {}
    with tf.Session(graph=g) as sess:
        for k, (xv, nv) in enumerate(FEEDS):
            vals = sess.run([o + ":0" for o in OUTPUTS], {"x:0": xv, "n:0": nv})
            for name, v in zip(OUTPUTS, vals):
                expected[f"{name}_{k}"] = v
    stem = "control_flow" if v2 else "control_flow_v1"
    path = os.path.join(out_dir, stem + ".pb")
    with open(path, "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    np.savez(os.path.join(out_dir, stem + "_expected.npz"), **expected)
    return path, expected


RNN_X = np.linspace(-1.0, 1.0, 2 * 5 * 3, dtype=np.float32).reshape(5, 2, 3)   # [time, batch, 3]
RNN_W = np.linspace(-0.5, 0.7, 7 * 4, dtype=np.float32).reshape(7, 4)


def write_rnn_v1(out_dir: str = HERE) -> tuple:
    """rnn_v1.pb: a tanh RNN over TensorArrays in a TF1-frame while loop (TensorArrayV3
    scatter, read, write, gather: what dynamic_rnn makes), with rnn_v1_expected.npz."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tf
    from tensorflow.python.ops import control_flow_util
    tf.disable_eager_execution()
    saved = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
    try:
        with tf.Graph().as_default() as g:
            x = tf.placeholder(tf.float32, [None, 2, 3], name="x")
            steps = tf.shape(x)[0]
            inputs = tf.TensorArray(tf.float32, size=steps).unstack(x)
            outputs = tf.TensorArray(tf.float32, size=steps)
            w = tf.constant(RNN_W)

            def body(t, h, out):
                h = tf.tanh(tf.matmul(tf.concat([inputs.read(t), h], 1), w))
                return t + 1, h, out.write(t, h)
            _, h, outputs = tf.while_loop(lambda t, h, o: t < steps, body,
                                          (tf.constant(0), tf.zeros([2, 4]), outputs))
            tf.identity(outputs.stack(), name="out")
            tf.identity(h, name="state")
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = saved
    with tf.Session(graph=g) as sess:
        out, state = sess.run(["out:0", "state:0"], {"x:0": RNN_X})
    path = os.path.join(out_dir, "rnn_v1.pb")
    with open(path, "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    expected = {"out": out, "state": state}
    np.savez(os.path.join(out_dir, "rnn_v1_expected.npz"), **expected)
    return path, expected


if __name__ == "__main__":
    out_dir = sys.argv[1] if len(sys.argv) > 1 else HERE
    for v2 in (True, False):
        print(write_control_flow(out_dir, v2)[0])
    print(write_rnn_v1(out_dir)[0])
