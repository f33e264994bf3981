"""serve: talking to a model. The OpenAI-compatible HTTP API over the continuous-batching scheduler
(api, backend, schemas), the chat page (page.html, package data), the terminal chat of `zerollm chat`
(repl) and whole-character streaming with stop strings (text).

May import every room below it (io ... evaluate)."""
