"""generation: text out of a model. The sampler (temperature, top-k, top-p over the KV cache), the
continuous-batching scheduler that serves many requests in one forward pass (batching), and generated
text made safe to print (display).

May import io, engine, tokenizers, nn, model and data."""
