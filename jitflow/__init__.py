"""jitflow: the TensorFlow 1 graph API, compiled to fused native kernels with Numba.

`import jitflow as tf` (or `import jitflow.compat.v1 as tf`) and run a TF1 graph program.
"""
from __future__ import annotations

__version__ = "0.3.0"

from jitflow import dtypes, errors  # noqa: E402,F401
from jitflow.core.dtypes import (  # noqa: E402,F401
    DType, as_dtype, bool, double, float16, float32, float64, half, int8, int16, int32, int64,
    string, uint8, uint16,
)
from jitflow.core.graph import (  # noqa: E402,F401
    Graph, GraphKeys, Operation, Tensor, control_dependencies, convert_to_tensor,
    get_default_graph, name_scope, reset_default_graph,
)
from jitflow.core.shapes import Dimension, TensorShape  # noqa: E402,F401
from jitflow import ops as _ops  # noqa: E402,F401
from jitflow.ops import *  # noqa: E402,F401,F403
from jitflow.core.session import InteractiveSession, Session, get_default_session  # noqa: E402,F401
from jitflow.core.config import PROTO_NAMES as _CONFIG_PROTOS  # noqa: E402
from jitflow import nn, math, losses, random, linalg, initializers  # noqa: E402,F401
from jitflow import compat  # noqa: E402,F401
from jitflow.core.gradients import (  # noqa: E402,F401
    AggregationMethod, NotDifferentiable, RegisterGradient, UnconnectedGradients, gradients,
    hessians, no_gradient,
)
from jitflow import train  # noqa: E402,F401


def get_collection(key: str, scope=None) -> list:
    """`tf.get_collection` on the default graph."""
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key: str) -> list:
    return get_default_graph().get_collection_ref(key)


def add_to_collection(name: str, value) -> None:
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value) -> None:
    get_default_graph().add_to_collections(names, value)


def set_random_seed(seed) -> None:
    """Set the graph-level seed of the default graph (random ops then repeat per session)."""
    get_default_graph().seed = None if seed is None else int(seed)


def disable_v2_behavior() -> None:
    """Accepted for compatibility: jitflow is always TF1 graph mode."""


def disable_eager_execution() -> None:
    """Accepted for compatibility: jitflow never runs eagerly."""


def enable_eager_execution(*args, **kwargs) -> None:
    raise NotImplementedError("jitflow runs TF1 graph mode only; eager execution is not "
                              "supported")


def executing_eagerly() -> bool:
    return False


def get_seed(op_seed):
    g = get_default_graph().seed
    return g, op_seed


def device(name):
    """Accepted for compatibility; placement is the backend's choice."""
    return get_default_graph().device(name)


from jitflow.serialize import import_graph_def  # noqa: E402,F401
from jitflow import export  # noqa: E402,F401  (a module you can call: export(sess, ...))
from jitflow.export import load  # noqa: E402,F401
from jitflow import viz  # noqa: E402,F401
from jitflow import app, debugging, flags, layers, logging, metrics, summary  # noqa: E402,F401,E501
from jitflow import gfile, graph_util, io, saved_model  # noqa: E402,F401
from jitflow.serialize.tensor_util import make_ndarray, make_tensor_proto  # noqa: E402,F401

python_io = io
from jitflow import version  # noqa: E402
from jitflow.version import (  # noqa: E402,F401
    GRAPH_DEF_VERSION, GRAPH_DEF_VERSION_MIN_CONSUMER, GRAPH_DEF_VERSION_MIN_PRODUCER, VERSION,
)
# TensorFlow's message classes (jitflow's declarations, the session's configuration among them:
# see jitflow/core/config.py); protobuf is imported on first use
_PROTO_NAMES = ("GraphDef", "NodeDef", "AttrValue", "NameAttrList", "TensorProto",
                "TensorShapeProto", "VersionDef", "OpDef", "MetaGraphDef", "SignatureDef",
                "TensorInfo", "CollectionDef", "SaverDef", "Summary", "SummaryMetadata",
                "HistogramProto", "Event", "SessionLog", "LogMessage", *_CONFIG_PROTOS)


def __getattr__(name: str):
    if name in _PROTO_NAMES:
        from jitflow.serialize import protos
        return getattr(protos, name)
    if name == "contrib":   # loaded on first use: `import jitflow` stays fast
        import importlib
        return importlib.import_module("jitflow.contrib")
    if name in ("GIT_VERSION", "COMPILER_VERSION"):
        return getattr(version, name)
    if name == "test":   # tf.test: unittest helpers, on first use
        import importlib
        return importlib.import_module("jitflow.test")
    if name in ("client", "python"):   # timelines (`tf.python.client.timeline`), on first use
        import importlib
        return importlib.import_module("jitflow." + name)
    raise AttributeError(f"module 'jitflow' has no attribute {name!r}")

from jitflow import data, image, nest, queue, sparse, strings  # noqa: E402,F401
from jitflow.ops.sparse import SparseTensor, SparseTensorValue  # noqa: E402,F401
from jitflow.core.errors import OpError  # noqa: E402,F401
NoGradient = NotDifferentiable  # TF1's older name
