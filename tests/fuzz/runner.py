"""Run random programs on every backend, compare, and shrink what disagrees.

`check(program)` runs a program on the compiled backend and on the reference interpreter (and
on TensorFlow when `tf_module` is given) through the same protocol:

1. build the graph (an exception here is an outcome too: both must raise the same class);
2. initialize variables; in train mode run the train op a few times;
3. fetch with batch size b1, again with the same feeds (must be identical: determinism), with
   batch size b2, and with b1 again (identical to the first: nothing left behind);
4. in an error mode, a run with a wrong feed (both must raise the same class), then a valid
   run whose result must equal the first (the failed run changed nothing).

Values agree within a tolerance derived from the dtype *and* from the program's conditioning:
the interpreter is also run on inputs perturbed by a few ulps, and whatever that changes is
added to the allowance, so ill-conditioned programs (cancellation, exp of exp) do not cry wolf
while a wrong answer in a well-conditioned one cannot hide.
"""
from __future__ import annotations

import os
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from fuzz.generator import Node, Program, build, error_feed, feed_values

_RTOL = {"float32": 2e-5, "float64": 1e-12}
_EPS = {"float32": float(np.finfo(np.float32).eps), "float64": float(np.finfo(np.float64).eps)}


@dataclass
class Outcome:
    """What one backend did with one program: per step, results or an exception class."""

    steps: list = field(default_factory=list)    # (label, kind, payload)
    none_grads: list = field(default_factory=list)
    crash: Optional[str] = None                  # unexpected exception text (a bug)


def _flatten(x) -> list:
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in _flatten(x[k])]
    if isinstance(x, (list, tuple)):
        return [v for e in x for v in _flatten(e)]
    return [x]


def _error_name(e: BaseException) -> str:
    return type(e).__name__


def _tf_config(tfm):
    """TensorFlow's session without its graph rewriter (grappler): the comparison is with TF1's
    documented semantics, and grappler breaks one of them. It rewrites `x + x` (to `2 * x`)
    even when that sum's output is fed, so the feed is ignored (seed 17200761: a cond's
    predicate read from a fed sum took the other branch; without grappler TF agrees)."""
    cfg = tfm.ConfigProto()
    cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    return cfg


def run_program(prog: Program, tfm, backend: Optional[str], perturb: float = 0.0) -> Outcome:
    """Run `prog` through the protocol above; `backend` None means `tfm` picks (TensorFlow)."""
    out = Outcome()
    graph = tfm.Graph()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = build(tfm, prog, graph, perturb)
    except Exception as e:  # noqa: BLE001  (a build error is an outcome to compare)
        out.steps.append(("build", "error", _error_name(e)))
        return out
    out.none_grads = built["none_grads"]
    phs = built["placeholders"]
    fetches = built["fetches"]
    kw = {"graph": graph}
    if backend is not None:
        kw["backend"] = backend
    elif hasattr(tfm, "ConfigProto"):
        kw["config"] = _tf_config(tfm)
    b1, b2 = prog.batches

    def feed(batch, seed):
        return {phs[i]: v for i, v in feed_values(prog, batch, seed, perturb).items()}

    def fetch(sess, label, fd, what=None):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with np.errstate(all="ignore"):
                    r = sess.run(fetches if what is None else what, fd)
            out.steps.append((label, "value", r))
        except Exception as e:  # noqa: BLE001
            if _is_tf_error(e) or isinstance(e, (ValueError, TypeError)):
                out.steps.append((label, "error", _error_name(e)))
            else:
                out.crash = f"{label}: {type(e).__name__}: {e}\n{traceback.format_exc()}"
                raise _Stop() from None

    try:
        with tfm.Session(**kw) as sess:
            if built["init"] is not None:
                sess.run(built["init"])
            if built["train"] is not None:
                if built.get("grads"):
                    fetch(sess, "grad0", feed(b1, 100), built["grads"])
                for k in range(prog.train_steps):
                    with np.errstate(all="ignore"):
                        try:
                            sess.run(built["train"], feed(b1, 100 + k))
                        except Exception as e:  # noqa: BLE001
                            if not _is_tf_error(e) and not isinstance(e, ValueError):
                                raise
                            out.steps.append((f"train{k}", "error", _error_name(e)))
                            return out
            fetch(sess, "b1", feed(b1, 0))
            fetch(sess, "b1-again", feed(b1, 0))
            fetch(sess, "b2", feed(b2, 1))
            fetch(sess, "b1-third", feed(b1, 0))
            if prog.error:
                vals = feed_values(prog, b1, 0, perturb)
                bad = error_feed(prog, vals, b1)
                fetch(sess, "error", {phs[i]: v for i, v in bad.items()})
                fetch(sess, "after-error", feed(b1, 0))
    except _Stop:
        pass
    except Exception as e:  # noqa: BLE001
        out.crash = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
    return out


class _Stop(Exception):
    pass


def _is_tf_error(e: BaseException) -> bool:
    return any(c.__name__ == "OpError" for c in type(e).__mro__)


# -- comparing -----------------------------------------------------------------------------------
def _steered_by_rounding(got, ref) -> bool:
    """True if two gradients that agree within rounding still point Adam's first step
    differently. That step is lr * g / (|g| + 1e-8), about lr * sign(g): where g is rounding
    noise (d sum(softmax(x)) / dx is 0 up to rounding), the order of a sum decides each
    variable's step, and trained values then differ by whole steps on correct backends."""
    for x, y in zip(_flatten(got), _flatten(ref)):
        if x is None or y is None:
            continue
        with np.errstate(all="ignore"):
            xf, yf = np.asarray(x, np.float64), np.asarray(y, np.float64)
            dx, dy = xf / (np.abs(xf) + 1e-8), yf / (np.abs(yf) + 1e-8)
            if np.any(np.abs(dx - dy) > 1e-2):   # NaN compares False: NaN grads stay checked
                return True
    return False


def _close(got, ref, alt, label: str, same_type: bool = True,
           precision: str = "float64", values: bool = True) -> Optional[str]:
    """None if `got` matches `ref` (within the allowance `alt` gives), else what differs;
    `values=False` compares only what is not rounding's to decide: types, dtypes, shapes."""
    g, r = _flatten(got), _flatten(ref)
    a = _flatten(alt) if alt is not None else [None] * len(r)
    if len(g) != len(r):
        return f"{label}: {len(g)} results vs {len(r)}"
    for k, (x, y, z) in enumerate(zip(g, r, a)):
        where = f"{label}[{k}]"
        if x is None or y is None:
            if (x is None) != (y is None):
                return f"{where}: None vs {type(y)}"
            continue
        if same_type and type(x) is not type(y):
            return f"{where}: type {type(x).__name__} vs {type(y).__name__}"
        xa, ya = np.asarray(x), np.asarray(y)
        if xa.dtype != ya.dtype:
            return f"{where}: dtype {xa.dtype} vs {ya.dtype}"
        if xa.shape != ya.shape:
            return f"{where}: shape {xa.shape} vs {ya.shape}"
        if not values:
            continue
        if xa.dtype.kind not in "fc":
            if not np.array_equal(xa, ya):
                if z is not None and not np.array_equal(np.asarray(z), ya):
                    continue  # an integer result that depends on rounding upstream
                return f"{where}: values differ\n got {xa!r}\n ref {ya!r}"
            continue
        za = None if z is None else np.asarray(z)
        if za is not None and za.shape != ya.shape:
            za = None   # a value-dependent shape (where, unique) came out differently there
        msg = _float_mismatch(xa, ya, za, precision)
        if msg:
            return f"{where}: {msg}"
    return None


def _float_mismatch(x: np.ndarray, y: np.ndarray, z: Optional[np.ndarray],
                    precision: str = "float64") -> Optional[str]:
    """`precision`: the coarsest float dtype the program computes in (a float32 result cast
    to float64 carries float32's rounding)."""
    dt = x.dtype.name if x.dtype.name in _RTOL else "float64"
    if _RTOL[precision] > _RTOL[dt]:
        dt = precision
    rtol = _RTOL[dt]
    with np.errstate(all="ignore"):
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        nan_x, nan_y = np.isnan(xf), np.isnan(yf)
        finite = np.isfinite(yf)
        scale = np.max(np.abs(yf[finite])) if finite.any() else 1.0
        # relative to the value, with a floor of a few ulps of the tensor's scale (cancellation
        # to 0 leaves an ulp of its terms) and of 1 (values near 0)
        allow = rtol * np.abs(yf) + 16 * _EPS[dt] * max(scale, 1.0)
        if z is not None:
            zf = z.astype(np.float64)
            unstable = (np.isnan(zf) != nan_y) | (np.isinf(zf) != np.isinf(yf))
            d = np.abs(zf - yf)
            allow = allow + 8 * np.where(np.isfinite(d), d, 0)
        else:
            unstable = np.zeros(yf.shape, bool)
        bad = (nan_x != nan_y)
        inf_y = np.isinf(yf)
        bad |= inf_y & (xf != yf)
        fin = finite & ~nan_x
        bad |= fin & ~(np.abs(xf - yf) <= allow)
        bad |= finite & np.isinf(xf) & (np.abs(yf) < 0.5 * np.finfo(dt).max)
        bad &= ~unstable
    if bad.any():
        idx = np.argwhere(bad)[:3]
        items = ", ".join(f"{tuple(i)}: {xf[tuple(i)]!r} vs {yf[tuple(i)]!r}" for i in idx)
        return f"{int(bad.sum())} of {bad.size} values differ ({items})"
    return None


def compare(got: Outcome, ref: Outcome, alt: Optional[Outcome], who: str,
            strict_types: bool = True, precision: str = "float64") -> Optional[str]:
    """None if `got` agrees with the reference outcome, else a description of the first
    difference."""
    if got.crash:
        return f"{who} crashed: {got.crash}"
    if ref.crash:
        return f"reference crashed: {ref.crash}"
    if got.none_grads != ref.none_grads:
        return f"{who}: None gradients {got.none_grads} vs {ref.none_grads}"
    rsteps = {s[0]: s for s in ref.steps}
    asteps = {s[0]: s for s in alt.steps} if alt is not None else {}
    labels_g = [s[0] for s in got.steps]
    labels_r = [s[0] for s in ref.steps]
    if labels_g != labels_r:
        last_g = got.steps[-1][:3] if got.steps else ""
        last_r = ref.steps[-1][:3] if ref.steps else ""
        return f"{who}: ran steps {labels_g} vs {labels_r} ({last_g} vs {last_r})"
    steered = False   # rounding picked the signs of Adam's first step: trained values differ
    for label, kind, payload in got.steps:
        _, rkind, rpay = rsteps[label]
        if kind != rkind or (kind == "error" and payload != rpay):
            gp = payload if kind == "error" else "a value"
            rp = rpay if rkind == "error" else "a value"
            return f"{who} step {label}: {gp} vs {rp}"
        if kind == "value":
            a = asteps.get(label)
            alt_val = a[2] if a is not None and a[1] == "value" else None
            msg = _close(payload, rpay, alt_val, f"{who} step {label}", strict_types, precision,
                         values=not steered)
            if msg:
                return msg
            if label == "grad0":   # the reference perturbed, or the backend, moves a sign
                steered = _steered_by_rounding(payload, rpay) or (
                    alt_val is not None and _steered_by_rounding(alt_val, rpay))
    # the same backend must repeat itself exactly
    gs = {s[0]: s for s in got.steps}
    for a, b in (("b1", "b1-again"), ("b1", "b1-third"), ("b1", "after-error")):
        if a in gs and b in gs and gs[a][1] == "value" and gs[b][1] == "value":
            if not _identical(gs[a][2], gs[b][2]):
                return f"{who}: step {b} differs from step {a} (nondeterministic or state left " \
                       "behind)"
    return None


def _identical(x, y) -> bool:
    fx, fy = _flatten(x), _flatten(y)
    if len(fx) != len(fy):
        return False
    for a, b in zip(fx, fy):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            na, nb = np.isnan(a), np.isnan(b)
            if not np.array_equal(na, nb):
                return False
            a, b = np.where(na, 0, a), np.where(nb, 0, b)   # NaN payloads are not defined
        if a.tobytes() != b.tobytes():
            return False
    return True


# -- one program, every backend ------------------------------------------------------------------
LAST: dict = {}   # what the last `check` saw: the reference's outcome, fallbacks to references


def check(prog: Program, tf_module=None, tiers=None) -> Optional[str]:
    """None if every backend agrees on `prog`, else a description of the disagreement.

    The compiled backend runs once per mode in `tiers` (JITFLOW_COMPILE values; default: the
    mode in effect): the first is compared with the interpreter within the tolerance, every
    other one with the first bit for bit (every compiled tier must give the same bits)."""
    import jitflow
    from jitflow.backends.numba_cpu.cache import STATS
    fb0 = STATS.get("reference_fallbacks", 0)
    ref = run_program(prog, jitflow, "interpreter")
    kinds = [kind for _, kind, _ in ref.steps]
    LAST["outcome"] = ("build error" if ref.steps and ref.steps[0][0] == "build" else
                       "values" if "error" not in kinds else "values and a run error")
    alt = None
    if any(s[1] == "value" for s in ref.steps):
        perturb = 4 * _EPS["float32"]
        alt = run_program(prog, jitflow, "interpreter", perturb)
    from helpers import compile_mode
    modes = list(tiers) if tiers else [os.environ.get("JITFLOW_COMPILE", "")]
    outs = []
    for mode in modes:
        with compile_mode(mode):
            outs.append(run_program(prog, jitflow, "numba"))
    LAST["fallbacks"] = STATS.get("reference_fallbacks", 0) - fb0
    # int32 programs compute in float32 where they meet floats (casts, the loss)
    precision = "float64" if all(n.dtype == "float64" for n in prog.nodes) else "float32"
    msg = compare(outs[0], ref, alt, f"numba ({modes[0] or 'default mode'})",
                  precision=precision)
    if msg:
        return msg
    for mode, out in zip(modes[1:], outs[1:]):
        msg = _same_outcome(outs[0], out)
        if msg:
            return f"tier {mode} differs from tier {modes[0]}: {msg}"
    if tf_module is not None:
        tgot = run_program(prog, tf_module, None)
        msg = compare(ref, tgot, alt, "interpreter-vs-tensorflow", strict_types=False,
                      precision=precision)
        if msg:
            return "TF " + msg
    return None


def _same_outcome(a: Outcome, b: Outcome) -> Optional[str]:
    """Why two compiled runs of one program are not the same to the bit, or None."""
    if (a.crash is None) != (b.crash is None):
        return f"crash: {a.crash or b.crash}"
    if len(a.steps) != len(b.steps):
        return f"steps {[s[0] for s in a.steps]} vs {[s[0] for s in b.steps]}"
    for (la, ka, va), (lb, kb, vb) in zip(a.steps, b.steps):
        if la != lb or ka != kb:
            return f"step {la}: {ka} vs {lb}: {kb}"
        if ka == "error":
            if va != vb:
                return f"step {la}: error {va} vs {vb}"
        elif not _identical(va, vb):
            return f"step {la}: values differ in their bits"
    return None


# -- shrinking -----------------------------------------------------------------------------------
def _prune(prog: Program) -> Program:
    """Drop nodes nothing needs; renumber."""
    need = set(prog.fetches) | set(prog.grad_wrt) | set(prog.fed)
    if prog.loss_node is not None:
        need.add(prog.loss_node)
    if prog.error_target is not None:
        need.add(prog.error_target)
    if prog.mode == "train":
        need |= {i for i, n in enumerate(prog.nodes) if n.op in ("variable", "get_variable")
                 and _reaches(prog, i, prog.loss_node)}
    stack = list(need)
    while stack:
        i = stack.pop()
        for a in prog.nodes[i].args:
            if a not in need:
                need.add(a)
                stack.append(a)
    keep = sorted(need)
    pos = {old: new for new, old in enumerate(keep)}
    nodes = []
    for i in keep:
        n = prog.nodes[i]
        nodes.append(Node(n.op, tuple(pos[a] for a in n.args), n.params, n.dtype, n.shape,
                          n.bounded))
    m = lambda i: None if i is None else pos[i]  # noqa: E731
    return Program(prog.seed, nodes, [pos[i] for i in prog.fetches], prog.mode,
                   prog.fetch_style, prog.optimizer, prog.train_steps,
                   [pos[i] for i in prog.grad_wrt], m(prog.loss_node), prog.loss_reduce,
                   prog.batches, prog.error, m(prog.error_target), [pos[i] for i in prog.fed],
                   prog.extra_fetch)


def _reaches(prog: Program, src: int, dst: Optional[int]) -> bool:
    if dst is None:
        return False
    stack, seen = [dst], set()
    while stack:
        i = stack.pop()
        if i == src:
            return True
        if i in seen:
            continue
        seen.add(i)
        stack.extend(prog.nodes[i].args)
    return False


def _candidates(prog: Program):
    """Smaller variants of `prog`, most promising first."""
    from dataclasses import replace
    if prog.error:
        yield replace(prog, error=None, error_target=None)
    if prog.fed:
        yield replace(prog, fed=[])
    if prog.extra_fetch:
        yield replace(prog, extra_fetch=None)
    if prog.mode == "train" and prog.train_steps > 1:
        yield replace(prog, train_steps=1)
    if prog.mode != "forward":
        yield replace(prog, mode="forward", grad_wrt=[], loss_node=None)
    if prog.mode == "gradients":
        for k in range(len(prog.grad_wrt)):
            yield replace(prog, grad_wrt=prog.grad_wrt[:k] + prog.grad_wrt[k + 1:])
    if len(prog.fetches) > 1:
        for k in range(len(prog.fetches)):
            yield replace(prog, fetches=prog.fetches[:k] + prog.fetches[k + 1:])
    if prog.fetch_style != "list":
        yield replace(prog, fetch_style="list")
    # cut a node: it becomes a placeholder of the same shape and dtype
    for i in reversed(range(len(prog.nodes))):
        n = prog.nodes[i]
        if not n.args:
            if n.op != "placeholder" and i != prog.error_target:
                nodes = list(prog.nodes)
                nodes[i] = Node("placeholder", (), {"static": "none"}, n.dtype, n.shape)
                if n.op in ("variable", "get_variable") and prog.mode == "train":
                    continue
                yield replace(prog, nodes=nodes)
            continue
        if i in prog.fed:
            continue
        if n.shape is None:
            continue
        nodes = list(prog.nodes)
        nodes[i] = Node("placeholder", (), {"static": "none"}, n.dtype, n.shape)
        yield replace(prog, nodes=nodes)
    if prog.batches != (2, 1):
        yield replace(prog, batches=(2, 1))


def shrink(prog: Program, still_fails, budget: int = 200) -> Program:
    """A smaller program for which `still_fails(program)` is still true."""
    prog = _prune(prog)
    tries = 0
    changed = True
    while changed and tries < budget:
        changed = False
        for cand in _candidates(prog):
            tries += 1
            try:
                cand = _prune(cand)
            except (KeyError, IndexError):
                continue
            if still_fails(cand):
                prog = cand
                changed = True
                break
            if tries >= budget:
                break
    return prog


def _short(msg: str, lines: int = 12) -> str:
    """A failure message with its traceback cut to the last lines."""
    parts = msg.splitlines()
    if len(parts) <= lines + 1:
        return msg
    return "\n".join(parts[:1] + ["  ..."] + parts[-lines:])


# -- worker processes of `python -m fuzz` ----------------------------------------------------
_TF = None


_TIERS: list = []


def worker_init(tf_flag: bool, tiers=("auto", "quick", "sync", "numba")) -> None:
    os.environ["JITFLOW_POISON"] = "1"
    os.environ["JITFLOW_STRICT"] = "1"
    global _TF
    _TIERS[:] = list(tiers)
    _TF = None
    if tf_flag:
        import tensorflow.compat.v1 as tf1
        tf1.disable_eager_execution()
        _TF = tf1


def worker_one(args):
    seed, max_ops, want_shrink = args
    from fuzz.generator import generate
    try:
        prog = generate(seed, max_ops)
        msg = check(prog, _TF, _TIERS)
        stats = (LAST.get("outcome"), LAST.get("fallbacks", 0) > 0)
    except Exception as e:  # noqa: BLE001  (a harness error is reported, not fatal)
        return seed, f"harness error: {type(e).__name__}: {e}", traceback.format_exc(), None
    if msg is None:
        return seed, None, None, stats
    small = prog
    if want_shrink:
        small = shrink(prog, lambda p: check(p, _TF, _TIERS) is not None)
    return seed, _short(msg), small.describe() + "\n" + _short(check(small, _TF, _TIERS)
                                                             or msg), stats


