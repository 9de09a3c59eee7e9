"""The module paths TF1 programs import from `tensorflow.python` that jitflow provides:
`jitflow.python.client.timeline` (as `from tensorflow.python.client import timeline`)."""
from jitflow.python import client  # noqa: F401

__all__ = ["client"]
