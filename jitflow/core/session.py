"""Session, InteractiveSession and the default-session stack.

`Session.run` maps the fetches (any nesting of list/tuple/namedtuple/dict), checks the feeds,
finds (or builds) the plan for this run signature, hands it to the backend and rebuilds the
fetch structure. Everything but the feed checks and the backend call is memoized per
signature, so a warm run does a few dict lookups.
"""
from __future__ import annotations

import threading
import warnings
import weakref
from typing import Any, Callable, Optional

import numpy as np

from jitflow.core import config as _config
from jitflow.core import graph as _graph
from jitflow.compiler.plan import build_plan
from jitflow.core.dtypes import as_bytes_array, string
from jitflow.core.graph import Graph, Operation, Tensor, get_default_graph
from jitflow.runtime.state import VariableStore
from jitflow.core.structure import flatten, flatten_up_to
from jitflow.runtime import config

__all__ = ["Session", "InteractiveSession", "get_default_session", "register_backend"]


# -- backends ---------------------------------------------------------------------------------
_BACKENDS: dict[str, Callable[[], Any]] = {}


def register_backend(name: str, factory: Callable[[], Any]) -> None:
    """Make `Session(backend=name)` available; `factory()` returns an object with `compile`."""
    _BACKENDS[name] = factory


def _interpreter_factory():
    from jitflow.backends.interpreter import Interpreter
    return Interpreter()


register_backend("interpreter", _interpreter_factory)


def _numba_factory():
    # imports numba only when it compiles
    from jitflow.backends.numba_cpu.backend import NumbaBackend
    return NumbaBackend()


register_backend("numba", _numba_factory)


def _cuda_factory():
    # imports numba.cuda; without a GPU or the simulator it raises saying how to get either
    from jitflow.backends.numba_cuda.driver import CudaBackend
    return CudaBackend()


register_backend("cuda", _cuda_factory)


def default_backend_name() -> str:
    name = config.raw("JITFLOW_BACKEND")
    if name:
        return name.strip()
    return "numba" if "numba" in _BACKENDS else "interpreter"


def _make_backend(name: Optional[str]):
    name = name or default_backend_name()
    try:
        factory = _BACKENDS[name]
    except KeyError:
        raise ValueError(f"Unknown jitflow backend {name!r}; available: "
                         f"{', '.join(sorted(_BACKENDS))}") from None
    return factory()


# -- default sessions ---------------------------------------------------------------------------
_local = threading.local()


def _session_stack() -> list:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def get_default_session() -> Optional["Session"]:
    """The innermost session entered with `as_default()` (or `with Session()`) in this thread."""
    stack = _session_stack()
    return stack[-1] if stack else None


def _clear_default_sessions() -> None:
    _session_stack().clear()


def _session_for(session, graph: Graph, what: str) -> "Session":
    if session is None:
        session = get_default_session()
        if session is None:
            raise ValueError(f"Cannot {what} using `eval()`: No default session is registered. "
                             "Use `with sess.as_default()` or pass an explicit session to "
                             "`eval(session=sess)`")
    if session.graph is not graph:
        raise ValueError(f"Cannot use the given session to {what}: the graph of the element is "
                         "different from the session's graph.")
    return session


# -- fetch mapping --------------------------------------------------------------------------------
def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _fetch_key(fetches):
    """A hashable key describing the fetch structure and its elements."""
    if isinstance(fetches, (Tensor, Operation, str)):
        return fetches
    if isinstance(fetches, (list, tuple)):
        return (type(fetches), tuple([f if type(f) is Tensor or type(f) is Operation
                                      else _fetch_key(f) for f in fetches]))
    if isinstance(fetches, dict):
        return (type(fetches), tuple((k, _fetch_key(v)) for k, v in fetches.items()))
    if fetches is None:
        raise TypeError(f"Fetch argument {fetches!r} has invalid type {type(fetches)!r}")
    try:
        hash(fetches)
    except TypeError:
        raise TypeError(f"Fetch argument {fetches!r} has invalid type {type(fetches)!r}, must "
                        "be a string or Tensor.") from None
    return ("obj", fetches)


class _FetchMapper:
    """Flattens a fetch structure into unique graph elements and rebuilds results."""

    def __init__(self, graph: Graph, fetches) -> None:
        self.tensors: list = []   # unique tensors to compute
        self.targets: list = []   # unique operations to run
        self._index: dict = {}
        self.build = self._map(graph, fetches)

    def _element(self, graph: Graph, fetch):
        try:
            el = graph.as_graph_element(fetch, allow_tensor=True, allow_operation=True)
        except TypeError as e:
            raise TypeError(f"Fetch argument {fetch!r} has invalid type {type(fetch)!r}, must "
                            f"be a string or Tensor. ({e})") from None
        except (ValueError, KeyError) as e:   # another graph's element, a name not in it
            msg = e.args[0] if e.args else str(e)
            raise ValueError(f"Fetch argument {fetch!r} cannot be interpreted as a "
                             f"Tensor. ({msg})") from None
        if isinstance(el, Tensor):
            if el not in self._index:
                self._index[el] = len(self.tensors)
                self.tensors.append(el)
            i = self._index[el]
            return lambda vals: vals[i]
        if el not in self.targets:
            self.targets.append(el)
        return lambda vals: None

    def _map(self, graph, fetches):
        if fetches is None:
            raise TypeError(f"Fetch argument {fetches!r} has invalid type {type(fetches)!r}")
        if hasattr(fetches, "_fetch_parts"):  # a composite (SparseTensor): a value of its parts
            parts, cls = fetches._fetch_parts()
            subs = [self._map(graph, p) for p in parts]
            return lambda vals: cls(*[s(vals) for s in subs])
        if isinstance(fetches, (list, tuple)):
            subs = [self._map(graph, f) for f in fetches]
            if _is_namedtuple(fetches):
                cls = type(fetches)
                return lambda vals: cls(*[s(vals) for s in subs])
            if isinstance(fetches, tuple):
                return lambda vals: tuple(s(vals) for s in subs)
            return lambda vals: [s(vals) for s in subs]
        if isinstance(fetches, dict):
            items = [(k, self._map(graph, v)) for k, v in fetches.items()]
            cls = type(fetches)
            if cls is dict:
                return lambda vals: {k: s(vals) for k, s in items}
            return lambda vals: cls((k, s(vals)) for k, s in items)
        return self._element(graph, fetches)

    def expression(self, graph: Graph, fetches, names: dict) -> Optional[str]:
        """Python source rebuilding the fetch structure from `r<i>` (the value of
        `self.tensors[i]`), for generated runners; objects it needs are added to `names`.
        None for structures only `build` knows how to make (dict and tuple subclasses)."""
        if hasattr(fetches, "_fetch_parts"):
            return None
        if isinstance(fetches, (list, tuple)):
            parts = [self.expression(graph, f, names) for f in fetches]
            if None in parts:
                return None
            cls = type(fetches)
            if cls is list:
                return "[" + ", ".join(parts) + "]"
            if cls is tuple:
                return "(" + "".join(p + ", " for p in parts) + ")"
            if not _is_namedtuple(fetches):
                return None
            name = f"_struct{len(names)}"
            names[name] = cls
            return f"{name}(" + ", ".join(parts) + ")"
        if isinstance(fetches, dict):
            if type(fetches) is not dict:
                return None
            items = []
            for k, v in fetches.items():
                part = self.expression(graph, v, names)
                if part is None:
                    return None
                name = f"_key{len(names)}"
                names[name] = k
                items.append(f"{name}: {part}")
            return "{" + ", ".join(items) + "}"
        el = graph.as_graph_element(fetches, allow_tensor=True, allow_operation=True)
        return f"r{self._index[el]}" if isinstance(el, Tensor) else "None"


class _RunSpec:
    """Everything memoized for one run signature."""

    __slots__ = ("mapper", "feeds", "checks", "plan", "executable", "feed_pos", "fetch_pos",
                 "fetches", "fast")

    def __init__(self, session: "Session", mapper: _FetchMapper, feeds: list,
                 fetches=None) -> None:
        self.mapper = mapper
        self.fetches = fetches
        self.feeds = feeds
        self.checks = [_feed_check(t) for t in feeds]
        self.plan = build_plan(session.graph, mapper.tensors, mapper.targets, feeds)
        pos = {t: i for i, t in enumerate(feeds)}
        self.feed_pos = [pos[t] for t in self.plan.feeds]
        # Fetched tensors that are fed come straight from the feed values.
        self.fetch_pos = [pos.get(t) for t in mapper.tensors]
        for op in self.plan.ops:
            if op.type == "Placeholder" and any(o not in pos for o in op.outputs):
                op.op_def.ref(op)  # raises InvalidArgumentError naming the placeholder
        self.executable = session._backend.compile(self.plan)
        # the backend's generated runner for `Session.run` (feed values in feed order), if any
        maker = getattr(self.executable, "fast_runner", None)
        self.fast = maker(self, session._store, _ordinary_path(session, self)) if maker else None


def _ordinary_path(session: "Session", spec: _RunSpec):
    """`Session.run`'s general path for one spec, as a function of the feed values; holds the
    session weakly, so a spec's generated runner does not keep its session alive."""
    ref = weakref.ref(session)
    checks, build = spec.checks, spec.mapper.build

    def run(args):
        sess = ref()
        if sess is None or sess._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        return build(sess._execute(spec, [c(a) for c, a in zip(checks, args)]))

    return run


def _feed_check(t: Tensor):
    """A function converting one fed value to `t`'s dtype and checking its static shape."""
    npd = np.dtype(t.dtype.as_numpy_dtype)
    dims = t.shape.as_tuple()
    name = t.name
    shape_str = str(t.shape)
    is_string = t.dtype == string

    def check(value):
        if isinstance(value, Tensor) or hasattr(value, "_to_tensor"):
            raise TypeError("The value of a feed cannot be a tf.Tensor object. Acceptable feed "
                            "values include Python scalars, strings, lists, numpy ndarrays, or "
                            "TensorHandles.")
        if is_string:
            try:
                arr = as_bytes_array(value, f"feed for Tensor '{name}'")
            except TypeError as e:
                raise TypeError(f"Cannot feed value {value!r} for Tensor '{name}' of dtype "
                                f"string: {e}") from None
        elif type(value) is np.ndarray and value.dtype == npd:
            arr = value
        else:
            try:
                arr = np.asarray(value, dtype=npd)
            except (TypeError, ValueError) as e:
                raise ValueError(f"Cannot feed value {value!r} for Tensor '{name}' of dtype "
                                 f"{t.dtype.name}: {e}") from None
        if dims is not None:
            shp = arr.shape
            if len(shp) != len(dims) or any(d is not None and d != s
                                            for d, s in zip(dims, shp)):
                raise ValueError(f"Cannot feed value of shape {shp!r} for Tensor '{name}', "
                                 f"which has shape '{shape_str}'")
        return arr

    return check


_MISS = object()  # a generated runner's answer to feeds of another signature


def _expand_composite_feeds(feed_dict: dict) -> dict:
    """A feed_dict whose composite keys (SparseTensor) are replaced by their part tensors."""
    out = {}
    for k, v in feed_dict.items():
        if hasattr(k, "_feed_parts"):
            out.update(k._feed_parts(v))
        else:
            out[k] = v
    return out


def _as_result(v):
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v[()]
    return v


# -- Session ----------------------------------------------------------------------------------
class Session:
    """Runs graph fragments; owns the values of variables for its graph."""

    def __init__(self, target: str = "", graph: Optional[Graph] = None, config=None,
                 backend: Optional[str] = None) -> None:
        self._graph = graph if graph is not None else get_default_graph()
        self._target = target
        # TF's TypeError for a config that is not a ConfigProto; applies what jitflow honours
        self._session_config = _config.session_config(config)
        self._config = self._session_config.proto
        self._closed = False
        self._specs: dict = {}
        self._by_fetches: dict = {}
        self._backend = _make_backend(backend)
        # the variables' values, the random generators and the host state of input pipelines
        # (iterators, queues, readers): passed to every executable
        self._store = VariableStore(self._backend)
        self._default_ctx: list = []
        self._partial_runs = None

    # -- properties -----------------------------------------------------------------------
    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def graph_def(self):
        return self._graph.as_graph_def() if hasattr(self._graph, "as_graph_def") else None

    @property
    def sess_str(self) -> str:
        return self._target

    @property
    def backend(self) -> str:
        return self._backend.name

    @property
    def _state(self) -> VariableStore:
        """The variable store (dict-like: `get`, `in`, `[]` give host values)."""
        return self._store

    @property
    def _resources(self) -> dict:
        """The host state of input pipelines (iterators, queues, readers), keyed by their op."""
        return self._store.resources

    @property
    def _lock(self):
        """The lock under which a run creates a resource (the store's)."""
        return self._store.lock

    # -- context management ------------------------------------------------------------------
    def as_default(self):
        """A context manager making this session the default one."""
        return _DefaultSession(self)

    def __enter__(self) -> "Session":
        g = self._graph.as_default()
        s = self.as_default()
        g.__enter__()
        s.__enter__()
        self._default_ctx.append((g, s))
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        g, s = self._default_ctx.pop()
        s.__exit__(exc_type, exc, tb)
        g.__exit__(exc_type, exc, tb)
        self.close()

    def close(self) -> None:
        self._closed = True
        self._store.closed = True
        self._specs.clear()
        self._by_fetches.clear()
        # wake threads blocked on this session's queues (they raise CancelledError)
        for r in list(self._resources.values()):
            closer = getattr(r, "session_closed", None)
            if closer is not None:
                closer()

    def __del__(self) -> None:
        try:
            self._closed = True
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass

    # -- running ----------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Compute `fetches` given `feed_dict`; returns values in the structure of `fetches`.

        `options`: a `tf.RunOptions`; with a trace level above NO_TRACE and a `run_metadata`
        (a `tf.RunMetadata`), the run records its step statistics there (see
        jitflow/core/trace.py)."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        if options is not None or run_metadata is not None:
            if _config.run_options(options, run_metadata) is not None:
                return self._run_traced(fetches, feed_dict, run_metadata)
        cls = type(fetches)
        fkey = fetches if cls is Tensor or cls is Operation else _fetch_key(fetches)
        if feed_dict:
            # the runner of the last signature with these fetches, if it takes these feeds
            by_dict = self._by_fetches.get(fkey)
            if by_dict is not None:
                out = by_dict(feed_dict)
                if out is not _MISS:
                    return out
            if any(type(k) is not Tensor and isinstance(k, tuple) for k in feed_dict):
                feed_dict = _flat_feeds(feed_dict)
            key = (fkey, *feed_dict)
        else:
            key = (fkey,)
        spec = self._specs.get(key)
        if spec is None:
            if feed_dict and any(hasattr(k, "_feed_parts") for k in feed_dict):
                return self.run(fetches, _expand_composite_feeds(feed_dict), options,
                                run_metadata)
            spec = self._make_spec(fetches, feed_dict)
            self._specs[key] = spec
            maker = getattr(spec.executable, "fast_runner", None)
            if feed_dict and spec.fast is not None and maker is not None:
                self._by_fetches[fkey] = maker(spec, self._store, _ordinary_path(self, spec),
                                               miss=_MISS)
        fast = spec.fast
        if fast is not None:
            return fast(*feed_dict.values()) if feed_dict else fast()
        if feed_dict:
            vals = [chk(v) for chk, v in zip(spec.checks, feed_dict.values())]
        else:
            vals = []
        return spec.mapper.build(self._execute(spec, vals))

    def _run_traced(self, fetches, feed_dict, run_metadata):
        """`run` recording one node statistic per executed op or kernel in `run_metadata`."""
        from jitflow.core import trace   # only traced runs need it
        feed_dict = feed_dict or {}
        if any(type(k) is not Tensor and isinstance(k, tuple) for k in feed_dict):
            feed_dict = _flat_feeds(feed_dict)
        if any(hasattr(k, "_feed_parts") for k in feed_dict):
            feed_dict = _expand_composite_feeds(feed_dict)
        cls = type(fetches)
        fkey = fetches if cls is Tensor or cls is Operation else _fetch_key(fetches)
        key = (fkey, *feed_dict)
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = self._make_spec(fetches, feed_dict)
        vals = [chk(v) for chk, v in zip(spec.checks, feed_dict.values())]
        recorder = trace.StepRecorder(_config.device_name(self.backend))
        if spec.plan.ops or spec.plan.fetches:
            out = trace.run_traced(spec.executable, spec.plan,
                                   [vals[i] for i in spec.feed_pos], self._store, recorder)
        else:
            out = []
        results = [_as_result(vals[p] if p is not None else v)
                   for p, v in zip(spec.fetch_pos, out)]
        recorder.fill(run_metadata)
        return spec.mapper.build(results)

    def _execute(self, spec: _RunSpec, vals: list) -> list:
        if spec.plan.ops or spec.plan.fetches:
            out = spec.executable([vals[i] for i in spec.feed_pos], self._store)
        else:
            out = []
        results = []
        for t_pos, v in zip(spec.fetch_pos, out):
            results.append(_as_result(vals[t_pos] if t_pos is not None else v))
        return results

    def _feed_tensor(self, key) -> Tensor:
        """The tensor a feed_dict key names (TypeError, as TF1, when it names none)."""
        if hasattr(key, "_as_graph_element") and not isinstance(key, (Tensor, Operation)):
            key = key._as_graph_element()
        try:
            return self._graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
        except Exception as e:  # noqa: BLE001  (TF1 turns every failure into TypeError)
            msg = e.args[0] if e.args else str(e)
            raise TypeError(f"Cannot interpret feed_dict key as Tensor: {msg}") from None

    def _make_spec(self, fetches, feed_dict) -> _RunSpec:
        mapper = _FetchMapper(self._graph, fetches)
        feeds = []
        for k in (feed_dict or {}):
            t = self._feed_tensor(k)
            if t in feeds:
                raise ValueError(f"Tensor {t.name} is fed twice in feed_dict")
            feeds.append(t)
        spec = _RunSpec(self, mapper, feeds, fetches)
        if self._session_config.log_device_placement:
            # TensorFlow's placer prints this for the nodes of each new run signature
            device = _config.device_name(self.backend)
            for op in spec.plan.ops:
                print(f"{op.name}: ({op.type}): {device}", flush=True)
        return spec

    def make_callable(self, fetches, feed_list=None, accept_options: bool = False):
        """A function of the `feed_list` values (positional) returning `fetches`' values."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        feed_dict = {f: None for f in (feed_list or [])}
        spec = self._make_spec(fetches, feed_dict)
        checks, build, execute = spec.checks, spec.mapper.build, self._execute
        n = len(checks)
        maker = getattr(spec.executable, "fast_runner", None)
        if maker is not None:
            # the backend's generated runner for this compiled plan (the lowest-overhead path)
            runner = maker(spec, self._store, _ordinary_path(self, spec), positional=True)
            if runner is not None:
                runner.spec = spec
                return runner

        def runner(*args, **kwargs):
            if self._closed:
                raise RuntimeError("Attempted to use a closed Session.")
            if len(args) != n:
                raise TypeError(f"callable expects {n} feed values, got {len(args)}")
            return build(execute(spec, [c(a) for c, a in zip(checks, args)]))

        runner.spec = spec
        return runner

    # -- variable state ----------------------------------------------------------------------
    def _commit_state(self, pending: dict) -> None:
        self._store.commit(pending)

    def _load_variable(self, var_op, value) -> None:
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        self._store.load(var_op, value)

    def _rng_for(self, op) -> np.random.Generator:
        return self._store.rng_for(op)

    def inspect(self, fetches, feed_dict=None) -> str:
        """The generated source for `run(fetches, feed_dict)`, each line tagged `# <op name>`.

        Ops without a code generator are listed as reference steps.
        """
        feed_dict = feed_dict or {}
        spec = self._make_spec(fetches, feed_dict)
        vals = [chk(v) for chk, v in zip(spec.checks, feed_dict.values())]
        describe = getattr(spec.executable, "describe", None)
        if describe is None:
            return "# backend %r runs the plan op by op:\n" % self.backend + spec.plan.as_text()
        return describe([vals[i] for i in spec.feed_pos], self._store)

    def list_devices(self) -> list:
        """The devices this session runs on (`DeviceAttributes`: name, device_type,
        memory_limit_bytes, incarnation), as TF1's `Session.list_devices`."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        return _config.list_devices(self.backend)

    # -- partial runs ------------------------------------------------------------------------
    def partial_run_setup(self, fetches, feeds=None) -> str:
        """Declare the fetches and feeds of a step run over several `partial_run` calls;
        returns its handle (see jitflow/core/partial_run.py)."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        if self._partial_runs is None:
            from jitflow.core.partial_run import PartialRuns   # only partial runs need it
            self._partial_runs = PartialRuns(self)
        return self._partial_runs.setup(fetches, feeds)

    def partial_run(self, handle: str, fetches, feed_dict=None):
        """Feed some of the handle's declared feeds and fetch some of its declared fetches;
        values in the structure of `fetches`."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        if self._partial_runs is None:
            from jitflow.core.errors import InvalidArgumentError
            raise InvalidArgumentError(None, None, "Must run 'setup' before performing "
                                                   "partial runs!")
        return self._partial_runs.run(handle, fetches, feed_dict)


class _DefaultSession:
    def __init__(self, session: Session) -> None:
        self.session = session

    def __enter__(self) -> Session:
        _session_stack().append(self.session)
        return self.session

    def __exit__(self, *exc) -> None:
        stack = _session_stack()
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is self.session:
                del stack[i]
                break


class InteractiveSession(Session):
    """A session that installs itself (and its graph) as the default on construction."""

    _active = 0

    def __init__(self, target: str = "", graph: Optional[Graph] = None, config=None,
                 backend: Optional[str] = None) -> None:
        super().__init__(target, graph, config, backend)
        if InteractiveSession._active:
            warnings.warn("An interactive session is already active. This can cause out-of-"
                          "memory errors in some cases. You must explicitly call "
                          "`InteractiveSession.close()` to release resources held by the other "
                          "session(s).", stacklevel=2)
        InteractiveSession._active += 1
        self._graph_ctx = self._graph.as_default()
        self._graph_ctx.__enter__()
        self._sess_ctx = self.as_default()
        self._sess_ctx.__enter__()
        self._interactive_open = True

    def close(self) -> None:
        super().close()
        if getattr(self, "_interactive_open", False):
            self._interactive_open = False
            InteractiveSession._active -= 1
            self._sess_ctx.__exit__(None, None, None)
            self._graph_ctx.__exit__(None, None, None)


def _flat_feeds(feed_dict: dict) -> dict:
    """A feed_dict whose nested-tuple keys (an LSTMStateTuple, a tuple of them) are replaced
    by their tensors, each fed the matching part of the value, as TF1 allows (the value is
    split only as deep as the key nests: a leaf may be a nested list of numbers)."""
    out: dict = {}
    for k, v in feed_dict.items():
        if isinstance(k, tuple):
            try:
                vs = flatten_up_to(k, v)
            except (TypeError, ValueError):
                raise ValueError(f"The value fed for the nested feed key {k!r} must have the "
                                 f"same structure, got {type(v).__name__}") from None
            out.update(zip(flatten(k), vs))
        else:
            out[k] = v
    return out


_graph.set_session_hooks(_session_for, _clear_default_sessions)
