"""`tf.math` (collected from the op modules' "math" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("math"))
__all__ = sorted(_namespace("math"))
