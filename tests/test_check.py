"""`python -m jitflow check` (scan a TF1 script, report what jitflow lacks, run it with
tensorflow importing as jitflow) and the API coverage list and figure."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import jitflow
from jitflow.tools import check

PROGRAM = textwrap.dedent('''\
    import sys
    import numpy as np
    import tensorflow.compat.v1 as tf
    from tensorflow.contrib import layers
    tf.disable_v2_behavior()
    x = tf.placeholder(tf.float32, [None, 3])
    y = layers.fully_connected(x, 2, weights_initializer=tf.ones_initializer())
    if len(sys.argv) > 5:
        tf.contrib.seq2seq.BasicDecoder(1)
        tf.nn.no_such_op(x)
        tf.nn.no_such_op(x)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        print("out", s.run(tf.reduce_sum(y), {x: np.ones((2, 3))}), sys.argv[1:])
    import tensorflow
    print("modules", tensorflow.__name__, tf.__name__)
    sys.exit(3)
    ''')


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "jitflow", *map(str, args)],
                          capture_output=True, text=True, timeout=240)


# -- scanning -----------------------------------------------------------------------------------
def test_scan_follows_every_way_of_importing_tensorflow():
    src = textwrap.dedent('''\
        import tensorflow as tf
        import tensorflow.compat.v1 as v1
        from tensorflow.compat import v1 as tf1
        from tensorflow import nn as N, train
        import tensorflow.contrib.slim
        import numpy as np
        tf.compat.v1.layers.dense(x, 1)
        v1.nn.relu(tf1.constant(1.0)).op.name
        N.softmax(x); train.AdamOptimizer(0.1).minimize(l)
        tensorflow.contrib.slim.conv2d(x)
        np.linalg.norm(x)
        ''')
    got = [(u.path, u.line) for u in check.scan(src)]
    assert got == [("nn", 4), ("train", 4), ("contrib.slim", 5),
                   ("layers.dense", 7), ("constant", 8), ("nn.relu", 8),
                   ("nn.softmax", 9), ("train.AdamOptimizer", 9),
                   ("contrib.slim.conv2d", 10)]


def test_missing_uses_one_entry_per_missing_prefix_with_jitflows_reason():
    uses = check.scan("import tensorflow as tf\n"
                      "tf.contrib.seq2seq.BasicDecoder\n"
                      "tf.contrib.seq2seq.dynamic_decode\n"
                      "tf.nn.relu\n"
                      "tf.nn.no_such_op\n"
                      "tf.nn.no_such_op\n")
    missing = check.missing_uses(uses)
    assert [(p, lines) for p, _, lines in missing] == [("contrib.seq2seq", [2, 3]),
                                                       ("nn.no_such_op", [5, 6])]
    assert "decoders and attention wrappers" in missing[0][1]
    assert missing[1][1] == ""   # a plain missing attribute: no reason to add
    assert check.resolve("nn.relu") == (True, None)
    assert check.resolve("")[0]


EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py")))
def test_every_example_uses_only_names_jitflow_has(name):
    # the examples import jitflow as tf (a program already switched); jitflow's submodules
    # (`import jitflow.dask as jfd`) resolve too
    with open(os.path.join(EXAMPLES, name)) as fh:
        uses = check.scan(fh.read(), name)
    assert len(uses) >= 3
    assert check.missing_uses(uses) == []


def test_scan_reads_jitflow_imports_and_reports_what_is_missing():
    uses = check.scan("import jitflow as tf\nimport jitflow.dask as jfd\n"
                      "tf.nn.relu\njfd.predict\ntf.nn.no_such_op\n")
    assert [u.path for u in uses] == ["nn.relu", "dask.predict", "nn.no_such_op"]
    assert [m[0] for m in check.missing_uses(uses)] == ["nn.no_such_op"]


def test_import_hook_is_only_active_in_its_block():
    sys.modules.pop("tensorflow", None)
    with check.tensorflow_as_jitflow():
        import tensorflow
        import tensorflow.compat.v1 as tf
        from tensorflow.contrib import layers
        assert tensorflow is jitflow and tf is jitflow.compat.v1
        assert layers is jitflow.contrib.layers
        with pytest.raises(ImportError):
            import tensorflow.no_such_module  # noqa: F401
    assert jitflow.__spec__.name == "jitflow"   # the import system's spec given back
    assert "tensorflow" not in sys.modules or sys.modules["tensorflow"] is not jitflow
    assert not any(isinstance(f, check._AsJitflow) for f in sys.meta_path)


# -- the command --------------------------------------------------------------------------------
def test_check_reports_then_runs_the_program(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    proc = _cli("check", prog, "a", "--b")
    assert proc.returncode == 3, proc.stderr   # the program's own exit status
    err = proc.stderr
    assert "2 not in jitflow" in err
    assert "missing tf.contrib.seq2seq (line 9): tf.contrib.seq2seq is not available" in err
    assert "missing tf.nn.no_such_op (line 10, 11)" in err
    # the fully connected layer of ones weights and zero bias: 2 rows x 2 units x 3 = 12
    assert "out 12.0 ['a', '--b']" in proc.stdout
    assert "modules jitflow jitflow.compat.v1" in proc.stdout


def test_check_no_run_and_bad_input(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    proc = _cli("check", "--no-run", prog)
    assert proc.returncode == 1 and proc.stdout == ""
    ok = tmp_path / "ok.py"
    ok.write_text("import tensorflow as tf\nprint(tf.add(1, 2))\n")
    proc = _cli("check", "--no-run", ok)
    assert proc.returncode == 0 and "0 not in jitflow" in proc.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("def (:\n")
    proc = _cli("check", bad)
    assert proc.returncode == 2 and "cannot read" in proc.stderr
    assert _cli("check", tmp_path / "none.py").returncode == 2


# -- coverage -----------------------------------------------------------------------------------
def test_api_list_holds_tf1_names():
    names = check.api_names()
    assert len(names) == len(set(names)) > 3000
    for n in ("Session", "placeholder", "nn.relu", "train.AdamOptimizer", "layers.dense",
              "nn.rnn_cell.LSTMCell", "losses.softmax_cross_entropy", "image.resize_images",
              "logging.set_verbosity", "test.TestCase"):
        assert n in names
    assert not any(n.startswith(("compat.v1.", "compat.v2.", "keras.")) for n in names)


def test_coverage_counts_per_namespace():
    names = ["nn.relu", "nn.no_such_op", "Session", "no_such_name", "nn.rnn_cell.LSTMCell"]
    cov = check.coverage(["", "nn"], names)
    assert cov == {"nn": (1, 2, ["nn.no_such_op"]), "": (1, 2, ["no_such_name"])}
    assert check.total(cov) == (2, 4)
    assert check.coverage(None, names)["nn.rnn_cell"] == (1, 1, [])


def test_tutorial_namespaces_are_at_least_80_percent_covered():
    found, count = check.total(check.coverage(check.TUTORIAL_NAMESPACES))
    assert found / count >= 0.80, f"{found} / {count}"


def test_coverage_command(tmp_path):
    proc = _cli("coverage", "nn", "--missing")
    assert proc.returncode == 0, proc.stderr
    found, count, missing = check.coverage(["nn"])["nn"]
    assert f"{found} / {count}" in proc.stdout
    assert ("missing: " + " ".join(missing)) in proc.stdout
    assert "total (tf.nn.*)" in proc.stdout


def test_api_list_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    from jitflow.tools.make_tf1_api import public_names
    legacy = ("layers.", "nn.rnn_cell.")   # need TF_USE_LEGACY_KERAS=1 when TF is imported
    ours = {n for n in check.api_names() if not n.startswith(legacy)}
    theirs = {n for n in public_names(tf1) if not n.startswith(legacy)}
    assert ours == theirs
    if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
        assert set(check.api_names()) == set(public_names(tf1))
