"""`tf.compat`: `tf.compat.v1` is jitflow itself."""
from jitflow.compat import v1

__all__ = ["v1"]
