"""`tf.strings`: string ops (collected from the op modules' "strings" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("strings"))
__all__ = sorted(_namespace("strings"))
