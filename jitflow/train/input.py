"""TF1's queue-based input pipelines: `string_input_producer`, `input_producer`,
`range_input_producer`, `slice_input_producer`, `limit_epochs`, `batch`, `shuffle_batch`,
`batch_join`, `shuffle_batch_join` and `match_filenames_once`.

Each builds TF's graph: a queue, the enqueue ops a `QueueRunner` runs on threads (registered
in the QUEUE_RUNNERS collection for `start_queue_runners`), and a dequeue giving the batch.
`num_epochs` counts with a local variable (run `tf.local_variables_initializer()`), after which
the producer's queue closes and consumers get OutOfRangeError once it is drained.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import GraphKeys, Tensor, convert_to_tensor, name_scope
from jitflow.ops.data_flow import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue, count_up_to
from jitflow.core.shapes import TensorShape, as_shape
from jitflow.train.queue_runner import QueueRunner, add_queue_runner

__all__ = ["limit_epochs", "input_producer", "string_input_producer", "range_input_producer",
           "slice_input_producer", "batch", "shuffle_batch", "batch_join",
           "shuffle_batch_join", "match_filenames_once"]


def limit_epochs(tensor, num_epochs: Optional[int] = None, name: Optional[str] = None):
    """`tensor`, raising OutOfRangeError after it has been evaluated `num_epochs` times
    (counted in a local variable `epochs`)."""
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    from jitflow.ops.identity import identity
    from jitflow.ops.state import Variable
    from jitflow.core.graph import control_dependencies
    with name_scope(name, "limit_epochs", [tensor]) as scope:
        epochs = Variable(np.int64(0), name="epochs", trainable=False,
                          collections=[GraphKeys.LOCAL_VARIABLES])
        counter = count_up_to(epochs, num_epochs)
        with control_dependencies([counter]):
            return identity(tensor, name=scope[:-1] if scope else "limit_epochs")


def _fraction_full(q, capacity: int, summary_name: Optional[str]) -> None:
    if summary_name is None:
        return
    from jitflow.lib import summary
    from jitflow.ops.math.casting import cast
    summary.scalar(summary_name, cast(q.size(), _dtypes.float32) * (1.0 / capacity))


def input_producer(input_tensor, element_shape=None, num_epochs: Optional[int] = None,
                   shuffle: bool = True, seed=None, capacity: int = 32,
                   shared_name: Optional[str] = None, summary_name: Optional[str] = None,
                   name: Optional[str] = None, cancel_op=None) -> FIFOQueue:
    """A queue fed with the rows of `input_tensor` (shuffled each epoch if `shuffle`), for
    `num_epochs` epochs or forever; a queue runner does the feeding."""
    from jitflow.ops.random import random_shuffle
    with name_scope(name, "input_producer", [input_tensor]) as scope:
        x = convert_to_tensor(input_tensor, name="input_tensor")
        shape = TensorShape(None) if x.shape.ndims is None else TensorShape(
            x.shape.as_tuple()[1:])
        if element_shape is not None:
            shape = shape.merge_with(as_shape(element_shape)) if shape.ndims is not None \
                else as_shape(element_shape)
        if not shape.is_fully_defined():
            raise ValueError("Either `input_tensor` must have a fully defined shape or "
                             "`element_shape` must be specified")
        if shuffle:
            x = random_shuffle(x, seed=seed)
        x = limit_epochs(x, num_epochs)
        q = FIFOQueue(capacity=capacity, dtypes=[x.dtype], shapes=[shape],
                      shared_name=shared_name, name=scope[:-1] if scope else "fifo_queue")
        enq = q.enqueue_many([x])
        add_queue_runner(QueueRunner(q, [enq], cancel_op=cancel_op))
        _fraction_full(q, capacity, summary_name)
        return q


def string_input_producer(string_tensor, num_epochs: Optional[int] = None,
                          shuffle: bool = True, seed=None, capacity: int = 32,
                          shared_name: Optional[str] = None, name: Optional[str] = None,
                          cancel_op=None) -> FIFOQueue:
    """`tf.train.string_input_producer`: a queue of strings (file names, typically) for
    readers."""
    if not isinstance(string_tensor, Tensor) and not len(string_tensor):
        raise ValueError("string_input_producer requires a non-null input tensor")
    with name_scope(name, "input_producer", [string_tensor]) as scope:
        s = convert_to_tensor(string_tensor, dtype=_dtypes.string)
        return input_producer(s, element_shape=[], num_epochs=num_epochs, shuffle=shuffle,
                              seed=seed, capacity=capacity, shared_name=shared_name,
                              name=scope[:-1] if scope else None,
                              summary_name=f"fraction_of_{capacity}_full",
                              cancel_op=cancel_op)


def range_input_producer(limit, num_epochs: Optional[int] = None, shuffle: bool = True,
                         seed=None, capacity: int = 32, shared_name: Optional[str] = None,
                         name: Optional[str] = None) -> FIFOQueue:
    """`tf.train.range_input_producer`: a queue of the integers 0..limit-1."""
    from jitflow.ops.sources import range as range_
    with name_scope(name, "input_producer", [limit]) as scope:
        r = range_(limit)
        return input_producer(r, [], num_epochs, shuffle, seed, capacity, shared_name,
                              f"fraction_of_{capacity}_full", scope[:-1] if scope else None)


def slice_input_producer(tensor_list, num_epochs: Optional[int] = None, shuffle: bool = True,
                         seed=None, capacity: int = 32, shared_name: Optional[str] = None,
                         name: Optional[str] = None) -> list:
    """`tf.train.slice_input_producer`: one row of each tensor of `tensor_list` at a time
    (the same row of each), from a queue of row indices."""
    from jitflow.ops.shape_ops import shape
    from jitflow.ops.slicing import gather
    with name_scope(name, "input_producer", list(tensor_list)):
        ts = [convert_to_tensor(t) for t in tensor_list]
        if not ts:
            raise ValueError("Expected at least one tensor in slice_input_producer().")
        n = ts[0].shape.as_tuple()[0] if ts[0].shape.ndims else None
        size = n if n is not None else shape(ts[0])[0]
        q = range_input_producer(size, num_epochs=num_epochs, shuffle=shuffle, seed=seed,
                                 capacity=capacity, shared_name=shared_name)
        index = q.dequeue()
        return [gather(t, index) for t in ts]


# -- batching -------------------------------------------------------------------------------------
def _as_list(tensors) -> list:
    if isinstance(tensors, dict):
        return [tensors[k] for k in sorted(tensors, key=str)]
    if isinstance(tensors, (list, tuple)):
        return list(tensors)
    return [tensors]


def _as_original(tensors, out):
    if isinstance(tensors, dict):
        outs = out if isinstance(out, list) else [out]
        return {k: outs[i] for i, k in enumerate(sorted(tensors, key=str))}
    return out


def _shapes(lists: list, shapes, enqueue_many: bool, dynamic_pad: bool) -> list:
    if shapes is not None:
        return [as_shape(s) for s in shapes]
    out = []
    for i in range(len(lists[0])):
        s = None
        for tl in lists:
            t = tl[i]
            if t.shape.ndims is None:
                raise ValueError(f"Cannot infer Tensor's rank: {t}")
            cur = TensorShape(t.shape.as_tuple()[1:]) if enqueue_many else t.shape
            s = cur if s is None else s.merge_with(cur)
        out.append(s)
    if not dynamic_pad and not all(s.is_fully_defined() for s in out):
        raise ValueError(f"All shapes must be fully defined: {out}")
    return out


def _batch_common(lists: list, tensors, batch_size, capacity: int, enqueue_many: bool,
                  shapes, dynamic_pad: bool, allow_smaller_final_batch: bool,
                  shared_name, name, default_name: str, threads_per_list: int,
                  shuffle: Optional[tuple] = None):
    with name_scope(name, default_name, [t for tl in lists for t in tl]) as scope:
        lists = [[convert_to_tensor(t) for t in tl] for tl in lists]
        types = [t.dtype for t in lists[0]]
        for tl in lists[1:]:
            if [t.dtype for t in tl] != types:
                raise TypeError("All tensor lists must have the same dtypes")
        shps = _shapes(lists, shapes, enqueue_many, dynamic_pad)
        if shuffle is not None:
            min_after, seed = shuffle
            q = RandomShuffleQueue(capacity=capacity, min_after_dequeue=min_after,
                                   dtypes=types, shapes=shps, seed=seed,
                                   shared_name=shared_name)
        elif dynamic_pad:
            q = PaddingFIFOQueue(capacity=capacity, dtypes=types, shapes=shps,
                                 shared_name=shared_name)
        else:
            q = FIFOQueue(capacity=capacity, dtypes=types, shapes=shps,
                          shared_name=shared_name)
        ops = []
        for tl in lists:
            enq = q.enqueue_many(tl) if enqueue_many else q.enqueue(tl)
            ops.extend([enq] * threads_per_list)
        add_queue_runner(QueueRunner(q, ops))
        from jitflow.lib import summary
        from jitflow.ops.math.casting import cast
        if shuffle is not None:
            full = cast(q.size() - shuffle[0], _dtypes.float32)
            from jitflow.ops.math.compare import maximum
            frac = maximum(0.0, full) * (1.0 / (capacity - shuffle[0]))
            summary.scalar(f"fraction_over_{shuffle[0]}_of_{capacity - shuffle[0]}_full",
                           frac)
        else:
            summary.scalar(f"fraction_of_{capacity}_full",
                           cast(q.size(), _dtypes.float32) * (1.0 / capacity))
        out_name = scope[:-1] if scope else None
        if allow_smaller_final_batch:
            out = q.dequeue_up_to(batch_size, name=out_name)
        else:
            out = q.dequeue_many(batch_size, name=out_name)
        return _as_original(tensors, out)


def batch(tensors, batch_size, num_threads: int = 1, capacity: int = 32,
          enqueue_many: bool = False, shapes=None, dynamic_pad: bool = False,
          allow_smaller_final_batch: bool = False, shared_name: Optional[str] = None,
          name: Optional[str] = None):
    """`tf.train.batch`: batches of `tensors` from a queue filled by `num_threads` threads.

    As TF1, a list of one tensor gives one batched tensor, a dict gives a dict."""
    return _batch_common([_as_list(tensors)], tensors, batch_size, capacity, enqueue_many,
                         shapes, dynamic_pad, allow_smaller_final_batch, shared_name, name,
                         "batch", num_threads)


def batch_join(tensors_list, batch_size, capacity: int = 32, enqueue_many: bool = False,
               shapes=None, dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
               shared_name: Optional[str] = None, name: Optional[str] = None):
    """`tf.train.batch_join`: batches mixing several lists of tensors, one thread each."""
    lists = [_as_list(t) for t in tensors_list]
    return _batch_common(lists, tensors_list[0], batch_size, capacity, enqueue_many, shapes,
                         dynamic_pad, allow_smaller_final_batch, shared_name, name,
                         "batch_join", 1)


def shuffle_batch(tensors, batch_size, capacity: int, min_after_dequeue: int,
                  num_threads: int = 1, seed=None, enqueue_many: bool = False, shapes=None,
                  allow_smaller_final_batch: bool = False, shared_name: Optional[str] = None,
                  name: Optional[str] = None):
    """`tf.train.shuffle_batch`: batches drawn at random from a RandomShuffleQueue holding at
    least `min_after_dequeue` elements (until it is closed)."""
    return _batch_common([_as_list(tensors)], tensors, batch_size, capacity, enqueue_many,
                         shapes, False, allow_smaller_final_batch, shared_name, name,
                         "shuffle_batch", num_threads, (int(min_after_dequeue), seed))


def shuffle_batch_join(tensors_list, batch_size, capacity: int, min_after_dequeue: int,
                       seed=None, enqueue_many: bool = False, shapes=None,
                       allow_smaller_final_batch: bool = False,
                       shared_name: Optional[str] = None, name: Optional[str] = None):
    """`tf.train.shuffle_batch_join`: `shuffle_batch` over several lists, one thread each."""
    lists = [_as_list(t) for t in tensors_list]
    return _batch_common(lists, tensors_list[0], batch_size, capacity, enqueue_many, shapes,
                         False, allow_smaller_final_batch, shared_name, name,
                         "shuffle_batch_join", 1, (int(min_after_dequeue), seed))


# -- match_filenames_once -------------------------------------------------------------------------
def match_filenames_once(pattern, name: Optional[str] = None):
    """`tf.train.match_filenames_once`: a local variable holding the file names matching
    `pattern`, found when local variables are initialized."""
    from jitflow.ops.io_ops import matching_files
    from jitflow.ops.state import Variable
    with name_scope(name, "matching_filenames", [pattern]) as scope:
        return Variable(lambda: matching_files(pattern), trainable=False,
                        name=scope[:-1] if scope else "matching_filenames",
                        validate_shape=False, collections=[GraphKeys.LOCAL_VARIABLES])
