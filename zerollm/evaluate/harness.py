"""zerollm as an lm-evaluation-harness model: ``lm_eval --model zerollm --model_args ckpt=RUN ...``.

model_args (comma-separated key=value):
    ckpt=DIR        a zerollm training run, checkpoint step or model directory
    hf=DIR          or a Hugging Face GPT-2/Llama directory (zerollm.interop.hf)
    threads=N       threads a batch is split over (zerollm.training.parallel; default 1)
    chat=auto|yes|no    generate_until prompts through the chat template (zerollm.data.chat), as
                    ``zerollm tasks eval`` does: auto = when the tokenizer has the template's tokens
    seed=S          generation seed when a task asks for sampling (greedy otherwise): a whole number
                    from 0 to 2**63 - 1, as ``zerollm sample --seed``
and lm-eval's own --batch_size (requests per forward pass, default 8). lm-eval also passes its
--max_batch_size and --device, which are accepted and not used (zerollm runs on the CPU). Any other
model_arg is refused by name, and so is a value out of range, before the model is loaded.

The three request types run on zerollm's own parts:
    loglikelihood            zerollm.evaluate.loglik.loglikelihoods (one forward over context+continuation)
    loglikelihood_rolling    zerollm.evaluate.loglik.rolling_loglikelihood (lm-eval's rolling windows)
    generate_until           zerollm.generation.decode.sample_completions (the one decode loop), cut at the
                             first ``until`` string
Texts are split into context and continuation ids as lm-eval's ``hf`` model does (trailing spaces of the
context move to the continuation; the continuation's ids are those of context+continuation after the
context's), and special tokens written as text become their ids (as a Hugging Face tokenizer does), so
both models score the same ids. A text with an empty context (and rolling texts) starts with the
tokenizer's <|endoftext|> when it has one; without one, a rolling text's first token is context only.

Registering: importing this module registers "zerollm" (lm-eval 0.4 has no entry points for models);
the task YAML files of ``zerollm tasks make lm-eval`` import it (zerollm.evaluate.lmeval_tasks).
"""

import lm_eval.models  # noqa: F401  (the built-in models first: lm-eval fills an EMPTY registry with them)
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

import argparse
import sys

from zerollm.io.argtypes import SAMPLING_SEED, THREADS
from zerollm.io.errors import ZeroLLMError

EOT = "<|endoftext|>"
KNOWN_ARGS = ("ckpt", "hf", "threads", "chat", "seed")
LM_EVAL_ARGS = ("batch_size", "max_batch_size", "device")     # what lm_eval itself adds to model_args


def model_arg(name, value, kind):
    """A numeric model_arg checked against ``kind`` (a zerollm.io.argtypes range). lm_eval has already
    turned "5" into 5 and "1.5" into 1.5; from Python (a dict of model_args) it may still be text."""
    if isinstance(value, str):
        try:
            return kind(value)
        except argparse.ArgumentTypeError:
            raise ZeroLLMError(f"model_args {name} must be {kind.describe()}, got {value!r}") from None
    return kind.check(value, f"model_args {name}")


def check_unknown(extra):
    """Refuse model_args zerollm does not know (a typo would otherwise be ignored without a word)."""
    unknown = sorted(set(extra) - set(LM_EVAL_ARGS))
    if unknown:
        raise ZeroLLMError(f"model_args {', '.join(unknown)}: not known to --model zerollm; the known ones are "
                           f"{', '.join(KNOWN_ARGS)} (and lm_eval's own --batch_size)")


def load(ckpt=None, hf=None):
    """(model, tokenizer) of a zerollm directory or a Hugging Face directory (zerollm.interop.opening)."""
    from zerollm.interop.opening import Source, open_model
    if (ckpt is None) == (hf is None):
        raise ZeroLLMError("give exactly one of model_args ckpt=DIR (zerollm) or hf=DIR (Hugging Face)")
    opened = open_model(Source(ckpt=None if ckpt is None else str(ckpt), hf=None if hf is None else str(hf)))
    return opened.model, opened.tokenizer


@register_model("zerollm")
class ZeroLLMLM(LM):
    def __init__(self, ckpt=None, hf=None, threads=1, chat="auto", seed=0, batch_size=8, **extra):
        super().__init__()
        check_unknown(extra)                             # every check before the (slow) load
        self.threads = model_arg("threads", threads, THREADS)
        self.seed = model_arg("seed", seed, SAMPLING_SEED)
        self.batch_size = int(batch_size) if str(batch_size).isdigit() else 8      # "auto" -> 8
        if chat not in ("auto", "yes", "no"):
            raise ZeroLLMError(f"model_args chat must be auto, yes or no, got {chat!r}")
        self.model, self.tok = load(ckpt, hf)
        from zerollm.data import chat as chat_io
        self.chat = chat == "yes" or (chat == "auto" and chat_io.has_template(self.tok))
        self.prefix = self.tok.special_tokens.get(EOT)
        self.left_out = set()                            # characters readable() has said it leaves out

    # ------------------------------------------------------------------
    def readable(self, text):
        """``text`` without the characters this tokenizer has no id for (a character tokenizer knows only
        the characters of its corpus), each left out as a byte-level backend's unknown token would carry
        nothing; which ones were left out is said once on stderr."""
        from zerollm.tokenizers.char import UnknownCharacters, describe_char
        try:
            self.tok.encode(text, allowed_special="all")
            return text
        except UnknownCharacters as err:
            unknown = set(err.chars)
        new = sorted(unknown - self.left_out)
        if new:
            self.left_out |= set(new)
            more = f" and {len(new) - 12} more" if len(new) > 12 else ""
            shown = ", ".join(describe_char(c) for c in new[:12]) + more
            print(f"zerollm (lm-eval): note: the tokenizer has no id for {shown}; these characters are left out "
                  "of the texts it scores and continues", file=sys.stderr)
        return "".join(c for c in text if c not in unknown)

    def encode(self, text):
        from zerollm.tokenizers.char import UnknownCharacters
        try:
            return self.tok.encode(text, allowed_special="all")
        except UnknownCharacters:
            return self.tok.encode(self.readable(text), allowed_special="all")

    def encode_pair(self, context, continuation):
        """(context ids, continuation ids) as lm-eval's hf model splits them. An empty context (or one made only
        of characters the tokenizer lacks) starts with <|endoftext|>; a tokenizer without one makes the
        continuation's first token context only, as a rolling text's is (an answer of one token then
        cannot be scored: see loglikelihood)."""
        from zerollm.tokenizers.char import UnknownCharacters
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
        try:
            return self._split(context, continuation)
        except UnknownCharacters:
            return self._split(self.readable(context), self.readable(continuation))

    def _split(self, context, continuation):
        encode = lambda text: self.tok.encode(text, allowed_special="all")
        if not context:
            cont = encode(continuation)
            return ([self.prefix], cont) if self.prefix is not None else (cont[:1], cont[1:])
        whole, ctx = encode(context + continuation), encode(context)
        return ctx, whole[len(ctx):]

    def loglikelihood(self, requests, disable_tqdm=False):
        from zerollm.evaluate.loglik import loglikelihoods
        pairs = [self.encode_pair(*req.args) for req in requests]
        scored = [i for i, (_, cont) in enumerate(pairs) if cont]
        # nothing to score: a continuation made only of characters the tokenizer lacks (one the model can never
        # write), or one token with no context before it (a tokenizer without <|endoftext|>)
        out = [(float("-inf"), False)] * len(pairs)
        done = loglikelihoods(self.model, [pairs[i] for i in scored], batch_size=self.batch_size,
                              threads=self.threads) if scored else []
        for i, result in zip(scored, done):
            out[i] = result
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        from zerollm.evaluate.loglik import rolling_loglikelihood
        return [rolling_loglikelihood(self.model, self.encode(req.args[0]), prefix=self.prefix,
                                      batch_size=self.batch_size, threads=self.threads) for req in requests]

    def generate_until(self, requests, disable_tqdm=False):
        """Requests with the same generation settings are sampled together (row i: seed (seed, i))."""
        groups = {}
        for i, req in enumerate(requests):
            groups.setdefault(self._settings(dict(req.args[1])), []).append(i)
        out = [None] * len(requests)
        for settings, rows in groups.items():
            for i, text in zip(rows, self._generate([requests[i].args[0] for i in rows], rows, *settings)):
                out[i] = text
        return out

    @staticmethod
    def _settings(kwargs):
        """(until strings, max new tokens, temperature): 0 = greedy unless the task asks to sample."""
        until = kwargs.get("until") or []
        until = (until,) if isinstance(until, str) else tuple(until)
        temperature = float(kwargs.get("temperature", 1.0)) if kwargs.get("do_sample", False) else 0.0
        return until, int(kwargs.get("max_gen_toks", 64)), temperature

    def _generate(self, contexts, rows, until, max_new, temperature):
        from zerollm.data import chat as chat_io
        from zerollm.generation.decode import Completions, sample_completions
        from zerollm.generation.sample import Sampling
        from zerollm.align.tasks.evaluate import newline_ids
        T = self.model.config.block_size
        stop = {chat_io.end_id(self.tok)} if self.chat else set()
        if any("\n" in u for u in until):
            stop.update(newline_ids(self.tok))
        if self.prefix is not None:
            stop.add(self.prefix)
        keep = max(1, T - max_new)                  # room for the new tokens (what lm-eval's hf model keeps)
        prompts = [(chat_io.encode_prompt(self.tok, self.readable(c)) if self.chat else self.encode(c))[-keep:]
                   for c in contexts]
        if not self.chat and self.prefix is not None:
            prompts = [p or [self.prefix] for p in prompts]  # a context of characters it lacks only: as lm-eval's
        asked = [i for i, p in enumerate(prompts) if p]      # empty context; without <|endoftext|>, no answer
        texts = [""] * len(prompts)
        if asked:
            longest = max(len(prompts[i]) for i in asked)
            how = Completions(min(max_new, T + 1 - longest), Sampling(temperature), tuple(sorted(stop)))
            ids = sample_completions(self.model, [prompts[i] for i in asked], how,
                                     seeds=[(self.seed, rows[i]) for i in asked])
            for i, c in zip(asked, ids):
                texts[i] = chat_io.decode_completion(self.tok, c) if self.chat else self.tok.decode(c)
        for u in until:
            texts = [t.split(u)[0] for t in texts]
        return [t.replace(EOT, "") for t in texts]
