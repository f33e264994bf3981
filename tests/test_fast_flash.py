"""The fast engine's whole-loop flash attention (zerollm/engine/fast/flash.py: the tile loops in numba,
the products in NumPy's BLAS, threads over heads and tiles) against torch's scaled_dot_product_attention,
forward and backward, and its fall-backs to the NumPy reference."""

import numba
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

import zerollm.engine.fast.flash as fast
from zerollm.engine.fast import microkernel
from zerollm.engine.fast.blas import planned_splits
from zerollm.engine import use_engine
from zerollm.engine.amp import autocast
from zerollm.nn.flash import FlashOptions, flash_sdpa_backward, flash_sdpa_forward

TOL = 2e-6       # float32 against float64 torch, relative to the largest reference value


@pytest.fixture(autouse=True, params=["own products", "BLAS products"])
def products(request, monkeypatch):
    """Every test twice: the attention kernels' products by zerollm/engine/fast/microkernel.py (what
    AVX-512 hosts run) and by NumPy's BLAS (what the others run), whatever this host is."""
    monkeypatch.setattr(microkernel, "USE", request.param == "own products")


def rel(ours, ref):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30))


def inputs(B, nkv, g, T, Tk, hs, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    n = lambda *shape: (rng.standard_normal(shape) * scale).astype(np.float32)
    return n(B, nkv, g, T, hs), n(B, nkv, 1, Tk, hs), n(B, nkv, 1, Tk, hs), n(B, nkv, g, T, hs)


def torch_sdpa(q, k, v, dout, causal):
    """torch in float64 on (B, nkv * g, T, hs); k, v repeated for the g query heads of each kv head.
    Causal with Tk > T: query i sees keys up to i + Tk - T (the KV-cache convention)."""
    B, nkv, g, T, hs = q.shape
    Tk = k.shape[-2]
    tq = torch.tensor(q.reshape(B, nkv * g, T, hs), dtype=torch.float64, requires_grad=True)
    tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (k, v))
    kk, vv = (a.expand(B, nkv, g, Tk, hs).reshape(B, nkv * g, Tk, hs) for a in (tk, tv))
    mask = torch.ones(T, Tk, dtype=torch.bool).tril(Tk - T) if causal else None
    out = F.scaled_dot_product_attention(tq, kk, vv, attn_mask=mask)
    out.backward(torch.tensor(dout.reshape(out.shape), dtype=torch.float64))
    return [a.detach().numpy() for a in (out.reshape(q.shape), tq.grad.reshape(q.shape), tk.grad, tv.grad)]


def fast_flash(q, k, v, dout, causal):
    with use_engine("fast"):
        out, cache = flash_sdpa_forward(q, k, v, causal=causal)
        return [out, *flash_sdpa_backward(dout, cache)]


CASES = {                                      # B, nkv, g, T, Tk, hs, causal
    "causal, T not a multiple of any tile": (1, 2, 1, 301, 301, 16, True),
    "T past SHORT_UNTIL, ending inside a tile": (1, 1, 1, 531, 531, 8, True),
    "grouped-query heads": (2, 1, 3, 45, 45, 8, True),
    "Tk > T (kv-cache offset)": (1, 2, 2, 7, 140, 8, True),
    "bidirectional": (2, 1, 1, 133, 133, 8, False),
    "one query": (1, 1, 1, 1, 9, 4, True),
    "heads of 64 (whole vector blocks)": (1, 2, 1, 300, 300, 64, True),
    "heads of 48 (32 + 16 columns)": (1, 1, 2, 301, 301, 48, True),
    "Tk > T, grouped, long": (1, 1, 2, 290, 333, 16, True),
}


def assert_matches_torch(case):
    B, nkv, g, T, Tk, hs, causal = CASES[case]
    q, k, v, dout = inputs(B, nkv, g, T, Tk, hs)
    with threadpool_limits(limits=1):
        ours = fast_flash(q, k, v, dout, causal)
    for name, a, b in zip(("out", "dq", "dk", "dv"), ours, torch_sdpa(q, k, v, dout, causal)):
        assert a.dtype == np.float32 and a.shape == b.shape, name
        assert rel(a, b) <= TOL, f"{name}: {rel(a, b):.2e}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_flash_matches_torch(case):
    assert_matches_torch(case)


@pytest.mark.parametrize("case", ["T past SHORT_UNTIL, ending inside a tile", "Tk > T, grouped, long"])
@pytest.mark.parametrize("tiles", ["SHORT_TILES", "MIDDLE_TILES", "LONG_TILES"])
def test_every_tile_size_matches_torch(tiles, case, monkeypatch):
    """Each tile set, whatever T it is chosen for, on a sequence that ends inside a tile (T = 531) and
    on one whose queries start past the first keys (Tk > T): tiles of more than DIAGONAL_ROWS queries
    on the causal diagonal go in bands, each band multiplying only the keys its last query sees."""
    chosen = getattr(fast, tiles)
    assert chosen[0] > fast.DIAGONAL_ROWS or tiles == "SHORT_TILES"
    monkeypatch.setattr(fast, "tiles", lambda T: chosen)
    assert_matches_torch(case)


def on_one_and_two_threads(run, kernels, *args):
    """run(*args) with BLAS allowed 1 thread, then 2; where the machine has 2 CPUs, the forward and the
    backward must each have split their items over 2 threads. Returns (results on 1 thread, results on 2)."""
    with threadpool_limits(limits=1):
        one = run(*args)
    before = planned_splits()
    with threadpool_limits(limits=2):
        two = run(*args)
    if numba.config.NUMBA_NUM_THREADS >= 2:                    # a machine with 2 CPUs or more
        assert planned_splits() - before == 2, kernels.__name__
    return one, two


@pytest.mark.slow
def test_two_threads_split_the_tiles_and_agree_with_one():
    """The threaded kernels: every thread its own items and its own dq buffer, none writing another's rows."""
    q, k, v, dout = inputs(2, 2, 2, 150, 150, 8, seed=3)
    one, two = on_one_and_two_threads(fast_flash, fast, q, k, v, dout, True)
    for a, b, ref in zip(one, two, torch_sdpa(q, k, v, dout, True)):
        assert rel(b, ref) <= TOL and rel(a, b) <= 1e-6


def test_large_scores_take_the_running_max_and_stay_finite():
    """Scores of hundreds: every row's Cauchy-Schwarz bound is above FIXED_MAX: the running-max path runs."""
    q, k, v, dout = inputs(1, 1, 1, 70, 70, 16, seed=4, scale=6.0)
    assert np.linalg.norm(q, axis=-1).min() * np.linalg.norm(k, axis=-1).max() / 4 > fast.FIXED_MAX
    ours = fast_flash(q, k, v, dout, True)
    for a, b in zip(ours, torch_sdpa(q, k, v, dout, True)):
        assert np.isfinite(a).all() and rel(a, b) <= 1e-5


def test_what_the_kernel_was_not_written_for_runs_the_reference_loops():
    """float64, a padding mask, autocast: the whole-loop kernel declines (NotImplemented), and the
    reference's tile loops give the numpy engine's numbers (their per-tile kernels round exp differently)."""
    q, k, v, dout = inputs(1, 1, 1, 20, 20, 8, seed=5)
    mask = np.zeros((1, 1, 1, 1, 20), bool)
    mask[..., -3:] = True
    runs = [dict(q=q.astype(np.float64), k=k.astype(np.float64), v=v.astype(np.float64), mask=None, amp=None),
            dict(q=q, k=k, v=v, mask=mask, amp=None), dict(q=q, k=k, v=v, mask=None, amp="bf16")]
    for run in runs:
        results = []
        for engine in ("numpy", "fast"):
            with use_engine(engine), autocast(run["amp"]):
                out, cache = flash_sdpa_forward(run["q"], run["k"], run["v"], mask=run["mask"], tile=8)
                results.append([out, *flash_sdpa_backward(dout.astype(out.dtype), cache)])
                if engine == "fast":
                    options = FlashOptions(True, cache.mask, 8, cache.scale, 0.0, None)
                    assert fast.flash_forward_tiles(run["q"], run["k"], run["v"], options) is NotImplemented
                    assert fast.flash_sdpa_backward(dout.astype(out.dtype), cache) is NotImplemented
        for a, b in zip(*results):
            assert a.dtype == b.dtype and rel(a, b) <= 1e-6
