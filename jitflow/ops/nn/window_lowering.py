"""The lowering of the window ops (convolutions, depthwise convolutions, pooling and their
gradients) into the kernel IR: each becomes one `ir.LibCall` of the backends' window library;
`winograd_candidate` picks the Winograd routines for the convolutions that allow them.
"""
from __future__ import annotations


from jitflow.compiler.ir import LibCall, Value
from jitflow.compiler.lower import Unsupported
from jitflow.ops.nn.window import _explicit_pads

__all__: list = []


# -- lowering of window ops into the kernel IR --------------------------------------------------
# Each convolution and pooling op (and gradient) becomes one `ir.LibCall`: a call of a library
# routine (each backend has its window library) on stored operands, writing outputs the kernel
# allocates. Output sizes are symbolic dims ("window", n, k, stride, dilation, same) -- ceil(n /
# stride) for SAME, the number of whole windows for VALID -- so a new batch or image size
# reuses the same code; sizes the static shapes know are used as constants. EXPLICIT padding
# (Conv2D and its gradients) is a VALID window over the axis grown by both pad amounts, and the
# routines take the pads before as two more parameters. The ops consuming the outputs (bias,
# activation) fuse into one loop over them as usual.
def _window_dim(n, k, stride: int, dilation: int, same: bool, pads=(0, 0)):
    """The symbolic output size of one spatial axis (n, k: dims; `pads`: EXPLICIT padding)."""
    if sum(pads):
        n = ("arith", "+", n, ("const", int(sum(pads))))
    elif n == 1 and k == 1 and stride == 1:
        return 1
    return ("window", n, k, stride, dilation, same)


def _win_stored(low, t, pos: int):
    v = low.stored(t, pos)
    if v.rank != 4:
        raise Unsupported("window op operands must be rank-4 arrays")
    return v


def _win_geometry(op) -> tuple:
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs.get("dilations", (1, 1, 1, 1))
    return int(sh), int(sw), int(dh), int(dw), op.attrs["padding"] == "SAME"


def _win_params(op) -> tuple:
    sh, sw, dh, dw, same = _win_geometry(op)
    return sh, sw, dh, dw, int(same)


def _conv_params(op) -> tuple:
    """The parameters of nnlib's conv2d routines: strides, dilations, SAME as 0/1, then the
    EXPLICIT padding before the first row and column (0 for SAME and VALID)."""
    (ph, _), (pw, _) = _explicit_pads(op)
    return _win_params(op) + (ph, pw)


def _win_out(low, op, ones: tuple, dims: tuple):
    t = op.outputs[0]
    ones, dims = low.refine(t, ones, dims)
    v = low.buf(t.dtype.name, ones, dims)
    low.set(t, v)
    return v


#: at least this many channels in and out for the Winograd routines (nnlib._WINO_MIN_CHANNELS)
WINOGRAD_MIN_CHANNELS = 16
#: 5x5 filters: at most this many channels summed (nnlib._WINO5_MAX_CHANNELS; the forward
#: sums the input channels, the input gradient the output channels)
WINOGRAD5_MAX_CHANNELS = 128


def winograd_candidate(op, filter_tensor) -> bool:
    """Whether a (non-depthwise) convolution's static attributes allow nnlib's Winograd path:
    SAME or VALID padding, a square 3x3 or 5x5 filter, unit strides and dilations, at least
    WINOGRAD_MIN_CHANNELS channels in and out. Such ops call the `_w` routines, which check
    again on the real arrays (batch size included) and otherwise run im2col; other ops call the
    plain routines, so their kernels never compile the Winograd code.

    JITFLOW_WINOGRAD: "1" (default; "fast" is the same) 3x3 filters on F(2,3), which rounds like
    im2col, and 5x5 filters on F(2,5) where at most WINOGRAD5_MAX_CHANNELS channels are summed
    (2.8x fewer products; float32 rounding up to ~15 ulps of the output's scale, within the
    differential fuzzer's tolerance, where im2col's is 2-7); "3x3" 3x3 filters only; "0" none.
    Kernels are cached by their source, so settings never share one."""
    from jitflow.runtime import config
    mode = config.get("JITFLOW_WINOGRAD")
    if mode == "0":
        return False
    sizes = (3,) if mode == "3x3" else (3, 5)
    if op.attrs.get("padding") == "EXPLICIT":
        return False
    sh, sw, dh, dw, _ = _win_geometry(op)
    dims = filter_tensor.shape.as_list() if filter_tensor.shape.ndims == 4 else [None] * 4
    kh, kw, cin, cout = dims
    return (kh == kw and kh in sizes and (sh, sw, dh, dw) == (1, 1, 1, 1)
            and cin is not None and cout is not None
            and (kh == 3 or min(cin, cout) <= WINOGRAD5_MAX_CHANNELS)
            and min(cin, cout) >= WINOGRAD_MIN_CHANNELS)


def _lower_conv(low, op, pos: int) -> None:
    """Conv2D and DepthwiseConv2dNative: `conv2d` / `depthwise_conv2d` of the window library."""
    depthwise = op.type == "DepthwiseConv2dNative"
    x = _win_stored(low, op.inputs[0], pos)
    f = _win_stored(low, op.inputs[1], pos)
    if low.is_fed(op.outputs[0]):
        return
    sh, sw, dh, dw, same = _win_geometry(op)
    pad_h, pad_w = _explicit_pads(op)
    low.check_equal(x.dims[3], f.dims[2], pos, "input depth must equal the filter's "
                    "in_channels")
    oh = _window_dim(x.dims[1], f.dims[0], sh, dh, same, pad_h)
    ow = _window_dim(x.dims[2], f.dims[1], sw, dw, same, pad_w)
    if depthwise:
        ch = x.dims[3] if f.dims[3] == 1 else ("arith", "*", x.dims[3], f.dims[3])
    else:
        ch = f.dims[3]
    dims = (x.dims[0], oh, ow, ch)
    ones = (x.ones[0], oh == 1, ow == 1, ch == 1)
    out = _win_out(low, op, ones, dims)
    fn = "depthwise_conv2d" if depthwise else "conv2d"
    if not depthwise and winograd_candidate(op, op.inputs[1]):
        fn = "conv2d_w"
    params = _win_params(op) if depthwise else _conv_params(op)
    low.emit(LibCall(fn, [x, f], [out], params, pos))


def _check_conv_grad_dims(low, op, x_dims, f, g, pos: int, depthwise: bool) -> None:
    """The output gradient must have the forward op's output shape (else the interpreter
    reports the error)."""
    sh, sw, dh, dw, same = _win_geometry(op)
    pad_h, pad_w = _explicit_pads(op)
    want = (x_dims[0], _window_dim(x_dims[1], f.dims[0], sh, dh, same, pad_h),
            _window_dim(x_dims[2], f.dims[1], sw, dw, same, pad_w),
            ("arith", "*", x_dims[3], f.dims[3]) if depthwise and f.dims[3] != 1
            else x_dims[3] if depthwise else f.dims[3])
    for a, b in zip(g.dims, want):
        low.check_equal(a, b, pos, "out_backprop does not have the convolution's output shape")
    low.check_equal(x_dims[3], f.dims[2], pos, "input depth must equal the filter's "
                    "in_channels")


def _lower_conv_input_grad(low, op, pos: int) -> None:
    """Inputs (x, filter, g): the gradient with respect to x (x gives only its shape)."""
    depthwise = op.type == "DepthwiseConv2dNativeBackpropInput"
    _, _, x_ones, x_dims, _ = low.expr(op.inputs[0], shape_only=True)
    f = _win_stored(low, op.inputs[1], pos)
    g = _win_stored(low, op.inputs[2], pos)
    if low.is_fed(op.outputs[0]):
        return
    if len(x_dims) != 4:
        raise Unsupported("window op operands must be rank-4 arrays")
    _check_conv_grad_dims(low, op, x_dims, f, g, pos, depthwise)
    out = _win_out(low, op, x_ones, x_dims)
    fn = "depthwise_input_grad" if depthwise else "conv2d_input_grad"
    if not depthwise and winograd_candidate(op, op.inputs[1]):
        fn = "conv2d_input_grad_w"
    low.emit(LibCall(fn, [f, g], [out], _win_params(op) if depthwise else _conv_params(op),
                     pos))


def _lower_conv_filter_grad(low, op, pos: int) -> None:
    """Inputs (x, filter, g): the gradient with respect to the filter (its shape only)."""
    depthwise = op.type == "DepthwiseConv2dNativeBackpropFilter"
    x = _win_stored(low, op.inputs[0], pos)
    _, _, f_ones, f_dims, _ = low.expr(op.inputs[1], shape_only=True)
    g = _win_stored(low, op.inputs[2], pos)
    if low.is_fed(op.outputs[0]):
        return
    if len(f_dims) != 4:
        raise Unsupported("window op operands must be rank-4 arrays")
    fv = Value("buf", -1, x.dtype, f_ones, f_dims, "")
    _check_conv_grad_dims(low, op, x.dims, fv, g, pos, depthwise)
    out = _win_out(low, op, f_ones, f_dims)
    fn = "depthwise_filter_grad" if depthwise else "conv2d_filter_grad"
    if not depthwise and winograd_candidate(op, op.inputs[1]):
        fn = "conv2d_filter_grad_w"
    low.emit(LibCall(fn, [x, g], [out], _win_params(op) if depthwise else _conv_params(op),
                     pos))


def _pool_geometry(op) -> tuple:
    _, kh, kw, _ = op.attrs["ksize"]
    _, sh, sw, _ = op.attrs["strides"]
    return int(kh), int(kw), int(sh), int(sw), op.attrs["padding"] == "SAME"


def _pool_dims(x_dims, op) -> tuple:
    kh, kw, sh, sw, same = _pool_geometry(op)
    k_h = 1 if kh == 1 else ("const", kh)
    k_w = 1 if kw == 1 else ("const", kw)
    return (x_dims[0], _window_dim(x_dims[1], k_h, sh, 1, same),
            _window_dim(x_dims[2], k_w, sw, 1, same), x_dims[3])


def _pool_params(op) -> tuple:
    kh, kw, sh, sw, same = _pool_geometry(op)
    return kh, kw, sh, sw, int(same)


def _lower_pool(low, op, pos: int) -> None:
    """MaxPool and AvgPool: `max_pool` / `avg_pool` of the window library."""
    x = _win_stored(low, op.inputs[0], pos)
    if low.is_fed(op.outputs[0]):
        return
    dims = _pool_dims(x.dims, op)
    out = _win_out(low, op, tuple(d == 1 for d in dims), dims)
    fn = "max_pool" if op.type == "MaxPool" else "avg_pool"
    low.emit(LibCall(fn, [x], [out], _pool_params(op), pos))


def _check_pool_grad(low, op, x_dims, g, pos: int) -> None:
    for a, b in zip(g.dims, _pool_dims(x_dims, op)):
        low.check_equal(a, b, pos, "the gradient does not have the pooling output's shape")


def _lower_max_pool_grad(low, op, pos: int) -> None:
    x = _win_stored(low, op.inputs[0], pos)
    y = _win_stored(low, op.inputs[1], pos)
    g = _win_stored(low, op.inputs[2], pos)
    if low.is_fed(op.outputs[0]):
        return
    _check_pool_grad(low, op, x.dims, g, pos)
    _check_pool_grad(low, op, x.dims, y, pos)
    out = _win_out(low, op, x.ones, x.dims)
    low.emit(LibCall("max_pool_grad", [x, y, g], [out], _pool_params(op), pos))


def _lower_avg_pool_grad(low, op, pos: int) -> None:
    _, _, x_ones, x_dims, _ = low.expr(op.inputs[0], shape_only=True)
    g = _win_stored(low, op.inputs[1], pos)
    if low.is_fed(op.outputs[0]):
        return
    if len(x_dims) != 4:
        raise Unsupported("window op operands must be rank-4 arrays")
    _check_pool_grad(low, op, x_dims, g, pos)
    out = _win_out(low, op, x_ones, x_dims)
    low.emit(LibCall("avg_pool_grad", [g], [out], _pool_params(op), pos))


def _window_lowerable(op) -> bool:
    """NHWC, SAME or VALID (or EXPLICIT for Conv2D and its gradients), rank-4 float
    operands."""
    paddings = ("SAME", "VALID", "EXPLICIT") if op.type.startswith("Conv2D") else \
        ("SAME", "VALID")
    return (op.attrs.get("data_format", "NHWC") in ("NHWC", None)
            and op.attrs.get("padding") in paddings
            and all(t.shape.ndims == 4 and t.dtype.name in ("float32", "float64")
                    for t in list(op.inputs) + list(op.outputs)))
