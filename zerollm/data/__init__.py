"""data: text in, token ids out. Token files and training batches (tokens), the shipped corpora, the TRL
JSONL formats of fine-tuning (formats) and verified downloads.

May import io, engine, tokenizers, nn and model."""

from zerollm import moved_names  # noqa: E402

__getattr__ = moved_names("zerollm.data")
