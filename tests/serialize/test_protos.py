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
    "tensorflow.core.example.feature_pb2": ["BytesList", "FloatList", "Int64List", "Feature",
                                            "Features", "FeatureList", "FeatureLists"],
    "tensorflow.core.example.example_pb2": ["Example", "SequenceExample"],
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


def _example(m):
    """The same Example through the message classes of module `m` (tf.train)."""
    return m.Example(features=m.Features(feature={
        "label": m.Feature(int64_list=m.Int64List(value=[1, -2, 2 ** 40])),
        "weights": m.Feature(float_list=m.FloatList(value=[1.5, 2.5])),
        "image": m.Feature(bytes_list=m.BytesList(value=[b"\x00\x01", b"hi"])),
        "empty": m.Feature(),
    }))


def test_example_bytes_by_hand():
    import jitflow as tf
    one = tf.train.Example(features=tf.train.Features(feature={
        "a": tf.train.Feature(int64_list=tf.train.Int64List(value=[3]))}))
    # by hand: Example.features (field 1, 12 bytes) holding one map entry (field 1, 10 bytes):
    # key "a" (field 1), value Feature (field 2, 5 bytes) holding int64_list (field 3, 3 bytes)
    # holding the packed values (field 1, 1 byte: 3)
    assert one.SerializeToString() == b"\n\x0c\n\n\n\x01a\x12\x05\x1a\x03\n\x01\x03"
    f = tf.train.Feature(float_list=tf.train.FloatList(value=[1.5]))
    assert f.SerializeToString() == b"\x12\x06\n\x04\x00\x00\xc0?"   # packed float 1.5
    assert f.WhichOneof("kind") == "float_list"
    back = tf.train.Example.FromString(_example(tf.train).SerializeToString())
    assert list(back.features.feature["label"].int64_list.value) == [1, -2, 2 ** 40]
    assert back.features.feature["empty"].WhichOneof("kind") is None
    seq = tf.train.SequenceExample()
    seq.feature_lists.feature_list["t"].feature.add().int64_list.value.append(7)
    assert tf.train.SequenceExample.FromString(seq.SerializeToString()) == seq


def test_example_bytes_equal_tensorflows():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    import jitflow as tf
    ours, theirs = _example(tf.train), _example(tf_ref.train)
    assert ours.SerializeToString() == theirs.SerializeToString()
    assert ours.SerializeToString(deterministic=True) == \
        theirs.SerializeToString(deterministic=True)
    seq = [m.SequenceExample(context=m.Features(feature={"n": m.Feature(
        int64_list=m.Int64List(value=[2]))}), feature_lists=m.FeatureLists(feature_list={
            "x": m.FeatureList(feature=[m.Feature(float_list=m.FloatList(value=[0.5])),
                                        m.Feature(float_list=m.FloatList(value=[1.0]))])}))
           for m in (tf.train, tf_ref.train)]
    assert seq[0].SerializeToString() == seq[1].SerializeToString()
