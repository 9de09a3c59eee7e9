"""Model workloads: a LeNet-style CNN trained with Adam, an unrolled tanh RNN trained with SGD,
and the row reduction at several sizes.

The graph family (jitflow's backends and TensorFlow's compat.v1) builds the model once from the
same TF1 code. The reference for the model cases ("numpy" family) is jitflow's NumPy reference
interpreter running that graph: each op's NumPy reference, the oracle jitflow's own tests hold
the compiled backend to; every other peer's first result is checked against it. JAX writes the
same model with `lax.conv_general_dilated`, `lax.reduce_window` and TF1's Adam formula.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from benchmarks.harness import Case, Runner

__all__ = ["model_cases", "cnn_data", "rnn_data"]

ADAM = {"lr": 1e-3, "b1": 0.9, "b2": 0.999, "eps": 1e-8}
RNN_LR = 0.05


# -- the LeNet-style CNN: conv5x5x32 - pool - conv5x5x64 - pool - fc1024 - fc10, Adam -------------
def cnn_data(batch: int, size: int = 28, channels: tuple = (32, 64), hidden: int = 1024,
             classes: int = 10) -> Callable:
    c1, c2 = channels
    flat = (size // 4) * (size // 4) * c2

    def make(rng: np.random.Generator) -> dict:
        f32 = np.float32

        def init(*shape, scale):
            return (rng.standard_normal(shape) * scale).astype(f32)

        return {"X": rng.random((batch, size, size, 1), dtype=f32),
                "Y": np.eye(classes, dtype=f32)[rng.integers(0, classes, batch)],
                "params": (init(5, 5, 1, c1, scale=0.1), np.full(c1, 0.1, f32),
                           init(5, 5, c1, c2, scale=0.05), np.full(c2, 0.1, f32),
                           init(flat, hidden, scale=0.02), np.full(hidden, 0.1, f32),
                           init(hidden, classes, scale=0.05), np.zeros(classes, f32))}

    return make


CNN_NEEDS = ("Variable", "nn.conv2d", "nn.max_pool", "nn.relu", "matmul", "reshape",
             "train.AdamOptimizer", "global_variables_initializer",
             "nn.softmax_cross_entropy_with_logits_v2|nn.softmax_cross_entropy_with_logits")


def _cnn_build(api: Any, d: dict) -> Callable:
    def build(tf):
        X = tf.placeholder(tf.float32, [None] + list(d["X"].shape[1:]), name="X")
        Y = tf.placeholder(tf.float32, [None, d["Y"].shape[1]], name="Y")
        params = [tf.Variable(p) for p in d["params"]]
        w1, b1, w2, b2, w3, b3, w4, b4 = params
        h = tf.nn.relu(tf.nn.conv2d(X, w1, [1, 1, 1, 1], "SAME") + b1)
        h = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        h = tf.nn.relu(tf.nn.conv2d(h, w2, [1, 1, 1, 1], "SAME") + b2)
        h = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        h = tf.reshape(h, [-1, int(d["params"][4].shape[0])])
        h = tf.nn.relu(tf.matmul(h, w3) + b3)
        logits = tf.matmul(h, w4) + b4
        loss = tf.reduce_mean(api.xent(labels=Y, logits=logits))
        train = tf.train.AdamOptimizer(ADAM["lr"], ADAM["b1"], ADAM["b2"],
                                       ADAM["eps"]).minimize(loss)
        return X, Y, params, loss, train

    return build


def _graph_step(api: Any, d: dict, build: Callable) -> Runner:
    """A training step run through a TF1 session: (first loss, parameters after it) checked."""
    from benchmarks.cases import _in_graph
    (X, Y, params, loss, train), sess = _in_graph(api, build, init=True)

    def step_on(xv, yv):
        return sess.run([train, loss], feed_dict={X: xv, Y: yv})[1]

    return Runner(lambda: step_on(d["X"], d["Y"]),
                  result=lambda first: (first, *sess.run(params)), close=sess.close,
                  call=step_on)


def _reference(build_of: Callable) -> Callable:
    """The reference runner of a model case: jitflow's NumPy reference interpreter."""

    def make(m: Any, d: dict) -> Runner:
        import jitflow
        from benchmarks.peers import GraphAPI
        api = GraphAPI(jitflow, lambda g: jitflow.Session(graph=g, backend="interpreter"))
        return _graph_step(api, d, build_of(api, d))

    return make


def cnn_graph(api: Any, d: dict) -> Runner:
    return _graph_step(api, d, _cnn_build(api, d))


def _adam_jax(jax: Any, jnp: Any, loss_fn: Callable) -> Callable:
    """One step of TF1's Adam (its epsilon-hat form) on a tuple of parameters."""
    lr, b1, b2, eps = ADAM["lr"], ADAM["b1"], ADAM["b2"], ADAM["eps"]

    def step(state, x, y):
        params, m, v, t = state
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        t = t + 1
        lr_t = lr * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        m = tuple(b1 * a + (1 - b1) * g for a, g in zip(m, grads))
        v = tuple(b2 * a + (1 - b2) * g * g for a, g in zip(v, grads))
        params = tuple(p - lr_t * a / (jnp.sqrt(b) + eps) for p, a, b in zip(params, m, v))
        return (params, m, v, t), loss

    return step


def cnn_jax(m: Any, d: dict) -> Runner:
    jax, jnp = m.jax, m.jnp
    lax = jax.lax
    dn = ("NHWC", "HWIO", "NHWC")

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME")

    def loss_fn(params, x, y):
        w1, b1, w2, b2, w3, b3, w4, b4 = params
        h = pool(jax.nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME",
                                                      dimension_numbers=dn) + b1))
        h = pool(jax.nn.relu(lax.conv_general_dilated(h, w2, (1, 1), "SAME",
                                                      dimension_numbers=dn) + b2))
        h = jax.nn.relu(h.reshape(h.shape[0], -1) @ w3 + b3)
        logits = h @ w4 + b4
        return jnp.mean(-jnp.sum(y * jax.nn.log_softmax(logits), axis=1))

    return _jax_trainer(jax, jnp, loss_fn, d)


def _jax_trainer(jax: Any, jnp: Any, loss_fn: Callable, d: dict, sgd: float = 0.0) -> Runner:
    if sgd:
        def step(state, x, y):
            params = state
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            return tuple(p - sgd * g for p, g in zip(params, grads)), loss
        state = [tuple(jax.device_put(p) for p in d["params"])]
        params_of = lambda s: s   # noqa: E731
    else:
        step = _adam_jax(jax, jnp, loss_fn)
        zeros = tuple(jnp.zeros_like(p) for p in d["params"])
        state = [(tuple(jax.device_put(p) for p in d["params"]), zeros, zeros,
                  jnp.float32(0))]
        params_of = lambda s: s[0]   # noqa: E731
    f = jax.jit(step)

    def step_on(x, y):
        state[0], loss = f(state[0], x, y)
        return jax.block_until_ready(loss)

    X, Y = jax.device_put(d["X"]), jax.device_put(d["Y"])
    return Runner(lambda: step_on(X, Y), result=lambda loss: (loss, *params_of(state[0])),
                  call=step_on)


# -- the unrolled tanh RNN: h_t = tanh(x_t Wx + h_{t-1} Wh + b), squared error, SGD --------------
def rnn_data(batch: int = 32, steps: int = 20, hidden: int = 128, inputs: int = 32) -> Callable:
    def make(rng: np.random.Generator) -> dict:
        f32 = np.float32
        return {"X": rng.standard_normal((steps, batch, inputs)).astype(f32),
                "Y": rng.standard_normal((batch, 1)).astype(f32),
                "params": ((rng.standard_normal((inputs, hidden)) * 0.1).astype(f32),
                           (rng.standard_normal((hidden, hidden)) * 0.1).astype(f32),
                           np.zeros(hidden, f32),
                           (rng.standard_normal((hidden, 1)) * 0.1).astype(f32))}

    return make


RNN_NEEDS = ("Variable", "matmul", "tanh", "unstack", "reduce_mean",
             "train.GradientDescentOptimizer", "global_variables_initializer")


def _rnn_build(api: Any, d: dict) -> Callable:
    steps, _, n_in = d["X"].shape

    def build(tf):
        X = tf.placeholder(tf.float32, [steps, None, n_in], name="X")
        Y = tf.placeholder(tf.float32, [None, 1], name="Y")
        params = [tf.Variable(p) for p in d["params"]]
        wx, wh, b, wo = params
        h = tf.zeros_like(tf.matmul(X[0], wx))
        for x_t in tf.unstack(X):
            h = tf.tanh(tf.matmul(x_t, wx) + tf.matmul(h, wh) + b)
        loss = tf.reduce_mean(tf.square(tf.matmul(h, wo) - Y))
        train = tf.train.GradientDescentOptimizer(RNN_LR).minimize(loss)
        return X, Y, params, loss, train

    return build


def rnn_graph(api: Any, d: dict) -> Runner:
    return _graph_step(api, d, _rnn_build(api, d))


def rnn_jax(m: Any, d: dict) -> Runner:
    jax, jnp = m.jax, m.jnp

    def loss_fn(params, x, y):
        wx, wh, b, wo = params
        h = jnp.zeros((x.shape[1], wh.shape[0]), x.dtype)
        for t in range(x.shape[0]):   # unrolled, as the graph
            h = jnp.tanh(x[t] @ wx + h @ wh + b)
        return jnp.mean(jnp.square(h @ wo - y))

    return _jax_trainer(jax, jnp, loss_fn, d, sgd=RNN_LR)


def model_cases(tiny: bool = False) -> list:
    """The CNN (batch 32 and 128) and RNN training-step cases ("cnn", "rnn" groups)."""
    cnn_batches = (2,) if tiny else (32, 128)
    out = []
    for b in cnn_batches:
        data = cnn_data(b, size=8, channels=(2, 3), hidden=8, classes=3) if tiny \
            else cnn_data(b)
        out.append(Case(f"cnn/b{b}", f"LeNet-style CNN + Adam step, batch {b}, f32", "cnn",
                        data, {"numpy": _reference(_cnn_build), "graph": cnn_graph,
                               "jax": cnn_jax},
                        rtol=2e-3, atol=2e-4, metric="rate", needs=CNN_NEEDS,
                        params={"batch": b}))
    batch, steps, hidden = (2, 3, 4) if tiny else (32, 20, 128)
    data = rnn_data(batch, steps, hidden, 3 if tiny else 32)
    out.append(Case(f"rnn/b{batch}",
                    f"unrolled tanh RNN (h{hidden}, {steps} steps) SGD step, batch {batch}, f32",
                    "rnn", data,
                    {"numpy": _reference(_rnn_build), "graph": rnn_graph, "jax": rnn_jax},
                    rtol=2e-3, atol=2e-4, metric="rate", needs=RNN_NEEDS))
    return out
