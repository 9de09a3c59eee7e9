"""`tf.train`: optimizers, learning-rate schedules, the global step and checkpoints."""
from __future__ import annotations

from jitflow.serialize import export_meta_graph, import_meta_graph, write_graph
from jitflow.train.adadelta import AdadeltaOptimizer
from jitflow.train.adagrad import AdagradOptimizer
from jitflow.train.adam import AdamOptimizer
from jitflow.train.gradient_descent import GradientDescentOptimizer
from jitflow.train.learning_rate_decay import (cosine_decay, cosine_decay_restarts,
                                               exponential_decay, inverse_time_decay,
                                               linear_cosine_decay, natural_exp_decay,
                                               noisy_linear_cosine_decay, piecewise_constant,
                                               piecewise_constant_decay, polynomial_decay)
from jitflow.train.checkpoint_utils import init_from_checkpoint
from jitflow.ops.compat_extra import basic_train_loop
from jitflow.train.coordinator import Coordinator, LooperThread
from jitflow.train import queue_runner  # noqa: F401  (tf.train.queue_runner)
from jitflow.train.input import (batch, batch_join, input_producer, limit_epochs,
                                 match_filenames_once, range_input_producer, shuffle_batch,
                                 shuffle_batch_join, slice_input_producer,
                                 string_input_producer)
from jitflow.train.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from jitflow.train.momentum import MomentumOptimizer
from jitflow.train.monitored_session import (ChiefSessionCreator, CheckpointSaverHook,
                                             FinalOpsHook, LoggingTensorHook, MonitoredSession,
                                             MonitoredTrainingSession, NanLossDuringTrainingError,
                                             NanTensorHook, Scaffold, SecondOrStepTimer,
                                             SessionRunArgs, SessionRunContext, SessionRunHook,
                                             SessionRunValues, SingularMonitoredSession,
                                             StopAtStepHook)
from jitflow.train.moving_averages import ExponentialMovingAverage
from jitflow.train.optimizer import Optimizer
from jitflow.train.rmsprop import RMSPropOptimizer
from jitflow.train import sparse_apply as _sparse_apply  # noqa: F401  (registers its ops)
from jitflow.train.saver import (CheckpointReader, CheckpointState, NewCheckpointReader, Saver,
                                 checkpoint_exists, get_checkpoint_state, latest_checkpoint,
                                 list_variables, load_checkpoint, load_variable,
                                 update_checkpoint_state)
from jitflow.lib.summary import summary_iterator
from jitflow.train.training_util import (assert_global_step, create_global_step,
                                         get_global_step, get_or_create_global_step,
                                         global_step)

# tf.train.Example and its parts (jitflow.serialize.protos)
_EXAMPLE_MESSAGES = ("Example", "SequenceExample", "Features", "Feature", "FeatureList",
                     "FeatureLists", "BytesList", "FloatList", "Int64List")

__all__ = [
    "Optimizer", "GradientDescentOptimizer", "MomentumOptimizer", "AdamOptimizer",
    "AdagradOptimizer", "RMSPropOptimizer", "AdadeltaOptimizer", "ExponentialMovingAverage",
    "cosine_decay", "exponential_decay", "inverse_time_decay",
    "natural_exp_decay", "piecewise_constant", "polynomial_decay", "Saver", "CheckpointState",
    "CheckpointReader", "NewCheckpointReader", "checkpoint_exists", "get_checkpoint_state",
    "latest_checkpoint", "list_variables", "load_checkpoint", "load_variable",
    "update_checkpoint_state", "global_step", "get_global_step", "create_global_step",
    "get_or_create_global_step", "assert_global_step", "export_meta_graph", "import_meta_graph",
    "write_graph", "Coordinator", "LooperThread", "start_queue_runners", "ChiefSessionCreator",
    "CheckpointSaverHook", "FinalOpsHook", "LoggingTensorHook", "MonitoredSession",
    "MonitoredTrainingSession", "NanLossDuringTrainingError", "NanTensorHook", "Scaffold",
    "SecondOrStepTimer", "SessionRunArgs", "SessionRunContext", "SessionRunHook",
    "SessionRunValues", "SingularMonitoredSession", "StopAtStepHook", "init_from_checkpoint",
    "cosine_decay_restarts", "linear_cosine_decay", "noisy_linear_cosine_decay",
    "piecewise_constant_decay", "basic_train_loop", "QueueRunner", "add_queue_runner",
    "queue_runner", "batch",
    "batch_join", "input_producer",
    "limit_epochs", "match_filenames_once", "range_input_producer", "shuffle_batch",
    "shuffle_batch_join", "slice_input_producer", "string_input_producer",
    "summary_iterator", "SaverDef", *_EXAMPLE_MESSAGES,
]


def __getattr__(name: str):
    # message classes, made (and protobuf imported) on first use: SaverDef (with SaverDef.V1
    # and SaverDef.V2) and the records of input files (Example, Features, ...)
    if name == "SaverDef" or name in _EXAMPLE_MESSAGES:
        from jitflow.serialize import protos
        return getattr(protos, name)
    raise AttributeError(f"module 'jitflow.train' has no attribute {name!r}")
