"""`tf.client` helpers: `timeline` (Chrome traces of a traced run's step statistics)."""
from jitflow.client import timeline  # noqa: F401

__all__ = ["timeline"]
