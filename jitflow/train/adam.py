"""`tf.train.AdamOptimizer` in TF1's epsilon-hat form.

lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
var -= lr_t * m / (sqrt(v) + epsilon)
beta1^t and beta2^t are the non-slot variables `beta1_power` and `beta2_power`, multiplied by
beta1 and beta2 after all variables are updated. As in TF1 they are float32 whatever the model's
dtype (a Python float makes a float32 variable), and on a float64 model every Python-float
hyper-parameter is its float32 rounding (see `Optimizer._hyper`).
"""
from __future__ import annotations

from jitflow.core.graph import control_dependencies
from jitflow.ops.identity import group
from jitflow.ops.state import assign, assign_sub
from jitflow.train.optimizer import Optimizer

__all__ = ["AdamOptimizer"]


def _sqrt(x):
    import jitflow.ops as ops
    return ops.sqrt(x)


class AdamOptimizer(Optimizer):
    """Adam; slots `m` (`w/Adam`) and `v` (`w/Adam_1`), non-slots `beta1_power`, `beta2_power`."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08,
                 use_locking: bool = False, name: str = "Adam") -> None:
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon

    def _get_beta_accumulators(self, graph=None):
        return (self._get_non_slot_variable("beta1_power", graph),
                self._get_non_slot_variable("beta2_power", graph))

    def _create_slots(self, var_list: list) -> None:
        first_var = min(var_list, key=lambda v: v.name)
        self._create_non_slot_variable(self._beta1, "beta1_power", first_var)
        self._create_non_slot_variable(self._beta2, "beta2_power", first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _apply_dense(self, grad, var):
        dt = var.dtype
        b1 = self._hyper("beta1", self._beta1, dt)
        b2 = self._hyper("beta2", self._beta2, dt)
        eps = self._hyper("epsilon", self._epsilon, dt)
        one = self._hyper("one", 1.0, dt)
        lr_t = self._lr_t(var)
        m = self.get_slot(var, "m")
        v = self.get_slot(var, "v")
        m_t = assign(m, b1 * m + (one - b1) * grad)
        v_t = assign(v, b2 * v + (one - b2) * (grad * grad))
        return assign_sub(var, lr_t * m_t / (_sqrt(v_t) + eps), read_value=False)

    def _lr_t(self, var):
        """lr * sqrt(1 - beta2^t) / (1 - beta1^t), built once per apply and dtype."""
        from jitflow.ops.math.casting import cast
        dt = var.dtype
        cache = self.__dict__["_hyper_cache"]
        lr_t = cache.get(("lr_t", dt))
        if lr_t is None:
            b1p, b2p = self._get_beta_accumulators(var.graph)
            b1p, b2p = cast(b1p.value(), dt), cast(b2p.value(), dt)
            lr = self._hyper("learning_rate", self._lr, dt)
            one = self._hyper("one", 1.0, dt)
            lr_t = cache[("lr_t", dt)] = lr * _sqrt(one - b2p) / (one - b1p)
        return lr_t

    def _finish(self, update_ops: list, name_scope: str):
        graph = update_ops[0].graph if update_ops else None
        b1p, b2p = self._get_beta_accumulators(graph)
        with control_dependencies(update_ops):
            b1 = self._hyper("beta1", self._beta1, b1p.dtype)
            b2 = self._hyper("beta2", self._beta2, b2p.dtype)
            update_b1 = assign(b1p, b1p * b1, read_value=False)
            update_b2 = assign(b2p, b2p * b2, read_value=False)
        return group(*update_ops, update_b1, update_b2, name=name_scope)
