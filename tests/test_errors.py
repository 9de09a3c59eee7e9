"""Errors as TF1 raises them: classes and codes, build-time vs run-time errors, messages, and
a failed run leaving the variables unchanged."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import jitflow as tf

_CODES = {
    "CancelledError": 1, "UnknownError": 2, "InvalidArgumentError": 3,
    "DeadlineExceededError": 4, "NotFoundError": 5, "AlreadyExistsError": 6,
    "PermissionDeniedError": 7, "ResourceExhaustedError": 8, "FailedPreconditionError": 9,
    "AbortedError": 10, "OutOfRangeError": 11, "UnimplementedError": 12, "InternalError": 13,
    "UnavailableError": 14, "DataLossError": 15, "UnauthenticatedError": 16,
}


@pytest.mark.parametrize("name,code", sorted(_CODES.items()))
def test_error_classes_derive_from_op_error(name, code):
    cls = getattr(tf.errors, name)
    assert issubclass(cls, tf.errors.OpError) and issubclass(cls, Exception)
    e = cls(None, None, "boom")
    assert e.error_code == code and e.message == "boom" and str(e) == "boom"
    assert e.op is None and e.node_def is None
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is cls and again.message == "boom"


def test_uninitialized_variable(backend):
    w = tf.Variable([1.0], name="my_weight")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError) as info:
            sess.run(w * 2.0)
    assert "my_weight" in info.value.message
    assert "uninitialized" in info.value.message
    assert isinstance(info.value, tf.errors.OpError)


def test_unfed_placeholder_message_names_dtype_and_shape(backend):
    x = tf.placeholder(tf.float32, [None, 2], name="inputs")
    u = tf.placeholder(tf.int64, name="free")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            sess.run(x + 1.0)
        with pytest.raises(tf.errors.InvalidArgumentError, match="'free' with dtype int64"):
            sess.run(u * 2)
    assert info.value.message == ("You must feed a value for placeholder tensor 'inputs' "
                                  "with dtype float and shape [?,2]")
    assert info.value.op is x.op


def test_feed_shape_mismatch_is_value_error(backend):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    with tf.Session() as sess:
        with pytest.raises(ValueError) as info:
            sess.run(x, {x: np.zeros(3)})
    assert str(info.value) == ("Cannot feed value of shape (3,) for Tensor 'x:0', which has "
                               "shape '(?, 2)'")


def test_bad_fetches_and_feed_keys_are_type_errors(backend):
    c = tf.constant(1.0)
    with tf.Session() as sess:
        for bad in (3, None, 1.5, object(), [c, 7]):
            with pytest.raises(TypeError):
                sess.run(bad)
        for key in (3, "missing:0", object()):
            with pytest.raises(TypeError, match="Cannot interpret feed_dict key"):
                sess.run(c, {key: 1.0})


def test_another_graphs_tensor(backend):
    # TF1: fetching it is a plain ValueError, feeding it a TypeError
    g = tf.Graph()
    with g.as_default():
        other = tf.constant(1.0)
    with tf.Session() as sess:
        with pytest.raises(ValueError, match="not an element of this graph") as info:
            sess.run(other)
        assert type(info.value) is ValueError
        with pytest.raises(ValueError, match="not an element of this graph") as info:
            sess.run([other.op])
        assert type(info.value) is ValueError
        with pytest.raises(TypeError) as info:
            sess.run(tf.constant(2.0), {other: 1.0})
        assert type(info.value) is TypeError


def test_closed_session_and_finalized_graph_are_runtime_errors(backend):
    c = tf.constant(1.0)
    sess = tf.Session()
    sess.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(c)
    tf.get_default_graph().finalize()
    with pytest.raises(RuntimeError, match="finalized"):
        tf.constant(2.0)


def test_build_time_errors_are_value_and_type_errors():
    a = tf.zeros([2, 3])
    with pytest.raises(ValueError, match="Dimensions must be equal"):
        a + tf.zeros([4])
    with pytest.raises(TypeError):
        tf.add(a, tf.zeros([2, 3], dtype=tf.int32))
    with pytest.raises(ValueError):
        tf.reshape(a, [5])
    with pytest.raises(ValueError):
        tf.get_default_graph().get_tensor_by_name("x")


def test_run_time_errors_are_invalid_argument(backend):
    p = tf.constant([1.0, 2.0, 3.0])
    i = tf.placeholder(tf.int32, [None])
    x = tf.placeholder(tf.float32, [None])
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"indices\[0\] = 5 is not in \[0, 3\)"):
            sess.run(tf.gather(p, i), {i: [5]})
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(tf.reshape(x, [2, 2]), {x: [1.0]})
        with pytest.raises(tf.errors.OpError):
            sess.run(x[3], {x: [1.0]})


def test_failed_run_leaves_variables_unchanged(backend):
    v = tf.Variable(1.0)
    w = tf.Variable([0.0, 0.0])
    i = tf.placeholder(tf.int32, [None])
    bad = tf.gather(tf.constant([1.0, 2.0]), i)
    upd = tf.group(v.assign(5.0), w.assign_add([1.0, 1.0]))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run([upd, bad], {i: [7]})
        assert sess.run(v) == 1.0
        np.testing.assert_array_equal(sess.run(w), [0.0, 0.0])
        sess.run([upd, bad], {i: [1]})
        assert sess.run(v) == 5.0
        np.testing.assert_array_equal(sess.run(w), [1.0, 1.0])


def test_graph_element_errors():
    g = tf.get_default_graph()
    with pytest.raises(KeyError, match="does not exist"):
        g.as_graph_element("nope:0")
    with pytest.raises(KeyError, match="not in the graph"):
        g.as_graph_element("nope")
    with pytest.raises(ValueError, match="not a valid one"):
        g.as_graph_element("x:y")
    with pytest.raises(TypeError):
        tf.convert_to_tensor(tf.no_op())


def test_error_code_constants_and_lookup():
    assert tf.errors.OK == 0 and tf.errors.INVALID_ARGUMENT == 3
    assert tf.errors.FAILED_PRECONDITION == 9 and tf.errors.UNAUTHENTICATED == 16
    for name, code in _CODES.items():
        cls = getattr(tf.errors, name)
        assert tf.errors.exception_type_from_error_code(code) is cls
        assert tf.errors.error_code_from_exception_type(cls) == code
