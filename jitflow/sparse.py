"""`tf.sparse`: SparseTensor helpers (collected from the op modules' "sparse" namespace)."""
from jitflow.ops import namespace as _namespace

globals().update(_namespace("sparse"))
__all__ = sorted(_namespace("sparse"))
