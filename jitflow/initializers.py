"""`tf.initializers` (collected from the op modules' "initializers" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("initializers"))
__all__ = sorted(_namespace("initializers"))
