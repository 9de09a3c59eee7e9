"""`tf.compat`'s string and path helpers and the version constants TF1 programs read."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import jitflow as tf


class _BytesPath(os.PathLike):
    def __fspath__(self):
        return b"/x/y"


def test_string_helpers():
    c = tf.compat
    assert c.as_bytes("ab") == b"ab" and c.as_bytes(b"ab") == b"ab"
    assert c.as_bytes(bytearray(b"ab")) == b"ab" and type(c.as_bytes(bytearray(b"a"))) is bytes
    assert c.as_bytes("é") == b"\xc3\xa9" and c.as_bytes("é", "latin-1") == b"\xe9"
    assert c.as_text(b"\xc3\xa9") == "é" and c.as_text("x") == "x"
    assert c.as_str is c.as_text and c.as_str(b"ab") == "ab"
    assert c.as_str_any(b"ab") == "ab" and c.as_str_any(3) == "3"
    assert c.as_str_any(pathlib.Path("/a/b")) == "/a/b" and c.as_str_any([1]) == "[1]"
    assert c.path_to_str(pathlib.Path("/a/b")) == "/a/b" and c.path_to_str(_BytesPath()) == "/x/y"
    assert c.path_to_str(3) == 3 and c.path_to_str("p") == "p"
    for f, bad in ((c.as_bytes, 3), (c.as_text, 3), (c.as_str, None), (c.as_text, bytearray())):
        with pytest.raises(TypeError, match="Expected binary or unicode string, got"):
            f(bad)
    with pytest.raises(UnicodeEncodeError):
        c.as_bytes("é", "ascii")
    assert c.bytes_or_text_types == (bytes, str)
    assert isinstance(np.int8(1), c.integral_types) and not isinstance(1.5, c.integral_types)
    assert isinstance(np.float32(1), c.real_types) and isinstance(1j, c.complex_types)
    assert c.dimension_value(tf.Dimension(3)) == 3 and c.dimension_value(None) is None
    assert c.dimension_at_index(tf.TensorShape([None, 3]), 1).value == 3
    assert tf.compat.v1.as_dtype is tf.as_dtype


def test_string_helpers_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    cases = [("as_bytes", ("ab",)), ("as_bytes", (bytearray(b"ab"),)), ("as_text", (b"ab",)),
             ("as_str", (b"\xc3\xa9",)), ("as_str_any", (b"x",)), ("as_str_any", (3,)),
             ("as_str_any", (pathlib.Path("/a"),)), ("path_to_str", (pathlib.Path("/a"),)),
             ("path_to_str", (_BytesPath(),)), ("path_to_str", (3,)),
             ("as_bytes", (3,)), ("as_text", (bytearray(b"ab"),)), ("as_str", (None,))]
    def outcome(mod, name, args):
        try:
            return getattr(mod.compat, name)(*args)
        except Exception as e:  # noqa: BLE001  (the class and message are compared)
            return type(e), str(e)

    for name, args in cases:
        assert outcome(tf, name, args) == outcome(tf1, name, args), (name, args)
    for name in ("bytes_or_text_types", "integral_types", "real_types", "complex_types"):
        assert getattr(tf.compat, name) == getattr(tf1.compat, name)


def test_versions():
    # the TF API jitflow implements: TF1 programs take their graph-mode branch on it
    assert tf.VERSION == tf.version.VERSION == tf.compat.v1.VERSION == "1.15.5"
    assert tf.VERSION.startswith("1.") and int(tf.VERSION.split(".")[0]) < 2
    assert tf.__version__ == "0.3.0" != tf.VERSION      # the package keeps its own version
    assert tf.GIT_VERSION == tf.version.GIT_VERSION == "jitflow-v0.3.0"
    import llvmlite
    assert tf.COMPILER_VERSION == tf.version.COMPILER_VERSION == f"llvmlite {llvmlite.__version__}"
    assert tf.GRAPH_DEF_VERSION == tf.version.GRAPH_DEF_VERSION == 27
    assert (tf.GRAPH_DEF_VERSION_MIN_CONSUMER, tf.GRAPH_DEF_VERSION_MIN_PRODUCER) == (0, 0)
    from jitflow.serialize.graph_def import GRAPH_DEF_PRODUCER
    assert tf.get_default_graph().as_graph_def().versions.producer == GRAPH_DEF_PRODUCER == 27


def test_import_stays_light():
    code = ("import sys, jitflow as tf; tf.VERSION; tf.compat.as_bytes('x'); "
            "assert not {'google.protobuf', 'llvmlite', 'numba'} & set(sys.modules), "
            "sorted({'google.protobuf', 'llvmlite', 'numba'} & set(sys.modules))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
