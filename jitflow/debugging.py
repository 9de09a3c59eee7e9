"""`tf.debugging`: run-time assertions (collected from the op modules' "debugging" namespace)."""
from jitflow.ops import namespace as _namespace
from jitflow.ops.identity import check_numerics  # noqa: F401

globals().update(_namespace("debugging"))
__all__ = sorted(_namespace("debugging")) + ["check_numerics"]
