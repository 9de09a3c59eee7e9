"""TensorFlow's message types, declared by jitflow (the `.proto` files in this folder).

The field names and numbers are TensorFlow's, so the bytes jitflow writes are the bytes
TensorFlow reads and the reverse. The classes are built by the `protobuf` package from the
descriptors in `_descriptors.py` the first time one is asked for (`protos.GraphDef`,
`protos.message("tensorflow.Summary")`), in a descriptor pool of jitflow's own: `import jitflow`
does not import protobuf, and TensorFlow's own generated classes can live in the same process.
"""
from __future__ import annotations

import threading

__all__ = ["message", "pool", "MESSAGES"]

# the message types exported as attributes of this module (protos.NodeDef, ...)
MESSAGES = (
    "TensorShapeProto", "TensorProto", "ResourceHandleProto", "TensorSliceProto", "AttrValue",
    "NameAttrList", "NodeDef", "VersionDef", "OpDef", "OpList", "FunctionDef",
    "FunctionDefLibrary", "GraphDef", "HistogramProto", "SummaryMetadata", "Summary",
    "LogMessage", "SessionLog", "TaggedRunMetadata", "Event", "SaverDef", "CollectionDef",
    "TensorInfo", "SignatureDef", "AssetFileDef", "MetaGraphDef", "VariableDef", "SavedModel",
    "BundleHeaderProto", "BundleEntryProto", "CheckpointState",
    # feature.proto, example.proto
    "BytesList", "FloatList", "Int64List", "Feature", "Features", "FeatureList", "FeatureLists",
    "Example", "SequenceExample",
    # step_stats.proto
    "AllocationDescription", "TensorDescription", "AllocationRecord", "AllocatorMemoryUsed",
    "NodeOutput", "MemoryStats", "NodeExecStats", "DeviceStepStats", "StepStats", "CostGraphDef",
    # config.proto
    "GPUOptions", "OptimizerOptions", "VerifierConfig", "AutoParallelOptions",
    "ScopedAllocatorOptions", "RewriterConfig", "GraphOptions", "ThreadPoolOptionProto",
    "SessionMetadata", "RPCOptions", "JobDef", "ClusterDef", "CoordinatedJob",
    "CoordinationServiceConfig", "ConfigProto", "DebugTensorWatch", "DebugOptions", "RunOptions",
    "RunMetadata", "TensorConnection", "CallableOptions",
)

_lock = threading.Lock()
_state: dict = {}


def pool():
    """The descriptor pool holding jitflow's declarations (built on first use)."""
    p = _state.get("pool")
    if p is None:
        with _lock:
            p = _state.get("pool")
            if p is None:
                from google.protobuf import descriptor_pb2, descriptor_pool

                from jitflow.serialize.protos._descriptors import FILE_DESCRIPTOR_SET
                fds = descriptor_pb2.FileDescriptorSet.FromString(FILE_DESCRIPTOR_SET)
                p = descriptor_pool.DescriptorPool()
                for fdp in fds.file:
                    p.Add(fdp)
                _state["pool"] = p
    return p


def message(full_name: str):
    """The message class of `full_name` ("tensorflow.GraphDef")."""
    cls = _state.get(full_name)
    if cls is None:
        from google.protobuf import message_factory
        cls = message_factory.GetMessageClass(pool().FindMessageTypeByName(full_name))
        _state[full_name] = cls
    return cls


def enum_value(enum_full_name: str, name: str) -> int:
    """The number of an enum value: enum_value("tensorflow.DataType", "DT_FLOAT") == 1."""
    return pool().FindEnumTypeByName(enum_full_name).values_by_name[name].number


def __getattr__(name: str):
    if name in MESSAGES:
        return message("tensorflow." + name)
    raise AttributeError(f"module 'jitflow.serialize.protos' has no attribute {name!r}")
