"""Exported functions: round trips in this process and in a process without jitflow,
training steps, integrity checks and feed-signature errors."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import jitflow as tf
from jitflow.export import ExportError, read_manifest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _inference_graph():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2) / 10, name="w")
    bias = tf.constant(np.linspace(-1, 1, 20, dtype=np.float32)[:2], name="bias")
    h = tf.matmul(x, w)
    y = tf.tanh(h + bias) * tf.exp(-tf.square(h))
    return x, {"y": y, "stats": (tf.reduce_sum(y), [tf.reduce_max(y, axis=1)])}


def _training_graph():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    w = tf.Variable(tf.zeros([2, 1]), name="w")
    b = tf.Variable(0.25, name="b")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y), name="loss")
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
    return x, y, loss, train


def _data(n=16, seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((n, 2)).astype(np.float32)
    ys = (xs @ np.array([[1.5], [-2.0]], np.float32) + 0.5).astype(np.float32)
    return xs, ys


def _clean_python(script: str, folder: str, *args) -> subprocess.CompletedProcess:
    """Run `script` in a fresh interpreter that can import numpy and numba but not jitflow."""
    keep = [p for p in sys.path if p and os.path.abspath(p) not in (REPO,
                                                                    os.path.join(REPO, "tests"))]
    prelude = (f"import sys; sys.path[:] = {[folder] + keep!r}\n"
               "import importlib.util\n"
               "assert importlib.util.find_spec('jitflow') is None, 'jitflow is importable'\n")
    return subprocess.run([sys.executable, "-S", "-c", prelude + script, *args],
                          capture_output=True, text=True, timeout=300, cwd=folder)


def test_inference_round_trip_in_process(tmp_path, backend):
    x, fetches = _inference_graph()
    xs = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(fetches, {x: xs})
        path = tf.export(sess, fetches, [x], str(tmp_path / "f"), name="infer")
    f = tf.load(path)
    got = f(xs)
    assert got.keys() == want.keys() and isinstance(got["stats"], tuple)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    assert type(got["stats"][0]) is type(want["stats"][0]) is np.float32
    np.testing.assert_allclose(got["stats"][0], want["stats"][0], rtol=1e-6)
    np.testing.assert_allclose(got["stats"][1][0], want["stats"][1][0], rtol=1e-6)
    assert f(xs[:2])["y"].shape == (2, 2)  # a None dim accepts any size
    assert f(xs.tolist())["y"].shape == (5, 2)  # lists convert to the feed's dtype
    m = read_manifest(path)
    assert m["feeds"] == [{"name": "x:0", "dtype": "float32", "shape": [None, 3]}]
    assert m["updates"] == [] and m["module"] == "infer.py"
    assert set(m["files"]) == {"infer.py", "state.npz"}
    assert m["versions"]["numba"] and m["versions"]["jitflow"] == tf.__version__


def test_module_is_readable_and_imports_only_numpy_and_numba(tmp_path):
    x, fetches = _inference_graph()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.export(sess, fetches, [x], str(tmp_path), name="infer")
    src = (tmp_path / "infer.py").read_text()
    imports = {line.split()[1].split(".")[0] for line in src.splitlines()
               if line.startswith(("import ", "from "))}
    # llvmlite is Numba's own dependency: numpy and numba still suffice
    assert imports <= {"math", "numba", "numpy", "llvmlite", "ctypes", "hashlib", "io", "json",
                       "linecache", "os", "sys", "tempfile", "threading", "types"}
    assert "@numba.njit(cache=False" in src and "@numba.njit(cache=True" not in src
    assert "# MatMul" in src and "# Tanh" in src
    assert "import sys; sys.path.insert(0" in src and "infer.load()" in src


_INFER_SCRIPT = r'''
import numpy as np
import infer
f = infer.load()
xs = np.load(sys.argv[1])
out = f(xs)
np.savez(sys.argv[2], y=out["y"], s=out["stats"][0], m=out["stats"][1][0])
print(repr(f))
'''


def test_inference_runs_where_jitflow_is_not_installed(tmp_path):
    x, fetches = _inference_graph()
    xs = np.random.default_rng(2).standard_normal((7, 3)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(fetches, {x: xs})
        folder = tf.export(sess, fetches, [x], str(tmp_path / "exp"), name="infer")
    np.save(tmp_path / "xs.npy", xs)
    proc = _clean_python(_INFER_SCRIPT, folder, str(tmp_path / "xs.npy"),
                         str(tmp_path / "out.npz"))
    assert proc.returncode == 0, proc.stderr
    assert "infer(x:0: float32[?,3])" in proc.stdout
    got = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    np.testing.assert_allclose(got["s"], want["stats"][0], rtol=1e-6)
    np.testing.assert_allclose(got["m"], want["stats"][1][0], rtol=1e-6)


_TRAIN_SCRIPT = r'''
import json
import numpy as np
import step
f = step.load()
data = np.load(sys.argv[1])
losses = [float(f(data["x"], data["y"])["loss"]) for _ in range(int(sys.argv[2]))]
f.save_state()
print(json.dumps(losses))
'''


def test_training_steps_follow_the_session_trajectory_without_jitflow(tmp_path, backend):
    x, y, loss, train = _training_graph()
    xs, ys = _data()
    n = 6
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        folder = tf.export(sess, {"loss": loss, "train": train}, [x, y],
                           str(tmp_path / "exp"), name="step")
        want = [float(sess.run({"loss": loss, "train": train}, {x: xs, y: ys})["loss"])
                for _ in range(2 * n)]
        final = sess.run({"w": "w:0", "b": "b:0"})
    assert read_manifest(folder)["updates"] == ["w", "b"]
    np.savez(tmp_path / "data.npz", x=xs, y=ys)
    # two processes, each resuming from the state the previous one saved
    got = []
    for _ in range(2):
        proc = _clean_python(_TRAIN_SCRIPT, folder, str(tmp_path / "data.npz"), str(n))
        assert proc.returncode == 0, proc.stderr
        got += json.loads(proc.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(got, want, rtol=1e-5)
    state = tf.load(folder).state  # hashes still match after save_state
    np.testing.assert_allclose(state["w"], final["w"], rtol=1e-5)
    np.testing.assert_allclose(state["b"], final["b"], rtol=1e-5)
    assert state["b"].shape == ()


def test_in_process_training_updates_state_and_saves_atomically(tmp_path):
    x, y, loss, train = _training_graph()
    xs, ys = _data()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        folder = tf.export(sess, [loss, train], [x, y], str(tmp_path), name="step")
    f = tf.load(folder)
    w0 = f.state["w"].copy()
    first, op_result = f(xs, ys)
    assert op_result is None and type(first) is np.float32
    assert not np.array_equal(f.state["w"], w0)
    assert f(xs, ys)[0] < first
    assert np.array_equal(tf.load(folder).state["w"], w0)  # not saved yet
    f.save_state()
    np.testing.assert_array_equal(tf.load(folder).state["w"], f.state["w"])
    assert not [p for p in os.listdir(folder) if p.startswith(".tmp")]


# -- failing loudly -----------------------------------------------------------------------------
@pytest.fixture
def exported(tmp_path):
    x, y, loss, train = _training_graph()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return tf.export(sess, [loss, train], [x, y], str(tmp_path / "exp"), name="step")


def _truncate(path):
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def test_truncated_or_missing_files_fail_the_integrity_check(exported):
    _truncate(os.path.join(exported, "step.py"))
    with pytest.raises(ExportError, match=r"step\.py: sha256 mismatch"):
        tf.load(exported)
    proc = _clean_python("import step\nstep.load()\n", exported)
    assert proc.returncode != 0
    os.remove(os.path.join(exported, "state.npz"))
    with pytest.raises(ExportError, match=r"state\.npz: missing"):
        tf.load(exported)


def test_truncated_state_fails_without_running_anything(exported):
    _truncate(os.path.join(exported, "state.npz"))
    with pytest.raises(ExportError, match=r"state\.npz: sha256 mismatch"):
        tf.load(exported)
    proc = _clean_python("import step\nstep.load()\n", exported)
    assert proc.returncode != 0 and "sha256 mismatch" in proc.stderr


def _edit_manifest(folder, **changes):
    path = os.path.join(folder, "manifest.json")
    m = json.load(open(path))
    m.update(changes)
    json.dump(m, open(path, "w"))


def test_wrong_format_version_and_corrupt_manifest(exported):
    _edit_manifest(exported, format_version=99)
    with pytest.raises(ExportError, match="format version 99"):
        tf.load(exported)
    with open(os.path.join(exported, "manifest.json"), "w") as f:
        f.write('{"format": "jitflow.exp')
    with pytest.raises(ExportError, match="corrupt"):
        tf.load(exported)
    os.remove(os.path.join(exported, "manifest.json"))
    with pytest.raises(ExportError, match="no manifest.json"):
        tf.load(exported)


def test_manifest_not_matching_the_module(exported, tmp_path):
    _edit_manifest(exported, signature_id="0123456789abcdef")
    with pytest.raises(ExportError, match="does not match this module"):
        tf.load(exported)
    proc = _clean_python("import step\nstep.load()\n", exported)
    assert "does not match this module" in proc.stderr
    _edit_manifest(exported, module="other.py")
    with pytest.raises(ExportError, match="other.py: not covered by a hash"):
        tf.load(exported)


def test_wrong_feed_signature_names_the_feed(exported):
    f = tf.load(exported)
    xs, ys = _data(4)
    sig = r"step\(x:0: float32\[\?,2\], y:0: float32\[\?,1\]\)"
    with pytest.raises(TypeError, match=r"feed 'x:0' must have dtype float32, got float64.*"
                                        + sig):
        f(xs.astype(np.float64), ys)
    with pytest.raises(ValueError, match=r"feed 'y:0' must have shape \[\?,1\], got \[4, 2\]"):
        f(xs, xs)
    with pytest.raises(ValueError, match="feed 'x:0' must have shape"):
        f(xs[0], ys)
    with pytest.raises(TypeError, match="takes 2 feeds, got 1"):
        f(xs)
    with pytest.raises(TypeError, match="feed 'x:0' cannot be converted"):
        f([["a", "b"]], ys)


def test_export_needs_initialized_variables(tmp_path):
    x, y, loss, train = _training_graph()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="not initialized"):
            tf.export(sess, loss, [x, y], str(tmp_path))


def test_cli_inspect_prints_manifest_source_and_integrity(exported):
    def inspect(*args):
        return subprocess.run([sys.executable, "-m", "jitflow", "inspect", exported, *args],
                              capture_output=True, text=True, timeout=120)

    proc = inspect()
    assert proc.returncode == 0, proc.stderr
    manifest_text, _, rest = proc.stdout.partition("\nintegrity: ok")
    assert json.loads(manifest_text)["module"] == "step.py"
    assert "# ---- step.py ----" in rest and "def kernel(ins, vs):" in rest
    assert "# ---- step.py" not in inspect("--no-source").stdout
    _truncate(os.path.join(exported, "state.npz"))
    proc = inspect()
    assert proc.returncode == 1 and "integrity: FAILED" in proc.stdout
    assert "state.npz: sha256 mismatch" in proc.stdout


def test_ops_without_a_code_generator_cannot_be_exported(tmp_path):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    noisy = x + tf.random_normal([2], seed=1)
    with tf.Session() as sess:
        with pytest.raises(NotImplementedError, match="export: "):
            tf.export(sess, noisy, [x], str(tmp_path / "f"))
    assert not (tmp_path / "f").exists()  # nothing half-written


def test_make_save_exports_the_state_at_save_time(tmp_path):
    from jitflow.export import make_save
    x, y, loss, train = _training_graph()
    xs, ys = _data()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        save = make_save(sess, [loss, train], [x, y])
        sess.run(train, {x: xs, y: ys})
        folder = save(str(tmp_path / "s"), name="later")
        w = sess.run("w:0")
        want = sess.run(loss, {x: xs, y: ys})
    f = tf.load(folder)
    np.testing.assert_array_equal(f.state["w"], w)
    assert f.manifest["name"] == "later" and os.path.exists(os.path.join(folder, "later.py"))
    np.testing.assert_allclose(f(xs, ys)[0], want, rtol=1e-6)


def test_export_is_a_callable_module():
    import jitflow.export as module
    assert tf.export is module and callable(tf.export)
    assert tf.export.load is tf.load and tf.export.ExportError is ExportError


def test_adam_step_exports_its_slots_and_global_step(tmp_path, backend):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    w = tf.Variable(tf.zeros([2, 1]), name="w")
    b = tf.Variable(0.5, name="b")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    gs = tf.train.get_or_create_global_step()
    train = tf.train.AdamOptimizer(0.1).minimize(loss, global_step=gs)
    xs, ys = _data(8, seed=3)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        f = tf.load(tf.export(sess, [loss, train], [x, y], str(tmp_path), name="adam"))
        for _ in range(4):
            want = sess.run([loss, train], {x: xs, y: ys})[0]
            np.testing.assert_allclose(f(xs, ys)[0], want, rtol=1e-5)
        names = [v.op.name for v in tf.global_variables()]
        values = sess.run([v.op.name + ":0" for v in tf.global_variables()])
    assert set(f.manifest["updates"]) == set(names)  # weights, slots, powers, global step
    for n, v in zip(names, values):
        np.testing.assert_allclose(f.state[n], v, rtol=1e-5, err_msg=n)
    assert f.state["global_step"] == 4


# -- loading only verified bytes ----------------------------------------------------------------
def _expected_losses(n=2):
    """Losses of `n` training steps of `_training_graph` from its initial state, in a session."""
    tf.reset_default_graph()
    x, y, loss, train = _training_graph()
    xs, ys = _data()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return [float(sess.run([loss, train], {x: xs, y: ys})[0]) for _ in range(n)]


def _plant_pyc(folder, module, marker):
    """A `__pycache__` entry Python's import would take for `module`: its header carries the
    source's mtime and size; its code touches `marker`, then runs the real source."""
    import importlib._bootstrap_external as bootstrap
    import importlib.util
    src_path = os.path.join(folder, module)
    with open(src_path, encoding="utf-8") as f:
        real = f.read()
    payload = f"open({str(marker)!r}, 'w').close()\n" + real
    st = os.stat(src_path)
    data = bootstrap._code_to_timestamp_pyc(compile(payload, src_path, "exec"),
                                            st.st_mtime, st.st_size)
    pyc = importlib.util.cache_from_source(src_path)
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    with open(pyc, "wb") as f:
        f.write(bytes(data))
    return pyc


class _Payload:
    """Unpickling it opens (creates) a marker file: stands for any command."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant_numba_index(folder, module, marker):
    """Numba index files (`.nbi`, a pickle) for every function of `module`, under each name
    Numba would look for (`<module>.<function>-<first line>.pyXY.nbi`), in `__pycache__`."""
    import pickle
    stem = os.path.splitext(module)[0]
    with open(os.path.join(folder, module), encoding="utf-8") as f:
        lines = f.read().splitlines()
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    cache = os.path.join(folder, "__pycache__")
    os.makedirs(cache, exist_ok=True)
    planted = []
    for i, line in enumerate(lines):
        if line.startswith("def "):
            name = line[4:line.index("(")]
            for lineno in (i, i + 1):   # the decorator's line or the def's (1-based)
                path = os.path.join(cache, f"{stem}.{name}-{lineno}.{tag}.nbi")
                with open(path, "wb") as f:
                    pickle.dump(_Payload(marker), f)
                planted.append(path)
    assert any(".kernel-" in p for p in planted)
    return planted


def _rehash(folder, name):
    """Rewrite the manifest's sha256 of `name` to match the file as it is now."""
    import hashlib
    path = os.path.join(folder, "manifest.json")
    m = json.load(open(path))
    m["files"][name] = hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest()
    json.dump(m, open(path, "w"))


def test_load_ignores_planted_bytecode_in_pycache(exported, tmp_path):
    marker = tmp_path / "pyc-ran"
    _plant_pyc(exported, "step.py", marker)
    f = tf.load(exported)
    xs, ys = _data()
    got = [float(f(xs, ys)[0]) for _ in range(2)]
    assert not marker.exists(), "jitflow.load ran bytecode from __pycache__"
    np.testing.assert_allclose(got, _expected_losses(), rtol=1e-6)


@pytest.mark.parametrize("old_style", [False, True], ids=["current", "cache-true-module"])
def test_load_never_unpickles_numba_cache_files_from_the_folder(exported, tmp_path, old_style):
    path = os.path.join(exported, "step.py")
    if old_style:  # as written by jitflow 0.1: kernels with njit(cache=True)
        with open(path, encoding="utf-8") as fh:
            src = fh.read().replace("numba.njit(cache=False", "numba.njit(cache=True")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(src)
        _rehash(exported, "step.py")
    marker = tmp_path / "nbi-unpickled"
    _plant_numba_index(exported, "step.py", marker)
    f = tf.load(exported)
    xs, ys = _data()
    got = [float(f(xs, ys)[0]) for _ in range(2)]
    assert not marker.exists(), "a Numba cache file from the export folder was unpickled"
    np.testing.assert_allclose(got, _expected_losses(), rtol=1e-6)


def test_standalone_load_never_unpickles_numba_cache_files(exported, tmp_path):
    marker = tmp_path / "nbi-unpickled"
    _plant_numba_index(exported, "step.py", marker)
    xs, ys = _data()
    np.savez(tmp_path / "data.npz", x=xs, y=ys)
    script = ("import json\nimport numpy as np\nimport step\nf = step.load()\n"
              "d = np.load(sys.argv[1])\n"
              "print(json.dumps([float(f(d['x'], d['y'])[0]) for _ in range(2)]))\n")
    proc = _clean_python(script, exported, str(tmp_path / "data.npz"))
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    np.testing.assert_allclose(json.loads(proc.stdout.strip().splitlines()[-1]),
                               _expected_losses(), rtol=1e-5)


def test_exported_module_does_not_ask_numba_to_cache():
    x, fetches = _inference_graph()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        from jitflow.export import _compile_program, _fetch_spec
        flat: list = []
        _fetch_spec(fetches, {}, flat)
        src = _compile_program(sess, flat, [], [x])["source"]
    assert "njit(cache=False" in src and "cache=True" not in src


def _evil_module(folder, marker):
    with open(os.path.join(folder, "step.py"), encoding="utf-8") as f:
        real = f.read()
    return f"open({str(marker)!r}, 'w').close()\n" + real


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "subdir"])
def test_manifest_naming_a_module_outside_the_folder_is_refused_before_running_it(
        exported, tmp_path, how):
    import hashlib
    marker = tmp_path / "outside-ran"
    evil = tmp_path / "evil.py"
    evil.write_text(_evil_module(exported, marker))
    if how == "dotdot":
        name = os.path.join("..", "evil.py")
        os.replace(evil, os.path.join(os.path.dirname(exported), "evil.py"))
        evil = os.path.join(os.path.dirname(exported), "evil.py")
    elif how == "absolute":
        name = str(evil)
    elif how == "symlink":
        name = "link.py"
        os.symlink(evil, os.path.join(exported, name))
    else:
        name = "sub/evil.py"
        os.makedirs(os.path.join(exported, "sub"))
        os.replace(evil, os.path.join(exported, name))
        evil = os.path.join(exported, name)
    digest = hashlib.sha256(open(evil, "rb").read()).hexdigest()
    m = json.load(open(os.path.join(exported, "manifest.json")))
    m["module"] = name
    m["files"] = {name: digest, "state.npz": m["files"]["state.npz"]}
    json.dump(m, open(os.path.join(exported, "manifest.json"), "w"))
    with pytest.raises(ExportError, match="plain file name inside the folder|outside the folder"):
        tf.load(exported)
    assert not marker.exists()
    from jitflow.export import verify
    assert any(name in p for p in verify(exported))


def test_manifest_naming_state_outside_the_folder_is_refused(exported, tmp_path):
    outside = tmp_path / "state.npz"
    outside.write_bytes(open(os.path.join(exported, "state.npz"), "rb").read())
    m = json.load(open(os.path.join(exported, "manifest.json")))
    m["state"]["file"] = str(outside)
    m["files"][str(outside)] = m["files"].pop("state.npz")
    json.dump(m, open(os.path.join(exported, "manifest.json"), "w"))
    with pytest.raises(ExportError, match="plain file name inside the folder"):
        tf.load(exported)
    proc = _clean_python("import step\nstep.load()\n", exported)
    assert proc.returncode != 0 and "plain file name inside the folder" in proc.stderr


def test_state_is_read_once_and_checked_before_use(exported, monkeypatch):
    """The state's bytes are hashed and parsed from one read: a file swapped after the check
    cannot be used (np.load sees only the checked bytes)."""
    opened = []
    real_open = open

    def counting_open(file, *args, **kwargs):
        if str(file).endswith(("state.npz", "step.py")):
            opened.append(os.path.basename(str(file)))
        return real_open(file, *args, **kwargs)

    import builtins
    monkeypatch.setattr(builtins, "open", counting_open)
    tf.load(exported)
    assert sorted(opened) == ["state.npz", "step.py"]


def test_cli_inspect_does_not_show_a_module_outside_the_folder(exported, tmp_path):
    secret = tmp_path / "secret.py"
    secret.write_text("SECRET = 'do not print me'\n")
    _edit_manifest(exported, module=str(secret))
    proc = subprocess.run([sys.executable, "-m", "jitflow", "inspect", exported],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "integrity: FAILED" in proc.stdout
    assert "plain file name inside the folder" in proc.stdout
    assert "do not print me" not in proc.stdout + proc.stderr


# -- in memory: export_files, load_files, with_state (what jitflow.dask ships to workers) -------
def test_export_files_are_the_bytes_export_writes(tmp_path):
    x, fetches = _inference_graph()
    xs = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(fetches, {x: xs})
        files = tf.export.export_files(sess, fetches, [x], name="infer")
        folder = tf.export(sess, fetches, [x], str(tmp_path / "f"), name="infer")
    assert set(files) == {"infer.py", "state.npz", "manifest.json"}
    for name, data in files.items():
        assert (tmp_path / "f" / name).read_bytes() == data
    f = tf.export.load_files(files, label="<test>")
    got = f(xs)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    assert got["stats"][0] == pytest.approx(want["stats"][0], rel=1e-6)
    assert f.folder == "<test>" and f.manifest == read_manifest(folder)
    with pytest.raises(ExportError, match="loaded from bytes"):
        f.save_state()


def test_load_files_checks_every_file_before_running_any(tmp_path):
    x, fetches = _inference_graph()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        files = tf.export.export_files(sess, fetches, [x], name="infer")
    marker = tmp_path / "ran"
    planted = dict(files)
    planted["infer.py"] = (f"open({str(marker)!r}, 'w').close()\n").encode() + files["infer.py"]
    with pytest.raises(ExportError, match=r"infer\.py: sha256 mismatch"):
        tf.export.load_files(planted)
    assert not marker.exists()
    with pytest.raises(ExportError, match=r"state\.npz: missing"):
        tf.export.load_files({k: v for k, v in files.items() if k != "state.npz"})
    with pytest.raises(ExportError, match="no manifest.json"):
        tf.export.load_files({"infer.py": files["infer.py"]})
    manifest = json.loads(files["manifest.json"])
    manifest["format_version"] = 99
    with pytest.raises(ExportError, match="format version 99"):
        tf.export.load_files(dict(files, **{"manifest.json": json.dumps(manifest).encode()}))
    with pytest.raises(ExportError, match="corrupt"):
        tf.export.load_files(dict(files, **{"manifest.json": b"{not json"}))


def test_with_state_changes_the_variables_and_keeps_the_module():
    x, y, loss, train = _training_graph()
    xs, ys = _data()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        files = tf.export.export_files(sess, [loss], [x, y], name="loss")
        w = np.array([[1.5], [-2.0]], np.float32)
        moved = tf.export.with_state(files, {"w": w, "b": np.float32(0.5)})
        sess.run([tf.assign(tf.get_default_graph().get_tensor_by_name("w:0"), w),
                  tf.assign(tf.get_default_graph().get_tensor_by_name("b:0"), 0.5)])
        want = sess.run(loss, {x: xs, y: ys})
    assert want < 1e-10          # the data lie on this line
    assert moved["loss.py"] == files["loss.py"]
    assert moved["manifest.json"] != files["manifest.json"]
    f0, f1 = tf.export.load_files(files), tf.export.load_files(moved)
    assert f0._entry is f1._entry                       # one compiled module for both
    assert f1(xs, ys)[0] == pytest.approx(want, abs=1e-6) and f0(xs, ys)[0] > 1.0
    with pytest.raises(ValueError, match=r"variable 'w' is float32\[2, 1\] in the export, got "
                                         r"float64\[2, 1\]"):
        tf.export.with_state(files, {"w": w.astype(np.float64)})
    with pytest.raises(KeyError, match="holds no variable 'v'"):
        tf.export.with_state(files, {"v": w})


def test_threads_loading_the_same_bytes_get_one_complete_module():
    import threading
    x, y, loss, train = _training_graph()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        files = tf.export.export_files(sess, [loss], [x, y], name="racing")
    start = threading.Barrier(4)
    got, errors = [], []

    def load():
        start.wait()
        try:
            got.append(tf.export.load_files(files))
        except Exception as e:  # noqa: BLE001  (collected and asserted below)
            errors.append(e)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(got) == 4
    assert len({id(f._entry) for f in got}) == 1


_CNN_SCRIPT = r'''
import numpy as np
import cnn
f = cnn.load()
xs = np.load(sys.argv[1])
np.save(sys.argv[2], f(xs))
'''


def test_a_cnn_exports_with_its_window_op_helpers_and_runs_without_jitflow(tmp_path):
    """Convolution and pooling kernels call nnlib's helpers: the export carries a copy."""
    rng = np.random.default_rng(8)
    x = tf.placeholder(tf.float32, [None, 8, 8, 2], name="x")
    f = tf.Variable(rng.standard_normal((3, 3, 2, 16)).astype(np.float32))
    f2 = tf.Variable(rng.standard_normal((3, 3, 16, 16)).astype(np.float32) / 12)
    # the second convolution has 16 channels in and out: the Winograd routine (16 images of 64
    # pixels reach its 1024-pixel minimum)
    h = tf.nn.conv2d(tf.nn.relu(tf.nn.conv2d(x, f, 1, "SAME")), f2, 1, "SAME")
    h = tf.nn.max_pool(h, 2, 2, "VALID")
    y = tf.nn.avg_pool(h, 2, 1, "SAME", name="y")
    xs = rng.standard_normal((16, 8, 8, 2)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(y, {x: xs})
        folder = tf.export(sess, y, [x], str(tmp_path / "exp"), name="cnn")
    src = (tmp_path / "exp" / "cnn.py").read_text()
    assert "a copy of jitflow.backends.numba_cpu.nnlib" in src
    calls = re.findall(r"^\s+(conv2d\w*)\(readable\(\w+\), readable\(\w+\), \w+, np.int64",
                       src, re.M)
    assert "conv2d" in calls and "conv2d_w" in calls, calls
    assert not re.search(r"^\s*(import|from)\s+jitflow\b", src, re.M)
    np.save(tmp_path / "xs.npy", xs)
    proc = _clean_python(_CNN_SCRIPT, folder, str(tmp_path / "xs.npy"),
                         str(tmp_path / "out.npy"))
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), want, rtol=1e-6)


# -- one loader: jitflow/export/loader.py, imported by jitflow and copied into every module ------
def _loader_code() -> str:
    """loader.py's text less its module docstring, read from the file itself."""
    import ast

    from jitflow.export import loader
    with open(loader.__file__, encoding="utf-8") as f:
        text = f.read()
    doc = ast.parse(text).body[0]
    assert isinstance(doc, ast.Expr) and isinstance(doc.value.value, str)
    return "".join(text.splitlines(True)[doc.end_lineno:]).strip("\n") + "\n"


def test_jitflow_load_runs_the_imported_loader_module(exported, tmp_path):
    """The loader's functions are the module jitflow.export.loader (code from loader.py), not
    a string run with exec: what a tampered folder raises is jitflow.export.ExportError,
    raised from loader.py."""
    from jitflow.export import loader
    assert tf.load is loader.load and tf.export.ExportError is loader.ExportError
    for fn in (tf.export.read_manifest, tf.export.verify, tf.export.check_names,
               tf.export.load_files, tf.load):
        assert fn.__code__.co_filename == loader.__file__, fn
    f = tf.load(exported)
    assert type(f) is loader.ExportedFunction
    files = {n: open(os.path.join(exported, n), "rb").read() for n in os.listdir(exported)}
    assert isinstance(tf.export.load_files(files), loader.ExportedFunction)
    _truncate(os.path.join(exported, "state.npz"))
    with pytest.raises(ExportError) as info:
        tf.load(exported)
    assert type(info.value) is tf.export.ExportError
    assert os.path.samefile(info.traceback[-1].path, loader.__file__)
    files["state.npz"] = files["state.npz"][:-1]
    with pytest.raises(tf.export.ExportError, match=r"state\.npz: sha256 mismatch") as info:
        tf.export.load_files(files, label="<cut>")
    assert os.path.samefile(info.traceback[-1].path, loader.__file__)
    with pytest.raises(TypeError, match="needs the path of an export folder"):
        tf.load()


def test_the_exported_module_carries_loader_py_verbatim(exported):
    with open(os.path.join(exported, "step.py"), encoding="utf-8") as f:
        text = f.read()
    head, marker, copy = text.partition("\n# ---- loader (a copy of jitflow/export/loader.py")
    assert marker, "no loader marker in the exported module"
    copy = copy.split("\n", 1)[1]             # the rest of the marker line
    assert copy == _loader_code()
    assert tf.export.LOADER_SOURCE == copy
    assert "class ExportError" not in head and text.count("class ExportedFunction") == 1
    assert "ENTRY = kernel" in head and "SIGNATURE_ID = " in head


def test_loader_py_keeps_the_rules_for_being_copied_into_modules():
    """Stdlib and numpy only, imports aliased with an underscore, no __future__ import (it is
    appended mid-module) and no __all__ (it would replace the module's)."""
    import ast

    from jitflow.export import loader
    with open(loader.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            raise AssertionError(f"line {node.lineno}: from-import ({node.module}) in loader.py")
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                assert top in sys.stdlib_module_names or top == "numpy", a.name
                assert a.asname and a.asname.startswith("_"), a.name
    assigned = {t.id for node in tree.body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)}
    assert "__all__" not in assigned


def test_kernels_defining_a_loader_name_are_refused():
    from jitflow.export.assemble import module_source
    program = {"source": "import numpy as np\n\n\ndef verify(x):\n    return x\n",
               "entry": "verify"}
    manifest = {"module": "m.py", "name": "m", "feeds": [], "outputs": [], "updates": [],
                "signature_id": "0" * 16}
    with pytest.raises(NotImplementedError, match=r"\['verify'\].*loader defines too"):
        module_source(program, manifest)
    program["source"] = program["source"].replace("verify", "kernel")
    program["entry"] = "kernel"
    assert module_source(program, manifest).count("def kernel(x)") == 1


_BYTES_SCRIPT = r'''
import json
import numpy as np
import step
f = step.load()
d = np.load(sys.argv[1])
losses = [float(f(d["x"], d["y"])[0]) for _ in range(2)]
files = {n: open(n, "rb").read() for n in ("step.py", "state.npz", "manifest.json")}
g = step.load_files(files, label="<bytes>")
clean = step.verify(".")
with open("state.npz", "ab") as fh:
    fh.write(b"!")
try:
    step.load()
    err = None
except step.ExportError as e:
    err = str(e)
print(json.dumps({"losses": losses, "bytes": float(g(d["x"], d["y"])[0]), "clean": clean,
                  "err": err, "jitflow": [m for m in sys.modules if m.startswith("jitflow")]}))
'''


def test_exported_folder_runs_where_importing_jitflow_fails(exported, tmp_path):
    """The folder in a process where `import jitflow` finds a package that fails (and leaves a
    mark): its loader never reaches for jitflow, for folders or bytes or integrity errors."""
    poison = tmp_path / "poison" / "jitflow"
    poison.mkdir(parents=True)
    mark = tmp_path / "jitflow-imported"
    (poison / "__init__.py").write_text(f"open({str(mark)!r}, 'w').close()\n"
                                        "raise ImportError('an export imported jitflow')\n")
    xs, ys = _data()
    np.savez(tmp_path / "data.npz", x=xs, y=ys)
    keep = [p for p in sys.path if p and os.path.abspath(p) not in (REPO,
                                                                    os.path.join(REPO, "tests"))]
    prelude = (f"import sys; sys.path[:] = {[exported, str(poison.parent)] + keep!r}\n"
               "try:\n    import jitflow\nexcept ImportError as e:\n"
               "    assert 'an export imported jitflow' in str(e)\n"
               "else:\n    raise AssertionError('the poisoned jitflow imported')\n"
               f"import os; os.unlink({str(mark)!r})  # the mark of this import\n")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", prelude + _BYTES_SCRIPT,
                           str(tmp_path / "data.npz")],
                          capture_output=True, text=True, timeout=300, cwd=exported)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    want = _expected_losses()
    np.testing.assert_allclose(out["losses"], want, rtol=1e-5)
    assert out["bytes"] == pytest.approx(want[0], rel=1e-5)   # load_files: the state as exported
    assert out["clean"] == [] and out["jitflow"] == []
    assert "state.npz: sha256 mismatch" in out["err"]
    assert not mark.exists()


# -- format 1 across versions: folders written before and after the loader became a module ----
# tests/data/export_v1_step: `_training_graph` exported as "step" by jitflow at eefa8a9, whose
# modules carry the loader as a string (LOADER_SOURCE); the format version is the same (1)
V1 = os.path.join(REPO, "tests", "data", "export_v1_step")


def _old_loader() -> dict:
    """The loader jitflow at eefa8a9 ran (its LOADER_SOURCE, as that module carries it)."""
    with open(os.path.join(V1, "step.py"), encoding="utf-8") as f:
        text = f.read()
    at = text.index("# ---- loader (written by jitflow.export; needs only numpy and numba)")
    ns: dict = {"__name__": "old_loader", "__file__": "<old loader>"}
    exec(compile(text[at:], "<jitflow 0.1 loader>", "exec"), ns)  # noqa: S102
    return ns


def test_a_folder_written_by_the_string_loader_still_loads(tmp_path):
    import shutil
    folder = shutil.copytree(V1, tmp_path / "old")
    assert read_manifest(folder)["format_version"] == tf.export.FORMAT_VERSION
    assert tf.export.verify(folder) == []
    f = tf.load(folder)
    xs, ys = _data()
    want = _expected_losses(3)
    np.testing.assert_allclose([float(f(xs, ys)[0]) for _ in range(2)], want[:2], rtol=1e-5)
    f.save_state()
    np.testing.assert_allclose(float(tf.load(folder)(xs, ys)[0]), want[2], rtol=1e-5)
    files = {n: open(os.path.join(V1, n), "rb").read() for n in os.listdir(V1)}
    assert float(tf.export.load_files(files)(xs, ys)[0]) == pytest.approx(want[0], rel=1e-5)


def test_a_folder_written_now_loads_through_the_string_loader(exported, tmp_path):
    old = _old_loader()
    xs, ys = _data()
    want = _expected_losses()
    # what jitflow.load at eefa8a9 did with its loader: check, compile, take SIGNATURE_ID and
    # ENTRY from the module, build its ExportedFunction
    manifest = old["read_manifest"](exported)
    blobs = old["read_verified"](exported, manifest)
    ns: dict = {"__name__": "checked"}
    exec(old["compile_verified"](blobs["step.py"], manifest["files"]["step.py"]), ns)  # noqa: S102
    assert ns["SIGNATURE_ID"] == manifest["signature_id"]
    f = old["ExportedFunction"](exported, manifest, ns["ENTRY"], blobs["state.npz"])
    np.testing.assert_allclose([float(f(xs, ys)[0]) for _ in range(2)], want, rtol=1e-5)
    # the load() of a module written then, as if it sat in this folder: it runs the new
    # module's code (compiled from checked bytes) and calls its open_verified
    old["__file__"] = os.path.join(exported, "step.py")
    g = old["load"]()
    assert type(g).__module__ == "old_loader_checked"      # the class of the new module's copy
    assert float(g(xs, ys)[0]) == pytest.approx(want[0], rel=1e-5)
