"""`tf.contrib`: the TF 1.x contrib libraries that TF1 tutorials use and TensorFlow 2 removed.

`tf.contrib.layers` (fully_connected, conv2d, batch_norm, the xavier and variance-scaling
initializers, regularizers, optimize_loss, ...), `tf.contrib.rnn` (the cells, their wrappers,
`static_rnn`, the stacked bidirectional RNNs), `tf.contrib.framework` (`arg_scope`, the variable
helpers), `tf.contrib.slim` (the names slim programs use), `tf.contrib.losses` (TF1's first
loss functions) and `tf.contrib.training` (HParams, create_train_op).
Each is built on jitflow's own layers, cells, variable scopes and initializers, with TF 1.15's
signatures, defaults and variable names.

Submodules load on first use, so `import jitflow` does not pay for them. The contrib modules
that are not here (seq2seq, learn, distributions, ...) raise an AttributeError that says so.
"""
from __future__ import annotations

import importlib

__all__ = ["framework", "layers", "losses", "rnn", "slim", "training"]

# TF 1.15 contrib modules jitflow does not provide, with the reason given to the user
_MISSING = {
    "seq2seq": "its decoders and attention wrappers are not implemented",
    "learn": "its Estimators and dataset downloads are not implemented",
    "distributions": "use tf.distributions' few functions or write the densities directly",
    "crf": "not implemented",
    "legacy_seq2seq": "not implemented",
    "cudnn_rnn": "there is no cuDNN here; use tf.contrib.rnn's cells",
    "keras": "jitflow runs TF1 graph programs, not Keras models",
    "eager": "jitflow runs TF1 graph mode only",
    "tpu": "not implemented",
    "metrics": "its streaming metrics are not implemented; use tf.metrics",
    "opt": "its extra optimizers are not implemented; use tf.train's",
    "data": "use tf.data",
    "image": "use tf.image",
    "summary": "use tf.summary",
    "util": "use tf.make_tensor_proto, tf.make_ndarray and tf.get_static_value",
    "quantize": "not implemented",
    "predictor": "not implemented",
    "estimator": "not implemented",
}


def __getattr__(name: str):
    if name in __all__:
        module = importlib.import_module(f"jitflow.contrib.{name}")
        globals()[name] = module
        return module
    if name in _MISSING:
        raise AttributeError(f"tf.contrib.{name} is not available in jitflow: {_MISSING[name]}")
    raise AttributeError(f"module 'jitflow.contrib' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
