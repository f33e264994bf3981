"""The served model: its tokenizer, the continuous-batching scheduler on its own thread, and the bridge
from that thread to asyncio (the web server's event loop).

    backend = Backend(model, tok, name="tang", max_batch=16, max_queue=64)
    backend.start()
    run = backend.submit(prompt_ids, Choices(n=2, sampling=Sampling(0.8), max_tokens=50, seed=7, stops=("\n",)))
    async for index, event in run.events():
        ...    # event: batching.Token (its text) or batching.Done, of choice ``index``
    backend.close()

The scheduler thread runs the NumPy work (matrix products release the GIL), so the event loop keeps
answering other clients while a batch is computed.
"""

import asyncio
import collections
import contextlib
import threading
import warnings
from dataclasses import dataclass

import numpy as np

from zerollm.data import chat
from zerollm.generation.display import decodable, first_difference, token_bytes
from zerollm.io.errors import ZeroLLMError
from zerollm.generation.batching import Done, Features, Request, Scheduler
from zerollm.generation.sample import Sampling
from zerollm.generation.text import TextStream
from zerollm.serve.metrics import Metrics
from zerollm.tokenizers.bpe import ENDOFTEXT
from zerollm.tokenizers.char import UnknownCharacters

DISCONNECT_POLL_S = 0.5       # how often a request that is not streamed checks that its client is still there


class Backend:
    def __init__(self, model, tokenizer, *, name, max_batch=16, max_queue=64, features=Features(),
                 stream_interval=0.0):
        self.stream_interval = stream_interval       # a stream's chunks at least this many seconds apart (Run)
        allowed = decodable(tokenizer, model.config.vocab_size)
        self.model, self.tok, self.name = model.eval(), tokenizer, name
        self.scheduler = Scheduler(model, max_batch=max_batch, max_queue=max_queue,
                                   allowed=None if allowed.all() else allowed, features=features)
        self.metrics = Metrics(self.scheduler, name)          # GET /metrics (zerollm.serve.metrics)
        self.has_chat = chat.has_template(tokenizer)
        specials = getattr(tokenizer, "special_tokens", {}) or {}
        self.stop_ids = frozenset(specials[s] for s in (chat.END, ENDOFTEXT) if s in specials)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.scheduler.run, args=(self._stop,), name="zerollm-scheduler",
                                        daemon=True)

    @property
    def block_size(self):
        return self.model.config.block_size

    def start(self):
        self._thread.start()

    def warm_up(self, prompt_tokens=8, rows=2):
        """Decode two tokens of a short prompt, alone and ``rows`` at a time, outside the served scheduler (its
        counts, caches and /metrics stay as they were), so that the engine's first calls happen before the
        server listens rather than in the first client's answer: the fast engine loads its compiled kernels
        then (the tang shape's first request took 400-470 ms against 7-11 ms for the next; on a fresh install
        it compiles them, seconds). Sampled, so the sampler's kernel loads too."""
        from zerollm.generation.decode import generate
        cfg = self.model.config
        n = max(1, min(prompt_tokens, cfg.block_size - 2))
        with warnings.catch_warnings():                  # a tiny context's ContextWarning is not the user's
            warnings.simplefilter("ignore")
            for b in (1, rows):
                ids = np.arange(b * n).reshape(b, n) % cfg.vocab_size
                for _ in generate(self.model, ids, 2, Sampling(1.0), rng=np.random.default_rng(0)):
                    pass

    def close(self, timeout=5.0):
        """Cancel what is left and stop the scheduler's thread."""
        self.scheduler.cancel_all()
        self._stop.set()
        self._thread.join(timeout)

    # ------------------------------------------------------------------
    # text -> ids

    def chat_prompt(self, messages, tools=(), thinking=True):
        """The chat template's generation prompt for ``messages`` (a list of {"role", "content"}, and the
        tool fields of zerollm.serve.tools.template_messages), with ``tools`` listed in its system turn;
        thinking=False: Qwen3's enable_thinking=False."""
        if not self.has_chat:
            raise ZeroLLMError(f"the model {self.name!r} has no chat template (it is a base model): use "
                               "/v1/completions, or fine-tune it first with `zerollm sft`")
        with _known_characters():
            return chat.encode_prompt(self.tok, messages, tools=list(tools) or None, enable_thinking=thinking)

    def fit_chat_prompt(self, messages, room, tools=(), thinking=True):
        """(ids, turns dropped) for fit_context: the chat prompt of ``messages`` with its oldest turns left out
        until ``room`` new tokens fit the context (zerollm.data.chat.fit_turns, as `zerollm chat` does);
        leading system messages and the turn being answered always stay."""
        starts = chat.turn_starts(messages)
        if not starts:                             # no user message: nothing to leave out
            return self.chat_prompt(messages, tools, thinking), 0
        head = messages[:starts[0]]
        return chat.fit_turns(lambda k: self.chat_prompt(head + messages[starts[k]:], tools, thinking), len(starts) - 1,
                              room, self.block_size)

    def text_prompt(self, text):
        with _known_characters():
            return self.tok.encode(text)

    def token_text(self, i):
        """One token's own text and bytes (for logprobs; a piece of a character shows as U+FFFD)."""
        raw = token_bytes(self.tok, i)      # a byte tokenizer's lone byte 0x93 is b"\x93", not U+FFFD's bytes
        if raw is None:
            text = self.tok.decode([i])
            return text, list(text.encode("utf-8", "surrogateescape"))
        return raw.decode("utf-8", "replace"), list(raw)

    # ------------------------------------------------------------------
    # generation

    def requests(self, prompt, choices, emit):
        """``choices.n`` scheduler requests for one prompt; choice i draws from np.random.default_rng(seed + i)
        (choice 0 from default_rng(seed): the same stream as `zerollm sample --seed SEED`), its text
        decoded and cut at the stop strings by a TextStream of its own."""
        c, reqs = choices, []
        for i in range(c.n):
            rng = np.random.default_rng(None if c.seed is None else c.seed + i)
            reqs.append(Request(list(prompt), c.max_tokens, c.sampling, rng, emit=(lambda ev, i=i: emit((i, ev))),
                                stop_ids=self.stop_ids | c.stop_ids, top_logprobs=c.top_logprobs,
                                text=TextStream(self.tok, c.stops), grammar=c.grammar))
        return reqs

    def submit(self, prompt, choices):
        """Queue ``choices.n`` choices for ``prompt`` -> a Run (call from the event loop). Raises QueueFull,
        or ZeroLLMError for a request that cannot run (BeyondContext: past the context), before anything
        is queued."""
        run = Run(asyncio.get_running_loop(), self.stream_interval)
        run.reqs = self.requests(prompt, choices, run.emit)
        self.metrics.watch(run.reqs)
        self.scheduler.submit_all(run.reqs)                  # all n choices or none
        self.metrics.taken(run.reqs)
        return run


@dataclass(frozen=True)
class Choices:
    """What one HTTP request asks for: ``n`` answers of at most ``max_tokens`` tokens, chosen with
    ``sampling`` (choice i from the seed seed + i), ended by the ``stops`` strings, with ``top_logprobs``."""
    n: int
    sampling: Sampling
    max_tokens: int
    seed: int | None = None
    stops: tuple = ()
    top_logprobs: int | None = None
    grammar: object = None             # a zerollm.generation.grammar TokenIndex every choice's text must match
    stop_ids: frozenset = frozenset()  # ids that end a choice besides the end of turn (</tool_call>: one call)


class Run:
    """The choices of one HTTP request, on their way from the scheduler's thread to the event loop.

    Events go into a deque; the loop is woken only when it waits for them and no wake-up is pending
    already. Waking it is a write to its self-pipe and a GIL handoff between the two threads, so tokens
    that come while the loop is busy (or a step's several tokens of one request: n choices, kept guesses)
    cost one handoff.

    ``interval`` (seconds; ``zerollm serve --stream-interval``): the loop takes the events at most that
    often, so tokens that come sooner go out together in the next chunk. The first token and a choice's
    end are taken as soon as they come. On one core a chunk's HTTP work (JSON, the ASGI layers, the
    write) is time the model does not get, about a fifth of a small model's token (docs/serving.md)::

        tokens   t1  t2  t3  t4  t5  t6  t7  t8  Done
        chunks   t1 ─────────────── t2..t6 ─────────── t7,t8,Done
                    └─ interval ──┘        └─ interval ┘ (an end does not wait it out)
    """

    def __init__(self, loop, interval=0.0):
        self.loop, self.reqs, self.interval = loop, [], interval
        self.items = collections.deque()       # appended on the scheduler's thread, taken on the loop's
        self.waiter = None                     # the loop's future while it waits for items (one wait at a time)
        self.waking = False                    # a wake-up is scheduled and has not run yet
        self.holding = False                   # the loop waits out the interval: only an end wakes it
        self.ends = 0                          # Done events in items
        self.lock = threading.Lock()

    def emit(self, item):                      # called on the scheduler's thread
        with self.lock:
            self.items.append(item)
            if isinstance(item[1], Done):
                self.ends += 1
            elif self.holding:
                return
            if self.waiter is None or self.waking:
                return
            self.waking = True
        try:
            self.loop.call_soon_threadsafe(self._wake)
        except RuntimeError:                   # the loop is closed: nobody is listening any more
            pass

    def _wake(self):                           # on the loop
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def cancel(self):
        """Stop every choice (the client went away)."""
        for r in self.reqs:
            r.cancel()

    async def events(self, disconnected=None):
        """Yield (choice index, Token | Done) until every choice is Done; leaving early cancels the rest.
        ``disconnected``: an async function polled while waiting (for a request that is not streamed)."""
        async for batch in self.batches(disconnected):
            for item in batch:
                yield item

    async def batches(self, disconnected=None):
        """As events(), but everything that has arrived so far at once: a client that fell behind a few
        steps, or tokens within one interval, get them in one piece, so fewer, larger chunks are written."""
        running, due = len(self.reqs), 0.0
        try:
            while running:
                batch = await self._next(disconnected, due)
                if batch is None:
                    return
                running -= sum(isinstance(ev, Done) for _, ev in batch)
                yield batch
                due = self.loop.time() + self.interval
        finally:
            self.cancel()

    async def _next(self, disconnected, due):
        """Every item so far, once there is one and ``due`` (loop time) has come or a choice ended; None when
        ``disconnected()`` says the client left."""
        poll = None if disconnected is None else self.loop.time() + DISCONNECT_POLL_S
        while True:
            now = self.loop.time()
            with self.lock:
                held = now < due
                if self.items and (self.ends or not held):
                    batch, self.ends = list(self.items), 0
                    self.items.clear()
                    return batch
                # a plain future, not an asyncio.Event (its wait() makes a future and a waiter list every time)
                self.waiter, self.holding = self.loop.create_future(), held
            until = due if held and (poll is None or due < poll) else poll
            timer = None if until is None else self.loop.call_at(until, self._wake)
            try:
                await self.waiter
            finally:
                if timer is not None:
                    timer.cancel()
                with self.lock:
                    self.waiter, self.waking, self.holding = None, False, False
            if poll is not None and self.loop.time() >= poll:
                if await disconnected():
                    return None
                poll = self.loop.time() + DISCONNECT_POLL_S


def check_draft(model, tok, draft, draft_tok, where):
    """Refuse a draft model (``--draft`` at ``where``) that cannot guess for ``model``: another tokenizer (an id
    that is another piece of text there), another vocabulary size, or a shorter context."""
    said = f"--draft {where}"
    if draft.config.vocab_size != model.config.vocab_size or draft_tok.vocab_size != tok.vocab_size:
        raise ZeroLLMError(f"{said} has {draft_tok.vocab_size} token ids ({draft.config.vocab_size} logits), the served "
                           f"model {tok.vocab_size} ({model.config.vocab_size}): speculative decoding needs a draft "
                           "with the same tokenizer; train it with the served model's tokenizer")
    differ = first_difference(tok, draft_tok)
    if differ is not None:
        i, here, there = differ
        raise ZeroLLMError(f"{said} has another tokenizer: id {i} is {there!r} there and "
                           f"{here!r} here; speculative decoding needs a draft with the same tokenizer")
    if draft.config.block_size < model.config.block_size:
        raise ZeroLLMError(f"{said} has a context of {draft.config.block_size} tokens, shorter than the served "
                           f"model's {model.config.block_size}; use a draft with at least that context")


@contextlib.contextmanager
def _known_characters():
    """A char model's missing characters, with advice for an API client (not the tokenizer's Python advice)."""
    try:
        yield
    except UnknownCharacters as err:
        raise ZeroLLMError(f"{err.found}; this model knows only the characters of the text it was trained on: "
                           "leave these out") from None
