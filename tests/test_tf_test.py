"""tf.test: TestCase sessions and assertions, the gradient checker, the environment helpers.
Hand-computed expectations; the last tests compare with TensorFlow (skipped without it)."""
from __future__ import annotations

import os
import unittest

import numpy as np
import pytest

import jitflow as tf


def _run_case(cls) -> unittest.TestResult:
    """Run a TestCase subclass's tests; the result (failures, errors, skips)."""
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(cls)
    result = unittest.TestResult()
    suite.run(result)
    return result


def _case() -> tf.test.TestCase:
    """A TestCase instance set up for direct use of its assertions."""
    class Probe(tf.test.TestCase):
        def test_probe(self):
            pass
    case = Probe("test_probe")
    case.setUp()
    return case


# -- sessions -----------------------------------------------------------------------------------
def test_sessions_run_on_a_fresh_default_graph_with_the_test_seed():
    seen = {}

    class Case(tf.test.TestCase):
        def test_one(self):
            g = tf.get_default_graph()
            seen["ops"] = len(g.get_operations())
            seen["seed"] = g.seed
            tf.constant(1.0)
            with self.cached_session() as s1, self.cached_session() as s2:
                seen["cached_same"] = s1 is s2 and s1.graph is g
                seen["default"] = tf.get_default_session() is s1
                with self.test_session() as s3:
                    seen["test_session"] = s3 is s1
            with self.session() as s4:
                seen["new"] = s4 is not s1 and s4.graph is g
            seen["closed_after_block"] = s4._closed
            seen["value"] = self.evaluate(tf.constant(2.0) * 3.0)
            seen["nested"] = self.evaluate({"a": [tf.constant(1), tf.constant(2)]})

        def test_two(self):
            seen["ops_two"] = len(tf.get_default_graph().get_operations())

    tf.reset_default_graph()
    tf.constant(5.0)   # left over before the case: not in the test's graph
    result = _run_case(Case)
    assert not result.failures and not result.errors, result.failures + result.errors
    # test_session, run by its name, is skipped as TF1's
    assert [t.id().rsplit(".", 1)[1] for t, _ in result.skipped] == ["test_session"]
    assert seen["ops"] == 0 and seen["ops_two"] == 0
    assert seen["seed"] == 87654321
    assert seen["cached_same"] and seen["default"] and seen["test_session"] and seen["new"]
    assert seen["closed_after_block"]
    assert seen["value"] == 6.0 and isinstance(seen["value"], np.float32)
    assert seen["nested"] == {"a": [1, 2]}


def test_cached_session_is_closed_in_teardown():
    sessions = []

    class Case(tf.test.TestCase):
        def test_one(self):
            with self.cached_session() as sess:
                sessions.append(sess)

    assert not _run_case(Case).errors
    with pytest.raises(RuntimeError, match="closed Session"):
        sessions[0].run(tf.constant(1.0))


def test_failing_assertion_is_a_test_failure():
    class Case(tf.test.TestCase):
        def test_bad(self):
            self.assertAllClose(tf.constant([1.0, 2.0]), [1.0, 2.5])

    result = _run_case(Case)
    assert len(result.failures) == 1
    assert "Mismatched elements: 1 / 2" in result.failures[0][1]


def test_temp_dirs():
    case = _case()
    root = tf.test.get_temp_dir()
    assert os.path.isdir(root) and tf.test.get_temp_dir() == root
    own = case.get_temp_dir()
    assert os.path.isdir(own) and os.path.dirname(own) == root and case.get_temp_dir() == own


# -- assertions ---------------------------------------------------------------------------------
def test_assert_all_close():
    case = _case()
    case.assertAllClose([1.0, 2.0], np.array([1.0, 2.0 + 1.5e-6]))   # |d| <= 1e-6 + 2e-6
    case.assertAllClose(tf.constant([[1.0, np.nan]]), [[1.0, np.nan]])   # NaNs are equal
    case.assertAllClose({"a": (tf.constant(1.0), [2.0, 3.0])}, {"a": (1.0, [2.0, 3.0])})
    case.assertAllClose([1.0, 2.0], [1.1, 2.2], rtol=0.1)
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 2"):
        case.assertAllClose([1.0, 2.0], [1.0, 2.0 + 4e-6])
    with pytest.raises(AssertionError, match="Shape mismatch"):
        case.assertAllClose([1.0, 2.0], [[1.0, 2.0]])
    with pytest.raises(AssertionError):
        case.assertAllClose(1.0, [1.0])
    with pytest.raises(AssertionError, match="mismatched keys"):
        case.assertAllClose({"a": 1.0}, {"a": 1.0, "b": 2.0})
    case.assertNotAllClose([1.0, 2.0], [1.0, 3.0])
    with pytest.raises(AssertionError):
        case.assertNotAllClose([1.0], [1.0])


def test_assert_all_close_according_to_type():
    case = _case()
    case.assertAllCloseAccordingToType(np.float16([1.0]), np.float16([1.0009765625]))
    with pytest.raises(AssertionError):
        case.assertAllCloseAccordingToType(np.float64([1.0]), np.float64([1.0009765625]))


def test_assert_all_equal():
    case = _case()
    case.assertAllEqual(tf.constant([[1, 2], [3, 4]]), [[1, 2], [3, 4]])
    case.assertAllEqual([np.nan, 1.0], [np.nan, 1.0])
    case.assertAllEqual([b"a", b"b"], ["a", "b"])
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 3"):
        case.assertAllEqual([1, 2, 3], [1, 2, 4])
    with pytest.raises(AssertionError, match="Shape mismatch"):
        case.assertAllEqual([1, 2], [[1, 2]])
    case.assertNotAllEqual([1, 2], [1, 3])


def test_ordering_assertions():
    case = _case()
    case.assertAllInRange(tf.constant([0.0, 1.0, 2.0]), 0, 2)
    with pytest.raises(AssertionError, match=r"1 of the 3 element\(s\) are outside the range "
                                             r"\[0, 2\)"):
        case.assertAllInRange([0.0, 1.0, 2.0], 0, 2, open_upper_bound=True)
    with pytest.raises(AssertionError, match=r"outside the range \(0, 2\]"):
        case.assertAllInRange([0.0, 1.0], 0, 2, open_lower_bound=True)
    with pytest.raises(AssertionError, match="NaN"):
        case.assertAllInRange([1.0, np.nan], 0, 2)
    case.assertAllGreater([2, 3], 1)
    case.assertAllLessEqual([2, 3], 3)
    with pytest.raises(AssertionError):
        case.assertAllLess([2, 3], 3)
    case.assertAllInSet([1, 2, 1], {1, 2})
    with pytest.raises(AssertionError):
        case.assertAllInSet([1, 5], [1, 2])


def test_shape_dtype_and_near():
    case = _case()
    case.assertShapeEqual(np.zeros((2, 3)), tf.zeros([2, 3]))
    with pytest.raises(AssertionError, match="Shapes differ"):
        case.assertShapeEqual(np.zeros((2, 3)), tf.placeholder(tf.float32, [2, None]))
    with pytest.raises(TypeError, match="input_a must be a Numpy ndarray"):
        case.assertShapeEqual([1], tf.zeros([1]))
    case.assertDTypeEqual(np.zeros(2, np.float32), np.float32)
    case.assertDTypeEqual(tf.zeros([2]), tf.float32)
    case.assertDTypeEqual([np.zeros(1, np.int64), np.ones(2, np.int64)], "int64")
    with pytest.raises(AssertionError, match="float64 != float32"):
        case.assertDTypeEqual(np.zeros(2), np.float32)
    case.assertNear(1.0, 1.05, 0.1)
    case.assertNear(float("inf"), float("inf"), 0.0)
    with pytest.raises(AssertionError, match=r"1.000000 != 1.200000 \+/- 0.100000"):
        case.assertNear(1.0, 1.2, 0.1)
    case.assertArrayNear([1.0, 2.0], [1.01, 1.99], 0.02)
    with pytest.raises(AssertionError):
        case.assertArrayNear([1.0, 2.0], [1.0], 0.1)
    with pytest.raises(AssertionError):
        case.assertArrayNear([1.0, 2.0], [1.0, 2.5], 0.1)


def test_assert_raises_op_error():
    case = _case()
    with case.assertRaisesOpError("uninitialized"):
        with tf.Session() as sess:
            sess.run(tf.Variable(1.0, name="v").value())
    with case.assertRaisesOpError(lambda e: isinstance(e, tf.errors.InvalidArgumentError)):
        raise tf.errors.InvalidArgumentError(None, None, "bad")
    with pytest.raises(AssertionError, match="OpError not raised"):
        with case.assertRaisesOpError("x"):
            pass
    with pytest.raises(AssertionError, match="InvalidArgumentError.*: bar"):
        with case.assertRaisesOpError("foo"):
            raise tf.errors.InvalidArgumentError(None, None, "bar")
    with pytest.raises(ValueError):   # not an OpError: passes through
        with case.assertRaisesOpError("x"):
            raise ValueError("x")


# -- the gradient checker -----------------------------------------------------------------------
def test_compute_gradient_of_a_square():
    with tf.Graph().as_default(), tf.Session():
        x = tf.constant([1.0, 2.0, 3.0], dtype=tf.float64)
        theo, num = tf.test.compute_gradient(x, [3], x * x, [3],
                                             x_init_value=np.array([1.0, 2.0, 3.0]))
        np.testing.assert_allclose(theo, np.diag([2.0, 4.0, 6.0]), rtol=0, atol=0)
        # central differences are exact on a quadratic up to rounding
        np.testing.assert_allclose(num, np.diag([2.0, 4.0, 6.0]), atol=1e-9)
        assert theo.dtype == num.dtype == np.float64


def test_compute_gradient_list_float32_matches_float32_differences():
    with tf.Graph().as_default(), tf.Session():
        a = tf.placeholder(tf.float32, [2, 2])
        b = tf.reduce_sum(a * a, axis=1)
        x0 = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
        (theo, num), = tf.test.compute_gradient([a], [[2, 2]], b, [2], x_init_value=[x0])
    expected = np.array([[2, 0], [4, 0], [0, 6], [0, 8]], np.float32)
    np.testing.assert_array_equal(theo, expected)
    assert theo.dtype == num.dtype == np.float32
    # the differences are taken in float32, as TF1's: (f(x+d) - f(x-d)) / 2d
    d = np.float32(1e-3)
    want = np.zeros((4, 2), np.float32)
    for row in range(4):
        xp, xn = x0.copy(), x0.copy()
        xp.ravel()[row] += d
        xn.ravel()[row] -= d
        want[row] = ((xp * xp).sum(1) - (xn * xn).sum(1)) / np.float32(2e-3)
    np.testing.assert_allclose(num, want, rtol=1e-6)
    assert not np.array_equal(num, expected)   # float32 rounding shows


def test_compute_gradient_error_variable_init_targets_and_unconnected():
    with tf.Graph().as_default(), tf.Session():
        v = tf.Variable([0.5, 1.0], dtype=tf.float64)
        err = tf.test.compute_gradient_error(v, [2], tf.reduce_sum(tf.sin(v)), [],
                                             init_targets=[tf.global_variables_initializer()])
        # x random in [0, 1): sin's central difference error |cos(x) (1 - sin(d)/d)| is about
        # cos(x) d^2 / 6 <= 1e-6 / 6
        assert 0 < err < 1e-6 / 6 * 1.01
        x = tf.placeholder(tf.float64, [2])
        z = tf.placeholder(tf.float64, [2])
        theo, num = tf.test.compute_gradient(x, [2], z * 2.0, [2],
                                             extra_feed_dict={z: np.ones(2)})
        assert not theo.any() and not num.any()   # y does not depend on x


def test_compute_gradient_default_random_values_and_errors():
    np.random.seed(3)
    with tf.Graph().as_default(), tf.Session():
        x = tf.placeholder(tf.float64, [3])
        theo, _ = tf.test.compute_gradient(x, [3], x * x, [3])
    np.random.seed(3)
    x0 = np.random.random_sample((3,))
    np.testing.assert_allclose(theo, np.diag(2 * x0))
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [3])
        with pytest.raises(ValueError, match="default session"):
            tf.test.compute_gradient(x, [3], x * 2.0, [3])
        with tf.Session():
            with pytest.raises(ValueError, match=r"x_init_value has shape \(2,\)"):
                tf.test.compute_gradient(x, [3], x * 2.0, [3], x_init_value=np.zeros(2))
            with pytest.raises(ValueError, match=r"Calculated input gradient shape: \(4,\)"):
                tf.test.compute_gradient(x, [3], x * 2.0, [4])   # dy's shape, at build time
            i = tf.placeholder(tf.int32, [2])
            with pytest.raises(TypeError, match="floating"):
                tf.test.compute_gradient(i, [2], i * 2, [2])


def test_environment_helpers():
    assert isinstance(tf.test.is_built_with_cuda(), bool)
    gpu = tf.test.is_gpu_available()
    assert tf.test.gpu_device_name() == ("/device:GPU:0" if gpu else "")
    assert tf.test.is_built_with_rocm() is False
    assert tf.compat.v1.test is tf.test
    assert tf.test.mock is unittest.mock


# -- against TensorFlow -------------------------------------------------------------------------
def test_compute_gradient_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_v2_behavior()
    x0 = np.array([[0.3, -1.2, 2.0], [0.7, 0.1, -0.4]], np.float32)

    def run(t):
        with t.Graph().as_default(), t.Session():
            x = t.placeholder(t.float32, [2, 3])
            y = t.reduce_mean(t.tanh(x) * x, axis=0)
            return t.test.compute_gradient(x, [2, 3], y, [3], x_init_value=x0)

    ours, theirs = run(tf), run(tf1)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-4, atol=1e-4)
    assert ours[0].dtype == theirs[0].dtype and ours[1].dtype == theirs[1].dtype


def test_testcase_behaviour_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_v2_behavior()
    outcomes = {}

    def probe(t, key):
        class Case(t.test.TestCase):
            def test_it(self):
                got = outcomes.setdefault(key, [])
                got.append(t.get_default_graph().seed)
                got.append(len(t.get_default_graph().get_operations()))
                with self.cached_session() as s1, self.cached_session() as s2:
                    got.append(s1 is s2 and t.get_default_session() is s1)
                cases = [([1.0, 2.0], [[1.0, 2.0]], "both"), ([np.nan], [np.nan], "both"),
                         ([1.0, 2.0], [1.0, 2.0 + 4e-6], "both"), ([b"a"], ["a"], "equal")]
                for a, b, which in cases:
                    checks = (self.assertAllEqual,) if which == "equal" else (
                        self.assertAllClose, self.assertAllEqual)
                    for check in checks:
                        try:
                            check(a, b)
                            got.append(True)
                        except AssertionError:
                            got.append(False)
                for args in [([0.0, 2.0], 0, 2, False, True), ([0.0, 2.0], 0, 2, True, False),
                             ([1.0, np.nan], 0, 2, False, False), ([1.0], 0, 2, False, False)]:
                    try:
                        self.assertAllInRange(*args)
                        got.append(True)
                    except AssertionError:
                        got.append(False)
                got.append(self.evaluate(t.constant(2.5) * 2.0))
        return _run_case(Case)

    tf1.reset_default_graph()
    r1 = probe(tf1, "tf")
    tf.reset_default_graph()
    r2 = probe(tf, "jitflow")
    assert not r1.errors and not r2.errors and not r2.failures, r2.errors + r2.failures
    assert outcomes["jitflow"] == outcomes["tf"]
