"""Numba kernel caching (JITFLOW_COMPILE=numba): in memory across runs and sessions, on disk
across processes; new sizes of `None` dimensions never recompile; bad cache entries and
unusable directories are handled. (The fast path's machine-code cache: test_llvmjit.py.)"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitflow as tf
from jitflow.backends.numba_cpu import cache
from jitflow.backends.numba_cpu.kernels import STATS


@pytest.fixture(autouse=True)
def numba_mode(monkeypatch):
    monkeypatch.setenv("JITFLOW_COMPILE", "numba")


def _graph(k: float = 1.5):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    return x, tf.reduce_sum(tf.tanh(x * k) + 1.0, axis=1)


def test_same_plan_compiles_once_even_in_a_new_session():
    x, y = _graph(2.25)
    xv = np.ones((2, 3), np.float32)
    with tf.Session() as sess:
        sess.run(y, {x: xv})
    before = STATS["compiles"]
    hits = STATS["memory_hits"]
    with tf.Session() as sess:
        out = sess.run(y, {x: xv})
    tf.reset_default_graph()
    x2, y2 = _graph(2.25)   # same structure, other op identities
    with tf.Session() as sess:
        out2 = sess.run(y2, {x2: xv})
    assert STATS["compiles"] == before
    assert STATS["memory_hits"] >= hits + 2
    np.testing.assert_array_equal(out, out2)


def test_new_batch_size_does_not_recompile():
    x, y = _graph(3.5)
    with tf.Session() as sess:
        sess.run(y, {x: np.ones((2, 3), np.float32)})
        before = STATS["compiles"]
        for n in (5, 7, 64):
            out = sess.run(y, {x: np.ones((n, 3), np.float32)})
            assert out.shape == (n,)
        spec = next(iter(sess._specs.values()))
        assert len(spec.executable.kernels[spec.executable.steps[0]].compiled) == 1
    assert STATS["compiles"] == before


def test_debug_level_1_reports_each_compile_with_its_reason(monkeypatch, capsys):
    monkeypatch.setenv("JITFLOW_DEBUG", "1")
    x, y = _graph(4.75)
    with tf.Session() as sess:
        sess.run(y, {x: np.ones((2, 3), np.float32)})
        sess.run(y, {x: np.ones((4, 3), np.float32)})
        sess.run(y, {x: np.ones((1, 3), np.float32)})
    err = capsys.readouterr().err
    assert "new fetch set" in err
    assert "x:0 changed which dims are 1" in err
    assert err.count("lowered 6 ops") == 2     # (4, 3) has the class of (2, 3)
    assert err.count("Numba kernel") == 2


def test_disk_cache_is_reused_by_a_new_process(tmp_path):
    script = textwrap.dedent("""
        import numpy as np
        import jitflow as tf
        from jitflow.backends.numba_cpu.kernels import STATS
        x = tf.placeholder(tf.float32, [None], name="x")
        y = tf.reduce_mean(tf.square(x * 0.75 - 2.0))
        with tf.Session() as sess:
            v = sess.run(y, {x: np.arange(4, dtype=np.float32)})
        print(STATS["compiles"], STATS["numba_cache_hits"], repr(float(v)))
    """)
    env = dict(os.environ, JITFLOW_CACHE_DIR=str(tmp_path), JITFLOW_BACKEND="numba")
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True).stdout.split() for _ in range(2)]
    assert runs[0][0] == "1" and runs[0][1] == "0"
    assert runs[1][0] == "0" and runs[1][1] == "1"
    assert runs[0][2] == runs[1][2]
    assert len(glob.glob(str(tmp_path / "jf_*.py"))) == 1


def test_corrupt_numba_cache_files_are_recompiled_in_a_new_process(tmp_path):
    script = textwrap.dedent("""
        import numpy as np
        import jitflow as tf
        x = tf.placeholder(tf.float32, [None], name="x")
        with tf.Session() as sess:
            print(repr(float(sess.run(tf.reduce_sum(x * 1.625), {x: np.ones(4, np.float32)}))))
    """)
    env = dict(os.environ, JITFLOW_CACHE_DIR=str(tmp_path), JITFLOW_BACKEND="numba")

    def run():
        return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, check=True).stdout.strip()

    assert run() == "6.5"
    files = glob.glob(str(tmp_path / "__pycache__" / "*"))
    assert files
    for f in files:
        with open(f, "w") as fh:
            fh.write("garbage")
    assert run() == "6.5"


def test_corrupt_cache_entry_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(tmp_path))
    x, y = _graph(5.125)
    xv = np.ones((2, 3), np.float32)
    with tf.Session() as sess:
        want = sess.run(y, {x: xv})
    (path,) = glob.glob(str(tmp_path / "jf_*.py"))
    with open(path, "w") as f:
        f.write("this is not python (")
    cache.clear_memory()
    with tf.Session() as sess:
        got = sess.run(y, {x: xv})
    np.testing.assert_array_equal(got, want)
    with open(path) as f:
        assert "def kernel(ins, vs):" in f.read()


def test_unusable_cache_directory_falls_back_to_memory_with_a_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(blocker / "sub"))
    cache._WARNED.clear()
    x, y = _graph(6.5)
    with tf.Session() as sess:
        with pytest.warns(RuntimeWarning, match="not usable"):
            out = sess.run(y, {x: np.ones((2, 3), np.float32)})
    np.testing.assert_allclose(out, np.full(2, 3 * (np.tanh(6.5) + 1)), rtol=1e-5)


def test_cache_can_be_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("JITFLOW_CACHE", "0")
    x, y = _graph(7.25)
    with tf.Session() as sess:
        out = sess.run(y, {x: np.ones((1, 3), np.float32)})
    assert out.shape == (1,)
    assert not glob.glob(str(tmp_path / "*.py"))


def test_import_jitflow_does_not_import_numba():
    code = "import sys, jitflow; s = jitflow.Session(); print('numba' in sys.modules, s.backend)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ, JITFLOW_BACKEND="")).stdout.split()
    assert out == ["False", "numba"]


# -- a private disk cache -------------------------------------------------------------------------
def _run_graph(k: float, reset: bool = True):
    x, y = _graph(k)
    with tf.Session() as sess:
        out = sess.run(y, {x: np.ones((2, 3), np.float32)})
    if reset:
        tf.reset_default_graph()
    return out


def _want(k: float):
    return np.full(2, 3 * (np.tanh(np.float32(k)) + 1), np.float32)


def _refusals(record) -> list:
    return [w for w in record if issubclass(w.category, RuntimeWarning)
            and "not safe to load compiled code" in str(w.message)]


def _run_recording(*ks):
    import warnings
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        outs = [_run_graph(k) for k in ks]
    return outs, record


def _mode(path) -> int:
    return os.stat(path).st_mode & 0o777


def test_world_writable_cache_dir_is_refused_once_and_kernels_run_in_memory(tmp_path,
                                                                            monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(shared))
    outs, record = _run_recording(8.125, 8.25)
    (w,) = _refusals(record)
    assert str(shared) in str(w.message) and "writable by group and others" in str(w.message)
    for k, out in zip((8.125, 8.25), outs):
        np.testing.assert_allclose(out, _want(k), rtol=1e-5)
    assert os.listdir(shared) == []   # nothing written, nothing read


def test_cache_dir_of_another_user_is_refused(tmp_path, monkeypatch):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chmod(theirs, 0o755)
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(theirs))
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 4242)   # the directory is now someone else's
    outs, record = _run_recording(8.375)
    (w,) = _refusals(record)
    assert f"owned by uid {me}, not by this user (uid {me + 4242})" in str(w.message)
    np.testing.assert_allclose(outs[0], _want(8.375), rtol=1e-5)
    assert not glob.glob(str(theirs / "*.py"))


def test_writable_pycache_inside_a_private_dir_is_refused(tmp_path, monkeypatch):
    d = tmp_path / "c"
    (d / "__pycache__").mkdir(parents=True)
    os.chmod(d, 0o700)
    os.chmod(d / "__pycache__", 0o770)
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(d))
    outs, record = _run_recording(8.5)
    (w,) = _refusals(record)
    assert "__pycache__ is writable by group" in str(w.message)
    np.testing.assert_allclose(outs[0], _want(8.5), rtol=1e-5)


def test_fresh_cache_dir_is_private_whatever_the_umask(tmp_path, monkeypatch):
    d = tmp_path / "new" / "jitflow"
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(d))
    old = os.umask(0)
    try:
        outs, record = _run_recording(8.625)
    finally:
        os.umask(old)
    assert not _refusals(record)
    np.testing.assert_allclose(outs[0], _want(8.625), rtol=1e-5)
    assert _mode(d) == 0o700 and _mode(d / "__pycache__") == 0o700
    modules = glob.glob(str(d / "jf_*.py"))
    numba_files = glob.glob(str(d / "__pycache__" / "*.nb[ic]"))
    assert modules and {p[-4:] for p in numba_files} == {".nbi", ".nbc"}
    assert {_mode(p) for p in modules + numba_files} == {0o600}
    assert not glob.glob(str(d / "__pycache__" / "*.pyc"))   # Python's bytecode: never written


def test_existing_0755_cache_dir_of_the_user_is_used(tmp_path, monkeypatch):
    d = tmp_path / "old"
    (d / "__pycache__").mkdir(parents=True)
    os.chmod(d, 0o755)
    os.chmod(d / "__pycache__", 0o755)
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(d))
    outs, record = _run_recording(8.75)
    assert not _refusals(record)
    assert glob.glob(str(d / "jf_*.py")) and glob.glob(str(d / "__pycache__" / "*.nbi"))


class _Payload:
    """Unpickling it creates a marker file (stands for any command)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant(source_dir, target_dir, marker, mode):
    """Copy the generated modules of `source_dir` into `target_dir`, with a malicious pickle
    (file mode `mode`) under the name of every Numba cache file `source_dir` has."""
    import pickle
    import shutil
    (target_dir / "__pycache__").mkdir(parents=True, exist_ok=True)
    for p in glob.glob(str(source_dir / "jf_*.py")):
        shutil.copy(p, target_dir)
    planted = []
    for p in glob.glob(str(source_dir / "__pycache__" / "*.nb[ic]")):
        dst = target_dir / "__pycache__" / os.path.basename(p)
        with open(dst, "wb") as f:
            pickle.dump(_Payload(marker), f)
        os.chmod(dst, mode)
        planted.append(dst)
    assert any(str(p).endswith(".nbi") for p in planted)


def test_planted_numba_index_in_a_refused_dir_is_never_unpickled(tmp_path, monkeypatch):
    private, shared = tmp_path / "mine", tmp_path / "shared"
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(private))
    _run_graph(8.875)
    marker = tmp_path / "unpickled"
    _plant(private, shared, marker, 0o644)
    os.chmod(shared, 0o777)
    os.chmod(shared / "__pycache__", 0o777)
    cache.clear_memory()
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(shared))
    outs, record = _run_recording(8.875)
    assert not marker.exists(), "a planted Numba cache file was unpickled"
    assert len(_refusals(record)) == 1
    np.testing.assert_allclose(outs[0], _want(8.875), rtol=1e-5)


def test_planted_numba_files_others_can_write_are_skipped_in_a_private_dir(tmp_path,
                                                                          monkeypatch):
    """A file that group or others can write was not written by jitflow (it writes 0600):
    Numba does not read it, even in a directory of the user's own."""
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(first))
    _run_graph(9.125)
    marker = tmp_path / "unpickled"
    _plant(first, second, marker, 0o666)
    os.chmod(second, 0o700)
    os.chmod(second / "__pycache__", 0o700)
    cache.clear_memory()
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(second))
    outs, record = _run_recording(9.125)
    assert not marker.exists(), "a planted Numba cache file was unpickled"
    assert not _refusals(record)
    assert any("ignoring Numba cache file" in str(w.message) for w in record)
    np.testing.assert_allclose(outs[0], _want(9.125), rtol=1e-5)


# -- the in-memory cache is bounded ---------------------------------------------------------------
def _run_and_track(k: float, refs: list):
    """Run graph `k`; note a weak reference to the kernel it compiled (the newest entry)."""
    import weakref
    before = set(cache._MEMORY)
    out = _run_graph(k)
    new = [key for key in cache._MEMORY if key not in before]
    for key in new:
        refs.append((key, weakref.ref(cache._MEMORY[key].kernel)))
    return out


def test_memory_cache_keeps_at_most_the_configured_number_of_kernels(monkeypatch):
    import gc
    monkeypatch.setenv("JITFLOW_CACHE", "0")
    monkeypatch.setenv("JITFLOW_MEMORY_CACHE_ENTRIES", "4")
    cache.clear_memory()
    refs: list = []
    ks = [10.0 + i / 16 for i in range(14)]
    evictions = STATS["evictions"]
    for k in ks:
        np.testing.assert_allclose(_run_and_track(k, refs), _want(k), rtol=1e-5)
        assert len(cache._MEMORY) <= 4
    assert len(refs) == 14 and STATS["evictions"] - evictions == 10
    gc.collect()
    alive = [key for key, r in refs if r() is not None]
    assert set(alive) <= set(cache._MEMORY), "evicted kernels were not freed"
    # an evicted kernel is built again, and gives the same answer
    built = STATS["modules_built"]
    np.testing.assert_allclose(_run_graph(ks[0]), _want(ks[0]), rtol=1e-5)
    assert STATS["modules_built"] == built + 1 and len(cache._MEMORY) == 4


def test_memory_cache_byte_budget_keeps_only_the_newest(monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE", "0")
    monkeypatch.setenv("JITFLOW_MEMORY_CACHE_MB", "0.001")
    cache.clear_memory()
    for k in (11.0, 11.125, 11.25):
        np.testing.assert_allclose(_run_graph(k), _want(k), rtol=1e-5)
        assert len(cache._MEMORY) == 1


def test_evicted_disk_kernels_leave_sys_modules(tmp_path, monkeypatch):
    import gc
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("JITFLOW_MEMORY_CACHE_ENTRIES", "2")
    cache.clear_memory()
    refs: list = []
    for i in range(5):
        _run_and_track(12.0 + i / 8, refs)
    gc.collect()
    names = {f"jitflow_kernels.jf_{key}" for key, _ in refs}
    assert len(names) == 5 and len(cache._MEMORY) == 2
    assert names & set(sys.modules) == {f"jitflow_kernels.jf_{k}" for k in cache._MEMORY}


def test_a_kernel_in_use_survives_eviction(monkeypatch):
    """Eviction drops the cache's reference only: an open session keeps running its kernel."""
    monkeypatch.setenv("JITFLOW_CACHE", "0")
    monkeypatch.setenv("JITFLOW_MEMORY_CACHE_ENTRIES", "1")
    cache.clear_memory()
    x, y = _graph(13.0)
    xv = np.ones((2, 3), np.float32)
    with tf.Session() as sess:
        first = sess.run(y, {x: xv})
        g = tf.get_default_graph()
        for k in (13.125, 13.25):
            with tf.Graph().as_default():
                _run_graph(k, reset=False)
        assert tf.get_default_graph() is g
        built = STATS["modules_built"]
        np.testing.assert_array_equal(sess.run(y, {x: xv * 1}), first)
        assert STATS["modules_built"] == built


def test_cache_key_depends_on_the_llvm_optimisation_level(monkeypatch):
    import numba
    src = "def f(x):\n    return x + 1\n"
    here = cache.source_hash(src)
    assert cache.source_hash(src) == here
    monkeypatch.setattr(numba.config, "OPT", 0)
    assert cache.source_hash(src) != here   # a kernel built at -O0 is never loaded at -O3
