"""Moved to jitflow/backends/numba_cpu/driver.py; this name stays importable (the same module)."""
import sys

from jitflow.backends.numba_cpu import driver as _moved

sys.modules[__name__] = _moved
