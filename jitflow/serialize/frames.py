"""TF1's control-flow frames read as functional control flow.

`tf.compat.v1` with control flow v2 off (`disable_v2_behavior`, `disable_control_flow_v2`, TF1
itself) writes a while loop as a cycle of Enter, Merge, Switch, Identity, NextIteration, Exit
and LoopCond nodes in one frame, and a cond as Switch nodes (each captured tensor, routed to
the taken branch) and Merge nodes (each output, from the live branch). jitflow's graphs are
acyclic, so `functionalize(nodes)` rewrites them, before the import, into what control flow v2
writes: a `While` node whose cond and body are new graph functions (the nodes between the
Merges and the LoopCond; between the Switches' Identities and the NextIterations), Identity
nodes under the Exits' names, and an `If` node per group of Merges sharing a predicate (each
branch: the nodes between that predicate's Switches and the Merges), Identity nodes under the
Merges' names. Inner loops and conds are rewritten inside the functions they end up in.
"""
from __future__ import annotations

from collections import defaultdict

__all__ = ["functionalize", "has_frames"]

_FRAME_OPS = {"Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration",
              "LoopCond", "Switch", "RefSwitch", "Merge", "RefMerge"}


def has_frames(nodes) -> bool:
    return any(n.op in _FRAME_OPS for n in nodes)


def _src(s: str) -> tuple:
    """(node, output) of a data input "node" / "node:k"; (node, None) for "^node"."""
    if s.startswith("^"):
        return s[1:], None
    name, _, k = s.partition(":")
    return name, int(k) if k else 0


class _Ctx:
    def __init__(self, protos, library: dict) -> None:
        self.protos = protos
        self.library = library    # name -> (FunctionDef in GraphDef naming, arg names)
        self.count = 0

    def fresh(self, base: str) -> str:
        self.count += 1
        return "".join(c if c.isalnum() else "_" for c in base) + f"_frame_fn_{self.count}"


def functionalize(nodes: list, protos, library: dict) -> list:
    """`nodes` (NodeDefs in GraphDef naming) with frames rewritten; new functions go into
    `library` as FunctionDefs (function naming)."""
    ctx = _Ctx(protos, library)
    return _functionalize(list(nodes), ctx)


def _functionalize(nodes: list, ctx: _Ctx) -> list:
    if not has_frames(nodes):
        return nodes
    nodes = _loops(nodes, ctx)
    return _conds(nodes, ctx)


def _users(nodes: list) -> dict:
    users = defaultdict(list)
    for n in nodes:
        for s in n.input:
            users[_src(s)[0]].append(n)
    return users


def _dtype(n) -> int:
    return n.attr["T"].type


# -- loops -----------------------------------------------------------------------------------------
def _frame_parts(frame: str, enters: list, users: dict) -> dict:
    parts = {"vars": [], "consts": [], "exits": set()}
    loop_cond = None
    for e in enters:
        if e.attr["is_constant"].b:
            parts["consts"].append(e)
            continue
        merge = next((u for u in users[e.name] if u.op in ("Merge", "RefMerge")), None)
        if merge is None:
            raise ValueError(f"frame {frame}: Enter node {e.name} feeds no Merge")
        switch = next((u for u in users[merge.name] if u.op in ("Switch", "RefSwitch")), None)
        if switch is None:
            raise ValueError(f"frame {frame}: Merge node {merge.name} feeds no Switch")
        outs = users[switch.name]
        exit_ = next((u for u in outs if u.op in ("Exit", "RefExit")), None)
        nxt = [s for s in merge.input if _src(s)[0] != e.name]
        loop_cond = _src(switch.input[1])[0]
        parts["vars"].append((e, merge, switch, exit_, nxt[0] if nxt else None))
        if exit_ is not None:
            parts["exits"].add(exit_.name)
    parts["loop_cond"] = loop_cond
    return parts


def _closure(starts: list, users: dict, stop: set) -> set:
    seen = set()
    stack = list(starts)
    while stack:
        n = stack.pop()
        if n.name in seen:
            continue
        seen.add(n.name)
        if n.name in stop:
            continue
        stack.extend(users[n.name])
    return seen


def _backward(roots: list, by_name: dict, inside: set, stop: set) -> list:
    """Names of the nodes in `inside` that `roots` (node names) depend on, not past `stop`."""
    seen, order, stack = set(), [], list(roots)
    while stack:
        name = stack.pop()
        if name in seen or name in stop or name not in inside:
            continue
        seen.add(name)
        order.append(name)
        stack.extend(_src(s)[0] for s in by_name[name].input)
    return order


def _make_function(ctx: _Ctx, name: str, arg_types: list, out_types: list, nodes: list,
                   rename: dict, ret: list) -> None:
    """A FunctionDef of copies of `nodes` whose inputs named in `rename` ("node:k" -> arg) are
    the function's arguments; `ret`: GraphDef names (or argument names) of the outputs."""
    from jitflow.serialize.functions import _function_naming
    protos = ctx.protos
    keep = {n.name for n in nodes}
    body = []
    for n in nodes:
        m = protos.NodeDef()
        m.CopyFrom(n)
        del m.input[:]
        for s in n.input:
            src, k = _src(s)
            if k is None:
                if src in keep:
                    m.input.append(s)
                continue
            m.input.append(rename.get(f"{src}:{k}", s))
        body.append(m)
    body = _functionalize(body, ctx)
    fd = protos.FunctionDef()
    fd.signature.name = name
    args = [f"arg{i}" for i in range(len(arg_types))]
    for a, t in zip(args, arg_types):
        fd.signature.input_arg.add(name=a, type=t)
    for k, t in enumerate(out_types):
        fd.signature.output_arg.add(name=f"out{k}", type=t)
    _function_naming(body, set(args))
    fd.node_def.extend(body)
    from jitflow.serialize import op_signatures as sigs
    by_name = {n.name: n for n in body}
    for k, ref in enumerate(ret):
        src, _, idx = rename.get(ref, ref).partition(":")
        if src in args:
            fd.ret[f"out{k}"] = src
        else:
            arg, j = sigs.arg_index(by_name[src].op, by_name[src].attr, int(idx or 0))
            fd.ret[f"out{k}"] = f"{src}:{arg}:{j}"
    ctx.library[name] = fd


def _norm(s: str) -> str:
    src, k = _src(s)
    return f"{src}:{k}"


def _loops(nodes: list, ctx: _Ctx) -> list:
    by_name = {n.name: n for n in nodes}
    users = _users(nodes)
    frames = defaultdict(list)
    for n in nodes:
        if n.op in ("Enter", "RefEnter"):
            frames[n.attr["frame_name"].s.decode()].append(n)
    if not frames:
        return nodes
    info = {}
    for f, enters in frames.items():
        parts = _frame_parts(f, enters, users)
        info[f] = (parts, _closure(enters, users, parts["exits"]))
    outer = [f for f in frames
             if not any(e.name in info[g][1] for e in frames[f] for g in frames if g != f)]
    removed: set = set()
    added: list = []
    exits: set = set()
    for f in outer:
        parts, inside = info[f]
        loop_vars = parts["vars"]
        consts = parts["consts"]
        n = len(loop_vars)
        types = [_dtype(e) for e, _, _, _, _ in loop_vars] + [_dtype(c) for c in consts]
        cond_map, body_map = {}, {}
        for k, (_, merge, switch, _, _) in enumerate(loop_vars):
            cond_map[f"{merge.name}:0"] = f"arg{k}"
            body_map[f"{switch.name}:1"] = f"arg{k}"
        for j, c in enumerate(consts):
            cond_map[f"{c.name}:0"] = body_map[f"{c.name}:0"] = f"arg{n + j}"
        lc = by_name[parts["loop_cond"]]
        frame_ctl = {e.name for e, _, _, _, _ in loop_vars} | {c.name for c in consts} | \
            {m.name for _, m, _, _, _ in loop_vars} | {s.name for _, _, s, _, _ in loop_vars}
        pred = _norm(lc.input[0])
        cond_nodes = _backward([_src(lc.input[0])[0]], by_name, inside, frame_ctl)
        nexts = [by_name[_src(nx)[0]] for _, _, _, _, nx in loop_vars]
        outs = [_norm(nx.input[0]) for nx in nexts]
        body_nodes = _backward([_src(nx.input[0])[0] for nx in nexts], by_name, inside,
                               frame_ctl)
        cond_name, body_name = ctx.fresh(f"{f}_cond"), ctx.fresh(f"{f}_body")
        order = [x.name for x in nodes]
        _make_function(ctx, cond_name, types, [10], _ordered(cond_nodes, order, by_name),
                       cond_map, [pred])
        _make_function(ctx, body_name, types, types, _ordered(body_nodes, order, by_name),
                       body_map, outs + [f"{c.name}:0" for c in consts])
        w = ctx.protos.NodeDef(name=f"{lc.name}/While", op="While")
        w.input.extend([e.input[0] for e, _, _, _, _ in loop_vars] + [c.input[0] for c in consts])
        w.attr["T"].list.type.extend(types)
        w.attr["cond"].func.name = cond_name
        w.attr["body"].func.name = body_name
        w.attr["parallel_iterations"].i = loop_vars[0][0].attr["parallel_iterations"].i or 10
        added.append(w)
        for k, (_, _, _, exit_, _) in enumerate(loop_vars):
            if exit_ is not None:
                idn = ctx.protos.NodeDef(name=exit_.name, op="Identity", input=[f"{w.name}:{k}"])
                idn.attr["T"].type = types[k]
                added.append(idn)
                exits.add(exit_.name)
        removed |= inside
    out = []
    for x in nodes:
        if x.name in removed:
            continue
        # control inputs on a loop's inner nodes (not its Exits, which stay) are dropped
        if any(c.startswith("^") and c[1:] in removed and c[1:] not in exits for c in x.input):
            ins = [c for c in x.input
                   if not (c.startswith("^") and c[1:] in removed and c[1:] not in exits)]
            del x.input[:]
            x.input.extend(ins)
        out.append(x)
    return out + added


def _ordered(names: list, order: list, by_name: dict) -> list:
    s = set(names)
    return [by_name[n] for n in order if n in s]


# -- conds -----------------------------------------------------------------------------------------
def _branch(start: str, by_name: dict) -> tuple:
    """(nodes, Switches reached: {name: output}) that input `start` ("node:k") depends on back
    to Switch nodes, and whether a Merge is among them."""
    seen, reached, stack, merge = set(), {}, [_src(start)], False
    while stack:
        name, k = stack.pop()
        n = by_name.get(name)
        if n is None:
            continue
        if n.op in ("Switch", "RefSwitch"):
            if k is not None:
                reached[name] = k
            continue
        if name in seen:
            continue
        seen.add(name)
        if n.op in ("Merge", "RefMerge"):
            merge = True
        for s in n.input:
            stack.append(_src(s))
    return seen, reached, merge


def _conds(nodes: list, ctx: _Ctx) -> list:
    while True:
        by_name = {n.name: n for n in nodes}
        merges = [n for n in nodes if n.op in ("Merge", "RefMerge")]
        if not merges:
            return nodes
        done = False
        for m in merges:
            info = [_branch(s, by_name) for s in m.input]
            if any(merge for _, _, merge in info) or len(m.input) != 2:
                continue   # an outer cond: its inner ones first
            preds = {_canon(by_name[s].input[1], by_name) for _, r, _ in info for s in r}
            if len(preds) != 1:
                continue
            nodes = _one_cond(nodes, by_name, preds.pop(), ctx)
            done = True
            break
        if not done:
            raise ValueError("graph_def: Merge nodes that are not a TF1 cond's could not be read "
                             f"(first: {merges[0].name})")


def _one_cond(nodes: list, by_name: dict, pred: str, ctx: _Ctx) -> list:
    group, sides = [], [set(), set()]
    args, arg_of = [], {}
    reached_all: set = set()
    for m in nodes:
        if m.op not in ("Merge", "RefMerge") or len(m.input) != 2:
            continue
        info = [_branch(s, by_name) for s in m.input]
        if any(mg for _, _, mg in info):
            continue
        ps = {_canon(by_name[s].input[1], by_name) for _, r, _ in info for s in r}
        if ps != {pred}:
            continue
        group.append(m)
        for side, (seen, reached, _) in enumerate(info):
            sides[side] |= seen
            reached_all |= set(reached)
            for s in reached:
                x = _norm(by_name[s].input[0])
                if x not in arg_of:
                    arg_of[x] = f"arg{len(args)}"
                    args.append(x)
    # input 1 of a Merge is the live value when the predicate held (Switch output 1)
    rename = [{}, {}]
    for s in reached_all:
        for k in (0, 1):
            rename[k][f"{s}:{k}"] = arg_of[_norm(by_name[s].input[0])]
    # which Merge input is the true branch: the one reached through Switch outputs 1
    order = [x.name for x in nodes]
    arg_types = [None] * len(args)
    for sw in reached_all:
        arg_types[int(arg_of[_norm(by_name[sw].input[0])][3:])] = _dtype(by_name[sw])
    out_types = [_dtype(m) for m in group]
    names = []
    for k, which in ((1, "then"), (0, "else")):
        side_nodes = set()
        rets = []
        for m in group:
            live = _live_input(m, k, by_name)
            seen, _, _ = _branch(live, by_name)
            side_nodes |= seen
            rets.append(_norm(live))
        fname = ctx.fresh(f"{group[0].name}_{which}")
        _make_function(ctx, fname, arg_types, out_types,
                       _ordered(list(side_nodes), order, by_name), rename[k], rets)
        names.append(fname)
    base = group[0].name
    if_node = ctx.protos.NodeDef(name=f"{base}/If", op="If")
    if_node.input.extend([pred] + args)
    if_node.attr["Tcond"].type = 10
    if_node.attr["Tin"].list.type.extend(arg_types)
    if_node.attr["Tout"].list.type.extend(out_types)
    if_node.attr["then_branch"].func.name = names[0]
    if_node.attr["else_branch"].func.name = names[1]
    removed = (sides[0] | sides[1] | reached_all) - {m.name for m in group}
    # what else reads a removed node (a branch's unused switch_t/switch_f anchor) goes too
    grew = True
    while grew:
        grew = False
        for x in nodes:
            if x.name not in removed and x.op != "Merge" and any(
                    not c.startswith("^") and _src(c)[0] in removed for c in x.input):
                removed.add(x.name)
                grew = True
    out = []
    merge_names = {m.name for m in group}
    for x in nodes:
        if x.name in removed:
            continue
        if x.name in merge_names:
            i = [m.name for m in group].index(x.name)
            idn = ctx.protos.NodeDef(name=x.name, op="Identity", input=[f"{if_node.name}:{i}"])
            idn.attr["T"].type = out_types[i]
            out.append(idn)
            continue
        if any(c.startswith("^") and c[1:] in removed for c in x.input):
            ins = [c for c in x.input if not (c.startswith("^") and c[1:] in removed)]
            del x.input[:]
            x.input.extend(ins)
        out.append(x)
    return out + [if_node]


def _canon(ref: str, by_name: dict) -> str:
    """A predicate through its Identity nodes (TF1 switches on both `pred` and `pred_id`)."""
    ref = _norm(ref)
    while True:
        src, k = _src(ref)
        n = by_name.get(src)
        if n is None or n.op != "Identity" or k != 0:
            return ref
        ref = _norm(n.input[0])


def _live_input(m, k: int, by_name: dict) -> str:
    """The input of Merge `m` computed when the predicate is `k` (1: true)."""
    for s in m.input:
        _, reached, _ = _branch(s, by_name)
        if any(v == k for v in reached.values()):
            return s
        src, out = _src(s)
        if by_name.get(src) is not None and by_name[src].op in ("Switch", "RefSwitch") \
                and out == k:
            return s
    return m.input[k]   # TF1 merges (false value, true value)
