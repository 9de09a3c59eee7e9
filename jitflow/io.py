"""`tf.io`: file access (`tf.io.gfile`), TFRecords, GraphDefs and TensorProtos."""
from __future__ import annotations

from jitflow import gfile
from jitflow.serialize import write_graph
from jitflow.serialize.tensor_util import make_ndarray, make_tensor_proto
from jitflow.serialize.tfrecord import TFRecordWriter, tf_record_iterator

__all__ = ["gfile", "write_graph", "TFRecordWriter", "tf_record_iterator", "make_tensor_proto",
           "make_ndarray"]
