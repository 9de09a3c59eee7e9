"""`tf.image`: the image preprocessing TF1 input pipelines use (resizing, flips, crops and
pads, colour adjustments, standardization, dtype conversion).

Everything is built from existing ops: a resize is gathers of the source rows and columns at
computed positions mixed with computed weights (TF1's legacy sampling: `align_corners=False`
maps output pixel i to source position i * in / out), a flip is a reverse, a crop a slice or
a gather, so each compiles and has gradients. Images are [batch, height, width, channels] or
[height, width, channels].
"""
from __future__ import annotations

import enum
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, name_scope

__all__ = ["random_crop"]

_NAMES = ["ResizeMethod", "resize_images", "resize", "resize_bilinear",
          "resize_nearest_neighbor", "flip_left_right", "flip_up_down",
          "random_flip_left_right", "random_flip_up_down", "transpose_image", "transpose",
          "rot90", "per_image_standardization", "convert_image_dtype", "adjust_brightness",
          "adjust_contrast", "random_brightness", "random_contrast", "adjust_gamma",
          "central_crop", "crop_to_bounding_box", "pad_to_bounding_box",
          "resize_image_with_crop_or_pad", "resize_with_crop_or_pad", "random_crop",
          "rgb_to_grayscale", "grayscale_to_rgb", "total_variation", "image_gradients", "psnr"]
NAMESPACES = {"image": _NAMES}


class ResizeMethod(enum.IntEnum):
    """`tf.image.ResizeMethod` (TF1's values)."""

    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


def _as_batch(images) -> tuple:
    """(4-D images, whether a batch dimension was added)."""
    from jitflow.ops.shape_ops import expand_dims
    x = convert_to_tensor(images, name="images")
    r = x.shape.ndims
    if r is None:
        raise ValueError("images must have a known rank (3 or 4)")
    if r == 3:
        return expand_dims(x, 0), True
    if r != 4:
        raise ValueError(f"'images' must have either 3 or 4 dimensions, got shape {x.shape}")
    return x, False


def _unbatch(x: Tensor, added: bool) -> Tensor:
    from jitflow.ops.shape_ops import squeeze
    return squeeze(x, [0]) if added else x


def _dim(x: Tensor, axis: int):
    """A static dim as an int, else its value as a scalar int32 tensor."""
    from jitflow.ops.shape_ops import shape
    d = x.shape.as_tuple()[axis]
    return d if d is not None else shape(x)[axis]


def _positions(n_in, n_out: int, align_corners: bool):
    """Source positions (float32) of the `n_out` output pixels along one axis."""
    from jitflow.ops.math.casting import cast
    if isinstance(n_in, int):
        if align_corners and n_out > 1:
            scale = (n_in - 1) / (n_out - 1)
        else:
            scale = n_in / n_out
        return convert_to_tensor(np.arange(n_out, dtype=np.float32) * np.float32(scale))
    fin = cast(n_in, _dtypes.float32)
    if align_corners and n_out > 1:
        scale = (fin - 1.0) / float(n_out - 1)
    else:
        scale = fin / float(n_out)
    return convert_to_tensor(np.arange(n_out, dtype=np.float32)) * scale


def _clamp_index(i, n_in):
    from jitflow.ops.math.compare import maximum, minimum
    return maximum(minimum(i, n_in - 1), 0)


def _nearest_axis(x: Tensor, axis: int, n_out: int, align_corners: bool) -> Tensor:
    from jitflow.ops.slicing import gather
    from jitflow.ops.math.casting import cast
    from jitflow.ops.math.unary import floor, round as round_
    n_in = _dim(x, axis)
    pos = _positions(n_in, n_out, align_corners)
    idx = cast(round_(pos) if align_corners else floor(pos), _dtypes.int32)
    return gather(x, _clamp_index(idx, n_in), axis=axis)


def _bilinear_axis(x: Tensor, axis: int, n_out: int, align_corners: bool) -> Tensor:
    from jitflow.ops.shape_ops import reshape
    from jitflow.ops.slicing import gather
    from jitflow.ops.math.casting import cast
    from jitflow.ops.math.unary import floor
    n_in = _dim(x, axis)
    pos = _positions(n_in, n_out, align_corners)
    lo = floor(pos)
    frac = pos - lo
    i0 = _clamp_index(cast(lo, _dtypes.int32), n_in)
    i1 = _clamp_index(i0 + 1, n_in)
    a, b = gather(x, i0, axis=axis), gather(x, i1, axis=axis)
    shape = [1, 1, 1, 1]
    shape[axis] = n_out
    w = reshape(frac, shape)
    return a + (b - a) * w


def _size_arg(size) -> tuple:
    if isinstance(size, Tensor):
        if size.op.type == "Const":
            size = [int(v) for v in np.reshape(size.op.attrs["value"], -1)]
        else:
            raise NotImplementedError("resize: the output size must be known when the graph "
                                      "is built")
    h, w = (int(v) for v in size)
    if h <= 0 or w <= 0:
        raise ValueError(f"'size' must be positive, got {size}")
    return h, w


def resize_images(images, size, method=ResizeMethod.BILINEAR, align_corners: bool = False,
                  preserve_aspect_ratio: bool = False, name: Optional[str] = None) -> Tensor:
    """`tf.image.resize_images` (TF1): images resized to `size` (new_height, new_width).

    BILINEAR gives float32, NEAREST_NEIGHBOR keeps the dtype (as TF1's ops)."""
    from jitflow.ops.math.casting import cast
    method = ResizeMethod(method if not isinstance(method, str) else
                          {"bilinear": 0, "nearest": 1, "bicubic": 2, "area": 3}[method])
    with name_scope(name, "resize", [images, size]):
        x, added = _as_batch(images)
        h, w = _size_arg(size)
        if preserve_aspect_ratio:
            ih, iw = x.shape.as_tuple()[1:3]
            if ih is None or iw is None:
                raise NotImplementedError("preserve_aspect_ratio needs a static image size")
            scale = min(h / ih, w / iw)
            h, w = max(int(round(ih * scale)), 1), max(int(round(iw * scale)), 1)
        if method == ResizeMethod.NEAREST_NEIGHBOR:
            out = _nearest_axis(_nearest_axis(x, 1, h, align_corners), 2, w, align_corners)
        elif method == ResizeMethod.BILINEAR:
            xf = x if x.dtype == _dtypes.float32 else cast(x, _dtypes.float32)
            out = _bilinear_axis(_bilinear_axis(xf, 1, h, align_corners), 2, w, align_corners)
        else:
            raise NotImplementedError(f"resize method {method.name} is not supported "
                                      "(BILINEAR and NEAREST_NEIGHBOR are)")
        out.set_shape([x.shape.as_tuple()[0], h, w, x.shape.as_tuple()[3]])
        return _unbatch(out, added)


def resize(images, size, method=ResizeMethod.BILINEAR, align_corners: bool = False,
           preserve_aspect_ratio: bool = False, name: Optional[str] = None) -> Tensor:
    """`tf.compat.v1.image.resize`: the same as `resize_images`."""
    return resize_images(images, size, method, align_corners, preserve_aspect_ratio, name)


def resize_bilinear(images, size, align_corners: bool = False, name: Optional[str] = None,
                    half_pixel_centers: bool = False) -> Tensor:
    """`tf.image.resize_bilinear`: 4-D images resized by bilinear interpolation (float32)."""
    if half_pixel_centers:
        raise NotImplementedError("resize_bilinear: half_pixel_centers is not supported")
    return resize_images(images, size, ResizeMethod.BILINEAR, align_corners, name=name)


def resize_nearest_neighbor(images, size, align_corners: bool = False,
                            name: Optional[str] = None,
                            half_pixel_centers: bool = False) -> Tensor:
    """`tf.image.resize_nearest_neighbor`: 4-D images resized by the nearest source pixel."""
    if half_pixel_centers:
        raise NotImplementedError("resize_nearest_neighbor: half_pixel_centers is not "
                                  "supported")
    return resize_images(images, size, ResizeMethod.NEAREST_NEIGHBOR, align_corners, name=name)


# -- flips, transposes ----------------------------------------------------------------------------
def _flip(image, axis_from_end: int, name, default: str) -> Tensor:
    from jitflow.ops.tile_pad import reverse
    with name_scope(name, default, [image]):
        x = convert_to_tensor(image, name="image")
        if x.shape.ndims not in (3, 4):
            raise ValueError(f"'image' must have either 3 or 4 dimensions, got {x.shape}")
        return reverse(x, [x.shape.ndims - axis_from_end])


def flip_left_right(image, name: Optional[str] = None) -> Tensor:
    """`tf.image.flip_left_right`: mirror the width axis."""
    return _flip(image, 2, name, "flip_left_right")


def flip_up_down(image, name: Optional[str] = None) -> Tensor:
    """`tf.image.flip_up_down`: mirror the height axis."""
    return _flip(image, 3, name, "flip_up_down")


def _random_flip(image, seed, axis_from_end: int, name, default: str) -> Tensor:
    from jitflow.ops.math.compare import less, where_v2
    from jitflow.ops.random import random_uniform
    with name_scope(name, default, [image]):
        x = convert_to_tensor(image, name="image")
        flipped = _flip(x, axis_from_end, None, "flip")
        if x.shape.ndims == 4:  # each image of the batch decides for itself
            from jitflow.ops.shape_ops import reshape, shape
            u = random_uniform(shape(x)[:1], 0, 1.0, seed=seed)
            cond = reshape(less(u, 0.5), [-1, 1, 1, 1])
        else:
            cond = less(random_uniform([], 0, 1.0, seed=seed), 0.5)
        return where_v2(cond, flipped, x)


def random_flip_left_right(image, seed=None) -> Tensor:
    """`tf.image.random_flip_left_right`: mirror the width axis with probability 1/2."""
    return _random_flip(image, seed, 2, None, "random_flip_left_right")


def random_flip_up_down(image, seed=None) -> Tensor:
    """`tf.image.random_flip_up_down`: mirror the height axis with probability 1/2."""
    return _random_flip(image, seed, 3, None, "random_flip_up_down")


def transpose_image(image, name: Optional[str] = None) -> Tensor:
    """`tf.image.transpose_image`: swap height and width."""
    from jitflow.ops.shape_ops import transpose as transpose_
    with name_scope(name, "transpose", [image]):
        x = convert_to_tensor(image, name="image")
        perm = [1, 0, 2] if x.shape.ndims == 3 else [0, 2, 1, 3]
        return transpose_(x, perm)


transpose = transpose_image


def rot90(image, k: int = 1, name: Optional[str] = None) -> Tensor:
    """`tf.image.rot90`: rotate counter-clockwise by k * 90 degrees."""
    with name_scope(name, "rot90", [image]):
        x = convert_to_tensor(image, name="image")
        k = int(k) % 4
        for _ in range(k):
            x = flip_up_down(transpose_image(x))
        return x


# -- colour and value adjustments ----------------------------------------------------------------
def _to_float(image) -> tuple:
    x = convert_to_tensor(image, name="image")
    if x.dtype.is_floating:
        return x, x.dtype
    return convert_image_dtype(x, _dtypes.float32), x.dtype


def _back(x: Tensor, dtype) -> Tensor:
    return x if x.dtype == dtype else convert_image_dtype(x, dtype, saturate=True)


def convert_image_dtype(image, dtype, saturate: bool = False,
                        name: Optional[str] = None) -> Tensor:
    """`tf.image.convert_image_dtype`: integer images map to [0, 1] floats (dividing by the
    dtype's max), floats to integers by multiplying by the max (+0.5, truncated)."""
    from jitflow.ops.math.casting import cast
    from jitflow.ops.math.compare import clip_by_value
    dtype = _dtypes.as_dtype(dtype)
    with name_scope(name, "convert_image", [image]):
        x = convert_to_tensor(image, name="image")
        if x.dtype == dtype:
            return x
        if x.dtype.is_integer and dtype.is_integer:
            scale = (int(dtype.max) + 1) / (int(x.dtype.max) + 1)
            return cast(cast(x, _dtypes.float64) * scale, dtype)
        if x.dtype.is_integer:
            return cast(x, dtype) * (1.0 / float(x.dtype.max))
        if dtype.is_integer:
            scaled = x * (float(dtype.max) + 0.5)
            if saturate:
                scaled = clip_by_value(scaled, float(dtype.min), float(dtype.max))
            return cast(scaled, dtype)
        return cast(x, dtype)


def adjust_brightness(image, delta) -> Tensor:
    """`tf.image.adjust_brightness`: add `delta` (in [0, 1] units for integer images)."""
    with name_scope(None, "adjust_brightness", [image, delta]):
        x, dt = _to_float(image)
        return _back(x + delta, dt)


def adjust_contrast(images, contrast_factor) -> Tensor:
    """`tf.image.adjust_contrast`: (x - mean) * factor + mean, the mean per image and
    channel."""
    from jitflow.ops.reduce import reduce_mean
    with name_scope(None, "adjust_contrast", [images, contrast_factor]):
        x, dt = _to_float(images)
        mean = reduce_mean(x, axis=[-3, -2], keepdims=True)
        return _back((x - mean) * contrast_factor + mean, dt)


def adjust_gamma(image, gamma=1, gain=1) -> Tensor:
    """`tf.image.adjust_gamma`: gain * x^gamma (x scaled to [0, 1] for integer images)."""
    from jitflow.ops.math.arithmetic import pow as pow_
    with name_scope(None, "adjust_gamma", [image, gamma, gain]):
        x, dt = _to_float(image)
        return _back(pow_(x, gamma) * gain, dt)


def random_brightness(image, max_delta, seed=None) -> Tensor:
    """`tf.image.random_brightness`: brightness shifted by a uniform delta in
    [-max_delta, max_delta)."""
    from jitflow.ops.random import random_uniform
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_brightness(image, random_uniform([], -max_delta, max_delta, seed=seed))


def random_contrast(image, lower, upper, seed=None) -> Tensor:
    """`tf.image.random_contrast`: contrast scaled by a uniform factor in [lower, upper)."""
    from jitflow.ops.random import random_uniform
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return adjust_contrast(image, random_uniform([], lower, upper, seed=seed))


def per_image_standardization(image) -> Tensor:
    """`tf.image.per_image_standardization`: (x - mean) / max(stddev, 1/sqrt(N)) per image."""
    from jitflow.ops.math.casting import cast
    from jitflow.ops.math.compare import maximum
    from jitflow.ops.math.unary import rsqrt, sqrt
    from jitflow.ops.reduce import reduce_mean
    from jitflow.ops.shape_ops import size
    with name_scope(None, "per_image_standardization", [image]):
        x = convert_to_tensor(image, name="image")
        if x.shape.ndims not in (3, 4):
            raise ValueError(f"'image' must have either 3 or 4 dimensions, got {x.shape}")
        x = cast(x, _dtypes.float32) if x.dtype != _dtypes.float32 else x
        axes = [-3, -2, -1]
        n = x.shape.as_tuple()[-3:]
        count = float(np.prod(n)) if None not in n else cast(
            size(x) // (1 if x.shape.ndims == 3 else _dim(x, 0)), _dtypes.float32)
        mean = reduce_mean(x, axis=axes, keepdims=True)
        var = reduce_mean((x - mean) * (x - mean), axis=axes, keepdims=True)
        floor_ = rsqrt(convert_to_tensor(np.float32(count)) if isinstance(count, float)
                       else count)
        return (x - mean) / maximum(sqrt(var), floor_)


def rgb_to_grayscale(images, name: Optional[str] = None) -> Tensor:
    """`tf.image.rgb_to_grayscale`: the luma 0.2989 R + 0.5870 G + 0.1140 B, one channel."""
    from jitflow.ops.reduce import reduce_sum
    with name_scope(name, "rgb_to_grayscale", [images]):
        x, dt = _to_float(images)
        w = convert_to_tensor(np.array([0.2989, 0.5870, 0.1140], x.dtype.as_numpy_dtype))
        return _back(reduce_sum(x * w, axis=-1, keepdims=True), dt)


def grayscale_to_rgb(images, name: Optional[str] = None) -> Tensor:
    """`tf.image.grayscale_to_rgb`: the one channel repeated three times."""
    from jitflow.ops.join import concat
    with name_scope(name, "grayscale_to_rgb", [images]):
        x = convert_to_tensor(images, name="images")
        return concat([x, x, x], -1)


def total_variation(images, name: Optional[str] = None) -> Tensor:
    """`tf.image.total_variation`: the sum of absolute differences of neighbouring pixels."""
    from jitflow.ops.math.unary import abs as abs_
    from jitflow.ops.reduce import reduce_sum
    with name_scope(name, "total_variation", [images]):
        x = convert_to_tensor(images, name="images")
        if x.shape.ndims == 3:
            return reduce_sum(abs_(x[1:] - x[:-1])) + reduce_sum(abs_(x[:, 1:] - x[:, :-1]))
        return (reduce_sum(abs_(x[:, 1:] - x[:, :-1]), axis=[1, 2, 3])
                + reduce_sum(abs_(x[:, :, 1:] - x[:, :, :-1]), axis=[1, 2, 3]))


def image_gradients(image) -> tuple:
    """`tf.image.image_gradients`: (dy, dx), forward differences with a zero last row/column."""
    from jitflow.ops.tile_pad import pad
    x = convert_to_tensor(image, name="image")
    if x.shape.ndims != 4:
        raise ValueError("image_gradients expects a 4-D tensor [batch, h, w, d]")
    dy = pad(x[:, 1:] - x[:, :-1], [[0, 0], [0, 1], [0, 0], [0, 0]])
    dx = pad(x[:, :, 1:] - x[:, :, :-1], [[0, 0], [0, 0], [0, 1], [0, 0]])
    return dy, dx


def psnr(a, b, max_val, name: Optional[str] = None) -> Tensor:
    """`tf.image.psnr`: 10 log10(max_val^2 / mse) per image."""
    from jitflow.ops.math.casting import cast
    from jitflow.ops.math.unary import log, square
    from jitflow.ops.reduce import reduce_mean
    with name_scope(name, "PSNR", [a, b]):
        x = cast(convert_to_tensor(a), _dtypes.float32)
        y = cast(convert_to_tensor(b), _dtypes.float32)
        mse = reduce_mean(square(x - y), axis=[-3, -2, -1])
        mv = float(max_val)
        return (20.0 * np.log10(mv)) - 10.0 / np.log(10.0) * log(mse)


# -- crops and pads ------------------------------------------------------------------------------
def crop_to_bounding_box(image, offset_height, offset_width, target_height,
                         target_width) -> Tensor:
    """`tf.image.crop_to_bounding_box`: the box with top-left corner at the offsets."""
    from jitflow.ops.slicing import slice as slice_
    with name_scope(None, "crop_to_bounding_box", [image]):
        x, added = _as_batch(image)
        out = slice_(x, [0, offset_height, offset_width, 0],
                     [-1, target_height, target_width, -1])
        return _unbatch(out, added)


def pad_to_bounding_box(image, offset_height, offset_width, target_height,
                        target_width) -> Tensor:
    """`tf.image.pad_to_bounding_box`: zeros around the image, which starts at the
    offsets."""
    from jitflow.ops.tile_pad import pad
    with name_scope(None, "pad_to_bounding_box", [image]):
        x, added = _as_batch(image)
        h, w = x.shape.as_tuple()[1:3]
        if h is None or w is None:
            raise NotImplementedError("pad_to_bounding_box needs a static image size")
        after_h = target_height - offset_height - h
        after_w = target_width - offset_width - w
        if after_h < 0 or after_w < 0:
            raise ValueError("target size must be at least the image size plus the offsets")
        out = pad(x, [[0, 0], [offset_height, after_h], [offset_width, after_w], [0, 0]])
        return _unbatch(out, added)


def resize_image_with_crop_or_pad(image, target_height: int, target_width: int) -> Tensor:
    """`tf.image.resize_image_with_crop_or_pad`: centre-crop or zero-pad to the target size."""
    with name_scope(None, "resize_image_with_crop_or_pad", [image]):
        x, added = _as_batch(image)
        h, w = x.shape.as_tuple()[1:3]
        if h is None or w is None:
            raise NotImplementedError("resize_image_with_crop_or_pad needs a static image "
                                      "size")
        ch, cw = min(h, target_height), min(w, target_width)
        x = crop_to_bounding_box(x, max((h - target_height) // 2, 0),
                                 max((w - target_width) // 2, 0), ch, cw)
        x = pad_to_bounding_box(x, max((target_height - h) // 2, 0),
                                max((target_width - w) // 2, 0), target_height, target_width)
        return _unbatch(x, added)


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def central_crop(image, central_fraction: float) -> Tensor:
    """`tf.image.central_crop`: the central `central_fraction` of the height and width."""
    if not 0.0 < central_fraction <= 1.0:
        raise ValueError("central_fraction must be within (0, 1]")
    with name_scope(None, "central_crop", [image]):
        x, added = _as_batch(image)
        if central_fraction == 1.0:
            return _unbatch(x, added)
        h, w = x.shape.as_tuple()[1:3]
        if h is None or w is None:
            raise NotImplementedError("central_crop needs a static image size")
        oh = int((h - h * central_fraction) / 2)
        ow = int((w - w * central_fraction) / 2)
        return _unbatch(crop_to_bounding_box(x, oh, ow, h - 2 * oh, w - 2 * ow), added)


def random_crop(value, size, seed=None, name: Optional[str] = None) -> Tensor:
    """`tf.random_crop` / `tf.image.random_crop`: a slice of shape `size` at a uniformly
    random offset (gathers at computed indices, so it compiles)."""
    from jitflow.ops.shape_ops import shape
    from jitflow.ops.slicing import gather
    from jitflow.ops.sources import range as range_
    from jitflow.ops.random import random_uniform
    with name_scope(name, "random_crop", [value, size]):
        x = convert_to_tensor(value, name="value")
        size = [int(s) for s in size]
        if x.shape.ndims != len(size):
            raise ValueError(f"random_crop: size {size} must have the rank of value "
                             f"{x.shape}")
        for axis, want in enumerate(size):
            have = x.shape.as_tuple()[axis]
            if have is not None and have < want:
                raise ValueError(f"random_crop: size {size} is larger than value {x.shape}")
            if have == want:
                continue
            limit = (have - want + 1) if have is not None else shape(x)[axis] - want + 1
            off = random_uniform([], 0, limit, dtype=_dtypes.int32, seed=seed)
            x = gather(x, off + range_(want), axis=axis)
        x.set_shape(size)
        return x
