"""`tf.version` (and `tf.VERSION`, `tf.GIT_VERSION`, ... at the top): the TensorFlow API
jitflow implements.

`VERSION` is "1.15.5", TF1's last release: TF1 programs test `tf.VERSION` or
`tf.version.VERSION` (`startswith("1.")`, a major version below 2) to take their graph-mode
branch, which is the one jitflow runs. `jitflow.__version__` stays jitflow's own version (it is
the package's, as `pip show jitflow` says); `GIT_VERSION` names it too, and
`COMPILER_VERSION` is the code generator's (llvmlite, through which jitflow compiles).
"""
from __future__ import annotations

__all__ = ["VERSION", "GRAPH_DEF_VERSION", "GRAPH_DEF_VERSION_MIN_CONSUMER",
           "GRAPH_DEF_VERSION_MIN_PRODUCER"]   # and GIT_VERSION, COMPILER_VERSION (computed)

VERSION = "1.15.5"
#: the producer version of the GraphDefs jitflow writes (TF 1.15's attribute sets)
GRAPH_DEF_VERSION = 27
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0


def __getattr__(name: str):
    if name == "GIT_VERSION":
        import jitflow   # the package this module belongs to (at the top: an import cycle)
        return f"jitflow-v{jitflow.__version__}"
    if name == "COMPILER_VERSION":   # asks llvmlite, so only when someone wants it
        import llvmlite
        return f"llvmlite {llvmlite.__version__}"
    raise AttributeError(f"module 'jitflow.version' has no attribute {name!r}")
