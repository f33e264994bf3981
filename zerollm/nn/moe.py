"""Mixture of experts (Part 5 of the course): a router sends each token to k of E expert MLPs.

    logits = x @ W_router                        (N, E)   a linear C -> E, no bias
    p      = softmax(logits)                     (N, E)   how much the router likes each expert
    e_1..e_k = the k experts with the largest p, best first
    g_j    = p[e_j]                              Switch / the course (Fedus et al. 2021)
           = p[e_j] / (p[e_1] + ... + p[e_k])    with moe_norm_topk (Mixtral, Jiang et al. 2024)
    y      = sum_j g_j * expert_{e_j}(x)   (+ shared(x): an MLP every token goes through, as in
                                                DeepSeek-MoE (Dai et al. 2024) and Qwen-MoE)

Each token pays for k experts, the model holds E of them: parameters grow, compute per token does not.

Grouping. The N*k (token, choice) pairs are numbered choice-major, p = j*N + n (every token's first
choice, then every token's second choice, ...). A stable argsort by expert puts each expert's pairs
in one contiguous run, so each expert is ONE GEMM over its rows; the only Python loop is over the E
experts, never over tokens.

Capacity (GShard, Lepikhin et al. 2020; Switch). With capacity_factor cf > 0 each expert takes at
most ceil(cf * N * k / E) pairs of a forward call, in pair order: first choices before second
choices, and within a choice by token position in the flattened (B*T) batch. Pairs over capacity
are dropped: they add nothing, the residual stream carries the token past the layer. N is the
tokens of ONE call, so with --threads each shard has its own capacity. Dropping is a training
device, like dropout: with training=False nothing is dropped, so evaluation and generation with a
KV cache do not depend on how tokens are batched.

Two auxiliary losses come out of the forward; the backward takes their upstream gradients:

    aux = E * sum_e f_e * P_e      Switch load balancing: f_e = share of the N*k pairs routed to e
                                   (router's choice, before capacity; a count, so no gradient),
                                   P_e = mean_n p[n, e]. Balanced routing gives aux = 1.
    z   = mean_n logsumexp(logits_n)^2     ST-MoE router z-loss (Zoph et al. 2022): keeps the
                                           router's logits small, so its softmax stays stable.

Letters: N tokens (B*T), C channels, E experts, k active experts, H expert width, F = H (GELU) or
2H (SwiGLU: [gate | up]), M kept pairs. Experts are stacked: w_fc (E, C, F), w_proj (E, H, C),
biases (E, F) and (E, C).
"""

import math
from typing import NamedTuple

import numpy as np

from zerollm.nn.mlp import MLPWeights, gelu_mlp_backward, gelu_mlp_forward, swiglu_backward, swiglu_forward


class MoEConfig(NamedTuple):
    """How the layer routes and what its experts are (the model's GPTConfig: n_expert_active, moe_norm_topk,
    capacity_factor, mlp, gelu)."""
    k: int                        # experts per token
    norm_topk: bool = False       # gates renormalised over the k chosen (Mixtral) or raw (Switch)
    capacity_factor: float = 0.0  # 0: no expert ever drops a pair
    mlp: str = "gelu"             # each expert's MLP: 'gelu' or 'swiglu'
    gelu: str = "tanh"


class MoECache(NamedTuple):
    shape: tuple           # x's shape
    x2: np.ndarray         # (N, C) the input, for the router's dW
    w_router: np.ndarray   # (C, E)
    probs: np.ndarray      # (N, E) softmax of the router logits
    lse: np.ndarray        # (N,) logsumexp of the router logits (the z-loss)
    idx: np.ndarray        # (N, k) chosen experts, best first
    gates: np.ndarray      # (N, k) gate weights g
    norm_topk: bool
    order: np.ndarray      # (M,) kept pair numbers p = j*N + n, grouped by expert
    bounds: np.ndarray     # (E+1,) expert e owns rows bounds[e]:bounds[e+1] of the grouped arrays
    outs: np.ndarray       # (M, C) each kept pair's expert output, before its gate
    experts: list          # E MLP caches (None for an expert that got no tokens)
    shapes: tuple          # (w_fc.shape, w_proj.shape, has b_fc, has b_proj) for zero gradients
    mlp: str
    shared: tuple | None   # the shared expert's MLP cache
    frac: np.ndarray       # (E,) f_e: share of the pairs routed to each expert
    aux: float             # load-balancing loss of this call
    z: float               # router z-loss of this call
    dropped: int           # pairs over capacity
    pairs: int             # N * k


def _expert_forward(x, weights, mlp, gelu):
    if mlp == "swiglu":
        return swiglu_forward(x, weights)
    return gelu_mlp_forward(x, weights, gelu=gelu)


def _expert_backward(dy, cache, mlp):
    return (swiglu_backward if mlp == "swiglu" else gelu_mlp_backward)(dy, cache)


def _expert(experts, e):
    """Expert e's MLPWeights out of the stacked ones; a missing bias stays None."""
    return MLPWeights(*(None if a is None else a[e] for a in experts))


# ----------------------------------------------------------------------------
# the router: logits, softmax, top-k, gates

def route(x2, w_router, k, norm_topk):
    """x2 (N, C) -> (probs (N, E), lse (N,), idx (N, k), gates (N, k)).

    Ties between logits go to the lower expert number (a stable sort), so routing is deterministic.

    >>> probs, lse, idx, gates = route(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]]), 2, False)
    >>> idx.tolist(), gates.round(3).tolist()
    ([[2, 1]], [[0.665, 0.245]])
    """
    logits = x2 @ w_router                                       # (N, C) @ (C, E) -> (N, E)
    top = logits.max(axis=1, keepdims=True)                      # (N, 1) for a stable exp
    shifted = np.exp(logits - top)
    total = shifted.sum(axis=1, keepdims=True)
    probs = shifted / total                                      # (N, E)
    lse = (top + np.log(total))[:, 0]                            # (N,)
    idx = np.argsort(-logits, axis=1, kind="stable")[:, :k]      # (N, E) -> (N, k) best first
    gates = np.take_along_axis(probs, idx, axis=1)               # (N, k)
    if norm_topk:
        gates = gates / gates.sum(axis=1, keepdims=True)
    return probs, lse, idx, gates


def dispatch(idx, E, capacity):
    """Group the (token, choice) pairs by expert -> (order, bounds, counts).

    order (M,): kept pair numbers p = j*N + n, expert 0's first; bounds (E+1,); counts (E,) the pairs
    each expert was chosen for (before capacity). ``capacity`` None keeps every pair.

    >>> order, bounds, counts = dispatch(np.array([[1, 0], [1, 2], [1, 0]]), 3, capacity=2)
    >>> order.tolist(), bounds.tolist(), counts.tolist()     # expert 1 was first choice 3 times: 1 dropped
    ([3, 5, 0, 1, 4], [0, 2, 4, 5], [2, 3, 1])
    """
    N, k = idx.shape
    expert = idx.T.reshape(-1)                                   # (k*N,) expert of pair p = j*N + n
    order = np.argsort(expert, kind="stable")                    # grouped by expert, pair order inside
    counts = np.bincount(expert, minlength=E)                    # (E,)
    kept = counts if capacity is None else np.minimum(counts, capacity)
    if capacity is not None:
        rank = np.arange(k * N) - np.repeat(np.cumsum(counts) - counts, counts)   # place in its expert's queue
        order = order[rank < capacity]
    bounds = np.concatenate([[0], np.cumsum(kept)])
    return order, bounds, counts


def capacity_of(capacity_factor, N, k, E):
    """ceil(cf * N * k / E) pairs per expert, or None when cf == 0 (no limit)."""
    return None if capacity_factor == 0 else max(1, math.ceil(capacity_factor * N * k / E))


# ----------------------------------------------------------------------------
# the layer

def moe_forward(x, w_router, experts, config, *, shared=None, training=True):
    """x (..., C) -> (y (..., C), MoECache). ``experts``: MLPWeights stacked over the E experts;
    ``config``: MoEConfig; ``shared``: MLPWeights of the shared expert(s) or None. The cache carries
    the auxiliary losses (cache.aux, cache.z) and the routing statistics (cache.frac, cache.dropped)."""
    k, norm_topk, capacity_factor, mlp, gelu = config
    w_fc, b_fc, w_proj, b_proj = experts
    C = x.shape[-1]
    x2 = x.reshape(-1, C)                                        # (N, C)
    N, E = x2.shape[0], w_router.shape[1]
    # 1. route: probabilities, the k best experts, their gate weights
    probs, lse, idx, gates = route(x2, w_router, k, norm_topk)
    # 2. group the pairs by expert; drop what is over capacity (training only)
    capacity = capacity_of(capacity_factor, N, k, E) if training else None
    order, bounds, counts = dispatch(idx, E, capacity)
    tokens = order % N                                           # (M,) the token of each kept pair
    xs = x2[tokens]                                              # (M, C) gathered, grouped by expert
    # 3. one GEMM (per matrix) per expert over its own rows
    outs = np.empty_like(xs)                                     # (M, C)
    caches = []
    for e in range(E):
        lo, hi = bounds[e], bounds[e + 1]
        if lo == hi:
            caches.append(None)
            continue
        outs[lo:hi], c = _expert_forward(xs[lo:hi], _expert(experts, e), mlp, gelu)
        caches.append(c)
    # 4. combine: y_n = sum_j g_j * expert_{e_j}(x_n); dropped pairs add nothing
    pairs = np.zeros((k * N, C), x2.dtype)
    pairs[order] = outs * gates.T.reshape(-1)[order, None]       # (M, C) into pair slots p = j*N + n
    y2 = pairs.reshape(k, N, C).sum(axis=0)                      # (k, N, C) -> (N, C)
    shared_cache = None
    if shared is not None:
        ys, shared_cache = _expert_forward(x2, shared, mlp, gelu)
        y2 += ys
    # 5. the auxiliary losses
    frac = (counts / (k * N)).astype(x2.dtype)                   # (E,) f_e, sums to 1
    aux = float(E * np.dot(frac, probs.mean(axis=0)))
    z = float(np.mean(lse * lse))
    cache = MoECache(x.shape, x2, w_router, probs, lse, idx, gates, norm_topk, order, bounds, outs, caches,
                     (w_fc.shape, w_proj.shape, b_fc is not None, b_proj is not None), mlp, shared_cache,
                     frac, aux, z, k * N - len(order), k * N)
    return y2.reshape(x.shape), cache


def moe_backward(dy, cache, daux=0.0, dz=0.0):
    """dy (..., C), and the upstream gradients of the aux and z losses (their loss coefficients) ->
    (dx, dw_router, (dw_fc, db_fc, dw_proj, db_proj), dshared or None). The steps of forward, reversed."""
    c = cache
    N, C = c.x2.shape
    k, E = c.idx.shape[1], c.probs.shape[1]
    dy2 = dy.reshape(N, C)
    order, bounds = c.order, c.bounds
    tokens = order % N
    # 4. combine: y = sum_j g_j Y_j  =>  dY_j = g_j dy,  dg_j = <dy, Y_j>
    dy_pairs = dy2[tokens]                                       # (M, C)
    g = c.gates.T.reshape(-1)[order]                             # (M,)
    dg = np.einsum("mc,mc->m", dy_pairs, c.outs)                 # (M,)
    douts = dy_pairs * g[:, None]                                # (M, C)
    # 3. the experts, one by one
    (fc_shape, proj_shape, has_bfc, has_bproj) = c.shapes
    dw_fc, dw_proj = np.zeros(fc_shape, c.x2.dtype), np.zeros(proj_shape, c.x2.dtype)
    db_fc = np.zeros((E, fc_shape[2]), c.x2.dtype) if has_bfc else None
    db_proj = np.zeros((E, proj_shape[2]), c.x2.dtype) if has_bproj else None
    dxs = np.empty_like(douts)                                   # (M, C)
    for e in range(E):
        lo, hi = bounds[e], bounds[e + 1]
        if c.experts[e] is None:
            continue
        dxs[lo:hi], dw_fc[e], dbf, dw_proj[e], dbp = _expert_backward(douts[lo:hi], c.experts[e], c.mlp)
        if has_bfc:
            db_fc[e] = dbf
        if has_bproj:
            db_proj[e] = dbp
    # 2. gather: xs = x2[tokens]; a token in k pairs collects k gradients (summed by choice slot)
    dpairs = np.zeros((k * N, C), c.x2.dtype)
    dpairs[order] = dxs
    dx2 = dpairs.reshape(k, N, C).sum(axis=0)                    # (N, C)
    # 1. router: gates -> probs -> logits (with the aux and z losses)
    dlogits = _router_backward(c, dg, daux, dz)                  # (N, E)
    dw_router = c.x2.T @ dlogits                                 # (C, N) @ (N, E) -> (C, E)
    dx2 += dlogits @ c.w_router.T                                # (N, E) @ (E, C) -> (N, C)
    dshared = None
    if c.shared is not None:
        dxs_shared, *dshared = _expert_backward(dy2, c.shared, c.mlp)
        dx2 += dxs_shared
        dshared = tuple(dshared)
    return dx2.reshape(c.shape), dw_router, (dw_fc, db_fc, dw_proj, db_proj), dshared


def _router_backward(c, dg_kept, daux, dz):
    """Gradient at the router logits from the gates, the aux loss and the z-loss."""
    N, k = c.idx.shape
    E = c.probs.shape[1]
    dgates = np.zeros(k * N, c.x2.dtype)
    dgates[c.order] = dg_kept                                    # dropped pairs: gradient 0
    dgates = dgates.reshape(k, N).T                              # (N, k)
    if c.norm_topk:
        # g_j = s_j / S with S = sum_i s_i  =>  ds_j = (dg_j - sum_i dg_i g_i) / S
        s = np.take_along_axis(c.probs, c.idx, axis=1)
        dgates = (dgates - (dgates * c.gates).sum(axis=1, keepdims=True)) / s.sum(axis=1, keepdims=True)
    dprobs = np.zeros_like(c.probs)                              # (N, E)
    np.put_along_axis(dprobs, c.idx, dgates, axis=1)             # a token chooses an expert once
    # aux = E sum_e f_e mean_n p[n, e]  =>  d aux / d p[n, e] = E f_e / N   (f is a count: constant)
    dprobs += (daux * E / N) * c.frac
    # softmax: dlogits = p * (dp - sum_e dp p)
    dlogits = c.probs * (dprobs - (dprobs * c.probs).sum(axis=1, keepdims=True))
    # z = mean_n lse_n^2  =>  dz / dlogits[n, e] = 2 lse_n p[n, e] / N
    dlogits += (dz * 2.0 / N) * c.lse[:, None] * c.probs
    return dlogits


def moe_statistics(caches):
    """The routing of one model forward, from its MoE blocks' caches (MoECache), in block order:

        aux_loss      mean over the MoE blocks of the Switch load-balancing loss (1.0 = balanced)
        z_loss        mean over the MoE blocks of the router z-loss
        dropped_frac  share of all (token, choice) pairs dropped over capacity
        expert_frac   (n_moe_blocks, E) array: the share of each block's pairs routed to each expert
    """
    return {"aux_loss": float(np.mean([c.aux for c in caches])),
            "z_loss": float(np.mean([c.z for c in caches])),
            "dropped_frac": sum(c.dropped for c in caches) / sum(c.pairs for c in caches),
            "expert_frac": np.stack([c.frac.astype(np.float64) for c in caches])}
