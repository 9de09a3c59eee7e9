"""`from tensorflow.python.client import timeline`: jitflow.client.timeline under TF's path."""
from jitflow.client.timeline import Timeline

__all__ = ["Timeline"]
