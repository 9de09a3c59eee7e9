"""`tf.train.MomentumOptimizer` (TF1's ApplyMomentum formula).

accum = accum * momentum + grad; var -= lr * accum
(Nesterov: var -= lr * (grad + momentum * accum), with the new accum.)
"""
from __future__ import annotations

from jitflow.ops.state import assign, assign_sub
from jitflow.train.optimizer import Optimizer

__all__ = ["MomentumOptimizer"]


class MomentumOptimizer(Optimizer):
    """Gradient descent with momentum; one slot `momentum` per variable (`w/Momentum`)."""

    def __init__(self, learning_rate, momentum, use_locking: bool = False,
                 name: str = "Momentum", use_nesterov: bool = False) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _create_slots(self, var_list: list) -> None:
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _apply_dense(self, grad, var):
        lr = self._hyper("learning_rate", self._learning_rate, var.dtype)
        mom = self._hyper("momentum", self._momentum, var.dtype)
        accum = self.get_slot(var, "momentum")
        accum_t = assign(accum, accum * mom + grad)
        if self._use_nesterov:
            return assign_sub(var, lr * (grad + mom * accum_t), read_value=False)
        return assign_sub(var, lr * accum_t, read_value=False)
