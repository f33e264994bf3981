"""interop: zerollm models in and out of other formats. Hugging Face GPT-2 / Llama / Mixtral
directories (interop.hf); PEFT adapters and GGUF files come here.

May import every room below it, up to align (the chat template is written into exported configs)."""
