"""More of `tf.train`: the proximal optimizers, small hooks (FeedFnHook, StepCounterHook), the
checkpoint-listener and session-creator base classes, checkpoint file helpers
(`get_checkpoint_mtimes`, `remove_checkpoint`, `checkpoints_iterator`), `VocabInfo` and
`ClusterSpec` (a description of jobs; jitflow itself runs in one process)."""
from __future__ import annotations

import collections
import glob
import os
import time
from typing import Callable, Iterator, Optional

from jitflow.train.monitored_session import (SecondOrStepTimer, SessionRunArgs, SessionRunHook,
                                             _global_step_tensor)
from jitflow.train.optimizer import Optimizer

__all__ = ["ProximalGradientDescentOptimizer", "ProximalAdagradOptimizer", "FeedFnHook",
           "StepCounterHook", "CheckpointSaverListener", "SessionCreator",
           "get_checkpoint_mtimes", "remove_checkpoint", "checkpoints_iterator", "VocabInfo",
           "ClusterSpec"]


# -- proximal optimizers ------------------------------------------------------------------------
def _proximal(prox, lr, l1, l2):
    """The proximal step: soft-threshold by lr * l1 (when l1 > 0), shrink by 1 + lr * l2."""
    from jitflow.ops.math.compare import maximum
    from jitflow.ops.math.unary import abs as _abs, sign
    if l1 is not None:
        prox = sign(prox) * maximum(_abs(prox) - lr * l1, 0.0)
    return prox / (1.0 + lr * l2)


class ProximalGradientDescentOptimizer(Optimizer):
    """Gradient descent followed by the proximal step of l1 and l2 regularization:
    prox = var - lr * grad; var = sign(prox) * max(|prox| - lr * l1, 0) / (1 + lr * l2)."""

    def __init__(self, learning_rate, l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "ProximalGradientDescent") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._l1 = l1_regularization_strength
        self._l2 = l2_regularization_strength

    def _apply_dense(self, grad, var):
        from jitflow.ops.state import assign
        lr = self._hyper("learning_rate", self._learning_rate, var.dtype)
        l1 = self._hyper("l1", self._l1, var.dtype) if self._l1 > 0 else None
        l2 = self._hyper("l2", self._l2, var.dtype)
        return assign(var, _proximal(var.value() - lr * grad, lr, l1, l2), read_value=False)


class ProximalAdagradOptimizer(Optimizer):
    """Adagrad's step size with the proximal step: acc += grad^2; lr_t = lr / sqrt(acc);
    prox = var - lr_t * grad; then as ProximalGradientDescent with lr_t."""

    def __init__(self, learning_rate, initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "ProximalAdagrad") -> None:
        if initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial = initial_accumulator_value
        self._l1 = l1_regularization_strength
        self._l2 = l2_regularization_strength

    def _create_slots(self, var_list: list) -> None:
        for v in var_list:
            self._get_or_make_slot(v, self._initial, "accumulator", self._name)

    def _apply_dense(self, grad, var):
        from jitflow.ops.math.unary import rsqrt
        from jitflow.ops.state import assign, assign_add
        acc = self.get_slot(var, "accumulator")
        lr = self._hyper("learning_rate", self._learning_rate, var.dtype)
        l1 = self._hyper("l1", self._l1, var.dtype) if self._l1 > 0 else None
        l2 = self._hyper("l2", self._l2, var.dtype)
        acc_t = assign_add(acc, grad * grad)   # the accumulator's new value
        lr_t = lr * rsqrt(acc_t)
        return assign(var, _proximal(var.value() - lr_t * grad, lr_t, l1, l2), read_value=False)


# -- hooks, listeners, creators -----------------------------------------------------------------
class FeedFnHook(SessionRunHook):
    """Feeds `feed_fn()`'s dict into every run."""

    def __init__(self, feed_fn: Callable[[], dict]) -> None:
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


class StepCounterHook(SessionRunHook):
    """Logs (and, given `output_dir` or `summary_writer`, writes as the summary
    "global_step/sec") the global steps per second every N steps or seconds."""

    def __init__(self, every_n_steps: Optional[int] = 100, every_n_secs: Optional[float] = None,
                 output_dir: Optional[str] = None, summary_writer=None) -> None:
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._output_dir = output_dir
        self._writer = summary_writer
        self._tag = "global_step/sec"
        self.rates: list = []   # (step, steps per second) as logged

    def begin(self) -> None:
        self._gs = _global_step_tensor()
        if self._gs is None:
            raise RuntimeError("Global step should be created to use StepCounterHook.")
        if self._writer is None and self._output_dir:
            from jitflow.lib.summary import FileWriterCache
            self._writer = FileWriterCache.get(self._output_dir)

    def before_run(self, run_context):
        return SessionRunArgs(self._gs)

    def after_run(self, run_context, run_values) -> None:
        step = int(run_values.results)
        if self._timer.last_triggered_step() is None:
            self._timer.update_last_triggered_step(step)
            self._last_time = time.time()
            return
        if self._timer.should_trigger_for_step(step):
            now = time.time()
            steps = step - self._timer.last_triggered_step()
            elapsed = now - self._last_time
            self._timer.update_last_triggered_step(step)
            self._last_time = now
            if steps > 0 and elapsed > 0:
                rate = steps / elapsed
                self.rates.append((step, rate))
                from jitflow import logging
                logging.info("%s: %g", self._tag, rate)
                if self._writer is not None:
                    from jitflow.serialize import protos
                    summary = protos.Summary(value=[protos.Summary.Value(
                        tag=self._tag, simple_value=rate)])
                    self._writer.add_summary(summary, step)


    def end(self, session) -> None:
        if self._writer is not None:
            self._writer.flush()


class CheckpointSaverListener:
    """Called around the saves of a CheckpointSaverHook (override what you need)."""

    def begin(self) -> None:
        pass

    def before_save(self, session, global_step_value) -> None:
        pass

    def after_save(self, session, global_step_value):
        pass

    def end(self, session, global_step_value) -> None:
        pass


class SessionCreator:
    """The interface of MonitoredSession's session factories (`create_session`)."""

    def create_session(self):
        raise NotImplementedError("create_session is not implemented for "
                                  f"{type(self).__name__}")


# -- checkpoint files ---------------------------------------------------------------------------
def _checkpoint_files(prefix: str) -> list:
    """A checkpoint's files: V2 (`.index`, `.data-*`) or a V1 file of that name."""
    v2 = glob.glob(glob.escape(prefix) + ".index")
    return v2 if v2 else glob.glob(glob.escape(prefix))


def get_checkpoint_mtimes(checkpoint_prefixes) -> list:
    """The modification times (seconds since the epoch) of the checkpoints that exist."""
    out = []
    for prefix in checkpoint_prefixes:
        files = _checkpoint_files(os.fspath(prefix))
        if files:
            out.append(os.path.getmtime(files[0]))
    return out


def remove_checkpoint(checkpoint_prefix, checkpoint_format_version: int = 2,
                      meta_graph_suffix: str = "meta") -> None:
    """Delete a checkpoint's files (index, data shards, and its meta graph)."""
    prefix = os.fspath(checkpoint_prefix)
    names = [prefix + ".index", *glob.glob(glob.escape(prefix) + ".data-*")] \
        if checkpoint_format_version == 2 else [prefix]
    names.append(prefix + "." + meta_graph_suffix)
    for name in names:
        if os.path.exists(name):
            os.remove(name)


def checkpoints_iterator(checkpoint_dir, min_interval_secs: float = 0,
                         timeout: Optional[float] = None,
                         timeout_fn: Optional[Callable[[], bool]] = None) -> Iterator[str]:
    """Yield each new latest checkpoint of `checkpoint_dir` as it appears; after `timeout`
    seconds without one, stop (unless `timeout_fn()` says to keep waiting)."""
    from jitflow.train.saver import latest_checkpoint
    last = None
    while True:
        start = time.time()
        path = None
        while True:
            path = latest_checkpoint(checkpoint_dir)
            if path is not None and path != last:
                break
            if timeout is not None and time.time() - start + 0.1 > timeout:
                path = None
                break
            time.sleep(0.1 if timeout is not None and timeout < 2 else 1.0)
        if path is None:
            if timeout_fn is None or timeout_fn():
                return
            continue
        last = path
        yield path
        wait = start + min_interval_secs - time.time()
        if wait > 0:
            time.sleep(wait)


# -- descriptions -------------------------------------------------------------------------------
class VocabInfo(collections.namedtuple("VocabInfo", [
        "new_vocab", "new_vocab_size", "num_oov_buckets", "old_vocab", "old_vocab_size",
        "backup_initializer", "axis"])):
    """How a vocabulary-indexed variable maps to an older vocabulary (for warm starts)."""

    def __new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab, old_vocab_size=-1,
                backup_initializer=None, axis: int = 0):
        if axis not in (0, 1):
            raise ValueError(f"The only supported values for the axis argument are 0 and 1. "
                             f"Provided axis: {axis}")
        return super().__new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab,
                               old_vocab_size, backup_initializer, axis)


class ClusterSpec:
    """Jobs and their task addresses: {"worker": ["host:2222", ...]} or {job: {index: addr}}."""

    def __init__(self, cluster) -> None:
        if isinstance(cluster, ClusterSpec):
            cluster = cluster.as_dict()
        if not isinstance(cluster, dict):
            raise TypeError("`cluster` must be a dictionary mapping one or more job names to "
                            "lists of network addresses, or a `ClusterSpec`.")
        self._jobs: dict = {}
        for job, tasks in cluster.items():
            if isinstance(tasks, (list, tuple)):
                self._jobs[job] = {i: str(a) for i, a in enumerate(tasks)}
            elif isinstance(tasks, dict):
                self._jobs[job] = {int(i): str(a) for i, a in tasks.items()}
            else:
                raise TypeError(f"The tasks for job {job!r} must be a list or a dictionary "
                                "from integers to strings.")

    @property
    def jobs(self) -> list:
        return list(self._jobs)

    def as_dict(self) -> dict:
        """Each job's addresses: a list when its task indices are 0..n-1, else a dict."""
        out = {}
        for job, tasks in self._jobs.items():
            keys = sorted(tasks)
            out[job] = [tasks[k] for k in keys] if keys == list(range(len(keys))) else \
                dict(tasks)
        return out

    def _tasks(self, job_name: str) -> dict:
        if job_name not in self._jobs:
            raise ValueError(f"No such job in cluster: {job_name!r}")
        return self._jobs[job_name]

    def num_tasks(self, job_name: str) -> int:
        return len(self._tasks(job_name))

    def task_indices(self, job_name: str) -> list:
        return sorted(self._tasks(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        tasks = self._tasks(job_name)
        if task_index not in tasks:
            raise ValueError(f"No task with index {task_index!r} in job {job_name!r}")
        return tasks[task_index]

    def job_tasks(self, job_name: str) -> list:
        """The addresses by index (None for missing indices)."""
        tasks = self._tasks(job_name)
        return [tasks.get(i) for i in range(max(tasks) + 1)] if tasks else []

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __eq__(self, other) -> bool:
        return isinstance(other, ClusterSpec) and self._jobs == other._jobs

    def __ne__(self, other) -> bool:
        return not self == other

    def __repr__(self) -> str:
        return f"ClusterSpec({self.as_dict()!r})"
