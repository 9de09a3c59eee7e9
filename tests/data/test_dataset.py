"""tf.data.Dataset transformations: elements, structures, static shapes and errors, against
hand-computed values and TensorFlow."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors


def drain(t, feed=None, init=None, limit=1000):
    """Every element `t` gives until OutOfRangeError."""
    out = []
    with tf.Session() as sess:
        if init is not None:
            sess.run(init, feed)
        for _ in range(limit):
            try:
                out.append(sess.run(t))
            except errors.OutOfRangeError:
                return out
    raise AssertionError("no OutOfRangeError")


def elements(ds):
    return drain(ds.make_one_shot_iterator().get_next())


def as_lists(xs):
    return [x.tolist() if isinstance(x, np.ndarray) else
            tuple(as_lists(list(x))) if isinstance(x, tuple) else
            x.item() if isinstance(x, np.generic) else x for x in xs]


# -- sources --------------------------------------------------------------------------------------
def test_from_tensor_slices_structures(backend):
    ds = tf.data.Dataset.from_tensor_slices((np.arange(3, dtype=np.float32), [[1, 2], [3, 4],
                                                                              [5, 6]]))
    assert ds.output_types == (tf.float32, tf.int32)
    assert [s.as_list() for s in ds.output_shapes] == [[], [2]]
    got = elements(ds)
    assert [(a.item(), b.tolist()) for a, b in got] == [(0.0, [1, 2]), (1.0, [3, 4]),
                                                        (2.0, [5, 6])]
    d = tf.data.Dataset.from_tensor_slices({"a": np.arange(2), "b": np.array(["x", "y"])})
    assert d.output_types == {"a": tf.int64, "b": tf.string}
    assert [(e["a"], e["b"]) for e in elements(d)] == [(0, b"x"), (1, b"y")]
    with pytest.raises(ValueError, match="not compatible"):
        tf.data.Dataset.from_tensor_slices((np.arange(3), np.arange(4)))


def test_from_tensors_range_and_generator(backend):
    assert [e.tolist() for e in elements(tf.data.Dataset.from_tensors([1, 2]))] == [[1, 2]]
    assert as_lists(elements(tf.data.Dataset.range(5))) == [0, 1, 2, 3, 4]
    assert as_lists(elements(tf.data.Dataset.range(2, 9, 3))) == [2, 5, 8]
    r = tf.data.Dataset.range(3, output_type=tf.int32)
    assert r.output_types == tf.int32 and elements(r)[0].dtype == np.int32

    def gen():
        for i in range(3):
            yield i, [i] * 2
    g = tf.data.Dataset.from_generator(gen, (tf.int32, tf.float32), ((), (2,)))
    got = elements(g)
    assert [(a.item(), b.tolist()) for a, b in got] == [(0, [0.0, 0.0]), (1, [1.0, 1.0]),
                                                        (2, [2.0, 2.0])]
    assert got[0][1].dtype == np.float32
    bad = tf.data.Dataset.from_generator(lambda: iter([[1, 2, 3]]), tf.int32, (2,))
    with pytest.raises(errors.InvalidArgumentError, match="yielded an element of shape"):
        elements(bad)
    wrong = tf.data.Dataset.from_generator(lambda: iter(["x"]), tf.int64)
    with pytest.raises(errors.InvalidArgumentError, match="could not be converted"):
        elements(wrong)
    with_args = tf.data.Dataset.from_generator(lambda n: iter(range(n)), tf.int64, (),
                                               args=(4,))
    assert as_lists(elements(with_args)) == [0, 1, 2, 3]


def test_text_line_and_fixed_length_files(tmp_path, backend):
    a = tmp_path / "a.txt"
    a.write_bytes(b"one\ntwo\r\nthree")
    z = tmp_path / "b.txt.gz"
    with gzip.open(z, "wb") as f:
        f.write(b"four\nfive\n")
    lines = tf.data.TextLineDataset([str(a)])
    assert lines.output_types == tf.string
    assert elements(lines) == [b"one", b"two", b"three"]
    assert elements(tf.data.TextLineDataset(str(z), compression_type="GZIP")) == [b"four",
                                                                                  b"five"]
    fx = tmp_path / "r.bin"
    fx.write_bytes(b"HHabcdefgF")
    recs = tf.data.FixedLengthRecordDataset(str(fx), 3, header_bytes=2, footer_bytes=1)
    assert elements(recs) == [b"abc", b"def"]
    missing = tf.data.TextLineDataset(str(tmp_path / "nope.txt"))
    with pytest.raises(errors.NotFoundError):
        elements(missing)
    listed = tf.data.Dataset.list_files(str(tmp_path / "*.txt"), shuffle=False)
    assert elements(listed) == [str(a).encode()]


# -- transformations ------------------------------------------------------------------------------
def test_map_filter_batch(backend):
    ds = tf.data.Dataset.from_tensor_slices((np.arange(10, dtype=np.float32), np.arange(10) % 3))
    ds = ds.map(lambda x, y: (x * 2.0, y)).filter(lambda x, y: tf.not_equal(y, 0)).batch(3)
    assert [s.as_list() for s in ds.output_shapes] == [[None], [None]]
    got = elements(ds)
    assert [(a.tolist(), b.tolist()) for a, b in got] == [([2.0, 4.0, 8.0], [1, 2, 1]),
                                                          ([10.0, 14.0, 16.0], [2, 1, 2])]
    dropped = tf.data.Dataset.range(7).batch(3, drop_remainder=True)
    assert dropped.output_shapes.as_list() == [3]
    assert as_lists(elements(dropped)) == [[0, 1, 2], [3, 4, 5]]


def test_map_returns_structures_and_captures(backend):
    scale = tf.placeholder(tf.float32, [])
    w = tf.Variable(10.0)
    ds = tf.data.Dataset.range(3).map(
        lambda n: {"v": tf.cast(n, tf.float32) * scale + w, "s": tf.as_string(n)})
    it = ds.make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(it.initializer, {scale: 2.0})
        got = [sess.run(nxt) for _ in range(3)]
    assert [g["v"] for g in got] == [10.0, 12.0, 14.0]
    assert [g["s"] for g in got] == [b"0", b"1", b"2"]
    listy = tf.data.Dataset.range(2).map(lambda n: [n, n + 1])
    assert isinstance(listy.output_types, tuple)


def test_padded_batch_and_unbatch(backend):
    pb = tf.data.Dataset.range(1, 5).map(lambda n: tf.fill([n], n)).padded_batch(
        2, padded_shapes=[None])
    got = elements(pb)
    assert [g.tolist() for g in got] == [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]
    fixed = tf.data.Dataset.range(1, 3).map(lambda n: tf.fill([n], n)).padded_batch(
        2, padded_shapes=[4], padding_values=np.int64(-1))
    assert elements(fixed)[0].tolist() == [[1, -1, -1, -1], [2, 2, -1, -1]]
    words = tf.data.Dataset.from_tensor_slices(np.array([["a"], ["b"]])).padded_batch(2, [2])
    assert elements(words)[0].tolist() == [[b"a", b""], [b"b", b""]]
    un = tf.data.Dataset.from_tensor_slices(np.arange(6).reshape(2, 3)).unbatch()
    assert as_lists(elements(un)) == [0, 1, 2, 3, 4, 5]
    with pytest.raises(errors.InvalidArgumentError, match="Cannot batch tensors with different"):
        elements(tf.data.Dataset.range(3).map(lambda n: tf.fill([n], n)).batch(3))


def test_take_skip_repeat_shard_zip_concatenate_enumerate(backend):
    r = tf.data.Dataset.range
    assert as_lists(elements(r(5).skip(1).take(3).repeat(2))) == [1, 2, 3, 1, 2, 3]
    assert as_lists(elements(r(5).take(-1))) == [0, 1, 2, 3, 4]
    assert as_lists(elements(r(5).skip(-1))) == []
    assert as_lists(elements(r(10).shard(3, 1))) == [1, 4, 7]
    z = tf.data.Dataset.zip((r(3), r(10, 20)))
    assert as_lists(elements(z.concatenate(z))) == [(0, 10), (1, 11), (2, 12)] * 2
    assert as_lists(elements(r(3).enumerate(5)))[-1] == (7, 2)
    assert as_lists(elements(r(2).repeat(0))) == []
    with pytest.raises(TypeError, match="different types"):
        r(3).concatenate(tf.data.Dataset.from_tensors(1.0))
    nested = tf.data.Dataset.zip({"a": r(2), "b": (r(2), r(5, 7))})
    assert elements(nested)[1] == {"a": 1, "b": (1, 6)}


def test_flat_map_and_interleave(backend):
    fm = tf.data.Dataset.from_tensor_slices([[1, 2], [3, 4]]).flat_map(
        lambda v: tf.data.Dataset.from_tensor_slices(v * 10))
    assert as_lists(elements(fm)) == [10, 20, 30, 40]
    il = tf.data.Dataset.range(3).interleave(
        lambda v: tf.data.Dataset.from_tensors(v).repeat(3), cycle_length=2, block_length=2)
    assert as_lists(elements(il)) == [0, 0, 1, 1, 0, 1, 2, 2, 2]


def test_interleave_parity_with_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")

    def build(t):
        return t.data.Dataset.range(1, 5).interleave(
            lambda v: t.data.Dataset.from_tensors(v).repeat(v), cycle_length=3, block_length=2)
    g = tf_ref.Graph()
    with g.as_default():
        nxt = tf_ref.data.make_one_shot_iterator(build(tf_ref)).get_next()
        want = []
        with tf_ref.Session() as s:
            while True:
                try:
                    want.append(int(s.run(nxt)))
                except tf_ref.errors.OutOfRangeError:
                    break
    assert as_lists(elements(build(tf))) == want


def test_shuffle_semantics():
    """A buffer of 1 keeps the order; the i-th output comes from the first i + buffer inputs;
    a seed repeats the order; reshuffling gives each epoch its own order."""
    r = tf.data.Dataset.range
    assert as_lists(elements(r(10).shuffle(1))) == list(range(10))
    out = as_lists(elements(r(50).shuffle(5, seed=3)))
    assert sorted(out) == list(range(50))
    assert all(v < i + 5 for i, v in enumerate(out))
    tf.set_random_seed(7)
    a = as_lists(elements(r(20).shuffle(20, seed=1)))
    b = as_lists(elements(r(20).shuffle(20, seed=1)))
    assert a == b and a != list(range(20))
    two = as_lists(elements(r(20).shuffle(20, seed=2).repeat(2)))
    assert sorted(two[:20]) == sorted(two[20:]) == list(range(20)) and two[:20] != two[20:]
    same = as_lists(elements(r(20).shuffle(20, seed=2, reshuffle_each_iteration=False)
                             .repeat(2)))
    assert same[:20] == same[20:]


def test_cache_prefetch_apply_and_experimental(backend):
    ds = tf.data.Dataset.range(4).map(lambda n: n * 2).cache().prefetch(2).repeat(2)
    assert as_lists(elements(ds)) == [0, 2, 4, 6] * 2
    sr = tf.data.Dataset.range(6).apply(tf.data.experimental.shuffle_and_repeat(6, 2, seed=1))
    got = as_lists(elements(sr))
    assert sorted(got[:6]) == sorted(got[6:]) == list(range(6))
    mb = tf.data.Dataset.range(5).apply(tf.data.experimental.map_and_batch(lambda n: n + 1, 2))
    assert as_lists(elements(mb)) == [[1, 2], [3, 4], [5]]


def test_dataset_is_not_iterable_in_graph_mode():
    with pytest.raises(RuntimeError, match="eager"):
        iter(tf.data.Dataset.range(3))


# -- parity with TensorFlow -----------------------------------------------------------------------
PIPELINES = {
    "map_filter_batch": lambda t: t.data.Dataset.from_tensor_slices(
        (np.arange(12, dtype=np.float32), np.arange(12) % 4)).map(
        lambda x, y: (x * x, y + 1)).filter(lambda x, y: y > 1).batch(4),
    "padded": lambda t: t.data.Dataset.range(1, 6).map(
        lambda n: t.range(n)).padded_batch(2, padded_shapes=[None]),
    "zip_take_skip": lambda t: t.data.Dataset.zip(
        (t.data.Dataset.range(10).skip(2), t.data.Dataset.range(3).repeat())).take(5),
    "flat_map": lambda t: t.data.Dataset.range(4).flat_map(
        lambda n: t.data.Dataset.range(n).map(lambda m: m * 10 + n)),
    "strings": lambda t: t.data.Dataset.from_tensor_slices(["1,2", "3,4"]).map(
        lambda line: t.decode_csv(line, [[0.0], [0]])),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_parity_with_tensorflow(name):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    build = PIPELINES[name]
    g = tf_ref.Graph()
    with g.as_default():
        nxt = tf_ref.data.make_one_shot_iterator(build(tf_ref)).get_next()
        want = []
        with tf_ref.Session() as s:
            while True:
                try:
                    want.append(s.run(nxt))
                except tf_ref.errors.OutOfRangeError:
                    break
    got = elements(build(tf))
    assert len(got) == len(want)
    for w, h in zip(want, got):
        for a, b in zip(np.atleast_1d(w) if not isinstance(w, tuple) else w,
                        np.atleast_1d(h) if not isinstance(h, tuple) else h):
            np.testing.assert_array_equal(b, a)
            assert np.asarray(b).dtype == np.asarray(a).dtype


# -- TFRecordDataset ----------------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_tfrecord_dataset(tmp_path, backend, compression):
    paths = []
    for f in range(2):
        p = str(tmp_path / f"r{f}.tfrecord")
        with tf.io.TFRecordWriter(p, compression) as w:
            for i in range(3):
                w.write(f"f{f}r{i}".encode())
        paths.append(p)
    ds = tf.data.TFRecordDataset(paths, compression_type=compression)
    assert ds.output_types == tf.string and ds.output_shapes.as_list() == []
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = [sess.run(nxt) for _ in range(6)]
        with pytest.raises(errors.OutOfRangeError):
            sess.run(nxt)
    assert got == [b"f0r0", b"f0r1", b"f0r2", b"f1r0", b"f1r1", b"f1r2"]


def test_tfrecord_dataset_fed_names_and_errors(tmp_path):
    p = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(p) as w:
        w.write(b"only")
    names = tf.placeholder(tf.string, [None])
    it = tf.data.TFRecordDataset(names).make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        sess.run(it.initializer, {names: [p, p]})
        assert [sess.run(nxt), sess.run(nxt)] == [b"only", b"only"]
        sess.run(it.initializer, {names: [str(tmp_path / "missing")]})
        with pytest.raises(errors.NotFoundError, match="No such file or directory"):
            sess.run(nxt)
        sess.run(it.initializer, {names: [p]})
        assert sess.run(nxt) == b"only"
    with pytest.raises(ValueError, match="Unsupported compression_type: BZ2"):
        tf.data.TFRecordDataset(p, compression_type="BZ2")
    with pytest.raises(ValueError, match="scalar or a vector"):
        tf.data.TFRecordDataset([[p]])


def test_tfrecord_dataset_parity_with_tensorflow(tmp_path):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    p = str(tmp_path / "r.tfrecord")
    with tf_ref.io.TFRecordWriter(p, "ZLIB") as w:
        for i in range(4):
            w.write(bytes([i]) * i)
    out = []
    for m in (tf_ref, tf):
        g = m.Graph()
        with g.as_default():
            nxt = m.data.make_one_shot_iterator(
                m.data.TFRecordDataset([p], compression_type="ZLIB").batch(3)).get_next()
            with m.Session(graph=g) as sess:
                out.append([sess.run(nxt).tolist(), sess.run(nxt).tolist()])
    assert out[0] == out[1]


# -- SparseTensor components (VarLenFeature in a map) --------------------------------------------
def _records(m):
    def ex(v, y):
        return m.train.Example(features=m.train.Features(feature={
            "v": m.train.Feature(int64_list=m.train.Int64List(value=v)),
            "y": m.train.Feature(float_list=m.train.FloatList(value=[y]))})).SerializeToString()
    return [ex([1, 2], 0.5), ex([], 1.5), ex([3, 4, 5], 2.5)]


def _sparse_pipeline(m):
    feats = {"v": m.VarLenFeature(m.int64), "y": m.FixedLenFeature([], m.float32)}
    return m.data.Dataset.from_tensor_slices(_records(m)).map(
        lambda s: m.parse_single_example(s, feats))


def test_sparse_components_map_batch_and_get_next(backend):
    ds = _sparse_pipeline(tf)
    assert ds.output_classes["v"] is tf.SparseTensor and ds.output_classes["y"] is tf.Tensor
    assert ds.output_shapes["v"].as_list() == [None]
    batched = ds.batch(2)
    assert batched.output_shapes["v"].as_list() == [None, None]
    nxt = batched.make_one_shot_iterator().get_next()
    assert isinstance(nxt["v"], tf.SparseTensor)
    dense = tf.sparse.to_dense(nxt["v"])
    with tf.Session() as sess:
        first = sess.run(nxt)
        np.testing.assert_array_equal(first["v"].indices, [[0, 0], [0, 1]])
        np.testing.assert_array_equal(first["v"].values, [1, 2])
        np.testing.assert_array_equal(first["v"].dense_shape, [2, 2])   # widest row: 2
        np.testing.assert_array_equal(first["y"], [0.5, 1.5])
        np.testing.assert_array_equal(sess.run(dense), [[3, 4, 5]])
    # a map over a sparse component sees a SparseTensor
    tf.reset_default_graph()
    lengths = _sparse_pipeline(tf).map(lambda d: tf.size(d["v"].values))
    nxt = lengths.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert [sess.run(nxt) for _ in range(3)] == [2, 0, 3]
    with pytest.raises(NotImplementedError, match="SparseTensor components"):
        _sparse_pipeline(tf).padded_batch(2, {"v": [None], "y": []})


def test_sparse_components_parity_with_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    out = []
    for m in (tf_ref, tf):
        g = m.Graph()
        with g.as_default():
            ds = _sparse_pipeline(m).shuffle(1).repeat(2).batch(2)
            nxt = m.data.make_one_shot_iterator(ds).get_next()
            with m.Session(graph=g) as sess:
                got = []
                for _ in range(3):
                    v = sess.run(nxt)
                    got.append([v["v"].indices.tolist(), v["v"].values.tolist(),
                                v["v"].dense_shape.tolist(), v["y"].tolist()])
                out.append(got)
    assert out[0] == out[1]
