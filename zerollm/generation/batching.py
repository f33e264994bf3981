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

What a request is made of (Request, Token, Done, Context, Features) lives in zerollm.generation.request;
step 2's prompts, chunked within Features.step_tokens and taken from the prefix cache, in
zerollm.generation.prefill; step 5 with guesses (speculative decoding) in zerollm.generation.speculate.

Shapes: A active rows, P prompt length, T tokens so far, V vocabulary.
"""

import collections
import threading
import warnings
from dataclasses import dataclass, field

import numpy as np

from zerollm.engine.threads import serving_threads
from zerollm.io.errors import ZeroLLMError
from zerollm.model.kvcache import KVCache
from zerollm.generation.prefill import BatchCache, Prefilling
from zerollm.generation.prefix import PrefixCache
from zerollm.generation.request import (INCOMPLETE, BeyondContext, Context, ContextWarning, Done, Features,  # noqa: F401
                                        QueueFull, Request, Token, context_notes, done, full_message, rolls)
from zerollm.generation.sample import choose, token_counts
from zerollm.generation.speculate import Speculating


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
# the scheduler

class Scheduler(Prefilling, Speculating):
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
        return _Batch([], BatchCache(self.cfg, self.max_batch), np.zeros((0, self.cfg.vocab_size), self.cfg.dtype),
                      draft=BatchCache(draft.config, self.max_batch) if draft is not None else None)

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
        """Step until the threading.Event ``stop`` is set, sleeping while there is nothing to do. On a thread of
        its own beside others that need the cores (the server's event loop): BLAS runs on this thread only,
        so that its idle workers do not spin on those cores (zerollm.engine.threads.serving_threads)."""
        with serving_threads():
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
            req.emit(done(req, "cancelled", message))
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
                req.emit(done(req, "error", f"{type(err).__name__}: {err}"))
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
            order = self._leave(batch, keep, None)
            if batch.rows:
                self._advance(batch, ids[order])
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
        if batch.cache is not None and (rolls(self.cfg, batch.context) or batch.cache.pos < self.cfg.block_size):
            batch.logits = self._full_logits(nxt[:, None], batch.cache)
            return
        if batch.cache is not None and not batch.warned:
            warnings.warn(full_message(self.cfg), ContextWarning, stacklevel=4)
            batch.warned = True
        batch.cache = None
        batch.logits = self._full_logits(batch.tokens[:, -self.cfg.block_size:])

    def _group(self, reqs):
        """A batch of its own for ``reqs`` (prompts of one length), prefilled now."""
        cfg, context = self.cfg, reqs[0].context
        if len({len(r.prompt) for r in reqs}) != 1 or len({r.context for r in reqs}) != 1:
            raise ZeroLLMError("the requests of one group need prompts of one length and one Context")
        idx = np.array([r.prompt for r in reqs], dtype=np.int64)                                     # (A, P)
        if context is None:
            cache = KVCache(cfg, len(reqs), max_len=idx.shape[1] + max(r.max_new_tokens for r in reqs) - 1)
            return _Batch([self._row(r, r.prompt) for r in reqs], cache, self._last_logits(idx, cache))
        if idx.shape[1] > cfg.block_size and not rolls(cfg, context):
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
            req.emit(done(req, "stop"))
            return False
        if req.grammar is not None:
            row.state = req.grammar.next_state(row.state, t)
        piece = req.text.push(t) if req.text is not None else ""
        req.emit(Token(t, *_logprobs(logits, t, req.top_logprobs), piece))
        if (req.text is not None and req.text.stopped) or (req.grammar is not None and req.grammar.finished(row.state)):
            req.emit(done(req, "stop"))
            return False
        if len(req.ids) >= req.max_new_tokens:
            unfinished = req.grammar is not None and not req.grammar.accepting(row.state)
            req.emit(done(req, "length", INCOMPLETE if unfinished else ""))
            return False
        return True

    def _leave(self, batch, keep, reason):
        """Rows with keep False leave the batch (and its cache) now -> the kept rows' old indices, in their new
        order. In the shared batch the last rows take the places of those that left (its BatchCache then
        moves only them); a group keeps its order (its rows may draw from one generator, in row order)."""
        if all(keep):
            return np.arange(len(keep))
        if reason is not None:
            for row, k in zip(batch.rows, keep):
                if not k:
                    row.req.emit(done(row.req, reason))
        self._release([row.blocks for row, k in zip(batch.rows, keep) if not k])
        rows = _fill_from_end(keep) if batch is self.shared else np.flatnonzero(keep)
        batch.rows = [batch.rows[a] for a in rows]
        if batch.cache is not None:
            batch.cache.keep_rows(rows)
        if batch.draft is not None:
            batch.draft.keep_rows(rows)
        batch.logits = batch.logits[rows]
        if batch.tokens is not None:
            batch.tokens = batch.tokens[rows]
        return rows


def _fill_from_end(keep):
    """The rows kept, each place of one that leaves taken by a kept row from the end: [T, F, T, T] -> [0, 3, 2]."""
    keep = np.asarray(keep, bool)
    n = int(keep.sum())
    order, fillers = np.arange(n), list(np.flatnonzero(keep[n:]) + n)
    for i in np.flatnonzero(~keep[:n]):
        order[i] = fillers.pop()
    return order


def _logprobs(logits, t, k):
    """(log p(t), the k most likely (id, log p)) under the model's own distribution (before temperature,
    penalties and filters, as the logits came out); (None, ()) when k is None."""
    if k is None:
        return None, ()
    z = np.asarray(logits, np.float64)
    logp = z - (z.max() + np.log(np.exp(z - z.max()).sum()))                # (V,) log-softmax
    best = np.argsort(-logp, kind="stable")[:k]
    return float(logp[t]), tuple((int(i), float(logp[i])) for i in best)
