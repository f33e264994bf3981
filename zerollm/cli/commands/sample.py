"""``zerollm sample``: generate text from a trained checkpoint, streamed as it is produced.

    zerollm sample --ckpt runs/shakespeare --prompt "ROMEO:" --max-new-tokens 300 --temperature 0.8 --top-k 40
    zerollm sample --ckpt runs/tang-sft --prompt "藏头诗：春夏秋冬"     # a fine-tuned model: the chat template
    echo "藏头诗：春夏秋冬" | zerollm sample --ckpt runs/tang-sft --prompt - --system "You write poems."
    zerollm sample --ckpt runs/shakespeare --prompt "Age: " --regex "[1-9][0-9]?"     # only text the pattern matches

With a tokenizer that has the chat template's tokens (a ``zerollm sft`` run) the prompt is the user's turn
and only the assistant's reply is printed, up to its end-of-turn token (--no-chat: plain continuation).
"""

import argparse
import sys
import warnings

import numpy as np

from zerollm.model import budget
from zerollm.io.argtypes import MAX_SIZE, PROBABILITY, SAMPLING_SEED, SIZE, Range
from zerollm.model.budget import add_force_argument
from zerollm.generation.display import decodable
from zerollm.engine import add_engine_argument, apply_engine_argument
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import read_json
from zerollm.engine.memory import keep_freed_memory
from zerollm.generation.batching import Context, ContextWarning, Done, Request, Scheduler, Token, context_notes
from zerollm.generation.grammar import grammar_for_regex, grammar_for_schema
from zerollm.generation.sample import add_penalty_arguments, sampling_of
from zerollm.generation.text import TextStream
from zerollm.cli.source import add_source_arguments, load_source
from zerollm.engine.threads import add_threads_argument, limit_threads


def add_arguments(p):
    add_source_arguments(p)
    p.add_argument("--prompt", default="\n",
                   help="text to continue, or the user's turn of a chat model; '-' reads it from stdin "
                        "(default: a newline)")
    p.add_argument("--system", metavar="TEXT", default=None,
                   help="a chat model's system turn before the prompt (default: none)")
    p.add_argument("--max-new-tokens", type=Range(int, 1, 10 ** 7), default=200,
                   help="the most tokens generated per sample; a chat model's reply may end sooner, at its "
                        "end-of-turn token (default 200)")
    p.add_argument("--temperature", type=Range(float, 0, 100), default=0.8, help="0 = greedy (default 0.8)")
    p.add_argument("--top-k", type=Range(int, 1, 2 ** 24), default=None,
                   help="sample only from the k most likely tokens (default: all)")
    p.add_argument("--top-p", type=PROBABILITY, default=None,
                   help="nucleus sampling: the smallest set with probability >= p (default: off)")
    add_penalty_arguments(p)
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--regex", metavar="PATTERN", default=None,
                       help="generate only text that this regular expression matches whole (docs/structured.md)")
    shape.add_argument("--json-schema", metavar="FILE", default=None,
                       help="generate only JSON that this JSON Schema file accepts (docs/structured.md)")
    p.add_argument("--seed", type=SAMPLING_SEED, default=None, help="random seed (default: different every run)")
    p.add_argument("--num-samples", type=Range(int, 1, 10_000), default=1,
                   help="how many samples of the same prompt, one after another (default 1)")
    p.add_argument("--window", type=SIZE, default=None,
                   help="sliding-window attention with a rolling KV cache of this many recent tokens "
                        "(RoPE or sinusoidal positions only)")
    p.add_argument("--sinks", type=Range(int, 0, MAX_SIZE), default=0,
                   help="with --window: the first N tokens stay visible (attention sinks) (default 0)")
    add_force_argument(p)
    p.add_argument("--chat", action=argparse.BooleanOptionalAction, default=None,
                   help="wrap the prompt in the chat template (a user turn, then the assistant's) and stop at the end "
                        "of the assistant's turn (default: on when the tokenizer has the template, e.g. after "
                        "'zerollm sft')")
    p.add_argument("--thinking", action=argparse.BooleanOptionalAction, default=True,
                   help="Qwen3's thinking switch (enable_thinking): --no-thinking puts an empty think block after "
                        "the prompt, so the model answers at once (default: on)")
    add_threads_argument(p)
    add_engine_argument(p)


def generation_estimate(cfg, n_prompt, args):
    """Memory of generating: the KV cache (block_size slots, or sinks + window) and the prompt's forward."""
    T = min(n_prompt, cfg.block_size) if args.window is None or cfg.pos == "learned" else n_prompt
    slots = cfg.block_size if args.window is None else args.sinks + args.window
    return budget.inference(cfg, 1, T, budget.Purpose("sampling", "--window, --sinks or the --prompt length"),
                            cache_slots=slots)


def run(args):
    keep_freed_memory()             # reuse freed activation memory step after step (zerollm.engine.memory)
    apply_engine_argument(args)     # --engine numpy|fast (zerollm.engine)
    with limit_threads(args.threads):
        return _run(args)


def _run(args):
    sampling = sampling_of(args)
    if args.sinks < 0 or (args.sinks and args.window is None):
        raise ZeroLLMError("--sinks needs --window and must be >= 0")
    model, tok = load_source(args)
    grammar = _grammar(args, tok, model.config.vocab_size)       # a refused pattern before any other line
    if args.window is not None and model.config.pos == "learned":
        raise ZeroLLMError(f"--window needs RoPE or sinusoidal positions, but this model learned one embedding "
                           f"per position up to {model.config.block_size}, so its context cannot roll; leave "
                           "--window out")
    if args.prompt == "-":
        args.prompt = sys.stdin.read()
    prompt, stop = _encode(tok, args)
    if not prompt:
        raise ZeroLLMError("the prompt encodes to no tokens; give a non-empty --prompt")
    budget.require(generation_estimate(model.config, len(prompt), args), force=args.force)
    for note in context_notes(model.config, len(prompt), args.max_new_tokens, args.window):
        if stop is None or not note.startswith("the context is full"):   # a reply may end long before
            warnings.warn(note, ContextWarning)    # now, on a line of its own, not in the middle of the text
    scheduler = Scheduler(model, max_batch=1, allowed=_decodable_ids(model, tok))
    rng = np.random.default_rng(args.seed)
    out = sys.stdout
    for n in range(args.num_samples):
        if n:
            out.write("\n---------------\n")
        out.write(args.prompt if stop is None else "")
        req = Request(prompt, args.max_new_tokens, sampling, rng, stop_ids=frozenset(() if stop is None else (stop,)),
                      text=TextStream(tok, escape=True), context=Context(args.window, args.sinks), grammar=grammar)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", ContextWarning)
            for events in scheduler.stream([req]):
                for _, ev in events:                   # a Token's text, then Done's held-back rest and the end
                    out.write(ev.text if isinstance(ev, Token) else ev.text + "\n")
                    out.flush()
                    if isinstance(ev, Done) and ev.message:
                        print(f"zerollm sample: note: {ev.message}", file=sys.stderr)
        # a chat reply's "the context is full" comes when it happens, unless the prompt already filled it
        _warn_again(said, chat=stop is not None and len(prompt) <= model.config.block_size)
    return 0


def _warn_again(said, chat):
    """The warnings the scheduler gave, less the context notes already printed before the text: for a chat
    reply, "the context is full" only now, when the reply really reached the end of the context."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")            # each sample's own: not "once per place in the code"
        for w in said:
            if not issubclass(w.category, ContextWarning) or (chat and str(w.message).startswith("the context is full")):
                warnings.warn(w.message, w.category)


def _encode(tok, args):
    """(prompt ids, the id that ends a reply or None): the chat template's, or the plain text's."""
    from zerollm.data import chat
    use_chat = chat.has_template(tok) if args.chat is None else args.chat
    if not use_chat:
        if args.system is not None:
            raise ZeroLLMError("--system needs a chat model (a tokenizer with the chat template, e.g. after "
                               "'zerollm sft'); leave --system out, or put the text in --prompt")
        return tok.encode(args.prompt), None
    messages = [{"role": "user", "content": args.prompt}]
    if args.system is not None:
        messages.insert(0, {"role": "system", "content": args.system})
    return chat.encode_prompt(tok, messages, enable_thinking=args.thinking), chat.end_id(tok)


def _grammar(args, tok, vocab_size):
    """The token index of --regex or --json-schema over the tokenizer, or None."""
    if args.regex is not None:
        return grammar_for_regex(args.regex).index(tok, vocab_size)
    if args.json_schema is not None:
        return grammar_for_schema(read_json(args.json_schema, "--json-schema file")).index(tok, vocab_size)
    return None


def _decodable_ids(model, tok):
    """None when the tokenizer decodes every id the model can give; else the mask of those it can
    (a vocabulary padded beyond the tokenizer's), said once on stderr."""
    allowed = decodable(tok, model.config.vocab_size)
    if allowed.all():
        return None
    print(f"zerollm sample: note: the model has {allowed.size:,} token ids but its tokenizer decodes "
          f"{int(allowed.sum()):,} of them; the other {int((~allowed).sum()):,} are never sampled", file=sys.stderr)
    return allowed
