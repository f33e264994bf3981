"""zerollm's own model files read back as a model: a training run (its newest checkpoint), one checkpoint
step directory (zerollm.training.checkpoint), or a model directory, which holds the weights without the
training state:

    MODEL/config.json        {"format": "zerollm-model", "version": 1, "model": {GPTConfig fields},
                              "tokenizer": "bpe" | "byte" | "char" | null}
    MODEL/model.safetensors  our names and layout (zerollm.model.gpt), the model's dtype
    MODEL/tokenizer.json     the tokenizer in zerollm's format (zerollm.tokenizers), if any

``zerollm convert`` writes a model directory from a Hugging Face one, ``zerollm merge`` a run.
Commands and library callers open all of these (and Hugging Face folders and GGUF files) through
zerollm.interop.opening.open_model; this module is the part of it that knows zerollm's own layout.
"""

import os

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import read_json, write_json
from zerollm.io.safetensors import load_file, save_file
from zerollm.io.validate import require_finite
from zerollm.model import budget
from zerollm.model.config import GPTConfig
from zerollm.model.gpt import GPT
from zerollm.model.heads import split_head_params
from zerollm.training.checkpoint import latest_checkpoint, load_checkpoint, weights_digest
from zerollm.tokenizers import tokenizer_file

FORMAT, VERSION = "zerollm-model", 1


def model_dir_config(path):
    """The model config of a zerollm model directory, or None if ``path`` is not one."""
    file = os.path.join(os.fspath(path), "config.json")
    if not os.path.isfile(file):
        return None
    header = read_json(file, what="model config")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return None
    if header.get("version") != VERSION:
        raise ZeroLLMError(f"{file}: model format version {header.get('version')!r} is not supported "
                           f"(this zerollm reads version {VERSION}); upgrade zerollm")
    if not isinstance(header.get("model"), dict):
        raise ZeroLLMError(f"{file} has no \"model\" config; the directory is damaged, convert it again")
    return header["model"]


def write_model_dir(folder, model, tokenizer=None):
    """Fill the (new, empty) ``folder`` with ``model`` and ``tokenizer`` as a model directory; the atomic,
    never-over-someone-else's-files writer around it is zerollm.interop.opening.save_zerollm."""
    if not isinstance(model, GPT):
        raise ZeroLLMError(f"save_zerollm needs a zerollm GPT, got {type(model).__name__}")
    header = {"format": FORMAT, "version": VERSION, "model": model.config.to_dict(),
              "tokenizer": getattr(tokenizer, "name", None)}
    write_json(os.path.join(folder, "config.json"), header)
    save_file(model.state_dict(), os.path.join(folder, "model.safetensors"), {"format": "np"})
    if tokenizer is not None:
        tokenizer.save(tokenizer_file(folder))


def saved_checkpoint(path, *, force=None, weights=True):
    """The Checkpoint (without optimizer moments) of a run or step directory, or None for a model directory.
    weights=False: its params are left unread (load_checkpoint)."""
    path = os.fspath(path)
    if model_dir_config(path) is not None:       # None for anything else: a run, a step, or nothing (said here)
        return None
    return load_checkpoint(path, optimizer=False, force=force, weights=weights)


def needs_base(ckpt):
    """Does this checkpoint hold LoRA adapters (and no base)? Then load_trained needs the base model."""
    return ckpt is not None and bool((ckpt.objective or {}).get("lora"))


def load_trained(path, ckpt=None, *, force=None, base=None):
    """(GPT in eval mode, {scalar head parameters}) of a model directory (ckpt None) or of the run or step
    whose saved_checkpoint is ``ckpt``.

    The config is checked field by field, the model's memory against what is available (zerollm.model.budget;
    force=True only warns), and the weights must be finite. A reward run's "score.weight" / "score.bias" or a
    PPO run's value head (zerollm.model.heads) come back as the heads; a model directory holds none.
    base: the base GPT of a LoRA checkpoint (needs_base), which holds adapters only; checked against the
    digest saved with the run.
    """
    path = os.fspath(path)
    if ckpt is None:
        config = model_dir_config(path)
        cfg = GPTConfig.from_dict(config, os.path.join(path, "config.json"), "model")
        budget.require(budget.loading(cfg), force=force)
        weights = os.path.join(path, "model.safetensors")
        state = load_file(weights)
        require_finite(state, weights, cfg.dtype)
        model = GPT(cfg, init=False)
        model.load_state_dict(state)
        return model.eval(), {}
    cfg = GPTConfig.from_dict(ckpt.model_config, ckpt.config_path, "model")
    budget.require(budget.loading(cfg, what=f"the model of {ckpt.path}"), force=force)   # before allocating it
    trunk, heads = split_head_params(ckpt.params)
    if needs_base(ckpt):
        if base is None:
            raise ZeroLLMError(f"{ckpt.path} holds LoRA adapters, not the base model; open it with "
                               "zerollm.interop.opening.open_model (it finds the base), or fold them in with "
                               "`zerollm merge`")
        model = adapted_model(base, trunk, cfg, ckpt)
    else:
        model = GPT(cfg, init=False)
        model.load_state_dict(trunk)
    return model.eval(), heads


def read_tokenizer(path, ckpt=None):
    """The tokenizer saved with a model directory, a checkpoint step or a run (its newest step), or None.
    With ``ckpt`` (what load_trained gave for ``path``) it is the step's own copy, checked against the model."""
    from zerollm.tokenizers import find_tokenizer, load_tokenizer
    if ckpt is not None:
        tokenizer = load_tokenizer(ckpt.tokenizer_path) if ckpt.tokenizer_path else None
        if tokenizer is not None:
            check_tokenizer(tokenizer, GPTConfig.from_dict(ckpt.model_config, ckpt.config_path, "model"), ckpt)
        return tokenizer
    path = os.fspath(path)
    if model_dir_config(path) is not None or os.path.isfile(os.path.join(path, "state.json")):
        folder = path                              # a model directory or a checkpoint step directory
    else:
        folder = latest_checkpoint(path)           # a run directory
    return find_tokenizer(folder) if folder else None


def check_tokenizer(tokenizer, cfg, ckpt):
    """The step's tokenizer.json must be the one the model was trained with: the kind config.json names, and
    no more tokens than the model has rows for (a model may have more: vocabularies are padded). A file that
    was replaced or damaged would otherwise turn ids into the wrong text without a word."""
    fix = ("the file was replaced or damaged: restore it (the run's data/tokenizer.json, or the one the run "
           "was prepared with, is the same file)")
    kind = ckpt.tokenizer_kind
    if kind is not None and tokenizer.name != kind:
        raise ZeroLLMError(f"{ckpt.tokenizer_path} is a {tokenizer.name} tokenizer, but {ckpt.config_path} says "
                           f"this model was trained with a {kind} tokenizer; {fix}")
    if tokenizer.vocab_size > cfg.vocab_size:
        raise ZeroLLMError(f"{ckpt.tokenizer_path} has {tokenizer.vocab_size:,} tokens, but the model has only "
                           f"{cfg.vocab_size:,} (vocab_size in {ckpt.config_path}); {fix}")


# ----------------------------------------------------------------------------
# a LoRA run: adapters on a base

def lora_base_digest(objective):
    """The digest of the base a LoRA run's adapters belong to (its start, or the seeded model of `train`)."""
    return (objective.get("start") or {}).get("digest") or objective.get("base_digest")


def adapted_model(base, trainable, cfg, ckpt):
    """The model of a LoRA checkpoint: ``base`` (checked by digest), its adapters, the tables it trained whole
    (modules_to_save: "wte.weight") in place of the base's, and the embedding rows the run added to the others
    ("wte.new_rows") appended to the base's table."""
    from zerollm.nn.lora import LoRAConfig
    if weights_digest(base.params) != lora_base_digest(ckpt.objective):
        raise ZeroLLMError(f"{ckpt.path}: its adapters were trained on another base model (the base's weights "
                           "digest differs); put back the model the run started from")
    config = LoRAConfig.from_dict(ckpt.objective["lora"])
    model = GPT(cfg, init=False)
    model.add_lora(config, np.random.default_rng(0))
    V0 = base.config.vocab_size
    for name, value in base.params.items():
        if name in model.lora.saved:
            continue                             # trained whole: the checkpoint's copy below replaces it
        if not isinstance(value, np.ndarray):    # a QLoRA base's matrix in quantized blocks: frozen, shared as is
            model.params[name] = value
            continue
        if name in ("wte.weight", "lm_head.weight") and cfg.vocab_size > V0:
            value = np.concatenate([value, trainable[name.split(".")[0] + ".new_rows"]], axis=0)
        np.copyto(model.params[name], value)
    model.lora.base_vocab = V0
    for name, value in model.trainable().items():
        if name not in trainable:
            raise ZeroLLMError(f"{ckpt.path}: model.safetensors lacks {name}; the checkpoint is damaged: load the "
                               "run directory to use the one before it, or train again")
        np.copyto(value, trainable[name])
    model.lora.check_fold(model.params, os.path.join(ckpt.path, "model.safetensors"))
    return model


def seeded_base(ckpt):
    """The base of a `zerollm train --lora-r` run: the initial model its seed rebuilds."""
    cfg = GPTConfig.from_dict(ckpt.model_config, ckpt.config_path, "model")
    return GPT(cfg, seed=ckpt.train_config.get("seed", 1337))
