"""String ops: formatting, joining, splitting, CSV parsing, number conversion.

A string tensor's value is an object array of `bytes` (TF1 fetches return bytes). Every op here
is a host op (registry kind "host"): it runs through its reference on every backend, never
inside a numeric kernel, and the numeric ops around it still compile.
"""
from __future__ import annotations

import re
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.reduce import _legacy
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape, broadcast_static

__all__ = ["as_string", "string_join", "string_split", "decode_csv", "string_to_number",
           "reduce_join", "regex_replace", "substr", "string_strip", "decode_raw",
           "encode_base64", "decode_base64", "decode_compressed"]

NAMESPACES = {
    "strings": ["as_string", ("join", "string_join"), ("split", "strings_split"),
                ("to_number", "string_to_number"), "reduce_join", "regex_replace",
                "regex_full_match", "substr", ("strip", "string_strip"), "length", "lower",
                "upper"],
    "io": ["decode_csv", "decode_raw", "encode_base64", "decode_base64", "decode_compressed"],
}

_STRING = ("string",)


def _bytes_of(x) -> np.ndarray:
    """An input string value as an object array of bytes (feeds and consts already are)."""
    if isinstance(x, np.ndarray) and x.dtype == object:
        return x
    return _dtypes.as_bytes_array(x)


def _new_bytes(shape) -> np.ndarray:
    return np.empty(shape, dtype=object)


def _string_input(x, name: str) -> Tensor:
    t = convert_to_tensor(x, dtype=None if isinstance(x, Tensor) else _dtypes.string, name=name)
    if t.dtype != _dtypes.string:
        raise TypeError(f"Input '{name}' must be a string tensor, got {t.dtype.name}")
    return t


def _invalid(op, msg: str):
    return errors.InvalidArgumentError(None, op, f"{msg}\n\t [[node {op.name} ({op.type})]]")


def _unary_string_infer(out_dtype=None):
    def infer(op):
        x = op.inputs[0]
        if x.dtype != _dtypes.string:
            raise TypeError(f"Input 'input' of '{op.type}' Op has type {x.dtype.name} that "
                            "does not match expected type of string.")
        return [(out_dtype or _dtypes.string, x.shape)]
    return infer


def _map_bytes(fn, x, out_dtype=object) -> np.ndarray:
    x = _bytes_of(x)
    out = np.empty(x.shape, dtype=out_dtype)
    flat_in, flat_out = x.reshape(-1), out.reshape(-1)
    for i in range(flat_in.size):
        flat_out[i] = fn(flat_in[i])
    return out


# -- as_string ------------------------------------------------------------------------------------
_AS_STRING_TYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64",
                    "uint8", "bool", "string")


def _as_string_format(op) -> str:
    a = op.attrs
    dt = op.inputs[0].dtype.name
    fmt = "%"
    fill = a["fill"]
    if fill:
        if len(fill) > 1 or fill[0] not in " +-0#":
            raise ValueError(f"Fill argument not supported: \"{fill}\" (as_string '{op.name}')")
        fmt += fill
    if a["width"] > -1:
        fmt += str(a["width"])
    if a["precision"] > -1:
        if not dt.startswith("float"):
            raise ValueError(f"precision not supported for datatype {dt} (as_string "
                             f"'{op.name}')")
        fmt += f".{a['precision']}"
    if a["scientific"] and a["shortest"]:
        raise ValueError("Cannot select both scientific and shortest notation")
    if (a["scientific"] or a["shortest"]) and not dt.startswith("float"):
        raise ValueError(f"scientific and shortest format not supported for datatype {dt}")
    if dt.startswith("float"):
        fmt += "g" if a["shortest"] else "e" if a["scientific"] else "f"
    elif dt == "string":
        fmt += "s"
    else:
        fmt += "d"
    return fmt


def _as_string_infer(op):
    x = op.inputs[0]
    if x.dtype.name not in _AS_STRING_TYPES:
        raise TypeError(f"Value passed to parameter 'input' has DataType {x.dtype.name} not in "
                        f"list of allowed values: {', '.join(_AS_STRING_TYPES)}")
    _as_string_format(op)  # build-time errors, as TF
    return [(_dtypes.string, x.shape)]


def _as_string_ref(op, x):
    fmt = _as_string_format(op)
    x = np.asarray(x)
    out = _new_bytes(x.shape)
    flat, res = x.reshape(-1), out.reshape(-1)
    if x.dtype == np.bool_:
        for i, v in enumerate(flat):
            res[i] = b"true" if v else b"false"
    elif x.dtype == object:
        for i, v in enumerate(flat):
            res[i] = (fmt % v.decode("utf-8", "replace")).encode("utf-8")
    elif x.dtype.kind == "f":
        for i, v in enumerate(flat.tolist()):
            res[i] = (fmt % v).encode()
    else:
        for i, v in enumerate(flat.tolist()):
            res[i] = (fmt % int(v)).encode()
    return out


register("AsString", infer=_as_string_infer, ref=_as_string_ref, kind="host",
         doc="Format each element as a string (printf-style attrs precision, scientific, "
             "shortest, width, fill).")


def as_string(input, precision: int = -1, scientific: bool = False,  # noqa: A002
              shortest: bool = False, width: int = -1, fill: str = "",
              name: Optional[str] = None) -> Tensor:
    """`tf.as_string`: each element formatted as a string (floats as "%f" by default)."""
    with name_scope(name, "AsString", [input]) as scope:
        x = convert_to_tensor(input, name="input")
        attrs = {"precision": int(precision), "scientific": bool(scientific),
                 "shortest": bool(shortest), "width": int(width), "fill": str(fill)}
        return make_op("AsString", [x], attrs, name=scope or name).outputs[0]


# -- string_join ----------------------------------------------------------------------------------
def _join_infer(op):
    shape = TensorShape([])
    for t in op.inputs:
        if t.dtype != _dtypes.string:
            raise TypeError(f"Inputs of '{op.type}' must be strings, got {t.dtype.name}")
        if t.shape.ndims == 0:
            continue
        if shape.ndims == 0:
            shape = t.shape
        elif not shape.is_compatible_with(t.shape):
            raise ValueError(f"Input shapes do not match: {shape} vs. {t.shape} for "
                             f"'{op.name}'")
        else:
            shape = shape.merge_with(t.shape)
    return [(_dtypes.string, shape)]


def _join_ref(op, *xs):
    sep = op.attrs["separator"]
    arrs = [_bytes_of(x) for x in xs]
    shapes = [a.shape for a in arrs if a.ndim]
    if any(s != shapes[0] for s in shapes):
        raise _invalid(op, "Input shapes do not match: "
                       + " vs. ".join(str(list(s)) for s in shapes))
    shape = shapes[0] if shapes else ()
    out = _new_bytes(shape)
    res = out.reshape(-1)
    cols = [a.reshape(-1) if a.ndim else None for a in arrs]
    for i in range(res.size):
        res[i] = sep.join(a.item() if c is None else c[i] for a, c in zip(arrs, cols))
    return out


register("StringJoin", infer=_join_infer, ref=_join_ref, kind="host",
         doc="Join the inputs elementwise with attr `separator` (scalars broadcast).")


def string_join(inputs, separator: str = "", name: Optional[str] = None) -> Tensor:
    """`tf.strings.join` / `tf.string_join`: elementwise concatenation with `separator`."""
    with name_scope(name, "StringJoin", list(inputs)) as scope:
        xs = [_string_input(x, f"inputs_{i}") for i, x in enumerate(inputs)]
        sep = separator.encode() if isinstance(separator, str) else bytes(separator)
        return make_op("StringJoin", xs, {"separator": sep}, name=scope or name).outputs[0]


# -- splitting ------------------------------------------------------------------------------------
def _split_infer(op):
    x = op.inputs[0]
    if x.dtype != _dtypes.string:
        raise TypeError(f"Input 'input' of '{op.type}' must be a string tensor")
    if op.type == "StringSplit" and x.shape.ndims not in (None, 1):
        raise ValueError(f"Shape must be rank 1 but is rank {x.shape.ndims} for '{op.name}' "
                         f"(op: 'StringSplit')")
    r = x.shape.ndims
    cols = None if r is None else max(r, 1) + 1
    return [(_dtypes.int64, TensorShape([None, cols])), (_dtypes.string, TensorShape([None])),
            (_dtypes.int64, TensorShape([cols]))]


def _split_one(op, s: bytes) -> list:
    a = op.attrs
    if op.type == "StringSplit":  # each byte of `delimiter` splits; skip_empty drops ""
        delim = a["delimiter"]
        if not delim:
            parts = [s[i:i + 1] for i in range(len(s))]
        else:
            parts = re.split(b"[" + re.escape(delim) + b"]", s)
        return [p for p in parts if p] if a["skip_empty"] else parts
    sep, maxsplit = a["sep"], a["maxsplit"]
    if not sep:
        return s.split(None, maxsplit)
    return s.split(sep, maxsplit) if s else []


def _split_ref(op, x):
    x = _bytes_of(x)
    if x.ndim == 0:
        x = x.reshape(1)
    rows = x.reshape(-1)
    pieces = [_split_one(op, s) for s in rows]
    width = max((len(p) for p in pieces), default=0)
    outer = np.array(np.unravel_index(np.arange(rows.size), x.shape)).T.reshape(rows.size,
                                                                                x.ndim)
    idx, vals = [], []
    for r, p in enumerate(pieces):
        for j, v in enumerate(p):
            idx.append(list(outer[r]) + [j])
            vals.append(v)
    indices = np.array(idx, dtype=np.int64).reshape(len(idx), x.ndim + 1)
    values = _new_bytes(len(vals))
    values[:] = vals
    return indices, values, np.array(list(x.shape) + [width], dtype=np.int64)


register("StringSplit", infer=_split_infer, ref=_split_ref, kind="host",
         doc="Split a vector of strings at any byte of attr `delimiter` (a SparseTensor's "
             "indices, values, dense_shape).")
register("StringSplitV2", infer=_split_infer, ref=_split_ref, kind="host",
         doc="Split strings at attr `sep` (whitespace runs when empty), at most `maxsplit` "
             "times (a SparseTensor's indices, values, dense_shape).")


def _sparse_of(op):
    from jitflow.ops.sparse import SparseTensor
    return SparseTensor(*op.outputs)


def string_split(source, sep=None, skip_empty: bool = True, delimiter=None,
                 result_type: str = "SparseTensor", name: Optional[str] = None):
    """`tf.string_split` (TF1): split each string of a vector at any character of the
    delimiter (default " "); returns a SparseTensor [batch, max tokens]."""
    delimiter = _legacy(sep, delimiter, "sep", "delimiter")
    if delimiter is None:
        delimiter = " "
    if result_type != "SparseTensor":
        raise NotImplementedError("string_split: only result_type='SparseTensor' is supported")
    with name_scope(name, "StringSplit", [source]) as scope:
        x = _string_input(source, "input")
        d = delimiter.encode() if isinstance(delimiter, str) else bytes(delimiter)
        op = make_op("StringSplit", [x], {"delimiter": d, "skip_empty": bool(skip_empty)},
                     name=scope or name)
        return _sparse_of(op)


def strings_split(input=None, sep=None, maxsplit: int = -1,  # noqa: A002
                  result_type: str = "SparseTensor", source=None, name: Optional[str] = None):
    """`tf.strings.split` (TF1 form): split at `sep` (whitespace runs when None), returning a
    SparseTensor with one more dimension than `input`."""
    input = _legacy(input, source, "input", "source")  # noqa: A001
    if result_type != "SparseTensor":
        raise NotImplementedError("strings.split: only result_type='SparseTensor' is supported")
    with name_scope(name, "StringSplit", [input]) as scope:
        x = _string_input(input, "input")
        s = b"" if sep is None else (sep.encode() if isinstance(sep, str) else bytes(sep))
        op = make_op("StringSplitV2", [x], {"sep": s, "maxsplit": int(maxsplit)},
                     name=scope or name)
        return _sparse_of(op)


# -- number parsing -------------------------------------------------------------------------------
_INT_RE = re.compile(rb"^\s*[+-]?\d+\s*$")


def _parse_int(s: bytes, bits: int):
    if not _INT_RE.match(s):
        return None
    v = int(s)
    return v if -(1 << (bits - 1)) <= v < (1 << (bits - 1)) else None


def _parse_float(s: bytes):
    t = s.strip()
    if not t or b"_" in t:
        return None
    try:
        return float(t)
    except ValueError:
        pass
    try:
        return float.fromhex(t.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None


def _parser(dtype: str):
    if dtype in ("int32", "int64"):
        bits = int(dtype[3:])
        return lambda s: _parse_int(s, bits)
    return _parse_float


_NUMBER_TYPES = ("float32", "float64", "int32", "int64")


def _to_number_infer(op):
    x = op.inputs[0]
    if x.dtype != _dtypes.string:
        raise TypeError(f"Input 'string_tensor' of 'StringToNumber' Op has type "
                        f"{x.dtype.name} that does not match expected type of string.")
    return [(op.attrs["out_type"], x.shape)]


def _to_number_ref(op, x):
    dt = op.attrs["out_type"]
    parse = _parser(dt.name)
    x = _bytes_of(x)
    out = np.empty(x.shape, dtype=dt.as_numpy_dtype)
    flat, res = x.reshape(-1), out.reshape(-1)
    for i, s in enumerate(flat):
        v = parse(s)
        if v is None:
            raise _invalid(op, "StringToNumberOp could not correctly convert string: "
                           + s.decode("utf-8", "replace"))
        res[i] = v
    return out


register("StringToNumber", infer=_to_number_infer, ref=_to_number_ref, kind="host",
         doc="Parse each string as a number of attr `out_type`.")


def string_to_number(string_tensor=None, out_type=_dtypes.float32, name: Optional[str] = None,
                     input=None) -> Tensor:  # noqa: A002
    """`tf.string_to_number` / `tf.strings.to_number`: parse each string (float32 default);
    a string that is not a number is an InvalidArgumentError when the graph runs."""
    string_tensor = _legacy(string_tensor, input, "string_tensor", "input")
    out_type = _dtypes.as_dtype(out_type)
    if out_type.name not in _NUMBER_TYPES:
        raise TypeError(f"Value passed to parameter 'out_type' has DataType {out_type.name} "
                        f"not in list of allowed values: {', '.join(_NUMBER_TYPES)}")
    with name_scope(name, "StringToNumber", [string_tensor]) as scope:
        x = _string_input(string_tensor, "string_tensor")
        return make_op("StringToNumber", [x], {"out_type": out_type},
                       name=scope or name).outputs[0]


# -- decode_csv -----------------------------------------------------------------------------------
_CSV_TYPES = ("float32", "float64", "int32", "int64", "string")


def _csv_infer(op):
    records = op.inputs[0]
    if records.dtype != _dtypes.string:
        raise TypeError(f"Input 'records' of 'DecodeCSV' Op has type {records.dtype.name} "
                        "that does not match expected type of string.")
    out = []
    for d in op.inputs[1:]:
        if d.dtype.name not in _CSV_TYPES:
            raise TypeError(f"Value passed to parameter 'record_defaults' has DataType "
                            f"{d.dtype.name} not in list of allowed values: "
                            f"{', '.join(_CSV_TYPES)}")
        if d.shape.ndims is not None and d.shape.ndims > 1:
            raise ValueError(f"Shape must be at most rank 1 but is rank {d.shape.ndims} for "
                             f"'{op.name}' (op: 'DecodeCSV')")
        n = d.shape.num_elements() if d.shape.is_fully_defined() else None
        if n is not None and n > 1:
            raise ValueError(f"Shape of a default must be a length-0 or length-1 vector, or a "
                             f"scalar. for '{op.name}' (op: 'DecodeCSV')")
        out.append((d.dtype, records.shape))
    return out


def _csv_fields(op, rec: bytes, r: int) -> list:
    """The fields of one record, with TF's quoting rules."""
    delim = op.attrs["field_delim"]
    quoted = op.attrs["use_quote_delim"]
    if not rec:
        return []
    fields = []
    i, n = 0, len(rec)
    while True:
        if quoted and i < n and rec[i:i + 1] == b'"':
            buf = bytearray()
            i += 1
            while True:
                if i >= n:
                    raise _invalid(op, f"Quoted field has to end with quote followed by delim or "
                                       f"end in record {r}")
                c = rec[i:i + 1]
                if c == b'"':
                    if rec[i + 1:i + 2] == b'"':
                        buf += b'"'
                        i += 2
                        continue
                    i += 1
                    break
                buf += c
                i += 1
            fields.append(bytes(buf))
            if i < n and rec[i:i + 1] != delim:
                raise _invalid(op, f"Quoted field has to end with quote followed by delim or "
                                   f"end in record {r}")
        else:
            j = rec.find(delim, i)
            j = n if j < 0 else j
            f = rec[i:j]
            if quoted and (b'"' in f or b"\n" in f or b"\r" in f):
                raise _invalid(op, f"Unquoted fields cannot have quotes/CRLFs inside in record "
                                   f"{r}")
            fields.append(f)
            i = j
        if i >= n:
            break
        i += 1  # the delimiter
        if i == n:
            fields.append(b"")
            break
    return fields


def _csv_ref(op, records, *defaults):
    records = _bytes_of(records)
    dtypes = [t.dtype for t in op.outputs]
    outs = [np.empty(records.shape, dtype=d.as_numpy_dtype) for d in dtypes]
    flats = [o.reshape(-1) for o in outs]
    na = op.attrs["na_value"]
    select = op.attrs["select_cols"]
    ncols = len(dtypes)
    parsers = [None if d == _dtypes.string else _parser(d.name) for d in dtypes]
    type_names = {"int32": "int32", "int64": "int64", "float32": "float", "float64": "double"}
    defaults = [np.reshape(d, -1) for d in defaults]
    for r, rec in enumerate(records.reshape(-1)):
        fields = _csv_fields(op, rec, r)
        if select:
            if len(fields) <= select[-1]:
                raise _invalid(op, f"Expect {select[-1] + 1} fields but have {len(fields)} in "
                                   f"record {r}")
            fields = [fields[c] for c in select]
        elif len(fields) != ncols:
            raise _invalid(op, f"Expect {ncols} fields but have {len(fields)} in record {r}")
        for f, field in enumerate(fields):
            if not field or field == na:
                if defaults[f].size == 0:
                    raise _invalid(op, f"Field {f} is required but missing in record {r}!")
                flats[f][r] = defaults[f][0]
            elif parsers[f] is None:
                flats[f][r] = field
            else:
                v = parsers[f](field)
                if v is None:
                    raise _invalid(op, f"Field {f} in record {r} is not a valid "
                                       f"{type_names[dtypes[f].name]}: "
                                       f"{field.decode('utf-8', 'replace')}")
                flats[f][r] = v
    return tuple(outs)


register("DecodeCSV", infer=_csv_infer, ref=_csv_ref, kind="host",
         doc="Inputs (records, *record_defaults): one output per column, shaped like records.")


def decode_csv(records, record_defaults, field_delim: str = ",", use_quote_delim: bool = True,
               name: Optional[str] = None, na_value: str = "", select_cols=None) -> list:
    """`tf.decode_csv` / `tf.io.decode_csv`: parse CSV records into one tensor per column.

    Each column's dtype is its default's; an empty field (or `na_value`) takes the default,
    and a column whose default is empty is required.
    """
    if select_cols is not None:
        select_cols = [int(c) for c in select_cols]
        if any(c < 0 for c in select_cols) or select_cols != sorted(set(select_cols)):
            raise ValueError("select_cols is not strictly increasing or has negative values.")
        if len(select_cols) != len(record_defaults):
            raise ValueError("Length of select_cols and record_defaults do not match.")
    delim = field_delim.encode() if isinstance(field_delim, str) else bytes(field_delim)
    if len(delim) != 1:
        raise ValueError(f"field_delim should be only 1 char, got {field_delim!r}")
    with name_scope(name, "DecodeCSV", [records]) as scope:
        recs = _string_input(records, "records")
        defaults = []
        for i, d in enumerate(record_defaults):
            if isinstance(d, Tensor):
                defaults.append(d)
                continue
            if isinstance(d, (list, tuple)) and len(d) == 0:
                d = np.zeros(0, np.float32)  # as TF: an empty list is a required float32
            defaults.append(convert_to_tensor(d, name=f"record_defaults_{i}"))
        attrs = {"field_delim": delim, "use_quote_delim": bool(use_quote_delim),
                 "na_value": na_value.encode() if isinstance(na_value, str) else na_value,
                 "select_cols": select_cols or []}
        op = make_op("DecodeCSV", [recs] + defaults, attrs, name=scope or name)
        return list(op.outputs)


# -- length, lower, upper, strip, substr ----------------------------------------------------------
def _length_ref(op, x):
    if op.attrs["unit"] == "UTF8_CHAR":
        return _map_bytes(lambda s: len(s.decode("utf-8", "replace")), x, np.int32)
    return _map_bytes(len, x, np.int32)


register("StringLength", infer=_unary_string_infer(_dtypes.int32), ref=_length_ref, kind="host",
         doc="The length of each string in bytes (or UTF-8 characters, attr `unit`).")


def _unit(unit: str) -> str:
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"unit must be 'BYTE' or 'UTF8_CHAR', got {unit!r}")
    return unit


def length(input, name: Optional[str] = None, unit: str = "BYTE") -> Tensor:  # noqa: A002
    """`tf.strings.length`: the length of each string (bytes, or UTF-8 characters)."""
    with name_scope(name, "StringLength", [input]) as scope:
        x = _string_input(input, "input")
        return make_op("StringLength", [x], {"unit": _unit(unit)}, name=scope or name).outputs[0]


def _case_ref(upper: bool):
    def ref(op, x):
        if op.attrs["encoding"]:
            f = (str.upper if upper else str.lower)
            return _map_bytes(lambda s: f(s.decode("utf-8")).encode("utf-8"), x)
        return _map_bytes(bytes.upper if upper else bytes.lower, x)
    return ref


register("StringLower", infer=_unary_string_infer(), ref=_case_ref(False), kind="host",
         doc="Lower-case each string (ASCII; Unicode with attr `encoding`='utf-8').")
register("StringUpper", infer=_unary_string_infer(), ref=_case_ref(True), kind="host",
         doc="Upper-case each string (ASCII; Unicode with attr `encoding`='utf-8').")


def _case(op_type: str, input, encoding: str, name) -> Tensor:
    with name_scope(name, op_type, [input]) as scope:
        x = _string_input(input, "input")
        return make_op(op_type, [x], {"encoding": encoding.lower() if encoding else ""},
                       name=scope or name).outputs[0]


def lower(input, encoding: str = "", name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.strings.lower`: ASCII lower case (Unicode with encoding='utf-8')."""
    return _case("StringLower", input, encoding, name)


def upper(input, encoding: str = "", name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.strings.upper`: ASCII upper case (Unicode with encoding='utf-8')."""
    return _case("StringUpper", input, encoding, name)


register("StringStrip", infer=_unary_string_infer(), ref=lambda op, x: _map_bytes(bytes.strip, x),
         kind="host", doc="Strip leading and trailing whitespace.")


def string_strip(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.strings.strip` / `tf.string_strip`: remove leading and trailing whitespace."""
    with name_scope(name, "StringStrip", [input]) as scope:
        x = _string_input(input, "input")
        return make_op("StringStrip", [x], name=scope or name).outputs[0]


def _substr_infer(op):
    x, pos, ln = op.inputs
    for t, what in ((pos, "pos"), (ln, "len")):
        if t.dtype.name not in ("int32", "int64"):
            raise TypeError(f"Input '{what}' of 'Substr' must be int32 or int64")
    shape = broadcast_static(x.shape, pos.shape, f" for '{op.name}' (op: 'Substr')")
    return [(_dtypes.string, broadcast_static(shape, ln.shape))]


def _substr_ref(op, x, pos, ln):
    x = _bytes_of(x)
    xs, ps, ls = np.broadcast_arrays(x, np.asarray(pos), np.asarray(ln))
    out = _new_bytes(xs.shape)
    res = out.reshape(-1)
    utf8 = op.attrs["unit"] == "UTF8_CHAR"
    for i, (s, p, n) in enumerate(zip(xs.reshape(-1), ps.reshape(-1).tolist(),
                                      ls.reshape(-1).tolist())):
        u = s.decode("utf-8") if utf8 else s
        size = len(u)
        if p > size or p < -size:
            raise _invalid(op, f"pos {p} out of range for string {s!r} at index {i}")
        if p < 0:
            p += size
        piece = u[p:p + max(n, 0)]
        res[i] = piece.encode("utf-8") if utf8 else piece
    return out


register("Substr", infer=_substr_infer, ref=_substr_ref, kind="host",
         doc="Inputs (input, pos, len): the substrings (pos < 0 counts from the end).")


def substr(input, pos, len, name: Optional[str] = None, unit: str = "BYTE") -> Tensor:  # noqa: A002
    """`tf.strings.substr` / `tf.substr`: `len` bytes (or UTF-8 characters) from `pos`."""
    with name_scope(name, "Substr", [input, pos, len]) as scope:
        x = _string_input(input, "input")
        p = convert_to_tensor(pos, name="pos")
        n = convert_to_tensor(len, dtype=p.dtype, name="len")
        return make_op("Substr", [x, p, n], {"unit": _unit(unit)}, name=scope or name).outputs[0]


# -- regular expressions --------------------------------------------------------------------------
def _re2_rewrite(rewrite: bytes):
    """An RE2 rewrite string (`\\1` group references, `\\\\` a backslash) as a function of a
    match (Python's own template syntax differs: no escape other than these is special)."""
    parts: list = []
    i = 0
    lit = bytearray()
    while i < len(rewrite):
        c = rewrite[i:i + 1]
        if c == b"\\" and i + 1 < len(rewrite):
            nxt = rewrite[i + 1:i + 2]
            if nxt.isdigit():
                if lit:
                    parts.append(bytes(lit))
                    lit = bytearray()
                parts.append(int(nxt))
                i += 2
                continue
            if nxt == b"\\":
                lit += b"\\"
                i += 2
                continue
        lit += c
        i += 1
    if lit:
        parts.append(bytes(lit))
    return lambda m: b"".join(p if isinstance(p, bytes) else (m.group(p) or b"") for p in parts)


def _regex_replace_ref(op, x):
    pat = re.compile(op.attrs["pattern"])
    rep = _re2_rewrite(op.attrs["rewrite"])
    count = 0 if op.attrs["replace_global"] else 1
    return _map_bytes(lambda s: pat.sub(rep, s, count=count), x)


register("RegexReplace", infer=_unary_string_infer(), ref=_regex_replace_ref, kind="host",
         doc="Replace matches of attr `pattern` by attr `rewrite` (RE2 `\\1` references).")


def _pattern(pattern) -> bytes:
    p = pattern.encode() if isinstance(pattern, str) else bytes(pattern)
    try:
        re.compile(p)
    except re.error as e:
        raise ValueError(f"Invalid pattern: {pattern!r}, error: {e}") from None
    return p


def regex_replace(input, pattern, rewrite, replace_global: bool = True,  # noqa: A002
                  name: Optional[str] = None) -> Tensor:
    """`tf.strings.regex_replace`: replace matches of `pattern` (all, or the first) by
    `rewrite` (`\\1` refers to a group). Python's `re` stands in for RE2: patterns outside
    their common syntax (possessive or named RE2 classes) are an error."""
    if isinstance(pattern, Tensor) or isinstance(rewrite, Tensor):
        raise NotImplementedError("regex_replace: pattern and rewrite must be Python strings")
    with name_scope(name, "RegexReplace", [input]) as scope:
        x = _string_input(input, "input")
        rw = rewrite.encode() if isinstance(rewrite, str) else bytes(rewrite)
        attrs = {"pattern": _pattern(pattern), "rewrite": rw,
                 "replace_global": bool(replace_global)}
        return make_op("RegexReplace", [x], attrs, name=scope or name).outputs[0]


def _full_match_ref(op, x):
    pat = re.compile(op.attrs["pattern"])
    return _map_bytes(lambda s: pat.fullmatch(s) is not None, x, np.bool_)


register("RegexFullMatch", infer=_unary_string_infer(_dtypes.bool_), ref=_full_match_ref,
         kind="host", doc="Whether each whole string matches attr `pattern`.")


def regex_full_match(input, pattern, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.strings.regex_full_match`: whether each whole string matches `pattern`."""
    with name_scope(name, "RegexFullMatch", [input]) as scope:
        x = _string_input(input, "input")
        return make_op("RegexFullMatch", [x], {"pattern": _pattern(pattern)},
                       name=scope or name).outputs[0]


# -- reduce_join ----------------------------------------------------------------------------------
def _reduce_join_infer(op):
    x = op.inputs[0]
    if x.dtype != _dtypes.string:
        raise TypeError("reduce_join needs a string tensor")
    axes, keep = op.attrs["axis"], op.attrs["keep_dims"]
    if x.shape.ndims is None:
        return [(_dtypes.string, TensorShape(None))]
    dims = x.shape.as_tuple()
    axes = range(len(dims)) if axes is None else axes
    return [(_dtypes.string, TensorShape(
        [1 if i in axes else d for i, d in enumerate(dims)] if keep
        else [d for i, d in enumerate(dims) if i not in axes]))]


def _reduce_join_ref(op, x):
    x = _bytes_of(x)
    axes = op.attrs["axis"]
    axes = tuple(range(x.ndim)) if axes is None else tuple(a % max(x.ndim, 1) for a in axes)
    keep = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, keep + list(axes))
    kept_shape = moved.shape[:len(keep)]
    rows = moved.reshape(kept_shape + (-1,))
    sep = op.attrs["separator"]
    out = _new_bytes(kept_shape)
    res, flat_rows = out.reshape(-1), rows.reshape(-1, rows.shape[-1])
    for i in range(res.size):
        res[i] = sep.join(flat_rows[i])
    if op.attrs["keep_dims"]:
        out = out.reshape([1 if i in axes else d for i, d in enumerate(x.shape)])
    return out


register("ReduceJoin", infer=_reduce_join_infer, ref=_reduce_join_ref, kind="host",
         doc="Join strings along attr `axis` (all axes when None) with attr `separator`.")


def reduce_join(inputs, axis=None, keep_dims=None, separator: str = "",
                name: Optional[str] = None, reduction_indices=None, keepdims=None) -> Tensor:
    """`tf.reduce_join` / `tf.strings.reduce_join`: join strings along `axis`."""
    from jitflow.ops.reduce import normalize_axis
    axis = _legacy(axis, reduction_indices, "axis", "reduction_indices")
    keep = bool(_legacy(keepdims, keep_dims, "keepdims", "keep_dims") or False)
    with name_scope(name, "ReduceJoin", [inputs]) as scope:
        x = _string_input(inputs, "inputs")
        if axis is not None and x.shape.ndims is None:
            raise ValueError("reduce_join over given axes needs an input of known rank")
        axes = None if axis is None else normalize_axis(x, axis, "reduce_join")
        sep = separator.encode() if isinstance(separator, str) else bytes(separator)
        return make_op("ReduceJoin", [x], {"axis": axes, "keep_dims": keep, "separator": sep},
                       name=scope or name).outputs[0]


# -- decode_raw, base64, decode_compressed -------------------------------------------------------
_RAW_TYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")


def _decode_raw_infer(op):
    x = op.inputs[0]
    if x.dtype != _dtypes.string:
        raise TypeError("decode_raw needs a string tensor")
    d = x.shape.as_tuple()
    return [(op.attrs["out_type"], TensorShape(None) if d is None else TensorShape(
        d + (op.attrs["fixed_length"],)))]


def _decode_raw_ref(op, x):
    x = _bytes_of(x)
    dt = np.dtype(op.attrs["out_type"].as_numpy_dtype).newbyteorder(
        "<" if op.attrs["little_endian"] else ">")
    flat = x.reshape(-1)
    sizes = {len(s) for s in flat}
    if len(sizes) > 1:
        raise _invalid(op, f"DecodeRaw requires input strings to all be the same size, but "
                           f"element 0 has size {len(flat[0])} != {sorted(sizes)[-1]}")
    n = (sizes.pop() if sizes else 0)
    if n % dt.itemsize:
        raise _invalid(op, f"Input to DecodeRaw has length {n} that is not a multiple of "
                           f"{dt.itemsize}, the size of {op.attrs['out_type'].name}")
    out = np.empty((flat.size, n // dt.itemsize), dtype=dt.newbyteorder("="))
    for i, s in enumerate(flat):
        out[i] = np.frombuffer(s, dtype=dt)
    return out.reshape(x.shape + (n // dt.itemsize,))


register("DecodeRaw", infer=_decode_raw_infer, ref=_decode_raw_ref, kind="host",
         doc="Reinterpret the bytes of each string as a vector of attr out_type.")


def decode_raw(input_bytes=None, out_type=None, little_endian: bool = True,  # noqa: A002
               name: Optional[str] = None, bytes=None, fixed_length=None) -> Tensor:
    """`tf.decode_raw` / `tf.io.decode_raw`: the bytes of each string as numbers of
    `out_type` (all strings the same length; a new last dimension)."""
    input_bytes = _legacy(input_bytes, bytes, "input_bytes", "bytes")
    dt = _dtypes.as_dtype(out_type)
    if dt.name not in _RAW_TYPES:
        raise TypeError(f"Value passed to parameter 'out_type' has DataType {dt.name} not in "
                        f"list of allowed values: {', '.join(_RAW_TYPES)}")
    with name_scope(name, "DecodeRaw", [input_bytes]) as scope:
        x = _string_input(input_bytes, "bytes")
        op = make_op("DecodeRaw", [x], {"out_type": dt, "little_endian": bool(little_endian),
                                        "fixed_length": None if fixed_length is None
                                        else int(fixed_length)}, name=scope or name)
        return op.outputs[0]


def _b64_ref(encode: bool):
    import base64

    def ref(op, x):
        if encode:
            pad = op.attrs["pad"]
            return _map_bytes(lambda s: base64.urlsafe_b64encode(s) if pad
                              else base64.urlsafe_b64encode(s).rstrip(b"="), x)

        def dec(s):
            try:
                return base64.urlsafe_b64decode(s + b"=" * (-len(s) % 4))
            except ValueError:
                raise _invalid(op, f"Invalid character found in base64: {s!r}") from None
        return _map_bytes(dec, x)
    return ref


register("EncodeBase64", infer=_unary_string_infer(), ref=_b64_ref(True), kind="host",
         doc="Web-safe base64 (- and _), padded with = when attr pad.")
register("DecodeBase64", infer=_unary_string_infer(), ref=_b64_ref(False), kind="host",
         doc="Decode web-safe base64.")


def encode_base64(input, pad: bool = False, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.encode_base64` / `tf.io.encode_base64`: web-safe base64 of each string."""
    with name_scope(name, "EncodeBase64", [input]) as scope:
        return make_op("EncodeBase64", [_string_input(input, "input")], {"pad": bool(pad)},
                       name=scope or name).outputs[0]


def decode_base64(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.decode_base64` / `tf.io.decode_base64`: decode web-safe base64 strings."""
    with name_scope(name, "DecodeBase64", [input]) as scope:
        return make_op("DecodeBase64", [_string_input(input, "input")],
                       name=scope or name).outputs[0]


def _decompress_ref(op, x):
    import gzip
    import zlib
    kind = op.attrs["compression_type"]
    if kind == "ZLIB":
        return _map_bytes(zlib.decompress, x)
    if kind == "GZIP":
        return _map_bytes(gzip.decompress, x)
    return _map_bytes(lambda s: s, x)


register("DecodeCompressed", infer=_unary_string_infer(), ref=_decompress_ref, kind="host",
         doc="Decompress each string (attr compression_type: '', ZLIB or GZIP).")


def decode_compressed(bytes, compression_type: str = "",  # noqa: A002
                      name: Optional[str] = None) -> Tensor:
    """`tf.decode_compressed` / `tf.io.decode_compressed`: zlib or gzip decompression."""
    if compression_type not in ("", "ZLIB", "GZIP"):
        raise ValueError(f"Unsupported compression type: {compression_type}")
    with name_scope(name, "DecodeCompressed", [bytes]) as scope:
        return make_op("DecodeCompressed", [_string_input(bytes, "bytes")],
                       {"compression_type": compression_type}, name=scope or name).outputs[0]
