"""The fast engine's sampler shortcut (zerollm.engine.fast.sampler.draw_shortcut): the ids it is sure of are
draw_exact's, as the reference's are, and through sample.draw the very ids draw_exact gives (every boundary
test of tests/test_sample_draw.py, run again on the fast engine); what it was not written for answers
NotImplemented."""

import numpy as np
import pytest

from tests import test_sample_draw as boundaries
from zerollm.engine import use_engine
from zerollm.generation import sample

pytest.importorskip("numba")
from zerollm.engine.fast import KERNELS, sampler      # noqa: E402


@pytest.mark.parametrize("V", [1, 7, 8, 5713])
@pytest.mark.parametrize("T", [1.0, 0.8, 1e-4])
def test_the_shortcut_finds_the_references_ids_and_is_sure_where_it_is(V, T):
    """Each id the kernel is sure of is the reference shortcut's and draw_exact's; where the reference is sure
    the kernel is too, but for rows a hair from the margin (exp32 and NumPy's exp differ by an ulp or two)."""
    rng = np.random.default_rng(V)
    x = (rng.standard_normal((64, V)) * 4).astype(np.float32)
    x[1::2, ::3] = -np.inf                                      # masked ids; V = 1: an all -inf row
    u = rng.random(64)
    u[:4] = [0.0, np.nextafter(1.0, 0.0), 0.5, 1e-300]
    ids, sure = sampler.draw_shortcut(x, u, T)
    ref_ids, ref_sure = sample.draw_shortcut.reference(x, u, T)
    exact = sample.draw_exact(np.divide(x, T, dtype=np.float64), u)
    assert ids.dtype == np.int64 and sure.dtype == np.bool_ and ids.shape == sure.shape == (64,)
    assert np.array_equal(ids[sure], exact[sure]) and np.array_equal(ref_ids[ref_sure], exact[ref_sure])
    assert np.array_equal(ids[sure & ref_sure], ref_ids[sure & ref_sure])
    assert (sure != ref_sure).sum() <= 1 and (sure.sum() > 32 or V == 1)
    assert KERNELS["draw_shortcut"] is sampler.draw_shortcut and sampler.BLOCK == sample.BLOCK


def test_what_the_kernel_was_not_written_for_answers_not_implemented():
    x = np.zeros((2, 9), np.float32)
    u = np.full(2, 0.5)
    assert sampler.draw_shortcut(x.astype(np.float64), u, 1.0) is NotImplemented
    assert sampler.draw_shortcut(x, u.astype(np.float32), 1.0) is NotImplemented
    assert sampler.draw_shortcut(np.zeros((2, 18), np.float32)[:, ::2], u, 1.0) is NotImplemented


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_on_the_fast_engine_draw_gives_draw_exacts_ids_at_every_boundary(dtype):
    with use_engine("fast"):
        boundaries.test_draw_gives_draw_exacts_ids_at_and_near_every_boundary(dtype)
        boundaries.test_draw_edge_rows()
        boundaries.test_sample_next_seeded_ids_are_the_exact_draws()


def test_the_kernels_unsure_rows_are_the_ones_it_could_get_wrong():
    """At a hair from the cumulative boundaries of a flat row the kernel says it is not sure, and some of those
    ids differ from draw_exact's: sample.draw's redraw of them is what makes the ids the same."""
    rng = np.random.default_rng(1)
    x = boundaries._rows(rng, 16, 5713, 0.05, np.float32)
    scaled = np.divide(x, 0.8, dtype=np.float64)
    cdf = np.cumsum(boundaries.softmax(scaled.copy()), axis=-1)
    unsure = differ = 0
    for off in (1e-15, -1e-15, 1e-9, -1e-9, 2e-7, -2e-7):
        u = cdf[np.arange(16), rng.integers(0, 5713, 16)] + off
        ids, sure = sampler.draw_shortcut(x, u, 0.8)
        exact = sample.draw_exact(scaled, u)
        assert np.array_equal(ids[sure], exact[sure])
        unsure += int((~sure).sum())
        differ += int((ids[~sure] != exact[~sure]).sum())
    assert unsure > 0 and differ > 0
