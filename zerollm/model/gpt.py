"""The GPT model: embeddings, a stack of pre-norm blocks, a final norm and the language-model head.

Forward and backward are both written out here, layer by layer; no autograd anywhere.

    idx (B, T) -> wte[idx] (+ positions) -> dropout -> block x n_layer -> norm_f -> logits (B, T, V)

Parameters live in one flat dict named exactly as Hugging Face's GPT-2 checkpoints (without the
"transformer." prefix), so loading GPT-2 weights is a name match:

    wte.weight (V, C)              wpe.weight (block_size, C)      [pos == 'learned']
    h.{i}.ln_1.weight/.bias        h.{i}.attn.c_attn.weight (C, (nh + 2 nkv) hs)  [.bias]
    h.{i}.attn.c_proj.weight (nh hs, C) [.bias]                    h.{i}.ln_2.weight/.bias
    h.{i}.attn.q_norm.weight (hs,), h.{i}.attn.k_norm.weight (hs,) [qk_norm only: Qwen3]
    h.{i}.mlp.c_fc.weight (C, H) or (C, 2H) for SwiGLU [.bias]     h.{i}.mlp.c_proj.weight (H, C) [.bias]
    ln_f.weight/.bias              lm_head.weight (V, C)           [untied embeddings only]

A mixture-of-experts block (config.is_moe(i), zerollm.nn.moe) has instead of mlp.c_fc / mlp.c_proj:

    h.{i}.mlp.router.weight (C, E)                                 (no bias)
    h.{i}.mlp.experts.c_fc.weight (E, C, H or 2H) [.bias (E, H or 2H)]   E experts stacked
    h.{i}.mlp.experts.c_proj.weight (E, H, C) [.bias (E, C)]
    h.{i}.mlp.shared.c_fc.weight (C, S*H or 2*S*H) [.bias]         [n_shared_expert = S > 0]
    h.{i}.mlp.shared.c_proj.weight (S*H, C) [.bias]                S shared experts as one S*H-wide MLP

Linear weights are (in, out), as GPT-2's Conv1D stores them. Norm biases exist only for layernorm
with bias=True; linear biases only with bias=True, but c_attn's also with qkv_bias=True (Qwen2).
nh hs = C unless head_dim is set.

The loss of forward(idx, targets) is the cross-entropy alone, comparable between dense and MoE
models. A mixture of experts also has its auxiliary losses (``moe_stats``, ``moe_loss()``); every
backward() adds their gradients, whatever loss it differentiates, so a training objective reports
its loss + model.moe_loss().
"""

import copy
import functools

import numpy as np

from zerollm.engine.amp import autocast, cast, exact_block_products
from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.nn.attention import ForwardPass
from zerollm.nn.block import block_backward, block_forward, norm_backward, norm_forward
from zerollm.nn.dropout import dropout_backward, dropout_forward
from zerollm.nn.embedding import embedding_backward, embedding_forward
from zerollm.nn.linear import head_product, quantized_matmul
from zerollm.nn.lora import LoRA
from zerollm.nn.loss import cross_entropy_backward, cross_entropy_forward
from zerollm.nn.moe import moe_statistics
from zerollm.nn.position import rope_tables, sinusoidal_positions

__all__ = ["GPT", "GPTConfig", "param_shapes"]


# ----------------------------------------------------------------------------
# parameter names, shapes and initialisation

def param_shapes(cfg):
    """Every parameter name -> shape, in architecture order."""
    C, V, hs, H = cfg.n_embd, cfg.vocab_size, cfg.head_size, cfg.n_inner
    qkv = (cfg.n_head + 2 * cfg.n_kv_head) * hs
    fc = 2 * H if cfg.mlp == "swiglu" else H
    norm_bias = cfg.norm == "layernorm" and cfg.bias
    shapes = {"wte.weight": (V, C)}
    if cfg.pos == "learned":
        shapes["wpe.weight"] = (cfg.block_size, C)

    def norm(name):
        shapes[name + ".weight"] = (C,)
        if norm_bias:
            shapes[name + ".bias"] = (C,)

    def linear(name, n_in, n_out, bias=cfg.bias):
        shapes[name + ".weight"] = (n_in, n_out)
        if bias:
            shapes[name + ".bias"] = (n_out,)

    def experts(name, n_in, n_out):
        E = cfg.n_expert
        shapes[name + ".weight"] = (E, n_in, n_out)
        if cfg.bias:
            shapes[name + ".bias"] = (E, n_out)

    for i in range(cfg.n_layer):
        p = f"h.{i}."
        norm(p + "ln_1")
        linear(p + "attn.c_attn", C, qkv, bias=cfg.qkv_has_bias)
        if cfg.qk_norm:
            shapes[p + "attn.q_norm.weight"] = (hs,)
            shapes[p + "attn.k_norm.weight"] = (hs,)
        linear(p + "attn.c_proj", cfg.attn_width, C)
        norm(p + "ln_2")
        if cfg.is_moe(i):
            shapes[p + "mlp.router.weight"] = (C, cfg.n_expert)
            experts(p + "mlp.experts.c_fc", C, fc)
            experts(p + "mlp.experts.c_proj", H, C)
            if cfg.n_shared_expert:
                linear(p + "mlp.shared.c_fc", C, cfg.n_shared_expert * fc)
                linear(p + "mlp.shared.c_proj", cfg.n_shared_expert * H, C)
        else:
            linear(p + "mlp.c_fc", C, fc)
            linear(p + "mlp.c_proj", H, C)
    norm("ln_f")
    if not cfg.tie_embeddings:
        shapes["lm_head.weight"] = (V, C)
    return shapes


def init_params(cfg, rng):
    """GPT-2 initialisation: N(0, 0.02) weights; the projections that write into the residual stream
    (attn.c_proj, mlp.c_proj) scaled by 1/sqrt(2 n_layer) so the stream's variance does not grow
    with depth; biases 0; norm gains 1."""
    dtype = np.dtype(cfg.dtype)
    params = {}
    for name, shape in param_shapes(cfg).items():
        if name.endswith(".bias"):
            params[name] = np.zeros(shape, dtype)
        elif len(shape) == 1:                      # a norm gain
            params[name] = np.ones(shape, dtype)
        else:
            std = cfg.init_std
            if name.endswith("c_proj.weight"):
                std /= np.sqrt(2 * cfg.n_layer)
            params[name] = (rng.standard_normal(shape) * std).astype(dtype)
    return params


# ----------------------------------------------------------------------------
# the model

def _in_precision(method):
    """Run a GPT method under zerollm.engine.amp.autocast(self.amp): emulated mixed precision when self.amp
    is 'bf16' or 'fp16', the plain float32 path (untouched) when it is None. In train mode also under
    exact_block_products(): quantized weights (a QLoRA base) multiply float activations, where inference
    rounds them to 8-bit blocks as llama.cpp does (zerollm.engine.fast.quant)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        if self.training:
            with exact_block_products():
                return _in_amp(self, method, args, kwargs)
        return _in_amp(self, method, args, kwargs)
    return run


def _in_amp(self, method, args, kwargs):
    if self.amp is None:
        return method(self, *args, **kwargs)
    # fp16 overflowing to inf (and inf - inf = NaN after it) is what the loss scaler watches for
    with autocast(self.amp), np.errstate(over="ignore", invalid="ignore"):
        return method(self, *args, **kwargs)


class GPT:
    """A GPT (or, with causal=False, a bidirectional encoder) in NumPy with a hand-written backward.

    >>> model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
    >>> logits, loss = model.forward(np.array([[1, 2, 3]]), np.array([[2, 3, 4]]))
    >>> logits.shape, sorted(model.backward())[:2]
    ((1, 3, 11), ['h.0.attn.c_attn.bias', 'h.0.attn.c_attn.weight'])
    """

    def __init__(self, config, seed=0, init=True):
        """init=False leaves the weights at zero, for when they are about to be loaded anyway
        (drawing 124M random numbers first would take seconds)."""
        if not isinstance(config, GPTConfig):
            raise ZeroLLMError(f"GPT needs a GPTConfig, got {type(config).__name__}")
        self.config = config
        self.dtype = np.dtype(config.dtype)
        init_seq, dropout_seq = np.random.SeedSequence(seed).spawn(2)
        if init:
            self.params = init_params(config, np.random.default_rng(init_seq))
        else:
            self.params = {name: np.zeros(shape, self.dtype) for name, shape in param_shapes(config).items()}
        self.rng = np.random.default_rng(dropout_seq)    # dropout masks; saved in checkpoints
        self.grads = {}
        self.training = True
        self.amp = None              # 'bf16' | 'fp16': matmuls on 16-bit inputs (zerollm.engine.amp); None = float32
        self.grad_scale = 1.0        # loss scaling (fp16): backward() starts from S * the loss gradient
        self._cache = None
        self.moe_stats = None        # routing statistics of the last forward (mixture of experts only)
        self.lora = None             # low-rank adapters (zerollm.nn.lora): the base frozen, only they train
        self._pos_tables = self._make_position_tables()

    def _make_position_tables(self):
        """Sinusoidal and RoPE tables depend only on the config: built once, sliced per call."""
        cfg = self.config
        if cfg.pos == "sinusoidal":
            return sinusoidal_positions(cfg.block_size, cfg.n_embd, dtype=self.dtype)
        if cfg.pos == "rope":
            return rope_tables(cfg.block_size, cfg.head_size, cfg.rope_theta, dtype=self.dtype)
        return None

    def replica(self, rng):
        """A model that shares these parameter arrays (so it sees every update) but has its own
        activations, gradients and dropout generator: one per thread (zerollm.training.parallel)."""
        twin = copy.copy(self)
        twin.rng, twin.grads, twin._cache, twin.moe_stats = rng, {}, None, None
        return twin

    # ------------------------------------------------------------------
    # low-rank adapters (zerollm.nn.lora)

    def add_lora(self, config, rng):
        """Freeze every base weight and attach adapters (A random, B = 0: the logits do not change)."""
        if self.lora is not None:
            raise ZeroLLMError("this model already has LoRA adapters; merge them first (zerollm merge)")
        self.lora = LoRA(config, self.config, rng)
        return self

    def trainable(self):
        """name -> array of what the optimizer updates: every parameter, or with LoRA the adapters, the tables
        of modules_to_save whole ("wte.weight", the model's own arrays), and of the other tables the embedding
        rows added since the adapters were attached ("wte.new_rows", views into the table)."""
        if self.lora is None:
            return self.params
        out = dict(self.lora.adapters)
        out.update({name: self.params[name] for name in self.lora.saved})
        V0 = self.lora.base_vocab
        if self.config.vocab_size > V0:
            tables = ("wte",) if self.config.tie_embeddings else ("wte", "lm_head")
            for table in tables:
                if table + ".weight" not in self.lora.saved:
                    out[table + ".new_rows"] = self.params[table + ".weight"][V0:]      # (V - V0, C) view
        return out

    def _head_rows_from(self):
        """The first row of the head that trains: 0 without LoRA or when the head table is saved whole
        (modules_to_save), else the first row added since the adapters were attached."""
        if self.lora is None:
            return 0
        head = "wte.weight" if self.config.tie_embeddings else "lm_head.weight"
        return 0 if head in self.lora.saved else self.lora.base_vocab

    def without_adapters(self):
        """The base model (a frozen reference for DPO, PPO, GRPO): the same weight arrays, no adapters, its
        own activations. Tables that train (new rows, modules_to_save) get their own copy, so the reference keeps
        their start."""
        twin = self.replica(np.random.default_rng(0))
        twin.lora = None
        if self.lora is not None and (self.config.vocab_size > self.lora.base_vocab or self.lora.saved):
            twin.params = dict(self.params)
            for name in ("wte.weight", "lm_head.weight"):
                if name in twin.params:
                    twin.params[name] = twin.params[name].copy()
        return twin

    def merged(self):
        """A plain GPT with the adapters folded into its weights (W + s A B); it computes the same logits."""
        twin = GPT(self.config, init=False)
        twin.params = self.lora.merged(self.params) if self.lora is not None else copy.deepcopy(self.params)
        twin.rng.bit_generator.state = self.rng.bit_generator.state
        return twin.eval()

    # ------------------------------------------------------------------
    def train(self):
        self.training = True
        return self

    def eval(self):
        self.training = False
        return self

    def moe_loss(self):
        """aux_loss_coef * aux + z_loss_coef * z of the last forward (0.0 for a dense model): what
        backward() differentiates on top of the loss it is given."""
        if self.moe_stats is None:
            return 0.0
        cfg = self.config
        return cfg.aux_loss_coef * self.moe_stats["aux_loss"] + cfg.z_loss_coef * self.moe_stats["z_loss"]

    def num_params(self, non_embedding=False, active=False):
        """Number of parameters; ``non_embedding`` leaves out the position table (as GPT-2 counts);
        ``active`` counts only the parameters one token uses: k of the E experts of each MoE block."""
        n = sum(p.size for p in self.params.values())
        if non_embedding and "wpe.weight" in self.params:
            n -= self.params["wpe.weight"].size
        if active:
            cfg = self.config
            idle = (cfg.n_expert - cfg.n_expert_active) / max(cfg.n_expert, 1)
            n -= round(idle * sum(p.size for name, p in self.params.items() if ".mlp.experts." in name))
        return n

    @property
    def head_weight(self):
        """(V, C): the output projection, which is wte itself when embeddings are tied."""
        return self.params["wte.weight" if self.config.tie_embeddings else "lm_head.weight"]

    # ------------------------------------------------------------------
    def _check_idx(self, idx, offset):
        idx = np.asarray(idx)
        if idx.ndim == 1:
            idx = idx[None]                              # (T,) -> (1, T)
        if idx.ndim != 2 or idx.shape[1] == 0 or not np.issubdtype(idx.dtype, np.integer):
            raise ZeroLLMError(f"idx must be integer token ids of shape (B, T) with T >= 1; "
                               f"got {idx.dtype} {idx.shape}")
        cfg, T = self.config, idx.shape[1]
        if np.ndim(offset):                              # rows at their own positions (a per-row KV cache)
            if len(offset) != idx.shape[0]:
                raise ZeroLLMError(f"the KV cache has {len(offset)} rows but idx has {idx.shape[0]}")
            offset = int(offset.max()) if len(offset) else 0
            limit_applies = True                         # the position tables end at block_size
        else:
            # learned positions stop at block_size; sinusoidal/RoPE positions can go on with a KV cache
            limit_applies = offset == 0 or cfg.pos == "learned"
        if limit_applies and offset + T > cfg.block_size:
            raise ZeroLLMError(f"positions {offset}..{offset + T - 1} go past block_size={cfg.block_size}; "
                               "crop the input to the last block_size tokens")
        V = cfg.vocab_size
        if idx.min() < 0 or idx.max() >= V:
            raise ZeroLLMError(f"token ids must be in [0, {V}); got min {idx.min()}, max {idx.max()}")
        return idx

    def _positions(self, offset, T):
        """Position information for positions offset .. offset+T-1 (None for learned positions); with one
        offset per row (B,), the (B, T) positions themselves for learned ones."""
        cfg, tables = self.config, self._pos_tables
        if np.ndim(offset):                              # (B,) one offset per row, all inside the tables
            pos = offset[:, None] + np.arange(T)         # (B, T)
            if cfg.pos == "sinusoidal":
                return tables[pos]                       # (B, T, C)
            if cfg.pos == "rope":
                return tables[0][pos][:, None, None], tables[1][pos][:, None, None]   # (B, 1, 1, T, hs) each
            return pos
        inside = offset + T <= cfg.block_size
        if cfg.pos == "sinusoidal":
            return tables[offset:offset + T] if inside else sinusoidal_positions(T, cfg.n_embd, offset, self.dtype)
        if cfg.pos == "rope":
            if inside:
                return tables[0][offset:offset + T], tables[1][offset:offset + T]   # (T, hs) each
            return rope_tables(T, cfg.head_size, cfg.rope_theta, offset, self.dtype)
        return None

    @_in_precision
    def forward(self, idx, targets=None, *, kv_cache=None, mask=None, keep=None):
        """idx (B, T) ints -> (logits (B, T, V), loss or None).

        ``keep`` (default: train mode and no KV cache): keep every layer's activations for backward()
        and attention_weights(). Otherwise each layer's are freed as soon as the next layer has run,
        like torch.no_grad(): inference needs the memory of one layer, not of all of them.
        ``kv_cache`` (zerollm.model.kvcache.KVCache): idx are the tokens that follow what the cache holds;
        inference only. ``mask``: bool (T, T) or (B, T, T), True = hidden, on top of the causal mask
        (padding, a sliding window).
        """
        x = self.forward_hidden(idx, kv_cache=kv_cache, mask=mask, keep=keep)
        B, T, C = x.shape
        logits = self.head(x)                   # 4. the head: logits = x W^T
        loss = ce = None
        if targets is not None:
            targets = np.asarray(targets)
            if targets.shape != (B, T):
                raise ZeroLLMError(f"targets must have the shape of idx {(B, T)}; got {targets.shape}")
            loss, ce = cross_entropy_forward(logits, targets)
        if self._cache is not None:
            self._cache.update(head=True, ce=ce)
        return logits, loss

    def head(self, x):
        """Hidden states (..., C) -> logits (..., V) = x W^T, with the head's float weights or, from a GGUF file,
        its Q8_0 / Q4_0 blocks (zerollm.interop.quant). forward() ends with it, and so does a decode step
        that needs only the last position's logits (zerollm.generation.batching)."""
        *lead, C = x.shape
        head = self.head_weight
        if isinstance(head, np.ndarray):
            logits = head_product(x.reshape(-1, C), head)                                # (N, C) @ (C, V)
        else:
            logits = quantized_matmul(np.ascontiguousarray(x.reshape(-1, C)), head)
        return logits.reshape(*lead, -1)

    @_in_precision
    def forward_hidden(self, idx, *, kv_cache=None, mask=None, keep=None):
        """The trunk without the head: idx (B, T) -> final hidden states (B, T, C), after the last norm.

        Scalar heads (a reward or value head, zerollm.model.heads) read these; backward(dhidden=...) takes
        their gradient. Skipping the (C, V) head matmul saves most of a reward model's forward work
        when the vocabulary is large. ``kv_cache``, ``mask``, ``keep``: as in forward().
        """
        cfg, p = self.config, self.params
        offset = 0 if kv_cache is None else kv_cache.pos
        idx = self._check_idx(idx, offset)
        B, T = idx.shape
        training = self.training and kv_cache is None

        # 1. token embeddings plus positions
        x, emb = embedding_forward(idx, p["wte.weight"])                # (B, T) -> (B, T, C)
        pos = self._positions(offset, T)
        rope = pos if cfg.pos == "rope" else None
        if cfg.pos == "learned" and np.ndim(offset):
            x += p["wpe.weight"][pos]                                   # (B, T, C) each row at its own place
        elif cfg.pos == "learned":
            x += p["wpe.weight"][offset:offset + T]                     # (T, C) broadcast over B
        elif cfg.pos == "sinusoidal":
            x += pos
        x, drop = dropout_forward(x, cfg.dropout, self.rng, training)

        # 2. the blocks
        keep = (self.training and kv_cache is None) if keep is None else keep
        blocks, routing = [], []
        run = ForwardPass(rope=rope, mask=mask, kv=kv_cache, rng=self.rng, training=training)
        for i in range(cfg.n_layer):
            x, c = block_forward(x, p, f"h.{i}.", cfg, run, layer=i, lora=self.lora)
            if c.moe:
                routing.append(c.mlp)
            if keep:
                blocks.append(c)
        self.moe_stats = moe_statistics(routing) if routing else None
        if kv_cache is not None:
            kv_cache.advance(T)

        # 3. the final norm
        x, ln_f = norm_forward(x, p, "ln_f", cfg)                       # (B, T, C)
        self._cache = dict(emb=emb, T=T, drop=drop, blocks=blocks, ln_f=ln_f, x_f=x,
                           head=False, ce=None) if keep else None
        return x

    @_in_precision
    def backward(self, dlogits=None, *, dhidden=None):
        """Gradients w.r.t. every parameter -> dict (also ``self.grads``), keys = parameter names.

        What is differentiated:
          - nothing given: the built-in cross-entropy of the last forward(idx, targets);
          - ``dlogits`` (B, T, V): the gradient of ANY loss w.r.t. the logits of the last forward
            (DPO, PPO, GRPO, a KL term: the caller differentiates its loss up to the logits);
          - ``dhidden`` (B, T, C): the gradient w.r.t. the final hidden states (forward_hidden), for
            a scalar head on the trunk; it may come together with dlogits (a value head beside the
            language-model head), and the two add up.
        The steps of forward, in reverse. Parameters that got no gradient (the head after
        forward_hidden) get zeros, so the dict always has every name.
        """
        cache = self._cache
        if cache is None:
            raise ZeroLLMError("call forward() before backward(), in train mode (model.train()) or with "
                               "keep=True so the activations are kept; backward frees them, so call it once")
        dlogits = self._dlogits(cache, dlogits, dhidden)
        if self.grad_scale != 1.0:   # loss scaling (zerollm.engine.amp.GradScaler): differentiate S * loss
            dlogits, dhidden = self._loss_scaled(dlogits), self._loss_scaled(dhidden)
        cfg, grads = self.config, {}
        x_f = cache["x_f"]
        B, T, C = x_f.shape

        # 4. head: logits = x_f W^T  =>  dx_f = dlogits W,  dW = dlogits^T x_f
        V0 = self._head_rows_from()                                     # with LoRA often only rows V0.. train
        if dlogits is not None:
            dlogits2 = cast(dlogits.reshape(B * T, -1))                 # (N, V); 16-bit under autocast
            dx = (dlogits2 @ cast(self.head_weight)).reshape(B, T, C)   # (N, V) @ (V, C) -> (B, T, C)
            dhead = dlogits2[:, V0:].T @ cast(x_f.reshape(B * T, C))    # (V - V0, N) @ (N, C) -> (V - V0, C)
        else:
            dx, dhead = np.zeros_like(x_f), np.zeros_like(self.head_weight[V0:])
        if dhidden is not None:
            dx += self._check_grad(dhidden, x_f.shape, "dhidden")       # a scalar head read x_f too
        # 3. final norm
        dx = norm_backward(dx, cache["ln_f"], "ln_f", cfg, grads)

        # 2. the blocks, last first
        for i in reversed(range(cfg.n_layer)):
            dx = block_backward(dx, cache["blocks"][i], f"h.{i}.", cfg, grads, self.grad_scale)

        if self.lora is not None:
            return self._adapter_grads(grads, dx, dhead, cache)
        # 1. embeddings: dropout, positions, token lookup
        dx = dropout_backward(dx, cache["drop"])
        if cfg.pos == "learned":
            dwpe = np.zeros_like(self.params["wpe.weight"])
            dwpe[:cache["T"]] = dx.sum(axis=0)                          # every sequence used rows 0..T-1
            grads["wpe.weight"] = dwpe
        dwte = embedding_backward(dx, cache["emb"])
        if cfg.tie_embeddings:
            dwte += dhead            # wte is used twice (lookup and head): its gradients add up
        else:
            grads["lm_head.weight"] = dhead
        grads["wte.weight"] = dwte

        self._cache = None           # free the activations; backward twice would be an error
        self.grads = {name: grads[name] for name in self.params}       # parameter order
        return self.grads

    def _adapter_grads(self, grads, dx, dhead, cache):
        """The end of backward() with LoRA: the adapters' gradients are in ``grads``; the tables of
        modules_to_save get theirs whole, and of the others the rows added since the adapters were attached
        (lookup + head); nothing else of the base is differentiated. ``dhead``: rows _head_rows_from().. ."""
        V0, saved, tied = self.lora.base_vocab, self.lora.saved, self.config.tie_embeddings
        if self.config.vocab_size > V0 or "wte.weight" in saved:
            dx = dropout_backward(dx, cache["drop"])
            dwte = embedding_backward(dx, cache["emb"])                 # (V, C)
            if "wte.weight" not in saved:
                dwte = dwte[V0:]                                        # (V - V0, C)
            if tied:
                dwte += dhead                                           # the same rows: lookup and head
            grads["wte.weight" if "wte.weight" in saved else "wte.new_rows"] = dwte
        if not tied:
            grads["lm_head.weight" if "lm_head.weight" in saved else "lm_head.new_rows"] = dhead
        self._cache = None
        self.grads = {name: grads[name] for name in self.trainable()}
        return self.grads

    def last_hidden(self):
        """The final hidden states (B, T, C) of the last forward that kept its activations (a value head
        on the trunk reads them without a second forward)."""
        if self._cache is None:
            raise ZeroLLMError("no kept activations: run forward(..., keep=True) (or in train mode) first")
        return self._cache["x_f"]

    def _dlogits(self, cache, dlogits, dhidden):
        """The gradient at the logits: given, or the built-in cross-entropy's, or None (trunk only)."""
        if dlogits is not None:
            if not cache["head"]:
                raise ZeroLLMError("backward(dlogits=...) needs logits: the last call was forward_hidden(); "
                                   "call forward() instead")
            B, T, C = cache["x_f"].shape
            return self._check_grad(dlogits, (B, T, self.config.vocab_size), "dlogits")
        if dhidden is not None:
            return None
        if cache["ce"] is None:
            raise ZeroLLMError("backward() with no arguments differentiates the built-in cross-entropy: call "
                               "forward(idx, targets) with targets first, or pass dlogits= / dhidden=")
        return cross_entropy_backward(cache["ce"])                      # (B, T, V)

    def _loss_scaled(self, g):
        return None if g is None else np.asarray(g) * self.dtype.type(self.grad_scale)

    def _check_grad(self, g, shape, name):
        g = np.asarray(g)
        if g.shape != tuple(shape):
            raise ZeroLLMError(f"{name} must have shape {tuple(shape)} (that of the last forward), got {g.shape}")
        return g.astype(self.dtype, copy=False)

    def attention_weights(self):
        """The attention weights of the last forward, one (B, nh, T, Tk) array per layer.

        Row t of head h is how much position t looked at each earlier position (what ``zerollm
        heads`` draws). Available until backward() frees the activations.
        """
        if self._cache is None:
            raise ZeroLLMError("run forward() first (in eval mode: forward(idx, keep=True)); attention "
                               "weights come from the last forward pass")
        if self.config.attn_impl == "flash":
            raise ZeroLLMError("attn_impl='flash' never stores the attention weights (that is how it saves "
                               "memory); to look at them, load these weights into a model whose config has "
                               "attn_impl='naive' (dataclasses.replace(config, attn_impl='naive'))")
        maps = []
        for c in self._cache["blocks"]:
            att = c.attn.sdpa.att                                   # (B, nkv, g, T, Tk)
            B, nkv, g, T, Tk = att.shape
            maps.append(att.reshape(B, nkv * g, T, Tk))             # head j = kv * g + i
        return maps

    # ------------------------------------------------------------------
    def state_dict(self):
        """name -> array, Hugging Face GPT-2 names and layouts. The arrays are the live parameters."""
        return dict(self.params)

    def load_state_dict(self, state):
        """Copy arrays into the parameters (in place, so optimizer references stay valid).

        Every mismatch is listed in one error: missing keys, unexpected keys, wrong shapes.
        """
        missing = sorted(set(self.params) - set(state))
        unexpected = sorted(set(state) - set(self.params))
        wrong = sorted(f"{k}: expected {self.params[k].shape}, got {tuple(np.shape(state[k]))}"
                       for k in set(self.params) & set(state) if np.shape(state[k]) != self.params[k].shape)
        if missing or unexpected or wrong:
            parts = [f"missing keys {missing}" if missing else "",
                     f"unexpected keys {unexpected}" if unexpected else "",
                     f"shape mismatches [{'; '.join(wrong)}]" if wrong else ""]
            raise ZeroLLMError(f"state dict does not fit this model's config: {', '.join(x for x in parts if x)}"
                               "; build the model with the config the weights were saved with")
        for name, value in state.items():
            np.copyto(self.params[name], np.asarray(value), casting="same_kind")
        return self
