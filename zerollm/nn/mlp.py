"""The feed-forward network of a Transformer block: GPT-2's GELU MLP and Llama's SwiGLU.

Both widen each token to H hidden units, apply a nonlinearity, and project back to C.
Shapes: (..., C) -> (..., H) -> (..., C).
"""

from typing import NamedTuple

import numpy as np

from zerollm.nn.activation import (gelu_erf_backward, gelu_erf_forward, gelu_tanh_backward,
                                   gelu_tanh_forward, silu_backward, silu_forward)
from zerollm.nn.lora import adapted_backward, adapted_forward

_GELU = {"tanh": (gelu_tanh_forward, gelu_tanh_backward), "erf": (gelu_erf_forward, gelu_erf_backward)}


class MLPWeights(NamedTuple):
    """The two linears of an MLP, named as in GPT-2's checkpoints (mlp.c_fc, mlp.c_proj); H = F for GELU,
    F = 2H for SwiGLU ([gate | up])."""
    w_fc: np.ndarray            # (C, F)
    b_fc: np.ndarray | None     # (F,)
    w_proj: np.ndarray          # (H, C)
    b_proj: np.ndarray | None   # (C,)


class MLPCache(NamedTuple):
    fc: tuple        # LinearCache of c_fc
    act: tuple       # activation cache(s)
    proj: tuple      # LinearCache of c_proj
    gelu: str


# ----------------------------------------------------------------------------
# GPT-2: c_fc (C -> 4C), GELU, c_proj (4C -> C)

def gelu_mlp_forward(x, weights, gelu="tanh", lora=None, rng=None, training=False):
    """weights: MLPWeights; lora: optional (Adapted of c_fc, Adapted of c_proj) (zerollm.nn.lora);
    rng, training: its dropout."""
    w_fc, b_fc, w_proj, b_proj = weights
    lora_fc, lora_proj = lora or (None, None)
    h, fc = adapted_forward(x, w_fc, b_fc, lora_fc, rng, training)          # (..., C) -> (..., H)
    a, act = _GELU[gelu][0](h)                                              # (..., H)
    y, proj = adapted_forward(a, w_proj, b_proj, lora_proj, rng, training)  # (..., H) -> (..., C)
    return y, MLPCache(fc, act, proj, gelu)


def gelu_mlp_backward(dy, cache, grads=None):
    """Returns (dx, dw_fc, db_fc, dw_proj, db_proj): the forward steps in reverse (with LoRA the weight
    gradients are None and the adapters' go into ``grads``)."""
    da, dw_proj, db_proj = adapted_backward(dy, cache.proj, grads)
    dh = _GELU[cache.gelu][1](da, cache.act)
    dx, dw_fc, db_fc = adapted_backward(dh, cache.fc, grads)
    return dx, dw_fc, db_fc, dw_proj, db_proj


# ----------------------------------------------------------------------------
# SwiGLU (Shazeer 2020): c_fc makes [gate | up] in one matmul, out = (silu(gate) * up) @ c_proj

class SwiGLUCache(NamedTuple):
    fc: tuple
    silu: tuple
    gate_act: np.ndarray   # silu(gate), (..., H)
    up: np.ndarray         # (..., H)
    proj: tuple


def swiglu_forward(x, weights, lora=None, rng=None, training=False):
    """weights: MLPWeights, c_fc of width 2H; lora, rng, training: as in gelu_mlp_forward."""
    w_fc, b_fc, w_proj, b_proj = weights
    lora_fc, lora_proj = lora or (None, None)
    gu, fc = adapted_forward(x, w_fc, b_fc, lora_fc, rng, training)        # (..., C) -> (..., 2H)
    H = gu.shape[-1] // 2
    gate, up = gu[..., :H], gu[..., H:]            # (..., H) each: views, no copy
    g, silu = silu_forward(gate)
    y, proj = adapted_forward(g * up, w_proj, b_proj, lora_proj, rng, training)   # (..., H) -> (..., C)
    return y, SwiGLUCache(fc, silu, g, up, proj)


def swiglu_backward(dy, cache, grads=None):
    """forward was m = silu(gate) * up, y = m @ w_proj, so
        dgate = silu'(gate) * (dm * up),   dup = dm * silu(gate)
    and both halves go back through the one fused c_fc matmul."""
    dm, dw_proj, db_proj = adapted_backward(dy, cache.proj, grads)
    dgu = np.concatenate([silu_backward(dm * cache.up, cache.silu), dm * cache.gate_act], axis=-1)
    dx, dw_fc, db_fc = adapted_backward(dgu, cache.fc, grads)
    return dx, dw_fc, db_fc, dw_proj, db_proj
