"""The example programs run (briefly) on every backend and their losses fall."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_linear_regression_fits_the_line(backend, capsys):
    out = _load("linear_regression").main(epochs=5)
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("epoch") for line in lines) == 5
    assert lines[-1].startswith("final:")
    losses = out["losses"]
    assert losses[-1] < out["initial_loss"] / 20
    assert all(b <= a + 1e-7 for a, b in zip(losses, losses[1:]))
    assert out["w"] == pytest.approx(3.0, abs=0.1)
    assert out["b"] == pytest.approx(2.0, abs=0.1)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_logistic_regression_learns_three_classes(backend, capsys):
    out = _load("logistic_regression").main(epochs=3)
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("epoch") for line in lines) == 3
    assert out["initial_loss"] == pytest.approx(np.log(3.0), rel=1e-5)  # zero weights
    assert out["losses"][-1] < 0.6 * out["initial_loss"]
    assert out["accuracy"][-1] > 0.8


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mlp_adam_separates_the_rings(backend, capsys):
    out = _load("mlp_adam").main(epochs=4)
    assert capsys.readouterr().out.count("epoch") == 4
    assert out["steps"] == 4 * 16  # 1024 samples in batches of 64: one global step each
    assert out["losses"][-1] < 0.5 * out["initial_loss"]
    assert out["losses"][-1] < out["losses"][0]
    assert out["accuracy"][-1] > 0.8


def test_cnn_bars_learns_the_orientation(backend, monkeypatch):
    """The CNN example (convolutions, pooling, their gradients, Adam) learns; on the compiled
    backend every kernel on the LLVM path (its window routines: none left to Numba), with every
    fallback an error."""
    from jitflow.backends.numba_cpu.kernels import STATS
    if backend == "numba":
        monkeypatch.setenv("JITFLOW_COMPILE", "quick")
        monkeypatch.setenv("JITFLOW_STRICT", "1")
    fell = STATS.get("numba_fallbacks", 0)
    out = _load("cnn_bars").main(steps=60, verbose=False)
    assert STATS.get("numba_fallbacks", 0) == fell
    assert out["initial_accuracy"] < 0.7
    assert np.mean(out["losses"][-10:]) < 0.5 * out["initial_loss"]
    assert out["test_accuracy"] > 0.9


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_lstm_sequence_learns_the_majority_sign(backend, capsys):
    out = _load("lstm_sequence").main(steps=50, verbose=False)
    (l0, a0), [(step, loss, acc)] = out["initial"], out["history"]
    assert step == 50 and loss < 0.6 * l0 and acc > max(a0, 0.85)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_while_loop_newton_converges_and_trains_through_the_loop(backend, capsys):
    out = _load("while_loop").main(train_steps=40)
    text = capsys.readouterr().out
    assert "sqrt(1.0,) = [1.0] after 0 Newton steps" in text   # the trip count is the data's
    assert out["iterations"][(2.0, 1e-2, 1e6)] > out["iterations"][(4.0, 9.0)] > 0
    assert out["losses"][-1] < 0.01 * out["initial_loss"]
    assert all(b < a for a, b in zip(out["losses"], out["losses"][1:]))
    assert abs(out["s"] - 9.0) < 1.0


def test_example_runs_as_a_script():
    env = dict(os.environ, JITFLOW_BACKEND="interpreter")
    proc = subprocess.run([sys.executable, str(EXAMPLES / "linear_regression.py"),
                           "--epochs", "2"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[:2] for line in lines if line.startswith("epoch")] == [
        ["epoch", "1"], ["epoch", "2"]]
    assert lines[-1].startswith("final: w = ")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_dask_predict_scores_every_chunk_like_one_session_run(capsys):
    pytest.importorskip("dask.array")
    pytest.importorskip("distributed")
    out = _load("dask_predict").main(rows=30_000, chunk=7_000, steps=150, threads=True)
    printed = capsys.readouterr().out
    assert "scored 30,000 rows in 5 chunks" in printed
    assert out["chunks"] == 5 and out["shape"] == (30_000, 3)
    assert out["max_diff"] < 1e-5 and out["agree"] > 0.999
    assert out["accuracy"] > 0.9


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_frozen_graphs_give_tensorflows_outputs(backend, capsys):
    out = _load("frozen_graph").main()
    lines = capsys.readouterr().out.splitlines()
    assert sum("predictions equal TensorFlow's: True" in line for line in lines) == 2
    for key in ("cnn", "mlp"):
        np.testing.assert_allclose(out[key]["probs"], out[key]["expected"], rtol=1e-4,
                                   atol=1e-5)


def test_data_pipeline_trains_from_a_tf_data_pipeline(capsys):
    out = _load("data_pipeline").main(epochs=8)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("final:")
    assert out["losses"][-1] < 0.6 * out["losses"][0]
    assert out["held_out"] == 400 and out["accuracy"] > 0.8


def test_word2vec_nce_loss_falls(capsys):
    out = _load("word2vec_nce").main(steps=600)
    assert capsys.readouterr().out.splitlines()[-1].startswith("final:")
    assert out["averages"][-1] < 0.6 * out["averages"][0]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_contrib_mnist_style_trains_both_tf_contrib_models(backend, monkeypatch, capsys):
    """The tf.contrib example: TF 1.15's variable names, and both models learn (on the
    compiled backend on the quick code, as the CNN example)."""
    if backend == "numba":
        monkeypatch.setenv("JITFLOW_COMPILE", "quick")
    out = _load("contrib_mnist_style").main(steps=120)
    text = capsys.readouterr().out
    assert "Conv/weights [3, 3, 1, 8]" in text and "Conv_1/BatchNorm/moving_variance" in text
    assert "rnn/lstm_cell/kernel [42, 128]" in text
    assert sum(line.startswith("final") for line in text.splitlines()) == 2
    for model in ("cnn", "rnn"):
        (l0, a0), history = out[model]["initial"], out[model]["history"]
        assert len(history) == 4
        assert history[-1][1] < 0.3 * l0 and history[-1][2] > max(a0, 0.9)


def test_tfrecord_pipeline_trains_from_example_records(backend, capsys):
    pytest.importorskip("PIL")
    out = _load("tfrecord_pipeline").main(epochs=4)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("final: 240 records in 3 GZIP shards")
    assert out["records"] == 240 and out["shards"] == 3
    assert out["tags"] == 4 * (120 * 1 + 120 * 2)   # one tag on even records, two on odd
    assert out["losses"][-1] < 0.3 * out["losses"][0]
    assert out["accuracy"][-1] > 0.9
