"""One way to open a model: a zerollm run, checkpoint step or model directory, a Hugging Face directory, or
a GGUF file, with a PEFT adapter on top if asked.

    opened = open_model(Source(ckpt="runs/sft"))                 # or Source(hf=DIR), Source(gguf=FILE)
    opened.model, opened.tokenizer, opened.heads, opened.checkpoint, opened.name

Every command (`sample`, `chat`, `serve`, `eval`, `tasks eval`, `explain`, `heads`, `merge`, `convert`,
the stages' --init/--hf, `score`'s reward model) and every library caller (lm-eval's model, the reward of
PPO/GRPO) opens its model here, so a folder without a tokenizer, a LoRA run whose base is gone or an
adapter on a GGUF file gets the same one-line error everywhere. The readers behind it live in the rooms
of their formats: zerollm.training.modeldir (runs, steps, model directories), zerollm.interop.hf.loading,
zerollm.interop.gguf_load and zerollm.interop.peft.
"""

import os
from dataclasses import dataclass, field

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import folder_not_found
from zerollm.training import modeldir

TOKENIZER_MODES = ("need", "may", "try", "skip")
STORED = "stored"      # Source.quantize for a GGUF file: keep its Q8_0 / Q4_0 blocks, quantize nothing else


@dataclass(frozen=True)
class Source:
    """Where a model comes from: exactly one of ckpt (a zerollm run, checkpoint step or model directory),
    hf (a Hugging Face directory) or gguf (a GGUF file); adapter: a PEFT adapter directory to put on it;
    force: go on when the memory estimate says it will not fit (zerollm.model.budget); quantize: "q8_0" or "q4_0"
    to keep the linear layers of attention and MLP in blocks (QLoRA's base, zerollm.interop.quant), each matrix
    quantized as it is read from a zerollm or Hugging Face safetensors file, so the float model never exists
    whole (a LoRA run is folded in float first, then quantized; an adapter, unless merged, goes on top of the blocks
    as a QLoRA run's does). With a GGUF file the Q8_0 / Q4_0 / k-quant linear layers are read straight into the
    blocks it stores, never through a float copy, its float ones are quantized to the kind as they are read (or
    stay float with quantize="stored"), and the token table and head come out in float32."""
    ckpt: str | None = None
    hf: str | None = None
    gguf: str | None = None
    adapter: str | None = None
    force: bool | None = None
    quantize: str | None = None

    @classmethod
    def of(cls, args):
        """The Source that a command's --ckpt/--hf/--gguf/--adapter/--force/--quantize-base flags name (absent
        flags: None)."""
        return cls(*(getattr(args, k, None) for k in ("ckpt", "hf", "gguf", "adapter")),
                   force=getattr(args, "force", None), quantize=getattr(args, "quantize_base", None))

    @property
    def path(self):
        return self.ckpt or self.hf or self.gguf


@dataclass
class Opened:
    """A model opened from a Source. heads: a reward run's "score.*" or a PPO run's value head (else {});
    checkpoint: the zerollm.training.checkpoint.Checkpoint of a run or step (else None); name: how a page or
    a report names the model; notes: what a command should tell the user (how a GGUF file's weights run);
    tokenizer_error: why the tokenizer could not be read, when asked with tokenizer="try"."""
    model: object
    tokenizer: object
    name: str
    heads: dict = field(default_factory=dict)
    checkpoint: object = None
    notes: list = field(default_factory=list)
    tokenizer_error: str | None = None
    path: str = ""

    def need_tokenizer(self):
        """The tokenizer, or the one error every command gives when a model has none."""
        if self.tokenizer is None:
            raise ZeroLLMError(self.tokenizer_error or f"{self.path} has no tokenizer.json, so text cannot be "
                               "encoded; open the run or model directory that was saved with its tokenizer")
        return self.tokenizer


def open_model(source, *, tokenizer="need", merged=False, prog="zerollm"):
    """The model (in eval mode) and tokenizer that ``source`` names -> Opened.

    tokenizer: "need" (no tokenizer is an error: text could not be encoded), "may" (None when there is
    none), "try" (also None when it cannot be read, with the reason in tokenizer_error) or "skip" (not read).
    merged: fold every adapter into the weights (a LoRA run's own and ``source.adapter``), as a stage's
    starting model is; otherwise a PEFT adapter stays a LoRA adapter on the model.
    prog: the command, as the notes name it.
    """
    if tokenizer not in TOKENIZER_MODES:
        raise ValueError(f"tokenizer must be one of {TOKENIZER_MODES}, got {tokenizer!r}")
    if source.quantize == STORED and not source.gguf:
        raise ValueError(f"quantize={STORED!r} keeps a GGUF file's blocks; give a kind for other sources")
    given = [k for k in ("ckpt", "hf", "gguf") if getattr(source, k)]
    if not given:
        raise ZeroLLMError("give --ckpt DIR (a zerollm training run), --hf DIR (a Hugging Face model) "
                           "or --gguf FILE (a GGUF file)")
    if len(given) > 1:
        raise ZeroLLMError(f"give one model, not {' and '.join('--' + k for k in given)}")
    if source.gguf:
        opened = _open_gguf(source, prog)
    elif source.hf:
        opened = _open_hf(source, tokenizer, prog)
    else:
        opened = _open_zerollm(source, tokenizer, prog)
    opened.path = os.fspath(source.path)
    if tokenizer == "need":
        opened.need_tokenizer()
    model = opened.model
    if merged and model.lora is not None:
        model = model.merged()
    opened.model = with_adapter(model, source.adapter, merged).eval()
    if source.quantize not in (None, STORED):     # what the readers could not put in blocks as they read
        from zerollm.interop.quant import quantize_base
        quantize_base(opened.model.params, source.quantize)
    return opened


def _open_gguf(source, prog):
    from zerollm.interop.gguf_load import load_gguf, load_note
    if source.adapter:
        raise ZeroLLMError("--adapter goes on --ckpt or --hf models, not on a GGUF file; convert the model "
                           "with its adapters merged (zerollm merge) instead")
    # QLoRA on the file's blocks (quantize): read straight from them, the float ones quantized as they are read,
    # the token table and head in float32 (they are looked up and may train)
    model, tok, info = load_gguf(source.gguf, force=source.force, quantize=source.quantize)
    note = load_note(info, prog)
    error = None if tok is not None else (f"{source.gguf} has no tokenizer (it was written with --no-tokenizer), "
                                          "so text cannot be encoded; convert the model again with its tokenizer")
    return Opened(model, tok, os.path.basename(source.gguf), notes=[note] if note else [], tokenizer_error=error)


def _open_hf(source, tokenizer, prog):
    from zerollm.interop.hf.loading import load, load_tokenizer_dir, template_note
    model = load(source.hf, force=source.force, quantize=source.quantize)
    opened = Opened(model, None, os.path.basename(os.path.normpath(source.hf)))
    if tokenizer == "skip":
        return opened
    try:
        opened.tokenizer = load_tokenizer_dir(source.hf)
    except ZeroLLMError as err:
        if tokenizer != "try":
            raise
        opened.tokenizer_error = " ".join(str(err).split())
    note = template_note(source.hf, opened.tokenizer, prog) if opened.tokenizer is not None else None
    opened.notes += [note] if note else []
    return opened


# what a chat command says when its --ckpt names no folder: a chat model is what `zerollm sft` makes
CHATTING = ("zerollm chat", "zerollm serve")


def _open_zerollm(source, tokenizer, prog):
    path = os.fspath(source.ckpt)
    if prog in CHATTING and not os.path.isdir(path):
        raise folder_not_found(path, "checkpoint directory", "a chat model comes from `zerollm sft --init RUN "
                               "--data FILE --out DIR` (docs/alignment.md), a base model from `zerollm train`")
    ckpt = modeldir.saved_checkpoint(path, force=source.force, weights=source.quantize is None)
    if source.quantize is not None and ckpt is not None and modeldir.needs_base(ckpt):
        ckpt = modeldir.saved_checkpoint(path, force=source.force)   # adapters on a base: read whole, folded, then
    if source.quantize is not None and (ckpt is None or not modeldir.needs_base(ckpt)):     # quantized (open_model)
        model, heads = _read_in_blocks(path, ckpt, source.quantize, source.force)
    else:
        base = lora_base(ckpt, source.force) if modeldir.needs_base(ckpt) else None     # opened first, here: the
        model, heads = modeldir.load_trained(path, ckpt, force=source.force, base=base)  # readers never call back up
    opened = Opened(model, None, os.path.basename(os.path.normpath(path)), heads=heads, checkpoint=ckpt)
    if ckpt is not None:
        opened.name = f"{os.path.normpath(path)} (step {ckpt.step})"
    if tokenizer == "skip":
        return opened
    try:
        opened.tokenizer = modeldir.read_tokenizer(path, ckpt)
    except ZeroLLMError as err:
        if tokenizer != "try":
            raise
        opened.tokenizer_error = " ".join(str(err).split())
    return opened


def _read_in_blocks(path, ckpt, kind, force):
    """(GPT, heads) of a zerollm model directory or run/step (``ckpt`` read without its weights), its weights read
    from model.safetensors tensor by tensor, each linear matrix of attention and MLP quantized to ``kind`` as soon as
    it is read (zerollm.interop.quant.QuantizeOnRead), every block checked finite."""
    from zerollm.interop.quant import QuantizeOnRead
    from zerollm.io.safetensors import tensor_index
    from zerollm.io.validate import require_finite
    from zerollm.model import budget
    from zerollm.model.config import GPTConfig
    from zerollm.model.gpt import GPT
    from zerollm.model.heads import split_head_params
    if ckpt is None:
        where = os.path.join(path, "config.json")
        cfg = GPTConfig.from_dict(modeldir.model_dir_config(path), where, "model")
        file = os.path.join(path, "model.safetensors")
    else:
        cfg = GPTConfig.from_dict(ckpt.model_config, ckpt.config_path, "model")
        file = os.path.join(ckpt.path, "model.safetensors")
    budget.require(budget.loading(cfg, what=f"loading {path}"), force=force)
    stored = tensor_index(file)
    trunk, heads = split_head_params(stored)
    model = GPT(cfg, init=False)
    missing, unexpected = sorted(set(model.params) - set(trunk)), sorted(set(trunk) - set(model.params))
    wrong = sorted(n for n in set(trunk) & set(model.params) if tuple(trunk[n].shape) != model.params[n].shape)
    if missing or unexpected or wrong:
        raise ZeroLLMError(f"{file}: the weights do not fit the model's config (missing {missing[:4]}, unexpected "
                           f"{unexpected[:4]}, other shapes {wrong[:4]}); the model directory is damaged")
    reading = QuantizeOnRead(model.params, kind)
    for name, t in trunk.items():
        target = reading[name]
        rows = max(1, (1 << 22) // max(1, int(np.prod(t.shape[1:]))))   # about 4M numbers a read
        for r0 in range(0, t.shape[0] if t.ndim else 1, rows):
            block = t.rows(r0, min(r0 + rows, t.shape[0])) if t.ndim else t.rows(0, 1).reshape(())
            require_finite({name: block}, file, cfg.dtype)
            if t.ndim:
                target[r0:r0 + len(block)] = block
            else:
                target[...] = block
    reading.finish()
    heads = {n: t.rows(0, t.shape[0]) for n, t in heads.items()}
    require_finite(heads, file)
    return model.eval(), heads


def lora_base(ckpt, force=None):
    """The base model a LoRA checkpoint's adapters were trained on: where the run began (its adapters folded
    in), or the seeded initial model of `zerollm train --lora-r`."""
    start = ckpt.objective.get("start")
    if start is None:
        return modeldir.seeded_base(ckpt)
    if not (os.path.isfile if start.get("gguf") else os.path.isdir)(start["path"]):
        raise ZeroLLMError(f"{ckpt.path} holds LoRA adapters for the base {start['path']}, which is gone; put it "
                           "back (or merge the adapters with `zerollm merge` while it is there)")
    where = {"hf": start["path"]} if start.get("hf") else {"ckpt": start["path"]}
    where = {"gguf": start["path"]} if start.get("gguf") else where
    return open_model(Source(**where, adapter=start.get("adapter"), force=force, quantize=start.get("quantize")),
                      tokenizer="skip", merged=True).model


def with_adapter(model, adapter, merged=False):
    """``model`` with the PEFT adapter directory ``adapter`` on it (None: unchanged; merged: folded into the
    weights). A model that already has adapters (a LoRA run) gets them folded in first."""
    if not adapter:
        return model
    from zerollm.interop.peft import load_adapter
    adapted = load_adapter(model.merged() if model.lora is not None else model, adapter)
    return adapted.merged() if merged else adapted


def save_zerollm(model, path, *, tokenizer=None, overwrite=False):
    """Write ``model`` (and ``tokenizer``) as a zerollm model directory (zerollm.training.modeldir), atomically
    and never over files of someone else (zerollm.interop.hf.write_dir). Returns its path.

    >>> save_zerollm(open_model(Source(hf="gpt2")).model, "gpt2-zerollm")   # doctest: +SKIP
    """
    from zerollm.interop.hf.exporting import write_dir
    from zerollm.model.gpt import GPT
    if not isinstance(model, GPT):                   # before anything is created
        raise ZeroLLMError(f"save_zerollm needs a zerollm GPT, got {type(model).__name__}")
    return write_dir(path, lambda folder: modeldir.write_model_dir(folder, model, tokenizer), overwrite)
