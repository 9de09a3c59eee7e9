"""`tf.data`: input pipelines (datasets and their iterators) run on the host."""
from __future__ import annotations

from jitflow.data import experimental
from jitflow.data.dataset import (AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset,
                                  DatasetV1, FixedLengthRecordDataset, Options, TFRecordDataset,
                                  TextLineDataset)
from jitflow.data.iterator import (Iterator, get_output_classes, get_output_shapes,
                                   get_output_types, make_initializable_iterator,
                                   make_one_shot_iterator)

__all__ = ["Dataset", "DatasetV1", "TextLineDataset", "FixedLengthRecordDataset",
           "TFRecordDataset", "Iterator",
           "Options", "make_one_shot_iterator", "make_initializable_iterator",
           "get_output_types", "get_output_shapes", "get_output_classes", "experimental",
           "AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY"]
