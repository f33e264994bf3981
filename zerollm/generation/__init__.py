"""generation: text out of a model. The sampler (temperature, top-k, top-p, min-p, penalties: sample),
the one decode loop that every client runs (batching: the Scheduler, continuous batching for the server
and groups of requests in the caller's thread, with rolling caches, the context limit, stop ids and stop
strings), what a request to it is made of and how it ends (request: Request, Token, Done, Context,
Features), the server's prompts prefilled in chunks within a step's token budget, from the prefix
cache where they begin alike (prefill), the prefix cache's blocks of prompt keys and values (prefix),
speculative decoding: prompt-lookup guesses and the scheduler's check of them or of a draft model's
(speculate), grammar-constrained decoding
(grammar/: regex and JSON Schema -> byte automaton -> the token ids each state allows, a row's mask),
generate and sample_completions over it (decode), ids made into whole characters with stop
strings cut out (text), and generated text made safe to print (display).

May import io, engine, tokenizers, nn, model and data."""
