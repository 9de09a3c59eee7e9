"""The fast path's machine code (llvmjit.py): compiled per level, shared by identical kernels,
kept in the kernel cache's private `objects/` folder, loaded by later processes (which then
compile nothing), a damaged entry rebuilt and never trusted, a folder others may write
refused."""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitflow as tf
from jitflow.backends.numba_cpu import cache, llvmjit

SCRIPT = textwrap.dedent("""
    import numpy as np
    import jitflow as tf
    from jitflow.backends.numba_cpu import background, llvmjit
    x = tf.placeholder(tf.float32, [None], name="x")
    y = x
    for k in range(24):
        y = tf.tanh(y * (1.0 + k / 64.0)) + 0.125
    with tf.Session() as sess:
        v = sess.run(y, {x: np.linspace(-1, 1, 9, dtype=np.float32)})
    background.wait_idle()
    print(llvmjit.STATS.get("objects_compiled", 0), llvmjit.STATS.get("objects_loaded", 0),
          v.tobytes().hex())
""")


def _run(cache_dir, mode="auto"):
    env = dict(os.environ, JITFLOW_CACHE_DIR=str(cache_dir), JITFLOW_COMPILE=mode)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_a_second_process_loads_the_machine_code_and_compiles_nothing(tmp_path):
    first = _run(tmp_path)
    second = _run(tmp_path)
    assert int(first[0]) >= 1 and first[1] == "0"
    # the optimized code is on disk: the second process takes it at once, no quick code
    assert second[0] == "0" and second[1] == "1"
    assert first[2] == second[2]
    files = glob.glob(str(tmp_path / "objects" / "*.o"))
    assert files and all(os.stat(f).st_mode & 0o077 == 0 for f in files)


def test_a_damaged_object_is_rebuilt_not_loaded(tmp_path):
    want = _run(tmp_path, "sync")
    (path,) = glob.glob(str(tmp_path / "objects" / "*.o"))
    data = bytearray(open(path, "rb").read())
    data[-10] ^= 0xFF   # a flipped byte in the machine code: its sha256 no longer matches
    with open(path, "wb") as f:
        f.write(bytes(data))
    again = _run(tmp_path, "sync")
    assert again[0] == "1" and again[1] == "0" and again[2] == want[2]
    assert _run(tmp_path, "sync")[:2] == ["0", "1"]   # the rebuilt entry is good


def test_objects_others_may_write_are_not_loaded(tmp_path):
    _run(tmp_path, "sync")
    (path,) = glob.glob(str(tmp_path / "objects" / "*.o"))
    os.chmod(path, 0o666)
    assert _run(tmp_path, "sync")[:2] == ["1", "0"]


def test_a_cache_folder_others_may_write_is_refused(tmp_path, monkeypatch):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(d))
    monkeypatch.setenv("JITFLOW_COMPILE", "sync")
    x = tf.placeholder(tf.float32, [None])
    with pytest.warns(RuntimeWarning, match="not safe"):
        with tf.Session() as sess:
            got = sess.run(tf.tanh(x * 0.3125) - 0.5, {x: np.ones(3, np.float32)})
    np.testing.assert_allclose(got, np.tanh(0.3125) - 0.5, rtol=1e-6)
    assert not os.path.exists(d / "objects")


def test_blobs_round_trip_and_detect_damage(tmp_path, monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(tmp_path))
    d = cache.blob_dir("objects")
    assert d is not None and os.stat(d).st_mode & 0o077 == 0
    cache.write_blob(d, "k.o", b"machine code")
    assert cache.read_blob(d, "k.o") == b"machine code"
    with open(os.path.join(d, "k.o"), "r+b") as f:
        f.seek(-1, os.SEEK_END)
        f.write(b"X")
    assert cache.read_blob(d, "k.o") is None and not os.path.exists(os.path.join(d, "k.o"))
    assert cache.read_blob(d, "missing.o") is None
    monkeypatch.setenv("JITFLOW_CACHE", "0")
    assert cache.blob_dir("objects") is None


def test_identical_kernels_share_code_and_levels_do_not(monkeypatch):
    monkeypatch.setenv("JITFLOW_CACHE", "0")
    x = tf.placeholder(tf.float32, [None])
    y = tf.sigmoid(x * 0.771) - 0.229
    from jitflow.compiler import loopgen
    fns = {}
    for mode in ("quick", "sync"):
        monkeypatch.setenv("JITFLOW_COMPILE", mode)
        for _ in range(2):
            with tf.Session() as sess:
                sess.run(y, {x: np.ones(3, np.float32)})
                ex = next(iter(sess._specs.values())).executable
                (c,) = ex.kernels[ex.steps[0]].compiled.values()
                fns.setdefault(mode, set()).add(id(c.run))
                lk = c.lk
    assert len(fns["quick"]) == 1 and len(fns["sync"]) == 1 and fns["quick"] != fns["sync"]
    assert llvmjit.info(llvmjit.build(loopgen.lower_kernel(c.kernel), "opt")).level == "opt"
    assert lk is not None
