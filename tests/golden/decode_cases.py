"""Every client of the decode loop on tiny models, run through either the API of commit e7f1a09 (two loops:
generate() and sample_completions()) or today's (one Scheduler), so that their outputs can be compared.

    python tests/golden/make_decode_golden.py      # with e7f1a09 on PYTHONPATH: writes decode_e7f1a09.json
    tests/test_decode_golden.py                    # today's code must give the very same ids and texts

A case is a function of (api, folder) -> something JSON holds (ids, texts, warnings). ``OldApi`` and
``NewApi`` call the two versions' signatures; everything else (models, prompts, seeds) is shared.
"""

import contextlib
import io
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np

V, BLOCK = 61, 24
LAYOUTS = {
    "learned": dict(pos="learned"),
    "rope": dict(pos="rope", norm="rmsnorm", mlp="swiglu"),
    "sinusoidal": dict(pos="sinusoidal"),
    "moe": dict(pos="rope", norm="rmsnorm", mlp="swiglu", n_expert=4, n_expert_active=2, moe_norm_topk=True),
}
SAMPLINGS = {
    "greedy": dict(temperature=0),
    "top_k": dict(temperature=0.7, top_k=5),
    "top_p": dict(temperature=1.3, top_p=0.8),
    "everything": dict(temperature=0.9, top_k=20, top_p=0.95, min_p=0.02, repetition_penalty=1.3,
                       presence_penalty=0.4, frequency_penalty=0.2),
}


def tiny(layout, seed=3, block=BLOCK):
    """A random model whose weights are scaled up, so that greedy answers vary from token to token."""
    from zerollm.model.gpt import GPT, GPTConfig
    cfg = GPTConfig(vocab_size=V, block_size=block, n_layer=2, n_head=2, n_embd=16, **LAYOUTS[layout])
    model = GPT(cfg, seed=seed)
    for value in model.params.values():
        if value.ndim == 2:
            value *= 4
    return model.eval()


def gguf_q8(folder):
    """A Llama-shaped tiny model written as GGUF Q8_0 and read back (the NumPy engine dequantizes)."""
    from zerollm.interop.gguf import export_gguf
    from zerollm.interop.gguf_load import load_gguf
    from zerollm.model.gpt import GPT, GPTConfig
    cfg = GPTConfig(vocab_size=V, block_size=BLOCK, n_layer=2, n_head=2, n_embd=64, norm="rmsnorm", pos="rope",
                    mlp="swiglu", bias=False, n_kv_head=1, tie_embeddings=False, n_inner=96)
    path = Path(folder) / "q8.gguf"
    if not path.exists():
        export_gguf(GPT(cfg, seed=5).eval(), path, quant_kind="q8_0")
    return load_gguf(path)[0]


def chat_dir(folder, pos="learned", block=96, chat_tokens=True):
    """A byte-tokenizer model directory (the chat template's tokens unless chat_tokens=False)."""
    from zerollm.data import chat
    from zerollm.interop.hf import export
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import ByteTokenizer
    tok = chat.prepare_tokenizer(ByteTokenizer()) if chat_tokens else ByteTokenizer()
    layout = dict(pos=pos) if pos == "learned" else LAYOUTS["rope"]
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=block, n_layer=2, n_head=2, n_embd=32, **layout),
                seed=1)
    for value in model.params.values():
        if value.ndim == 2:
            value *= 8
    path = Path(folder) / f"chat-{pos}-{block}-{chat_tokens}"
    if not path.exists():
        export(model, path, tokenizer=tok)
    return path


def load_dir(path):
    from zerollm.interop.hf import load, load_tokenizer_dir
    return load(str(path)), load_tokenizer_dir(str(path))


# ----------------------------------------------------------------------------
# the two APIs

class OldApi:
    """e7f1a09: generate(**15 keywords), sample_completions(**9), repl(sampling=, max_new=, rng=, allowed=)."""

    @staticmethod
    def generate(model, idx, n, s, rng, window=None, sinks=0, use_cache=True, allowed=None):
        from zerollm.generation.sample import generate
        return [t.tolist() for t in generate(model, idx, n, rng=rng, window=window, sinks=sinks, use_cache=use_cache,
                                             allowed=allowed, **s)]

    @staticmethod
    def completions(model, prompts, n, s, seeds, stop_ids=()):
        from zerollm.generation.sample import sample_completions
        return sample_completions(model, prompts, n, stop_ids=stop_ids, seeds=seeds, **s)

    @staticmethod
    def repl(model, tok, conv, s, rng, max_new, read, out):
        from zerollm.generation.sample import Sampling
        from zerollm.serve.repl import repl
        return repl(model, tok, conv, sampling=Sampling(**s), max_new=max_new, rng=rng, read=read, out=out)

    @staticmethod
    def sample_task(model, tok, task, rows, fmt, s, seed):
        from zerollm.align.tasks.evaluate import sample_task
        return sample_task(model, tok, task, rows, fmt=fmt, max_new_tokens=8, seed=seed, **s)


class NewApi:
    """Today's: one Scheduler; settings travel as Sampling, Context, Completions, Answers, TaskSampling."""

    @staticmethod
    def generate(model, idx, n, s, rng, window=None, sinks=0, use_cache=True, allowed=None):
        from zerollm.generation.batching import Context
        from zerollm.generation.decode import generate
        from zerollm.generation.sample import Sampling
        return [t.tolist() for t in generate(model, idx, n, Sampling(**s), rng=rng,
                                             context=Context(window, sinks, use_cache), allowed=allowed)]

    @staticmethod
    def completions(model, prompts, n, s, seeds, stop_ids=()):
        from zerollm.generation.decode import Completions, sample_completions
        from zerollm.generation.sample import Sampling
        return sample_completions(model, prompts, Completions(n, Sampling(**s), tuple(stop_ids)), seeds=seeds)

    @staticmethod
    def repl(model, tok, conv, s, rng, max_new, read, out):
        from zerollm.generation.sample import Sampling
        from zerollm.serve.repl import Answers, repl
        return repl(model, tok, conv, Answers(Sampling(**s), max_new, rng), read=read, out=out)

    @staticmethod
    def sample_task(model, tok, task, rows, fmt, s, seed):
        from zerollm.align.tasks.evaluate import TaskSampling, sample_task
        from zerollm.generation.sample import Sampling
        return sample_task(model, tok, task, rows, TaskSampling(fmt, 8, Sampling(**s), seed))


# ----------------------------------------------------------------------------
# the cases

def _warned(fn):
    """(fn(), the messages of the warnings it gave)."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        out = fn()
    return {"out": out, "warnings": [str(w.message) for w in said]}


def generate_cases(api, folder):
    """zerollm sample's, chat's and the training samples' loop: greedy and seeded, rows sharing one
    generator, past the context, a prompt longer than it, a rolling window, no cache, an allowed mask."""
    out = {}
    models = {name: tiny(name) for name in LAYOUTS}
    models["gguf_q8_0"] = gguf_q8(folder)
    for name, model in models.items():
        out[f"{name}/greedy/past-the-context"] = _warned(
            lambda: api.generate(model, [5, 9, 2, 7], 30, SAMPLINGS["greedy"], None))
        for s in ("top_k", "everything"):
            out[f"{name}/{s}/three-rows-one-rng"] = _warned(lambda: api.generate(
                model, [[5, 9, 2], [1, 1, 1], [40, 3, 8]], 12, SAMPLINGS[s], np.random.default_rng(11)))
    rope, learned = models["rope"], models["learned"]
    out["rope/window-8-sinks-2"] = _warned(lambda: api.generate(
        rope, [3, 4, 5], 40, dict(temperature=0.8), np.random.default_rng(2), window=8, sinks=2))
    long_prompt = (np.arange(30) * 7 % V).tolist()
    for name in ("learned", "rope"):
        out[f"{name}/prompt-longer-than-the-context"] = _warned(lambda: api.generate(
            models[name], long_prompt, 6, SAMPLINGS["top_p"], np.random.default_rng(3)))
    out["rope/no-cache"] = _warned(lambda: api.generate(rope, [7, 8], 28, dict(temperature=1.0),
                                                        np.random.default_rng(5), use_cache=False))
    allowed = np.arange(V) < 40
    out["learned/allowed"] = _warned(lambda: api.generate(learned, [1, 2], 15, dict(temperature=1.5),
                                                          np.random.default_rng(6), allowed=allowed))
    return out


def completions_cases(api, folder):
    """Rollouts', task evaluation's and lm-eval's loop: mixed prompt lengths, own seeds, stop ids, a
    prompt that leaves room for few tokens."""
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, V, size=int(rng.integers(1, 7))).tolist() for _ in range(9)] + [[4] * (BLOCK - 2)]
    seeds = [(7, i) for i in range(len(prompts))]
    out = {}
    models = {name: tiny(name) for name in ("learned", "rope", "moe")}
    models["gguf_q8_0"] = gguf_q8(folder)
    for name, model in models.items():
        for s in ("greedy", "top_k", "top_p"):
            out[f"{name}/{s}"] = _warned(lambda: api.completions(model, prompts, 12, SAMPLINGS[s], seeds,
                                                                 stop_ids=[3, 17]))
    return out


def _lines(lines):
    feed = iter(lines)

    def read(prompt):
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None
    return read


def cli_cases(api, folder):
    """`zerollm sample` (chat and plain, several samples, --window, a prompt beyond the context) and the
    `zerollm chat` REPL, as printed."""
    from zerollm.cli import main
    from zerollm.serve.repl import Conversation
    chat96, base24, rope24 = chat_dir(folder), chat_dir(folder, block=24, chat_tokens=False), \
        chat_dir(folder, "rope", 24, False)
    runs = {
        "chat/seeded/two-samples": [chat96, "--prompt", "hi", "--temperature", "0.9", "--top-k", "40", "--seed", "5",
                                    "--num-samples", "2", "--max-new-tokens", "30"],
        "chat/greedy/penalties": [chat96, "--prompt", "tell", "--temperature", "0", "--repetition-penalty", "1.5",
                                  "--presence-penalty", "0.5", "--max-new-tokens", "20"],
        "plain/past-the-context": [base24, "--prompt", "ab", "--temperature", "0.8", "--seed", "1",
                                   "--max-new-tokens", "40", "--min-p", "0.05"],
        "plain/prompt-beyond-the-context": [base24, "--prompt", "x" * 30, "--temperature", "0",
                                            "--max-new-tokens", "5"],
        "plain/window": [rope24, "--prompt", "ab", "--temperature", "0.8", "--seed", "2", "--window", "8",
                         "--sinks", "2", "--max-new-tokens", "50"],
    }
    out = {}
    for name, (path, *argv) in runs.items():
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
            warnings.simplefilter("always")
            code = main(["sample", "--hf", str(path), "--threads", "1", *argv])
        out[f"sample/{name}"] = {"code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}
    model, tok = load_dir(chat96)
    said = io.StringIO()
    api.repl(model, tok, Conversation(tok, model.config.block_size), dict(temperature=0.8, top_k=30),
             np.random.default_rng(4), 12, _lines(["hello", "tell me more", "and again"]), said)
    out["chat/repl/three-turns"] = said.getvalue()
    return out


def task_cases(api, folder):
    """`zerollm tasks eval`'s sampling (chat and plain formats) and lm-eval's generate_until."""
    from zerollm.align.tasks import addition
    rows = addition.make(5, "train", 0)
    out = {}
    for path, fmt in ((chat_dir(folder), "chat"), (chat_dir(folder, block=24, chat_tokens=False), "plain")):
        model, tok = load_dir(path)
        for s in ("greedy", "top_p"):
            out[f"tasks/{fmt}/{s}"] = list(api.sample_task(model, tok, addition, rows, fmt, SAMPLINGS[s], 3))
    from zerollm.evaluate.harness import ZeroLLMLM
    lm = ZeroLLMLM(hf=str(chat_dir(folder, block=48, chat_tokens=False)), seed=9)
    reqs = [SimpleNamespace(args=(context, kwargs)) for context, kwargs in (
        ("Question: 2+2?\nAnswer:", {"until": ["\n"], "max_gen_toks": 10}),
        ("The cat", {"until": ["."], "max_gen_toks": 30, "do_sample": True, "temperature": 0.9}),
        ("x" * 60, {"until": ["\n\n"], "max_gen_toks": 8}),
        ("Once upon", {"until": ["q"], "max_gen_toks": 12, "do_sample": True, "temperature": 1.2}))]
    out["lm-eval/generate_until"] = lm.generate_until(reqs)
    return out


def server_cases(api, folder):
    """The HTTP server: seeded completions (n=2, logprobs, a stop string), a streamed chat answer."""
    from fastapi.testclient import TestClient
    from zerollm.serve.api import build_app
    from zerollm.serve.backend import Backend
    model, tok = load_dir(chat_dir(folder))
    backend = Backend(model, tok, name="tiny", max_batch=4, max_queue=8)
    backend.start()
    out = {}
    try:
        with TestClient(build_app(backend)) as client:
            bodies = {
                "completions/seeded-n2-logprobs": ("/v1/completions", dict(prompt="hello", max_tokens=20, seed=5,
                                                   temperature=0.9, n=2, logprobs=2)),
                "completions/stop-string": ("/v1/completions", dict(prompt="ab", max_tokens=40, seed=1,
                                            temperature=1.0, stop=["e", "zz"])),
                "chat/greedy": ("/v1/chat/completions", dict(messages=[{"role": "user", "content": "hi"}],
                                                            max_tokens=30, temperature=0)),
            }
            for name, (route, body) in bodies.items():
                r = client.post(route, json=body).json()
                out[name] = {"choices": r["choices"], "usage": _counts(r["usage"])}
            with client.stream("POST", "/v1/chat/completions", json=dict(
                    messages=[{"role": "user", "content": "yo"}], max_tokens=25, seed=3, temperature=0.8,
                    stop=["|s", "zz"], stream=True, stream_options={"include_usage": True})) as r:
                out["chat/stream-stop-string"] = _streamed([line for line in r.iter_lines() if line])
    finally:
        backend.close()
    return out


def _streamed(lines):
    """A stream's text, finish reasons, usage and last line (how it is cut into chunks depends on timing)."""
    import json
    chunks = [json.loads(line[len("data: "):]) for line in lines if line.startswith("data: {")]
    choices = [c for chunk in chunks for c in chunk["choices"]]
    return {"text": "".join(c["delta"].get("content") or "" for c in choices),
            "finish": [c["finish_reason"] for c in choices if c["finish_reason"]],
            "usage": [_counts(chunk["usage"]) for chunk in chunks if chunk.get("usage")], "last": lines[-1]}


def _counts(usage):
    """The token counts of a usage object, the fields e7f1a09 sent (prompt_tokens_details came later: #60)."""
    return {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}


CASES = {"generate": generate_cases, "completions": completions_cases, "cli": cli_cases, "tasks": task_cases,
         "server": server_cases}
