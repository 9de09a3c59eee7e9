"""`tf.contrib.layers`' summary helpers: a scalar summary for scalars, a histogram for other
tensors, tagged with the tensor's op name; activations also get the fraction of ReLU zeros."""
from __future__ import annotations

import functools
import re
from typing import Callable, Optional

import jitflow as tf
from jitflow.core.graph import GraphKeys

__all__ = ["summarize_tensor", "summarize_tensors", "summarize_collection",
           "summarize_activation", "summarize_activations", "summarize_variables",
           "summarize_weights", "summarize_biases"]


def summarize_tensor(tensor, tag: Optional[str] = None):
    """A scalar summary for a rank-0 tensor, a histogram otherwise (None for strings)."""
    tensor = tf.convert_to_tensor(tensor)
    if tensor.dtype == tf.string:
        return None
    tag = tag or tensor.op.name
    if tensor.shape.ndims == 0:
        return tf.summary.scalar(tag, tensor)
    return tf.summary.histogram(tag, tensor)


def summarize_tensors(tensors, summarizer: Callable = summarize_tensor) -> list:
    return [summarizer(t) for t in tensors]


def summarize_collection(collection: str, name_filter: Optional[str] = None,
                         summarizer: Callable = summarize_tensor) -> list:
    """Summaries of the tensors of `collection` whose op names match `name_filter`."""
    tensors = [t for t in tf.get_collection(collection)
               if name_filter is None or re.match(name_filter, t.op.name)]
    return summarize_tensors(tensors, summarizer)


def summarize_activation(op):
    """A histogram of an activation; for Relu, Relu6 and Softplus outputs also the fraction
    of zeros (`<op>/zeros`), for Relu6 the fraction of sixes (`<op>/sixes`)."""
    kind = op.op.type
    if kind in ("Relu", "Softplus", "Relu6"):
        x = op.op.inputs[0]
        tf.summary.scalar(f"{op.op.name}/zeros",
                          tf.reduce_mean(tf.to_float(tf.less(x, tf.cast(0.0, x.dtype)))))
    if kind == "Relu6":
        x = op.op.inputs[0]
        tf.summary.scalar(f"{op.op.name}/sixes",
                          tf.reduce_mean(tf.to_float(tf.greater(x, tf.cast(6.0, x.dtype)))))
    return tf.summary.histogram(f"{op.op.name}/activation", op)


def summarize_activations(name_filter: Optional[str] = None,
                          summarizer: Callable = summarize_activation) -> list:
    """Summaries of the ACTIVATIONS collection."""
    return summarize_collection(GraphKeys.ACTIVATIONS, name_filter, summarizer)


summarize_variables = functools.partial(summarize_collection, GraphKeys.GLOBAL_VARIABLES)
summarize_weights = functools.partial(summarize_collection, GraphKeys.WEIGHTS)
summarize_biases = functools.partial(summarize_collection, GraphKeys.BIASES)
