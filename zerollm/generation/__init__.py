"""generation: text out of a model. The one sampler (temperature, top-k, top-p over the KV cache) and
generated text made safe to print. The continuous-batching scheduler of the server comes here.

May import io, engine, tokenizers, nn, model and data."""
