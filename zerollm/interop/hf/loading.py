"""Load a transformers GPT-2 / Llama / Qwen2 / Qwen3 / Mixtral directory (config.json + safetensors) into a
zerollm GPT."""

import os

from zerollm.model import budget
from zerollm.model.config import DTYPES, GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import folder_not_found, read_json
from zerollm.interop.hf.configs import hf_to_config
from zerollm.interop.hf.weights import fill_params, read_tensors
from zerollm.model.gpt import GPT


def is_hf_dir(path):
    """True when ``path/config.json`` is a transformers config (it has "architectures" or "model_type").

    zerollm's own config.json files have a "format" key instead.
    """
    file = os.path.join(os.fspath(path), "config.json")
    try:
        hf = read_json(file)
    except ZeroLLMError:
        return False
    return isinstance(hf, dict) and "format" not in hf and ("architectures" in hf or "model_type" in hf)


def load(path, dtype="float32", *, force=None, quantize=None):
    """Load a transformers model directory into a ``GPT`` in eval mode.

    ``path`` holds config.json and model.safetensors, or model.safetensors.index.json and its
    shards. Weights of any float type (F32, F16, BF16, F64) become ``dtype`` ("float32"/"float64").
    A model larger than the memory available is refused before reading (force=True only warns);
    weights that hold NaN or infinity are an error. quantize ("q8_0", "q4_0"): the linear layers of attention and
    MLP go into blocks as they are read, one matrix at a time (zerollm.interop.quant.QuantizeOnRead), so the float
    model never exists whole (QLoRA's base).

    >>> model = load("gpt2")                  # doctest: +SKIP
    >>> model.config.n_layer, model.config.gelu, model.num_params()   # doctest: +SKIP
    (12, 'tanh', 124439808)
    """
    path = os.fspath(path)
    if dtype not in DTYPES:
        raise ZeroLLMError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if not os.path.isdir(path):
        raise folder_not_found(path, "model directory", "zerollm never downloads: fetch the model first (see "
                               "docs/huggingface.md) and give its local directory")
    where = os.path.join(path, "config.json")
    hf = read_json(where, what="Hugging Face config")
    if isinstance(hf, dict) and "format" in hf:
        raise ZeroLLMError(f"{path} is a zerollm directory ({hf['format']}), not a Hugging Face one; "
                           "give it as --ckpt DIR on the command line (in Python: zerollm.interop.opening.open_model"
                           "(Source(ckpt=DIR)))")
    family, cfg = hf_to_config(hf, where, dtype)
    budget.require(budget.loading(cfg, what=f"loading {path}"), force=force)   # before reading any weight
    tensors = read_tensors(path, family)                        # headers only: read into the model below
    if not cfg.tie_embeddings and "lm_head.weight" not in tensors and _is_base_model(hf):
        # GPT2Model / LlamaModel / MixtralModel have no head; the token table is the natural one (as GPT-2 ties it)
        cfg = GPTConfig(**{**cfg.to_dict(), "tie_embeddings": True})
    model = GPT(cfg, init=False)
    if quantize is None:
        fill_params(model.params, tensors, cfg, family, path)   # block by block, each checked finite (as dtype)
    else:
        from zerollm.interop.quant import QuantizeOnRead
        reading = QuantizeOnRead(model.params, quantize)
        fill_params(reading, tensors, cfg, family, path)        # the same, each linear matrix into blocks after it
        reading.finish()
    return model.eval()


def _is_base_model(hf):
    return any(str(a).endswith("Model") and "LMHead" not in str(a) for a in hf.get("architectures") or [])


def load_tokenizer_dir(path):
    """The tokenizer of a transformers directory (zerollm.tokenizers.find_tokenizer): its tokenizer.json (a char
    or byte tokenizer that zerollm exported, else byte-level BPE), else GPT-2's vocab.json + merges.txt. No
    tokenizer files, or another kind (e.g. Llama's SentencePiece), is a ZeroLLMError from the importer.
    """
    from zerollm.tokenizers import find_tokenizer
    return _with_chat_family(find_tokenizer(path, required=True), path)


def _chat_template(path):
    """The chat_template string of the directory's tokenizer_config.json (data, never run), or None."""
    file = os.path.join(os.fspath(path), "tokenizer_config.json")
    try:
        settings = read_json(file) if os.path.isfile(file) else {}
    except ZeroLLMError:
        return None                         # a broken file says so where it matters: the tokenizer load
    template = settings.get("chat_template") if isinstance(settings, dict) else None
    return template if isinstance(template, str) and template else None


def _with_chat_family(tok, path):
    """A ChatML tokenizer learns which of Qwen's templates its directory has (zerollm.data.chatml.family_of),
    so that Qwen2's and Qwen2.5's conversations render by their own rules, not Qwen3's."""
    from zerollm.data import chatml
    if chatml.is_chatml(tok):
        tok.chat_family = chatml.family_of(_chat_template(path))
    return tok


def template_note(path, tokenizer, prog):
    """The one line a command prints when the directory's tokenizer_config.json has a chat template that
    zerollm does not render (it knows its own and Qwen's ChatML, zerollm.data.chatml, by the tokenizer's
    tokens); None otherwise. The Jinja itself is never run: it is a program from a download. A ChatML
    template that is none of Qwen2's, Qwen2.5's and Qwen3's is rendered by Qwen3's rules, and says so."""
    from zerollm.data import chat, chatml
    file = os.path.join(os.fspath(path), "tokenizer_config.json")
    template = _chat_template(path)
    if template is None:
        return None
    if chatml.is_chatml(tokenizer) and chatml.family_of(template) is None:
        return (f"{prog}: note: the chat template of {file} is not one of Qwen2's, Qwen2.5's or Qwen3's that "
                "zerollm knows (it never runs a template from a file); conversations are rendered by Qwen3's rules")
    if chat.has_template(tokenizer):
        return None
    return (f"{prog}: note: the chat template of {file} is not one zerollm knows (it renders its own and "
            "Qwen's ChatML, and never runs a template from a file); prompts are used as plain text")
