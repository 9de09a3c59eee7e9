"""Generated source: what it looks like, what it imports, the export layout, debug output."""
from __future__ import annotations

import re

import numpy as np
import pytest

import jitflow as tf
from jitflow.backends.numba_cpu.export_source import export_source


def _chain():
    x = tf.placeholder(tf.float32, [None], name="x")
    w = tf.constant(np.float32(0.7))
    b = tf.constant(np.float32(0.1))
    y = tf.sigmoid(x * w + b) * tf.tanh(x) - tf.exp(-x * x) + 0.5 * x
    return x, y


@pytest.mark.parametrize("mode", ["sync", "numba"])
def test_fused_chain_is_one_vectorizable_loop_without_libm_calls(mode, monkeypatch):
    """The whole chain is one loop; its math is jitflow's own (inlined, vectorizable), never a
    scalar libm call, on the LLVM path and in the Numba kernel alike."""
    monkeypatch.setenv("JITFLOW_COMPILE", mode)
    x, y = _chain()
    xv = np.linspace(-3, 3, 64).astype(np.float32)
    with tf.Session() as sess:
        out = sess.run(y, {x: xv})
        src = sess.inspect(y, {x: xv})
        spec = next(iter(sess._specs.values()))
        (c,) = spec.executable.kernels[spec.executable.steps[0]].compiled.values()
        if mode == "numba":
            llvm = "\n".join(c.fn.inspect_llvm().values())
        else:
            from jitflow.backends.numba_cpu import llvmjit
            assert c.level == "opt"
            code = llvmjit.info(c.run)
            llvm = llvmjit.optimized_ir(code.llvm_ir, code.libraries)
            assert re.search(r"fmul <\d+ x float>", llvm), "the loop did not vectorize"
    assert src.count("for ") == 1
    assert "# Sigmoid" in src and "# Tanh" in src and "# Exp" in src
    for name in ("@expf", "@tanhf", "@llvm.exp.", "@exp(", "@tanh("):
        assert f"call float {name}" not in llvm and f"call double {name}" not in llvm
    z = xv * np.float32(0.7) + np.float32(0.1)
    want = 1 / (1 + np.exp(-z)) * np.tanh(xv) - np.exp(-xv * xv) + 0.5 * xv
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-6)


def test_generated_module_is_self_contained():
    x, y = _chain()
    with tf.Session() as sess:
        exp = export_source(sess, y, [x], [np.ones(5, np.float32)])
    src = exp["source"]
    imports = set(re.findall(r"^(?:import|from) ([\w.]+)", src, re.M))
    assert imports <= {"math", "numba", "numpy", "jitflow.backends.numba_cpu"}, imports
    assert exp["entry"] == "kernel"
    assert exp["layout"]["inputs"] == [("feed", "x:0")]
    assert exp["layout"]["results"] == [y.name]
    namespace: dict = {}
    exec(compile(src, "<export>", "exec"), namespace)
    (r,) = namespace["kernel"]((np.ones(5, np.float32),), ())
    with tf.Session() as sess:
        np.testing.assert_array_equal(r, sess.run(y, {x: np.ones(5, np.float32)}))


def test_export_layout_names_variables_and_constants():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.Variable(np.ones((2, 3), np.float32), name="w")
    c = tf.constant(np.arange(3, dtype=np.float32), name="c")
    y = tf.matmul(x, w) + c
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        exp = export_source(sess, y, [x])
    lay = exp["layout"]
    assert lay["variables"] == ["w"]
    assert ("const", "c") in lay["inputs"] and ("feed", "x:0") in lay["inputs"]
    np.testing.assert_array_equal(exp["constants"]["c"], np.arange(3))


def test_debug_levels_print_compiles_plan_and_source(monkeypatch, capsys):
    monkeypatch.setenv("JITFLOW_DEBUG", "4")
    x = tf.placeholder(tf.float32, [None], name="dbg_x")
    y = tf.abs(x * 3.25 - 1.0)
    with tf.Session() as sess:
        sess.run(y, {x: np.ones(3, np.float32)})
        sess.run(y, {x: np.ones(3, np.float32)})
    err = capsys.readouterr().err
    assert re.search(r"lowered \d+ ops: new fetch set", err)  # level 1
    assert re.search(r"segment of \d+ ops: (quick|opt) code in", err)
    assert "in one native call" in err                    # level 2: per-run timing
    assert "feed dbg_x:0: float32[?]" in err              # level 3: the plan
    assert "def kernel(ins, vs):" in err and "# Abs" in err  # level 4: the source


def test_row_reduction_keeps_independent_partial_sums():
    """A sum along the innermost axis keeps 32 float64 partial sums, summed pairwise at the
    end: independent add chains instead of one (a sequential float sum runs at the latency of
    one add per element; jitflow never lets LLVM reassociate float math to do this itself),
    in a loop LLVM vectorizes without changing any lane's order."""
    a = tf.placeholder(tf.float32, [None, None])
    b = tf.placeholder(tf.float32, [None, None])
    r = tf.reduce_mean(tf.square(a - b), 1)
    av = np.random.default_rng(0).random((5, 77)).astype(np.float32)
    bv = np.random.default_rng(1).random((5, 77)).astype(np.float32)
    with tf.Session() as sess:
        out = sess.run(r, {a: av, b: bv})
        src = sess.inspect(r, {a: av, b: bv})
    assert "for q in range(32):" in src and "_jf.srem(" in src, src
    assert re.search(r"\(\((l\d+)\[0\] \+ \1\[1\]\) \+ \(\1\[2\] \+ \1\[3\]\)\)", src), src
    np.testing.assert_allclose(out, np.mean(np.square(av - bv), 1), rtol=1e-6)


def test_reduction_of_math_terms_computes_them_a_chunk_at_a_time():
    """Terms that call math functions (exp, tanh, sigmoid) are computed a chunk of 128 at a time
    in a loop of their own (the vectorizer takes it; in the lanes' loop they ran one at a time,
    5x slower), then added into the 32 lanes: exact against float64 sums at every length around
    the chunk size, rows and whole-array sums, sum, mean and l2."""
    x = tf.placeholder(tf.float32, [None, None])
    t = tf.sigmoid(x * 0.7 + 0.1) * tf.tanh(x) - tf.exp(-x * x)
    fetches = [tf.reduce_sum(t, 1), tf.reduce_mean(t, 1), tf.reduce_sum(t), tf.nn.l2_loss(t)]
    rng = np.random.default_rng(3)
    with tf.Session() as sess:
        for n in (1, 7, 127, 128, 129, 300):
            xv = rng.standard_normal((3, n)).astype(np.float32)
            rows, means, total, l2 = sess.run(fetches, {x: xv})
            tv = sess.run(t, {x: xv}).astype(np.float64)
            np.testing.assert_allclose(rows, tv.sum(1), rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(means, tv.mean(1), rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(total, tv.sum(), rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(l2, (np.square(tv.astype(np.float32)).astype(np.float64)
                                            ).sum() / 2, rtol=1e-6)
        src = sess.inspect(fetches[0], {x: xv})
    assert re.search(r"(c\d+) = \(128 if \(128 < ", src), src
    assert re.search(r"for q in range\(c\d+\):", src), src


def test_materialized_elementwise_results_of_one_size_share_one_loop():
    """Fetched intermediates and an in-place variable update over arrays of one size are one
    loop over flat views (no reshape), with the results of separate loops."""
    x = tf.placeholder(tf.float32, [4, 8], name="x")
    v = tf.Variable(np.ones((4, 8), np.float32), name="v")
    a = tf.tanh(x)
    b = a * 2.0
    c = a + b * v
    upd = tf.assign_add(v, c)
    xv = np.linspace(-2, 2, 32).astype(np.float32).reshape(4, 8)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        src = sess.inspect([a, b, c, upd], {x: xv})
        out = sess.run([a, b, c, upd], {x: xv})
    assert src.count("for ") == 1, src
    assert ".reshape(" not in src and "flat(" in src
    ta = np.tanh(xv)
    want_c = ta + (ta * 2) * 1.0
    np.testing.assert_allclose(out[0], ta, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(out[1], ta * 2, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(out[2], want_c, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(out[3], 1.0 + want_c, rtol=2e-6, atol=2e-6)


def test_products_by_one_transposed_weight_share_one_contiguous_copy():
    """Several products by the transpose of the same weight in one kernel (an RNN's backward
    steps) multiply by one contiguous copy of it, made once; a write to the weight between
    products makes a new copy. Values: the interpreter's."""
    rng = np.random.default_rng(4)
    w = tf.Variable(rng.standard_normal((5, 5)).astype(np.float32))
    x = tf.placeholder(tf.float32, [None, 5])
    h = x
    for _ in range(3):
        h = tf.tanh(tf.matmul(h, w, transpose_b=True))
    with tf.control_dependencies([h]):
        upd = tf.assign_sub(w, 0.1 * tf.ones([5, 5]))
    with tf.control_dependencies([upd]):
        w2 = w.read_value()
        after = tf.matmul(h, w2, transpose_b=True) + tf.matmul(x, w2, transpose_b=True)
    feed = {x: rng.standard_normal((3, 5)).astype(np.float32)}
    results = {}
    for backend in ("numba", "interpreter"):
        with tf.Session(backend=backend) as sess:
            sess.run(w.initializer)
            results[backend] = sess.run([h, after], feed)
            if backend == "numba":
                sess.run(w.initializer)
                src = sess.inspect([h, after], feed)
    for got, want in zip(results["numba"], results["interpreter"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    copies = [ln for ln in src.splitlines() if re.match(r"\s*tr\d_\w+ = _jf.empty", ln)]
    assert len(copies) == 2 and "tr0_" in copies[0] and "tr1_" in copies[1], src
