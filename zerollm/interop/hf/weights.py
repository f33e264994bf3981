"""Weights between our layout and transformers' GPT-2 / Llama / Qwen2 / Qwen3 / Mixtral layouts, and reading
them from disk.

Each of our parameters is one HF tensor, or several laid side by side along our last axis:

    ours                  GPT-2 (Conv1D: (in, out), as ours)   Llama (nn.Linear: (out, in) -> transposed)
    wte.weight            wte.weight                           embed_tokens.weight
    h.{i}.ln_1 / ln_2     h.{i}.ln_1 / ln_2                    input_layernorm / post_attention_layernorm
    h.{i}.attn.c_attn     h.{i}.attn.c_attn                    [q_proj | k_proj | v_proj]
    h.{i}.attn.c_proj     h.{i}.attn.c_proj                    o_proj
    h.{i}.mlp.c_fc        h.{i}.mlp.c_fc                       [gate_proj | up_proj]
    h.{i}.mlp.c_proj      h.{i}.mlp.c_proj                     down_proj
    ln_f, lm_head         ln_f, lm_head                        norm, lm_head

Qwen2 and Qwen3 use Llama's names. Qwen2's c_attn bias is [q_proj.bias | k_proj.bias | v_proj.bias];
Qwen3 adds the QK-norm gains h.{i}.attn.q_norm / k_norm = self_attn.q_norm / k_norm (hs,) each.

Mixtral is Llama's layout with a mixture of experts in place of each MLP. Our experts are stacked on
a leading axis; in the checkpoint each expert j has its own tensors (the hub's layout, which
transformers 5's save_pretrained writes as well):

    ours                              Mixtral (under layers.{i}.block_sparse_moe.)
    h.{i}.mlp.router.weight (C, E)    gate.weight (E, C)
    h.{i}.mlp.experts.c_fc.weight     experts.{j}.w1.weight, experts.{j}.w3.weight (H, C) each:
      (E, C, 2H), [gate | up]           row j of ours = [w1^T | w3^T]  (w1 the SiLU gate, w3 the up)
    h.{i}.mlp.experts.c_proj.weight   experts.{j}.w2.weight (C, H): row j of ours = w2^T
      (E, H, C)

HF names carry a prefix ("transformer." / "model.", never on lm_head) that we strip on reading
("bare" names below) and add on writing. Llama's heads need no reordering: HF's rotate-half RoPE
pairs dims (i, i + hs/2) of each head exactly as zerollm does (tests/test_torch_ref.py proves it).
"""

import os
import re

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import read_json
from zerollm.model.gpt import param_shapes
from zerollm.io.safetensors import load_file
from zerollm.io.validate import require_finite

PREFIX = {"gpt2": "transformer.", "llama": "model.", "mixtral": "model.", "qwen2": "model.", "qwen3": "model."}
_TABLES = ("wte.weight", "wpe.weight", "lm_head.weight")    # (rows, C) in every layout
# buffers, not parameters: GPT-2's causal-mask tables, old Llama checkpoints' RoPE frequency cache
_BUFFER = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)|.*rotary_emb\.inv_freq")
_CONVERT = "AutoModelForCausalLM.from_pretrained(d).save_pretrained(d, safe_serialization=True)"


# ----------------------------------------------------------------------------
# the name map

def pieces(cfg, family):
    """{our name: [(bare HF name, width along our last axis)]} for every parameter of ``cfg``.

    >>> from zerollm.model.config import GPTConfig
    >>> cfg = GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=2, n_kv_head=1, n_embd=4,
    ...                 norm="rmsnorm", pos="rope", mlp="swiglu", n_inner=6, bias=False)
    >>> [width for _, width in pieces(cfg, "llama")["h.0.attn.c_attn.weight"]]   # q_proj, k_proj, v_proj
    [4, 2, 2]
    """
    if family == "gpt2":
        return {name: [(name, shape[-1])] for name, shape in param_shapes(cfg).items()}
    C, H, hs = cfg.n_embd, cfg.n_inner, cfg.head_size
    q, kv = cfg.n_head * hs, cfg.n_kv_head * hs
    table = {"wte.weight": [("embed_tokens.weight", C)], "ln_f.weight": [("norm.weight", C)],
             "lm_head.weight": [("lm_head.weight", C)]}
    layer = {"ln_1": [("input_layernorm", C)], "ln_2": [("post_attention_layernorm", C)],
             "attn.c_attn": [("self_attn.q_proj", q), ("self_attn.k_proj", kv), ("self_attn.v_proj", kv)],
             "attn.c_proj": [("self_attn.o_proj", C)],
             "mlp.c_fc": [("mlp.gate_proj", H), ("mlp.up_proj", H)], "mlp.c_proj": [("mlp.down_proj", C)],
             "attn.q_norm": [("self_attn.q_norm", hs)], "attn.k_norm": [("self_attn.k_norm", hs)]}
    for i in range(cfg.n_layer):
        for ours, theirs in layer.items():
            for kind in ("weight", "bias"):
                table[f"h.{i}.{ours}.{kind}"] = [(f"layers.{i}.{name}.{kind}", w) for name, w in theirs]
        if family == "mixtral":
            table.update(_mixtral_moe(cfg, i))
    return {name: table[name] for name in param_shapes(cfg)}       # only what this config has


def _mixtral_moe(cfg, i):
    """The MoE pieces of block i. Stacked experts map to a list of piece lists, one per expert j."""
    moe, H, C = f"layers.{i}.block_sparse_moe.", cfg.n_inner, cfg.n_embd
    experts = range(cfg.n_expert)
    return {f"h.{i}.mlp.router.weight": [(moe + "gate.weight", cfg.n_expert)],
            f"h.{i}.mlp.experts.c_fc.weight": [[(f"{moe}experts.{j}.w1.weight", H), (f"{moe}experts.{j}.w3.weight", H)]
                                               for j in experts],
            f"h.{i}.mlp.experts.c_proj.weight": [[(f"{moe}experts.{j}.w2.weight", C)] for j in experts]}


def _stacked(parts):
    return isinstance(parts[0], list)


def _names(parts):
    return [n for group in (parts if _stacked(parts) else [parts]) for n, _ in group]


def _flip(name, a, family):
    # nn.Linear (Llama, Mixtral) stores (out, in); our matrices and GPT-2's Conv1D store (in, out)
    return a.T if family != "gpt2" and a.ndim == 2 and name not in _TABLES else a


def from_hf(tensors, cfg, family, where):
    """{bare HF name: array} -> our state dict. Missing and left-over tensors are one error."""
    table = pieces(cfg, family)
    wanted = {n for parts in table.values() for n in _names(parts)}
    missing = sorted(wanted - set(tensors))
    extra = sorted(set(tensors) - wanted - ({"lm_head.weight"} if cfg.tie_embeddings else set()))
    if missing or extra:     # (a tied model may still carry a copy of its head: not needed)
        raise ZeroLLMError(f"{where}: the weights do not fit config.json: missing {missing[:6]}, "
                           f"unexpected {extra[:6]}; are config.json and the weights from one model?")

    def join(ours, parts):
        arrays = [_flip(ours, tensors[n], family) for n, _ in parts]
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=-1)

    return {ours: np.stack([join(ours, p) for p in parts]) if _stacked(parts) else join(ours, parts)
            for ours, parts in table.items()}


def to_hf(state, cfg, family):
    """Our state dict -> {full HF name: array}: split along our last axis, transpose for nn.Linear;
    stacked experts first split along their leading axis, one expert at a time."""
    out = {}
    for ours, parts in pieces(cfg, family).items():
        value = np.asarray(state[ours])
        groups = zip(parts, value) if _stacked(parts) else [(parts, value)]
        for group, array in groups:
            cuts = np.cumsum([w for _, w in group])[:-1]
            for (bare, _), piece in zip(group, np.split(array, cuts, axis=-1)):
                name = bare if bare == "lm_head.weight" else PREFIX[family] + bare
                out[name] = np.ascontiguousarray(_flip(ours, piece, family))
    return out


# ----------------------------------------------------------------------------
# reading a model directory's safetensors files (single or sharded)

def weight_files(path):
    """The safetensors files of a model directory. Directories with only pickles are refused."""
    single, index = os.path.join(path, "model.safetensors"), os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(single):
        return [single]
    if os.path.isfile(index):
        weight_map = read_json(index, what="safetensors index")
        weight_map = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise ZeroLLMError(f"{index} has no 'weight_map'; the download is damaged, fetch it again")
        names = sorted(set(map(str, weight_map.values())))
        outside = [n for n in names if os.path.basename(n) != n or n in ("", ".", "..")]
        if outside:   # a shard named "../x" would make us read outside the model directory
            raise ZeroLLMError(f"{index} names shard files outside its directory: {outside}; refusing")
        missing = [n for n in names if not os.path.isfile(os.path.join(path, n))]
        if missing:
            raise ZeroLLMError(f"{path} lacks the shard files {missing}; download all of them")
        return [os.path.join(path, n) for n in names]
    pickles = sorted(f for f in os.listdir(path) if f.endswith((".bin", ".pt", ".pth", ".ckpt")))
    if pickles:
        raise ZeroLLMError(
            f"{path} has only PyTorch pickle weights ({', '.join(pickles)}); zerollm reads safetensors "
            "only, because loading a pickle can run arbitrary code. If you trust the file, convert it "
            f"once in Python with transformers (d = the directory): {_CONVERT}; or download the "
            "repository's *.safetensors files instead")
    raise ZeroLLMError(f"{path} has no model.safetensors or model.safetensors.index.json; "
                       "download the model's *.json and *.safetensors files into it")


def read_tensors(path, family, dtype):
    """{bare HF name: array of ``dtype``} of every parameter in the directory (buffers dropped).

    The files are memory-mapped: a tensor already in ``dtype`` is not copied here, only when it
    is copied into the model, so a big checkpoint is never held in memory twice.
    """
    out, prefix = {}, PREFIX[family]
    for file in weight_files(path):
        for name, a in load_file(file, mmap=True).items():
            bare = name[len(prefix):] if name.startswith(prefix) else name
            if _BUFFER.fullmatch(bare):
                continue
            if not np.issubdtype(a.dtype, np.floating):
                raise ZeroLLMError(f"{file}: tensor {name} is {a.dtype}; quantized checkpoints are not "
                                   "supported, use an F32, F16 or BF16 one")
            if bare in out:
                raise ZeroLLMError(f"{path}: tensor {bare} is stored twice; the shards are inconsistent")
            require_finite({name: a}, file, dtype)      # before the cast, which would make 1e300 inf
            out[bare] = a.astype(dtype, copy=False)     # F16/F64 -> the model's dtype (BF16 is float32)
    return out
