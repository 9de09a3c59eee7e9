"""Graph serialization (temporary: the JSON forms)."""
from jitflow.serialize.json_graph import *  # noqa: F401,F403
from jitflow.serialize.json_graph import _split_input  # noqa: F401
