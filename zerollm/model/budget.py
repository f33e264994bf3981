"""Memory budgets: what a command will need, compared with what the machine has, BEFORE allocating.

NumPy asks for an array's memory all at once. An impossible size fails with a 40-line
``_ArrayMemoryError``; a merely too-large one may be granted (Linux over-commits) and then swap the
machine to a halt. So every command that builds arrays from user-given sizes first adds up what
it will hold, in bytes, and refuses with one line when that is more than is available:

    training needs about 224.1 GiB of memory but 21.3 GiB is available (MemAvailable); lower
    --n-embd, --n-layer or --batch-size (or pass --force to try anyway)

What is counted (B batch, T tokens, C = n_embd, L = n_layer, V = vocab, nh heads, H = MLP width):
parameters; for training also their gradients and AdamW's two moments; the activations each layer
keeps for the backward pass, including the (B, nh, T, T) attention weights of the naive attention;
the (B, T, V) logits and their softmax; for generation the KV cache. The estimate errs on the high
side; tests/test_budget.py checks it against the peak that tracemalloc measures.
"""

import os
import re
import warnings
from dataclasses import dataclass, replace
from typing import NamedTuple

from zerollm.io.errors import ZeroLLMError
from zerollm.nn.flash import DEFAULT_TILE as FLASH_TILE

ENV = "ZEROLLM_MEMORY_LIMIT"     # e.g. "2GiB": pretend only this much is available (tests, shared machines)
_UNITS = {"": 1, "b": 1, "k": 2 ** 10, "kb": 10 ** 3, "kib": 2 ** 10, "m": 2 ** 20, "mb": 10 ** 6,
          "mib": 2 ** 20, "g": 2 ** 30, "gb": 10 ** 9, "gib": 2 ** 30, "t": 2 ** 40, "tb": 10 ** 12, "tib": 2 ** 40}


class MemoryBudgetError(ZeroLLMError):
    """The estimated memory is more than the machine has available."""


def fmt_bytes(n):
    """1536 -> '1.5 KiB'.

    >>> fmt_bytes(3 * 2 ** 30)
    '3.0 GiB'
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def parse_bytes(text):
    """'2GiB' -> 2147483648; a plain number is bytes.

    >>> parse_bytes("512M"), parse_bytes("1.5 GB")
    (536870912, 1500000000)
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not match or match.group(2).lower() not in _UNITS:
        raise ZeroLLMError(f"{ENV}={text!r} is not a size; write e.g. 4GiB, 512MiB or 1000000000")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


# ----------------------------------------------------------------------------
# what the machine has

def _meminfo_available():
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _read_int(path):
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):      # missing, or "max" (no limit)
        return None


def _cgroup_available():
    """A container's memory limit minus its usage (cgroup v2, then v1); None when unlimited."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None and limit < 2 ** 60:   # v1 writes ~2^63 for "none"
            return max(limit - usage, 0)
    return None


def _address_space_left():
    """What ``ulimit -v`` (RLIMIT_AS) still allows this process, or None."""
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        used = 0
    return max(soft - used, 0)


def _sysconf_available():
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def available_memory(environ=None):
    """(bytes, where that number comes from), or (None, reason) when nothing can tell.

    The smallest of: $ZEROLLM_MEMORY_LIMIT, MemAvailable (/proc/meminfo), the cgroup limit minus
    usage (containers), the address space ``ulimit -v`` leaves. Without /proc: free physical pages.
    """
    env = os.environ if environ is None else environ
    found = []
    if env.get(ENV):
        found.append((parse_bytes(env[ENV]), f"${ENV}"))
    for source, probe in (("MemAvailable", _meminfo_available), ("cgroup limit", _cgroup_available),
                          ("ulimit -v", _address_space_left)):
        value = probe()
        if value is not None:
            found.append((value, source))
    if not any(source == "MemAvailable" for _, source in found):
        free = _sysconf_available()
        if free is not None:
            found.append((free, "free memory"))
    return min(found) if found else (None, "unknown")


# ----------------------------------------------------------------------------
# estimates

@dataclass(frozen=True)
class Estimate:
    """Bytes a command will hold at its peak, part by part, and the flags that make it smaller."""
    what: str                 # "training", "sampling", ...
    parts: tuple              # ((label, bytes), ...)
    hint: str                 # "--batch-size, --block-size or --n-embd"

    @property
    def total(self):
        return sum(n for _, n in self.parts)

    def table(self, available=None):
        """Lines for ``zerollm train --dry-run`` and ``zerollm shapes``."""
        width = max(len(label) for label, _ in self.parts + (("total", 0),))
        lines = [f"  {label:<{width}}  {fmt_bytes(n):>11}" for label, n in self.parts if n]
        lines.append(f"  {'total':<{width}}  {fmt_bytes(self.total):>11}")
        if available is not None and available[0] is not None:
            lines.append(f"  {'available':<{width}}  {fmt_bytes(available[0]):>11}   ({available[1]})")
        return "\n".join(lines)


def param_count(cfg):
    """Number of parameters of a GPTConfig, without building anything (a 10,000-layer config too).

    >>> from zerollm.model.config import GPTConfig
    >>> param_count(GPTConfig())                 # GPT-2 small
    124439808
    """
    n_moe = len(cfg.moe_layers)                   # mixture-of-experts blocks have their own size
    total = 0
    for one, blocks in ((_one_layer_shapes(cfg, moe=False), cfg.n_layer - n_moe), (_one_layer_shapes(cfg), n_moe)):
        if blocks:
            total += blocks * sum(_numel(s) for name, s in one.items() if name.startswith("h.0."))
    one = _one_layer_shapes(cfg, moe=False)
    return total + sum(_numel(s) for name, s in one.items() if not name.startswith("h."))


def _one_layer_shapes(cfg, moe=True):
    """The shapes of a one-block model: with an MoE block if cfg has experts and ``moe``, else dense."""
    from zerollm.model.gpt import param_shapes
    if moe and cfg.n_expert:
        return param_shapes(replace(cfg, n_layer=1, moe_every=1))
    return param_shapes(replace(cfg, n_layer=1, n_expert=0, n_shared_expert=0))


def init_bytes(cfg):
    """Random initialisation draws each matrix in float64 before casting (the stacked experts of an MoE
    block in one draw): the largest one, twice over."""
    return 2 * 8 * max(_numel(s) for s in _one_layer_shapes(cfg).values())


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _itemsize(cfg):
    return 8 if cfg.dtype == "float64" else 4


def layer_numbers(cfg, B, T, Tk=None, training=True):
    """Numbers one block holds for B sequences of T new tokens attending to Tk keys.

    Per token: the two norms' inputs and outputs (4C), the fused qkv (W), QK-norm's and RoPE's q and k,
    the heads merged back (C), the residual (C), the MLP's hidden activations (3H for GELU: input,
    gate, output; 5H for SwiGLU), dropout masks; per token and head: one row of Tk attention
    weights (twice with dropout), which flash attention never stores.
    """
    Tk = T if Tk is None else Tk
    C, H, hs = cfg.n_embd, cfg.n_inner, cfg.head_size
    W = (cfg.n_head + 2 * cfg.n_kv_head) * hs
    hidden = (5 if cfg.mlp == "swiglu" else 3) * H
    if cfg.n_expert:
        # an MoE block (zerollm.nn.moe), counted for every block: k (token, expert) pairs, each with its
        # hidden activations and its gathered input, output and combine slot; the router's E
        # probabilities (and logits); the shared experts' hidden activations
        hidden = cfg.n_expert_active * (hidden + 3 * C) + 3 * cfg.n_expert + cfg.n_shared_expert * hidden
    per_token = 5 * C + cfg.attn_width + W + hidden      # the heads merged back are nh hs wide (C unless head_dim)
    if cfg.pos == "rope":
        per_token += W
    if cfg.qk_norm:                                      # QK-norm's normalised q and k (Qwen3)
        per_token += W
    if cfg.dropout > 0 and training:
        per_token += 3 * C
    if cfg.attn_impl == "flash":
        scores = cfg.n_head * min(Tk, FLASH_TILE)         # one tile of scores at a time
    else:
        scores = cfg.n_head * Tk * (2 if cfg.dropout > 0 and training else 1)
    return B * T * (per_token + scores)


def training(cfg, batch_size, *, grad_accum=1, threads=1, trainable=None, reference=False):
    """Peak memory of one optimizer step of ``zerollm train`` (and of every stage).

    trainable: how many numbers the optimizer updates when that is not all of them (LoRA adapters,
    zerollm.nn.lora): gradients and AdamW moments are kept for those only. reference: a frozen second
    copy of the weights (DPO, PPO, GRPO without LoRA)."""
    B, T, V, L = batch_size, cfg.block_size, cfg.vocab_size, cfg.n_layer
    it, P = _itemsize(cfg), param_count(cfg)
    Pt = P if trainable is None else trainable
    grads = Pt * it * (threads + (1 if grad_accum > 1 else 0))      # one set per shard, plus the running sum
    acts = layer_numbers(cfg, B, T) * it
    parts = (("parameters", P * it),
             ("initialisation (float64)", init_bytes(cfg)),
             ("frozen reference (a second copy)", P * it if reference else 0),
             ("gradients" + (" (adapters only)" if trainable is not None else ""), grads),
             ("AdamW moments (m, v) + scratch", 3 * Pt * it),
             ("activations kept for backward", L * acts + acts),      # + one layer's backward in flight
             ("logits and softmax (B, T, V)", 3 * B * T * V * it),
             ("batch indices", 5 * 8 * B * (T + 1)))
    return Estimate("training", parts, "--batch-size, --block-size, --n-embd or --n-layer")


def post_training(cfg, batch_size, *, grad_accum=1, threads=1, trainable=None, reference=False, rollout_rows=0,
                  value_head=False):
    """Peak memory of a post-training step (zerollm.align.stage): ``training`` for ``batch_size`` sequences
    (with its frozen reference for DPO, PPO, GRPO), plus for PPO/GRPO the rollout batch of ``rollout_rows``
    answers: sampling them (a KV cache of a full context each, the last logits in float64), their
    log-probabilities, and the buffer the optimizer steps learn from (ids, mask, the policy's and the
    reference's log-probabilities, advantages; values and returns for PPO), each (rows, T)."""
    base = training(cfg, batch_size, grad_accum=grad_accum, threads=threads, trainable=trainable, reference=reference)
    it, T, R = _itemsize(cfg), cfg.block_size, rollout_rows
    parts = list(base.parts)
    if R:
        kv = 2 * cfg.n_layer * R * cfg.n_kv_head * T * cfg.head_size * it
        parts.append(("rollout sampling (KV cache, logits)", kv + 3 * R * cfg.vocab_size * 8 + layer_numbers(
            cfg, R, 1, Tk=T, training=False) * it))
        per_token = 8 + 1 + 8 * (3 + (3 if value_head else 0))       # ids, mask, float64 logp/ref/adv (+values)
        parts.append(("rollout buffer (rows, T)", R * T * per_token))
        parts.append(("log-probabilities of the rollouts (rows, T, V)", 2 * R * T * cfg.vocab_size * it))
    hint = ("--prompts-per-step, --group-size or --max-new-tokens (or --minibatches)" if R
            else "--batch-size (or use a smaller starting model)")
    return Estimate(base.what, tuple(parts), hint)


def with_teacher(estimate, teacher_cfg, teacher_bytes, batch_size, T):
    """``estimate`` plus distillation's teacher (zerollm.align.objectives.distill), counted at its own size, not the
    student's: its weights as opened (``teacher_bytes``: blocks for a quantized GGUF file), its forward over the
    student's windows of T tokens that keeps nothing for a backward (two layers' activations in flight, as
    ``inference``), and the (B, T, V) arrays the divergence holds: the teacher's logits, both distributions'
    log-probabilities and probabilities, and the gradient it gives the student."""
    it, B, V = _itemsize(teacher_cfg), batch_size, teacher_cfg.vocab_size
    acts = layer_numbers(teacher_cfg, B, T, training=False) * it
    parts = estimate.parts + (("teacher (its own weights)", teacher_bytes),
                              ("teacher's forward (no backward)", 2 * acts),
                              ("teacher's logits and the divergence (B, T, V)", 5 * B * T * V * it))
    return Estimate(estimate.what, parts, estimate.hint)


def in_blocks(estimate, base_bytes):
    """``estimate`` with its parameters counted as they are held when the linear layers are kept in quantized blocks
    (QLoRA's base: zerollm.interop.quant.quantized_bytes), not in float."""
    parts = tuple(("parameters (linear layers in blocks)", base_bytes) if name == "parameters" else (name, n)
                  for name, n in estimate.parts)
    return Estimate(estimate.what, parts, estimate.hint)


class Purpose(NamedTuple):
    """What an estimate is for and the flags that make it smaller: the two ends of its refusal,
    "{what} needs about ... ; lower {hint}"."""
    what: str
    hint: str


def inference(cfg, batch, T, purpose=Purpose("sampling", "the sizes"), *, cache_slots=0, keep=False, fresh=False,
              loss=False):
    """Peak memory of a forward pass over T tokens (generation: plus a KV cache of ``cache_slots``).

    keep=False (eval mode) holds one layer's activations at a time; keep=True all of them.
    fresh=True: the weights are initialised at random (not loaded). loss=True: the cross-entropy's
    softmax over the (B, T, V) logits as well (evaluation).
    """
    it = _itemsize(cfg)
    kv = 2 * cfg.n_layer * batch * cfg.n_kv_head * cache_slots * cfg.head_size * it
    acts = layer_numbers(cfg, batch, T, Tk=max(T, cache_slots), training=False) * it
    parts = (("parameters", param_count(cfg) * it),
             ("initialisation (float64)", init_bytes(cfg) if fresh else 0),
             ("KV cache", kv),
             ("activations", (cfg.n_layer if keep else 2) * acts),
             ("logits (B, T, V)", 2 * batch * T * cfg.vocab_size * it     # the head's product, and its copy
              + 3 * batch * cfg.vocab_size * 8),                            # sampling: the last row in float64
             ("cross-entropy (B, T, V)", 2 * batch * T * cfg.vocab_size * it if loss else 0))
    return Estimate(purpose.what, parts, purpose.hint)


def tokenizing(n_bytes, what="tokenizing the text", hint="a smaller text file (split it into parts)"):
    """Memory to read and encode a text of ``n_bytes``: the bytes, the str (up to 4 bytes a character),
    the ids as a Python list (8 bytes a reference) and as an array (up to 4 bytes an id)."""
    return Estimate(what, (("text", 5 * n_bytes), ("token ids", 12 * n_bytes)), hint)


def reading(paths, what="loading the arrays"):
    """Memory to read whole files into arrays: their sizes on disk (safetensors stores raw bytes)."""
    sizes = []
    for path in paths:
        try:
            sizes.append((os.path.basename(path), os.path.getsize(path)))
        except OSError:
            pass                    # the reader says what is wrong with it
    return Estimate(what, tuple(sizes), "nothing on the command line: the files are this big")


def loading(cfg, *, optimizer=False, copies=1, what="loading the model"):
    """Memory to load a model of ``cfg`` (with AdamW's moments for a resume), ``copies`` times over."""
    P = param_count(cfg) * _itemsize(cfg)
    parts = (("parameters", copies * P),) + ((("AdamW moments (m, v)", 2 * P),) if optimizer else ())
    return Estimate(what, parts, "nothing on the command line: the model is this big")


# ----------------------------------------------------------------------------
# the check

def require(estimate, *, force=None, force_flag="--force"):
    """Refuse (MemoryBudgetError, one line) when ``estimate`` exceeds the available memory.

    force=True only warns; force=False refuses and names ``force_flag``; force=None (a caller that has
    no such flag: a library call, or a command whose --force means something else) refuses plainly.
    """
    have, source = available_memory()
    if have is None or estimate.total <= have:
        return
    message = (f"{estimate.what} needs about {fmt_bytes(estimate.total)} of memory but {fmt_bytes(have)} "
               f"is available ({source}); lower {estimate.hint}")
    if force:
        warnings.warn(message + f"; trying anyway because of {force_flag}", stacklevel=2)
        return
    tail = f" (or pass {force_flag} to try anyway)" if force_flag and force is not None else ""
    raise MemoryBudgetError(message + tail)


def add_force_argument(parser, replaces=None, anyones=False):
    """--force: go on past the memory estimate, and (``replaces``: what, e.g. "files in --out") replace that
    output although this command did not create it; ``anyones``: whoever made it (a file that does not say
    who wrote it, so the command refuses its own earlier output too)."""
    also = f", and replace {replaces}{'' if anyones else ' that this command did not create'}" if replaces else ""
    parser.add_argument("--force", action="store_true",
                        help="go on even when the memory estimate is more than the memory available" + also)
