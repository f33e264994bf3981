"""zerollm.nn.self_attention: the seed's golden numbers, and properties that must hold for any input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from zerollm.nn.self_attention import causal_mask, scaled_dot_product_attention, self_attention, softmax
from zerollm.io.errors import ZeroLLMError
from zerollm.teach.attention_walkthrough import SEED_WK, SEED_WQ, SEED_WV, SEED_X

# ----------------------------------------------------------------------------
# golden values of the seed example, exact in real arithmetic (float64 inputs from the literals)

GOLD_Q = [[0.01, 0.07], [0.11, 0.05], [-0.01, 0.01]]
GOLD_K = [[0.07, 0.07], [0.11, 0.05], [0.00, 0.01]]
GOLD_V = [[0.05, 0.07], [0.07, 0.05], [-0.01, 0.03]]
# q_i . k_j by hand, in units of 1e-4 (e.g. q1.k1 = 0.11*0.11 + 0.05*0.05 = 0.0146), then / sqrt(2)
GOLD_SCORES = np.array([[56, 46, 7], [112, 146, 5], [0, -6, 1]]) * 1e-4 / np.sqrt(2)
GOLD_WEIGHTS = [[1.0, 0.0, 0.0],
                [0.499398959525, 0.500601040475, 0.0],
                [0.333372611395, 0.333231203374, 0.333396185232]]
GOLD_OUT = [[0.05, 0.07],
            [0.060012020809, 0.059987979191],
            [0.036660852954, 0.049999528523]]
GOLD_WEIGHTS_BIDIR = [[0.333796830761, 0.333560884188, 0.332642285052],
                      [0.333904358395, 0.334708084676, 0.331387556929],
                      [0.333372611395, 0.333231203374, 0.333396185232]]

# what the seed printed (4 decimals)
SEED_PRINTED = {
    "q": [[0.01, 0.07], [0.11, 0.05], [-0.01, 0.01]],
    "k": [[0.07, 0.07], [0.11, 0.05], [0.0, 0.01]],
    "v": [[0.05, 0.07], [0.07, 0.05], [-0.01, 0.03]],
    "weights": [[1.0, 0.0, 0.0], [0.4994, 0.5006, 0.0], [0.3334, 0.3332, 0.3334]],
    "out": [[0.05, 0.07], [0.06, 0.06], [0.0367, 0.05]],
}
SEED_PRINTED_MASKED_ROWS = {(0, 0): 3.9598e-03, (1, 0): 7.9196e-03, (1, 1): 1.0324e-02,
                            (2, 1): -4.2426e-04, (2, 2): 7.0711e-05}


def seed_example(dtype):
    return [np.array(a, dtype=dtype) for a in (SEED_X, SEED_WQ, SEED_WK, SEED_WV)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_seed_intermediates_match_golden_values(dtype):
    r = self_attention(*seed_example(dtype))
    assert r.scale == pytest.approx(1 / np.sqrt(2), abs=1e-15)
    for name, gold in [("q", GOLD_Q), ("k", GOLD_K), ("v", GOLD_V), ("scores", GOLD_SCORES),
                       ("weights", GOLD_WEIGHTS), ("out", GOLD_OUT)]:
        got = getattr(r, name)
        assert got.dtype == dtype, name
        assert got.shape[0] == 1, name          # the batch dim is kept
        np.testing.assert_allclose(got[0], gold, rtol=0, atol=1e-6, err_msg=name)
    np.testing.assert_array_equal(r.mask[0], [[False, True, True], [False, False, True], [False] * 3])
    assert np.all(np.isneginf(r.masked_scores[0][r.mask[0]]))


def test_seed_matches_what_the_course_printed():
    r = self_attention(*seed_example(np.float32))
    for name, printed in SEED_PRINTED.items():
        np.testing.assert_array_equal(np.round(getattr(r, name)[0].astype(np.float64), 4), printed, err_msg=name)
    for (i, j), printed in SEED_PRINTED_MASKED_ROWS.items():
        # the seed printed these in %.4e
        assert float(f"{r.masked_scores[0, i, j]:.4e}") == printed


def test_seed_bidirectional_golden():
    r = self_attention(*seed_example(np.float64), causal=False)
    np.testing.assert_allclose(r.weights[0], GOLD_WEIGHTS_BIDIR, atol=1e-11)
    assert not r.mask.any()


# ----------------------------------------------------------------------------
# softmax and causal_mask

def test_softmax_large_logits_do_not_overflow():
    x = np.array([1e4, 1e4 - 1.0, -1e4], dtype=np.float32)
    y = softmax(x)
    assert y.dtype == np.float32 and np.all(np.isfinite(y))
    np.testing.assert_allclose(y, [1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1)), 0], rtol=1e-6)


def test_softmax_axis_and_all_masked_slice():
    x = np.array([[0.0, -np.inf], [-np.inf, -np.inf]])
    np.testing.assert_array_equal(softmax(x, axis=-1), [[1.0, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(softmax(np.array([[1.0, 2.0], [3.0, 4.0]]), axis=0).sum(axis=0), [1, 1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_unshifted_is_softmax_for_every_kind_of_row(dtype):
    from zerollm.nn.self_attention import UNSHIFTED_MAX, softmax_unshifted
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 6, 9)) * 3).astype(dtype)
    x[1, 2] -= 300                      # every exp of this row underflows without a shift: redone
    x[1, 4, :4] = UNSHIFTED_MAX         # the largest score that takes no shift
    x[2, 3] = -np.inf                   # a row with every key hidden
    x[3] = -np.inf                      # a matrix with every key hidden
    x[4, 0, 1:] = -np.inf               # a row that sees one key
    want = softmax(x.astype(np.float64))
    got = softmax_unshifted(x.copy(), np.empty_like(x))
    assert got.dtype == dtype and not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == np.float32 else 1e-13, atol=1e-30)
    assert got[1, 2].sum() == pytest.approx(1.0) and not got[2, 3].any() and not got[3].any()
    assert got[4, 0, 0] == 1.0
    # each row depends on its own scores alone: fewer rows or heads give the same bits
    np.testing.assert_array_equal(softmax_unshifted(x[:, :3].copy(), np.empty_like(x[:, :3])), got[:, :3])
    np.testing.assert_array_equal(softmax_unshifted(x[:2].copy(), np.empty_like(x[:2])), got[:2])


def test_softmax_unshifted_takes_the_row_shift_above_its_limit_and_keeps_nan_in_its_row():
    from zerollm.nn.self_attention import UNSHIFTED_MAX, softmax_unshifted
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4, 7)).astype(np.float32)
    x[0, 1, 2] = 1000.0                 # exp(1000) overflows: the block is shifted row by row
    got = softmax_unshifted(x.copy(), np.empty_like(x))
    np.testing.assert_array_equal(got, softmax(x.copy()))
    assert got[0, 1, 2] == 1.0 and np.isfinite(got).all()
    x[0, 1, 2] = np.nan
    got = softmax_unshifted(x.copy(), np.empty_like(x))
    assert np.isnan(got[0, 1]).all() and np.isfinite(np.delete(got.reshape(12, 7), 1, axis=0)).all()
    assert UNSHIFTED_MAX < np.log(np.finfo(np.float32).max) - np.log(2.0 ** 20)   # a million keys cannot overflow
    half = (x * 8).astype(np.float16)   # scores up to ~30: exp overflows float16 without the row shift
    half[0, 1, 2] = 20
    got = softmax_unshifted(half.copy(), np.empty_like(half))
    assert got.dtype == np.float16 and np.isfinite(got).all() and got[0, 1, 2] > 0.99


def test_causal_mask_shape_and_offset():
    np.testing.assert_array_equal(causal_mask(3), np.triu(np.ones((3, 3), bool), k=1))
    # two new queries against five cached keys: they are positions 3 and 4
    np.testing.assert_array_equal(causal_mask(2, 5), [[0, 0, 0, 0, 1], [0, 0, 0, 0, 0]])
    with pytest.raises(ZeroLLMError):
        causal_mask(0)


# ----------------------------------------------------------------------------
# properties

finite = st.floats(-10, 10, allow_nan=False, width=32)


@st.composite
def qkv(draw, dtype=np.float64):
    B, T, hs = draw(st.integers(1, 3)), draw(st.integers(1, 7)), draw(st.integers(1, 5))
    make = lambda: draw(arrays(dtype, (B, T, hs), elements=finite))
    return make(), make(), make()


@settings(max_examples=60, deadline=None)
@given(qkv(), st.booleans())
def test_weight_rows_sum_to_one(tensors, causal):
    _, w = scaled_dot_product_attention(*tensors, causal=causal)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)
    assert np.all(w >= 0)


@settings(max_examples=60, deadline=None)
@given(qkv())
def test_causal_weights_above_diagonal_are_exactly_zero(tensors):
    _, w = scaled_dot_product_attention(*tensors, causal=True)
    T = w.shape[-1]
    assert np.all(w[..., np.triu_indices(T, k=1)[0], np.triu_indices(T, k=1)[1]] == 0.0)


@settings(max_examples=60, deadline=None)
@given(qkv(), st.randoms(use_true_random=False))
def test_bidirectional_is_permutation_equivariant(tensors, rnd):
    q, k, v = tensors
    T = q.shape[1]
    perm = np.array(rnd.sample(range(T), T))
    out, _ = scaled_dot_product_attention(q, k, v, causal=False)
    # permuting the tokens permutes the outputs the same way
    out_p, _ = scaled_dot_product_attention(q[:, perm], k[:, perm], v[:, perm], causal=False)
    np.testing.assert_allclose(out_p, out[:, perm], atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(qkv(np.float32), st.booleans())
def test_float32_stays_float32(tensors, causal):
    out, w = scaled_dot_product_attention(*tensors, causal=causal)
    assert out.dtype == np.float32 and w.dtype == np.float32
    x = tensors[0]
    r = self_attention(x, np.eye(x.shape[-1], dtype=np.float32), np.eye(x.shape[-1], dtype=np.float32),
                       np.eye(x.shape[-1], dtype=np.float32), causal=causal)
    for name in ("q", "scores", "masked_scores", "weights", "out"):
        assert getattr(r, name).dtype == np.float32, name


@settings(max_examples=60, deadline=None)
@given(qkv(), st.booleans())
def test_fully_masked_rows_give_zero_not_nan(tensors, causal):
    q, k, v = tensors
    B, T, _ = q.shape
    mask = np.zeros((B, T, T), dtype=bool)
    mask[:, 0, :] = True                      # query 0 may see nothing at all
    out, w = scaled_dot_product_attention(q, k, v, causal=causal, mask=mask)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
    assert np.all(w[:, 0] == 0) and np.all(out[:, 0] == 0)


@settings(max_examples=60, deadline=None)
@given(qkv(), st.integers(1, 4), st.booleans())
def test_padding_mask_equals_slicing_the_keys_away(tensors, n_pad, causal):
    q, k, v = tensors
    B, T, hs = k.shape
    rng = np.random.default_rng(T)
    # append n_pad garbage keys/values at the end and hide them with a padding mask
    k_pad = np.concatenate([k, rng.normal(size=(B, n_pad, hs)) * 100], axis=1)
    v_pad = np.concatenate([v, rng.normal(size=(B, n_pad, hs)) * 100], axis=1)
    pad = np.zeros((B, 1, T + n_pad), dtype=bool)
    pad[..., T:] = True
    ref, _ = scaled_dot_product_attention(q, k, v, causal=False)
    got, w = scaled_dot_product_attention(q, k_pad, v_pad, causal=False, mask=pad)
    np.testing.assert_allclose(got, ref, atol=1e-10)
    assert np.all(w[..., T:] == 0)


def test_leading_dims_batch_and_heads():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 3, 5, 4)) for _ in range(3))   # (B, nh, T, hs)
    out, w = scaled_dot_product_attention(q, k, v)
    for b in range(2):
        for h in range(3):
            o1, w1 = scaled_dot_product_attention(q[b, h], k[b, h], v[b, h])
            np.testing.assert_allclose(out[b, h], o1, atol=1e-12)
            np.testing.assert_allclose(w[b, h], w1, atol=1e-12)


def test_custom_scale_and_value_width():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 6))
    out, w = scaled_dot_product_attention(q, k, v, causal=False, scale=0.25)
    s = q @ k.T * 0.25
    ref = np.exp(s - s.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    np.testing.assert_allclose(w, ref, atol=1e-12)
    assert out.shape == (4, 6)


@pytest.mark.parametrize("shapes, fragment", [
    (((3, 2), (3, 4), (3, 4)), "same last dim"),
    (((3, 2), (3, 2), (4, 2)), "one row per key"),
    (((3,), (3, 2), (3, 2)), "at least 2-D"),
    (((2, 3, 2), (3, 3, 2), (3, 3, 2)), "do not broadcast"),
])
def test_bad_shapes_raise_clear_errors(shapes, fragment):
    q, k, v = (np.zeros(s) for s in shapes)
    with pytest.raises(ZeroLLMError, match=fragment):
        scaled_dot_product_attention(q, k, v)


def test_bad_masks_and_projections():
    x = np.zeros((1, 3, 4))
    with pytest.raises(ZeroLLMError, match="boolean"):
        scaled_dot_product_attention(x, x, x, mask=np.zeros((3, 3)))
    with pytest.raises(ZeroLLMError, match="does not broadcast"):
        scaled_dot_product_attention(x, x, x, mask=np.zeros((2, 2), bool))
    with pytest.raises(ZeroLLMError, match="wq has 3 rows"):
        self_attention(x, np.zeros((3, 2)), np.zeros((4, 2)), np.zeros((4, 2)))
    with pytest.raises(ZeroLLMError, match="same number of columns"):
        self_attention(x, np.zeros((4, 2)), np.zeros((4, 3)), np.zeros((4, 2)))
