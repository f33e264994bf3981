"""zerollm.engine.memory: the malloc setting is applied once, and it changes no result."""

import numpy as np

from zerollm.engine.memory import keep_freed_memory
from zerollm.model.gpt import GPT, GPTConfig


def test_keep_freed_memory_is_idempotent_and_harmless():
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
    idx = np.arange(8)[None] % 11
    before = model.forward(idx)[0]
    first = keep_freed_memory()
    assert keep_freed_memory() == first            # a second call is a no-op with the same answer
    assert first is True                           # this project runs on glibc (Linux CI)
    np.testing.assert_array_equal(model.forward(idx)[0], before)
