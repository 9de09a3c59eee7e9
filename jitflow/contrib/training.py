"""`tf.contrib.training`: `HParams` (named, typed hyperparameters that parse
"lr=0.1,layers=[64,32]" strings and JSON) and `create_train_op`."""
from __future__ import annotations

import json
import logging
import numbers
import re
from typing import Callable, Optional

import jitflow as tf
from jitflow.core.graph import GraphKeys

__all__ = ["HParams", "parse_values", "create_train_op"]

_LOG = logging.getLogger("jitflow")

# name, optional [index], '=', then a single value or a bracketed list, then ',' or the end
_PARAM_RE = re.compile(r"""
    (?P<name>[a-zA-Z][\w.]*)
    (\[\s*(?P<index>\d+)\s*\])?
    \s*=\s*
    ((?P<val>[^,\[]*) | \[(?P<vals>[^\]]*)\])
    ($|,\s*)""", re.VERBOSE)


def _parse_one(name: str, kind: type, text: str, whole: str):
    def fail():
        raise ValueError(f"Could not parse hparam '{name}' of type '{kind.__name__}' with "
                         f"value '{text}' in {whole}")
    if kind is bool:
        if text in ("true", "True"):
            return True
        if text in ("false", "False"):
            return False
        try:
            return bool(int(text))
        except ValueError:
            fail()
    try:
        return kind(text)
    except (TypeError, ValueError):
        fail()


def parse_values(values: str, type_map: dict, ignore_unknown: bool = False) -> dict:
    """{name: value} from "name=value,name=[v1,v2],..." with each value parsed as
    `type_map[name]` (ValueError for malformed text, unknown names, repeated names and values
    that do not parse)."""
    out: dict = {}
    pos = 0
    while pos < len(values):
        m = _PARAM_RE.match(values, pos)
        if not m:
            raise ValueError(f"Malformed hyperparameter value: {values[pos:]}")
        pos = m.end()
        name = m.group("name")
        if name not in type_map:
            if ignore_unknown:
                continue
            raise ValueError(f"Unknown hyperparameter type for {name}")
        if m.group("index") is not None:
            raise ValueError(f"Indexed assignments ({name}[{m.group('index')}]=...) are not "
                             "supported")
        if name in out:
            raise ValueError(f"Multiple assignments to variable '{name}' in {values}")
        kind = type_map[name]
        if m.group("vals") is not None:
            items = [e for e in re.split("[ ,]", m.group("vals")) if e]
            out[name] = [_parse_one(name, kind, e, values) for e in items]
        else:
            out[name] = _parse_one(name, kind, m.group("val"), values)
    return out


def _cast(name: str, kind: type, value):
    """`value` as `kind`, refusing what TF 1.15 refuses: str from non-str, bool from non-bool
    (and back), int from non-int, numbers from non-numbers."""
    if type(value) is kind or issubclass(kind, type(None)):
        return value
    fail = f"Could not cast hparam '{name}' of type '{kind}' from value {value!r}"
    if issubclass(kind, (str, bytes)) and not isinstance(value, (str, bytes)):
        raise ValueError(fail)
    if issubclass(kind, bool) != isinstance(value, bool):
        raise ValueError(fail)
    if issubclass(kind, numbers.Integral) and not isinstance(value, numbers.Integral):
        raise ValueError(fail)
    if issubclass(kind, numbers.Number) and not isinstance(value, numbers.Number):
        raise ValueError(fail)
    return kind(value)


class HParams:
    """Hyperparameters as attributes: `HParams(learning_rate=0.1, layers=[64, 32])`.

    Each keeps the type of its first value (a list's element type for a list), and later
    values are cast to it: `parse("learning_rate=0.05,layers=[128,64]")`,
    `override_from_dict`, `set_hparam`, `parse_json`; `values()` gives a dict and `to_json()`
    its JSON.
    """

    def __init__(self, hparam_def=None, model_structure=None, **kwargs) -> None:
        self._hparam_types: dict = {}
        self._model_structure = model_structure
        if hparam_def is not None:
            raise NotImplementedError("HParams(hparam_def=...) (the HParamDef protocol buffer) "
                                      "is not supported")
        for name, value in kwargs.items():
            self.add_hparam(name, value)

    def add_hparam(self, name: str, value) -> None:
        """A new hyperparameter (ValueError for a name in use, or an empty list)."""
        if getattr(self, name, None) is not None:
            raise ValueError(f"Hyperparameter name is reserved: {name}")
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"Multi-valued hyperparameters cannot be empty: {name}")
            self._hparam_types[name] = (type(value[0]), True)
        else:
            self._hparam_types[name] = (type(value), False)
        setattr(self, name, value)

    def set_hparam(self, name: str, value) -> None:
        """Set an existing hyperparameter, cast to its type (KeyError if unknown)."""
        kind, is_list = self._hparam_types[name]
        if isinstance(value, list):
            if not is_list:
                raise ValueError(f"Must not pass a list for single-valued parameter: {name}")
            setattr(self, name, [_cast(name, kind, v) for v in value])
        else:
            if is_list:
                raise ValueError(f"Must pass a list for multi-valued parameter: {name}.")
            setattr(self, name, _cast(name, kind, value))

    def del_hparam(self, name: str) -> None:
        if hasattr(self, name):
            delattr(self, name)
            del self._hparam_types[name]

    def parse(self, values: str) -> "HParams":
        """Override from "name=value,..." text; returns self."""
        types = {n: t for n, (t, _) in self._hparam_types.items()}
        return self.override_from_dict(parse_values(values, types))

    def override_from_dict(self, values_dict: dict) -> "HParams":
        for name, value in values_dict.items():
            self.set_hparam(name, value)
        return self

    def set_model_structure(self, model_structure) -> None:
        self._model_structure = model_structure

    def get_model_structure(self):
        return self._model_structure

    def to_json(self, indent=None, separators=None, sort_keys: bool = False) -> str:
        """The values as JSON (callables left out)."""
        def drop_callables(obj):
            if isinstance(obj, dict):
                return {k: drop_callables(v) for k, v in obj.items() if not callable(v)}
            if isinstance(obj, list):
                return [drop_callables(v) for v in obj if not callable(v)]
            return obj
        return json.dumps(drop_callables(self.values()), indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def parse_json(self, values_json: str) -> "HParams":
        return self.override_from_dict(json.loads(values_json))

    def values(self) -> dict:
        return {n: getattr(self, n) for n in self._hparam_types}

    def get(self, key: str, default=None):
        """The value of `key`, or `default` (whose type must then match) if there is none."""
        if key in self._hparam_types:
            if default is not None:
                kind, is_list = self._hparam_types[key]
                fail = (f"Hparam '{key}' of type '{kind}' is incompatible with default="
                        f"{default!r}")
                if is_list != isinstance(default, list):
                    raise ValueError(fail)
                try:
                    for v in (default if is_list else [default]):
                        _cast(key, kind, v)
                except ValueError:
                    raise ValueError(fail) from None
            return getattr(self, key)
        return default

    def __contains__(self, key: str) -> bool:
        return key in self._hparam_types

    def __str__(self) -> str:
        return str(sorted(self.values().items()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"


def create_train_op(total_loss, optimizer, global_step="_USE_GLOBAL_STEP", update_ops=None,
                    variables_to_train=None, transform_grads_fn: Optional[Callable] = None,
                    summarize_gradients: bool = False, gate_gradients=1,
                    aggregation_method=None, colocate_gradients_with_ops: bool = False,
                    check_numerics: bool = True):
    """A tensor that runs the update ops, one optimizer step (incrementing the global step,
    created if missing, unless `global_step=None`) and returns the loss; added to TRAIN_OP."""
    if isinstance(global_step, str) and global_step == "_USE_GLOBAL_STEP":
        global_step = tf.train.get_or_create_global_step()
    in_graph = list(dict.fromkeys(tf.get_collection(GraphKeys.UPDATE_OPS)))
    update_ops = in_graph if update_ops is None else list(update_ops)
    if any(u not in update_ops for u in in_graph):
        _LOG.warning("update_ops in create_train_op does not contain all the update_ops in "
                     "GraphKeys.UPDATE_OPS")
    if update_ops:
        with tf.control_dependencies(update_ops):
            barrier = tf.no_op(name="update_barrier")
        with tf.control_dependencies([barrier]):
            total_loss = tf.identity(total_loss)
    if variables_to_train is None:
        variables_to_train = tf.trainable_variables()
    else:
        trainable = tf.trainable_variables()
        variables_to_train = [v for v in variables_to_train if v in trainable]
    if not variables_to_train:
        raise ValueError("create_train_op: there are no variables to train")
    grads = optimizer.compute_gradients(total_loss, variables_to_train,
                                        gate_gradients=gate_gradients,
                                        aggregation_method=aggregation_method,
                                        colocate_gradients_with_ops=colocate_gradients_with_ops)
    if transform_grads_fn is not None:
        grads = transform_grads_fn(grads)
    if summarize_gradients:
        with tf.name_scope("summarize_grads"):
            for g, v in grads:
                if g is not None:
                    tf.summary.histogram(v.op.name + "_gradient", g)
                    tf.summary.scalar(v.op.name + "_gradient_norm", tf.global_norm([g]))
    step = optimizer.apply_gradients(grads, global_step=global_step)
    with tf.name_scope("train_op"):
        if check_numerics:
            total_loss = tf.check_numerics(total_loss, "LossTensor is inf or nan")
        with tf.control_dependencies([step]):
            train_op = tf.identity(total_loss)
    train_ops = tf.get_collection_ref(GraphKeys.TRAIN_OP)
    if train_op not in train_ops:
        train_ops.append(train_op)
    return train_op
