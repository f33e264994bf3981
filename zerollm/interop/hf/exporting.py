"""Export a zerollm GPT as a transformers directory that ``AutoModelForCausalLM`` loads unchanged.

    export(model, "out")      ->  out/config.json          GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM,
                                                           Qwen3ForCausalLM or MixtralForCausalLM
                                  out/model.safetensors    float32, transformers' names
                                  out/tokenizer.json       (+ tokenizer_config.json) for any tokenizer:
                                                           byte, char or BPE (zerollm.tokenizers.hf_export)

Layernorm + learned positions + GELU -> GPT-2; rmsnorm + RoPE + SwiGLU -> Llama (Qwen2 with biases on
q, k and v only, Qwen3 with QK-norm), or Mixtral when every block is a mixture of experts with
renormalised top-k gates (see configs.py).
GPT-2 always has biases and no grouped-query attention, so a bias-free model gets zero biases and
shared key/value heads are repeated, one copy per query head: both compute exactly the same logits.

The directory appears whole or not at all: it is written under a temporary name next to ``path``
and swapped into place (see ``write_dir`` and zerollm.io.outdir). Over a model directory that also holds
other files (a cloned repository's .git/ and README.md), only the model's files are replaced.
"""

import os
import shutil
import tempfile
from dataclasses import replace

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import fsync_dir, read_json, write_json
from zerollm.io.lock import writing
from zerollm.interop.hf.configs import config_to_hf, export_family
from zerollm.interop.hf.weights import to_hf
from zerollm.interop.quant import float_param
from zerollm.model.gpt import GPT, param_shapes
from zerollm.io.outdir import atomic_dir
from zerollm.io.safetensors import save_file
from zerollm.tokenizers import tokenizer_file

ENDOFTEXT = "<|endoftext|>"


# ----------------------------------------------------------------------------
# whole directories, atomically

# Every file a model directory written here can hold, in either layout (zerollm's or transformers', with or
# without a tokenizer and a PEFT adapter, zerollm.interop.peft). --overwrite replaces these and nothing else:
# a cloned Hugging Face repository keeps its .git/, README.md, generation_config.json, notes, ...
OWN_FILES = ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "adapter/adapter_config.json",
             "adapter/adapter_model.safetensors", "config.json")


def check_target(path, overwrite=False, *, flag="overwrite=True"):
    """The absolute path, if a model directory may be written there; else a ZeroLLMError.

    Call it before slow work, so a bad --to fails at once, not after loading a big model. An
    existing directory is written over only with ``overwrite`` and only when it is a model directory
    (Hugging Face or zerollm): never a training run, a checkpoint, or any other folder. ``flag`` is how
    the error tells the user to ask for that ("--overwrite" on the command line).
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ZeroLLMError(f"{path} is a file; choose a directory path for the model")
    full = os.path.isdir(path) and os.listdir(path)
    if full and not overwrite:
        raise ZeroLLMError(f"{path} exists and is not empty; choose a new directory, or replace the model in it "
                           f"with {flag}")
    if full:
        _check_replaceable(path)
    return path


def foreign_files(path):
    """The entries of directory ``path`` that no export writes (sorted; "adapter/README.md" for one in
    adapter/): what --overwrite keeps. [] for a directory that does not exist."""
    own = {rel.split("/")[0] for rel in OWN_FILES}
    found = []
    for entry in sorted(os.listdir(path)) if os.path.isdir(path) else []:
        if entry not in own:
            found.append(entry)
        elif entry == "adapter" and os.path.isdir(os.path.join(path, entry)):
            found += [f"adapter/{e}" for e in sorted(os.listdir(os.path.join(path, entry)))
                      if f"adapter/{e}" not in OWN_FILES]
    return found


def _check_replaceable(path):
    config = os.path.join(path, "config.json")
    if not os.path.isfile(config):
        raise ZeroLLMError(f"{path} is not a model directory (no config.json), so it is not overwritten; "
                           "choose a new directory")
    try:
        header = read_json(config)
    except ZeroLLMError:
        header = None
    kind = header.get("format") if isinstance(header, dict) else None
    is_model = isinstance(header, dict) and (kind == "zerollm-model" or (
        kind is None and ("architectures" in header or "model_type" in header)))
    if not is_model:
        what = "a training checkpoint" if kind == "zerollm-checkpoint" else "not a model directory"
        raise ZeroLLMError(f"{path} is {what} ({config}), so it is never overwritten; choose a new directory")


def write_dir(path, fill, overwrite=False):
    """Create directory ``path`` by calling ``fill(tmp_dir)`` beside it, then swapping it in
    (zerollm.io.outdir.atomic_dir: whole or not at all, under the directory's write lock).

    An existing empty directory is replaced. A non-empty one only with ``overwrite=True``, and only
    if it is a model directory (so a mistyped path can never wipe, say, a home directory). When it
    also holds files no export writes (a cloned repository's .git/ and README.md), only the model's
    files are replaced (``replace_own_files``) and the others stay.
    """
    path = check_target(path, overwrite)
    with writing(path, beside=True):
        check_target(path, overwrite)              # again, under the lock: another writer may have been first
        if foreign_files(path):
            replace_own_files(path, fill)
        else:
            with atomic_dir(path) as tmp:
                fill(tmp)
    return path


def replace_own_files(path, fill):
    """Write the model into the existing directory ``path`` and keep every file of someone else.

    ``fill`` writes the whole model into a temporary directory beside ``path`` first; only then are its
    files renamed over their old copies, one rename each (config.json last), so an error while writing
    leaves ``path`` exactly as it was. A file of OWN_FILES the new model does not have (tokenizer_config.json
    of an earlier Hugging Face export under a zerollm model, an old adapter/) is removed: a loader would
    read it with the new model.
    """
    parent, name = os.path.split(path)
    tmp = tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=parent)   # what atomic_dir clears if left
    try:
        fill(tmp)
        written = sorted(_files_under(tmp), key=lambda rel: rel == "config.json")
        for rel in written:
            target = os.path.join(path, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(os.path.join(tmp, rel), target)
        for rel in OWN_FILES:
            if rel not in written and os.path.isfile(os.path.join(path, rel)):
                os.remove(os.path.join(path, rel))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    adapter = os.path.join(path, "adapter")
    if os.path.isdir(adapter) and not os.listdir(adapter):
        os.rmdir(adapter)
    elif os.path.isdir(adapter):
        fsync_dir(adapter)
    fsync_dir(path)


def _files_under(folder):
    return [os.path.relpath(os.path.join(root, f), folder).replace(os.sep, "/")
            for root, _, files in os.walk(folder) for f in files]


# ----------------------------------------------------------------------------
# weights in transformers' layout

def repeat_kv(a, nh, nkv, hs):
    """[q | k | v] columns (.., (nh + 2 nkv) hs) -> (.., 3 nh hs): each kv head repeated nh/nkv times.

    Query head j reads kv head j // (nh/nkv), so repeating each kv head in a row gives every
    query head its own copy of the numbers it read before.
    """
    lead = a.shape[:-1]
    q, k, v = np.split(a, [nh * hs, (nh + nkv) * hs], axis=-1)

    def repeat(x):                                   # (.., nkv hs) -> (.., nkv, hs) -> (.., nh hs)
        return np.repeat(x.reshape(*lead, nkv, hs), nh // nkv, axis=-2).reshape(*lead, nh * hs)

    return np.concatenate([q, repeat(k), repeat(v)], axis=-1)


def _as_full_gpt2(state, cfg):
    """GPT-2 has biases everywhere and one key/value head per query head: make ``state`` so.

    Missing biases become zeros (they add nothing); shared kv heads are repeated (repeat_kv).
    """
    full = replace(cfg, bias=True, n_kv_head=cfg.n_head)
    out = {}
    for name, shape in param_shapes(full).items():
        if name not in state:
            out[name] = np.zeros(shape, np.float32)           # made at the full width already
        elif ".attn.c_attn." in name and cfg.n_kv_head != cfg.n_head:
            out[name] = repeat_kv(state[name], cfg.n_head, cfg.n_kv_head, cfg.head_size)
        else:
            out[name] = state[name]
    return out, full


def hf_arrays(model):
    """(family, {transformers name: float32 array}) for ``model``."""
    cfg = model.config
    family = export_family(cfg)
    state = {name: float_param(name, w) for name, w in model.state_dict().items()}   # a QLoRA base: dequantized
    if family == "gpt2":
        state, cfg = _as_full_gpt2(state, cfg)
    arrays = to_hf(state, cfg, family)               # tied: no lm_head.weight, as save_pretrained does
    return family, {name: a.astype(np.float32) for name, a in arrays.items()}


# ----------------------------------------------------------------------------
# tokenizer files

def _special_tokens(tokenizer):
    """{"bos"/"eos": token text}: GPT-2's <|endoftext|> for both; a chat model ends at the end of a turn,
    so its eos is the chat template's end-of-turn token (transformers' generate stops there)."""
    from zerollm.data import chat, chatml
    specials = getattr(tokenizer, "special_tokens", None) or {}
    out = {"bos": ENDOFTEXT, "eos": ENDOFTEXT} if ENDOFTEXT in specials else {}
    if chat.has_template(tokenizer):
        out["eos"] = chatml.IM_END if chatml.is_chatml(tokenizer) else chat.END
    return out


def _special_ids(tokenizer):
    specials = tokenizer.special_tokens
    return {role: specials[text] for role, text in _special_tokens(tokenizer).items()}


def _write_tokenizer(tokenizer, folder, cfg):
    """tokenizer.json + tokenizer_config.json (with the chat template when the tokenizer has its
    tokens), so ``AutoTokenizer.from_pretrained`` and ``apply_chat_template`` work."""
    from zerollm.data import chat, chatml
    if tokenizer.vocab_size > cfg.vocab_size:
        raise ZeroLLMError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model only "
                           f"{cfg.vocab_size}; export with the tokenizer the model was trained with")
    tokenizer.to_hf_tokenizer_json(tokenizer_file(folder))
    settings = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": cfg.block_size,
                "clean_up_tokenization_spaces": False}
    settings.update({f"{role}_token": text for role, text in _special_tokens(tokenizer).items()})
    if ENDOFTEXT in getattr(tokenizer, "special_tokens", {}):
        settings["unk_token"] = ENDOFTEXT
    if chat.has_template(tokenizer):
        settings["chat_template"] = (chatml.CHATML_JINJA if chatml.is_chatml(tokenizer)
                                     else chat.chat_template_jinja())
    write_json(os.path.join(folder, "tokenizer_config.json"), settings)


# ----------------------------------------------------------------------------
# a reward model: transformers' sequence classifier with one label

SEQUENCE_CLASSIFIERS = {"gpt2": "GPT2ForSequenceClassification", "llama": "LlamaForSequenceClassification",
                        "mixtral": "MixtralForSequenceClassification", "qwen2": "Qwen2ForSequenceClassification",
                        "qwen3": "Qwen3ForSequenceClassification"}


def as_sequence_classifier(arrays, hf_config, family, score):
    """(arrays, config) of a reward model as ``AutoModelForSequenceClassification`` loads it, num_labels 1.

    The reward is r = h[last] @ w + b (zerollm.model.heads) and transformers' ``score`` is a Linear(C, 1)
    without bias, read at the last token that is not the pad token: w = score.weight (C, 1) is stored
    transposed (1, C), and b is left out, so every reward comes out b lower. Nothing is lost: both losses of
    ``zerollm reward`` see only differences of rewards, so b gets no gradient (it moves only by AdamW's
    reading of float rounding) and means nothing. There is no LM head.
    """
    arrays = {name: a for name, a in arrays.items() if name != "lm_head.weight"}
    arrays["score.weight"] = np.ascontiguousarray(score["score.weight"].T, np.float32)   # (C, 1) -> (1, C)
    config = dict(hf_config, architectures=[SEQUENCE_CLASSIFIERS[family]], id2label={"0": "LABEL_0"},
                  label2id={"LABEL_0": 0})
    return arrays, config


# ----------------------------------------------------------------------------
# export

def export(model, path, *, tokenizer=None, overwrite=False, also=None, score=None):
    """Write ``model`` (and its ``tokenizer``, if given: byte, char or BPE) as a transformers model
    directory. Returns the absolute path of the directory. ``also(folder)`` writes more into it before it
    appears (a LoRA model's PEFT adapter: its base is what is exported here, zerollm.interop.peft).
    ``score``: a reward model's {"score.weight", "score.bias"}, exported as a sequence classifier instead
    (``as_sequence_classifier``).

    >>> export(GPT(GPTConfig(n_layer=2)), "my-gpt2")            # doctest: +SKIP
    >>> AutoModelForCausalLM.from_pretrained("my-gpt2")          # doctest: +SKIP
    """
    if not isinstance(model, GPT):
        raise ZeroLLMError(f"export needs a zerollm GPT, got {type(model).__name__}")
    family, arrays = hf_arrays(model)
    has_hf_tokenizer = tokenizer is not None
    hf_config = config_to_hf(model.config, family, _special_ids(tokenizer) if has_hf_tokenizer else None)
    if score is not None:
        arrays, hf_config = as_sequence_classifier(arrays, hf_config, family, score)

    def fill(folder):
        write_json(os.path.join(folder, "config.json"), hf_config)
        save_file(arrays, os.path.join(folder, "model.safetensors"), {"format": "pt"})
        if has_hf_tokenizer:
            _write_tokenizer(tokenizer, folder, model.config)
        if also is not None:
            also(folder)

    return write_dir(path, fill, overwrite)
