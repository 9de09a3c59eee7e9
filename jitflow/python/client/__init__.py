"""`tensorflow.python.client` as TF1 programs use it: `timeline` (jitflow.client.timeline)."""
from jitflow.python.client import timeline  # noqa: F401

__all__ = ["timeline"]
