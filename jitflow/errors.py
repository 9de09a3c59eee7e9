"""`tf.errors`: `OpError` and its subclasses, as TF1 raises them.

The public namespace; the implementation is jitflow/core/errors.py.
"""
from jitflow.core.errors import *  # noqa: F401,F403
from jitflow.core.errors import __all__  # noqa: F401
