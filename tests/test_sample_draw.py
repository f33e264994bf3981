"""zerollm.generation.sample.draw: the float32 shortcut gives exactly draw_exact's ids (the ids a seed gives),
also where u lies at, or within a hair of, a cumulative boundary, on flat and peaked rows, masked (-inf) ids,
an all -inf row, float16/float32/float64 logits and temperatures from 1e-4 to 2."""

import numpy as np
import pytest

from zerollm.generation import sample
from zerollm.generation.sample import draw, draw_exact, sample_next
from zerollm.nn.self_attention import softmax

# offsets from a boundary: on it, a rounding away, inside the margin, just outside, far
NEAR = [0.0, 1e-15, -1e-15, 1e-9, -1e-9, 2e-6, -2e-6, 6e-6, -6e-6, 2e-5, -2e-5, 1e-3, -1e-3]


def _rows(rng, B, V, scale, dtype):
    x = rng.standard_normal((B, V)) * scale
    x[:, rng.integers(0, V, V // 3)] = -np.inf          # ids the mask (allowed, a grammar, top-k) hides
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_draw_gives_draw_exacts_ids_at_and_near_every_boundary(dtype):
    rng = np.random.default_rng(0)
    checked = 0
    for V, scale, T in [(5713, 0.05, 0.8), (5713, 3.0, 0.8), (300, 40.0, 1e-4), (17, 1.0, 2.0), (1000, 8.0, 1.0)]:
        x = _rows(rng, 8, V, scale, dtype)
        scaled = np.divide(x, T, dtype=np.float64)
        cdf = np.cumsum(softmax(scaled.copy()), axis=-1)
        for off in NEAR:
            k = rng.integers(0, V, 8)
            u = np.clip(cdf[np.arange(8), k] + off, 0.0, np.nextafter(1.0, 0.0))
            assert np.array_equal(draw(x, u, T), draw_exact(scaled, u)), (V, scale, T, off)
            checked += 8
        u = rng.random(8)
        assert np.array_equal(draw(x, u, T), draw_exact(scaled, u))
    assert checked == 5 * len(NEAR) * 8


def test_draw_without_its_exact_redraw_would_differ(monkeypatch):
    """The boundary cases above are the ones the float32 sums get wrong alone: with no margin (never redrawn)
    some ids differ, so the test above is a real check of the redraw."""
    rng = np.random.default_rng(1)
    x = _rows(rng, 16, 5713, 0.05, np.float32)                      # a flat row: every boundary is close
    scaled = np.divide(x, 0.8, dtype=np.float64)
    cdf = np.cumsum(softmax(scaled.copy()), axis=-1)
    monkeypatch.setattr(sample, "_margin", lambda V, m, t: np.zeros(len(m)))
    differ = 0
    for off in (1e-15, -1e-15, 1e-9, -1e-9, 2e-7, -2e-7):
        u = cdf[np.arange(16), rng.integers(0, 5713, 16)] + off
        differ += int((draw(x, u, 0.8) != draw_exact(scaled, u)).sum())
    assert differ > 0


def test_draw_edge_rows():
    """An all -inf row (the last id, as before), a NaN row and a one-id row: the exact draw's answers."""
    x = np.array([[-np.inf] * 5, [0.0, np.nan, 1.0, 2.0, 3.0], [-np.inf, -np.inf, 4.0, -np.inf, -np.inf]], np.float32)
    u = np.array([0.3, 0.3, 0.999])
    got = draw(x, u, 0.7)
    assert list(got) == list(draw_exact(np.divide(x, 0.7, dtype=np.float64), u))
    assert got[0] == 4 and got[2] == 2


def test_sample_next_seeded_ids_are_the_exact_draws():
    """Through sample_next with one generator per row and with filters: the seeded ids of the exact sampler."""
    rng = np.random.default_rng(2)
    logits = (rng.standard_normal((16, 5713)) * 2).astype(np.float32)
    for kw in ({}, {"top_k": 40}, {"top_p": 0.9}, {"min_p": 0.05}):
        got = sample_next(logits, [np.random.default_rng(i) for i in range(16)], 0.8, **kw)
        u = np.array([np.random.default_rng(i).random() for i in range(16)])
        scaled = sample.filter_logits(np.divide(logits, 0.8, dtype=np.float64), kw.get("top_k"), kw.get("top_p"),
                                      kw.get("min_p")) if kw else np.divide(logits, 0.8, dtype=np.float64)
        assert np.array_equal(got, draw_exact(scaled, u)), kw
