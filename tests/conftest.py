"""Shared fixtures: a fresh default graph per test and the backend parametrization."""
from __future__ import annotations

import os

import pytest

# runs wait for their kernels (tests count compilations and compare backends run by run);
# tests of the background compiler set JITFLOW_COMPILE themselves
os.environ.setdefault("JITFLOW_COMPILE", "sync")
# the cuda backend's tests run on Numba's CUDA simulator unless a real GPU is asked for (it
# must be decided before numba.cuda is imported)
if os.environ.get("JITFLOW_CUDA_REAL", "0") in ("", "0"):
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
os.environ.setdefault("JITFLOW_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..",
                                                         ".cache", "jitflow-tests"))


def _private_repo_cache(path: str) -> None:
    """jitflow refuses a kernel cache that group or others can write (it would load their
    pickles). The tests' caches live in the repository's .cache/: create them 0700, and take
    the write bits a checkout made under umask 002 gave them (other folders: left alone)."""
    repo_cache = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".cache"))
    path = os.path.realpath(path)
    if os.path.commonpath([path, repo_cache]) != repo_cache:
        return
    for d in (path, os.path.join(path, "__pycache__")):
        os.makedirs(d, mode=0o700, exist_ok=True)
        st = os.stat(d)
        if st.st_uid == os.getuid() and st.st_mode & 0o022:
            os.chmod(d, st.st_mode & 0o755)


_private_repo_cache(os.environ["JITFLOW_CACHE_DIR"])

import jitflow as tf  # noqa: E402
from jitflow.core.session import _BACKENDS  # noqa: E402


def available_backends() -> list:
    return [b for b in ("interpreter", "numba") if b in _BACKENDS]


@pytest.fixture(autouse=True)
def _fresh_graph():
    """Every test starts with an empty default graph and no default session."""
    from jitflow.core.session import _clear_default_sessions
    from jitflow.core.graph import _graph_stack
    from jitflow.backends import base
    # once-per-process warnings ("op type X has no code generator") are per test here: a test
    # expecting one must not depend on which tests ran before it in the same worker
    base.WARNED_OPS.clear()
    _graph_stack().clear()
    _clear_default_sessions()
    tf.reset_default_graph()
    yield
    # a test that compiled in the background leaves no job behind to finish (and count
    # compilations) during the next test
    from jitflow.backends.numba_cpu import background
    assert background.wait_idle(600), "background compiler still busy after 600 s"
    _graph_stack().clear()
    _clear_default_sessions()


@pytest.fixture(params=available_backends())
def backend(request, monkeypatch) -> str:
    """Run the test once per backend; `tf.Session()` picks it up from JITFLOW_BACKEND."""
    monkeypatch.setenv("JITFLOW_BACKEND", request.param)
    return request.param


def _xdist_loses_groups() -> bool:
    """pytest 9.2 keeps node ids in a structured field that pytest-xdist 3.8's loadgroup does
    not write, so its xdist_group marks are silently ignored (pytest-xdist issue 1386)."""
    try:
        import xdist
    except ImportError:
        return False
    xv = tuple(int(p) for p in xdist.__version__.split(".")[:2] if p.isdigit())
    return tuple(pytest.version_tuple[:2]) >= (9, 2) and xv <= (3, 8)


def pytest_configure(config):
    if (getattr(config.option, "dist", "no") == "loadgroup"
            and not hasattr(config, "workerinput") and _xdist_loses_groups()):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with pytest-xdist ignores xdist_group marks under "
            "--dist loadgroup, which these tests need (one Dask cluster, one benchmark "
            "table); install the test extra's pytest (pip install -e '.[test]')")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """JITFLOW_TEST_SHUFFLE=<seed> runs the tests in a shuffled order (to find tests that
    depend on what ran before them in the same process). Under `--dist loadgroup` an
    `xdist_group` test must carry its group in its node id (pytest-xdist's side channel to
    the scheduler): where a pytest version loses it, the groups would silently split over
    the workers (the Dask tests would start a cluster on each), so the run stops instead."""
    if getattr(config.option, "loadgroup", False):
        lost = [it.nodeid for it in items
                if it.get_closest_marker("xdist_group") and "@" not in it.nodeid.rsplit("]", 1)[-1]]
        if lost:
            pytest.exit(
                f"pytest {pytest.__version__} with pytest-xdist does not keep xdist_group "
                f"marks ({lost[0]} has no @group suffix); install the test extra's pytest", 4)
    seed = os.environ.get("JITFLOW_TEST_SHUFFLE")
    if seed:
        import random
        random.Random(int(seed)).shuffle(items)
