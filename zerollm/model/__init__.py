"""model: what a GPT is. Its config, the GPT itself (forward and backward through nn/), the reward and
value heads, log-probabilities of a policy, the KV cache, and memory estimates of a model.

May import io, engine, tokenizers and nn. ``from zerollm.model import GPT, GPTConfig`` is the public path."""

from zerollm.model.config import GPTConfig
from zerollm.model.gpt import GPT, param_shapes

__all__ = ["GPT", "GPTConfig", "param_shapes"]
