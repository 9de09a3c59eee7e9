"""`tf.nn.nce_loss` and `tf.nn.sampled_softmax_loss`: training losses over a few sampled
classes instead of all of them (word2vec, large-vocabulary language models).

Both build TF's graph: the true and the sampled classes' weight rows and biases are looked up
together (`embedding_lookup`, whose gradient is a gather gradient), their logits are the dot
products with the inputs, corrected by the log of each class's expected count (`subtract_log_q`)
and, optionally, with accidental hits (a sampled class that is a true class of the row) pushed
to -FLT_MAX. The sampler and the hit mask run on the host; the rest compiles.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import convert_to_tensor, make_op, name_scope
from jitflow.ops.join import concat
from jitflow.ops.shape_ops import expand_dims, reshape
from jitflow.ops.slicing import slice as slice_
from jitflow.ops.sources import ones_like, zeros_like
from jitflow.ops.candidate_sampling import log_uniform_candidate_sampler
from jitflow.ops.linalg import matmul
from jitflow.ops.math.casting import cast
from jitflow.ops.math.common import scalar_like, stop_gradient
from jitflow.ops.math.unary import log
from jitflow.ops.nn.embedding import embedding_lookup
from jitflow.ops.nn.softmax_xent import (
    sigmoid_cross_entropy_with_logits, softmax_cross_entropy_with_logits_v2,
)
from jitflow.ops.reduce import reduce_sum

__all__: list = []

NAMESPACES = {"nn": ["nce_loss", "sampled_softmax_loss"]}


def _flat_dim(t) -> Optional[int]:
    dims = t.shape.as_tuple()
    return None if dims is None else dims[-1]


def compute_sampled_logits(weights, biases, labels, inputs, num_sampled: int, num_classes: int,
                           num_true: int = 1, sampled_values=None, subtract_log_q: bool = True,
                           remove_accidental_hits: bool = False,
                           partition_strategy: str = "mod", name: Optional[str] = None,
                           seed=None) -> tuple:
    """(logits [batch, num_true + num_sampled], labels of the same shape): TF's
    `_compute_sampled_logits`. `sampled_values` is a sampler's result; by default a
    log-uniform sampler over `num_classes` draws `num_sampled` distinct classes."""
    if not isinstance(weights, (list, tuple)):
        weights = [weights]
    if not isinstance(biases, (list, tuple)):
        biases = [biases]
    with name_scope(name, "compute_sampled_logits", list(weights) + list(biases)
                    + [inputs, labels]):
        labels = convert_to_tensor(labels, name="labels")
        if labels.dtype != _dtypes.int64:
            labels = cast(labels, _dtypes.int64)
        labels_flat = reshape(labels, [-1])
        if sampled_values is None:
            sampled_values = log_uniform_candidate_sampler(
                true_classes=labels, num_true=num_true, num_sampled=num_sampled, unique=True,
                range_max=num_classes, seed=seed)
        sampled, true_expected, sampled_expected = (stop_gradient(s) for s in sampled_values)
        if sampled.dtype != _dtypes.int64:
            sampled = cast(sampled, _dtypes.int64)
        inputs = convert_to_tensor(inputs, name="inputs")
        all_ids = concat([labels_flat, sampled], 0)
        all_w = embedding_lookup(weights, all_ids, partition_strategy=partition_strategy)
        n_true = _flat_count(labels)
        dim = _flat_dim(all_w)
        if n_true is not None:
            true_w = slice_(all_w, [0, 0], [n_true, -1])
            sampled_w = slice_(all_w, [n_true, 0], [-1, -1])
        else:
            from jitflow.ops.join import stack
            from jitflow.ops.shape_ops import size
            k = size(labels_flat)
            true_w = slice_(all_w, [0, 0], stack([k, -1]))
            sampled_w = slice_(all_w, stack([k, 0]), [-1, -1])
        sampled_logits = matmul(inputs, sampled_w, transpose_b=True)
        all_b = embedding_lookup(biases, all_ids, partition_strategy=partition_strategy)
        if n_true is not None:
            true_b = slice_(all_b, [0], [n_true])
            sampled_b = slice_(all_b, [n_true], [-1])
        else:
            true_b = slice_(all_b, [0], reshape(k, [1]))
            sampled_b = slice_(all_b, reshape(k, [1]), [-1])
        # each input row dotted with its num_true true-class rows
        w3 = reshape(true_w, [-1, num_true, -1 if dim is None else dim])
        true_logits = reduce_sum(expand_dims(inputs, 1) * w3, axis=2)
        true_logits = true_logits + reshape(true_b, [-1, num_true])
        sampled_logits = sampled_logits + sampled_b
        if remove_accidental_hits:
            mask = make_op("AccidentalHitsMask", [labels, sampled],
                           {"num_true": int(num_true), "dtype": sampled_logits.dtype},
                           name="accidental_hits").outputs[0]
            sampled_logits = sampled_logits + mask
        if subtract_log_q:
            true_logits = true_logits - log(cast(true_expected, true_logits.dtype))
            sampled_logits = sampled_logits - log(cast(sampled_expected,
                                                       sampled_logits.dtype))
        out_logits = concat([true_logits, sampled_logits], 1)
        out_labels = concat([ones_like(true_logits) / scalar_like(num_true, true_logits),
                             zeros_like(sampled_logits)], 1)
        return out_logits, out_labels


def _flat_count(labels) -> Optional[int]:
    dims = labels.shape.as_tuple()
    if dims is None or None in dims:
        return None
    return int(np.prod(dims))


def nce_loss(weights, biases, labels, inputs, num_sampled: int, num_classes: int,
             num_true: int = 1, sampled_values=None, remove_accidental_hits: bool = False,
             partition_strategy: str = "mod", name: str = "nce_loss"):
    """`tf.nn.nce_loss`: noise-contrastive estimation, the per-example loss [batch] (a
    logistic loss of the true classes against `num_sampled` sampled ones).

    `weights` [num_classes, dim] (or a list of shards), `biases` [num_classes],
    `labels` int [batch, num_true], `inputs` [batch, dim].
    """
    logits, labels_ = compute_sampled_logits(
        weights, biases, labels, inputs, num_sampled, num_classes, num_true=num_true,
        sampled_values=sampled_values, subtract_log_q=True,
        remove_accidental_hits=remove_accidental_hits, partition_strategy=partition_strategy,
        name=name)
    with name_scope(None, name):
        losses = sigmoid_cross_entropy_with_logits(labels=labels_, logits=logits,
                                                   name="sampled_losses")
        return reduce_sum(losses, axis=1)


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled: int, num_classes: int,
                         num_true: int = 1, sampled_values=None,
                         remove_accidental_hits: bool = True, partition_strategy: str = "mod",
                         name: str = "sampled_softmax_loss", seed=None):
    """`tf.nn.sampled_softmax_loss`: softmax cross-entropy over the true classes and
    `num_sampled` sampled ones, the per-example loss [batch]."""
    logits, labels_ = compute_sampled_logits(
        weights, biases, labels, inputs, num_sampled, num_classes, num_true=num_true,
        sampled_values=sampled_values, subtract_log_q=True,
        remove_accidental_hits=remove_accidental_hits, partition_strategy=partition_strategy,
        name=name, seed=seed)
    labels_ = stop_gradient(labels_, name="labels_stop_gradient")
    return softmax_cross_entropy_with_logits_v2(labels=labels_, logits=logits)
