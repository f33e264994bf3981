"""Every field of a config dataclass as a command-line flag, checked against its declared range.

``add_config_flags(parser, GPTConfig)`` gives --n-layer, --norm, --bias/--no-bias, ...; used by
``zerollm train`` and every post-training stage (zerollm.align.stage).
"""

import argparse
import dataclasses

from zerollm.io.argtypes import Range, field_kind, field_range, undeclared_range
from zerollm.io.errors import ZeroLLMError
from zerollm.nn.lora import LoRAConfig


CHOICES = {"norm": ("layernorm", "rmsnorm"), "pos": ("learned", "sinusoidal", "rope"),
           "mlp": ("gelu", "swiglu"), "gelu": ("tanh", "erf"), "attn_impl": ("naive", "flash"),
           "dtype": ("float32", "float64"), "tokenizer": ("byte", "char", "bpe")}


def _flag_type(cls, field):
    """The argparse type of a field: its declared Range for numbers (zerollm.io.argtypes), else str.
    A numeric field without one still gets a safe range (finite, >= 0); tests/test_robust_cli.py
    fails until its real range is declared."""
    kind = field_kind(field)
    if kind in (int, float):
        return field_range(cls, field) or undeclared_range(kind)
    return kind


def add_config_flags(parser, cls, skip=(), defaults=None):
    """One flag per dataclass field; default None so that only the flags given override anything.
    A field's metadata may give "choices", "help" and "metavar" (dataclasses.field(metadata=...)).
    ``defaults``: {field: value} shown in the help instead of the dataclass's (a command's own defaults)."""
    group = parser.add_argument_group(f"{cls.__name__} fields")
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        flag = "--" + field.name.replace("_", "-")
        kind = field_kind(field)
        default = field.default if field.default is not dataclasses.MISSING else None
        default = (defaults or {}).get(field.name, default)
        about = field.metadata.get("help", "")
        if "(default" not in about:                  # a help text may say its default in its own words
            about = f"{about} (default {default})" if about else f"(default {default})"
        if kind is bool:
            group.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction, default=None,
                               help=about)
            continue
        flag_type = _flag_type(cls, field)
        choices = field.metadata.get("choices") or CHOICES.get(field.name)
        scope = f"; {flag_type.describe()}" if hasattr(flag_type, "describe") else ""
        group.add_argument(flag, dest=field.name, type=flag_type, choices=choices, default=None,
                           metavar=None if choices else field.metadata.get("metavar", kind.__name__.upper()),
                           help=f"{about[:-1]}{scope})")


def add_lora_arguments(p):
    """--lora-r/--lora-alpha/--lora-dropout/--lora-targets/--lora-modules-to-save (zerollm.nn.lora): train
    low-rank adapters (and the modules named whole) only."""
    g = p.add_argument_group("LoRA (low-rank adapters; the base weights stay frozen, see docs/lora.md)")
    g.add_argument("--lora-r", type=Range(int, 1, 65536), metavar="R", help="rank of the adapters; giving it turns "
                   "LoRA on. LoRA wants a higher --lr than a full fine-tune (about 3x)")
    g.add_argument("--lora-alpha", type=Range(float, 0, 1e6, low_open=True), metavar="A", help="scale alpha: the update is A B * alpha / r "
                   "(default 2 r)")
    g.add_argument("--lora-dropout", type=Range(float, 0, 1, high_open=True), metavar="P", help="dropout on the adapters' input (default 0)")
    g.add_argument("--lora-targets", metavar="NAMES", help="comma-separated modules to adapt, PEFT's names: "
                   "all-linear, c_attn, c_proj, c_fc, q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                   "down_proj (default all-linear: every linear layer of attention and MLP)")
    g.add_argument("--lora-modules-to-save", metavar="NAMES", help="comma-separated modules that train whole "
                   "beside the adapters, as PEFT's modules_to_save: wte (the token table; tied, also the head), "
                   "lm_head (an untied head) (default none)")


def lora_config(args):
    """The LoRAConfig the --lora-* flags ask for, or None without --lora-r."""
    given = {k: getattr(args, "lora_" + k, None) for k in ("alpha", "dropout", "targets", "modules_to_save")}
    r = getattr(args, "lora_r", None)
    if r is None:
        extra = [f"--lora-{k.replace('_', '-')}" for k, v in given.items() if v is not None]
        if len(extra) == 1:          # one whole sentence per case, so each has its 中文 (zerollm.io.zh)
            raise ZeroLLMError(f"{extra[0]} needs --lora-r R (the rank) to turn LoRA on")
        if extra:
            raise ZeroLLMError(f"{', '.join(extra)} need --lora-r R (the rank) to turn LoRA on")
        return None
    chosen = {}                                  # what is not given takes LoRAConfig's defaults
    if given["targets"] is not None:
        chosen["targets"] = _names(given["targets"]) or ("",)
    if given["modules_to_save"] is not None:
        chosen["modules_to_save"] = _names(given["modules_to_save"])
    return LoRAConfig(r=r, alpha=given["alpha"] if given["alpha"] is not None else 2.0 * r,
                      dropout=given["dropout"] or 0.0, **chosen)


def _names(text):
    """"c_attn, c_fc" -> ("c_attn", "c_fc"): a comma-separated list, blanks dropped."""
    return tuple(t.strip() for t in text.split(",") if t.strip())


def saved_lora(ckpt, asked):
    """On resume the checkpoint's LoRA settings win (the --lora-* flags may only repeat them)."""
    saved = (ckpt.objective or {}).get("lora")
    config = LoRAConfig.from_dict(saved) if saved else None
    if asked is not None and asked != config:
        raise ZeroLLMError(f"{ckpt.path} was trained {'with LoRA ' + str(saved) if saved else 'without LoRA'}; "
                           "resume it without --lora-* flags")
    return config
