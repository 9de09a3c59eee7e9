"""`tf.image`: image preprocessing (collected from the op modules' "image" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("image"))
__all__ = sorted(_namespace("image"))
