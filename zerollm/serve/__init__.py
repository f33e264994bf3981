"""serve: talking to a model. The OpenAI-compatible HTTP API over the continuous-batching scheduler
(api, backend, schemas; guard: framing, the body cap, read deadlines, the key and the shutdown, before
the API sees a request; metrics: GET /metrics for Prometheus; tools: OpenAI's tools, tool_choice and
tool_calls and a thinking model's reasoning_content, over the chat template's one parser; structured:
response_format, the answer held to JSON or a JSON Schema by zerollm.generation.grammar), the chat page (page.html, package data) and the terminal chat of `zerollm chat`
(repl). Decoding, stop strings and the context limit are zerollm.generation's.

May import every room below it (io ... evaluate)."""
