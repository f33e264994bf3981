"""Low-rank adapters (LoRA, Hu et al. 2021): train r x (in + out) numbers per linear instead of in x out.

A frozen linear W (i, o) gets a trainable side path through rank r:

    y = x W + b + (dropout(x) A B) * s        A (i, r), B (r, o), s = alpha / r

Why B = 0 at the start: then A B = 0, so the adapted model computes exactly what the base computes,
and training begins from the base model rather than from a random perturbation of it. A is random
(Kaiming-uniform with a = sqrt(5), as torch's nn.Linear and PEFT draw it: U(-1/sqrt(i), 1/sqrt(i))),
so dB = s h^T dy (with h = x A) is not zero and B moves at the first step.

Why s = alpha / r: the update A B is a sum of r rank-one terms; with A's scale fixed, doubling r would
roughly double the size of the update for the same learning rate. Dividing by r keeps the learning
rate meaningful across ranks; alpha is the knob (alpha = r means s = 1).

Memory (per adapted linear): the base needs no gradient and no AdamW moments, so full fine-tuning's
4 copies of i*o numbers (weights, gradient, m, v) become 1 copy of i*o plus 4 of r*(i + o).

Shapes: N rows (B*T flattened), i in features, o out features, r the rank.

The model side: which linears of a GPT can carry adapters (``sites``), and the ``LoRA`` object a GPT
holds (``model.lora``): the adapters' arrays, named like "h.0.attn.c_attn.lora_A", and which base linear
each one adds to. zerollm fuses some projections that Llama keeps apart (c_attn = [q | k | v],
SwiGLU's c_fc = [gate | up]); an adapter on q_proj adds only to c_attn's q columns, so one adapter
per Hugging Face module, as PEFT has them. Beside the adapters, whole modules may train (PEFT's
modules_to_save): the token table and an untied head, which stay the model's own arrays (``LoRA.saved``).
"""

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from zerollm.engine.amp import cast
from zerollm.io.errors import ZeroLLMError
from zerollm.nn.dropout import dropout_backward, dropout_forward
from zerollm.nn.linear import LinearCache, linear_backward, linear_forward


# ----------------------------------------------------------------------------
# the layer pair: the low-rank path, and a linear with adapters on it

class LoRACache(NamedTuple):
    u: np.ndarray      # (N, i) dropout(x), what A multiplied
    h: np.ndarray      # (N, r) u A, what B multiplied
    A: np.ndarray      # (i, r)
    B: np.ndarray      # (r, o)
    scale: float
    drop: tuple        # DropoutCache
    shape: tuple       # x.shape, to give dx back in it


def lora_forward(x, A, B, scale, dropout=0.0, rng=None, training=False):
    """The side path d = (dropout(x) A B) * scale.  x (..., i) -> d (..., o)."""
    shape = x.shape
    u, drop = dropout_forward(x.reshape(-1, shape[-1]), dropout, rng, training)   # (N, i)
    u, A, B = cast(u), cast(A), cast(B)
    h = u @ A                                                    # (N, i) @ (i, r) -> (N, r)
    d = (h @ B) * h.dtype.type(scale)                            # (N, r) @ (r, o) -> (N, o)
    return d.reshape(*shape[:-1], B.shape[1]), LoRACache(u, h, A, B, scale, drop, shape)


def lora_backward(dd, cache):
    """forward was u = dropout(x), h = u A, d = s h B, so (in reverse):
        dB = s h^T dd            (r, o)
        dh = s dd B^T            (N, r)
        dA = u^T dh              (i, r)
        dx = dropout_backward(dh A^T)
    Returns (dx, dA, dB)."""
    u, h, A, B = cache.u, cache.h, cache.A, cache.B
    s = h.dtype.type(cache.scale)
    dd = cast(dd).reshape(-1, B.shape[1])                       # (N, o)
    dB = (h.T @ dd) * s                                         # (r, N) @ (N, o) -> (r, o)
    dh = (dd @ B.T) * s                                         # (N, o) @ (o, r) -> (N, r)
    dA = u.T @ dh                                               # (i, N) @ (N, r) -> (i, r)
    dx = dropout_backward(dh @ A.T, cache.drop)                 # (N, r) @ (r, i) -> (N, i)
    return dx.reshape(cache.shape), dA, dB


class Adapted(NamedTuple):
    """The adapters on one base linear. ``names[j]`` adds to the columns ``cols[j]`` of its output."""
    names: tuple       # ("h.0.attn.q_proj", ...); empty: a frozen linear without adapters
    cols: tuple        # slice per adapter
    A: tuple
    B: tuple
    scale: float
    dropout: float


class AdaptedCache(NamedTuple):
    linear: LinearCache
    loras: tuple       # LoRACache per adapter
    adapted: Adapted


def adapted_forward(x, w, b, adapted, rng=None, training=False):
    """y = x w + b, plus each adapter's side path on its columns.  adapted=None: the plain linear."""
    y, lin = linear_forward(x, w, b)                             # (..., i) -> (..., o)
    if adapted is None:
        return y, lin
    caches = []
    for cols, A, B in zip(adapted.cols, adapted.A, adapted.B):
        d, c = lora_forward(x, A, B, adapted.scale, adapted.dropout, rng, training)
        y[..., cols] += d                                        # (..., o_j) into its columns
        caches.append(c)
    return y, AdaptedCache(lin, tuple(caches), adapted)


def adapted_backward(dy, cache, grads=None):
    """Backward of ``adapted_forward`` -> (dx, dw, db). With adapters the base is frozen: dw and db are
    None (x^T dy is never computed, a third of the backward's matmul work saved) and each adapter's
    dA, dB go into ``grads`` under "<name>.lora_A" / "<name>.lora_B"."""
    if isinstance(cache, LinearCache):
        return linear_backward(dy, cache)
    dx, _, _ = linear_backward(dy, cache.linear, weights=False)
    for name, cols, c in zip(cache.adapted.names, cache.adapted.cols, cache.loras):
        dxj, grads[name + ".lora_A"], grads[name + ".lora_B"] = lora_backward(dy[..., cols], c)
        dx += dxj
    return dx, None, None


# ----------------------------------------------------------------------------
# where adapters go: the named linears of a GPT

ALL_LINEAR = "all-linear"     # PEFT's word for every linear layer but the output head

# modules that may train whole beside the adapters (PEFT's modules_to_save) -> the parameter each one is;
# embed_tokens is Llama's (and PEFT's) name for the token table
SAVABLE = {"wte": "wte.weight", "embed_tokens": "wte.weight", "lm_head": "lm_head.weight"}


@dataclass(frozen=True)
class LoRAConfig:
    """Rank, scale, dropout and the modules that get adapters (names as PEFT matches them: a module
    is chosen when its name is a target or ends with "." + a target; "all-linear", the default, chooses
    every linear layer of attention and MLP, as PEFT's "all-linear" does).

    modules_to_save: whole modules that train beside the adapters (PEFT's ``modules_to_save``): "wte" (the
    token table; with tied embeddings also the head) and "lm_head" (an untied head). A small model's token
    table is most of its parameters; frozen, it can keep a fine-tune from learning a new format at all
    (docs/lora.md)."""
    r: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: tuple = field(default=(ALL_LINEAR,))
    modules_to_save: tuple = ()

    def __post_init__(self):
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r < 1:
            raise ZeroLLMError(f"--lora-r must be a whole number >= 1, got {self.r!r}")
        if not (isinstance(self.alpha, (int, float)) and math.isfinite(self.alpha) and self.alpha > 0):
            raise ZeroLLMError(f"--lora-alpha must be a number > 0, got {self.alpha!r}")
        if not 0 <= self.dropout < 1:
            raise ZeroLLMError(f"--lora-dropout must be in [0, 1), got {self.dropout!r}")
        targets = tuple(self.targets)
        if not targets or not all(isinstance(t, str) and t for t in targets):
            raise ZeroLLMError(f"--lora-targets must name at least one module, got {self.targets!r}")
        object.__setattr__(self, "targets", targets)
        saved = tuple(self.modules_to_save)
        unknown = [m for m in saved if m not in SAVABLE]
        if unknown:
            raise ZeroLLMError(f"--lora-modules-to-save: {unknown[0]!r} is not a module that can train beside the "
                               f"adapters; choose from {', '.join(SAVABLE)}")
        object.__setattr__(self, "modules_to_save", saved)

    @property
    def scale(self):
        return self.alpha / self.r

    def to_dict(self):
        return {"r": self.r, "alpha": self.alpha, "dropout": self.dropout, "targets": list(self.targets),
                "modules_to_save": list(self.modules_to_save)}

    @classmethod
    def from_dict(cls, saved):
        """The config ``to_dict`` wrote (a checkpoint's; one written before modules_to_save existed has none)."""
        return cls(**{**saved, "targets": tuple(saved["targets"]),
                      "modules_to_save": tuple(saved.get("modules_to_save") or ())})


class Site(NamedTuple):
    name: str          # the module's name: "h.0.attn.q_proj"
    linear: str        # the base linear it adds to: "h.0.attn.c_attn"
    cols: slice        # its columns of that linear's output
    n_in: int
    n_out: int
    aliases: tuple     # other names PEFT may call it by ("h.0.attn.o_proj" for "h.0.attn.c_proj")


def sites(cfg):
    """Every module of a GPT config that can carry an adapter, in architecture order. Mixture-of-experts
    MLPs are not among them (their stacked experts have no adapters yet)."""
    C, H, hs = cfg.n_embd, cfg.n_inner, cfg.head_size
    nq, nkv = cfg.n_head * hs, cfg.n_kv_head * hs
    out = []
    for i in range(cfg.n_layer):
        p = f"h.{i}."
        qkv = nq + 2 * nkv
        out.append(Site(p + "attn.c_attn", p + "attn.c_attn", slice(0, qkv), C, qkv, ()))
        for name, lo, hi in (("q_proj", 0, nq), ("k_proj", nq, nq + nkv), ("v_proj", nq + nkv, qkv)):
            out.append(Site(p + "attn." + name, p + "attn.c_attn", slice(lo, hi), C, hi - lo, ()))
        out.append(Site(p + "attn.c_proj", p + "attn.c_proj", slice(0, C), nq, C, (p + "attn.o_proj",)))
        if cfg.is_moe(i):
            continue
        fc = 2 * H if cfg.mlp == "swiglu" else H
        out.append(Site(p + "mlp.c_fc", p + "mlp.c_fc", slice(0, fc), C, fc, ()))
        if cfg.mlp == "swiglu":
            out.append(Site(p + "mlp.gate_proj", p + "mlp.c_fc", slice(0, H), C, H, ()))
            out.append(Site(p + "mlp.up_proj", p + "mlp.c_fc", slice(H, fc), C, H, ()))
        out.append(Site(p + "mlp.c_proj", p + "mlp.c_proj", slice(0, C), H, C, (p + "mlp.down_proj",)))
    return out


def _matches(site, target):
    if target == ALL_LINEAR:
        return site.name == site.linear          # each linear whole: c_attn, not its q_proj part as well
    return any(n == target or n.endswith("." + target) for n in (site.name, *site.aliases))


def choose_sites(cfg, targets):
    """The sites the targets name; an error for a target that matches nothing or for two adapters on
    the same columns (c_attn together with q_proj)."""
    everything = sites(cfg)
    chosen = [s for s in everything if any(_matches(s, t) for t in targets)]
    for t in targets:
        if not any(_matches(s, t) for s in everything):
            known = sorted({n.rsplit(".", 1)[1] for s in everything for n in (s.name, *s.aliases)})
            raise ZeroLLMError(f"--lora-targets: {t!r} matches no linear layer of this model; choose from "
                               f"{', '.join(known)}, or {ALL_LINEAR} (every one)")
    by_linear = {}
    for s in chosen:
        for other in by_linear.get(s.linear, []):
            if s.cols.start < other.cols.stop and other.cols.start < s.cols.stop:
                raise ZeroLLMError(f"--lora-targets: {s.name} and {other.name} would both adapt the same "
                                   "columns; name one of them (c_attn covers q_proj, k_proj and v_proj)")
        by_linear.setdefault(s.linear, []).append(s)
    return chosen


def saved_params(cfg, modules):
    """The parameter names the modules_to_save of a model of ``cfg`` train whole, in a fixed order; an error
    for an lm_head that is the token table itself (tied embeddings)."""
    if "lm_head" in modules and cfg.tie_embeddings:
        raise ZeroLLMError("--lora-modules-to-save lm_head: this model ties its head to the token table (one "
                           "array); name wte, which trains both")
    return tuple(p for p in ("wte.weight", "lm_head.weight") if p in {SAVABLE[m] for m in modules})


def adapter_count(cfg, config):
    """How many numbers train with ``config`` (a LoRAConfig) on a model of ``cfg``, without building them:
    r (n_in + n_out) per chosen site, plus the tables of modules_to_save (V x C each). Errors as choose_sites
    for targets that do not fit, and as saved_params."""
    tables = len(saved_params(cfg, config.modules_to_save)) * cfg.vocab_size * cfg.n_embd
    return tables + sum(config.r * (s.n_in + s.n_out) for s in choose_sites(cfg, config.targets))


def init_adapters(chosen, r, dtype, rng):
    """A ~ U(-1/sqrt(i), 1/sqrt(i)) (Kaiming-uniform, a = sqrt(5), PEFT's init) and B = 0 per site."""
    adapters = {}
    for s in chosen:
        bound = 1.0 / math.sqrt(s.n_in)
        adapters[s.name + ".lora_A"] = rng.uniform(-bound, bound, (s.n_in, r)).astype(dtype)   # (i, r)
        adapters[s.name + ".lora_B"] = np.zeros((r, s.n_out), dtype)                            # (r, o)
    return adapters


class LoRA:
    """The adapters a GPT carries (``model.lora``): config, arrays, and for each base linear what adds to it.

    ``base_vocab``: the vocabulary when the adapters were attached; embedding rows a chat template adds
    after it stay trainable (``GPT.trainable``). ``saved``: the parameters that train whole
    (config.modules_to_save, as saved_params names them); they stay in the model's params."""

    def __init__(self, config, model_cfg, rng):
        self.config = config
        self.saved = saved_params(model_cfg, config.modules_to_save)
        self.sites = choose_sites(model_cfg, config.targets)
        self.adapters = init_adapters(self.sites, config.r, np.dtype(model_cfg.dtype), rng)
        self.base_vocab = model_cfg.vocab_size
        self._saved_size = len(self.saved) * model_cfg.vocab_size * model_cfg.n_embd

    def on(self, linear):
        """The Adapted bundle for base linear "h.0.attn.c_attn" (an empty one: frozen, no adapters)."""
        mine = [s for s in self.sites if s.linear == linear]
        return Adapted(tuple(s.name for s in mine), tuple(s.cols for s in mine),
                       tuple(self.adapters[s.name + ".lora_A"] for s in mine),
                       tuple(self.adapters[s.name + ".lora_B"] for s in mine),
                       self.config.scale, self.config.dropout)

    def num_params(self):
        """The numbers that train: the adapters and the tables of modules_to_save."""
        return self._saved_size + sum(a.size for a in self.adapters.values())

    def check_fold(self, params, where, label=None):
        """ZeroLLMError naming ``where`` when an adapter folded into its weight (W + s A B, what ``merged``
        computes) overflows the weight's dtype: finite adapters of 1e20 give infinity there, and the same
        product on the side path makes every logit NaN, merged or not. ``label(site)`` names the adapter
        in the error (default: zerollm's "h.0.attn.c_attn (lora_A, lora_B)")."""
        for s in self.sites:
            A, B = self.adapters[s.name + ".lora_A"], self.adapters[s.name + ".lora_B"]
            w = _float_weight(params[s.linear + ".weight"])[:, s.cols]    # (i, o) the columns it adds to
            if not _fold_fits(w, A, B, self.config.scale):
                name = label(s) if label else f"{s.name} (lora_A, lora_B)"
                raise ZeroLLMError(f"{where}: the adapter {name} overflows {w.dtype} when folded into its weight "
                                   f"(W + alpha/r A B has numbers beyond {float(np.finfo(w.dtype).max):.3g}); the "
                                   "adapter is damaged or came from a diverged run: use an earlier save of it, or "
                                   "train it again with a lower --lr")

    def merged(self, params):
        """A copy of ``params`` with every adapter folded in: W[:, cols] += s A B. A base weight in quantized blocks
        (QLoRA) that an adapter adds to comes out in float32: its dequantized numbers plus the adapter; other
        entries in blocks stay in them (they are never written to)."""
        out = {name: value.copy() if isinstance(value, np.ndarray) else value for name, value in params.items()}
        for s in self.sites:
            A, B = self.adapters[s.name + ".lora_A"], self.adapters[s.name + ".lora_B"]
            w = out[s.linear + ".weight"] = _float_weight(out[s.linear + ".weight"])
            w[:, s.cols] += (A.astype(np.float64) @ B.astype(np.float64) * self.config.scale).astype(w.dtype)
        return out


def _float_weight(w):
    """A linear weight (i, o) as a float array: itself, or the numbers of a QuantizedMatrix W^T (o, i) of a QLoRA base
    (zerollm.interop.quant), dequantized (a new array: the blocks are not changed)."""
    return w if isinstance(w, np.ndarray) else np.ascontiguousarray(w.dequantize().T)


def _peak(a):
    """max |a| without a temporary of a's size."""
    return max(float(a.max()), -float(a.min())) if a.size else 0.0


def _fold_fits(w, A, B, scale):
    """Is W + s A B finite in W's dtype?  w (i, o), A (i, r), B (r, o), all finite.

    Every entry of A B is a sum of r products, so |s A B| <= |s| r max|A| max|B|. W is finite, and adding
    less than a quarter of the gap below the dtype's largest number (1e31 in float32) rounds to a finite
    number whatever W holds: then neither W nor the (i, o) product is read. Only an adapter past that
    pays for the exact sum."""
    top = w.dtype.type(np.finfo(w.dtype).max)
    gap = float(top - np.nextafter(top, w.dtype.type(0)))                 # 2**104 in float32
    if abs(scale) * A.shape[1] * _peak(A) * _peak(B) < gap / 4:            # Python floats: inf, never an error
        return True
    with np.errstate(over="ignore", invalid="ignore"):
        folded = w.astype(np.float64) + (A.astype(np.float64) @ B.astype(np.float64)) * scale   # (i, o)
    return bool(np.all(np.abs(folded) <= float(top)))
