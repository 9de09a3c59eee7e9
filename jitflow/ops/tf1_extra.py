"""More TF1 names tutorial programs use, each composed from jitflow's ops (so each compiles and
differentiates as its parts do): space/batch rearrangements, image patches, tensor scatters,
colour-space conversions and adjustments, Sobel edges, `unravel_index`, `cross`, the real-valued
forms of `real`/`imag`/`conj`/`angle`, generic pooling and transposed convolutions, the
convolution backprops as gradients, variable partitioners, `DeviceSpec`, the variable
aggregation enums, and TF2-behaviour switches that have one answer in a TF1 graph library.
"""
from __future__ import annotations

import enum
import math
import re
from typing import Callable, Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example as _Example, register as _register

__all__ = [
    "space_to_batch_nd", "batch_to_space_nd", "space_to_batch", "batch_to_space",
    "extract_image_patches", "tensor_scatter_nd_update", "tensor_scatter_nd_add",
    "tensor_scatter_nd_sub", "tensor_scatter_update", "tensor_scatter_add", "tensor_scatter_sub",
    "unravel_index", "real", "imag", "conj", "angle", "histogram_fixed_width_bins",
    "switch_case", "recompute_grad", "sparse_matmul", "convert_to_tensor_or_sparse_tensor",
    "is_numeric_tensor", "is_symbolic_tensor", "fixed_size_partitioner",
    "variable_axis_size_partitioner", "min_max_variable_partitioner", "DeviceSpec",
    "VariableAggregation", "VariableSynchronization", "disable_control_flow_v2",
    "enable_control_flow_v2", "control_flow_v2_enabled", "disable_resource_variables",
    "enable_resource_variables", "resource_variables_enabled", "disable_tensor_equality",
    "executing_eagerly_outside_functions", "conv2d_backprop_input_v2",
    "conv2d_backprop_filter_v2",
]

NAMESPACES = {
    "math": ["real", "imag", "conj", "angle", "erfcinv"],
    "nn": [("space_to_batch", "space_to_batch_nd"), "pool", "conv_transpose", "conv1d_transpose",
           "batch_norm_with_global_normalization", "depthwise_conv2d_native_backprop_input",
           "depthwise_conv2d_native_backprop_filter",
           ("depthwise_conv2d_backprop_input", "depthwise_conv2d_native_backprop_input"),
           ("depthwise_conv2d_backprop_filter", "depthwise_conv2d_native_backprop_filter"),
           "atrous_conv2d_transpose"],
    "image": ["rgb_to_yiq", "yiq_to_rgb", "rgb_to_yuv", "yuv_to_rgb", "rgb_to_hsv",
              "hsv_to_rgb", "adjust_saturation", "adjust_hue", "random_saturation",
              "random_hue", "sobel_edges", "extract_image_patches",
              ("extract_patches", "extract_image_patches")],
    "sparse": [("matmul", "sparse_matmul")],
}


def _ints(value, what: str) -> list:
    """A static list of ints (a list, an array or a constant tensor)."""
    from jitflow.ops._array_args import get_static_value as constant_value
    if isinstance(value, Tensor):
        folded = constant_value(value)
        if folded is None:
            raise ValueError(f"{what} must be known when the graph is built (a constant), got "
                             f"the tensor {value.name!r}")
        value = folded
    return [int(v) for v in np.asarray(value).ravel()]


# -- space <-> batch ----------------------------------------------------------------------------
def space_to_batch_nd(input, block_shape, paddings, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.space_to_batch_nd`: the spatial dims (1..M) zero-padded, split into blocks of
    `block_shape`, the block offsets moved into the batch (offset-major: batch index
    (offset * batch + n)). block_shape and paddings must be constants."""
    from jitflow.ops.shape_ops import reshape, transpose
    from jitflow.ops.tile_pad import pad
    with name_scope(name, "SpaceToBatchND", [input]):
        x = convert_to_tensor(input, name="input")
        block = _ints(block_shape, "space_to_batch_nd: block_shape")
        pads = np.asarray(_ints(paddings, "space_to_batch_nd: paddings")).reshape(-1, 2)
        m = len(block)
        if pads.shape[0] != m:
            raise ValueError(f"space_to_batch_nd: paddings has {pads.shape[0]} rows, "
                             f"block_shape {m} entries")
        dims = x.shape.as_tuple()
        if dims is None or any(d is None for d in dims[1:]):
            raise ValueError(f"space_to_batch_nd: input {x.name!r} needs static dims after the "
                             f"batch, got shape {x.shape}")
        rest = len(dims) - 1 - m
        padded = [dims[1 + i] + pads[i, 0] + pads[i, 1] for i in range(m)]
        for i in range(m):
            if padded[i] % block[i]:
                raise ValueError(f"space_to_batch_nd: padded spatial dim {i + 1} ({padded[i]}) "
                                 f"is not divisible by block_shape[{i}] = {block[i]}")
        x = pad(x, [[0, 0]] + pads.tolist() + [[0, 0]] * rest)
        split = [-1]
        for i in range(m):
            split += [padded[i] // block[i], block[i]]
        x = reshape(x, split + list(dims[1 + m:]))
        perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + \
            list(range(1 + 2 * m, 1 + 2 * m + rest))
        x = transpose(x, perm)
        return reshape(x, [-1] + [padded[i] // block[i] for i in range(m)] +
                       list(dims[1 + m:]))


def batch_to_space_nd(input, block_shape, crops, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.batch_to_space_nd`: the inverse of `space_to_batch_nd`, then `crops` removed."""
    from jitflow.ops.shape_ops import reshape, transpose
    with name_scope(name, "BatchToSpaceND", [input]):
        x = convert_to_tensor(input, name="input")
        block = _ints(block_shape, "batch_to_space_nd: block_shape")
        crop = np.asarray(_ints(crops, "batch_to_space_nd: crops")).reshape(-1, 2)
        m = len(block)
        dims = x.shape.as_tuple()
        if dims is None or any(d is None for d in dims[1:]):
            raise ValueError(f"batch_to_space_nd: input {x.name!r} needs static dims after the "
                             f"batch, got shape {x.shape}")
        rest = len(dims) - 1 - m
        x = reshape(x, block + [-1] + list(dims[1:]))
        perm = [m]
        for i in range(m):
            perm += [m + 1 + i, i]
        perm += list(range(2 * m + 1, 2 * m + 1 + rest))
        x = transpose(x, perm)
        full = [dims[1 + i] * block[i] for i in range(m)]
        x = reshape(x, [-1] + full + list(dims[1 + m:]))
        index = (slice(None),) + tuple(slice(int(crop[i, 0]), full[i] - int(crop[i, 1]))
                                       for i in range(m))
        return x[index]


def space_to_batch(input, paddings, block_size: int, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.space_to_batch`: `space_to_batch_nd` with a square block over height and width."""
    return space_to_batch_nd(input, [block_size, block_size], paddings, name)


def batch_to_space(input, crops, block_size: int, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.batch_to_space`: `batch_to_space_nd` with a square block over height and width."""
    return batch_to_space_nd(input, [block_size, block_size], crops, name)


# -- image patches ------------------------------------------------------------------------------
def extract_image_patches(images, ksizes=None, strides=None, rates=None, padding: str = "VALID",
                          name: Optional[str] = None, sizes=None) -> Tensor:
    """`tf.extract_image_patches` / `tf.image.extract_patches`: every [kh, kw] patch (dilated
    by `rates`) of NHWC images at `strides`, flattened in (row, column, channel) order into
    the last dim. Height and width must be static."""
    from jitflow.ops.join import concat
    from jitflow.ops.tile_pad import pad
    ksizes = sizes if ksizes is None else ksizes
    with name_scope(name, "ExtractImagePatches", [images]):
        x = convert_to_tensor(images, name="images")
        _, kh, kw, _ = _ints(ksizes, "extract_image_patches: ksizes")
        _, sh, sw, _ = _ints(strides, "extract_image_patches: strides")
        _, rh, rw, _ = _ints(rates or [1, 1, 1, 1], "extract_image_patches: rates")
        dims = x.shape.as_tuple()
        if dims is None or len(dims) != 4 or dims[1] is None or dims[2] is None:
            raise ValueError(f"extract_image_patches: images {x.name!r} must be 4-D with static "
                             f"height and width, got shape {x.shape}")
        h, w = dims[1], dims[2]
        eh, ew = (kh - 1) * rh + 1, (kw - 1) * rw + 1
        padding = padding.upper()
        if padding == "SAME":
            oh, ow = -(-h // sh), -(-w // sw)
            ph, pw = max((oh - 1) * sh + eh - h, 0), max((ow - 1) * sw + ew - w, 0)
            x = pad(x, [[0, 0], [ph // 2, ph - ph // 2], [pw // 2, pw - pw // 2], [0, 0]])
        elif padding == "VALID":
            oh, ow = (h - eh) // sh + 1, (w - ew) // sw + 1
        else:
            raise ValueError(f"extract_image_patches: padding must be 'SAME' or 'VALID', got "
                             f"{padding!r}")
        parts = [x[:, i * rh: i * rh + (oh - 1) * sh + 1: sh, j * rw: j * rw + (ow - 1) * sw + 1:
                   sw, :] for i in range(kh) for j in range(kw)]
        return concat(parts, axis=3)


# -- scatters into a tensor ---------------------------------------------------------------------
def _scatter(tensor, indices, updates):
    from jitflow.ops.scatter import scatter_nd
    from jitflow.ops.shape_ops import shape
    t = convert_to_tensor(tensor, name="tensor")
    u = convert_to_tensor(updates, dtype=t.dtype, name="updates")
    return t, u, scatter_nd(indices, u, shape(t, out_type=_dtypes.as_dtype(
        convert_to_tensor(indices).dtype)))


def tensor_scatter_nd_add(tensor, indices, updates, name: Optional[str] = None) -> Tensor:
    """`tensor` with `updates` added at `indices` (repeated indices add up)."""
    with name_scope(name, "TensorScatterAdd", [tensor, indices, updates]):
        t, _, s = _scatter(tensor, indices, updates)
        return t + s


def tensor_scatter_nd_sub(tensor, indices, updates, name: Optional[str] = None) -> Tensor:
    """`tensor` with `updates` subtracted at `indices`."""
    with name_scope(name, "TensorScatterSub", [tensor, indices, updates]):
        t, _, s = _scatter(tensor, indices, updates)
        return t - s


def _tsu_infer(op):
    t, idx, u = op.inputs
    if not idx.dtype.is_integer:
        raise TypeError(f"tensor_scatter_nd_update: indices {idx.name!r} must be int32 or "
                        f"int64, got {idx.dtype.name}")
    if u.dtype != t.dtype:
        raise TypeError(f"tensor_scatter_nd_update: updates {u.name!r} must have the dtype of "
                        f"tensor {t.name!r} ({t.dtype.name}), got {u.dtype.name}")
    td, idd, ud = t.shape.as_tuple(), idx.shape.as_tuple(), u.shape.as_tuple()
    if td is not None and idd is not None and idd and idd[-1] is not None:
        if idd[-1] > len(td):
            raise ValueError(f"tensor_scatter_nd_update: indices {idx.name!r} have "
                             f"{idd[-1]} coordinates per row (shape {idx.shape}) but tensor "
                             f"{t.name!r} has only rank {len(td)}")
        if ud is not None:
            from jitflow.core.shapes import TensorShape
            want = TensorShape(idd[:-1] + td[idd[-1]:])
            if not want.is_compatible_with(TensorShape(ud)):
                raise ValueError(f"tensor_scatter_nd_update: updates {u.name!r} must have "
                                 f"shape indices.shape[:-1] + tensor.shape[indices.shape[-1]:]"
                                 f" = {want}, got {u.shape}")
    return [(t.dtype, t.shape)]


def _tsu_ref(op, tensor, indices, updates):
    """A copy of `tensor` with the slices at `indices` set to `updates`, in order, so that of
    repeated indices the last update stays (what TF's CPU kernel gives)."""
    from jitflow.ops.slicing import _gather_nd_index
    out = np.array(tensor, copy=True)
    indices = np.asarray(indices)
    k = indices.shape[-1]
    cols = _gather_nd_index(op, out, indices)
    rows = indices.reshape(-1, k).shape[0]
    flat_cols = [c.reshape(-1) for c in cols]
    upd = np.asarray(updates, dtype=out.dtype).reshape((rows,) + out.shape[k:])
    # keep each index's last occurrence: NumPy does not promise an order for repeated indices
    keys = np.ravel_multi_index(flat_cols, out.shape[:k]) if k else np.zeros(rows, np.int64)
    _, first_in_reversed = np.unique(keys[::-1], return_index=True)
    last = rows - 1 - first_in_reversed
    out[tuple(c[last] for c in flat_cols)] = upd[last]
    return out


def _tsu_grad(op, g):
    from jitflow.ops.slicing import gather_nd
    from jitflow.ops.sources import zeros_like
    _, idx, u = op.inputs
    return [tensor_scatter_nd_update(g, idx, zeros_like(u)), None, gather_nd(g, idx)]


_register("TensorScatterUpdate", infer=_tsu_infer, ref=_tsu_ref, grad=_tsu_grad, kind="other",
          doc="A copy of a tensor with the slices at N-d indices replaced (last update wins).",
          examples=[
              # repeated indices: TF's gradient rule gives each of them the incoming gradient
              # (not the derivative of "last wins"), so no finite-difference check here
              _Example(build=lambda t, u: tensor_scatter_nd_update(t, [[1], [3], [1]], u),
                       inputs=[(5, 2), (3, 2)], grad=False, id="repeated",
                       expect=lambda t, u: np.stack([t[0], u[2], t[2], u[1], t[4]])),
              _Example(build=lambda t, u: tensor_scatter_nd_update(t, [[0, 1], [2, 0]], u),
                       inputs=[(3, 2), (2,)], id="elements",
                       expect=lambda t, u: np.array([[t[0, 0], u[0]], t[1], [u[1], t[2, 1]]]))])


def tensor_scatter_nd_update(tensor, indices, updates, name: Optional[str] = None) -> Tensor:
    """`tf.tensor_scatter_nd_update`: a copy of `tensor` with the slices at `indices` replaced
    by `updates`; of repeated indices the last update is kept (as TF's CPU kernel does)."""
    with name_scope(name, "TensorScatterUpdate", [tensor, indices, updates]) as scope:
        t = convert_to_tensor(tensor, name="tensor")
        i = convert_to_tensor(indices, name="indices")
        u = convert_to_tensor(updates, dtype=t.dtype, name="updates")
        return make_op("TensorScatterUpdate", [t, i, u], name=scope).outputs[0]


tensor_scatter_update = tensor_scatter_nd_update
tensor_scatter_add = tensor_scatter_nd_add
tensor_scatter_sub = tensor_scatter_nd_sub


# -- small math ---------------------------------------------------------------------------------
def unravel_index(indices, dims, name: Optional[str] = None) -> Tensor:
    """`tf.unravel_index`: flat indices into an array of shape `dims` as coordinates, shape
    [len(dims)] + indices' shape."""
    from jitflow.ops.math.cumulative import cumprod
    from jitflow.ops.shape_ops import expand_dims, reshape
    with name_scope(name, "UnravelIndex", [indices, dims]):
        idx = convert_to_tensor(indices, name="indices")
        if not idx.dtype.is_integer:
            raise TypeError(f"unravel_index: indices {idx.name!r} must be int32 or int64, got "
                            f"{idx.dtype.name}")
        d = convert_to_tensor(dims, dtype=idx.dtype, name="dims")
        rank = idx.shape.ndims
        if rank is None or rank > 1:
            raise ValueError(f"unravel_index: indices {idx.name!r} must be a scalar or a "
                             f"vector, got shape {idx.shape}")
        strides = cumprod(d, exclusive=True, reverse=True)
        shape = [-1] + [1] * rank
        return (expand_dims(idx, 0) // reshape(strides, shape)) % reshape(d, shape)


def _real_input(x, what: str) -> Tensor:
    t = convert_to_tensor(x, name="input")
    if not (t.dtype.is_floating or t.dtype.is_integer):
        raise TypeError(f"tf.{what}: input {t.name!r} must be numeric, got {t.dtype.name} "
                        "(jitflow has no complex dtypes)")
    return t


def real(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """The real part: a real tensor itself (jitflow has no complex dtypes)."""
    with name_scope(name, "Real", [input]):
        return _real_input(input, "real")


def imag(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """The imaginary part: zeros for a real tensor."""
    from jitflow.ops.sources import zeros_like
    with name_scope(name, "Imag", [input]):
        return zeros_like(_real_input(input, "imag"))


def conj(x, name: Optional[str] = None) -> Tensor:
    """The complex conjugate: a real tensor itself."""
    with name_scope(name, "Conj", [x]):
        return _real_input(x, "conj")


def angle(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """The argument: pi for negative reals, else 0 (in the input's float dtype)."""
    from jitflow.ops.math.compare import where
    from jitflow.ops.sources import zeros_like
    with name_scope(name, "Angle", [input]):
        x = _real_input(input, "angle")
        return where(x < 0, zeros_like(x) + math.pi, zeros_like(x))


def erfcinv(x, name: Optional[str] = None) -> Tensor:
    """`tf.math.erfcinv`: the inverse of erfc, erfinv(1 - x)."""
    from jitflow.ops.math.special import erfinv
    with name_scope(name, "erfcinv", [x]):
        x = convert_to_tensor(x, name="x")
        return erfinv(1 - x)


def histogram_fixed_width_bins(values, value_range, nbins: int = 100, dtype=_dtypes.int32,
                               name: Optional[str] = None) -> Tensor:
    """The bin of each value among `nbins` equal bins over `value_range` (values outside fall
    in the first or last bin), as `tf.histogram_fixed_width`'s counting uses."""
    from jitflow.ops.math.casting import cast
    from jitflow.ops.math.unary import floor
    from jitflow.ops.math.compare import clip_by_value
    with name_scope(name, "histogram_fixed_width_bins", [values, value_range, nbins]):
        v = convert_to_tensor(values, name="values")
        rng = cast(convert_to_tensor(value_range, dtype=v.dtype), _dtypes.float32) \
            if v.dtype != _dtypes.float64 else convert_to_tensor(value_range, dtype=v.dtype)
        vf = cast(v, rng.dtype)
        scaled = (vf - rng[0]) / (rng[1] - rng[0])
        idx = floor(scaled * float(nbins))
        return cast(clip_by_value(idx, 0.0, float(nbins - 1)), _dtypes.as_dtype(dtype))


def switch_case(branch_index, branch_fns, default: Optional[Callable] = None,
                name: str = "switch_case"):
    """Run `branch_fns[branch_index]` (a list, or a dict of int keys); an index without a
    branch runs `default` (the last branch when not given)."""
    from jitflow.ops.control_flow import case
    from jitflow.ops.math.compare import equal
    items = sorted(branch_fns.items()) if isinstance(branch_fns, dict) else \
        list(enumerate(branch_fns))
    if not items:
        raise ValueError("switch_case: branch_fns must not be empty")
    for k, fn in items:
        if not callable(fn):
            raise TypeError(f"switch_case: branch {k} is not callable: {fn!r}")
    with name_scope(name, "switch_case", [branch_index]):
        idx = convert_to_tensor(branch_index, name="branch_index")
        if not idx.dtype.is_integer:
            raise TypeError(f"switch_case: branch_index {idx.name!r} must be an integer, got "
                            f"{idx.dtype.name}")
        pairs = [(equal(idx, k), fn) for k, fn in items]
        return case(pairs, default=default or items[-1][1], exclusive=False)


def recompute_grad(f: Callable) -> Callable:
    """`f` itself: recomputing the forward pass in the backward pass saves memory in TF; the
    gradients are the same."""
    return f


def sparse_matmul(a, b, transpose_a: bool = False, transpose_b: bool = False,
                  a_is_sparse: bool = False, b_is_sparse: bool = False,
                  name: Optional[str] = None) -> Tensor:
    """`tf.sparse_matmul`: a dense matmul (the sparsity flags are hints)."""
    from jitflow.ops.linalg import matmul
    return matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, name=name)


# -- tensors and variables ----------------------------------------------------------------------
def convert_to_tensor_or_sparse_tensor(value, dtype=None, name: Optional[str] = None):
    """A SparseTensor (or SparseTensorValue) as a SparseTensor, anything else as a Tensor."""
    from jitflow.ops.sparse import SparseTensor, SparseTensorValue
    if isinstance(value, SparseTensorValue):
        value = SparseTensor.from_value(value)
    if isinstance(value, SparseTensor):
        if dtype is not None and _dtypes.as_dtype(dtype) != value.dtype:
            raise ValueError(f"Sparse dtype: requested = {_dtypes.as_dtype(dtype).name}, "
                             f"actual = {value.dtype.name}")
        return value
    return convert_to_tensor(value, dtype=dtype, name=name)


def is_numeric_tensor(tensor) -> bool:
    """Whether `tensor` is a Tensor of a number dtype (not string or resource)."""
    return isinstance(tensor, Tensor) and (tensor.dtype.is_floating or tensor.dtype.is_integer
                                           or tensor.dtype.is_bool)


def is_symbolic_tensor(tensor) -> bool:
    """Whether `tensor` is a graph tensor (every Tensor is, in TF1 graph mode)."""
    return isinstance(tensor, Tensor)


def _dims(shape) -> list:
    dims = shape.as_list() if hasattr(shape, "as_list") else list(shape)
    return [None if d is None else int(d) for d in dims]


def fixed_size_partitioner(num_shards: int, axis: int = 0) -> Callable:
    """A partitioner splitting `axis` into `num_shards` parts (at most one per row)."""
    def partitioner(shape, dtype=None) -> list:
        dims = _dims(shape)
        parts = [1] * len(dims)
        parts[axis] = min(num_shards, dims[axis])
        return parts
    return partitioner


def variable_axis_size_partitioner(max_shard_bytes: int, axis: int = 0,
                                   bytes_per_string_element: int = 16,
                                   max_shards: Optional[int] = None) -> Callable:
    """A partitioner splitting `axis` so each shard holds at most `max_shard_bytes`."""
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError("Both max_shard_bytes and bytes_per_string_element must be positive.")
    if max_shards is not None and max_shards < 1:
        raise ValueError("max_shards must be positive.")

    def partitioner(shape, dtype) -> list:
        dims = _dims(shape)
        dt = _dtypes.as_dtype(dtype)
        size = bytes_per_string_element if dt == _dtypes.string else dt.size
        per_slice = float(np.prod([d for i, d in enumerate(dims) if i != axis])) * size
        slices = max(1, int(math.floor(max_shard_bytes / per_slice)))
        shards = int(math.ceil(dims[axis] / slices))
        if max_shards:
            shards = min(max_shards, shards)
        parts = [1] * len(dims)
        parts[axis] = shards
        return parts
    return partitioner


def min_max_variable_partitioner(max_partitions: int = 1, axis: int = 0,
                                 min_slice_size: int = 256 << 10,
                                 bytes_per_string_element: int = 16) -> Callable:
    """A partitioner giving each shard at least `min_slice_size` bytes, in at most
    `max_partitions` shards."""
    def partitioner(shape, dtype) -> list:
        dims = _dims(shape)
        dt = _dtypes.as_dtype(dtype)
        size = bytes_per_string_element if dt == _dtypes.string else dt.size
        total = float(np.prod(dims)) * size
        parts = [1] * len(dims)
        parts[axis] = max(1, min(dims[axis], max_partitions,
                                 int(math.ceil(total / min_slice_size))))
        return parts
    return partitioner


class VariableAggregation(enum.IntEnum):
    """How replicas' updates of a variable combine (TF1's values; one replica here)."""
    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3
    ONLY_FIRST_TOWER = 3


class VariableSynchronization(enum.IntEnum):
    """When a distributed variable synchronizes (TF1's values; one replica here)."""
    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


class DeviceSpec:
    """A device name's parts: job, replica, task, device type and index (TF1's mutable form)."""

    _FIELD = re.compile(r"^(job|replica|task|device):(.*)$")

    def __init__(self, job: Optional[str] = None, replica: Optional[int] = None,
                 task: Optional[int] = None, device_type: Optional[str] = None,
                 device_index: Optional[int] = None) -> None:
        self.job = job
        self.replica = None if replica is None else int(replica)
        self.task = None if task is None else int(task)
        self.device_type = None if device_type is None else (
            device_type.upper() if device_type.upper() in ("CPU", "GPU") else device_type)
        self.device_index = None if device_index is None else int(device_index)

    def parse_from_string(self, spec: str) -> "DeviceSpec":
        """Set the fields a device string names ("/job:w/task:1/device:GPU:0", "/cpu:0")."""
        for part in (spec or "").split("/"):
            if not part:
                continue
            low = part.lower()
            m = self._FIELD.match(part)
            if m and m.group(1) == "job":
                self.job = m.group(2)
            elif m and m.group(1) in ("replica", "task"):
                setattr(self, m.group(1), int(m.group(2)))
            elif m and m.group(1) == "device" or low.startswith(("cpu:", "gpu:")):
                bits = (m.group(2) if m else part).split(":")
                kind = bits[0].upper() if bits[0].upper() in ("CPU", "GPU") else bits[0]
                self.device_type = kind
                self.device_index = None if len(bits) < 2 or bits[1] == "*" else int(bits[1])
            else:
                raise ValueError(f"Unknown attribute: '{part}' in '{spec}'")
        return self

    @classmethod
    def from_string(cls, spec: str) -> "DeviceSpec":
        return cls().parse_from_string(spec)

    def merge_from(self, dev: "DeviceSpec") -> None:
        """Take every field `dev` sets."""
        for f in ("job", "replica", "task", "device_type", "device_index"):
            if getattr(dev, f) is not None:
                setattr(self, f, getattr(dev, f))

    def make_merged_spec(self, dev: "DeviceSpec") -> "DeviceSpec":
        out = DeviceSpec(self.job, self.replica, self.task, self.device_type, self.device_index)
        out.merge_from(dev)
        return out

    def replace(self, **kwargs) -> "DeviceSpec":
        fields = dict(job=self.job, replica=self.replica, task=self.task,
                      device_type=self.device_type, device_index=self.device_index)
        fields.update(kwargs)
        return DeviceSpec(**fields)

    def to_string(self) -> str:
        out = ""
        if self.job is not None:
            out += f"/job:{self.job}"
        if self.replica is not None:
            out += f"/replica:{self.replica}"
        if self.task is not None:
            out += f"/task:{self.task}"
        if self.device_type is not None:
            index = "*" if self.device_index is None else self.device_index
            out += f"/device:{self.device_type}:{index}"
        return out

    def __eq__(self, other) -> bool:
        return isinstance(other, DeviceSpec) and self.to_string() == other.to_string()

    def __hash__(self) -> int:
        return hash(self.to_string())

    def __repr__(self) -> str:
        return f"DeviceSpec({self.to_string()!r})"


# -- behaviour switches -------------------------------------------------------------------------
def disable_control_flow_v2() -> None:
    """Accepted: jitflow's while_loop and cond are TF1's graph control flow."""


def enable_control_flow_v2() -> None:
    """Accepted: jitflow has one control-flow implementation, whose results and gradients are
    those of either of TF's."""


def control_flow_v2_enabled() -> bool:
    return False


def disable_resource_variables() -> None:
    """Accepted: jitflow's variables read and update as TF1's reference variables."""


def enable_resource_variables() -> None:
    """Accepted: jitflow's variables are unchanged (a run's reads see the values from before
    the run unless a control dependency orders them, as resource variables' do)."""


def resource_variables_enabled() -> bool:
    return False


def disable_tensor_equality() -> None:
    """Accepted: Tensors compare by identity (`==`), as TF1's."""


def executing_eagerly_outside_functions() -> bool:
    return False


# -- nn -----------------------------------------------------------------------------------------
def pool(input, window_shape, pooling_type: str, padding: str,  # noqa: A002
         dilation_rate=None, strides=None, name: Optional[str] = None,
         data_format: Optional[str] = None, dilations=None) -> Tensor:
    """`tf.nn.pool`: "MAX" or "AVG" pooling over 1 or 2 spatial dims (NWC / NHWC); dilation
    rates other than 1 are not supported."""
    from jitflow.ops.nn.pool import avg_pool, max_pool
    from jitflow.ops.shape_ops import expand_dims, squeeze
    window = [int(w) for w in window_shape]
    rates = dilation_rate if dilation_rate is not None else dilations
    if rates is not None and any(int(r) != 1 for r in np.ravel(rates)):
        raise NotImplementedError("tf.nn.pool: dilation_rate other than 1 is not supported")
    if data_format not in (None, "NWC", "NHWC"):
        raise NotImplementedError(f"tf.nn.pool: data_format {data_format!r} is not supported "
                                  "(NWC and NHWC are)")
    step = [int(s) for s in (strides if strides is not None else [1] * len(window))]
    kinds = {"MAX": max_pool, "AVG": avg_pool}
    if pooling_type not in kinds:
        raise ValueError(f"tf.nn.pool: pooling_type must be 'MAX' or 'AVG', got "
                         f"{pooling_type!r}")
    with name_scope(name, f"{pooling_type.lower()}_pool", [input]):
        x = convert_to_tensor(input, name="input")
        if len(window) == 1:
            y = kinds[pooling_type](expand_dims(x, 1), [1, 1, window[0], 1],
                                    [1, 1, step[0], 1], padding)
            return squeeze(y, [1])
        if len(window) == 2:
            return kinds[pooling_type](x, [1] + window + [1], [1] + step + [1], padding)
        raise NotImplementedError(f"tf.nn.pool: {len(window)} spatial dims (1 or 2 are "
                                  "supported)")


def conv1d_transpose(input=None, filters=None, output_shape=None, strides=None,  # noqa: A002
                     padding: str = "SAME", data_format: str = "NWC", dilations=None,
                     name: Optional[str] = None, value=None, filter=None) -> Tensor:  # noqa: A002
    """`tf.nn.conv1d_transpose`: conv2d_transpose over a height of 1 (NWC; filters
    [width, out channels, in channels])."""
    from jitflow.ops.nn.conv_transpose import conv2d_transpose
    from jitflow.ops.shape_ops import expand_dims, squeeze
    from jitflow.ops.join import concat
    if data_format != "NWC":
        raise NotImplementedError("conv1d_transpose: only data_format 'NWC' is supported")
    x = input if input is not None else value
    f = filters if filters is not None else filter
    stride = int(np.ravel(strides)[1 if np.size(strides) == 3 else 0])
    rate = 1 if dilations is None else int(np.ravel(dilations)[1 if np.size(dilations) == 3
                                                                 else 0])
    with name_scope(name, "conv1d_transpose", [x, f, output_shape]):
        if isinstance(output_shape, Tensor):
            shape4 = concat([output_shape[:1], [1], output_shape[1:]], 0)
        else:
            s = [int(d) for d in output_shape]
            shape4 = [s[0], 1, s[1], s[2]]
        y = conv2d_transpose(expand_dims(x, 1), expand_dims(f, 0), shape4, [1, 1, stride, 1],
                             padding, dilations=[1, 1, rate, 1])
        return squeeze(y, [1])


def conv_transpose(input, filters, output_shape, strides, padding: str = "SAME",  # noqa: A002
                   data_format: Optional[str] = None, dilations=None,
                   name: Optional[str] = None) -> Tensor:
    """`tf.nn.conv_transpose`: the 1-D or 2-D transposed convolution by output_shape's rank."""
    from jitflow.ops.nn.conv_transpose import conv2d_transpose
    n = int(output_shape.shape[0]) if isinstance(output_shape, Tensor) else len(output_shape)
    if n == 3:
        return conv1d_transpose(input, filters, output_shape, strides, padding,
                                data_format or "NWC", dilations, name)
    if n == 4:
        st = [int(s) for s in np.ravel(strides)]
        st = st if len(st) == 4 else [1] + st * (2 // len(st)) + [1]
        return conv2d_transpose(input, filters, output_shape, st, padding,
                                data_format or "NHWC", name, dilations=dilations)
    raise NotImplementedError(f"conv_transpose: output_shape of rank {n} (3 or 4 supported)")


def atrous_conv2d_transpose(value, filters, output_shape, rate: int, padding: str,
                            name: Optional[str] = None) -> Tensor:
    """`tf.nn.atrous_conv2d_transpose`: conv2d_transpose with stride 1 and dilation `rate`."""
    from jitflow.ops.nn.conv_transpose import conv2d_transpose
    if rate < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    return conv2d_transpose(value, filters, output_shape, [1, 1, 1, 1], padding, name=name,
                            dilations=[1, rate, rate, 1])


def batch_norm_with_global_normalization(t=None, m=None, v=None, beta=None, gamma=None,
                                         variance_epsilon=None,
                                         scale_after_normalization=None,
                                         name: Optional[str] = None, input=None,  # noqa: A002
                                         mean=None, variance=None) -> Tensor:
    """(t - m) / sqrt(v + eps), times gamma when `scale_after_normalization`, plus beta."""
    from jitflow.ops.math.unary import rsqrt
    t = input if t is None else t
    m = mean if m is None else m
    v = variance if v is None else v
    with name_scope(name, "batchnorm", [t, m, v, beta, gamma]):
        t = convert_to_tensor(t, name="t")
        m, v, beta, gamma = (convert_to_tensor(a, dtype=t.dtype) for a in (m, v, beta, gamma))
        inv = rsqrt(v + variance_epsilon)
        if scale_after_normalization:
            inv = inv * gamma
        return t * inv + (beta - m * inv)


def _backprop_input(conv: Callable, input_sizes, filt, out_backprop, name: str) -> Tensor:
    """d(conv(x, filt)) / dx at out_backprop: the convolution's gradient (linear in x)."""
    from jitflow.core.gradients import gradients  # a backprop is this gradient
    from jitflow.ops.sources import zeros
    with name_scope(None, name, [filt, out_backprop]):
        dy = convert_to_tensor(out_backprop, name="out_backprop")
        x = zeros(input_sizes, dtype=dy.dtype)
        return gradients(conv(x, filt), x, grad_ys=dy)[0]


def _backprop_filter(conv: Callable, x, filter_sizes, out_backprop, name: str) -> Tensor:
    from jitflow.core.gradients import gradients  # a backprop is this gradient
    from jitflow.ops.sources import zeros
    with name_scope(None, name, [x, out_backprop]):
        dy = convert_to_tensor(out_backprop, name="out_backprop")
        f = zeros(filter_sizes, dtype=dy.dtype)
        return gradients(conv(x, f), f, grad_ys=dy)[0]


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop,  # noqa: A002
                                           strides, padding: str, data_format: str = "NHWC",
                                           dilations=(1, 1, 1, 1),
                                           name: Optional[str] = None) -> Tensor:
    """The gradient of `depthwise_conv2d_native` by its input."""
    from jitflow.ops.nn.depthwise import depthwise_conv2d_native
    return _backprop_input(lambda x, f: depthwise_conv2d_native(
        x, f, strides, padding, data_format, dilations), input_sizes, filter, out_backprop,
        name or "DepthwiseConv2dNativeBackpropInput")


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop,  # noqa: A002
                                            strides, padding: str, data_format: str = "NHWC",
                                            dilations=(1, 1, 1, 1),
                                            name: Optional[str] = None) -> Tensor:
    """The gradient of `depthwise_conv2d_native` by its filter."""
    from jitflow.ops.nn.depthwise import depthwise_conv2d_native
    return _backprop_filter(lambda x, f: depthwise_conv2d_native(
        x, f, strides, padding, data_format, dilations), input, filter_sizes, out_backprop,
        name or "DepthwiseConv2dNativeBackpropFilter")


def conv2d_backprop_input_v2(input, filter, out_backprop, strides, padding,  # noqa: A002
                             use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
                             dilations=(1, 1, 1, 1), name: Optional[str] = None) -> Tensor:
    """`conv2d_backprop_input` given the input tensor (its shape is what counts)."""
    from jitflow.ops.nn.conv_transpose import conv2d_backprop_input
    from jitflow.ops.shape_ops import shape
    return conv2d_backprop_input(shape(input), filter, out_backprop, strides, padding,
                                 use_cudnn_on_gpu, data_format, dilations, name)


def conv2d_backprop_filter_v2(input, filter, out_backprop, strides, padding,  # noqa: A002
                              use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
                              dilations=(1, 1, 1, 1), name: Optional[str] = None) -> Tensor:
    """`conv2d_backprop_filter` given the filter tensor (its shape is what counts)."""
    from jitflow.ops.nn.conv import conv2d_backprop_filter
    from jitflow.ops.shape_ops import shape
    return conv2d_backprop_filter(input, shape(filter), out_backprop, strides, padding,
                                  use_cudnn_on_gpu, data_format, dilations, name)


# -- images -------------------------------------------------------------------------------------
_RGB_TO_YIQ = [[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617],
               [0.114, -0.32134392, 0.31119955]]
_YIQ_TO_RGB = [[1, 1, 1], [0.95598634, -0.27201283, -1.10674021],
               [0.6208248, -0.64720424, 1.70423049]]
_RGB_TO_YUV = [[0.299, -0.14714119, 0.61497538], [0.587, -0.28886916, -0.51496512],
               [0.114, 0.43601035, -0.10001026]]
_YUV_TO_RGB = [[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]]


def _mix(images, kernel, name: str) -> Tensor:
    """Each pixel's 3 channels times a 3x3 matrix (float images)."""
    from jitflow.ops.linalg import matmul
    from jitflow.ops.shape_ops import reshape, shape
    from jitflow.ops.sources import constant
    with name_scope(None, name, [images]):
        x = convert_to_tensor(images, name="images")
        if not x.dtype.is_floating:
            raise TypeError(f"tf.image.{name}: images {x.name!r} must be float, got "
                            f"{x.dtype.name}")
        if x.shape.ndims is not None and x.shape.as_tuple()[-1] not in (None, 3):
            raise ValueError(f"tf.image.{name}: images {x.name!r} must have 3 channels, got "
                             f"shape {x.shape}")
        k = constant(kernel, dtype=x.dtype)
        flat = matmul(reshape(x, [-1, 3]), k)     # a matmul: compiled, unlike tensordot
        out = reshape(flat, shape(x))
        out.set_shape(x.shape)
        return out


def rgb_to_yiq(images) -> Tensor:
    return _mix(images, _RGB_TO_YIQ, "rgb_to_yiq")


def yiq_to_rgb(images) -> Tensor:
    return _mix(images, _YIQ_TO_RGB, "yiq_to_rgb")


def rgb_to_yuv(images) -> Tensor:
    return _mix(images, _RGB_TO_YUV, "rgb_to_yuv")


def yuv_to_rgb(images) -> Tensor:
    return _mix(images, _YUV_TO_RGB, "yuv_to_rgb")


def rgb_to_hsv(images, name: Optional[str] = None) -> Tensor:
    """Float RGB in [0, 1] to hue, saturation, value (each in [0, 1])."""
    from jitflow.ops.join import stack, unstack
    from jitflow.ops.sources import zeros_like
    from jitflow.ops.math.compare import where
    from jitflow.ops.math.compare import equal, maximum, minimum
    with name_scope(name, "rgb_to_hsv", [images]):
        x = convert_to_tensor(images, name="images")
        if not x.dtype.is_floating:
            raise TypeError(f"rgb_to_hsv: images {x.name!r} must be float, got {x.dtype.name}")
        r, g, b = unstack(x, axis=-1)
        v = maximum(maximum(r, g), b)
        delta = v - minimum(minimum(r, g), b)
        zero = zeros_like(v)
        s = where(v > 0, delta / where(v > 0, v, zero + 1), zero)
        safe = where(delta > 0, delta, zero + 1)
        h = where(equal(v, r), (g - b) / safe,
                  where(equal(v, g), 2 + (b - r) / safe, 4 + (r - g) / safe))
        h = where(delta > 0, h / 6, zero)
        h = where(h < 0, h + 1, h)
        return stack([h, s, v], axis=-1)


def hsv_to_rgb(images, name: Optional[str] = None) -> Tensor:
    """Hue, saturation, value (floats in [0, 1]) to RGB."""
    from jitflow.ops.join import stack, unstack
    from jitflow.ops.sources import zeros_like
    from jitflow.ops.math.compare import where
    from jitflow.ops.math.compare import equal
    from jitflow.ops.math.unary import floor
    with name_scope(name, "hsv_to_rgb", [images]):
        x = convert_to_tensor(images, name="images")
        if not x.dtype.is_floating:
            raise TypeError(f"hsv_to_rgb: images {x.name!r} must be float, got {x.dtype.name}")
        h, s, v = unstack(x, axis=-1)
        c = s * v
        m = v - c
        dh = h * 6
        sector = floor(dh)
        fmod2 = dh - 2 * floor(dh / 2)
        xc = c * (1 - abs(fmod2 - 1))
        zero = zeros_like(c)

        def pick(values):
            out = zero
            for k in reversed(range(6)):
                out = where(equal(sector, float(k)), values[k], out)
            return out
        r = pick([c, xc, zero, zero, xc, c])
        g = pick([xc, c, c, xc, zero, zero])
        b = pick([zero, zero, xc, c, c, xc])
        return stack([r + m, g + m, b + m], axis=-1)


def _in_hsv(image, change: Callable, name: str) -> Tensor:
    """Convert to float HSV, change it, convert back to the image's dtype."""
    from jitflow.ops.image_ops import convert_image_dtype
    from jitflow.ops.join import stack, unstack
    with name_scope(None, name, [image]):
        img = convert_to_tensor(image, name="image")
        flt = convert_image_dtype(img, _dtypes.float32)
        h, s, v = unstack(rgb_to_hsv(flt), axis=-1)
        h, s, v = change(h, s, v)
        rgb = hsv_to_rgb(stack([h, s, v], axis=-1))
        return convert_image_dtype(rgb, img.dtype)


def adjust_saturation(image, saturation_factor, name: Optional[str] = None) -> Tensor:
    """The saturation of RGB images times `saturation_factor` (clipped to [0, 1])."""
    from jitflow.ops.math.compare import clip_by_value
    return _in_hsv(image, lambda h, s, v: (h, clip_by_value(s * saturation_factor, 0.0, 1.0), v),
                   name or "adjust_saturation")


def adjust_hue(image, delta, name: Optional[str] = None) -> Tensor:
    """The hue of RGB images turned by `delta` (in [-1, 1]; wraps around)."""
    from jitflow.ops.math.unary import floor

    def turn(h, s, v):
        t = h + delta
        return t - floor(t), s, v
    return _in_hsv(image, turn, name or "adjust_hue")


def random_hue(image, max_delta: float, seed=None) -> Tensor:
    """`adjust_hue` by a delta drawn uniformly from [-max_delta, max_delta]."""
    from jitflow.ops.random import random_uniform
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_hue(image, random_uniform([], -max_delta, max_delta, seed=seed))


def random_saturation(image, lower: float, upper: float, seed=None) -> Tensor:
    """`adjust_saturation` by a factor drawn uniformly from [lower, upper)."""
    from jitflow.ops.random import random_uniform
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return adjust_saturation(image, random_uniform([], lower, upper, seed=seed))


def sobel_edges(image) -> Tensor:
    """Sobel filter responses of NHWC images: shape [b, h, w, c, 2] holding (dy, dx), with the
    borders reflected."""
    from jitflow.ops.nn.depthwise import depthwise_conv2d
    from jitflow.ops.shape_ops import reshape
    from jitflow.ops.sources import constant
    from jitflow.ops.tile_pad import pad
    from jitflow.ops.shape_ops import shape
    from jitflow.ops.join import concat
    with name_scope(None, "sobel_edges", [image]):
        x = convert_to_tensor(image, name="image")
        if not x.dtype.is_floating:
            raise TypeError(f"sobel_edges: image {x.name!r} must be float, got {x.dtype.name}")
        c = x.shape.as_tuple()[-1] if x.shape.ndims == 4 else None
        if c is None:
            raise ValueError(f"sobel_edges: image {x.name!r} must be 4-D with static channels, "
                             f"got shape {x.shape}")
        dy = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], np.float64)
        k = np.stack([dy, dy.T], axis=-1)[:, :, None, :]       # [3, 3, 1, 2]
        k = np.tile(k, (1, 1, c, 1))                           # [3, 3, c, 2]
        padded = pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
        y = depthwise_conv2d(padded, constant(k, dtype=x.dtype), [1, 1, 1, 1], "VALID")
        return reshape(y, concat([shape(x), [2]], 0))
