"""interop: zerollm models in and out of other formats, and the one way to open a model. Hugging Face
GPT-2 / Llama / Mixtral directories (interop.hf), PEFT adapters (peft), GGUF files (gguf, gguf_load) and
their blocks (quant: Q8_0 / Q4_0; kquant: Q4_K / Q5_K / Q6_K); ``opening.open_model`` opens a run, a step, a model directory, a Hugging Face
directory or a GGUF file for every command and library caller.

May import every room below it, up to align (the chat template is written into exported configs)."""
