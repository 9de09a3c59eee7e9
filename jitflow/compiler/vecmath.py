"""Moved to jitflow/backends/numba_cpu/vecmath.py; this name stays importable (the same module)."""
import sys

from jitflow.backends.numba_cpu import vecmath as _moved

sys.modules[__name__] = _moved
