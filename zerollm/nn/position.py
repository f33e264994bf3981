"""Position information: sinusoidal tables (Vaswani et al. 2017) and RoPE (Su et al. 2021).

Learned positions are an embedding lookup (see embedding.py) of 0..T-1.
Shapes: T time, C channels, hs head size.
"""

import numpy as np

from zerollm.engine import accelerated
from zerollm.engine.caches import RopeCache


# ----------------------------------------------------------------------------
# sinusoidal: fixed, added to the token embeddings, no parameters

def sinusoidal_positions(T, C, offset=0, dtype=np.float32):
    """PE[p, 2i] = sin(p / 10000^(2i/C)),  PE[p, 2i+1] = cos(p / 10000^(2i/C)).  -> (T, C)

    Each pair of channels is a clock turning at its own speed, so every position gets a unique
    pattern and relative offsets are linear functions of it.
    """
    pos = np.arange(offset, offset + T, dtype=np.float64)[:, None]        # (T, 1)
    i2 = np.arange(0, C, 2, dtype=np.float64)                             # (ceil(C/2),) = 2i
    angle = pos / np.power(10000.0, i2 / C)                               # (T, ceil(C/2))
    pe = np.empty((T, C), dtype=np.float64)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : C // 2])                              # odd C: one fewer cos
    return pe.astype(dtype)


# ----------------------------------------------------------------------------
# RoPE: rotate each (x_i, x_{i+hs/2}) pair of q and k by an angle proportional to the position

def rope_tables(T, hs, theta=10000.0, offset=0, dtype=np.float32):
    """cos and sin tables (T, hs) in the rotate-half layout (Llama, GPT-NeoX, HF transformers).

    inv_freq[i] = theta^(-2i/hs) for i < hs/2; angle[p, i] = p * inv_freq[i]; both halves of the
    head use the same angles: cos = [cos(angle), cos(angle)].
    """
    inv_freq = theta ** (-np.arange(0, hs, 2, dtype=np.float64) / hs)    # (hs/2,)
    pos = np.arange(offset, offset + T, dtype=np.float64)                 # (T,)
    angle = np.outer(pos, inv_freq)                                       # (T, hs/2)
    angle = np.concatenate([angle, angle], axis=-1)                       # (T, hs)
    return np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)


def rotate_half(x):
    """[x1, x2] -> [-x2, x1] on the last dim: a 90-degree turn of every (x1_i, x2_i) pair."""
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rotate_half_transpose(g):
    """The transpose of rotate_half (a rotation by -90 degrees): [g1, g2] -> [g2, -g1]."""
    h = g.shape[-1] // 2
    return np.concatenate([g[..., h:], -g[..., :h]], axis=-1)


@accelerated
def rope_forward(x, cos, sin):
    """y = x * cos + rotate_half(x) * sin.  x: (..., T, hs), cos/sin: (T, hs) -> (..., T, hs)."""
    return x * cos + rotate_half(x) * sin, RopeCache(cos, sin)


def rope_backward(dy, cache):
    """forward was y = x*cos + R(x)*sin with R linear, so dx = dy*cos + R^T(dy*sin).

    A rotation's gradient is the opposite rotation: the same angles with sin negated.
    """
    return dy * cache.cos + rotate_half_transpose(dy * cache.sin)
