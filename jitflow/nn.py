"""`tf.nn`: neural-network ops (collected from the op modules' "nn" namespace), the recurrent
cells (`tf.nn.rnn_cell`) and the functions that run them over sequences."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("nn"))
from jitflow.lib import rnn_cell  # noqa: E402
from jitflow.lib.rnn import (  # noqa: E402
    bidirectional_dynamic_rnn, dynamic_rnn, static_bidirectional_rnn, static_rnn,
)

__all__ = sorted(_namespace("nn")) + ["rnn_cell", "static_rnn", "static_bidirectional_rnn",
                                      "dynamic_rnn", "bidirectional_dynamic_rnn"]
