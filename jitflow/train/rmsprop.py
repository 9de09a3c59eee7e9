"""`tf.train.RMSPropOptimizer` (TF1's ApplyRMSProp / ApplyCenteredRMSProp).

ms = decay * ms + (1 - decay) * g^2
mom = momentum * mom + lr * g / sqrt(ms + epsilon)      (centered: sqrt(ms - mg^2 + epsilon),
var -= mom                                               mg = decay * mg + (1 - decay) * g)
"""
from __future__ import annotations

from jitflow.ops.state import assign, assign_sub
from jitflow.train.optimizer import Optimizer

__all__ = ["RMSPropOptimizer"]


class RMSPropOptimizer(Optimizer):
    """RMSProp; slots `rms` (starts at ones), `momentum` and, when centered, `mg`."""

    def __init__(self, learning_rate, decay: float = 0.9, momentum: float = 0.0,
                 epsilon: float = 1e-10, use_locking: bool = False, centered: bool = False,
                 name: str = "RMSProp") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = centered

    def _create_slots(self, var_list: list) -> None:
        for v in var_list:
            self._get_or_make_slot(v, 1.0, "rms", self._name)
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _apply_dense(self, grad, var):
        import jitflow.ops as ops
        dt = var.dtype
        lr = self._hyper("learning_rate", self._learning_rate, dt)
        rho = self._hyper("decay", self._decay, dt)
        mom = self._hyper("momentum", self._momentum, dt)
        eps = self._hyper("epsilon", self._epsilon, dt)
        one = self._hyper("one", 1.0, dt)
        rms, mom_slot = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        ms_t = assign(rms, rho * rms + (one - rho) * (grad * grad))
        denom = ms_t
        if self._centered:
            mg = self.get_slot(var, "mg")
            mg_t = assign(mg, rho * mg + (one - rho) * grad)
            denom = ms_t - mg_t * mg_t
        mom_t = assign(mom_slot, mom * mom_slot + lr * grad / ops.sqrt(denom + eps))
        return assign_sub(var, mom_t, read_value=False)
