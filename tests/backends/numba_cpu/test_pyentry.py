"""The native entry points of the fast path's kernels (pyentry.py): results, errors, reference
counts, refusals (None from the warm runners' variant, the Python wrapper from a kernel's),
scalar conversions as numpy's, every symbolic dim form as Python evaluates it, the layout
check failing closed, optimized code swapped in without a new entry, large kernels without the
GIL, and the same results as the Python wrapper on real graphs. Which entry ran is counted,
never timed."""
from __future__ import annotations

import gc
import math
import random
import sys
import threading
import warnings

import numpy as np
import pytest

import jitflow as tf
from jitflow.backends.numba_cpu import background, llvmjit, pyentry
from jitflow.backends.pytext import dim_text

_ADDRS: dict = {}


def _kernel(text: str, name: str) -> int:
    """The address of test kernel `name` (LLVM IR `text`), compiled once."""
    if name not in _ADDRS:
        _ADDRS[name] = llvmjit.compile_ir(text, name, "quick")
    return _ADDRS[name]


@pytest.fixture(autouse=True)
def _native():
    if not pyentry.available():   # pragma: no cover  (another CPython / numpy layout)
        pytest.skip("no native entries in this process")


# out = 2 * x, v += x, r0 = x[0] + n (0.0 when empty); error 1 when x[0] < 0, 7 (not a code the
# descriptor knows) when x[0] == 12345
SCALE_IR = """\
define i32 @t_scale(ptr noalias %a) nounwind {
entry:
  %x = load ptr, ptr %a
  %p1 = getelementptr i64, ptr %a, i64 1
  %n = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %a, i64 2
  %out = load ptr, ptr %p2
  %p3 = getelementptr i64, ptr %a, i64 3
  %r0 = load ptr, ptr %p3
  %p4 = getelementptr i64, ptr %a, i64 4
  %v = load ptr, ptr %p4
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %none, label %first
first:
  %x0 = load double, ptr %x
  %neg = fcmp olt double %x0, 0.0
  br i1 %neg, label %err1, label %chk7
chk7:
  %odd = fcmp oeq double %x0, 12345.0
  br i1 %odd, label %err7, label %loop
err1:
  ret i32 1
err7:
  ret i32 7
loop:
  %i = phi i64 [0, %chk7], [%i1, %body]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %pi = getelementptr double, ptr %x, i64 %i
  %xi = load double, ptr %pi
  %w = fmul double %xi, 2.0
  %po = getelementptr double, ptr %out, i64 %i
  store double %w, ptr %po
  %pv = getelementptr double, ptr %v, i64 %i
  %vi = load double, ptr %pv
  %vn = fadd double %vi, %xi
  store double %vn, ptr %pv
  %i1 = add i64 %i, 1
  br label %loop
done:
  %nf = sitofp i64 %n to double
  %s = fadd double %x0, %nf
  store double %s, ptr %r0
  ret i32 0
none:
  store double 0.0, ptr %r0
  ret i32 0
}
"""
LIT = np.float32(2.5)


def scale_entry(fallback=None):
    """(fn, try variant) of the scale kernel: ins (x,), vs (v,) float64 vectors of one size;
    results (2x, x[0] + n, v, a copy of x, np.float32(2.5))."""
    L = pyentry.Layout("scale")
    x = L.arg("float64", 1, ones=(False,))
    v = L.arg("float64", 1, var=True, ones=(False,))
    n = L.arg_dims[x][0]
    L.check(n, L.arg_dims[v][0], "jitflow:0:sizes")
    out = L.empty("float64", [n])
    r0 = L.rank0()
    L.slots += [(0, x), (2, n), (0, out), (1, r0), (0, v)]
    L.keep.append(LIT)
    L.results += [(0, out), (3, r0, id(np.dtype("float64"))), (0, v), (1, x), (2, id(LIT))]
    L.errors.append("jitflow:0:negative")
    L.finish()
    fn = pyentry.build(L, _kernel(SCALE_IR, "t_scale"), fallback or _no_fallback)
    return fn, pyentry.try_variant(fn)


def _no_fallback(ins, vs):
    raise AssertionError("the entry handed its arguments to the wrapper")


def scale_reference(x, v):
    """What the scale entry returns for valid operands (and does to v)."""
    n = len(x)
    if n and x[0] < 0:
        raise ValueError("jitflow:0:negative")
    v += x
    return 2 * x, np.float64(x[0] + n if n else 0.0), v, x.copy(), LIT


# -- results, errors, reference counts ------------------------------------------------------
def test_results_of_every_kind_and_the_kernel_writes_variables_in_place():
    fn, tr = scale_entry()
    x, v = np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0])
    for entry in (fn, tr):
        got = entry((x,), (v,))
        assert type(got) is tuple and len(got) == 5
        assert got[0].tolist() == [2.0, 4.0, 6.0] and got[0].dtype == np.float64
        assert type(got[1]) is np.float64 and got[1] == 4.0
        assert got[2] is v
        assert got[3] is not x and got[3].tolist() == x.tolist() and got[3].base is None
        assert got[4] is LIT
    assert v.tolist() == [12.0, 24.0, 36.0]
    empty = fn((np.zeros(0),), (np.zeros(0),))
    assert empty[0].shape == (0,) and empty[1] == 0.0


def test_kernel_error_codes_and_dim_checks_raise_the_wrappers_messages():
    fn, tr = scale_entry()
    for entry in (fn, tr):
        with pytest.raises(ValueError, match=r"^jitflow:0:negative$"):
            entry((np.array([-1.0, 2.0]),), (np.zeros(2),))
        with pytest.raises(SystemError, match="unknown kernel error code"):
            entry((np.array([12345.0, 2.0]),), (np.zeros(2),))
        with pytest.raises(ValueError, match=r"^jitflow:0:sizes$"):
            entry((np.zeros(3),), (np.zeros(2),))


def test_reference_counts_are_unchanged_on_every_path():
    fb = []
    fn, tr = scale_entry(lambda ins, vs: fb.append(1) or "wrapper")
    x, v = np.array([1.0, 2.0]), np.array([0.0, 0.0])
    bad, neg, odd = np.zeros(2, np.float32), np.array([-1.0, 0.0]), np.array([12345.0, 0])
    three = np.zeros(3)   # (no array is made in the loop: numpy keeps a descr reference then)
    watched = [x, v, bad, neg, odd, three, np.dtype(np.float64), np.dtype(np.float32), LIT]
    before = [sys.getrefcount(o) for o in watched]
    for _ in range(100):
        out = fn((x,), (v,))
        counts = sys.getrefcount(out[0]), sys.getrefcount(out[3])   # (outside `assert`:
        assert counts == (2, 2)                                      # the tuple's, the call's)
        del out
        assert fn((bad,), (v,)) == "wrapper" and tr((bad,), (v,)) is None
        for entry in (fn, tr):
            for args in [((neg,), (v,)), ((x,), (three,)), ((odd,), (v,))]:
                with pytest.raises((ValueError, SystemError)):
                    entry(*args)
    del args
    assert [sys.getrefcount(o) for o in watched] == before and len(fb) == 100
    nones = sys.getrefcount(None)
    for _ in range(1000):
        tr((bad,), (v,))
    assert abs(sys.getrefcount(None) - nones) < 10


@pytest.mark.parametrize("path", ["ok", "check", "kernel error", "refused", "fallback"])
def test_no_object_leaks_over_many_calls(path):
    fn, tr = scale_entry(lambda ins, vs: None)
    x, v = np.array([1.0, 2.0, 3.0]), np.zeros(3)
    call = {"ok": lambda: tr((x,), (v,)),
            "check": lambda: tr((x,), (np.zeros(2),)),
            "kernel error": lambda: tr((np.array([-1.0, 0, 0]),), (v,)),
            "refused": lambda: tr((x.astype(np.float32),), (v,)),
            "fallback": lambda: fn((x.astype(np.float32),), (v,))}[path]

    def loop(n):
        for _ in range(n):
            try:
                call()
            except ValueError:
                pass
    loop(500)
    start = sys.getallocatedblocks()
    loop(20000)
    assert sys.getallocatedblocks() - start < 200


# -- refusals: None, or the wrapper --------------------------------------------------------
class Sub(np.ndarray):
    pass


def _pool(rng):
    """Arguments of every kind, most of them not what the scale entry takes."""
    base = np.arange(8.0)
    ro = base.copy()
    ro.flags.writeable = False
    raw = np.zeros(8 * 5 + 1, np.uint8)[1:]
    return [None, 1.5, 3, True, "x", [1.0, 2.0], (1.0,), np.float64(2.0), np.float32(1.0),
            base, base[:3], base[::2], base[:1], ro, base.reshape(2, 4), base.astype(np.float32),
            base.astype(np.int64), base.astype(">f8"), base.view(Sub), raw.view(np.float64),
            np.zeros(0), np.array(3.0), np.asfortranarray(base.reshape(2, 4)).T.copy(),
            np.ones(3), -np.ones(3), np.array([12345.0, 1.0, 1.0]), object(), {}]


def _accepts(x, v, try_variant: bool) -> bool:
    def ok(a, writeable):
        return (type(a) is np.ndarray and a.dtype == np.float64 and a.dtype.isnative
                and a.ndim == 1 and a.flags.c_contiguous and a.flags.aligned
                and (a.flags.writeable or not writeable) and (len(a) != 1 or not try_variant))
    return ok(x, try_variant) and ok(v, True)


def test_a_fuzz_of_wrong_arguments_never_crashes_and_refuses_what_it_does_not_take():
    rng = random.Random(7)
    pool = _pool(rng)
    seen = []
    fn, tr = scale_entry(lambda *a, **k: seen.append(a) or "wrapper")
    counts = {"ran": 0, "refused": 0}
    for _ in range(3000):
        k = rng.random()
        if k < 0.1:   # wrong containers or numbers of arguments
            args = tuple(rng.choice(pool) for _ in range(rng.choice([0, 1, 3])))
            for entry in (fn, tr):
                before = len(seen)
                got = entry(*args)
                assert got is None if entry is tr else (got == "wrapper" and len(seen) > before)
            continue
        x = rng.choice(pool)
        v = rng.choice(pool)
        ins = (x,) if rng.random() < 0.9 else (x, x)
        vs = (v,) if rng.random() < 0.9 else [v]
        if isinstance(v, np.ndarray):
            v = v.copy() if v.flags.writeable else v
            vs = (v,) if isinstance(vs, tuple) else [v]
        for entry, is_try in ((fn, False), (tr, True)):
            takes = len(ins) == 1 and type(vs) is tuple and _accepts(x, v, is_try)
            if takes and (len(x) != len(v)):
                with pytest.raises(ValueError, match="jitflow:0:sizes"):
                    entry(ins, vs)
                continue
            if takes and len(x) and (x[0] < 0 or x[0] == 12345.0):
                with pytest.raises((ValueError, SystemError)):
                    entry(ins, vs)
                continue
            before = len(seen)
            if takes:
                want = scale_reference(x, v.copy())
                got = entry(ins, vs)
                counts["ran"] += 1
                assert got[0].tolist() == want[0].tolist() and got[1] == want[1]
                assert got[2] is v and len(seen) == before
            else:
                got = entry(ins, vs)
                counts["refused"] += 1
                if is_try:
                    assert got is None
                else:
                    assert got == "wrapper" and seen[-1][0] is ins and seen[-1][1] is vs
    with pytest.raises(TypeError):
        fn(ins=(np.ones(2),), vs=(np.ones(2),))
    assert counts["ran"] > 50 and counts["refused"] > 1000


# -- scalars -------------------------------------------------------------------------------
_COPY_IR = """\
define i32 @t_copy{bits}(ptr noalias %a) nounwind {{
entry:
  %x = load ptr, ptr %a
  %p1 = getelementptr i64, ptr %a, i64 1
  %r = load ptr, ptr %p1
  %v = load i{bits}, ptr %x
  store i{bits} %v, ptr %r
  ret i32 0
}}
"""
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64"]
VALUES = [0, 1, -1, 7, 127, 128, 255, 256, -129, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53,
          2 ** 53 + 1, 2 ** 63 - 1, -2 ** 63, 2 ** 64, 16777217, 0.1, -0.0, 1.5, 1e40, -1e40,
          3.4028235e38, 3.4028235677973366e38, 1e-46, math.inf, -math.inf, math.nan, True, False,
          np.float32(0.1), np.float64(0.1), np.int32(-5), np.int64(2 ** 40), np.uint8(200),
          np.bool_(True), np.float16(1.5), "1.0", None, 1 + 2j]


def copy_entry(dtype: str):
    bits = 8 * np.dtype(dtype).itemsize
    L = pyentry.Layout("copy")
    x = L.arg(dtype, 0, scalar=True)
    r = L.rank0()
    L.slots += [(0, x), (1, r)]
    L.results.append((3, r, id(np.dtype(dtype))))
    L.finish()
    fn = pyentry.build(L, _kernel(_COPY_IR.format(bits=bits), f"t_copy{bits}"), _no_fallback)
    return pyentry.try_variant(fn)


def _taken(v, dt) -> bool:
    """Whether a rank-0 input of `dt` takes `v` itself: the dtype's numpy scalar; a bool for
    bool; an int in range (at most 2**53 in magnitude for floats); a float for floats unless
    numpy warns converting it (a finite value beyond float32)."""
    if type(v) is dt.type:
        return True
    if dt.kind == "b" or type(v) is bool:
        return dt.kind == "b" and type(v) is bool
    if type(v) is int:
        if dt.kind == "f":
            return abs(v) <= 2 ** 53
        return np.iinfo(dt).min <= v <= min(np.iinfo(dt).max, 2 ** 63 - 1)
    if type(v) is float and dt.kind == "f":
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                np.asarray(v, dt)
            except RuntimeWarning:
                return False
        return True
    return False


@pytest.mark.parametrize("dtype", DTYPES)
def test_rank0_inputs_take_python_and_numpy_scalars_converted_as_numpy_does(dtype):
    """A value taken converts to numpy's bits and type; any other gives None (the runner's
    general path, which converts it or names the error as TF1 does)."""
    tr = copy_entry(dtype)
    dt = np.dtype(dtype)
    for v in VALUES:
        got = tr((v,), ())
        assert (got is not None) == _taken(v, dt), (v, dtype)
        if got is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                want = np.asarray(v, dt)
            (r,) = got
            assert type(r) is dt.type and np.asarray(r).tobytes() == want.tobytes(), (v, r)
    a = np.array(3, dt)
    assert tr((a,), ())[0] == a[()]    # and 0-d arrays of the dtype


# -- the dim program -----------------------------------------------------------------------
def _dims_ir(n: int) -> str:
    lines = [f"define i32 @t_dims{n}(ptr noalias %a) nounwind {{", "entry:",
             "  %o = load ptr, ptr %a"]
    for j in range(n):
        lines += [f"  %p{j} = getelementptr i64, ptr %a, i64 {j + 1}",
                  f"  %v{j} = load i64, ptr %p{j}",
                  f"  %q{j} = getelementptr i64, ptr %o, i64 {j}",
                  f"  store i64 %v{j}, ptr %q{j}"]
    return "\n".join(lines + ["  ret i32 0", "}"]) + "\n"


def _random_dim(rng, ranks, depth=0, nonzero=False):
    leaves = [("in", s, k) for s, r in enumerate(ranks) for k in range(r)]
    if depth > 2 or rng.random() < 0.3:
        return rng.choice(leaves + [("const", rng.randint(-3, 9)), 1])
    kind = rng.choice(["prod", "div", "mod", "arith", "sstart", "slen", "sidx", "ok", "window"])
    sub = lambda: _random_dim(rng, ranks, depth + 1, nonzero)  # noqa: E731
    if kind in ("prod", "div", "mod"):
        terms = tuple(sub() for _ in range(rng.randint(0, 3)))
        by = rng.choice([1, 2, 3, -2] + ([] if nonzero else [0]))
        return ("prod", terms) if kind == "prod" else (kind, terms, by)
    if kind == "arith":
        return ("arith", rng.choice("+-*"), sub(), sub())
    if kind in ("sstart", "slen"):
        return (kind, sub(), rng.randint(-8, 8), rng.randint(-8, 8),
                rng.choice([-3, -2, -1, 1, 2, 3]), rng.random() < 0.3, rng.random() < 0.3)
    if kind == "sidx":
        return ("sidx", sub(), rng.randint(-5, 5))
    if kind == "ok":   # (Python stops at `lo <= x` when false: `hi` may not divide by 0)
        return ("ok", sub(), sub(), _random_dim(rng, ranks, depth + 1, nonzero=True))
    return ("window", sub(), sub(), rng.randint(1, 3), rng.randint(1, 2), rng.random() < 0.4)


def _parts(d):
    """The dims `d` is made of."""
    if not isinstance(d, tuple) or d[0] in ("in", "const"):
        return []
    k = d[0]
    if k in ("prod", "div", "mod"):
        return list(d[1])
    if k == "arith":
        return [d[2], d[3]]
    if k == "ok":
        return list(d[1:4])
    if k == "window":
        return [d[1], d[2]]
    return [d[1]]     # sstart, slen, sidx


def _small(d, shapes) -> bool:
    """Whether no part of `d` (products of its parts included) reaches 2**60 in magnitude."""
    parts = _parts(d)
    if not all(_small(p, shapes) for p in parts):
        return False
    vals = [_python_value(p, shapes) for p in parts] + [_python_value(d, shapes)]
    if ZeroDivisionError in vals:
        return True
    return math.prod(abs(v) for v in vals[:-1]) < 2 ** 60 and abs(vals[-1]) < 2 ** 60


def _python_value(d, shapes):
    env = {f"d{s}_{k}": n for s, shp in enumerate(shapes) for k, n in enumerate(shp)}
    try:
        return eval(dim_text(d), {"min": min, "max": max}, env)   # the wrapper's text
    except ZeroDivisionError:
        return ZeroDivisionError


def test_every_symbolic_dim_form_evaluates_as_the_wrappers_python_text():
    rng = random.Random(3)
    n = 6
    addr = _kernel(_dims_ir(n), f"t_dims{n}")
    checked = {"values": 0, "zero": 0}
    for _ in range(300):
        ranks = [rng.randint(0, 3) for _ in range(rng.randint(1, 3))]
        dims = [_random_dim(rng, ranks) for _ in range(n)]
        L = pyentry.Layout("dims")
        regs = {}
        for s, r in enumerate(ranks):
            i = L.arg("int8", r)
            for k, reg in enumerate(L.arg_dims[i]):
                regs[("in", s, k)] = reg
        prog = pyentry._DimProgram(L, regs)
        out = L.empty("int64", [L.const(n)])
        L.slots.append((0, out))
        for d in dims:
            L.slots.append((2, prog(d)))
        L.results.append((0, out))
        L.finish()
        fn = pyentry.build(L, addr, _no_fallback)
        for _ in range(3):
            shapes = [tuple(rng.randint(0, 6) for _ in range(r)) for r in ranks]
            if not all(_small(d, shapes) for d in dims):
                continue
            want = [_python_value(d, shapes) for d in dims]
            ins = tuple(np.zeros(s, np.int8) for s in shapes)
            if ZeroDivisionError in want:
                with pytest.raises(ZeroDivisionError, match="integer division or modulo by zero"):
                    fn(ins, ())
                checked["zero"] += 1
                continue
            assert fn(ins, ())[0].tolist() == want, (dims, shapes)
            checked["values"] += 1
    assert checked["values"] > 300 and checked["zero"] > 10


def test_a_dim_product_that_overflows_is_an_error_not_a_wrong_size():
    L = pyentry.Layout("big")
    x = L.arg("int8", 2)
    a, b = L.arg_dims[x]
    huge = L.product([a, b, L.const(2 ** 62)])
    out = L.empty("int64", [L.const(6)])
    L.slots += [(0, out), (2, huge)] + [(2, L.const(0))] * 5
    L.results.append((0, out))
    L.finish()
    fn = pyentry.build(L, _kernel(_dims_ir(6), "t_dims6"), _no_fallback)
    assert fn((np.zeros((1, 1), np.int8),), ())[0][0] == 2 ** 62
    with pytest.raises(ValueError, match="array is too big"):
        fn((np.zeros((2, 3), np.int8),), ())


# -- fail closed ----------------------------------------------------------------------------
@pytest.mark.parametrize("patch", [("ARR_ND", 28), ("ARR_DESCR", 48), ("TUPLE_ITEMS", 32),
                                   ("FLOAT_VAL", 8), ("NPY_2_0_API", 0x7FFF),
                                   ("_SELFTEST_IR", "bad self-test")])
def test_a_layout_that_does_not_check_out_keeps_the_python_wrapper(patch, monkeypatch):
    name, value = patch
    if name == "_SELFTEST_IR":   # a compiled entry computing something else: refused too
        value = pyentry._SELFTEST_IR.replace("fmul double %v, 2.0", "fmul double %v, 3.0")
    monkeypatch.setattr(pyentry, "_RUNTIME", [])
    monkeypatch.setattr(pyentry, name, value)
    assert not pyentry.available()
    n0 = llvmjit.STATS["python_wrappers"]
    x = tf.placeholder(tf.float32, [None])
    y = x * (1.0 + len(name) / 1024.0) - value if isinstance(value, int) else x * 0.8125 - 1
    with tf.Session() as sess:
        for _ in range(3):
            got = sess.run(y, {x: np.arange(4, dtype=np.float32)})
        (c,) = next(iter(sess._specs.values())).executable.exact.values()
        assert not pyentry.is_native(c.run)
    assert llvmjit.STATS["python_wrappers"] > n0
    want = sess_reference(y, {x: np.arange(4, dtype=np.float32)})
    np.testing.assert_array_equal(got, want)


def sess_reference(fetches, feed):
    with tf.Session(backend="interpreter") as sess:
        return sess.run(fetches, feed)


# -- swapping, the GIL ------------------------------------------------------------------------
def test_optimized_code_is_swapped_into_the_quick_entry(monkeypatch):
    """A kernel too large to optimize at once starts on quick code; the optimized code then
    runs through the same entry (and the warm runner's entries stay)."""
    monkeypatch.setenv("JITFLOW_COMPILE", "auto")
    monkeypatch.setenv("JITFLOW_CACHE", "0")
    x = tf.placeholder(tf.float32, [None], name="x")
    y = x
    for k in range(20):
        y = tf.tanh(y * (1.0 + k / 512.0)) + 0.0625 * (k % 3)
    feed = {x: np.linspace(-1, 1, 7, dtype=np.float32)}
    with tf.Session() as sess:
        f = sess.make_callable(y, [x])
        first = [f(feed[x]) for _ in range(3)][-1]
        (c,) = f.spec.executable.exact.values()
        run, entries = c.run, dict(f.spec.executable._fast.entries)
        level, cell = llvmjit.info(run).level, run.__self__.layout.cell.value
        background.wait_idle()
        assert level == "quick" and c.level == "opt" and c.run is run
        assert llvmjit.info(run).level == "opt" and run.__self__.layout.cell.value != cell
        assert f.spec.executable._fast.entries == entries    # not invalidated
        np.testing.assert_array_equal(f(feed[x]), first)


_SPIN_IR = """\
define i32 @t_spin(ptr noalias %a) nounwind {
entry:
  %x = load ptr, ptr %a
  %p1 = getelementptr i64, ptr %x, i64 1
  store volatile i64 1, ptr %p1
  %p2 = getelementptr i64, ptr %x, i64 2
  %limit = load i64, ptr %p2
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %again]
  %flag = load volatile i64, ptr %x
  %seen = icmp ne i64 %flag, 0
  br i1 %seen, label %yes, label %again
again:
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %limit
  br i1 %more, label %loop, label %no
yes:
  ret i32 0
no:
  ret i32 1
}
"""


@pytest.mark.parametrize("size,free", [(pyentry.NOGIL_MIN, True), (8, False)])
def test_large_kernels_run_without_the_gil(size, free):
    """The kernel says it started (x[1]), then waits for x[0], which a Python thread sets once
    it sees x[1]: only possible while the kernel runs without the GIL."""
    L = pyentry.Layout("spin")
    i = L.arg("int64", 1)
    L.slots.append((0, i))
    L.errors.append("jitflow:0:never saw the flag")
    L.finish()
    fn = pyentry.build(L, _kernel(_SPIN_IR, "t_spin"), _no_fallback)
    x = np.zeros(size, np.int64)
    x[2] = 2 * 10 ** 9 if free else 2 * 10 ** 6

    def setter():
        while x[1] == 0:
            pass
        x[0] = 1
    t = threading.Thread(target=setter)
    t.start()
    try:
        if free:
            assert fn((x,), ()) == ()
        else:
            with pytest.raises(ValueError, match="never saw the flag"):
                fn((x,), ())
    finally:
        t.join()


# -- real graphs: the same results as the Python wrapper -------------------------------------
def _cases():
    x = tf.placeholder(tf.float32, [None], name="x")
    m = tf.placeholder(tf.float32, [None, None], name="m")
    img = tf.placeholder(tf.float32, [None, None, None, 3], name="img")
    i = tf.placeholder(tf.int32, [None], name="i")
    v = tf.Variable(np.arange(4, dtype=np.float32))
    xs = np.arange(9, dtype=np.float32) - 3
    ms = np.arange(12, dtype=np.float32).reshape(3, 4)
    ims = np.linspace(-1, 1, 105, dtype=np.float32).reshape(1, 7, 5, 3)
    return v, [
        ((x * 2.5) / (x + 1.25), {x: xs}),
        (tf.reshape(x[:8], [-1, 2]) + 1, {x: xs}),
        (tf.reshape(m, [2, -1]), {m: ms}),
        ([x[1:-1:2] * 2, x[::-2], x[-3] + 1], {x: xs}),
        (tf.strided_slice(m, [0, -1], [5, -5], [1, -1]), {m: ms}),
        ([tf.concat([x, x * 2], 0), tf.split(x, 3)[1] + 0], {x: xs}),
        ([tf.pad(m, [[1, 2], [0, 1]]), tf.tile(m, [2, 3])], {m: ms}),
        ([tf.nn.conv2d(img, tf.ones([3, 3, 3, 2]), [1, 2, 2, 1], "SAME"),
          tf.nn.conv2d(img, tf.ones([2, 2, 3, 2]), [1, 1, 1, 1], "VALID",
                       dilations=[1, 2, 1, 1]),
          tf.nn.max_pool(img, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")], {img: ims}),
        ([tf.shape(m), m * 2, tf.size(m), tf.reduce_sum(m)], {m: ms}),
        ([tf.identity(x), x + 1], {x: xs}),
        (tf.gather(x, i) * 3, {x: xs, i: np.array([2, 0, 8], np.int32)}),
        ([tf.assign_add(v, x[:4]), v + 1], {x: xs}),
        ([tf.cast(i, tf.float64), i * 2, tf.cast(i > 0, tf.bool)],
         {i: np.array([3, -1], np.int32)}),
    ]


def _run_all(poison: bool, native: bool, monkeypatch):
    monkeypatch.setenv("JITFLOW_NATIVE_ENTRY", "1" if native else "0")
    monkeypatch.setenv("JITFLOW_POISON", "1" if poison else "0")
    monkeypatch.setenv("JITFLOW_COMPILE", "sync")
    v, cases = _cases()
    out, kinds = [], set()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for fetches, feed in cases:
            f = sess.make_callable(fetches, list(feed))
            vals = list(feed.values())
            out.append([sess.run(fetches, feed) for _ in range(3)]
                       + [f(*vals) for _ in range(3)])
        for spec in sess._specs.values():
            for seg in spec.executable.kernels.values():
                for c in seg.compiled.values():
                    if getattr(c, "run", None) is not None:
                        kinds.add(pyentry.is_native(c.run))
    return out, kinds


def _same(a, b):
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    assert type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype
    assert np.asarray(a).shape == np.asarray(b).shape
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("poison", [False, True])
def test_graphs_give_the_python_wrappers_results(poison, monkeypatch):
    """Slices, reshapes, concatenation, padding, windows, shapes, copies, gathers, variables,
    casts: every result (bits, dtype, numpy scalar or array), warm and cold, by Session.run and
    make_callable, native entries against Python wrappers."""
    n0 = llvmjit.STATS["wrapper_calls"]
    tf.reset_default_graph()
    native, kn = _run_all(poison, True, monkeypatch)
    tf.reset_default_graph()
    wrapped, kw = _run_all(poison, False, monkeypatch)
    assert kn == {True} and kw == {False}
    assert llvmjit.STATS["wrapper_calls"] == n0
    _same(native, wrapped)


def test_the_warm_runner_hands_feeds_to_the_entry_directly():
    """Counted: warm runs of the seeds' graph call the entry's try variant once each, with the
    Python floats as fed; a feed it does not take gives None and the general way."""
    a = tf.placeholder(tf.float32, [], name="a")
    b = tf.placeholder(tf.float32, [], name="b")
    y = (a * b) / (a + b)
    with tf.Session() as sess:
        f = sess.make_callable(y, [a, b])
        for _ in range(3):
            assert f(2.0, 3.0) == np.float32(1.2)
        fast = f.spec.executable._fast
        fp, ct, vs = fast.last[0]
        seen = []

        def counting(ins, vs_):
            seen.append(ins)
            return fp(ins, vs_)
        fast.last[0] = (counting, ct, vs)
        for k in range(50):
            assert f(2.0, float(k)) == np.float32(2.0 * k / (2.0 + k))
        assert len(seen) == 50 and all(type(s[0]) is float for s in seen)
        got = f(np.float64(2.0), 3.0)      # numpy would convert it: the general path does
        assert type(got) is np.float32 and got == np.float32(1.2) and len(seen) == 51
        assert fp((np.float64(2.0), 3.0) + ct, vs) is None


# -- Session.run through the entry: errors, refusals, reference counts, swaps, threads -------
def _feed_errors(native: bool, monkeypatch) -> list:
    monkeypatch.setenv("JITFLOW_NATIVE_ENTRY", "1" if native else "0")
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    s = tf.placeholder(tf.float32, [], name="s")
    a = tf.placeholder(tf.float32, [None], name="a")
    b = tf.placeholder(tf.float32, [None], name="b")
    y, z = x * 2.0 + s, a + b
    good, one = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    bad_feeds = [
        (y, {x: np.ones((2, 4), np.float32), s: 1.0}),
        (y, {x: np.ones(3, np.float32), s: 1.0}),
        (y, {x: np.ones((2, 3, 1), np.float32), s: 1.0}),
        (y, {x: np.array([["a", "b", "c"]]), s: 1.0}),
        (y, {x: "abc", s: 1.0}),
        (y, {x: good, s: np.ones(2, np.float32)}),
        (y, {x: good, s: "q"}),
        (z, {a: one, b: np.ones(4, np.float32)}),        # the kernel's dim check
    ]
    out = []
    with tf.Session() as sess:
        for _ in range(3):      # warm: the runners hold the entry
            sess.run(y, {x: good, s: 1.0})
            sess.run(z, {a: one, b: one})
        fasts = [spec.executable._fast for spec in sess._specs.values()]
        assert all((f.last[0] is not None) == native for f in fasts)
        calls = {id(f): sess.make_callable(f, list(feed)) for f, feed in bad_feeds[::7]}
        for f, feed in bad_feeds[::7]:
            for _ in range(3):
                calls[id(f)](*[good if v is x else one if v is a or v is b else 1.0 for v in feed])
        for fetch, feed in bad_feeds:
            with pytest.raises(Exception) as e:
                sess.run(fetch, feed)
            out.append((type(e.value), str(e.value)))
            with pytest.raises(Exception) as e:      # the same by a callable
                calls[id(fetch)](*feed.values())
            assert (type(e.value), str(e.value)) == out[-1]
    return out


def test_bad_feeds_give_the_python_paths_errors_with_the_entry(monkeypatch):
    """Wrong shapes, ranks, dtypes and a failing dim check, warm, by Session.run and by
    make_callable: the same exception and message with the native entry as without, each
    naming the tensor and both shapes or the dtype."""
    native = _feed_errors(True, monkeypatch)
    wrapped = _feed_errors(False, monkeypatch)
    assert native == wrapped
    kinds = [k for k, _ in native]
    assert kinds[:7] == [ValueError] * 7 and issubclass(kinds[7], tf.errors.InvalidArgumentError)
    msgs = [m for _, m in native]
    assert "shape (2, 4)" in msgs[0] and "'x:0'" in msgs[0] and "(?, 3)" in msgs[0]
    assert "shape (3,)" in msgs[1] and "shape (2, 3, 1)" in msgs[2]
    assert "'x:0' of dtype float32" in msgs[3] and "'abc'" in msgs[4]
    assert "shape (2,)" in msgs[5] and "'s:0'" in msgs[5] and "'s:0' of dtype float32" in msgs[6]
    assert "(3,)" in msgs[7] and "(4,)" in msgs[7]


def _counting_entry(fast):
    """Wrap the warm runner's last entry: the calls it sees and what each returned."""
    fp, *rest = fast.last[0]
    seen = []

    def counting(ins, vs):
        out = fp(ins, vs)
        seen.append(out is not None)
        return out
    fast.last[0] = (counting, *rest)
    return seen


def test_feeds_the_entry_does_not_take_go_the_general_way_with_the_same_results():
    """Non-contiguous, Fortran-order, read-only, float64, int, list, numpy-scalar and 0-d array
    feeds: the entry refuses (None) those it does not take exactly, the general path converts
    them, and the results are the interpreter's."""
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    s = tf.placeholder(tf.float32, [], name="s")
    y = x * 2.0 + s
    base = np.arange(24, dtype=np.float32).reshape(4, 6) / 7
    ro = base[:2, :3].copy()
    ro.flags.writeable = False
    cases = [   # (x, s, the entry takes it)
        (base[:2, :3].copy(), 0.5, True),
        (base[:, ::2][:, :3], 0.5, False),                  # strided
        (np.asfortranarray(base[:3, :3]), 0.5, False),      # Fortran order
        (ro, 0.5, False),                                  # read-only
        (base[:2, :3].astype(np.float64), 0.5, False),      # float64 converted
        (base[:2, :3].tolist(), 0.5, False),                # a list
        (base[:2, :3].copy(), np.float64(0.25), False),     # numpy converts it: general
        (base[:2, :3].copy(), np.float32(0.25), True),
        (base[:2, :3].copy(), 3, True),
        (base[:2, :3].copy(), np.array(0.5, np.float32), True),
        (base[:2, :3].copy(), np.array(0.5), False),
        (base[:2, :3].copy(), True, False),
    ]
    with tf.Session() as sess:
        for _ in range(3):
            sess.run(y, {x: cases[0][0], s: 0.5})
        (spec,) = sess._specs.values()
        for xv, sv, taken in cases:
            seen = _counting_entry(spec.executable._fast)    # (a general run sets it anew)
            got = sess.run(y, {x: xv, s: sv})
            want = sess_reference(y, {x: xv, s: sv})
            assert type(got) is np.ndarray and got.dtype == np.float32
            np.testing.assert_array_equal(got, want)
            assert seen == [taken], (xv, sv)


def test_warm_runs_leave_reference_counts_flat():
    """100,000 warm runs through the entry (array and Python float feeds, an array and a
    numpy scalar result) and 2,000 refused or failing ones: the feeds', the feed dict's and
    the dtype's reference counts do not move, and every result is referenced only by its
    caller."""
    import weakref
    x = tf.placeholder(tf.float32, [None], name="x")
    s = tf.placeholder(tf.float32, [], name="s")
    y = x * 2.0 + 1.0
    t = tf.reduce_sum(x * s)
    arr = np.arange(10, dtype=np.float32)
    sv = 1.5
    dt = np.dtype(np.float32)
    with tf.Session() as sess:
        feed, feed2 = {x: arr}, {x: arr, s: sv}
        for _ in range(3):
            r = sess.run(y, feed)     # (r holds a reference to the dtype)
            q = sess.run(t, feed2)
        gc.collect()    # (garbage of earlier tests holds dtypes too)
        before = [sys.getrefcount(o) for o in (arr, sv, feed, feed2, dt, x, s)]
        n0 = llvmjit.STATS["wrapper_calls"]
        for _ in range(100_000):
            r = sess.run(y, feed)
            q = sess.run(t, feed2)
        gc.collect()
        assert [sys.getrefcount(o) for o in (arr, sv, feed, feed2, dt, x, s)] == before
        assert all(sp.executable._fast.last[0] is not None for sp in sess._specs.values())
        bad = {x: np.ones((2, 2), np.float32)}
        strided = {x: np.arange(20, dtype=np.float32)[::2]}
        objs = (bad[x], strided[x], bad, strided, dt, x)
        for n in (10, 1_000):    # (the first runs of a path may cache what they make)
            gc.collect()    # (the exceptions' tracebacks are cycles)
            counts = [sys.getrefcount(o) for o in objs]
            for _ in range(n):
                with pytest.raises(ValueError):
                    sess.run(y, bad)
                sess.run(y, strided)
        gc.collect()
        assert [sys.getrefcount(o) for o in objs] == counts
        assert llvmjit.STATS["wrapper_calls"] == n0
        assert sys.getrefcount(r) == 2 and sys.getrefcount(q) == 2
        assert r.base is None and type(q) is np.float32
        np.testing.assert_array_equal(r, arr * 2 + 1)
        assert q == np.float32((arr * np.float32(1.5)).sum(dtype=np.float32)) or \
            q == sess_reference(t, feed2)
        ref = weakref.ref(r)
        del r
        assert ref() is None


def test_two_threads_running_one_session_get_their_own_results():
    """Two threads run the same session's graph through the entry with feeds of several
    sizes (size-1 and large, no-GIL kernels included), interleaved: every result is the one
    a single thread got."""
    x = tf.placeholder(tf.float32, [None], name="x")
    s = tf.placeholder(tf.float32, [], name="s")
    y = tf.tanh(x * s + 1.0)
    m = tf.reduce_max(y)
    rng = np.random.default_rng(5)
    feeds = [{x: rng.standard_normal(n).astype(np.float32), s: float(k)}
             for k, n in enumerate([1, 10, 7, 2 * pyentry.NOGIL_MIN, 3, 1])]
    with tf.Session() as sess:
        want = [[sess.run([y, m], f) for _ in range(3)][-1] for f in feeds]
        errors: list = []
        start = threading.Barrier(2)

        def work(order):
            try:
                start.wait()
                for it in range(1500):
                    k = order[it % len(order)]
                    got = sess.run([y, m], feeds[k])
                    if not (got[0].tobytes() == want[k][0].tobytes() and got[1] == want[k][1]
                            and type(got[1]) is np.float32):
                        errors.append((k, it))
            except BaseException as e:   # pragma: no cover  (reported below)
                errors.append(e)
        ts = [threading.Thread(target=work, args=(o,)) for o in ([0, 1, 3, 2], [4, 5, 1, 3])]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert errors == []
        fasts = [spec.executable._fast for spec in sess._specs.values()]
        assert any(f.last[0] is not None for f in fasts)


def test_threads_keep_running_while_optimized_code_is_swapped_in(monkeypatch):
    """Default mode: two threads run a kernel too large to optimize at once through the
    entry while the compiler thread swaps its optimized code in; every result has the quick
    code's bits, and the runs end on optimized code without a new entry."""
    monkeypatch.setenv("JITFLOW_COMPILE", "auto")
    monkeypatch.setenv("JITFLOW_CACHE", "0")
    x = tf.placeholder(tf.float32, [None], name="x")
    y = x
    for k in range(24):
        y = tf.tanh(y * (1.0 + k / 256.0)) + 0.03125 * (k % 5)
    feed = {x: np.linspace(-1, 1, 9, dtype=np.float32)}
    with tf.Session() as sess:
        first = sess.run(y, feed)
        (spec,) = sess._specs.values()
        (c,) = spec.executable.exact.values()
        run = c.run
        assert pyentry.is_native(run) and llvmjit.info(run).level == "quick"
        levels, errors = set(), []
        stop = threading.Event()

        def work():
            try:
                n, after = 0, 0
                while after < 200:     # (and 200 runs after the compiler thread is idle)
                    after += stop.is_set()
                    levels.add(llvmjit.info(run).level)
                    if sess.run(y, feed).tobytes() != first.tobytes():
                        errors.append(n)
                    n += 1
            except BaseException as e:   # pragma: no cover  (reported below)
                errors.append(e)
        ts = [threading.Thread(target=work) for _ in range(2)]
        for t in ts:
            t.start()
        try:
            assert background.wait_idle(300)
        finally:
            stop.set()
            for t in ts:
                t.join()
        assert errors == []
        assert "opt" in levels
        assert c.level == "opt" and c.run is run and llvmjit.info(run).level == "opt"
        assert spec.executable._fast.last[0] is not None
        np.testing.assert_array_equal(sess.run(y, feed), first)
