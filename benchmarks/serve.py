"""Continuous batching under real HTTP load: `zerollm serve` at 1, 4, 16, 64 concurrent streaming clients.

    python benchmarks/serve.py                          # the tang preset's shape, 32 new tokens a request
    python benchmarks/serve.py --shape gpt2 --clients 1 4 --new-tokens 16
    python benchmarks/serve.py --json serve.json        # the numbers as JSON too

Per concurrency C: C client threads each send requests (different prompts, seeds, temperature 0.8,
stream=True) to a `zerollm serve` process for --rounds rounds; reported: aggregate generated tokens/s
(all usage.completion_tokens / wall time), time to first token and time between tokens (p50, p99),
and errors. Beside it, the same prompts (a) one after another through zerollm.generation.sample.generate in one
process (what `zerollm sample` does per prompt) and (b) through transformers' batched generate on the
exported model, C prompts a batch (left padding, sampling, exactly --new-tokens each).

The models have random weights in the preset's shape (the speed of a step does not depend on the
values): `tang` (4 layers, width 192, context 64, its character vocabulary) and `gpt2` (124M: 12
layers, width 768, context 1024, a 50257-id vocabulary served through a byte tokenizer).
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)          # not benchmarks/: its profile.py would shadow the standard library's

PROMPTS = ["藏头诗：春夏秋冬", "写一首关于月亮的诗", "山", "江南", "秋夜", "白日依山尽", "床前明月光", "春眠不觉晓"]


def build(shape, folder):
    """A random model of ``shape`` with a chat-template tokenizer, exported as a Hugging Face directory."""
    from zerollm.data import chat, corpora
    from zerollm.interop.hf import export
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.training.presets import PRESETS
    from zerollm.tokenizers import ByteTokenizer, CharTokenizer
    if shape == "tang":
        p = PRESETS["tang"]
        text = corpora.path("tang").read_text(encoding="utf-8")
        tok = chat.prepare_tokenizer(CharTokenizer.train(text), PROMPTS)
        cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=p["block_size"], n_layer=p["n_layer"],
                        n_head=p["n_head"], n_embd=p["n_embd"], bias=p["bias"])
    else:
        tok = chat.prepare_tokenizer(ByteTokenizer())
        cfg = GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)
    model = GPT(cfg, seed=0)
    export(model, folder, tokenizer=tok)
    return model, tok


def start_server(folder, max_batch, threads):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "zerollm", "serve", "--hf", str(folder), "--port", "0",
                             "--max-batch", str(max_batch), "--max-queue", "1024", "--threads", str(threads)],
                            stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stderr:
        found = re.search(r"on (http://\S+)", line)
        if found:
            return proc, found.group(1)
    raise RuntimeError("zerollm serve did not start")


async def one_request(client, base, i, new_tokens, record):
    body = {"messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}], "max_tokens": new_tokens,
            "temperature": 0.8, "seed": i, "stream": True, "stream_options": {"include_usage": True}}
    start, times, tokens = time.perf_counter(), [], 0
    try:
        async with client.stream("POST", base + "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                raise RuntimeError(r.status_code)
            async for line in r.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
                if any(ch.get("delta", {}).get("content") for ch in chunk["choices"]):
                    times.append(time.perf_counter())
        record.append((start, times, tokens, None))
    except Exception as err:        # noqa: BLE001 - counted as an error of the load test
        record.append((start, times, tokens, repr(err)))


def load_test(base, clients, rounds, new_tokens):
    """``clients`` concurrent streaming clients (one asyncio loop: cheap on the client side), each sending
    ``rounds`` requests one after another."""
    import asyncio
    import httpx
    record = []

    async def client(http, k):
        for r in range(rounds):
            await one_request(http, base, k * rounds + r, new_tokens, record)

    async def everyone():
        limits = httpx.Limits(max_connections=clients + 4)
        async with httpx.AsyncClient(timeout=600, trust_env=False, limits=limits) as http:
            await asyncio.gather(*(client(http, k) for k in range(clients)))
    t0 = time.perf_counter()
    asyncio.run(everyone())
    wall = time.perf_counter() - t0
    ttft = [ts[0] - s for s, ts, _, e in record if ts]
    tbt = [b - a for _, ts, _, _ in record for a, b in zip(ts, ts[1:])]
    return {"clients": clients, "requests": len(record), "tokens": sum(r[2] for r in record),
            "tokens_per_s": sum(r[2] for r in record) / wall, "errors": sum(r[3] is not None for r in record),
            "ttft_p50_ms": _pct(ttft, 50), "ttft_p99_ms": _pct(ttft, 99),
            "tbt_p50_ms": _pct(tbt, 50), "tbt_p99_ms": _pct(tbt, 99)}


def _pct(values, q):
    return float(np.percentile(values, q) * 1000) if values else None


def sequential(model, tok, n, new_tokens):
    """The prompts one after another in this process, as `zerollm sample` generates (tokens/s)."""
    from zerollm.data import chat
    from zerollm.generation.decode import generate
    from zerollm.generation.sample import Sampling
    t0, total = time.perf_counter(), 0
    for i in range(n):
        ids = chat.encode_prompt(tok, PROMPTS[i % len(PROMPTS)])
        for _ in generate(model, np.array([ids]), new_tokens, Sampling(0.8), rng=np.random.default_rng(i)):
            total += 1
    return total / (time.perf_counter() - t0)


def logit_gap(model, tok, rows=16, new_tokens=24):
    """How far a batched row's float32 logits are from the same request alone: ``rows`` requests joining a
    few at a time, every step's logits kept -> (max |batched - alone|, largest |logit|, same tokens)."""
    from zerollm.data import chat
    from zerollm.generation.batching import Request, Scheduler
    from zerollm.generation.sample import Sampling

    def requests():
        got = [[] for _ in range(rows)]
        return got, [Request(chat.encode_prompt(tok, PROMPTS[i % len(PROMPTS)] + "字" * (i // len(PROMPTS))),
                             new_tokens, Sampling(0.8), np.random.default_rng(i), keep_logits=True,
                             emit=got[i].append) for i in range(rows)]
    alone_got, alone = requests()
    for r in alone:
        s = Scheduler(model)
        s.submit(r)
        while s.busy:
            s.step()
    together_got, together = requests()
    s = Scheduler(model, max_batch=rows)
    for k, r in enumerate(together):
        s.submit(r)
        if k % 3 == 0:
            s.step()
    while s.busy:
        s.step()
    gap = max(float(np.abs(a - b).max()) for x, y in zip(alone, together) for a, b in zip(x.logits, y.logits))
    top = max(float(np.abs(a).max()) for x in alone for a in x.logits)
    return gap, top, alone_got == together_got


def transformers_batched(folder, tok, batch, new_tokens, rounds):
    """transformers' generate on the exported model, ``batch`` prompts at a time (tokens/s)."""
    import torch
    from transformers import AutoModelForCausalLM
    from zerollm.data import chat
    hf = AutoModelForCausalLM.from_pretrained(folder).eval()
    prompts = [chat.encode_prompt(tok, PROMPTS[i % len(PROMPTS)]) for i in range(batch)]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(rounds):
            hf.generate(ids, attention_mask=mask, do_sample=True, temperature=0.8, top_k=0, max_new_tokens=new_tokens,
                        min_new_tokens=new_tokens, pad_token_id=0)
    return batch * new_tokens * rounds / (time.perf_counter() - t0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=("tang", "gpt2"), default="tang")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--rounds", type=int, default=2, help="requests per client (default 2)")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="BLAS threads of the server and the baselines")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    import torch
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / args.shape
        model, tok = build(args.shape, folder)
        gap, top, same = logit_gap(model, tok)
        print(f"batched vs alone (16 rows, 24 steps, float32): max |logit difference| {gap:.3g} (logits up to "
              f"{top:.3g}); same tokens: {same}", flush=True)
        proc, base = start_server(folder, max(args.clients), args.threads)
        try:
            for c in args.clients:
                row = load_test(base, c, args.rounds, args.new_tokens)
                row["sequential_tokens_per_s"] = sequential(model, tok, min(c * args.rounds, 8), args.new_tokens)
                row["transformers_tokens_per_s"] = transformers_batched(folder, tok, c, args.new_tokens, 1)
                rows.append(row)
                print(_line(row), flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    if args.json:
        Path(args.json).write_text(json.dumps({"shape": args.shape, "new_tokens": args.new_tokens, "logit_gap": gap,
                                               "rows": rows},
                                              indent=1) + "\n", encoding="utf-8")
    return 0


def _line(r):
    return (f"clients {r['clients']:3d}: {r['tokens_per_s']:8.1f} tok/s  TTFT p50/p99 {r['ttft_p50_ms']:.0f}/"
            f"{r['ttft_p99_ms']:.0f} ms  TBT p50/p99 {r['tbt_p50_ms']:.1f}/{r['tbt_p99_ms']:.1f} ms  errors "
            f"{r['errors']}  | sequential {r['sequential_tokens_per_s']:.1f} tok/s  transformers batch "
            f"{r['transformers_tokens_per_s']:.1f} tok/s")


if __name__ == "__main__":
    raise SystemExit(main())
