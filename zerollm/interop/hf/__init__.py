"""Hugging Face interop: load GPT-2 / Llama / Mixtral checkpoints into zerollm, export zerollm models back.

    from zerollm.interop import hf
    model = hf.load("gpt2")                       # a transformers directory -> zerollm GPT
    tok = hf.load_tokenizer_dir("gpt2")           # its byte-level BPE tokenizer
    hf.export(model, "gpt2-copy", tokenizer=tok)  # -> a directory AutoModelForCausalLM loads

Only NumPy and JSON are used: no torch, no transformers, never pickle, so reading a downloaded
model cannot run code. Modules: configs (config.json <-> GPTConfig), weights (name and layout
map, reading shards), loading, exporting. Commands open a Hugging Face directory (like every other model)
through zerollm.interop.opening.open_model; zerollm's own model directory is zerollm.training.modeldir.
"""

from zerollm.interop.hf.configs import config_to_hf, export_family, hf_to_config
from zerollm.interop.hf.exporting import SEQUENCE_CLASSIFIERS, check_target, export, foreign_files, write_dir
from zerollm.interop.hf.loading import is_hf_dir, load, load_tokenizer_dir

__all__ = ["load", "load_tokenizer_dir", "is_hf_dir", "export", "hf_to_config", "config_to_hf", "export_family",
           "write_dir", "check_target", "foreign_files"]
