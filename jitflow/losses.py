"""`tf.losses` (collected from the op modules' "losses" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("losses"))
__all__ = sorted(_namespace("losses"))
