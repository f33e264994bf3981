"""The pre-norm Transformer block (GPT-2 order, Radford et al. 2019):

    x = x + attn(norm_1(x))
    x = x + mlp(norm_2(x))

The residual stream x passes through untouched; each sub-layer only adds to it. In the backward
pass the gradient therefore flows along the stream unchanged and each branch adds its own part.
Parameters are read from the model's flat dict by their Hugging Face GPT-2 names ("h.0.ln_1.weight").
In the blocks ``cfg.is_moe(layer)`` picks, the MLP is a mixture of experts (zerollm.nn.moe).
"""

from typing import NamedTuple

from zerollm.engine import accelerated
from zerollm.nn.attention import AttentionConfig, AttentionWeights, ForwardPass, mha_backward, mha_forward
from zerollm.nn.dropout import dropout_backward, dropout_forward
from zerollm.nn.mlp import MLPWeights, gelu_mlp_backward, gelu_mlp_forward, swiglu_backward, swiglu_forward
from zerollm.nn.moe import MoEConfig, moe_backward, moe_forward
from zerollm.nn.norm import layernorm_backward, layernorm_forward, rmsnorm_backward, rmsnorm_forward


# ----------------------------------------------------------------------------
# norm and MLP chosen by the config

def norm_forward(x, params, name, cfg):
    """LayerNorm or RMSNorm with weights ``name.weight`` (and ``name.bias`` when present)."""
    w = params[name + ".weight"]
    if cfg.norm == "rmsnorm":
        return rmsnorm_forward(x, w, cfg.norm_eps)
    return layernorm_forward(x, w, params.get(name + ".bias"), cfg.norm_eps)


def norm_backward(dy, cache, name, cfg, grads):
    """Backward of ``norm_forward``; writes name.weight (and name.bias) into grads, returns dx."""
    if cfg.norm == "rmsnorm":
        dx, grads[name + ".weight"] = rmsnorm_backward(dy, cache)
        return dx
    dx, grads[name + ".weight"], db = layernorm_backward(dy, cache)
    if db is not None:
        grads[name + ".bias"] = db
    return dx


def _mlp_weights(params, name):
    return MLPWeights(params[name + ".c_fc.weight"], params.get(name + ".c_fc.bias"),
                      params[name + ".c_proj.weight"], params.get(name + ".c_proj.bias"))


def mlp_forward(x, params, name, cfg, lora=None, rng=None, training=False):
    """lora: the model's LoRA (zerollm.nn.lora) or None; its adapters on c_fc / c_proj join in."""
    weights = _mlp_weights(params, name)
    kw = {} if lora is None else dict(lora=(lora.on(name + ".c_fc"), lora.on(name + ".c_proj")), rng=rng,
                                      training=training)
    if cfg.mlp == "swiglu":
        return swiglu_forward(x, weights, **kw)
    return gelu_mlp_forward(x, weights, gelu=cfg.gelu, **kw)


def experts_forward(x, params, name, cfg, training):
    """The mixture of experts at ``name`` ("h.3.mlp"): router, stacked experts, shared expert(s)."""
    shared = _mlp_weights(params, name + ".shared") if cfg.n_shared_expert else None
    config = MoEConfig(cfg.n_expert_active, cfg.moe_norm_topk, cfg.capacity_factor, cfg.mlp, cfg.gelu)
    return moe_forward(x, params[name + ".router.weight"], _mlp_weights(params, name + ".experts"), config,
                       shared=shared, training=training)


def experts_backward(dy, cache, name, cfg, grads, loss_scale=1.0):
    """Backward of ``experts_forward``. The aux and z losses are means over the MoE blocks, scaled by
    their coefficients, so each block's share of their gradient is coef / (number of MoE blocks), times
    the loss scale of fp16 training (zerollm.engine.amp), which multiplies the whole loss."""
    n = len(cfg.moe_layers)
    daux, dz = loss_scale * cfg.aux_loss_coef / n, loss_scale * cfg.z_loss_coef / n
    dx, dw_router, dexperts, dshared = moe_backward(dy, cache, daux, dz)
    grads[name + ".router.weight"] = dw_router
    _put(grads, name + ".experts.c_fc", *dexperts[:2])
    _put(grads, name + ".experts.c_proj", *dexperts[2:])
    if dshared is not None:
        _put(grads, name + ".shared.c_fc", *dshared[:2])
        _put(grads, name + ".shared.c_proj", *dshared[2:])
    return dx


def _put(grads, name, dw, db):
    if dw is None:                   # a frozen linear (LoRA): its adapters wrote their own gradients
        return
    grads[name + ".weight"] = dw
    if db is not None:
        grads[name + ".bias"] = db


def mlp_backward(dy, cache, name, cfg, grads):
    backward = swiglu_backward if cfg.mlp == "swiglu" else gelu_mlp_backward
    dx, dw_fc, db_fc, dw_proj, db_proj = backward(dy, cache, grads)
    _put(grads, name + ".c_fc", dw_fc, db_fc)
    _put(grads, name + ".c_proj", dw_proj, db_proj)
    return dx


# ----------------------------------------------------------------------------
# the block

class BlockCache(NamedTuple):
    ln_1: tuple
    attn: tuple
    ln_2: tuple
    mlp: tuple       # an MLP's cache, or a MoECache (then moe is True)
    drop: tuple      # residual dropout after the MLP (the attention's is inside mha)
    moe: bool = False


@accelerated
def block_forward(x, params, prefix, cfg, run=ForwardPass(), *, layer=0, lora=None):
    """One block: (B, T, C) -> (B, T, C). ``prefix`` is e.g. "h.3."; run (a ForwardPass) and layer: see
    mha_forward. lora: the model's LoRA (zerollm.nn.lora): the linears are frozen and their adapters join in.
    The fast engine runs a decode step's rows (one token each through a KV cache) in a few compiled calls
    instead (zerollm.engine.fast.decode); everything else comes here."""
    attn_lora = None if lora is None else (lora.on(prefix + "attn.c_attn"), lora.on(prefix + "attn.c_proj"))
    weights = AttentionWeights(params[prefix + "attn.c_attn.weight"], params.get(prefix + "attn.c_attn.bias"),
                               params[prefix + "attn.c_proj.weight"], params.get(prefix + "attn.c_proj.bias"),
                               params.get(prefix + "attn.q_norm.weight"), params.get(prefix + "attn.k_norm.weight"))
    config = AttentionConfig(cfg.n_head, cfg.n_kv_head, cfg.causal, cfg.dropout, cfg.attn_impl, cfg.norm_eps)
    h, ln_1 = norm_forward(x, params, prefix + "ln_1", cfg)
    a, attn = mha_forward(h, weights, config, run, layer=layer, lora=attn_lora)
    x = x + a                                   # residual 1 (a new array: the caller's x is kept)
    h, ln_2 = norm_forward(x, params, prefix + "ln_2", cfg)
    moe = cfg.is_moe(layer)
    if moe:
        m, mlp = experts_forward(h, params, prefix + "mlp", cfg, run.training)
    else:
        m, mlp = mlp_forward(h, params, prefix + "mlp", cfg, lora, run.rng, run.training)
    m, drop = dropout_forward(m, cfg.dropout, run.rng, run.training)
    x += m                                      # residual 2
    return x, BlockCache(ln_1, attn, ln_2, mlp, drop, moe)


def block_backward(dx, cache, prefix, cfg, grads, loss_scale=1.0):
    """forward was x1 = x + attn(ln_1(x)); x2 = x1 + mlp(ln_2(x1)), so the gradient of the stream
    goes straight through each "+" and each branch adds its contribution. Returns dx.
    ``loss_scale``: the factor dx already carries (fp16 loss scaling), for the MoE losses added here."""
    dm = dropout_backward(dx, cache.drop)
    if cache.moe:
        dh = experts_backward(dm, cache.mlp, prefix + "mlp", cfg, grads, loss_scale)
    else:
        dh = mlp_backward(dm, cache.mlp, prefix + "mlp", cfg, grads)
    dx = dx + norm_backward(dh, cache.ln_2, prefix + "ln_2", cfg, grads)
    dh, dw_attn, db_attn, dw_proj, db_proj, dq_norm, dk_norm = mha_backward(dx, cache.attn, grads)
    _put(grads, prefix + "attn.c_attn", dw_attn, db_attn)
    _put(grads, prefix + "attn.c_proj", dw_proj, db_proj)
    if dq_norm is not None:                     # QK-norm's gains (Qwen3)
        grads[prefix + "attn.q_norm.weight"], grads[prefix + "attn.k_norm.weight"] = dq_norm, dk_norm
    dx += norm_backward(dh, cache.ln_1, prefix + "ln_1", cfg, grads)
    return dx
