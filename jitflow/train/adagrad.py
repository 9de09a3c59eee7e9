"""`tf.train.AdagradOptimizer` (TF1's ApplyAdagrad): accum += g^2; var -= lr * g / sqrt(accum)."""
from __future__ import annotations

from jitflow.ops.state import assign_add, assign_sub
from jitflow.train.optimizer import Optimizer

__all__ = ["AdagradOptimizer"]


class AdagradOptimizer(Optimizer):
    """Adagrad; slot `accumulator` (`w/Adagrad`) starts at `initial_accumulator_value`."""

    def __init__(self, learning_rate, initial_accumulator_value: float = 0.1,
                 use_locking: bool = False, name: str = "Adagrad") -> None:
        if initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value

    def _create_slots(self, var_list: list) -> None:
        for v in var_list:
            self._get_or_make_slot(v, self._initial_accumulator_value, "accumulator",
                                   self._name)

    def _apply_dense(self, grad, var):
        import jitflow.ops as ops
        lr = self._hyper("learning_rate", self._learning_rate, var.dtype)
        acc_t = assign_add(self.get_slot(var, "accumulator"), grad * grad)
        return assign_sub(var, lr * grad / ops.sqrt(acc_t), read_value=False)
