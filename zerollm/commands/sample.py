"""``zerollm sample``: generate text from a trained checkpoint, streamed as it is produced.

    zerollm sample --ckpt runs/shakespeare --prompt "ROMEO:" --max-new-tokens 300 --temperature 0.8 --top-k 40
"""

import sys

import numpy as np

from zerollm import budget
from zerollm.argtypes import MAX_SIZE, PROBABILITY, SEED, SIZE, Range
from zerollm.budget import add_force_argument
from zerollm.engine import add_engine_argument, apply_engine_argument
from zerollm.errors import ZeroLLMError
from zerollm.memory import keep_freed_memory
from zerollm.threads import add_threads_argument, limit_threads


def add_arguments(p):
    src = p.add_mutually_exclusive_group()
    src.add_argument("--ckpt", metavar="DIR", help="a training run directory (its latest checkpoint) or a step directory")
    src.add_argument("--hf", metavar="DIR", help="a Hugging Face model directory (config.json + *.safetensors)")
    p.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    p.add_argument("--max-new-tokens", type=Range(int, 1, 10 ** 7), default=200)
    p.add_argument("--temperature", type=Range(float, 0, 100), default=0.8, help="0 = greedy (default 0.8)")
    p.add_argument("--top-k", type=Range(int, 1, 2 ** 24), default=None,
                   help="sample only from the k most likely tokens")
    p.add_argument("--top-p", type=PROBABILITY, default=None,
                   help="nucleus sampling: the smallest set with probability >= p")
    p.add_argument("--seed", type=SEED, default=None, help="random seed (default: different every run)")
    p.add_argument("--num-samples", type=Range(int, 1, 10_000), default=1)
    p.add_argument("--window", type=SIZE, default=None,
                   help="sliding-window attention with a rolling KV cache of this many recent tokens")
    p.add_argument("--sinks", type=Range(int, 0, MAX_SIZE), default=0,
                   help="with --window: the first N tokens stay visible (attention sinks)")
    add_force_argument(p)
    add_threads_argument(p)
    add_engine_argument(p)


class StreamDecoder:
    """Turns ids, one at a time, into newly printable text. A byte-level token may end in the middle
    of a UTF-8 character; such an unfinished tail decodes to U+FFFD and is held back until complete.

    Only the ids not printed yet are decoded at each step, so streaming stays linear in the length
    of the output (decoding everything every time would be quadratic).
    """

    def __init__(self, tokenizer):
        self.tok, self.pending = tokenizer, []

    def push(self, token_id):
        self.pending.append(int(token_id))
        text = self.tok.decode(self.pending)
        if text.endswith("\ufffd"):            # an unfinished character: wait for its next bytes
            return ""
        self.pending = []
        return text

    def flush(self):
        text, self.pending = self.tok.decode(self.pending) if self.pending else "", []
        return text


def load_source(args):
    if args.hf:
        from zerollm.hf import load, load_tokenizer_dir
        return load(args.hf, force=args.force).eval(), load_tokenizer_dir(args.hf)
    if not args.ckpt:
        raise ZeroLLMError("give --ckpt DIR (a zerollm training run) or --hf DIR (a Hugging Face model)")
    from zerollm.checkpoint import load_model
    model, tok, _ = load_model(args.ckpt, force=args.force)
    if tok is None:
        raise ZeroLLMError(f"{args.ckpt} has no tokenizer.json, so text cannot be encoded")
    return model, tok


def generation_estimate(cfg, n_prompt, args):
    """Memory of generating: the KV cache (block_size slots, or sinks + window) and the prompt's forward."""
    T = min(n_prompt, cfg.block_size) if args.window is None or cfg.pos == "learned" else n_prompt
    slots = cfg.block_size if args.window is None else args.sinks + args.window
    return budget.inference(cfg, 1, T, cache_slots=slots, what="sampling",
                            hint="--window, --sinks or the --prompt length")


def run(args):
    keep_freed_memory()             # reuse freed activation memory step after step (zerollm.memory)
    apply_engine_argument(args)     # --engine numpy|fast (zerollm.engine)
    with limit_threads(args.threads):
        return _run(args)


def _run(args):
    from zerollm.sample import check_sampling_args, generate
    check_sampling_args(args.temperature, args.top_k, args.top_p)
    if args.sinks < 0 or (args.sinks and args.window is None):
        raise ZeroLLMError("--sinks needs --window and must be >= 0")
    model, tok = load_source(args)
    prompt = tok.encode(args.prompt)
    if not prompt:
        raise ZeroLLMError("the prompt encodes to no tokens; give a non-empty --prompt")
    budget.require(generation_estimate(model.config, len(prompt), args), force=args.force)
    rng = np.random.default_rng(args.seed)
    out = sys.stdout
    for n in range(args.num_samples):
        if n:
            out.write("\n---------------\n")
        stream = StreamDecoder(tok)
        out.write(args.prompt)
        for ids in generate(model, np.array([prompt]), args.max_new_tokens, temperature=args.temperature,
                            top_k=args.top_k, top_p=args.top_p, rng=rng, window=args.window, sinks=args.sinks):
            out.write(stream.push(ids[0]))
            out.flush()
        out.write(stream.flush() + "\n")
        out.flush()
    return 0
