"""Parsing tf.train.Example and SequenceExample records: dense features with defaults,
VarLenFeature as SparseTensors, FixedLenSequenceFeature padding, static shapes, TensorFlow's
error messages, and use inside tf.data and queue pipelines."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf


def _feature(m, v):
    if isinstance(v, bytes) or (isinstance(v, list) and v and isinstance(v[0], bytes)):
        return m.Feature(bytes_list=m.BytesList(value=v if isinstance(v, list) else [v]))
    if isinstance(v, list) and v and isinstance(v[0], float):
        return m.Feature(float_list=m.FloatList(value=v))
    if v is None:
        return m.Feature()   # no list set: the feature counts as absent
    return m.Feature(int64_list=m.Int64List(value=v))


def example(m=None, **features) -> bytes:
    """A serialized Example made with the message classes of module `m` (tf by default)."""
    m = (m or tf).train
    return m.Example(features=m.Features(feature={
        k: _feature(m, v) for k, v in features.items()})).SerializeToString()


def _run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def _first_line(e) -> str:
    return str(getattr(e, "message", e)).split("\n")[0]


S1 = dict(a=[1.0, 2.0], b=[3], c=[b"x", b"yz"], v=[1, 2, 3])
S2 = dict(a=[5.0, 6.0], v=[7], c=[b"q"])


def _features():
    return {"a": tf.FixedLenFeature([2], tf.float32),
            "b": tf.FixedLenFeature([], tf.int64, default_value=-1),
            "c": tf.VarLenFeature(tf.string), "v": tf.VarLenFeature(tf.int64),
            "s": tf.FixedLenSequenceFeature([], tf.int64, allow_missing=True)}


def test_parse_example_batch(backend):
    out = tf.parse_example([example(**S1), example(**S2)], _features())
    assert out["a"].shape.as_list() == [2, 2] and out["b"].shape.as_list() == [2]
    assert out["s"].shape.as_list() == [2, None]
    assert isinstance(out["c"], tf.SparseTensor)
    assert out["c"].indices.shape.as_list() == [None, 2]
    assert out["c"].dense_shape.shape.as_list() == [2]
    got = _run(out)
    np.testing.assert_array_equal(got["a"], np.array([[1, 2], [5, 6]], np.float32))
    assert got["a"].dtype == np.float32
    np.testing.assert_array_equal(got["b"], [3, -1])      # -1: the default
    assert got["b"].dtype == np.int64
    assert got["s"].shape == (2, 0) and got["s"].dtype == np.int64
    c, v = got["c"], got["v"]
    np.testing.assert_array_equal(c.indices, [[0, 0], [0, 1], [1, 0]])
    assert c.values.tolist() == [b"x", b"yz", b"q"]
    np.testing.assert_array_equal(c.dense_shape, [2, 2])
    np.testing.assert_array_equal(v.indices, [[0, 0], [0, 1], [0, 2], [1, 0]])
    np.testing.assert_array_equal(v.values, [1, 2, 3, 7])
    np.testing.assert_array_equal(v.dense_shape, [2, 3])


def test_parse_single_example(backend):
    out = tf.io.parse_single_example(example(**S1), _features())
    assert out["a"].shape.as_list() == [2] and out["b"].shape.as_list() == []
    assert out["c"].indices.shape.as_list() == [None, 1]
    got = _run(out)
    np.testing.assert_array_equal(got["a"], [1.0, 2.0])
    assert got["b"] == 3 and isinstance(got["b"], np.int64)
    np.testing.assert_array_equal(got["v"].indices, [[0], [1], [2]])
    np.testing.assert_array_equal(got["v"].dense_shape, [3])
    assert got["c"].values.tolist() == [b"x", b"yz"]
    name = _run(tf.parse_single_example(example(n=b"png bytes"),
                                        {"n": tf.FixedLenFeature([], tf.string)})["n"])
    assert name == b"png bytes" and type(name) is bytes   # a string scalar, as TF


def test_shapes_defaults_and_sequence_padding():
    rec = example(a=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], i=[1, 2], e=None)
    out = tf.parse_example([rec, example(a=[7.0, 8.0])], {
        "a": tf.FixedLenSequenceFeature([2], tf.float32, allow_missing=True,
                                        default_value=-1.0),
        "e": tf.FixedLenFeature([2], tf.string, default_value=["p", "q"]),
        "m": tf.FixedLenFeature([1, 2], tf.int64, default_value=[4, 5]),
    })
    assert out["a"].shape.as_list() == [2, None, 2] and out["m"].shape.as_list() == [2, 1, 2]
    got = _run(out)
    np.testing.assert_array_equal(got["a"], [[[1, 2], [3, 4], [5, 6]],
                                             [[7, 8], [-1, -1], [-1, -1]]])
    assert got["e"].tolist() == [[b"p", b"q"], [b"p", b"q"]]   # e=None: absent
    assert all(type(v) is bytes for v in got["e"].reshape(-1))
    np.testing.assert_array_equal(got["m"], [[[4, 5]], [[4, 5]]])
    one = _run(tf.parse_single_example(rec, {
        "a": tf.FixedLenFeature([3, 2], tf.float32),
        "s": tf.FixedLenSequenceFeature([3], tf.float32, allow_missing=True)}))
    np.testing.assert_array_equal(one["a"], np.arange(1, 7).reshape(3, 2))
    assert one["s"].shape == (0, 3) and one["s"].dtype == np.float32   # absent: no rows


def test_fed_batch_of_any_size(backend):
    ser = tf.placeholder(tf.string, [None])
    out = tf.parse_example(ser, {"i": tf.FixedLenFeature([2], tf.int64),
                                 "k": tf.FixedLenFeature([], tf.string, "")})
    assert out["i"].shape.as_list() == [None, 2] and out["k"].shape.as_list() == [None]
    recs = [example(i=[n, n + 1], k=b"z" * n) for n in range(4)]
    with tf.Session() as sess:
        got = sess.run(out, {ser: recs})
        np.testing.assert_array_equal(got["i"], [[0, 1], [1, 2], [2, 3], [3, 4]])
        assert got["k"].tolist() == [b"", b"z", b"zz", b"zzz"]
        assert all(type(v) is bytes for v in got["k"])
        assert sess.run(out["i"], {ser: recs[:1]}).shape == (1, 2)
    unknown = tf.parse_example(tf.placeholder(tf.string), {"i": tf.FixedLenFeature([2],
                                                                                  tf.int64)})
    assert unknown["i"].shape.ndims is None


@pytest.mark.parametrize("records,features,single,message", [
    ([S1], {"missing": tf.FixedLenFeature([], tf.float32)}, False,
     "Name: <unknown>, Feature: missing (data type: float) is required but could not be "
     "found."),
    ([S1], {"missing": tf.FixedLenFeature([], tf.float32)}, True,
     "Feature: missing (data type: float) is required but could not be found."),
    ([S1], {"a": tf.FixedLenFeature([3], tf.float32)}, False,
     "Name: <unknown>, Key: a, Index: 0.  Number of float values != expected.  Values size: "
     "2 but output shape: [3]"),
    ([S1], {"a": tf.FixedLenFeature([3], tf.float32)}, True,
     "Key: a.  Can't parse serialized Example: Some float_list slice was not parsed."),
    ([S1], {"a": tf.FixedLenFeature([2], tf.int64)}, False,
     "Name: <unknown>, Key: a, Index: 0.  Data types don't match. Data type: float but "
     "expected type: int64"),
    ([S1], {"a": tf.FixedLenFeature([2], tf.int64)}, True,
     "Key: a.  Data types don't match. Data type: float but expected type: int64"),
    ([S1, S1], {"c": tf.VarLenFeature(tf.float32)}, False,
     "Name: <unknown>, Key: c, Index: 0.  Data types don't match. Expected type: float, "
     "Actual type: string"),
    ([S2, dict(a=[1.0, 2.0, 3.0])], {"a": tf.FixedLenSequenceFeature(
        [2], tf.float32, allow_missing=True)}, False,
     "Name: <unknown>, Key: a, Index: 1.  Number of float values is not a multiple of stride "
     "length. Saw 3 values but output shape is: [?,2]"),
    ([dict(v=[1, 2, 3])], {"v": tf.FixedLenSequenceFeature([2], tf.int64, allow_missing=True)},
     True, "Error while parsing feature with key v: number of elements should be divisible "
           "by 2, found 3 instead"),
    ([dict(e=None)], {"e": tf.FixedLenFeature([], tf.float32)}, False,
     "Name: <unknown>, Feature: e (data type: float) is required but could not be found."),
])
def test_bad_records_raise_tensorflows_messages(records, features, single, message):
    ser = [example(**r) for r in records]
    out = tf.parse_single_example(ser[0], features) if single else \
        tf.parse_example(ser, features)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        _run(out)
    assert _first_line(info.value) == message


def test_example_names_and_unparsable_records():
    out = tf.parse_example([example(a=[1.0]), example()],
                           {"a": tf.FixedLenFeature([2], tf.float32)},
                           example_names=["first", "second"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="^Name: first, Key: a, Index: 0"):
        _run(out)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="^Could not parse example input, value: 'garbage'"):
        _run(tf.parse_single_example(b"garbage", {"a": tf.FixedLenFeature([2], tf.float32)}))


def test_build_time_errors():
    f = {"a": tf.FixedLenFeature([2], tf.float32)}
    with pytest.raises(TypeError, match="DataType int32 not in list of allowed values: "
                                        "float32, int64, string"):
        tf.parse_example([b""], {"a": tf.FixedLenFeature([2], tf.int32)})
    with pytest.raises(TypeError, match="parameter 'sparse_types' has DataType float64"):
        tf.parse_example([b""], {"a": tf.VarLenFeature(tf.float64)})
    with pytest.raises(ValueError, match="First dimension of shape for feature a unknown"):
        tf.parse_example([b""], {"a": tf.FixedLenFeature([None], tf.float32)})
    with pytest.raises(ValueError, match="requires allow_missing to be True"):
        tf.parse_example([b""], {"s": tf.FixedLenSequenceFeature([], tf.int64)})
    with pytest.raises(ValueError, match="Cannot reshape a tensor with 1 elements to shape "
                                         r"\[2\]"):
        tf.parse_example([b""], {"a": tf.FixedLenFeature([2], tf.float32, default_value=[1.0])})
    with pytest.raises(TypeError, match="Expected int64"):
        tf.parse_example([b""], {"i": tf.FixedLenFeature([], tf.int64, default_value=2.5)})
    for empty in ({}, None):
        with pytest.raises(ValueError, match="Argument `features` cannot be None or falsy"):
            tf.parse_example([b""], empty)
    with pytest.raises(ValueError, match="Input serialized must be a scalar"):
        tf.parse_single_example([b""], f)
    with pytest.raises(ValueError, match="at most rank 1 but is rank 2"):
        tf.parse_example([[b"", b""]], f)
    assert repr(tf.FixedLenFeature([2], tf.float32)) == \
        "FixedLenFeature(shape=[2], dtype=tf.float32, default_value=None)"
    assert tf.io.FixedLenFeature is tf.FixedLenFeature
    assert tf.FixedLenSequenceFeature([], tf.int64)._fields == (
        "shape", "dtype", "allow_missing", "default_value")


def test_in_a_dataset_map_and_batch(backend):
    recs = [example(x=[float(i), float(2 * i)], y=[i % 2]) for i in range(5)]
    feats = {"x": tf.FixedLenFeature([2], tf.float32), "y": tf.FixedLenFeature([], tf.int64)}
    ds = tf.data.Dataset.from_tensor_slices(recs).map(
        lambda s: tf.parse_single_example(s, feats)).batch(2)
    assert ds.output_shapes["x"].as_list() == [None, 2]
    nxt = ds.make_one_shot_iterator().get_next()
    total = tf.reduce_sum(nxt["x"])
    with tf.Session() as sess:
        first = sess.run(nxt)
        np.testing.assert_array_equal(first["x"], [[0, 0], [1, 2]])
        np.testing.assert_array_equal(first["y"], [0, 1])
        assert sess.run(total) == 2 + 4 + 3 + 6   # the next batch, records 2 and 3
        assert sess.run(nxt)["y"].tolist() == [0]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(nxt)


def test_in_a_queue_pipeline(tmp_path, backend):
    path = str(tmp_path / "train.tfrecord")
    with tf.python_io.TFRecordWriter(path) as w:
        for i in range(6):
            w.write(example(x=[float(i)], y=[i]))
    q = tf.train.string_input_producer([path], num_epochs=1, shuffle=False)
    _, value = tf.TFRecordReader().read(q)
    feats = tf.parse_single_example(value, {"x": tf.FixedLenFeature([1], tf.float32),
                                            "y": tf.FixedLenFeature([], tf.int64)})
    xs, ys = tf.train.batch([feats["x"], feats["y"]], batch_size=3)
    assert xs.shape.as_list() == [3, 1]
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        try:
            a, b = sess.run([xs, ys]), sess.run([xs, ys])
        finally:
            coord.request_stop()
            coord.join(threads)
    np.testing.assert_array_equal(a[0][:, 0], [0, 1, 2])
    np.testing.assert_array_equal(b[1], [3, 4, 5])


# -- SequenceExample ------------------------------------------------------------------------
def sequence_example(m=None) -> bytes:
    m = (m or tf).train
    f = lambda v: _feature(m, v)  # noqa: E731
    return m.SequenceExample(
        context=m.Features(feature={"len": f([3]), "name": f([b"abc"])}),
        feature_lists=m.FeatureLists(feature_list={
            "tok": m.FeatureList(feature=[f([1]), f([2]), f([3])]),
            "vec": m.FeatureList(feature=[f([1.0, 2.0]), f([3.0, 4.0]), f([5.0, 6.0])]),
            "var": m.FeatureList(feature=[f([b"a"]), f([b"b", b"c"]), f([b"d"])]),
        })).SerializeToString()


CONTEXT = {"len": tf.FixedLenFeature([], tf.int64), "name": tf.VarLenFeature(tf.string),
           "miss": tf.FixedLenFeature([], tf.float32, default_value=0.5)}
SEQUENCE = {"tok": tf.FixedLenSequenceFeature([], tf.int64),
            "vec": tf.FixedLenSequenceFeature([2], tf.float32),
            "var": tf.VarLenFeature(tf.string)}


def test_parse_single_sequence_example(backend):
    ctx, seq = tf.io.parse_single_sequence_example(sequence_example(), CONTEXT, SEQUENCE)
    assert seq["vec"].shape.as_list() == [None, 2] and seq["tok"].shape.as_list() == [None]
    assert seq["var"].indices.shape.as_list() == [None, 2]
    c, s = _run((ctx, seq))
    assert c["len"] == 3 and c["miss"] == np.float32(0.5)
    assert c["name"].values.tolist() == [b"abc"]
    np.testing.assert_array_equal(s["tok"], [1, 2, 3])
    np.testing.assert_array_equal(s["vec"], [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(s["var"].indices, [[0, 0], [1, 0], [1, 1], [2, 0]])
    np.testing.assert_array_equal(s["var"].dense_shape, [3, 2])
    assert s["var"].values.tolist() == [b"a", b"b", b"c", b"d"]


def test_parse_sequence_example_batch_pads_and_counts():
    short = tf.train.SequenceExample()
    short.feature_lists.feature_list["tok"].feature.add().int64_list.value.append(9)
    short.feature_lists.feature_list["vec"].feature.add().float_list.value.extend([7.0, 8.0])
    ctx, seq, lengths = tf.io.parse_sequence_example(
        [sequence_example(), short.SerializeToString()],
        {"miss": tf.FixedLenFeature([], tf.float32, default_value=0.5)},
        {"tok": SEQUENCE["tok"], "vec": SEQUENCE["vec"], "var": SEQUENCE["var"]})
    c, s, n = _run((ctx, seq, lengths))
    np.testing.assert_array_equal(s["tok"], [[1, 2, 3], [9, 0, 0]])
    np.testing.assert_array_equal(s["vec"][1], [[7, 8], [0, 0], [0, 0]])
    np.testing.assert_array_equal(n["tok"], [3, 1])
    np.testing.assert_array_equal(s["var"].dense_shape, [2, 3, 2])
    np.testing.assert_array_equal(c["miss"], [0.5, 0.5])


def test_sequence_errors():
    se = sequence_example()
    cases = [
        (None, {"miss": tf.FixedLenSequenceFeature([], tf.int64)},
         "Name: <unknown>, Feature list 'miss' is required but could not be found.  Did you "
         "mean to include it in feature_list_dense_missing_assumed_empty or "
         "feature_list_dense_defaults?"),
        (None, {"vec": tf.FixedLenSequenceFeature([3], tf.float32)},
         "Name: <unknown>, Key: vec, Index: 0.  Number of values != expected.  values size: 2 "
         "but output shape: [3]"),
        (None, {"tok": tf.FixedLenSequenceFeature([], tf.float32)},
         "Name: <unknown>, Feature list: tok, Index: 0.  Data types don't match. Expected "
         "type: float"),
        ({"len": tf.FixedLenFeature([], tf.float32)}, None,
         "Name: <unknown>, Context feature: len.  Data types don't match. Expected type: "
         "float"),
        ({"nope": tf.FixedLenFeature([], tf.float32)}, None,
         "Inconsistent max number of elements for feature nope: expected 1, but found 0"),
    ]
    for ctx, seq, message in cases:
        out = tf.io.parse_single_sequence_example(se, ctx, seq)
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            _run(out)
        assert _first_line(info.value) == message
    missing_ok = tf.io.parse_single_sequence_example(
        se, None, {"miss": tf.FixedLenSequenceFeature([], tf.int64, allow_missing=True)})[1]
    assert _run(missing_ok)["miss"].shape == (0,)
    with pytest.raises(ValueError, match="Both context_features and sequence_features are "
                                         "None"):
        tf.io.parse_single_sequence_example(se)
    with pytest.raises(ValueError, match="Unsupported FixedLenFeature"):
        tf.io.parse_single_sequence_example(se, None, {"tok": tf.FixedLenFeature([],
                                                                                 tf.int64)})
    with pytest.raises(ValueError, match=r"feature_list.dense_defaults\[tok\] must be None"):
        tf.io.parse_single_sequence_example(se, None, {"tok": tf.FixedLenSequenceFeature(
            [], tf.int64, default_value=4)})


# -- TensorFlow parity ----------------------------------------------------------------------
def _both(build):
    """(TensorFlow's result or error line, jitflow's) of build(module)."""
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    out = []
    for m in (tf_ref, tf):
        g = m.Graph()
        with g.as_default():
            fetches = build(m)
            try:
                with m.Session(graph=g) as sess:
                    out.append(sess.run(fetches))
            except m.errors.InvalidArgumentError as e:
                out.append(_op_message(e.message))
    return out


def _op_message(text: str) -> str:
    """The op's own message line in an error (TensorFlow wraps it in a 'Graph execution error'
    report with the node's traceback)."""
    skip = ("Graph execution error", "Detected at", "Node:", "Original stack trace")
    lines = [ln for ln in text.split("\n") if ln.strip() and not ln.startswith((" ", "\t"))
             and not ln.startswith(skip)]
    return lines[0]


def _assert_same(want, got):
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    if isinstance(want, dict):
        assert set(want) == set(got)
        for k in want:
            _assert_same(want[k], got[k])
        return
    if isinstance(want, (tuple, list)) and not hasattr(want, "indices"):
        for a, b in zip(want, got):
            _assert_same(a, b)
        return
    if hasattr(want, "indices"):
        for a, b in zip(want, got):
            _assert_same(a, b)
        return
    if isinstance(want, bytes):
        assert type(got) is bytes and got == want
        return
    want, got = np.asarray(want), np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == object:   # elements are bytes, not arrays holding bytes
        assert [type(x) for x in got.reshape(-1)] == [type(x) for x in want.reshape(-1)]
    np.testing.assert_array_equal(got, want)


_PARITY = {
    "batch": (lambda m: [example(m, **S1), example(m, **S2), b""], lambda m: {
        "a": m.FixedLenFeature([2], m.float32, default_value=[0.0, 1.0]),
        "b": m.FixedLenFeature([], m.int64, default_value=-1),
        "c": m.VarLenFeature(m.string), "v": m.VarLenFeature(m.int64),
        "s": m.FixedLenSequenceFeature([], m.int64, allow_missing=True, default_value=9)}),
    "seq2": (lambda m: [example(m, a=[1.0, 2.0, 3.0, 4.0]), example(m, a=[5.0, 6.0])],
             lambda m: {"a": m.FixedLenSequenceFeature([2], m.float32, allow_missing=True)}),
    "strings": (lambda m: [example(m, s=[b"p", b"q"], t=b"one"), example(m)],
                lambda m: {"s": m.FixedLenFeature([2], m.string, default_value=["d", "e"]),
                           "t": m.FixedLenFeature([], m.string, default_value="none")}),
    "missing": (lambda m: [example(m, **S1)], lambda m: {"z": m.FixedLenFeature([], m.int64)}),
    "count": (lambda m: [example(m, **S2), example(m, a=[1.0])],
              lambda m: {"a": m.FixedLenFeature([2], m.float32)}),
    "type": (lambda m: [example(m, **S1)], lambda m: {"v": m.FixedLenFeature([3], m.float32)}),
    "sparse_type": (lambda m: [example(m, **S1)], lambda m: {"c": m.VarLenFeature(m.int64)}),
    "stride": (lambda m: [example(m, v=[1, 2, 3])], lambda m: {
        "v": m.FixedLenSequenceFeature([2], m.int64, allow_missing=True)}),
    "empty_list": (lambda m: [m.train.Example(features=m.train.Features(feature={
        "e": m.train.Feature(float_list=m.train.FloatList(value=[]))})).SerializeToString()],
        lambda m: {"e": m.FixedLenFeature([], m.float32, default_value=1.0)}),
    "garbage": (lambda m: [b"garbage"], lambda m: {"a": m.FixedLenFeature([2], m.float32)}),
}


@pytest.mark.parametrize("case", sorted(_PARITY))
@pytest.mark.parametrize("single", [False, True])
def test_parity_with_tensorflow(case, single):
    records, features = _PARITY[case]

    def build(m):
        recs = records(m)
        if single:
            return m.parse_single_example(recs[0], features(m))
        return m.parse_example(recs, features(m))
    want, got = _both(build)
    _assert_same(want, got)


def test_static_shapes_match_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    shapes = []
    for m in (tf_ref, tf):
        with m.Graph().as_default():
            feats = _PARITY["batch"][1](m)
            for ser in (m.placeholder(m.string, [None]), m.placeholder(m.string, [3]),
                        m.placeholder(m.string, [])):
                out = m.parse_example(ser, feats)
                shapes.append({k: (v.shape.as_list() if not hasattr(v, "indices") else
                                   [v.indices.shape.as_list(), v.values.shape.as_list(),
                                    v.dense_shape.shape.as_list()]) for k, v in out.items()})
    assert shapes[:3] == shapes[3:]


def test_sequence_parity_with_tensorflow():
    def build(m):
        ctx = {"len": m.FixedLenFeature([], m.int64), "name": m.VarLenFeature(m.string),
               "miss": m.FixedLenFeature([], m.float32, default_value=0.5)}
        seq = {"tok": m.FixedLenSequenceFeature([], m.int64),
               "vec": m.FixedLenSequenceFeature([2], m.float32),
               "var": m.VarLenFeature(m.string),
               "gone": m.FixedLenSequenceFeature([], m.int64, allow_missing=True)}
        single = m.io.parse_single_sequence_example(sequence_example(m), ctx, seq)
        batch = m.io.parse_sequence_example([sequence_example(m)] * 2, ctx, seq)
        return single, batch
    want, got = _both(build)
    _assert_same(want, got)
