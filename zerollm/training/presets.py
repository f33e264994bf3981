"""Named configurations (``zerollm train --preset NAME``): model fields and training fields in one flat
dict, applied on top of the dataclass defaults and under the user's own flags.

    >>> model_cfg, train_cfg = build_configs("tiny", {"max_iters": 10}, vocab_size=256)
    >>> model_cfg.n_layer, train_cfg.max_iters, train_cfg.tokenizer
    (2, 10, 'byte')

Without a preset, ``zerollm train`` uses DEFAULT_PRESET's values: GPTConfig's own defaults are GPT-2
small's (86M parameters, a 1024-token context), far too big to train on a laptop CPU.

    >>> build_configs(None, {"n_layer": 2}, vocab_size=65)[0].n_embd     # shakespeare-cpu's width
    128
"""

from dataclasses import fields

from zerollm.model.config import GPTConfig
from zerollm.io import docsmode
from zerollm.io.errors import ZeroLLMError
from zerollm.training.trainer import TrainConfig, check_schedule

PRESETS = {
    # a demo that finishes in seconds: a few hundred steps of a very small byte-level model
    "tiny": dict(n_layer=2, n_head=4, n_embd=64, block_size=64, batch_size=16, max_iters=300,
                 lr=3e-3, min_lr=3e-4, warmup_iters=30, eval_interval=100, eval_iters=10,
                 checkpoint_interval=100, sample_tokens=120, tokenizer="byte", dropout=0.0, bias=False),
    # nanoGPT's CPU run of config/train_shakespeare_char.py (its README: val loss ~1.88); nanoGPT's
    # MLP uses torch.nn.GELU(), the exact erf form. The cosine decays over max_iters (nanoGPT's
    # lr_decay_iters = max_iters), so a shorter --max-iters still ends at min_lr.
    "shakespeare-cpu": dict(tokenizer="char", n_layer=4, n_head=4, n_embd=128, block_size=64, gelu="erf",
                            batch_size=12, max_iters=2000, lr=1e-3, min_lr=1e-4, warmup_iters=100,
                            beta1=0.9, beta2=0.99, weight_decay=0.1, grad_clip=1.0,
                            dropout=0.0, bias=False, eval_interval=250, eval_iters=50,
                            checkpoint_interval=250),
    # nanoGPT's model and recipe with the modern parts of Part 3 (RMSNorm, RoPE, SwiGLU), 1700 steps instead of
    # 2000 and evaluations every 500: val loss ~1.73 instead of ~1.90 in ~3/4 of the time on the same CPU
    # (scripts/compare_presets.py; what else was tried is in docs/training.md)
    "shakespeare-modern": dict(tokenizer="char", n_layer=4, n_head=4, n_embd=128, block_size=64, norm="rmsnorm",
                               pos="rope", mlp="swiglu", batch_size=12, max_iters=1700, lr=1e-3, min_lr=1e-4,
                               warmup_iters=100, lr_decay_iters=1700, beta1=0.9, beta2=0.99, weight_decay=0.1,
                               grad_clip=1.0, dropout=0.0, bias=False, eval_interval=500, eval_iters=50,
                               checkpoint_interval=500),
    # five-character Tang poems: one poem per line, 25 or 49 characters with the newline
    "tang": dict(tokenizer="char", n_layer=4, n_head=4, n_embd=192, block_size=64, batch_size=16,
                 max_iters=3000, lr=2e-3, min_lr=2e-4, warmup_iters=100, beta2=0.99, weight_decay=0.1,
                 grad_clip=1.0, dropout=0.0, bias=False, eval_interval=500, eval_iters=40,
                 checkpoint_interval=500, sample_tokens=150),
}

# the shipped corpus (zerollm.data.corpora) each preset trains on when no --data is given
PRESET_CORPUS = {"tiny": "shakespeare", "shakespeare-cpu": "shakespeare", "shakespeare-modern": "shakespeare",
                 "tang": "tang"}

# what `zerollm train` builds without --preset: nanoGPT's CPU model, 0.8M parameters, minutes on 2 cores
DEFAULT_PRESET = "shakespeare-cpu"

MODEL_FIELDS = {f.name for f in fields(GPTConfig)} - {"vocab_size"}
TRAIN_FIELDS = {f.name for f in fields(TrainConfig)}


def split_overrides(values):
    """{field: value} -> (model overrides, train overrides); unknown names are an error."""
    unknown = set(values) - MODEL_FIELDS - TRAIN_FIELDS
    if unknown:
        raise ZeroLLMError(f"unknown settings {sorted(unknown)}")
    return ({k: v for k, v in values.items() if k in MODEL_FIELDS},
            {k: v for k, v in values.items() if k in TRAIN_FIELDS})


def preset_values(preset):
    """The values a preset sets; no preset (None) means DEFAULT_PRESET's."""
    name = DEFAULT_PRESET if preset is None else preset
    if name not in PRESETS:
        raise ZeroLLMError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]


def sources(preset, overrides):
    """{field: where its value comes from}: "--flag", "preset NAME", "default" (the dataclass's), or
    ZEROLLM_DOCS_TEST for the model size the docs mode gives a preset (zerollm.io.docsmode)."""
    name = DEFAULT_PRESET if preset is None else preset
    out = {f: "default" for f in MODEL_FIELDS | TRAIN_FIELDS}
    out.update({f: f"preset {name}" for f in preset_values(preset)})
    out.update({f: docsmode.ENV for f in docsmode.preset_model({}, quiet=True)})
    out.update({f: "--" + f.replace("_", "-") for f in overrides or {}})
    return out


def build_configs(preset=None, overrides=None, vocab_size=None):
    """Preset (or DEFAULT_PRESET), then the user's overrides, on top of the dataclass defaults."""
    values = {**docsmode.preset_model(preset_values(preset)), **(overrides or {})}
    model_kw, train_kw = split_overrides(values)
    train_cfg = TrainConfig(**train_kw)
    check_schedule(train_cfg, given=set(overrides or {}))
    model_cfg = GPTConfig(vocab_size=vocab_size or 256, **model_kw)
    return model_cfg, train_cfg
