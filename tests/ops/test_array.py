"""Array ops: creation, shape ops, slicing, gather, tile, pad: TF1 names, static shapes, errors
at build time and run time, values against NumPy, and gradients against central differences.
"""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from helpers import central_difference


def run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def check_grad(build, x: np.ndarray, seed: int = 0):
    """tf.gradients of sum(w * build(x)) against central differences (float64)."""
    x = np.asarray(x, dtype=np.float64)
    ph = tf.placeholder(tf.float64, x.shape)
    y = build(ph)
    with tf.Session() as sess:
        out_shape = np.shape(sess.run(y, {ph: x}))
        w = np.random.default_rng(seed).standard_normal(out_shape)
        (g,) = tf.gradients(tf.reduce_sum(y * w), [ph])
        got = sess.run(g, {ph: x})
        want = central_difference(lambda v: float(np.sum(sess.run(y, {ph: v}) * w)), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# -- constant -----------------------------------------------------------------------------------
def test_constant_dtype_inference(backend):
    assert tf.constant(1).dtype == tf.int32
    assert tf.constant(1.5).dtype == tf.float32
    assert tf.constant([1, 2.5]).dtype == tf.float32
    assert tf.constant(True).dtype == tf.bool
    assert tf.constant(2 ** 40).dtype == tf.int64
    assert tf.constant(np.float64(1.0)).dtype == tf.float64
    assert tf.constant(3, dtype=tf.float64).dtype == tf.float64
    out = run(tf.constant([[1, 2], [3, 4]], dtype="float"))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[1, 2], [3, 4]])


def test_constant_with_shape_fills_reshapes_and_pads(backend):
    a = tf.constant(0.0, shape=[2, 3])
    b = tf.constant([1, 2, 3, 4, 5, 6], shape=[2, 3])
    c = tf.constant([7, 8], shape=[4])
    assert a.shape.as_list() == [2, 3]
    va, vb, vc = run([a, b, c])
    np.testing.assert_array_equal(va, np.zeros((2, 3)))
    np.testing.assert_array_equal(vb, [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(vc, [7, 8, 8, 8])  # TF1 repeats the last element


def test_constant_shape_errors():
    with pytest.raises(TypeError, match="Too many elements"):
        tf.constant([1, 2, 3], shape=[2])
    with pytest.raises(TypeError, match="Expected Tensor's shape"):
        tf.constant([1, 2, 3], shape=[3, 1], verify_shape=True)
    with pytest.raises(TypeError):
        tf.constant(1.5, dtype=tf.int32)
    with pytest.raises(TypeError):
        tf.constant("text", dtype=tf.float32)


def test_constant_name_and_type():
    c = tf.constant(1.0)
    d = tf.constant(2.0, name="two")
    assert (c.name, c.op.type, d.name) == ("Const:0", "Const", "two:0")


# -- fills ---------------------------------------------------------------------------------------
def test_zeros_ones_static_and_dynamic(backend):
    x = tf.placeholder(tf.float32, [None, 3])
    z = tf.zeros([2, 3], dtype=tf.int32)
    o = tf.ones(tf.shape(x))
    assert z.op.type == "Const" and z.op.name == "zeros"
    assert o.op.type == "Fill" and o.shape.as_list() == [None, 3]
    vz, vo = run([z, o], {x: np.zeros((4, 3))})
    assert vz.dtype == np.int32 and vz.shape == (2, 3) and not vz.any()
    assert vo.dtype == np.float32
    np.testing.assert_array_equal(vo, np.ones((4, 3)))


def test_zeros_like_ones_like(backend):
    x = tf.placeholder(tf.float64, [None, 2])
    y = tf.constant([[1, 2]], dtype=tf.int32)
    zl, ol = tf.zeros_like(x), tf.ones_like(x, dtype=tf.int32)
    zc = tf.zeros_like(y)
    zn = tf.ones_like(y, optimize=False)
    assert zc.op.type == "Const" and zn.op.type == "OnesLike"
    assert zl.op.type == "ZerosLike" and zl.dtype == tf.float64 and ol.dtype == tf.int32
    a, b, c, d = run([zl, ol, zc, zn], {x: np.full((3, 2), 7.0)})
    np.testing.assert_array_equal(a, np.zeros((3, 2)))
    np.testing.assert_array_equal(b, np.ones((3, 2), np.int32))
    assert b.dtype == np.int32 and c.dtype == np.int32
    np.testing.assert_array_equal(d, [[1, 1]])


def test_fill(backend):
    f = tf.fill([2, 2], 9)
    assert f.dtype == tf.int32 and f.shape.as_list() == [2, 2] and f.op.type == "Fill"
    np.testing.assert_array_equal(run(f), np.full((2, 2), 9))
    with pytest.raises(ValueError):
        tf.fill([2], tf.constant([1.0, 2.0]))


# -- range, linspace, one_hot, eye -----------------------------------------------------------
def test_range_dtype_inference_and_values(backend):
    a, b, c, d = tf.range(5), tf.range(1, 2, 0.25), tf.range(3, dtype=tf.float32), \
        tf.range(10, 0, -3)
    assert (a.dtype, b.dtype, c.dtype, d.dtype) == (tf.int32, tf.float32, tf.float32, tf.int32)
    assert a.shape.as_list() == [5] and d.shape.as_list() == [4]
    assert a.op.name == "range"
    va, vb, vc, vd = run([a, b, c, d])
    np.testing.assert_array_equal(va, np.arange(5))
    np.testing.assert_allclose(vb, [1.0, 1.25, 1.5, 1.75])
    np.testing.assert_array_equal(vc, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(vd, [10, 7, 4, 1])


def test_range_with_tensor_limit(backend):
    n = tf.placeholder(tf.int32, [])
    r = tf.range(n)
    assert r.shape.as_list() == [None]
    np.testing.assert_array_equal(run(r, {n: 4}), [0, 1, 2, 3])


def test_range_errors(backend):
    with pytest.raises(ValueError, match="delta != 0"):
        tf.range(0, 5, 0)
    n = tf.placeholder(tf.int32, [])
    r = tf.range(0, 5, n)
    with pytest.raises(tf.errors.InvalidArgumentError, match="delta != 0"):
        run(r, {n: 0})


def test_linspace(backend):
    a = tf.linspace(0.0, 1.0, 5)
    assert a.op.type == "LinSpace" and a.dtype == tf.float32 and a.shape.as_list() == [5]
    assert tf.lin_space is tf.linspace
    np.testing.assert_allclose(run(a), [0, 0.25, 0.5, 0.75, 1.0])


def test_one_hot_values_axis_and_dtype(backend):
    idx = tf.constant([0, 2, -1, 5])
    a = tf.one_hot(idx, 3)
    b = tf.one_hot(idx, 3, on_value=4, off_value=-1, axis=0)
    assert a.dtype == tf.float32 and a.shape.as_list() == [4, 3]
    assert b.dtype == tf.int32 and b.shape.as_list() == [3, 4]
    va, vb = run([a, b])
    want = np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]], np.float32)
    np.testing.assert_array_equal(va, want)  # out-of-range indices give off_value rows
    np.testing.assert_array_equal(vb, np.where(want.T > 0, 4, -1))
    assert tf.one_hot(idx, 3, dtype=tf.float64).dtype == tf.float64
    with pytest.raises(TypeError):
        tf.one_hot(tf.constant([0.5]), 3)


def test_eye(backend):
    e = tf.eye(2, 3, dtype=tf.int32)
    b = tf.eye(2, batch_shape=[3])
    assert e.shape.as_list() == [2, 3] and b.shape.as_list() == [3, 2, 2]
    ve, vb = run([e, b])
    np.testing.assert_array_equal(ve, [[1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(vb, np.broadcast_to(np.eye(2), (3, 2, 2)))


# -- shape, size, rank ------------------------------------------------------------------------
def test_shape_size_rank_dynamic(backend):
    x = tf.placeholder(tf.float32, [None, 3])
    s, n, r = tf.shape(x), tf.size(x), tf.rank(x)
    s64 = tf.shape(x, out_type=tf.int64)
    assert (s.op.type, s.dtype, s.shape.as_list()) == ("Shape", tf.int32, [2])
    assert s64.dtype == tf.int64
    sn = tf.shape_n([x, s])
    feed = {x: np.zeros((5, 3), np.float32)}
    vs, vn, vr, v64, vsn = run([s, n, r, s64, sn], feed)
    np.testing.assert_array_equal(vs, [5, 3])
    assert vs.dtype == np.int32 and v64.dtype == np.int64
    assert vn == 15 and vr == 2 and isinstance(vr, np.int32)
    np.testing.assert_array_equal(vsn[1], [2])
    with pytest.raises(TypeError):
        tf.shape(x, out_type=tf.float32)


def test_static_value_of_shape_arithmetic():
    x = tf.placeholder(tf.float32, [4, 3])
    np.testing.assert_array_equal(tf.get_static_value(tf.shape(x)), [4, 3])
    assert tf.get_static_value(tf.shape(x)[0] * 2) == 8
    assert tf.get_static_value(tf.placeholder(tf.int32, [])) is None


# -- reshape --------------------------------------------------------------------------------
def test_reshape_infers_minus_one_and_static_shapes(backend):
    x = tf.placeholder(tf.float32, [None, 6])
    a = tf.reshape(x, [-1, 2, 3])
    b = tf.reshape(x, [tf.shape(x)[0], 3, -1])
    c = tf.reshape(tf.zeros([2, 6]), [3, -1])
    assert a.op.type == "Reshape" and a.shape.as_list() == [None, 2, 3]
    assert b.shape.as_list() == [None, 3, None]
    assert c.shape.as_list() == [3, 4]
    v = np.arange(12, dtype=np.float32).reshape(2, 6)
    va, vb = run([a, b], {x: v})
    np.testing.assert_array_equal(va, v.reshape(-1, 2, 3))
    np.testing.assert_array_equal(vb, v.reshape(2, 3, 2))


def test_reshape_build_time_errors():
    x = tf.zeros([2, 3])
    with pytest.raises(ValueError, match="Cannot reshape a tensor with 6 elements"):
        tf.reshape(x, [4])
    with pytest.raises(ValueError, match="only one input size may be -1"):
        tf.reshape(x, [-1, -1])
    with pytest.raises(ValueError, match="evenly divisible by 4"):
        tf.reshape(x, [-1, 4])


def test_reshape_run_time_error(backend):
    x = tf.placeholder(tf.float32, [None])
    y = tf.reshape(x, [2, 2])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="Input to reshape is a tensor with 3 values, but the requested "
                             "shape has 4"):
        run(y * 2.0, {x: [1.0, 2.0, 3.0]})


# -- transpose, expand_dims, squeeze ---------------------------------------------------------
def test_transpose(backend):
    x = tf.placeholder(tf.float32, [2, None, 4])
    a, b = tf.transpose(x), tf.transpose(x, [1, 2, 0], conjugate=True)
    assert a.op.name == "transpose" and a.shape.as_list() == [4, None, 2]
    assert b.shape.as_list() == [None, 4, 2]
    v = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    va, vb = run([a, b], {x: v})
    np.testing.assert_array_equal(va, v.T)
    np.testing.assert_array_equal(vb, v.transpose(1, 2, 0))
    with pytest.raises(ValueError):
        tf.transpose(x, [0, 1])
    with pytest.raises(ValueError):
        tf.transpose(x, [0, 0, 1])


def test_expand_dims_and_squeeze(backend):
    x = tf.placeholder(tf.float32, [3, 1, None])
    a = tf.expand_dims(x, 0)
    b = tf.expand_dims(x, dim=-1)
    c = tf.squeeze(x, [1])
    d = tf.squeeze(x, squeeze_dims=[-2])
    e = tf.squeeze(x)
    assert a.shape.as_list() == [1, 3, 1, None] and b.shape.as_list() == [3, 1, None, 1]
    assert c.shape.as_list() == [3, None] and d.shape.as_list() == [3, None]
    assert e.shape.ndims is None  # a None dim may or may not be 1
    v = np.arange(6, dtype=np.float32).reshape(3, 1, 2)
    va, vb, vc, ve = run([a, b, c, e], {x: v})
    np.testing.assert_array_equal(va, v[None])
    np.testing.assert_array_equal(vb, v[..., None])
    np.testing.assert_array_equal(vc, v[:, 0])
    np.testing.assert_array_equal(ve, v[:, 0])
    with pytest.raises(ValueError, match="Can not squeeze dim\\[0\\]"):
        tf.squeeze(x, [0])
    with pytest.raises(ValueError):
        tf.expand_dims(x, 5)
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(tf.squeeze(x, [2]), {x: v})


# -- concat, stack, unstack, split ------------------------------------------------------------
def test_concat(backend):
    x = tf.placeholder(tf.float32, [None, 2])
    y = tf.placeholder(tf.float32, [None, 3])
    c = tf.concat([x, y], 1)
    c0 = tf.concat([x, x], axis=0)
    assert c.op.type == "ConcatV2" and c.op.name == "concat"
    assert c.shape.as_list() == [None, 5] and c0.shape.as_list() == [None, 2]
    vx, vy = np.ones((2, 2), np.float32), np.zeros((2, 3), np.float32)
    vc, vc0, single = run([c, c0, tf.concat([x], -1)], {x: vx, y: vy})
    np.testing.assert_array_equal(vc, np.concatenate([vx, vy], 1))
    np.testing.assert_array_equal(vc0, np.concatenate([vx, vx]))
    np.testing.assert_array_equal(single, vx)


def test_concat_errors():
    a, b = tf.zeros([2, 3]), tf.zeros([3, 3])
    with pytest.raises(ValueError, match="Dimension 1 in both shapes must be equal|Dimension"):
        tf.concat([a, b], 1)
    with pytest.raises(TypeError, match="argument order"):
        tf.concat(1, [a, b])
    with pytest.raises(TypeError):
        tf.concat([a, tf.zeros([2, 3], tf.int32)], 0)


def test_stack_unstack_and_legacy_names(backend):
    a, b = tf.constant([1, 2]), tf.constant([3, 4])
    s = tf.stack([a, b], axis=1)
    assert s.op.type == "Pack" and s.shape.as_list() == [2, 2]
    u = tf.unstack(s)
    assert len(u) == 2 and u[0].op.type == "Unpack"
    p = tf.pack([a, b])
    q = tf.unpack(p, axis=1)
    vs, vu0, vp, vq1 = run([s, u[0], p, q[1]])
    np.testing.assert_array_equal(vs, [[1, 3], [2, 4]])
    np.testing.assert_array_equal(vu0, [1, 3])
    np.testing.assert_array_equal(vp, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(vq1, [2, 4])
    with pytest.raises(ValueError, match="Cannot infer num"):
        tf.unstack(tf.placeholder(tf.float32, [None]))
    with pytest.raises(ValueError):
        tf.stack([tf.zeros([2]), tf.zeros([3])])


def test_split_even_and_sizes(backend):
    x = tf.constant(np.arange(12).reshape(2, 6))
    a = tf.split(x, 3, axis=1)
    b = tf.split(x, [1, -1, 2], 1)
    assert [t.shape.as_list() for t in a] == [[2, 2]] * 3
    assert [t.shape.as_list() for t in b] == [[2, 1], [2, 3], [2, 2]]
    assert a[0].name == "split:0" and a[2].name == "split:2"
    va, vb = run([a, b])
    for got, want in zip(va, np.split(np.arange(12).reshape(2, 6), 3, 1)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(vb[1], np.arange(12).reshape(2, 6)[:, 1:4])
    with pytest.raises(ValueError, match="evenly divisible by 4"):
        tf.split(x, 4, axis=1)
    with pytest.raises(ValueError):
        tf.split(x, [2, 2], axis=1)


def test_split_dynamic_dimension(backend):
    x = tf.placeholder(tf.float32, [None])
    a, b = tf.split(x, 2)
    assert a.shape.as_list() == [None]
    va, vb = run([a, b], {x: [1, 2, 3, 4]})
    np.testing.assert_array_equal(vb, [3, 4])
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(a, {x: [1, 2, 3]})


# -- slice, strided_slice, __getitem__ -------------------------------------------------------------
def test_slice(backend):
    x = tf.placeholder(tf.float32, [3, None])
    s = tf.slice(x, [1, 0], [2, -1])
    assert s.op.type == "Slice" and s.shape.as_list() == [2, None]
    v = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(run(s, {x: v}), v[1:3, :])
    with pytest.raises(ValueError):
        tf.slice(x, [2, 0], [2, 1])


_SPECS = [
    np.s_[1], np.s_[-1], np.s_[1:], np.s_[::-1], np.s_[::2], np.s_[-2::-2], np.s_[3:0:-1],
    np.s_[:, 1], np.s_[..., 2], np.s_[None, :, 1], np.s_[1, ..., None], np.s_[:, None, ::-1],
    np.s_[-100:100], np.s_[1:-1, 2:0:-1, ...], np.s_[..., None, 0], np.s_[0, 0, 0],
    np.s_[:, -3:-1, ::3], np.s_[1:1],
]


@pytest.mark.parametrize("spec", _SPECS, ids=[repr(s) for s in _SPECS])
def test_getitem_matches_numpy(spec, backend):
    v = np.arange(60, dtype=np.float32).reshape(4, 3, 5)
    x = tf.placeholder(tf.float32, [4, 3, 5])
    y = x[spec]
    assert y.op.type == "StridedSlice" and y.op.name.startswith("strided_slice")
    want = v[spec]
    assert y.shape.as_list() == list(want.shape)
    got = run(y, {x: v})
    np.testing.assert_array_equal(got, want)


def test_getitem_with_unknown_dims_and_tensor_index(backend):
    x = tf.placeholder(tf.float32, [None, 3])
    i = tf.placeholder(tf.int32, [])
    a, b, c = x[i], x[i:i + 2, ::-1], x[:, tf.constant(1)]
    assert a.shape.as_list() == [3] and b.shape.as_list() == [None, 3]
    assert c.shape.as_list() == [None]
    v = np.arange(12, dtype=np.float32).reshape(4, 3)
    va, vb, vc = run([a, b, c], {x: v, i: 2})
    np.testing.assert_array_equal(va, v[2])
    np.testing.assert_array_equal(vb, v[2:4, ::-1])
    np.testing.assert_array_equal(vc, v[:, 1])
    assert tf.newaxis is None


def test_getitem_errors(backend):
    x = tf.placeholder(tf.float32, [None, 3])
    with pytest.raises(TypeError, match="valid indices"):
        x[[0, 1]]
    with pytest.raises(TypeError):
        x[tf.constant(1.0)]
    with pytest.raises(ValueError, match="out of bounds"):
        x[:, 3]
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of bounds"):
        run(x[5], {x: np.zeros((2, 3))})


def test_strided_slice_masks(backend):
    v = np.arange(20, dtype=np.float32).reshape(4, 5)
    x = tf.constant(v)
    a = tf.strided_slice(x, [1, 4], [3, 0], [1, -1], end_mask=2)
    b = tf.strided_slice(x, [0, 2], [0, 3], shrink_axis_mask=0, begin_mask=1, end_mask=1)
    c = tf.strided_slice(x, [0, 1], [0, 2], [1, 1], ellipsis_mask=1)
    d = tf.strided_slice(x, [2, 0], [3, 0], new_axis_mask=2, shrink_axis_mask=1)
    va, vb, vc, vd = run([a, b, c, d])
    np.testing.assert_array_equal(va, v[1:3, 4::-1])
    np.testing.assert_array_equal(vb, v[:, 2:3])
    np.testing.assert_array_equal(vc, v[..., 1:2])
    np.testing.assert_array_equal(vd, v[2, None])
    assert d.shape.as_list() == [1, 5]


@pytest.mark.parametrize("spec", [np.s_[1:, ::-2], np.s_[None, -1], np.s_[..., 1:3]],
                         ids=["neg-step", "newaxis", "ellipsis"])
def test_getitem_gradient(spec):
    check_grad(lambda x: x[spec], np.arange(12.0).reshape(3, 4))


# -- gather, gather_nd --------------------------------------------------------------------------
def test_gather(backend):
    p = tf.placeholder(tf.float32, [3, None])
    g0 = tf.gather(p, [2, 0, 2])
    g1 = tf.gather(p, [[1], [0]], axis=1)
    assert g0.op.type == "GatherV2" and g0.shape.as_list() == [3, None]
    assert g1.shape.as_list() == [3, 2, 1]
    v = np.arange(6, dtype=np.float32).reshape(3, 2)
    a, b = run([g0, g1], {p: v})
    np.testing.assert_array_equal(a, v[[2, 0, 2]])
    np.testing.assert_array_equal(b, np.take(v, [[1], [0]], axis=1))


def test_gather_out_of_range_raises(backend):
    p = tf.constant([1.0, 2.0, 3.0])
    i = tf.placeholder(tf.int32, [None])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[0\] = 5 is not in "
                                                             r"\[0, 3\)"):
        run(tf.gather(p, i), {i: [5, 0]})
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[1\] = -1"):
        run(tf.gather(p, i), {i: [0, -1]})


def test_gather_gradient_sums_repeated_indices(backend):
    p = tf.placeholder(tf.float32, [3, 2])
    y = tf.gather(p, [0, 2, 0])
    (g,) = tf.gradients(y, [p])
    out = run(g, {p: np.zeros((3, 2))})
    np.testing.assert_array_equal(out, [[2, 2], [0, 0], [1, 1]])
    check_grad(lambda x: tf.gather(x, [[1, 1], [0, 2]], axis=1), np.arange(6.0).reshape(2, 3))


def test_gather_batch_dims_by_hand(backend):
    # batch 0 takes columns [0, 2] of [[0, 1, 2], [3, 4, 5]], batch 1 columns [1, 1] of
    # [[6, 7, 8], [9, 10, 11]]
    p = tf.placeholder(tf.float64, [2, 2, 3])
    i = tf.placeholder(tf.int32, [2, 2])
    y = tf.gather(p, i, axis=2, batch_dims=1)
    assert y.op.type == "GatherV2" and y.op.get_attr("batch_dims") == 1
    assert y.shape.as_list() == [2, 2, 2]
    (g,) = tf.gradients(tf.reduce_sum(y), [p])
    pv, iv = np.arange(12.0).reshape(2, 2, 3), [[0, 2], [1, 1]]
    got, got_g = run([y, g], {p: pv, i: iv})
    assert got.tolist() == [[[0, 2], [3, 5]], [[7, 7], [10, 10]]]
    assert got_g.tolist() == [[[1, 0, 1], [1, 0, 1]], [[0, 2, 0], [0, 2, 0]]]  # counts
    # axis defaults to batch_dims (here -1: params' last axis); batch_dims=-1 counts from the
    # rank of indices (1 here)
    y2 = tf.gather(p, i, batch_dims=-1)
    assert y2.op.get_attr("axis") == 2 and y2.op.get_attr("batch_dims") == 1
    np.testing.assert_array_equal(run(y2, {p: pv, i: iv}), got)
    # axis 1: rows of each batch
    y3 = tf.gather(p, [[1, 1, 0], [0, 1, 0]], axis=1, batch_dims=1)
    assert y3.shape.as_list() == [2, 3, 3]
    np.testing.assert_array_equal(run(y3, {p: pv}), [pv[0][[1, 1, 0]], pv[1][[0, 1, 0]]])
    check_grad(lambda x: tf.gather(x, [[2, 0, 0], [1, 1, 2]], axis=-1, batch_dims=1),
               np.arange(12.0).reshape(2, 2, 3))


def test_gather_batch_dims_errors(backend):
    p = tf.zeros([2, 3, 4])
    with pytest.raises(ValueError, match=r"batch_dims \(1\) must be less than or equal to axis"):
        tf.gather(p, [[0], [1]], axis=0, batch_dims=1)
    with pytest.raises(ValueError, match="must be in"):
        tf.gather(p, [[0], [1]], axis=2, batch_dims=3)
    with pytest.raises(ValueError, match="Dimension 0 in both shapes must be equal"):
        tf.gather(p, [[0], [1], [0]], axis=2, batch_dims=1)
    i = tf.placeholder(tf.int32, [None, 1])
    with pytest.raises(tf.errors.InvalidArgumentError, match="must equal"):
        run(tf.gather(p, i, axis=2, batch_dims=1), {i: [[0], [1], [2]]})
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"is not in \[0, 4\)"):
        run(tf.gather(p, i, axis=2, batch_dims=1), {i: [[0], [4]]})


@pytest.mark.parametrize("axis,batch_dims", [(2, 1), (-1, 2), (None, 1), (1, -1)])
def test_gather_batch_dims_matches_tensorflow(axis, batch_dims):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    rng = np.random.default_rng(3)
    pv = rng.standard_normal((2, 3, 4))
    iv = rng.integers(0, 3, (2, 3, 2)) if batch_dims == 2 else rng.integers(0, 3, (2, 5))
    if batch_dims == -1:
        iv = iv[:, :1]

    def build(t):
        p = t.constant(pv)
        y = t.gather(p, t.constant(iv.astype(np.int32)), axis=axis, batch_dims=batch_dims)
        w = t.constant(np.arange(np.prod(y.shape.as_list()), dtype=np.float64)
                       .reshape(y.shape.as_list()))
        return [y, t.gradients(t.reduce_sum(y * w), p)[0]], y.shape.as_list()

    with tf_ref.Graph().as_default():
        outs, want_shape = build(tf_ref)
        with tf_ref.Session() as sess:
            want = sess.run(outs)
    outs, got_shape = build(tf)
    assert got_shape == want_shape
    got = run(outs)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_gather_nd(backend):
    v = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    p = tf.constant(v)
    a = tf.gather_nd(p, [[1, 2], [0, 0]])
    b = tf.gather_nd(p, [[[1, 2, 3]]])
    assert a.shape.as_list() == [2, 4] and b.shape.as_list() == [1, 1]
    va, vb = run([a, b])
    np.testing.assert_array_equal(va, [v[1, 2], v[0, 0]])
    np.testing.assert_array_equal(vb, [[v[1, 2, 3]]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not index"):
        run(tf.gather_nd(p, [[2, 0]]))


# -- tile, pad, reverse, broadcast_to, boolean_mask ------------------------------------------------
def test_tile(backend):
    x = tf.placeholder(tf.float32, [None, 2])
    t = tf.tile(x, [2, 3])
    assert t.shape.as_list() == [None, 6]
    v = np.arange(4, dtype=np.float32).reshape(2, 2)
    np.testing.assert_array_equal(run(t, {x: v}), np.tile(v, (2, 3)))
    with pytest.raises(ValueError):
        tf.tile(x, [2])
    check_grad(lambda x: tf.tile(x, [3, 2]), np.arange(6.0).reshape(2, 3))


def test_pad_modes(backend):
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = tf.constant(v)
    a = tf.pad(x, [[1, 0], [0, 2]])
    b = tf.pad(x, [[1, 1], [2, 2]], mode="REFLECT")
    c = tf.pad(x, [[2, 2], [1, 1]], mode="SYMMETRIC", constant_values=0)
    d = tf.pad(x, [[0, 1], [1, 0]], constant_values=-1)
    assert a.shape.as_list() == [3, 5]
    va, vb, vc, vd = run([a, b, c, d])
    np.testing.assert_array_equal(va, np.pad(v, [[1, 0], [0, 2]]))
    np.testing.assert_array_equal(vb, np.pad(v, [[1, 1], [2, 2]], mode="reflect"))
    np.testing.assert_array_equal(vc, np.pad(v, [[2, 2], [1, 1]], mode="symmetric"))
    np.testing.assert_array_equal(vd, np.pad(v, [[0, 1], [1, 0]], constant_values=-1))
    with pytest.raises(ValueError):
        tf.pad(x, [[3, 0], [0, 0]], mode="REFLECT")
    with pytest.raises(ValueError):
        tf.pad(x, [[1, 1]])


def test_pad_gradients():
    check_grad(lambda x: tf.pad(x, [[1, 2], [0, 1]]), np.arange(6.0).reshape(2, 3))
    check_grad(lambda x: tf.pad(x, [[2, 1], [1, 1]], mode="REFLECT"),
               np.arange(12.0).reshape(3, 4))
    check_grad(lambda x: tf.pad(x, [[3, 1]], mode="SYMMETRIC"), np.arange(4.0))


def test_reverse(backend):
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = tf.reverse(tf.constant(v), [-1])
    assert r.op.type == "ReverseV2"
    np.testing.assert_array_equal(run(r), v[:, ::-1])
    with pytest.raises(ValueError):
        tf.reverse(tf.constant(v), [2])


def test_broadcast_to(backend):
    x = tf.placeholder(tf.float32, [3, 1])
    b = tf.broadcast_to(x, [2, 3, 4])
    assert b.shape.as_list() == [2, 3, 4]
    v = np.arange(3, dtype=np.float32).reshape(3, 1)
    np.testing.assert_array_equal(run(b, {x: v}), np.broadcast_to(v, (2, 3, 4)))
    with pytest.raises(ValueError):
        tf.broadcast_to(x, [2, 2])
    check_grad(lambda t: tf.broadcast_to(t, [2, 3, 4]), v.astype(np.float64))


def test_boolean_mask(backend):
    x = tf.placeholder(tf.float32, [None, 2])
    m = tf.placeholder(tf.bool, [None])
    y = tf.boolean_mask(x, m)
    assert y.shape.as_list() == [None, 2]
    v = np.arange(8, dtype=np.float32).reshape(4, 2)
    mv = np.array([True, False, True, True])
    np.testing.assert_array_equal(run(y, {x: v, m: mv}), v[mv])
    (g,) = tf.gradients(tf.reduce_sum(y), [x])
    np.testing.assert_array_equal(run(g, {x: v, m: mv}), np.repeat(mv[:, None], 2, 1))
    with pytest.raises(TypeError):
        tf.boolean_mask(x, tf.constant([1, 0]))


def test_identity_n_and_tuple(backend):
    a, b = tf.constant(1.0), tf.constant([2, 3])
    x, y = tf.identity_n([a, b])
    assert x.op is y.op and x.op.type == "IdentityN"
    p, q = tf.tuple([a, b])
    assert p.op.type == "Identity" and q.op.control_inputs
    vx, vy, vp, vq = run([x, y, p, q])
    assert vx == 1.0 and vp == 1.0
    np.testing.assert_array_equal(vy, [2, 3])
    np.testing.assert_array_equal(vq, [2, 3])


# -- gradients of shape ops through tf.gradients ------------------------------------------------
@pytest.mark.parametrize("build", [
    lambda x: tf.reshape(x, [3, 2]),
    lambda x: tf.reshape(x, tf.shape(tf.transpose(x))),
    lambda x: tf.transpose(x, [1, 0]),
    lambda x: tf.expand_dims(x, 1),
    lambda x: tf.squeeze(tf.expand_dims(x, 0)),
    lambda x: tf.concat([x, 2.0 * x, x[:, :1]], 1),
    lambda x: tf.stack([x, x * x], axis=1),
    lambda x: tf.unstack(x, axis=1)[2] * 3.0,
    lambda x: tf.split(x, [1, 2], axis=1)[1],
    lambda x: tf.slice(x, [0, 1], [-1, 2]),
    lambda x: tf.reverse(x, [0, 1]),
], ids=["reshape", "reshape-dynamic", "transpose", "expand_dims", "squeeze", "concat", "stack",
        "unstack", "split", "slice", "reverse"])
def test_shape_op_gradients(build):
    check_grad(build, np.arange(6.0).reshape(2, 3) / 7.0)


def test_concat_gradient_with_unknown_sizes(backend):
    x = tf.placeholder(tf.float32, [None, 2])
    y = tf.placeholder(tf.float32, [None, 2])
    c = tf.concat([x, y], 0)
    gx, gy = tf.gradients(c * tf.constant([[1.0, 2.0]]), [x, y])
    vx, vy = run([gx, gy], {x: np.zeros((1, 2)), y: np.zeros((3, 2))})
    np.testing.assert_array_equal(vx, [[1, 2]])
    np.testing.assert_array_equal(vy, [[1, 2]] * 3)


def test_shape_arguments_accept_dimensions_and_tensor_lists(backend):
    x = tf.placeholder(tf.float32, [None, 6])
    a = tf.reshape(x, [-1, x.shape[1]])
    b = tf.zeros([tf.shape(x)[0], x.get_shape()[1]])
    assert a.shape.as_list() == [None, 6] and b.shape.as_list() == [None, 6]
    with pytest.raises(ValueError, match="unknown dimension"):
        tf.zeros(x.shape)
    va, vb = run([a, b], {x: np.ones((2, 6))})
    assert va.shape == (2, 6) and vb.shape == (2, 6) and not vb.any()


def test_placeholder_with_default(backend):
    p = tf.placeholder_with_default([1.0, 2.0], shape=[None])
    assert p.shape.as_list() == [None] and p.op.type == "PlaceholderWithDefault"
    np.testing.assert_array_equal(run(p), [1.0, 2.0])
    np.testing.assert_array_equal(run(p * 2.0, {p: [3.0, 4.0, 5.0]}), [6.0, 8.0, 10.0])
    with pytest.raises(ValueError):
        tf.placeholder_with_default([1.0, 2.0], shape=[3])


# -- scatter_nd, segment sums, sequence_mask, meshgrid, unique, invert_permutation, roll ----------
def test_scatter_nd_sums_duplicates(backend):
    u = tf.placeholder(tf.float32, [3, 2])
    s = tf.scatter_nd([[1], [3], [1]], u, [4, 2])
    assert s.shape.as_list() == [4, 2] and s.op.type == "ScatterNd"
    v = np.arange(6, dtype=np.float32).reshape(3, 2)
    want = np.zeros((4, 2), np.float32)
    want[1] = v[0] + v[2]
    want[3] = v[1]
    np.testing.assert_array_equal(run(s, {u: v}), want)
    with pytest.raises(ValueError):
        tf.scatter_nd([[1]], tf.zeros([2, 2]), [4, 2])
    check_grad(lambda t: tf.scatter_nd([[0, 1], [1, 0], [0, 1]], t, [2, 2]), np.arange(3.0))


def test_unsorted_segment_sum(backend):
    d = tf.placeholder(tf.float32, [4, 2])
    ids = tf.placeholder(tf.int32, [4])
    s = tf.unsorted_segment_sum(d, ids, 3)
    assert s.shape.as_list() == [3, 2] and tf.math.unsorted_segment_sum is tf.unsorted_segment_sum
    v = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = run(s, {d: v, ids: [2, 0, 2, -1]})
    np.testing.assert_array_equal(out, [v[1], [0, 0], v[0] + v[2]])  # id -1 is dropped
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        run(s, {d: v, ids: [0, 3, 0, 0]})
    check_grad(lambda t: tf.unsorted_segment_sum(t, [1, -1, 1], 2),
               np.arange(6.0).reshape(3, 2))


def test_sequence_mask(backend):
    n = tf.placeholder(tf.int32, [None])
    a = tf.sequence_mask(n, 4)
    b = tf.sequence_mask(n, dtype=tf.float32)
    assert a.dtype == tf.bool and a.shape.as_list() == [None, 4]
    va, vb = run([a, b], {n: [1, 3]})
    np.testing.assert_array_equal(va, [[1, 0, 0, 0], [1, 1, 1, 0]])
    np.testing.assert_array_equal(vb, [[1, 0, 0], [1, 1, 1]])
    assert vb.dtype == np.float32


def test_meshgrid(backend):
    x, y = [1, 2, 3], [4, 5]
    gx, gy = tf.meshgrid(x, y)
    ix, iy = tf.meshgrid(x, y, indexing="ij")
    assert gx.shape.as_list() == [2, 3] and ix.shape.as_list() == [3, 2]
    out = run([gx, gy, ix, iy])
    for got, want in zip(out, np.meshgrid(x, y) + np.meshgrid(x, y, indexing="ij")):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError):
        tf.meshgrid(x, y, indexing="zz")


def test_unique(backend):
    x = tf.placeholder(tf.int64, [None])
    y, idx = tf.unique(x)
    assert y.shape.as_list() == [None] and idx.dtype == tf.int32
    v = np.array([7, 3, 7, 1, 3], np.int64)
    vy, vi = run([y, idx], {x: v})
    np.testing.assert_array_equal(vy, [7, 3, 1])  # order of first appearance
    np.testing.assert_array_equal(vy[vi], v)
    assert vy.dtype == np.int64


def test_invert_permutation_and_roll(backend):
    p = tf.invert_permutation([2, 0, 3, 1])
    np.testing.assert_array_equal(run(p), np.argsort([2, 0, 3, 1]))
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(tf.invert_permutation([0, 0]))
    v = np.arange(12.0).reshape(3, 4)
    r = tf.roll(tf.constant(v), [1, -1], [0, 1])
    np.testing.assert_array_equal(run(r), np.roll(v, (1, -1), axis=(0, 1)))
    check_grad(lambda t: tf.roll(t, 2, 1), v)


# -- Print, tf.print, check_numerics ---------------------------------------------------------------
def test_print_passes_input_through_and_writes_stderr(backend, capfd):
    x = tf.placeholder(tf.float32, [4])
    y = tf.Print(x, [x, tf.reduce_sum(x)], message="vals: ", summarize=2) * 2.0
    out = run(y, {x: [1.0, 2.0, 3.0, 4.0]})
    np.testing.assert_array_equal(out, [2.0, 4.0, 6.0, 8.0])
    err = capfd.readouterr().err
    assert "vals: [1.0 2.0...]10.0" in err
    (g,) = tf.gradients(tf.reduce_sum(y), [x])
    np.testing.assert_array_equal(run(g, {x: np.zeros(4)}), [2.0] * 4)


def test_tf_print_op(backend, capfd):
    x = tf.constant([3, 4])
    p = tf.print("total:", tf.reduce_sum(x), "of", x)
    assert isinstance(p, tf.Operation)
    assert run(p) is None
    assert "total: 7 of [3 4]" in capfd.readouterr().err


def test_check_numerics(backend):
    x = tf.placeholder(tf.float32, [2])
    c = tf.check_numerics(x, "bad input")
    v = tf.verify_tensor_all_finite(x * 2.0, "bad double")
    np.testing.assert_array_equal(run(c, {x: [1.0, 2.0]}), [1.0, 2.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad input : Tensor had NaN"):
        run(c, {x: [np.nan, 1.0]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad double : Tensor had Inf"):
        run(v, {x: [np.inf, 1.0]})
    with pytest.raises(TypeError):
        tf.check_numerics(tf.constant([1]), "ints")


# -- gradients with unknown shapes and second derivatives --------------------------------------
def test_gradients_with_unknown_shapes(backend):
    x = tf.placeholder(tf.float64, [None, None])
    i = tf.placeholder(tf.int32, [])
    outs = [tf.tile(x, [2, 1]), x[i:, ::-1], tf.slice(x, [0, i], [-1, 1]),
            tf.reshape(x, [-1]), tf.expand_dims(x, 1)]
    v = np.arange(6.0).reshape(2, 3)
    with tf.Session() as sess:
        for y in outs:
            w = np.random.default_rng(0).standard_normal(np.shape(sess.run(y, {x: v, i: 1})))
            (g,) = tf.gradients(tf.reduce_sum(y * w), [x])
            got = sess.run(g, {x: v, i: 1})
            want = central_difference(
                lambda a, y=y, w=w: float(np.sum(sess.run(y, {x: a, i: 1}) * w)), v)
            np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("build", [
    lambda x: tf.tile(x, [2, 2]),
    lambda x: tf.gather(x, [1, 1, 0]),
    lambda x: tf.slice(x, [0, 1], [2, 2]),
    lambda x: x[::-1, 1:],
    lambda x: tf.pad(x, [[1, 0], [0, 2]]),
    lambda x: tf.pad(x, [[1, 1], [1, 1]], mode="REFLECT"),
    lambda x: tf.gather_nd(x, [[0, 1], [1, 2]]),
], ids=["tile", "gather", "slice", "strided_slice", "pad", "mirror_pad", "gather_nd"])
def test_second_derivatives(build):
    """d/dx of <w, d sum(f(x)^3)/dx> matches central differences of the first gradient."""
    v = np.arange(1.0, 7.0).reshape(2, 3) / 3.0
    x = tf.placeholder(tf.float64, [2, 3])
    (g,) = tf.gradients(tf.reduce_sum(build(x) ** 3), [x])
    w = np.random.default_rng(1).standard_normal((2, 3))
    (h,) = tf.gradients(tf.reduce_sum(g * w), [x])
    with tf.Session() as sess:
        got = sess.run(h, {x: v})
        want = central_difference(lambda a: float(np.sum(sess.run(g, {x: a}) * w)), v)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_cross_by_hand(backend):
    a = tf.placeholder(tf.float64, [2, 3])
    b = tf.constant([[0.0, 1, 0], [4, 5, 6]], tf.float64)
    y = tf.linalg.cross(a, b)
    assert y.shape.as_list() == [2, 3] and tf.cross is tf.linalg.cross
    (g,) = tf.gradients(tf.reduce_sum(y), [a])
    got, got_g = run([y, g], {a: [[1, 0, 0], [1, 2, 3]]})
    # x cross y = z; (1, 2, 3) x (4, 5, 6) = (12 - 15, 12 - 6, 5 - 8)
    assert got.tolist() == [[0, 0, 1], [-3, 6, -3]]
    # d/da of sum(a x b) = d/da a . (b x (1, 1, 1)) = b x (1, 1, 1)
    assert got_g.tolist() == [[1, 0, -1], [-1, 2, -1]]
    with pytest.raises(ValueError, match="Dimension must be 3 but is 2"):
        tf.cross(tf.zeros([2, 2]), tf.zeros([2, 2]))
    with pytest.raises(ValueError, match="Shapes must be equal"):
        tf.cross(tf.zeros([2, 3]), tf.zeros([1, 3]))


def test_cross_matches_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    rng = np.random.default_rng(2)
    av, bv = rng.standard_normal((4, 2, 3)), rng.standard_normal((4, 2, 3))

    def build(t):
        a, b = t.constant(av), t.constant(bv)
        y = t.linalg.cross(a, b)
        return [y] + t.gradients(t.reduce_sum(y * t.constant(av * 2)), [a, b])

    with tf_ref.Graph().as_default():
        with tf_ref.Session() as sess:
            want = sess.run(build(tf_ref))
    got = run(build(tf))
    for x, w in zip(got, want):
        np.testing.assert_allclose(x, w, rtol=1e-12, atol=1e-12)
