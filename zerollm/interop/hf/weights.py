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
from zerollm.io.safetensors import StoredTensor, tensor_index
from zerollm.io.validate import require_finite

PREFIX = {"gpt2": "transformer.", "llama": "model.", "mixtral": "model.", "qwen2": "model.", "qwen3": "model."}
_TABLES = ("wte.weight", "wpe.weight", "lm_head.weight")    # (rows, C) in every layout
# buffers, not parameters: GPT-2's causal-mask tables, old Llama checkpoints' RoPE frequency cache
_BUFFER = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)|.*rotary_emb\.inv_freq")
_CONVERT = "AutoModelForCausalLM.from_pretrained(d).save_pretrained(d, safe_serialization=True)"
_FLOATS = ("F16", "BF16", "F32", "F64")
# rows of a stored tensor converted and copied at a time: a few MiB, however big the tensor
ROWS = 2048


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
    """{bare HF name: array or StoredTensor} -> our state dict (new arrays of cfg.dtype); see fill_params."""
    state = {name: np.empty(shape, np.dtype(cfg.dtype)) for name, shape in param_shapes(cfg).items()}
    fill_params(state, tensors, cfg, family, where)
    return state


def fill_params(params, tensors, cfg, family, where):
    """Copy {bare HF name: array or StoredTensor} into our parameter arrays ``params`` (of cfg's shapes), each
    HF tensor into its columns of ours, ROWS rows at a time, every block checked finite first. Read from a
    file (StoredTensor), a checkpoint is never held in memory beside the model, nor converted whole (BF16 ->
    float32): loading needs the model's own memory and a few MiB. Missing and left-over tensors are one
    error; so is a tensor of the wrong shape."""
    table = pieces(cfg, family)
    wanted = {n for parts in table.values() for n in _names(parts)}
    missing = sorted(wanted - set(tensors))
    extra = sorted(set(tensors) - wanted - ({"lm_head.weight"} if cfg.tie_embeddings else set()))
    if missing or extra:     # (a tied model may still carry a copy of its head: not needed)
        raise ZeroLLMError(f"{where}: the weights do not fit config.json: missing {missing[:6]}, "
                           f"unexpected {extra[:6]}; are config.json and the weights from one model?")
    for ours, parts in table.items():
        groups = zip(parts, params[ours]) if _stacked(parts) else [(parts, params[ours])]
        for group, target in groups:
            flipped = family != "gpt2" and target.ndim == 2 and ours not in _TABLES
            col = 0
            for bare, width in group:
                _fill(target[..., col:col + width], tensors[bare], flipped, bare, where)
                col += width


def _fill(dest, src, flipped, name, where):
    """dest <- src (src^T for nn.Linear's (out, in)), a block of src's rows at a time."""
    want = dest.T.shape if flipped else dest.shape
    if tuple(src.shape) != want:
        raise ZeroLLMError(f"{where}: tensor {name} has shape {tuple(src.shape)} but config.json makes it "
                           f"{want}; are config.json and the weights from one model?")
    for r0 in range(0, src.shape[0], ROWS):
        r1 = min(r0 + ROWS, src.shape[0])
        stored = isinstance(src, StoredTensor)
        block = src.rows(r0, r1) if stored else np.asarray(src)[r0:r1]
        require_finite({src.name if stored else name: block}, src.path if stored else where,
                       dest.dtype)                            # before the cast, which would make 1e300 inf
        if flipped:
            dest[:, r0:r1] = block.T
        else:
            dest[r0:r1] = block


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


def read_tensors(path, family):
    """{bare HF name: StoredTensor} of every parameter in the directory (buffers dropped): the headers only,
    checked; fill_params reads the numbers, block by block, straight into the model."""
    out, prefix = {}, PREFIX[family]
    for file in weight_files(path):
        for name, t in tensor_index(file).items():
            bare = name[len(prefix):] if name.startswith(prefix) else name
            if _BUFFER.fullmatch(bare):
                continue
            if t.dtype not in _FLOATS:
                raise ZeroLLMError(f"{file}: tensor {name} is {t.dtype}; quantized checkpoints are not "
                                   "supported, use an F32, F16 or BF16 one")
            if bare in out:
                raise ZeroLLMError(f"{path}: tensor {bare} is stored twice; the shards are inconsistent")
            out[bare] = t
    return out
