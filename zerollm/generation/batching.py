"""The one decode loop: add requests, then ``step()`` until they are done (nano-vllm's engine).

    scheduler = Scheduler(model, max_batch=16, max_queue=64)                   # the server's thread
    threading.Thread(target=scheduler.run, args=(stop_event,), daemon=True).start()
    scheduler.submit(Request(prompt_ids, 50, Sampling(temperature=0.8), np.random.default_rng(7), emit=print))

    for events in Scheduler(model).stream(requests):                           # or in the caller's thread
        ...    # one step's [(request index, Token | Done)]

Every client decodes here: the HTTP server, and through zerollm.generation.decode `zerollm sample`,
`zerollm chat`, the samples printed while training, RL rollouts, task evaluation and lm-eval. No other
code calls the model with a KV cache in a loop.

One step (Yu et al. 2022, "Orca: iteration-level scheduling"; the loop vLLM and TGI run):

    1. rows whose client went away leave the batch
    2. waiting requests join, up to max_batch rows: their prompts are prefilled (those of one length
       together) into a per-row cache (zerollm.model.kvcache), which is appended to the batch's cache
    3. every row chooses its next token from its own logits with zerollm.generation.sample.choose, drawing from
       its OWN generator: what a row samples cannot depend on which other rows share the batch
    4. rows that ended (a stop id, a stop string, max_new_tokens) leave at once
    5. one forward of the (A, 1) new tokens, each row at its own position -> the next (A, V) logits

So a batch costs one (A, C) @ (C, V)-shaped pass per layer instead of A passes of (1, C). The only
difference between a row in a batch and the same request alone is floating-point rounding (a matrix
product of A rows may add in another order than one of 1 row); tests/test_batching.py measures it.
Learned positions, sinusoidal and RoPE all work: each row reads its own position table entries.

Requests given to ``stream`` run as a group instead: prompts of one length, one plain KV cache, rows
in lockstep until each ends, so a row's numbers do not depend on requests outside its group. A group's
requests may carry a ``Context``: then the prompt is cut to its last block_size tokens, and generation
past the context either rolls a window cache (RoPE or sinusoidal positions) or recomputes the last
block_size tokens for every further token, as nanoGPT does (slower; each warned once, ContextWarning).
Such a group takes its logits from model.forward (the head over every prompt position), the same
computation its recomputed steps use. A request without a Context must fit: prompt + max_new_tokens
<= block_size (``check``, the one place that says so).

A request may carry a zerollm.generation.text.TextStream: each Token then brings the whole characters
it completes (``text``), a stop string ends the row with Done("stop"), and Done brings what was held back.

A request may carry a grammar (``grammar``: a zerollm.generation.grammar TokenIndex): its row keeps a state
in the grammar's automaton, chooses only among the ids that state allows (its stop ids only where the text
is complete), and ends with Done("stop") once nothing more may follow; max_new_tokens reached first gives
Done("length") with a message saying the text is incomplete. Grammar rows are not speculated.

Shapes: A active rows, P prompt length, T tokens so far, V vocabulary.
"""

import collections
import threading
import warnings
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.model.kvcache import KVCache
from zerollm.generation.prefix import PrefixCache
from zerollm.generation.sample import GREEDY_BELOW, Sampling, choose, probabilities, token_counts
from zerollm.generation.speculate import Speculation, lookup


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

    def cancel(self):
        """Ask the scheduler to drop this request at its next step (the client went away)."""
        self.cancelled = True


@dataclass(frozen=True)
class Features:
    """What the shared batch (``submit``) does beyond plain continuous batching; groups (``stream``) never
    use them. ``prefix_cache``: bytes of prompt keys and values kept for later prompts that begin alike
    (0 = off; zerollm.generation.prefix); ``prefill_chunk``: at most this many prompt tokens prefilled per
    step, between the running rows' steps (None = each prompt whole when it joins); ``speculation``:
    tokens guessed and checked in one forward (zerollm.generation.speculate); ``draft``: the smaller model
    (same tokenizer) that guesses when speculation.method is 'draft'."""
    prefix_cache: int = 0
    prefill_chunk: int | None = None
    speculation: Speculation = Speculation()
    draft: object = None

    def __post_init__(self):
        if self.prefix_cache < 0 or (self.prefill_chunk is not None and self.prefill_chunk < 1):
            raise ZeroLLMError(f"prefix_cache must be >= 0 bytes and prefill_chunk >= 1 token; got "
                               f"{self.prefix_cache}, {self.prefill_chunk}")
        if self.speculation.method not in ("off", "ngram", "draft") or self.speculation.tokens < 1:
            raise ZeroLLMError(f"speculation must be 'off', 'ngram' or 'draft' with >= 1 token; got "
                               f"{self.speculation.method!r}, {self.speculation.tokens}")
        if (self.speculation.method == "draft") != (self.draft is not None):
            raise ZeroLLMError("speculation 'draft' needs a draft model, and a draft model needs speculation 'draft'")


@dataclass(eq=False)
class _Row:
    req: Request
    counts: np.ndarray                          # (V,) how often each id was generated
    seen: np.ndarray | None                     # (V,) bool, ids in the prompt (repetition_penalty)
    blocks: list = field(default_factory=list)  # prefix-cache blocks held for its prompt
    forced: int | None = None                   # its next id, already drawn (a refused guess's replacement)
    ended: bool = False                         # Done sent while its guesses were emitted: leaves next step
    state: int = 0                              # where its text is in its grammar's automaton (Request.grammar)


@dataclass(eq=False)
class _Prefill:
    """Requests with prompts of one length (and one prefix-cache hit) being prefilled, ``done`` tokens so far."""
    reqs: list
    cache: KVCache
    done: int
    blocks: list                                # per request, the prefix-cache blocks held for it


@dataclass(eq=False)
class _Batch:
    """Rows that step together over one KV cache."""
    rows: list
    cache: KVCache | None                       # None: each step recomputes the last block_size tokens
    logits: np.ndarray                          # (A, V) each row's next logits
    context: Context | None = None              # a group's; None for the shared batch
    tokens: np.ndarray | None = None            # (A, T) prompt and output, kept where recomputing may come
    warned: bool = False                        # "the context is full" said
    draft: KVCache | None = None                # the draft model's cache of the same rows (Features.draft)


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
        return [_full_message(cfg)]
    return []


def _full_message(cfg):
    return f"the context is full ({cfg.block_size} tokens) before the last new token: {_recomputed(cfg)}"


def _recomputed(cfg):
    how = ("use --window for a rolling cache" if cfg.pos != "learned" else
           "this model's positions are learned, so its context cannot roll")
    return f"each further token recomputes the last block_size tokens (slower); {how}"


def _rolls(cfg, context):
    return context.window is not None and cfg.pos != "learned"


# ----------------------------------------------------------------------------
# the scheduler

class Scheduler:
    """The loop of the module docstring. ``submit`` and ``cancel`` may be called from any thread;
    ``run``, ``step`` or ``stream`` from one thread only, the one that owns the model. ``allowed``: (V,)
    bool, the ids that may be chosen (those the tokenizer can decode); None = all."""

    def __init__(self, model, *, max_batch=16, max_queue=64, allowed=None, features=Features()):
        if max_batch < 1 or max_queue < 0:
            raise ZeroLLMError(f"max_batch must be >= 1 and max_queue >= 0; got {max_batch}, {max_queue}")
        self.model, self.max_batch, self.max_queue, self.allowed = model.eval(), max_batch, max_queue, allowed
        self.cfg, self.features = model.config, features
        self.waiting = collections.deque()
        self.wake = threading.Condition()
        self.joining = []                      # taken from waiting, being prefilled: not yet in rows
        self.prefills = []                     # their _Prefill groups, oldest first
        self.prefix = PrefixCache(features.prefix_cache) if features.prefix_cache else None
        self.shared = self._empty_batch()      # the continuous batch (submit)
        self.groups = []                       # batches of stream()
        self.steps = 0                         # steps that ran a forward pass
        self.drafted = self.accepted = 0       # tokens guessed and kept (speculation)

    def _empty_batch(self):
        draft = self.features.draft
        return _Batch([], KVCache(self.cfg, 0, max_len=1, per_row=True),
                      np.zeros((0, self.cfg.vocab_size), self.cfg.dtype),
                      draft=KVCache(draft.config, 0, max_len=1, per_row=True) if draft is not None else None)

    @property
    def rows(self):
        """Every active row, the shared batch's first."""
        return self.shared.rows + [row for g in self.groups for row in g.rows]

    @property
    def cache(self):
        """The shared batch's per-row KV cache."""
        return self.shared.cache

    # ------------------------------------------------------------------
    # the client side

    def check(self, req, grouped=False):
        """Refuse what can never run: an empty prompt, no new token, or (without a Context) a prompt +
        max_new_tokens beyond the context. A ``grouped`` request may end one token past it (its last
        token is never read: sample_completions' rule); the shared batch's answers fit whole (OpenAI's)."""
        P, cfg = len(req.prompt), self.cfg
        if P == 0:
            raise ZeroLLMError("the prompt is empty: give at least one token")
        if req.max_new_tokens < 1:
            raise ZeroLLMError(f"max_new_tokens must be >= 1, got {req.max_new_tokens}")
        if req.grammar is not None and req.grammar.vocab.size != cfg.vocab_size:
            raise ZeroLLMError(f"the request's grammar is indexed over {req.grammar.vocab.size} ids but the model has "
                               f"{cfg.vocab_size}; index it with grammar.index(tokenizer, model.config.vocab_size)")
        if req.context is None and P + req.max_new_tokens > cfg.block_size + grouped:
            room = cfg.block_size + grouped - P
            fix = f"ask for at most {room} new tokens or shorten the prompt" if room > 0 else "shorten the prompt"
            raise BeyondContext(f"the prompt ({P} tokens) + max_new_tokens ({req.max_new_tokens}) is more than the "
                                f"model's context of {cfg.block_size} tokens; {fix}")

    @property
    def capacity(self):
        """Requests held at once: a row each, then max_queue waiting beyond the batch."""
        return self.max_batch + self.max_queue

    def submit(self, req):
        self.submit_all([req])

    def submit_all(self, reqs):
        """Queue all of ``reqs`` for the shared batch or none: they fit if the free rows plus the room
        left beyond the batch (max_queue) hold them; else QueueFull. More than ``capacity`` can never
        fit: ZeroLLMError."""
        for req in reqs:
            if req.context is not None:
                raise ZeroLLMError("a request with a Context runs in a group: give it to stream()")
            self.check(req)
        if len(reqs) > self.capacity:
            raise ZeroLLMError(f"{len(reqs)} requests at once can never fit: at most {self.capacity} are held "
                               f"(--max-batch {self.max_batch} + --max-queue {self.max_queue})")
        with self.wake:
            if self.busy + len(reqs) > self.capacity:
                beyond = max(self.busy - self.max_batch, 0)
                raise QueueFull(f"all {self.max_batch} rows are busy and {beyond} requests wait beyond them "
                                f"(--max-batch {self.max_batch}, --max-queue {self.max_queue}); try again shortly")
            self.waiting.extend(reqs)
            self.wake.notify()

    @property
    def busy(self):
        """Requests held: active rows (a cancelled one until the next step), those joining, those waiting."""
        return len(self.rows) + len(self.joining) + len(self.waiting)

    def run(self, stop):
        """Step until the threading.Event ``stop`` is set, sleeping while there is nothing to do."""
        while not stop.is_set():
            with self.wake:
                if not self.rows and not self.waiting and not self.prefills:
                    self.wake.wait(timeout=0.1)
                    continue
            self.step()

    def stream(self, reqs):
        """Run ``reqs`` as one group in the caller's thread: yield each step's [(index in reqs, Token | Done)]
        until all are done (their ``emit`` is set here). A group runs whole, whatever max_batch. The caller
        may stop between steps (Ctrl-C, should_stop) by leaving the loop: the group is dropped then.
        Errors are raised here, not emitted."""
        events = []
        for i, req in enumerate(reqs):
            req.emit = (lambda ev, i=i: events.append((i, ev)))
            self.check(req, grouped=True)
        group = self._group(reqs)
        self.groups.append(group)
        try:
            while group.rows:
                self._step()
                done, events[:] = list(events), []
                yield done
        finally:
            self.groups = [g for g in self.groups if g is not group]

    def cancel_all(self, message="the server is shutting down"):
        """End every waiting and active request (SIGTERM after the grace period)."""
        with self.wake:
            waiting, self.waiting = list(self.waiting), collections.deque()
        for req in waiting:
            req.emit(_done(req, "cancelled", message))
        for req in [row.req for row in self.rows] + self.joining:
            req.cancel()

    # ------------------------------------------------------------------
    # one step

    def step(self):
        """Steps 1-5 of the module docstring. A failure (out of memory, say) ends the requests in the
        batch with Done('error') and leaves the scheduler ready for the next ones."""
        try:
            self._step()
        except Exception as err:       # noqa: BLE001 - the scheduler serves everyone else afterwards
            for req in [row.req for row in self.rows] + self.joining:
                req.emit(_done(req, "error", f"{type(err).__name__}: {err}"))
            self._release([row.blocks for row in self.shared.rows] + [b for p in self.prefills for b in p.blocks])
            self.shared, self.groups, self.joining, self.prefills = self._empty_batch(), [], [], []

    def _step(self):
        """Steps 1-5 for the shared batch and every group; an error is raised to the caller."""
        self._leave(self.shared, [not row.ended for row in self.shared.rows], None)
        for batch in [self.shared, *self.groups]:
            self._leave(batch, [not row.req.cancelled for row in batch.rows], "cancelled")
        self._join()
        forwards = 0
        for batch in [self.shared, *self.groups]:
            if not batch.rows:
                continue
            ids, keep = self._choose(batch)
            self._leave(batch, keep, None)
            if batch.rows:
                self._advance(batch, ids[np.asarray(keep)])
                forwards = 1
        self.steps += forwards
        self.groups = [g for g in self.groups if g.rows]

    def _last_logits(self, idx, cache):
        """(A, T) ids -> (A, V) the logits after each row's last token, without the head on earlier tokens."""
        h = self.model.forward_hidden(idx, kv_cache=cache)[:, -1]           # (A, C)
        return self.model.head(h)                                            # (A, C) -> (A, V)

    def _full_logits(self, idx, cache=None):
        """As _last_logits through model.forward: the head over all T tokens (a Context group's numbers)."""
        return self.model.forward(idx, kv_cache=cache)[0][:, -1]            # (A, T, V) -> (A, V)

    def _advance(self, batch, nxt):
        """Step 5: the (A,) new ids through the model -> batch.logits. A Context group whose cache is full
        recomputes the last block_size tokens from now on (said once)."""
        if batch.context is None:
            guesses = self._guesses(batch, nxt) if batch is self.shared else []
            if any(guesses):
                self._verify(batch, nxt, guesses)
            else:
                batch.logits = self._last_logits(nxt[:, None], batch.cache)  # (A, 1) -> (A, V)
            if batch.draft is not None:               # the draft's cache holds what the big model's holds
                batch.draft.pos = batch.cache.pos.copy()
            return
        batch.tokens = np.concatenate([batch.tokens, nxt[:, None]], axis=1)  # (A, T + 1)
        if batch.cache is not None and (_rolls(self.cfg, batch.context) or batch.cache.pos < self.cfg.block_size):
            batch.logits = self._full_logits(nxt[:, None], batch.cache)
            return
        if batch.cache is not None and not batch.warned:
            warnings.warn(_full_message(self.cfg), ContextWarning, stacklevel=4)
            batch.warned = True
        batch.cache = None
        batch.logits = self._full_logits(batch.tokens[:, -self.cfg.block_size:])

    # ------------------------------------------------------------------
    # speculation (zerollm.generation.speculate)

    def _guesses(self, batch, nxt):
        """Each row's guessed next tokens (a list per row; none past what its max_new_tokens leaves)."""
        if self.features.speculation.method != "draft":
            return [self._guess(row) for row in batch.rows]
        drafted = self._draft(batch, nxt)                                        # (A, K)
        return [drafted[a, :self._room(row)].tolist() for a, row in enumerate(batch.rows)]

    def _room(self, row):
        """How many tokens a row may guess: none without speculation, for a grammar row (a guess would need
        its mask too) or in its last token; else up to speculation.tokens."""
        req = row.req
        if self.features.speculation.method == "off" or req.grammar is not None:
            return 0
        return max(min(self.features.speculation.tokens, req.max_new_tokens - len(req.ids) - 1), 0)

    def _draft(self, batch, nxt):
        """The draft model's greedy guesses (A, K) after each row's new id nxt: K + 1 steps of (A, 1) over its
        own cache, the last one only to store the K-th guess's keys (the big model may keep every guess)."""
        draft, cache, K = self.features.draft, batch.draft, self.features.speculation.tokens
        cache.reserve(int(cache.pos.max()) + K + 1)
        out, tok = np.zeros((len(batch.rows), K), np.int64), nxt
        for j in range(K + 1):
            h = draft.forward_hidden(tok[:, None], kv_cache=cache)[:, -1]            # (A, C)
            if j == K:
                break
            logits = draft.head(h)                                                   # (A, V)
            if self.allowed is not None:
                logits = np.where(self.allowed, logits, -np.inf)
            out[:, j] = tok = np.argmax(logits, axis=-1)
        return out

    def _guess(self, row):
        """Prompt lookup's guess for one row."""
        s, room = self.features.speculation, self._room(row)
        return lookup(row.req.prompt + row.req.ids, room, s.ngram, s.min_ngram) if room else []

    def _verify(self, batch, nxt, guesses):
        """Step 5 with guesses: each row's new id and its guesses (up to G) in one forward, (A, 1 + G); each
        row keeps the guesses its own distribution accepts and goes on after the last one kept."""
        A, G = len(batch.rows), max(len(g) for g in guesses)
        idx = np.zeros((A, 1 + G), np.int64)                          # rows with fewer guesses pad with 0
        idx[:, 0] = nxt
        for a, g in enumerate(guesses):
            idx[a, 1:1 + len(g)] = g
        cache = batch.cache
        cache.reserve(int(cache.pos.max()) + 1 + G)
        start = cache.pos.copy()
        logits = self.model.head(self.model.forward_hidden(idx, kv_cache=cache))   # (A, 1 + G, V)
        kept = np.array([self._check_guess(row, g, logits[a]) for a, (row, g) in enumerate(zip(batch.rows, guesses))],
                        dtype=np.int64)
        cache.pos = start + 1 + kept                  # a refused guess's keys are overwritten before any query sees them
        batch.logits = logits[np.arange(A), kept]                                   # (A, V)

    def _check_guess(self, row, guess, logits):
        """Keep guess[j] with probability p(guess[j]), p from logits[j] as choose would make it; at the first
        refusal draw the row's next id from p without the guess (it is ``forced`` on the next step) ->
        the number of guesses kept. Every kept token is emitted now."""
        req, seen = row.req, row.seen[None] if row.seen is not None else None
        for j, g in enumerate(guess):
            p = probabilities(logits[j][None], req.sampling, row.counts[None], seen, self.allowed)[0]  # (V,)
            greedy = req.sampling.temperature < GREEDY_BELOW                    # p is then one-hot: no draw
            self.drafted += 1
            if (p[g] == 1.0) if greedy else (req.rng.random() < p[g]):
                self.accepted += 1
                if req.keep_logits:
                    req.logits.append(logits[j].copy())
                if not self._emit(row, g, logits[j]):
                    row.ended = True
                    return j + 1
                continue
            rest = p.copy()
            rest[g] = 0.0
            row.forced = int(np.argmax(rest)) if greedy else _draw(rest / rest.sum(), req.rng)
            self.drafted += len(guess) - j - 1
            return j
        return len(guess)

    def _join(self):
        """Step 2: take waiting requests into free rows and prefill their prompts (those of one length and
        one prefix-cache hit together, each row still alone in its attention; with a prefill_chunk, at most
        that many prompt tokens this step, oldest first). Rows whose prompt is done join the batch's
        cache in one copy. A request whose first prefix-cache block another prompt being prefilled will
        store waits for it, so requests arriving together with one system prompt compute it once."""
        new, later = [], []
        with self.wake:
            while self.waiting and len(self.shared.rows) + len(self.joining) + len(new) < self.max_batch:
                req = self.waiting.popleft()
                if req.cancelled:
                    req.emit(_done(req, "cancelled"))
                elif self._coming(req, new):
                    later.append(req)
                else:
                    new.append(req)
            self.waiting.extendleft(reversed(later))
            self.joining = self.joining + new  # still counted by busy while their prompts are prefilled
        self.prefills += self._prefill_groups(new)
        self._drop_cancelled_prefills()
        ready = self._prefill_step()
        if not ready:
            return
        caches, logits, rows = [], [self.shared.logits], []
        for pre, last in ready:
            caches.append(pre.cache)
            logits.append(last)
            rows += [self._row(r, r.prompt, blocks) for r, blocks in zip(pre.reqs, pre.blocks)]
        self.shared.cache.add_rows(*caches)
        if self.shared.draft is not None:
            self.shared.draft.add_rows(*[self._draft_prefill(pre.reqs) for pre, _ in ready])
        self.shared.logits = np.concatenate(logits).astype(self.shared.logits.dtype)                    # (A, V)
        joined = {id(row.req) for row in rows}
        with self.wake:
            self.shared.rows = self.shared.rows + rows
            self.joining = [r for r in self.joining if id(r) not in joined]

    def _draft_prefill(self, reqs):
        """The draft model's per-row cache of ``reqs``' prompts (of one length), for Features.draft."""
        draft = self.features.draft
        cache = KVCache(draft.config, len(reqs), max_len=max(len(r.prompt) + r.max_new_tokens - 1 for r in reqs),
                        per_row=True)
        draft.forward_hidden(np.array([r.prompt for r in reqs], dtype=np.int64), kv_cache=cache)
        return cache

    def _coming(self, req, new):
        """Whether ``req``'s first block is not stored yet but will be, by a prompt being prefilled (or taken
        this step, ``new``) that begins with it."""
        K = self.prefix.block if self.prefix is not None else 0
        if not K or len(req.prompt) <= K or self.prefix.known(req.prompt[:K]):
            return False
        first = req.prompt[:K]
        return any(len(r.prompt) >= K and r.prompt[:K] == first for r in [*self.joining, *new])

    def _prefill_groups(self, reqs):
        """_Prefill groups for new requests: each row's cache starts with the keys and values of the
        prefix-cache blocks found for its prompt."""
        groups = {}
        for req in reqs:
            blocks = self.prefix.lookup(req.prompt) if self.prefix is not None else []
            groups.setdefault((len(req.prompt), len(blocks)), []).append((req, blocks))
        out = []
        for (P, n), members in groups.items():
            slots = max(P + r.max_new_tokens - 1 for r, _ in members)
            cache = KVCache(self.cfg, len(members), max_len=max(slots, 1), per_row=True)
            for b, (_, blocks) in enumerate(members):
                for i, block in enumerate(blocks):
                    cache.put(b, i * self.prefix.block, block.k, block.v)
            hit = n * self.prefix.block if n else 0
            cache.pos[:] = hit
            out.append(_Prefill([r for r, _ in members], cache, hit, [blocks for _, blocks in members]))
        return out

    def _drop_cancelled_prefills(self):
        """Requests cancelled while their prompt is prefilled end now and give back their prefix blocks."""
        for pre in self.prefills:
            keep = [not r.cancelled for r in pre.reqs]
            if all(keep):
                continue
            for req, k, blocks in zip(pre.reqs, keep, pre.blocks):
                if not k:
                    req.emit(_done(req, "cancelled"))
                    self._release([blocks])
            rows = np.flatnonzero(keep)
            pre.reqs, pre.blocks = [pre.reqs[i] for i in rows], [pre.blocks[i] for i in rows]
            pre.cache.keep_rows(rows)
        self.prefills = [pre for pre in self.prefills if pre.reqs]
        with self.wake:
            self.joining = [r for r in self.joining if not r.cancelled]

    def _prefill_step(self):
        """Prefill the next part of each waiting prompt (all of it without a prefill_chunk) -> [(_Prefill,
        (k, V) the logits after its last prompt token)] for the groups whose prompt is now done."""
        budget, ready = self.features.prefill_chunk, []
        for pre in list(self.prefills):
            P, k = len(pre.reqs[0].prompt), len(pre.reqs)
            n = P - pre.done if budget is None else min(P - pre.done, max(budget // k, 1))
            idx = np.array([r.prompt[pre.done:pre.done + n] for r in pre.reqs], dtype=np.int64)         # (k, n)
            h = self.model.forward_hidden(idx, kv_cache=pre.cache)                                      # (k, n, C)
            pre.done += n
            if pre.done == P:
                self._store(pre)
                ready.append((pre, self.model.head(h[:, -1])))                                          # (k, V)
                self.prefills.remove(pre)
            if budget is not None:
                budget -= n * k
                if budget <= 0:
                    break
        return ready

    def _store(self, pre):
        """Keep the full blocks of each prefilled prompt in the prefix cache."""
        if self.prefix is None:
            return
        for b, req in enumerate(pre.reqs):
            pre.blocks[b] = self.prefix.store(req.prompt, pre.blocks[b], [k[b] for k in pre.cache.k],
                                              [v[b] for v in pre.cache.v])

    def _release(self, block_lists):
        if self.prefix is not None:
            for blocks in block_lists:
                self.prefix.release(blocks)

    def _group(self, reqs):
        """A batch of its own for ``reqs`` (prompts of one length), prefilled now."""
        cfg, context = self.cfg, reqs[0].context
        if len({len(r.prompt) for r in reqs}) != 1 or len({r.context for r in reqs}) != 1:
            raise ZeroLLMError("the requests of one group need prompts of one length and one Context")
        idx = np.array([r.prompt for r in reqs], dtype=np.int64)                                     # (A, P)
        if context is None:
            cache = KVCache(cfg, len(reqs), max_len=idx.shape[1] + max(r.max_new_tokens for r in reqs) - 1)
            return _Batch([self._row(r, r.prompt) for r in reqs], cache, self._last_logits(idx, cache))
        if idx.shape[1] > cfg.block_size and not _rolls(cfg, context):
            warnings.warn(context_notes(cfg, idx.shape[1], 1)[0], ContextWarning, stacklevel=4)
            idx = idx[:, -cfg.block_size:]
        cache = None
        if context.cache:
            cache = (KVCache(cfg, len(reqs), window=context.window, sinks=context.sinks) if context.window is not None
                     else KVCache(cfg, len(reqs), max_len=cfg.block_size))
        logits = self._full_logits(idx, cache) if cache is not None else self._full_logits(idx[:, -cfg.block_size:])
        return _Batch([self._row(r, p) for r, p in zip(reqs, idx)], cache, logits, context, idx)

    def _row(self, req, prompt, blocks=()):
        """A new row; ``seen``: the ids of its (cut) prompt, for repetition_penalty, None when unpenalized."""
        seen = token_counts(prompt, self.cfg.vocab_size)[0] > 0 if req.sampling.penalized else None
        return _Row(req, np.zeros(self.cfg.vocab_size, np.int64), seen, list(blocks))

    def _choose(self, batch):
        """Each row's next id from its own logits and generator -> ((A,) ids, (A,) still going). Rows that
        sample alike go through the sampler together; each still draws from its own generator (rows
        given one generator draw from it in row order)."""
        ids = np.zeros(len(batch.rows), np.int64)
        kinds = {}
        for a, row in enumerate(batch.rows):
            if row.forced is not None:                 # drawn when its guess was refused (_check_guess)
                ids[a], row.forced = row.forced, None
            else:
                kinds.setdefault(row.req.sampling, []).append(a)
            if row.req.keep_logits:
                row.req.logits.append(batch.logits[a].copy())
        for sampling, rows in kinds.items():
            rs = [batch.rows[a] for a in rows]
            counts = np.stack([r.counts for r in rs]) if sampling.penalized else None                # (k, V)
            seen = np.stack([r.seen for r in rs]) if sampling.penalized else None
            ids[rows] = choose(batch.logits[rows], [r.req.rng for r in rs], sampling, counts, seen, self._masks(rs))
        return ids, [self._emit(row, int(t), batch.logits[a]) for a, (row, t) in enumerate(zip(batch.rows, ids))]

    def _masks(self, rows):
        """The ids each of ``rows`` may choose: the scheduler's ``allowed``, and where a row has a grammar, what
        its state allows ((k, V) then; the stop ids only where the state accepts)."""
        if all(r.req.grammar is None for r in rows):
            return self.allowed
        V = self.cfg.vocab_size
        base = np.ones(V, bool) if self.allowed is None else self.allowed
        return np.stack([base if r.req.grammar is None else base & r.req.grammar.allowed(r.state, r.req.stop_ids)
                         for r in rows])                                                           # (k, V)

    def _emit(self, row, t, logits):
        """Step 4 for one row: send its new id t (and Done if it ended) -> whether it goes on. A grammar row
        moves to its next state; it ends with 'stop' once its text is complete (accepted, nothing may follow)."""
        req = row.req
        req.ids.append(t)
        row.counts[t] += 1
        if t in req.stop_ids:
            req.emit(_done(req, "stop"))
            return False
        if req.grammar is not None:
            row.state = req.grammar.next_state(row.state, t)
        piece = req.text.push(t) if req.text is not None else ""
        req.emit(Token(t, *_logprobs(logits, t, req.top_logprobs), piece))
        if (req.text is not None and req.text.stopped) or (req.grammar is not None and req.grammar.finished(row.state)):
            req.emit(_done(req, "stop"))
            return False
        if len(req.ids) >= req.max_new_tokens:
            unfinished = req.grammar is not None and not req.grammar.accepting(row.state)
            req.emit(_done(req, "length", INCOMPLETE if unfinished else ""))
            return False
        return True

    def _leave(self, batch, keep, reason):
        """Rows with keep False leave the batch (and its cache) now."""
        if all(keep):
            return
        if reason is not None:
            for row, k in zip(batch.rows, keep):
                if not k:
                    row.req.emit(_done(row.req, reason))
        self._release([row.blocks for row, k in zip(batch.rows, keep) if not k])
        rows = np.flatnonzero(keep)
        batch.rows = [batch.rows[a] for a in rows]
        if batch.cache is not None:
            batch.cache.keep_rows(rows)
        if batch.draft is not None:
            batch.draft.keep_rows(rows)
        batch.logits = batch.logits[rows]
        if batch.tokens is not None:
            batch.tokens = batch.tokens[rows]


def _draw(probs, rng):
    """One id from the (V,) ``probs`` by the inverse CDF, as the sampler draws (one uniform number)."""
    return int(min((np.cumsum(probs) < rng.random()).sum(), len(probs) - 1))


INCOMPLETE = "max_new_tokens was reached before the text matched its grammar: the output is incomplete"


def _done(req, reason, message=""):
    """Done, with what the request's TextStream held back."""
    return Done(reason, message, req.text.flush() if req.text is not None else "")


def _logprobs(logits, t, k):
    """(log p(t), the k most likely (id, log p)) under the model's own distribution (before temperature,
    penalties and filters, as the logits came out); (None, ()) when k is None."""
    if k is None:
        return None, ()
    z = np.asarray(logits, np.float64)
    logp = z - (z.max() + np.log(np.exp(z - z.max()).sum()))                # (V,) log-softmax
    best = np.argsort(-logp, kind="stable")[:k]
    return float(logp[t]), tuple((int(i), float(logp[i])) for i in best)
