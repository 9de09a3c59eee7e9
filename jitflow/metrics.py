"""`tf.metrics`: streaming metrics with local variables.

The public namespace; the implementation is jitflow/lib/metrics.py.
"""
from jitflow.lib.metrics import *  # noqa: F401,F403
from jitflow.lib.metrics import __all__  # noqa: F401
