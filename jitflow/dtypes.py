"""`tf.dtypes`: the dtype objects (`tf.float32`, ...) and `as_dtype`.

The public namespace; the implementation is jitflow/core/dtypes.py.
"""
from jitflow.core.dtypes import *  # noqa: F401,F403
from jitflow.core.dtypes import __all__  # noqa: F401
