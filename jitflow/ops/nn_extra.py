"""More of `tf.nn` that classic TF1 programs use and no op family of jitflow/ops/nn/ holds:
local response normalization (AlexNet and the CIFAR-10 tutorial) and
space_to_depth/depth_to_space.

`space_to_depth` and `depth_to_space` are compositions of existing ops (so they compile and
differentiate as those do); `LRN` has its reference and TF's gradient formula.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register

__all__ = ["space_to_depth", "depth_to_space"]

NAMESPACES = {"nn": ["lrn", "local_response_normalization", "space_to_depth", "depth_to_space"]}


# -- local response normalization -----------------------------------------------------------------
def _lrn_sums(op, x):
    r = op.attrs["depth_radius"]
    sq = np.square(x.astype(np.float64))
    c = x.shape[-1]
    pad = np.pad(sq, [(0, 0)] * (x.ndim - 1) + [(r, r)])
    csum = np.concatenate([np.zeros(x.shape[:-1] + (1,)), np.cumsum(pad, axis=-1)], axis=-1)
    return csum[..., 2 * r + 1:2 * r + 1 + c] - csum[..., :c]


def _lrn_ref(op, x):
    a = op.attrs
    x = np.asarray(x)
    norm = a["bias"] + a["alpha"] * _lrn_sums(op, x)
    return (x / np.power(norm, a["beta"])).astype(x.dtype)


def _lrn_grad_ref(op, g, x, y):
    a = op.attrs
    x, g, y = (np.asarray(v, np.float64) for v in (x, g, y))
    r, alpha, beta = a["depth_radius"], a["alpha"], a["beta"]
    norm = a["bias"] + alpha * _lrn_sums(op, x)
    # dy_i/dx_j = delta_ij N_i^-beta - 2 alpha beta x_i x_j N_i^(-beta-1), j within radius
    t = g * x * np.power(norm, -beta - 1.0)
    c = x.shape[-1]
    pad = np.pad(t, [(0, 0)] * (x.ndim - 1) + [(r, r)])
    csum = np.concatenate([np.zeros(x.shape[:-1] + (1,)), np.cumsum(pad, axis=-1)], axis=-1)
    window = csum[..., 2 * r + 1:2 * r + 1 + c] - csum[..., :c]
    out = g * np.power(norm, -beta) - 2.0 * alpha * beta * x * window
    return out.astype(op.outputs[0].dtype.as_numpy_dtype)


def _lrn_infer(op):
    x = op.inputs[0]
    if x.shape.ndims not in (None, 4):
        raise ValueError(f"Shape must be rank 4 but is rank {x.shape.ndims} for '{op.name}' "
                         "(op: 'LRN')")
    if x.dtype.name not in ("float16", "float32", "float64"):
        raise TypeError(f"LRN needs a float input, got {x.dtype.name}")
    return [(x.dtype, x.shape)]


def _lrn_grad(op, g):
    return [make_op("LRNGrad", [g, op.inputs[0], op.outputs[0]], dict(op.attrs),
                    name="LRNGrad").outputs[0]]


def _np_lrn(x, r=2, bias=1.0, alpha=0.5, beta=0.75):
    out = np.zeros_like(x, dtype=np.float64)
    c = x.shape[-1]
    for k in range(c):
        lo, hi = max(0, k - r), min(c, k + r + 1)
        s = np.sum(np.square(x[..., lo:hi].astype(np.float64)), axis=-1)
        out[..., k] = x[..., k] / (bias + alpha * s) ** beta
    return out


register("LRN", infer=_lrn_infer, ref=_lrn_ref, grad=_lrn_grad, kind="other",
         doc="x / (bias + alpha * sum of squares over depth_radius channels)^beta.",
         examples=[Example(lambda x: lrn(x, 2, 1.0, 0.5, 0.75), [(2, 3, 2, 6)], _np_lrn)])
register("LRNGrad", infer=lambda op: [(op.inputs[1].dtype, op.inputs[1].shape)],
         ref=_lrn_grad_ref, differentiable=False, kind="other",
         doc="Inputs (output gradient, input, output): the gradient of LRN.")


def lrn(input, depth_radius: int = 5, bias: float = 1.0, alpha: float = 1.0,  # noqa: A002
        beta: float = 0.5, name: Optional[str] = None) -> Tensor:
    """`tf.nn.lrn` / `local_response_normalization`: each channel divided by
    (bias + alpha * the sum of squares of the channels within `depth_radius`)^beta."""
    with name_scope(name, "LRN", [input]) as scope:
        x = convert_to_tensor(input, name="input")
        attrs = {"depth_radius": int(depth_radius), "bias": float(bias),
                 "alpha": float(alpha), "beta": float(beta)}
        return make_op("LRN", [x], attrs, name=scope[:-1] if scope else "LRN").outputs[0]


local_response_normalization = lrn


# -- space_to_depth, depth_to_space ---------------------------------------------------------------
def space_to_depth(input, block_size: int, name: Optional[str] = None,  # noqa: A002
                   data_format: str = "NHWC") -> Tensor:
    """`tf.space_to_depth`: each block_size x block_size patch becomes channels."""
    from jitflow.ops.shape_ops import reshape, transpose
    b = int(block_size)
    with name_scope(name, "SpaceToDepth", [input]):
        x = convert_to_tensor(input, name="input")
        n, h, w, c = x.shape.as_tuple()
        if h is None or w is None or c is None:
            raise NotImplementedError("space_to_depth needs static height, width, channels")
        if h % b or w % b:
            raise ValueError(f"Image height {h} and width {w} must be divisible by "
                             f"block_size {b}")
        y = reshape(x, [-1, h // b, b, w // b, b, c])
        y = transpose(y, [0, 1, 3, 2, 4, 5])
        return reshape(y, [-1, h // b, w // b, b * b * c])


def depth_to_space(input, block_size: int, name: Optional[str] = None,  # noqa: A002
                   data_format: str = "NHWC") -> Tensor:
    """`tf.depth_to_space`: the inverse of `space_to_depth`."""
    from jitflow.ops.shape_ops import reshape, transpose
    b = int(block_size)
    with name_scope(name, "DepthToSpace", [input]):
        x = convert_to_tensor(input, name="input")
        n, h, w, c = x.shape.as_tuple()
        if h is None or w is None or c is None:
            raise NotImplementedError("depth_to_space needs static height, width, channels")
        if c % (b * b):
            raise ValueError(f"Input depth {c} must be divisible by block_size^2 = {b * b}")
        y = reshape(x, [-1, h, w, b, b, c // (b * b)])
        y = transpose(y, [0, 1, 3, 2, 4, 5])
        return reshape(y, [-1, h * b, w * b, c // (b * b)])
