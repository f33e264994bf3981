"""An independent PyTorch twin of ``zerollm.model.gpt.GPT``: the yardstick of the parity tests and benchmarks.

Imports torch at the top: import this module only where torch is installed (the [test] extra).

The NumPy model writes every backward pass by hand; this module writes only the forward pass in plain
torch ops and lets autograd find the gradients. Tests load the same weights into both and compare
logits, loss and every parameter gradient. ``tests/test_torch_ref.py`` proves this twin right against
Hugging Face ``GPT2LMHeadModel`` and ``LlamaForCausalLM`` wherever those can express a GPTConfig.

Letters: B batch, T time, C = n_embd, nh = n_head, nkv = n_kv_head, hs = C // nh, V = vocab_size,
H = n_inner, E = n_expert, k = n_expert_active. Matrices are stored (in, out) like GPT-2's Conv1D:
y = x @ W + b.

Mixture-of-experts blocks (config.is_moe(i)) are written the other way round from zerollm.nn.moe, on
purpose: every expert runs on every token and a dense (N, E) combine matrix keeps only the chosen,
kept ones (GShard's dispatch/combine formulation, Lepikhin et al. 2020); capacity comes from a
cumulative sum over one-hot masks instead of a sort. The two must agree to the last digit.

>>> cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)
>>> model = TorchGPT(cfg)                       # starts with random_state(cfg, seed=0)
>>> logits, loss = model(torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 3, dtype=torch.long))
>>> tuple(logits.shape)
(1, 3, 11)
"""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError

IGNORE_INDEX = -100   # targets equal to this are left out of the loss (PyTorch's and HF's convention)


# ----------------------------------------------------------------------------
# the parameter layout: names are Hugging Face GPT-2's, without the "transformer." prefix

def param_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter name and shape, in model order.

    >>> list(param_shapes(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=2)))[:3]
    ['wte.weight', 'wpe.weight', 'h.0.ln_1.weight']
    """
    C, V, H, hs = config.n_embd, config.vocab_size, config.n_inner, config.head_size
    qkv = (config.n_head + 2 * config.n_kv_head) * hs        # [q | k | v] columns
    fc = 2 * H if config.mlp == "swiglu" else H              # swiglu: [gate | up]
    norm_bias = config.norm == "layernorm" and config.bias
    shapes = {"wte.weight": (V, C)}
    if config.pos == "learned":
        shapes["wpe.weight"] = (config.block_size, C)
    E, S = config.n_expert, config.n_shared_expert
    for i in range(config.n_layer):
        layer = {"ln_1": ((C,), norm_bias), "attn.c_attn": ((C, qkv), config.bias),
                 "attn.c_proj": ((C, C), config.bias), "ln_2": ((C,), norm_bias)}
        if config.is_moe(i):                                 # experts stacked on a leading axis E
            layer["mlp.router"] = ((C, E), False)
            layer["mlp.experts.c_fc"] = ((E, C, fc), config.bias)
            layer["mlp.experts.c_proj"] = ((E, H, C), config.bias)
            if S:                                            # S shared experts side by side: one MLP S*H wide
                layer["mlp.shared.c_fc"] = ((C, S * fc), config.bias)
                layer["mlp.shared.c_proj"] = ((S * H, C), config.bias)
        else:
            layer["mlp.c_fc"] = ((C, fc), config.bias)
            layer["mlp.c_proj"] = ((H, C), config.bias)
        for name, (shape, has_bias) in layer.items():
            shapes[f"h.{i}.{name}.weight"] = shape
            if has_bias:
                shapes[f"h.{i}.{name}.bias"] = shape[:-2] + shape[-1:]   # (out,), or (E, out) for experts
    shapes["ln_f.weight"] = (C,)
    if norm_bias:
        shapes["ln_f.bias"] = (C,)
    if not config.tie_embeddings:
        shapes["lm_head.weight"] = (V, C)
    return shapes


def random_state(config: GPTConfig, seed=0, dtype=np.float64) -> dict[str, np.ndarray]:
    """Random weights in our layout: matrices ~ N(0, 0.02), norm weights ~ 1 + N(0, 0.1),
    biases ~ N(0, 0.1), routers ~ N(0, 0.5).

    Norm weights and biases get noise of their own, so a test notices if one is dropped or swapped.
    Routers get large weights so that routing is decisive: the top-k edge is far from a tie, and
    float32 rounding cannot change which experts a token picks.
    """
    rng = np.random.default_rng(seed)
    state = {}
    for name, shape in param_shapes(config).items():
        if ".ln_" in name or name.startswith("ln_f"):
            base = 1.0 if name.endswith(".weight") else 0.0
            value = base + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            value = 0.1 * rng.standard_normal(shape)
        elif ".router." in name:
            value = 0.5 * rng.standard_normal(shape)
        else:
            value = 0.02 * rng.standard_normal(shape)
        state[name] = value.astype(dtype)
    return state


# ----------------------------------------------------------------------------
# positions: sinusoidal table (Vaswani et al. 2017) and rotary embedding (Su et al. 2021)

def sinusoidal_table(T, C, dtype=torch.float64):
    """(T, C) table: PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(same angle).

    >>> sinusoidal_table(2, 3)[1].tolist() == [math.sin(1), math.cos(1), math.sin(1 / 10000 ** (2 / 3))]
    True
    """
    p = torch.arange(T, dtype=dtype)[:, None]               # (T, 1)
    j = torch.arange(C)                                      # (C,) column index
    two_i = (j - j % 2).to(dtype)                            # (C,) 0, 0, 2, 2, 4, ...: the "2i" of column j
    angle = p / 10000.0 ** (two_i / C)                       # (T, C)
    return torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle))


def rope_cos_sin(T, hs, theta, dtype=torch.float64):
    """cos and sin, each (T, hs): angle[p, i] = p * theta^(-2i/hs), repeated for both halves of a head."""
    inv_freq = theta ** (-torch.arange(0, hs, 2, dtype=dtype) / hs)   # (hs/2,) slowest-turning last
    angle = torch.arange(T, dtype=dtype)[:, None] * inv_freq           # (T, hs/2)
    angle = torch.cat([angle, angle], dim=-1)                          # (T, hs): dims i, i + hs/2 share one
    return angle.cos(), angle.sin()


def apply_rope(x, cos, sin):
    """Rotate each pair (x[i], x[i + hs/2]) by its angle: x*cos + rotate_half(x)*sin (GPT-NeoX/Llama)."""
    x1, x2 = x.chunk(2, dim=-1)                              # (..., T, hs/2) each
    rotated_half = torch.cat([-x2, x1], dim=-1)              # (..., T, hs)
    return x * cos + rotated_half * sin


# ----------------------------------------------------------------------------
# layers

class Linear(nn.Module):
    """y = x @ W + b with W stored (in, out), like GPT-2's Conv1D."""

    def __init__(self, n_in, n_out, bias, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(n_out, dtype=dtype)) if bias else None

    def forward(self, x):                                    # (..., n_in) -> (..., n_out)
        y = x @ self.weight
        return y if self.bias is None else y + self.bias


class Norm(nn.Module):
    """LayerNorm (Ba et al. 2016) or RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x^2) + eps) * weight."""

    def __init__(self, config, dtype):
        super().__init__()
        C = config.n_embd
        self.kind, self.eps = config.norm, config.norm_eps
        self.weight = nn.Parameter(torch.ones(C, dtype=dtype))
        with_bias = config.norm == "layernorm" and config.bias
        self.bias = nn.Parameter(torch.zeros(C, dtype=dtype)) if with_bias else None

    def forward(self, x):                                    # (B, T, C) -> (B, T, C)
        if self.kind == "layernorm":
            return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)   # (B, T, 1)
        return x / rms * self.weight


class Attention(nn.Module):
    """Multi-head causal self-attention with optional grouped-query heads (Ainslie et al. 2023) and RoPE."""

    def __init__(self, config, dtype):
        super().__init__()
        self.config = config
        nh, nkv, hs, C = config.n_head, config.n_kv_head, config.head_size, config.n_embd
        self.c_attn = Linear(C, (nh + 2 * nkv) * hs, config.bias, dtype)
        self.c_proj = Linear(C, C, config.bias, dtype)

    def forward(self, x, rope=None):
        cfg = self.config
        B, T, C = x.shape
        nh, nkv, hs, p = cfg.n_head, cfg.n_kv_head, cfg.head_size, cfg.dropout
        # 1. project to queries, keys, values and split the heads
        q, k, v = self.c_attn(x).split([nh * hs, nkv * hs, nkv * hs], dim=-1)
        q = q.view(B, T, nh, hs).transpose(1, 2)             # (B, T, nh*hs) -> (B, nh, T, hs)
        k = k.view(B, T, nkv, hs).transpose(1, 2)            # (B, T, nkv*hs) -> (B, nkv, T, hs)
        v = v.view(B, T, nkv, hs).transpose(1, 2)            # (B, nkv, T, hs)
        # 2. RoPE turns queries and keys by their positions; values are not rotated
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        # 3. grouped-query attention: query head j reads kv head j // (nh // nkv)
        k = k.repeat_interleave(nh // nkv, dim=1)           # (B, nkv, T, hs) -> (B, nh, T, hs)
        v = v.repeat_interleave(nh // nkv, dim=1)            # (B, nh, T, hs)
        # 4. scaled scores, causal mask, softmax, dropout (Vaswani et al. 2017)
        att = q @ k.transpose(-2, -1) / math.sqrt(hs)        # (B, nh, T, T)
        if cfg.causal:
            future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)   # True = key after the query
            att = att.masked_fill(future, float("-inf"))
        att = F.dropout(F.softmax(att, dim=-1), p, self.training)
        # 5. mix the values, merge the heads, project back to C
        y = (att @ v).transpose(1, 2).reshape(B, T, C)       # (B, nh, T, hs) -> (B, T, C)
        return F.dropout(self.c_proj(y), p, self.training)


class MLP(nn.Module):
    """GELU MLP (GPT-2) or SwiGLU (Shazeer 2020): (silu(x @ W_gate) * (x @ W_up)) @ W_proj."""

    def __init__(self, config, dtype):
        super().__init__()
        self.config = config
        C, H = config.n_embd, config.n_inner
        self.c_fc = Linear(C, 2 * H if config.mlp == "swiglu" else H, config.bias, dtype)
        self.c_proj = Linear(H, C, config.bias, dtype)

    def forward(self, x):                                    # (B, T, C) -> (B, T, C)
        cfg = self.config
        h = self.c_fc(x)                                     # (B, T, H) or (B, T, 2H)
        if cfg.mlp == "swiglu":
            gate, up = h.split(cfg.n_inner, dim=-1)          # (B, T, H) each
            h = F.silu(gate) * up
        else:
            h = F.gelu(h, approximate="tanh" if cfg.gelu == "tanh" else "none")
        return F.dropout(self.c_proj(h), cfg.dropout, self.training)


class Block(nn.Module):
    """Pre-norm residual block (GPT-2 order): x + attn(ln_1(x)), then + mlp(ln_2(x)); the MLP is a
    mixture of experts in the blocks config.is_moe(i) chooses."""

    def __init__(self, config, dtype, moe=False):
        super().__init__()
        self.ln_1, self.attn = Norm(config, dtype), Attention(config, dtype)
        self.ln_2, self.mlp = Norm(config, dtype), (MoE if moe else MLP)(config, dtype)

    def forward(self, x, rope=None):
        x = x + self.attn(self.ln_1(x), rope)
        return x + self.mlp(self.ln_2(x))


def expert_mlp(x, w_fc, b_fc, w_proj, b_proj, config):
    """One expert: the block MLP with its own weights (GELU or SwiGLU, as the config says)."""
    h = x @ w_fc if b_fc is None else x @ w_fc + b_fc
    if config.mlp == "swiglu":
        gate, up = h.chunk(2, dim=-1)
        h = F.silu(gate) * up
    else:
        h = F.gelu(h, approximate="tanh" if config.gelu == "tanh" else "none")
    return h @ w_proj if b_proj is None else h @ w_proj + b_proj


def moe_ffn(x, router, experts, shared, config, training):
    """Mixture of experts in the dense dispatch/combine form -> (y, aux, z, dropped pairs).

    experts = (w_fc (E, C, F), b_fc (E, F) or None, w_proj (E, H, C), b_proj (E, C) or None);
    shared = the same four for the shared MLP, or None. Capacity only in training, as zerollm.nn.moe.
    """
    k, E, C = config.n_expert_active, router.shape[1], x.shape[-1]
    x2 = x.reshape(-1, C)                                    # (N, C)
    N = x2.shape[0]
    logits = x2 @ router                                     # (N, E)
    probs = torch.softmax(logits, dim=-1)
    top_p, top_i = torch.topk(probs, k, dim=-1)              # (N, k) each, best first
    gates = top_p / top_p.sum(dim=-1, keepdim=True) if config.moe_norm_topk else top_p
    chosen = F.one_hot(top_i.T, E).to(x.dtype)               # (k, N, E): choice-major, like the pairs
    kept = chosen
    if training and config.capacity_factor > 0:
        capacity = max(1, math.ceil(config.capacity_factor * N * k / E))
        place = torch.cumsum(chosen.reshape(k * N, E), dim=0).reshape(k, N, E) - 1   # queue position
        kept = chosen * (place < capacity)
    combine = (gates.T[..., None] * kept).sum(dim=0)         # (N, E): the weight of expert e for token n
    w_fc, b_fc, w_proj, b_proj = experts
    y = torch.zeros_like(x2)
    for e in range(E):                                       # every expert on every token
        y = y + combine[:, e:e + 1] * expert_mlp(x2, w_fc[e], None if b_fc is None else b_fc[e], w_proj[e],
                                                 None if b_proj is None else b_proj[e], config)
    if shared is not None:
        y = y + expert_mlp(x2, *shared, config)
    f = chosen.sum(dim=(0, 1)).detach() / (N * k)            # (E,) share of the pairs: a count
    aux = E * (f * probs.mean(dim=0)).sum()
    z = torch.logsumexp(logits, dim=-1).pow(2).mean()
    return y.reshape(x.shape), aux, z, int((chosen - kept).sum().item())


class MoE(nn.Module):
    """A mixture-of-experts MLP; ``last`` holds the aux and z losses of the last forward."""

    def __init__(self, config, dtype):
        super().__init__()
        self.config = config
        C, H, E, S = config.n_embd, config.n_inner, config.n_expert, config.n_shared_expert
        fc = 2 * H if config.mlp == "swiglu" else H

        def weights(*shape, bias):
            w = nn.Parameter(torch.zeros(*shape, dtype=dtype))
            b = nn.Parameter(torch.zeros(*shape[:-2], shape[-1], dtype=dtype)) if bias else None
            return w, b

        self.router = Linear(C, E, False, dtype)
        self.experts = nn.Module()
        self.experts.c_fc, self.experts.c_proj = nn.Module(), nn.Module()
        self.experts.c_fc.weight, self.experts.c_fc.bias = weights(E, C, fc, bias=config.bias)
        self.experts.c_proj.weight, self.experts.c_proj.bias = weights(E, H, C, bias=config.bias)
        self.shared = None
        if S:
            self.shared = nn.Module()
            self.shared.c_fc = Linear(C, S * fc, config.bias, dtype)
            self.shared.c_proj = Linear(S * H, C, config.bias, dtype)
        self.last = {}

    def forward(self, x):                                    # (B, T, C) -> (B, T, C)
        ex = self.experts
        experts = (ex.c_fc.weight, ex.c_fc.bias, ex.c_proj.weight, ex.c_proj.bias)
        shared = None
        if self.shared is not None:
            sh = self.shared
            shared = (sh.c_fc.weight, sh.c_fc.bias, sh.c_proj.weight, sh.c_proj.bias)
        y, aux, z, dropped = moe_ffn(x, self.router.weight, experts, shared, self.config, self.training)
        self.last = {"aux": aux, "z": z, "dropped": dropped}
        return F.dropout(y, self.config.dropout, self.training)


# ----------------------------------------------------------------------------
# the whole model

class TorchGPT(nn.Module):
    """The reference model; ``named_parameters()`` yields exactly the names of ``param_shapes(config)``."""

    def __init__(self, config: GPTConfig, dtype=torch.float64):
        super().__init__()
        self.config, self.dtype = config, dtype
        C = config.n_embd
        self.wte = nn.Embedding(config.vocab_size, C, dtype=dtype)
        if config.pos == "learned":
            self.wpe = nn.Embedding(config.block_size, C, dtype=dtype)
        self.h = nn.ModuleList(Block(config, dtype, config.is_moe(i)) for i in range(config.n_layer))
        self.ln_f = Norm(config, dtype)
        if not config.tie_embeddings:
            self.lm_head = nn.Linear(C, config.vocab_size, bias=False, dtype=dtype)   # weight (V, C)
        self.load_numpy_state(random_state(config, seed=0))

    def moe_loss(self):
        """aux_loss_coef * aux + z_loss_coef * z of the last forward, each the mean over the MoE blocks
        (a tensor 0 for a dense model): what training adds to the cross-entropy."""
        cfg, layers = self.config, [b.mlp for b in self.h if isinstance(b.mlp, MoE)]
        if not layers:
            return torch.zeros((), dtype=self.dtype)
        aux = torch.stack([m.last["aux"] for m in layers]).mean()
        z = torch.stack([m.last["z"] for m in layers]).mean()
        return cfg.aux_loss_coef * aux + cfg.z_loss_coef * z

    def forward(self, idx, targets=None):
        """idx (B, T) token ids -> (logits (B, T, V), mean cross-entropy over targets != -100, or None).

        The loss is the cross-entropy alone; a mixture of experts adds ``moe_loss()`` in training."""
        cfg = self.config
        x = self.hidden_states(idx)                          # (B, T, C)
        B, T = x.shape[:2]
        # 4. the head (tied: the transposed token table)
        head = self.wte.weight if cfg.tie_embeddings else self.lm_head.weight   # (V, C)
        logits = x @ head.T                                  # (B, T, C) @ (C, V) -> (B, T, V)
        if targets is None:
            return logits, None
        # 5. loss: mean over the positions that have a target
        targets = torch.as_tensor(targets).long().reshape(B * T)
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets, ignore_index=IGNORE_INDEX)
        return logits, loss

    def hidden_states(self, idx):
        """idx (B, T) -> the last block's output after the final norm, (B, T, C): what scalar heads read."""
        cfg = self.config
        idx = torch.as_tensor(idx).long()                    # NumPy ids are welcome too
        B, T = idx.shape
        if T > cfg.block_size:
            raise ZeroLLMError(f"sequence length {T} exceeds block_size={cfg.block_size}; "
                               "feed at most block_size tokens")
        # 1. token (+ position) embeddings
        x = self.wte(idx)                                    # (B, T) -> (B, T, C)
        if cfg.pos == "learned":
            x = x + self.wpe.weight[:T]
        elif cfg.pos == "sinusoidal":
            x = x + sinusoidal_table(T, cfg.n_embd, self.dtype)
        x = F.dropout(x, cfg.dropout, self.training)
        rope = rope_cos_sin(T, cfg.head_size, cfg.rope_theta, self.dtype) if cfg.pos == "rope" else None
        # 2. the blocks
        for block in self.h:
            x = block(x, rope)
        # 3. final norm
        return self.ln_f(x)

    # ------------------------------------------------------------------
    def load_numpy_state(self, state):
        """Copy NumPy arrays in by our names; a missing, extra or mis-shaped array is an error."""
        params = dict(self.named_parameters())
        missing, extra = sorted(set(params) - set(state)), sorted(set(state) - set(params))
        if missing or extra:
            raise ZeroLLMError(f"state does not fit this config: missing {missing}, unexpected {extra}; "
                               "build it with param_shapes(config) / random_state(config)")
        with torch.no_grad():
            for name, p in params.items():
                value = np.asarray(state[name])
                if value.shape != tuple(p.shape):
                    raise ZeroLLMError(f"{name} has shape {value.shape}, the config needs {tuple(p.shape)}")
                p.copy_(torch.tensor(value, dtype=self.dtype))

    def state_numpy(self):
        return {name: p.detach().numpy().copy() for name, p in self.named_parameters()}

    def grads_numpy(self):
        """Gradients by our names, after ``loss.backward()``."""
        grads = {}
        for name, p in self.named_parameters():
            if p.grad is None:
                raise ZeroLLMError(f"{name} has no gradient yet; call loss.backward() first")
            grads[name] = p.grad.detach().numpy().copy()
        return grads
