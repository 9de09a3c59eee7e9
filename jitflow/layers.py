"""`tf.layers`: the TF1 layer functions and classes (Dense, Conv2D, ...).

The public namespace; the implementation is jitflow/lib/layers.py.
"""
from jitflow.lib.layers import *  # noqa: F401,F403
from jitflow.lib.layers import __all__  # noqa: F401
