"""Moved to jitflow/backends/numba_cpu/background.py; this name stays importable (the same
module)."""
import sys

from jitflow.backends.numba_cpu import background as _moved

sys.modules[__name__] = _moved
