"""Prompts on their way into the shared batch: prefilled in chunks between the running rows' steps, from
the prefix cache's blocks where a prompt begins like an earlier one (the Scheduler's step 2).

A step puts at most Features.step_tokens tokens through the model (vLLM's max_num_batched_tokens):
every running row's next token (and its guesses) first, then what is left goes to prompts, oldest
first, never less than PREFILL_FLOOR; while no row decodes, up to IDLE_TOKENS of prompts. So a 2,000-token
prompt arriving amid 8 decoding streams costs each of their steps one chunk, not the whole prefill
(Agrawal et al. 2024, "Sarathi-Serve"):

    step   │ 8 rows + 55 prompt tokens │ 8 rows + 55 │ ... │ 8 rows + 20, the prompt done │ 9 rows │
           └──── step_tokens = 64 ─────┘

Chunks of one prompt go through its own per-row KV cache (zerollm.model.kvcache), each chunk attending
to the keys of the chunks before it; when the last chunk is done the row's cache joins the batch's cache
(its filled slots copied into a free row of the BatchCache's storage, which is kept from step to step:
a join or a leave never copies the other rows) and its first token is chosen in the same step. Prompts of one length (and one prefix-cache
hit) are prefilled together, each row alone in its attention. With a draft model (speculative decoding)
the draft's own cache of the prompt is filled the same way, chunk by chunk within the same step budget,
so a long prompt stalls the running rows no more with a draft than without.

The methods here are the Scheduler's (zerollm.generation.batching); they read its fields.

Shapes: k rows of one prompt length, n tokens in a chunk, C channels, V vocabulary.
"""

from dataclasses import dataclass

import numpy as np

from zerollm.model.kvcache import KVCache
from zerollm.generation.request import done

PREFILL_FLOOR = 16        # prompt tokens a step may prefill however many rows run: a waiting prompt advances
# prompt tokens a step may prefill while no row decodes: a burst of short prompts joins in one step (rows
# joining one by one would decode in small, dear batches), and a long prompt is still cut into pieces whose
# attention scores stay small (one forward over 2,000 tokens is slower than its chunks: docs/serving.md)
IDLE_TOKENS = 1024


@dataclass(eq=False)
class _Prefill:
    """Requests with prompts of one length (and one prefix-cache hit) being prefilled, ``done`` tokens so far."""
    reqs: list
    cache: KVCache
    done: int
    blocks: list                                # per request, the prefix-cache blocks held for it
    draft: KVCache | None = None                # the draft model's cache of the same rows (Features.draft)
    drafted: int = 0                            # prompt tokens the draft has taken (it has no prefix cache)
    logits: np.ndarray | None = None            # (k, V) after the last prompt token, once the target is done

    @property
    def finished(self):
        return self.done == len(self.reqs[0].prompt) and (self.draft is None or self.drafted == self.done)


class BatchCache(KVCache):
    """The shared batch's per-row KV cache, its keys and values held in storage with room to spare: a row
    joining copies only its own filled slots into a free row, and a row leaving has the last row's filled
    slots moved into its place (the batch's order follows: Scheduler._leave), so neither copies the whole
    batch's cache as a fresh array would. The storage has ``max_rows`` rows from the start (np.zeros: pages
    that are never written take no memory) and its slots grow in steps, doubling up to the context, each
    step one copy of what is filled. ``k`` and ``v`` are views of the storage's first A rows, as
    KVCache.update expects. Slots past a row's position may hold an earlier row's keys: the mask hides
    them, as it hides the zeros."""

    def __init__(self, config, max_rows):
        super().__init__(config, max_rows, max_len=1, per_row=True)
        self.context = config.block_size
        self.store_k, self.store_v = self.k, self.v                     # L arrays (R, nkv, 1, S, hs)
        self.pos = np.zeros(0, np.int64)
        self._view(0)

    def _used(self):
        return int(self.pos.max()) if len(self.pos) else 0

    def _view(self, rows):
        self.k = [a[:rows] for a in self.store_k]
        self.v = [a[:rows] for a in self.store_v]

    def _grow(self, rows, slots):
        """Storage for at least ``rows`` rows of ``slots`` slots (slots: at least double what there is, up
        to the context)."""
        R, S = self.store_k[0].shape[0], self.slots
        if rows <= R and slots <= S:
            return
        R, S = max(R, rows), max(S, slots, min(2 * S, self.context)) if slots > S else S
        A, used = self.batch_size, self._used()
        for store in (self.store_k, self.store_v):
            for i, a in enumerate(store):
                bigger = np.zeros((R, *a.shape[1:3], S, a.shape[-1]), a.dtype)
                bigger[:A, ..., :used, :] = a[:A, ..., :used, :]
                store[i] = bigger
        self.slots, self.slot_pos = S, np.full(S, -1)
        self._view(A)

    def add_rows(self, *others):
        """Append the rows of per-row caches (prompts just prefilled) after this cache's rows: their filled
        slots are copied into the storage's free rows."""
        A = self.batch_size
        self._grow(A + sum(o.batch_size for o in others), max(o.slots for o in others))
        at = A
        for o in others:
            used, b = (int(o.pos.max()) if len(o.pos) else 0), o.batch_size
            for store, theirs in ((self.store_k, o.k), (self.store_v, o.v)):
                for a, t in zip(store, theirs):
                    a[at:at + b, ..., :used, :] = t[..., :used, :]
            at += b
        self.pos = np.concatenate([self.pos, *[o.pos for o in others]])
        self._view(at)

    def keep_rows(self, rows):
        """Keep the rows ``rows`` (in that order): only those not already in their place are copied (their
        filled slots)."""
        rows = np.asarray(rows, dtype=np.int64)
        n, used = len(rows), self._used()
        moved = np.flatnonzero(rows != np.arange(n))
        if moved.size and used:
            for store in (self.store_k, self.store_v):
                for a in store:
                    a[moved, ..., :used, :] = a[rows[moved], ..., :used, :]
        self.pos = self.pos[rows]
        self._view(n)

    def reserve(self, slots):
        self._grow(self.batch_size, slots)


class Prefilling:
    """The Scheduler's step 2 (a mixin: zerollm.generation.batching.Scheduler is the one class using it)."""

    def _join(self):
        """Step 2: take waiting requests into free rows and prefill their prompts (those of one length and
        one prefix-cache hit together, each row still alone in its attention; with Features.step_tokens, at
        most what the running rows leave of it this step, oldest first). Rows whose prompt is done join the
        batch's cache in one copy. A request whose first prefix-cache block another prompt being prefilled will
        store waits for it, so requests arriving together with one system prompt compute it once."""
        new, later = [], []
        with self.wake:
            while self.waiting and len(self.shared.rows) + len(self.joining) + len(new) < self.max_batch:
                req = self.waiting.popleft()
                if req.cancelled:
                    req.emit(done(req, "cancelled"))
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
        for pre in ready:
            caches.append(pre.cache)
            logits.append(pre.logits)
            rows += [self._row(r, r.prompt, blocks) for r, blocks in zip(pre.reqs, pre.blocks)]
        self.shared.cache.add_rows(*caches)
        if self.shared.draft is not None:
            self.shared.draft.add_rows(*[pre.draft for pre in ready])
        self.shared.logits = np.concatenate(logits).astype(self.shared.logits.dtype)                    # (A, V)
        joined = {id(row.req) for row in rows}
        with self.wake:
            self.shared.rows = self.shared.rows + rows
            self.joining = [r for r in self.joining if id(r) not in joined]

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
            for r, _ in members:
                r.cached = hit
            draft = self.features.draft     # the draft's own cache of these rows, filled chunk by chunk too
            draft = KVCache(draft.config, len(members), max_len=max(slots, 1), per_row=True) if draft else None
            out.append(_Prefill([r for r, _ in members], cache, hit, [blocks for _, blocks in members], draft))
        return out

    def _drop_cancelled_prefills(self):
        """Requests cancelled while their prompt is prefilled end now and give back their prefix blocks."""
        for pre in self.prefills:
            keep = [not r.cancelled for r in pre.reqs]
            if all(keep):
                continue
            for req, k, blocks in zip(pre.reqs, keep, pre.blocks):
                if not k:
                    req.emit(done(req, "cancelled"))
                    self._release([blocks])
            rows = np.flatnonzero(keep)
            pre.reqs, pre.blocks = [pre.reqs[i] for i in rows], [pre.blocks[i] for i in rows]
            pre.cache.keep_rows(rows)
            if pre.draft is not None:
                pre.draft.keep_rows(rows)
            if pre.logits is not None:
                pre.logits = pre.logits[rows]
        self.prefills = [pre for pre in self.prefills if pre.reqs]
        with self.wake:
            self.joining = [r for r in self.joining if not r.cancelled]

    def _prefill_room(self):
        """Prompt tokens this step may prefill: Features.step_tokens less the tokens every row that runs this
        step puts through the model (one each, and its guesses with speculation), counting the rows being
        prefilled, which may join this very step; at least PREFILL_FLOOR. With no row decoding, no stream
        waits on this step: then up to IDLE_TOKENS. None: no limit."""
        budget = self.features.step_tokens
        if budget is None:
            return None
        if not self.shared.rows:
            return max(budget, IDLE_TOKENS)
        s = self.features.speculation
        per_row = 1 + (s.tokens if s.method != "off" else 0)
        rows = len(self.shared.rows) + sum(len(pre.reqs) for pre in self.prefills)
        return max(budget - rows * per_row, min(PREFILL_FLOOR, budget))

    def _prefill_step(self):
        """Prefill the next part of each waiting prompt, oldest first, within _prefill_room (all of every
        prompt without Features.step_tokens) -> the _Prefill groups whose prompt is now done (their
        ``logits``: (k, V) after the last prompt token). With a draft model, the draft takes its chunk of the
        prompt in the same step, within the same room: a chunk of n tokens puts n through each model (the
        draft starts at 0 where the target starts after its prefix-cache hit, so it may still be behind)."""
        room, ready = self._prefill_room(), []
        for pre in list(self.prefills):
            P, k = len(pre.reqs[0].prompt), len(pre.reqs)
            n = P if room is None else max(room // k, 1)
            took = self._prefill_chunk(pre, min(P - pre.done, n))
            took = max(took, self._draft_chunk(pre, min(P - pre.drafted, n)))
            if pre.finished:
                ready.append(pre)
                self.prefills.remove(pre)
            if room is not None:
                room -= took * k
                if room <= 0:
                    break
        return ready

    def _prefill_chunk(self, pre, n):
        """The target model over the next n prompt tokens of ``pre`` -> n; the last chunk stores the prompt's
        blocks in the prefix cache and keeps the logits after its last token."""
        if n <= 0:
            return 0
        idx = np.array([r.prompt[pre.done:pre.done + n] for r in pre.reqs], dtype=np.int64)             # (k, n)
        h = self.model.forward_hidden(idx, kv_cache=pre.cache)                                          # (k, n, C)
        pre.done += n
        if pre.done == len(pre.reqs[0].prompt):
            self._store(pre)
            pre.logits = self.model.head(h[:, -1])                                                      # (k, V)
        return n

    def _draft_chunk(self, pre, n):
        """The draft model over the next n prompt tokens of ``pre`` (none without a draft) -> n."""
        if pre.draft is None or n <= 0:
            return 0
        idx = np.array([r.prompt[pre.drafted:pre.drafted + n] for r in pre.reqs], dtype=np.int64)       # (k, n)
        self.features.draft.forward_hidden(idx, kv_cache=pre.draft)
        pre.drafted += n
        return n

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
