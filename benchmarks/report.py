"""Turn Results into the report: Markdown tables, the DESIGN.md §7 targets, JSON and a chart."""
from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import dataclass
from typing import Optional

import numpy as np

from benchmarks.harness import Results, format_cell, format_seconds
from benchmarks.peers import peer_versions

__all__ = ["TARGETS", "Target", "base_peer", "evaluate_targets", "machine_facts",
           "target_summary", "to_json", "to_markdown", "write_chart"]

BASES = ("jitflow", "jitflow-interp")


@dataclass(frozen=True)
class Target:
    """One DESIGN.md §7 target.

    kind "speedup": jitflow must be at least `value` times faster than `peer` on `case`
    (peer time / jitflow time >= value). kind "seconds": the jitflow figure `field` of `case`
    ("median" or an extra such as "rebatch_s") must be at most `value` seconds."""

    text: str
    case: str
    kind: str
    value: float
    peer: str = ""
    field: str = "median"


def _chain_targets() -> list:
    out = []
    for n in ("1e6", "1e7"):
        for dt in ("f32", "f64"):
            case = f"chain/{n}/{dt}"
            out.append(Target(f"fused chain {n} {dt} >= 3x NumPy", case, "speedup", 3, "numpy"))
            out.append(Target(f"fused chain {n} {dt} >= 1x JAX", case, "speedup", 1, "jax"))
    return out


TARGETS = [
    Target("Session.run on the seeds' graph >= 40x TF1", "seeds/run", "speedup", 40, "tf1"),
    Target("Session.run on the seeds' graph >= 2x JAX jit", "seeds/run", "speedup", 2, "jax"),
    Target("make_callable within 3x of a bare Numba call", "seeds/callable", "speedup", 1 / 3,
           "numba-hand"),
    *_chain_targets(),
    Target("MLP step batch 64 >= 2x TF1", "mlp/b64", "speedup", 2, "tf1"),
    Target("MLP step batch 64 >= 1.2x JAX", "mlp/b64", "speedup", 1.2, "jax"),
    Target("MLP step batch 1024 >= 1x JAX", "mlp/b1024", "speedup", 1, "jax"),
    Target("row reduction 1e6 >= 1x JAX", "reduce/1024x1024", "speedup", 1, "jax"),
    Target("CNN step batch 32 >= 1.2x JAX", "cnn/b32", "speedup", 1.2, "jax"),
    Target("CNN step batch 32 >= 2x TF1", "cnn/b32", "speedup", 2, "tf1"),
    Target("CNN step batch 128 >= 1.2x JAX", "cnn/b128", "speedup", 1.2, "jax"),
    Target("CNN step batch 128 >= 2x TF1", "cnn/b128", "speedup", 2, "tf1"),
    Target("RNN step batch 32 >= 1.2x JAX", "rnn/b32", "speedup", 1.2, "jax"),
    Target("linear regression via Session.run >= 30x TF1", "linreg", "speedup", 30, "tf1"),
    Target("linear regression via Session.run >= 3x JAX", "linreg", "speedup", 3, "jax"),
    Target("MLP train step cold compile, first result <= 1 s (incl. import)", "compile/cold",
           "seconds", 1.0),
    Target("new process with cached kernels: first result <= 0.4 s incl. import jitflow",
           "compile/cached", "seconds", 0.4),
    Target("no recompilation when only a None dim changes (first step at 2x batch <= 0.1 s)",
           "compile/cold", "seconds", 0.1, field="rebatch_s"),
]


def base_peer(results: Results) -> Optional[str]:
    """The jitflow peer the ratios are about: compiled if registered, else the interpreter."""
    for name in BASES:
        if name in results.peer_status and results.peer_status[name] is None:
            return name
    return None


def evaluate_targets(results: Results, targets=TARGETS) -> list:
    """One dict per target: text, required, measured, status (met / missed / not measured)."""
    base = "jitflow"  # targets are about the compiled backend only
    case_ids = {c.id for c in results.cases}
    rows = []
    for t in targets:
        row = {"target": t.text, "case": t.case, "kind": t.kind, "peer": t.peer,
               "required": t.value, "measured": None, "status": "not measured", "why": ""}
        rows.append(row)
        if t.case not in case_ids:
            row["why"] = "case not in this run"
            continue
        cell = results.cell(t.case, base)
        if cell is None or cell.status != "ok":
            row["why"] = f"jitflow: {cell.status if cell else 'not run'}"
            continue
        if t.kind == "speedup":
            other = results.cell(t.case, t.peer)
            ratio = results.speedup(t.case, base, t.peer)
            if ratio is None:
                row["why"] = f"{t.peer}: {other.status if other else 'not run'}"
                continue
            row["measured"] = ratio
            row["status"] = "met" if ratio >= t.value else "missed"
        else:
            value = cell.timing.median if t.field == "median" else cell.extra.get(t.field)
            if value is None:
                row["why"] = f"no {t.field} figure"
                continue
            row["measured"] = value
            row["status"] = "met" if value <= t.value else "missed"
    return rows


def target_summary(results: Results) -> list:
    """One plain line per target: "target: <text> -> measured 57x: met"."""
    out = []
    for row in evaluate_targets(results):
        if row["measured"] is None:
            got = f"not measured ({row['why']})"
        elif row["kind"] == "speedup":
            got = f"measured {row['measured']:.3g}x: {row['status']}"
        else:
            got = f"measured {format_seconds(row['measured'])}: {row['status']}"
        out.append(f"target: {row['target']} -> {got}")
    return out


def _target_line(row: dict) -> str:
    if row["kind"] == "speedup":
        req, got = f">= {row['required']:.3g}x", (f"{row['measured']:.3g}x"
                                                 if row["measured"] is not None else None)
    else:
        req, got = f"<= {format_seconds(row['required'])}", (
            format_seconds(row["measured"]) if row["measured"] is not None else None)
    measured = got if got is not None else f"- ({row['why']})"
    return f"| {row['target']} | `{row['case']}` | {req} | {measured} | {row['status']} |"


def machine_facts() -> dict:
    """CPU, cores, OS, library versions and the thread settings in effect."""
    cpu, flags = platform.processor() or "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and not cpu:
                    cpu = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    try:
        import llvmlite.binding as llvm
        llvm_cpu = llvm.get_host_cpu_name()
    except Exception:  # noqa: BLE001  (a fact we can do without)
        llvm_cpu = None
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=os.path.dirname(__file__), timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        commit = ""
    from benchmarks.threads import THREAD_ENV
    return {
        "cpu": cpu, "llvm_cpu": llvm_cpu, "cores": os.cpu_count(),
        "simd": [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw") if f in flags],
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "os": platform.platform(), "python": platform.python_version(),
        "versions": peer_versions(), "git_commit": commit.strip(),
        "thread_env": {k: os.environ.get(k) for k in THREAD_ENV} | (
            {"JITFLOW_THREADS": os.environ["JITFLOW_THREADS"]} if "JITFLOW_THREADS" in os.environ
            else {}),
    }


def _peer_title(results: Results, name: str) -> str:
    peer = next(p for p in results.peers if p.name == name)
    return peer.label or name


def _first_calls(results, names: list) -> list:
    """Every peer's first step of the model cases (CNN, RNN): build + compile + run, wall."""
    cases = [c for c in results.cases if getattr(c, "group", "") in ("cnn", "rnn")]
    if not cases:
        return []
    lines = ["## First step of the models, every peer (wall)", "",
             "| case | " + " | ".join(_peer_title(results, n) for n in names) + " |",
             "|---" * (len(names) + 1) + "|"]
    for case in cases:
        firsts = []
        for n in names:
            cell = results.cell(case.id, n)
            firsts.append(format_seconds(cell.first_call_s)
                          if cell is not None and cell.first_call_s is not None else "-")
        lines.append(f"| {case.title} | " + " | ".join(firsts) + " |")
    lines += ["", "In the same process as the other cases, after them; jitflow compiles "
              "synchronously here (`JITFLOW_COMPILE=sync`) unless its kernels are on disk. "
              "`benchmarks/rnn_first_step.py` measures its first step with an empty cache in "
              "the default background mode.", ""]
    return lines


def cpu_use(results: Results, names: list) -> dict:
    """{peer: (median cores over its timed cases, largest, the case with the largest)}: the
    process's CPU time over wall time while the peer's samples ran, all threads counted."""
    out = {}
    for n in names:
        seen = [(cell.timing.cores, c.title) for c in results.cases
                for cell in [results.cell(c.id, n)]
                if cell is not None and cell.status == "ok" and cell.timing is not None
                and cell.timing.cores is not None]
        if seen:
            top = max(seen)
            out[n] = (float(np.median([v for v, _ in seen])), top[0], top[1])
    return out


def _cpu_use(results: Results, names: list, facts: dict) -> list:
    use = cpu_use(results, names)
    if not use:
        return []
    lines = ["", "## CPU use while timed", "",
             f"CPU time of the process over wall time during each peer's samples (every thread "
             f"counted; the process could use {facts.get('affinity')} CPU(s)). A peer above "
             "its thread count ran work on threads it was not given.", "",
             "| peer | median over cases | largest | case with the largest |", "|---|---|---|---|"]
    for n, (med, top, title) in use.items():
        lines.append(f"| {_peer_title(results, n)} | {med:.2f} | {top:.2f} | {title} |")
    return lines


def to_markdown(results: Results, facts: dict, title: str = "jitflow benchmarks") -> str:
    """The whole report as Markdown."""
    base = base_peer(results)
    names = [p.name for p in results.peers]
    lines = [f"# {title}", ""]
    lines += [f"Run {facts.get('date', '')}, mode `{facts.get('mode', '')}`, "
              f"{results.seconds:.0f} s. Median per step with the interquartile range in "
              "brackets; MLP rows in training steps per second, compile rows in seconds to "
              "the first result (from the child process's first statement). Every cell was "
              "checked against NumPy's result first: WRONG marks a mismatch.", ""]
    lines += ["| case | " + " | ".join(_peer_title(results, n) for n in names) + " |",
              "|---" * (len(names) + 1) + "|"]
    for case in results.cases:
        cells = [format_cell(case, results.cell(case.id, n)) for n in names]
        lines.append(f"| {case.title} | " + " | ".join(cells) + " |")
    lines.append("")
    if base is None:
        lines += ["No jitflow backend ran, so there are no ratios.", ""]
    else:
        others = [n for n in names if n != base and n not in BASES[:BASES.index(base)]]
        lines += [f"## Speedup of {_peer_title(results, base)} (peer time / jitflow time)", ""]
        if base != "jitflow":
            lines += ["**The compiled backend did not run; these ratios are the "
                      "interpreter's.**", ""]
        lines += ["| case | " + " | ".join(f"vs {_peer_title(results, n)}" for n in others)
                  + " | jitflow first call |", "|---" * (len(others) + 2) + "|"]
        for case in results.cases:
            ratios = [results.speedup(case.id, base, n) for n in others]
            cell = results.cell(case.id, base)
            first = (format_seconds(cell.first_call_s)
                     if cell is not None and cell.first_call_s is not None else "-")
            lines.append(f"| {case.title} | " + " | ".join(
                f"{r:.2f}x" if r is not None else "-" for r in ratios) + f" | {first} |")
        lines += ["", "\"jitflow first call\" is the case's first step (for linear regression "
                  "the first block of steps), which builds the plan and compiles the kernels "
                  "or loads them from the cache in `JITFLOW_CACHE_DIR`.", ""]
        lines += _first_calls(results, names)
    lines += ["## DESIGN.md §7 targets", "", "| target | case | required | measured | status |",
              "|---|---|---|---|---|"]
    lines += [_target_line(r) for r in evaluate_targets(results)]
    lines += ["", "Not measured by this suite: \"within 2x of the time the math needs at full "
              "SIMD width\" (needs a roofline model of the chain).", ""]
    lines += ["## Peers", ""]
    for p in results.peers:
        why = results.peer_status.get(p.name)
        lines.append(f"- **{p.label}** (`{p.name}`): " + ("ran" if why is None
                                                           else f"skipped: {why}"))
    lines += _cpu_use(results, names, facts)
    notes = [(c, n, results.cell(c.id, n)) for c in results.cases for n in names]
    notes = [(c, n, cell) for c, n, cell in notes
             if cell is not None and cell.status not in ("ok", "n/a")
             and results.peer_status.get(n) is None]
    if notes:
        lines += ["", "## Cells that did not produce a time", ""]
        lines += [f"- `{c.id}` on `{n}`: {cell.status}: {cell.note}" for c, n, cell in notes]
    compile_rows = [c for c in results.cases if c.group == "compile"]
    if compile_rows:
        lines += ["", "## Compile-time breakdown (medians, seconds)", "",
                  "| case | peer | import | build graph | first step | total | process wall |"
                  " step at 2x batch | new cache files |", "|---|---|---|---|---|---|---|---|---|"]
        for c in compile_rows:
            for n in names:
                cell = results.cell(c.id, n)
                if cell is None or cell.status != "ok":
                    continue
                e = cell.extra
                lines.append(f"| {c.id} | {n} | {e['import_s']:.3f} | {e['build_s']:.3f} | "
                             f"{e['first_step_s']:.3f} | {cell.timing.median:.3f} | "
                             f"{e['wall_s']:.3f} | {e['rebatch_s']:.4f} | "
                             f"{e.get('new_cache_files', 0):.0f} |")
        lines += ["", "Only jitflow keeps kernels on disk, so the \"kernels on disk\" row runs "
                  "jitflow (its cache filled by the cold run), the interpreter and NumPy. "
                  "\"step at 2x batch\" is the first step after the batch size changed "
                  "(a recompilation would show here); \"new cache files\" counts what the "
                  "child wrote to its cache directory (0 in the second row means every kernel "
                  "came from the disk cache)."]
    lines += ["", "## Machine", ""]
    versions = ", ".join(f"{k} {v}" for k, v in facts["versions"].items() if v)
    missing = ", ".join(k for k, v in facts["versions"].items() if not v)
    lines += [f"- CPU: {facts['cpu']} (LLVM: {facts.get('llvm_cpu')}; "
              f"{', '.join(facts.get('simd', []))}); {facts['cores']} cores "
              f"({facts['affinity']} usable by this process); {facts['os']}",
              f"- Python {facts['python']}; {versions}" + (f" (not installed: {missing})"
                                                           if missing else ""),
              "- Thread settings, set before any import: " + ", ".join(
                  f"`{k}={v}`" for k, v in facts["thread_env"].items()) + "; TF sessions use "
              "`intra_op_parallelism_threads` from `TF_NUM_INTRAOP_THREADS`, "
              "`inter_op_parallelism_threads=1`.",
              f"- Repetitions: {results.budget.describe()}.",
              f"- git commit {facts.get('git_commit', '')}", ""]
    return "\n".join(lines)


def to_json(results: Results, facts: dict) -> str:
    """Every raw figure: cells (with all timing samples' statistics), ratios, targets, facts."""
    base = base_peer(results)
    data = {
        "facts": facts,
        "base": base,
        "peers": {p.name: {"label": p.label, "skipped": results.peer_status.get(p.name)}
                  for p in results.peers},
        "cases": [{"id": c.id, "title": c.title, "group": c.group, "metric": c.metric,
                   "per_sample": c.per_sample, "params": c.params,
                   "cells": {p.name: results.cell(c.id, p.name).as_dict()
                             for p in results.peers if results.cell(c.id, p.name)},
                   "speedup": {p.name: results.speedup(c.id, base, p.name)
                               for p in results.peers if base and p.name != base}}
                  for c in results.cases],
        "targets": evaluate_targets(results),
        "cpu_use": {n: {"median": m, "largest": t, "case": c} for n, (m, t, c) in
                    cpu_use(results, [p.name for p in results.peers]).items()},
        "seconds": results.seconds,
    }
    return json.dumps(data, indent=1, default=str)


def write_chart(results: Results, path: str) -> Optional[str]:
    """A bar chart of jitflow's speedups (log scale); returns the path, or None without data."""
    base = base_peer(results)
    if base is None:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    others = [p.name for p in results.peers if p.name != base
              and p.name not in BASES[:BASES.index(base)]
              and results.peer_status.get(p.name) is None]
    cases = results.cases
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(cases) + 1.8), dpi=80)
    height = 0.8 / max(1, len(others))
    for j, name in enumerate(others):
        ys, xs = [], []
        for i, c in enumerate(cases):
            r = results.speedup(c.id, base, name)
            if r is not None:
                ys.append(i + (j - (len(others) - 1) / 2) * height)
                xs.append(r)
        ax.barh(ys, xs, height=height, label=_peer_title(results, name))
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(cases)))
    ax.set_yticklabels([c.id for c in cases], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"speedup of {_peer_title(results, base)} (peer time / jitflow time; "
                  ">1 means jitflow is faster)")
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(others),
              frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
