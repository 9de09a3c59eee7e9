"""The benchmark suite in a tiny mode: the table it builds, and that its result check bites.

No timing assertions: these tests run the harness with 1-2 repetitions on tiny sizes and look
only at structure and statuses (the CPU-use test compares a function that sleeps with one that
spins, which differ many times over).
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import cases as bcases  # noqa: E402
from benchmarks import coldstart, report  # noqa: E402
from benchmarks.harness import (  # noqa: E402
    TINY, Budget, Case, Peer, Results, Runner, Timing, compare, format_cell, measure,
    measure_interleaved, run_suite,
)
from benchmarks.peers import GraphAPI, NumpyMath, graph_lacks, make_peers  # noqa: E402
from jitflow.core.session import _BACKENDS  # noqa: E402

# one worker runs the module: the tiny table below is built once, not once per worker (17 s)
pytestmark = pytest.mark.xdist_group("bench-tiny")

TINY_IDS = ["seeds/run", "seeds/callable", "chain/1e2/f32", "chain/1e3/f32", "chain/1e2/f64",
            "chain/1e3/f64", "reduce/8x16", "mlp/b4", "linreg", "cnn/b2", "rnn/b2"]


@functools.lru_cache(maxsize=None)
def _tiny_table() -> Results:
    return run_suite(bcases.build_cases("tiny"), make_peers(["numpy", "jitflow-interp"]), TINY)


@pytest.fixture
def tiny_results() -> Results:
    """The whole tiny table on the NumPy reference and the jitflow interpreter, built once per
    process (a module fixture is rebuilt whenever xdist's worker runs out of queued tests)."""
    return _tiny_table()


def _facts() -> dict:
    facts = report.machine_facts()
    facts.update(mode="tiny", date="test")
    return facts


# -- the table ----------------------------------------------------------------------------------
def test_tiny_cases_are_the_expected_rows():
    assert [c.id for c in bcases.build_cases("tiny")] == TINY_IDS


def test_full_cases_cover_the_issue():
    ids = [c.id for c in bcases.build_cases("full")]
    for n in ("1e4", "1e6", "1e7"):
        for dt in ("f32", "f64"):
            assert f"chain/{n}/{dt}" in ids
    for expected in ("seeds/run", "seeds/callable", "reduce/4096x1024", "mlp/b64", "mlp/b1024",
                     "linreg", "compile/cold", "compile/cached", "reduce/1024x1024",
                     "reduce/10240x1024", "cnn/b32", "cnn/b128", "rnn/b32"):
        assert expected in ids


def test_tiny_run_fills_every_cell(tiny_results):
    assert [c.id for c in tiny_results.cases] == TINY_IDS
    for case in tiny_results.cases:
        ref = tiny_results.cell(case.id, "numpy")
        assert ref.status == "ok", case.id
        assert 1 <= len(ref.timing.samples) <= 2
        assert ref.timing.median > 0
        assert tiny_results.cell(case.id, "jitflow-interp").status in (
            "ok", "unavailable", "WRONG", "error")
    # The seeds' graph needs only the graph core: the interpreter must run it, and right.
    assert tiny_results.cell("seeds/run", "jitflow-interp").status == "ok"
    assert tiny_results.cell("seeds/callable", "jitflow-interp").status == "ok"


def test_markdown_has_a_row_per_case_and_a_column_per_peer(tiny_results):
    md = report.to_markdown(tiny_results, _facts())
    header = next(ln for ln in md.splitlines() if ln.startswith("| case |"))
    assert "NumPy (hand-written)" in header and "jitflow interpreter" in header
    table_rows = [ln for ln in md.splitlines() if ln.startswith("| ")]
    for case in tiny_results.cases:
        assert any(ln.startswith(f"| {case.title} |") for ln in table_rows), case.id
    assert "## DESIGN.md §7 targets" in md
    assert "OPENBLAS_NUM_THREADS" in md
    # Without the compiled peer the ratios are the interpreter's, and the report says so.
    assert "## Speedup of jitflow interpreter" in md
    assert "The compiled backend did not run" in md


def test_json_dump_holds_the_raw_numbers(tiny_results):
    data = json.loads(report.to_json(tiny_results, _facts()))
    assert [c["id"] for c in data["cases"]] == TINY_IDS
    cell = data["cases"][0]["cells"]["numpy"]
    assert cell["status"] == "ok" and cell["timing"]["median"] > 0
    assert {t["target"] for t in data["targets"]} == {t.text for t in report.TARGETS}


def test_chart_is_written(tiny_results, tmp_path):
    pytest.importorskip("matplotlib", reason="the chart needs the `bench` extra (matplotlib)")
    path = report.write_chart(tiny_results, str(tmp_path / "chart.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_compiled_backend_runs_the_seeds_graph_or_says_why():
    res = run_suite(bcases.build_cases("tiny", groups=["seeds"]),
                    make_peers(["numpy", "jitflow"]), TINY)
    cell = res.cell("seeds/run", "jitflow")
    if "numba" in _BACKENDS:
        assert cell.status == "ok", cell.note
    else:
        assert cell.status == "unavailable" and "'numba' is not registered" in cell.note
        assert "not registered" in res.peer_status["jitflow"]


# -- the result check --------------------------------------------------------------------------
class _WrongMath(NumpyMath):
    """NumPy with a tanh that is off by 1e-3: a peer that is fast and wrong."""

    @staticmethod
    def tanh(x):
        return np.tanh(x) + x.dtype.type(1e-3)


def test_a_wrong_peer_is_marked_wrong_and_not_timed():
    wrong = Peer("wrong", "numpy", _WrongMath, label="deliberately wrong")
    res = run_suite(bcases.build_cases("tiny", groups=["seeds", "chain"]),
                    make_peers(["numpy"]) + [wrong], TINY)
    for case in res.cases:
        cell = res.cell(case.id, "wrong")
        if case.group == "chain":  # uses tanh
            assert cell.status == "WRONG", case.id
            assert cell.timing is None and "differ" in cell.note
            assert format_cell(case, cell) == "WRONG"
        else:  # the seeds' graph does not use tanh: the same peer is right there
            assert cell.status == "ok", case.id
    md = report.to_markdown(res, _facts())
    assert "| WRONG |" in md or "| WRONG" in md
    assert res.speedup("chain/1e2/f32", "numpy", "wrong") is None


def _case(impl, **kw) -> Case:
    return Case("t/x", "test case", "t", lambda rng: {"x": np.arange(4.0)},
                {"numpy": lambda m, d: Runner(lambda: d["x"] * 2), "other": impl}, **kw)


def test_wrong_shape_error_and_missing_op_get_their_status():
    bad_shape = Peer("shape", "other", lambda: None)
    raises = Peer("raises", "raises", lambda: None)
    missing = Peer("missing", "other", lambda: GraphAPI(object(), None), lacks=graph_lacks)
    absent = Peer("absent", "other", lambda: (_ for _ in ()).throw(ImportError("no such lib")))
    case = _case(lambda m, d: Runner(lambda: (d["x"] * 2)[:3]), needs=())
    case.impls["raises"] = lambda m, d: Runner(lambda: 1 / 0)
    res = run_suite([case], [Peer("numpy", "numpy", NumpyMath), bad_shape, raises, absent], TINY)
    assert res.cell("t/x", "shape").status == "WRONG"
    assert "shape" in res.cell("t/x", "shape").note
    assert res.cell("t/x", "raises").status == "error"
    assert "ZeroDivisionError" in res.cell("t/x", "raises").note
    assert res.cell("t/x", "absent").status == "unavailable"
    assert "no such lib" in res.peer_status["absent"]
    case.needs = ("matmul", "nn.relu")
    res = run_suite([case], [Peer("numpy", "numpy", NumpyMath), missing], TINY)
    cell = res.cell("t/x", "missing")
    assert cell.status == "unavailable" and "tf.matmul" in cell.note and "tf.nn.relu" in cell.note


def test_a_failing_reference_stops_the_run():
    case = Case("t/bad", "bad", "t", lambda rng: {}, {"numpy": lambda m, d: Runner(lambda: 1 / 0)})
    with pytest.raises(RuntimeError, match="reference failed"):
        run_suite([case], [Peer("numpy", "numpy", NumpyMath)], TINY)


def test_compare_walks_nesting_and_uses_the_tolerance():
    assert compare((1.0, np.ones(3)), [1.0, np.ones(3)], 1e-6, 0) is None
    assert compare(np.float32(1.0001), 1.0, 1e-3, 0) is None
    assert "differ" in compare(np.float32(1.01), 1.0, 1e-3, 0)
    assert "shape" in compare(np.ones(3), np.ones(4), 1e-3, 0)
    assert "sequence" in compare(1.0, (1.0, 2.0), 1e-3, 0)
    assert compare(np.array([np.nan]), np.array([np.nan]), 1e-3, 0) is None
    # float32 work done in float64 is a different computation: arrays must keep the dtype.
    assert "dtype" in compare(np.ones(3), np.ones(3, np.float32), 1e-3, 0)
    assert compare(1.0, np.float32(1.0), 1e-3, 0) is None  # scalars: values only


# -- timing rules (counts only) -----------------------------------------------------------------
def test_measure_respects_sample_limits():
    calls = []
    t = measure(lambda: calls.append(1), Budget(min_time=0.0, max_time=0.0, min_samples=1,
                                                max_samples=2, warmup=3, sample_target=0.0))
    assert 1 <= len(t.samples) <= 2
    assert len(calls) == 3 + 1 + t.calls  # warm-up, calibration, timed calls
    t = measure(lambda: None, Budget(min_time=10.0, max_time=100.0, min_samples=5,
                                     max_samples=5, warmup=0, sample_target=0.0))
    assert len(t.samples) == 5


def test_interleaved_timing_alternates_and_isolates_a_failure():
    log = []

    def failing():
        log.append("c")
        if log.count("c") > 2:
            raise ValueError("boom")

    fns = {"a": lambda: log.append("a"), "b": lambda: log.append("b"), "c": failing}
    out = measure_interleaved(fns, Budget(min_time=0.0, max_time=60.0, min_samples=3,
                                          max_samples=3, warmup=0, sample_target=0.0))
    assert len(out["a"].samples) == 3 and len(out["b"].samples) == 3
    assert isinstance(out["c"], ValueError)
    # after one calibration call each: one sample of every peer per round
    assert log == ["a", "b", "c"] + ["a", "b", "c"] * 2 + ["a", "b"]


def test_a_peer_failing_while_timed_gets_an_error_cell():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("fails after its first call")
        return np.arange(4.0) * 2

    case = _case(lambda m, d: Runner(flaky))
    res = run_suite([case], [Peer("numpy", "numpy", NumpyMath), Peer("flaky", "other", list)],
                    TINY)
    assert res.cell("t/x", "numpy").status == "ok"
    cell = res.cell("t/x", "flaky")
    assert cell.status == "error" and "fails after its first call" in cell.note
    assert cell.first_call_s is not None


def test_timing_records_the_cores_a_peer_keeps_busy():
    """A peer's `cores` is the process's CPU time over its samples' wall time: near 0 for one
    that waits, more for one that computes; the report's CPU-use table lists both."""
    def sleeps():
        time.sleep(2e-3)

    def spins():
        t = time.perf_counter()
        while time.perf_counter() - t < 2e-3:
            pass

    out = measure_interleaved({"sleeps": sleeps, "spins": spins},
                              Budget(min_time=0.05, max_time=1.0, min_samples=5, max_samples=50,
                                     warmup=0, sample_target=2e-3))
    assert out["sleeps"].cores < 0.3 and out["spins"].cores > 2 * out["sleeps"].cores, out
    assert out["spins"].scaled(10).cores == out["spins"].cores
    assert out["spins"].as_dict()["cores"] == round(out["spins"].cores, 3)
    case = Case("t/c", "case c", "x", lambda rng: {}, {})
    peers = make_peers(["numpy", "jitflow"])
    from benchmarks.harness import Cell
    res = Results([case], peers, {("t/c", "numpy"): Cell("ok", timing=out["sleeps"]),
                                  ("t/c", "jitflow"): Cell("ok", timing=out["spins"])},
                  {p.name: None for p in peers}, TINY)
    use = report.cpu_use(res, ["numpy", "jitflow"])
    assert use["jitflow"] == (out["spins"].cores, out["spins"].cores, "case c")
    md = report.to_markdown(res, _facts())
    assert "## CPU use while timed" in md and f"| {out['spins'].cores:.2f} | case c |" in md
    assert json.loads(report.to_json(res, _facts()))["cpu_use"]["numpy"]["case"] == "case c"


def test_pinning_holds_the_process_to_as_many_cpus_as_threads():
    """`threads.pin_cpus(n)` (run in a child: it would pin this worker) leaves the process on
    n of its CPUs, the children it starts too; XLA's pool heeds no thread variable."""
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("this platform has no CPU affinity")
    code = ("import os, subprocess, sys; from benchmarks import threads; "
            "before = len(os.sched_getaffinity(0)); after = threads.pin_cpus(1); "
            "child = subprocess.run([sys.executable, '-c', 'import os; "
            "print(len(os.sched_getaffinity(0)))'], capture_output=True, text=True).stdout; "
            "print(before, len(after), child.strip())")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[1:] == ["1", "1"], res.stdout


def test_timing_statistics_and_scaling():
    t = Timing([4.0, 1.0, 3.0, 2.0, 5.0])
    assert t.median == 3.0 and t.min == 1.0 and t.max == 5.0 and t.q1 == 2.0 and t.q3 == 4.0
    assert t.scaled(1000).median == pytest.approx(3e-3)


# -- targets ----------------------------------------------------------------------------------
def _fake_results(times: dict) -> Results:
    """Results with one case per id and the given jitflow/peer medians (seconds)."""
    peers = make_peers(["numpy", "jitflow", "tf1", "jax"])
    cases, cells = [], {}
    from benchmarks.harness import Cell
    for (case_id, peer), t in times.items():
        if case_id not in [c.id for c in cases]:
            cases.append(Case(case_id, case_id, "x", lambda rng: {}, {}))
        cells[(case_id, peer)] = Cell("ok", timing=Timing([t]), extra={"rebatch_s": 0.5})
    return Results(cases, peers, cells, {p.name: None for p in peers}, TINY)


def test_targets_are_evaluated_from_ratios_and_seconds():
    res = _fake_results({("seeds/run", "jitflow"): 1e-6, ("seeds/run", "tf1"): 57e-6,
                         ("seeds/run", "jax"): 1.5e-6, ("compile/cold", "jitflow"): 0.8})
    rows = {r["target"]: r for r in report.evaluate_targets(res)}
    tf1 = rows["Session.run on the seeds' graph >= 40x TF1"]
    assert tf1["status"] == "met" and tf1["measured"] == pytest.approx(57)
    assert rows["Session.run on the seeds' graph >= 2x JAX jit"]["status"] == "missed"
    assert rows["MLP train step cold compile, first result <= 1 s (incl. import)"][
        "status"] == "met"
    rebatch = next(r for r in rows.values() if r["target"].startswith("no recompilation"))
    assert rebatch["status"] == "missed" and rebatch["measured"] == 0.5
    assert rows["MLP step batch 64 >= 2x TF1"]["status"] == "not measured"
    md = report.to_markdown(res, _facts())
    assert "| Session.run on the seeds' graph >= 40x TF1 | `seeds/run` | >= 40x | 57x | met |" \
        in md
    lines = report.target_summary(res)
    assert "target: Session.run on the seeds' graph >= 40x TF1 -> measured 57x: met" in lines
    assert any(ln.startswith("target: MLP step batch 64 >= 2x TF1 -> not measured")
               for ln in lines)


# -- the cold-start child ----------------------------------------------------------------------
def test_cold_start_child_reports_the_first_loss():
    out = coldstart.child("numpy", 4, (20, 8, 3))
    case = bcases.mlp_case(4, (20, 8, 3))
    runner = bcases.mlp_numpy(NumpyMath(), case.make_data(np.random.default_rng(0)))
    assert out["loss"] == pytest.approx(float(runner.step()), rel=1e-6)
    assert out["total_s"] >= out["import_s"] >= 0


def test_cold_start_child_process_protocol(tmp_path):
    out = coldstart.run_child("numpy", 4, (20, 8, 3), str(tmp_path))
    assert set(out) >= {"loss", "import_s", "build_s", "first_step_s", "total_s", "rebatch_s",
                        "wall_s", "new_cache_files"}
    assert np.isfinite(out["loss"])
    assert out["new_cache_files"] == 0  # NumPy compiles nothing


def test_api_coverage_survey_counts_names(tmp_path):
    """The coverage script reads TF's API files (TensorFlow installed) and finds jitflow's
    names by attribute lookup; its report classifies every missing name."""
    pytest.importorskip("tensorflow")
    from benchmarks import api_coverage
    table = api_coverage.survey()
    assert table["data"]["total"] >= 10 and "Dataset" not in table["data"]["missing"]
    assert "nce_loss" not in table["nn"]["missing"] and table["strings"]["have"] > 0
    deliberate, rest = api_coverage.classify(table)
    n_missing = sum(len(r["missing"]) for r in table.values())
    assert sum(map(len, deliberate.values())) + sum(map(len, rest.values())) == n_missing
    out = tmp_path / "cov.md"
    assert api_coverage.main(["--out", str(out)]) == 0
    assert "Gaps left on purpose" in out.read_text()


def test_two_thread_settings_reach_every_peer():
    from benchmarks import threads
    env = threads.thread_env(2)
    assert env["JITFLOW_THREADS"] == "2"
    assert all(env[k] == "2" for k in threads.THREAD_ENV if k != "XLA_FLAGS")
    assert "intra_op_parallelism_threads=2" in env["XLA_FLAGS"]
    assert "multi_thread_eigen=true" in env["XLA_FLAGS"]
    assert threads.thread_env(1) == threads.THREAD_ENV


def test_winograd_rounding_survey_writes_a_row_per_routine(tmp_path):
    """benchmarks/winograd_rounding.py (the source of the rounding figures in nnlib and the
    README): against exact sums, every Winograd case within the fuzzer's comparison."""
    from benchmarks import winograd_rounding
    out = tmp_path / "rounding.md"
    assert winograd_rounding.main(["--cases", "3", "--seed", "4", "--out", str(out)]) == 0
    rows = [line.split(" | ") for line in out.read_text().splitlines()
            if line.startswith("| exact")]
    assert {r[2] for r in rows} == {"forward", "input gradient", "filter gradient"}
    for r in rows:
        wino_max = float(r[4].split(" / ")[0])
        assert 0 < wino_max < 30 and r[5] == "0", r


def test_cnn_drift_against_tf_reports_each_pair_per_seed(capsys):
    """benchmarks/cnn_tf_drift.py (training drift of the CNN against TF): one line per seed with
    the three pairs, small after two steps of batch 2."""
    pytest.importorskip("tensorflow")
    from benchmarks import cnn_tf_drift
    assert cnn_tf_drift.main(["--batch", "2", "--steps", "2", "--seeds", "5"]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("seed 5:")]
    assert len(line) == 1
    values = [float(v) for v in re.findall(r"(?:loss|parameters) ([0-9.e+-]+)", line[0])]
    assert len(values) == 6 and max(values) < 1e-2, line


@pytest.mark.parametrize("args", [("10", "train"), ("1000", "chain")])
def test_tier_steps_reports_the_first_run_and_the_fastest_step(args):
    env = dict(os.environ, JITFLOW_COMPILE="sync")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "tier_steps.py"),
                        *args], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    line = p.stdout.strip().splitlines()[-1]
    assert line.startswith(f"{args[1]} n={args[0]} mode=sync pipeline=")
    assert "first run" in line and line.endswith(" ms")
