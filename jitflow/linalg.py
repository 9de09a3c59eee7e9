"""`tf.linalg` (collected from the op modules' "linalg" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("linalg"))
__all__ = sorted(_namespace("linalg"))
