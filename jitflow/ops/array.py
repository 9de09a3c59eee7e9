"""Array ops, one module per family:

- `sources.py`    constants, placeholders, fills, ranges, linspace, one_hot, eye;
- `identity.py`   Identity, IdentityN, NoOp, group, tuple, Print, check_numerics;
- `shape_ops.py`  Shape, ShapeN, Size, Rank, Reshape, Transpose, ExpandDims, Squeeze;
- `join.py`       concat, stack, unstack, split;
- `slicing.py`    slice, strided_slice and `Tensor.__getitem__`, gather, gather_nd, boolean_mask;
- `tile_pad.py`   tile, pad, reverse, broadcast_to;
- `scatter.py`    scatter_nd, unsorted_segment_sum;
- `sequence.py`   sequence_mask, meshgrid, unique, invert_permutation, roll;
- `_array_args.py` what they share: shape-like arguments (static attributes or run-time
  tensors) and build-time values (jitflow/fold.py).

Arguments that TF1 takes as tensors (a shape, multiples, begin/size) are stored as attributes
when their value is known at build time, so shape rules and lowerings see plain ints. Only when
such an argument is a runtime tensor does it become an extra op input; each rule reads it
through `_args`, which takes the attribute if set and otherwise the next input.

This module defines no ops: it keeps the import path `jitflow.ops.array` working.
"""
from jitflow.ops._array_args import _args, _autopack, _int_list_arg, _shape_of  # noqa: F401
from jitflow.ops.identity import *  # noqa: F401,F403
from jitflow.ops.join import *  # noqa: F401,F403
from jitflow.ops.scatter import *  # noqa: F401,F403
from jitflow.ops.sequence import *  # noqa: F401,F403
from jitflow.ops.shape_ops import *  # noqa: F401,F403
from jitflow.ops.slicing import *  # noqa: F401,F403
from jitflow.ops.sources import *  # noqa: F401,F403
from jitflow.ops.sources import _constant_array  # noqa: F401
from jitflow.ops.tile_pad import *  # noqa: F401,F403
