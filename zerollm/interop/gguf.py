"""GGUF files (the format llama.cpp, ollama and LM Studio read): export a zerollm GPT, load one back.

Written and read with the `gguf` package (llama.cpp's own Python writer and reader). The layouts:

    ours (zerollm.model.gpt)          GGUF, arch "gpt2"                 GGUF, arch "llama" (Llama, Mixtral),
                                                                        "qwen2" or "qwen3"
    wte.weight (V, C)             token_embd.weight (V, C)          token_embd.weight
    wpe.weight                    position_embd.weight              -
    h.{i}.ln_1                    blk.{i}.attn_norm                 blk.{i}.attn_norm
    h.{i}.attn.c_attn (C, qkv)    blk.{i}.attn_qkv (qkv, C)         blk.{i}.attn_q / attn_k / attn_v (rows permuted)
    h.{i}.attn.c_proj             blk.{i}.attn_output               blk.{i}.attn_output
    h.{i}.ln_2                    blk.{i}.ffn_norm                  blk.{i}.ffn_norm
    h.{i}.mlp.c_fc                blk.{i}.ffn_up                    blk.{i}.ffn_gate / ffn_up
    h.{i}.mlp.c_proj              blk.{i}.ffn_down                  blk.{i}.ffn_down
    h.{i}.mlp.router / experts    -                                 blk.{i}.ffn_gate_inp, ffn_{gate,up,down}_exps
    ln_f, lm_head                 output_norm, output               output_norm, output (absent when tied)
    h.{i}.attn.q_norm / k_norm    -                                 blk.{i}.attn_q_norm / attn_k_norm (qwen3)

(NumPy shapes; GGUF lists them reversed.) Every matrix is stored (out, in), one row per output, and a
row is what Q8_0 / Q4_0 cut into blocks of 32 (zerollm.interop.quant). We go through transformers'
names and layout (zerollm.interop.hf.weights) both ways, so the GPT-2 conventions (biases everywhere, no
grouped-query attention) and the Mixtral expert split are the HF exporter's. llama.cpp rotates
pairs (2i, 2i+1) in its "llama" graph where we and transformers rotate (i, i + hs/2), so attn_q / attn_k
rows are permuted on writing and put back on reading, as llama.cpp's converter and transformers do. Its
"qwen2" and "qwen3" graphs rotate (i, i + hs/2) (NeoX style): their rows are stored as they are.

Reading, the metadata becomes a transformers config and goes through the same checks as config.json
(zerollm.interop.hf.configs). Nothing in a file is executed: the chat template is stored as text only.
"""

import errno
import mmap
import os
import re
import struct
from dataclasses import dataclass

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import non_file_kind, open_regular, refuse_non_regular
from zerollm.interop import kquant, quant
from zerollm.interop.gguf_meta import value as meta_value
from zerollm.interop.gguf_tokenizer import SPLIT_KEY, tokenizer_fields, tokenizer_problems

QUANTS = ("f32", "f16", "q8_0", "q4_0", "q4_K", "q5_K", "q6_K", "q4_K_M", "q5_K_M")
MAGIC = b"GGUF"
_GPT2 = {"token_embd": "wte", "position_embd": "wpe", "output_norm": "ln_f", "output": "lm_head",
         "attn_norm": "ln_1", "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj", "ffn_norm": "ln_2",
         "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
_LLAMA = {"token_embd": "embed_tokens", "output_norm": "norm", "output": "lm_head",
          "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
          "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
          "ffn_gate_inp": "block_sparse_moe.gate", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}
QWEN_ARCHS = ("qwen2", "qwen3")
_EXPERTS = {"ffn_gate_exps": "w1", "ffn_up_exps": "w3", "ffn_down_exps": "w2"}    # Mixtral's names
_CONV1D = ("attn_qkv", "attn_output", "ffn_up", "ffn_down")     # GPT-2 stores these (in, out): transposed


def _gguf():
    """The ``gguf`` package (llama.cpp's reader and writer), or a ZeroLLMError saying how to install it:
    it is an optional dependency, and a newcomer who writes ``--to model.gguf`` should learn that in one
    line, not from a ModuleNotFoundError."""
    try:
        import gguf
    except ImportError:
        raise ZeroLLMError('GGUF files need the gguf package: pip install "zerollm[gguf]"') from None
    return gguf


def _types():
    gguf = _gguf()
    T = gguf.GGMLQuantizationType
    return {"f32": T.F32, "f16": T.F16, "q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_K": T.Q4_K, "q5_K": T.Q5_K, "q6_K": T.Q6_K,
            "q5_0": T.Q5_0, "q5_1": T.Q5_1}


# ----------------------------------------------------------------------------
# names: GGUF <-> transformers' bare names (zerollm.interop.hf.weights)

def _split(name):
    """'blk.3.attn_q.weight' -> (3, 'attn_q', 'weight'); 'output_norm.weight' -> (None, 'output_norm', 'weight')."""
    m = re.fullmatch(r"(?:blk\.(\d+)\.)?(\w+)\.(weight|bias)", name)
    return (None if m.group(1) is None else int(m.group(1)), m.group(2), m.group(3)) if m else (None, None, None)


def _hf_name(name, arch):
    """The bare transformers name of a GGUF tensor, or None if we have no place for it."""
    block, base, kind = _split(name)
    table = _GPT2 if arch == "gpt2" else _LLAMA
    if base not in table:
        return None
    if block is None:
        return f"{table[base]}.{kind}" if base in ("token_embd", "position_embd", "output_norm", "output") else None
    return f"{'h' if arch == 'gpt2' else 'layers'}.{block}.{table[base]}.{kind}"


def _gguf_name(hf, arch):
    table = {v: k for k, v in (_GPT2 if arch == "gpt2" else _LLAMA).items()}
    m = re.fullmatch(r"(?:(?:h|layers)\.(\d+)\.)?(.+)\.(weight|bias)", hf)
    block, base, kind = m.groups()
    return f"{table[base]}.{kind}" if block is None else f"blk.{block}.{table[base]}.{kind}"


def _permute(rows, n_head, inverse=False):
    """llama.cpp's row order for attn_q / attn_k: head h's rows (i, i + hs/2) become neighbours (2i, 2i+1).
    Works on float rows and on quantized rows alike (a row is moved whole)."""
    R = rows.shape[0]
    if inverse:
        return rows.reshape(n_head, R // n_head // 2, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)
    return rows.reshape(n_head, 2, R // n_head // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


# ----------------------------------------------------------------------------
# export

def gguf_problems(cfg, tokenizer=None):
    """Every reason GGUF cannot carry a model of config ``cfg`` with ``tokenizer``, each with its fix
    ([] when it can): named all at once, so that one retraining fixes them all."""
    from zerollm.interop.hf.configs import export_family
    try:
        family, problems = export_family(cfg), []
    except ZeroLLMError as err:
        family, problems = None, [str(err)]
    # no llama.cpp graph calls ggml_gelu_erf (llama-cpp-python 0.3.36's): gpt2's calls ggml_gelu, the tanh form.
    # A MoE model goes to Mixtral's SwiGLU layout instead, where the GELU plays no part.
    if cfg.mlp == "gelu" and cfg.n_expert == 0 and cfg.gelu != "tanh":
        problems.append("GGUF's gpt2 architecture computes the tanh GELU, but this model uses gelu='erf'; "
                        "train with --gelu tanh to export it as GGUF")
    if family == "llama" and cfg.bias:
        problems.append("GGUF's llama architecture has no biases, but this model has bias=True; "
                        "train the Llama layout with bias off (--no-bias) to export it as GGUF")
    return problems + (tokenizer_problems(tokenizer) if tokenizer is not None else [])


def check_gguf(cfg, tokenizer=None):
    """A ZeroLLMError naming every one of gguf_problems, in one line, when there are any."""
    problems = gguf_problems(cfg, tokenizer)
    if len(problems) == 1:
        raise ZeroLLMError(problems[0])
    if problems:
        listed = "; ".join(f"({n}) {p.rstrip('.')}" for n, p in enumerate(problems, 1))
        raise ZeroLLMError(f"this model cannot be written as GGUF, for {len(problems)} reasons: {listed}")


def gguf_arch(cfg):
    """('gpt2' | 'llama' | 'qwen2' | 'qwen3', family) for a config, or a ZeroLLMError naming everything GGUF
    cannot express."""
    from zerollm.interop.hf.configs import export_family
    check_gguf(cfg)
    family = export_family(cfg)
    return (family if family in ("gpt2", *QWEN_ARCHS) else "llama"), family


def gguf_tensors(model):
    """(arch, {GGUF name: float32 array, GGUF's (out, in) layout}) for a zerollm GPT."""
    from zerollm.interop.hf.exporting import hf_arrays
    from zerollm.interop.hf.weights import PREFIX
    arch, family = gguf_arch(model.config)
    _, arrays = hf_arrays(model)
    cfg, out, experts = model.config, {}, {}
    for full, a in arrays.items():
        hf = full[len(PREFIX[family]):] if full.startswith(PREFIX[family]) else full
        m = re.fullmatch(r"layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.(w\d)\.weight", hf)
        if m:                                        # Mixtral: one tensor per expert -> one stacked tensor
            experts.setdefault((int(m.group(1)), m.group(3)), {})[int(m.group(2))] = a
            continue
        name = _gguf_name(hf, arch)
        _, base, kind = _split(name)
        if arch == "gpt2" and base in _CONV1D and kind == "weight":
            a = a.T
        elif base == "attn_q" and arch == "llama" and kind == "weight":
            a = _permute(a, cfg.n_head)
        elif base == "attn_k" and arch == "llama" and kind == "weight":
            a = _permute(a, cfg.n_kv_head)
        out[name] = np.ascontiguousarray(a, dtype=np.float32)
    stacked = {w: base for base, w in _EXPERTS.items()}
    for (block, w), by_expert in sorted(experts.items()):
        out[f"blk.{block}.{stacked[w]}.weight"] = np.stack([by_expert[j] for j in range(cfg.n_expert)])
    return arch, out


def storage_kind(name, a, quant_kind, n_layer=1, tied=False):
    """What a tensor is stored as: 1-D tensors (norms, biases) and the router stay f32, as llama.cpp
    keeps them; a matrix whose rows are not whole blocks of 32 cannot be Q8_0/Q4_0 and stays f32.
    q4_K_M / q5_K_M are llama.cpp's mixes (_mixed_kind); a row that is not whole super-blocks of 256
    falls back as llama.cpp's does (kquant.FALLBACK: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; F16 for a
    row that is not whole blocks of 32 either)."""
    if a.ndim == 1 or quant_kind == "f32" or ".ffn_gate_inp." in name:
        return "f32"
    kind = _mixed_kind(name, quant_kind, n_layer, tied) if quant_kind.endswith("_M") else quant_kind
    if kind in kquant.KINDS and name == "position_embd.weight":     # llama-quantize leaves it float
        return "f32"
    if kind in kquant.K_KINDS and a.shape[-1] % kquant.QK:
        kind = kquant.FALLBACK[kind]
        if a.shape[-1] % quant.BLOCK:              # not even blocks of 32: llama.cpp's last fallback
            return "f16"
    if kind in quant.ALL_KINDS and a.shape[-1] % quant.BLOCK:
        return "f32"
    return kind


def _mixed_kind(name, mix, n_layer, tied):
    """llama.cpp's Q4_K_M / Q5_K_M (llama-quant.cpp, without an importance matrix) for the tensors zerollm
    writes: Q6_K for the output matrix (the token table when it is tied) and, in the layers that
    use_more_bits picks (the first and last eighth, and every third between), for attn_v (GPT-2's attn_qkv)
    and ffn_down; Q4_K / Q5_K for every other matrix."""
    base = mix[:-2]                                               # 'q4_K_M' -> 'q4_K'
    block, part, _ = _split(name)
    if part == "output" or (part == "token_embd" and tied):
        return "q6_K"
    if block is not None and part in ("attn_v", "attn_qkv", "ffn_down", "ffn_down_exps"):
        i, n = block, n_layer
        if i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2:
            return "q6_K"
    return base


def _encoded(a, kind):
    """(array to write, raw GGML type or None) for one tensor."""
    if kind == "f32":
        return a, None
    if kind == "f16":
        return a.astype(np.float16), None
    return quant.quantize(a, kind), _types()[kind]


def check_gguf_target(path, overwrite=False):
    """The absolute path if a GGUF file may be written there. An existing file is replaced only with
    ``overwrite``, and only when it is a GGUF file itself (never a file of any other kind)."""
    path = os.path.abspath(os.fspath(path))
    if not path.lower().endswith(".gguf"):
        raise ZeroLLMError(f"{path}: a GGUF file's name ends in .gguf; give --to FILE.gguf")
    if os.path.isdir(path):
        raise ZeroLLMError(f"{path} is a directory; give a file path ending in .gguf")
    refuse_non_regular(path, "--to")           # a pipe or device would block or be written into
    if os.path.exists(path):
        if not overwrite:
            raise ZeroLLMError(f"{path} exists; choose a new file name, or replace it with --overwrite")
        with open_regular(path, "rb", what="GGUF file") as f:
            if f.read(4) != MAGIC:
                raise ZeroLLMError(f"{path} exists and is not a GGUF file, so it is never overwritten; "
                                   "choose a new file name")
    return path


def export_gguf(model, path, *, tokenizer=None, quant_kind="f32", overwrite=False, name="zerollm"):
    """Write ``model`` (and its byte, char or BPE ``tokenizer``) as one GGUF file, atomically. Returns a dict
    with the path, the architecture and {storage kind: tensor count}.

    >>> export_gguf(model, "tiny-q8.gguf", tokenizer=tok, quant_kind="q8_0")   # doctest: +SKIP
    """
    from zerollm.io.fileio import atomic_write
    if quant_kind not in QUANTS:
        raise ZeroLLMError(f"--quant must be one of {', '.join(QUANTS)}, got {quant_kind!r}")
    path = check_gguf_target(path, overwrite)
    check_gguf(model.config, tokenizer)
    arch, tensors = gguf_tensors(model)
    fields = tokenizer_fields(tokenizer, model.config.vocab_size) if tokenizer is not None else None
    tied = "output.weight" not in tensors                          # a tied token table is also the output
    kinds = {n: storage_kind(n, a, quant_kind, model.config.n_layer, tied) for n, a in tensors.items()}
    with atomic_write(path) as f:                    # the writer fills the temporary file; then it is swapped in
        writer = _writer(f.name, arch, model, tokenizer, fields, quant_kind)
        for n, a in tensors.items():
            data, raw = _encoded(a, kinds[n])
            writer.add_tensor(n, data, raw_dtype=raw)
        _write_all(writer, path)
    counts = {k: list(kinds.values()).count(k) for k in sorted(set(kinds.values()))}
    return {"path": path, "arch": arch, "kinds": counts}


def _write_all(writer, path):
    """Header, metadata and tensors to the writer's (temporary) file, flushed and synced; closed in any case.

    A full disk (or quota, or ulimit -f) is an OSError with its errno (ENOSPC, EDQUOT, EFBIG), which the CLI
    words as a full disk: the gguf package writes tensors with ndarray.tofile, whose short write is an
    OSError without one ("12288 requested and 3120 written"), so the cause is asked of the file itself."""
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        for out in writer.fout:
            out.flush()
            os.fsync(out.fileno())
    except OSError as err:
        if err.errno is None:
            raise _short_write_cause(writer.fout, path) from None
        raise
    finally:
        for out in writer.fout or ():
            try:
                out.close()
            except OSError:                          # its buffer could not be written either: it is deleted anyway
                pass


def _short_write_cause(files, path):
    """The OSError behind a short write: one more byte is written, and the system says why it cannot be
    (the file is a temporary one, deleted after). ENOSPC when the byte goes through after all."""
    for out in files:
        try:
            out.write(b"\0")
            out.flush()
        except OSError as err:
            if err.errno is not None:
                return OSError(err.errno, err.strerror, path)
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


def _writer(file, arch, model, tokenizer, fields, quant_kind):
    gguf = _gguf()
    from zerollm.data import chat, chatml
    cfg = model.config
    w = gguf.GGUFWriter(file, arch)
    w.add_name(name_of(model))
    w.add_file_type({"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                     "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
                     "q4_K": gguf.LlamaFileType.MOSTLY_Q4_K_S, "q5_K": gguf.LlamaFileType.MOSTLY_Q5_K_S,
                     "q6_K": gguf.LlamaFileType.MOSTLY_Q6_K, "q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M,
                     "q5_K_M": gguf.LlamaFileType.MOSTLY_Q5_K_M}[quant_kind])
    if quant_kind != "f32" and quant_kind != "f16":
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(cfg.block_size)
    w.add_embedding_length(cfg.n_embd)
    w.add_block_count(cfg.n_layer)
    w.add_feed_forward_length(cfg.n_inner)
    w.add_head_count(cfg.n_head)
    w.add_vocab_size(cfg.vocab_size)
    if arch == "gpt2":
        w.add_layer_norm_eps(cfg.norm_eps)
    else:
        w.add_head_count_kv(cfg.n_kv_head)
        w.add_layer_norm_rms_eps(cfg.norm_eps)
        w.add_rope_freq_base(cfg.rope_theta)
        w.add_rope_dimension_count(cfg.head_size)
        if arch in QWEN_ARCHS:                       # Qwen3's head size is not C / nh: say it
            w.add_key_length(cfg.head_size)
            w.add_value_length(cfg.head_size)
        if cfg.n_expert:
            w.add_expert_count(cfg.n_expert)
            w.add_expert_used_count(cfg.n_expert_active)
    if fields is not None:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(fields["pre"])
        w.add_token_list(fields["tokens"])
        w.add_token_types(fields["types"])
        w.add_token_merges(fields["merges"])
        if fields["regex"] is not None:
            w.add_string(SPLIT_KEY, fields["regex"])
        w.add_add_bos_token(False)
        ids = fields["special"]
        if "bos" in ids:
            w.add_bos_token_id(ids["bos"])
        if "eos" in ids:
            w.add_eos_token_id(ids["eos"])
        if chat.has_template(tokenizer):
            w.add_chat_template(chatml.CHATML_JINJA if chatml.is_chatml(tokenizer) else chat.chat_template_jinja())
    return w


def name_of(model):
    cfg = model.config
    return f"zerollm {cfg.n_layer}x{cfg.n_embd}"


# ----------------------------------------------------------------------------
# reading a file

@dataclass
class GGUFTensor:
    kind: str             # 'f32' | 'f16' | 'q8_0' | 'q4_0' | 'q4_K' | 'q5_K' | 'q6_K' | 'q5_0' | 'q5_1'
    data: np.ndarray      # floats (GGUF's NumPy shape), or the uint8 block rows
    shape: tuple          # the float shape, NumPy order


def read_gguf(path):
    """(metadata {key: value}, {name: GGUFTensor}) of a GGUF file. A damaged file, or a tensor type
    other than F32/F16/Q8_0/Q4_0/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K, is a ZeroLLMError naming what is wrong."""
    gguf = _gguf()
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ZeroLLMError(f"GGUF file not found: {path}")
    kind = non_file_kind(path)
    if kind:
        raise ZeroLLMError(f"{path} is not a GGUF file but a {kind}; give the path of a .gguf file")
    check_layout(path)
    try:
        reader = gguf.GGUFReader(path)
        meta = {name: _field_value(field) for name, field in reader.fields.items()}
        raw = [(t.name, t.tensor_type, tuple(int(n) for n in reversed(t.shape)), t.data) for t in reader.tensors]
    except Exception as err:   # noqa: BLE001 - the reader raises ValueError, KeyError, IndexError ... on bad bytes
        raise ZeroLLMError(f"{path} is not a readable GGUF file ({type(err).__name__}: {err}); "
                           "it may be truncated or damaged: write or download it again") from None
    kinds = {v: k for k, v in _types().items()}
    tensors = {}
    for name, ttype, shape, data in raw:
        if ttype not in kinds:
            raise ZeroLLMError(f"{path}: tensor {name} is of type {ttype.name}; zerollm reads F32, F16, Q8_0, Q4_0, "
                               "Q5_0, Q5_1, Q4_K, Q5_K and Q6_K (requantize the file, e.g. llama.cpp's llama-quantize ... Q4_K_M)")
        tensors[name] = GGUFTensor(kinds[ttype], data, shape)
    return meta, tensors


# GGUF's value types (gguf.GGUFValueType): the bytes of each fixed-size one, and the two of variable size
_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
_MAX_NESTING = 4          # arrays of arrays: llama.cpp writes none; a handful of levels is plenty
_UINT32 = 4               # the type GGUF gives general.alignment
_ALIGNMENT_DEFAULT = 32   # GGUF's alignment when the file has no general.alignment


def check_layout(path):
    """Walk a GGUF file's header (metadata, then the tensor list) and check every length and count it
    declares against the bytes the file has; ZeroLLMError if one cannot fit.

    Why before the gguf package's reader: that reader loops over the items an array says it holds, and
    past the end of the file each item reads as nothing, so a 130-byte file that declared 2^40 items kept
    it busy, and growing, for ever. Here every item moves the position forward and every move is checked
    against the file's size, so the walk ends within the file's length. On the way, general.alignment
    and every tensor's data offset are checked against each other (_check_offsets)."""
    def damaged(what):
        return ZeroLLMError(f"{path} is not a readable GGUF file ({what}); it may be truncated or damaged: "
                            "write or download it again")

    size = os.path.getsize(path)
    if size < 24:
        raise damaged(f"{size} bytes, shorter than a GGUF header")
    with open_regular(path, "rb", what="GGUF file") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != MAGIC:
            raise damaged(f"it starts with {bytes(data[:4])!r}, not {MAGIC!r}")
        # the reader's rule for a file written on a big-endian machine: the version's low 16 bits are 0
        order = "<" if struct.unpack_from("<I", data, 4)[0] & 0xFFFF else ">"
        pos = 8

        def take(fmt):
            nonlocal pos
            n = struct.calcsize(fmt)
            if pos + n > size:
                raise damaged(f"its header runs past the end of the file at byte {size}")
            pos += n
            return struct.unpack_from(order + fmt, data, pos - n)[0]

        def skip(n):
            nonlocal pos
            if n > size - pos:
                raise damaged(f"{n} bytes declared at byte {pos}, {size - pos} left in the file")
            pos += n

        def value(kind, depth):
            if kind in _SCALAR_BYTES:
                skip(_SCALAR_BYTES[kind])
            elif kind == _STRING:
                skip(take("Q"))
            elif kind == _ARRAY:
                if depth >= _MAX_NESTING:
                    raise damaged(f"arrays nested more than {_MAX_NESTING} deep")
                item, count = take("I"), take("Q")
                if item in _SCALAR_BYTES:
                    skip(count * _SCALAR_BYTES[item])
                    return
                least = 8 if item == _STRING else 12            # a string's length; an array's type and count
                if count > (size - pos) // least:
                    raise damaged(f"an array of {count} items at byte {pos}, {size - pos} bytes left")
                for _ in range(count):
                    value(item, depth + 1)
            else:
                raise damaged(f"unknown value type {kind} at byte {pos - 4}")

        def text():
            n = take("Q")
            skip(n)
            return bytes(data[pos - n:pos])

        n_tensors, n_fields = take("Q"), take("Q")
        alignment = _ALIGNMENT_DEFAULT
        for _ in range(n_fields):                                # key, value type, value
            key, kind = text(), take("I")
            if key != b"general.alignment":
                value(kind, 0)
            elif kind == _UINT32:                                # checked like every key: a power of two
                alignment = meta_value({"general.alignment": take("I")}, "general.alignment", path)
            else:
                raise ZeroLLMError(f"{path}: metadata key general.alignment must be stored as a uint32 (GGUF "
                                   f"value type {_UINT32}), not as type {kind}; the file is damaged")
        offsets = []
        for _ in range(n_tensors):                               # name, dims, type, offset
            name = text()
            skip(8 * take("I"))
            take("I")
            offsets.append((name, take("Q")))
    _check_offsets(offsets, alignment, -(-pos // alignment) * alignment, size, path)


def _check_offsets(offsets, alignment, start, size, path):
    """Every tensor's data begins at a multiple of the alignment (GGUF requires it; a reader that ignored
    it would read a tensor shifted by a few bytes, i.e. garbage) and inside the file. ``start``: where the
    data section begins, the end of the header rounded up to the alignment."""
    for name, offset in offsets:
        shown = name.decode("utf-8", errors="replace")
        if offset % alignment:
            raise ZeroLLMError(f"{path}: tensor {shown} starts at offset {offset}, "
                               f"not a multiple of the file's alignment {alignment} (general.alignment); "
                               "the file is damaged")
        if start + offset > size:
            raise ZeroLLMError(f"{path}: tensor {shown} starts at byte {start + offset}, past the end of the file "
                               f"({size} bytes); it may be truncated: write or download it again")


def _field_value(field):
    """A metadata field as Python: a string, a number, or a list of them."""
    gguf = _gguf()
    if not field.types:
        return None
    if field.types[0] == gguf.GGUFValueType.ARRAY:
        return [_part(field, i) for i in field.data]
    return _part(field, field.data[0])


def _part(field, i):
    gguf = _gguf()
    value = field.parts[i]
    if field.types[-1] == gguf.GGUFValueType.STRING:
        return bytes(value).decode("utf-8")
    return value.tolist()[0] if value.size == 1 else value.tolist()


def as_float(t):
    """A GGUFTensor's numbers as float32 in its NumPy shape."""
    if t.kind == "f32":
        return np.asarray(t.data, dtype=np.float32).reshape(t.shape)
    if t.kind == "f16":
        return np.asarray(t.data, dtype=np.float16).astype(np.float32).reshape(t.shape)
    return quant.dequantize(t.data, t.kind, t.shape)
