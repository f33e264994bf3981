"""The fast engine's pass of the sampler (zerollm.engine.fast.sampler.block_masses): within float32 rounding of
the reference's block masses, and through sample.draw the very ids draw_exact gives (every boundary test of
tests/test_sample_draw.py, run again on the fast engine); what it was not written for answers NotImplemented."""

import numpy as np
import pytest

from tests import test_sample_draw as boundaries
from zerollm.engine import use_engine
from zerollm.generation import sample

pytest.importorskip("numba")
from zerollm.engine.fast import KERNELS, sampler      # noqa: E402


@pytest.mark.parametrize("V", [1, 7, 8, 5713])
@pytest.mark.parametrize("T", [1.0, 0.8, 1e-4])
def test_block_masses_equal_the_reference(V, T):
    rng = np.random.default_rng(V)
    x = (rng.standard_normal((3, V)) * 4).astype(np.float32)
    x[1, :: 3] = -np.inf                                        # masked ids
    m = x.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0                                      # as draw gives it: an all -inf row (V = 1)
    got, ref = sampler.block_masses(x, m, T), sample.block_masses.reference(x, m, T)
    assert got.shape == ref.shape == (3, -(-V // 8)) and got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    assert np.all(np.diff(got, axis=-1) >= 0)                  # cumulative
    assert KERNELS["block_masses"] is sampler.block_masses and sampler.BLOCK == sample.BLOCK


def test_what_the_kernel_was_not_written_for_answers_not_implemented():
    x = np.zeros((2, 9), np.float32)
    m = np.zeros((2, 1), np.float32)
    assert sampler.block_masses(x.astype(np.float64), m, 1.0) is NotImplemented
    assert sampler.block_masses(x, m.astype(np.float64), 1.0) is NotImplemented
    assert sampler.block_masses(np.zeros((2, 18), np.float32)[:, ::2], m, 1.0) is NotImplemented


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_on_the_fast_engine_draw_gives_draw_exacts_ids_at_every_boundary(dtype):
    with use_engine("fast"):
        boundaries.test_draw_gives_draw_exacts_ids_at_and_near_every_boundary(dtype)
        boundaries.test_draw_edge_rows()
        boundaries.test_sample_next_seeded_ids_are_the_exact_draws()


def test_on_the_fast_engine_the_redraw_is_still_needed(monkeypatch):
    with use_engine("fast"):
        boundaries.test_draw_without_its_exact_redraw_would_differ(monkeypatch)
