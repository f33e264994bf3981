"""zerollm's own model directory: the weights without the training state.

    MODEL/config.json        {"format": "zerollm-model", "version": 1, "model": {GPTConfig fields},
                              "tokenizer": "bpe" | "byte" | "char" | null}
    MODEL/model.safetensors  our names and layout (zerollm.model.gpt), the model's dtype
    MODEL/tokenizer.json     the tokenizer in zerollm's format (zerollm.tokenizers), if any

``zerollm convert`` writes one from a Hugging Face directory. ``load_zerollm`` also reads a
training run (its latest checkpoint) or one checkpoint step directory (zerollm.training.checkpoint).
"""

import os

from zerollm.model import budget
from zerollm.training.checkpoint import latest_checkpoint, load_model
from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import folder_not_found, read_json, write_json
from zerollm.interop.hf.exporting import write_dir
from zerollm.model.gpt import GPT
from zerollm.io.safetensors import load_file, save_file
from zerollm.io.validate import require_finite

FORMAT, VERSION = "zerollm-model", 1


def save_zerollm(model, path, *, tokenizer=None, overwrite=False):
    """Write ``model`` (and ``tokenizer``) as a zerollm model directory, atomically. Returns its path.

    >>> save_zerollm(load("gpt2"), "gpt2-zerollm", tokenizer=load_tokenizer_dir("gpt2"))   # doctest: +SKIP
    """
    if not isinstance(model, GPT):
        raise ZeroLLMError(f"save_zerollm needs a zerollm GPT, got {type(model).__name__}")
    header = {"format": FORMAT, "version": VERSION, "model": model.config.to_dict(),
              "tokenizer": getattr(tokenizer, "name", None)}

    def fill(folder):
        write_json(os.path.join(folder, "config.json"), header)
        save_file(model.state_dict(), os.path.join(folder, "model.safetensors"), {"format": "np"})
        if tokenizer is not None:
            tokenizer.save(os.path.join(folder, "tokenizer.json"))

    return write_dir(path, fill, overwrite)


def _model_dir_config(path):
    """The model config of a zerollm model directory, or None if ``path`` is not one."""
    file = os.path.join(path, "config.json")
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


def load_zerollm(path, *, force=None):
    """A GPT (eval mode) from a zerollm model directory, a training run, or a checkpoint step directory.

    The config is checked field by field, the model's memory against what is available
    (zerollm.model.budget; force=True only warns), and the weights must be finite.
    """
    return load_zerollm_and_heads(path, force=force)[0]


def load_zerollm_and_heads(path, *, force=None):
    """(GPT, {scalar head parameters}) as ``load_zerollm``: a reward run's "score.weight" / "score.bias" or a PPO
    run's value head (zerollm.model.heads) come along; {} for a model directory (it holds none)."""
    from zerollm.model.heads import split_head_params
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise folder_not_found(path, "model directory", "give a zerollm model directory, a training run or a "
                               "Hugging Face model directory")
    config = _model_dir_config(path)
    if config is None:                             # a training run or checkpoint (zerollm.training.checkpoint)
        model, _, ckpt = load_run(path, force=force)
        return model, split_head_params(ckpt.params)[1]
    cfg = GPTConfig.from_dict(config, os.path.join(path, "config.json"), "model")
    budget.require(budget.loading(cfg), force=force)
    weights = os.path.join(path, "model.safetensors")
    state = load_file(weights)
    require_finite(state, weights, cfg.dtype)
    model = GPT(cfg, init=False)
    model.load_state_dict(state)
    return model.eval(), {}


def load_run(path, *, force=None):
    """(model, tokenizer, Checkpoint) of a training run or checkpoint, as zerollm.training.checkpoint.load_model; a LoRA
    run's base is loaded from where the run began (or rebuilt from its seed, for `zerollm train`). A zerollm
    model directory gives (model, tokenizer, None)."""
    if os.path.isdir(path) and _model_dir_config(os.fspath(path)) is not None:
        return load_zerollm(path, force=force), load_zerollm_tokenizer(path), None
    return load_model(path, force=force, base=lambda ckpt: lora_base(ckpt, force))


def lora_base(ckpt, force=None):
    """The base model a LoRA checkpoint's adapters were trained on."""
    start = ckpt.objective.get("start")
    if start is None:                               # `zerollm train --lora-r`: the seeded initial model
        cfg = GPTConfig.from_dict(ckpt.model_config, ckpt.config_path, "model")
        return GPT(cfg, seed=ckpt.train_config.get("seed", 1337))
    if not os.path.isdir(start["path"]):
        raise ZeroLLMError(f"{ckpt.path} holds LoRA adapters for the base {start['path']}, which is gone; put it "
                           "back (or merge the adapters with `zerollm merge` while it is there)")
    return start_model(None if start.get("hf") else start["path"], start["path"] if start.get("hf") else None,
                       start.get("adapter"), force)


def start_model(path=None, hf=None, adapter=None, force=None):
    """The model a stage starts from: a zerollm directory (a LoRA run's adapters folded in) or a Hugging Face
    one, and a PEFT adapter directory folded in on top (zerollm.interop.peft)."""
    from zerollm.interop.hf.loading import load
    model = load(hf, force=force) if hf else load_zerollm(path, force=force)
    if model.lora is not None:
        model = model.merged()
    return with_adapter(model, adapter).merged() if adapter else model


def with_adapter(model, adapter):
    """``model`` with the PEFT adapter directory ``adapter`` on it (None: unchanged). A model that already has
    adapters (a LoRA run) gets them folded in first."""
    if not adapter:
        return model
    from zerollm.interop.peft import load_adapter
    return load_adapter(model.merged() if model.lora is not None else model, adapter)


def load_zerollm_tokenizer(path):
    """The tokenizer saved with a zerollm model directory or training run, or None."""
    from zerollm.tokenizers import load_tokenizer
    path = os.fspath(path)
    if _model_dir_config(path) is not None or os.path.isfile(os.path.join(path, "state.json")):
        folder = path                              # a model directory or a checkpoint step directory
    else:
        folder = latest_checkpoint(path)           # a run directory
    file = os.path.join(folder, "tokenizer.json") if folder else None
    return load_tokenizer(file) if file and os.path.isfile(file) else None
