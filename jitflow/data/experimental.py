"""`tf.data.experimental`: the helpers TF1 programs use with `Dataset.apply`."""
from __future__ import annotations

from typing import Callable, Optional

from jitflow.data.dataset import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY

__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "shuffle_and_repeat",
           "map_and_batch", "unbatch"]


def shuffle_and_repeat(buffer_size, count=None, seed=None) -> Callable:
    """`dataset.apply(shuffle_and_repeat(...))`: shuffle (a new order each epoch), repeat."""
    return lambda ds: ds.shuffle(buffer_size, seed=seed).repeat(count)


def map_and_batch(map_func: Callable, batch_size, num_parallel_batches: Optional[int] = None,
                  drop_remainder: bool = False, num_parallel_calls=None) -> Callable:
    """`dataset.apply(map_and_batch(...))`: map, then batch."""
    return lambda ds: ds.map(map_func).batch(batch_size, drop_remainder=drop_remainder)


def unbatch() -> Callable:
    return lambda ds: ds.unbatch()


