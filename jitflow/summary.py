"""`tf.summary`: summary ops, `FileWriter` and `merge_all`.

The public namespace; the implementation is jitflow/lib/summary.py.
"""
from jitflow.lib.summary import *  # noqa: F401,F403
from jitflow.lib.summary import __all__  # noqa: F401
from jitflow.lib.summary import __getattr__  # noqa: F401  (names made on first use)
