"""Continuous batching: many requests' next tokens in ONE forward pass over one KV cache.

    scheduler = Scheduler(model, max_batch=16, max_queue=64)
    threading.Thread(target=scheduler.run, daemon=True).start()
    scheduler.submit(Request(prompt_ids, 50, Sampling(temperature=0.8), np.random.default_rng(7), emit=print))

One step (Yu et al. 2022, "Orca: iteration-level scheduling"; the loop vLLM and TGI run):

    1. rows whose client went away leave the batch
    2. waiting requests join, up to max_batch rows: their prompts are prefilled (those of one length
       together) into a per-row cache (zerollm.model.kvcache), which is appended to the batch's cache
    3. every row chooses its next token from its own logits with zerollm.generation.sample.choose, drawing from
       its OWN generator: what a row samples cannot depend on which other rows share the batch
    4. rows that ended (a stop id, max_new_tokens) leave at once
    5. one forward of the (A, 1) new tokens, each row at its own position -> the next (A, V) logits

So a batch costs one (A, C) @ (C, V)-shaped pass per layer instead of A passes of (1, C). The only
difference between a row in a batch and the same request alone is floating-point rounding (a matrix
product of A rows may add in another order than one of 1 row); tests/test_batching.py measures it.
Learned positions, sinusoidal and RoPE all work: each row reads its own position table entries.

Shapes: A active rows, P prompt length, V vocabulary.
"""

import collections
import threading
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.model.kvcache import KVCache
from zerollm.generation.sample import Sampling, choose, token_counts


class Token(NamedTuple):
    """One generated id; with logprobs asked for: its log-probability and the top (id, logprob) pairs."""
    id: int
    logprob: float | None = None
    top: tuple = ()


class Done(NamedTuple):
    """The end of a request: reason 'stop' (a stop id), 'length' (max_new_tokens), 'cancelled', or 'error'."""
    reason: str
    message: str = ""


class QueueFull(ZeroLLMError):
    """submit() found no room: the free rows and max_queue places beyond the batch are taken."""


@dataclass(eq=False)
class Request:
    """What to generate and where the tokens go. ``emit`` is called from the scheduler's thread with
    each Token, then once with Done. ``top_logprobs``: None = no log-probabilities, k = the best k too."""
    prompt: list
    max_new_tokens: int
    sampling: Sampling
    rng: np.random.Generator
    emit: Callable
    stop_ids: frozenset = frozenset()
    top_logprobs: int | None = None
    keep_logits: bool = False                  # keep every step's (V,) logits in .logits (tests, measurements)
    logits: list = field(default_factory=list)
    cancelled: bool = False

    def cancel(self):
        """Ask the scheduler to drop this request at its next step (the client went away)."""
        self.cancelled = True


@dataclass(eq=False)
class _Row:
    req: Request
    counts: np.ndarray                          # (V,) how often each id was generated
    seen: np.ndarray | None                     # (V,) bool, ids in the prompt (repetition_penalty)
    n: int = 0                                  # tokens generated


class Scheduler:
    """The loop of the module docstring. ``submit`` and ``cancel`` may be called from any thread;
    ``run`` (or ``step``) from one thread only, the one that owns the model."""

    def __init__(self, model, *, max_batch=16, max_queue=64, allowed=None):
        if max_batch < 1 or max_queue < 0:
            raise ZeroLLMError(f"max_batch must be >= 1 and max_queue >= 0; got {max_batch}, {max_queue}")
        self.model, self.max_batch, self.max_queue, self.allowed = model.eval(), max_batch, max_queue, allowed
        self.cfg = model.config
        self.waiting = collections.deque()
        self.wake = threading.Condition()
        self.rows = []
        self.joining = []                      # taken from waiting, being prefilled: not yet in rows
        self.cache = KVCache(self.cfg, 0, max_len=1, per_row=True)
        self.logits = np.zeros((0, self.cfg.vocab_size), self.cfg.dtype)   # (A, V) each row's next logits
        self.steps = 0                                                     # forward passes of the batch

    # ------------------------------------------------------------------
    # the client side

    def check(self, req):
        """Refuse what can never run: an empty prompt, or a prompt + max_new_tokens beyond the context."""
        P, cfg = len(req.prompt), self.cfg
        if P == 0:
            raise ZeroLLMError("the prompt is empty: give at least one token")
        if req.max_new_tokens < 1:
            raise ZeroLLMError(f"max_new_tokens must be >= 1, got {req.max_new_tokens}")
        if P + req.max_new_tokens > cfg.block_size:
            raise ZeroLLMError(f"the prompt ({P} tokens) + max_new_tokens ({req.max_new_tokens}) is more than the "
                               f"model's context of {cfg.block_size} tokens; ask for at most "
                               f"{max(cfg.block_size - P, 0)} new tokens or shorten the prompt")

    @property
    def capacity(self):
        """Requests held at once: a row each, then max_queue waiting beyond the batch."""
        return self.max_batch + self.max_queue

    def submit(self, req):
        self.submit_all([req])

    def submit_all(self, reqs):
        """Queue all of ``reqs`` or none: they fit if the free rows plus the room left beyond the batch
        (max_queue) hold them; else QueueFull. More than ``capacity`` can never fit: ZeroLLMError."""
        for req in reqs:
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
                if not self.rows and not self.waiting:
                    self.wake.wait(timeout=0.1)
                    continue
            self.step()

    def cancel_all(self, message="the server is shutting down"):
        """End every waiting and active request (SIGTERM after the grace period)."""
        with self.wake:
            waiting, self.waiting = list(self.waiting), collections.deque()
        for req in waiting:
            req.emit(Done("cancelled", message))
        for row in self.rows:
            row.req.cancel()

    # ------------------------------------------------------------------
    # one step

    def step(self):
        """Steps 1-5 of the module docstring. A failure (out of memory, say) ends the requests in the
        batch with Done('error') and leaves the scheduler ready for the next ones."""
        try:
            self._leave([not row.req.cancelled for row in self.rows], "cancelled")
            self._join()
            if not self.rows:
                return
            ids, keep = self._choose()
            self._leave(keep, None)
            if self.rows:
                self.logits = self._forward(ids[np.asarray(keep)][:, None], self.cache)   # (A, 1) -> (A, V)
                self.steps += 1
        except Exception as err:       # noqa: BLE001 - the scheduler serves everyone else afterwards
            for req in [row.req for row in self.rows] + self.joining:
                req.emit(Done("error", f"{type(err).__name__}: {err}"))
            self.rows, self.joining = [], []
            self.cache = KVCache(self.cfg, 0, max_len=1, per_row=True)
            self.logits = np.zeros((0, self.cfg.vocab_size), self.cfg.dtype)

    def _forward(self, idx, cache):
        """(A, T) ids -> (A, V) the logits after each row's last token, without the head on earlier tokens."""
        h = self.model.forward_hidden(idx, kv_cache=cache)[:, -1]           # (A, C)
        return h @ self.model.head_weight.T                                  # (A, C) @ (C, V)

    def _join(self):
        """Take waiting requests into free rows: prompts of one length are prefilled together (each row
        still alone in its attention), then all join the batch's cache in one copy."""
        new = []
        with self.wake:
            while self.waiting and len(self.rows) + len(new) < self.max_batch:
                req = self.waiting.popleft()
                if req.cancelled:
                    req.emit(Done("cancelled"))
                else:
                    new.append(req)
            self.joining = new                 # still counted by busy while their prompts are prefilled
        if not new:
            return
        groups = {}
        for req in new:
            groups.setdefault(len(req.prompt), []).append(req)
        caches, logits = [], [self.logits]
        for P, reqs in groups.items():
            slots = max(P + r.max_new_tokens - 1 for r in reqs)
            cache = KVCache(self.cfg, len(reqs), max_len=max(slots, 1), per_row=True)
            logits.append(self._forward(np.array([r.prompt for r in reqs], dtype=np.int64), cache))   # (k, V)
            caches.append(cache)
        self.cache.add_rows(*caches)
        self.logits = np.concatenate(logits).astype(self.logits.dtype)                              # (A, V)
        rows = [_Row(r, np.zeros(self.cfg.vocab_size, np.int64), self._seen(r)) for reqs in groups.values()
                for r in reqs]
        with self.wake:
            self.rows, self.joining = self.rows + rows, []

    def _seen(self, req):
        """(V,) bool: the ids in the prompt, for repetition_penalty; None when unpenalized."""
        return token_counts(req.prompt, self.cfg.vocab_size)[0] > 0 if req.sampling.penalized else None

    def _choose(self):
        """Each row's next id from its own logits and generator -> ((A,) ids, (A,) still going). Rows that
        sample alike go through the sampler together; each still draws from its own generator."""
        ids = np.zeros(len(self.rows), np.int64)
        groups = {}
        for a, row in enumerate(self.rows):
            groups.setdefault(row.req.sampling, []).append(a)
            if row.req.keep_logits:
                row.req.logits.append(self.logits[a].copy())
        for sampling, rows in groups.items():
            rs = [self.rows[a] for a in rows]
            counts = np.stack([r.counts for r in rs]) if sampling.penalized else None                # (k, V)
            seen = np.stack([r.seen for r in rs]) if sampling.penalized else None
            ids[rows] = choose(self.logits[rows], [r.req.rng for r in rs], sampling, counts, seen, self.allowed)
        keep = []
        for a, row in enumerate(self.rows):
            req, t = row.req, int(ids[a])
            row.n += 1
            row.counts[t] += 1
            if t in req.stop_ids:
                req.emit(Done("stop"))
                keep.append(False)
                continue
            req.emit(Token(t, *_logprobs(self.logits[a], t, req.top_logprobs)))
            if row.n >= req.max_new_tokens:
                req.emit(Done("length"))
            keep.append(row.n < req.max_new_tokens)
        return ids, keep

    def _leave(self, keep, reason):
        """Rows with keep False leave the batch (and its cache) now."""
        if all(keep):
            return
        if reason is not None:
            for row, k in zip(self.rows, keep):
                if not k:
                    row.req.emit(Done(reason))
        rows = np.flatnonzero(keep)
        self.rows = [self.rows[a] for a in rows]
        self.cache.keep_rows(rows)
        self.logits = self.logits[rows]


def _logprobs(logits, t, k):
    """(log p(t), the k most likely (id, log p)) under the model's own distribution (before temperature,
    penalties and filters, as the logits came out); (None, ()) when k is None."""
    if k is None:
        return None, ()
    z = np.asarray(logits, np.float64)
    logp = z - (z.max() + np.log(np.exp(z - z.max()).sum()))                # (V,) log-softmax
    best = np.argsort(-logp, kind="stable")[:k]
    return float(logp[t]), tuple((int(i), float(logp[i])) for i in best)
