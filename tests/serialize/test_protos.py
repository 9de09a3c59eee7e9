"""jitflow's message declarations: TensorFlow's wire format (names, numbers, types), the
committed descriptors match the .proto files, and protobuf stays out of `import jitflow`."""
from __future__ import annotations

import subprocess
import sys

import pytest

from jitflow.serialize import protos

# where TensorFlow keeps each message we declare
_TF_MODULES = {
    "tensorflow.core.framework.tensor_shape_pb2": ["TensorShapeProto"],
    "tensorflow.core.framework.tensor_pb2": ["TensorProto"],
    "tensorflow.core.framework.resource_handle_pb2": ["ResourceHandleProto"],
    "tensorflow.core.framework.tensor_slice_pb2": ["TensorSliceProto"],
    "tensorflow.core.framework.attr_value_pb2": ["AttrValue", "NameAttrList"],
    "tensorflow.core.framework.node_def_pb2": ["NodeDef"],
    "tensorflow.core.framework.versions_pb2": ["VersionDef"],
    "tensorflow.core.framework.op_def_pb2": ["OpDef", "OpList"],
    "tensorflow.core.framework.function_pb2": ["FunctionDef", "FunctionDefLibrary"],
    "tensorflow.core.framework.graph_pb2": ["GraphDef"],
    "tensorflow.core.framework.summary_pb2": ["SummaryMetadata", "Summary"],  # + histo field
    "tensorflow.core.util.event_pb2": ["LogMessage", "SessionLog", "TaggedRunMetadata",
                                       "Event"],
    "tensorflow.core.protobuf.saver_pb2": ["SaverDef"],
    "tensorflow.core.protobuf.meta_graph_pb2": ["CollectionDef", "TensorInfo", "SignatureDef",
                                                "AssetFileDef", "MetaGraphDef"],
    "tensorflow.core.framework.variable_pb2": ["VariableDef"],
    "tensorflow.core.protobuf.saved_model_pb2": ["SavedModel"],
    "tensorflow.core.protobuf.tensor_bundle_pb2": ["BundleHeaderProto", "BundleEntryProto"],
    "tensorflow.python.training.checkpoint_state_pb2": ["CheckpointState"],
    "tensorflow.core.framework.step_stats_pb2": [
        "AllocationRecord", "AllocatorMemoryUsed", "NodeOutput", "MemoryStats", "NodeExecStats",
        "DeviceStepStats", "StepStats"],
    "tensorflow.core.framework.tensor_description_pb2": ["TensorDescription"],
    "tensorflow.core.framework.allocation_description_pb2": ["AllocationDescription"],
    "tensorflow.core.framework.cost_graph_pb2": ["CostGraphDef"],
    "tensorflow.core.protobuf.config_pb2": [
        "GPUOptions", "OptimizerOptions", "GraphOptions", "ThreadPoolOptionProto",
        "SessionMetadata", "ConfigProto", "RunOptions", "RunMetadata", "TensorConnection",
        "CallableOptions"],
    "tensorflow.core.protobuf.rewriter_config_pb2": [
        "AutoParallelOptions", "ScopedAllocatorOptions", "RewriterConfig"],
    "tensorflow.core.protobuf.verifier_config_pb2": ["VerifierConfig"],
    "tensorflow.core.protobuf.cluster_pb2": ["JobDef", "ClusterDef"],
    "tensorflow.core.protobuf.debug_pb2": ["DebugTensorWatch", "DebugOptions"],
}


def _compare(ours, theirs, path, seen=None):
    seen = set() if seen is None else seen
    if ours.full_name in seen:   # recursive types (AttrValue -> NameAttrList -> AttrValue)
        return
    seen.add(ours.full_name)
    for f in ours.fields:
        t = theirs.fields_by_number.get(f.number)
        assert t is not None, f"{path}.{f.name}: no field {f.number} in TensorFlow"
        assert (f.name, f.type, f.is_repeated) == (t.name, t.type, t.is_repeated), \
            f"{path}.{f.name}"
        if f.is_repeated and f.type not in (9, 11, 12):
            assert f.is_packed == t.is_packed, f"{path}.{f.name} packing"
        if f.message_type is not None:
            assert f.message_type.full_name == t.message_type.full_name, f"{path}.{f.name}"
            if f.message_type.full_name != "google.protobuf.Any":
                _compare(f.message_type, t.message_type, f"{path}.{f.name}", seen)
        if f.enum_type is not None:
            for v in f.enum_type.values:
                assert t.enum_type.values_by_name[v.name].number == v.number, v.name


@pytest.mark.parametrize("module", sorted(_TF_MODULES))
def test_fields_match_tensorflow(module):
    pytest.importorskip("tensorflow")
    import importlib
    mod = importlib.import_module(module)
    for name in _TF_MODULES[module]:
        theirs = mod.DESCRIPTOR.message_types_by_name[name]
        ours = protos.message("tensorflow." + name).DESCRIPTOR
        assert ours.full_name == theirs.full_name
        _compare(ours, theirs, name)


def test_committed_descriptors_match_the_proto_files():
    pytest.importorskip("grpc_tools")
    from jitflow.serialize.protos import _descriptors, regenerate
    assert regenerate.descriptor_set() == _descriptors.FILE_DESCRIPTOR_SET, \
        "run python -m jitflow.serialize.protos.regenerate"


def test_import_jitflow_does_not_import_protobuf():
    code = ("import sys, jitflow as tf; assert 'google.protobuf' not in sys.modules; "
            "tf.GraphDef; assert 'google.protobuf' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_messages_are_usable():
    gd = protos.GraphDef()
    gd.node.add(name="a", op="Const").attr["dtype"].type = 1
    assert protos.GraphDef.FromString(gd.SerializeToString()) == gd
    s = protos.Summary(value=[protos.Summary.Value(tag="t", simple_value=1.5)])
    # by hand: Summary.value (field 1, a message of 8 bytes) holding tag (field 1, "t": 3
    # bytes) and simple_value (field 2, fixed32 1.5: 5 bytes)
    assert s.SerializeToString() == b"\n\x08\n\x01t\x15\x00\x00\xc0?"
    assert protos.enum_value("tensorflow.DataType", "DT_HALF") == 19
