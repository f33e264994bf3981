"""KV cache for fast generation: full, or a rolling buffer with a sliding window and attention sinks.

Generating token t+1 needs the keys and values of tokens 0..t in every layer. They never change
(each position only sees the past), so we store them instead of recomputing the whole prefix:
each new token costs O(t) instead of O(t^2).

Window rule (Beltagy et al. 2020; Mistral 2023; attention sinks: Xiao et al. 2023, StreamingLLM):
the query at absolute position p sees the key at position j when

    j <= p   and   (p - j < window   or   j < sinks)

i.e. the last ``window`` tokens plus the first ``sinks`` tokens, which soak up attention mass that
has nowhere else to go. ``window=None`` is ordinary causal attention. Positions are absolute
(RoPE angles and position embeddings use the true position), so a cached run equals the full
computation with ``window_mask`` applied, which the tests check.

Rolling buffer: with a window only ``sinks + window`` keys can ever be seen again, so the cache
keeps a ring of that many slots per layer and memory stays constant however long we generate.

Rows at different positions (``per_row=True``, continuous batching, zerollm.generation.batching):
``pos`` is then one next position per row, (B,), row b's keys fill slots 0..pos[b]-1, and the mask
hides, per row, every slot at or past that row's own next position. Rows join (``add_rows``) and
leave (``keep_rows``) between steps, so requests that arrived at different times share one forward.

Shapes: B batch, nkv key/value heads, S slots, hs head size. Keys are stored as (B, nkv, 1, S, hs),
the grouped layout of zerollm.nn.attention.
"""

import numpy as np

from zerollm.io.errors import ZeroLLMError


def visible(q_pos, k_pos, window=None, sinks=0):
    """Bool (Tq, Tk): True where the query at q_pos may see the key at k_pos (the window rule)."""
    q_pos, k_pos = np.asarray(q_pos)[:, None], np.asarray(k_pos)[None, :]
    ok = (k_pos <= q_pos) & (k_pos >= 0)
    if window is not None:
        ok &= (q_pos - k_pos < window) | (k_pos < sinks)
    return ok


def window_mask(T, window=None, sinks=0, offset=0):
    """The (T, T) hidden-mask (True = hidden) for a full forward under the window rule."""
    pos = np.arange(offset, offset + T)
    return ~visible(pos, pos, window, sinks)


class KVCache:
    """Per-layer keys and values of the tokens seen so far.

    KVCache(config, batch_size, max_len)                   full cache, up to max_len tokens
    KVCache(config, batch_size, window=W, sinks=S)         rolling buffer of S + W slots
    KVCache(config, batch_size, max_len, per_row=True)     full cache, each row at its own position
    """

    def __init__(self, config, batch_size, max_len=None, *, window=None, sinks=0, per_row=False):
        if not config.causal:
            raise ZeroLLMError("a KV cache only makes sense for a causal model (config.causal=True)")
        if window is not None and (window < 1 or sinks < 0):
            raise ZeroLLMError(f"window must be >= 1 and sinks >= 0; got window={window}, sinks={sinks}")
        if window is None and (max_len is None or max_len < 1):
            raise ZeroLLMError("a full KV cache needs max_len >= 1 (or give a window for a rolling buffer)")
        if per_row and window is not None:
            raise ZeroLLMError("a per-row KV cache is a full cache; leave out window")
        self.window, self.sinks = window, (sinks if window is not None else 0)
        self.slots = max_len if window is None else self.sinks + window
        dtype = np.dtype(config.dtype)
        shape = (batch_size, config.n_kv_head, 1, self.slots, config.head_size)
        self.k = [np.zeros(shape, dtype) for _ in range(config.n_layer)]
        self.v = [np.zeros(shape, dtype) for _ in range(config.n_layer)]
        self.slot_pos = np.full(self.slots, -1)       # absolute position held by each slot (-1 = empty)
        self.pos = 0                                   # tokens processed so far = next position
        if per_row:
            self.pos = np.zeros(batch_size, dtype=np.int64)   # (B,) each row's next position

    @property
    def rolling(self):
        return self.window is not None

    @property
    def per_row(self):
        return np.ndim(self.pos) == 1

    @property
    def causal_only(self):
        """Does update() hide exactly the causal rule, causal_mask(T, Tk), and nothing else? A full cache with one
        position for every row does: its T new tokens are the last T of the Tk it returns. A rolling buffer
        (window, sinks) or rows at their own positions hide more, one mask per row for the latter."""
        return not self.rolling and not self.per_row

    def _slot(self, p):
        """Where absolute position p lives: sinks stay put, the rest go round the ring."""
        if not self.rolling or p < self.sinks:
            return p
        return self.sinks + (p - self.sinks) % self.window

    def update(self, layer, k_new, v_new):
        """Attend-ready keys, values and hidden-mask for the T new tokens at positions pos..pos+T-1.

        Returns (k, v, mask) with k, v (B, nkv, 1, Tk, hs) and mask (T, Tk) True = hidden. The new
        entries are stored for later steps. ``advance(T)`` must be called once all layers are done.
        """
        T = k_new.shape[-2]
        if self.per_row:
            return self._update_rows(layer, k_new, v_new)
        new_pos = np.arange(self.pos, self.pos + T)
        if not self.rolling:
            if self.pos + T > self.slots:
                raise ZeroLLMError(f"KV cache is full ({self.slots} tokens); start a new cache or use a window")
            self.k[layer][..., self.pos:self.pos + T, :] = k_new
            self.v[layer][..., self.pos:self.pos + T, :] = v_new
            end = self.pos + T
            return self.k[layer][..., :end, :], self.v[layer][..., :end, :], ~visible(new_pos, np.arange(end))
        # rolling: attend over [kept slots, all new tokens], then keep what the ring can hold. (Writing
        # first would let a long chunk overwrite keys its own earlier queries still need.)
        k = np.concatenate([self.k[layer], k_new], axis=-2)
        v = np.concatenate([self.v[layer], v_new], axis=-2)
        k_pos = np.concatenate([self.slot_pos, new_pos])
        mask = ~visible(new_pos, k_pos, self.window, self.sinks)
        for t, p in enumerate(new_pos):        # in order: a later position may take an earlier one's slot
            s = self._slot(p)
            self.k[layer][..., s, :] = k_new[..., t, :]
            self.v[layer][..., s, :] = v_new[..., t, :]
        return k, v, mask

    def _update_rows(self, layer, k_new, v_new):
        """update() with rows at their own positions: the mask is then (B, T, Tk), one per row."""
        B, T = k_new.shape[0], k_new.shape[-2]
        new_pos = self.pos[:, None] + np.arange(T)                     # (B, T) absolute positions
        end = int(new_pos.max()) + 1 if B else 0
        if end > self.slots:
            raise ZeroLLMError(f"KV cache is full ({self.slots} tokens); give it a larger max_len")
        if T == 1:                                                     # a decoding step: one slot per row
            rows = np.arange(B)
            self.k[layer][rows, :, :, self.pos] = k_new[:, :, :, 0]    # (B, nkv, 1, hs)
            self.v[layer][rows, :, :, self.pos] = v_new[:, :, :, 0]
        else:
            for b, p in enumerate(self.pos):
                self.k[layer][b, ..., p:p + T, :] = k_new[b]
                self.v[layer][b, ..., p:p + T, :] = v_new[b]
        hidden = np.arange(end)[None, None, :] > new_pos[:, :, None]   # (B, T, Tk): keys after the query
        return self.k[layer][..., :end, :], self.v[layer][..., :end, :], hidden

    def add_rows(self, *others):
        """Append the rows of other per-row caches (prompts just prefilled) after this cache's rows, in
        one copy. All grow to the largest number of slots; the new slots hold zeros, which the mask hides.
        Only the slots each cache has filled are copied: a long prompt joining short rows copies its own
        keys, not the short rows' padding (the zeros of np.zeros are not written)."""
        caches = (self, *others)
        if not all(c.per_row for c in caches):
            raise ZeroLLMError("add_rows joins per-row caches (KVCache(..., per_row=True))")
        slots = max(c.slots for c in caches)
        self.k = [_stack_rows([c.k[i] for c in caches], [c.pos for c in caches], slots) for i in range(len(self.k))]
        self.v = [_stack_rows([c.v[i] for c in caches], [c.pos for c in caches], slots) for i in range(len(self.v))]
        self.pos = np.concatenate([c.pos for c in caches])
        self.slots = slots
        self.slot_pos = np.full(slots, -1)

    def put(self, row, start, keys, values):
        """Write L layers' keys and values (nkv, 1, n, hs) into ``row``'s slots start..start+n-1 (a per-row
        cache being filled from zerollm.generation.prefix's stored blocks)."""
        n = keys[0].shape[-2]
        for layer in range(len(self.k)):
            self.k[layer][row, ..., start:start + n, :] = keys[layer]
            self.v[layer][row, ..., start:start + n, :] = values[layer]

    def reserve(self, slots):
        """Grow a per-row cache to at least ``slots`` slots (speculative decoding writes a few guesses
        past what the longest row needs; the new slots hold zeros, which the mask hides)."""
        if slots > self.slots:
            self.k = [_pad_slots(k, slots) for k in self.k]
            self.v = [_pad_slots(v, slots) for v in self.v]
            self.slots, self.slot_pos = slots, np.full(slots, -1)

    @property
    def batch_size(self):
        return self.k[0].shape[0]

    def advance(self, T):
        """Record that T more tokens are in the cache (call after every layer has been updated)."""
        if self.rolling:
            for p in range(self.pos, self.pos + T):
                self.slot_pos[self._slot(p)] = p
        self.pos += T

    def keep_rows(self, rows):
        """Keep only the sequences ``rows`` (indices into the batch), e.g. when others have finished."""
        rows = np.asarray(rows, dtype=np.int64)
        self.k = [k[rows] for k in self.k]                    # (B, nkv, 1, S, hs) -> (len(rows), ...)
        self.v = [v[rows] for v in self.v]
        if self.per_row:
            self.pos = self.pos[rows]

    def nbytes(self):
        return sum(a.nbytes for a in self.k + self.v)


def _pad_slots(a, slots):
    """(B, nkv, 1, S, hs) -> (B, nkv, 1, slots, hs), zeros after the first S slots."""
    extra = slots - a.shape[-2]
    return a if extra == 0 else np.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, extra), (0, 0)])


def _stack_rows(arrays, positions, slots):
    """Per-row caches' (B_i, nkv, 1, S_i, hs) keys -> one (sum B_i, nkv, 1, slots, hs) array holding each
    array's filled slots (those before its rows' largest next position); every other slot is zero."""
    first = arrays[0]
    out = np.zeros((sum(a.shape[0] for a in arrays), *first.shape[1:3], slots, first.shape[-1]), first.dtype)
    at = 0
    for a, pos in zip(arrays, positions):
        used = int(pos.max()) if len(pos) else 0
        out[at:at + a.shape[0], ..., :used, :] = a[..., :used, :]
        at += a.shape[0]
    return out
