"""`tf.nn.rnn_cell`: TF1's recurrent cells and cell wrappers.

A cell maps `(inputs, state)` to `(output, new_state)` for one time step; `static_rnn` and
`dynamic_rnn` (`jitflow.lib.rnn`) run it over a sequence. Cells are layers: the first call opens
the cell's variable scope (`basic_lstm_cell`, `basic_lstm_cell_1`, ... unique within the
enclosing scope, as TF1's legacy layers name them) and builds the variables with TF1's names,
shapes and initializers (`rnn/basic_lstm_cell/kernel` of shape [input + units, 4 * units],
glorot-uniform; `bias` zeros), so a TF1 checkpoint restores into them; later calls reuse them.

The gate layouts are TF1's: an LSTM's kernel columns are the i, j, f, o gates (input, new
input, forget, output), a GRU's `gates/kernel` holds r then u, and `forget_bias` is added to
the forget gate at run time rather than stored in the bias.
"""
from __future__ import annotations

import collections
import hashlib
import numbers
import re
from typing import Callable, Optional

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, get_default_graph, name_scope
from jitflow.lib.layers import Layer
from jitflow.ops import (
    join as _join, shape_ops as _shape_ops, slicing as _slicing, sources as _sources,
)
from jitflow.ops.math import (
    arithmetic as _arithmetic, casting as _casting, compare as _compare, unary as _unary,
)
from jitflow.ops.nn import activations as _activations, basic as _basic
from jitflow.ops.init_ops import constant_initializer, zeros_initializer
from jitflow.ops.linalg import matmul
from jitflow.ops.variable_scope import get_variable, get_variable_scope, variable_scope
from jitflow.core import structure as _structure
from jitflow.core.shapes import TensorShape, as_shape
from jitflow.core.structure import flatten, is_nested, pack_sequence_as

__all__ = ["RNNCell", "LayerRNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell",
           "MultiRNNCell", "DropoutWrapper", "ResidualWrapper", "DeviceWrapper",
           "LSTMStateTuple"]


# -- nested structures: jitflow/core/structure.py (sequence types are not compared, as TF1's
# rnn code does not: a state may come back as a tuple where a list went in)
def map_structure(fn: Callable, *structs):
    """`fn` applied leaf by leaf to structures of the same shape."""
    return _structure.map_structure(fn, *structs, check_types=False)


def assert_same_structure(a, b) -> None:
    _structure.assert_same_structure(a, b, check_types=False)


# -- helpers --------------------------------------------------------------------------------------
def _snake_case(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return "private" + s if s.startswith("_") else s


def _dims(size) -> list:
    """A state or output size (int, TensorShape, list) as a list of dims."""
    if isinstance(size, numbers.Integral):
        return [int(size)]
    if isinstance(size, Tensor):
        from jitflow.ops._array_args import get_static_value
        v = get_static_value(size)
        if v is None:
            raise ValueError(f"The size {size.name} must be known when the graph is built")
        return [int(d) for d in (v.reshape(-1) if hasattr(v, "reshape") else [v])]
    return as_shape(size).as_list()


def concat_shape(prefix, suffix, static: bool = False):
    """[prefix] + suffix dims: a list when `static` (None for unknown), else a tensor when the
    prefix is a tensor."""
    if isinstance(prefix, Tensor):
        from jitflow.ops._array_args import get_static_value
        if static:
            v = get_static_value(prefix)
            return [None if v is None else int(v)] + _dims(suffix)
        if prefix.dtype != _dtypes.int32:
            prefix = _casting.cast(prefix, _dtypes.int32)
        return _join.stack([prefix] + _dims(suffix))
    pre = [None if prefix is None else int(prefix)] if not isinstance(prefix, TensorShape) \
        else prefix.as_list()
    return pre + _dims(suffix)


def zero_state_tensors(state_size, batch_size, dtype):
    """Zeros of shape [batch_size] + s for every leaf s of `state_size`."""
    def zeros(s):
        z = _sources.zeros(concat_shape(batch_size, s), dtype=dtype)
        z.set_shape(concat_shape(batch_size, s, static=True))
        return z
    return map_structure(zeros, state_size)


def _activation(activation) -> Callable:
    if not activation:
        return _unary.tanh
    if callable(activation):
        return activation
    table = {"tanh": _unary.tanh, "sigmoid": _unary.sigmoid, "relu": _activations.relu,
             "relu6": _activations.relu6, "elu": _activations.elu, "selu": _activations.selu,
             "softsign": _activations.softsign, "linear": lambda x: x}
    if activation not in table:
        raise ValueError(f"Unknown activation function: {activation}")
    return table[activation]


def check_float_dtypes(values) -> None:
    """RNN cells compute with floats only, as TF1's."""
    for t in flatten(values):
        if t is None:
            continue
        d = getattr(t, "dtype", None)
        if d is not None and not _dtypes.as_dtype(d).is_floating:
            raise ValueError(f"RNN cell only supports floating point inputs, but received "
                             f"dtype: {_dtypes.as_dtype(d).name}")


def _last_dim(input_shape, what: str) -> int:
    shape = as_shape(input_shape) if not isinstance(input_shape, TensorShape) else input_shape
    last = shape.as_list()[-1] if shape.ndims else None
    if last is None:
        raise ValueError(f"Expected inputs.shape[-1] to be known, received shape: {shape} "
                         f"({what})")
    return int(last)


def assert_like_rnncell(cell_name: str, cell) -> None:
    """TypeError unless `cell` has output_size, state_size, zero_state and is callable."""
    checks = [(hasattr(cell, "output_size"), "'output_size' property is missing"),
              (hasattr(cell, "state_size"), "'state_size' property is missing"),
              (hasattr(cell, "zero_state") or hasattr(cell, "get_initial_state"),
               "either 'zero_state' or 'get_initial_state' method is required"),
              (callable(cell), "is not callable")]
    missing = [msg for ok, msg in checks if not ok]
    if missing:
        raise TypeError(f"The argument {cell_name!r} ({cell}) is not an RNNCell: "
                        f"{', '.join(missing)}.")


# -- base classes ---------------------------------------------------------------------------------
class RNNCell(Layer):
    """`tf.nn.rnn_cell.RNNCell`: the abstract cell. Subclasses give `state_size`,
    `output_size` and `call(inputs, state) -> (output, new_state)` (or override `__call__`).

    The first call opens the cell's own variable scope (`<scope>/<snake_case class name>`,
    made unique) inside the variable scope current at that call; later calls reuse its
    variables.
    """

    _input_ndim: Optional[int] = None

    def __init__(self, trainable: bool = True, name: Optional[str] = None, dtype=None,
                 _reuse=None, **kwargs) -> None:
        kwargs.pop("_scope", None)
        super().__init__(trainable=trainable, name=name, dtype=dtype, _reuse=_reuse)
        self._base_name = name if isinstance(name, str) and name else \
            _snake_case(type(self).__name__)
        self.name = self._base_name
        self._outer_scope = None   # the variable scope of the first call (plain RNNCells)
        self._call_scope_arg = None

    # -- properties a subclass provides ---------------------------------------------------
    @property
    def state_size(self):
        """Size(s) of the state: an int, a TensorShape, or a nested tuple of them."""
        raise NotImplementedError("Abstract method")

    @property
    def output_size(self):
        """Size of the output: an int or a TensorShape."""
        raise NotImplementedError("Abstract method")

    # -- calling -------------------------------------------------------------------------------
    def __call__(self, inputs, state, scope=None, *args, **kwargs):
        """`(output, new_state)` for one step; see the class docstring for variable scopes."""
        if scope is not None:
            with variable_scope(scope) as s:
                return self._layer_call(inputs, state, s, *args, **kwargs)
        cur = get_variable_scope()
        if self._outer_scope is None:
            self._outer_scope = cur
        if self._outer_scope.name != cur.name:
            with variable_scope(self._outer_scope, auxiliary_name_scope=False):
                return self._layer_call(inputs, state, None, *args, **kwargs)
        return self._layer_call(inputs, state, None, *args, **kwargs)

    def _set_scope(self, scope) -> None:
        if self._scope is not None:
            return
        if self._reuse:
            with variable_scope(scope if scope is not None else self._base_name) as s:
                self._scope = s
        else:
            with variable_scope(scope, default_name=self._base_name) as s:
                self._scope = s
        self.name = self._scope.name.split("/")[-1] or self._base_name

    def _layer_call(self, inputs, state, scope, *args, **kwargs):
        self._set_scope(scope)
        first = flatten(inputs)[0] if inputs is not None else None
        if first is not None and not isinstance(first, Tensor):
            inputs = map_structure(convert_to_tensor, inputs)
            first = flatten(inputs)[0]
        if self._input_ndim is not None and first is not None:
            nd = first.shape.ndims
            if nd is not None and nd != self._input_ndim:
                raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: "
                                 f"expected ndim={self._input_ndim}, found ndim={nd}. Full "
                                 f"shape received: {first.shape.as_list()}")
        if self.dtype is None and first is not None:
            self.dtype = first.dtype.base_dtype
        reuse = True if self.built else self._reuse
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False):
            with name_scope(self._scope.original_name_scope or None):
                if not self.built:
                    self.build(map_structure(lambda t: t.shape, inputs)
                               if inputs is not None else None)
                    self.built = True
                if self._call_scope_arg is None:
                    import inspect
                    try:
                        params = inspect.signature(self.call).parameters
                        self._call_scope_arg = "scope" in params
                    except (TypeError, ValueError):
                        self._call_scope_arg = False
                if self._call_scope_arg:
                    kwargs["scope"] = self._scope
                return self.call(inputs, state, *args, **kwargs)

    def call(self, inputs, state):
        raise NotImplementedError("RNNCell subclasses implement call() or __call__()")

    # -- variables -----------------------------------------------------------------------------
    def add_weight(self, name: str, shape=None, dtype=None, initializer=None, regularizer=None,
                   trainable: Optional[bool] = None, constraint=None, partitioner=None,
                   **kwargs):
        """A variable `<cell scope>/<name>` made with get_variable (TF1's `add_variable`)."""
        if partitioner is not None:
            raise NotImplementedError("partitioned RNN cell variables are not supported")
        dtype = _dtypes.as_dtype(dtype or self.dtype or _dtypes.float32)
        v = get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                         regularizer=regularizer,
                         trainable=self.trainable and (trainable is None or trainable),
                         constraint=constraint)
        if v not in self._variables:
            self._variables.append(v)
        return v

    add_variable = add_weight

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        """`zero_state` for the batch size and dtype of `inputs` (or the ones given)."""
        if inputs is not None:
            inputs = convert_to_tensor(inputs, name="inputs")
            if dtype is not None and _dtypes.as_dtype(dtype) != inputs.dtype:
                raise ValueError(f"dtype from input tensor is different from the input param. "
                                 f"Input tensor dtype: {inputs.dtype.name}, dtype: "
                                 f"{_dtypes.as_dtype(dtype).name}")
            static = inputs.shape.as_list()[0] if inputs.shape.ndims else None
            batch_size = static if static is not None else _shape_ops.shape(inputs)[0]
            dtype = inputs.dtype
        if batch_size is None or dtype is None:
            raise ValueError(f"batch_size and dtype cannot be None while constructing initial "
                             f"state: batch_size={batch_size}, dtype={dtype}")
        return self.zero_state(batch_size, dtype)

    def zero_state(self, batch_size, dtype):
        """Zero-filled state: shape [batch_size, s] for each s of `state_size`."""
        with name_scope(type(self).__name__ + "ZeroState"):
            return zero_state_tensors(self.state_size, batch_size, _dtypes.as_dtype(dtype))

    def get_config(self) -> dict:
        return {"name": self.name, "trainable": self.trainable,
                "dtype": None if self.dtype is None else _dtypes.as_dtype(self.dtype).name}


class LayerRNNCell(RNNCell):
    """`tf.nn.rnn_cell.LayerRNNCell` (TF1 internal base): a cell whose variables are made in
    `build`; calls never look variables up with get_variable."""

    def __call__(self, inputs, state, scope=None, *args, **kwargs):
        return self._layer_call(inputs, state, scope, *args, **kwargs)


# -- the cells ------------------------------------------------------------------------------------
class BasicRNNCell(LayerRNNCell):
    """`output = new_state = activation(concat([inputs, state]) @ kernel + bias)`."""

    _input_ndim = 2

    def __init__(self, num_units: int, activation=None, reuse=None, name: Optional[str] = None,
                 dtype=None, **kwargs) -> None:
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = int(num_units)
        self._activation = _activation(activation)

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def build(self, input_shape) -> None:
        depth = _last_dim(input_shape, self.name)
        self._kernel = self.add_weight("kernel", shape=[depth + self._num_units,
                                                        self._num_units])
        self._bias = self.add_weight("bias", shape=[self._num_units],
                                     initializer=zeros_initializer(dtype=self.dtype))
        self.built = True

    def call(self, inputs, state):
        check_float_dtypes([inputs, state])
        z = _basic.bias_add(matmul(_join.concat([inputs, state], 1), self._kernel), self._bias)
        out = self._activation(z)
        return out, out


class GRUCell(LayerRNNCell):
    """Gated recurrent unit: `r, u = sigmoid(gates)`, `c = act(candidate(x, r * h))`,
    `h' = u * h + (1 - u) * c`. Variables `gates/kernel|bias` (bias ones by default) and
    `candidate/kernel|bias` (zeros)."""

    _input_ndim = 2

    def __init__(self, num_units: int, activation=None, reuse=None, kernel_initializer=None,
                 bias_initializer=None, name: Optional[str] = None, dtype=None,
                 **kwargs) -> None:
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = int(num_units)
        self._activation = _activation(activation)
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def build(self, input_shape) -> None:
        depth = _last_dim(input_shape, self.name)
        n = self._num_units
        self._gate_kernel = self.add_weight("gates/kernel", shape=[depth + n, 2 * n],
                                            initializer=self._kernel_initializer)
        self._gate_bias = self.add_weight(
            "gates/bias", shape=[2 * n],
            initializer=self._bias_initializer if self._bias_initializer is not None
            else constant_initializer(1.0, dtype=self.dtype))
        self._candidate_kernel = self.add_weight("candidate/kernel", shape=[depth + n, n],
                                                 initializer=self._kernel_initializer)
        self._candidate_bias = self.add_weight(
            "candidate/bias", shape=[n],
            initializer=self._bias_initializer if self._bias_initializer is not None
            else zeros_initializer(dtype=self.dtype))
        self.built = True

    def call(self, inputs, state):
        check_float_dtypes([inputs, state])
        g = _basic.bias_add(matmul(_join.concat([inputs, state], 1), self._gate_kernel),
                            self._gate_bias)
        r, u = _join.split(_unary.sigmoid(g), num_or_size_splits=2, axis=1)
        c = _basic.bias_add(matmul(_join.concat([inputs, r * state], 1), self._candidate_kernel),
                            self._candidate_bias)
        c = self._activation(c)
        new_h = u * state + (1 - u) * c
        return new_h, new_h


_LSTMStateTupleBase = collections.namedtuple("LSTMStateTuple", ("c", "h"))


class LSTMStateTuple(_LSTMStateTupleBase):
    """`(c, h)`: an LSTM's cell state and output (hidden) state."""

    __slots__ = ()

    @property
    def dtype(self):
        c, h = self
        if c.dtype != h.dtype:
            raise TypeError(f"Inconsistent internal state: {c.dtype!r} vs {h.dtype!r}")
        return c.dtype


class BasicLSTMCell(LayerRNNCell):
    """The basic LSTM: `i, j, f, o = split(concat([x, h]) @ kernel + bias, 4)`,
    `c' = c * sigmoid(f + forget_bias) + sigmoid(i) * act(j)`, `h' = act(c') * sigmoid(o)`."""

    _input_ndim = 2

    def __init__(self, num_units: int, forget_bias: float = 1.0, state_is_tuple: bool = True,
                 activation=None, reuse=None, name: Optional[str] = None, dtype=None,
                 **kwargs) -> None:
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = int(num_units)
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    @property
    def output_size(self):
        return self._num_units

    def build(self, input_shape) -> None:
        depth = _last_dim(input_shape, self.name)
        n = self._num_units
        self._kernel = self.add_weight("kernel", shape=[depth + n, 4 * n])
        self._bias = self.add_weight("bias", shape=[4 * n],
                                     initializer=zeros_initializer(dtype=self.dtype))
        self.built = True

    def call(self, inputs, state):
        check_float_dtypes([inputs, state])
        if self._state_is_tuple:
            c, h = state
        else:
            c, h = _join.split(state, num_or_size_splits=2, axis=1)
        z = _basic.bias_add(matmul(_join.concat([inputs, h], 1), self._kernel), self._bias)
        i, j, f, o = _join.split(z, num_or_size_splits=4, axis=1)
        forget_bias = convert_to_tensor(self._forget_bias, dtype=f.dtype)
        act, sig = self._activation, _unary.sigmoid
        new_c = c * sig(f + forget_bias) + sig(i) * act(j)
        new_h = act(new_c) * sig(o)
        new_state = LSTMStateTuple(new_c, new_h) if self._state_is_tuple else \
            _join.concat([new_c, new_h], 1)
        return new_h, new_state


class LSTMCell(LayerRNNCell):
    """LSTM with optional peepholes (`w_f_diag`, `w_i_diag`, `w_o_diag`), cell clipping and
    a projection of the output (`projection/kernel`, clipped by `proj_clip`)."""

    _input_ndim = 2

    def __init__(self, num_units: int, use_peepholes: bool = False, cell_clip=None,
                 initializer=None, num_proj: Optional[int] = None, proj_clip=None,
                 num_unit_shards=None, num_proj_shards=None, forget_bias: float = 1.0,
                 state_is_tuple: bool = True, activation=None, reuse=None,
                 name: Optional[str] = None, dtype=None, **kwargs) -> None:
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        if num_unit_shards is not None or num_proj_shards is not None:
            raise NotImplementedError("LSTMCell: num_unit_shards/num_proj_shards (partitioned "
                                      "variables) are not supported")
        self._num_units = int(num_units)
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = None if num_proj is None else int(num_proj)
        self._proj_clip = proj_clip
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)
        m = self._num_proj or self._num_units
        self._state_size = LSTMStateTuple(self._num_units, m) if state_is_tuple else \
            self._num_units + m
        self._output_size = m

    @property
    def state_size(self):
        return self._state_size

    @property
    def output_size(self):
        return self._output_size

    def build(self, input_shape) -> None:
        depth = _last_dim(input_shape, self.name)
        n = self._num_units
        h_depth = self._num_proj or n
        init = self._initializer
        self._kernel = self.add_weight("kernel", shape=[depth + h_depth, 4 * n],
                                       initializer=init)
        self._bias = self.add_weight("bias", shape=[4 * n],
                                     initializer=zeros_initializer(dtype=self.dtype))
        if self._use_peepholes:
            self._w_f_diag = self.add_weight("w_f_diag", shape=[n], initializer=init)
            self._w_i_diag = self.add_weight("w_i_diag", shape=[n], initializer=init)
            self._w_o_diag = self.add_weight("w_o_diag", shape=[n], initializer=init)
        if self._num_proj is not None:
            self._proj_kernel = self.add_weight("projection/kernel",
                                                shape=[n, self._num_proj], initializer=init)
        self.built = True

    def call(self, inputs, state):
        check_float_dtypes([inputs, state])
        n = self._num_units
        m = self._num_proj or n
        if self._state_is_tuple:
            c_prev, m_prev = state
        else:
            c_prev = _slicing.slice(state, [0, 0], [-1, n])
            m_prev = _slicing.slice(state, [0, n], [-1, m])
        if inputs.shape.ndims != 2 or inputs.shape.as_list()[1] is None:
            raise ValueError(f"Could not infer input size from inputs.get_shape()[-1]. "
                             f"Received input shape: {inputs.shape}")
        z = _basic.bias_add(matmul(_join.concat([inputs, m_prev], 1), self._kernel), self._bias)
        i, j, f, o = _join.split(z, num_or_size_splits=4, axis=1)
        sig, act = _unary.sigmoid, self._activation
        if self._use_peepholes:
            c = (sig(f + self._forget_bias + self._w_f_diag * c_prev) * c_prev
                 + sig(i + self._w_i_diag * c_prev) * act(j))
        else:
            c = sig(f + self._forget_bias) * c_prev + sig(i) * act(j)
        if self._cell_clip is not None:
            c = _compare.clip_by_value(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            out = sig(o + self._w_o_diag * c) * act(c)
        else:
            out = sig(o) * act(c)
        if self._num_proj is not None:
            out = matmul(out, self._proj_kernel)
            if self._proj_clip is not None:
                out = _compare.clip_by_value(out, -self._proj_clip, self._proj_clip)
        new_state = LSTMStateTuple(c, out) if self._state_is_tuple else \
            _join.concat([c, out], 1)
        return out, new_state


class MultiRNNCell(RNNCell):
    """Cells stacked: cell k's output is cell k+1's input, in scopes `cell_0`, `cell_1`, ..."""

    def __init__(self, cells, state_is_tuple: bool = True) -> None:
        super().__init__()
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not is_nested(cells):
            raise TypeError(f"cells must be a list or tuple, but saw: {cells}.")
        self._cells = list(cells)
        self._state_is_tuple = state_is_tuple
        if not state_is_tuple and any(is_nested(c.state_size) for c in self._cells):
            raise ValueError("Some cells return tuples of states, but the flag state_is_tuple "
                             f"is not set.  State sizes are: "
                             f"{[c.state_size for c in self._cells]}")

    @property
    def state_size(self):
        if self._state_is_tuple:
            return tuple(c.state_size for c in self._cells)
        return sum(c.state_size for c in self._cells)

    @property
    def output_size(self):
        return self._cells[-1].output_size

    def zero_state(self, batch_size, dtype):
        with name_scope(type(self).__name__ + "ZeroState"):
            if self._state_is_tuple:
                return tuple(c.zero_state(batch_size, dtype) for c in self._cells)
            return zero_state_tensors(self.state_size, batch_size, _dtypes.as_dtype(dtype))

    @property
    def variables(self) -> list:
        out = []
        for c in self._cells:
            for v in getattr(c, "variables", []):
                if v not in out:
                    out.append(v)
        return out

    weights = variables

    @property
    def trainable_variables(self) -> list:
        out = []
        for c in self._cells:
            for v in getattr(c, "trainable_variables", []):
                if v not in out:
                    out.append(v)
        return out

    trainable_weights = trainable_variables

    def call(self, inputs, state):
        pos = 0
        cur = inputs
        new_states = []
        for k, cell in enumerate(self._cells):
            with variable_scope(f"cell_{k}"):
                if self._state_is_tuple:
                    if not is_nested(state):
                        raise ValueError(f"Expected state to be a tuple of length "
                                         f"{len(self.state_size)}, but received: {state}")
                    sub = state[k]
                else:
                    sub = _slicing.slice(state, [0, pos], [-1, cell.state_size])
                    pos += cell.state_size
                cur, new = cell(cur, sub)
                new_states.append(new)
        return cur, (tuple(new_states) if self._state_is_tuple else
                     _join.concat(new_states, 1))


# -- wrappers -------------------------------------------------------------------------------------
class _Wrapper(RNNCell):
    """A cell around another cell: same state and output sizes; calls it in the current
    variable scope (the wrapper adds no scope of its own)."""

    def __init__(self, cell, name: Optional[str] = None, dtype=None, **kwargs) -> None:
        super().__init__(name=name, dtype=dtype, **kwargs)
        assert_like_rnncell("cell", cell)
        self.cell = cell

    @property
    def wrapped_cell(self):
        return self.cell

    @property
    def state_size(self):
        return self.cell.state_size

    @property
    def output_size(self):
        return self.cell.output_size

    def zero_state(self, batch_size, dtype):
        with name_scope(type(self).__name__ + "ZeroState"):
            return self.cell.zero_state(batch_size, dtype)

    @property
    def variables(self) -> list:
        return list(getattr(self.cell, "variables", []))

    weights = variables

    @property
    def trainable_variables(self) -> list:
        return list(getattr(self.cell, "trainable_variables", []))

    trainable_weights = trainable_variables

    def build(self, input_shape) -> None:
        self.built = True

    def __call__(self, inputs, state, scope=None):
        return self._wrap(inputs, state, lambda i, s: self.cell(i, s, scope=scope))

    def _wrap(self, inputs, state, call_cell):
        raise NotImplementedError


def _default_state_filter(substate):
    """DropoutWrapper's default: drop every state leaf but the `c` of an LSTMStateTuple."""
    if isinstance(substate, LSTMStateTuple):
        return LSTMStateTuple(c=False, h=True)
    return True


def _filtered_leaves(visitor: Callable, struct) -> list:
    """Per leaf of `struct`: whether dropout applies (the visitor's answers, TF1's rules)."""
    def walk(s, on: bool) -> list:
        if not on:
            return [False] * len(flatten(s))
        d = visitor(s)
        if isinstance(d, bool):
            return [d] * len(flatten(s))
        if is_nested(s):
            parts = list(s.values()) if isinstance(s, dict) else list(s)
            flags = list(d.values()) if isinstance(d, dict) else list(d)
            if len(flags) != len(parts):
                raise ValueError("dropout_state_filter_visitor returned a structure that does "
                                 "not match the state")
            return [x for p, f in zip(parts, flags) for x in walk(p, bool(f))]
        return [bool(d)]
    return walk(struct, True)


class DropoutWrapper(_Wrapper):
    """Dropout on a cell's inputs, outputs and (all but an LSTM's `c`) new state, with keep
    probabilities that may be tensors (a placeholder fed 1.0 at test time). Each of the three
    draws with its own seed derived from `seed` as TF1 derives it; with
    `variational_recurrent=True` one mask per run is used at every step."""

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent: bool = False, input_size=None, dtype=None, seed=None,
                 dropout_state_filter_visitor=None, **kwargs) -> None:
        super().__init__(cell, dtype=dtype, **kwargs)
        if dropout_state_filter_visitor is not None and \
                not callable(dropout_state_filter_visitor):
            raise TypeError("dropout_state_filter_visitor must be callable")
        self._state_filter = dropout_state_filter_visitor or _default_state_filter
        from jitflow.ops._array_args import get_static_value
        with name_scope("DropoutWrapperInit"):
            for prob, attr in ((input_keep_prob, "input_keep_prob"),
                               (state_keep_prob, "state_keep_prob"),
                               (output_keep_prob, "output_keep_prob")):
                t = convert_to_tensor(prob)
                const = get_static_value(t)
                if const is not None:
                    const = float(const)
                    if const < 0 or const > 1:
                        raise ValueError(f"Parameter {attr} must be between 0 and 1: {const:g}")
                    setattr(self, "_" + attr, const)
                else:
                    setattr(self, "_" + attr, t)
        self._variational = variational_recurrent
        self._seed = seed
        self._input_noise = self._state_noise = self._output_noise = None
        if variational_recurrent:
            if dtype is None:
                raise ValueError("When variational_recurrent=True, dtype must be provided")
            from jitflow.ops.random import random_uniform

            def noise(salt, sizes):
                leaves = flatten(sizes)
                return pack_sequence_as(sizes, [
                    random_uniform([1] + _dims(s), seed=self._gen_seed(salt, i), dtype=dtype)
                    for i, s in enumerate(leaves)])

            if not isinstance(self._input_keep_prob, float) or self._input_keep_prob < 1.0:
                if input_size is None:
                    raise ValueError("When variational_recurrent=True and input_keep_prob < 1.0 "
                                     "or is unknown, input_size must be provided")
                self._input_noise = noise("input", input_size)
            self._state_noise = noise("state", cell.state_size)
            self._output_noise = noise("output", cell.output_size)

    def _gen_seed(self, salt_prefix: str, index: int):
        if self._seed is None:
            return None
        text = (str(self._seed) + f"{salt_prefix}_{index}").encode("utf-8")
        return int(hashlib.md5(text).hexdigest()[:8], 16) & 0x7FFFFFFF

    def _dropout(self, values, salt: str, noise, keep, flags=None):
        leaves = flatten(values)
        flags = flags or [True] * len(leaves)
        noises = flatten(noise) if noise is not None else [None] * len(leaves)
        out = []
        for i, (v, on, nz) in enumerate(zip(leaves, flags, noises)):
            if not on:
                out.append(v)
            elif nz is None:
                out.append(_basic.dropout(v, keep_prob=keep, seed=self._gen_seed(salt, i)))
            else:
                r = _arithmetic.divide(v, keep) * _unary.floor(keep + nz)
                r.set_shape(v.shape)
                out.append(r)
        return pack_sequence_as(values, out)

    @staticmethod
    def _active(p) -> bool:
        return not isinstance(p, float) or p < 1

    def _wrap(self, inputs, state, call_cell):
        if self._active(self._input_keep_prob):
            inputs = self._dropout(inputs, "input", self._input_noise, self._input_keep_prob)
        output, new_state = call_cell(inputs, state)
        if self._active(self._state_keep_prob):
            flags = _filtered_leaves(self._state_filter, new_state)
            new_state = self._dropout(new_state, "state", self._state_noise,
                                      self._state_keep_prob, flags)
        if self._active(self._output_keep_prob):
            output = self._dropout(output, "output", self._output_noise,
                                   self._output_keep_prob)
        return output, new_state


class ResidualWrapper(_Wrapper):
    """The cell's output plus its input (or `residual_fn(inputs, outputs)`)."""

    def __init__(self, cell, residual_fn: Optional[Callable] = None, **kwargs) -> None:
        super().__init__(cell, **kwargs)
        self._residual_fn = residual_fn

    def _wrap(self, inputs, state, call_cell):
        outputs, new_state = call_cell(inputs, state)
        if self._residual_fn is not None:
            return self._residual_fn(inputs, outputs), new_state

        def add(i, o):
            if not i.shape.is_compatible_with(o.shape):
                raise ValueError(f"ResidualWrapper: the input shape {i.shape} and the cell's "
                                 f"output shape {o.shape} are incompatible")
            return i + o
        return map_structure(add, inputs, outputs), new_state


class DeviceWrapper(_Wrapper):
    """Accepted for compatibility: calls the cell under `tf.device(device)`."""

    def __init__(self, cell, device, **kwargs) -> None:
        super().__init__(cell, **kwargs)
        self._device = device

    def _wrap(self, inputs, state, call_cell):
        with get_default_graph().device(self._device):
            return call_cell(inputs, state)
