"""`tf.random` (collected from the op modules' "random" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("random"))
__all__ = sorted(_namespace("random"))
