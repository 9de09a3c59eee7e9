"""`tf.train.ExponentialMovingAverage`: shadow variables tracking moving averages.

shadow -= (1 - decay) * (shadow - value); with `num_updates`, the decay used is
min(decay, (1 + num_updates) / (10 + num_updates)), as TF1.
"""
from __future__ import annotations

from typing import Optional

from jitflow.core.graph import GraphKeys, convert_to_tensor, name_scope

__all__ = ["ExponentialMovingAverage"]


class ExponentialMovingAverage:
    """Maintains `<var name>/ExponentialMovingAverage` shadows; `apply()` returns the update op."""

    def __init__(self, decay, num_updates=None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage") -> None:
        if zero_debias:
            raise NotImplementedError("ExponentialMovingAverage(zero_debias=True) is not "
                                      "supported")
        self._decay = decay
        self._num_updates = num_updates
        self._name = name
        self._averages: dict = {}  # var op (or tensor) -> shadow Variable

    @property
    def name(self) -> str:
        return self._name

    def _key(self, v):
        from jitflow.ops.state import Variable
        return v.op if isinstance(v, Variable) else v

    def apply(self, var_list=None):
        """Create shadows (initialized to the variables' initial values) and return the op that
        updates them all."""
        import jitflow.ops as ops
        from jitflow.ops.identity import group
        from jitflow.ops.state import Variable, assign_sub
        if var_list is None:
            from jitflow.core.graph import get_default_graph
            var_list = get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES)
        var_list = list(var_list)
        for v in var_list:
            if not v.dtype.is_floating:
                raise TypeError(f"The variables must be half, float, or double: {v.name}")
            key = self._key(v)
            if key in self._averages:
                raise ValueError(f"Moving average already computed for: {v.name}")
            graph = v.graph
            with graph.as_default(), graph.name_scope(""), graph.control_dependencies(None):
                if isinstance(v, Variable):
                    init = v.initialized_value()
                    base = v.op.name
                else:
                    init = ops.zeros_like(v)
                    base = v.op.name
                shadow = Variable(init, name=f"{base}/{self._name}", trainable=False)
            self._averages[key] = shadow
            graph.add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, v)
        with name_scope(self._name) as scope:
            decay = convert_to_tensor(self._decay, name="decay")
            if not decay.dtype.is_floating:
                decay = ops.cast(decay, "float32")
            if self._num_updates is not None:
                n = ops.cast(self._num_updates, decay.dtype)
                decay = ops.minimum(decay, (1.0 + n) / (10.0 + n))
            updates = []
            for v in var_list:
                shadow = self._averages[self._key(v)]
                d = ops.cast(decay, v.dtype)
                value = v.value() if isinstance(v, Variable) else v
                updates.append(assign_sub(shadow, (1.0 - d) * (shadow - value),
                                          read_value=False))
            return group(*updates, name=scope)

    def average(self, var) -> Optional[object]:
        """The shadow variable of `var`, or None."""
        return self._averages.get(self._key(var))

    def average_name(self, var) -> str:
        """The checkpoint name of `var`'s shadow: `<var op name>/<name>`."""
        return f"{var.op.name}/{self._name}"

    def variables_to_restore(self, moving_avg_variables=None) -> dict:
        """{checkpoint name: variable} mapping averaged variables to their shadows' names, so
        restoring loads the averages into the model's variables."""
        from jitflow.core.graph import get_default_graph
        graph = get_default_graph()
        if moving_avg_variables is None:
            moving_avg_variables = graph.get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES) + \
                graph.get_collection(GraphKeys.TRAINABLE_VARIABLES)
        out: dict = {}
        averaged = set()
        for v in moving_avg_variables:
            out[self.average_name(v)] = v
            averaged.add(self._key(v))
        for v in graph.get_collection(GraphKeys.GLOBAL_VARIABLES):
            if self._key(v) not in averaged and v.op.name not in out:
                out[v.op.name] = v
        return out
