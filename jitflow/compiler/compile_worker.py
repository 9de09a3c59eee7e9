"""Moved to jitflow/backends/numba_cpu/compile_worker.py; this name stays importable (the same
module)."""
import sys

from jitflow.backends.numba_cpu import compile_worker as _moved

sys.modules[__name__] = _moved
