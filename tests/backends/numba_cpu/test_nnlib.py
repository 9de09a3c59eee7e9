"""Convolutions and pooling compile to native kernels (nnlib.py, called by the kernels) that agree
with the interpreter for every configuration, with no fallback warning; a new batch or image
size reuses the machine code; split training steps write their variables in place."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import jitflow as tf
from jitflow.backends.numba_cpu import kernels as cpu
from jitflow.compiler import partition
from helpers import assert_same_result, conv_direct_sums

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _strict(monkeypatch):
    """A fallback to the references is a failure here, and so is any generated-code error."""
    monkeypatch.setenv("JITFLOW_STRICT", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


def _both(fetches, feed, init=True):
    out = {}
    for backend in ("interpreter", "numba"):
        with tf.Session(backend=backend) as sess:
            if init:
                sess.run(tf.global_variables_initializer())
            out[backend] = sess.run(fetches, feed)
    return out


CONV_CASES = [
    # (input hw, kernel hw, strides, padding, dilations, in, out)
    ((7, 6), (3, 3), (1, 1), "SAME", (1, 1), 3, 4),
    ((7, 6), (3, 3), (2, 2), "SAME", (1, 1), 3, 4),
    ((8, 8), (3, 2), (2, 3), "VALID", (1, 1), 2, 5),
    ((5, 5), (1, 1), (1, 1), "VALID", (1, 1), 4, 3),   # pointwise: one GEMM
    ((6, 7), (1, 1), (2, 2), "SAME", (1, 1), 3, 2),    # strided 1x1
    ((9, 8), (3, 3), (1, 1), "SAME", (2, 2), 2, 3),    # dilated
    ((9, 8), (2, 3), (1, 1), "VALID", (2, 1), 2, 3),
    ((4, 4), (4, 4), (1, 1), "VALID", (1, 1), 1, 1),   # one output pixel
    ((1, 1), (3, 3), (1, 1), "SAME", (1, 1), 3, 2),    # a 1x1 image
    # one channel (transposed patches): strided, a window wider than the image
    ((7, 9), (5, 5), (2, 3), "SAME", (1, 1), 1, 4),
    ((2, 3), (5, 5), (1, 1), "SAME", (1, 1), 1, 2),
    # more channels than the transposed patches take: row patches
    ((7, 6), (3, 3), (2, 1), "SAME", (1, 1), 5, 3),
    ((9, 8), (3, 2), (1, 1), "SAME", (2, 3), 4, 2),
]


# float64 on one case of each code path (pointwise GEMM, strided and dilated patches, transposed
# one-channel patches, row patches); float32 on every case. The cases of a group share one graph
# and so one kernel compile: 13 cases one by one cost the suite about 3 s each, together about 9.
_F64_CASES = (CONV_CASES[1], CONV_CASES[3], CONV_CASES[5], CONV_CASES[9], CONV_CASES[12])
_CONV_GROUPS = [("float32", CONV_CASES[:5]), ("float32", CONV_CASES[5:9]),
                ("float32", CONV_CASES[9:]), ("float64", _F64_CASES)]


@pytest.mark.parametrize("dtype,cases", _CONV_GROUPS,
                         ids=[f"{d}-{i}" for i, (d, _) in enumerate(_CONV_GROUPS)])
def test_conv2d_and_its_gradients_match_the_interpreter(dtype, cases):
    npd = np.dtype(dtype)
    inputs, fetches = [], []
    for (h, w), (kh, kw), strides, padding, dil, cin, cout in cases:
        x = tf.placeholder(dtype, [None, h, w, cin])
        f = tf.Variable(RNG.standard_normal((kh, kw, cin, cout)).astype(npd))
        y = tf.nn.conv2d(x, f, [1, *strides, 1], padding, dilations=[1, *dil, 1])
        loss = tf.reduce_sum(tf.sin(y))
        gx, gf = tf.gradients(loss, [x, f])
        inputs.append((x, (h, w, cin)))
        fetches.append([y, gx, gf])
    tol = 2e-5 if dtype == "float32" else 1e-11
    for batch in (1, 3):
        feed = {x: RNG.standard_normal((batch, *shape)).astype(npd) for x, shape in inputs}
        res = _both(fetches, feed)
        for case, got, want in zip(cases, res["numba"], res["interpreter"]):
            try:
                assert_same_result(got, want, rtol=tol, atol=tol)
            except AssertionError as e:
                raise AssertionError(f"conv case {case}, batch {batch}: {e}") from None


# Winograd convolutions (stride 1, no dilation, 3x3 or 5x5, at least 16 channels in and out, at
# least 1024 output pixels): image sizes that are not multiples of the 2x2 output tile, both
# paddings, unequal channel counts. Float32 results differ from the reference
# by a few 1e-6 of the largest magnitude (the transforms scale values up before the products).
WINOGRAD_CASES = [
    # (batch, input hw, kernel, padding, in, out)
    (5, (17, 15), 3, "SAME", 16, 20),
    (4, (19, 22), 3, "VALID", 24, 16),
    (5, (15, 14), 5, "SAME", 16, 18),
    (4, (23, 21), 5, "VALID", 17, 16),
]


def _winograd_graph(dtype, cases):
    npd = np.dtype(dtype)
    rng = np.random.default_rng(11)   # the same inputs whichever tests ran before
    inputs, fetches = [], []
    for n, (h, w), k, padding, cin, cout in cases:
        x = tf.placeholder(dtype, [None, h, w, cin])
        f = tf.Variable(rng.standard_normal((k, k, cin, cout)).astype(npd) / k)
        y = tf.nn.conv2d(x, f, [1, 1, 1, 1], padding)
        gx, gf = tf.gradients(tf.reduce_sum(tf.sin(y)), [x, f])
        inputs.append((x, (n, h, w, cin)))
        fetches.append([y, gx, gf])
    feed = {x: rng.standard_normal(shape).astype(npd) for x, shape in inputs}
    return fetches, feed


def test_the_winograd_cases_take_the_winograd_path_and_the_others_do_not():
    from jitflow.backends.numba_cpu import nnlib
    for n, (h, w), k, padding, cin, cout in WINOGRAD_CASES:
        oh, ow = (h, w) if padding == "SAME" else (h - k + 1, w - k + 1)
        assert nnlib._winograd(k, k, 1, 1, 1, 1, cin, cout, n * oh * ow)
        assert nnlib._winograd(k, k, 1, 1, 1, 1, cout, cin, n * h * w)    # the input gradient
    assert not nnlib._winograd(3, 3, 2, 2, 1, 1, 32, 32, 4096)    # strided
    assert not nnlib._winograd(3, 3, 1, 1, 2, 2, 32, 32, 4096)    # dilated
    assert not nnlib._winograd(7, 7, 1, 1, 1, 1, 32, 32, 4096)    # no 7x7 transform
    assert not nnlib._winograd(3, 5, 1, 1, 1, 1, 32, 32, 4096)    # not square
    assert not nnlib._winograd(3, 3, 1, 1, 1, 1, 3, 32, 4096)     # few channels
    assert not nnlib._winograd(3, 3, 1, 1, 1, 1, 32, 32, 512)     # few pixels
    # 5x5: F(2,5)'s rounding grows with the channels it sums (the first count), 3x3's does not
    assert nnlib._winograd(5, 5, 1, 1, 1, 1, 128, 512, 4096)
    assert not nnlib._winograd(5, 5, 1, 1, 1, 1, 129, 16, 4096)
    assert nnlib._winograd(3, 3, 1, 1, 1, 1, 512, 512, 4096)


def test_only_convolutions_that_can_use_winograd_call_its_routines():
    """The lowering picks the `_w` routines from the graph's static attributes (so kernels of
    other convolutions never compile the Winograd code); its threshold is nnlib's."""
    from jitflow.backends.numba_cpu import nnlib
    from jitflow.ops.nn import window_lowering
    assert window_lowering.WINOGRAD_MIN_CHANNELS == nnlib._WINO_MIN_CHANNELS
    assert window_lowering.WINOGRAD5_MAX_CHANNELS == nnlib._WINO5_MAX_CHANNELS
    fetches, feed = _winograd_graph("float32", WINOGRAD_CASES[:1])
    x = tf.placeholder(tf.float32, [None, 8, 8, 16])
    small = tf.nn.conv2d(x, tf.constant(np.ones((3, 3, 16, 4), np.float32)), 1, "SAME")
    strided = tf.nn.conv2d(x, tf.constant(np.ones((3, 3, 16, 16), np.float32)), 2, "SAME")
    with tf.Session(backend="numba") as sess:
        sess.run(tf.global_variables_initializer())
        src = sess.inspect(fetches, feed)
        other = sess.inspect([small, strided], {x: np.ones((2, 8, 8, 16), np.float32)})
    for name in ("conv2d_w(", "conv2d_input_grad_w(", "conv2d_filter_grad_w("):
        assert name in src, name
    assert "conv2d(" in other and "_w(" not in other


@pytest.mark.parametrize("mode", [None, "1", "fast", "3x3"])
def test_5x5_filters_take_winograd_unless_3x3_only_is_asked_for(monkeypatch, mode):
    if mode is not None:
        monkeypatch.setenv("JITFLOW_WINOGRAD", mode)
    else:
        monkeypatch.delenv("JITFLOW_WINOGRAD", raising=False)
    fetches, feed = _winograd_graph("float32", WINOGRAD_CASES[2:3])
    with tf.Session(backend="numba") as sess:
        sess.run(tf.global_variables_initializer())
        src = sess.inspect(fetches, feed)
    assert ("conv2d_w(" in src) == (mode != "3x3")


def test_5x5_filters_summing_many_channels_both_ways_stay_on_im2col():
    """A 5x5 layer whose input and output channels both exceed WINOGRAD5_MAX_CHANNELS never
    compiles the Winograd code; one side small enough is a candidate (nnlib then picks per
    routine: the forward sums the input channels, the input gradient the output channels)."""
    x = tf.placeholder(tf.float32, [None, 8, 8, 160])
    wide = tf.nn.conv2d(x, tf.constant(np.ones((5, 5, 160, 160), np.float32)), 1, "SAME")
    narrow = tf.nn.conv2d(x, tf.constant(np.ones((5, 5, 160, 64), np.float32)), 1, "SAME")
    feed = {x: np.ones((1, 8, 8, 160), np.float32)}
    with tf.Session(backend="numba") as sess:
        assert "_w(" not in sess.inspect([wide], feed)
        assert "conv2d_w(" in sess.inspect([narrow], feed)


def test_jitflow_winograd_0_keeps_every_convolution_on_im2col(monkeypatch):
    monkeypatch.setenv("JITFLOW_WINOGRAD", "0")
    fetches, feed = _winograd_graph("float32", WINOGRAD_CASES[:1])
    with tf.Session(backend="numba") as sess:
        sess.run(tf.global_variables_initializer())
        src = sess.inspect(fetches, feed)
    assert "_w(" not in src and "conv2d(" in src and "conv2d_filter_grad(" in src


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_winograd_convolutions_and_gradients_match_the_interpreter(dtype, monkeypatch):
    """Within 6e-6 of each result's largest magnitude (float32) and within the differential
    fuzzer's tolerance: a few ulps of the scale plus what perturbing the inputs by a few ulps
    changes in the interpreter's result."""
    from fuzz.runner import _float_mismatch
    monkeypatch.delenv("JITFLOW_WINOGRAD", raising=False)      # the default: 3x3 and 5x5
    fetches, feed = _winograd_graph(dtype, WINOGRAD_CASES)
    res = _both(fetches, feed)
    eps, signs = np.finfo(dtype).eps, np.random.default_rng(13)
    nudged = {x: (v * (1 + 4 * eps * signs.choice([-1, 1], v.shape))).astype(v.dtype)
              for x, v in feed.items()}
    with tf.Session(backend="interpreter") as sess:
        sess.run(tf.global_variables_initializer())
        near = sess.run(fetches, nudged)
    rel = 6e-6 if dtype == "float32" else 1e-12
    for case, got, want, z in zip(WINOGRAD_CASES, res["numba"], res["interpreter"], near):
        for name, g, w, zz in zip(("conv2d", "input gradient", "filter gradient"), got, want, z):
            scale = float(np.abs(w).max())
            err = float(np.abs(g.astype(np.float64) - w).max())
            assert g.dtype == w.dtype and g.shape == w.shape, (case, name)
            assert err <= rel * scale, f"{case} {name}: error {err:.2e} of {scale:.2e}"
            assert _float_mismatch(g, w, zz, dtype) is None, (case, name)


def test_winograd_transforms_are_exact_for_polynomial_tiles():
    """F(m, r) computes an r-tap correlation of m outputs exactly (in float64, integer data)."""
    from jitflow.backends.numba_cpu import nnlib
    rng = np.random.default_rng(3)
    for (at, g, bt), m, r in (((nnlib._AT3, nnlib._G3, nnlib._BT4), 2, 3),
                              ((nnlib._AT5, nnlib._G5, nnlib._BT6), 2, 5),
                              ((nnlib._DT3, nnlib._DG3, nnlib._BT4), 3, 2),
                              ((nnlib._DT5, nnlib._DG5, nnlib._BT6), 5, 2)):
        a = m + r - 1
        assert at.shape == (m, a) and g.shape == (a, r) and bt.shape == (a, a)
        assert np.array_equal(bt, np.round(bt)), "BT holds integers (fractions moved into G)"
        d = rng.integers(-9, 10, a).astype(np.float64)
        taps = rng.integers(-9, 10, r).astype(np.float64)
        want = [sum(d[i + j] * taps[j] for j in range(r)) for i in range(m)]
        np.testing.assert_allclose(at @ ((g @ taps) * (bt @ d)), want, rtol=0, atol=1e-9)


def test_winograd_routines_equal_direct_sums_on_random_shapes():
    """nnlib's three routines on random Winograd shapes (float64, so any indexing slip shows far
    above rounding): sizes from the filter's up, both paddings, channels 16-39."""
    from jitflow.backends.numba_cpu import nnlib
    rng = np.random.default_rng(5)
    for _ in range(12):
        # (geometry as the kernels pass it: int64s, so no extra compiled signature)
        r, same = int(rng.choice([3, 5])), bool(rng.integers(2))
        c, k = (int(v) for v in rng.integers(16, 40, 2))
        h, w = (int(v) for v in rng.integers(r, 24, 2))
        oh, ow = (h, w) if same else (h - r + 1, w - r + 1)
        n = -(-1100 // (oh * ow)) + int(rng.integers(0, 3))
        assert nnlib._winograd(r, r, 1, 1, 1, 1, c, k, n * oh * ow)
        x, f = rng.standard_normal((n, h, w, c)), rng.standard_normal((r, r, c, k))
        g = rng.standard_normal((n, oh, ow, k))
        y, dx, df = np.empty((n, oh, ow, k)), np.empty_like(x), np.empty_like(f)
        nnlib.conv2d_w(x, f, y, 1, 1, 1, 1, int(same))
        nnlib.conv2d_input_grad_w(f, g, dx, 1, 1, 1, 1, int(same))
        nnlib.conv2d_filter_grad_w(x, g, df, 1, 1, 1, 1, int(same))
        want_y, want_dx, want_df = conv_direct_sums(x, f, g, (r - 1) // 2 if same else 0)
        for name, got, want in (("conv2d", y, want_y), ("filter gradient", df, want_df),
                                ("input gradient", dx, want_dx)):
            err = np.abs(got - want).max() / np.abs(want).max()
            assert err < 1e-12, (name, err, (n, h, w, c, k, r, same))


def test_5x5_winograd_float32_rounding_stays_within_the_fuzzers_tolerance_of_exact_sums():
    """F(2,5) and its filter gradient F(5,2) in float32 against float64 sums, on LeNet's second
    layer and on a layer whose input gradient sums the most channels allowed (128): within 20
    ulps of each result's largest magnitude (measured up to 15; im2col up to 7) and the
    differential fuzzer's comparison with no perturbation allowance."""
    from fuzz.runner import _float_mismatch
    from jitflow.backends.numba_cpu import nnlib
    rng = np.random.default_rng(29)
    eps = np.finfo(np.float32).eps
    for n, hw, c, k, same in ((8, 14, 32, 64, 1), (6, 15, 32, 128, 0)):
        oh = hw if same else hw - 4
        assert nnlib._winograd(5, 5, 1, 1, 1, 1, k, c, n * hw * hw)      # the input gradient
        x = np.maximum(rng.standard_normal((n, hw, hw, c)), 0).astype(np.float32)
        f = (rng.standard_normal((5, 5, c, k)) * 0.05).astype(np.float32)
        g = rng.standard_normal((n, oh, oh, k)).astype(np.float32)
        y, dx, df = np.empty((n, oh, oh, k), np.float32), np.empty_like(x), np.empty_like(f)
        nnlib.conv2d_w(x, f, y, 1, 1, 1, 1, same)
        nnlib.conv2d_input_grad_w(f, g, dx, 1, 1, 1, 1, same)
        nnlib.conv2d_filter_grad_w(x, g, df, 1, 1, 1, 1, same)
        want_y, want_dx, want_df = conv_direct_sums(x, f, g, 2 if same else 0)
        for name, got, want in (("conv2d", y, want_y), ("filter gradient", df, want_df),
                                ("input gradient", dx, want_dx)):
            ulps = np.abs(got - want).max() / np.abs(want).max() / eps
            assert ulps <= 20, (name, n, hw, c, k, ulps)
            assert _float_mismatch(got, want.astype(np.float32), None, "float32") is None, name


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_non_finite_and_huge_inputs_reach_only_the_outputs_whose_windows_see_them(dtype):
    """Winograd would spread one inf or NaN over its whole tile (and could overflow on huge
    values): such inputs take im2col, so only the windows that hold them turn non-finite."""
    from jitflow.backends.numba_cpu import nnlib
    npd = np.dtype(dtype)
    rng = np.random.default_rng(8)
    n, h, w, c, k = 8, 12, 12, 16, 16
    f = rng.standard_normal((3, 3, c, k)).astype(npd)
    for bad in (np.inf, np.nan, 1e30 if dtype == "float32" else 1e200):
        x = rng.standard_normal((n, h, w, c)).astype(npd)
        x[2, 5, 6, 3] = bad
        y = np.empty((n, h, w, k), npd)
        nnlib.conv2d_w(x, f, y, 1, 1, 1, 1, 1)
        want = np.zeros((n, h, w, k))
        xp = np.zeros((n, h + 2, w + 2, c))
        xp[:, 1:-1, 1:-1] = x
        with np.errstate(invalid="ignore", over="ignore"):
            for i, j in itertools.product(range(3), range(3)):
                want += xp[:, i:i + h, j:j + w] @ f[i, j].astype(np.float64)
            want = want.astype(npd)
        finite = np.isfinite(want)
        assert np.array_equal(np.isfinite(y), finite), bad
        assert not finite[2, 4:7, 5:8].any() if not np.isfinite(bad) else finite.all()
        np.testing.assert_allclose(y[finite], want[finite], rtol=1e-4, atol=1e-4 * bad
                                   if np.isfinite(bad) else 1e-4)


@pytest.mark.parametrize("cin", [1, 5])
def test_convolutions_over_several_patch_blocks_match_the_interpreter(cin):
    """Enough output rows for several blocks of patches (the filter gradient sums over
    blocks), with one channel (transposed patches) and with several (row patches)."""
    x = tf.placeholder("float64", [None, 16, 16, cin])
    f = tf.Variable(RNG.standard_normal((5, 5, cin, 3)))
    y = tf.nn.conv2d(x, f, [1, 1, 1, 1], "SAME")
    gx, gf = tf.gradients(tf.reduce_sum(tf.sin(y)), [x, f])
    res = _both([y, gx, gf], {x: RNG.standard_normal((48, 16, 16, cin))})
    assert_same_result(res["numba"], res["interpreter"], rtol=1e-11, atol=1e-11)


POOL_CASES = [
    ((6, 5), (2, 2), (2, 2), "VALID"),
    ((6, 5), (2, 2), (2, 2), "SAME"),
    ((7, 7), (3, 3), (2, 2), "SAME"),
    ((7, 7), (3, 3), (1, 1), "VALID"),   # overlapping windows
    ((5, 6), (3, 2), (1, 3), "SAME"),
    ((4, 4), (1, 1), (1, 1), "VALID"),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling_and_its_gradient_match_the_interpreter(case, kind):
    (h, w), (kh, kw), (sh, sw), padding = case
    x = tf.placeholder(tf.float32, [None, h, w, 3])
    pool = tf.nn.max_pool if kind == "max" else tf.nn.avg_pool
    y = pool(x, [1, kh, kw, 1], [1, sh, sw, 1], padding)
    g = tf.placeholder(tf.float32, y.shape)
    gx, = tf.gradients(y, [x], grad_ys=[g])
    for batch in (1, 2):
        xv = RNG.standard_normal((batch, h, w, 3)).astype(np.float32)
        # ties: the max-pool gradient goes to the first maximal element of each window
        xv[:, ::2, ::2, 0] = 0.5
        gv = RNG.standard_normal((batch,) + tuple(y.shape.as_list()[1:])).astype(np.float32)
        res = _both([y, gx], {x: xv, g: gv}, init=False)
        assert_same_result(res["numba"], res["interpreter"], rtol=1e-6, atol=1e-6)


def test_max_pool_of_nan_and_minus_infinity_as_the_interpreter():
    x = tf.placeholder(tf.float64, [1, 4, 4, 2])
    y = tf.nn.max_pool(x, 3, 2, "SAME")
    gx, = tf.gradients(tf.reduce_sum(y), [x])
    xv = np.full((1, 4, 4, 2), -np.inf)
    xv[0, 1, 1, 0] = np.nan
    xv[0, 3, 3, 1] = 2.0
    res = _both([y, gx], {x: xv}, init=False)
    assert_same_result(res["numba"], res["interpreter"])
    assert np.isnan(res["numba"][0][0, 0, 0, 0])


def test_depthwise_conv2d_and_gradients_match_the_interpreter():
    x = tf.placeholder(tf.float64, [None, 6, 5, 3])
    f = tf.Variable(RNG.standard_normal((3, 2, 3, 2)))
    for strides, padding in ((1, "SAME"), (2, "VALID"), (2, "SAME")):
        y = tf.nn.depthwise_conv2d(x, f, [1, strides, strides, 1], padding)
        gx, gf = tf.gradients(tf.reduce_sum(y * y), [x, f])
        xv = RNG.standard_normal((2, 6, 5, 3))
        res = _both([y, gx, gf], {x: xv})
        assert_same_result(res["numba"], res["interpreter"], rtol=1e-11, atol=1e-11)


def test_a_new_batch_or_image_size_reuses_the_machine_code():
    x = tf.placeholder(tf.float32, [None, None, None, 2])
    f = tf.Variable(RNG.standard_normal((3, 3, 2, 4)).astype(np.float32))
    y = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(x, f, 1, "SAME")), 2, 2, "SAME")
    with tf.Session(backend="numba") as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(y, {x: np.ones((2, 8, 8, 2), np.float32)})
        before = cpu.STATS["compiles"] + cpu.STATS["numba_cache_hits"]
        for shape in ((5, 8, 8, 2), (3, 11, 6, 2), (2, 17, 9, 2)):
            out = sess.run(y, {x: np.ones(shape, np.float32)})
            assert out.shape == (shape[0], -(-shape[1] // 2), -(-shape[2] // 2), 4)
        assert cpu.STATS["compiles"] + cpu.STATS["numba_cache_hits"] == before


def test_every_stride_and_padding_shares_one_compiled_routine_per_dtype(monkeypatch, tmp_path):
    """Kernels pass strides, dilations and padding to the window routines as run-time int64
    values: one compiled routine per array type serves every geometry (the LLVM path's C entry
    points call the same one, one per dtype by construction)."""
    from jitflow.backends.numba_cpu import nnlib
    monkeypatch.setenv("JITFLOW_COMPILE", "numba")
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(tmp_path))   # compiled here, not loaded
    x = tf.placeholder(tf.float64, [None, 9, 9, 2])
    f = tf.constant(RNG.standard_normal((3, 3, 2, 2)))
    ys = [tf.nn.conv2d(x, f, s, p, dilations=d) for s, p, d in
          [(1, "SAME", 1), (2, "VALID", 1), (1, "VALID", 2), (3, "SAME", 1)]]
    with tf.Session(backend="numba") as sess:
        for y in ys:
            sess.run(y, {x: np.ones((1, 9, 9, 2))})
    sigs = nnlib.conv2d.signatures
    assert all(str(t) == "int64" for sig in sigs for t in sig[3:]), sigs   # no literals
    # one compile per combination of array types (dtype, layout, read-only), whatever the
    # geometry: ours used one at least
    assert len({sig[:3] for sig in sigs}) == len(sigs), sigs
    assert any(str(sig[0].dtype) == "float64" for sig in sigs), sigs


def test_a_channel_mismatch_at_run_time_is_tf1s_error_and_changes_nothing():
    x = tf.placeholder(tf.float32, [None, 5, 5, None])
    f = tf.Variable(np.ones((3, 3, 2, 2), np.float32))
    y = tf.nn.conv2d(x, f, 1, "SAME")
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y))
    with tf.Session(backend="numba") as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, {x: np.ones((1, 5, 5, 2), np.float32)})
        before = sess.run(f)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(train, {x: np.ones((1, 5, 5, 3), np.float32)})
        np.testing.assert_array_equal(sess.run(f), before)


def _lenet(seed: int):
    rng = np.random.default_rng(seed)
    x = tf.placeholder(tf.float32, [None, 12, 12, 1])
    y = tf.placeholder(tf.float32, [None, 4])

    def var(*shape):
        return tf.Variable((rng.standard_normal(shape) * 0.3).astype(np.float32))

    h = tf.nn.relu(tf.nn.conv2d(x, var(3, 3, 1, 4), 1, "SAME") + var(4))
    h = tf.nn.max_pool(h, 2, 2, "SAME")
    h = tf.nn.relu(tf.nn.conv2d(h, var(3, 3, 4, 6), 1, "SAME") + var(6))
    h = tf.nn.avg_pool(h, 2, 2, "VALID")
    logits = tf.matmul(tf.reshape(h, [-1, 3 * 3 * 6]), var(54, 4)) + var(4)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    return x, y, loss


def test_a_cnn_trains_the_same_on_both_backends():
    x, y, loss = _lenet(3)
    train = tf.train.AdamOptimizer(0.01).minimize(loss)
    rng = np.random.default_rng(4)
    xv = rng.standard_normal((8, 12, 12, 1)).astype(np.float32)
    yv = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 8)]
    losses = {}
    for backend in ("interpreter", "numba"):
        with tf.Session(backend=backend) as sess:
            sess.run(tf.global_variables_initializer())
            losses[backend] = [sess.run([train, loss], {x: xv, y: yv})[1] for _ in range(6)]
    np.testing.assert_allclose(losses["numba"], losses["interpreter"], rtol=1e-4)
    assert losses["numba"][-1] < losses["numba"][0]


def test_split_training_steps_write_variables_in_place_after_their_first_run(monkeypatch):
    """A plan of several kernels copies the variables it writes only on the first run of an
    input shape (so that a failing run changes nothing); later runs update them in place."""
    monkeypatch.setattr(partition, "SPLIT_ABOVE", 96)
    x, y, loss = _lenet(5)
    # a long chain of parameter updates makes the plan longer than one kernel
    train = tf.group(*[tf.train.GradientDescentOptimizer(0.01).minimize(loss)
                       for _ in range(3)])
    rng = np.random.default_rng(6)
    xv = rng.standard_normal((4, 12, 12, 1)).astype(np.float32)
    yv = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 4)]
    with tf.Session(backend="numba") as sess:
        sess.run(tf.global_variables_initializer())
        spec = sess.make_callable(train, [x, y]).spec
        assert not spec.executable.single, "the test needs a plan split into kernels"
        sess.run(train, {x: xv, y: yv})
        copies = cpu.STATS.get("variable_copies", 0)
        buffers = [sess._state[v] for v in spec.executable.written]
        for _ in range(3):
            sess.run(train, {x: xv, y: yv})
        assert cpu.STATS.get("variable_copies", 0) == copies
        assert all(sess._state[v] is b for v, b in zip(spec.executable.written, buffers))
        # a new batch size runs with copies once, then in place again
        sess.run(train, {x: xv[:3], y: yv[:3]})
        assert cpu.STATS.get("variable_copies", 0) > copies


@pytest.mark.parametrize("op_type", sorted(itertools.chain(
    ["Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPool", "MaxPoolGrad",
     "AvgPool", "AvgPoolGrad", "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
     "DepthwiseConv2dNativeBackpropFilter"])))
def test_window_ops_have_a_code_generator(op_type):
    from jitflow.ops.registry import get_op_def
    d = get_op_def(op_type)
    assert d.lower is not None and d.lowerable is not None


def test_read_only_operands_share_the_routines_compiled_for_writable_ones(monkeypatch):
    """A constant filter and a feed that is not writeable reach the window routines as
    read-only arrays; kernels pass them through `readable`, so each routine keeps one compiled
    specialisation per dtype instead of one per combination of read-only operands."""
    from numba.core import types
    monkeypatch.setenv("JITFLOW_CACHE", "0")   # kernels built here: their routines get typed
    monkeypatch.setenv("JITFLOW_COMPILE", "numba")   # the Numba kernels call them
    rng = np.random.default_rng(21)   # the same inputs whatever ran before

    from jitflow.backends.numba_cpu import nnlib
    x = tf.placeholder(tf.float32, [None, 8, 8, 3])
    f = tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
    w = tf.Variable(rng.standard_normal((3, 3, 4, 4)).astype(np.float32))
    y = tf.nn.conv2d(tf.nn.conv2d(x, f, [1, 1, 1, 1], "SAME"), w, [1, 1, 1, 1], "VALID")
    d = tf.nn.depthwise_conv2d(x, tf.constant(np.ones((2, 2, 3, 2), np.float32)),
                               [1, 1, 1, 1], "SAME")
    p = tf.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    q = tf.nn.avg_pool(d, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    loss = tf.reduce_sum(p * p) + tf.reduce_sum(q)
    fetches = [loss] + tf.gradients(loss, [x, w])
    xv = rng.standard_normal((2, 8, 8, 3)).astype(np.float32)
    xv.setflags(write=False)
    out = _both(fetches, {x: xv})
    assert_same_result(out["numba"], out["interpreter"], rtol=1e-4, atol=1e-4)
    routines = [getattr(nnlib, n) for n in nnlib.__all__ if hasattr(getattr(nnlib, n),
                                                                     "signatures")]
    read_only = [(r.__name__, sig) for r in routines for sig in r.signatures
                 if any(isinstance(t, types.Array) and not t.mutable for t in sig)]
    assert not read_only, read_only
    assert nnlib.conv2d.signatures and nnlib.depthwise_conv2d.signatures
