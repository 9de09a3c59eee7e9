"""Control flow in GraphDefs: jitflow's `While`/`If` ops as TensorFlow's functional `While`/`If`
nodes whose bodies are graph functions of the GraphDef's library, and back.

Writing. A jitflow `While` op computes its first predicate outside the loop and each next one
in its body, and may be limited by `maximum_iterations`. It is written as a TensorFlow `While`
node over the loop variables (counter, limit, predicate, the op's loop variables, its
captures): the condition function is `predicate and (limit < 0 or counter < limit)`, the body
function the op's body region (it also computes the next predicate and counts). The node is
named `<op>/While`; an `IdentityN` node under the op's own name passes the loop variables on, so
the GraphDef's names of the loop's results are the graph's. A jitflow `If` op is written as a
TensorFlow `If` node of the same name whose branch functions take all the op's captures.
Gradients of loops and conds (`WhileGrad`, `IfGrad`) have no TensorFlow form: writing them
raises ValueError.

Reading. TensorFlow's `While`/`StatelessWhile` and `If`/`StatelessIf` nodes (what TF writes
with control flow v2, and what jitflow writes) become jitflow loops and conds whose bodies are
the function's nodes, imported like a GraphDef's. TF1's frame form (Enter, Exit, Switch, Merge,
NextIteration: what `tf.compat.v1` writes with control flow v2 disabled) is not read.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Graph
from jitflow.serialize import op_signatures as sigs
from jitflow.serialize import tf_ops
from jitflow.serialize.tensor_util import dtype_to_enum, shape_from_proto

__all__ = ["graph_level_ops", "call_function"]


# -- which ops are the graph's ---------------------------------------------------------------------
def _regions_of(op) -> list:
    """The body regions a control-flow op (or its gradient) owns."""
    a = op.attrs
    if op.type == "While":
        return [a["body"].region]
    if op.type == "If":
        return [br.region for br in a["cond"].branches]
    if op.type == "WhileGrad":
        return [a["grad"].sub.region]
    if op.type == "IfGrad":
        return [sub.region for sub, _, _, _ in a["grad"].subs]
    return []


def graph_level_ops(graph: Graph) -> set:
    """The ops of `graph` outside every control-flow body (bodies are written as functions)."""
    ops = graph.get_operations()
    regions = [r for op in ops if op.type in ("While", "If", "WhileGrad", "IfGrad")
               for r in _regions_of(op)]
    if not regions:
        return set(ops)
    return {op for op in ops if op.type != "LoopVar" and not any(r.contains(op) for r in regions)}


# -- writing ---------------------------------------------------------------------------------------
def _function_naming(nodes, args: set) -> None:
    """Rewrite the inputs of `nodes` (GraphDef naming, "node:flat") as a FunctionDef names them
    ("node:output_arg:index"; an input argument by its name)."""
    by_name = {n.name: n for n in nodes}
    for n in nodes:
        new = []
        for s in n.input:
            if s.startswith("^"):
                new.append(s)
                continue
            src, _, idx = s.partition(":")
            flat = int(idx) if idx else 0
            if src in args:
                if flat:
                    raise ValueError(f"function argument {src} has one output, node {n.name} "
                                     f"reads output {flat}")
                new.append(src)
                continue
            p = by_name.get(src)
            if p is None:
                raise ValueError(f"node {n.name} of a control-flow body reads '{s}', which is "
                                 "neither computed in the body nor an input of it (a variable "
                                 "written in a loop or cond cannot be written to a GraphDef)")
            arg, k = sigs.arg_index(p.op, p.attr, flat)
            new.append(f"{src}:{arg}:{k}")
        del n.input[:]
        n.input.extend(new)


def _fresh_function(w, base: str) -> str:
    names = w.shared.setdefault("function_names", set())
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in base).strip("_") or "fn"
    name, i = base, 1
    while name in names:
        name = f"{base}_{i}"
        i += 1
    names.add(name)
    return name


def _add_function(w, name: str, in_dtypes: list, out_dtypes: list, nodes, ret: list,
                  control_ret: Optional[list] = None) -> None:
    fd = w.library.function.add()
    fd.signature.name = name
    args = [f"arg{i}" for i in range(len(in_dtypes))]
    for a, dt in zip(args, in_dtypes):
        fd.signature.input_arg.add(name=a, type=dtype_to_enum(dt))
    for k, dt in enumerate(out_dtypes):
        fd.signature.output_arg.add(name=f"out{k}", type=dtype_to_enum(dt))
    nodes = list(nodes)
    _function_naming(nodes, set(args))
    fd.node_def.extend(nodes)
    by_name = {n.name: n for n in nodes}
    for k, ref in enumerate(ret):
        src, _, idx = ref.partition(":")
        if src in args:
            fd.ret[f"out{k}"] = src
        else:
            arg, j = sigs.arg_index(by_name[src].op, by_name[src].attr, int(idx or 0))
            fd.ret[f"out{k}"] = f"{src}:{arg}:{j}"
    for c in control_ret or []:
        fd.signature.control_output.append(c)
        fd.control_ret[c] = c


def _body_writer(w, fed: list, ops: list):
    """A child writer for a function whose arguments are the tensors `fed` (arg0, arg1, ...)."""
    from jitflow.serialize.graph_def import _Writer
    rename = {}
    for i, t in enumerate(fed):
        if t is not None:
            rename.setdefault(t, f"arg{i}")
    cw = _Writer(w.graph, False, parent=w, rename=rename, local_ops=set(ops))
    cw.names.update(rename.values())
    for o in ops:
        cw.write(o)
    return cw


@tf_ops.exporter("While")
def _export_while(w, op) -> None:
    from jitflow.ops.functional import _region_ops
    spec = op.attrs["body"]
    n = len(spec.phs)
    inits, pred0, limit = op.inputs[:n], op.inputs[n], op.inputs[n + 1]
    caps = list(op.inputs[n + 2:])
    i64, b = _dtypes.int64, _dtypes.bool
    dts = [i64, i64, b] + [t.dtype for t in inits] + [t.dtype for t in caps]
    shapes = [[], [], []] + [ph.shape for ph in spec.phs] + [c.shape for c in caps]
    base = op.name

    # the condition: arg2 and (arg1 < 0 or arg0 < arg1)
    cw = _body_writer(w, [], [])
    zero = cw.const(f"{base}/zero", np.int64(0))
    unlimited = cw.extra_node(f"{base}/unlimited", "Less", ["arg1", zero], {"T": w.type(i64)})
    below = cw.extra_node(f"{base}/below_limit", "Less", ["arg0", "arg1"], {"T": w.type(i64)})
    go = cw.extra_node(f"{base}/may_run", "LogicalOr", [unlimited, below])
    both = cw.extra_node(f"{base}/cond", "LogicalAnd", ["arg2", go])
    cond_name = _fresh_function(w, f"{base}_cond")
    _add_function(w, cond_name, dts, [b], cw.gd.node, [both])

    # the body: the region's ops, the count and the next predicate
    phs = list(spec.phs)
    fed = [None, None, None] + phs + caps
    ops = _region_ops(spec.region, spec.outs + [spec.next_pred], [], set(phs) | set(caps))
    cw = _body_writer(w, fed, ops)
    one = cw.const(f"{base}/one", np.int64(1))
    count = cw.extra_node(f"{base}/next_count", "AddV2", ["arg0", one], {"T": w.type(i64)})
    ret = [count, "arg1", cw.input_name(spec.next_pred)] + \
        [cw.input_name(t) for t in spec.outs] + [f"arg{3 + n + j}" for j in range(len(caps))]
    body_name = _fresh_function(w, f"{base}_body")
    _add_function(w, body_name, dts, dts, cw.gd.node, ret)

    counter = w.const(f"{base}/loop_counter", np.int64(0))
    loop = w.extra_node(f"{base}/While", "While",
                        [counter, w.input_name(limit), w.input_name(pred0)]
                        + [w.input_name(t) for t in inits] + [w.input_name(t) for t in caps],
                        {"T": w.types(dts), "cond": w.func(cond_name), "body": w.func(body_name),
                         "output_shapes": w.shapes(shapes),
                         "parallel_iterations": w.i(op.attrs.get("parallel_iterations", 10))})
    loop_node = w.gd.node[-1]
    loop_node.input.extend(w.control_names(op))
    w.node(op, "IdentityN", inputs=[f"{loop}:{3 + k}" for k in range(n)],
           attrs={"T": w.types([t.dtype for t in inits])})
    # the IdentityN's own control inputs would be the op's: they are on the While node
    del w.gd.node[-1].input[n:]


@tf_ops.exporter("If")
def _export_if(w, op) -> None:
    from jitflow.ops.functional import _region_ops
    spec = op.attrs["cond"]
    caps = list(op.inputs[1:])
    out_dts = [t.dtype for t in spec.branches[0].outs]
    in_dts = [t.dtype for t in caps]
    names = []
    for br, which in zip(spec.branches, ("then", "else")):
        ops = _region_ops(br.region, br.outs, list(br.targets), set(caps))
        cw = _body_writer(w, caps, ops)
        ret = [cw.input_name(t) for t in br.outs]
        targets = [t.name for t in br.targets if t in set(ops)]
        name = _fresh_function(w, f"{op.name}_{which}")
        _add_function(w, name, in_dts, out_dts, cw.gd.node, ret, targets)
        names.append(name)
    w.node(op, "If", inputs=[w.input_name(t) for t in op.inputs],
           attrs={"Tcond": w.type(op.inputs[0].dtype), "Tin": w.types(in_dts),
                  "Tout": w.types(out_dts), "then_branch": w.func(names[0]),
                  "else_branch": w.func(names[1]),
                  "output_shapes": w.shapes(spec.shapes)})


@tf_ops.exporter("WhileGrad", "IfGrad")
def _export_grad(w, op) -> None:
    raise ValueError(f"Cannot write op '{op.name}' ({op.type}) to a GraphDef: gradients of "
                     "while loops and conds have no TensorFlow form in jitflow yet")


# -- reading ---------------------------------------------------------------------------------------
def _graph_naming(fdef) -> list:
    """The FunctionDef's nodes with inputs named as in a GraphDef ("node:flat")."""
    from jitflow.serialize import protos
    by_name = {n.name: n for n in fdef.node_def}
    out = []
    for n in fdef.node_def:
        m = protos.NodeDef()
        m.CopyFrom(n)
        del m.input[:]
        for s in n.input:
            if s.startswith("^"):
                m.input.append(s)
                continue
            parts = s.split(":")
            if len(parts) == 1:
                m.input.append(f"{s}:0")
                continue
            src = parts[0]
            p = by_name.get(src)
            if p is None:
                raise ValueError(f"function {fdef.signature.name}: node {n.name} reads "
                                 f"'{s}', which is not a node of the function")
            idx = int(parts[2]) if len(parts) > 2 else 0
            flat = sigs.flat_index(p.op, p.attr, parts[1], idx,
                                   f"function {fdef.signature.name}, node {n.name}")
            m.input.append(f"{src}:{flat}")
        out.append(m)
    return out


def call_function(graph: Graph, library: dict, name: str, args: list, where: str) -> list:
    """Build the nodes of the library's function `name` on the tensors `args` (in the current
    name scope); returns its output tensors."""
    from jitflow.serialize.graph_def import NATIVE_PREFIX, NodeImportError, _create, \
        _sorted_nodes
    from jitflow.ops.registry import REGISTRY
    fdef = library.get(name)
    if fdef is None:
        raise NodeImportError(f"{where}: function '{name}' is not in the graph_def's library")
    sig = fdef.signature
    if len(args) != len(sig.input_arg):
        raise NodeImportError(f"{where}: function '{name}' takes {len(sig.input_arg)} inputs, "
                              f"got {len(args)}")
    for n in fdef.node_def:
        if n.op not in tf_ops.IMPORTERS and not (
                n.op.startswith(NATIVE_PREFIX) and n.op[len(NATIVE_PREFIX):] in REGISTRY):
            raise NodeImportError(f"{where}: function '{name}' contains op type '{n.op}' (node "
                                  f"'{n.name}'), which jitflow does not support")
    mapping = {f"{a.name}:0": t for a, t in zip(sig.input_arg, args)}
    nodes = _graph_naming(fdef)
    with graph.name_scope(sig.name) as prefix:
        with graph.name_scope(None):
            created = _create(graph, _sorted_nodes(nodes), prefix, mapping, library)
    outs = []
    by_name = {n.name: n for n in fdef.node_def}
    for a in sig.output_arg:
        ref = fdef.ret[a.name]
        parts = ref.split(":")
        if len(parts) == 1:
            outs.append(mapping[f"{ref}:0"])
            continue
        p = by_name[parts[0]]
        flat = sigs.flat_index(p.op, p.attr, parts[1], int(parts[2]) if len(parts) > 2 else 0,
                               f"function {name}")
        outs.append(created[parts[0]][1][flat])
    return outs


def _shapes_attr(r, node, n: int) -> list:
    from jitflow.core.shapes import TensorShape
    if "output_shapes" in node.attr and len(node.attr["output_shapes"].list.shape) == n:
        return [shape_from_proto(s) for s in node.attr["output_shapes"].list.shape]
    return [TensorShape(None)] * n


@tf_ops.importer("While", "StatelessWhile")
def _import_while(r, node):
    from jitflow.ops.control_flow import build_while
    graph, lib = r.graph, r.library
    cond_fn, body_fn = node.attr["cond"].func.name, node.attr["body"].func.name
    inputs = list(r.inputs)
    invs = _shapes_attr(r, node, len(inputs))
    where = f"graph_def node '{node.name}' (op {node.op})"

    def cond(*vs):
        return call_function(graph, lib, cond_fn, list(vs), where)[0]

    def body(*vs):
        return call_function(graph, lib, body_fn, list(vs), where)

    with graph.name_scope(r.name + "/"):
        out = build_while(cond, body, inputs, shape_invariants=invs,
                          parallel_iterations=int(r.attr("parallel_iterations", 10) or 10),
                          name="while", return_same_structure=True, op_name=r.name,
                          check_shapes=False)
    return list(out)


@tf_ops.importer("If", "StatelessIf")
def _import_if(r, node):
    from jitflow.ops.control_flow import build_cond
    graph, lib = r.graph, r.library
    then_fn, else_fn = node.attr["then_branch"].func.name, node.attr["else_branch"].func.name
    pred, args = r.inputs[0], list(r.inputs[1:])
    where = f"graph_def node '{node.name}' (op {node.op})"
    with graph.name_scope(r.name + "/"):
        out = build_cond(pred, lambda: call_function(graph, lib, then_fn, args, where),
                         lambda: call_function(graph, lib, else_fn, args, where), strict=True,
                         name="cond", op_name=r.name)
    return list(out) if isinstance(out, (list, tuple)) else [out]


# -- TensorArrays as TensorFlow's lists ------------------------------------------------------------
# jitflow's TensorArray ops are written as the TensorList ops TensorFlow 2 makes of a
# TensorArray (TensorFlow runs them in and out of functions). Each node also carries the op's
# own type, attributes and which of the node's inputs are the op's, in attributes TensorFlow
# ignores (a leading underscore), so jitflow reads its TensorArray back exactly.
MARK_TYPE_ATTR = "_jitflow_type"
MARK_INPUTS_ATTR = "_jitflow_inputs"


def _element_shape_const(w, op, shape) -> str:
    if shape is None or shape.ndims is None:
        return w.const(f"{op.name}/element_shape", np.int32(-1))
    return w.const(f"{op.name}/element_shape",
                   np.array([-1 if d is None else d for d in shape.as_list()], np.int32))


def _mark(w, op, positions: list) -> None:
    import json

    from jitflow.serialize.graph_def import NATIVE_ATTR
    from jitflow.serialize.json_graph import encode_attr
    n = w._written
    n.attr[MARK_TYPE_ATTR].s = op.type.encode()
    n.attr[MARK_INPUTS_ATTR].list.i.extend(positions)
    attrs = {k: encode_attr(v, f"attr '{k}' of op '{op.name}' ({op.type})")
             for k, v in op.attrs.items()}
    n.attr[NATIVE_ATTR].s = json.dumps(attrs, sort_keys=True).encode()


def _ta_write(w, op, tf_type: str, inputs: list, attrs: dict, positions: list) -> None:
    w.node(op, tf_type, inputs=inputs, attrs=attrs)
    _mark(w, op, positions)


@tf_ops.exporter("TensorArrayV3")
def _export_ta_create(w, op):
    a = op.attrs
    es = _element_shape_const(w, op, a["element_shape"])
    _ta_write(w, op, "TensorListReserve", [es, w.input_name(op.inputs[0])],
              {"element_dtype": w.type(a["dtype"]), "shape_type": w.type(_dtypes.int32)}, [1])


@tf_ops.exporter("TensorArrayWriteV3")
def _export_ta_write(w, op):
    flow, index, value = op.inputs
    # a TensorArray of dynamic size grows; one of fixed size is never written past its end by
    # a valid program, so growing is allowed for both
    _ta_write(w, op, "TensorListSetItem", [w.input_name(t) for t in op.inputs],
              {"element_dtype": w.type(value.dtype),
               "resize_if_index_out_of_bounds": w.b(True)}, [0, 1, 2])


@tf_ops.exporter("TensorArrayReadV3")
def _export_ta_read(w, op):
    es = _element_shape_const(w, op, op.attrs["element_shape"])
    _ta_write(w, op, "TensorListGetItem", [w.input_name(t) for t in op.inputs] + [es],
              {"element_dtype": w.type(op.attrs["dtype"])}, [0, 1])


@tf_ops.exporter("TensorArrayStack")
def _export_ta_stack(w, op):
    es = _element_shape_const(w, op, op.attrs["element_shape"])
    n = op.attrs.get("size")
    _ta_write(w, op, "TensorListStack", [w.input_name(op.inputs[0]), es],
              {"element_dtype": w.type(op.attrs["dtype"]),
               "num_elements": w.i(-1 if n is None else n)}, [0])


@tf_ops.exporter("TensorArrayGatherV3")
def _export_ta_gather(w, op):
    es = _element_shape_const(w, op, op.attrs["element_shape"])
    _ta_write(w, op, "TensorListGather", [w.input_name(t) for t in op.inputs] + [es],
              {"element_dtype": w.type(op.attrs["dtype"])}, [0, 1])


@tf_ops.exporter("TensorArrayUnstack")
def _export_ta_unstack(w, op):
    flow, value = op.inputs
    # entry i = row i: a scatter at indices range(rows)
    i32 = {"T": w.type(_dtypes.int32)}
    shape = w.extra_node(f"{op.name}/rows/Shape", "Shape", [w.input_name(value)],
                         {"T": w.type(value.dtype), "out_type": w.type(_dtypes.int32)})
    rows = w.extra_node(f"{op.name}/rows", "StridedSlice",
                        [shape, w.const(f"{op.name}/rows/begin", np.array([0], np.int32)),
                         w.const(f"{op.name}/rows/end", np.array([1], np.int32)),
                         w.const(f"{op.name}/rows/strides", np.array([1], np.int32))],
                        {"T": w.type(_dtypes.int32), "Index": w.type(_dtypes.int32),
                         "shrink_axis_mask": w.i(1), "begin_mask": w.i(0), "end_mask": w.i(0),
                         "ellipsis_mask": w.i(0), "new_axis_mask": w.i(0)})
    idx = w.extra_node(f"{op.name}/indices", "Range",
                       [w.const(f"{op.name}/indices/start", np.int32(0)), rows,
                        w.const(f"{op.name}/indices/delta", np.int32(1))],
                       {"Tidx": i32["T"]})
    _ta_write(w, op, "TensorListScatterIntoExistingList",
              [w.input_name(flow), w.input_name(value), idx],
              {"element_dtype": w.type(value.dtype)}, [0, 1])


@tf_ops.exporter("TensorArrayScatterV3")
def _export_ta_scatter(w, op):
    flow, idx, value = op.inputs
    _ta_write(w, op, "TensorListScatterIntoExistingList",
              [w.input_name(flow), w.input_name(value), w.input_name(idx)],
              {"element_dtype": w.type(value.dtype)}, [0, 2, 1])


@tf_ops.exporter("TensorArraySizeV3")
def _export_ta_size(w, op):
    _ta_write(w, op, "TensorListLength", [w.input_name(op.inputs[0])], {}, [0])


_LIST_SHAPE_INPUT = {"EmptyTensorList": 0, "TensorListReserve": 0, "TensorListFromTensor": 1,
                     "TensorListGetItem": 2, "TensorListStack": 1, "TensorListGather": 2,
                     "TensorListConcatV2": 1, "TensorListSplit": 1, "TensorListPopBack": 1,
                     "TensorListScatterV2": 2}
_LIST_TYPES = ("EmptyTensorList", "TensorListReserve", "TensorListFromTensor",
               "TensorListGetItem", "TensorListSetItem", "TensorListPushBack",
               "TensorListPopBack", "TensorListStack", "TensorListGather",
               "TensorListScatterIntoExistingList", "TensorListScatterV2", "TensorListLength",
               "TensorListElementShape", "TensorListConcatV2", "TensorListSplit",
               "TensorListResize")


@tf_ops.importer(*_LIST_TYPES)
def _import_list(r, node):
    from jitflow.core.shapes import TensorShape
    attrs: dict = {}
    for k in ("element_dtype", "shape_type"):
        if k in node.attr:
            attrs[k] = r.dtype_attr(k)
    if "num_elements" in node.attr:
        attrs["num_elements"] = int(node.attr["num_elements"].i)
    if "resize_if_index_out_of_bounds" in node.attr:
        attrs["resize_if_index_out_of_bounds"] = bool(
            node.attr["resize_if_index_out_of_bounds"].b)
    pos = _LIST_SHAPE_INPUT.get(node.op)
    if pos is not None:
        from jitflow.ops._array_args import get_static_value
        v = get_static_value(r.inputs[pos])
        if v is None:
            attrs["element_shape"] = TensorShape(None)
        else:
            v = np.asarray(v)
            attrs["element_shape"] = TensorShape(None) if v.ndim == 0 and int(v) == -1 else \
                TensorShape([None if int(d) < 0 else int(d) for d in v.reshape(-1)])
    if node.op == "TensorListStack" and attrs.get("num_elements", -1) >= 0 and \
            attrs.get("element_shape", TensorShape(None)).ndims is None:
        attrs["element_shape"] = TensorShape(None)
    return r.create(node.op, r.inputs, attrs)


def import_marked(graph, node, inputs: list, full_name: str):
    """A TensorFlow node jitflow wrote for one of its own ops (a TensorArray op as a list op):
    that op, exactly; None when `node` carries no such mark."""
    import json

    from jitflow.serialize.graph_def import NATIVE_ATTR
    from jitflow.serialize.json_graph import decode_attr
    if MARK_TYPE_ATTR not in node.attr or NATIVE_ATTR not in node.attr:
        return None
    op_type = node.attr[MARK_TYPE_ATTR].s.decode()
    positions = list(node.attr[MARK_INPUTS_ATTR].list.i)
    if any(p >= len(inputs) for p in positions):
        raise ValueError(f"graph_def node '{node.name}': its jitflow inputs {positions} do not "
                         f"fit its {len(inputs)} inputs")
    attrs = json.loads(node.attr[NATIVE_ATTR].s.decode())
    op_inputs = [inputs[p] for p in positions]
    return graph.create_op(op_type, op_inputs, {k: decode_attr(v) for k, v in attrs.items()},
                           name=full_name)



# -- TF1's TensorArrays ----------------------------------------------------------------------------
# TensorFlow's TensorArrayV3 ops pass a resource handle and a flow; every op also takes the flow,
# so jitflow's TensorArray ops (a flow, whose value is the array) stand for both: the handle is
# the flow of the TensorArrayV3 that made it.
def _ta_attrs(r, node, size=None) -> dict:
    from jitflow.core.shapes import TensorShape
    attrs = {"dtype": r.dtype_attr("dtype"),
             "element_shape": shape_from_proto(node.attr["element_shape"].shape)
             if "element_shape" in node.attr else TensorShape(None)}
    if size is not None:
        attrs["size"] = size
    return attrs


@tf_ops.importer("TensorArrayV3")
def _import_tf_ta(r, node):
    from jitflow.core.shapes import TensorShape
    es = shape_from_proto(node.attr["element_shape"].shape) if "element_shape" in node.attr \
        else TensorShape(None)
    flow = r.create("TensorArrayV3", r.inputs[:1], {
        "dtype": r.dtype_attr("dtype"), "element_shape": es,
        "dynamic_size": bool(r.attr("dynamic_size", False)),
        "clear_after_read": bool(r.attr("clear_after_read", True)),
        "tensor_array_name": r.attr("tensor_array_name", "") or ""})[0]
    return [flow, flow]


@tf_ops.importer("TensorArrayWriteV3")
def _import_tf_ta_write(r, node):
    _, index, value, flow = r.inputs
    return r.create("TensorArrayWriteV3", [flow, index, value], {})


@tf_ops.importer("TensorArrayReadV3")
def _import_tf_ta_read(r, node):
    _, index, flow = r.inputs
    return r.create("TensorArrayReadV3", [flow, index], _ta_attrs(r, node))


@tf_ops.importer("TensorArrayGatherV3")
def _import_tf_ta_gather(r, node):
    _, indices, flow = r.inputs
    n = indices.shape.as_list()[0] if indices.shape.ndims == 1 else None
    return r.create("TensorArrayGatherV3", [flow, indices], _ta_attrs(r, node, n))


@tf_ops.importer("TensorArrayScatterV3")
def _import_tf_ta_scatter(r, node):
    _, indices, value, flow = r.inputs
    return r.create("TensorArrayScatterV3", [flow, indices, value], {})


@tf_ops.importer("TensorArraySizeV3")
def _import_tf_ta_size(r, node):
    return r.create("TensorArraySizeV3", [r.inputs[1]], {})


@tf_ops.importer("TensorArrayConcatV3")
def _import_tf_ta_concat(r, node):
    attrs = _ta_attrs(r, node)
    if "element_shape_except0" in node.attr:
        rest = shape_from_proto(node.attr["element_shape_except0"].shape)
        from jitflow.core.shapes import TensorShape
        attrs["element_shape"] = TensorShape(None) if rest.ndims is None else \
            TensorShape([None] + rest.as_list())
    return r.create("TensorArrayConcatV3", [r.inputs[1]], attrs)


@tf_ops.importer("TensorArraySplitV3")
def _import_tf_ta_split(r, node):
    _, value, lengths, flow = r.inputs
    return r.create("TensorArraySplitV3", [flow, value, lengths], {})


@tf_ops.importer("TensorArrayCloseV3")
def _import_tf_ta_close(r, node):
    return r.create("NoOp", [], {})
