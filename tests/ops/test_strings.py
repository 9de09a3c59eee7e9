"""String tensors and string ops: values as TF1 gives them (bytes), errors, and host execution
(no fallback warning, the numeric ops around them still compiled)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors
from pipeline_helpers import native_steps


def run(fetches, feed=None, backend=None):
    with tf.Session(backend=backend) as sess:
        return sess.run(fetches, feed)


# -- constants, placeholders, fetches --------------------------------------------------------------
def test_string_constant_fetches_bytes(backend):
    hello = tf.constant("Hello, TensorFlow!")
    assert hello.dtype == tf.string and hello.shape.ndims == 0
    out = run(hello)
    assert out == b"Hello, TensorFlow!" and type(out) is bytes


def test_string_arrays_are_object_arrays_of_bytes(backend):
    c = tf.constant(["a", b"b", "\u00e9"])
    out = run(c)
    assert out.dtype == object and out.tolist() == [b"a", b"b", "\u00e9".encode()]
    padded = run(tf.constant("x", shape=[2, 2]))
    assert padded.shape == (2, 2) and padded.tolist() == [[b"x", b"x"], [b"x", b"x"]]
    assert run(tf.constant(np.array(["u", "v"]))).tolist() == [b"u", b"v"]
    assert run(tf.constant(np.array([b"qr", b"s"], dtype="S2"))).tolist() == [b"qr", b"s"]


def test_string_placeholder_feeds(backend):
    p = tf.placeholder(tf.string, [None])
    s = tf.placeholder(tf.string, [])
    assert run(p, {p: ["x", b"y"]}).tolist() == [b"x", b"y"]
    assert run(p, {p: np.array(["x"])}).tolist() == [b"x"]
    assert run(s, {s: "z"}) == b"z"
    with pytest.raises(ValueError, match="shape"):
        run(p, {p: "scalar"})
    with pytest.raises(TypeError, match="Expected string"):
        run(p, {p: [1, 2]})


def test_string_conversion_errors():
    with pytest.raises(TypeError, match="Expected float32"):
        tf.constant("1.5", dtype=tf.float32)
    with pytest.raises(TypeError, match="Expected string"):
        tf.constant([1, 2], dtype=tf.string)
    with pytest.raises(TypeError):
        tf.placeholder(tf.float32) + "a"


def test_string_equality(backend):
    a = tf.constant(["a", "b", "a"])
    assert run(tf.equal(a, "a")).tolist() == [True, False, True]
    assert run(tf.not_equal(a, tf.constant("b"))).tolist() == [True, False, True]


def test_string_ops_are_host_work_and_numbers_still_compile():
    """A string parse feeding numeric math: the parse runs on the host without a warning,
    the math is one native kernel."""
    rec = tf.placeholder(tf.string, [None])
    a, b = tf.decode_csv(rec, [[0.0], [0.0]])
    y = tf.reduce_sum(a * b + tf.sqrt(tf.abs(a)))
    feed = {rec: ["1,2", "4,0.5"]}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with tf.Session(backend="numba") as sess:
            got = sess.run(y, feed)
            steps = native_steps(sess)
    assert got == pytest.approx(1 * 2 + 1 + 4 * 0.5 + 2)
    assert ("host", "DecodeCSV") in steps
    assert [k for k, _ in steps].count("native") == 1, steps


# -- as_string, join, split -----------------------------------------------------------------------
def test_as_string_formats(backend):
    cases = [
        (tf.as_string([3.14159, -2.0]), [b"3.141590", b"-2.000000"]),
        (tf.as_string([3.14159], precision=2), [b"3.14"]),
        (tf.as_string([3.14159e10], scientific=True), [b"3.141590e+10"]),
        (tf.as_string([0.1, 1e20], shortest=True), [b"0.1", b"1e+20"]),
        (tf.as_string([7, -3], width=4, fill="0"), [b"0007", b"-003"]),
        (tf.as_string([7], width=4), [b"   7"]),
        (tf.as_string([True, False]), [b"true", b"false"]),
        (tf.as_string([np.nan, np.inf, -np.inf]), [b"nan", b"inf", b"-inf"]),
    ]
    outs = run([c for c, _ in cases])
    for out, (_, want) in zip(outs, cases):
        assert out.tolist() == want
    assert run(tf.as_string(np.int64(5))) == b"5"
    with pytest.raises(ValueError, match="Fill argument not supported"):
        tf.as_string([1.5], fill="x", width=5)
    with pytest.raises(ValueError, match="precision not supported"):
        tf.as_string([1], precision=2)


def test_join_and_reduce_join(backend):
    j = tf.strings.join(["a", ["b", "c"]], separator="-")
    j2 = tf.string_join([["a", "b"], ["c", "d"]])
    m = tf.constant([["a", "b"], ["c", "d"]])
    r = [tf.reduce_join(m), tf.reduce_join(m, axis=0),
         tf.reduce_join(m, axis=1, separator=" ", keep_dims=True),
         tf.strings.reduce_join(m, axis=-1)]
    out = run([j, j2] + r)
    assert out[0].tolist() == [b"a-b", b"a-c"] and out[1].tolist() == [b"ac", b"bd"]
    assert out[2] == b"abcd" and out[3].tolist() == [b"ac", b"bd"]
    assert out[4].tolist() == [[b"a b"], [b"c d"]] and out[5].tolist() == [b"ab", b"cd"]
    assert r[2].shape.as_list() == [2, 1]
    with pytest.raises(errors.InvalidArgumentError, match="Input shapes do not match"):
        p = tf.placeholder(tf.string, [None])
        run(tf.strings.join([p, p[:1]]), {p: ["a", "b"]})


def test_string_split_is_a_sparse_tensor(backend):
    sp = tf.string_split(["hello world", "a  b c", ""])
    assert isinstance(sp, tf.SparseTensor) and sp.dense_shape.shape.as_list() == [2]
    v = run(sp)
    assert isinstance(v, tf.SparseTensorValue)
    assert v.indices.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1], [1, 2]]
    assert v.values.tolist() == [b"hello", b"world", b"a", b"b", b"c"]
    assert v.dense_shape.tolist() == [3, 3]
    chars = run(tf.string_split(["abc"], delimiter=""))
    assert chars.values.tolist() == [b"a", b"b", b"c"]
    multi = run(tf.string_split(["a,b;c"], delimiter=",;"))
    assert multi.values.tolist() == [b"a", b"b", b"c"]
    keep = run(tf.string_split(["a,,b"], delimiter=",", skip_empty=False))
    assert keep.values.tolist() == [b"a", b"", b"b"]
    dense = run(tf.sparse_tensor_to_dense(tf.string_split(["a b", "c"]), default_value=""))
    assert dense.tolist() == [[b"a", b"b"], [b"c", b""]]


def test_strings_split_sep_and_rank(backend):
    v = run(tf.strings.split(["a,b,,c", "d"], sep=","))
    assert v.values.tolist() == [b"a", b"b", b"", b"c", b"d"]
    assert v.dense_shape.tolist() == [2, 4]
    w = run(tf.strings.split(tf.constant([["a b"], ["c"]])))
    assert w.indices.tolist() == [[0, 0, 0], [0, 0, 1], [1, 0, 0]]
    assert w.dense_shape.tolist() == [2, 1, 2]
    m = run(tf.strings.split(["a b c"], maxsplit=1))
    assert m.values.tolist() == [b"a", b"b c"]


# -- decode_csv and string_to_number --------------------------------------------------------------
def test_decode_csv_values_and_defaults(backend):
    out = run(tf.decode_csv(["1,2.5,x", "3,,y"], record_defaults=[[0], [1.0], ["z"]]))
    assert out[0].tolist() == [1, 3] and out[0].dtype == np.int32
    assert out[1].tolist() == [2.5, 1.0] and out[1].dtype == np.float32
    assert out[2].tolist() == [b"x", b"y"]
    quoted = run(tf.decode_csv(['"a,b",2', '"q""r",3'], record_defaults=[[""], [0]]))
    assert quoted[0].tolist() == [b"a,b", b'q"r']
    scalar = run(tf.decode_csv("1 2", record_defaults=[[0], [np.int64(0)]], field_delim=" "))
    assert scalar[0] == 1 and np.ndim(scalar[0]) == 0
    na = run(tf.decode_csv(["1,NA"], record_defaults=[[0], [7]], na_value="NA"))
    assert na[1].tolist() == [7]
    sel = run(tf.decode_csv(["1,2,3"], record_defaults=[[0], [0]], select_cols=[0, 2]))
    assert [s.tolist() for s in sel] == [[1], [3]]
    req = run(tf.decode_csv(["1,2"], record_defaults=[[0], []]))
    assert req[1].dtype == np.float32 and req[1].tolist() == [2.0]
    big = run(tf.decode_csv(["99999999999"], record_defaults=[tf.constant([0], tf.int64)]))
    assert big[0].tolist() == [99999999999]
    raw = run(tf.decode_csv(['"a""b",2'], record_defaults=[[""], [0]], use_quote_delim=False))
    assert raw[0].tolist() == [b'"a""b"']


@pytest.mark.parametrize("records,defaults,message", [
    (["1,"], [[0], np.zeros(0, np.float32)], "Field 1 is required but missing in record 0!"),
    (["1,2,3"], [[0], [0]], "Expect 2 fields but have 3 in record 0"),
    (["1"], [[0], [0]], "Expect 2 fields but have 1 in record 0"),
    ([""], [[1]], "Expect 1 fields but have 0 in record 0"),
    (["1,x"], [[0], [0]], "Field 1 in record 0 is not a valid int32: x"),
    (["1,2.5"], [[0], [0]], "Field 1 in record 0 is not a valid int32: 2.5"),
    (["1,2.5x"], [[0], [0.0]], "Field 1 in record 0 is not a valid float: 2.5x"),
    (["99999999999"], [[0]], "Field 0 in record 0 is not a valid int32: 99999999999"),
    (['a"b,2'], [[""], [0]], "Unquoted fields cannot have quotes/CRLFs inside"),
])
def test_decode_csv_errors(records, defaults, message):
    with pytest.raises(errors.InvalidArgumentError, match=message.replace(".", r"\.")):
        run(tf.decode_csv(records, record_defaults=defaults))


def test_decode_csv_build_errors():
    with pytest.raises(ValueError, match="length-0 or length-1"):
        tf.decode_csv(["1"], record_defaults=[[0, 1]])
    with pytest.raises(ValueError, match="at most rank 1"):
        tf.decode_csv(["1"], record_defaults=[[[0]]])
    with pytest.raises(ValueError, match="select_cols"):
        tf.decode_csv(["1"], record_defaults=[[0]], select_cols=[1, 0])


def test_string_to_number(backend):
    out = run([tf.string_to_number(["1.5", "-2e3", "  7 ", "0x10", "inf"]),
               tf.strings.to_number(["12"], out_type=tf.int32),
               tf.string_to_number(["99999999999"], out_type=tf.int64)])
    assert out[0].dtype == np.float32
    assert out[0].tolist() == [1.5, -2000.0, 7.0, 16.0, np.inf]
    assert out[1].tolist() == [12] and out[1].dtype == np.int32
    assert out[2].tolist() == [99999999999]
    for bad, dt in (("x", tf.float32), ("1.5", tf.int32), ("99999999999", tf.int32),
                    ("0x10", tf.int64)):
        with pytest.raises(errors.InvalidArgumentError,
                           match=f"StringToNumberOp could not correctly convert string: {bad}"):
            run(tf.string_to_number([bad], out_type=dt))
    with pytest.raises(TypeError):
        tf.string_to_number(["1"], out_type=tf.bool)


# -- the small string ops -------------------------------------------------------------------------
def test_length_case_strip_substr_regex(backend):
    out = run([tf.strings.length(["abc", "\u00e9"]),
               tf.strings.length(["\u00e9"], unit="UTF8_CHAR"),
               tf.strings.lower(["AbC\u00c9"]), tf.strings.upper("x"),
               tf.strings.lower(["\u00c9"], encoding="utf-8"),
               tf.strings.strip([" a \n"]),
               tf.strings.substr(["hello", "world"], 1, 3), tf.strings.substr("hello", -3, 2),
               tf.substr(["hello"], 5, 1), tf.strings.substr(["hello"], 2, 10),
               tf.strings.regex_replace(["aaa bb"], "a+", "X"),
               tf.regex_replace(["aaa"], "a", "b", replace_global=False),
               tf.strings.regex_replace(["ab12"], r"(\d)", r"<\1>"),
               tf.strings.regex_full_match(["ab", "abc"], "ab")])
    assert out[0].tolist() == [3, 2] and out[0].dtype == np.int32
    assert out[1].tolist() == [1]
    assert out[2].tolist() == ["abc\u00c9".encode()]  # ASCII only without an encoding
    assert out[3] == b"X" and out[4].tolist() == ["\u00e9".encode()]
    assert out[5].tolist() == [b"a"]
    assert out[6].tolist() == [b"ell", b"orl"] and out[7] == b"ll"
    assert out[8].tolist() == [b""] and out[9].tolist() == [b"llo"]
    assert out[10].tolist() == [b"X bb"] and out[11].tolist() == [b"baa"]
    assert out[12].tolist() == [b"ab<1><2>"] and out[13].tolist() == [True, False]
    with pytest.raises(errors.InvalidArgumentError, match="pos 7 out of range"):
        run(tf.strings.substr(["hello"], 7, 1))


# -- parity with TensorFlow -----------------------------------------------------------------------
def _tf_and_jitflow(build):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session(graph=g).run(build(tf_ref))
    got = run(build(tf))
    return want, got


@pytest.mark.parametrize("name,build", [
    ("as_string", lambda t: t.as_string([1.25, -3.0, 1e-7], precision=3, width=9)),
    ("as_string_int", lambda t: t.as_string(t.constant([5, -12], t.int64), width=5, fill="0")),
    ("join", lambda t: t.strings.join([["a", "b"], "-", ["c", "d"]])),
    ("reduce_join", lambda t: t.reduce_join([["a", "b", "c"], ["d", "e", "f"]], axis=1,
                                            separator=",")),
    ("to_number", lambda t: t.strings.to_number(["1.25", " -4", "1e3"], out_type=t.float64)),
    ("length", lambda t: t.strings.length(["", "abc", "\u00e9\u00e9"])),
    ("substr", lambda t: t.strings.substr(["hello", "world"], [0, 2], [2, 9])),
    ("regex", lambda t: t.strings.regex_replace(["a1b22", "c"], r"\d+", "#")),
    ("upper", lambda t: t.strings.upper(["mIxEd 1"])),
])
def test_parity_with_tensorflow(name, build):
    want, got = _tf_and_jitflow(build)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert np.asarray(got).dtype == np.asarray(want).dtype


def test_decode_csv_and_split_parity_with_tensorflow():
    records = ["1,2.5,x", "3,,y", '"4",7,"a,b"']

    def build(t):
        return t.decode_csv(records, record_defaults=[[0], [1.0], ["z"]])
    want, got = _tf_and_jitflow(build)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype
    want, got = _tf_and_jitflow(lambda t: t.string_split(["a b  c", "", "d"]))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


def test_binary_strings_keep_their_bytes(backend):
    raw = [b"\x01\x00\x02\x00", b"\xff\xff\x00\x01"]
    p = tf.placeholder(tf.string, [None])
    with tf.Session() as sess:
        assert sess.run(tf.constant(raw)).tolist() == raw  # trailing NULs kept
        assert sess.run(p, {p: [b"a\x00"]}).tolist() == [b"a\x00"]
        ints = sess.run(tf.decode_raw(tf.constant(raw), tf.int16))
        be = sess.run(tf.io.decode_raw(tf.constant(raw), tf.int32, little_endian=False))
        b64 = sess.run(tf.encode_base64(["hi?>"]))
        back = sess.run(tf.decode_base64(tf.encode_base64(["hi?>"], pad=True)))
        import zlib
        dec = sess.run(tf.io.decode_compressed([zlib.compress(b"xyz")], "ZLIB"))
    assert ints.tolist() == [[1, 2], [-1, 256]] and ints.dtype == np.int16
    assert be.tolist() == [[0x01000200], [-65535]]
    assert b64.tolist() == [b"aGk_Pg"] and back.tolist() == [b"hi?>"]
    assert dec.tolist() == [b"xyz"]
    with pytest.raises(errors.InvalidArgumentError, match="same size"):
        with tf.Session() as sess:
            sess.run(tf.decode_raw(["ab", "abcd"], tf.int16))


def test_decode_raw_and_base64_parity_with_tensorflow():
    raw = [bytes(range(8)), bytes(range(8, 16))]
    want, got = _tf_and_jitflow(lambda t: t.decode_raw(raw, t.float32))
    np.testing.assert_array_equal(got, want)
    want, got = _tf_and_jitflow(lambda t: t.io.encode_base64([b"\xff\xfe binary", b""],
                                                             pad=True))
    np.testing.assert_array_equal(got, want)
