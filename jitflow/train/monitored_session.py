"""`MonitoredSession`, `MonitoredTrainingSession`, `Scaffold` and the common session hooks.

A monitored session creates its session (restoring the latest checkpoint of `checkpoint_dir`
when there is one, else running the initializers), runs every `Session.run` through the hooks
(each may add fetches and feeds and may request a stop), and calls the hooks' `end` on close.
"""
from __future__ import annotations

import os
import time
from typing import Optional

import numpy as np

from jitflow.core.graph import get_default_graph

__all__ = [
    "SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues", "Scaffold",
    "ChiefSessionCreator", "MonitoredSession", "SingularMonitoredSession",
    "MonitoredTrainingSession", "StopAtStepHook", "CheckpointSaverHook", "LoggingTensorHook",
    "NanTensorHook", "NanLossDuringTrainingError", "SecondOrStepTimer", "FinalOpsHook",
]


# -- hook protocol --------------------------------------------------------------------------------
class SessionRunArgs:
    """What a hook adds to a run: extra `fetches` and `feed_dict` entries."""

    def __init__(self, fetches, feed_dict=None, options=None) -> None:
        self.fetches = fetches
        self.feed_dict = feed_dict
        self.options = options


class SessionRunContext:
    """The run being made (`original_args`, `session`); hooks may `request_stop()`."""

    def __init__(self, original_args: SessionRunArgs, session) -> None:
        self.original_args = original_args
        self.session = session
        self._stop_requested = False

    def request_stop(self) -> None:
        self._stop_requested = True

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested


class SessionRunValues:
    """The values of a hook's extra fetches after a run."""

    def __init__(self, results, options=None, run_metadata=None) -> None:
        self.results = results
        self.options = options
        self.run_metadata = run_metadata


class SessionRunHook:
    """Base class: override any of begin, after_create_session, before_run, after_run, end."""

    def begin(self) -> None:
        pass

    def after_create_session(self, session, coord) -> None:
        pass

    def before_run(self, run_context: SessionRunContext) -> Optional[SessionRunArgs]:
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        pass

    def end(self, session) -> None:
        pass


class SecondOrStepTimer:
    """Triggers every `every_secs` seconds or every `every_steps` steps (exactly one is set)."""

    def __init__(self, every_secs=None, every_steps=None) -> None:
        if (every_secs is None) == (every_steps is None):
            raise ValueError("exactly one of every_secs and every_steps should be provided.")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self._last_time = None
        self._last_step = None

    def reset(self) -> None:
        self._last_time = self._last_step = None

    def should_trigger_for_step(self, step: int) -> bool:
        if self._last_step is None:
            return True
        if self._last_step == step:
            return False
        if self._every_secs is not None:
            return time.time() >= self._last_time + self._every_secs
        return step >= self._last_step + self._every_steps

    def update_last_triggered_step(self, step: int):
        now = time.time()
        elapsed = None if self._last_time is None else (now - self._last_time,
                                                         step - self._last_step)
        self._last_time, self._last_step = now, step
        return elapsed or (None, None)

    def last_triggered_step(self):
        return self._last_step


def _global_step_tensor(graph=None):
    from jitflow.train.training_util import get_global_step
    return get_global_step(graph)


class StopAtStepHook(SessionRunHook):
    """Requests a stop once the global step reaches `last_step` (or start + `num_steps`)."""

    def __init__(self, num_steps: Optional[int] = None, last_step: Optional[int] = None) -> None:
        if (num_steps is None) == (last_step is None):
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and num_steps < 0:
            raise ValueError("num_steps must be non-negative.")
        if last_step is not None and last_step < 0:
            raise ValueError("last_step must be non-negative.")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self) -> None:
        self._gs = _global_step_tensor()
        if self._gs is None:
            raise RuntimeError("Global step should be created to use StopAtStepHook.")

    def after_create_session(self, session, coord) -> None:
        if self._last_step is None:
            self._last_step = int(session.run(self._gs)) + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._gs)

    def after_run(self, run_context, run_values) -> None:
        # the fetched value may be from before the run's increment: check the stored value
        if int(run_values.results) + 1 >= self._last_step:
            if int(run_context.session.run(self._gs)) >= self._last_step:
                run_context.request_stop()


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint every `save_secs` seconds or `save_steps` steps, and at the end."""

    def __init__(self, checkpoint_dir: str, save_secs=None, save_steps=None, saver=None,
                 checkpoint_basename: str = "model.ckpt", scaffold=None, listeners=None) -> None:
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._saver = saver
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = list(listeners or [])

    def begin(self) -> None:
        self._gs = _global_step_tensor()
        if self._gs is None:
            raise RuntimeError("Global step should be created to use CheckpointSaverHook.")
        os.makedirs(self._checkpoint_dir, exist_ok=True)

    def _get_saver(self):
        """The saver, looked up late: the scaffold makes its default one when finalized."""
        if self._saver is None:
            if self._scaffold is not None and self._scaffold.saver is not None:
                self._saver = self._scaffold.saver
            else:
                from jitflow.train.saver import Saver
                self._saver = Saver()
        return self._saver

    def after_create_session(self, session, coord) -> None:
        self._save(session, int(session.run(self._gs)))
        self._timer.update_last_triggered_step(int(session.run(self._gs)))

    def before_run(self, run_context):
        return SessionRunArgs(self._gs)

    def after_run(self, run_context, run_values) -> None:
        # The step fetched with the run may be the value before or after the run's increment
        # (backends may differ): near a trigger point, read the stored value.
        fetched = int(run_values.results)
        if self._timer.should_trigger_for_step(fetched + 1) or \
                self._timer.should_trigger_for_step(fetched):
            step = int(run_context.session.run(self._gs))
            if self._timer.should_trigger_for_step(step):
                self._timer.update_last_triggered_step(step)
                self._save(run_context.session, step)

    def end(self, session) -> None:
        step = int(session.run(self._gs))
        if step != self._timer.last_triggered_step():
            self._save(session, step)

    def _save(self, session, step: int) -> None:
        for listener in self._listeners:
            if hasattr(listener, "before_save"):
                listener.before_save(session, step)
        self._get_saver().save(session, self._save_path, global_step=step)
        for listener in self._listeners:
            if hasattr(listener, "after_save"):
                listener.after_save(session, step)


class LoggingTensorHook(SessionRunHook):
    """Prints the given tensors every `every_n_iter` runs or `every_n_secs` seconds."""

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end: bool = False,
                 formatter=None) -> None:
        if not at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError("either at_end and/or exactly one of every_n_iter and "
                             "every_n_secs must be provided.")
        if isinstance(tensors, dict):
            self._tags = list(tensors)
            self._tensors = dict(tensors)
        else:
            items = list(tensors)
            self._tags = [t if isinstance(t, str) else t.name for t in items]
            self._tensors = dict(zip(self._tags, items))
        self._timer = None if at_end and every_n_iter is None and every_n_secs is None else \
            SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        self._at_end = at_end
        self._formatter = formatter
        self._iter = 0
        self.logged: list = []  # the lines written, for inspection

    def before_run(self, run_context):
        self._should_log = self._timer is not None and \
            self._timer.should_trigger_for_step(self._iter)
        return SessionRunArgs(self._tensors) if self._should_log else None

    def after_run(self, run_context, run_values) -> None:
        if self._should_log:
            self._timer.update_last_triggered_step(self._iter)
            self._log(run_values.results)
        self._iter += 1

    def end(self, session) -> None:
        if self._at_end:
            self._log(session.run(self._tensors))

    def _log(self, values: dict) -> None:
        if self._formatter is not None:
            line = self._formatter(values)
        else:
            line = ", ".join(f"{tag} = {values[tag]}" for tag in self._tags)
        self.logged.append(line)
        print(line)


class NanLossDuringTrainingError(RuntimeError):
    def __str__(self) -> str:
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Stops (or raises NanLossDuringTrainingError) when the loss becomes NaN."""

    def __init__(self, loss_tensor, fail_on_nan_loss: bool = True) -> None:
        self._loss = loss_tensor
        self._fail = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values) -> None:
        if np.isnan(run_values.results).any():
            if self._fail:
                raise NanLossDuringTrainingError
            run_context.request_stop()


class FinalOpsHook(SessionRunHook):
    """Runs `final_ops` when the session ends; their values are in `final_ops_values`."""

    def __init__(self, final_ops, final_ops_feed_dict=None) -> None:
        self._final_ops = final_ops
        self._feed = final_ops_feed_dict
        self.final_ops_values = None

    def end(self, session) -> None:
        if self._final_ops is not None:
            self.final_ops_values = session.run(self._final_ops, feed_dict=self._feed)


# -- scaffold and session creation --------------------------------------------------------------
class Scaffold:
    """The init op and saver a monitored session uses (defaults made by `finalize`)."""

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
                 ready_for_local_init_op=None, local_init_op=None, summary_op=None, saver=None,
                 copy_from_scaffold=None) -> None:
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._init_fn = init_fn
        self._local_init_op = local_init_op
        self._saver = saver
        self._finalized = False

    def finalize(self) -> "Scaffold":
        """Create the missing pieces and finalize the graph, as TF1 does."""
        if self._finalized:
            return self
        from jitflow.ops.state import (global_variables, global_variables_initializer,
                                       local_variables_initializer)
        if self._init_op is None:
            self._init_op = global_variables_initializer()
        if self._local_init_op is None:
            self._local_init_op = local_variables_initializer()
        if self._saver is None and global_variables():
            from jitflow.train.saver import Saver
            self._saver = Saver()
        get_default_graph().finalize()
        self._finalized = True
        return self

    @property
    def init_op(self):
        return self._init_op

    @property
    def init_feed_dict(self):
        return self._init_feed_dict

    @property
    def init_fn(self):
        return self._init_fn

    @property
    def local_init_op(self):
        return self._local_init_op

    @property
    def saver(self):
        return self._saver


class ChiefSessionCreator:
    """Creates a session that restores from `checkpoint_dir` if it has a checkpoint, else runs
    the scaffold's initializers."""

    def __init__(self, scaffold: Optional[Scaffold] = None, master: str = "", config=None,
                 checkpoint_dir: Optional[str] = None,
                 checkpoint_filename_with_path: Optional[str] = None) -> None:
        self._scaffold = scaffold or Scaffold()
        self._config = config
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_path = checkpoint_filename_with_path

    def create_session(self):
        from jitflow.core.session import Session
        from jitflow.train.saver import latest_checkpoint
        self._scaffold.finalize()
        sess = Session(config=self._config)
        path = self._checkpoint_path
        if path is None and self._checkpoint_dir:
            path = latest_checkpoint(self._checkpoint_dir)
        if path is not None and self._scaffold.saver is not None:
            self._scaffold.saver.restore(sess, path)
            # variables the checkpoint does not cover still need their initial values
            from jitflow.ops.state import global_variables
            missing = [v for v in global_variables() if v.op not in sess._state]
            for v in missing:
                sess.run(v.initializer)
        else:
            sess.run(self._scaffold.init_op, feed_dict=self._scaffold.init_feed_dict)
            if self._scaffold.init_fn is not None:
                self._scaffold.init_fn(self._scaffold, sess)
        if self._scaffold.local_init_op is not None:
            sess.run(self._scaffold.local_init_op)
        return sess


class MonitoredSession:
    """A session whose runs go through hooks; use as a context manager or call `close()`."""

    def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs: float = 120):
        from jitflow.train.coordinator import Coordinator
        self._hooks = list(hooks or [])
        for h in self._hooks:
            h.begin()
        self._creator = session_creator or ChiefSessionCreator()
        self._sess = self._creator.create_session()
        self._coord = Coordinator()
        for h in self._hooks:
            h.after_create_session(self._sess, self._coord)
        self._should_stop = False
        self._closed = False

    @property
    def graph(self):
        return self._sess.graph

    def raw_session(self):
        return self._sess

    def should_stop(self) -> bool:
        return self._should_stop or self._closed or self._coord.should_stop()

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Run `fetches` with every hook's extra fetches and feeds; returns `fetches`' values."""
        if self._closed:
            raise RuntimeError("Run called even after should_stop requested.")
        ctx = SessionRunContext(SessionRunArgs(fetches, feed_dict), self._sess)
        extra, feeds = [], dict(feed_dict or {})
        for h in self._hooks:
            req = h.before_run(ctx)
            extra.append(None if req is None else req.fetches)
            if req is not None and req.feed_dict:
                for k, v in req.feed_dict.items():
                    if k in feeds:
                        raise RuntimeError(f"Same tensor is fed by a SessionRunHook and user. "
                                           f"Conflict(s): {k}")
                    feeds[k] = v
        hook_idx = [i for i, f in enumerate(extra) if f is not None]
        all_fetches = {"caller": fetches, "hooks": [extra[i] for i in hook_idx]}
        results = self._sess.run(all_fetches, feed_dict=feeds or None)
        hook_results = dict(zip(hook_idx, results["hooks"]))
        for i, h in enumerate(self._hooks):
            h.after_run(ctx, SessionRunValues(hook_results.get(i), options, run_metadata))
        if ctx.stop_requested:
            self._should_stop = True
        return results["caller"]

    def close(self) -> None:
        if self._closed:
            return
        try:
            for h in self._hooks:
                h.end(self._sess)
        finally:
            self._closed = True
            self._coord.request_stop()
            self._sess.close()

    def __enter__(self) -> "MonitoredSession":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        from jitflow.core.errors import OutOfRangeError
        if exc_type is None or issubclass(exc_type, OutOfRangeError):
            self.close()
        else:
            self._closed = True
            self._sess.close()
        return exc_type is not None and issubclass(exc_type, OutOfRangeError)


class SingularMonitoredSession(MonitoredSession):
    """A MonitoredSession with a chief session creator built from its arguments."""

    def __init__(self, hooks=None, scaffold=None, master: str = "", config=None,
                 checkpoint_dir: Optional[str] = None, stop_grace_period_secs: float = 120,
                 checkpoint_filename_with_path: Optional[str] = None) -> None:
        creator = ChiefSessionCreator(scaffold, master, config, checkpoint_dir,
                                      checkpoint_filename_with_path)
        super().__init__(creator, hooks, stop_grace_period_secs)


_USE_DEFAULT = object()


def MonitoredTrainingSession(master: str = "", is_chief: bool = True,  # noqa: N802
                             checkpoint_dir: Optional[str] = None, scaffold=None, hooks=None,
                             chief_only_hooks=None, save_checkpoint_secs=_USE_DEFAULT,
                             save_summaries_steps=_USE_DEFAULT,
                             save_summaries_secs=_USE_DEFAULT, config=None,
                             stop_grace_period_secs: float = 120,
                             log_step_count_steps: int = 100, max_wait_secs: float = 7200,
                             save_checkpoint_steps=_USE_DEFAULT, summary_dir=None):
    """TF1's training session: restores or initializes, saves checkpoints to `checkpoint_dir`
    (every 600 s by default, or every `save_checkpoint_steps`), and runs `hooks`."""
    if save_checkpoint_secs is _USE_DEFAULT and save_checkpoint_steps is _USE_DEFAULT:
        save_checkpoint_secs, save_checkpoint_steps = 600, None
    elif save_checkpoint_secs is _USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is _USE_DEFAULT:
        save_checkpoint_steps = None
    scaffold = scaffold or Scaffold()
    all_hooks = list(hooks or [])
    if is_chief:
        all_hooks += list(chief_only_hooks or [])
        if checkpoint_dir and (save_checkpoint_secs or save_checkpoint_steps):
            all_hooks.append(CheckpointSaverHook(checkpoint_dir, save_secs=save_checkpoint_secs,
                                                 save_steps=save_checkpoint_steps,
                                                 scaffold=scaffold))
    creator = ChiefSessionCreator(scaffold, master, config, checkpoint_dir)
    return MonitoredSession(creator, all_hooks, stop_grace_period_secs)
