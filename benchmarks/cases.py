"""The workloads, each written once per peer family, and the table of cases built from them.

Families: "numpy" (hand-written, the reference), "graph" (the TF1 graph API: jitflow's backends
and TensorFlow's compat.v1 share this code), "jax" (`jax.jit`), "numba" (hand-written floor).
Where the math is the same expression everywhere it is written once (`chain`) and evaluated with
each library's namespace. Each `<case>_<family>(ctx, data)` function prepares one peer family's
Runner from the peer's context (a math namespace, a GraphAPI, or the numba module) and the
case's shared data; each `<case>_data(...)` returns the function making that data from an RNG.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

import numpy as np

from benchmarks.harness import Case, Runner

__all__ = ["build_cases", "chain", "mlp_case", "mlp_data", "SCALES"]

SEEDS_A, SEEDS_B = 15.0, 5.0
MLP_LR = 0.1
LINREG_LR = 0.01
LINREG_W0, LINREG_B0 = 0.5, 0.1  # the seeds' initial values


def _in_graph(api: Any, build: Callable[[Any], Any], init: bool = False):
    """Build with `build(tf)` in a fresh graph; returns (what build returned, a session)."""
    tf = api.tf
    graph = tf.Graph()
    with graph.as_default():
        built = build(tf)
        init_op = tf.global_variables_initializer() if init else None
    sess = api.session(graph)
    if init_op is not None:
        sess.run(init_op)
    return built, sess


def _blocking(jax: Any, fn: Callable) -> Callable:
    """Wrap a JAX function so each call waits for its result (JAX dispatches asynchronously)."""
    return lambda *args: jax.block_until_ready(fn(*args))


# -- (1) the seeds' graph: (a*b)/(a+b) with fed scalars -------------------------------------------
def seeds_data(rng: np.random.Generator) -> dict:
    return {"a": SEEDS_A, "b": SEEDS_B}


def seeds_numpy(m: Any, d: dict) -> Runner:
    a, b = d["a"], d["b"]

    def step():
        x, y = np.float32(a), np.float32(b)
        return (x * y) / (x + y)

    return Runner(step)


def seeds_graph(api: Any, d: dict, callable_: bool = False) -> Runner:
    def build(tf):
        a = tf.placeholder(tf.float32, shape=[], name="a")
        b = tf.placeholder(tf.float32, shape=[], name="b")
        return a, b, tf.divide(tf.multiply(a, b), tf.add(a, b))

    (a, b, res), sess = _in_graph(api, build)
    va, vb = d["a"], d["b"]
    if callable_:
        fn = sess.make_callable(res, [a, b])
        return Runner(lambda: fn(va, vb), close=sess.close)
    return Runner(lambda: sess.run(res, feed_dict={a: va, b: vb}), close=sess.close)


def seeds_jax(m: Any, d: dict) -> Runner:
    f = _blocking(m.jax, m.jax.jit(lambda a, b: (a * b) / (a + b)))
    a, b = d["a"], d["b"]
    return Runner(lambda: f(np.float32(a), np.float32(b)))


def seeds_numba(numba: Any, d: dict) -> Runner:
    f = numba.njit(lambda a, b: (a * b) / (a + b))
    a, b = d["a"], d["b"]
    return Runner(lambda: f(a, b))


# -- (2) the fused elementwise chain ---------------------------------------------------------------
def chain(m: Any, x: Any, w: Any, b: Any) -> Any:
    """sigmoid(x*w+b)*tanh(x) - exp(-x*x) + 0.5*x, with `m` one library's math namespace."""
    return m.sigmoid(x * w + b) * m.tanh(x) - m.exp(-x * x) + 0.5 * x


def chain_data(n: int, dtype: str) -> Callable:
    def make(rng: np.random.Generator) -> dict:
        dt = np.dtype(dtype)
        return {"x": rng.uniform(-3, 3, n).astype(dt), "w": dt.type(0.7), "b": dt.type(-0.2),
                "dtype": dtype}

    return make


def chain_numpy(m: Any, d: dict) -> Runner:
    x, w, b = d["x"], d["w"], d["b"]
    return Runner(lambda: chain(m, x, w, b))


def chain_graph(api: Any, d: dict) -> Runner:
    def build(tf):
        dt = tf.as_dtype(d["dtype"])
        x = tf.placeholder(dt, shape=[None], name="x")
        w = tf.placeholder(dt, shape=[], name="w")
        b = tf.placeholder(dt, shape=[], name="b")
        return {x: d["x"], w: d["w"], b: d["b"]}, chain(api, x, w, b)

    (feed, out), sess = _in_graph(api, build)
    return Runner(lambda: sess.run(out, feed_dict=feed), close=sess.close)


def chain_jax(m: Any, d: dict) -> Runner:
    f = _blocking(m.jax, m.jax.jit(functools.partial(chain, m)))
    x = m.jax.device_put(d["x"])
    w, b = d["w"], d["b"]
    return Runner(lambda: f(x, w, b))


# -- (3) reduction: reduce_mean(square(a - b), axis=1) ---------------------------------------------
def reduce_data(rows: int, cols: int) -> Callable:
    def make(rng: np.random.Generator) -> dict:
        return {"a": rng.random((rows, cols), dtype=np.float32),
                "b": rng.random((rows, cols), dtype=np.float32)}

    return make


def reduce_numpy(m: Any, d: dict) -> Runner:
    a, b = d["a"], d["b"]
    return Runner(lambda: np.mean(np.square(a - b), axis=1))


def reduce_graph(api: Any, d: dict) -> Runner:
    def build(tf):
        a = tf.placeholder(tf.float32, shape=[None, d["a"].shape[1]], name="a")
        b = tf.placeholder(tf.float32, shape=[None, d["b"].shape[1]], name="b")
        return {a: d["a"], b: d["b"]}, tf.reduce_mean(tf.square(a - b), axis=1)

    (feed, out), sess = _in_graph(api, build)
    return Runner(lambda: sess.run(out, feed_dict=feed), close=sess.close)


def reduce_jax(m: Any, d: dict) -> Runner:
    jnp = m.jnp
    f = _blocking(m.jax, m.jax.jit(lambda a, b: jnp.mean(jnp.square(a - b), axis=1)))
    a, b = m.jax.device_put(d["a"]), m.jax.device_put(d["b"])
    return Runner(lambda: f(a, b))


# -- (4) MLP 784-128-10, relu, softmax cross-entropy, one SGD step -------------------------------
def mlp_data(batch: int, dims: tuple = (784, 128, 10)) -> Callable:
    """A batch (X, one-hot Y) and initial weights, float32; the same for every peer."""
    n_in, n_hidden, n_out = dims

    def make(rng: np.random.Generator) -> dict:
        f32 = np.float32
        return {
            "X": rng.random((batch, n_in), dtype=f32),
            "Y": np.eye(n_out, dtype=f32)[rng.integers(0, n_out, batch)],
            "params": (rng.normal(0, 0.05, (n_in, n_hidden)).astype(f32),
                       rng.normal(0, 0.01, n_hidden).astype(f32),
                       rng.normal(0, 0.1, (n_hidden, n_out)).astype(f32),
                       np.zeros(n_out, f32)),
        }

    return make


def mlp_numpy(m: Any, d: dict) -> Runner:
    """Forward and backward written out by hand; updates its own copy of the weights."""
    params = [p.copy() for p in d["params"]]
    lr = np.float32(MLP_LR)

    def step_on(X, Y):
        W1, b1, W2, b2 = params  # updated in place below
        h_pre = X @ W1 + b1
        h = np.maximum(h_pre, 0)
        logits = h @ W2 + b2
        z = logits - logits.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        y_sum = Y.sum(axis=1, keepdims=True)
        loss = np.mean(y_sum[:, 0] * np.log(s[:, 0]) - (Y * z).sum(axis=1))
        dlogits = (e / s * y_sum - Y) / np.float32(len(X))
        dh = dlogits @ W2.T
        dh[h_pre <= 0] = 0
        W2 -= lr * (h.T @ dlogits)
        b2 -= lr * dlogits.sum(axis=0)
        W1 -= lr * (X.T @ dh)
        b1 -= lr * dh.sum(axis=0)
        return loss

    X, Y = d["X"], d["Y"]
    return Runner(lambda: step_on(X, Y), result=lambda loss: (loss, *params), call=step_on)


MLP_NEEDS = ("Variable", "matmul", "nn.relu", "reduce_mean", "train.GradientDescentOptimizer",
             "global_variables_initializer",
             "nn.softmax_cross_entropy_with_logits_v2|nn.softmax_cross_entropy_with_logits")


def mlp_graph(api: Any, d: dict) -> Runner:
    n_in, n_out = d["X"].shape[1], d["Y"].shape[1]

    def build(tf):
        X = tf.placeholder(tf.float32, shape=[None, n_in], name="X")
        Y = tf.placeholder(tf.float32, shape=[None, n_out], name="Y")
        params = [tf.Variable(p, name=n) for p, n in zip(d["params"], ("W1", "b1", "W2", "b2"))]
        W1, b1, W2, b2 = params
        logits = tf.matmul(tf.nn.relu(tf.matmul(X, W1) + b1), W2) + b2
        loss = tf.reduce_mean(api.xent(labels=Y, logits=logits))
        train = tf.train.GradientDescentOptimizer(MLP_LR).minimize(loss)
        return X, Y, params, loss, train

    (X, Y, params, loss, train), sess = _in_graph(api, build, init=True)

    def step_on(xv, yv):
        return sess.run([train, loss], feed_dict={X: xv, Y: yv})[1]

    return Runner(lambda: step_on(d["X"], d["Y"]),
                  result=lambda first: (first, *sess.run(params)), close=sess.close,
                  call=step_on)


def mlp_jax(m: Any, d: dict) -> Runner:
    jax, jnp = m.jax, m.jnp

    def loss_fn(params, x, y):
        W1, b1, W2, b2 = params
        logits = jax.nn.relu(x @ W1 + b1) @ W2 + b2
        return jnp.mean(-jnp.sum(y * jax.nn.log_softmax(logits), axis=1))

    def sgd(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return tuple(p - MLP_LR * g for p, g in zip(params, grads)), loss

    f = _blocking(jax, jax.jit(sgd))
    state = [tuple(jax.device_put(p) for p in d["params"])]

    def step_on(x, y):
        state[0], loss = f(state[0], x, y)
        return loss

    X, Y = jax.device_put(d["X"]), jax.device_put(d["Y"])
    return Runner(lambda: step_on(X, Y), result=lambda loss: (loss, *state[0]), call=step_on)


# -- (5) the seeds' linear regression: y = w*x + b, MSE, SGD --------------------------------------
def linreg_data(points: int, steps: int) -> Callable:
    def make(rng: np.random.Generator) -> dict:
        x = rng.uniform(0, 10, points).astype(np.float32)
        y = (3 * x + 2 + rng.normal(0, 1, points)).astype(np.float32)
        return {"x": x, "y": y, "steps": steps}

    return make


def linreg_numpy(m: Any, d: dict) -> Runner:
    x, y, steps = d["x"], d["y"], d["steps"]
    lr = np.float32(LINREG_LR)
    state = [np.float32(LINREG_W0), np.float32(LINREG_B0)]

    def block():
        w, b = state
        for _ in range(steps):
            diff = w * x + b - y
            w, b = w - lr * (2 * np.mean(diff * x)), b - lr * (2 * np.mean(diff))
        state[:] = w, b

    return Runner(block, result=lambda _: tuple(state))


LINREG_NEEDS = ("Variable", "square", "reduce_mean", "train.GradientDescentOptimizer",
                "global_variables_initializer")


def linreg_graph(api: Any, d: dict) -> Runner:
    def build(tf):
        x = tf.placeholder(tf.float32, shape=[None], name="x")
        y = tf.placeholder(tf.float32, shape=[None], name="y")
        w = tf.Variable(np.float32(LINREG_W0), name="w")
        b = tf.Variable(np.float32(LINREG_B0), name="b")
        loss = tf.reduce_mean(tf.square(w * x + b - y))
        train = tf.train.GradientDescentOptimizer(LINREG_LR).minimize(loss)
        return {x: d["x"], y: d["y"]}, (w, b), train

    (feed, wb, train), sess = _in_graph(api, build, init=True)
    steps = d["steps"]

    def block():
        for _ in range(steps):
            sess.run(train, feed_dict=feed)

    return Runner(block, result=lambda _: tuple(sess.run(list(wb))), close=sess.close)


def linreg_jax(m: Any, d: dict) -> Runner:
    jax, jnp = m.jax, m.jnp

    def sgd(w, b, x, y):
        gw, gb = jax.grad(lambda w, b: jnp.mean(jnp.square(w * x + b - y)), (0, 1))(w, b)
        return w - LINREG_LR * gw, b - LINREG_LR * gb

    f = jax.jit(sgd)
    x, y, steps = jax.device_put(d["x"]), jax.device_put(d["y"]), d["steps"]
    state = [jnp.float32(LINREG_W0), jnp.float32(LINREG_B0)]

    def block():
        w, b = state
        for _ in range(steps):
            w, b = f(w, b, x, y)
        state[:] = w.block_until_ready(), b.block_until_ready()

    return Runner(block, result=lambda _: tuple(state))


def linreg_numba(numba: Any, d: dict) -> Runner:
    @numba.njit(error_model="numpy")
    def sgd(w, b, x, y, lr):
        gw = np.float32(0)
        gb = np.float32(0)
        for i in range(x.size):
            diff = w * x[i] + b - y[i]
            gw += diff * x[i]
            gb += diff
        n = np.float32(x.size)
        return w - lr * (np.float32(2) * gw / n), b - lr * (np.float32(2) * gb / n)

    x, y, steps = d["x"], d["y"], d["steps"]
    lr = np.float32(LINREG_LR)
    state = [np.float32(LINREG_W0), np.float32(LINREG_B0)]

    def block():
        w, b = state
        for _ in range(steps):
            w, b = sgd(w, b, x, y, lr)
        state[:] = w, b

    return Runner(block, result=lambda _: tuple(state))


# -- the table -------------------------------------------------------------------------------------
SCALES = ("full", "tiny")


def mlp_case(batch: int, dims: tuple = (784, 128, 10)) -> Case:
    """The MLP training-step case at `batch` (also used by the cold-start child process)."""
    shape = "-".join(map(str, dims))
    return Case(f"mlp/b{batch}", f"MLP {shape} SGD step, batch {batch}, f32", "mlp",
                mlp_data(batch, dims), {"numpy": mlp_numpy, "graph": mlp_graph, "jax": mlp_jax},
                rtol=1e-3, atol=1e-5, metric="rate", needs=MLP_NEEDS,
                params={"batch": batch, "dims": dims})


def _tolerance(dtype: str) -> dict:
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-9, "atol": 1e-12}


def build_cases(scale: str = "full", groups: Optional[Sequence[str]] = None) -> list:
    """The benchmark table. "full" has the sizes the report is about; "tiny" is for tests.

    `groups` selects case groups (seeds, chain, reduce, mlp, linreg, cnn, rnn, compile)."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}")
    tiny = scale == "tiny"
    sizes = (100, 1000) if tiny else (10_000, 1_000_000, 10_000_000)
    rows, cols = (8, 16) if tiny else (4096, 1024)
    batches = (4,) if tiny else (64, 1024)
    dims = (20, 8, 3) if tiny else (784, 128, 10)
    steps = 10 if tiny else 1000
    seeds_impls = {"numpy": seeds_numpy, "jax": seeds_jax, "numba": seeds_numba}
    cases = [
        Case("seeds/run", "seeds' graph (a*b)/(a+b), Session.run", "seeds", seeds_data,
             {**seeds_impls, "graph": seeds_graph}, needs=("placeholder", "divide")),
        Case("seeds/callable", "seeds' graph (a*b)/(a+b), make_callable", "seeds", seeds_data,
             {**seeds_impls, "graph": functools.partial(seeds_graph, callable_=True)},
             needs=("placeholder", "divide")),
    ]
    for dtype in ("float32", "float64"):
        for n in sizes:
            size = f"{n:.0e}".replace("+0", "")
            cases.append(Case(
                f"chain/{size}/{dtype[0]}{dtype[-2:]}",
                f"chain sigmoid(x*w+b)*tanh(x)-exp(-x*x)+0.5*x, n={size}, {dtype}",
                "chain", chain_data(n, dtype),
                {"numpy": chain_numpy, "graph": chain_graph, "jax": chain_jax},
                needs=("sigmoid", "tanh", "exp"), params={"n": n, "dtype": dtype},
                **_tolerance(dtype)))
    reduce_shapes = [(rows, cols)] if tiny else [(1024, 1024), (rows, cols), (10240, 1024)]
    for r, c in reduce_shapes:
        cases.append(Case(
            f"reduce/{r}x{c}", f"reduce_mean(square(a-b), axis=1), {r}x{c} f32",
            "reduce", reduce_data(r, c),
            {"numpy": reduce_numpy, "graph": reduce_graph, "jax": reduce_jax},
            needs=("reduce_mean", "square"), **_tolerance("float32")))
    cases += [mlp_case(b, dims) for b in batches]
    cases.append(Case(
        "linreg", f"linear regression SGD, 100 points, {steps} steps (per step)", "linreg",
        linreg_data(100, steps),
        {"numpy": linreg_numpy, "graph": linreg_graph, "jax": linreg_jax,
         "numba": linreg_numba}, rtol=1e-3, atol=1e-4, per_sample=steps, needs=LINREG_NEEDS))
    from benchmarks.model_cases import model_cases
    cases += model_cases(tiny)
    if not tiny:
        from benchmarks.coldstart import compile_cases
        cases += compile_cases()
    if groups is not None:
        cases = [c for c in cases if c.group in groups]
    return cases
