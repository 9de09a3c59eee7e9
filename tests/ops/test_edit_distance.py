"""`tf.edit_distance` on SparseTensors: hand-computed distances (strings and ints, the
normalize rules for empty sequences, output shapes, errors), then the same graphs against
TensorFlow (skipped without it)."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.ops.edit_distance import levenshtein


def run(fetch, feed=None):
    with tf.Session() as sess:
        return sess.run(fetch, feed)


def _st(t, idx, vals, shape, dtype):
    return t.SparseTensor(np.array(idx, np.int64).reshape(-1, len(shape)),
                          t.constant(vals, dtype=dtype), shape)


def test_levenshtein_by_hand():
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein([], [1, 2]) == 2 and levenshtein([1, 2, 3], []) == 3
    assert levenshtein([1, 2, 3], [1, 3]) == 1 and levenshtein([1, 2], [2, 1]) == 2


def _strings(t):
    # hypothesis [[["a"], []], [["b", "c"], ["d"]]], truth [[[], ["a"]], [["b", "x"], ["d", "e"]]]
    h = _st(t, [[0, 0, 0], [1, 0, 0], [1, 0, 1], [1, 1, 0]], ["a", "b", "c", "d"], [2, 2, 2],
            t.string)
    tr = _st(t, [[0, 1, 0], [1, 0, 0], [1, 0, 1], [1, 1, 0], [1, 1, 1]],
             ["a", "b", "x", "d", "e"], [2, 2, 3], t.string)
    return h, tr


def test_strings_normalized_and_not():
    h, tr = _strings(tf)
    d = tf.edit_distance(h, tr)
    raw = tf.edit_distance(h, tr, normalize=False)
    back = tf.edit_distance(tr, h)
    assert d.dtype == tf.float32 and d.shape.as_list() == [2, 2]
    assert d.op.type == "EditDistance" and d.op.name == "edit_distance"
    got, got_raw, got_back = run([d, raw, back])
    # [0,0]: "a" vs nothing: 1 / 0 = inf; [0,1]: nothing vs "a": 1 / 1;
    # [1,0]: b c vs b x: 1 / 2; [1,1]: d vs d e: 1 / 2
    np.testing.assert_array_equal(got, [[np.inf, 1.0], [0.5, 0.5]])
    np.testing.assert_array_equal(got_raw, [[1, 1], [1, 1]])
    np.testing.assert_array_equal(got_back, [[1.0, np.inf], [0.5, 1.0]])
    assert got.dtype == np.float32


def test_ints_empty_rules_gaps_and_shapes():
    hi = _st(tf, [[0, 0], [0, 1], [0, 2]], [1, 2, 3], [1, 3], tf.int32)
    ti = _st(tf, [[0, 0], [0, 1]], [1, 3], [1, 2], tf.int32)
    empty = _st(tf, np.zeros((0, 2)), np.zeros(0, np.int64), [2, 2], tf.int64)
    one = _st(tf, [[1, 0]], [5], [2, 2], tf.int64)
    gaps = _st(tf, [[0, 2], [0, 5]], [1, 2], [1, 7], tf.int32)
    wide = _st(tf, [[2, 0]], [4], [3, 1], tf.int32)   # more batch rows than ti
    outs = run([tf.edit_distance(hi, ti), tf.edit_distance(hi, ti, normalize=False),
                tf.edit_distance(empty, empty), tf.edit_distance(empty, empty, False),
                tf.edit_distance(one, empty), tf.edit_distance(empty, one),
                tf.edit_distance(gaps, _st(tf, [[0, 0], [0, 1]], [1, 2], [1, 2], tf.int32)),
                tf.edit_distance(wide, ti)])
    np.testing.assert_array_equal(outs[0], [0.5])        # delete the 2: 1 / len([1, 3])
    np.testing.assert_array_equal(outs[1], [1.0])
    np.testing.assert_array_equal(outs[2], [0, 0])       # both empty: 0, not nan
    np.testing.assert_array_equal(outs[3], [0, 0])
    np.testing.assert_array_equal(outs[4], [0, np.inf])
    np.testing.assert_array_equal(outs[5], [0, 1])
    np.testing.assert_array_equal(outs[6], [0])          # only the order of values counts
    # shape max([3], [1]) = [3]: row 0 is [] vs [1, 3] -> 1, row 2 is [4] vs [] -> inf
    np.testing.assert_array_equal(outs[7], [1, 0, np.inf])


def test_fed_sparse_tensors_and_unknown_shapes():
    sp = tf.sparse_placeholder(tf.int32)
    truth = _st(tf, [[0, 0], [0, 1]], [1, 3], [1, 2], tf.int32)
    d = tf.edit_distance(sp, truth)
    assert d.shape.ndims is None or d.shape.as_list() == [None]
    got = run(d, {sp: tf.SparseTensorValue([[0, 0]], [3], [1, 1])})
    np.testing.assert_array_equal(got, [0.5])


def test_errors():
    hi = _st(tf, [[0, 0]], [1], [1, 3], tf.int32)
    with pytest.raises(TypeError, match="Hypothesis must be a SparseTensor"):
        tf.edit_distance(tf.constant([1, 2]), hi)
    with pytest.raises(TypeError, match="Truth must be a SparseTensor"):
        tf.edit_distance(hi, tf.constant([1, 2]))
    with pytest.raises(TypeError, match="int64"):
        tf.edit_distance(hi, _st(tf, [[0, 0]], [1], [1, 2], tf.int64))
    with pytest.raises(ValueError, match="same rank"):
        tf.edit_distance(hi, _st(tf, [[0, 0, 0]], [1], [1, 1, 2], tf.int32))
    bad = tf.edit_distance(_st(tf, [[0, 4]], [1], [1, 3], tf.int32), hi)
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of bounds"):
        run(bad)


def test_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_v2_behavior()
    rng = np.random.default_rng(3)
    dense_h = rng.integers(0, 3, (3, 2, 5))
    dense_t = rng.integers(0, 3, (3, 2, 4))
    lens_h, lens_t = rng.integers(0, 6, (3, 2)), rng.integers(0, 5, (3, 2))

    def sparse(t, dense, lens):
        idx = [(i, j, k) for i in range(dense.shape[0]) for j in range(dense.shape[1])
               for k in range(lens[i, j])]
        return _st(t, idx, [int(dense[p]) for p in idx], list(dense.shape), t.int64)

    results = []
    for t in (tf, tf1):
        with t.Graph().as_default():
            h, tr = sparse(t, dense_h, lens_h), sparse(t, dense_t, lens_t)
            sh, st_ = _strings(t)
            fetch = [t.edit_distance(h, tr), t.edit_distance(h, tr, normalize=False),
                     t.edit_distance(tr, h), t.edit_distance(sh, st_),
                     t.edit_distance(st_, sh, normalize=False)]
            with t.Session() as sess:
                results.append(sess.run(fetch))
    for ours, theirs in zip(*results):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)


def test_graph_def_round_trip():
    g = tf.Graph()
    with g.as_default():
        h, tr = _strings(tf)
        tf.edit_distance(h, tr, normalize=False, name="ed")
    node = [n for n in g.as_graph_def().node if n.name == "ed"][0]
    assert node.op == "EditDistance" and node.attr["normalize"].b is False
    assert len(node.input) == 6
    with tf.Graph().as_default():
        (y,) = tf.import_graph_def(g.as_graph_def(), return_elements=["ed:0"], name="")
        np.testing.assert_array_equal(run(y), [[1, 1], [1, 1]])


def test_exported_graph_def_runs_in_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    g = tf.Graph()
    with g.as_default():
        h, tr = _strings(tf)
        tf.edit_distance(h, tr, name="ed")
    with tf1.Graph().as_default():
        gd = tf1.GraphDef.FromString(g.as_graph_def().SerializeToString())
        (y,) = tf1.import_graph_def(gd, return_elements=["ed:0"], name="")
        with tf1.Session() as sess:
            np.testing.assert_array_equal(sess.run(y), [[np.inf, 1.0], [0.5, 0.5]])
