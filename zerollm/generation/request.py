"""What a request to the decode loop is made of, and how it ends: Request (a prompt, how to sample, where
the tokens go), Token and Done (what ``emit`` receives), Context (how a group meets the end of the
context), Features (what the server's shared batch does beyond continuous batching) and the errors and
warnings of zerollm.generation.batching, whose Scheduler runs them.

    req = Request(prompt_ids, 50, Sampling(temperature=0.8), np.random.default_rng(7), emit=print)
    # emit gets Token(id, logprob, top, text) per new token, then Done(reason, message, text) once
"""

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.generation.sample import Sampling
from zerollm.generation.speculate import Speculation

class Token(NamedTuple):
    """One generated id; with logprobs asked for: its log-probability and the top (id, logprob) pairs;
    with a TextStream: ``text``, the whole characters it completes (stop strings cut out)."""
    id: int
    logprob: float | None = None
    top: tuple = ()
    text: str = ""


class Done(NamedTuple):
    """The end of a request: reason 'stop' (a stop id or stop string), 'length' (max_new_tokens),
    'cancelled', or 'error'; ``text``: what its TextStream held back until the end."""
    reason: str
    message: str = ""
    text: str = ""


class QueueFull(ZeroLLMError):
    """submit() found no room: the free rows and max_queue places beyond the batch are taken."""


class BeyondContext(ZeroLLMError):
    """A request that must fit the context does not (Scheduler.check)."""


class ContextWarning(UserWarning):
    """The prompt or the generation does not fit the context (see context_notes)."""


@dataclass(frozen=True)
class Context:
    """How a request of a group meets the end of the context: its prompt is cut to the last block_size
    tokens, and past the context ``window`` rolls a cache of ``sinks`` + ``window`` slots (RoPE or
    sinusoidal positions), or else each token recomputes the last block_size tokens. ``cache=False``
    recomputes every token from the start (the reference a cached run is checked against)."""
    window: int | None = None
    sinks: int = 0
    cache: bool = True


@dataclass(eq=False)
class Request:
    """What to generate and where the tokens go. ``emit`` is called from the scheduler's thread with
    each Token, then once with Done. ``top_logprobs``: None = no log-probabilities, k = the best k too."""
    prompt: list
    max_new_tokens: int
    sampling: Sampling
    rng: np.random.Generator
    emit: Callable | None = None
    stop_ids: frozenset = frozenset()
    top_logprobs: int | None = None
    text: object = None                        # a zerollm.generation.text.TextStream, or None: ids only
    context: Context | None = None             # None: prompt + max_new_tokens must fit the context
    keep_logits: bool = False                  # keep every step's (V,) logits in .logits (tests, measurements)
    grammar: object = None                     # a zerollm.generation.grammar TokenIndex: the text must match it
    logits: list = field(default_factory=list)
    ids: list = field(default_factory=list)    # every id generated so far, a stop id included
    cancelled: bool = False
    # what the engine's features did for this request (OpenAI's usage.prompt_tokens_details, vLLM's per-request
    # speculative decoding numbers): prompt tokens whose keys and values came from the prefix cache, and tokens
    # guessed (speculation) and kept
    cached: int = 0
    drafted: int = 0
    accepted: int = 0

    def cancel(self):
        """Ask the scheduler to drop this request at its next step (the client went away)."""
        self.cancelled = True


@dataclass(frozen=True)
class Features:
    """What the shared batch (``submit``) does beyond plain continuous batching; groups (``stream``) never
    use them. ``prefix_cache``: bytes of prompt keys and values kept for later prompts that begin alike
    (0 = off; zerollm.generation.prefix); ``step_tokens``: the tokens one step may put through the model
    (vLLM's max_num_batched_tokens): the running rows' next tokens (and their guesses) first, then at most
    the rest of prompts being prefilled, in chunks between the rows' steps (zerollm.generation.prefill;
    None = each prompt whole when it joins); ``speculation``: tokens guessed and checked in one forward
    (zerollm.generation.speculate); ``draft``: the smaller model (same tokenizer) that guesses when
    speculation.method is 'draft'."""
    prefix_cache: int = 0
    step_tokens: int | None = None
    speculation: Speculation = Speculation()
    draft: object = None

    def __post_init__(self):
        if self.prefix_cache < 0 or (self.step_tokens is not None and self.step_tokens < 1):
            raise ZeroLLMError(f"prefix_cache must be >= 0 bytes and step_tokens >= 1 token; got "
                               f"{self.prefix_cache}, {self.step_tokens}")
        if self.speculation.method not in ("off", "ngram", "draft") or self.speculation.tokens < 1:
            raise ZeroLLMError(f"speculation must be 'off', 'ngram' or 'draft' with >= 1 token; got "
                               f"{self.speculation.method!r}, {self.speculation.tokens}")
        if (self.speculation.method == "draft") != (self.draft is not None):
            raise ZeroLLMError("speculation 'draft' needs a draft model, and a draft model needs speculation 'draft'")



INCOMPLETE = "max_new_tokens was reached before the text matched its grammar: the output is incomplete"


def done(req, reason, message=""):
    """Done, with what the request's TextStream held back."""
    return Done(reason, message, req.text.flush() if req.text is not None else "")


# ----------------------------------------------------------------------------
# what the context allows

def context_notes(cfg, n_prompt, max_new_tokens, window=None):
    """The ContextWarnings a group with Context(window) will give, known before it starts: a command prints
    them before any text, so they never land in the middle of the streamed output."""
    if window is not None and cfg.pos != "learned":
        return []                              # a rolling cache: any length fits
    if n_prompt > cfg.block_size:             # one line: the context is full from the start
        crop = (f"prompt of {n_prompt} tokens is longer than the context ({cfg.block_size}); keeping its last "
                f"{cfg.block_size} tokens")
        return [crop + (f", so {_recomputed(cfg)}" if max_new_tokens > 1 else "")]
    if n_prompt + max_new_tokens - 1 > cfg.block_size:
        return [full_message(cfg)]
    return []


def full_message(cfg):
    return f"the context is full ({cfg.block_size} tokens) before the last new token: {_recomputed(cfg)}"


def _recomputed(cfg):
    how = ("use --window for a rolling cache" if cfg.pos != "learned" else
           "this model's positions are learned, so its context cannot roll")
    return f"each further token recomputes the last block_size tokens (slower); {how}"


def rolls(cfg, context):
    return context.window is not None and cfg.pos != "learned"

