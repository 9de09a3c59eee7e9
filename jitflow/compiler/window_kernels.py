"""Window ops in kernels: convolutions, depthwise convolutions, pooling and their gradients.

Lowering (called by fuse.py's `Lowerer` through the extension tables of array_kernels.py) and
the CPU emitter. Each op becomes one `LibCall`: a call of a native helper of nnlib.py on stored
operands, writing outputs the kernel allocates. Output sizes are symbolic dims of kind
("window", n, k, stride, dilation, same) -- ceil(n / stride) for SAME, the number of whole
windows for VALID -- so a new batch or image size reuses the same machine code; sizes the static
shapes know are used as constants. The producers of the operands are stored first; the ops
consuming the outputs (bias, activation) fuse into one loop over them as usual.
"""
from __future__ import annotations

from dataclasses import dataclass

from jitflow.compiler.fuse import Check, Lit, Value, _Unsupported

__all__ = ["LibCall", "LOWER", "SUPPORTED", "EMIT", "DIM_TEXT", "LIBRARY", "import_line"]

#: how generated code names the helper library (its import line is added when used)
LIBRARY = "_nn"
_TOKEN: list = []


def import_line() -> str:
    """The import of nnlib for a kernel that calls it, with a token that changes whenever
    nnlib.py changes (kernels cached on disk are keyed by their text). Imports no Numba."""
    if not _TOKEN:
        import hashlib
        import os
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nnlib.py")
        with open(path, "rb") as fh:
            _TOKEN.append(hashlib.sha256(fh.read()).hexdigest()[:16])
    return f"# nnlib {_TOKEN[0]}\nfrom jitflow.compiler import nnlib as {LIBRARY}\n"


@dataclass(eq=False)
class LibCall:
    """Statement: allocate `outs`, then `_nn.<fn>(*args, *outs, *params)` (ints)."""

    fn: str
    args: list
    outs: list
    params: tuple
    op: int


def _window_dim(n, k, stride: int, dilation: int, same: bool):
    """The symbolic output size of one spatial axis (n, k: dims)."""
    if n == 1 and k == 1 and stride == 1:
        return 1
    return ("window", n, k, stride, dilation, same)


def _dim_text(d, dim) -> str:
    _, n, k, s, dil, same = d
    nt = dim(n)
    if same:
        return nt if s == 1 else f"(({nt} + {s - 1}) // {s})"
    ek = f"(({dim(k)} - 1) * {dil} + 1)" if dil != 1 else dim(k)
    return f"max(({nt} - {ek}) // {s} + 1, 0)"


def _static_out(t, ones: tuple, dims: tuple) -> tuple:
    """Sizes the static shape of output `t` knows replace symbolic ones."""
    from jitflow.compiler.array_kernels import _refine
    return _refine(t, ones, dims)


def _stored(low, t, pos: int) -> Value:
    from jitflow.compiler.array_kernels import _src
    v = _src(low, t, pos)
    if isinstance(v, Lit) or v.rank != 4:
        raise _Unsupported("window op operands must be rank-4 arrays")
    return v


def _geometry(op) -> tuple:
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs.get("dilations", (1, 1, 1, 1))
    return int(sh), int(sw), int(dh), int(dw), op.attrs["padding"] == "SAME"


def _emit_out(low, op, pos: int, ones: tuple, dims: tuple) -> Value:
    t = op.outputs[0]
    ones, dims = _static_out(t, ones, dims)
    v = low._buf(t.dtype.name, ones, dims)
    low.info[t] = v
    return v


def _conv_out(low, op, x: Value, f: Value, pos: int, depthwise: bool) -> tuple:
    sh, sw, dh, dw, same = _geometry(op)
    if x.dims[3] != f.dims[2]:
        low.checks.append(Check(x.dims[3], f.dims[2], pos, "input depth must equal the "
                                "filter's in_channels"))
    oh = _window_dim(x.dims[1], f.dims[0], sh, dh, same)
    ow = _window_dim(x.dims[2], f.dims[1], sw, dw, same)
    if depthwise:
        ch = x.dims[3] if f.dims[3] == 1 else ("arith", "*", x.dims[3], f.dims[3])
    else:
        ch = f.dims[3]
    dims = (x.dims[0], oh, ow, ch)
    ones = (x.ones[0], oh == 1, ow == 1, ch == 1)
    return dims, ones, (sh, sw, dh, dw, int(same))


def _lower_conv(low, op, pos: int) -> None:
    depthwise = op.type == "DepthwiseConv2dNative"
    x = _stored(low, op.inputs[0], pos)
    f = _stored(low, op.inputs[1], pos)
    if op.outputs[0] in low.fed:
        return
    dims, ones, params = _conv_out(low, op, x, f, pos, depthwise)
    out = _emit_out(low, op, pos, ones, dims)
    low.stmts.append(LibCall("depthwise_conv2d" if depthwise else "conv2d", [x, f], [out],
                             params, pos))


def _lower_conv_input_grad(low, op, pos: int) -> None:
    """Inputs (x, filter, g): the gradient with respect to x (x gives only its shape)."""
    depthwise = op.type == "DepthwiseConv2dNativeBackpropInput"
    _, _, x_ones, x_dims, _ = low._expr(op.inputs[0], shape_only=True)
    f = _stored(low, op.inputs[1], pos)
    g = _stored(low, op.inputs[2], pos)
    if op.outputs[0] in low.fed:
        return
    if len(x_dims) != 4:
        raise _Unsupported("window op operands must be rank-4 arrays")
    _check_grad_dims(low, op, x_dims, f, g, pos, depthwise)
    out = _emit_out(low, op, pos, x_ones, x_dims)
    fn = "depthwise_input_grad" if depthwise else "conv2d_input_grad"
    low.stmts.append(LibCall(fn, [f, g], [out], _geometry_params(op), pos))


def _lower_conv_filter_grad(low, op, pos: int) -> None:
    """Inputs (x, filter, g): the gradient with respect to the filter (its shape only)."""
    depthwise = op.type == "DepthwiseConv2dNativeBackpropFilter"
    x = _stored(low, op.inputs[0], pos)
    _, _, f_ones, f_dims, _ = low._expr(op.inputs[1], shape_only=True)
    g = _stored(low, op.inputs[2], pos)
    if op.outputs[0] in low.fed:
        return
    if len(f_dims) != 4:
        raise _Unsupported("window op operands must be rank-4 arrays")
    fv = Value("buf", -1, x.dtype, f_ones, f_dims, "")
    _check_grad_dims(low, op, x.dims, fv, g, pos, depthwise)
    out = _emit_out(low, op, pos, f_ones, f_dims)
    fn = "depthwise_filter_grad" if depthwise else "conv2d_filter_grad"
    low.stmts.append(LibCall(fn, [x, g], [out], _geometry_params(op), pos))


def _geometry_params(op) -> tuple:
    sh, sw, dh, dw, same = _geometry(op)
    return sh, sw, dh, dw, int(same)


def _check_grad_dims(low, op, x_dims, f: Value, g: Value, pos: int, depthwise: bool) -> None:
    """The output gradient must have the forward op's output shape (else the interpreter
    reports the error)."""
    sh, sw, dh, dw, same = _geometry(op)
    want = (x_dims[0], _window_dim(x_dims[1], f.dims[0], sh, dh, same),
            _window_dim(x_dims[2], f.dims[1], sw, dw, same),
            ("arith", "*", x_dims[3], f.dims[3]) if depthwise and f.dims[3] != 1
            else x_dims[3] if depthwise else f.dims[3])
    what = "out_backprop does not have the convolution's output shape"
    for a, b in zip(g.dims, want):
        if a != b:
            low.checks.append(Check(a, b, pos, what))
    if x_dims[3] != f.dims[2]:
        low.checks.append(Check(x_dims[3], f.dims[2], pos, "input depth must equal the "
                                "filter's in_channels"))


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


def _lower_pool(low, op, pos: int) -> None:
    x = _stored(low, op.inputs[0], pos)
    if op.outputs[0] in low.fed:
        return
    dims = _pool_dims(x.dims, op)
    ones = tuple(d == 1 for d in dims)
    out = _emit_out(low, op, pos, ones, dims)
    kh, kw, sh, sw, same = _pool_geometry(op)
    fn = "max_pool" if op.type == "MaxPool" else "avg_pool"
    low.stmts.append(LibCall(fn, [x], [out], (kh, kw, sh, sw, int(same)), pos))


def _pool_grad_check(low, op, x_dims, g: Value, pos: int) -> None:
    for a, b in zip(g.dims, _pool_dims(x_dims, op)):
        if a != b:
            low.checks.append(Check(a, b, pos, "the gradient does not have the pooling "
                                    "output's shape"))


def _lower_max_pool_grad(low, op, pos: int) -> None:
    x = _stored(low, op.inputs[0], pos)
    y = _stored(low, op.inputs[1], pos)
    g = _stored(low, op.inputs[2], pos)
    if op.outputs[0] in low.fed:
        return
    _pool_grad_check(low, op, x.dims, g, pos)
    _pool_grad_check(low, op, x.dims, y, pos)
    out = _emit_out(low, op, pos, x.ones, x.dims)
    kh, kw, sh, sw, same = _pool_geometry(op)
    low.stmts.append(LibCall("max_pool_grad", [x, y, g], [out], (kh, kw, sh, sw, int(same)),
                             pos))


def _lower_avg_pool_grad(low, op, pos: int) -> None:
    _, _, x_ones, x_dims, _ = low._expr(op.inputs[0], shape_only=True)
    g = _stored(low, op.inputs[1], pos)
    if op.outputs[0] in low.fed:
        return
    if len(x_dims) != 4:
        raise _Unsupported("window op operands must be rank-4 arrays")
    _pool_grad_check(low, op, x_dims, g, pos)
    out = _emit_out(low, op, pos, x_ones, x_dims)
    kh, kw, sh, sw, same = _pool_geometry(op)
    low.stmts.append(LibCall("avg_pool_grad", [g], [out], (kh, kw, sh, sw, int(same)), pos))


# -- what compiles --------------------------------------------------------------------------------
_FLOATS = ("float32", "float64")


def _floats_rank4(*ts) -> bool:
    return all(t.shape.ndims == 4 and t.dtype.name in _FLOATS for t in ts)


def _sup(op) -> bool:
    return (op.attrs.get("data_format", "NHWC") in ("NHWC", None)
            and op.attrs.get("padding") in ("SAME", "VALID")
            and _floats_rank4(*op.inputs, *op.outputs))


SUPPORTED = {t: _sup for t in (
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
    "MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad")}

LOWER = {"Conv2D": _lower_conv, "DepthwiseConv2dNative": _lower_conv,
         "Conv2DBackpropInput": _lower_conv_input_grad,
         "DepthwiseConv2dNativeBackpropInput": _lower_conv_input_grad,
         "Conv2DBackpropFilter": _lower_conv_filter_grad,
         "DepthwiseConv2dNativeBackpropFilter": _lower_conv_filter_grad,
         "MaxPool": _lower_pool, "AvgPool": _lower_pool,
         "MaxPoolGrad": _lower_max_pool_grad, "AvgPoolGrad": _lower_avg_pool_grad}

# inputs that give only their shape
SHAPE_ONLY = {"Conv2DBackpropInput": (0,), "DepthwiseConv2dNativeBackpropInput": (0,),
              "Conv2DBackpropFilter": (1,), "DepthwiseConv2dNativeBackpropFilter": (1,),
              "AvgPoolGrad": (0,)}


# -- CPU emitter -----------------------------------------------------------------------------------
def _emit_call(w, s: LibCall, depth: int, dim) -> None:
    for o in s.outs:
        w.alloc(o, depth, s.op)
    args = [v.name for v in s.args] + [o.name for o in s.outs] + [str(p) for p in s.params]
    w.emit(depth, f"{LIBRARY}.{s.fn}({', '.join(args)})", s.op)


EMIT = {LibCall: _emit_call}
DIM_TEXT = {"window": _dim_text}
