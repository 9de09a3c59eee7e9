"""Moved to jitflow/fold.py (the one static value/shape evaluator); this name stays importable
(the same module)."""
import sys

from jitflow import fold as _moved

sys.modules[__name__] = _moved
