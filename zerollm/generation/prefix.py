"""The prefix cache: keys and values of prompt blocks already computed, shared between requests.

Requests often begin alike (one system prompt, one few-shot preamble). Each prompt is cut into blocks
of ``block`` tokens; a block is known by its tokens AND the block before it, so a block stands for the
whole prefix up to its end (vLLM's hashed blocks; a chain of them is a path in SGLang's radix tree):

    prompt A:  [sys sys sys sys][sys sys usr usr][usr usr]        blocks 1, 2 stored after A's prefill
    prompt B:  [sys sys sys sys][sys sys usr' ..]                 block 1 is a hit: B prefills from token 4

A hit copies the block's keys and values into the new row's cache, so that part of the prompt is not
computed again (zerollm.generation.batching does the copy and the rest of the prefill). At least the
prompt's last token is always computed: its logits choose the first new token.

Blocks in use by a request (found for it or stored from it) hold a reference until it ends; the cache
then keeps them until it needs the room: over ``max_bytes`` the least recently used block that nobody
holds and that has no stored continuation goes first (a chain is cut from its end, so every stored
block can still be reached from the start of a prompt).

Shapes: L layers, nkv key/value heads, hs head size, K = block tokens. A block holds, per layer, keys
and values (nkv, 1, K, hs): one row of a zerollm.model.kvcache.KVCache's slots.
"""

import itertools
from dataclasses import dataclass, field

BLOCK = 16        # tokens per block: small enough that a prompt's shared part is mostly covered


@dataclass(eq=False)
class Block:
    key: tuple                      # (the parent block's id, this block's tokens)
    id: int
    parent: "Block | None"
    k: list                         # L arrays (nkv, 1, K, hs)
    v: list
    refs: int = 0                   # requests holding it
    children: int = 0               # stored blocks that continue it
    used: int = 0                   # tick of its last lookup or store (least recently used goes first)
    nbytes: int = field(init=False)

    def __post_init__(self):
        self.nbytes = sum(a.nbytes for a in self.k + self.v)


class PrefixCache:
    """Blocks of prompts seen, at most ``max_bytes`` of keys and values beyond those in use."""

    def __init__(self, max_bytes, block=BLOCK):
        self.max_bytes, self.block = max_bytes, block
        self.blocks = {}                      # key -> Block
        self.nbytes = 0
        self.queries = self.hits = 0          # prompt tokens looked up, and those found (vLLM's counters)
        self._ids, self._tick = itertools.count(1), itertools.count(1)

    def __len__(self):
        return len(self.blocks)

    def lookup(self, prompt):
        """The stored blocks that begin ``prompt``, the longest chain leaving its last token uncached; each
        gets a reference (give them back with release)."""
        found, parent = [], 0
        for start in range(0, len(prompt) - 1 - self.block + 1, self.block):
            b = self.blocks.get((parent, tuple(prompt[start:start + self.block])))
            if b is None:
                break
            found.append(b)
            parent = b.id
        self.queries += len(prompt)
        self.hits += len(found) * self.block
        return self._hold(found)

    def known(self, tokens):
        """Whether the first block ``tokens`` (one block's worth) is stored, without counting a query."""
        return (0, tuple(tokens)) in self.blocks

    def store(self, prompt, have, keys, values):
        """Store the full blocks of ``prompt`` past the ``have`` blocks already held for it (lookup's),
        taking keys and values from the L arrays (nkv, 1, S, hs) of its row -> the blocks held for it
        now (have's and the new ones), each with a reference."""
        held, parent = list(have), (have[-1] if have else None)
        for start in range(len(have) * self.block, len(prompt) - self.block + 1, self.block):
            key = (parent.id if parent else 0, tuple(prompt[start:start + self.block]))
            b = self.blocks.get(key)
            if b is None:
                b = Block(key, next(self._ids), parent, [k[..., start:start + self.block, :].copy() for k in keys],
                          [v[..., start:start + self.block, :].copy() for v in values])
                self.blocks[key] = b
                self.nbytes += b.nbytes
                if parent is not None:
                    parent.children += 1
            held += self._hold([b])
            parent = b
        self._evict()
        return held

    def release(self, blocks):
        """A request that held ``blocks`` ended (or was cancelled): they may be evicted now."""
        for b in blocks:
            b.refs -= 1
        self._evict()

    def _hold(self, blocks):
        for b in blocks:
            b.refs += 1
            b.used = next(self._tick)
        return blocks

    def _evict(self):
        """Drop the least recently used free leaves until the stored bytes fit max_bytes (blocks in use stay,
        even over the limit: a request never loses the keys it was given)."""
        while self.nbytes > self.max_bytes:
            free = [b for b in self.blocks.values() if b.refs == 0 and b.children == 0]
            if not free:
                return
            b = min(free, key=lambda b: b.used)
            del self.blocks[b.key]
            self.nbytes -= b.nbytes
            if b.parent is not None:
                b.parent.children -= 1
