"""The router of a mixture of experts, step by step, on 4 tokens and 4 experts (docs/moe.md prints this).

    python scripts/moe_router_example.py

Every number comes from zerollm.nn.moe (route, dispatch, moe_forward, moe_backward) on the small
inputs below: C = 2 channels, E = 4 experts, top-k = 2, capacity factor 1.0.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zerollm.nn.mlp import MLPWeights  # noqa: E402
from zerollm.nn.moe import MoEConfig, capacity_of, dispatch, moe_backward, moe_forward, route  # noqa: E402
from zerollm.teach.fmt import matrix  # noqa: E402

X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.5], [0.5, -1.0]])             # (N, C) = (4, 2)
W_ROUTER = np.array([[2.0, 1.0, 0.0, -1.0], [0.0, 1.0, 2.0, 0.5]])           # (C, E) = (2, 4)
K, CAPACITY_FACTOR = 2, 1.0


def show(title, a, precision=4):
    print(f"{title}\n{matrix(a, precision)}")


def main():
    N, E = X.shape[0], W_ROUTER.shape[1]
    show("1. x, 4 tokens of C = 2 numbers:", X)
    show("2. router logits = x @ W_router, (4, 2) @ (2, 4) -> (4, 4):", X @ W_ROUTER)
    probs, lse, idx, gates = route(X, W_ROUTER, K, norm_topk=False)
    show("3. p = softmax(logits) per token:", probs)
    show(f"4. top-{K} experts per token, best first (idx):", idx)
    show("   gates g = their probabilities (Switch):", gates)
    _, _, _, renorm = route(X, W_ROUTER, K, norm_topk=True)
    show("   gates renormalised over the k (Mixtral, moe_norm_topk):", renorm)

    capacity = capacity_of(CAPACITY_FACTOR, N, K, E)
    order, bounds, counts = dispatch(idx, E, capacity)
    print(f"5. pairs per expert, counts = {counts.tolist()}; capacity = ceil({CAPACITY_FACTOR:g} * N * k / E) = "
          f"ceil({CAPACITY_FACTOR:g} * {N} * {K} / {E}) = {capacity}")
    for e in range(E):
        kept = [f"token {p % N} (choice {p // N + 1})" for p in order[bounds[e]:bounds[e + 1]]]
        print(f"   expert {e} keeps: {', '.join(kept) if kept else '-'}")
    kept = {int(p) for p in order}
    dropped = [f"token {p % N} (choice {p // N + 1})" for p in range(N * K) if p not in kept]
    print(f"   dropped (over capacity, first choices go first, then token order): {', '.join(dropped)}")

    rng = np.random.default_rng(0)
    w_fc, w_proj = rng.standard_normal((E, 2, 3)), rng.standard_normal((E, 3, 2))       # tiny GELU experts
    experts, config = MLPWeights(w_fc, None, w_proj, None), MoEConfig(K, capacity_factor=CAPACITY_FACTOR)
    y, cache = moe_forward(X, W_ROUTER, experts, config)
    show("6. y = sum_j g_j * expert_j(x), random tiny experts; token 3 lost both pairs, so its row is 0:", y)

    P = probs.mean(axis=0)
    print(f"7. f = share of the {N * K} pairs each expert was chosen for = {np.round(cache.frac, 4).tolist()}")
    print(f"   P = mean router probability per expert = {np.round(P, 4).tolist()}")
    print(f"   aux = E * sum(f * P) = {E} * {np.dot(cache.frac, P):.4f} = {cache.aux:.4f}   (1.0 when balanced)")
    print(f"   z = mean(logsumexp(logits)^2) = mean({np.round(lse ** 2, 4).tolist()}) = {cache.z:.4f}")
    # d aux / d p[n, e] = E f_e / N (f is a count: constant), then back through the softmax
    dprobs = np.broadcast_to(E * cache.frac / N, probs.shape)
    dlogits = probs * (dprobs - (dprobs * probs).sum(axis=1, keepdims=True))
    show("8. d aux / d logits = p * (E f / N - sum_e p E f / N): positive (gradient descent pushes them down)\n"
         "   for the busy experts 0 and 1, negative (pushed up) for the under-used expert 2 and the idle 3:", dlogits)
    _, dw_router, _, _ = moe_backward(np.zeros_like(y), cache, daux=1.0)
    assert np.allclose(dw_router, X.T @ dlogits)                  # the hand-written backward agrees
    show("   d aux / d W_router = x^T @ d logits (what moe_backward returns):", dw_router)

if __name__ == "__main__":
    main()
