"""`tf.nest`: walking nested structures of tuples, lists, dicts and namedtuples."""
from jitflow.core.structure import (assert_same_structure, flatten, flatten_up_to, is_nested,
                                    map_structure, pack_sequence_as)

__all__ = ["assert_same_structure", "flatten", "flatten_up_to", "is_nested", "map_structure",
           "pack_sequence_as"]
