"""Fast AdamW update, gradient norm and shard sum: one pass over each parameter instead of thirteen
(AdamW) or three (the sum).

References: ``zerollm.training.optim.adamw_update`` and ``sum_of_squares``,
``zerollm.training.objective.add_scaled``. The update rounds every
operation in the reference's order (each NumPy in-place step is one float32 operation), so it is
bit-identical to NumPy's and training resumes exactly under either engine; so does the shard sum
(g a + other b, two products and a sum, each rounded once). The sum of squares accumulates in
float64: as accurate as the reference or more.
"""

import numpy as np

from zerollm.engine.fast.jit import exact_kernel, float32_arrays, kernel


@exact_kernel
def _adamw(p, g, m, v, decay, b1, b1c, b2, b2c, eps, bc2_sqrt, step_size):
    """decay = 1 - lr*wd (1 without decay), b1c = 1 - b1, b2c = 1 - b2; all float32."""
    for i in range(p.size):
        gi = g[i]
        pi = p[i] * decay
        mi = m[i] * b1 + gi * b1c
        vi = v[i] * b2 + (gi * gi) * b2c
        m[i] = mi
        v[i] = vi
        p[i] = pi - (mi / (np.sqrt(vi) / bc2_sqrt + eps)) * step_size


@kernel
def _sum_of_squares(g):
    total = 0.0
    for i in range(g.size):
        x = np.float64(g[i])
        total += x * x
    return total


@exact_kernel
def _add_scaled(g, a, other, b):
    for i in range(g.size):
        g[i] = g[i] * a + other[i] * b


def add_scaled(g, a, other, b):
    if not float32_arrays(g, other) or g.shape != other.shape:
        return NotImplemented
    f = np.float32
    _add_scaled(g.reshape(-1), f(a), other.reshape(-1), f(b))
    return None


def adamw_update(p, g, m, v, buf, step):
    if not float32_arrays(p, g, m, v):
        return NotImplemented
    f = np.float32
    lr, (b1, b2), eps, weight_decay, step_size, bc2_sqrt = step     # training.optim.AdamWStep
    decay = f(1 - lr * weight_decay) if weight_decay else f(1.0)
    _adamw(p.reshape(-1), g.reshape(-1), m.reshape(-1), v.reshape(-1), decay, f(b1), f(1 - b1), f(b2), f(1 - b2),
           f(eps), f(bc2_sqrt), f(step_size))
    return None


def sum_of_squares(g, block=4096):
    if not float32_arrays(g):
        return NotImplemented
    return float(_sum_of_squares(g.reshape(-1)))


KERNELS = {"adamw_update": adamw_update, "sum_of_squares": sum_of_squares, "add_scaled": add_scaled}
