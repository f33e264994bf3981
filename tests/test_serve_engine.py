"""The serving engine's features (#60): prefix cache, chunked prefill, prompt-lookup speculation, /metrics.

The claims: each feature gives the tokens the plain scheduler gives (greedy, and seeded sampling where
the feature does not change what is drawn); speculation at temperature 1 keeps the model's distribution
(a chi-square test over every 3-token answer of a 4-token vocabulary); the prefix cache stays under its
byte limit and a cancelled request gives its blocks back; /metrics, read with prometheus_client's own
parser, counts what was sent, and needs the API key unless --metrics-public.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from zerollm.generation.batching import Done, Features, Request, Scheduler, Token
from zerollm.generation.prefix import PrefixCache
from zerollm.generation.sample import Sampling
from zerollm.generation.speculate import Speculation, lookup
from zerollm.model.gpt import GPT, GPTConfig

sys.path.insert(0, str(Path(__file__).parent))
from serve_helpers import ROOT, server, tiny_chat_model  # noqa: E402

PREFIX = Features(prefix_cache=1 << 20)
CHUNKED = Features(step_tokens=5)
NGRAM = Features(speculation=Speculation("ngram", tokens=3))
ALL = Features(prefix_cache=1 << 20, step_tokens=7, speculation=Speculation("ngram"))


def _model(V=61, scale=1.0, seed=3, n_layer=2):
    model = GPT(GPTConfig(vocab_size=V, block_size=96, n_layer=n_layer, n_head=2, n_embd=16, pos="rope",
                          dtype="float64"), seed=seed).eval()
    for value in model.params.values():
        if value.ndim == 2:
            value *= scale                 # sharper logits: a random model's answers then repeat less evenly
    return model


def _prompts():
    """Prompts sharing a 37-token system prefix (2 whole blocks), then diverging; one repeats the first
    whole (a prompt entirely cached but its last token); one is shorter than a block."""
    rng = np.random.default_rng(0)
    system = rng.integers(0, 61, 37).tolist()
    out = [system + rng.integers(0, 61, int(rng.integers(1, 12))).tolist() for _ in range(6)]
    return out + [list(out[0]), system[:5]]


def _run(model, prompts, features, sampling, max_batch=3, n=12, seed=5):
    """Every prompt through one Scheduler (all submitted at once, max_batch rows) -> ([ids per prompt], scheduler)."""
    sched = Scheduler(model, max_batch=max_batch, max_queue=64, features=features)
    got = [[] for _ in prompts]
    for i, p in enumerate(prompts):
        sched.submit(Request(list(p), n, sampling, np.random.default_rng(seed + i), emit=got[i].append))
    for _ in range(500):
        if all(g and isinstance(g[-1], Done) for g in got):
            break
        sched.step()
    assert all(g[-1].reason == "length" for g in got)
    return [[ev.id for ev in g if isinstance(ev, Token)] for g in got], sched


# ----------------------------------------------------------------------------
# exactness in the scheduler

GREEDY, SEEDED = Sampling(0), Sampling(0.9, top_k=20)
# speculation changes what a seeded row draws (its distribution is tested below), so it runs greedy only here
# a draft model with the prefix cache and chunks: the big model's prefill starts after its cache hit, the
# draft's (no prefix cache) at the prompt's start, both within the step budget
DRAFTED = Features(prefix_cache=1 << 20, step_tokens=7, speculation=Speculation("draft", 3),
                   draft=_model(seed=9, n_layer=1, scale=3.0))
CASES = [(PREFIX, GREEDY), (CHUNKED, GREEDY), (ALL, GREEDY), (PREFIX, SEEDED), (CHUNKED, SEEDED),
         (Features(prefix_cache=1 << 20, step_tokens=7), SEEDED), (DRAFTED, GREEDY)]


@pytest.mark.parametrize("features, sampling", CASES, ids=["prefix", "chunked", "all", "prefix-seeded",
                                                           "chunked-seeded", "prefix-chunked-seeded",
                                                           "prefix-chunked-draft"])
def test_each_feature_gives_the_tokens_of_the_plain_scheduler(features, sampling):
    model, prompts = _model(), _prompts()
    plain, _ = _run(model, prompts, Features(), sampling)
    got, sched = _run(model, prompts, features, sampling)
    assert got == plain
    if features.prefix_cache:
        assert sched.prefix.hits >= 4 * 32              # later rows found the 2 system blocks
        assert all(b.refs == 0 for b in sched.prefix.blocks.values())    # every request gave its blocks back


def test_requests_arriving_together_compute_their_shared_prefix_once():
    """8 prompts with one 40-token system prefix, submitted at once into 8 free rows: the first is prefilled,
    the other 7 wait for its blocks and find both (7 x 32 tokens), and every answer is the plain one."""
    model = _model()
    system = list(range(1, 41))
    prompts = [system + [50 + i, 7] for i in range(8)]
    plain, _ = _run(model, prompts, Features(), Sampling(0), max_batch=8)
    got, sched = _run(model, prompts, PREFIX, Sampling(0), max_batch=8)
    assert got == plain
    assert sched.prefix.hits == 7 * 32 and sched.prefix.queries == sum(map(len, prompts))


def test_prompt_lookup_greedy_gives_the_same_tokens_and_accepts_guesses():
    model, prompts = _model(), _prompts()
    plain, _ = _run(model, prompts, Features(), Sampling(0), n=30)
    got, sched = _run(model, prompts, NGRAM, Sampling(0), n=30)
    assert got == plain
    assert sched.accepted > 0 and sched.drafted > sched.accepted     # guesses were kept, and refused
    assert sched.steps < sum(len(g) for g in got) / 3                 # kept guesses saved forwards


def test_a_draft_model_gives_the_same_greedy_tokens():
    """A smaller model (1 layer, another seed) guesses: the same greedy answers, some guesses kept and some
    refused, fewer forwards of the big model than tokens."""
    model, prompts = _model(), _prompts()
    draft = _model(seed=9, n_layer=1, scale=3.0)              # sharper: it disagrees with the big model at times
    plain, _ = _run(model, prompts, Features(), Sampling(0), n=20)
    got, sched = _run(model, prompts, Features(speculation=Speculation("draft", 3), draft=draft), Sampling(0), n=20)
    assert got == plain
    assert 0 < sched.accepted < sched.drafted
    same, itself = _run(model, prompts, Features(speculation=Speculation("draft", 3), draft=model), Sampling(0), n=20)
    assert same == plain and itself.accepted == itself.drafted          # the model itself as draft: every guess kept


def test_chunked_prefill_interleaves_a_long_prompt_with_running_rows():
    """A 60-token prompt joining while a row decodes: with 8 tokens a step (8-token chunks: never less than
    PREFILL_FLOOR) the running row gets a token on each of the steps the long prompt is prefilled in;
    without, the prompt is prefilled in one step."""
    model = _model()
    for features, most in ((Features(step_tokens=8), 1), (Features(), 0)):
        sched = Scheduler(model, max_batch=4, features=features)
        short, long_ = [], []
        sched.submit(Request([1, 2, 3], 20, Sampling(0), np.random.default_rng(0), emit=short.append))
        sched.step()
        sched.submit(Request(list(range(60)), 5, Sampling(0), np.random.default_rng(0), emit=long_.append))
        between = 0
        while not long_:
            before = len(short)
            sched.step()
            between += len(short) - before
        assert between >= (60 // 8 if most else 1)
        assert between <= (60 // 8 + 1 if most else 1)


def _counting_forwards(model):
    """Wrap model.forward_hidden -> a list that gets the tokens (rows x length) of every call."""
    seen, forward = [], model.forward_hidden

    def counted(idx, **kw):
        seen.append(int(np.asarray(idx).size))
        return forward(idx, **kw)
    model.forward_hidden = counted
    return seen


@pytest.mark.parametrize("speculate", ["off", "ngram", "draft"])
def test_no_step_puts_more_than_step_tokens_through_the_model(speculate):
    """8 rows decoding, then an 80-token prompt arrives, with step_tokens=48: every step's forwards together
    take at most 48 tokens (the rows' tokens and guesses counted first, the prompt's chunk gets the rest),
    every running row gets one token (or more, guesses kept) on every step the prompt is prefilled in, and
    the prompt takes as many steps as its chunks: 80 / (48 - 9 rows x (1 + guesses)) rounded up. A draft
    model takes the prompt in the same chunks (before, it took all 80 tokens in the step the prompt joined
    in). The long prompt's answer is the one it gets alone."""
    from zerollm.generation.prefill import PREFILL_FLOOR
    model, draft = _model(), _model(seed=9, n_layer=1)
    spec = Speculation(speculate, tokens=2) if speculate != "off" else Speculation()
    sched = Scheduler(model, max_batch=16, features=Features(step_tokens=48, speculation=spec,
                                                             draft=draft if speculate == "draft" else None))
    rows = [[] for _ in range(8)]
    for k in range(8):
        sched.submit(Request([k + 1, 2, 3], 60, Sampling(0), np.random.default_rng(k), emit=rows[k].append))
    seen, drafted = _counting_forwards(model), _counting_forwards(draft)
    sched.step()
    long_prompt, long_ = list(np.random.default_rng(1).integers(0, 61, 80)), []
    sched.submit(Request(long_prompt, 4, Sampling(0), np.random.default_rng(0), emit=long_.append))
    steps, chunk = 0, 48 - 9 * (1 if speculate == "off" else 3)
    while not long_:
        before, seen[:], drafted[:] = [len(r) for r in rows], [], []
        sched.step()
        steps += 1
        assert sum(seen) <= 48, seen
        assert all(len(r) > b for r, b in zip(rows, before))       # each row's token on this step too
        assert max(drafted, default=0) <= chunk, drafted            # the draft's piece of the prompt, its guesses
    assert chunk >= PREFILL_FLOOR and steps == -(-80 // chunk)
    alone, _ = _run(model, [long_prompt], Features(), Sampling(0), n=4)
    while sched.busy:
        sched.step()
    assert [ev.id for ev in long_ if isinstance(ev, Token)] == alone[0]


def test_prompts_arriving_at_an_idle_batch_join_in_one_step_whatever_the_budget():
    """6 prompts of 12 tokens reach a scheduler with no row decoding, step_tokens=16: no stream waits, so
    all 72 prompt tokens are prefilled in the first step (up to IDLE_TOKENS) and every request has its first
    token after it; once rows decode, a 60-token prompt is cut to what the budget leaves (16 a step here)."""
    from zerollm.generation.prefill import IDLE_TOKENS, PREFILL_FLOOR
    model = _model()
    sched = Scheduler(model, max_batch=8, features=Features(step_tokens=16))
    got = [[] for _ in range(6)]
    for k in range(6):
        sched.submit(Request([k + 1] * 12, 30, Sampling(0), np.random.default_rng(k), emit=got[k].append))
    seen = _counting_forwards(model)
    sched.step()
    assert all(len(g) == 1 for g in got) and 72 <= IDLE_TOKENS
    late = []
    sched.submit(Request(list(range(60)), 2, Sampling(0), np.random.default_rng(0), emit=late.append))
    steps = 0
    while not late:
        seen[:] = []
        sched.step()
        steps += 1
        assert sum(seen) <= PREFILL_FLOOR + 6                # the prompt's chunk, then the 6 rows' tokens
    assert steps == -(-60 // PREFILL_FLOOR)


# ----------------------------------------------------------------------------
# speculation keeps the distribution

def _exact(model, prompt, n):
    """{answer of n tokens: its probability} by enumeration, temperature 1."""
    V, probs = model.config.vocab_size, {(): 1.0}
    for _ in range(n):
        nxt = {}
        for seq, p in probs.items():
            logits, _ = model.forward(np.array([prompt + list(seq)]))
            z = logits[0, -1] - logits[0, -1].max()
            q = np.exp(z) / np.exp(z).sum()
            nxt.update({seq + (t,): p * float(q[t]) for t in range(V)})
        probs = nxt
    return probs


def _chi_square_ok(counts, probs, N):
    """Pearson's chi-square against probs (bins under 5 expected merged): below the 0.1% critical value
    (Wilson-Hilferty) -> (ok, statistic, degrees of freedom)."""
    big = [s for s, p in probs.items() if p * N >= 5]
    obs = [counts.get(s, 0) for s in big] + [N - sum(counts.get(s, 0) for s in big)]
    exp = [probs[s] * N for s in big] + [N * (1 - sum(probs[s] for s in big))]
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp) if e > 0)
    df = len(obs) - 1
    crit = df * (1 - 2 / (9 * df) + 3.09 * math.sqrt(2 / (9 * df))) ** 3
    return stat < crit, stat, df


@pytest.mark.parametrize("guesser", ["ngram", "draft"])
def test_speculative_sampling_keeps_the_distribution(guesser):
    """4000 answers of 3 tokens at temperature 1 with prompt lookup (or a draft model) on a 4-token
    vocabulary: their counts fit the model's exact probabilities (chi-square, p > 0.001), while guesses
    were both kept and refused. Keeping every lookup guess instead (the rule broken) is caught by the same
    test."""
    model, prompt, N = _model(V=4, scale=3.0, seed=1), [0, 1, 2, 3, 0, 1, 2, 3, 0, 1], 4000
    probs = _exact(model, prompt, 3)
    features = (Features(speculation=Speculation("ngram", 2)) if guesser == "ngram" else
                Features(speculation=Speculation("draft", 2), draft=_model(V=4, scale=3.0, seed=5, n_layer=1)))
    sched = Scheduler(model, max_batch=64, max_queue=N, features=features)
    answers = [[] for _ in range(N)]
    for i in range(N):
        sched.submit(Request(list(prompt), 3, Sampling(1.0), np.random.default_rng(100 + i), emit=answers[i].append))
    while sched.busy:
        sched.step()
    counts = {}
    for a in answers:
        key = tuple(ev.id for ev in a if isinstance(ev, Token))
        counts[key] = counts.get(key, 0) + 1
    ok, stat, df = _chi_square_ok(counts, probs, N)
    print(f"chi-square {stat:.1f} on {df} df; accepted {sched.accepted} of {sched.drafted} guesses")
    assert ok
    assert 0 < sched.accepted < sched.drafted
    if guesser == "draft":
        return
    always = {}                                         # what "keep every guess" would give: the lookup's text
    for a in answers:
        first = next(ev.id for ev in a if isinstance(ev, Token))
        key = tuple([first] + lookup(prompt + [first], 2))
        always[key] = always.get(key, 0) + 1
    assert not _chi_square_ok(always, probs, N)[0]


def test_lookup_finds_the_latest_earlier_tail():
    assert lookup([1, 2, 3, 9, 1, 2], 2) == [3, 9]
    assert lookup([1, 2, 3, 1, 2, 4, 1, 2], 1) == [4]     # the latest occurrence wins
    assert lookup([5, 6, 7], 3) == []                      # no tail seen before
    assert lookup([4], 3) == [] and lookup([4, 4], 0) == []


# ----------------------------------------------------------------------------
# the prefix cache's memory and references

def _kv(n_tokens, fill):
    """One layer's keys/values (nkv=1, 1, S, hs=4) with every slot set to fill."""
    return [np.full((1, 1, n_tokens, 4), fill, np.float64)], [np.full((1, 1, n_tokens, 4), fill, np.float64)]


def test_prefix_cache_evicts_free_blocks_under_its_limit_and_keeps_held_ones():
    block_bytes = 2 * 4 * 4 * 8                        # k and v of 4 tokens x hs 4, float64
    cache = PrefixCache(max_bytes=3 * block_bytes, block=4)
    held = cache.store(list(range(8)), [], *_kv(8, 1.0))                       # 2 blocks, held
    for i in range(5):
        cache.release(cache.store([100 + i] * 4, [], *_kv(4, 2.0)))          # free ones, one after another
        assert cache.nbytes <= 3 * block_bytes
    assert len(cache) == 3 and all(b in cache.blocks.values() for b in held)
    again = cache.lookup(list(range(8)) + [50])        # the held prefix is found whole, its keys as stored
    assert again == held and float(again[1].k[0][0, 0, 0, 0]) == 1.0 and cache.hits == 8
    cache.release(held)
    cache.release(again)
    cache.release(cache.store([7] * 16, [], *_kv(16, 3.0)))        # 4 new free blocks: the old ones go
    assert cache.nbytes <= 3 * block_bytes and cache.lookup(list(range(8)) + [50]) == []


def test_a_cancelled_request_gives_its_shared_blocks_back():
    model = _model()
    sched = Scheduler(model, max_batch=4, features=Features(prefix_cache=1 << 20))
    prompt = list(range(40))
    first, second = [], []
    sched.submit(Request(prompt, 30, Sampling(0), np.random.default_rng(0), emit=first.append))
    sched.step()
    sched.submit(b := Request(prompt + [1], 30, Sampling(0), np.random.default_rng(0), emit=second.append))
    sched.step()
    blocks = list(sched.prefix.blocks.values())
    assert len(blocks) == 2 and all(blk.refs == 2 for blk in blocks)       # both rows hold both blocks
    b.cancel()
    sched.step()
    assert second[-1] == Done("cancelled") and all(blk.refs == 1 for blk in blocks)
    while sched.busy:
        sched.step()
    assert all(blk.refs == 0 for blk in blocks)


# ----------------------------------------------------------------------------
# through the real server

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_chat_model(tmp_path_factory.mktemp("engine"), block_size=96, chat_tokens=False)


PROMPTS = ["The same long system prompt, then question one", "The same long system prompt, then question two",
           "The same long system prompt, then question one", "abcabcabcabcabc"]


def _answers(base, headers, **kw):
    out = []
    for p in PROMPTS:
        r = httpx.post(f"{base}/v1/completions", headers=headers, timeout=60,
                       json={"prompt": p, "max_tokens": 12, **kw})
        assert r.status_code == 200, r.text
        out.append(r.json())
    return out


@pytest.mark.slow
def test_server_features_give_the_same_answers_and_metrics_count_them(model_dir):
    """One server with every feature on (speculation too), one with every one off: the same greedy and
    seeded texts; /metrics parsed by prometheus_client counts the requests, tokens and cache hits, and each
    answer's own numbers (usage.prompt_tokens_details.cached_tokens, metrics.speculative_decoding) add up to
    the counters."""
    key = {"Authorization": "Bearer k"}
    with server(model_dir, "--prefix-cache", "0", "--max-num-batched-tokens", "0") as (base, _):
        plain = [_answers(base, None, temperature=0), _answers(base, None, seed=7)]
    with server(model_dir, "--api-key", "k", "--speculate", "ngram", "--max-num-batched-tokens", "8") as (base, _):
        greedy = _answers(base, key, temperature=0)
        assert httpx.get(f"{base}/metrics").status_code == 401
        text = httpx.get(f"{base}/metrics", headers=key).text
    assert [a["choices"][0]["text"] for a in greedy] == [a["choices"][0]["text"] for a in plain[0]]
    found = {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert found["vllm:prompt_tokens_total"] == sum(a["usage"]["prompt_tokens"] for a in greedy)
    assert found["vllm:generation_tokens_total"] == sum(a["usage"]["completion_tokens"] for a in greedy)
    assert found["vllm:e2e_request_latency_seconds_count"] == len(PROMPTS)
    assert found["vllm:time_to_first_token_seconds_count"] == len(PROMPTS)
    assert found["vllm:request_success_total"] == len(PROMPTS)
    assert found["vllm:prefix_cache_hits_total"] >= 32                  # the repeated prompt's blocks
    assert found["vllm:prefix_cache_queries_total"] == found["vllm:prompt_tokens_total"]
    assert 0 < found["vllm:spec_decode_num_accepted_tokens_total"] <= found["vllm:spec_decode_num_draft_tokens_total"]
    assert found["vllm:num_requests_running"] == 0
    cached = [a["usage"]["prompt_tokens_details"]["cached_tokens"] for a in greedy]
    assert sum(cached) == found["vllm:prefix_cache_hits_total"] and cached[0] == 0 and cached[2] > 0, cached
    assert all(c % 16 == 0 and c < a["usage"]["prompt_tokens"] for c, a in zip(cached, greedy))   # whole blocks
    spec = [a["metrics"]["speculative_decoding"] for a in greedy]
    assert sum(s["num_draft_tokens"] for s in spec) == found["vllm:spec_decode_num_draft_tokens_total"]
    assert sum(s["num_accepted_draft_tokens"] for s in spec) == found["vllm:spec_decode_num_accepted_tokens_total"]
    assert all(s["draft_acceptance_rate"] == (s["num_accepted_draft_tokens"] / s["num_draft_tokens"]
                                              if s["num_draft_tokens"] else 0.0) for s in spec)
    assert all("metrics" not in a and a["usage"]["prompt_tokens_details"] == {"cached_tokens": 0} for a in plain[0])
    with server(model_dir, "--metrics-public") as (base, _):           # seeded: prefix cache and chunks on
        seeded = _answers(base, None, seed=7)
        assert httpx.get(f"{base}/metrics").status_code == 200
    assert [a["choices"][0]["text"] for a in seeded] == [a["choices"][0]["text"] for a in plain[1]]


@pytest.mark.slow
def test_a_draft_with_another_tokenizer_is_refused_at_startup_in_one_line(tmp_path):
    """--draft of a model whose tokenizer differs (a byte model's id 0 is the byte 0, a char model's a space): one line on stderr naming the id, exit code 1, no traceback; a draft with the same tokenizer
    starts and answers."""
    from zerollm.interop.opening import save_zerollm
    from zerollm.tokenizers import ByteTokenizer, CharTokenizer
    served = tiny_chat_model(tmp_path, chat_tokens=False)
    char = CharTokenizer.train("".join(chr(c) for c in range(32, 32 + 256)))
    small = GPTConfig(vocab_size=256, block_size=96, n_layer=1, n_head=2, n_embd=16)
    other = save_zerollm(GPT(small, seed=1), tmp_path / "other", tokenizer=char)
    same = save_zerollm(GPT(small, seed=1), tmp_path / "same", tokenizer=ByteTokenizer())
    out = subprocess.run([sys.executable, "-m", "zerollm", "serve", "--hf", str(served), "--port", "0",
                          "--draft", str(other)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "another tokenizer: id 0 is" in lines[0] and "Traceback" not in out.stderr
    with server(served, "--draft", str(same), "--metrics-public") as (base, _):
        r = httpx.post(f"{base}/v1/completions", timeout=60, json={"prompt": "abcabc", "max_tokens": 6, "temperature": 0})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 6
        text = httpx.get(f"{base}/metrics").text
    found = {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert found["vllm:spec_decode_num_draft_tokens_total"] > 0


# ----------------------------------------------------------------------------
# a stream whose model fails ends with an error, never with "stop"

def _failing_after(model, calls):
    """Make model.forward_hidden raise from its ``calls``-th call on (a model failing mid-answer); -> undo."""
    forward, count = model.forward_hidden, [0]

    def failing(idx, **kw):
        count[0] += 1
        if count[0] >= calls:
            raise MemoryError("the test's model ran out of memory")
        return forward(idx, **kw)
    model.forward_hidden = failing
    return lambda: vars(model).pop("forward_hidden")


@pytest.mark.slow
def test_a_stream_whose_model_fails_ends_with_an_error_event_not_stop():
    """The model fails at its third forward (after the prompt and a token): the raw stream has what was made
    so far, then OpenAI's error event and [DONE], and no chunk has a finish_reason ("stop" before); the openai client
    raises APIError with the message. The same request with a working model ends with "length" and the
    client reads it whole; the server answers again after the failure."""
    import openai
    from fastapi.testclient import TestClient
    from zerollm.serve.api import build_app
    from zerollm.serve.backend import Backend
    from zerollm.tokenizers import ByteTokenizer
    tok = ByteTokenizer()
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=64, n_layer=1, n_head=2, n_embd=16), seed=0)
    backend = Backend(model, tok, name="t")
    backend.start()
    http = TestClient(build_app(backend))
    client = openai.OpenAI(api_key="none", base_url="http://testserver/v1", http_client=http, max_retries=0)
    body = {"model": "t", "prompt": "abc", "max_tokens": 8, "temperature": 0, "stream": True}
    try:
        undo = _failing_after(model, 3)
        events = [line[6:] for line in http.post("/v1/completions", json=body).text.splitlines() if line.startswith("data: ")]
        undo()
        chunks = [json.loads(e) for e in events[:-1]]
        assert events[-1] == "[DONE]" and "cut short: the model failed" in chunks[-1]["error"]["message"]
        assert all(ch.get("finish_reason") is None for c in chunks[:-1] for ch in c["choices"])
        undo = _failing_after(model, 3)
        with pytest.raises(openai.APIError, match="the model failed"):
            list(client.completions.create(**{k: v for k, v in body.items() if k != "stream"}, stream=True))
        undo()
        whole = list(client.completions.create(**{k: v for k, v in body.items() if k != "stream"}, stream=True))
        assert whole[-1].choices[0].finish_reason == "length"
        assert sum(len(c.choices[0].text.encode("utf-8", "surrogateescape")) > 0 for c in whole) >= 1
    finally:
        backend.close()


@pytest.mark.parametrize("flag", ["--max-num-batched-tokens", "--prefill-chunk"])
def test_the_step_budget_flag_and_its_earlier_name_set_the_same_feature(flag):
    """--prefill-chunk (the flag's first name, in scripts written before the step budget) still parses, into
    the same Features as --max-num-batched-tokens; 0 still means each prompt whole."""
    from zerollm.cli.commands.serve import add_feature_arguments, features_of
    import argparse
    p = argparse.ArgumentParser()
    add_feature_arguments(p)
    assert features_of(p.parse_args([flag, "24"])).step_tokens == 24
    assert features_of(p.parse_args([flag, "0"])).step_tokens is None


def test_a_long_prompt_with_a_draft_model_is_prefilled_in_chunks_through_the_server():
    """The server with --draft and a 24-token step budget: a 150-byte prompt arrives while a stream decodes.
    The draft takes that prompt in chunks of the budget's room (18 tokens: 24 less 2 rows x (1 + 2 guesses)),
    each chunk in a step that also decodes the stream (the draft's one-token steps come between them; it
    took all 150 at once before); both answers are the ones a server without features gives."""
    import threading
    from fastapi.testclient import TestClient
    from zerollm.serve.api import build_app
    from zerollm.serve.backend import Backend
    from zerollm.tokenizers import ByteTokenizer
    tok, cfg = ByteTokenizer(), dict(vocab_size=256, block_size=256, n_head=2, n_embd=16, dtype="float64")
    model, draft = GPT(GPTConfig(n_layer=2, **cfg), seed=0), GPT(GPTConfig(n_layer=1, **cfg), seed=4)
    long_prompt = "".join(chr(97 + (i * 7) % 26) for i in range(150))
    stream = {"model": "t", "prompt": "abc", "max_tokens": 90, "temperature": 0, "stream": True}
    other = {"model": "t", "prompt": long_prompt, "max_tokens": 8, "temperature": 0}

    def answers(features, calls=None):
        backend = Backend(model, tok, name="t", features=features)
        # the model's 4th forward (the stream's 3rd step) waits for the long prompt to be queued, which the client
        # sends once it has the stream's first piece: the prompt arrives while the stream decodes, however slow
        # the machine (waiting for the client to count 3 pieces raced a loaded machine: the stream's 90 tokens
        # can come in fewer events, and it failed once in a run of the serve tests on 2 workers)
        forwards, arrived, submitted, submit = [], threading.Event(), [], backend.scheduler.submit_all
        backend.scheduler.submit_all = lambda reqs: (submit(reqs), submitted.append(1),
                                                     len(submitted) == 2 and arrived.set())
        model.forward_hidden = lambda idx, **kw: (forwards.append(1), len(forwards) == 4 and arrived.wait(60),
                                                  GPT.forward_hidden(model, idx, **kw))[2]
        backend.start()
        http, out = TestClient(build_app(backend)), {}
        try:
            with http.stream("POST", "/v1/completions", json=stream) as r:
                pieces, later = [], None
                for line in r.iter_lines():
                    if not line.startswith("data: {"):
                        continue
                    pieces.append(json.loads(line[6:])["choices"][0]["text"])
                    if len(pieces) == 1:
                        if calls is not None:
                            calls[:] = []
                        later = threading.Thread(target=lambda: out.update(r=http.post("/v1/completions", json=other)))
                        later.start()
                later.join()
            assert out["r"].status_code == 200, out["r"].text
            return "".join(pieces), out["r"].json()["choices"][0]["text"]
        finally:
            backend.close()
            vars(model).pop("forward_hidden")

    plain = answers(Features())
    calls = []
    forward = draft.forward_hidden
    draft.forward_hidden = lambda idx, **kw: (calls.append(np.asarray(idx).shape), forward(idx, **kw))[1]
    got = answers(Features(step_tokens=24, speculation=Speculation("draft", 2), draft=draft), calls)
    assert got == plain
    chunks = [i for i, (rows, n) in enumerate(calls) if n > 1]            # the long prompt's pieces (1 row each)
    assert sum(calls[i][1] for i in chunks) == 150 and max(calls[i][1] for i in chunks) <= 18
    assert all(any(n == 1 for _, n in calls[a + 1:b]) for a, b in zip(chunks, chunks[1:]))   # decoding between


def test_a_row_joining_or_leaving_reuses_the_batch_cache_storage():
    """Once the shared batch's cache has room (rows doubled up to max_batch, slots doubled up to the context),
    a row joining writes into a free row of the same storage and a row leaving has the last row moved into its
    place within it: no new array for the whole batch (before, every join and leave made one). The answers
    are the ones each request gets alone."""
    model = _model()
    sched = Scheduler(model, max_batch=8)
    got = [[] for _ in range(7)]

    def submit(k, n):
        sched.submit(Request([k + 1, 2, 3], n, Sampling(0), np.random.default_rng(k), emit=got[k].append))
    for k in range(4):
        submit(k, 40 if k != 1 else 8)       # row 1 ends first
    sched.step()
    submit(4, 40)                            # the storage grows: 4 -> 8 rows
    sched.step()
    storage = sched.cache.k[0]
    for k in (5, 6):
        submit(k, 30)
        sched.step()
        assert sched.cache.batch_size == k + 1 and np.shares_memory(storage, sched.cache.k[0])
    while len(got[1]) == 0 or not isinstance(got[1][-1], Done):
        sched.step()
    sched.step()
    assert sched.cache.batch_size == 6 and np.shares_memory(storage, sched.cache.k[0])
    while sched.busy:
        sched.step()
    for k, n in enumerate([40, 8, 40, 40, 40, 30, 30]):
        alone, _ = _run(model, [[k + 1, 2, 3]], Features(), Sampling(0), n=n)
        assert [ev.id for ev in got[k] if isinstance(ev, Token)] == alone[0]
