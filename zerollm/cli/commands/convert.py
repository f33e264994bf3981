"""``zerollm convert --from DIR --to DIR``: Hugging Face <-> zerollm model directories, or a GGUF file.

The direction comes from what --from is:

    a transformers directory (config.json with "architectures"/"model_type")
        -> a zerollm model directory (config.json + model.safetensors + tokenizer.json, ours)
    a zerollm model directory, training run, or checkpoint step directory
        -> a transformers directory (GPT2LMHeadModel, LlamaForCausalLM or MixtralForCausalLM + tokenizer files)

    a zerollm model, run or checkpoint, or a transformers directory, with --to FILE.gguf
        -> one GGUF file (llama.cpp's format) at --quant f32 | f16 | q8_0 | q4_0 | q4_K | q5_K | q6_K | q4_K_M
           | q5_K_M (zerollm.interop.gguf; the k-quants and llama.cpp's mixes in zerollm.interop.kquant)

    zerollm convert --from gpt2 --to gpt2-zerollm
    zerollm convert --from runs/shakespeare --to shakespeare-hf
    zerollm convert --from runs/shakespeare --to shakespeare-q8_0.gguf --quant q8_0
"""

import os
import sys

from zerollm.model.budget import add_force_argument
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import refuse_non_regular
from zerollm.io.lock import writing
from zerollm.io.outdir import check_outside_runs, check_separate


def add_arguments(parser):
    parser.add_argument("--from", dest="src", required=True, metavar="DIR",
                        help="a Hugging Face model directory, or a zerollm model/run/checkpoint directory")
    parser.add_argument("--to", dest="dst", required=True, metavar="DIR|FILE.gguf",
                        help="the directory to create (it must not exist, or be empty), or a .gguf file")
    parser.add_argument("--quant", choices=("f32", "f16", "q8_0", "q4_0", "q4_K", "q5_K", "q6_K", "q4_K_M", "q5_K_M"),
                        default=None, help="with --to FILE.gguf: how the matrices are stored (default f32; q4_K_M "
                                           "and q5_K_M are llama.cpp's mixes, with Q6_K where it puts them); norms "
                                           "and biases stay f32")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the model in --to if it already holds one (its config.json, weights, "
                             "tokenizer and adapter files; other files such as .git or README.md stay); a GGUF "
                             "file only if it is a GGUF file")
    parser.add_argument("--no-tokenizer", action="store_true",
                        help="convert the weights only, without the tokenizer")
    add_force_argument(parser)


def _describe(model):
    cfg = model.config
    kind = "GPT-2 layout" if cfg.pos == "learned" else "Mixtral layout" if cfg.n_expert else "Llama layout"
    if cfg.qk_norm or cfg.qkv_bias:              # Qwen3's QK-norm or Qwen2's q/k/v biases
        kind = "Qwen3 layout" if cfg.qk_norm else "Qwen2 layout"
    return f"{kind}, n_layer={cfg.n_layer}, {model.num_params():,} parameters"


def _adapter_writer(model, dst):
    """A LoRA run converts to its base plus a PEFT adapter directory DST/adapter (zerollm.interop.peft)."""
    if model.lora is None:
        return None
    from zerollm.interop.peft import save_adapter
    return lambda folder: save_adapter(model, os.path.join(folder, "adapter"), os.path.abspath(dst))


def _reward_head(heads):
    """A reward run's {"score.weight", "score.bias"}, or None (a language model, or a PPO run whose value
    head is only the critic it trained with)."""
    if {"score.weight", "score.bias"} <= set(heads):
        return {k: heads[k] for k in ("score.weight", "score.bias")}
    return None


def _value_head_note(heads):
    """A PPO run's value head is the critic it trained with, not part of the policy: said, not exported."""
    if any(k.startswith("v_head.") for k in heads):
        print("zerollm convert: note: the PPO run's value head (the critic it trained with) is not exported; the "
              "policy, a language model, is", file=sys.stderr)


def _names_a_gguf_file(dst):
    """--to FILE.gguf (any case: UP.GGUF too) is a GGUF file; "x.gguf/" could be either, so it is refused."""
    bare = dst.rstrip("/" + os.sep)
    if not bare.lower().endswith(".gguf"):
        return False
    if bare != dst:
        raise ZeroLLMError(f"--to {dst} ends in .gguf and a slash: for a GGUF file give --to {bare}; for a Hugging "
                           "Face folder give a name that does not end in .gguf")
    return True


def run(args):
    from zerollm.interop import hf

    check_separate(args.dst, [args.src], "--to", "--from")
    check_outside_runs(args.dst, "--to")                 # zerollm.io.outdir: never into another run or model
    if not os.path.isdir(args.dst):
        refuse_non_regular(args.dst, "--to")             # a pipe or device is never opened, --overwrite or not
    if _names_a_gguf_file(args.dst):
        return _to_gguf(args)
    if args.quant is not None:
        raise ZeroLLMError("--quant is for GGUF files: give --to FILE.gguf (a directory is always float32)")
    hf.check_target(args.dst, args.overwrite, flag="--overwrite")   # fail before loading a big model
    with writing(args.dst, beside=True):                 # a second convert to --to stops here, at once
        kept = hf.foreign_files(args.dst)
        code = _convert(args)
    if kept:
        shown = ", ".join(kept[:6]) + (f" and {len(kept) - 6} more" if len(kept) > 6 else "")
        print(f"zerollm convert: note: kept {shown} in {args.dst}: convert does not write them (they may "
              "still describe the model that was there before)", file=sys.stderr)
    return code


def _open(args, foreign):
    """The model of --from (``foreign``: a Hugging Face directory, else a zerollm one) with its tokenizer (None
    with --no-tokenizer).
    A Hugging Face model's weights convert even when its tokenizer cannot (e.g. Llama's SentencePiece): a
    warning; a zerollm tokenizer.json that cannot be read is damaged, and an error."""
    from zerollm.interop.opening import Source, open_model
    where = {"hf": args.src} if foreign else {"ckpt": args.src}
    mode = "skip" if args.no_tokenizer else "try" if foreign else "may"
    opened = open_model(Source(**where, force=args.force), tokenizer=mode)
    if opened.tokenizer_error:
        print(f"zerollm convert: warning: tokenizer not converted: {opened.tokenizer_error}", file=sys.stderr)
    return opened


def _convert(args):
    from zerollm.interop import hf
    from zerollm.interop.opening import save_zerollm

    to_zerollm = hf.is_hf_dir(args.src)
    opened = _open(args, to_zerollm)
    model, tokenizer, heads = opened.model, opened.tokenizer, opened.heads
    if to_zerollm:
        path = save_zerollm(model, args.dst, tokenizer=tokenizer, overwrite=args.overwrite)
        target = "zerollm model directory"
    else:
        score = _reward_head(heads)
        if score is not None and model.lora is not None:
            model = model.merged()                       # the classifier is one model: adapters folded in
        path = hf.export(model, args.dst, tokenizer=tokenizer, overwrite=args.overwrite,
                         also=_adapter_writer(model, args.dst), score=score)
        if score is not None:
            target = (f"Hugging Face {hf.SEQUENCE_CLASSIFIERS[hf.export_family(model.config)]} directory (the "
                      "reward model, its score head as the one label)")
        else:
            target = "Hugging Face directory" + (" (the base) with the PEFT adapter in adapter/" if model.lora else "")
    tok = f", tokenizer: {tokenizer.name} ({tokenizer.vocab_size} tokens)" if tokenizer is not None else ""
    print(f"wrote {target} {path} ({_describe(model)}{tok})")
    if not to_zerollm:
        _value_head_note(heads)
    bias = 0.0 if to_zerollm or score is None else float(score["score.bias"].reshape(-1)[0])
    if bias:
        print(f"zerollm convert: note: the score head's bias ({bias:.6g}) is left out, as transformers' score layer "
              "has none: every reward is that much lower there, and their differences (all a reward model is "
              "trained on) are the same", file=sys.stderr)
    return 0


def _to_gguf(args):
    from zerollm.interop import hf
    from zerollm.interop.gguf import check_gguf_target, export_gguf

    check_gguf_target(args.dst, args.overwrite)          # fail before loading a big model
    with writing(args.dst, beside=True):
        opened = _open(args, hf.is_hf_dir(args.src))
        model, tokenizer, heads = opened.model, opened.tokenizer, opened.heads
        done = export_gguf(model, args.dst, tokenizer=tokenizer, quant_kind=args.quant or "f32",
                           overwrite=args.overwrite)
    if _reward_head(heads) is not None:
        print("zerollm convert: note: the reward model's score head is not exported (GGUF has no place for it); "
              "the file is a plain language model", file=sys.stderr)
    _value_head_note(heads)
    kinds = ", ".join(f"{n} {k}" for k, n in done["kinds"].items())
    tok = f", tokenizer: {tokenizer.name} ({tokenizer.vocab_size} tokens)" if tokenizer is not None else ", no tokenizer"
    print(f"wrote GGUF file {done['path']} (arch {done['arch']}, {_describe(model)}; tensors: {kinds}{tok})")
    return 0
