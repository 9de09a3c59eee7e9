"""Exported functions: round trips in this process and in a process without jitflow,
training steps, integrity checks and feed-signature errors."""
from __future__ import annotations

import json
import os
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
    assert imports <= {"math", "numba", "numpy", "hashlib", "json", "os", "tempfile"}
    assert "njit(cache=True" in src and "# MatMul" in src and "# Tanh" in src
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
