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

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import folder_not_found
from zerollm.training import modeldir

TOKENIZER_MODES = ("need", "may", "try", "skip")


@dataclass(frozen=True)
class Source:
    """Where a model comes from: exactly one of ckpt (a zerollm run, checkpoint step or model directory),
    hf (a Hugging Face directory) or gguf (a GGUF file); adapter: a PEFT adapter directory to put on it;
    force: go on when the memory estimate says it will not fit (zerollm.model.budget)."""
    ckpt: str | None = None
    hf: str | None = None
    gguf: str | None = None
    adapter: str | None = None
    force: bool | None = None

    @classmethod
    def of(cls, args):
        """The Source that a command's --ckpt/--hf/--gguf/--adapter/--force flags name (absent flags: None)."""
        return cls(*(getattr(args, k, None) for k in ("ckpt", "hf", "gguf", "adapter")),
                   force=getattr(args, "force", None))

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
    return opened


def _open_gguf(source, prog):
    from zerollm.interop.gguf_load import load_gguf, load_note
    if source.adapter:
        raise ZeroLLMError("--adapter goes on --ckpt or --hf models, not on a GGUF file; convert the model "
                           "with its adapters merged (zerollm merge) instead")
    model, tok, info = load_gguf(source.gguf, force=source.force)
    note = load_note(info, prog)
    error = None if tok is not None else (f"{source.gguf} has no tokenizer (it was written with --no-tokenizer), "
                                          "so text cannot be encoded; convert the model again with its tokenizer")
    return Opened(model, tok, os.path.basename(source.gguf), notes=[note] if note else [], tokenizer_error=error)


def _open_hf(source, tokenizer, prog):
    from zerollm.interop.hf.loading import load, load_tokenizer_dir, template_note
    model = load(source.hf, force=source.force)
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
    ckpt = modeldir.saved_checkpoint(path, force=source.force)
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


def lora_base(ckpt, force=None):
    """The base model a LoRA checkpoint's adapters were trained on: where the run began (its adapters folded
    in), or the seeded initial model of `zerollm train --lora-r`."""
    start = ckpt.objective.get("start")
    if start is None:
        return modeldir.seeded_base(ckpt)
    if not os.path.isdir(start["path"]):
        raise ZeroLLMError(f"{ckpt.path} holds LoRA adapters for the base {start['path']}, which is gone; put it "
                           "back (or merge the adapters with `zerollm merge` while it is there)")
    where = {"hf": start["path"]} if start.get("hf") else {"ckpt": start["path"]}
    return open_model(Source(**where, adapter=start.get("adapter"), force=force), tokenizer="skip",
                      merged=True).model


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
