"""Load a GGUF file (ours, or a GPT-2 / Llama one written by others) into a zerollm GPT.

    model, tokenizer, info = load_gguf("model-q8_0.gguf")      # info: what was kept quantized

The metadata is turned into a transformers config and checked like config.json (zerollm.interop.hf.configs);
the tensors go through transformers' layout (zerollm.interop.hf.weights.from_hf), so a missing tensor, a
stray one or a wrong shape is one error naming the file. On the fast engine the Q8_0 / Q4_0 (and k-quant)
matrices of the linear layers and the token table stay as blocks (QuantizedMatrix, KQuantMatrix), read straight
from the file and never dequantized, and run through the quantized matmul kernel; on the NumPy engine everything
is float32, dequantized at load. Each float tensor is made only while it is copied into the model (HFFloats).
"""


import numpy as np

from zerollm.model import budget
from zerollm.io.errors import ZeroLLMError
from zerollm.io.validate import require_finite
from zerollm.interop import quant
from zerollm.interop.gguf import (QWEN_ARCHS, _CONV1D, _EXPERTS, _gguf_name, _hf_name, _permute, _split, as_float,
                                  read_gguf)
from zerollm.interop.gguf_meta import REQUIRED, value
from zerollm.interop.gguf_tokenizer import read_tokenizer

ARCHS = ("gpt2", "llama", "qwen2", "qwen3")
_SIZES = ("block_count", "embedding_length", "feed_forward_length", "attention.head_count",
          "attention.head_count_kv", "expert_count")      # the metadata that sets the tensors' shapes
_QUANTIZABLE = (".c_attn.weight", ".c_proj.weight", ".c_fc.weight")


# ----------------------------------------------------------------------------
# metadata -> a transformers config dict

def hf_config(meta, tensors, where):
    """The transformers config.json dict that this GGUF file's metadata describes. Every key is checked for
    its type and range (gguf_meta.value), and the sizes against each other, each error naming its keys."""
    arch = value(meta, "general.architecture", where, None)
    if arch not in ARCHS:
        raise ZeroLLMError(f"{where}: architecture {arch!r} is not supported; zerollm runs GGUF files of "
                           f"architecture {', '.join(ARCHS)} (GPT-2, Llama, Mixtral-style Llama, Qwen2, Qwen3)")
    if "token_embd.weight" not in tensors:
        raise ZeroLLMError(f"{where} has no token_embd.weight tensor; the file is incomplete")
    V = tensors["token_embd.weight"].shape[0]
    if value(meta, f"{arch}.vocab_size", where, V) != V:
        raise ZeroLLMError(f"{where}: the metadata says {arch}.vocab_size={meta[f'{arch}.vocab_size']} but "
                           f"token_embd.weight has {V} rows; the metadata disagrees with the tensors")
    k = lambda name, default=REQUIRED: value(meta, f"{arch}.{name}", where, default)    # noqa: E731
    C, nh = k("embedding_length"), k("attention.head_count")
    if arch not in QWEN_ARCHS or f"{arch}.attention.key_length" not in meta:
        _multiple(where, f"{arch}.embedding_length", C, f"{arch}.attention.head_count", nh)
    common = dict(vocab_size=V, tie_word_embeddings="output.weight" not in tensors)
    if arch == "gpt2":
        return dict(common, architectures=["GPT2LMHeadModel"], model_type="gpt2", n_positions=k("context_length"),
                    n_embd=C, n_layer=k("block_count"), n_head=nh, n_inner=k("feed_forward_length"),
                    layer_norm_epsilon=k("attention.layer_norm_epsilon"), activation_function="gelu_new")
    hs = k("attention.key_length", C // nh) if arch in QWEN_ARCHS else C // nh
    if arch in QWEN_ARCHS and k("attention.value_length", hs) != hs:
        raise ZeroLLMError(f"{where}: {arch}.attention.value_length differs from {arch}.attention.key_length "
                           f"({meta[f'{arch}.attention.value_length']} vs {hs}); zerollm's heads have one size")
    rope_dims = k("rope.dimension_count", hs)
    if rope_dims != hs:
        raise ZeroLLMError(f"{where}: {arch}.rope.dimension_count={rope_dims} rotates part of each head; "
                           f"zerollm's RoPE rotates the whole head ({hs} dims)")
    n_kv = k("attention.head_count_kv", nh)
    _multiple(where, f"{arch}.attention.head_count", nh, f"{arch}.attention.head_count_kv", n_kv)
    cfg = dict(common, hidden_size=C, intermediate_size=k("feed_forward_length"), num_hidden_layers=k("block_count"),
               num_attention_heads=nh, num_key_value_heads=n_kv, max_position_embeddings=k("context_length"),
               rms_norm_eps=k("attention.layer_norm_rms_epsilon"), rope_theta=float(k("rope.freq_base", 10000.0)),
               hidden_act="silu")
    if arch in QWEN_ARCHS:
        return dict(cfg, architectures=["Qwen2ForCausalLM" if arch == "qwen2" else "Qwen3ForCausalLM"],
                    model_type=arch, head_dim=hs)
    n_expert = k("expert_count", 0)
    if n_expert:
        used = k("expert_used_count")
        if used > n_expert:
            raise ZeroLLMError(f"{where}: metadata key llama.expert_used_count ({used}) is more than "
                               f"llama.expert_count ({n_expert}); the file is damaged")
        return dict(cfg, architectures=["MixtralForCausalLM"], model_type="mixtral", num_local_experts=n_expert,
                    num_experts_per_tok=used, router_aux_loss_coef=0.0)
    return dict(cfg, architectures=["LlamaForCausalLM"], model_type="llama")


def _multiple(where, key, n, of_key, m):
    """Metadata value n (of ``key``) is a multiple of m (of ``of_key``): heads split the width evenly."""
    if n % m:
        raise ZeroLLMError(f"{where}: metadata key {key} ({n}) must be a multiple of {of_key} ({m}); "
                           "the file is damaged")


# ----------------------------------------------------------------------------
# the tensors the metadata asks for, by GGUF name

def expected_shapes(cfg, family, arch):
    """{GGUF name: NumPy shape} of every tensor a file whose metadata gives ``cfg`` must hold.

    Every matrix is stored (out, in) (gguf.py): our (in, out) parameter, or its piece of width w along the
    last axis (q_proj of c_attn, gate_proj of c_fc), is (w, in); the tables (V, C) stay as they are, and
    Mixtral's experts, ours (E, in, out), are one (E, w, in) tensor per kind.
    """
    from zerollm.interop.hf.weights import _TABLES, _stacked, pieces
    from zerollm.model.gpt import param_shapes
    stacked = {w: base for base, w in _EXPERTS.items()}
    shapes, out = param_shapes(cfg), {}
    for ours, parts in pieces(cfg, family).items():
        S = shapes[ours]
        if _stacked(parts):                              # expert j's pieces: parts[j]; the kinds are the same
            block = ours.split(".")[1]
            for bare, w in parts[0]:
                out[f"blk.{block}.{stacked[bare.rsplit('.', 2)[1]]}.weight"] = (S[0], w, S[1])
            continue
        for bare, w in parts:
            out[_gguf_name(bare, arch)] = (w,) if len(S) == 1 else (S[0], w) if ours in _TABLES else (w, S[0])
    return out


def check_tensors(tensors, meta, cfg, family, where):
    """The file's tensors against the metadata, by GGUF name: missing, unexpected or misshapen ones are one
    error naming the file, the tensors and the metadata that sized them."""
    arch = meta["general.architecture"]
    want = expected_shapes(cfg, family, arch)
    sizes = ", ".join(f"{k}={meta[k]}" for k in (f"{arch}.{f}" for f in _SIZES) if k in meta)
    missing, extra = sorted(set(want) - set(tensors)), sorted(set(tensors) - set(want))
    homeless = [n for n in extra if _hf_name(n, arch) is None and _split(n)[1] not in _EXPERTS]
    if homeless:
        raise ZeroLLMError(f"{where}: tensor {homeless[0]} has no place in the {arch} models zerollm runs "
                           "(the file is of another architecture, or uses a feature such as RoPE scaling)")
    if missing or extra:
        raise ZeroLLMError(f"{where}: the tensors do not fit the file's metadata ({sizes}): missing {missing[:6]}, "
                           f"unexpected {extra[:6]}; the file is damaged, or was written for another model")
    wrong = [f"{n} is {tensors[n].shape}, not {want[n]}" for n in sorted(want) if tensors[n].shape != want[n]]
    if wrong:
        raise ZeroLLMError(f"{where}: the tensors do not fit the file's metadata ({sizes}): {'; '.join(wrong[:4])} "
                           "(NumPy order); the file is damaged or inconsistent")


# ----------------------------------------------------------------------------
# tensors -> transformers' bare names and layout, as floats

class HFFloats:
    """{bare transformers name: float32 array} of the GGUF tensors, each dequantized only when it is asked for (a
    mapping that fill_params reads one tensor at a time), so the float model is never made twice over. A tensor
    named in ``kept`` (its matrix stays in the file's blocks) is a zero-stride stand-in of its shape: no float
    copy of it is ever made. ``failed``: a tensor was refused (not finite), an error of its own."""

    def __init__(self, tensors, arch, cfg, where, kept=()):
        self.tensors, self.arch, self.cfg, self.where, self.kept = tensors, arch, cfg, where, set(kept)
        self.names, self.failed, self._experts = {}, False, {}
        for name in tensors:
            block, base, _ = _split(name)
            if base in _EXPERTS and block is not None:     # stacked experts -> one tensor per expert
                for j in range(tensors[name].shape[0]):
                    self.names[f"layers.{block}.block_sparse_moe.experts.{j}.{_EXPERTS[base]}.weight"] = (name, j)
                continue
            hf = _hf_name(name, arch)
            if hf is None:
                raise ZeroLLMError(f"{where}: tensor {name} has no place in the {arch} models zerollm runs "
                                   "(the file is of another architecture, or uses a feature such as RoPE scaling)")
            self.names[hf] = (name, None)

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)

    def __getitem__(self, hf):
        name, j = self.names[hf]
        _, base, kind = _split(name)
        if name in self.kept:
            shape = tuple(self.tensors[name].shape)
            if self.arch == "gpt2" and base in _CONV1D and kind == "weight":
                shape = shape[::-1]
            return np.broadcast_to(np.float32(0), shape)
        if j is not None:        # one dequantization for all the experts of a tensor, kept while its block is read
            block = _split(name)[0]
            if name not in self._experts:
                self._experts = {n: a for n, a in self._experts.items() if _split(n)[0] == block}
                self._experts[name] = self._finite(name)
            return self._experts[name][j]
        return _to_hf_layout(self._finite(name), base, kind, self.arch, self.cfg)

    def _finite(self, name):
        try:
            return _finite_float(self.tensors[name], name, self.where)
        except ZeroLLMError:
            self.failed = True
            raise


def _finite_float(t, name, where):
    """as_float(t), refused by its GGUF name when not finite: a float16 block scale of inf or NaN
    damages all 32 numbers of its block (inf times a zero code is NaN, no warning line wanted first)."""
    with np.errstate(invalid="ignore", over="ignore"):
        a = as_float(t)
    require_finite({name: a}, where)
    return a


def _to_hf_layout(a, base, kind, arch, cfg):
    if arch == "gpt2" and base in _CONV1D and kind == "weight":
        return a.T
    if base in ("attn_q", "attn_k") and kind == "weight" and arch == "llama":
        return _permute(a, cfg.n_head if base == "attn_q" else cfg.n_kv_head, inverse=True)
    return a


# ----------------------------------------------------------------------------
# keeping the quantized matrices as blocks

def _quantized_param(ours, parts, tensors, arch, cfg):
    """The blocks (out, in) for one of our parameters, or None when it stays float: its GGUF pieces stacked row on
    row (q, k, v; gate, up). Pieces of one kind are joined into one QuantizedMatrix / KQuantMatrix; pieces of
    several block kinds (a Llama Q4_K_M file: q and k in Q4_K, v in Q6_K) become a StackedBlocks, each piece in its
    own blocks, so none is turned into float32. A float piece among them keeps the whole parameter float."""
    names = [_gguf_name(bare, arch) for bare, _ in parts]
    kinds = [tensors[n].kind for n in names]
    if any(k not in quant.ALL_KINDS for k in kinds):
        return None
    rows = []
    for n in names:
        data = np.asarray(tensors[n].data).reshape(tensors[n].shape[0], -1)     # (out rows, bytes a row)
        _, base, _ = _split(n)
        if base in ("attn_q", "attn_k") and arch == "llama":
            data = _permute(data, cfg.n_head if base == "attn_q" else cfg.n_kv_head, inverse=True)
        rows.append(data)
    return quant.stacked_blocks(rows, kinds, [tuple(tensors[n].shape) for n in names])


def kept_blocks(cfg, tensors, arch, family, tables=True):
    """{our parameter: its blocks (QuantizedMatrix / KQuantMatrix, StackedBlocks)} for every matrix of the linear
    layers (and, with ``tables``, the token table and head) whose GGUF pieces are all in blocks, read straight from
    the file."""
    from zerollm.interop.hf.weights import pieces
    kept = {}
    for ours, parts in pieces(cfg, family).items():
        table = ours in ("wte.weight", "lm_head.weight")
        wanted = (table and tables) or (ours.endswith(_QUANTIZABLE) and ".experts." not in ours)
        m = _quantized_param(ours, parts, tensors, arch, cfg) if wanted else None
        if m is not None:
            kept[ours] = m
    return kept


# ----------------------------------------------------------------------------
# the whole load

def load_gguf(path, *, quantized=None, force=None, quantize=None):
    """(GPT in eval mode, tokenizer or None, info dict) from a GGUF file.

    ``quantized``: keep Q8_0 / Q4_0 (and k-quant) matrices as blocks (default: when the fast engine is selected,
    whose kernel multiplies by them; the NumPy engine gets float32 copies made at load). A kept matrix is read
    from the file's blocks and never dequantized; every other tensor is dequantized only while it is copied in.
    ``quantize``: QLoRA's base (zerollm.interop.opening's Source.quantize): "stored" keeps the linear layers' blocks
    and leaves the float ones float, "q8_0" / "q4_0" also quantizes the float ones one matrix at a time as they are
    read (zerollm.interop.quant.QuantizeOnRead); the token table and head stay float32 either way.
    info: {"arch", "kinds": {kind: tensors}, "quantized": matrices kept as blocks, "dequantized": bool,
    "reading": the QuantizeOnRead that filled the model}.
    """
    from zerollm.engine import get_engine
    from zerollm.interop.hf.configs import hf_to_config
    from zerollm.interop.hf.weights import fill_params, pieces
    from zerollm.model.gpt import GPT
    where = str(path)
    meta, tensors = read_gguf(path)
    arch = meta["general.architecture"]
    family, cfg = hf_to_config(hf_config(meta, tensors, where), where)
    budget.require(budget.loading(cfg, what=f"loading {where}"), force=force)
    check_tensors(tensors, meta, cfg, family, where)
    kinds = [t.kind for t in tensors.values()]
    has_blocks = any(k in quant.ALL_KINDS for k in kinds)
    keep = quantize is not None or ((get_engine() == "fast") if quantized is None else quantized)
    kept = kept_blocks(cfg, tensors, arch, family, tables=quantize is None) if keep and has_blocks else {}
    table = pieces(cfg, family)
    floats = HFFloats(tensors, arch, cfg, where, kept={_gguf_name(bare, arch) for ours in kept
                                                       for bare, _ in table[ours]})
    model = GPT(cfg, init=False)
    reading = quant.QuantizeOnRead(model.params, None if quantize in (None, "stored") else quantize, kept)
    try:
        fill_params(reading, floats, cfg, family, where)
        reading.finish(floats=True)      # a GGUF file is for running: its matrices onto 2 MiB pages
    except (ValueError, ZeroLLMError) as err:
        if floats.failed:                    # a tensor not finite: its own error, naming it
            raise
        raise ZeroLLMError(f"{where}: the tensors do not fit the metadata "
                           f"({' '.join(str(err).split())[:300]}); the file is damaged or inconsistent") from None
    info = {"arch": arch, "kinds": {k: kinds.count(k) for k in sorted(set(kinds))},
            "quantized": len(kept), "dequantized": has_blocks and not kept, "reading": reading}
    return model.eval(), read_tokenizer(meta, where, cfg.vocab_size), info


def load_note(info, prog):
    """The line a command prints about how a quantized file runs, or None for a float file."""
    blocks = [k for k in info["kinds"] if k in quant.ALL_KINDS]
    if not blocks:
        return None
    if info["dequantized"]:
        return (f"{prog}: note: the numpy engine runs on float32 copies of the {'/'.join(blocks)} weights, "
                "dequantized at load; --engine fast multiplies by the quantized blocks themselves")
    return f"{prog}: note: {info['quantized']} {'/'.join(blocks)} matrices run through the quantized matmul kernel"


def load_gguf_for(path, prog, force=None):
    """(model, tokenizer) for a command: says on stderr how the weights run; no tokenizer is an error."""
    import sys
    model, tokenizer, info = load_gguf(path, force=force)
    note = load_note(info, prog)
    if note:
        print(note, file=sys.stderr)
    if tokenizer is None:
        raise ZeroLLMError(f"{path} has no tokenizer (it was written with --no-tokenizer), so text cannot be "
                           "encoded; convert the model again with its tokenizer")
    return model, tokenizer
