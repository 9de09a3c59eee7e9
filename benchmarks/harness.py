"""The timing library: adaptive repetition, result checks, and the case x peer loop.

A *case* is one workload (inputs plus one implementation per peer family); a *peer* is one way
of running it (jitflow compiled, jitflow interpreted, NumPy, TF1, JAX...). For every case the
NumPy peer runs first and its first result is the reference; every other peer's first result is
compared with it before its time counts, so a fast wrong answer shows as WRONG, never as a win.
The peers that passed are then timed together, one sample of each per round, so that the load
of a shared machine falls on all of them alike.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

__all__ = [
    "Budget", "Case", "Cell", "FULL", "NotApplicable", "Peer", "QUICK", "Results", "Runner",
    "TINY", "Timing", "Unavailable", "compare", "measure", "measure_interleaved", "run_suite",
    "snapshot",
]

REFERENCE = "numpy"


class Unavailable(Exception):
    """A peer (or one case on a peer) cannot run here; the message says why."""


class NotApplicable(Unavailable):
    """The case has no implementation for this peer, by design (shown as "-")."""


# -- timing -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    """How long to time one cell: at least `min_time` s and `min_samples` samples, stopping
    early once `max_time` s are spent (with at least 2 samples) or `max_samples` are taken.
    Calls faster than `sample_target` s are grouped so one sample lasts about that long."""

    min_time: float = 0.2
    max_time: float = 1.0
    min_samples: int = 7
    max_samples: int = 2000
    warmup: int = 2
    sample_target: float = 2e-3
    processes: int = 3  # repetitions of a cell measured in fresh processes

    def describe(self) -> str:
        return (f"{self.min_time:g}-{self.max_time:g} s per cell, at least {self.min_samples} "
                f"samples (at most {self.max_samples}), {self.warmup} warm-up call(s) after the "
                f"checked first call, calls grouped into samples of about "
                f"{self.sample_target * 1e3:g} ms, {self.processes} fresh process(es) per "
                "compile-time cell")


FULL = Budget()
QUICK = Budget(min_time=0.05, max_time=0.3, min_samples=3, max_samples=500, warmup=1,
               sample_target=1e-3, processes=1)
TINY = Budget(min_time=0.0, max_time=0.0, min_samples=1, max_samples=2, warmup=0,
              sample_target=0.0, processes=1)


@dataclass
class Timing:
    """Seconds per call, one entry per sample (each sample may average several calls)."""

    samples: list
    calls: int = 0
    cores: Optional[float] = None   # process CPU time / wall time over the samples (all threads)

    def _q(self, q: float) -> float:
        return float(np.percentile(self.samples, q))

    @property
    def median(self) -> float:
        return self._q(50)

    @property
    def q1(self) -> float:
        return self._q(25)

    @property
    def q3(self) -> float:
        return self._q(75)

    @property
    def min(self) -> float:
        return float(np.min(self.samples))

    @property
    def max(self) -> float:
        return float(np.max(self.samples))

    def scaled(self, factor: float) -> "Timing":
        """The same samples divided by `factor` (a sample of 1000 steps -> time per step)."""
        return Timing([s / factor for s in self.samples], self.calls, self.cores)

    def as_dict(self) -> dict:
        return {"median": self.median, "q1": self.q1, "q3": self.q3, "min": self.min,
                "max": self.max, "samples": len(self.samples), "calls": self.calls,
                "cores": None if self.cores is None else round(self.cores, 3),
                "values": [float(f"{v:.4g}") for v in self.samples]}


def _group_size(one: float, budget: Budget) -> int:
    """How many calls make one sample so that a sample lasts about `budget.sample_target`."""
    if budget.sample_target > 0 and one < budget.sample_target:
        return min(10_000, max(1, int(budget.sample_target / max(one, 1e-8))))
    return 1


def _enough(n: int, total: float, budget: Budget) -> bool:
    return (n >= budget.max_samples or (n >= budget.min_samples and total >= budget.min_time)
            or (n >= 2 and total >= budget.max_time))


def measure_interleaved(fns: dict, budget: Budget) -> dict:
    """Time several functions in rounds, one sample of each per round, so that a change in the
    machine's load (other processes on a shared machine) hits every peer alike.

    Each function gets `budget.warmup` warm-up calls and one calibration call first; each stops
    on its own once it has enough samples. Returns {name: Timing, or the exception it raised};
    a Timing's `cores` is the process's CPU time over the wall time of its samples, which shows
    a peer that runs on more threads than it was given. GC is off while timing (as in timeit)."""
    out: dict = {}
    group: dict = {}
    for name, fn in fns.items():
        try:
            for _ in range(budget.warmup):
                fn()
            t0 = time.perf_counter()
            fn()
            group[name] = _group_size(time.perf_counter() - t0, budget)
        except Exception as e:  # noqa: BLE001  (reported in the peer's cell)
            out[name] = e
    samples: dict = {name: [] for name in group}
    totals = dict.fromkeys(group, 0.0)
    cpu = dict.fromkeys(group, 0.0)
    active = list(group)
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        while active:
            for name in list(active):
                fn, k = fns[name], group[name]
                try:
                    c0, t0 = time.process_time(), time.perf_counter()
                    for _ in range(k):
                        fn()
                    dt = time.perf_counter() - t0
                    dc = time.process_time() - c0
                except Exception as e:  # noqa: BLE001
                    out[name] = e
                    active.remove(name)
                    continue
                samples[name].append(dt / k)
                totals[name] += dt
                cpu[name] += dc
                if _enough(len(samples[name]), totals[name], budget):
                    active.remove(name)
    finally:
        if gc_was_on:
            gc.enable()
    for name in group:
        out.setdefault(name, Timing(samples[name], calls=len(samples[name]) * group[name],
                                    cores=cpu[name] / totals[name] if totals[name] > 0 else None))
    return out


def measure(fn: Callable[[], Any], budget: Budget) -> Timing:
    """Time one function (see `measure_interleaved`); re-raises what it raised."""
    result = measure_interleaved({"fn": fn}, budget)["fn"]
    if isinstance(result, Exception):
        raise result
    return result


# -- checking ------------------------------------------------------------------------------------
def snapshot(value: Any) -> Any:
    """A copy of a result that later steps cannot change (weights are updated in place and
    outputs may live in reused buffers)."""
    if isinstance(value, (list, tuple)):
        return tuple(snapshot(v) for v in value)
    return np.array(value, copy=True)


def compare(got: Any, want: Any, rtol: float, atol: float, path: str = "result") -> Optional[str]:
    """None when `got` matches `want` (same nesting, shapes, values within tolerance, and the
    same float dtype for arrays: computing a float32 case in float64 is not the same work),
    else a one-line description of the first difference."""
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"{path}: expected a sequence of {len(want)}, got {type(got).__name__}"
        for i, (g, w) in enumerate(zip(got, want)):
            msg = compare(g, w, rtol, atol, f"{path}[{i}]")
            if msg:
                return msg
        return None
    try:
        g = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return f"{path}: not numeric ({type(got).__name__})"
    w = np.asarray(want, dtype=np.float64)
    if g.shape != w.shape:
        return f"{path}: shape {g.shape} != expected {w.shape}"
    g_dt, w_dt = np.asarray(got).dtype, np.asarray(want).dtype
    if w.ndim and g_dt != w_dt and np.issubdtype(w_dt, np.floating):
        return f"{path}: dtype {g_dt} != expected {w_dt}"
    bad = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        i = np.unravel_index(np.argmax(bad), bad.shape) if bad.ndim else ()
        return (f"{path}: {int(bad.sum())} of {bad.size} values differ (e.g. at {i}: "
                f"{g[i]!r} vs {w[i]!r}; rtol={rtol:g}, atol={atol:g})")
    return None


# -- cases and peers -----------------------------------------------------------------------------
@dataclass
class Runner:
    """One peer's prepared workload.

    `step()` is what is timed; `result(first)` maps the first step's output to the value checked
    against the reference (by default the output itself: training steps read their variables
    back here). A runner that times itself (a fresh process per sample) sets `timed`, which
    returns (Timing, the checked value, a dict of extra figures). `call(*inputs)` runs the step
    on other inputs (a new batch size), where the case offers it. `close()` releases sessions."""

    step: Optional[Callable[[], Any]] = None
    result: Callable[[Any], Any] = lambda out: out
    close: Callable[[], None] = lambda: None
    timed: Optional[Callable[[Budget], tuple]] = None
    call: Optional[Callable[..., Any]] = None


@dataclass
class Case:
    """One row of the table: a workload with one implementation per peer family.

    `impls[family](ctx, data)` returns a Runner (a key may also name one peer), where `ctx` is
    what the peer's loader returned and `data` is `make_data(rng)`, shared by all peers.
    `per_sample` is how many steps one `step()` call runs (the table shows time per step).
    `needs` lists the TF1 API names the graph family uses ("nn.relu"; "a|b" for alternatives)
    so a missing op reads as unavailable."""

    id: str
    title: str
    group: str
    make_data: Callable[[np.random.Generator], dict]
    impls: dict
    rtol: float = 1e-5
    atol: float = 1e-6
    metric: str = "time"  # "time" (s per step) or "rate" (steps per second)
    per_sample: int = 1
    needs: tuple = ()
    params: dict = field(default_factory=dict)


@dataclass
class Peer:
    """One competitor: a family of implementations plus a loader that imports it lazily.

    `load()` returns the context handed to the case implementations or raises Unavailable.
    `lacks(ctx, needs)` lists the names in `needs` this peer does not provide."""

    name: str
    family: str
    load: Callable[[], Any]
    label: str = ""
    lacks: Callable[[Any, Sequence[str]], list] = lambda ctx, needs: []
    _ctx: Any = field(default=None, repr=False)
    _why: Optional[str] = field(default=None, repr=False)
    _loaded: bool = field(default=False, repr=False)

    def context(self) -> Any:
        """The loaded context (loading once); raises Unavailable with the reason."""
        if not self._loaded:
            self._loaded = True
            try:
                self._ctx = self.load()
            except Unavailable as e:
                self._why = str(e)
            except Exception as e:  # noqa: BLE001  (a broken install is reported, not fatal)
                self._why = f"failed to load: {type(e).__name__}: {e}"
        if self._why is not None:
            raise Unavailable(self._why)
        return self._ctx

    def runner(self, case: Case, data: dict) -> Runner:
        """This peer's Runner for `case`, or Unavailable."""
        ctx = self.context()
        impl = case.impls.get(self.name, case.impls.get(self.family))
        if impl is None:
            raise NotApplicable(f"no {self.family} implementation of this case")
        missing = self.lacks(ctx, case.needs)
        if missing:
            raise Unavailable("missing " + ", ".join(missing))
        return impl(ctx, data)


@dataclass
class Cell:
    """One (case, peer) result. status: ok, WRONG, unavailable, error, n/a (not implemented
    for this peer by design)."""

    status: str
    timing: Optional[Timing] = None
    first_call_s: Optional[float] = None
    note: str = ""
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"status": self.status, "note": self.note, "first_call_s": self.first_call_s,
                "timing": self.timing.as_dict() if self.timing else None, "extra": self.extra}


@dataclass
class Results:
    """Everything one run measured, in case and peer order."""

    cases: list
    peers: list
    cells: dict  # (case id, peer name) -> Cell
    peer_status: dict  # peer name -> None (available) or the reason it is not
    budget: Budget
    seconds: float = 0.0

    def cell(self, case_id: str, peer: str) -> Optional[Cell]:
        return self.cells.get((case_id, peer))

    def speedup(self, case_id: str, base: str, peer: str) -> Optional[float]:
        """peer time / base time, when both cells are ok."""
        b, p = self.cell(case_id, base), self.cell(case_id, peer)
        if b is None or p is None or b.status != "ok" or p.status != "ok":
            return None
        return p.timing.median / b.timing.median


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def _prepare_cell(peer: Peer, case: Case, data: dict, want: Any, budget: Budget) -> tuple:
    """Build one cell's runner, run its first step and check it against `want`.

    Returns (Cell, the checked value, the runner still to be timed or None). Self-timed runners
    (fresh processes) are timed here; every runner not returned is closed here."""
    try:
        runner = peer.runner(case, data)
    except NotApplicable as e:
        return Cell("n/a", note=str(e)), None, None
    except Unavailable as e:
        return Cell("unavailable", note=str(e)), None, None
    except (NotImplementedError, AttributeError) as e:
        return Cell("unavailable", note=_first_line(e)), None, None
    except Exception as e:  # noqa: BLE001  (one broken cell must not stop the run)
        return Cell("error", note="building: " + _first_line(e)), None, None
    keep = False
    try:
        if runner.timed is not None:
            timing, got, extra = runner.timed(budget)
            cell = Cell("ok", timing=timing, extra=extra)
        else:
            t0 = time.perf_counter()
            out = runner.step()
            first = time.perf_counter() - t0
            got = snapshot(runner.result(out))
            cell = Cell("ok", first_call_s=first)
        if want is not None:
            msg = compare(got, want, case.rtol, case.atol)
            if msg:
                return Cell("WRONG", note=msg, first_call_s=cell.first_call_s), got, None
        keep = cell.timing is None
        return cell, got, (runner if keep else None)
    except Unavailable as e:
        return Cell("unavailable", note=str(e)), None, None
    except Exception as e:  # noqa: BLE001
        return Cell("error", note=_first_line(e)), None, None
    finally:
        if not keep:
            _close(runner)


def _close(runner: Runner) -> None:
    try:
        runner.close()
    except Exception:  # noqa: BLE001  (closing is best effort)
        pass


def _run_case(case: Case, peers: Sequence[Peer], budget: Budget, seed: int) -> dict:
    """All cells of one case: first steps and checks (reference first), then timing of every
    correct peer, interleaved. Returns {peer name: Cell}."""
    data = case.make_data(np.random.default_rng(seed))
    cells: dict = {}
    runners: dict = {}
    want = None
    try:
        for peer in peers:
            cell, got, runner = _prepare_cell(peer, case, data, want, budget)
            if peer.name == REFERENCE:
                if cell.status != "ok":
                    raise RuntimeError(f"the NumPy reference failed on {case.id}: {cell.note}")
                want = got
            cells[peer.name] = cell
            if runner is not None:
                runners[peer.name] = runner
        timings = measure_interleaved({n: r.step for n, r in runners.items()}, budget)
        for name, t in timings.items():
            if isinstance(t, Exception):
                cells[name] = Cell("error", note=_first_line(t),
                                   first_call_s=cells[name].first_call_s)
            else:
                cells[name].timing = t.scaled(case.per_sample)
    finally:
        for runner in runners.values():
            _close(runner)
    return cells


def run_suite(cases: Sequence[Case], peers: Sequence[Peer], budget: Budget,
              progress: Optional[Callable[[str], None]] = None, seed: int = 0) -> Results:
    """Run every case on every peer (reference first); `progress` gets one line per case."""
    peers = sorted(peers, key=lambda p: p.name != REFERENCE)
    if not peers or peers[0].name != REFERENCE:
        raise ValueError(f"the peers must include the {REFERENCE!r} reference")
    start = time.perf_counter()
    cells: dict = {}
    for i, case in enumerate(cases):
        for name, cell in _run_case(case, peers, budget, seed).items():
            cells[(case.id, name)] = cell
        gc.collect()
        if progress:
            progress(_progress_line(i, len(cases), case, peers, cells))
    status = {}
    for p in peers:
        try:
            p.context()
            status[p.name] = None
        except Unavailable as e:
            status[p.name] = str(e)
    return Results(list(cases), list(peers), cells, status, budget,
                   time.perf_counter() - start)


def _unit(s: float) -> tuple:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return unit, scale
    return "ns", 1e-9


def _num(v: float) -> str:
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def format_seconds(s: float) -> str:
    """A time with a readable unit: 812 ns, 3.41 us, 12.3 ms, 1.52 s."""
    unit, scale = _unit(s)
    return f"{_num(s / scale)} {unit}"


def format_cell(case: Case, cell: Optional[Cell], spread: bool = True) -> str:
    """A cell as table text: median (and IQR, in the median's unit) when ok, else its status."""
    if cell is None or cell.status == "n/a":
        return "-"
    if cell.status != "ok":
        return cell.status
    t = cell.timing
    if case.metric == "rate":
        text = f"{1 / t.median:,.0f}/s"
        return text + (f" [{1 / t.q3:,.0f}-{1 / t.q1:,.0f}]" if spread else "")
    unit, scale = _unit(t.median)
    text = f"{_num(t.median / scale)} {unit}"
    return text + (f" [{_num(t.q1 / scale)}-{_num(t.q3 / scale)}]" if spread else "")


def _progress_line(i: int, n: int, case: Case, peers: Sequence[Peer], cells: dict) -> str:
    parts = [f"{p.name} {format_cell(case, cells[(case.id, p.name)], spread=False)}"
             for p in peers if cells[(case.id, p.name)].status not in ("unavailable", "n/a")]
    return f"[{i + 1:2d}/{n}] {case.title}: " + " | ".join(parts)
