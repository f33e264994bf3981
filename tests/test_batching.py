"""Continuous batching (zerollm.generation.batching) and the sampler's penalties and min-p.

The claims: a row in a batch, at its own position, gives the logits of the same request alone (up to
rounding, measured here); greedy and seeded answers are the same tokens as generate() alone and as
`zerollm sample`; rows join and leave between steps; a greedy repetition_penalty run equals
transformers' generate(repetition_penalty=...) on the exported model.
"""

import numpy as np
import pytest

from zerollm.io.errors import ZeroLLMError
from zerollm.generation.batching import Done, QueueFull, Request, Scheduler, Token
from zerollm.model.kvcache import KVCache
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling, filter_logits, penalize, sample_next
from tiny_runs import run_main, tiny_run
from zerollm.interop.opening import Source, open_model, save_zerollm


def opened(path):
    """(model, tokenizer, checkpoint) of a zerollm run, step or model directory."""
    o = open_model(Source(ckpt=str(path)), tokenizer="may")
    return o.model, o.tokenizer, o.checkpoint


def _model(pos="learned", dtype="float32", V=61, block=48):
    cfg = GPTConfig(vocab_size=V, block_size=block, n_layer=2, n_head=2, n_embd=16, pos=pos, dtype=dtype)
    return GPT(cfg, seed=3).eval()


def _collect(req_list):
    """Give each request an emit that records Tokens and the Done."""
    out = {}
    for r in req_list:
        out[id(r)] = {"ids": [], "done": None}
        r.emit = (lambda rec: lambda ev: rec["ids"].append(ev.id) if isinstance(ev, Token)
                  else rec.__setitem__("done", ev))(out[id(r)])
    return out


def _request(prompt, n, sampling, seed, **kw):
    return Request(list(prompt), n, sampling, np.random.default_rng(seed), emit=None, **kw)


def _run(model, reqs, arrivals=None, max_batch=16):
    """Submit reqs[i] before step arrivals[i] (default: all at once) and step until all are done."""
    sched = Scheduler(model, max_batch=max_batch, max_queue=64)
    got = _collect(reqs)
    arrivals = arrivals or [0] * len(reqs)
    step, widest = 0, 0
    while any(got[id(r)]["done"] is None for r in reqs):
        for r, t in zip(reqs, arrivals):
            if t == step:
                sched.submit(r)
        sched.step()
        widest = max(widest, len(sched.rows))
        step += 1
        assert step < 1000
    return [got[id(r)] for r in reqs], sched, widest


def _alone(model, prompt, n, sampling, seed, stop=()):
    ids = []
    for t in generate(model, np.array([prompt]), n, sampling, rng=np.random.default_rng(seed)):
        t = int(t[0])
        if t in stop:
            break
        ids.append(t)
    return ids


PROMPTS = [[5, 9, 2], [1] * 9, [7, 3, 3, 8, 1, 30], [44], [12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22]]


@pytest.mark.parametrize("pos", ["learned", "rope", "sinusoidal"])
def test_per_row_cache_gives_each_row_its_logits_alone(pos):
    """Rows prefilled apart, at different positions, then stepped together: the logits of each row equal
    a full forward of that row alone. float64: rounding only (1e-12); float32: printed, bounded."""
    for dtype, tol in (("float64", 1e-11), ("float32", 1e-4)):
        model = _model(pos, dtype)
        batch = KVCache(model.config, 0, max_len=1, per_row=True)
        for p in PROMPTS:
            one = KVCache(model.config, 1, max_len=len(p) + 3, per_row=True)
            model.forward(np.array([p]), kv_cache=one)
            batch.add_rows(one)
        steps = [[4], [6], [8]]
        for s in steps:
            logits, _ = model.forward(np.array([s] * len(PROMPTS)), kv_cache=batch)       # (5, 1, V)
        worst = 0.0
        for b, p in enumerate(PROMPTS):
            full, _ = model.forward(np.array([p + [4, 6, 8]]))
            worst = max(worst, float(np.abs(full[0, -1] - logits[b, -1]).max()))
        print(f"{pos} {dtype}: max |batched - alone| logit = {worst:.3g}")
        assert worst < tol
        assert list(batch.pos) == [len(p) + 3 for p in PROMPTS]


SAMPLINGS = [Sampling(temperature=0), Sampling(temperature=0.9, top_k=20),
             Sampling(temperature=1.1, top_p=0.8, min_p=0.05, repetition_penalty=1.3,
                      presence_penalty=0.5, frequency_penalty=0.4)]


@pytest.mark.parametrize("sampling", SAMPLINGS, ids=["greedy", "topk", "penalties"])
def test_batched_answers_equal_each_request_alone(sampling):
    """Requests arriving at different steps, with different lengths and seeds: each gets exactly the
    tokens generate() gives it alone with the same seed; rows really shared forward passes."""
    model = _model("rope", "float64")
    n_new = [6, 12, 3, 9, 7]
    reqs = [_request(p, n, sampling, seed=10 + i) for i, (p, n) in enumerate(zip(PROMPTS, n_new))]
    got, sched, widest = _run(model, reqs, arrivals=[0, 0, 2, 3, 5])
    for i, (p, n) in enumerate(zip(PROMPTS, n_new)):
        assert got[i]["ids"] == _alone(model, p, n, sampling, 10 + i)
        assert got[i]["done"].reason == "length"
    assert widest >= 4
    assert sched.steps < sum(n_new) - len(n_new)       # far fewer forwards than one per token


def test_batched_logits_distance_float32():
    """The measurement the docs quote: float32 logits of rows in a batch of 5 against the same
    requests alone, over every step; tokens are equal (greedy)."""
    model = _model("learned", "float32")
    greedy = Sampling(temperature=0)
    alone = []
    for p in PROMPTS:
        (r,) = [_request(p, 8, greedy, 0, keep_logits=True)]
        _run(model, [r])
        alone.append(r)
    together = [_request(p, 8, greedy, 0, keep_logits=True) for p in PROMPTS]
    _run(model, together, arrivals=[0, 1, 1, 2, 4])
    worst = max(float(np.abs(a - b).max()) for x, y in zip(alone, together) for a, b in zip(x.logits, y.logits))
    scale = max(float(np.abs(a).max()) for x in alone for a in x.logits)
    print(f"float32: max |batched - alone| logit = {worst:.3g} (logits up to {scale:.3g})")
    assert worst < 1e-4 * max(scale, 1)


def test_stop_ids_leave_at_once_and_slots_are_reused():
    model = _model("learned", "float64")
    greedy = Sampling(temperature=0)
    first = _alone(model, PROMPTS[0], 5, greedy, 0)
    stop = first[2]
    reqs = [_request(PROMPTS[0], 5, greedy, 0, stop_ids=frozenset([stop]))] + \
           [_request(p, 4, greedy, 0) for p in PROMPTS[1:]]
    got, sched, widest = _run(model, reqs, max_batch=2)
    assert got[0]["ids"] == first[:first.index(stop)] and got[0]["done"].reason == "stop"
    assert widest == 2                                    # never more than max_batch rows
    for r, p in zip(got[1:], PROMPTS[1:]):
        assert r["ids"] == _alone(model, p, 4, greedy, 0)


def test_cancel_frees_the_row_within_one_step_and_queue_is_bounded():
    model = _model()
    sched = Scheduler(model, max_batch=2, max_queue=0)        # free rows take requests; none may wait
    a, b = _request([1, 2], 30, Sampling(0), 0), _request([3], 30, Sampling(0), 0)
    got = _collect([a, b])
    sched.submit(a)
    sched.submit(b)
    with pytest.raises(QueueFull, match="max-queue 0"):
        sched.submit(_request([3], 3, Sampling(0), 0))
    sched.step()
    assert len(sched.rows) == 2
    a.cancel()
    sched.step()
    assert len(sched.rows) == 1 and got[id(a)]["done"] == Done("cancelled")
    assert sched.cache.batch_size == 1


def test_requests_beyond_the_context_are_refused():
    model = _model(block=16)
    sched = Scheduler(model)
    with pytest.raises(ZeroLLMError, match="context of 16"):
        sched.submit(_request([1] * 10, 7, Sampling(0), 0))
    with pytest.raises(ZeroLLMError, match="empty"):
        sched.submit(_request([], 3, Sampling(0), 0))


def test_logprobs_are_the_models_log_softmax():
    model = _model("learned", "float64")
    r = _request(PROMPTS[1], 2, Sampling(temperature=0), 0, top_logprobs=3)
    events = []
    r.emit = events.append
    sched = Scheduler(model)
    sched.submit(r)
    sched.step()
    full, _ = model.forward(np.array([PROMPTS[1]]))
    logp = full[0, -1] - np.log(np.exp(full[0, -1]).sum())
    tok = events[0]
    assert tok.id == int(np.argmax(logp)) and tok.logprob == pytest.approx(logp.max(), abs=1e-9)
    assert [i for i, _ in tok.top] == list(np.argsort(-logp)[:3])


# ----------------------------------------------------------------------------
# the sampler's new parts

def test_penalize_follows_its_definitions():
    logits = np.array([[2.0, -1.0, 0.5, 3.0]])
    counts = np.array([[1, 2, 0, 0]])
    seen = np.array([[False, False, True, False]])
    out = penalize(logits, counts, seen, repetition_penalty=2.0)
    assert out.tolist() == [[1.0, -2.0, 0.25, 3.0]]
    out = penalize(logits, counts, seen, presence_penalty=0.5, frequency_penalty=0.25)
    assert out.tolist() == [[2.0 - 0.75, -1.0 - 1.0, 0.5, 3.0]]


def test_min_p_keeps_tokens_at_least_that_fraction_of_the_best():
    probs = np.array([[0.5, 0.3, 0.12, 0.08]])
    kept = np.isfinite(filter_logits(np.log(probs), min_p=0.2))
    assert kept.tolist() == [[True, True, True, False]]          # 0.08 < 0.2 * 0.5 = 0.1 <= 0.12


@pytest.mark.parametrize("bad", [dict(min_p=1.5), dict(repetition_penalty=0.0), dict(repetition_penalty=1e-320),
                                 dict(repetition_penalty=0.001), dict(presence_penalty=3.0),
                                 dict(frequency_penalty=-2.5)])
def test_bad_sampling_values_say_which(bad):
    with pytest.raises(ZeroLLMError, match=next(iter(bad))):
        Sampling(**bad)


def test_repetition_penalty_greedy_equals_transformers(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM
    from zerollm.interop.hf import export
    model = _model("learned", "float32", V=40, block=40)
    export(model, tmp_path / "hf")
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    prompt = [3, 5, 3, 7, 1]
    ours = _alone(model, prompt, 25, Sampling(temperature=0, repetition_penalty=1.8), 0)
    plain = _alone(model, prompt, 25, Sampling(temperature=0), 0)
    with torch.no_grad():
        theirs = hf.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=25, min_new_tokens=25,
                             repetition_penalty=1.8, pad_token_id=0)[0, len(prompt):].tolist()
    assert ours == theirs
    assert ours != plain                                  # the penalty changed the answer


def test_zerollm_sample_greedy_equals_the_scheduler(tmp_path_factory, capsys):
    """`zerollm sample --temperature 0` (and with --repetition-penalty) prints what the scheduler makes."""
    run = tiny_run(tmp_path_factory, "char")
    model, tok, _ = opened(str(run))
    for extra, sampling in (([], Sampling(0)), (["--repetition-penalty", "1.5"], Sampling(0, repetition_penalty=1.5))):
        code, out, err = run_main(["sample", "--ckpt", run, "--prompt", "ROMEO:", "--temperature", "0",
                                   "--max-new-tokens", "10", *extra], capsys)
        assert code == 0, err
        (got,), _, _ = _run(model, [_request(tok.encode("ROMEO:"), 10, sampling, 0)])
        assert out == "ROMEO:" + tok.decode(got["ids"]) + "\n"


@pytest.mark.parametrize("temperature", [1e-320, 1e-300, 1e-6])
def test_a_temperature_too_small_to_divide_by_is_greedy(temperature):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 50)) * 20
    with np.errstate(over="raise", invalid="raise", divide="raise"):     # no overflow, no NaN on the way
        ids = sample_next(logits, rng, temperature=temperature, top_k=5, top_p=0.9)
    assert ids.tolist() == np.argmax(logits, axis=-1).tolist()


def test_the_smallest_repetition_penalty_keeps_the_probabilities_finite():
    counts = np.zeros((1, 4), np.int64)
    counts[0, 1] = 1
    logits = penalize(np.array([[1.0, 50.0, -3.0, 0.0]]), counts, repetition_penalty=0.01)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        ids = sample_next(logits, np.random.default_rng(0), temperature=1e-5)
    assert ids.tolist() == [1] and np.isfinite(logits).all()


def test_the_scheduler_runs_a_gguf_models_quantized_head_on_the_fast_engine(tmp_path):
    # with --engine fast a GGUF model keeps its head as Q8_0 blocks; the scheduler multiplied h @ head_weight.T
    # and failed (AttributeError) in the server, rollouts, tasks eval and lm-eval. model.head() is the one head.
    from zerollm.engine import use_engine
    from zerollm.generation.decode import Completions, sample_completions
    from zerollm.interop.gguf import export_gguf
    from zerollm.interop.gguf_load import load_gguf
    from zerollm.tokenizers import ByteTokenizer
    cfg = GPTConfig(vocab_size=256, block_size=32, n_layer=1, n_head=2, n_embd=32)
    export_gguf(GPT(cfg, seed=0), tmp_path / "m.gguf", tokenizer=ByteTokenizer(), quant_kind="q8_0")
    with use_engine("fast"):
        model, _, _ = load_gguf(tmp_path / "m.gguf")
        assert not isinstance(model.head_weight, np.ndarray)          # the head stays quantized
        prompts = [[1, 2, 3], [4, 5, 6, 7, 8]]
        got = sample_completions(model, prompts, Completions(6, Sampling(0)), seeds=[0, 1])
        want = []
        for p in prompts:                                            # greedy by hand, through forward()
            ids = list(p)
            for _ in range(6):
                ids.append(int(np.argmax(model.forward(np.array([ids]))[0][0, -1])))
            want.append(ids[len(p):])
    assert got == want
