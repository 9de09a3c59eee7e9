"""The cuda backend's fast paths (issue 35): pinned staging of feeds and fetches on one stream,
the vendor-GEMM dispatch of products with the tiled kernel as fallback, and the window library
(convolutions and pooling on the device) against the numba CPU backend.

On Numba's CUDA simulator (tests/conftest.py) with tiny shapes; on a GPU with JITFLOW_CUDA_REAL=1.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import jitflow as tf

pytestmark = pytest.mark.cuda
REAL = os.environ.get("JITFLOW_CUDA_REAL", "0") not in ("", "0")


@pytest.fixture(scope="module", autouse=True)
def _cuda_or_skip():
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    from jitflow.backends.numba_cuda.driver import cuda_module
    try:
        cuda_module()
    except RuntimeError as e:
        pytest.skip(str(e))


def _no_host_fallback():
    """A context that fails the test when an op moves to the host."""
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.filterwarnings("error", message=".*cuda backend cannot emit.*")
    return ctx


# -- pinned transfers -------------------------------------------------------------------------
def test_feeds_and_fetches_go_through_reused_pinned_buffers():
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None, 3])
    z = x * 2.0 + y
    rng = np.random.default_rng(1)
    with tf.Session(backend="cuda") as sess:
        rt = sess._backend.rt
        a, b = (rng.standard_normal((4, 3)).astype(np.float32) for _ in range(2))
        got = sess.run(z, {x: a, y: b})
        np.testing.assert_array_equal(got, a * np.float32(2) + b)
        # two feeds of one shape and dtype: two input buffers, and one output buffer
        assert rt.pinned_allocations == 3
        pools = {k: list(v) for k, v in rt._staging.items()}
        a2, b2 = a + 1, b - 1
        got2 = sess.run(z, {x: a2, y: b2})
        np.testing.assert_array_equal(got2, a2 * np.float32(2) + b2)
        assert rt.pinned_allocations == 3   # the second run reuses every buffer
        assert all(v[i] is pools[k][i] for k, v in rt._staging.items()
                   for i in range(len(v)))
        # the first result is the caller's own array, not the reused staging buffer
        np.testing.assert_array_equal(got, a * np.float32(2) + b)
        # another shape: new buffers for it, right values
        c = rng.standard_normal((2, 3)).astype(np.float32)
        np.testing.assert_array_equal(sess.run(z, {x: c, y: c}), c * np.float32(3))
        assert rt.pinned_allocations == 6
        np.testing.assert_array_equal(sess.run(z, {x: c, y: a[:2]}),
                                      c * np.float32(2) + a[:2])
        assert rt.pinned_allocations == 6


def test_loop_bodies_reuse_staging_buffers_however_many_iterations():
    x = tf.placeholder(tf.float32, [3])
    n = tf.placeholder(tf.int32, [])
    _, v = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 2.0 + x),
                         [tf.constant(0), x])
    y = v + x
    xv = np.array([1, 2, 3], np.float32)

    def want(k):
        r = xv
        for _ in range(k):
            r = r * 2 + xv
        return r + xv
    with tf.Session(backend="cuda") as sess:
        rt = sess._backend.rt
        np.testing.assert_array_equal(sess.run(y, {x: xv, n: 3}), want(3))
        first = rt.pinned_allocations
        np.testing.assert_array_equal(sess.run(y, {x: xv, n: 9}), want(9))
        assert rt.pinned_allocations == first   # not one buffer per iteration
        assert rt.depth == 0


def test_staged_scalars_integers_and_empty_feeds_round_trip():
    s = tf.placeholder(tf.float64, [])
    i = tf.placeholder(tf.int32, [None])
    e = tf.placeholder(tf.float32, [None, 2])
    outs = [s * 3.0, i + 1, e * 2.0]
    with tf.Session(backend="cuda") as sess:
        r = sess.run(outs, {s: 1.5, i: np.array([1, 2, 3], np.int32),
                            e: np.zeros((0, 2), np.float32)})
    assert r[0].shape == () and r[0] == 4.5
    np.testing.assert_array_equal(r[1], [2, 3, 4])
    assert r[1].dtype == np.int32
    assert r[2].shape == (0, 2)


def test_a_run_synchronizes_once_when_no_host_step_needs_a_device_value(monkeypatch):
    x = tf.placeholder(tf.float32, [None])
    y = tf.reduce_sum(tf.exp(x)) + tf.reduce_max(x)
    with tf.Session(backend="cuda") as sess:
        rt = sess._backend.rt
        calls = []
        real = rt.stream.synchronize
        monkeypatch.setattr(rt.stream, "synchronize", lambda: (calls.append(1), real())[1])
        xv = np.array([0.0, 1.0, 2.0], np.float32)
        got = sess.run([y, x * 2.0], {x: xv})
    assert len(calls) == 1
    np.testing.assert_allclose(got[0], np.exp(xv).sum() + 2.0, rtol=1e-6)
    np.testing.assert_array_equal(got[1], xv * 2)


# -- vendor GEMM dispatch ----------------------------------------------------------------------
class _FakeCupy:
    """Stands for CuPy in the dispatch tests: a GPU count only."""

    def __init__(self, devices: int) -> None:
        n = devices

        class runtime:   # noqa: N801  (cupy.cuda.runtime's spelling)
            @staticmethod
            def getDeviceCount():
                return n

        class cuda_ns:   # noqa: N801
            pass
        cuda_ns.runtime = runtime
        self.cuda = cuda_ns


def _importer(modules: dict):
    def imp(name):
        if name not in modules:
            raise ImportError(name)
        return modules[name]
    return imp


def test_gemm_choice_library_absent_present_simulator_and_forced(monkeypatch):
    from jitflow.backends.numba_cuda import vendor
    monkeypatch.delenv("JITFLOW_CUDA_BLAS", raising=False)
    assert vendor.choose(False, _importer({})) is None                        # absent: tiled
    assert vendor.choose(False, _importer({"cupy": _FakeCupy(0)})) is None    # no GPU
    lib = vendor.choose(False, _importer({"cupy": _FakeCupy(1)}))
    assert isinstance(lib, vendor.CupyGemm)
    assert vendor.choose(True, _importer({"cupy": _FakeCupy(1)})) is None     # the simulator
    monkeypatch.setenv("JITFLOW_CUDA_BLAS", "none")
    assert vendor.choose(False, _importer({"cupy": _FakeCupy(1)})) is None
    monkeypatch.setenv("JITFLOW_CUDA_BLAS", "cupy")
    with pytest.raises(RuntimeError, match="JITFLOW_CUDA_BLAS=cupy"):
        vendor.choose(False, _importer({}))
    assert isinstance(vendor.choose(True, _importer({"cupy": _FakeCupy(1)})), vendor.CupyGemm)


class _RecordingGemm:
    """A vendor GEMM double: computes on host copies, records its calls."""

    def __init__(self) -> None:
        self.calls = []

    def matmul(self, a, b, out, ta, tb, stream):
        x, y = a.copy_to_host(), b.copy_to_host()
        self.calls.append((x.shape, y.shape, ta, tb))
        out.copy_to_device(np.ascontiguousarray((x.T if ta else x) @ (y.T if tb else y)))


def _mm_graph():
    a = tf.placeholder(tf.float32, [None, 3])
    w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = tf.matmul(a, w, transpose_b=True)
    k = tf.placeholder(tf.int32, [2, 2])
    ki = tf.matmul(k, k)
    return a, k, y, ki


def test_products_call_the_vendor_gemm_when_present_and_the_tiled_kernel_otherwise():
    a, k, y, ki = _mm_graph()
    av = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    kv = np.array([[1, 2], [3, 4]], np.int32)
    want = av @ np.arange(6, dtype=np.float32).reshape(2, 3).T
    for present in (True, False):
        with tf.Session(backend="cuda") as sess:
            rt = sess._backend.rt
            fake = _RecordingGemm()
            rt.blas = fake if present else None
            sess.run(tf.global_variables_initializer())
            got, gi = sess.run([y, ki], {a: av, k: kv})
        np.testing.assert_allclose(got, want, rtol=1e-6)
        np.testing.assert_array_equal(gi, kv @ kv)
        # the float product only (integer products always take the tiled kernel)
        assert fake.calls == ([((4, 3), (2, 3), False, True)] if present else [])


# -- the window library ------------------------------------------------------------------------
def _both(fetches, feed, init=True):
    res = {}
    for be in ("numba", "cuda"):
        with tf.Session(backend=be) as sess:
            if init:
                sess.run(tf.global_variables_initializer())
            if be == "cuda":
                ctx = _no_host_fallback()
                try:
                    res[be] = sess.run(fetches, feed)
                finally:
                    ctx.__exit__(None, None, None)
            else:
                res[be] = sess.run(fetches, feed)
    return res["numba"], res["cuda"]


@pytest.mark.parametrize("pad,strides,dil", [("SAME", 1, 1), ("VALID", 2, 1), ("SAME", 2, 1),
                                             ("VALID", 1, 2)])
def test_conv2d_and_its_gradients_run_on_the_device_and_match_the_cpu(pad, strides, dil):
    rng = np.random.default_rng(3)
    x = tf.placeholder(tf.float32, [2, 6, 5, 2])
    f = tf.Variable(rng.standard_normal((3, 2, 2, 3)).astype(np.float32))
    y = tf.nn.conv2d(x, f, [1, strides, strides, 1], pad, dilations=[1, dil, dil, 1])
    gy = tf.placeholder(tf.float32, y.shape)
    gx, gf = tf.gradients(y, [x, f], grad_ys=gy)
    xv = rng.standard_normal((2, 6, 5, 2)).astype(np.float32)
    gv = rng.standard_normal(y.shape.as_list()).astype(np.float32)
    cpu, dev = _both([y, gx, gf], {x: xv, gy: gv})
    for c, d in zip(cpu, dev):
        assert c.shape == d.shape
        np.testing.assert_allclose(d, c, rtol=1e-5, atol=1e-5)


def test_depthwise_convolution_and_gradients_match_the_cpu():
    rng = np.random.default_rng(4)
    x = tf.placeholder(tf.float32, [1, 5, 5, 2])
    f = tf.Variable(rng.standard_normal((3, 3, 2, 2)).astype(np.float32))
    y = tf.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "SAME")
    loss = tf.reduce_sum(y * y)
    gx, gf = tf.gradients(loss, [x, f])
    cpu, dev = _both([y, gx, gf], {x: rng.standard_normal((1, 5, 5, 2)).astype(np.float32)})
    for c, d in zip(cpu, dev):
        np.testing.assert_allclose(d, c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pad,k,s", [("VALID", 2, 2), ("SAME", 3, 2), ("SAME", 2, 1)])
def test_pooling_and_its_gradients_are_bit_identical_to_the_cpu(pad, k, s):
    rng = np.random.default_rng(5)
    x = tf.placeholder(tf.float32, [2, 5, 4, 2])
    mp = tf.nn.max_pool(x, [1, k, k, 1], [1, s, s, 1], pad)
    ap = tf.nn.avg_pool(x, [1, k, k, 1], [1, s, s, 1], pad)
    loss = tf.reduce_sum(mp * mp) + tf.reduce_sum(ap * 3.0)
    (gx,) = tf.gradients(loss, [x])
    xv = rng.standard_normal((2, 5, 4, 2)).astype(np.float32)
    xv[0, 0, 0, 0] = xv[0, 0, 1, 0]    # a tie: the first element equal to the max wins
    cpu, dev = _both([mp, ap, gx], {x: xv}, init=False)
    for c, d in zip(cpu, dev):
        np.testing.assert_array_equal(d, c)


def test_pooling_hand_computed_values():
    x = tf.placeholder(tf.float32, [1, 2, 4, 1])
    mp = tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    ap = tf.nn.avg_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    (gx,) = tf.gradients(tf.reduce_sum(mp), [x])
    xv = np.array([1, 5, 2, 2, 3, 0, 2, 1], np.float32).reshape(1, 2, 4, 1)
    with tf.Session(backend="cuda") as sess:
        ctx = _no_host_fallback()
        try:
            m, a, g = sess.run([mp, ap, gx], {x: xv})
        finally:
            ctx.__exit__(None, None, None)
    np.testing.assert_array_equal(m.ravel(), [5, 2])
    np.testing.assert_array_equal(a.ravel(), [9 / 4, 7 / 4])
    # the max 5 at (0, 1); the tie of 2s goes to the first, (0, 2)
    np.testing.assert_array_equal(g.ravel(), [0, 1, 1, 0, 0, 0, 0, 0])


def _lenet(batch: int, size: int, k: int, ch: tuple, seed: int = 0):
    """A LeNet-style CNN (conv-relu-maxpool twice, k x k filters with ch channels, dense,
    softmax cross-entropy) trained by Adam; returns (train op, loss, feed)."""
    rng = np.random.default_rng(seed)
    x = tf.placeholder(tf.float32, [None, size, size, 1])
    labels = tf.placeholder(tf.int64, [None])
    c1 = tf.Variable(rng.standard_normal((k, k, 1, ch[0])).astype(np.float32) * 0.2)
    b1 = tf.Variable(np.zeros(ch[0], np.float32))
    c2 = tf.Variable(rng.standard_normal((k, k, ch[0], ch[1])).astype(np.float32) * 0.1)
    b2 = tf.Variable(np.zeros(ch[1], np.float32))
    h = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(x, c1, [1, 1, 1, 1], "SAME") + b1),
                       [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    h = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(h, c2, [1, 1, 1, 1], "VALID") + b2),
                       [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    n = int(np.prod(h.shape.as_list()[1:]))
    w = tf.Variable(rng.standard_normal((n, 10)).astype(np.float32) * 0.1)
    logits = tf.matmul(tf.reshape(h, [-1, n]), w)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    train = tf.train.AdamOptimizer(0.01).minimize(loss)
    feed = {x: rng.standard_normal((batch, size, size, 1)).astype(np.float32),
            labels: rng.integers(0, 10, batch)}
    return train, loss, feed


def test_a_lenet_style_cnn_trains_fully_on_the_device_to_the_cpu_losses():
    train, loss, feed = _lenet(batch=2, size=8, k=3, ch=(2, 3))
    losses = {}
    for be in ("numba", "cuda"):
        with tf.Session(backend=be) as sess:
            sess.run(tf.global_variables_initializer())
            ctx = _no_host_fallback() if be == "cuda" else None
            try:
                losses[be] = [sess.run([train, loss], feed)[1] for _ in range(3)]
            finally:
                if ctx is not None:
                    ctx.__exit__(None, None, None)
    np.testing.assert_allclose(losses["cuda"], losses["numba"], rtol=1e-4)
    assert losses["cuda"][-1] < losses["cuda"][0]


@pytest.mark.skipif(not REAL, reason="CuPy's cuBLAS needs a real GPU (JITFLOW_CUDA_REAL=1)")
def test_on_a_gpu_with_cupy_products_run_through_cublas_and_match_the_cpu():
    pytest.importorskip("cupy", reason="CuPy is not installed (the cuda-libs extra)")
    from jitflow.backends.numba_cuda import vendor
    rng = np.random.default_rng(6)
    a = tf.placeholder(tf.float32, [None, 70])
    w = tf.Variable(rng.standard_normal((50, 70)).astype(np.float32))
    y = tf.matmul(tf.matmul(a, w, transpose_b=True), w)
    av = rng.standard_normal((33, 70)).astype(np.float32)
    with tf.Session(backend="cuda") as sess:
        assert isinstance(sess._backend.rt.blas, vendor.CupyGemm)
        sess.run(tf.global_variables_initializer())
        got = sess.run(y, {a: av})
    with tf.Session(backend="numba") as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(y, {a: av})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


# -- the stray answer of issue 34: matmul of an elementwise result, fetched with softmax,
# argmax and reductions of it, many times over (a shared-memory race would show as a wrong run)
def test_matmul_of_an_elementwise_result_with_softmax_and_reductions_many_times():
    rng = np.random.default_rng(34)
    x = tf.placeholder(tf.float32, [None, 7])
    w = tf.Variable(rng.standard_normal((7, 5)).astype(np.float32))
    h = tf.matmul(tf.tanh(x * 1.5 + 0.25), w)
    fetches = [h, tf.nn.softmax(h), tf.argmax(h, 1), tf.reduce_sum(h, 0), tf.reduce_max(h)]
    xv = rng.standard_normal((9, 7)).astype(np.float32)
    with tf.Session() as cpu:
        cpu.run(tf.global_variables_initializer())
        want = cpu.run(fetches, {x: xv})
    with tf.Session(backend="cuda") as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3 if not REAL else 2000):   # (the simulator: ~2 s a run)
            got = sess.run(fetches, {x: xv})
            for g, e in zip(got, want):
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
