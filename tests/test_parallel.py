"""Data parallelism in threads (zerollm.training.parallel): the same loss and gradients as one big batch."""

import numpy as np
import pytest

from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT
from zerollm.training.parallel import ShardedModel


def setup(B, dropout=0.0, seed=0):
    cfg = GPTConfig(vocab_size=40, block_size=12, n_layer=2, n_head=2, n_embd=16, dtype="float64",
                    dropout=dropout, norm="rmsnorm", pos="rope")
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, 40, (B, 12)), rng.integers(0, 40, (B, 12))
    y[0, :5] = -100                                   # shards get different numbers of valid targets
    return GPT(cfg, seed=1), x, y


@pytest.mark.parametrize("B, threads", [(5, 2), (4, 2), (7, 3), (2, 4)])
def test_shards_give_the_same_loss_and_gradients(B, threads):
    model, x, y = setup(B)
    _, loss = model.forward(x, y)
    ref = {k: v.copy() for k, v in model.backward().items()}
    sharded = ShardedModel(model, threads)
    got_loss, got = sharded.forward_backward(x, y)
    assert got_loss == pytest.approx(loss, rel=1e-13)
    assert set(got) == set(ref)
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name], rtol=0, atol=1e-13, err_msg=name)
    np.testing.assert_allclose(sharded.forward(x), model.forward(x)[0], atol=1e-13)
    sharded.close()


def test_dropout_masks_follow_the_model_rng():
    """The replicas' generators are drawn from model.rng: same state, same masks, same result."""
    model, x, y = setup(6, dropout=0.3)
    sharded = ShardedModel(model.train(), 2)
    state = model.rng.bit_generator.state
    a, ga = sharded.forward_backward(x, y)
    ga = {k: v.copy() for k, v in ga.items()}
    model.rng.bit_generator.state = state
    b, gb = sharded.forward_backward(x, y)
    assert a == b and all(np.array_equal(ga[k], gb[k]) for k in ga)
    c, _ = sharded.forward_backward(x, y)             # the generator moved on: new masks
    assert c != a


def test_bad_thread_counts():
    model, _, _ = setup(2)
    for n in (0, -1, 1.5):
        with pytest.raises(ZeroLLMError):
            ShardedModel(model, n)


def test_the_shard_threads_share_the_per_parameter_work_with_the_same_results(monkeypatch):
    """Between steps the pool's threads split the parameters (by_name_in_parts): the gradient sum, the
    clipping norm and AdamW give bit for bit what one thread gives, and more than one thread works.
    Small models stay in the calling thread (below SHARE_FROM numbers the split costs more than it saves)."""
    import threading

    from zerollm.engine import threads
    from zerollm.engine.threads import ThreadPool, by_name_in_parts
    here = threading.get_ident()
    monkeypatch.setattr(threads, "SHARE_FROM", 1 << 21)
    small = {"a": np.zeros(10), "b": np.zeros((1000, 1000))}           # 1M numbers: not shared out
    assert set(by_name_in_parts(ThreadPool(2, "small"), small, lambda name: threading.get_ident()).values()) == {here}
    monkeypatch.setattr(threads, "SHARE_FROM", 0)                       # these small arrays too
    from zerollm.training.objective import ShardResult, reduce_shards
    from zerollm.training.optim import AdamW, clip_grad_norm

    rng = np.random.default_rng(3)
    shapes = {"a": (64, 48), "b": (48,), "c": (30, 20), "d": (7,), "e": (100, 9)}
    pool = ThreadPool(3, "test")

    def shard_grads(scale):
        return {n: np.asarray(rng.standard_normal(s) * scale, np.float32) for n, s in shapes.items()}

    parts = [ShardResult(1.0, shard_grads(5.0), w, {}) for w in (3.0, 5.0, 1.0)]
    copies = [ShardResult(r.loss, {n: g.copy() for n, g in r.grads.items()}, r.weight, {}) for r in parts]
    serial, threaded = reduce_shards(parts), reduce_shards(copies, pool)
    params = {n: np.asarray(rng.standard_normal(s), np.float32) for n, s in shapes.items()}
    twins = {n: p.copy() for n, p in params.items()}
    opts = AdamW(params, lr=1e-2, weight_decay=0.1), AdamW(twins, lr=1e-2, weight_decay=0.1)
    for i in range(3):
        limit = 0.5 * 0.9 ** i                       # below the norm every time: both clip
        norm = clip_grad_norm(serial.grads, limit)
        assert norm > limit and clip_grad_norm(threaded.grads, limit, pool) == norm
        for name in shapes:
            assert np.array_equal(serial.grads[name], threaded.grads[name]), name
        opts[0].step(serial.grads)
        opts[1].step(threaded.grads, pool=pool)
        for name in shapes:
            assert np.array_equal(params[name], twins[name]) and np.array_equal(opts[0].v[name], opts[1].v[name])

    met = threading.Barrier(2, timeout=10)          # passes only when two threads work at the same time

    def who(name):
        if name in ("a", "e"):                       # the two largest: in different groups
            met.wait()
        return threading.get_ident()
    seen = by_name_in_parts(pool, params, who)
    assert list(seen) == list(shapes) and seen["a"] != seen["e"]
    pool.shutdown()
