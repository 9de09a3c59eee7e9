"""`tf.io`: parsing and queue names (collected from the op modules' "io" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("io"))
__all__ = sorted(_namespace("io"))
