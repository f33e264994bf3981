"""Hugging Face interop: load GPT-2 / Llama / Mixtral checkpoints into zerollm, export zerollm models back.

    from zerollm.interop import hf
    model = hf.load("gpt2")                       # a transformers directory -> zerollm GPT
    tok = hf.load_tokenizer_dir("gpt2")           # its byte-level BPE tokenizer
    hf.export(model, "gpt2-copy", tokenizer=tok)  # -> a directory AutoModelForCausalLM loads
    hf.save_zerollm(model, "gpt2-z", tokenizer=tok)   # zerollm's own model-only directory
    model = hf.load_zerollm("gpt2-z")             # ... or a training run / checkpoint directory

Only NumPy and JSON are used: no torch, no transformers, never pickle, so reading a downloaded
model cannot run code. Modules: configs (config.json <-> GPTConfig), weights (name and layout
map, reading shards), loading, exporting, native (zerollm model directories).
"""

from zerollm.interop.hf.configs import config_to_hf, export_family, hf_to_config
from zerollm.interop.hf.exporting import SEQUENCE_CLASSIFIERS, check_target, export, foreign_files, write_dir
from zerollm.interop.hf.loading import is_hf_dir, load, load_tokenizer_dir
from zerollm.interop.hf.native import load_zerollm, load_zerollm_and_heads, load_zerollm_tokenizer, save_zerollm

__all__ = ["load", "load_tokenizer_dir", "is_hf_dir", "export", "save_zerollm", "load_zerollm",
           "load_zerollm_tokenizer", "hf_to_config", "config_to_hf", "export_family", "write_dir",
           "check_target", "foreign_files", "load_zerollm_and_heads"]
