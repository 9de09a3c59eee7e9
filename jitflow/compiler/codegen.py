"""Moved to jitflow/backends/numba_cpu/emit.py; this name stays importable (the same module)."""
import sys

from jitflow.backends.numba_cpu import emit as _moved

sys.modules[__name__] = _moved
