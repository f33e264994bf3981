"""What the benchmarks run: model configs, batch sizes, attention lengths, step budgets, FLOP counts.

Shared by the harness (run.py, which plans the measurements) and the workers (worker.py, which
build the same batches from the same seed in every process).

Letters: B batch, T time, C = n_embd, L = n_layer, nh = n_head, nkv = n_kv_head, hs = head size,
H = MLP width, V = vocab_size.
"""

import numpy as np

# ----------------------------------------------------------------------------
# model configs (GPTConfig keyword arguments) and their batch sizes

# nanoGPT's shakespeare_char config for a CPU (its README: "--device=cpu --block_size=64
# --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128"), with bias=False as its GPTConfig
NANOGPT = dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, bias=False, dropout=0.0)
# the full shakespeare_char model (6 layers, 6 heads, 384 wide) at a quarter of its context
MEDIUM = dict(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384, bias=False, dropout=0.0)
TINY = dict(vocab_size=65, block_size=16, n_layer=1, n_head=2, n_embd=32, bias=False, dropout=0.0)

# generation needs prompt + new tokens <= block_size and a config GPT-2 can express (biases,
# learned positions, tanh GELU): the nanoGPT shape with a 256-token context
GEN_NANOGPT = dict(NANOGPT, block_size=256, bias=True, pos="learned", gelu="tanh")
GEN_TINY = dict(TINY, block_size=64, bias=True, pos="learned", gelu="tanh")

MODELS = {   # mode -> [(name, config, batch size)]
    "full": [("nanogpt-4x128", NANOGPT, 12), ("6x384-T256", MEDIUM, 8)],
    "quick": [("nanogpt-4x128", NANOGPT, 12), ("6x384-T256", MEDIUM, 8)],
    "smoke": [("tiny-1x32", TINY, 2)],
}
GENERATION = {   # mode -> (name, config, prompt tokens, new tokens)
    "full": ("nanogpt-4x128-bias", GEN_NANOGPT, 8, 200),
    "quick": ("nanogpt-4x128-bias", GEN_NANOGPT, 8, 200),
    "smoke": ("tiny-1x32-bias", GEN_TINY, 8, 16),
}

# attention alone: B=1, nh=4 heads of hs=64 (C = 256), causal, float32
ATTENTION_SHAPE = dict(B=1, nh=4, hs=64)
ATTENTION_T = {
    "full": [256, 512, 1024, 2048, 4096, 8192],
    "quick": [256, 512, 1024],
    "smoke": [64],
}
GEMM_N = {"full": 2048, "quick": 2048, "smoke": 256}

# per mode: rounds (A B A B ...), thread counts, and the step budget of one worker
ROUNDS = {"full": 5, "quick": 2, "smoke": 1}
THREADS = {"full": [1, 2], "quick": [1, 2], "smoke": [1]}
BUDGET = {   # warmup includes the first step, whose peak memory is measured
    "full": dict(warmup=2, min_steps=5, min_seconds=2.0, max_steps=200),
    "quick": dict(warmup=1, min_steps=3, min_seconds=0.5, max_steps=100),
    "smoke": dict(warmup=1, min_steps=2, min_seconds=0.0, max_steps=2),
}
ATTENTION_BUDGET = {   # long sequences take seconds per step: fewer steps, the memory step as warm-up
    "full": dict(warmup=1, min_steps=3, min_seconds=1.0, max_steps=100),
    "quick": dict(warmup=1, min_steps=3, min_seconds=0.5, max_steps=100),
    "smoke": dict(warmup=1, min_steps=2, min_seconds=0.0, max_steps=2),
}
CHECK_STEPS = 2          # correctness: losses of the first steps from identical weights and batches
CHECK_TOL = 1e-4         # |loss_zerollm - loss_torch| allowed (float32 in both)
OPTIM = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, max_norm=1.0)


# ----------------------------------------------------------------------------
# inputs: the same numbers in every process, from one seed

def batches(cfg, B, n=4, seed=0):
    """n batches of random token ids: [(x (B, T), y (B, T))], y = x shifted by one."""
    rng = np.random.default_rng(seed)
    T = cfg["block_size"]
    out = []
    for _ in range(n):
        ids = rng.integers(0, cfg["vocab_size"], size=(B, T + 1))    # (B, T + 1)
        out.append((ids[:, :-1], ids[:, 1:]))
    return out


def prompt(cfg, n_tokens, seed=0):
    """(1, n_tokens) random prompt ids."""
    return np.random.default_rng(seed).integers(0, cfg["vocab_size"], size=(1, n_tokens))


def attention_inputs(T, B, nh, hs, seed=0):
    """q, k, v, dout, each (B, nh, T, hs) float32, standard normal."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((B, nh, T, hs), dtype=np.float32) for _ in range(4)]


# ----------------------------------------------------------------------------
# FLOPs, counted analytically (a matmul (m, k) @ (k, n) is 2 m n k FLOPs; elementwise ops ignored)

def forward_flops(cfg, B, T):
    """FLOPs of one forward pass of a GPTConfig ``cfg`` over B sequences of T tokens.

    Per token and layer: qkv 2 C (nh + 2 nkv) hs, attention projection 2 C C, MLP 2 C H' + 2 H C
    (H' = 2H for SwiGLU). Per sequence and layer, every head does two T x T matmuls (q k^T and
    att v), 2 T T hs each: the full square is computed, then masked. Head: 2 C V per token.

    >>> from zerollm.model.config import GPTConfig
    >>> forward_flops(GPTConfig(vocab_size=10, block_size=1, n_layer=1, n_head=1, n_embd=2), B=1, T=1)
    144
    """
    C, L, V, H = cfg.n_embd, cfg.n_layer, cfg.vocab_size, cfg.n_inner
    nh, nkv, hs = cfg.n_head, cfg.n_kv_head, cfg.head_size
    fc = 2 * H if cfg.mlp == "swiglu" else H
    per_token_layer = 2 * C * (nh + 2 * nkv) * hs + 2 * C * C + 2 * C * fc + 2 * H * C
    attention = 2 * (2 * T * T * hs) * nh               # per sequence and layer
    return B * (T * (L * per_token_layer + 2 * C * V) + L * attention)


def train_flops(cfg, B, T):
    """Forward + backward: each matmul's backward is two matmuls of its size (dX and dW), so 3x."""
    return 3 * forward_flops(cfg, B, T)


def gemm_flops(n):
    return 2 * n ** 3


# ----------------------------------------------------------------------------
# the GEMMs of a model's own training step (the "GEMM at the model's shapes" row)

def linear_shapes(cfg):
    """(in, out) of one block's linear layers: qkv, attention projection, MLP fc (2H wide for SwiGLU),
    MLP projection. ``cfg`` is a GPTConfig."""
    C, H, hs = cfg.n_embd, cfg.n_inner, cfg.head_size
    fc = 2 * H if cfg.mlp == "swiglu" else H
    return [(C, (cfg.n_head + 2 * cfg.n_kv_head) * hs), (cfg.n_head * hs, C), (C, fc), (H, C)]


def model_gemm_operands(cfg, B, seed=0):
    """The products one block's linear layers do in a training step, as (a, b) pairs of float32 arrays:
    per layer (i, o) with N = B * T rows, the forward x @ w (N, i) @ (i, o), the input gradient
    dy @ w^T (N, o) @ (o, i) and the weight gradient x^T @ dy (i, N) @ (N, o), the transposes as views,
    exactly as zerollm.nn.linear multiplies them."""
    rng = np.random.default_rng(seed)
    N = B * cfg.block_size
    pairs = []
    for i, o in linear_shapes(cfg):
        x, w, dy = (rng.standard_normal(shape, dtype=np.float32) for shape in ((N, i), (i, o), (N, o)))
        pairs += [(x, w), (dy, w.T), (x.T, dy)]
    return pairs


def model_gemm_flops(cfg, B):
    """FLOPs of model_gemm_operands' products: 3 products of 2 N i o each per linear layer."""
    return sum(3 * 2 * B * cfg.block_size * i * o for i, o in linear_shapes(cfg))
