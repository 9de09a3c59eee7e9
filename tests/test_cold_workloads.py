"""benchmarks/cold_workloads.py and benchmarks/exit_check.py on tiny step counts.

No timing assertions: the workloads must compute the same values in every peer (NumPy's
hand-written gradients against jitflow's), the children must report their figures, the warm
child must run on the cold child's cache, and the exit check must count failures and distinct
results. JAX and TF1 run when this interpreter has them and are skipped otherwise.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import cold_workloads as cw  # noqa: E402
from benchmarks import exit_check  # noqa: E402

import jitflow as tf  # noqa: E402

pytestmark = pytest.mark.xdist_group("bench-cold")


def _jitflow_final(case: str, n: int) -> list:
    with tf.Graph().as_default():
        work = cw.graph_work(tf, "jitflow", case, n)
        for i in range(n):
            work.step(i)
        return work.final()


def _numpy_final(case: str, n: int) -> list:
    work = cw.numpy_work(case, n)
    for i in range(n):
        work.step(i)
    return work.final()


# -- the workloads ---------------------------------------------------------------------------
def test_seeds_case_computes_the_harmonic_form_by_hand():
    # the last step (i = 2) feeds a = 15 + 2, b = 5: 85 / 22
    assert _numpy_final("seeds", 3) == pytest.approx([85 / 22], rel=1e-6)
    assert _jitflow_final("seeds", 3) == pytest.approx([85 / 22], rel=1e-6)


def test_program_gradients_match_finite_differences():
    steps = cw.random_program(12, seed=3)
    x, ws = cw.program_data(steps)
    x = x.astype(np.float64)
    ws = [w.astype(np.float64) for w in ws]
    graph = cw._NumpyGraph()
    grads = cw._program_grads(steps, x, ws)
    rng = np.random.default_rng(0)
    for k, w in enumerate(ws):
        for _ in range(3):
            i, j = rng.integers(0, cw.WIDTH, 2)
            eps = 1e-6
            w[i, j] += eps
            up = cw.program_forward(graph, x, ws, steps, False)
            w[i, j] -= 2 * eps
            down = cw.program_forward(graph, x, ws, steps, False)
            w[i, j] += eps
            assert grads[k][i, j] == pytest.approx((up - down) / (2 * eps), rel=1e-4,
                                                   abs=1e-9)


@pytest.mark.parametrize("case", ["train10", "mlp", "rnn"])
def test_numpy_training_matches_jitflow(case):
    # three Adam steps on the same data and initial values: hand-written gradients in NumPy,
    # jitflow's symbolic ones
    got, want = _numpy_final(case, 3), _jitflow_final(case, 3)
    assert got == pytest.approx(want, rel=1e-4)


def test_forward_graph_agrees_between_numpy_and_jitflow():
    assert _numpy_final("fwd200", 1) == pytest.approx(_jitflow_final("fwd200", 1), rel=1e-5)


def test_random_program_keeps_every_value_bounded():
    steps = cw.random_program(200)
    x, ws = cw.program_data(steps)
    out = cw.program_forward(cw._NumpyGraph(), x, ws, steps, False)
    assert np.isfinite(out)
    assert cw.n_weights(steps) == len(ws) >= 1


def test_steady_figures_from_step_end_times():
    # first step ends 1.0 s after the work starts at 0.5; then steps of 0.1 s
    ends = [1.5] + [1.5 + 0.1 * k for k in range(1, 20)]
    fig = cw.steady_figures(ends, 0.5, window=1)
    assert fig["steps"] == 20
    assert fig["first_step"] == pytest.approx(1.0)
    assert fig["steady_step"] == pytest.approx(0.1)
    assert fig["reached_step"] == 1
    assert fig["reached_at"] == pytest.approx(1.6)


# -- children and the report -------------------------------------------------------------------
class _Args:
    window = 3
    timeout = 300


def _pythons(peers):
    return {p: cw.peer_python(p, sys.executable) for p in peers}


def test_children_report_and_warm_run_uses_the_cold_cache():
    peers = ["jitflow", "jitflow-warm", "numpy"]
    out = cw.run_case("seeds", peers, 20, _Args, _pythons(peers))
    for p in peers:
        r = out[p]
        assert "error" not in r, r
        assert r["steps"] == 20 and r["returncode"] == 0
        # the last step, i = 19, feeds a = 15 + 19 % 7 = 20, b = 5
        assert r["final"] == pytest.approx([4.0], rel=1e-6)
        assert r["total_s"] >= r["import_s"] > 0
    # the cold child compiled its machine code; the warm one loaded it from that cache
    assert out["jitflow"]["objects_compiled"] >= 1 and out["jitflow"]["objects_loaded"] == 0
    assert out["jitflow-warm"]["objects_loaded"] >= 1
    rows = {("seeds", p): cw._median_row([r]) for p, r in out.items()}
    text = cw.report(rows, peers, ["seeds"], {"date": "test"})
    assert "| seeds | 20 |" in text
    assert "jitflow cold / NumPy" in text and "jitflow warm / NumPy" in text
    assert "ok (rtol 1e-06)" in text


@pytest.mark.parametrize("peer,module", [("jax", "jax"), ("tf1", "tensorflow")])
def test_peer_children_when_installed(peer, module):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed in this interpreter")
    out = cw.run_case("seeds", [peer], 10, _Args, _pythons([peer]))
    assert "error" not in out[peer], out[peer]
    assert out[peer]["final"] == pytest.approx([85 / 22], rel=1e-6)   # i = 9: a = 17


def test_results_check_flags_a_peer_that_differs():
    by = {"jax": {"final": [1.0]}, "numpy": {"final": [1.0 + 1e-9]}, "jitflow": {"final": [2.0]}}
    verdict = cw.check_results("seeds", by)
    assert verdict["numpy"] is None and verdict["jax"] is None
    assert "differs from jax" in verdict["jitflow"]


def test_cnn_is_not_asked_of_numpy():
    assert ("cnn", "numpy") in cw.NOT_RUN
    with pytest.raises(ValueError, match="cnn"):
        cw.numpy_work("cnn", 1)


# -- the exit check ------------------------------------------------------------------------------
def test_exit_check_runs_clean_with_one_result():
    out = exit_check.check(2, ["cold", "warm"], False, ["sync"], 3, 300, progress=False)
    text, ok = exit_check.summarize(out)
    assert ok, text
    assert [len(out["runs"][c]) for c in ("cold", "warm")] == [2, 2]
    assert "Distinct results (loss as float.hex, weight digest) over every run: 1" in text
    assert out["modes"]["sync"]["result"]["mode"] == "sync"


def test_exit_check_counts_signals_and_second_results():
    def run(status, loss="0x1p+0", weights="aa"):
        return {"status": status, "wall": 1.0,
                "result": {"loss": loss, "weights": weights, "pending": 1}}

    crashed = {"runs": {"cold": [run(0), run(-11), run(0)]}, "modes": {}}
    text, ok = exit_check.summarize(crashed)
    assert not ok and "SIGSEGV: 1" in text and "| cold | 3 | 2 |" in text
    drifted = {"runs": {"warm": [run(0), run(0, loss="0x1.0000000000001p+0")]}, "modes": {}}
    text, ok = exit_check.summarize(drifted)
    assert not ok and "over every run: 2" in text
    lost = {"runs": {"cold": [{"status": 0, "wall": 1.0, "result": None}]}, "modes": {}}
    assert not exit_check.summarize(lost)[1]
