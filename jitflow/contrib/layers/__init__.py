"""`tf.contrib.layers`: TF 1.15's contrib layer functions (fully_connected, conv2d, pooling,
batch_norm, layer_norm, dropout, ...), its initializers (xavier, variance scaling),
regularizers, `optimize_loss`, the summary helpers and `embed_sequence`.

TF 1.15 names that jitflow lacks (the 3-D layers, feature columns, GDN, ...) raise an
AttributeError saying so.
"""
from __future__ import annotations

from jitflow.contrib.layers import utils  # noqa: F401  (tf.contrib.layers.utils)
from jitflow.contrib.layers.initializers import (variance_scaling_initializer,
                                                 xavier_initializer, xavier_initializer_conv2d)
from jitflow.contrib.layers.layers import (
    avg_pool2d, batch_norm, bias_add, conv1d, conv2d, conv2d_transpose, convolution,
    convolution1d, convolution2d, convolution2d_transpose, dropout, elu, embed_sequence,
    embedding_lookup_unique, flatten, fully_connected, layer_norm, linear, max_pool2d,
    one_hot_encoding, relu, relu6, repeat, separable_conv2d, separable_convolution2d, softmax,
    stack, unit_norm,
)
from jitflow.contrib.layers.optimizers import (OPTIMIZER_CLS_NAMES, OPTIMIZER_SUMMARIES,
                                               optimize_loss)
from jitflow.contrib.layers.regularizers import (apply_regularization, l1_l2_regularizer,
                                                 l1_regularizer, l2_regularizer,
                                                 sum_regularizer)
from jitflow.contrib.layers.summaries import (summarize_activation, summarize_activations,
                                              summarize_biases, summarize_collection,
                                              summarize_tensor, summarize_tensors,
                                              summarize_variables, summarize_weights)

__all__ = [
    "avg_pool2d", "batch_norm", "bias_add", "conv1d", "conv2d", "conv2d_transpose",
    "convolution", "convolution1d", "convolution2d", "convolution2d_transpose", "dropout",
    "elu", "embed_sequence", "embedding_lookup_unique", "flatten", "fully_connected",
    "layer_norm", "linear", "max_pool2d", "one_hot_encoding", "relu", "relu6", "repeat",
    "separable_conv2d", "separable_convolution2d", "softmax", "stack", "unit_norm",
    "variance_scaling_initializer", "xavier_initializer", "xavier_initializer_conv2d",
    "OPTIMIZER_CLS_NAMES", "OPTIMIZER_SUMMARIES", "optimize_loss", "apply_regularization",
    "l1_l2_regularizer", "l1_regularizer", "l2_regularizer", "sum_regularizer",
    "summarize_activation", "summarize_activations", "summarize_biases",
    "summarize_collection", "summarize_tensor", "summarize_tensors", "summarize_variables",
    "summarize_weights", "utils",
]

# TF 1.15 tf.contrib.layers names jitflow does not provide, and why
_MISSING = {
    **{n: "jitflow has no 3-D convolution or pooling ops" for n in (
        "conv3d", "convolution3d", "conv3d_transpose", "convolution3d_transpose",
        "max_pool3d", "avg_pool3d")},
    **{n: "feature columns are not implemented" for n in (
        "real_valued_column", "sparse_column_with_hash_bucket", "embedding_column",
        "sparse_column_with_keys", "bucketized_column", "crossed_column",
        "input_from_feature_columns", "one_hot_column", "infer_real_valued_columns",
        "sparse_column_with_integerized_feature", "weighted_sum_from_feature_columns",
        "make_place_holder_tensors_for_base_features", "create_feature_spec_for_parsing",
        "parse_feature_columns_from_examples", "transform_features",
        "joint_weighted_sum_from_feature_columns", "shared_embedding_columns",
        "scattered_embedding_column", "sequence_input_from_feature_columns",
        "check_feature_columns")},
    **{n: "not implemented" for n in (
        "gdn", "GDN", "maxout", "pool", "spatial_softmax", "conv2d_in_plane",
        "convolution2d_in_plane", "images_to_sequence", "sequence_to_images",
        "dense_to_sparse", "scale_gradient", "bow_encoder", "legacy_fully_connected",
        "legacy_linear", "legacy_relu", "safe_embedding_lookup_sparse",
        "embedding_lookup_sparse_with_distributed_aggregation", "rev_block",
        "recompute_grad", "group_norm", "instance_norm", "poincare_normalize",
        "adaptive_clipping_fn", "regression_target", "multi_class_target",
        "binary_svm_target", "sparse_column_with_vocabulary_file")},
}


def __getattr__(name: str):
    if name in _MISSING:
        raise AttributeError(f"tf.contrib.layers.{name} is not available in jitflow: "
                             f"{_MISSING[name]}")
    raise AttributeError(f"module 'jitflow.contrib.layers' has no attribute {name!r}")
