"""The composed TF1 names of jitflow/ops/tf1_extra.py: hand-computed values, then the same
graphs against TensorFlow (skipped without it)."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

RNG = np.random.default_rng(11)
IMG = RNG.random((2, 4, 6, 3)).astype(np.float32)
F = RNG.standard_normal((3, 3, 1, 2)).astype(np.float32)
X4 = np.arange(2 * 4 * 4 * 1, dtype=np.float32).reshape(2, 4, 4, 1)


def run(fetch, feed=None):
    with tf.Session() as sess:
        return sess.run(fetch, feed)


# -- hand-computed ------------------------------------------------------------------------------
def test_space_to_batch_round_trip_and_layout():
    with tf.Graph().as_default():
        x = tf.constant(np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1))
        s2b = tf.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]])
        back = tf.batch_to_space_nd(s2b, [2, 2], [[0, 0], [0, 0]])
        padded = tf.space_to_batch(x[:, :3, :3], [[0, 1], [0, 1]], 2)
        out, again, p = run([s2b, back, padded])
    # batch b = offset (i, j) of the 2x2 block: pixels (2r + i, 2c + j)
    img = np.arange(16).reshape(4, 4)
    for i in range(2):
        for j in range(2):
            np.testing.assert_array_equal(out[2 * i + j, :, :, 0], img[i::2, j::2])
    np.testing.assert_array_equal(again, np.arange(16).reshape(1, 4, 4, 1))
    assert p.shape == (4, 2, 2, 1) and p[3, 1, 1, 0] == 0   # the padded corner
    assert tf.nn.space_to_batch is tf.space_to_batch_nd
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="not divisible by block_shape"):
            tf.space_to_batch_nd(tf.zeros([1, 3, 3, 1]), [2, 2], [[0, 0], [0, 0]])


def test_extract_image_patches_valid_and_same():
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    with tf.Graph().as_default():
        v = tf.extract_image_patches(x, [1, 2, 2, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
        s = tf.image.extract_patches(x, [1, 3, 3, 1], [1, 3, 3, 1], [1, 1, 1, 1], "SAME")
        vv, ss = run([v, s])
    np.testing.assert_array_equal(vv[0, 0, 0], [0, 1, 4, 5])
    np.testing.assert_array_equal(vv[0, 1, 1], [10, 11, 14, 15])
    # SAME, 3x3 at stride 3 over 4: 2 outputs, 2 rows of padding split 1 / 1
    assert ss.shape == (1, 2, 2, 9)
    np.testing.assert_array_equal(ss[0, 0, 0], [0, 0, 0, 0, 0, 1, 0, 4, 5])


def test_tensor_scatters_and_unravel_and_cross():
    with tf.Graph().as_default():
        t = tf.constant([1.0, 2.0, 3.0, 4.0])
        idx = tf.constant([[1], [3]])
        upd = tf.constant([10.0, 20.0])
        add = tf.tensor_scatter_nd_add(t, idx, upd)
        sub = tf.tensor_scatter_sub(t, idx, upd)
        new = tf.tensor_scatter_update(t, idx, upd)
        un = tf.unravel_index([5, 7], [2, 4])
        cr = tf.cross([[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
        a, s, n, u, c = run([add, sub, new, un, cr])
    np.testing.assert_array_equal(a, [1, 12, 3, 24])
    np.testing.assert_array_equal(s, [1, -8, 3, -16])
    np.testing.assert_array_equal(n, [1, 10, 3, 20])
    np.testing.assert_array_equal(u, [[1, 1], [1, 3]])   # 5 = (1, 1), 7 = (1, 3) in [2, 4]
    np.testing.assert_array_equal(c, [[0, 0, 1]])
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="Dimension must be 3"):
            tf.cross([1.0, 2.0], [3.0, 4.0])


def test_real_valued_complex_functions_and_bins():
    with tf.Graph().as_default():
        x = tf.constant([-2.0, 0.0, 3.0])
        r, i, c, a, e = run([tf.real(x), tf.imag(x), tf.conj(x), tf.angle(x),
                             tf.math.erfcinv(tf.constant([1.0, 0.5]))])
        bins = run(tf.histogram_fixed_width_bins([-1.0, 0.0, 1.5, 2.0, 9.0], [0.0, 2.0], 4))
    np.testing.assert_array_equal(r, [-2, 0, 3])
    np.testing.assert_array_equal(i, [0, 0, 0])
    np.testing.assert_array_equal(c, [-2, 0, 3])
    np.testing.assert_allclose(a, [np.pi, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(e, [0.0, 0.4769362762], atol=1e-6)   # erfc(0.47694) = 0.5
    np.testing.assert_array_equal(bins, [0, 0, 3, 3, 3])
    assert bins.dtype == np.int32


def test_switch_case_and_small_wrappers():
    with tf.Graph().as_default():
        i = tf.placeholder(tf.int32, [])
        out = tf.switch_case(i, [lambda: tf.constant(10), lambda: tf.constant(20)],
                             default=lambda: tf.constant(-1))
        with tf.Session() as sess:
            assert [sess.run(out, {i: k}) for k in (0, 1, 5)] == [10, 20, -1]
        m = tf.sparse_matmul([[1.0, 2.0]], [[3.0], [4.0]])
        assert run(m)[0, 0] == 11.0
        sp = tf.convert_to_tensor_or_sparse_tensor(
            tf.SparseTensorValue([[0, 0]], [1.0], [2, 2]))
        assert isinstance(sp, tf.SparseTensor)
        assert isinstance(tf.convert_to_tensor_or_sparse_tensor([1, 2]), tf.Tensor)
        assert tf.is_numeric_tensor(tf.constant(1.0))
        assert not tf.is_numeric_tensor(tf.constant("a")) and not tf.is_numeric_tensor(1.0)
        assert tf.is_symbolic_tensor(tf.constant(1.0))
    f = lambda x: x * 2  # noqa: E731
    assert tf.recompute_grad(f) is f


def test_partitioners_device_spec_and_enums():
    shape = tf.TensorShape([10, 4])
    assert tf.fixed_size_partitioner(3)(shape, tf.float32) == [3, 1]
    assert tf.fixed_size_partitioner(30)(shape, tf.float32) == [10, 1]
    # rows of 16 bytes, at most 40 bytes a shard: 2 rows a shard, 5 shards
    assert tf.variable_axis_size_partitioner(40)(shape, tf.float32) == [5, 1]
    assert tf.variable_axis_size_partitioner(40, max_shards=2)(shape, tf.float32) == [2, 1]
    # 160 bytes in slices of at least 64 bytes: ceil(2.5) = 3 shards
    assert tf.min_max_variable_partitioner(8, min_slice_size=64)(shape, tf.float32) == [3, 1]
    with pytest.raises(ValueError):
        tf.variable_axis_size_partitioner(0)
    d = tf.DeviceSpec.from_string("/job:worker/replica:0/task:1/device:gpu:2")
    assert (d.job, d.replica, d.task, d.device_type, d.device_index) == ("worker", 0, 1,
                                                                          "GPU", 2)
    assert d.to_string() == "/job:worker/replica:0/task:1/device:GPU:2"
    merged = d.make_merged_spec(tf.DeviceSpec(device_type="CPU", device_index=0))
    assert merged.to_string() == "/job:worker/replica:0/task:1/device:CPU:0"
    assert tf.DeviceSpec.from_string("/cpu:0").to_string() == "/device:CPU:0"
    with pytest.raises(ValueError, match="Unknown attribute"):
        tf.DeviceSpec.from_string("/bogus")
    assert tf.VariableAggregation.MEAN == 2 and tf.VariableSynchronization.ON_READ == 3
    assert tf.control_flow_v2_enabled() is False and tf.resource_variables_enabled() is False
    assert tf.executing_eagerly_outside_functions() is False


def test_pool_conv_transpose_batch_norm_and_backprops():
    with tf.Graph().as_default():
        x = tf.constant(X4)
        mp = tf.nn.pool(x, [2, 2], "MAX", "VALID", strides=[2, 2])
        ap1 = tf.nn.pool(tf.constant([[[1.0], [3.0], [5.0], [7.0]]]), [2], "AVG", "VALID",
                         strides=[2])
        ones = tf.ones([2, 1, 1])     # width 2, 1 output channel, 1 input channel
        ct = tf.nn.conv1d_transpose(tf.constant([[[1.0], [2.0]]]), ones, [1, 4, 1], 2)
        bn = tf.nn.batch_norm_with_global_normalization(
            tf.constant([3.0]), tf.constant([1.0]), tf.constant([3.0]), tf.constant([0.5]),
            tf.constant([2.0]), 1.0, True)
        f = tf.constant(RNG.standard_normal((3, 3, 1, 2)).astype(np.float32))
        y = tf.nn.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME")
        dy = tf.ones_like(y)
        bi = tf.nn.depthwise_conv2d_native_backprop_input([2, 4, 4, 1], f, dy, [1, 1, 1, 1],
                                                          "SAME")
        bf = tf.nn.depthwise_conv2d_backprop_filter(x, [3, 3, 1, 2], dy, [1, 1, 1, 1], "SAME")
        gi, gf = tf.gradients(tf.reduce_sum(y), [x, f])
        m, a, c, b, bi_, bf_, gi_, gf_ = run([mp, ap1, ct, bn, bi, bf, gi, gf])
    np.testing.assert_array_equal(m[0, :, :, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(a[0, :, 0], [2, 6])
    np.testing.assert_array_equal(c[0, :, 0], [1, 1, 2, 2])
    np.testing.assert_allclose(b, [(3 - 1) / 2 * 2 + 0.5])
    np.testing.assert_allclose(bi_, gi_, rtol=1e-6)
    np.testing.assert_allclose(bf_, gf_, rtol=1e-5)


def test_colour_spaces():
    px = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.5],
                   [1.0, 1.0, 0.0]], np.float32)
    with tf.Graph().as_default():
        hsv = tf.image.rgb_to_hsv(px)
        back = tf.image.hsv_to_rgb(hsv)
        yiq = tf.image.yiq_to_rgb(tf.image.rgb_to_yiq(px))
        yuv = tf.image.rgb_to_yuv(px)
        sat = tf.image.adjust_saturation(px, 0.0)
        hue = tf.image.adjust_hue(px[:1], 1.0 / 3)
        h, b, q, u, s, hu = run([hsv, back, yiq, yuv, sat, hue])
    np.testing.assert_allclose(h, [[0, 1, 1], [1 / 3, 1, 1], [2 / 3, 1, 1], [0, 0, 0.5],
                                   [1 / 6, 1, 1]], atol=1e-6)
    np.testing.assert_allclose(b, px, atol=1e-6)
    np.testing.assert_allclose(q, px, atol=1e-4)   # the matrices are 8-digit inverses
    np.testing.assert_allclose(u[:, 0], px @ [0.299, 0.587, 0.114], rtol=1e-6)
    np.testing.assert_allclose(s, np.repeat(px.max(1, keepdims=True), 3, 1), atol=1e-6)
    np.testing.assert_allclose(hu, [[0, 1, 0]], atol=1e-6)   # red turned a third: green
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="max_delta must be <= 0.5"):
            tf.image.random_hue(px, 0.6)
        with pytest.raises(ValueError, match="upper must be > lower"):
            tf.image.random_saturation(px, 0.5, 0.5)
        out = run(tf.image.random_saturation(px[None], 0.5, 1.5, seed=1))
        assert out.shape == (1, 5, 3)


def test_sobel_edges():
    img = np.zeros((1, 3, 3, 1), np.float32)
    img[0, 2, :, 0] = 1.0     # the bottom row bright
    with tf.Graph().as_default():
        e = run(tf.image.sobel_edges(tf.constant(img)))
    assert e.shape == (1, 3, 3, 1, 2)
    # dy at the centre: the row below (1, 2, 1) minus the row above (0): 4; dx: 0
    assert e[0, 1, 1, 0, 0] == 4 and e[0, 1, 1, 0, 1] == 0


def test_tensor_scatter_nd_update_repeated_indices_keep_the_last():
    with tf.Graph().as_default():
        t = tf.ones([5, 2])
        u = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        r = tf.tensor_scatter_nd_update(t, [[1], [3], [1]], u)
        many = tf.tensor_scatter_nd_update(tf.zeros([3]), [[1]] * 50, tf.range(50.0))
        elems = tf.tensor_scatter_nd_update([[1, 2], [3, 4]], [[0, 1], [1, 0], [0, 1]],
                                            [9, 8, 7])
        gy = tf.reshape(tf.range(10.0), [5, 2])
        gt, gu = tf.gradients(r, [t, u], grad_ys=gy)
        assert r.op.type == "TensorScatterUpdate" and r.shape.as_list() == [5, 2]
        out, m, e, a, b = run([r, many, elems, gt, gu])
    np.testing.assert_array_equal(out, [[1, 1], [5, 6], [1, 1], [3, 4], [1, 1]])
    np.testing.assert_array_equal(m, [0, 49, 0])
    assert e.dtype == np.int32
    np.testing.assert_array_equal(e, [[1, 7], [8, 4]])
    # tensor: the incoming gradient with zeros where it was overwritten; updates: the
    # gradient gathered at each index (repeated indices each get it, as TF's rule does)
    np.testing.assert_array_equal(a, [[0, 1], [0, 0], [4, 5], [0, 0], [8, 9]])
    np.testing.assert_array_equal(b, [[2, 3], [6, 7], [2, 3]])


def test_tensor_scatter_nd_update_errors_and_graph_def():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="updates .* must have shape"):
            tf.tensor_scatter_nd_update(tf.zeros([5, 2]), [[1]], [1.0, 2.0, 3.0])
        with pytest.raises(ValueError, match="only rank 1"):
            tf.tensor_scatter_nd_update(tf.zeros([5]), [[1, 1]], [1.0])
        with pytest.raises(TypeError, match="int32 or int64"):
            tf.tensor_scatter_nd_update(tf.zeros([5]), [[1.0]], [1.0])
        bad = tf.tensor_scatter_nd_update(tf.zeros([5, 2]), [[7]], [[1.0, 2.0]])
        with pytest.raises(tf.errors.InvalidArgumentError, match="does not index into"):
            run(bad)
    g = tf.Graph()
    with g.as_default():
        tf.tensor_scatter_nd_update(tf.zeros([4]), [[2], [2]], [1.0, 2.0], name="tsu")
    node = [n for n in g.as_graph_def().node if n.name == "tsu"][0]
    assert node.op == "TensorScatterUpdate"
    with tf.Graph().as_default():
        (y,) = tf.import_graph_def(g.as_graph_def(), return_elements=["tsu:0"], name="")
        np.testing.assert_array_equal(run(y), [0, 0, 2, 0])


# -- against TensorFlow -------------------------------------------------------------------------
def _graph(t):
    x = t.constant(X4)
    img = t.constant(IMG)
    f = t.constant(F)
    dy = t.constant(np.linspace(-1, 1, 2 * 4 * 4 * 2, dtype=np.float32).reshape(2, 4, 4, 2))
    out = {
        "s2b": t.space_to_batch_nd(x[:, :3], [2, 2], [[1, 0], [0, 2]]),
        "b2s": t.batch_to_space_nd(t.constant(np.arange(32.0).reshape(8, 2, 2, 1)), [2, 2],
                                   [[0, 1], [1, 0]]),
        "patches_same": t.extract_image_patches(img, [1, 2, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1],
                                                "SAME"),
        "patches_rate": t.image.extract_patches(img, [1, 2, 2, 1], [1, 1, 2, 1], [1, 2, 1, 1],
                                                "VALID"),
        "scatter_add": t.tensor_scatter_nd_add(t.ones([3, 2]), [[0], [2]], [[1.0, 2], [3, 4]]),
        "scatter_update": t.tensor_scatter_nd_update(t.ones([3, 2]), [[1, 1]], [5.0]),
        "scatter_update_repeated": t.tensor_scatter_nd_update(
            t.ones([4, 3]), [[2], [0], [2], [2]], t.reshape(t.range(12.0), [4, 3])),
        "unravel": t.unravel_index([0, 11, 5, 7], [3, 4]),
        "cross": t.linalg.cross(img[..., :3], img[..., ::-1]),
        "angle": t.math.angle(t.constant([-1.5, 0.0, 2.0])),
        "erfcinv": t.math.erfcinv(t.constant([0.1, 1.0, 1.7])),
        "bins": t.histogram_fixed_width_bins(t.constant([-3.0, 0.1, 0.5, 4.0]), [0.0, 1.0], 3),
        "pool_avg_same": t.nn.pool(x, [3, 2], "AVG", "SAME", strides=[2, 1]),
        "pool_max_1d": t.nn.pool(x[:, 0], [2], "MAX", "VALID", strides=[1]),
        "conv1d_t": t.nn.conv1d_transpose(x[:, 0], t.ones([3, 2, 1]), [2, 8, 2], 2, "SAME"),
        "bnwgn": t.nn.batch_norm_with_global_normalization(
            x, t.constant([1.0]), t.constant([4.0]), t.constant([0.5]), t.constant([2.0]), 0.1,
            False),
        "dw_bi": t.nn.depthwise_conv2d_native_backprop_input([2, 4, 4, 1], f, dy,
                                                             [1, 1, 1, 1], "SAME"),
        "dw_bf": t.nn.depthwise_conv2d_native_backprop_filter(x, [3, 3, 1, 2], dy,
                                                              [1, 1, 1, 1], "SAME"),
        "atrous_t": t.nn.atrous_conv2d_transpose(x, t.ones([2, 2, 2, 1]), [2, 4, 4, 2], 2,
                                                 "SAME"),
        "yiq": t.image.rgb_to_yiq(img), "rgb_from_yiq": t.image.yiq_to_rgb(img),
        "yuv": t.image.rgb_to_yuv(img), "rgb_from_yuv": t.image.yuv_to_rgb(img),
        "hsv": t.image.rgb_to_hsv(img), "rgb_from_hsv": t.image.hsv_to_rgb(img),
        "saturation": t.image.adjust_saturation(img, 1.7),
        "hue": t.image.adjust_hue(img, -0.3),
        "hue_uint8": t.image.adjust_hue(t.constant((IMG * 255).astype(np.uint8)), 0.2),
        "sobel": t.image.sobel_edges(img),
    }
    upd = t.reshape(f, [6, 3])[:3] * 2.0
    new = t.tensor_scatter_nd_update(img, [[0, 1, 2], [1, 3, 0], [0, 1, 2]], upd)
    out["scatter_update_nd"] = new
    out["scatter_update_grad_tensor"], out["scatter_update_grad_updates"] = t.gradients(
        new, [img, f], grad_ys=t.constant(IMG[::-1] * 3.0))
    return out


def test_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_v2_behavior()
    results = []
    for t in (tf, tf1):
        with t.Graph().as_default():
            fetch = _graph(t)
            with t.Session() as sess:
                results.append(sess.run(fetch))
    ours, theirs = results
    for k in theirs:
        assert ours[k].shape == theirs[k].shape, k
        assert ours[k].dtype == theirs[k].dtype, k
        tol = 1 if ours[k].dtype == np.uint8 else 2e-5
        np.testing.assert_allclose(ours[k].astype(np.float64), theirs[k].astype(np.float64),
                                   rtol=2e-5, atol=tol, err_msg=k)


def test_partitioners_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    for shape, dtype in [([10, 4], "float32"), ([1000, 37], "float64"), ([7], "string")]:
        for make in ("fixed_size_partitioner(3)", "variable_axis_size_partitioner(100)",
                     "variable_axis_size_partitioner(1000, max_shards=3)",
                     "min_max_variable_partitioner(5, min_slice_size=64)"):
            ours = eval(f"tf.{make}")(tf.TensorShape(shape), dtype=tf.as_dtype(dtype))
            theirs = eval(f"tf1.{make}")(tf1.TensorShape(shape), dtype=tf1.as_dtype(dtype))
            assert list(ours) == list(theirs), (make, shape, dtype)
    spec = "/job:ps/replica:1/task:2/device:GPU:3"
    assert tf.DeviceSpec.from_string(spec).to_string() == \
        tf1.DeviceSpec.from_string(spec).to_string()


def test_tensor_scatter_update_graph_def_runs_in_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    g = tf.Graph()
    with g.as_default():
        tf.tensor_scatter_nd_update(tf.zeros([4]), [[2], [0], [2]], [1.0, 2.0, 3.0], name="tsu")
    with tf1.Graph().as_default():
        gd = tf1.GraphDef.FromString(g.as_graph_def().SerializeToString())
        (y,) = tf1.import_graph_def(gd, return_elements=["tsu:0"], name="")
        with tf1.Session() as sess:
            np.testing.assert_array_equal(sess.run(y), [2, 0, 3, 0])
