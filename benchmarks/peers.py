"""The peers: small loaders that import each competitor and hand the cases what they need.

Families share implementations: "graph" is the TF1 graph API, run by jitflow (each backend) and
by TensorFlow's `tf.compat.v1`, from the same graph-building code; "numpy" is hand-written NumPy
(the reference); "jax" is `jax.jit`; "numba" is a hand-written Numba function (the floor a
compiled Session call can approach). Every loader imports lazily, so a missing peer costs
nothing and says why it is missing.
"""
from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable, Optional, Sequence

import numpy as np

from benchmarks.harness import Peer, Unavailable

__all__ = ["GraphAPI", "JaxMath", "NumpyMath", "PEER_LABELS", "make_peers", "peer_versions"]


# -- math namespaces: the same formula written once, evaluated by each library ------------------
class NumpyMath:
    """The functions the cases' formulas use, in plain NumPy."""

    exp = staticmethod(np.exp)
    tanh = staticmethod(np.tanh)
    square = staticmethod(np.square)

    @staticmethod
    def sigmoid(z):
        return 1 / (1 + np.exp(-z))


class JaxMath:
    """The same functions in jax.numpy; `jax` and `jnp` are the imported modules."""

    def __init__(self, jax: Any, jnp: Any) -> None:
        self.jax, self.jnp = jax, jnp
        self.exp, self.tanh, self.square = jnp.exp, jnp.tanh, jnp.square
        self.sigmoid = jax.nn.sigmoid


class GraphAPI:
    """The TF1 graph API of one graph peer: `tf` is jitflow or `tensorflow.compat.v1`."""

    def __init__(self, tf: Any, make_session: Callable[[Any], Any]) -> None:
        self.tf = tf
        self._make_session = make_session
        self.sigmoid, self.tanh, self.exp = (getattr(tf, n, None) for n in
                                             ("sigmoid", "tanh", "exp"))
        self.square = getattr(tf, "square", None)

    def session(self, graph: Any) -> Any:
        """A session on `graph` configured for this peer (backend, single thread)."""
        return self._make_session(graph)

    def resolve(self, name: str) -> Optional[Any]:
        """The object at dotted `name` ("nn.relu"), the first present of "a|b", else None."""
        for alt in name.split("|"):
            obj = self.tf
            for part in alt.split("."):
                obj = getattr(obj, part, None)
                if obj is None:
                    break
            if obj is not None:
                return obj
        return None

    def xent(self, labels: Any, logits: Any) -> Any:
        """Softmax cross-entropy per row, under whichever TF1 spelling the peer has."""
        fn = self.resolve(XENT)
        return fn(labels=labels, logits=logits)


XENT = "nn.softmax_cross_entropy_with_logits_v2|nn.softmax_cross_entropy_with_logits"


def graph_lacks(api: GraphAPI, needs: Sequence[str]) -> list:
    """The names in `needs` the graph API does not provide (as `tf.<name>`)."""
    return ["tf." + n.split("|")[0] for n in needs if api.resolve(n) is None]


# -- loaders ---------------------------------------------------------------------------------------
def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise Unavailable(f"{module} is not installed (pip install -e '.[bench]')")


def load_numpy() -> NumpyMath:
    """The reference peer: plain NumPy."""
    return NumpyMath()


def load_jitflow(backend: str) -> Callable[[], GraphAPI]:
    """A loader for jitflow with `backend`, refusing a backend that is not registered."""

    def load() -> GraphAPI:
        import jitflow
        from jitflow.core.session import _BACKENDS
        if backend not in _BACKENDS:
            raise Unavailable(f"jitflow backend {backend!r} is not registered (registered: "
                              f"{', '.join(sorted(_BACKENDS))})")
        return GraphAPI(jitflow, lambda g: jitflow.Session(graph=g, backend=backend))

    return load


def load_tf1() -> GraphAPI:
    """TensorFlow's TF1 graph mode: intra-op threads as pinned (one by default), one inter-op."""
    _require("tensorflow")
    import tensorflow as tf
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    v1.logging.set_verbosity(v1.logging.ERROR)
    n = int(os.environ.get("TF_NUM_INTRAOP_THREADS", "1") or 1)  # benchmarks/threads.py
    config = v1.ConfigProto(intra_op_parallelism_threads=n, inter_op_parallelism_threads=1)
    return GraphAPI(v1, lambda g: v1.Session(graph=g, config=config))


def load_jax() -> JaxMath:
    """JAX on the CPU with float64 enabled (the float64 cases need it; float32 stays float32)."""
    _require("jax")
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    return JaxMath(jax, jnp)


def load_numba() -> Any:
    """The numba module, for the hand-written floor."""
    import numba
    return numba


PEER_LABELS = {
    "numpy": "NumPy (hand-written)",
    "jitflow": "jitflow compiled (numba)",
    "jitflow-interp": "jitflow interpreter",
    "tf1": "TF compat.v1 Session",
    "jax": "JAX jit",
    "numba-hand": "hand-written Numba",
}


def make_peers(names: Optional[Sequence[str]] = None) -> list:
    """Fresh Peer objects (nothing imported yet), in table order; `names` selects some."""
    peers = [
        Peer("numpy", "numpy", load_numpy),
        Peer("jitflow", "graph", load_jitflow("numba"), lacks=graph_lacks),
        Peer("jitflow-interp", "graph", load_jitflow("interpreter"), lacks=graph_lacks),
        Peer("tf1", "graph", load_tf1, lacks=graph_lacks),
        Peer("jax", "jax", load_jax),
        Peer("numba-hand", "numba", load_numba),
    ]
    for p in peers:
        p.label = PEER_LABELS[p.name]
    if names is not None:
        unknown = set(names) - {p.name for p in peers}
        if unknown:
            raise ValueError(f"unknown peers: {', '.join(sorted(unknown))}")
        peers = [p for p in peers if p.name in names]
    return peers


def peer_versions() -> dict:
    """Installed versions of the libraries the report names (None when not installed)."""
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for dist in ("numpy", "numba", "llvmlite", "scipy", "tensorflow-cpu", "tensorflow",
                 "jax", "jaxlib", "matplotlib", "jitflow"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    if out["tensorflow-cpu"] and not out["tensorflow"]:
        del out["tensorflow"]  # either distribution provides the module
    elif out["tensorflow"] and not out["tensorflow-cpu"]:
        del out["tensorflow-cpu"]
    return out
