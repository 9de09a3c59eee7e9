"""`tf.io` (and TF1's `tf.python_io`): file access (`tf.io.gfile`), TFRecords, GraphDefs and
TensorProtos, plus the names collected from the op modules' "io" namespace (parse_example and
the feature configurations, decode_csv, decode_raw, the image codecs, read_file, the queue
classes, matching_files)."""
from __future__ import annotations

from jitflow import gfile  # noqa: F401  (the names listed in __all__)
from jitflow.ops import namespace as _namespace
from jitflow.serialize import write_graph  # noqa: F401
from jitflow.serialize.tensor_util import make_ndarray, make_tensor_proto  # noqa: F401
from jitflow.serialize.tfrecord import (TFRecordCompressionType, TFRecordOptions,  # noqa: F401
                                        TFRecordWriter, tf_record_iterator)

globals().update(_namespace("io"))
__all__ = sorted(set(_namespace("io")) | {"gfile", "write_graph", "TFRecordWriter",
                                          "TFRecordOptions", "TFRecordCompressionType",
                                          "tf_record_iterator", "make_tensor_proto",
                                          "make_ndarray"})
