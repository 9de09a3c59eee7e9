"""Kernel caching: in memory across runs and sessions, on disk across processes; new sizes of
`None` dimensions never recompile; bad cache entries and unusable directories are handled."""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitflow as tf
from jitflow.compiler import cache
from jitflow.compiler.cpu import STATS


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
        assert len(spec.executable.steps[0].compiled) == 1
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
    assert err.count("compile") == 2


def test_disk_cache_is_reused_by_a_new_process(tmp_path):
    script = textwrap.dedent("""
        import numpy as np
        import jitflow as tf
        from jitflow.compiler.cpu import STATS
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
