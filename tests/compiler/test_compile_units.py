"""The unit of compilation: long plans are split into kernels cut by content (partition.py), so
repeated structure compiles once and nothing is too large to compile; the background compiler
(background.py) lets runs proceed on the references until kernels are ready, with the same
answers as waiting for them."""
from __future__ import annotations

import os
import re
import threading
import warnings

import numpy as np
import pytest

import jitflow as tf
from helpers import assert_same_result
from jitflow.backends.numba_cpu import background
from jitflow.compiler import partition
from jitflow.backends.numba_cpu.executable import Executable
from jitflow.backends.numba_cpu.kernels import Compiled
from jitflow.compiler.program import Segment


class _Op:
    """Just enough of an Operation for the partitioner."""

    class _T:
        def __init__(self, op, i=0):
            self.op, self.value_index = op, i
            self.dtype = type("D", (), {"name": "float32"})()

    def __init__(self, type_, inputs=()):
        self.type = type_
        self.inputs = [self._T(src) for src in inputs]
        self.outputs = [self._T(self)]


def _periodic(n_periods: int, prelude: int = 5) -> list:
    ops = [_Op("Placeholder")]
    for _ in range(prelude):
        ops.append(_Op("Exp", [ops[-1]]))
    for _ in range(n_periods):
        a = _Op("MatMul", [ops[-1], ops[0]])
        b = _Op("Add", [a, ops[-1]])
        ops += [a, b, _Op("Tanh", [b])]
    return ops


def _shape(chunk) -> tuple:
    return tuple(op.type for op in chunk)


def test_short_runs_stay_one_kernel():
    ops = _periodic(10)
    assert partition.split(ops, above=len(ops)) == [ops]


def test_repeated_structure_is_cut_into_identical_chunks_no_longer_than_the_window():
    ops = _periodic(200)
    chunks = partition.split(ops, above=10, window=24)
    assert [op for c in chunks for op in c] == ops   # no Const here: nothing repeated
    assert all(len(c) <= 24 for c in chunks)
    middle = {_shape(c) for c in chunks[1:-1]}
    assert len(middle) == 1, middle    # every chunk but the first and last is the same


def test_cuts_do_not_depend_on_what_comes_long_before():
    a = _periodic(100, prelude=3)
    b = _periodic(100, prelude=11)
    sa = {_shape(c) for c in partition.split(a, above=10, window=24)[1:-1]}
    sb = {_shape(c) for c in partition.split(b, above=10, window=24)[1:-1]}
    assert sa == sb


def test_a_chunk_reading_a_computed_shape_repeats_its_computation():
    x = tf.placeholder(tf.float32, [None, 3])
    n = tf.shape(x)[0]
    h = x
    for _ in range(12):
        h = tf.exp(h) * 0.5
    z = tf.zeros(tf.stack([n, 3])) + h
    ops = [op for op in tf.get_default_graph().get_operations() if op.type != "Placeholder"]
    chunks = partition.split(ops, above=4, window=4)
    fill = next(c for c in chunks if z.op.inputs[0].op in c)
    types = [op.type for op in fill]
    # the Fill's chunk computes the shape itself (Shape, StridedSlice, Pack), so its dims lower
    # symbolically rather than arriving as a runtime value
    assert {"Shape", "StridedSlice", "Pack", "Fill"} <= set(types), types
    assert chunks[0][0].type == "Shape" and types.count("Shape") == 1


def _kernels(sess) -> list:
    """(segments, distinct compiled kernels) of every executable of `sess`."""
    segs, fns = 0, set()
    for spec in sess._specs.values():
        ex = spec.executable
        if not isinstance(ex, Executable):
            continue
        for s in ex.steps:
            if isinstance(s, Segment):
                segs += 1
                fns.update(id(c.fn) for c in ex.kernels[s].compiled.values()
                           if isinstance(c, Compiled))
    return segs, fns


def _rnn(steps: int, train: bool = False):
    rng = np.random.default_rng(0)
    x = tf.placeholder(tf.float32, [None, steps, 4])
    wx = tf.Variable(rng.standard_normal((4, 8)).astype(np.float32) * 0.3)
    wh = tf.Variable(rng.standard_normal((8, 8)).astype(np.float32) * 0.3)
    h = tf.zeros([tf.shape(x)[0], 8])
    for x_t in tf.unstack(x, axis=1):
        h = tf.tanh(tf.matmul(x_t, wx) + tf.matmul(h, wh))
    loss = tf.reduce_mean(tf.square(h))
    fetch = [loss, tf.train.GradientDescentOptimizer(0.1).minimize(loss)] if train else loss
    feed = {x: rng.standard_normal((3, steps, 4)).astype(np.float32)}
    return fetch, feed


def _distinct_kernels(steps: int, train: bool) -> tuple:
    tf.reset_default_graph()
    fetch, feed = _rnn(steps, train)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(fetch, feed)
        segs, fns = _kernels(sess)
    with tf.Session(backend="interpreter") as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(fetch, feed)
    assert_same_result(out, want, 1e-5, 1e-5)
    return segs, len(fns)


@pytest.fixture
def small_kernels(monkeypatch):
    """Split runs longer than 16 ops into kernels of at most 16 (quick to compile)."""
    monkeypatch.setattr(partition, "SPLIT_ABOVE", 16)
    monkeypatch.setattr(partition, "WINDOW", 16)


def test_unrolled_rnn_compiles_its_repeated_kernels_once(small_kernels):
    # the training step (its forward half is the forward plan's chunks, cut at the same phase)
    # (24 and 48 steps: 15 distinct kernels each; the smallest pair where the repetition already
    # covers whole chunks, each distinct kernel a Numba compile of about 1.4 s)
    sizes = {steps: _distinct_kernels(steps, True) for steps in (24, 48)}
    (s32, k32), (s64, k64) = sizes[24], sizes[48]
    # twice the steps: more kernels run, but once the repetition is long enough only
    # the chunks where it starts and ends are distinct: the repeated middle compiles once
    assert s64 > s32 + 8, sizes
    assert k64 <= k32, sizes   # no more distinct kernels for twice the steps
    assert k64 < s64 / 2, sizes


def _tanh_stack(seed: int, width: int, depth: int, scale: float):
    """`depth` tanh(h @ w) layers of `width` units, a mean-square loss and its SGD step:
    (loss, train, feed)."""
    rng = np.random.default_rng(seed)
    x = tf.placeholder(tf.float32, [None, width])
    h = x
    for k in range(depth):
        w = tf.Variable(rng.standard_normal((width, width)).astype(np.float32) * scale,
                        name=f"w{k}")
        h = tf.tanh(tf.matmul(h, w))
    loss = tf.reduce_mean(tf.square(h))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    return loss, train, {x: rng.standard_normal((5, width)).astype(np.float32)}


def test_training_and_evaluation_share_kernels(small_kernels):
    loss, train, feed = _tanh_stack(1, 16, 24, 0.25)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(loss, feed)
        segs_eval, eval_fns = _kernels(sess)
        sess.run(train, feed)
        segs_all, all_fns = _kernels(sess)
    # the training signature reuses kernels the evaluation one built: fewer new kernels than
    # the training plan has segments
    segs_train = segs_all - segs_eval
    new = len(all_fns - eval_fns)
    assert eval_fns and new < segs_train, (len(eval_fns), new, segs_train)


def test_five_thousand_ops_compile_without_falling_back():
    x = tf.placeholder(tf.float64, [None, 3])
    y = x
    for _ in range(1250):
        y = tf.tanh(y * 0.5 + 0.25) - 0.125 * y
    feed = {x: np.linspace(-1, 1, 6).reshape(2, 3)}
    assert len(tf.get_default_graph().get_operations()) >= 5000
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with tf.Session() as sess:
            out = sess.run(y, feed)
            segs, fns = _kernels(sess)
    with tf.Session(backend="interpreter") as sess:
        want = sess.run(y, feed)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    assert segs >= 5000 // partition.WINDOW and 1 <= len(fns) <= 4


def _levels(sess) -> list:
    """The code level of every kernel the session's executables hold."""
    return [c.level for spec in sess._specs.values()
            if isinstance(spec.executable, Executable)
            for s in spec.executable.steps if isinstance(s, Segment)
            for c in spec.executable.kernels[s].compiled.values()]


def test_auto_mode_gives_the_bits_of_sync_mode(monkeypatch):
    """The default mode runs quick code first and optimized code later; every run gives the
    bits sync mode (optimized code at once) gives, and all kernels end on optimized code."""
    fetch, feed = _rnn(12, train=True)
    init = tf.global_variables_initializer()
    results = {}
    for mode in ("auto", "sync"):
        monkeypatch.setenv("JITFLOW_COMPILE", mode)
        with tf.Session() as sess:
            sess.run(init)
            runs = [sess.run(fetch, feed)[0] for _ in range(3)]
            assert background.wait_idle(600)
            runs += [sess.run(fetch, feed)[0] for _ in range(3)]
            levels = _levels(sess)
        results[mode] = runs
        assert levels and set(levels) == {"opt"}, levels
    for a, b in zip(results["auto"], results["sync"]):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def _long_chain(x, k: float):
    """More ops than get optimized code on their first run (kernels._OPT_NOW_OPS)."""
    y = x
    for i in range(24):
        y = tf.tanh(y * (k + i / 64.0)) - 0.29 * y
    return tf.reduce_sum(y)


def test_auto_mode_answers_while_the_compiler_thread_is_busy(monkeypatch, tmp_path):
    """A run never waits for the compiler thread: a large kernel runs its quick code (built on
    the run path in milliseconds) while the optimized code waits in the queue."""
    monkeypatch.setenv("JITFLOW_COMPILE", "auto")
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(tmp_path))   # no optimized object on disk
    x = tf.placeholder(tf.float32, [None])
    y = _long_chain(x, 0.37)
    gate = threading.Event()
    background.submit(gate.wait)                      # hold the compiler thread
    xv = np.arange(4, dtype=np.float32) / 4
    try:
        with tf.Session() as sess:
            first = sess.run(y, {x: xv})
            assert _levels(sess) == ["quick"]
            gate.set()
            assert background.wait_idle(600)
            later = sess.run(y, {x: xv})
            assert _levels(sess) == ["opt"]
    finally:
        gate.set()
    assert first.tobytes() == later.tobytes()
    with tf.Session(backend="interpreter") as sess:
        np.testing.assert_allclose(first, sess.run(y, {x: xv}), rtol=1e-5)


# -- lowerings that save compile time ---------------------------------------------------------
@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_sums_over_leading_axes_accumulate_in_float64_and_match_the_interpreter(dtype):
    x = tf.placeholder(dtype, [None, 3, 4])
    xx = x * 2.0
    fetches = [tf.reduce_sum(xx, 0), tf.reduce_mean(xx, [0, 1]),
               tf.reduce_sum(xx, 0, keepdims=True), tf.reduce_mean(xx, 0) + 1.0]
    rng = np.random.default_rng(3)
    for n in (0, 1, 5):
        feed = {x: rng.standard_normal((n, 3, 4))}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # NumPy: mean of empty slice
            with tf.Session() as sess:
                got = sess.run(fetches, feed)
                src = sess.inspect(fetches, feed)
            with tf.Session(backend="interpreter") as sess:
                want = sess.run(fetches, feed)
        assert src.count("np.float64(0.0)") >= 4   # a float64 accumulator per reduction
        assert_same_result(got, want, 1e-6, 1e-6)


def test_a_gradient_passed_through_unchanged_is_shared_not_copied(small_kernels):
    fetch, feed = _rnn(12, train=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(fetch, feed)
        sources = [c.tagged for spec in sess._specs.values()
                   if isinstance(spec.executable, Executable) and not spec.executable.single
                   for _, c in spec.executable.sources(None, sess._store)]
    # an Unbroadcast that changes nothing (same shape) passes its stored gradient on: no loop
    # copies one array into another (each would cost compile time and a pass over memory)
    copy = re.compile(r"^\s*f_b\d+\[i\] = f_[ab]\d+\[i\]\s+# .*Unbroadcast")
    copies = [line for src in sources for line in src.splitlines() if copy.match(line)]
    assert sources and not copies, copies


def test_random_ops_draw_the_same_numbers_whichever_tier_runs(monkeypatch):
    """A run that falls back to the references (a failed check) or switches code must not
    draw its random numbers twice: the default mode gives sync mode's sequence."""
    tf.set_random_seed(3)
    x = tf.placeholder(tf.float32, [None, 4])
    w = tf.Variable(np.ones((4, 3), np.float32))
    d = tf.nn.dropout(tf.matmul(x, w), keep_prob=0.5)
    loss = tf.reduce_sum(d * d) + tf.reduce_sum(tf.random_normal([2, 3], seed=5))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    init = tf.global_variables_initializer()
    feed = {x: np.ones((5, 4), np.float32)}
    seen = {}
    for mode in ("sync", "auto"):
        monkeypatch.setenv("JITFLOW_COMPILE", mode)
        with tf.Session() as sess:
            sess.run(init)
            out = []
            for i in range(12):
                out.append(sess.run([loss, train], feed)[0])
                if i == 3:
                    assert background.wait_idle(600)
            out.append(sess.run(w))
            with pytest.raises(ValueError):
                sess.run(loss, {x: np.ones((5, 3), np.float32)})   # wrong shape: no draw
            out.append(sess.run(loss, feed))
        seen[mode] = out
    with tf.Session(backend="interpreter") as sess:
        sess.run(init)
        want = [sess.run([loss, train], feed)[0] for _ in range(12)] + [sess.run(w)]
        want.append(sess.run(loss, feed))
    assert_same_result(seen["sync"], want, 1e-5, 1e-5)
    assert_same_result(seen["auto"], want, 1e-5, 1e-5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_process_forked_while_kernels_wait_to_compile_compiles_them(monkeypatch):
    monkeypatch.setenv("JITFLOW_COMPILE", "auto")
    x = tf.placeholder(tf.float32, [None])
    y = _long_chain(x, 0.53)                          # a kernel no other test compiles
    gate = threading.Event()
    background.submit(gate.wait)                      # the compiler thread is busy...
    sess = tf.Session()
    feed = {x: np.arange(3, dtype=np.float32)}
    sess.run(y, feed)                                 # ...so the optimized code waits
    pid = os.fork()
    if pid == 0:   # the child: its copy of the job must run on a new compiler thread
        code = 1
        try:
            gate.set()
            if background.wait_idle(120):
                sess.run(y, feed)
                code = 0 if _levels(sess) == ["opt"] else 2
        finally:
            os._exit(code)
    gate.set()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert background.wait_idle(120)
    sess.close()


def test_optimized_code_compiled_in_the_background_serves_the_next_process(tmp_path,
                                                                           monkeypatch):
    """What the compiler thread built is on disk: a new process running the same graph starts
    on the optimized code and compiles nothing (issue 33: the second run is warm)."""
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent("""
        import numpy as np
        import jitflow as tf
        from jitflow.backends.numba_cpu import background, llvmjit
        x = tf.placeholder(tf.float32, [None, 2])
        y = x
        for i in range(24):
            y = tf.tanh(y * (0.61 + i / 64.0)) + 0.17
        y = tf.reduce_max(y, axis=1)
        with tf.Session() as sess:
            out = sess.run(y, {x: np.arange(6, dtype=np.float32).reshape(3, 2)})
            ex = next(iter(sess._specs.values())).executable
            level = [c.level for k in ex.kernels.values() for c in k.compiled.values()]
            background.wait_idle(600)
        print(level, llvmjit.STATS.get("objects_compiled", 0), out.tobytes().hex())
    """)
    env = dict(os.environ, JITFLOW_CACHE_DIR=str(tmp_path), JITFLOW_COMPILE="auto")
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True, timeout=300).stdout.split()
            for _ in range(2)]
    assert runs[0][0] == "['quick']" and int(runs[0][1]) >= 2     # quick, then optimized
    assert runs[1][0] == "['opt']" and runs[1][1] == "0"          # loaded, nothing compiled
    assert runs[0][2] == runs[1][2]


# -- the warm path of split plans (chain.py `Chain`) ------------------------------------------
def _count_chain_runs(monkeypatch) -> list:
    from jitflow.backends.numba_cpu import chain
    calls = []
    real = chain.Chain.run

    def counting(self, feed_values, state):
        try:
            out = real(self, feed_values, state)
        except Exception as e:
            calls.append(type(e).__name__)
            raise
        calls.append(out is not None)
        return out

    monkeypatch.setattr(chain.Chain, "run", counting)
    return calls


def _trajectory(backend: str, steps: int, reload_at: int = -1) -> list:
    tf.reset_default_graph()
    fetch, feed = _rnn(6, train=True)
    w = tf.trainable_variables()[1]
    out = []
    with tf.Session(backend=backend) as sess:
        sess.run(tf.global_variables_initializer())
        for k in range(steps):
            if k == reload_at:   # a new buffer for one variable: the chain must notice
                w.load(np.full(w.shape.as_list(), 0.05, np.float32), sess)
            out.append(sess.run(fetch, feed)[0])
        out.append(sess.run(tf.trainable_variables()))
    return out


def test_warm_split_training_steps_take_the_chain_and_follow_the_interpreter(small_kernels,
                                                                             monkeypatch):
    calls = _count_chain_runs(monkeypatch)
    with warnings.catch_warnings():
        # every chunk compiles, the one making zeros of tf.shape(x)[0] rows included
        warnings.simplefilter("error", RuntimeWarning)
        got = _trajectory("numba", 6, reload_at=4)
    assert_same_result(got, _trajectory("interpreter", 6, reload_at=4), 1e-5, 1e-6)
    # runs 1-2 take the general path (copies, then in place and recorded); 3 and 4 the chain;
    # after the reload the buffers differ: 5 falls back and re-records, 6 takes the chain
    assert calls == [True, True, False, True], calls


def test_the_chain_keeps_rank0_fetch_types_and_falls_back_for_other_feed_kinds(small_kernels,
                                                                              monkeypatch):
    calls = _count_chain_runs(monkeypatch)
    x = tf.placeholder(tf.float32, [None, 4])
    h = x
    for k in range(12):
        h = tf.tanh(h * (0.5 + 0.1 * k) + 0.1)
    total = tf.reduce_sum(h)
    fetches = [total, h, x]
    xv = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    with tf.Session(backend="interpreter") as sess:
        want = sess.run(fetches, {x: xv})
    ro = xv.copy()
    ro.setflags(write=False)
    with tf.Session() as sess:
        for feed in (xv, xv, xv.copy(), ro, xv):
            got = sess.run(fetches, {x: feed})
            assert_same_result(got, want, 1e-6, 1e-6)
            assert type(got[0]) is np.float32
    # a forward plan records on its first run; the read-only feed is another kind of argument:
    # the general path runs it and records a chain for it, which the next writable feed
    # cannot take either
    assert calls == [True, True, False, False], calls


def test_a_failing_check_on_the_chain_raises_tf1s_error_and_the_next_run_recovers(small_kernels,
                                                                           monkeypatch):
    calls = _count_chain_runs(monkeypatch)
    x = tf.placeholder(tf.float32, [None, 3])
    idx = tf.placeholder(tf.int32, [2])
    h = x
    for _ in range(10):
        h = tf.sin(h) + 0.5 * h
    y = tf.gather(h, idx)
    for _ in range(10):
        y = tf.cos(y) * 0.5 - y
    xv = np.arange(12, dtype=np.float32).reshape(4, 3) / 12
    with tf.Session(backend="interpreter") as sess:
        want = sess.run(y, {x: xv, idx: [3, 1]})
    with tf.Session() as sess:
        for _ in range(2):
            assert_same_result(sess.run(y, {x: xv, idx: [3, 1]}), want, 1e-6, 1e-6)
        with pytest.raises(tf.errors.InvalidArgumentError, match="GatherV2|indices"):
            sess.run(y, {x: xv, idx: [4, 1]})
        assert_same_result(sess.run(y, {x: xv, idx: [3, 1]}), want, 1e-6, 1e-6)
    # the chain met the bad index; the general path then gave TF1's error
    assert calls == [True, "CheckFailed", True], calls


def test_a_read_is_repeated_in_a_later_chunk_unless_a_chunk_between_may_write_it():
    for write in (False, True):
        var = _Op("VariableV2")
        read = _Op("Identity", [var])
        ops = [var, read] + ([_Op("AssignAdd", [var, read])] if write else [])
        body = _periodic(20)
        consumer = _Op("Mul", [body[-1], read])
        chunks = partition.split(ops + body + [consumer], above=16, window=16)
        home = next(i for i, c in enumerate(chunks) if consumer in c)
        assert home > 1 and read in chunks[0]
        assert (read in chunks[home]) == (not write), [_shape(c) for c in chunks]


def test_split_training_steps_read_the_weights_in_each_kernel_instead_of_copying(small_kernels):
    loss, train, feed = _tanh_stack(2, 8, 6, 0.4)
    out = {}
    for backend in ("interpreter", "numba"):
        with tf.Session(backend=backend) as sess:
            sess.run(tf.global_variables_initializer())
            out[backend] = [sess.run([train, loss], feed)[1] for _ in range(3)]
            if backend == "numba":
                sources = [c.tagged for spec in sess._specs.values()
                           if isinstance(spec.executable, Executable)
                           and not spec.executable.single
                           for _, c in spec.executable.sources(None, sess._store)]
    assert_same_result(out["numba"], out["interpreter"])
    # the backward kernels use the forward's reads of the weights: each reads the variable
    # itself (no kernel between writes it) rather than a copy handed over by the forward
    copies = [line for src in sources for line in src.splitlines()
              if re.search(r"= v\d+\.copy\(\)", line)]
    assert len(sources) > 2 and not copies, copies


def test_cuts_fall_where_the_fewest_values_cross():
    # independent chains (an optimizer's per-variable updates): inside a chain each cut would
    # hand intermediate values to the next kernel, between chains only the shared input
    ops = [_Op("Placeholder")]
    ends = []
    for _ in range(30):
        a = _Op("Exp", [ops[0]])
        b = _Op("Mul", [a, ops[0]])
        c = _Op("Add", [b, a])
        d = _Op("Sqrt", [c])
        e = _Op("RealDiv", [d, b])
        f = _Op("Tanh", [e])
        ops += [a, b, c, d, e, f]
        ends.append(len(ops) - 1)
    cuts = partition.cut_points(ops, 16)
    assert cuts and set(cuts) <= set(ends), (cuts, ends)


def _graph_ops() -> list:
    return [op for op in tf.get_default_graph().get_operations()
            if op.type not in ("Placeholder", "NoOp")]


def test_a_training_step_of_a_few_hundred_ops_is_one_kernel():
    # every cut returns its crossing values as new arrays and passes them into the next
    # kernel, each step: an unrolled RNN's backward half reads every forward activation, so
    # such a step stays whole unless it is longer than SPLIT_ABOVE
    tf.reset_default_graph()
    _rnn(12, train=True)
    ops = _graph_ops()
    assert 96 < len(ops) <= partition.SPLIT_ABOVE, len(ops)
    assert partition.split(ops) == [ops]
    tf.reset_default_graph()
    _rnn(40, train=True)
    ops = _graph_ops()
    assert len(ops) > partition.SPLIT_ABOVE, len(ops)
    chunks = partition.split(ops)
    assert len(chunks) > 1
    seen: set = set()
    for c in chunks:   # a chunk may also repeat constants and reads made in earlier chunks
        own = [op for op in c if op not in seen]
        assert len(own) <= partition.WINDOW, len(own)
        seen.update(c)
    assert seen == set(ops)


def test_innermost_reductions_weigh_more_than_other_ops():
    # a row reduction becomes 32 lanes of partial sums: long IR for Numba's superlinear
    # passes, so a run full of them is cut sooner; the same run reducing along axis 0 is not,
    # and a short run stays whole either way
    def run_of(axis: int) -> list:
        tf.reset_default_graph()
        h = tf.placeholder(tf.float32, [None, 8])
        for _ in range(60):
            h = h - tf.reduce_mean(h, axis, keepdims=True)
        return _graph_ops()

    rows, cols = run_of(1), run_of(0)
    assert partition.WHOLE_BELOW < len(rows) == len(cols) < partition.SPLIT_ABOVE
    assert partition.weight(cols) == len(cols)
    assert partition.weight(rows) > partition.SPLIT_ABOVE
    assert partition.split(cols) == [cols]
    assert len(partition.split(rows)) > 1
    short = rows[:partition.WHOLE_BELOW]
    assert partition.weight(short) > partition.SPLIT_ABOVE and partition.split(short) == [short]
    # gradients of broadcasting: summing a [n, 8] gradient back to [n, 1] reduces rows, back
    # to a [8] bias reduces the batch axis
    from jitflow.ops.math.common import unbroadcast
    tf.reset_default_graph()
    g = tf.placeholder(tf.float32, [None, 8])
    to_rows = unbroadcast(g, tf.placeholder(tf.float32, [None, 1]))
    to_bias = unbroadcast(g, tf.placeholder(tf.float32, [8]))
    assert to_rows.op.type == to_bias.op.type == "Unbroadcast"
    assert partition._lane_reduction(to_rows.op)
    assert not partition._lane_reduction(to_bias.op)


@pytest.mark.parametrize("make, lanes", [
    (lambda x: tf.argmax(x, 1), True), (lambda x: tf.argmin(x, 0), False),
    (lambda x: tf.argmax(x, -1), True), (lambda x: tf.nn.l2_loss(x), True),
    (lambda x: tf.reduce_max(x), True), (lambda x: tf.reduce_any(x > 0, axis=[0]), False),
    (lambda x: tf.nn.softmax(x), True)])
def test_every_reduction_kind_is_weighed(make, lanes):
    tf.reset_default_graph()
    y = make(tf.placeholder(tf.float32, [None, 5]))
    assert partition._lane_reduction(y.op) is lanes
    assert partition.weight([y.op]) == (partition._LANE_REDUCTION_WEIGHT if lanes else 1)
