"""GPTConfig: every architectural choice of a zerollm model, checked when it is made.

One frozen dataclass covers GPT-2 (layernorm, learned positions, GELU MLP, biases, tied
embeddings), Llama-style models (rmsnorm, RoPE, SwiGLU, grouped-query attention), Mixtral-style
mixtures of experts (n_expert > 0, zerollm.nn.moe), plus the in-between combinations the course
explores. Qwen2 (biases on q, k and v only: qkv_bias) and Qwen3 (RMSNorm on each head's queries and
keys before RoPE: qk_norm; a head size of its own: head_dim) are three more fields any model can use.
``zerollm.model.gpt`` re-exports it.
"""

from dataclasses import asdict, dataclass, fields

from zerollm.io.argtypes import field_range
from zerollm.io.errors import ZeroLLMError

NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "sinusoidal", "rope")
MLPS = ("gelu", "swiglu")
GELUS = ("tanh", "erf")
ATTN_IMPLS = ("naive", "flash")
DTYPES = ("float32", "float64")
QWEN_OPTIONS = {"qkv_bias": False, "qk_norm": False, "head_dim": None}   # field -> the default to_dict leaves out


@dataclass(frozen=True)
class GPTConfig:
    """Architecture of a decoder-only (or, with causal=False, encoder-only) Transformer.

    Sizes: C = n_embd, nh = n_head, hs = head_dim or C // nh (head size), V = vocab_size.
    """
    vocab_size: int = 50257
    block_size: int = 1024          # longest sequence (context length)
    n_layer: int = 12
    n_head: int = 12
    n_kv_head: int | None = None    # None = n_head (plain multi-head); 1 = multi-query; else grouped-query
    n_embd: int = 768
    n_inner: int | None = None      # MLP width; None = 4*C for gelu, and the Llama rule for swiglu
    norm: str = "layernorm"         # 'layernorm' | 'rmsnorm'
    norm_eps: float = 1e-5
    pos: str = "learned"            # 'learned' | 'sinusoidal' | 'rope'
    rope_theta: float = 10000.0     # RoPE base (Su et al. 2021); Llama 2 uses 1e4, Llama 3 5e5
    mlp: str = "gelu"               # 'gelu' (GPT-2, 4x width) | 'swiglu' (Shazeer 2020, Llama)
    gelu: str = "tanh"              # 'tanh' approximation (GPT-2) | 'erf' (exact)
    bias: bool = True               # biases in linears and layernorms (GPT-2: True)
    dropout: float = 0.0
    tie_embeddings: bool = True     # lm head shares wte (GPT-2: True)
    causal: bool = True             # False = bidirectional encoder (BERT-style)
    attn_impl: str = "naive"        # 'naive' (readable) | 'flash' (tiled, O(T) memory)
    init_std: float = 0.02
    dtype: str = "float32"
    # mixture of experts (zerollm.nn.moe); n_expert = 0 is a dense model and the rest is unused
    n_expert: int = 0               # routed experts per MoE block (0 = dense MLP everywhere)
    n_expert_active: int = 2        # k: experts each token goes through (top-k of the router)
    moe_every: int = 1              # 1 = every block is MoE; m = blocks m-1, 2m-1, ... (the hybrid stack)
    moe_norm_topk: bool = False     # gates renormalised over the chosen k (Mixtral) or raw (Switch)
    capacity_factor: float = 0.0    # per-expert capacity = ceil(cf * tokens * k / E); 0 = never drop
    aux_loss_coef: float = 0.01     # Switch load-balancing loss weight (Fedus et al. 2021)
    z_loss_coef: float = 0.001      # router z-loss weight (Zoph et al. 2022, ST-MoE)
    n_shared_expert: int = 0        # experts every token goes through as well (DeepSeek-MoE, Qwen-MoE)
    # attention options of the Qwen family; the defaults are GPT-2's and Llama's (and are left out of to_dict,
    # so the config.json of every model without them stays byte for byte what it was)
    qkv_bias: bool = False          # biases on c_attn (q, k, v) even when bias=False; c_proj keeps none (Qwen2)
    qk_norm: bool = False           # RMSNorm over each head's q and k before RoPE (Qwen3, OLMo 2)
    head_dim: int | None = None     # None = n_embd // n_head; Qwen3 sets it (0.6B: 16 heads of 128 on C = 1024)

    def __post_init__(self):
        if self.n_kv_head is None:
            object.__setattr__(self, "n_kv_head", self.n_head)   # frozen: set the resolved default once
        if self.n_inner is None:
            object.__setattr__(self, "n_inner", default_inner(self.n_embd, self.mlp))
        self._validate()

    # ------------------------------------------------------------------
    def _validate(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_kv_head", "n_embd", "n_inner"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ZeroLLMError(f"GPTConfig.{name} must be a positive integer, got {value!r}")
        for name, allowed in (("norm", NORMS), ("pos", POSITIONS), ("mlp", MLPS), ("gelu", GELUS),
                              ("attn_impl", ATTN_IMPLS), ("dtype", DTYPES)):
            if getattr(self, name) not in allowed:
                raise ZeroLLMError(f"GPTConfig.{name} must be one of {', '.join(allowed)}; "
                                   f"got {getattr(self, name)!r}")
        for name in ("bias", "tie_embeddings", "causal", "qkv_bias", "qk_norm"):
            if not isinstance(getattr(self, name), bool):
                raise ZeroLLMError(f"GPTConfig.{name} must be True or False, got {getattr(self, name)!r}")
        if self.head_dim is not None and (isinstance(self.head_dim, bool) or not isinstance(self.head_dim, int)
                                          or self.head_dim <= 0):
            raise ZeroLLMError(f"GPTConfig.head_dim must be a positive integer or None, got {self.head_dim!r}")
        if self.head_dim is None and self.n_embd % self.n_head:
            raise ZeroLLMError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}; "
                               "pick n_embd = n_head * head_size")
        if self.n_head % self.n_kv_head:
            raise ZeroLLMError(f"n_kv_head={self.n_kv_head} must divide n_head={self.n_head} "
                               "(each group of query heads shares one key/value head)")
        if self.pos == "rope" and self.head_size % 2:
            raise ZeroLLMError(f"RoPE rotates pairs of dimensions, so the head size must be even; "
                               f"got a head size of {self.head_size}")
        if not 0.0 <= self.dropout < 1.0:
            raise ZeroLLMError(f"dropout must be in [0, 1), got {self.dropout}")
        if not self.norm_eps > 0 or not self.init_std > 0 or not self.rope_theta > 0:
            raise ZeroLLMError("norm_eps, init_std and rope_theta must be positive")
        for f in fields(self):                  # the declared ranges (zerollm.io.argtypes): finite, not absurd
            declared = field_range(GPTConfig, f)
            if declared is not None and getattr(self, f.name) is not None:      # head_dim=None: C // nh
                declared.check(getattr(self, f.name), f"GPTConfig.{f.name}")
        self._validate_moe()

    def _validate_moe(self):
        """What the declared ranges cannot say: how the MoE fields must fit together."""
        if not isinstance(self.moe_norm_topk, bool):
            raise ZeroLLMError(f"GPTConfig.moe_norm_topk must be True or False, got {self.moe_norm_topk!r}")
        if self.n_expert == 0:
            if self.n_shared_expert:
                raise ZeroLLMError(f"n_shared_expert={self.n_shared_expert} needs routed experts beside it; "
                                   "set n_expert >= 2 (or n_shared_expert=0 for a dense model)")
            return
        if self.n_expert == 1:
            raise ZeroLLMError("n_expert=1 is a dense MLP with a useless router; use n_expert=0 (dense) "
                               "or n_expert >= 2")
        if not 1 <= self.n_expert_active <= self.n_expert:
            raise ZeroLLMError(f"n_expert_active={self.n_expert_active} must be between 1 and "
                               f"n_expert={self.n_expert} (each token picks k of the E experts)")
        if self.moe_every > self.n_layer:
            raise ZeroLLMError(f"moe_every={self.moe_every} must be between 1 and n_layer={self.n_layer}: "
                               "MoE blocks are moe_every-1, 2*moe_every-1, ... and there must be one")

    # ------------------------------------------------------------------
    @property
    def head_size(self):
        """hs: C // nh, unless head_dim says otherwise (then q, k and v are nh * hs wide, not C)."""
        return self.head_dim if self.head_dim is not None else self.n_embd // self.n_head

    @property
    def attn_width(self):
        """nh * hs: the width of the attention's output before c_proj (C unless head_dim is set)."""
        return self.n_head * self.head_size

    @property
    def qkv_has_bias(self):
        """c_attn has a bias: with every linear's (bias) or on its own (qkv_bias, Qwen2)."""
        return self.bias or self.qkv_bias

    def is_moe(self, layer):
        """True if block ``layer`` (0-based) has a mixture of experts instead of a dense MLP.

        moe_every = m makes blocks m-1, 2m-1, ... MoE: with m = 2, blocks 1, 3, 5, ... (a dense
        block first, then alternating: the course's hybrid stack, as in GShard and Switch).

        >>> cfg = GPTConfig(n_layer=4, n_expert=4, moe_every=2)
        >>> [cfg.is_moe(i) for i in range(4)]
        [False, True, False, True]
        """
        return self.n_expert > 0 and (layer + 1) % self.moe_every == 0

    @property
    def moe_layers(self):
        """Indices of the MoE blocks, in order (empty for a dense model)."""
        return [i for i in range(self.n_layer) if self.is_moe(i)]

    def to_dict(self):
        """Every field, but the Qwen attention options only when set: a file written without them is
        unchanged, and an older zerollm still reads it."""
        d = asdict(self)
        for name in QWEN_OPTIONS:
            if d[name] == QWEN_OPTIONS[name]:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d, where="GPTConfig", section=""):
        """Build from a dict (e.g. a saved config.json): unknown keys, wrong types and values out of
        range are errors naming ``where`` (the file) and the field, never ignored."""
        from zerollm.io.validate import dataclass_from_dict
        return dataclass_from_dict(cls, d, where, section)


def default_inner(n_embd, mlp):
    """MLP width: 4*C for GELU (GPT-2); for SwiGLU 2/3 of 4*C rounded up to a multiple of 8, so the
    three SwiGLU matrices hold about as many weights as GPT-2's two (the Llama rule)."""
    if mlp == "swiglu":
        hidden = int(2 * 4 * n_embd / 3)
        return 8 * ((hidden + 7) // 8)
    return 4 * n_embd
