"""`zerollm serve` under real HTTP load, reported as `vllm bench serve` reports: TTFT, TPOT and ITL (mean,
median, p99) and throughput, at 1, 4, 16, 64 streaming clients and with each engine feature off and on.

    python benchmarks/serve.py                          # the tang preset's shape, 32 new tokens a request
    python benchmarks/serve.py --shape gpt2 --clients 1 4 --new-tokens 16
    python benchmarks/serve.py --only features --system-tokens 1000 --long-prompt 2000
    python benchmarks/serve.py --only budget --long-prompt 2000    # the step budget's sweep, in process
    python benchmarks/serve.py --only join --shape gpt2            # a row joining / leaving the batch, in process
    python benchmarks/serve.py --only single --pairs 12            # one client vs sequential, request by request
    python benchmarks/serve.py --only versus --against /tmp/base    # this tree's server vs another checkout's
    python benchmarks/serve.py --request-rate 20        # Poisson arrivals, 20 requests/s on average
    python benchmarks/serve.py --json serve.json        # the numbers as JSON too

The clients run in a process of their own (pinned to the last core where the machine has more than one;
the server to the others), so their JSON parsing does not take the server's time unseen. Requests arrive
all at once per client (``--request-rate inf``, each client sending its next request when its last one
ended) or by a Poisson process (exponential gaps of mean 1/rate, seeded). TTFT: send -> first content
chunk; ITL: every gap between two content chunks of one request; TPOT: per request, (last chunk - first
chunk) / (tokens - 1).

``versus`` compares two versions of the server itself: this checkout's and the one at --against (another
checkout of zerollm, for example `git worktree add /tmp/base HEAD~1`), both running at once on the server's
cores, requests alternating between them (4 at a time, the order turned each time), so that a machine whose
speed moves from one minute to the next moves both alike. It reports what each server spent a request (CPU of
the event loop and of the whole process, from /proc, and the client's wall time): a change of a few tenths of a
millisecond a request shows there, where tokens/s of runs minutes apart differ by 10-40% on a shared machine.

1. ``clients``: C concurrent streaming clients, --rounds requests each (temperature 0.8, seeded), beside the
   same prompts one after another in this process, on the server's cores, as `zerollm sample` decodes them (zerollm.generation.decode,
   "sequential") and transformers' batched generate on the exported model at batch C.
2. ``features`` (on the shape's weights with a context of 4096 and a byte tokenizer, so long prompts fit):
   - prefix cache: 32 requests sharing a --system-tokens system prompt, 8 at a time; TTFT with
     --prefix-cache 0 and with the default;
   - chunked prefill: 8 streams decoding, then a --long-prompt prompt arrives; the 8 streams' ITL p99 with no
     long prompt, with it and --max-num-batched-tokens 0 (prefilled whole), and with it and the default budget;
   - prompt lookup: greedy answers continuing a copied passage; tokens/s with --speculate off and ngram,
     and the acceptance rate from /metrics.

The models have random weights in the preset's shape (the speed of a step does not depend on the
values): `tang` (4 layers, width 192, context 64, its character vocabulary) and `gpt2` (124M: 12
layers, width 768, context 1024, a 50257-id vocabulary served through a byte tokenizer). Printed first:
the host (lscpu), the BLAS library and a GEMM's GFLOP/s, so numbers from two machines can be compared.
"""

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
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


SERVER_FLAGS = []        # every server of this run: --stream-interval MS where given
PIN = [True]            # the server and the in-process baselines kept off the clients' core (--no-pin: not)


def start_server(folder, max_batch, threads, *flags, root=ROOT):
    """`zerollm serve` of the checkout ``root`` (this one by default) on every core but the clients' one ->
    (process, base URL)."""
    # that tree first; a PYTHONPATH given too stays behind it (an A/B run adds a package folder that way)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(root), os.environ.get("PYTHONPATH"))))}
    cores = _server_cores()
    proc = subprocess.Popen([sys.executable, "-m", "zerollm", "serve", "--hf", str(folder), "--port", "0",
                             "--max-batch", str(max_batch), "--max-queue", "1024", "--threads", str(threads),
                             "--metrics-public", *SERVER_FLAGS, *flags],
                            stderr=subprocess.PIPE, text=True, env=env, cwd=root,   # `-m` imports from the cwd first
                            preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None)
    for line in proc.stderr:
        found = re.search(r"on (http://\S+)", line)
        if found:
            return proc, found.group(1)
    raise RuntimeError("zerollm serve did not start")


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)


def _cores():
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def _server_cores():
    cores = _cores()
    return set(cores[:-1]) if len(cores) > 1 and PIN[0] else None


# ----------------------------------------------------------------------------
# the clients, in a process of their own

async def one_request(client, base, body, record, progress=None):
    """Stream one request -> record (send time, content-chunk times, completion tokens, error); ``progress``:
    a one-item list counting its content chunks as they come."""
    start, times, tokens = time.perf_counter(), [], 0
    try:
        async with client.stream("POST", base + body.pop("_path", "/v1/chat/completions"), json=body) as r:
            if r.status_code != 200:
                raise RuntimeError(r.status_code)
            async for line in r.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
                if any(ch.get("delta", {}).get("content") or ch.get("text") for ch in chunk["choices"]):
                    times.append(time.perf_counter())
                    if progress is not None:
                        progress[0] += 1
        record.append((start, times, tokens, None))
    except Exception as err:        # noqa: BLE001 - counted as an error of the load test
        record.append((start, times, tokens, repr(err)))


async def _run_plan(http, base, plan):
    """The load of ``plan`` ({"clients": [[body, ...], ...], "rate", "seed", "delays"}) through the httpx pool
    ``http`` -> {"wall", "records"}."""
    import asyncio
    records = [[] for _ in plan["clients"]]
    progress = [[0] for _ in plan["clients"]]

    async def client(k, delay):
        # a client that is already connected, as one that keeps its connection (HTTP keep-alive) is: the first
        # request of a new process otherwise timed httpx's own start (its connection pool, its first connection:
        # 25-35 ms of TTFT against 7-10 ms for the next request on the same client, quiet, tang shape)
        await http.get(base + "/health")
        if delay < 0:                  # -m: once every client starting at once has had m content chunks
            while min(progress[j][0] for j, d in enumerate(starts) if d == 0) < -delay:
                await asyncio.sleep(0.002)
        else:
            await asyncio.sleep(delay)
        clock["first"] = min(clock["first"], time.perf_counter())
        for body in plan["clients"][k]:
            await one_request(http, base, dict(body), records[k], progress[k])

    # the wall time runs from the first request sent to the last answer's end, not from the clients' own start
    # (a process, an httpx pool and a connection each: about 70 ms, which made one client's two requests look
    # half as fast as they were)
    n, rate = len(plan["clients"]), plan["rate"]
    gaps = np.random.default_rng(plan["seed"]).exponential(1 / rate, n) if rate != float("inf") else np.zeros(n)
    starts = list(plan["delays"] if plan["delays"] is not None else np.cumsum(gaps) - gaps[0])
    clock = {"first": float("inf")}
    await asyncio.gather(*(client(k, d) for k, d in enumerate(starts)))
    return {"wall": time.perf_counter() - clock["first"], "records": records}


def _client_process(base, conn):
    """Run each plan that comes through ``conn`` (a Pipe's end; None ends) in this process, on the last core,
    with one httpx pool for all of them -> conn.send of each result."""
    import asyncio
    import httpx
    if len(_cores()) > 1:
        os.sched_setaffinity(0, {_cores()[-1]})

    async def serve_plans():
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(timeout=600, trust_env=False, limits=limits) as http:
            while (plan := conn.recv()) is not None:          # nothing else runs on this loop between plans
                conn.send(await _run_plan(http, base, plan))
    asyncio.run(serve_plans())


class Clients:
    """A client process of its own for the load tests, kept for as many ``run`` calls as the caller makes:
    its httpx pool and the connections it opened stay between them, as a real client's do (the openai SDK
    keeps one pool). ``load`` makes one for a single plan."""

    def __init__(self, base):
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")
        self.conn, there = ctx.Pipe()
        self.proc = ctx.Process(target=_client_process, args=(base, there), daemon=True)
        self.proc.start()

    def run(self, clients, rate=float("inf"), seed=0, delays=None):
        """Run ``clients`` (each a list of request bodies sent one after another; client k starts at delays[k]
        seconds, or at -m: once every client starting at 0 has had m content chunks; else by the Poisson
        process of ``rate``) -> the summary (tokens/s, TTFT, TPOT, ITL) and the per-client records."""
        self.conn.send({"clients": clients, "rate": rate, "seed": seed, "delays": delays})
        got = self.conn.recv()
        return summary(got["wall"], [r for rec in got["records"] for r in rec]), got["records"]

    def close(self):
        self.conn.send(None)
        self.proc.join(30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def load(base, clients, rate=float("inf"), seed=0, delays=None):
    """Clients(base).run(...) in a client process made for this one plan (see Clients.run)."""
    with Clients(base) as c:
        return c.run(clients, rate, seed, delays)


def summary(wall, records):
    ttft = [ts[0] - s for s, ts, _, _ in records if ts]
    itl = [b - a for _, ts, _, _ in records for a, b in zip(ts, ts[1:])]
    tpot = [(ts[-1] - ts[0]) / (n - 1) for _, ts, n, _ in records if len(ts) > 1 and n > 1]
    tokens = sum(r[2] for r in records)
    out = {"requests": len(records), "tokens": tokens, "tokens_per_s": tokens / wall,
           "requests_per_s": len(records) / wall, "errors": sum(r[3] is not None for r in records)}
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        for stat, f in (("mean", np.mean), ("median", np.median), ("p99", lambda v: np.percentile(v, 99))):
            out[f"{name}_{stat}_ms"] = float(f(values) * 1000) if values else None
    out["itl_max_ms"] = float(max(itl) * 1000) if itl else None      # one stall is below p99 of long streams
    return out


def chat_body(text, new_tokens, seed, temperature=0.8):
    return {"messages": [{"role": "user", "content": text}], "max_tokens": new_tokens, "temperature": temperature,
            "seed": seed, "stream": True, "stream_options": {"include_usage": True}}


def load_test(base, clients, rounds, new_tokens, rate):
    """``clients`` streaming clients, each sending ``rounds`` requests one after another."""
    plan = [[chat_body(PROMPTS[(k * rounds + r) % len(PROMPTS)], new_tokens, k * rounds + r) for r in range(rounds)]
            for k in range(clients)]
    row, _ = load(base, plan, rate)
    return {"clients": clients, **row}


def sequential(model, tok, n, new_tokens):
    """The prompts one after another in this process, as `zerollm sample` generates (tokens/s), on the
    server's cores: the same CPU the served answers get."""
    from zerollm.data import chat
    from zerollm.generation.decode import generate
    from zerollm.generation.sample import Sampling
    with _on_server_cores():
        t0, total = time.perf_counter(), 0
        for i in range(n):
            ids = chat.encode_prompt(tok, PROMPTS[i % len(PROMPTS)])
            for _ in generate(model, np.array([ids]), new_tokens, Sampling(0.8), rng=np.random.default_rng(i)):
                total += 1
        return total / (time.perf_counter() - t0)


@contextlib.contextmanager
def _on_server_cores():
    """Run this process on the server's cores inside the block: a baseline gets the CPU the server gets."""
    before = _cores()
    if _server_cores():
        os.sched_setaffinity(0, _server_cores())
    try:
        yield
    finally:
        if before:
            os.sched_setaffinity(0, before)


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
    """transformers' generate on the exported model, ``batch`` prompts at a time (tokens/s), on the server's cores."""
    import torch
    from transformers import AutoModelForCausalLM
    from zerollm.data import chat
    hf = AutoModelForCausalLM.from_pretrained(folder).eval()
    prompts = [chat.encode_prompt(tok, PROMPTS[i % len(PROMPTS)]) for i in range(batch)]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad(), _on_server_cores():
        hf.generate(ids[:1], attention_mask=mask[:1], max_new_tokens=2, pad_token_id=0)     # its first call's setup
        t0 = time.perf_counter()
        for _ in range(rounds):
            hf.generate(ids, attention_mask=mask, do_sample=True, temperature=0.8, top_k=0, max_new_tokens=new_tokens,
                        min_new_tokens=new_tokens, pad_token_id=0)
    return batch * new_tokens * rounds / (time.perf_counter() - t0)


# ----------------------------------------------------------------------------
# the engine's features, each off and on

FEATURE_CONTEXT = 4096
PASSAGE = ("The river runs down from the hills to the sea, and the town on its banks has a market every "
           "morning where the fishermen sell what the night brought in. ")


def build_long(shape, folder):
    """The shape's layers with a context of FEATURE_CONTEXT and a byte tokenizer (one token a byte), so
    prompts of thousands of tokens fit."""
    from zerollm.interop.hf import export
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import ByteTokenizer
    from zerollm.training.presets import PRESETS
    p = PRESETS["tang"] if shape == "tang" else dict(n_layer=12, n_head=12, n_embd=768, bias=True)
    cfg = GPTConfig(vocab_size=ByteTokenizer().vocab_size, block_size=FEATURE_CONTEXT, n_layer=p["n_layer"],
                    n_head=p["n_head"], n_embd=p["n_embd"], bias=p["bias"])
    export(GPT(cfg, seed=0), folder, tokenizer=ByteTokenizer())


def text_of(n):
    """About n bytes (= tokens) of plain text."""
    return (PASSAGE * (n // len(PASSAGE) + 1))[:n]


def completion(prompt, new_tokens, seed, temperature=0.8):
    return {"_path": "/v1/completions", "prompt": prompt, "max_tokens": new_tokens, "temperature": temperature,
            "seed": seed, "stream": True, "stream_options": {"include_usage": True}}


def prefix_rows(folder, args):
    """32 requests sharing a system prompt, 8 clients at once: TTFT without and with the prefix cache."""
    system = text_of(args.system_tokens)
    plan = [[completion(f"{system}\nQuestion {k * 4 + r}: ", 8, k * 4 + r) for r in range(4)] for k in range(8)]
    rows = []
    for label, flags in (("prefix cache off", ("--prefix-cache", "0")), ("prefix cache on", ())):
        proc, base = start_server(folder, 8, args.threads, *flags)
        try:
            row, _ = load(base, plan)
            row["hit_rate"] = _metric_ratio(base, "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")
        finally:
            stop_server(proc)
        rows.append({"case": f"{label}: 32 requests, {args.system_tokens}-token shared prompt, 8 at once", **row})
    return rows


def chunk_rows(folder, args):
    """8 streams decoding; a --long-prompt prompt arrives once each has had --long-after tokens: the 8 streams'
    ITL, with no long prompt, with it prefilled whole, and with it chunked (the server's default budget, or
    each of --budgets)."""
    streams = [[completion(f"Stream {k}: " + text_of(40), args.stream_tokens, k)] for k in range(8)]
    long_one = [[completion(text_of(args.long_prompt), 4, 99)]]
    chunked = ([("chunked (default budget)", ())] if args.budgets is None else
               [(f"--max-num-batched-tokens {b}", ("--max-num-batched-tokens", str(b))) for b in args.budgets])
    rows = []
    for label, flags, plan in (("no long prompt", (), streams),
                               ("long prompt, --max-num-batched-tokens 0", ("--max-num-batched-tokens", "0"),
                                streams + long_one),
                               *((f"long prompt, {name}", f, streams + long_one) for name, f in chunked)):
        # a chunk per token: the time between tokens is what is measured, not --stream-interval's
        proc, base = start_server(folder, 16, args.threads, "--stream-interval", "0", *flags)
        try:
            load(base, [[completion("warm", 4, 0)]])        # the server's first request pays its first calls' setup
            _, records = load(base, plan, delays=[0.0] * 8 + [-args.long_after] * (len(plan) - 8))
        finally:
            stop_server(proc)
        row = {**summary(1.0, [r for rec in records[:8] for r in rec]), "tokens_per_s": None}   # the 8 streams' times
        rows.append({"case": f"8 streams + {args.long_prompt}-token prompt: {label}", **row})
    return rows


def lookup_rows(folder, args):
    """Greedy answers continuing a copied passage, one client: tokens/s with --speculate off and ngram."""
    plan = [[completion(text_of(400) + PASSAGE[:30], args.stream_tokens, i, temperature=0) for i in range(4)]]
    rows = []
    for label, flags in (("prompt lookup off", ()), ("prompt lookup on", ("--speculate", "ngram"))):
        proc, base = start_server(folder, 4, args.threads, *flags)
        try:
            row, _ = load(base, plan)
            row["acceptance"] = _metric_ratio(base, "vllm:spec_decode_num_accepted_tokens_total",
                                              "vllm:spec_decode_num_draft_tokens_total")
        finally:
            stop_server(proc)
        rows.append({"case": f"{label}: greedy, a copied passage, 1 client", **row})
    return rows


def budget_rows(args, budgets=(0, 32, 64, 128, 256)):
    """In this process, no HTTP: 8 rows decoding when a --long-prompt prompt arrives, for each step budget
    (Features.step_tokens, `--max-num-batched-tokens`; 0 = the prompt whole): the decode steps' median time
    before it, the steps that prefill a chunk of it (median, and the largest: the step its row joins in), and
    the time until its first token. How the server's default budget was chosen (docs/serving.md)."""
    from zerollm.generation.batching import Features, Request, Scheduler
    from zerollm.generation.sample import Sampling
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.training.presets import PRESETS
    p = PRESETS["tang"] if args.shape == "tang" else dict(n_layer=12, n_head=12, n_embd=768, bias=True)
    cfg = GPTConfig(vocab_size=259, block_size=FEATURE_CONTEXT, n_layer=p["n_layer"], n_head=p["n_head"],
                    n_embd=p["n_embd"], bias=p["bias"])
    model, rows = GPT(cfg, seed=0), []
    for budget in budgets:
        s = Scheduler(model, max_batch=16, features=Features(prefix_cache=256 << 20, step_tokens=budget or None))
        rng = np.random.default_rng(0)
        for k in range(8):
            s.submit(Request(rng.integers(0, 250, 50).tolist(), 200 + args.long_prompt, Sampling(0.8),
                             np.random.default_rng(k), emit=_ignore))
        decode = [_timed(s.step) for _ in range(30)][10:]
        s.submit(Request(rng.integers(0, 250, args.long_prompt).tolist(), 1, Sampling(0.8), np.random.default_rng(99),
                         emit=_ignore))
        t0, chunked = time.perf_counter(), []
        while s.prefills or s.waiting:
            chunked.append(_timed(s.step))
        rows.append({"budget": budget, "decode_ms": 1000 * float(np.median(decode)), "steps": len(chunked),
                     "chunk_median_ms": 1000 * float(np.median(chunked)), "chunk_max_ms": 1000 * max(chunked),
                     "prompt_s": time.perf_counter() - t0})
    return rows


def join_rows(args, rows=15, context=1024):
    """In this process, no HTTP: ``rows`` rows decoding with --join-tokens of context each (one shared system
    prompt, so the prefix cache computes it once), then one more request joins and one row leaves. Times:
    a decode step (median of 10), the step the new row joins in, the KV cache's join alone (add_rows), the
    step a row leaves in, and the cache's leave alone (keep_rows). Run at one commit and another to compare."""
    from zerollm.generation.batching import Features, Request, Scheduler
    from zerollm.generation.sample import Sampling
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.training.presets import PRESETS
    p = PRESETS["tang"] if args.shape == "tang" else dict(n_layer=12, n_head=12, n_embd=768, bias=True)
    cfg = GPTConfig(vocab_size=259, block_size=context, n_layer=p["n_layer"], n_head=p["n_head"],
                    n_embd=p["n_embd"], bias=p["bias"])
    model, rng = GPT(cfg, seed=0), np.random.default_rng(0)
    system = rng.integers(0, 250, args.join_tokens - 16).tolist()
    s = Scheduler(model, max_batch=rows + 1, features=Features(prefix_cache=256 << 20, step_tokens=64))
    reqs = [Request(system + rng.integers(0, 250, 16).tolist(), context - args.join_tokens, Sampling(0.8),
                    np.random.default_rng(k), emit=_ignore) for k in range(rows + 1)]
    s.submit(reqs[0])
    while s.waiting or s.prefills:
        s.step()
    for r in reqs[1:rows]:
        s.submit(r)
    while s.waiting or s.prefills:
        s.step()
    decode = [_timed(s.step) for _ in range(12)][2:]
    cache, spent = s.shared.cache, {}
    for name in ("add_rows", "keep_rows"):
        def timed(*a, _f=getattr(cache, name), _name=name):
            t0 = time.perf_counter()
            _f(*a)
            spent[_name] = time.perf_counter() - t0
        setattr(cache, name, timed)
    s.submit(reqs[rows])
    join = 0.0
    while s.waiting or s.prefills:
        join = _timed(s.step)
    reqs[0].cancel()
    leave = _timed(s.step)
    return [{"shape": args.shape, "rows": rows, "context": args.join_tokens,
             "decode_ms": 1000 * float(np.median(decode)),
             "join_step_ms": 1000 * join, "add_rows_ms": 1000 * spent.get("add_rows", 0.0),
             "leave_step_ms": 1000 * leave, "keep_rows_ms": 1000 * spent.get("keep_rows", 0.0),
             "cache_mb": sum(a.nbytes for a in cache.k + cache.v) / 2 ** 20}]


def _ignore(event):
    return None


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _metric_ratio(base, top, bottom):
    import httpx
    from prometheus_client.parser import text_string_to_metric_families
    text = httpx.get(base + "/metrics", trust_env=False).text
    found = {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}
    return found[top] / found[bottom] if found.get(bottom) else None


# ----------------------------------------------------------------------------
# the host

def host_rows(threads):
    """lscpu's model and cores, the BLAS NumPy uses, a float32 GEMM's GFLOP/s, the load average."""
    lines = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
    keep = [line.split(":", 1)[1].strip() for line in lines if line.startswith(("Model name", "CPU(s):"))]
    try:
        from threadpoolctl import threadpool_info
        blas = ", ".join(f"{p['internal_api']} {p['version']} ({p.get('architecture')})" for p in threadpool_info())
    except ImportError:
        blas = "threadpoolctl not installed"
    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    a @ a
    t0 = time.perf_counter()
    for _ in range(5):
        a @ a
    gflops = 5 * 2 * 1024 ** 3 / (time.perf_counter() - t0) / 1e9
    return {"host": " / ".join(keep), "blas": blas, "gemm_gflops": gflops, "load": os.getloadavg(),
            "threads": threads}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=("tang", "gpt2"), default="tang")
    p.add_argument("--only", choices=("clients", "features", "chunked", "budget", "join", "single", "step", "versus"),
                   default=None,
                   help="run one part (default clients and features; budget: the step budget's sweep, in process; "
                        "join: what a row joining and leaving the batch costs, in process; single: one streaming "
                        "client against the sequential run, request by request; step: a decode step at each "
                        "--clients rows split into the model, the sampler, prefill and the rest, in process; "
                        "versus: this checkout's server against --against's, requests alternating)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--rounds", type=int, default=2, help="requests per client (default 2)")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--request-rate", type=float, default=float("inf"),
                   help="clients start by a Poisson process of this rate (requests/s; default inf: all at once)")
    p.add_argument("--system-tokens", type=int, default=1000, help="the shared system prompt (default 1000)")
    p.add_argument("--long-prompt", type=int, default=2000, help="the prompt arriving amid 8 streams (default 2000)")
    p.add_argument("--stream-tokens", type=int, default=64, help="new tokens of the features' streams (default 64)")
    p.add_argument("--long-after", type=int, default=8,
                   help="the long prompt arrives once each of the 8 streams has had this many tokens (default 8)")
    p.add_argument("--budgets", type=int, nargs="+", default=None,
                   help="--max-num-batched-tokens of the chunked cases (default: the server's default)")
    p.add_argument("--pairs", type=int, default=12, help="requests of the single part (default 12)")
    p.add_argument("--new-client-per-request", action="store_true",
                   help="the single part's client: a new process (and connection) for each request, as this "
                        "benchmark measured before 2026-12-07, instead of one client kept for all of them")
    p.add_argument("--against", type=Path, default=None, metavar="DIR",
                   help="the versus part's other checkout of zerollm (a folder holding zerollm/)")
    p.add_argument("--requests", type=int, default=200,
                   help="requests each server answers at each size in the versus part (default 200)")
    p.add_argument("--join-tokens", type=int, default=256, help="each row's context in the join part (default 256)")
    p.add_argument("--threads", type=int, default=1, help="BLAS threads of the server and the baselines")
    p.add_argument("--no-pin", action="store_true",
                   help="let the server and the in-process baselines run on every core, the clients' one too "
                        "(as `zerollm serve` runs on a user's machine; by default they keep off the clients' core)")
    p.add_argument("--stream-interval", type=float, default=None, metavar="MS",
                   help="the servers' --stream-interval (default: the server's own; the chunked part always runs "
                        "with 0, a chunk per token, as its time between tokens is per token)")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)
    if args.only == "versus" and (args.against is None or not (args.against / "zerollm" / "__init__.py").is_file()):
        p.error("--only versus needs --against DIR, another checkout of zerollm (DIR/zerollm/__init__.py), for "
                "example made by `git worktree add /tmp/base HEAD~1`")
    PIN[0] = not args.no_pin
    if args.stream_interval is not None:
        SERVER_FLAGS[:] = ["--stream-interval", f"{args.stream_interval:g}"]
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))     # for the server's process
    from zerollm.cli.commands.serve import serve_engine
    # the server's engine ($ZEROLLM_ENGINE, else serve's default), named for both: the in-process baselines
    # decode on the same one
    os.environ["ZEROLLM_ENGINE"] = serve_engine(argparse.Namespace(engine=None))
    import torch
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)    # NumPy's BLAS in this process was loaded before the variable was set
    host = host_rows(args.threads)
    print(f"host: {host['host']}; BLAS: {host['blas']}; GEMM 1024^2 float32: {host['gemm_gflops']:.1f} GFLOP/s; "
          f"load average {host['load'][0]:.1f}; {args.threads} BLAS thread(s); engine {os.environ['ZEROLLM_ENGINE']}; "
          f"clients pinned to core "
          f"{_cores()[-1] if len(_cores()) > 1 else 'shared'}"
          f"{'' if _server_cores() or len(_cores()) < 2 else '; the server on every core (--no-pin)'}", flush=True)
    result = {"shape": args.shape, "new_tokens": args.new_tokens, "host": host, "rows": [], "features": []}
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "clients"):
            result["rows"], result["logit_gap"] = clients_rows(Path(tmp) / args.shape, args)
        if args.only == "single":
            r = single_rows(Path(tmp) / args.shape, args)
            result["single"] = r
            q = np.percentile(r["ratios"], [0, 50, 100])
            print(f"one streaming client ({r['client']}): {r['serve_tokens_per_s']:.1f} tok/s; sequential in process "
                  f"{r['sequential_tokens_per_s']:.1f} tok/s; ratio {r['ratio']:.2f} over {r['pairs']} pairs "
                  f"(a pair's ratio: min {q[0]:.2f}, median {q[1]:.2f}, max {q[2]:.2f}); CPU a token: the server "
                  f"process {r['serve_cpu_ms_per_token']:.2f} ms (every thread; the event loop's "
                  f"{r['loop_cpu_ms_per_token']:.2f} ms), in process "
                  f"{r['sequential_cpu_ms_per_token']:.2f} ms", flush=True)
        if args.only == "chunked":
            folder = Path(tmp) / f"{args.shape}-long"
            build_long(args.shape, folder)
            print("| case | tok/s | TTFT mean / median / p99 ms | TPOT median ms | ITL median / p99 / max ms | note |\n"
                  "|---|---:|---:|---:|---:|---|", flush=True)
            for row in chunk_rows(folder, args):
                result["features"].append(row)
                print(_feature_line(row), flush=True)
        if args.only in (None, "features"):
            folder = Path(tmp) / f"{args.shape}-long"
            build_long(args.shape, folder)
            print("| case | tok/s | TTFT mean / median / p99 ms | TPOT median ms | ITL median / p99 / max ms | note |\n"
                  "|---|---:|---:|---:|---:|---|", flush=True)
            for rows in (prefix_rows, chunk_rows, lookup_rows):
                for row in rows(folder, args):
                    result["features"].append(row)
                    print(_feature_line(row), flush=True)
    if args.only == "budget":
        print("| --max-num-batched-tokens | decode step median ms | steps with a chunk | their median / max ms | "
              "long prompt's first token s |\n|---:|---:|---:|---:|---:|", flush=True)
        for r in budget_rows(args):
            result["features"].append(r)
            print(f"| {r['budget'] or 'whole'} | {r['decode_ms']:.1f} | {r['steps']} | {r['chunk_median_ms']:.1f} / "
                  f"{r['chunk_max_ms']:.1f} | {r['prompt_s']:.2f} |", flush=True)
    if args.only == "join":
        print("| shape | rows | context | KV cache MiB | decode step median ms | join step ms | its cache join ms | "
              "leave step ms | its cache leave ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
        for r in join_rows(args):
            result["features"].append(r)
            print(f"| {r['shape']} | {r['rows']} | {r['context']} | {r['cache_mb']:.0f} | {r['decode_ms']:.1f} | "
                  f"{r['join_step_ms']:.1f} | {r['add_rows_ms']:.1f} | {r['leave_step_ms']:.1f} | "
                  f"{r['keep_rows_ms']:.1f} |", flush=True)
    if args.only == "step":
        with tempfile.TemporaryDirectory() as tmp:
            rows, sampler = step_rows(Path(tmp) / args.shape, args)
        print("| rows | step ms | model forward ms | sampler ms | prefill ms | rest ms | rows drawn exactly |\n"
              "|---:|---:|---:|---:|---:|---:|---:|", flush=True)
        for r in rows:
            result["features"].append(r)
            print(f"| {r['rows']} | {r['step_ms']:.2f} | {r['forward_ms']:.2f} | {r['sampler_ms']:.2f} | "
                  f"{r['prefill_ms']:.2f} | {r['rest_ms']:.2f} | {r['exact_rows']} of {r['drawn_rows']} |", flush=True)
        result["sampler"] = sampler
        print(f"sampler alone, 16 rows x {sampler['vocab']} ids, temperature 0.8: draw {sampler['draw_us']:.0f} us, "
              f"draw_exact (every row in float64, the sampler before) {sampler['exact_us']:.0f} us: "
              f"{sampler['exact_us'] / sampler['draw_us']:.2f}x", flush=True)
    if args.only == "versus":
        with tempfile.TemporaryDirectory() as tmp:
            result["versus"] = versus_rows(Path(tmp) / args.shape, args)
        print("| checkout | new tokens | requests | event loop CPU ms a request | process CPU ms a request | wall ms a "
              "request |\n|---|---:|---:|---:|---:|---:|", flush=True)
        for r in result["versus"]:
            print(f"| {r['root']} | {r['new_tokens']} | {r['requests']} | {r['loop_cpu_ms']:.3f} | "
                  f"{r['process_cpu_ms']:.3f} | {r['wall_ms']:.3f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


def step_rows(folder, args, steps=32, repeats=5):
    """In this process, no HTTP: --clients rows of the benchmark's prompts decode ``steps`` tokens at
    temperature 0.8; a step's time (the best of ``repeats`` runs' means) split into the model's forward
    (Scheduler._last_logits), the sampler (sample.choose), prompts joining (Scheduler._join, none after
    the first step) and the rest (the scheduler's bookkeeping, emitting). Then the sampler alone, draw
    against draw_exact on the same logits in this run."""
    import zerollm.generation.batching as batching
    from zerollm.data import chat
    from zerollm.generation import sample
    model, tok = build(args.shape, folder)
    spent, counted = {}, {"exact": 0, "drawn": 0}

    def timed(name, fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
            return out
        return wrapper

    def counting(name, fn):
        def wrapper(logits, u, *a):
            counted[name] += len(u)
            return fn(logits, u, *a)
        return wrapper

    saved = (batching.choose, batching.Scheduler._last_logits, batching.Scheduler._join, sample.draw, sample.draw_exact)
    batching.choose = timed("sampler", batching.choose)
    batching.Scheduler._last_logits = timed("forward", batching.Scheduler._last_logits)
    batching.Scheduler._join = timed("prefill", batching.Scheduler._join)
    sample.draw, sample.draw_exact = counting("drawn", sample.draw), counting("exact", sample.draw_exact)

    def run(rows):
        s = batching.Scheduler(model, max_batch=rows)
        for i in range(rows):
            s.submit(batching.Request(chat.encode_prompt(tok, PROMPTS[i % len(PROMPTS)]), steps,
                                      sample.Sampling(0.8), np.random.default_rng(i), emit=_ignore))
        s.step()                                    # the prompts' prefill and first tokens
        spent.clear()
        t0, n = time.perf_counter(), 0
        while s.busy:
            s.step()
            n += 1
        return (time.perf_counter() - t0) / n, {k: v / n for k, v in spent.items()}

    out = []
    try:
        for rows in args.clients:
            run(rows)
            counted.update(exact=0, drawn=0)
            step, parts = min((run(rows) for _ in range(repeats)), key=lambda r: r[0])
            named = sum(parts.get(k, 0.0) for k in ("forward", "sampler", "prefill"))
            out.append({"rows": rows, "step_ms": 1000 * step, "forward_ms": 1000 * parts.get("forward", 0.0),
                        "sampler_ms": 1000 * parts.get("sampler", 0.0), "prefill_ms": 1000 * parts.get("prefill", 0.0),
                        "rest_ms": 1000 * (step - named), "exact_rows": counted["exact"], "drawn_rows": counted["drawn"]})
    finally:
        batching.choose, batching.Scheduler._last_logits, batching.Scheduler._join, sample.draw, sample.draw_exact = saved
    V = model.config.vocab_size
    logits = (np.random.default_rng(0).standard_normal((16, V)) * 2).astype(np.float32)
    u = np.random.default_rng(1).random(16)
    draw_s = min(_timed(lambda: sample.draw(logits, u, 0.8)) for _ in range(50))
    exact_s = min(_timed(lambda: sample.draw_exact(np.divide(logits, 0.8, dtype=np.float64), u)) for _ in range(50))
    return out, {"vocab": V, "draw_us": 1e6 * draw_s, "exact_us": 1e6 * exact_s}


def clients_rows(folder, args):
    model, tok = build(args.shape, folder)
    gap, top, same = logit_gap(model, tok)
    print(f"batched vs alone (16 rows, 24 steps, float32): max |logit difference| {gap:.3g} (logits up to "
          f"{top:.3g}); same tokens: {same}", flush=True)
    print("| clients | zerollm serve tok/s | TTFT mean / median / p99 ms | TPOT median ms | ITL median / p99 ms "
          "| errors | sequential (zerollm sample) tok/s | transformers batched tok/s |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    rows = []
    proc, base = start_server(folder, max(args.clients), args.threads)
    try:
        load_test(base, 1, 1, 4, float("inf"))          # the server's first request pays its first calls' setup
        for c in args.clients:
            row = load_test(base, c, args.rounds, args.new_tokens, args.request_rate)
            row["sequential_tokens_per_s"] = sequential(model, tok, min(c * args.rounds, 8), args.new_tokens)
            row["transformers_tokens_per_s"] = transformers_batched(folder, tok, c, args.new_tokens, 1)
            rows.append(row)
            print(_line(row), flush=True)
    finally:
        stop_server(proc)
    return rows, gap


def single_rows(folder, args):
    """One streaming client against the in-process sequential run, request by request: each pair is one
    HTTP request (the client's clock, send -> last content chunk) and right after it the same prompt
    decoded in this process on the server's core. The load of a shared machine changes from one minute to
    the next (the sequential run alone went from 108 to 403 tok/s within a minute at load 3-4), so a ratio
    of two blocks run a minute apart measured the machine more than the server; pairs seconds apart do not."""
    from zerollm.data import chat
    from zerollm.generation.decode import generate
    from zerollm.generation.sample import Sampling
    model, tok = build(args.shape, folder)
    proc, base = start_server(folder, 16, args.threads)
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()   # its log never blocks it
    serve_s = seq_s = serve_cpu = loop_cpu = seq_cpu = 0.0
    tokens, served_tokens, ratios = 0, 0, []
    # one client process for every pair (its pool and connection kept, as a real client's are), unless
    # --new-client-per-request: a process each (its first streamed request's own code paths are cold then)
    kept = None if args.new_client_per_request else Clients(base)
    send = load if kept is None else (lambda _, plan: kept.run(plan))
    try:
        send(base, [[chat_body(PROMPTS[0], 4, 0)]])
        ids = chat.encode_prompt(tok, PROMPTS[0])
        with _on_server_cores():           # as the server's warm-up: first calls' setup (the fast engine loads its kernels)
            for _ in generate(model, np.array([ids]), 4, Sampling(0.8), rng=np.random.default_rng(0)):
                pass
        for i in range(args.pairs):
            c0, l0 = _cpu_seconds(proc.pid), _cpu_seconds(proc.pid, proc.pid)
            _, records = send(base, [[chat_body(PROMPTS[0], args.new_tokens, i)]])
            serve_cpu, loop_cpu = serve_cpu + _cpu_seconds(proc.pid) - c0, loop_cpu + _cpu_seconds(proc.pid, proc.pid) - l0
            start, times, got, err = records[0][0]
            if err is not None or not times:
                raise RuntimeError(f"the request failed: {err}")
            with _on_server_cores():
                t0, c0 = time.perf_counter(), time.process_time()
                n = sum(1 for _ in generate(model, np.array([ids]), args.new_tokens, Sampling(0.8),
                                            rng=np.random.default_rng(i)))
                seq, seq_cpu = time.perf_counter() - t0, seq_cpu + time.process_time() - c0
            served = times[-1] - start                               # send -> last content chunk
            serve_s, seq_s = serve_s + served * n / got, seq_s + seq
            tokens, served_tokens = tokens + n, served_tokens + got
            ratios.append((got / served) / (n / seq))
    finally:
        if kept is not None:
            kept.close()
        stop_server(proc)
    return {"pairs": args.pairs, "client": "new per request" if kept is None else "kept", "serve_tokens_per_s": tokens / serve_s, "sequential_tokens_per_s": tokens / seq_s,
            "ratio": seq_s / serve_s, "ratios": ratios, "serve_cpu_ms_per_token": 1000 * serve_cpu / served_tokens,
            "sequential_cpu_ms_per_token": 1000 * seq_cpu / tokens, "loop_cpu_ms_per_token": 1000 * loop_cpu / served_tokens}


def versus_rows(folder, args, group=4):
    """This checkout's server and --against's, both started on the server's cores, each with a client process
    of its own; at 1 new token and at --new-tokens, --requests requests each, sent ``group`` at a time (one after
    another) to one server and then to the other, the order turned every time. -> a row per server and size:
    CPU a request (the event loop's thread and the whole process, /proc) and the client's wall time."""
    build(args.shape, folder)
    roots, servers, clients, rows = [ROOT, args.against.resolve()], [], [], []
    try:
        for root in roots:
            servers.append(start_server(folder, 16, args.threads, root=root))
            proc = servers[-1][0]
            threading.Thread(target=lambda proc=proc: [None for _ in proc.stderr], daemon=True).start()
            clients.append(Clients(servers[-1][1]))
        for c in clients:                                   # first calls' setup, and a kept connection each
            c.run([[chat_body(PROMPTS[0], 4, 0)] for _ in range(group)])
        for new in dict.fromkeys((1, args.new_tokens)):
            spent = [[0.0, 0.0, 0.0] for _ in servers]     # loop CPU, process CPU, wall (seconds)
            for turn in range(max(1, args.requests // group)):
                for k in ((0, 1) if turn % 2 == 0 else (1, 0)):
                    proc = servers[k][0]
                    loop0, all0, t0 = _cpu_seconds(proc.pid, proc.pid), _cpu_seconds(proc.pid), time.perf_counter()
                    clients[k].run([[chat_body(PROMPTS[(turn + j) % len(PROMPTS)], new, turn * group + j)
                                     for j in range(group)]])
                    spent[k][2] += time.perf_counter() - t0
                    spent[k][0] += _cpu_seconds(proc.pid, proc.pid) - loop0
                    spent[k][1] += _cpu_seconds(proc.pid) - all0
            n = max(1, args.requests // group) * group
            rows += [{"root": str(r), "new_tokens": new, "requests": n, "loop_cpu_ms": 1000 * s[0] / n,
                      "process_cpu_ms": 1000 * s[1] / n, "wall_ms": 1000 * s[2] / n} for r, s in zip(roots, spent)]
    finally:
        for c in clients:
            c.close()
        for proc, _ in servers:
            stop_server(proc)
    return rows


def _cpu_seconds(pid, thread=None):
    """User + system CPU seconds of process ``pid`` so far, every thread (Linux's /proc/PID/stat), or only
    its thread ``thread`` (/proc/PID/task/TID/stat; the main thread's id is the process's: uvicorn's event
    loop); 0 elsewhere."""
    try:
        where = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
        fields = Path(where).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(v):
    return "-" if v is None else f"{v:.1f}"


def _line(r):
    return (f"| {r['clients']} | {r['tokens_per_s']:.1f} | {_ms(r['ttft_mean_ms'])} / {_ms(r['ttft_median_ms'])} / "
            f"{_ms(r['ttft_p99_ms'])} | {_ms(r['tpot_median_ms'])} | {_ms(r['itl_median_ms'])} / {_ms(r['itl_p99_ms'])} "
            f"| {r['errors']} | {r['sequential_tokens_per_s']:.1f} | {r['transformers_tokens_per_s']:.1f} |")


def _feature_line(r):
    note = (f"hit rate {r['hit_rate']:.2f}" if r.get("hit_rate") is not None else
            f"acceptance {r['acceptance']:.2f}" if r.get("acceptance") is not None else "")
    return (f"| {r['case']} | {_ms(r['tokens_per_s'])} | {_ms(r['ttft_mean_ms'])} / {_ms(r['ttft_median_ms'])} / "
            f"{_ms(r['ttft_p99_ms'])} | {_ms(r['tpot_median_ms'])} | {_ms(r['itl_median_ms'])} / {_ms(r['itl_p99_ms'])} "
            f"/ {_ms(r['itl_max_ms'])} | {note} |")


if __name__ == "__main__":
    raise SystemExit(main())
