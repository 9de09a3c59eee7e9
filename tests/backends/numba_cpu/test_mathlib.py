"""numba_cpu's math library (mathir.py, used through mathlib.py's intrinsics and the fast path's
IR): ulp sweeps against long double, exact edge cases, vectorization, and the same bits on every
compiled path.

`run(op, x)` evaluates through the public API, one kernel `y = op(x)`, in the three code modes
(JITFLOW_COMPILE quick, sync and numba) and checks they agree bit for bit before returning.
"""
from __future__ import annotations

import functools
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import numpy as np
import pytest

import jitflow as tf
from helpers import same_bits
from jitflow.backends.numba_cpu import mathir
from jitflow.backends.numba_cpu import mathlib as ml

F32, F64, LD = np.float32, np.float64, np.longdouble
DTYPES = (F32, F64)
# the accuracy promised in mathir.py's docstring; the targets are 2 ulp (f32) and 4 ulp (f64)
MAX_ULP = {
    ("exp", F32): 1.0, ("exp", F64): 1.25, ("log", F32): 1.0, ("log", F64): 1.0,
    ("tanh", F32): 1.5, ("tanh", F64): 1.5, ("sigmoid", F32): 1.0, ("sigmoid", F64): 1.25,
    ("log1p", F32): 1.5, ("log1p", F64): 1.5, ("expm1", F32): 1.5, ("expm1", F64): 1.5,
}
LIBM_CALL = re.compile(r"call [^\n]*@(llvm\.(exp|exp2|log|log2|pow)\.\w+|_?_?(exp|log|tanh|"
                       r"log1p|expm1|pow|exp2|tanhf|expf|logf|log1pf|expm1f|powf)\b)")
_OPS = {"exp": tf.exp, "log": tf.log, "tanh": tf.tanh, "sigmoid": tf.sigmoid,
        "log1p": tf.log1p, "expm1": tf.math.expm1, "pow": tf.pow}


def _mode_run(op: str, x, y, mode: str):
    old = os.environ.get("JITFLOW_COMPILE")
    os.environ["JITFLOW_COMPILE"] = mode
    try:
        with tf.Graph().as_default():
            a = tf.placeholder(x.dtype, [None])
            feed = {a: x}
            if y is None:
                out = _OPS[op](a)
            else:
                b = tf.placeholder(x.dtype, [None])
                feed[b] = y
                out = _OPS[op](a, b)
            with tf.Session() as sess:
                return sess.run(out, feed)
    finally:
        if old is None:
            os.environ.pop("JITFLOW_COMPILE", None)
        else:
            os.environ["JITFLOW_COMPILE"] = old


def run(op: str, x, y=None):
    """op(x) (or op(x, y)) on every compiled path; they must agree bit for bit."""
    x = np.ascontiguousarray(x)
    if y is not None:
        y = np.ascontiguousarray(y, dtype=x.dtype)
    results = [_mode_run(op, x, y, m) for m in ("quick", "sync", "numba")]
    for r in results[1:]:
        assert same_bits(r, results[0]), f"{op}: the compiled paths disagree"
    return results[0]


def _loop1(fn):
    @numba.njit(error_model="numpy")
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])
    return loop


def _loop2(fn):
    @numba.njit(error_model="numpy")
    def loop(x, y, out):
        for i in range(x.size):
            out[i] = fn(x[i], y[i])
    return loop


@functools.lru_cache(maxsize=None)
def compiled(op: str):
    return (_loop2 if op == "pow" else _loop1)(getattr(ml, op))


def ld_sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, LD(1), e) / (1 + e)


REFS = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sigmoid": ld_sigmoid,
        "log1p": np.log1p, "expm1": np.expm1}


def ulp_error(res, ref, dt):
    """|res - ref| in units of the last place of `ref` in `dt` (subnormal spacing below the
    normals); 0 where both are the same nan/inf/value, a result of +-inf counts as +-2**emax
    (one ulp beyond the largest float's binade)."""
    fi = np.finfo(dt)
    ref = np.asarray(ref, dtype=LD)
    resl = res.astype(LD)
    with np.errstate(over="ignore"):
        same = (resl == ref.astype(dt).astype(LD)) | (np.isnan(res) & np.isnan(ref))
    big = np.ldexp(LD(1), fi.maxexp)
    resl = np.where(np.isinf(resl) & np.isfinite(ref), np.copysign(big, resl), resl)
    _, e = np.frexp(np.where(np.isfinite(ref), ref, 1))
    ulp = np.ldexp(LD(1), np.maximum(e - 1 - fi.nmant, fi.minexp - fi.nmant))
    with np.errstate(invalid="ignore"):
        err = np.abs(resl - ref) / ulp
    err = np.where(np.isnan(err), np.inf, err)
    return np.where(same, 0, err)


def sweep(dt, lo: float, hi: float, n: int = 150_000, seed: int = 0):
    """Log-spaced magnitudes over all of [lo, hi] (subnormals included), uniform points over
    the middle, and the neighbourhoods of lo, hi and 0."""
    fi = np.finfo(dt)
    rng = np.random.default_rng(seed)
    parts = [rng.uniform(max(lo, -50.0), min(hi, 50.0), n).astype(dt)]
    with np.errstate(over="ignore"):
        if hi > 0:
            parts.append(np.geomspace(fi.smallest_subnormal, hi, n).astype(dt))
        if lo < 0:
            parts.append(-np.geomspace(fi.smallest_subnormal, -lo, n).astype(dt))
    steps = np.arange(-300, 300)
    for edge in (lo, hi):
        parts.append(edge_neighbours(dt(edge), steps))
    parts.append(np.ldexp(np.ones(600, dt), np.arange(-300, 300) % fi.maxexp))
    x = np.concatenate(parts)
    return x[(x >= lo) & (x <= hi)]


def edge_neighbours(v, steps):
    """The floats `steps` ulps away from `v` (by integer arithmetic on the bits)."""
    it = np.int32 if v.dtype == F32 else np.int64
    bits = np.array([v]).view(it)[0]
    return (bits + steps.astype(it)).view(v.dtype)


# float32 / float64 overflow and underflow thresholds of exp, plus a little
RANGES = {
    "exp": {F32: (-110.0, 95.0), F64: (-760.0, 720.0)},
    "expm1": {F32: (-110.0, 95.0), F64: (-760.0, 720.0)},
    "sigmoid": {F32: (-120.0, 120.0), F64: (-760.0, 760.0)},
    "tanh": {F32: (-30.0, 30.0), F64: (-30.0, 30.0)},
    "log": {F32: (0.0, float(np.finfo(F32).max)), F64: (0.0, float(np.finfo(F64).max))},
    "log1p": {F32: (-1.0, float(np.finfo(F32).max)), F64: (-1.0, float(np.finfo(F64).max))},
}
EDGES = {"exp": {F32: (88.72284, -103.97208, -87.33655), F64: (709.782712893384,
                                                          -745.1332191019412, -708.3964)},
         "expm1": {F32: (88.72284, -17.328680), F64: (709.782712893384, -37.42994775023705)}}


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", ["exp", "log", "tanh", "sigmoid", "log1p", "expm1"])
def test_ulp_sweep(op, dt):
    lo, hi = RANGES[op][dt]
    x = sweep(dt, lo, hi)
    for edge in EDGES.get(op, {}).get(dt, ()):
        x = np.concatenate([x, edge_neighbours(dt(edge), np.arange(-2000, 2000))])
    res = run(op, x)
    assert res.dtype == dt
    with np.errstate(all="ignore"):
        ref = REFS[op](x.astype(LD))
    err = ulp_error(res, ref, dt)
    i = int(np.argmax(err))
    assert err[i] <= MAX_ULP[(op, dt)], (
        f"{op} {dt.__name__}: {err[i]:.3f} ulp at x={x[i]!r}: got {res[i]!r}, want {ref[i]!r}")
    # far better than the bound on average, too
    assert float(np.mean(err)) < 0.3


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
def test_exp_edges(dt):
    fi = np.finfo(dt)
    x = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, 1.0, 1e4, -1e4, fi.max, -fi.max,
                  fi.smallest_subnormal], dt)
    r = run("exp", x)
    assert r[0] == 0 and not np.signbit(r[0])
    assert r[1] == np.inf and np.isnan(r[2])
    assert r[3] == 1 and r[4] == 1 and abs(r[5] - dt(math.e)) <= np.spacing(dt(math.e))
    assert r[6] == np.inf and r[7] == 0 and r[8] == np.inf and r[9] == 0 and r[10] == 1
    # around the overflow threshold, the last normal and the last nonzero result: inf, 0 and
    # the subnormals exactly where the correctly rounded result has them
    for edge in EDGES["exp"][dt]:
        x = edge_neighbours(dt(edge), np.arange(-40, 40))
        with np.errstate(over="ignore"):
            want = np.exp(x.astype(LD)).astype(dt)
        got = run("exp", x)
        assert np.array_equal(np.isinf(got), np.isinf(want))
        assert np.array_equal(got == 0, want == 0)
        assert np.all(ulp_error(got, np.exp(x.astype(LD)), dt) <= 1)
    tiny = np.log(LD(fi.smallest_subnormal))
    r = run("exp", np.array([tiny, tiny - 1], dt))
    assert r[0] == fi.smallest_subnormal and r[1] == 0


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
def test_log_edges(dt):
    fi = np.finfo(dt)
    x = np.array([0.0, -0.0, -1.0, -np.inf, np.inf, np.nan, 1.0, fi.smallest_subnormal,
                  fi.smallest_normal, fi.max, -fi.smallest_subnormal], dt)
    r = run("log", x)
    assert r[0] == -np.inf and r[1] == -np.inf
    assert np.isnan(r[2]) and np.isnan(r[3]) and np.isnan(r[10])
    assert r[4] == np.inf and np.isnan(r[5])
    assert r[6] == 0 and not np.signbit(r[6])
    ref = np.log(x[7:10].astype(LD)).astype(dt)
    assert np.all(np.abs(r[7:10] - ref) <= np.spacing(np.abs(ref)))


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
def test_log1p_expm1_edges(dt):
    fi = np.finfo(dt)
    s = fi.smallest_subnormal
    x = np.array([-1.0, -2.0, -np.inf, np.inf, np.nan, 0.0, -0.0, s, -s, fi.max], dt)
    r = run("log1p", x)
    assert r[0] == -np.inf and np.isnan(r[1]) and np.isnan(r[2]) and r[3] == np.inf
    assert np.isnan(r[4])
    assert r[5] == 0 and not np.signbit(r[5]) and r[6] == 0 and np.signbit(r[6])
    assert r[7] == s and r[8] == -s and np.isfinite(r[9])
    x = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, s, -s, -1e4, 1e4, fi.max], dt)
    r = run("expm1", x)
    assert r[0] == -1 and r[1] == np.inf and np.isnan(r[2])
    assert r[3] == 0 and not np.signbit(r[3]) and r[4] == 0 and np.signbit(r[4])
    assert r[5] == s and r[6] == -s and r[7] == -1 and r[8] == np.inf and r[9] == np.inf


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
def test_tanh_edges(dt):
    fi = np.finfo(dt)
    s = fi.smallest_subnormal
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, s, -s, 30.0, -30.0, fi.max, 1e-20], dt)
    r = run("tanh", x)
    assert r[0] == 1 and r[1] == -1 and np.isnan(r[2])
    assert r[3] == 0 and not np.signbit(r[3]) and r[4] == 0 and np.signbit(r[4])
    assert r[5] == s and r[6] == -s and r[7] == 1 and r[8] == -1 and r[9] == 1
    assert r[10] == x[10]
    # odd, exactly
    y = sweep(dt, 0.0, 30.0, n=20_000)
    np.testing.assert_array_equal(run("tanh", -y), -run("tanh", y))


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
def test_sigmoid_edges(dt):
    fi = np.finfo(dt)
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e4, -1e4, fi.max, -fi.max], dt)
    r = run("sigmoid", x)
    assert r[0] == 1 and r[1] == 0 and np.isnan(r[2]) and r[3] == 0.5 and r[4] == 0.5
    assert r[5] == 1 and r[6] == 0 and r[7] == 1 and r[8] == 0
    # saturation to exactly 1 where 1 - sigmoid(x) is below half an ulp of 1
    sat = dt(17.5) if dt is F32 else dt(37.5)
    assert run("sigmoid", np.array([sat], dt))[0] == 1
    assert run("sigmoid", np.array([sat - dt(2)], dt))[0] < 1
    # subnormal results keep their value (the naive 1/(1+exp(-x)) flushes them to 0)
    x = np.array([-88.0, -95.0, -100.0, -103.0], dt) if dt is F32 else \
        np.array([-710.0, -720.0, -740.0, -744.0], dt)
    r = run("sigmoid", x)
    ref = ld_sigmoid(x.astype(LD))
    assert np.all(r > 0) and np.all(r < fi.smallest_normal)
    assert np.all(np.abs(r.astype(LD) - ref) <= LD(fi.smallest_subnormal))


POW_SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, np.inf, -np.inf, np.nan,
               1e-45, -1e-45, 1e30, 2.5, -2.5, 1e10, -1e10, 16777216.0, 16777217.0, 7.0]


def test_pow32_special_cases_match_numpy():
    x, y = np.meshgrid(np.array(POW_SPECIAL, F32), np.array(POW_SPECIAL, F32))
    x, y = x.ravel(), y.ravel()
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    got = run("pow", x, y)
    for a, b, g, w in zip(x, y, got, want):
        if np.isnan(w):
            assert np.isnan(g), (a, b, g, w)
        elif w == 0 or np.isinf(w):
            assert g == w and np.signbit(g) == np.signbit(w), (a, b, g, w)
        else:
            assert abs(float(g) - float(w)) <= np.spacing(abs(w)), (a, b, g, w)


def test_pow32_sweep():
    rng = np.random.default_rng(1)
    n = 200_000
    x = np.concatenate([np.geomspace(1e-45, 3e38, n), rng.uniform(0, 10, n)]).astype(F32)
    y = np.concatenate([rng.uniform(-3, 3, n), rng.uniform(-40, 40, n)]).astype(F32)
    # negative bases with integer exponents, and exponents that reach over/underflow
    xn = -rng.uniform(0.5, 4, n).astype(F32)
    yn = rng.integers(-60, 60, n).astype(F32)
    x, y = np.concatenate([x, xn]), np.concatenate([y, yn])
    got = run("pow", x, y)
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(LD), y.astype(LD))
    err = ulp_error(got, ref, F32)
    i = int(np.argmax(err))
    assert err[i] <= 0.51, (x[i], y[i], got[i], ref[i])


# -- vectorization guard -----------------------------------------------------------------------
def _ir(fn, dt) -> str:
    """The IR of `fn`'s overload for arrays of `dt` (one helper serves both dtypes)."""
    (sig,) = [s for s in fn.signatures if str(s[0].dtype) == np.dtype(dt).name]
    return fn.inspect_llvm(sig)


def _vector_math(ir: str, ty: str) -> bool:
    return re.search(rf"(fmul|fadd|fsub|fdiv)[^\n]*<(2|4|8|16|32) x {ty}>", ir) is not None


@pytest.mark.parametrize("op,dt", [(f, np.dtype(d).type) for f, d in sorted(mathir.FUNCTIONS)],
                         ids=str)
def test_helper_loops_vectorize(op, dt):
    fn = compiled(op)
    x = np.linspace(0.1, 2, 64).astype(dt)
    out = np.empty_like(x)
    fn(x, x, out) if op == "pow" else fn(x, out)
    ir = _ir(fn, dt)
    calls = LIBM_CALL.findall(ir)
    assert not calls, f"libm calls left in the {op} loop: {calls}"
    ty = "float" if dt is F32 and op != "pow" else "double"   # pow32 computes in float64
    assert _vector_math(ir, ty), f"the {op} {dt.__name__} loop did not vectorize"
    if ty == "float":   # untyped constants would promote float32 math to float64, and
        # int64 bit arithmetic would halve the vector width
        assert not re.search(r"(fmul|fadd|fsub|fdiv)[^\n]* double", ir)
        assert not re.search(r"<\d+ x i64>", ir)


def _chain(dt, libm=False):
    sig, tanh, exp = ml.sigmoid, ml.tanh, ml.exp
    if libm:
        tanh, exp = math.tanh, math.exp
    half = dt(0.5)

    @numba.njit(error_model="numpy")
    def chain(x, w, b, out):
        for i in range(x.size):
            v = x[i]
            out[i] = sig(v * w + b) * tanh(v) - exp(-v * v) + half * v
    return chain


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
def test_fused_chain_vectorizes_and_matches(dt):
    chain = _chain(dt)
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(10_000) * 4).astype(dt)
    out = np.empty_like(x)
    w, b = dt(0.7), dt(-0.2)
    chain(x, w, b, out)
    ir = _ir(chain, dt)
    assert not LIBM_CALL.findall(ir)
    assert _vector_math(ir, "float" if dt is F32 else "double")
    if dt is F32:
        assert not re.search(r"(fmul|fadd|fsub|fdiv)[^\n]* double", ir)
    xl = x.astype(LD)
    ref = ld_sigmoid(xl * LD(w) + LD(b)) * np.tanh(xl) - np.exp(-xl * xl) + xl / 2
    eps = np.finfo(dt).eps
    np.testing.assert_allclose(out, ref.astype(dt), rtol=0, atol=8 * eps)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
def test_fast_path_chain_vectorizes_without_libm_calls(dt, monkeypatch):
    """The same chain as a graph, compiled by the fast path's optimizing level: vector math,
    no libm call, and the Numba kernel's bits."""
    from jitflow.backends.numba_cpu import llvmjit
    monkeypatch.setenv("JITFLOW_COMPILE", "sync")
    x = tf.placeholder(dt, [None])
    y = tf.sigmoid(x * 0.7 - 0.2) * tf.tanh(x) - tf.exp(-x * x) + 0.5 * x
    xv = (np.random.default_rng(2).standard_normal(1000) * 4).astype(dt)
    with tf.Session() as sess:
        got = sess.run(y, {x: xv})
        ex = next(iter(sess._specs.values())).executable
        (c,) = ex.kernels[ex.steps[0]].compiled.values()
    assert c.level == "opt"
    code = llvmjit.info(c.run)
    ir = llvmjit.optimized_ir(code.llvm_ir, code.libraries)
    assert not LIBM_CALL.findall(ir)
    assert _vector_math(ir, "float" if dt is F32 else "double")
    monkeypatch.setenv("JITFLOW_COMPILE", "numba")
    with tf.Session() as sess:
        assert same_bits(sess.run(y, {x: xv}), got)


def test_guard_detects_libm_calls():
    """Negative control: the same chain with math.exp / math.tanh keeps libm calls."""
    chain = _chain(F32, libm=True)
    x = np.linspace(-2, 2, 64).astype(F32)
    chain(x, F32(1), F32(0), np.empty_like(x))
    assert LIBM_CALL.findall(_ir(chain, F32))


@pytest.mark.slow
def test_cached_kernel_in_a_new_process(tmp_path):
    """A cache=True kernel calling the math library is written to and loaded from Numba's
    cache."""
    mod = tmp_path / "ml_cached_kernel.py"
    mod.write_text(textwrap.dedent("""
        import numba, numpy as np
        from jitflow.backends.numba_cpu.mathlib import sigmoid

        @numba.njit(cache=True, error_model="numpy")
        def kernel(x, out):
            for i in range(x.size):
                out[i] = sigmoid(x[i])

        x = np.linspace(-3, 3, 101).astype(np.float32)
        out = np.empty_like(x)
        kernel(x, out)
        print(len(kernel.stats.cache_hits), repr(float(out.sum())))
    """))
    root = Path(ml.__file__).resolve().parents[3]   # jitflow/backends/numba_cpu/mathlib.py
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    outs = [subprocess.run([sys.executable, str(mod)], env=env, capture_output=True, text=True,
                           timeout=120) for _ in range(2)]
    for o in outs:
        assert o.returncode == 0, o.stderr
    first, second = (o.stdout.split() for o in outs)
    assert first[0] == "0" and second[0] == "1" and first[1] == second[1]


def test_empty_allocates_c_contiguous_arrays_of_any_rank():
    """`empty`: np.empty's array (shape, dtype, C strides, owned data) for tuples of any
    length, including rank 0 and zero-size dims."""
    @numba.njit
    def make(n, m):
        a = ml.empty((n, m, 3), np.float32)
        b = ml.empty((), np.int64)
        c = ml.empty((n * 0,), np.bool_)
        d = ml.empty((m,), np.float64)
        a[:] = 1.5
        b[()] = 7
        d[:] = 2.0
        return a, b, c, d

    a, b, c, d = make(4, 5)
    assert a.shape == (4, 5, 3) and a.dtype == np.float32 and a.flags.c_contiguous
    assert a.strides == (60, 12, 4)
    assert (a == 1.5).all() and b.shape == () and b.dtype == np.int64 and b[()] == 7
    assert c.shape == (0,) and c.dtype == np.bool_
    assert d.shape == (5,) and d.strides == (8,) and (d == 2.0).all()
