"""data: text in, token ids out. Token files and training batches (tokens), the chat template (chat; Qwen's ChatML in chatml), the
shipped corpora, the TRL JSONL formats of fine-tuning (formats) and verified downloads.

May import io, engine, tokenizers, nn and model."""
