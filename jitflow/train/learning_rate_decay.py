"""Learning-rate schedules as graph ops of the global step (TF1 `tf.train.*_decay`)."""
from __future__ import annotations

from typing import Optional

from jitflow.core.graph import Tensor, convert_to_tensor, name_scope

__all__ = ["exponential_decay", "inverse_time_decay", "natural_exp_decay", "polynomial_decay",
           "piecewise_constant", "cosine_decay", "piecewise_constant_decay",
           "cosine_decay_restarts", "linear_cosine_decay", "noisy_linear_cosine_decay"]


def _ops():
    import jitflow.ops as ops
    return ops


def _check_step(global_step) -> None:
    if global_step is None:
        raise ValueError("global_step is required for this decay.")


def _as_float(value, dtype=None, name: Optional[str] = None):
    """`value` as a float tensor: of `dtype` when given (tensors are cast), else float32."""
    ops = _ops()
    if dtype is None:
        t = convert_to_tensor(value, name=name)
        return t if t.dtype.is_floating else ops.cast(t, "float32")
    if isinstance(value, Tensor) or hasattr(value, "_to_tensor"):
        return ops.cast(convert_to_tensor(value), dtype)
    return convert_to_tensor(value, dtype=dtype)


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate,
                      staircase: bool = False, name: Optional[str] = None):
    """lr * decay_rate ^ (global_step / decay_steps) (the exponent floored with staircase)."""
    _check_step(global_step)
    ops = _ops()
    with name_scope(name, "ExponentialDecay") as scope:
        lr = _as_float(learning_rate, name="learning_rate")
        dt = lr.dtype
        step = ops.cast(global_step, dt)
        p = step / _as_float(decay_steps, dt)
        if staircase:
            p = ops.floor(p)
        return ops.multiply(lr, ops.pow(_as_float(decay_rate, dt), p), name=scope)


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate,
                      staircase: bool = False, name: Optional[str] = None):
    """lr * exp(-decay_rate * global_step / decay_steps)."""
    _check_step(global_step)
    ops = _ops()
    with name_scope(name, "NaturalExpDecay") as scope:
        lr = _as_float(learning_rate, name="learning_rate")
        dt = lr.dtype
        p = ops.cast(global_step, dt) / _as_float(decay_steps, dt)
        if staircase:
            p = ops.floor(p)
        return ops.multiply(lr, ops.exp(-_as_float(decay_rate, dt) * p), name=scope)


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate,
                       staircase: bool = False, name: Optional[str] = None):
    """lr / (1 + decay_rate * global_step / decay_steps)."""
    _check_step(global_step)
    ops = _ops()
    with name_scope(name, "InverseTimeDecay") as scope:
        lr = _as_float(learning_rate, name="learning_rate")
        dt = lr.dtype
        p = ops.cast(global_step, dt) / _as_float(decay_steps, dt)
        if staircase:
            p = ops.floor(p)
        denom = _as_float(1.0, dt) + _as_float(decay_rate, dt) * p
        return ops.truediv(lr, denom, name=scope)


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001,
                     power=1.0, cycle: bool = False, name: Optional[str] = None):
    """(lr - end) * (1 - min(step, decay_steps) / decay_steps) ^ power + end.

    With `cycle`, decay_steps is stretched to the next multiple that covers the step.
    """
    _check_step(global_step)
    ops = _ops()
    with name_scope(name, "PolynomialDecay") as scope:
        lr = _as_float(learning_rate, name="learning_rate")
        dt = lr.dtype
        end = _as_float(end_learning_rate, dt)
        pw = _as_float(power, dt)
        step = ops.cast(global_step, dt)
        steps = _as_float(decay_steps, dt)
        if cycle:
            # ceil(step / steps), but at least 1 (TF1 uses 1 at step 0)
            mult = ops.maximum(ops.ceil(step / steps), _as_float(1.0, dt))
            steps = steps * mult
        else:
            step = ops.minimum(step, steps)
        frac = _as_float(1.0, dt) - step / steps
        return ops.add((lr - end) * ops.pow(frac, pw), end, name=scope)


def piecewise_constant(x, boundaries, values, name: Optional[str] = None):
    """values[0] while x <= boundaries[0], values[i] while boundaries[i-1] < x <= boundaries[i],
    values[-1] after the last boundary (a chain of selects, so values come out exactly)."""
    if len(boundaries) != len(values) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    ops = _ops()
    with name_scope(name, "PiecewiseConstant") as scope:
        x = convert_to_tensor(x)
        vals = [convert_to_tensor(v) for v in values]
        dt = vals[0].dtype
        for v in vals[1:]:
            if v.dtype != dt:
                raise ValueError(f"Values must have elements all with the same dtype "
                                 f"({dt.name} vs {v.dtype.name}).")
        out = vals[0]
        for i, b in enumerate(boundaries):
            if isinstance(b, Tensor):
                if b.dtype != x.dtype:
                    raise ValueError(f"Boundaries ({b.dtype.name}) must have the same dtype "
                                     f"as x ({x.dtype.name}).")
            else:
                b = convert_to_tensor(b, dtype=x.dtype)
            out = ops.where(ops.greater(x, b), vals[i + 1], out)
        return ops.identity(out, name=scope)


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0,
                 name: Optional[str] = None):
    """lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha)."""
    _check_step(global_step)
    ops = _ops()
    with name_scope(name, "CosineDecay") as scope:
        lr = _as_float(learning_rate, name="learning_rate")
        dt = lr.dtype
        steps = _as_float(decay_steps, dt)
        step = ops.minimum(ops.cast(global_step, dt), steps)
        a = _as_float(alpha, dt)
        cosine = _as_float(0.5, dt) * (_as_float(1.0, dt) + ops.cos(
            _as_float(3.141592653589793, dt) * step / steps))
        return ops.multiply(lr, (_as_float(1.0, dt) - a) * cosine + a, name=scope)


def piecewise_constant_decay(x, boundaries, values, name: Optional[str] = None):
    """`tf.train.piecewise_constant_decay`: the same as `piecewise_constant`."""
    return piecewise_constant(x, boundaries, values, name=name)


def cosine_decay_restarts(learning_rate, global_step, first_decay_steps, t_mul=2.0,
                          m_mul=1.0, alpha=0.0, name: Optional[str] = None):
    """Cosine decay with warm restarts (SGDR): periods `t_mul` times longer each restart,
    their peaks `m_mul` times lower."""
    import math
    _check_step(global_step)
    ops = _ops()
    with name_scope(name, "SGDRDecay") as scope:
        lr = _as_float(learning_rate, name="learning_rate")
        dt = lr.dtype
        frac = ops.cast(global_step, dt) / _as_float(first_decay_steps, dt)
        if float(t_mul) == 1.0:
            i_restart = ops.floor(frac)
            frac = frac - i_restart
        else:
            t = float(t_mul)
            i_restart = ops.floor(ops.log(1.0 - frac * (1.0 - t)) / math.log(t))
            sum_r = (1.0 - ops.pow(_as_float(t, dt), i_restart)) / (1.0 - t)
            frac = (frac - sum_r) / ops.pow(_as_float(t, dt), i_restart)
        m_fac = ops.pow(_as_float(float(m_mul), dt), i_restart)
        cosine = 0.5 * m_fac * (1.0 + ops.cos(math.pi * frac))
        a = _as_float(alpha, dt)
        return ops.multiply(lr, (1.0 - a) * cosine + a, name=scope)


def _linear_cosine(global_step, decay_steps, num_periods, ops, dt):
    import math
    steps = _as_float(decay_steps, dt)
    step = ops.minimum(ops.cast(global_step, dt), steps)
    linear = (steps - step) / steps
    cosine = 0.5 * (1.0 + ops.cos(math.pi * 2.0 * float(num_periods) * step / steps))
    return step, linear, cosine


def linear_cosine_decay(learning_rate, global_step, decay_steps, num_periods=0.5, alpha=0.0,
                        beta=0.001, name: Optional[str] = None):
    """lr * ((alpha + linear) * cosine + beta), linear falling from 1 to 0 over
    `decay_steps` and cosine making `num_periods` periods."""
    _check_step(global_step)
    ops = _ops()
    with name_scope(name, "LinearCosineDecay") as scope:
        lr = _as_float(learning_rate, name="learning_rate")
        _, linear, cosine = _linear_cosine(global_step, decay_steps, num_periods, ops, lr.dtype)
        return ops.multiply(lr, (float(alpha) + linear) * cosine + float(beta), name=scope)


def noisy_linear_cosine_decay(learning_rate, global_step, decay_steps, initial_variance=1.0,
                              variance_decay=0.55, num_periods=0.5, alpha=0.0, beta=0.001,
                              name: Optional[str] = None):
    """`linear_cosine_decay` with Gaussian noise of variance
    initial_variance / (1 + step)^variance_decay added to the linear part."""
    _check_step(global_step)
    ops = _ops()
    with name_scope(name, "NoisyLinearCosineDecay") as scope:
        lr = _as_float(learning_rate, name="learning_rate")
        dt = lr.dtype
        step, linear, cosine = _linear_cosine(global_step, decay_steps, num_periods, ops, dt)
        std = ops.sqrt(float(initial_variance) / ops.pow(1.0 + step, float(variance_decay)))
        noisy = linear + ops.random_normal([], dtype=dt) * std
        return ops.multiply(lr, (float(alpha) + noisy) * cosine + float(beta), name=scope)
