"""Batched sampling with stop tokens: the same completions however the prompts are batched, greedy equal to
the one-prompt ``generate``, stop ids honoured, the context respected, Ctrl-C between tokens."""

import warnings

import numpy as np
import pytest

from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.generation.decode import Completions, generate, sample_completions
from zerollm.generation.sample import Sampling

V = 23


@pytest.fixture(scope="module", params=["learned", "rope"])
def model(request):
    cfg = GPTConfig(vocab_size=V, block_size=24, n_layer=2, n_head=2, n_embd=16, pos=request.param,
                    norm="rmsnorm" if request.param == "rope" else "layernorm",
                    mlp="swiglu" if request.param == "rope" else "gelu", dtype="float64")
    return GPT(cfg, seed=1)


def _prompts(n=9, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, V, size=int(rng.integers(1, 6))).tolist() for _ in range(n)]


@pytest.mark.parametrize("sampling", [dict(temperature=1.0), dict(temperature=0.7, top_k=5),
                                      dict(temperature=1.3, top_p=0.8)])
def test_completions_do_not_depend_on_the_batching(model, sampling):
    prompts, seeds, how = _prompts(), [(7, i) for i in range(9)], Completions(12, Sampling(**sampling), (3,))
    together = sample_completions(model, prompts, how, seeds=seeds)
    alone = [sample_completions(model, [p], how, seeds=[s])[0] for p, s in zip(prompts, seeds)]
    halves = (sample_completions(model, prompts[:4], how, seeds=seeds[:4])
              + sample_completions(model, prompts[4:], how, seeds=seeds[4:]))
    backwards = sample_completions(model, prompts[::-1], how, seeds=seeds[::-1])[::-1]
    assert together == alone == halves == backwards
    assert len({tuple(c) for c in together}) > 5                            # and the rows really differ


def test_greedy_equals_generate_one_prompt_at_a_time(model):
    prompts = _prompts(6, seed=1)
    ours = sample_completions(model, prompts, Completions(10, Sampling(temperature=0)), seeds=range(6))
    for prompt, completion in zip(prompts, ours):
        theirs = [int(t[0]) for t in generate(model, np.array(prompt), 10, Sampling(temperature=0))]
        assert completion == theirs


def test_rows_stop_after_their_first_stop_id(model):
    prompts, seeds = _prompts(12, seed=2), [(1, i) for i in range(12)]
    free = sample_completions(model, prompts, Completions(15), seeds=seeds)
    stop = {free[0][3], free[1][2]}
    stopped = sample_completions(model, prompts, Completions(15, stop_ids=tuple(stop)), seeds=seeds)
    for full, cut in zip(free, stopped):
        first = next((k for k, t in enumerate(full) if t in stop), None)
        assert cut == (full if first is None else full[:first + 1])         # the stop id is kept, then nothing
    assert len(stopped[0]) <= 4 and len(stopped[1]) <= 3


def test_the_context_is_respected(model):
    block = model.config.block_size
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = sample_completions(model, [[1] * (block - 2), [2] * block, [3]], Completions(10), seeds=[0, 1, 2])
    assert [len(c) for c in out] == [3, 1, 10]                               # prompt + completion <= block + 1
    assert "leave room for only 1 new tokens" in str(caught[0].message)
    with pytest.raises(ZeroLLMError, match=f"prompt 1 is {block + 1} tokens long but the model's context is {block}"):
        sample_completions(model, [[1], [1] * (block + 1)], Completions(5), seeds=[0, 1])


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(prompts=[[1], [2]], seeds=[0]), "one seed per prompt"),
    (dict(prompts=[[]], seeds=[0]), "prompt 0 is empty"),
    (dict(prompts=[[1]], seeds=[0], max_new_tokens=0), "max_new_tokens"),
    (dict(prompts=[[1]], seeds=[0], temperature=-1), "temperature"),
    (dict(prompts=[[V]], seeds=[0]), "token ids must be in"),
])
def test_bad_arguments(model, kwargs, fragment):
    kwargs = {"max_new_tokens": 4, **kwargs}
    with pytest.raises(ZeroLLMError, match=fragment):
        how = Completions(kwargs.pop("max_new_tokens"), Sampling(temperature=kwargs.pop("temperature", 1.0)))
        sample_completions(model, kwargs.pop("prompts"), how, **kwargs)


def test_should_stop_is_asked_between_tokens_and_the_mode_is_restored(model):
    asked = []

    def stop():
        asked.append(1)
        return len(asked) >= 3

    model.train()
    out = sample_completions(model, [[1], [2, 3]], Completions(20), seeds=[0, 1], should_stop=stop)
    assert [len(c) for c in out] == [3, 0] and model.training
    model.eval()
