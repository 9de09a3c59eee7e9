"""`tf.contrib.slim` (`slim = tf.contrib.slim`): one namespace for contrib's layers,
initializers and regularizers, `arg_scope`, the variable helpers, `slim.losses`,
`slim.learning.create_train_op` and `slim.utils`."""
from __future__ import annotations

from jitflow.contrib import layers, losses  # noqa: F401
from jitflow.contrib.framework import *  # noqa: F401,F403
from jitflow.contrib.framework import __all__ as _framework_names
from jitflow.contrib.layers import *  # noqa: F401,F403
from jitflow.contrib.layers import __all__ as _layer_names
from jitflow.contrib.layers import utils  # noqa: F401
from jitflow.contrib.slim import learning  # noqa: F401

__all__ = sorted(set(_framework_names) | set(_layer_names)
                 | {"layers", "losses", "learning", "utils"})

_MISSING = {
    "metrics": "tf.contrib.metrics is not implemented; use tf.metrics",
    "evaluation": "the evaluation loop is not implemented",
    "queues": "not implemented",
    "summaries": "use tf.contrib.layers' summarize_* or tf.summary",
    "model_analyzer": "not implemented",
    "dataset": "slim's data providers are not implemented; use tf.data",
    "dataset_data_provider": "not implemented; use tf.data",
    "tfexample_decoder": "not implemented; use tf.parse_single_example",
    "parallel_reader": "not implemented; use tf.data",
    "prefetch_queue": "not implemented; use tf.data",
    "nets": "slim's model zoo is not part of TF 1.15's tf.contrib.slim",
}


def __getattr__(name: str):
    if name in _MISSING:
        raise AttributeError(f"tf.contrib.slim.{name} is not available in jitflow: "
                             f"{_MISSING[name]}")
    raise AttributeError(f"module 'jitflow.contrib.slim' has no attribute {name!r}")
