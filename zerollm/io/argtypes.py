"""Declared ranges for every number a user can give: argparse types, and checks for values read from files.

A ``Range`` is both an argparse ``type=`` (a bad value becomes a one-line usage error at parse time)
and a checker for the same value found in a config file (``Range.check``), so the command line and
the files on disk agree on what is allowed:

    >>> LEARNING_RATE("3e-4")
    0.0003
    >>> Range(int, 1, 8).check(9, "n_head")
    Traceback (most recent call last):
    zerollm.io.errors.ZeroLLMError: n_head must be a whole number from 1 to 8, got 9

Floats are always finite: "nan", "inf" and "1e400" are refused, whatever the bounds.
Dataclass fields that become flags (``zerollm.training.flags.add_config_flags``) find their range in
``field_range``: the field's own metadata ``{"range": Range(...)}`` first, then ``FIELD_RANGES``.
"""

import argparse
import dataclasses
import math
import re
import typing

from zerollm.io.errors import ZeroLLMError

_INT = re.compile(r"[+-]?\d[\d_]*")      # what int() accepts, but ASCII digits only


def _show(bound):
    """Bounds as a user would type them: 1e+06, not 1000000.0; whole numbers in full."""
    return f"{bound:g}" if isinstance(bound, float) else str(bound)


class Range:
    """Whole numbers (kind=int) or finite floats (kind=float) from ``low`` to ``high``.

    ``low_open``/``high_open`` exclude a bound (0 < p for a probability). ``None`` = unbounded
    (floats stay finite all the same).
    """

    def __init__(self, kind, low=None, high=None, *, low_open=False, high_open=False, declared=True):
        if kind not in (int, float):
            raise ZeroLLMError(f"a Range is of int or float, got {kind!r}")
        self.kind, self.low, self.high = kind, low, high
        self.low_open, self.high_open = low_open, high_open
        self.declared = declared        # False: a stand-in for a field nobody gave a range yet
        self.__name__ = "whole number" if kind is int else "number"   # argparse names the type with it

    # ------------------------------------------------------------------
    def describe(self):
        """'a whole number from 1 to 64', 'a number in (0, 1]', 'a number >= 0', ...

        >>> Range(float, 0, 1e6).describe()
        'a number from 0 to 1e+06'
        """
        what = "a whole number" if self.kind is int else "a number"
        low, high = _show(self.low), _show(self.high)
        if self.low is not None and self.high is not None:
            if not (self.low_open or self.high_open):
                return f"{what} from {low} to {high}"
            return f"{what} in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{what} {'>' if self.low_open else '>='} {low}"
        if self.high is not None:
            return f"{what} {'<' if self.high_open else '<='} {high}"
        return f"a finite {what[2:]}" if self.kind is float else what

    def contains(self, value):
        if self.kind is float and not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    # ------------------------------------------------------------------
    def __call__(self, text):
        """argparse: text -> value, or ArgumentTypeError (a one-line usage error)."""
        value = self._parse(text.strip())
        if value is None or not self.contains(value):
            raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {text!r}")
        return value

    def _parse(self, text):
        if not text.isascii():             # float("١٢") is 12.0: numbers are typed in ASCII digits here
            return None
        if self.kind is int:
            if not _INT.fullmatch(text) or len(text) > 40:     # no '1e3', no '٣', no 10**4300 digits
                return None
            return int(text)
        try:
            value = float(text)
        except ValueError:
            return None
        return value if math.isfinite(value) else None

    def check(self, value, name):
        """``value`` (read from a file or given in Python) -> value, or a ZeroLLMError naming ``name``."""
        ok_type = (isinstance(value, int) and not isinstance(value, bool) if self.kind is int
                   else isinstance(value, (int, float)) and not isinstance(value, bool))
        if not ok_type or not self.contains(value):
            raise ZeroLLMError(f"{name} must be {self.describe()}, got {value!r}")
        return self.kind(value)

    def __repr__(self):
        return f"Range({self.kind.__name__}, {self.low}, {self.high})"


# ----------------------------------------------------------------------------
# the ranges the commands share

MAX_SIZE = 2 ** 31 - 1                  # any one size: beyond it no machine has the memory anyway

SEED = Range(int, 0, 2 ** 32 - 1)       # np.random.default_rng takes seeds >= 0; 32 bits as everywhere
# sample's and chat's --seed: the server's "seed" range (OpenAI's int64), so any API answer can be replayed
SAMPLING_SEED = Range(int, 0, 2 ** 63 - 1)
THREADS = Range(int, 1, 1024)
PROBABILITY = Range(float, 0, 1, low_open=True)          # top-p, in (0, 1]
FRACTION = Range(float, 0, 1, low_open=True, high_open=True)   # a split, in (0, 1)
LEARNING_RATE = Range(float, 0, 10)
COUNT = Range(int, 1, 10 ** 9)          # steps, intervals: whole numbers from 1
SIZE = Range(int, 1, MAX_SIZE)          # batch sizes, lengths, widths: memory decides (zerollm.model.budget)


positive_int = SIZE                     # the older name: a whole number from 1 (to MAX_SIZE)


def int_in_range(low, high):
    """A type for whole numbers from low to high inclusive."""
    return Range(int, low, high)


# ----------------------------------------------------------------------------
# ranges of config dataclass fields (GPTConfig, TrainConfig, and any config added later)

FIELD_RANGES = {
    # GPTConfig
    "vocab_size": Range(int, 1, 2 ** 24),
    "block_size": Range(int, 1, 2 ** 20),
    "n_layer": Range(int, 1, 10_000),
    "n_head": Range(int, 1, 2 ** 16),
    "n_kv_head": Range(int, 1, 2 ** 16),
    "n_embd": Range(int, 1, 2 ** 20),
    "n_inner": Range(int, 1, 2 ** 22),
    "norm_eps": Range(float, 0, 1, low_open=True),
    "rope_theta": Range(float, 0, 1e12, low_open=True),
    "dropout": Range(float, 0, 1, high_open=True),
    "init_std": Range(float, 0, 10, low_open=True),
    "n_expert": Range(int, 0, 2 ** 16),                 # mixture of experts (zerollm.nn.moe); 0 = dense
    "n_expert_active": Range(int, 1, 2 ** 16),
    "moe_every": Range(int, 1, 10_000),
    "capacity_factor": Range(float, 0, 1e6),            # 0 = no capacity limit
    "aux_loss_coef": Range(float, 0, 1e6),
    "z_loss_coef": Range(float, 0, 1e6),
    "n_shared_expert": Range(int, 0, 2 ** 16),
    "head_dim": Range(int, 1, 2 ** 16),                 # None (C // nh) is not checked
    # TrainConfig
    "batch_size": Range(int, 1, 2 ** 24),
    "max_iters": COUNT,
    "lr": LEARNING_RATE,
    "min_lr": LEARNING_RATE,
    "warmup_iters": Range(int, 0, 10 ** 9),
    "lr_decay_iters": COUNT,
    "weight_decay": Range(float, 0, 10),
    "beta1": Range(float, 0, 1, high_open=True),
    "beta2": Range(float, 0, 1, high_open=True),
    "grad_clip": Range(float, 0, 1e6),          # 0 = no clipping
    "grad_accum": Range(int, 1, 2 ** 16),
    "eval_interval": COUNT,
    "eval_iters": Range(int, 1, 10 ** 6),
    "checkpoint_interval": COUNT,
    "sample_tokens": Range(int, 0, 100_000),
    "seed": SEED,
    "TrainConfig.vocab_size": Range(int, 256, 2 ** 24),   # the BPE size asked for (byte: 256)
    # post-training stages (zerollm.align.objectives, zerollm.align.rl)
    "RewardConfig.margin": Range(float, 0, 1e6),
    "DPOConfig.beta": Range(float, 0, 1e3, low_open=True),
    "DistillConfig.beta": Range(float, 0, 1),              # GKD's JSD: 0 forward KL, 1 reverse KL
    "DistillConfig.temperature": Range(float, 0, 100, low_open=True),
    "DistillConfig.ce_weight": Range(float, 0, 1),
    "DistillConfig.on_policy": Range(float, 0, 1),
    "DistillConfig.sample_temperature": Range(float, 0, 100, low_open=True),
    "RolloutConfig.prompts_per_step": Range(int, 1, 2 ** 16),
    "RolloutConfig.max_new_tokens": Range(int, 1, 2 ** 20),
    "RolloutConfig.temperature": Range(float, 0, 100, low_open=True),    # rollouts sample: > 0
    "RolloutConfig.top_k": Range(int, 1, 2 ** 24),
    "RolloutConfig.top_p": PROBABILITY,
    "RolloutConfig.epochs": Range(int, 1, 1000),
    "RolloutConfig.minibatches": Range(int, 1, 2 ** 16),
    "RolloutConfig.epsilon": Range(float, 0, 1, low_open=True, high_open=True),
    "RolloutConfig.eval_prompts": Range(int, 1, 10 ** 6),
    "RolloutConfig.eval_temperature": Range(float, 0, 100),
    "PPOConfig.gamma": Range(float, 0, 1),
    "PPOConfig.lam": Range(float, 0, 1),
    "PPOConfig.vf_coef": Range(float, 0, 1e6),
    "PPOConfig.epsilon_value": Range(float, 0, 1e6),
    "PPOConfig.ent_coef": Range(float, 0, 1e6),
    "PPOConfig.kl_coef": Range(float, 0, 1e6),
    "PPOConfig.target_kl": Range(float, 0, 1e6, low_open=True),
    "PPOConfig.kl_horizon": COUNT,
    "GRPOConfig.group_size": Range(int, 2, 2 ** 16),
    "GRPOConfig.beta": Range(float, 0, 1e3),
}


def undeclared_range(kind):
    """What a numeric field without a declared range accepts meanwhile: >= 0, finite, not absurd."""
    return Range(kind, 0, MAX_SIZE if kind is int else 1e12, declared=False)


def field_kind(field):
    """int / float / str / bool from a dataclass field's annotation (``int | None`` counts as int)."""
    args = [a for a in typing.get_args(field.type) if a is not type(None)]
    return args[0] if args else field.type


def field_range(cls, field):
    """The declared Range of a numeric dataclass field, or None when it has none.

    Looked up in the field's metadata ("range"), then FIELD_RANGES under "Class.field" for the class
    and its bases (PPOConfig inherits RolloutConfig's), then under the bare "field".
    """
    if not isinstance(field, dataclasses.Field):
        field = {f.name: f for f in dataclasses.fields(cls)}[field]
    if field.metadata.get("range") is not None:
        return field.metadata["range"]
    for klass in cls.__mro__:
        key = f"{klass.__name__}.{field.name}"
        if key in FIELD_RANGES:
            return FIELD_RANGES[key]
    return FIELD_RANGES.get(field.name)
