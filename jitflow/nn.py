"""`tf.nn`: neural-network ops (collected from the op modules' "nn" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("nn"))
__all__ = sorted(_namespace("nn"))
