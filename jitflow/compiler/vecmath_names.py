"""Moved to jitflow/backends/numba_cpu/vecmath_names.py; this name stays importable (the same
module)."""
import sys

from jitflow.backends.numba_cpu import vecmath_names as _moved

sys.modules[__name__] = _moved
