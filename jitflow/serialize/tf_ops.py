"""How each op type is written as, and read from, a TensorFlow NodeDef.

jitflow's registry uses TensorFlow's op type names, but keeps some of TensorFlow's input
tensors as static attributes (a Reshape's shape, a reduction's axes, a ConcatV2's axis ...) and
names some attributes its own way. `EXPORTERS[type](ctx, op)` writes an op as TensorFlow's node
(adding `Const` nodes for the static inputs) and returns False when this op cannot be written
so; the writer then emits a jitflow node (`jitflow.<type>`, attributes as JSON) that jitflow
reads back exactly and TensorFlow refuses by name. `IMPORTERS[type](ctx, node)` builds a
TensorFlow node in the default graph through jitflow's public functions and returns its outputs.

`supported_tf_op_types()` lists what TensorFlow op types the importer understands.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from jitflow.core import dtypes as _dtypes

EXPORTERS: dict = {}
IMPORTERS: dict = {}

UNARY = ["Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Elu",
         "Erf", "Exp", "Expm1", "Floor", "IsFinite", "IsInf", "IsNan", "L2Loss", "Log", "Log1p",
         "Neg", "Reciprocal", "Relu", "Relu6", "Rint", "Round", "Rsqrt", "Selu", "Sigmoid",
         "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Square", "StopGradient", "Tan",
         "Tanh", "Identity"]
BINARY = ["Add", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow", "SquaredDifference",
          "FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod", "Atan2", "DivNoNan", "Equal",
          "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "SqrtGrad", "RsqrtGrad",
          "ReciprocalGrad"]
UNTYPED = ["LogicalAnd", "LogicalOr", "LogicalNot", "NoOp"]
REDUCE = {"Sum": "reduce_sum", "Mean": "reduce_mean", "Max": "reduce_max",
          "Min": "reduce_min", "Prod": "reduce_prod", "All": "reduce_all", "Any": "reduce_any"}


def exporter(*types: str) -> Callable:
    def deco(fn):
        for t in types:
            EXPORTERS[t] = fn
        return fn
    return deco


def importer(*types: str) -> Callable:
    def deco(fn):
        for t in types:
            IMPORTERS[t] = fn
        return fn
    return deco


def supported_tf_op_types() -> list:
    return sorted(IMPORTERS)


def _api():
    import jitflow
    return jitflow


# -- elementwise ----------------------------------------------------------------------------------
@exporter(*UNARY, *BINARY)
def _x_typed(ctx, op):
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[0].dtype)})


@exporter("OnesLike", "ZerosLike")
def _x_like(ctx, op):
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[0].dtype)})


@importer("OnesLike", "ZerosLike")
def _i_like(ctx, node):
    return ctx.create(node.op, ctx.inputs, {"dtype": ctx.inputs[0].dtype})


@exporter(*UNTYPED)
def _x_untyped(ctx, op):
    ctx.node(op, op.type)


@importer(*UNARY, *BINARY, *UNTYPED, "AddV2", "BiasAddV1")
def _i_direct(ctx, node):
    t = {"AddV2": "Add", "BiasAddV1": "BiasAdd"}.get(node.op, node.op)
    if t == "BiasAdd":
        return ctx.create(t, ctx.inputs, {"data_format": "NHWC"})
    return ctx.create(t, ctx.inputs, {})


@importer("Div")
def _i_div(ctx, node):
    x = ctx.inputs[0]
    return ctx.create("RealDiv" if x.dtype.is_floating else "TruncateDiv", ctx.inputs, {})


@importer("Snapshot", "PreventGradient", "CheckNumerics", "EnsureShape")
def _i_identity(ctx, node):
    return ctx.create("Identity", ctx.inputs[:1], {})


@exporter("AddN")
def _x_addn(ctx, op):
    ctx.node(op, "AddN", attrs={"N": ctx.i(len(op.inputs)), "T": ctx.type(op.outputs[0].dtype)})


@importer("AddN")
def _i_addn(ctx, node):
    return [_api().add_n(ctx.inputs, name=ctx.name)]


@exporter("Cast")
def _x_cast(ctx, op):
    ctx.node(op, "Cast", attrs={"SrcT": ctx.type(op.inputs[0].dtype),
                                "DstT": ctx.type(op.attrs["DstT"]), "Truncate": ctx.b(False)})


@importer("Cast")
def _i_cast(ctx, node):
    return [_api().cast(ctx.inputs[0], ctx.dtype_attr("DstT"), name=ctx.name)]


@exporter("Select", "SelectV2")
def _x_select(ctx, op):
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[1].dtype)})


@importer("Select", "SelectV2")
def _i_select(ctx, node):
    return ctx.create(node.op, ctx.inputs, {})


@exporter("LeakyRelu")
def _x_leaky(ctx, op):
    ctx.node(op, "LeakyRelu", attrs={"T": ctx.type(op.inputs[0].dtype),
                                     "alpha": ctx.f(op.attrs["alpha"])})


@importer("LeakyRelu")
def _i_leaky(ctx, node):
    return [_api().nn.leaky_relu(ctx.inputs[0], ctx.attr("alpha", 0.2), name=ctx.name)]


# -- sources --------------------------------------------------------------------------------------
@exporter("Const")
def _x_const(ctx, op):
    from jitflow.serialize.tensor_util import make_tensor_proto
    value = op.attrs["value"]
    ctx.node(op, "Const", attrs={"dtype": ctx.type(op.attrs["dtype"]),
                                 "value": ctx.tensor(make_tensor_proto(value, op.attrs["dtype"]))})


@importer("Const")
def _i_const(ctx, node):
    from jitflow.serialize.tensor_util import make_ndarray
    dtype = ctx.dtype_attr("dtype")
    if "value" not in node.attr:
        ctx.unsupported("a Const without a value")
    value = make_ndarray(node.attr["value"].tensor, f"node {node.name}")
    return [_api().constant(value, dtype=dtype, name=ctx.name)]


@exporter("Placeholder")
def _x_placeholder(ctx, op):
    ctx.node(op, "Placeholder", attrs={"dtype": ctx.type(op.attrs["dtype"]),
                                       "shape": ctx.shape(op.attrs["shape"])})


@importer("Placeholder")
def _i_placeholder(ctx, node):
    shape = ctx.shape_attr("shape") if "shape" in node.attr else None
    return [_api().placeholder(ctx.dtype_attr("dtype"), shape, name=ctx.name)]


@exporter("PlaceholderWithDefault")
def _x_pwd(ctx, op):
    ctx.node(op, "PlaceholderWithDefault", attrs={"dtype": ctx.type(op.outputs[0].dtype),
                                                  "shape": ctx.shape(op.attrs["shape"])})


@importer("PlaceholderWithDefault")
def _i_pwd(ctx, node):
    return [_api().placeholder_with_default(ctx.inputs[0], ctx.shape_attr("shape"),
                                            name=ctx.name)]


@exporter("VariableV2")
def _x_variable(ctx, op):
    ctx.node(op, "VariableV2", attrs={"dtype": ctx.type(op.attrs["dtype"]),
                                      "shape": ctx.shape(op.attrs["shape"]),
                                      "container": ctx.s(""), "shared_name": ctx.s("")})


@importer("VariableV2", "Variable")
def _i_variable(ctx, node):
    return ctx.create("VariableV2", [], {"dtype": ctx.dtype_attr("dtype"),
                                         "shape": ctx.shape_attr("shape")})


@exporter("Assign")
def _x_assign(ctx, op):
    ctx.node(op, "Assign", attrs={"T": ctx.type(op.inputs[0].dtype),
                                  "validate_shape": ctx.b(op.attrs.get("validate_shape", True)),
                                  "use_locking": ctx.b(True)})


@importer("Assign")
def _i_assign(ctx, node):
    return ctx.create("Assign", ctx.inputs, {"validate_shape": ctx.attr("validate_shape", True)})


@exporter("AssignAdd", "AssignSub")
def _x_assign_add(ctx, op):
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[0].dtype), "use_locking": ctx.b(False)})


@importer("AssignAdd", "AssignSub")
def _i_assign_add(ctx, node):
    return ctx.create(node.op, ctx.inputs, {})


@exporter("IsVariableInitialized")
def _x_is_init(ctx, op):
    ctx.node(op, op.type, attrs={"dtype": ctx.type(op.inputs[0].dtype)})


@importer("IsVariableInitialized")
def _i_is_init(ctx, node):
    return ctx.create(node.op, ctx.inputs, {})


def _random_attrs(ctx, op):
    """TensorFlow's (seed, seed2) are the graph seed and the op seed as TF1's `get_seed`
    resolves them (a missing graph seed is 87654321, a missing op seed comes from the op, here
    its id); no seed at all is (0, 0). jitflow reads the op seed back from seed2."""
    g, s = op.graph.seed, op.attrs.get("seed")
    if g is None and s is None:
        return {"seed": ctx.i(0), "seed2": ctx.i(0)}
    return {"seed": ctx.i(87654321 if g is None else g),
            "seed2": ctx.i(op._id if s is None else s)}


def _import_seed(ctx):
    seed, seed2 = int(ctx.attr("seed", 0)), int(ctx.attr("seed2", 0))
    return seed2 if seed2 else (seed or None)


@exporter("RandomStandardNormal", "RandomUniform", "TruncatedNormal")
def _x_random(ctx, op):
    if op.attrs["shape"] is None:
        return False
    shape = ctx.const_input(op, "shape", np.array(op.attrs["shape"], np.int32))
    ctx.node(op, op.type, [shape], {"dtype": ctx.type(op.attrs["dtype"]), "T": ctx.type("int32"),
                                    **_random_attrs(ctx, op)})


@importer("RandomStandardNormal", "RandomUniform", "TruncatedNormal")
def _i_random(ctx, node):
    from jitflow.ops._array_args import get_static_value
    static = get_static_value(ctx.inputs[0])
    attrs = {"dtype": ctx.dtype_attr("dtype"), "seed": _import_seed(ctx), "seed2": 0,
             "shape": None if static is None else tuple(int(d) for d in np.reshape(static, -1))}
    return ctx.create(node.op, [] if static is not None else ctx.inputs[:1], attrs)


# -- matrix, nn -----------------------------------------------------------------------------------
@exporter("MatMul")
def _x_matmul(ctx, op):
    ctx.node(op, "MatMul", attrs={"T": ctx.type(op.inputs[0].dtype),
                                  "transpose_a": ctx.b(op.attrs["transpose_a"]),
                                  "transpose_b": ctx.b(op.attrs["transpose_b"])})


@importer("MatMul")
def _i_matmul(ctx, node):
    return [_api().matmul(ctx.inputs[0], ctx.inputs[1],
                          transpose_a=ctx.attr("transpose_a", False),
                          transpose_b=ctx.attr("transpose_b", False), name=ctx.name)]


@exporter("BatchMatMulV2")
def _x_bmm(ctx, op):
    ctx.node(op, "BatchMatMulV2", attrs={"T": ctx.type(op.inputs[0].dtype),
                                         "adj_x": ctx.b(op.attrs["adj_x"]),
                                         "adj_y": ctx.b(op.attrs["adj_y"])})


@importer("BatchMatMulV2", "BatchMatMul", "BatchMatMulV3")
def _i_bmm(ctx, node):
    return ctx.create("BatchMatMulV2", ctx.inputs[:2], {"adj_x": ctx.attr("adj_x", False),
                                                        "adj_y": ctx.attr("adj_y", False)})


@exporter("BiasAdd")
def _x_bias_add(ctx, op):
    ctx.node(op, "BiasAdd", attrs={"T": ctx.type(op.inputs[0].dtype),
                                   "data_format": ctx.s(op.attrs.get("data_format", "NHWC"))})


@importer("BiasAdd")
def _i_bias_add(ctx, node):
    x, b = ctx.inputs
    if ctx.attr("data_format", "NHWC") == "NCHW":
        rank = x.shape.ndims
        if rank is None:
            ctx.unsupported("BiasAdd with data_format NCHW on an input of unknown rank")
        shape = [1, -1] + [1] * (rank - 2)
        return [_api().add(x, _api().reshape(b, shape, name=ctx.name + "/bias"), name=ctx.name)]
    return ctx.create("BiasAdd", [x, b], {"data_format": "NHWC"})


def _ints(v) -> list:
    return [int(a) for a in v]


@exporter("Conv2D")
def _x_conv(ctx, op):
    a = op.attrs
    ctx.node(op, "Conv2D", attrs={
        "T": ctx.type(op.inputs[0].dtype), "strides": ctx.ints(a["strides"]),
        "padding": ctx.s(a["padding"]), "data_format": ctx.s("NHWC"),
        "dilations": ctx.ints(a.get("dilations", (1, 1, 1, 1))),
        "use_cudnn_on_gpu": ctx.b(True),
        "explicit_paddings": ctx.ints(a.get("explicit_paddings") or [])})


def _nchw_in(ctx, x):
    return _api().transpose(x, [0, 2, 3, 1], name=ctx.name + "/to_nhwc")


def _nchw_out(ctx, y):
    return _api().transpose(y, [0, 3, 1, 2], name=ctx.name)


def _nhwc(v) -> list:
    v = _ints(v)
    return [v[0], v[2], v[3], v[1]] if len(v) == 4 else v


@importer("Conv2D")
def _i_conv(ctx, node):
    x, f = ctx.inputs
    padding = ctx.attr("padding")
    nchw = ctx.attr("data_format", "NHWC") == "NCHW"
    if padding == "EXPLICIT":   # 8 ints in the node's layout: [before, after] pairs, NHWC here
        p = _ints(ctx.attr("explicit_paddings", []))
        pairs = [p[i:i + 2] for i in range(0, len(p), 2)]
        padding = [pairs[0], pairs[2], pairs[3], pairs[1]] if nchw and len(pairs) == 4 else pairs
    strides = _ints(ctx.attr("strides"))
    dilations = _ints(ctx.attr("dilations", [1, 1, 1, 1]))
    if nchw:
        y = _api().nn.conv2d(_nchw_in(ctx, x), f, _nhwc(strides), padding,
                             dilations=_nhwc(dilations), name=ctx.name + "/nhwc")
        return [_nchw_out(ctx, y)]
    return [_api().nn.conv2d(x, f, strides, padding, dilations=dilations, name=ctx.name)]


@exporter("MaxPool", "AvgPool")
def _x_pool(ctx, op):
    a = op.attrs
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[0].dtype), "ksize": ctx.ints(a["ksize"]),
                                 "strides": ctx.ints(a["strides"]), "padding": ctx.s(a["padding"]),
                                 "data_format": ctx.s("NHWC")})


@importer("MaxPool", "AvgPool")
def _i_pool(ctx, node):
    fn = _api().nn.max_pool if node.op == "MaxPool" else _api().nn.avg_pool
    ksize, strides = _ints(ctx.attr("ksize")), _ints(ctx.attr("strides"))
    padding = ctx.attr("padding")
    if ctx.attr("data_format", "NHWC") == "NCHW":
        y = fn(_nchw_in(ctx, ctx.inputs[0]), _nhwc(ksize), _nhwc(strides), padding,
               name=ctx.name + "/nhwc")
        return [_nchw_out(ctx, y)]
    return [fn(ctx.inputs[0], ksize, strides, padding, name=ctx.name)]


@exporter("MaxPoolGrad")
def _x_max_pool_grad(ctx, op):
    a = op.attrs
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[0].dtype), "ksize": ctx.ints(a["ksize"]),
                                 "strides": ctx.ints(a["strides"]), "padding": ctx.s(a["padding"]),
                                 "data_format": ctx.s("NHWC")})


@importer("MaxPoolGrad")
def _i_max_pool_grad(ctx, node):
    if ctx.attr("data_format", "NHWC") != "NHWC":
        ctx.unsupported("MaxPoolGrad with data_format NCHW")
    return ctx.create("MaxPoolGrad", ctx.inputs, {
        "ksize": tuple(_ints(ctx.attr("ksize"))), "strides": tuple(_ints(ctx.attr("strides"))),
        "padding": ctx.attr("padding"), "data_format": "NHWC"})


@exporter("Softmax", "LogSoftmax")
def _x_softmax(ctx, op):
    rank = op.inputs[0].shape.ndims
    if op.attrs["axis"] != -1 and (rank is None or op.attrs["axis"] != rank - 1):
        return False
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[0].dtype)})


@importer("Softmax", "LogSoftmax")
def _i_softmax(ctx, node):
    fn = _api().nn.softmax if node.op == "Softmax" else _api().nn.log_softmax
    return [fn(ctx.inputs[0], axis=-1, name=ctx.name)]


@importer("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def _i_fused_bn(ctx, node):
    """Inference form only (is_training false): (x - mean) / sqrt(var + eps) * scale + offset;
    the other outputs are the mean and variance it was given, as TensorFlow returns them."""
    if ctx.attr("is_training", True):
        ctx.unsupported(f"{node.op} with is_training=true (only frozen inference graphs)")
    x, scale, offset, mean, var = ctx.inputs[:5]
    eps = float(ctx.attr("epsilon", 1e-4))
    tf = _api()
    nchw = ctx.attr("data_format", "NHWC") in ("NCHW", b"NCHW")
    with ctx.scope():
        inv = tf.math.rsqrt(var + np.asarray(eps, var.dtype.as_numpy_dtype)) * scale
        shift = offset - mean * inv
        if nchw:
            inv = tf.reshape(inv, [1, -1, 1, 1])
            shift = tf.reshape(shift, [1, -1, 1, 1])
        xc = tf.cast(x, inv.dtype) if x.dtype != inv.dtype else x
        y = xc * inv + shift
        if y.dtype != x.dtype:
            y = tf.cast(y, x.dtype)
    # output 0 is an Identity named as the node (fusable); outputs 1.. are the given moments,
    # reachable through the node's inputs map (not by "node:1" names in the jitflow graph)
    y = tf.identity(y, name=ctx.name)
    return [y, mean, var, mean, var] + ([mean] if node.op == "FusedBatchNormV3" else [])


# -- reductions -----------------------------------------------------------------------------------
def _axis_const(ctx, op, axes):
    rank = op.inputs[0].shape.ndims
    if axes is None:
        if rank is None:
            return None
        axes = tuple(range(rank))
    return ctx.const_input(op, "reduction_indices", np.array(list(axes), np.int32))


@exporter(*REDUCE)
def _x_reduce(ctx, op):
    axis = _axis_const(ctx, op, op.attrs["axis"])
    if axis is None:
        return False
    attrs = {"keep_dims": ctx.b(op.attrs["keepdims"]), "Tidx": ctx.type("int32")}
    if op.type not in ("All", "Any"):
        attrs["T"] = ctx.type(op.inputs[0].dtype)
    ctx.node(op, op.type, [ctx.input_name(op.inputs[0]), axis], attrs, data_inputs=False)


@importer(*REDUCE)
def _i_reduce(ctx, node):
    fn = getattr(_api(), REDUCE[node.op])
    axis = ctx.static_ints(1, "reduction_indices")
    return [fn(ctx.inputs[0], axis=axis, keepdims=bool(ctx.attr("keep_dims", False)),
               name=ctx.name)]


@exporter("ArgMax", "ArgMin")
def _x_argmax(ctx, op):
    axis = ctx.const_input(op, "dimension", np.array(op.attrs["axis"], np.int32))
    ctx.node(op, op.type, [ctx.input_name(op.inputs[0]), axis],
             {"T": ctx.type(op.inputs[0].dtype), "Tidx": ctx.type("int32"),
              "output_type": ctx.type(op.attrs["output_type"])}, data_inputs=False)


@importer("ArgMax", "ArgMin")
def _i_argmax(ctx, node):
    fn = _api().argmax if node.op == "ArgMax" else _api().argmin
    axis = ctx.static_ints(1, "dimension")
    return [fn(ctx.inputs[0], axis=int(axis[0]),
               output_type=ctx.dtype_attr("output_type", _dtypes.int64), name=ctx.name)]


# -- shapes ---------------------------------------------------------------------------------------
@exporter("Reshape")
def _x_reshape(ctx, op):
    x = ctx.input_name(op.inputs[0])
    if len(op.inputs) > 1:
        shape = ctx.input_name(op.inputs[1])
        tshape = op.inputs[1].dtype
    else:
        shape = ctx.const_input(op, "shape", np.array(op.attrs["shape"], np.int32))
        tshape = _dtypes.int32
    ctx.node(op, "Reshape", [x, shape], {"T": ctx.type(op.inputs[0].dtype),
                                         "Tshape": ctx.type(tshape)}, data_inputs=False)


@importer("Reshape")
def _i_reshape(ctx, node):
    return [_api().reshape(ctx.inputs[0], ctx.inputs[1], name=ctx.name)]


@exporter("Shape", "Size")
def _x_shape(ctx, op):
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[0].dtype),
                                 "out_type": ctx.type(op.attrs["out_type"])})


@importer("Shape", "Size")
def _i_shape(ctx, node):
    fn = _api().shape if node.op == "Shape" else _api().size
    return [fn(ctx.inputs[0], out_type=ctx.dtype_attr("out_type", _dtypes.int32),
               name=ctx.name)]


@exporter("Rank")
def _x_rank(ctx, op):
    ctx.node(op, "Rank", attrs={"T": ctx.type(op.inputs[0].dtype)})


@importer("Rank")
def _i_rank(ctx, node):
    return [_api().rank(ctx.inputs[0], name=ctx.name)]


@exporter("Transpose")
def _x_transpose(ctx, op):
    perm = op.attrs["perm"]
    if len(op.inputs) == 2:  # a perm known only at run time
        ctx.node(op, "Transpose", [ctx.input_name(op.inputs[0]), ctx.input_name(op.inputs[1])],
                 {"T": ctx.type(op.inputs[0].dtype), "Tperm": ctx.type(op.inputs[1].dtype)},
                 data_inputs=False)
        return None
    if perm is None:
        rank = op.inputs[0].shape.ndims
        if rank is None:
            return False
        perm = tuple(range(rank - 1, -1, -1))
    p = ctx.const_input(op, "perm", np.array(perm, np.int32))
    ctx.node(op, "Transpose", [ctx.input_name(op.inputs[0]), p],
             {"T": ctx.type(op.inputs[0].dtype), "Tperm": ctx.type("int32")}, data_inputs=False)


@importer("Transpose")
def _i_transpose(ctx, node):
    return [_api().transpose(ctx.inputs[0], ctx.inputs[1], name=ctx.name)]


@exporter("ExpandDims")
def _x_expand(ctx, op):
    d = ctx.const_input(op, "dim", np.array(op.attrs["axis"], np.int32))
    ctx.node(op, "ExpandDims", [ctx.input_name(op.inputs[0]), d],
             {"T": ctx.type(op.inputs[0].dtype), "Tdim": ctx.type("int32")}, data_inputs=False)


@importer("ExpandDims")
def _i_expand(ctx, node):
    return [_api().expand_dims(ctx.inputs[0], int(ctx.static_ints(1, "dim")[0]),
                               name=ctx.name)]


@exporter("Squeeze")
def _x_squeeze(ctx, op):
    ctx.node(op, "Squeeze", attrs={"T": ctx.type(op.inputs[0].dtype),
                                   "squeeze_dims": ctx.ints(op.attrs["squeeze_dims"])})


@importer("Squeeze")
def _i_squeeze(ctx, node):
    axes = _ints(ctx.attr("squeeze_dims", []))
    return [_api().squeeze(ctx.inputs[0], axis=axes or None, name=ctx.name)]


@exporter("ConcatV2")
def _x_concat(ctx, op):
    axis = ctx.const_input(op, "axis", np.array(op.attrs["axis"], np.int32))
    ins = [ctx.input_name(t) for t in op.inputs] + [axis]
    ctx.node(op, "ConcatV2", ins, {"N": ctx.i(len(op.inputs)), "T": ctx.type(op.outputs[0].dtype),
                                   "Tidx": ctx.type("int32")}, data_inputs=False)


@importer("ConcatV2", "Concat")
def _i_concat(ctx, node):
    if node.op == "Concat":
        axis, values = ctx.static_ints(0, "concat_dim"), ctx.inputs[1:]
    else:
        axis, values = ctx.static_ints(len(ctx.inputs) - 1, "axis"), ctx.inputs[:-1]
    return [_api().concat(list(values), int(axis[0]), name=ctx.name)]


@exporter("Pack")
def _x_pack(ctx, op):
    ctx.node(op, "Pack", attrs={"N": ctx.i(len(op.inputs)), "T": ctx.type(op.outputs[0].dtype),
                                "axis": ctx.i(op.attrs["axis"])})


@importer("Pack")
def _i_pack(ctx, node):
    return [_api().stack(list(ctx.inputs), axis=int(ctx.attr("axis", 0)), name=ctx.name)]


@exporter("Unpack")
def _x_unpack(ctx, op):
    ctx.node(op, "Unpack", attrs={"num": ctx.i(op.attrs["num"]),
                                  "T": ctx.type(op.inputs[0].dtype),
                                  "axis": ctx.i(op.attrs["axis"])})


@importer("Unpack")
def _i_unpack(ctx, node):
    return _api().unstack(ctx.inputs[0], num=int(ctx.attr("num")),
                          axis=int(ctx.attr("axis", 0)), name=ctx.name)


@exporter("Split")
def _x_split(ctx, op):
    a = op.attrs
    x = ctx.input_name(op.inputs[0])
    axis = ctx.const_input(op, "split_dim", np.array(a["axis"], np.int32))
    n = len(op.outputs)
    if a["even"]:
        ctx.node(op, "Split", [axis, x], {"num_split": ctx.i(n),
                                          "T": ctx.type(op.inputs[0].dtype)}, data_inputs=False)
    else:
        sizes = ctx.const_input(op, "size_splits", np.array(a["sizes"], np.int32))
        ctx.node(op, "SplitV", [x, sizes, axis], {"num_split": ctx.i(n),
                                                  "T": ctx.type(op.inputs[0].dtype),
                                                  "Tlen": ctx.type("int32")},
                 data_inputs=False)


@importer("Split")
def _i_split(ctx, node):
    axis = int(ctx.static_ints(0, "split_dim")[0])
    return _api().split(ctx.inputs[1], int(ctx.attr("num_split")), axis=axis, name=ctx.name)


@importer("SplitV")
def _i_splitv(ctx, node):
    sizes = ctx.static_ints(1, "size_splits")
    axis = int(ctx.static_ints(2, "split_dim")[0])
    return _api().split(ctx.inputs[0], list(sizes), axis=axis, name=ctx.name)


@exporter("Slice")
def _x_slice(ctx, op):
    b = ctx.const_input(op, "begin", np.array(op.attrs["begin"], np.int32))
    s = ctx.const_input(op, "size", np.array(op.attrs["size"], np.int32))
    if len(op.inputs) != 1:
        return False
    ctx.node(op, "Slice", [ctx.input_name(op.inputs[0]), b, s],
             {"T": ctx.type(op.inputs[0].dtype), "Index": ctx.type("int32")}, data_inputs=False)


@importer("Slice")
def _i_slice(ctx, node):
    return [_api().slice(ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], name=ctx.name)]


_SS_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


@exporter("StridedSlice")
def _x_strided_slice(ctx, op):
    a = op.attrs
    if len(op.inputs) != 1 or any(v is None for k in ("begin", "end", "strides")
                                  for v in (a[k] or ())):
        return False
    ins = [ctx.input_name(op.inputs[0])]
    for k in ("begin", "end", "strides"):
        ins.append(ctx.const_input(op, k, np.array(a[k], np.int32)))
    attrs = {"T": ctx.type(op.inputs[0].dtype), "Index": ctx.type("int32")}
    attrs.update({k: ctx.i(a[k]) for k in _SS_MASKS})
    ctx.node(op, "StridedSlice", ins, attrs, data_inputs=False)


@importer("StridedSlice")
def _i_strided_slice(ctx, node):
    masks = {k: int(ctx.attr(k, 0)) for k in _SS_MASKS}
    return [_api().strided_slice(ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.inputs[3],
                                 name=ctx.name, **masks)]


@exporter("GatherV2")
def _x_gather(ctx, op):
    axis = ctx.const_input(op, "axis", np.array(op.attrs["axis"], np.int32))
    ctx.node(op, "GatherV2", [ctx.input_name(op.inputs[0]), ctx.input_name(op.inputs[1]), axis],
             {"Tparams": ctx.type(op.inputs[0].dtype), "Tindices": ctx.type(op.inputs[1].dtype),
              "Taxis": ctx.type("int32"),
              "batch_dims": ctx.i(op.attrs.get("batch_dims", 0))}, data_inputs=False)


@importer("GatherV2", "Gather")
def _i_gather(ctx, node):
    axis = 0 if node.op == "Gather" else int(ctx.static_ints(2, "axis")[0])
    return [_api().gather(ctx.inputs[0], ctx.inputs[1], axis=axis, name=ctx.name,
                          batch_dims=int(ctx.attr("batch_dims", 0)))]


@exporter("GatherNd")
def _x_gather_nd(ctx, op):
    ctx.node(op, "GatherNd", attrs={"Tparams": ctx.type(op.inputs[0].dtype),
                                    "Tindices": ctx.type(op.inputs[1].dtype)})


@importer("GatherNd")
def _i_gather_nd(ctx, node):
    return [_api().gather_nd(ctx.inputs[0], ctx.inputs[1], name=ctx.name)]


@exporter("Tile")
def _x_tile(ctx, op):
    m = ctx.const_input(op, "multiples", np.array(op.attrs["multiples"], np.int32))
    if len(op.inputs) != 1:
        return False
    ctx.node(op, "Tile", [ctx.input_name(op.inputs[0]), m],
             {"T": ctx.type(op.inputs[0].dtype), "Tmultiples": ctx.type("int32")},
             data_inputs=False)


@importer("Tile")
def _i_tile(ctx, node):
    return [_api().tile(ctx.inputs[0], ctx.inputs[1], name=ctx.name)]


@exporter("Fill")
def _x_fill(ctx, op):
    if op.attrs["dims"] is None:
        dims, value = ctx.input_name(op.inputs[1]), op.inputs[0]
        itype = op.inputs[1].dtype
    else:
        dims = ctx.const_input(op, "dims", np.array(op.attrs["dims"], np.int32))
        value, itype = op.inputs[0], _dtypes.int32
    ctx.node(op, "Fill", [dims, ctx.input_name(value)],
             {"T": ctx.type(value.dtype), "index_type": ctx.type(itype)}, data_inputs=False)


@importer("Fill")
def _i_fill(ctx, node):
    return [_api().fill(ctx.inputs[0], ctx.inputs[1], name=ctx.name)]


@exporter("PadV2")
def _x_pad(ctx, op):
    if op.attrs.get("mode", "CONSTANT").upper() != "CONSTANT":
        return False
    p = ctx.const_input(op, "paddings", np.array(op.attrs["paddings"], np.int32))
    ctx.node(op, "PadV2", [ctx.input_name(op.inputs[0]), p, ctx.input_name(op.inputs[1])],
             {"T": ctx.type(op.inputs[0].dtype), "Tpaddings": ctx.type("int32")},
             data_inputs=False)


@importer("Pad", "PadV2", "MirrorPad")
def _i_pad(ctx, node):
    paddings = np.array(ctx.static_value(1, "paddings")).tolist()
    mode = ctx.attr("mode", "CONSTANT") if node.op == "MirrorPad" else "CONSTANT"
    value = ctx.inputs[2] if node.op == "PadV2" else 0
    return [_api().pad(ctx.inputs[0], paddings, mode=mode, constant_values=value,
                       name=ctx.name)]


@exporter("ReverseV2")
def _x_reverse(ctx, op):
    axis = ctx.const_input(op, "axis", np.array(op.attrs["axis"], np.int32))
    ctx.node(op, "ReverseV2", [ctx.input_name(op.inputs[0]), axis],
             {"T": ctx.type(op.inputs[0].dtype), "Tidx": ctx.type("int32")}, data_inputs=False)


@importer("ReverseV2")
def _i_reverse(ctx, node):
    return [_api().reverse(ctx.inputs[0], list(ctx.static_ints(1, "axis")), name=ctx.name)]


@exporter("BroadcastTo")
def _x_broadcast_to(ctx, op):
    if len(op.inputs) != 1:
        return False
    s = ctx.const_input(op, "shape", np.array(op.attrs["shape"], np.int32))
    ctx.node(op, "BroadcastTo", [ctx.input_name(op.inputs[0]), s],
             {"T": ctx.type(op.inputs[0].dtype), "Tidx": ctx.type("int32")}, data_inputs=False)


@importer("BroadcastTo")
def _i_broadcast_to(ctx, node):
    return [_api().broadcast_to(ctx.inputs[0], ctx.inputs[1], name=ctx.name)]


@exporter("Range")
def _x_range(ctx, op):
    ctx.node(op, "Range", attrs={"Tidx": ctx.type(op.outputs[0].dtype)})


@importer("Range")
def _i_range(ctx, node):
    return [_api().range(*ctx.inputs, name=ctx.name)]


@exporter("OneHot")
def _x_one_hot(ctx, op):
    depth = ctx.const_input(op, "depth", np.array(op.attrs["depth"], np.int32))
    i, on, off = (ctx.input_name(t) for t in op.inputs)
    ctx.node(op, "OneHot", [i, depth, on, off],
             {"T": ctx.type(op.outputs[0].dtype), "TI": ctx.type(op.inputs[0].dtype),
              "axis": ctx.i(op.attrs["axis"])}, data_inputs=False)


@importer("OneHot")
def _i_one_hot(ctx, node):
    depth = int(ctx.static_ints(1, "depth")[0])
    return [_api().one_hot(ctx.inputs[0], depth, on_value=ctx.inputs[2],
                           off_value=ctx.inputs[3], axis=int(ctx.attr("axis", -1)),
                           name=ctx.name)]


@exporter("Cumsum", "Cumprod")
def _x_cumsum(ctx, op):
    axis = ctx.const_input(op, "axis", np.array(op.attrs["axis"], np.int32))
    ctx.node(op, op.type, [ctx.input_name(op.inputs[0]), axis],
             {"T": ctx.type(op.inputs[0].dtype), "Tidx": ctx.type("int32"),
              "exclusive": ctx.b(op.attrs["exclusive"]), "reverse": ctx.b(op.attrs["reverse"])},
             data_inputs=False)


@importer("Cumsum", "Cumprod")
def _i_cumsum(ctx, node):
    fn = _api().cumsum if node.op == "Cumsum" else _api().cumprod
    return [fn(ctx.inputs[0], axis=int(ctx.static_ints(1, "axis")[0]),
               exclusive=bool(ctx.attr("exclusive", False)),
               reverse=bool(ctx.attr("reverse", False)), name=ctx.name)]


@exporter("TopKV2")
def _x_top_k(ctx, op):
    k = ctx.const_input(op, "k", np.array(op.attrs["k"], np.int32))
    ctx.node(op, "TopKV2", [ctx.input_name(op.inputs[0]), k],
             {"T": ctx.type(op.inputs[0].dtype), "sorted": ctx.b(op.attrs["sorted"])},
             data_inputs=False)


@importer("TopKV2")
def _i_top_k(ctx, node):
    k = int(ctx.static_ints(1, "k")[0])
    values, indices = _api().nn.top_k(ctx.inputs[0], k, sorted=bool(ctx.attr("sorted", True)),
                                      name=ctx.name)
    return [values, indices]


@exporter("Where")
def _x_where(ctx, op):
    ctx.node(op, "Where", attrs={"T": ctx.type(op.inputs[0].dtype)})


@importer("Where")
def _i_where(ctx, node):
    return ctx.create("Where", ctx.inputs, {})


@exporter("IdentityN")
def _x_identity_n(ctx, op):
    ctx.node(op, "IdentityN", attrs={"T": ctx.type_list([t.dtype for t in op.inputs])})


@importer("IdentityN")
def _i_identity_n(ctx, node):
    return _api().identity_n(list(ctx.inputs), name=ctx.name)


# -- summaries ------------------------------------------------------------------------------------
@exporter("ScalarSummary", "HistogramSummary")
def _x_summary(ctx, op):
    tag = ctx.const_input(op, "tags" if op.type == "ScalarSummary" else "tag",
                          np.array(op.attrs["tag"].encode(), dtype=object))
    ctx.node(op, op.type, [tag, ctx.input_name(op.inputs[0])],
             {"T": ctx.type(op.inputs[0].dtype)}, data_inputs=False)


@exporter("MergeSummary")
def _x_merge_summary(ctx, op):
    ctx.node(op, "MergeSummary", attrs={"N": ctx.i(len(op.inputs))})


@importer("MergeSummary")
def _i_merge_summary(ctx, node):
    return [_api().summary.merge(list(ctx.inputs), name=ctx.name)]


@importer("ScalarSummary", "HistogramSummary")
def _i_summary(ctx, node):
    tag = ctx.static_value(0, "tag")
    tag = tag.item() if isinstance(tag, np.ndarray) else tag
    tag = tag.decode() if isinstance(tag, bytes) else str(tag)
    return ctx.create(node.op, [ctx.inputs[1]], {"tag": tag})


# -- more array ops -------------------------------------------------------------------------------
@exporter("ShapeN")
def _x_shape_n(ctx, op):
    ctx.node(op, "ShapeN", attrs={"N": ctx.i(len(op.inputs)), "T": ctx.type(op.inputs[0].dtype),
                                  "out_type": ctx.type(op.attrs["out_type"])})


@importer("ShapeN")
def _i_shape_n(ctx, node):
    return ctx.create("ShapeN", ctx.inputs, {"out_type": ctx.dtype_attr("out_type",
                                                                        _dtypes.int32)})


@exporter("Unique")
def _x_unique(ctx, op):
    ctx.node(op, "Unique", attrs={"T": ctx.type(op.inputs[0].dtype),
                                  "out_idx": ctx.type(op.attrs["out_idx"])})


@importer("Unique")
def _i_unique(ctx, node):
    return ctx.create("Unique", ctx.inputs, {"out_idx": ctx.dtype_attr("out_idx",
                                                                      _dtypes.int32)})


@exporter("InvertPermutation")
def _x_invert(ctx, op):
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[0].dtype)})


@importer("InvertPermutation")
def _i_invert(ctx, node):
    return ctx.create(node.op, ctx.inputs, {})


@exporter("UnsortedSegmentSum")
def _x_segment_sum(ctx, op):
    n = ctx.const_input(op, "num_segments", np.array(op.attrs["num_segments"], np.int32))
    d, i = (ctx.input_name(t) for t in op.inputs)
    ctx.node(op, op.type, [d, i, n], {"T": ctx.type(op.inputs[0].dtype),
                                      "Tindices": ctx.type(op.inputs[1].dtype),
                                      "Tnumsegments": ctx.type("int32")}, data_inputs=False)


@importer("UnsortedSegmentSum")
def _i_segment_sum(ctx, node):
    n = int(ctx.static_ints(2, "num_segments")[0])
    return [_api().unsorted_segment_sum(ctx.inputs[0], ctx.inputs[1], n, name=ctx.name)]


@exporter("ScatterNd")
def _x_scatter_nd(ctx, op):
    if len(op.inputs) != 2:
        return False
    s = ctx.const_input(op, "shape", np.array(op.attrs["shape"], np.int32))
    i, u = (ctx.input_name(t) for t in op.inputs)
    ctx.node(op, op.type, [i, u, s], {"T": ctx.type(op.inputs[1].dtype),
                                      "Tindices": ctx.type(op.inputs[0].dtype)},
             data_inputs=False)


@importer("ScatterNd")
def _i_scatter_nd(ctx, node):
    return [_api().scatter_nd(ctx.inputs[0], ctx.inputs[1], ctx.static_ints(2, "shape"),
                              name=ctx.name)]


@exporter("TensorScatterUpdate")
def _x_tensor_scatter_update(ctx, op):
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[0].dtype),
                                 "Tindices": ctx.type(op.inputs[1].dtype)})


@importer("TensorScatterUpdate")
def _i_tensor_scatter_update(ctx, node):
    return [_api().tensor_scatter_nd_update(*ctx.inputs, name=ctx.name)]


@exporter("EditDistance")
def _x_edit_distance(ctx, op):
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[1].dtype),
                                 "normalize": ctx.b(op.attrs["normalize"])})


@importer("EditDistance")
def _i_edit_distance(ctx, node):
    api = _api()
    h = api.SparseTensor(*ctx.inputs[:3])
    t = api.SparseTensor(*ctx.inputs[3:])
    return [api.edit_distance(h, t, normalize=bool(ctx.attr("normalize", True)),
                              name=ctx.name)]


@exporter("ScatterUpdate", "ScatterAdd", "ScatterSub")
def _x_scatter(ctx, op):
    ctx.node(op, op.type, attrs={"T": ctx.type(op.inputs[0].dtype),
                                 "Tindices": ctx.type(op.inputs[1].dtype),
                                 "use_locking": ctx.b(op.type == "ScatterUpdate")})


@importer("ScatterUpdate", "ScatterAdd", "ScatterSub")
def _i_scatter(ctx, node):
    return ctx.create(node.op, ctx.inputs, {})


@exporter("InTopKV2")
def _x_in_top_k(ctx, op):
    k = ctx.const_input(op, "k", np.array(op.attrs["k"], np.int32))
    p, t = (ctx.input_name(x) for x in op.inputs)
    ctx.node(op, op.type, [p, t, k], {"T": ctx.type(op.inputs[1].dtype)}, data_inputs=False)


@importer("InTopKV2")
def _i_in_top_k(ctx, node):
    k = int(ctx.static_ints(2, "k")[0])
    return [_api().nn.in_top_k(ctx.inputs[0], ctx.inputs[1], k, name=ctx.name)]


@exporter("LinSpace")
def _x_linspace(ctx, op):
    n = ctx.const_input(op, "num", np.array(op.attrs["num"], np.int32))
    a, b = (ctx.input_name(x) for x in op.inputs)
    ctx.node(op, op.type, [a, b, n], {"T": ctx.type(op.inputs[0].dtype),
                                      "Tidx": ctx.type("int32")}, data_inputs=False)


@importer("LinSpace")
def _i_linspace(ctx, node):
    n = int(ctx.static_ints(2, "num")[0])
    return [_api().linspace(ctx.inputs[0], ctx.inputs[1], n, name=ctx.name)]


@exporter("Roll")
def _x_roll(ctx, op):
    sh = ctx.const_input(op, "shift", np.array(op.attrs["shift"], np.int32))
    ax = ctx.const_input(op, "axis", np.array(op.attrs["axis"], np.int32))
    ctx.node(op, op.type, [ctx.input_name(op.inputs[0]), sh, ax],
             {"T": ctx.type(op.inputs[0].dtype), "Tshift": ctx.type("int32"),
              "Taxis": ctx.type("int32")}, data_inputs=False)


@importer("Roll")
def _i_roll(ctx, node):
    return [_api().roll(ctx.inputs[0], ctx.static_ints(1, "shift"), ctx.static_ints(2, "axis"),
                        name=ctx.name)]
