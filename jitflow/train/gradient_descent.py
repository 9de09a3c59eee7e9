"""`tf.train.GradientDescentOptimizer`: var -= learning_rate * grad."""
from __future__ import annotations

from jitflow.ops.state import assign_sub
from jitflow.train.optimizer import Optimizer

__all__ = ["GradientDescentOptimizer"]


class GradientDescentOptimizer(Optimizer):
    """Plain gradient descent; `learning_rate` is a float, a Tensor or a callable."""

    def __init__(self, learning_rate, use_locking: bool = False,
                 name: str = "GradientDescent") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate

    def _apply_dense(self, grad, var):
        lr = self._hyper("learning_rate", self._learning_rate, var.dtype)
        return assign_sub(var, lr * grad, read_value=False)

    def _apply_sparse(self, values, indices, var):
        from jitflow.train.sparse_apply import apply_sparse_gradient_descent
        lr = self._hyper("learning_rate", self._learning_rate, var.dtype)
        return apply_sparse_gradient_descent(var, lr, values, indices)
