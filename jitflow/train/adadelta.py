"""`tf.train.AdadeltaOptimizer` (TF1's ApplyAdadelta).

accum = rho * accum + (1 - rho) * g^2
update = sqrt(accum_update + eps) / sqrt(accum + eps) * g
accum_update = rho * accum_update + (1 - rho) * update^2
var -= lr * update
"""
from __future__ import annotations

from jitflow.ops.identity import group
from jitflow.ops.state import assign, assign_sub
from jitflow.train.optimizer import Optimizer

__all__ = ["AdadeltaOptimizer"]


class AdadeltaOptimizer(Optimizer):
    """Adadelta; slots `accum` (`w/Adadelta`) and `accum_update` (`w/Adadelta_1`)."""

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking: bool = False,
                 name: str = "Adadelta") -> None:
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._rho = rho
        self._epsilon = epsilon

    def _create_slots(self, var_list: list) -> None:
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _apply_dense(self, grad, var):
        import jitflow.ops as ops
        dt = var.dtype
        lr = self._hyper("learning_rate", self._lr, dt)
        rho = self._hyper("rho", self._rho, dt)
        eps = self._hyper("epsilon", self._epsilon, dt)
        one = self._hyper("one", 1.0, dt)
        accum, accum_update = self.get_slot(var, "accum"), self.get_slot(var, "accum_update")
        accum_t = assign(accum, rho * accum + (one - rho) * (grad * grad))
        update = ops.sqrt(accum_update + eps) / ops.sqrt(accum_t + eps) * grad
        accum_update_t = assign(accum_update, rho * accum_update + (one - rho) * (update * update))
        var_update = assign_sub(var, lr * update, read_value=False)
        return group(var_update, accum_update_t)
