"""Every `JITFLOW_*` environment variable: its default, its meaning, and one place that reads it.

Values are read from the environment when asked for (tests and programs may set a variable
after `import jitflow`). `python -m jitflow config` prints the values in effect; the README's
configuration table is `markdown_table()` (a test keeps the two in step).

Use: `config.get("JITFLOW_DEBUG")` (parsed: int, bool, str...), `config.debug_level()`,
`config.strict()`; `config.debug(msg)` prints a `JITFLOW_DEBUG` message to stderr.
"""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Callable, Optional

__all__ = ["Var", "VARS", "get", "raw", "values", "markdown_table", "debug_level", "debug",
           "strict", "threads", "parallel_min"]


def _int(text: str) -> int:
    return int(text)


def _flag(text: str) -> bool:
    return text.strip().lower() not in ("", "0", "false", "no", "off")


def _str(text: str) -> str:
    return text.strip()


def _lower(text: str) -> str:
    return text.strip().lower()


@dataclass(frozen=True)
class Var:
    """One variable: `default` as the text it would be set to (None: computed, see
    `meaning`), `parse` from text to value, `choices` (parsed values that are valid)."""

    name: str
    default: Optional[str]
    meaning: str
    parse: Callable = _str
    choices: Optional[tuple] = None


VARS: dict = {v.name: v for v in [
    Var("JITFLOW_BACKEND", "numba", "backend of `tf.Session()`: `numba` (CPU), `interpreter` "
        "(NumPy references) or `cuda` (NVIDIA GPU)", _lower, ("numba", "interpreter", "cuda")),
    Var("JITFLOW_COMPILE", "auto", "how kernels compile: `auto` (quick code at once, optimized "
        "code on a thread), `sync` (optimized code at once), `quick` (quick code only), "
        "`numba` (Numba kernels); every mode gives the same bits", _lower,
        ("auto", "sync", "quick", "numba", "background", "thread", "tier1")),
    Var("JITFLOW_DEBUG", "0", "`1` compiles and cache events, `2` per-run timings, `3` plans, "
        "`4` generated source (to stderr)", _int),
    Var("JITFLOW_STRICT", "0", "`1`: generated code that fails to compile or run raises "
        "instead of falling back to the references (tests, the fuzzer)", _flag),
    Var("JITFLOW_POISON", "0", "`1`: every buffer compiled code allocates starts as NaN (an "
        "unlikely integer), so a read of an element never written shows", _flag),
    Var("JITFLOW_CACHE", "1", "`0`: no disk cache of compiled kernels", _flag),
    Var("JITFLOW_CACHE_DIR", None, "disk cache folder (default `$XDG_CACHE_HOME/jitflow` or "
        "`~/.cache/jitflow`); refused unless it is yours and not writable by others"),
    Var("JITFLOW_MEMORY_CACHE_ENTRIES", "256", "kernels kept in the in-memory LRU", _int),
    Var("JITFLOW_MEMORY_CACHE_MB", "256", "megabytes the in-memory LRU may hold (estimate)",
        float),
    Var("JITFLOW_THREADS", None, "threads for kernels on large operands (default: the CPUs "
        "this process may use); `1` turns parallel kernels off", _int),
    Var("JITFLOW_PARALLEL_MIN", "1048576", "elements from which a kernel runs its parallel "
        "variant", _int),
    Var("JITFLOW_SPLIT_ABOVE", "512", "weight (ops, row reductions counting 13) above which a "
        "run of ops is split into several kernels", _int),
    Var("JITFLOW_KERNEL_OPS", "48", "longest kernel of a split run (ops)", _int),
    Var("JITFLOW_WINOGRAD", "1", "convolutions on Winograd: `1` 3x3 and 5x5 filters, `3x3` "
        "3x3 only, `0` none (im2col)", _lower, ("1", "fast", "3x3", "0")),
    Var("JITFLOW_VECTOR_BYTES", None, "bytes per vector the fast path's loops are printed for "
        "(default: the host's, 64 with AVX-512, 32 with AVX, else 16); `0` prints scalar loops "
        "(the same bits either way)", _int),
    Var("JITFLOW_OPT_PIPELINE", "light", "the fast path's optimized code: `light` (the "
        "printer's vector loops, inlining, cheap clean-ups) or `o3` (LLVM's O3 with its "
        "vectorizers: slower to compile, for loops the printer leaves scalar)", _lower,
        ("light", "o3")),
    Var("JITFLOW_LIBM", "0", "`1`: libm's exp/log/tanh instead of jitflow's vectorized math",
        _flag),
    Var("JITFLOW_NATIVE_ENTRY", "1", "`0`: the fast path's kernels are called through a "
        "Python wrapper instead of their native entry point (comparisons, diagnosis)", _flag),
    Var("JITFLOW_MALLOC_TUNE", "1", "`0`: leave glibc's allocator thresholds alone", _flag),
    Var("JITFLOW_CUDA_BLOCK", None, "threads per CUDA block (default 128; 8 on the simulator)",
        _int),
    Var("JITFLOW_CUDA_TILE", None, "matmul tile of the CUDA backend (default 16; 4 on the "
        "simulator)", _int),
    Var("JITFLOW_CUDA_BLAS", "auto", "the CUDA backend's float products: `auto` CuPy's cuBLAS "
        "where it imports and sees a GPU (not on the simulator), `cupy` that or an error, "
        "`none` the tiled kernel", _lower, ("auto", "cupy", "none")),
]}


def raw(name: str) -> Optional[str]:
    """The variable's text in the environment (None when unset or empty)."""
    if name not in VARS:
        raise KeyError(f"unknown jitflow variable {name}")
    text = os.environ.get(name, "")
    return text if text.strip() else None


_WARNED: set = set()


def get(name: str):
    """The variable's parsed value: the environment's when set and valid, else the default
    (None where the default is computed by its user). An invalid value is ignored with one
    warning."""
    var = VARS[name]
    text = raw(name)
    if text is not None:
        try:
            value = var.parse(text)
        except ValueError:
            value = _INVALID
        if value is not _INVALID and (var.choices is None or value in var.choices):
            return value
        if (name, text) not in _WARNED:
            _WARNED.add((name, text))
            want = f"one of {', '.join(map(str, var.choices))}" if var.choices else \
                getattr(var.parse, "__name__", "a value").strip("_")
            warnings.warn(f"jitflow: ignoring {name}={text!r} (expected {want}); using the "
                          "default", RuntimeWarning, stacklevel=3)
    return None if var.default is None else var.parse(var.default)


_INVALID = object()


def values() -> list:
    """[(name, value in effect, set in the environment?)] for every variable."""
    return [(n, get(n), raw(n) is not None) for n in VARS]


def markdown_table() -> str:
    """The README's configuration table."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for v in VARS.values():
        default = "(see meaning)" if v.default is None else f"`{v.default}`"
        rows.append(f"| `{v.name}` | {default} | {v.meaning} |")
    return "\n".join(rows) + "\n"


# -- the few that hot paths and several modules ask for ----------------------------------------
def debug_level() -> int:
    """JITFLOW_DEBUG (0 when unset or not a number)."""
    return get("JITFLOW_DEBUG")


def debug(msg: str) -> None:
    """Print a JITFLOW_DEBUG message."""
    print(f"[jitflow] {msg}", file=sys.stderr)


def strict() -> bool:
    """JITFLOW_STRICT: compiler bugs raise instead of falling back to the references."""
    return get("JITFLOW_STRICT")


_SESSION_THREADS: list = []   # a Session's ConfigProto.intra_op_parallelism_threads


def set_session_threads(n: int) -> None:
    """Record a Session's `intra_op_parallelism_threads` (> 0): from now on the threads large
    kernels may use, unless JITFLOW_THREADS says otherwise. Process-wide, as TensorFlow's
    shared thread pool, which the first session sizes; here the latest session's number wins."""
    _SESSION_THREADS[:] = [max(1, int(n))]


def _env_threads(name: str) -> Optional[int]:
    v = os.environ.get(name, "").strip()
    try:
        return max(1, int(v)) if v else None
    except ValueError:
        return None


def threads() -> int:
    """How many threads large kernels may use (JITFLOW_THREADS, else a session's
    `intra_op_parallelism_threads`, else NUMBA_NUM_THREADS, else the CPUs this process may run
    on). 1 turns the parallel kernel variants off."""
    n = _env_threads("JITFLOW_THREADS")
    if n is not None:
        return n
    if _SESSION_THREADS:
        return _SESSION_THREADS[0]
    n = _env_threads("NUMBA_NUM_THREADS")
    if n is not None:
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parallel_min() -> int:
    """Elements of the largest operand from which a kernel runs its parallel variant
    (JITFLOW_PARALLEL_MIN; thread wake-ups cost more than they save below it)."""
    return max(1, get("JITFLOW_PARALLEL_MIN"))
