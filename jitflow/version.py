"""`tf.version` (and `tf.VERSION`, `tf.GIT_VERSION`, ... at the top): the TensorFlow API
jitflow implements.

`VERSION` is "1.15.5", TF1's last release: TF1 programs test `tf.VERSION` or
`tf.version.VERSION` (`startswith("1.")`, a major version below 2) to take their graph-mode
branch, which is the one jitflow runs. `jitflow.__version__` stays jitflow's own version (it is
the package's, as `pip show jitflow` says); `GIT_VERSION` names it too, and
`COMPILER_VERSION` is the code generator's (llvmlite, through which jitflow compiles).
"""
from __future__ import annotations

from jitflow import __version__ as _jitflow_version

__all__ = ["VERSION", "GIT_VERSION", "GRAPH_DEF_VERSION", "GRAPH_DEF_VERSION_MIN_CONSUMER",
           "GRAPH_DEF_VERSION_MIN_PRODUCER"]   # and COMPILER_VERSION, computed when asked for

VERSION = "1.15.5"
GIT_VERSION = f"jitflow-v{_jitflow_version}"
#: the producer version of the GraphDefs jitflow writes (TF 1.15's attribute sets)
GRAPH_DEF_VERSION = 27
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0


def __getattr__(name: str):
    if name == "COMPILER_VERSION":   # asks llvmlite, so only when someone wants it
        import llvmlite
        return f"llvmlite {llvmlite.__version__}"
    raise AttributeError(f"module 'jitflow.version' has no attribute {name!r}")
