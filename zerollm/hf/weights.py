"""Weights between our layout and transformers' GPT-2 / Llama layouts, and reading them from disk.

Each of our parameters is one HF tensor, or several laid side by side along our last axis:

    ours                  GPT-2 (Conv1D: (in, out), as ours)   Llama (nn.Linear: (out, in) -> transposed)
    wte.weight            wte.weight                           embed_tokens.weight
    h.{i}.ln_1 / ln_2     h.{i}.ln_1 / ln_2                    input_layernorm / post_attention_layernorm
    h.{i}.attn.c_attn     h.{i}.attn.c_attn                    [q_proj | k_proj | v_proj]
    h.{i}.attn.c_proj     h.{i}.attn.c_proj                    o_proj
    h.{i}.mlp.c_fc        h.{i}.mlp.c_fc                       [gate_proj | up_proj]
    h.{i}.mlp.c_proj      h.{i}.mlp.c_proj                     down_proj
    ln_f, lm_head         ln_f, lm_head                        norm, lm_head

HF names carry a prefix ("transformer." / "model.", never on lm_head) that we strip on reading
("bare" names below) and add on writing. Llama's heads need no reordering: HF's rotate-half RoPE
pairs dims (i, i + hs/2) of each head exactly as zerollm does (tests/test_torch_ref.py proves it).
"""

import os
import re

import numpy as np

from zerollm.errors import ZeroLLMError
from zerollm.fileio import read_json
from zerollm.model import param_shapes
from zerollm.safetensors import load_file

PREFIX = {"gpt2": "transformer.", "llama": "model."}
_TABLES = ("wte.weight", "wpe.weight", "lm_head.weight")    # (rows, C) in every layout
# buffers, not parameters: GPT-2's causal-mask tables, old Llama checkpoints' RoPE frequency cache
_BUFFER = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)|.*rotary_emb\.inv_freq")
_CONVERT = "AutoModelForCausalLM.from_pretrained(d).save_pretrained(d, safe_serialization=True)"


# ----------------------------------------------------------------------------
# the name map

def pieces(cfg, family):
    """{our name: [(bare HF name, width along our last axis)]} for every parameter of ``cfg``.

    >>> from zerollm.config import GPTConfig
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
             "mlp.c_fc": [("mlp.gate_proj", H), ("mlp.up_proj", H)], "mlp.c_proj": [("mlp.down_proj", C)]}
    for i in range(cfg.n_layer):
        for ours, theirs in layer.items():
            for kind in ("weight", "bias"):
                table[f"h.{i}.{ours}.{kind}"] = [(f"layers.{i}.{name}.{kind}", w) for name, w in theirs]
    return {name: table[name] for name in param_shapes(cfg)}       # only what this config has


def _flip(name, a, family):
    # nn.Linear (Llama) stores (out, in); our matrices and GPT-2's Conv1D store (in, out)
    return a.T if family == "llama" and a.ndim == 2 and name not in _TABLES else a


def from_hf(tensors, cfg, family, where):
    """{bare HF name: array} -> our state dict. Missing and left-over tensors are one error."""
    table = pieces(cfg, family)
    wanted = {n for parts in table.values() for n, _ in parts}
    missing = sorted(wanted - set(tensors))
    extra = sorted(set(tensors) - wanted - ({"lm_head.weight"} if cfg.tie_embeddings else set()))
    if missing or extra:     # (a tied model may still carry a copy of its head: not needed)
        raise ZeroLLMError(f"{where}: the weights do not fit config.json: missing {missing[:6]}, "
                           f"unexpected {extra[:6]}; are config.json and the weights from one model?")
    state = {}
    for ours, parts in table.items():
        arrays = [_flip(ours, tensors[n], family) for n, _ in parts]
        state[ours] = arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=-1)
    return state


def to_hf(state, cfg, family):
    """Our state dict -> {full HF name: array}: split along our last axis, transpose for nn.Linear."""
    out = {}
    for ours, parts in pieces(cfg, family).items():
        cuts = np.cumsum([w for _, w in parts])[:-1]
        for (bare, _), piece in zip(parts, np.split(np.asarray(state[ours]), cuts, axis=-1)):
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
            out[bare] = a.astype(dtype, copy=False)     # F16/F64 -> the model's dtype (BF16 is float32)
    return out
