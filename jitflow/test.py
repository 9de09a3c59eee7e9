"""`tf.test`: TF1's unit-test helpers for graph programs.

`tf.test.TestCase` is a `unittest.TestCase` whose tests start on a fresh default graph (graph
seed 87654321, NumPy's and `random`'s seeds set alike, as TF1's), with `self.session()`,
`self.cached_session()` / `self.test_session()` giving a jitflow Session on that graph, and the
array assertions TF1 tests use (`assertAllClose`, `assertAllEqual`, `assertAllInRange`, ...) that
evaluate tensors they are given. `compute_gradient` / `compute_gradient_error` compare the
graph's gradients with central finite differences, as TF1's gradient checker does.
"""
from __future__ import annotations

import contextlib
import math
import os
import random
import re
import sys
import tempfile
import unittest
from typing import Callable, Iterator, Optional, Union

import numpy as np

__all__ = ["TestCase", "main", "is_gpu_available", "is_built_with_cuda",
           "is_built_with_gpu_support", "is_built_with_rocm", "is_built_with_xla",
           "gpu_device_name", "get_temp_dir", "compute_gradient", "compute_gradient_error",
           "mock", "Benchmark"]

from unittest import mock  # noqa: E402  (tf.test.mock is the standard library's)

DEFAULT_GRAPH_SEED = 87654321  # the graph seed TF1's test cases start with
_TEMP_DIR: list = []


# -- the environment ----------------------------------------------------------------------------
def main(argv=None) -> None:
    """Run the test cases of `__main__` (unittest's runner; exits with its status)."""
    unittest.main(argv=argv)


def _cuda_ok() -> bool:
    try:
        from jitflow.backends.numba_cuda.driver import cuda_module
        cuda_module()
    except RuntimeError:
        return False
    return True


def is_gpu_available(cuda_only: bool = False, min_cuda_compute_capability=None) -> bool:
    """Whether `Session(backend="cuda")` can run on a GPU here (numba.cuda sees one; the
    simulator does not count). With `min_cuda_compute_capability=(major, minor)`, the GPU must
    have at least that compute capability."""
    try:
        from numba import cuda
        if not cuda.is_available() or getattr(cuda, "simulator_enabled", False):
            return False
        if min_cuda_compute_capability is not None:
            cc = tuple(cuda.get_current_device().compute_capability)
            return cc >= tuple(min_cuda_compute_capability)
    except Exception:  # noqa: BLE001  (no driver, a broken install: no GPU)
        return False
    return True


def is_built_with_cuda() -> bool:
    """Whether jitflow's CUDA backend can be loaded (numba.cuda is importable)."""
    try:
        import numba.cuda  # noqa: F401
    except ImportError:
        return False
    return True


is_built_with_gpu_support = is_built_with_cuda


def is_built_with_rocm() -> bool:
    return False


def is_built_with_xla() -> bool:
    return False


def gpu_device_name() -> str:
    """'/device:GPU:0' where a GPU is available, else ''."""
    return "/device:GPU:0" if is_gpu_available() else ""


def get_temp_dir() -> str:
    """A temporary folder for this process's tests (made once, removed at exit by the OS's
    temporary-file cleaning, as TF1's)."""
    if not _TEMP_DIR:
        base = os.path.basename(sys.argv[0] or "test").split(".")[0] or "test"
        _TEMP_DIR.append(tempfile.mkdtemp(prefix=base))
    return _TEMP_DIR[0]


class Benchmark:
    """TF1's benchmark base class: `report_benchmark` prints what it is given."""

    def report_benchmark(self, iters=None, cpu_time=None, wall_time=None, throughput=None,
                         extras=None, name=None, metrics=None) -> None:
        print(f"benchmark {name or type(self).__name__}: iters={iters} wall_time={wall_time} "
              f"cpu_time={cpu_time} throughput={throughput} extras={extras}")


# -- gradient checking --------------------------------------------------------------------------
def _default_session(what: str):
    from jitflow.core.session import get_default_session
    sess = get_default_session()
    if sess is None:
        raise ValueError(f"tf.test.{what} runs in the default session: call it inside "
                         "`with tf.Session():` (or a TestCase's `with self.cached_session():`)")
    return sess


def _tensor_of(x):
    from jitflow.core.graph import Tensor
    if isinstance(x, Tensor):
        return x
    value = getattr(x, "value", None)   # a Variable: its value tensor
    if callable(value):
        return value()
    raise TypeError(f"tf.test.compute_gradient: x and y must be Tensors or Variables, got "
                    f"{type(x).__name__}")


def _jacobians(sess, x, x_shape, dx, y, y_shape, dy, x_init_value, delta, feeds) -> tuple:
    """(theoretical, numerical) Jacobians of y by x: (x size, y size) arrays of x's dtype."""
    xt = _tensor_of(x)
    if not xt.dtype.is_floating:
        raise TypeError(f"tf.test.compute_gradient: x {xt.name!r} must be a floating tensor, "
                        f"got {xt.dtype.name}")
    np_dtype = xt.dtype.as_numpy_dtype
    x_shape = tuple(int(d) for d in x_shape)
    if x_init_value is None:
        x_data = np.random.random_sample(x_shape).astype(np_dtype)
    else:
        x_data = np.asarray(x_init_value, dtype=np_dtype)
        if x_data.shape != x_shape:
            raise ValueError(f"tf.test.compute_gradient: x_init_value has shape "
                             f"{x_data.shape}, x_shape is {x_shape} (x {xt.name!r})")
    x_size = int(np.prod(x_shape))
    y_size = int(np.prod(y_shape))
    theoretical = np.zeros((x_size, y_size), dtype=np_dtype)
    dy_data = np.zeros(tuple(y_shape), dtype=dy.dtype.as_numpy_dtype)
    if dx is not None:
        for col in range(y_size):
            dy_data.ravel()[col] = 1
            back = sess.run(dx, {**feeds, x: x_data, dy: dy_data})
            dy_data.ravel()[col] = 0
            theoretical[:, col] = _dense(back).ravel()
    numerical = np.zeros((x_size, y_size), dtype=np_dtype)
    scale = 2 * delta
    for row in range(x_size):
        x_pos = x_data.copy()
        x_pos.ravel()[row] += delta
        y_pos = np.asarray(sess.run(y, {**feeds, x: x_pos}))
        x_neg = x_data.copy()
        x_neg.ravel()[row] -= delta
        y_neg = np.asarray(sess.run(y, {**feeds, x: x_neg}))
        if y_pos.size != y_size:
            raise ValueError(f"tf.test.compute_gradient: y {y.name!r} has {y_pos.size} "
                             f"elements (shape {y_pos.shape}), y_shape {tuple(y_shape)} says "
                             f"{y_size}")
        numerical[row, :] = ((y_pos - y_neg) / scale).ravel()
    return theoretical, numerical


def _dense(value) -> np.ndarray:
    """A gradient value as a dense array (IndexedSlices values are scattered)."""
    indices = getattr(value, "indices", None)
    if indices is not None and hasattr(value, "dense_shape"):
        out = np.zeros(tuple(value.dense_shape), dtype=np.asarray(value.values).dtype)
        np.add.at(out, np.asarray(indices), np.asarray(value.values))
        return out
    return np.asarray(value)


def compute_gradient(x, x_shape, y, y_shape, x_init_value=None, delta: float = 1e-3,
                     init_targets=None, extra_feed_dict=None):
    """The theoretical (from `tf.gradients`) and numerical (central differences of step
    `delta`) Jacobians of `y` by `x`, each of shape (x size, y size), as TF1's
    `tf.test.compute_gradient`. `x` may be a list (then `x_shape` and `x_init_value` are lists
    and a list of pairs is returned). Runs in the default session; x takes `x_init_value`
    (default: uniform [0, 1) values from NumPy's global generator)."""
    from jitflow.core.gradients import gradients
    from jitflow.ops.sources import placeholder

    sess = _default_session("compute_gradient")
    feeds = dict(extra_feed_dict or {})
    for init in init_targets or ():
        sess.run(init)
    y = _tensor_of(y)
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    shapes = list(x_shape) if isinstance(x, (list, tuple)) else [x_shape]
    inits = (list(x_init_value) if x_init_value is not None else [None] * len(xs)) \
        if isinstance(x, (list, tuple)) else [x_init_value]
    if not len(xs) == len(shapes) == len(inits):
        raise ValueError(f"tf.test.compute_gradient: {len(xs)} x tensors, {len(shapes)} "
                         f"x_shapes and {len(inits)} x_init_values")
    with y.graph.as_default():
        dy = placeholder(y.dtype, list(y_shape), name="compute_gradient_dy")
        dxs = gradients(y, [_tensor_of(xi) for xi in xs], grad_ys=dy)
    out = [_jacobians(sess, _tensor_of(xi), shp, dxi, y, y_shape, dy, init, delta, feeds)
           for xi, shp, dxi, init in zip(xs, shapes, dxs, inits)]
    return out if isinstance(x, (list, tuple)) else out[0]


def compute_gradient_error(x, x_shape, y, y_shape, x_init_value=None, delta: float = 1e-3,
                           init_targets=None, extra_feed_dict=None) -> float:
    """The largest absolute difference between the theoretical and numerical Jacobians of
    `compute_gradient` (over every x of a list)."""
    result = compute_gradient(x, x_shape, y, y_shape, x_init_value, delta, init_targets,
                              extra_feed_dict)
    pairs = result if isinstance(result, list) else [result]
    error = 0.0
    for theoretical, numerical in pairs:
        if theoretical.size:
            diff = np.fabs(theoretical.astype(np.float64) - numerical.astype(np.float64))
            error = max(error, float(np.max(diff)))
    return error


# -- TestCase -----------------------------------------------------------------------------------
def _is_structure(x) -> bool:
    return isinstance(x, (list, tuple, dict)) and not _all_numbers(x)


def _all_numbers(x) -> bool:
    """A (nested) list or tuple of plain numbers or strings: an array, not a structure."""
    if isinstance(x, dict):
        return False
    if isinstance(x, (list, tuple)):
        return all(_all_numbers(e) for e in x) and not _is_namedtuple(x)
    return isinstance(x, (int, float, complex, bool, str, bytes, np.generic))


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


class TestCase(unittest.TestCase):
    """A unittest TestCase for TF1 graph code (see the module docstring)."""

    def __init__(self, methodName: str = "runTest") -> None:
        super().__init__(methodName)
        self._cached_session = None
        self._tempdir: Optional[str] = None

    def setUp(self) -> None:
        """A fresh default graph with TF1's test seed; NumPy's and `random`'s seeds alike."""
        from jitflow.core.graph import get_default_graph, reset_default_graph
        self._clear_cached_session()
        random.seed(DEFAULT_GRAPH_SEED)
        np.random.seed(DEFAULT_GRAPH_SEED)
        reset_default_graph()
        get_default_graph().seed = DEFAULT_GRAPH_SEED

    def tearDown(self) -> None:
        self._clear_cached_session()

    def _clear_cached_session(self) -> None:
        if self._cached_session is not None:
            self._cached_session.close()
            self._cached_session = None

    def get_temp_dir(self) -> str:
        """A temporary folder of this test (inside `tf.test.get_temp_dir()`)."""
        if self._tempdir is None:
            self._tempdir = tempfile.mkdtemp(dir=get_temp_dir())
        return self._tempdir

    # sessions
    @contextlib.contextmanager
    def session(self, graph=None, config=None, use_gpu: bool = True,
                force_gpu: bool = False) -> Iterator:
        """A new Session on `graph` (the default graph), default (with its graph) inside the
        block and closed after it."""
        from jitflow.core.graph import get_default_graph
        from jitflow.core.session import Session
        if force_gpu and not is_gpu_available():
            raise unittest.SkipTest("force_gpu: no GPU is available")
        sess = Session(graph=graph or get_default_graph(), config=config)
        try:
            with sess.graph.as_default(), sess.as_default():
                yield sess
        finally:
            sess.close()

    @contextlib.contextmanager
    def cached_session(self, graph=None, config=None, use_gpu: bool = True,
                       force_gpu: bool = False) -> Iterator:
        """This test's one Session (made on first use, on `graph` or the default graph; closed
        in tearDown), default inside the block."""
        from jitflow.core.graph import get_default_graph
        from jitflow.core.session import Session
        if force_gpu and not is_gpu_available():
            raise unittest.SkipTest("force_gpu: no GPU is available")
        if self._cached_session is None:
            self._cached_session = Session(graph=graph or get_default_graph(), config=config)
        elif graph is not None and self._cached_session.graph is not graph:
            raise ValueError("The graph used to get the cached session is different than the "
                             "one that was used to create the session. Maybe create a new "
                             "session with self.session()")
        sess = self._cached_session
        with sess.graph.as_default(), sess.as_default():
            yield sess

    def test_session(self, graph=None, config=None, use_gpu: bool = True,
                     force_gpu: bool = False):
        """TF1's older name: the cached session, or a new one for an explicit `graph` (a
        context manager). Run as a test by its name, it skips, as TF1's."""
        if self.id().endswith(".test_session"):
            self.skipTest("Not a test.")
        if graph is None:
            return self.cached_session(config=config, use_gpu=use_gpu, force_gpu=force_gpu)
        return self.session(graph, config, use_gpu, force_gpu)

    test_session.__test__ = False   # pytest: not a test, whatever its name says

    def evaluate(self, tensors):
        """The values of a (nested) structure of tensors, in the default session (else this
        test's cached session)."""
        from jitflow.core.session import get_default_session
        sess = get_default_session()
        if sess is None:
            with self.cached_session() as sess:
                return sess.run(tensors)
        return sess.run(tensors)

    # array helpers
    def _array(self, a) -> np.ndarray:
        """`a` as an ndarray, evaluating a Tensor, Variable or SparseTensor."""
        from jitflow.core.graph import Tensor, Operation
        if isinstance(a, (Tensor, Operation)) or type(a).__name__ in ("Variable",
                                                                        "SparseTensor"):
            a = self.evaluate(a)
        if not isinstance(a, np.ndarray):
            try:
                a = np.array(a)
            except ValueError as e:   # a ragged list
                raise TypeError(f"cannot make an array of {a!r}: {e}") from None
        return a

    def _assert_same_shape(self, a: np.ndarray, b: np.ndarray, msg) -> None:
        self.assertEqual(a.shape, b.shape,
                         f"Shape mismatch: expected {a.shape}, got {b.shape} with contents "
                         f"{b}. {msg or ''}")

    def _assert_structure(self, a, b, check: Callable, path: str, msg) -> None:
        if isinstance(a, dict) or isinstance(b, dict):
            if not (isinstance(a, dict) and isinstance(b, dict)):
                raise AssertionError(f"{path or 'value'}: a is a {type(a).__name__}, b is a "
                                     f"{type(b).__name__}. {msg or ''}")
            self.assertEqual(set(a), set(b), f"mismatched keys at {path or 'the top'}: a has "
                                             f"keys {sorted(map(str, a))}, but b has keys "
                                             f"{sorted(map(str, b))}. {msg or ''}")
            for k in a:
                self._assert_structure(a[k], b[k], check, f"{path}[{k!r}]", msg)
            return
        if _is_structure(a) or _is_structure(b):
            a_list, b_list = list(a), list(b)
            self.assertEqual(len(a_list), len(b_list),
                             f"{path or 'value'}: length {len(a_list)} != {len(b_list)}. "
                             f"{msg or ''}")
            for i, (ea, eb) in enumerate(zip(a_list, b_list)):
                self._assert_structure(ea, eb, check, f"{path}[{i}]", msg)
            return
        check(a, b, f"{msg or ''}{' at ' + path if path else ''}")

    def _close(self, a, b, rtol: float, atol: float, msg) -> None:
        a, b = self._array(a), self._array(b)
        self._assert_same_shape(a, b, msg)
        if a.dtype.kind in "OSU" or b.dtype.kind in "OSU":
            self._equal(a, b, msg)
            return
        fa, fb = a.astype(np.float64) if a.dtype.kind != "c" else a, \
            b.astype(np.float64) if b.dtype.kind != "c" else b
        ok = np.isclose(fa, fb, rtol=rtol, atol=atol, equal_nan=True)
        if not np.all(ok):
            where = np.argwhere(~ok)
            shown = "; ".join(f"{tuple(int(i) for i in w)}: {fa[tuple(w)]!r} vs "
                              f"{fb[tuple(w)]!r}" for w in where[:10])
            raise AssertionError(
                f"Not equal to tolerance rtol={rtol:g}, atol={atol:g}. {msg or ''}\n"
                f"Mismatched elements: {len(where)} / {a.size}; at index {shown}\n"
                f"Max absolute difference: {np.nanmax(np.abs(fa - fb)[~ok])!r}\n"
                f" a: {a!r}\n b: {b!r}")

    def _equal(self, a, b, msg) -> None:
        a, b = self._array(a), self._array(b)
        self._assert_same_shape(a, b, msg)
        if a.dtype.kind in "SU" and b.dtype.kind in "SU" and a.dtype.kind != b.dtype.kind:
            a = np.char.encode(a, "utf-8") if a.dtype.kind == "U" else a
            b = np.char.encode(b, "utf-8") if b.dtype.kind == "U" else b
        same = a == b
        if a.dtype.kind in "fc" and b.dtype.kind in "fc":
            same = same | (np.isnan(a) & np.isnan(b))
        if not np.all(same):
            where = np.argwhere(~np.asarray(same)) if a.ndim else np.zeros((1, 0), int)
            shown = "; ".join(f"{tuple(int(i) for i in w)}: {a[tuple(w)]!r} vs {b[tuple(w)]!r}"
                              for w in where[:10])
            raise AssertionError(f"Arrays are not equal. {msg or ''}\nMismatched elements: "
                                 f"{len(where)} / {max(a.size, 1)}; at index {shown}\n"
                                 f" a: {a!r}\n b: {b!r}")

    # assertions
    def assertAllClose(self, a, b, rtol: float = 1e-6, atol: float = 1e-6,  # noqa: N802
                       msg=None) -> None:
        """|a - b| <= atol + rtol * |b| elementwise (NaNs equal), shapes equal; tensors are
        evaluated and (nested) lists, tuples and dicts compared element by element."""
        self._assert_structure(a, b, lambda x, y, m: self._close(x, y, rtol, atol, m), "", msg)

    def assertNotAllClose(self, a, b, rtol: float = 1e-6, atol: float = 1e-6,  # noqa: N802
                          msg=None) -> None:
        try:
            self.assertAllClose(a, b, rtol=rtol, atol=atol)
        except AssertionError:
            return
        raise AssertionError(msg or "The two values are close at all elements")

    def assertAllCloseAccordingToType(self, a, b, rtol: float = 1e-6,  # noqa: N802
                                      atol: float = 1e-6, float_rtol: float = 1e-6,
                                      float_atol: float = 1e-6, half_rtol: float = 1e-3,
                                      half_atol: float = 1e-3, msg=None) -> None:
        """assertAllClose with tolerances widened for float32 and float16 values."""
        av, bv = self._array(a), self._array(b)
        if av.dtype == np.float32 or bv.dtype == np.float32:
            rtol, atol = max(rtol, float_rtol), max(atol, float_atol)
        if av.dtype == np.float16 or bv.dtype == np.float16:
            rtol, atol = max(rtol, half_rtol), max(atol, half_atol)
        self.assertAllClose(av, bv, rtol=rtol, atol=atol, msg=msg)

    def assertAllEqual(self, a, b, msg=None) -> None:  # noqa: N802
        """Equal shapes and equal elements (NaN equals NaN; str equals its UTF-8 bytes)."""
        self._assert_structure(a, b, self._equal, "", msg)

    def assertNotAllEqual(self, a, b, msg=None) -> None:  # noqa: N802
        try:
            self.assertAllEqual(a, b)
        except AssertionError:
            return
        raise AssertionError(msg or "The two values are equal at all elements")

    def _assert_all(self, a, ok: Callable, what: str) -> None:
        arr = self._array(a)
        good = ok(arr)
        if not np.all(good):
            bad = np.argwhere(~np.asarray(good)) if arr.ndim else np.zeros((1, 0), int)
            raise AssertionError(f"{len(bad)} of the {arr.size} element(s) are not {what}: "
                                 f"{[arr[tuple(i)] for i in bad[:10]]}")

    def assertAllGreater(self, a, comparison_target) -> None:  # noqa: N802
        self._assert_all(a, lambda x: x > comparison_target, f"> {comparison_target}")

    def assertAllGreaterEqual(self, a, comparison_target) -> None:  # noqa: N802
        self._assert_all(a, lambda x: x >= comparison_target, f">= {comparison_target}")

    def assertAllLess(self, a, comparison_target) -> None:  # noqa: N802
        self._assert_all(a, lambda x: x < comparison_target, f"< {comparison_target}")

    def assertAllLessEqual(self, a, comparison_target) -> None:  # noqa: N802
        self._assert_all(a, lambda x: x <= comparison_target, f"<= {comparison_target}")

    def assertAllInSet(self, target, expected_set) -> None:  # noqa: N802
        allowed = set(np.asarray(list(expected_set)).ravel().tolist())
        self._assert_all(target, lambda x: np.vectorize(lambda e: e in allowed, otypes=[bool])(x)
                         if x.size else np.ones(x.shape, bool), f"in {sorted(allowed)}")

    def assertAllInRange(self, target, lower_bound, upper_bound,  # noqa: N802
                         open_lower_bound: bool = False, open_upper_bound: bool = False) -> None:
        """Every element of `target` (a real array or tensor) in the range; NaN fails."""
        arr = self._array(target)
        if arr.dtype.kind not in "iuf":
            raise AssertionError(f"The value of {target!r} does not have an ordered numeric "
                                 f"type: {arr.dtype}")
        nans = np.isnan(arr) if arr.dtype.kind == "f" else np.zeros(arr.shape, bool)
        if np.any(nans):
            raise AssertionError(f"{int(np.sum(nans))} of the {arr.size} element(s) are NaN: "
                                 f"at {np.argwhere(nans)[:10].tolist()}")
        low = arr > lower_bound if open_lower_bound else arr >= lower_bound
        high = arr < upper_bound if open_upper_bound else arr <= upper_bound
        bad = ~(low & high)
        if np.any(bad):
            where = np.argwhere(bad) if arr.ndim else np.zeros((1, 0), int)
            ranges = ("(" if open_lower_bound else "[") + f"{lower_bound}, {upper_bound}" + (
                ")" if open_upper_bound else "]")
            raise AssertionError(
                f"{int(np.sum(bad))} of the {arr.size} element(s) are outside the range "
                f"{ranges}: {[(tuple(int(i) for i in w), arr[tuple(w)]) for w in where[:10]]}")

    def assertShapeEqual(self, input_a, input_b, msg=None) -> None:  # noqa: N802
        """An ndarray's (or a tensor's) shape equals a tensor's static shape."""
        from jitflow.core.graph import Tensor

        def shape(x, name):
            if isinstance(x, (np.ndarray, np.generic)):
                return list(np.shape(x))
            if isinstance(x, Tensor):
                return x.get_shape().as_list() if x.get_shape().dims is not None else None
            raise TypeError(f"{name} must be a Numpy ndarray, Numpy scalar, or a Tensor. "
                            f"Instead received {type(x)}")
        a, b = shape(input_a, "input_a"), shape(input_b, "input_b")
        if a != b:
            raise AssertionError(f"Shapes differ: {a} != {b}. {msg or ''}")

    def assertDTypeEqual(self, target, expected_dtype) -> None:  # noqa: N802
        """Every array of `target` (an array, tensor or list of them) has `expected_dtype`
        (a NumPy or jitflow dtype)."""
        from jitflow.core.dtypes import as_dtype
        want = as_dtype(expected_dtype).as_numpy_dtype
        targets = target if isinstance(target, list) else [target]
        for t in targets:
            got = self._array(t).dtype
            if got != np.dtype(want):
                raise AssertionError(f"dtype {got} != {np.dtype(want)}")

    def assertNear(self, f1, f2, err: float, msg=None) -> None:  # noqa: N802
        """|f1 - f2| <= err (or f1 == f2: infinities)."""
        if not (f1 == f2 or math.fabs(f1 - f2) <= err):
            raise AssertionError(f"{f1:f} != {f2:f} +/- {err:f} (difference: "
                                 f"{math.fabs(f1 - f2):g}){' : ' + msg if msg else ''}")

    def assertArrayNear(self, farray1, farray2, err: float, msg=None) -> None:  # noqa: N802
        """Two sequences of the same length, element by element within `err`."""
        self.assertEqual(len(farray1), len(farray2), msg)
        for f1, f2 in zip(farray1, farray2):
            self.assertNear(float(f1), float(f2), err, msg=msg)

    def assertNDArrayNear(self, ndarray1, ndarray2, err: float, msg=None) -> None:  # noqa: N802
        self.assertTrue(np.linalg.norm(np.asarray(ndarray1) - np.asarray(ndarray2)) <= err,
                        msg)

    @contextlib.contextmanager
    def assertRaisesWithPredicateMatch(self, exception_type,  # noqa: N802
                                       expected_err_re_or_predicate: Union[str, Callable]):
        """The block raises `exception_type` whose message matches the regex (re.search) or for
        which the predicate is true."""
        if callable(expected_err_re_or_predicate):
            predicate = expected_err_re_or_predicate
        else:
            def predicate(e) -> bool:
                text = e.message if hasattr(e, "message") else str(e)
                return re.search(expected_err_re_or_predicate, str(text)) is not None
        try:
            yield
        except exception_type as e:
            if not predicate(e):
                raise AssertionError(f"Exception of type {type(e)}: {e}") from e
        else:
            raise AssertionError(f"Exception of type {AssertionError}: "
                                 f"{getattr(exception_type, '__name__', exception_type)} "
                                 f"not raised")

    def assertRaisesOpError(self, expected_err_re_or_predicate):  # noqa: N802
        """The block raises a `tf.errors.OpError` matching the regex or predicate."""
        from jitflow.core.errors import OpError
        return self.assertRaisesWithPredicateMatch(OpError, expected_err_re_or_predicate)
