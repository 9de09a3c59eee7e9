"""`tf.queue`: the queue classes (collected from the op modules' "queue" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("queue"))
__all__ = sorted(_namespace("queue"))
