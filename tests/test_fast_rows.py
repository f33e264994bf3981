"""The fast engine's few-row float32 products (zerollm.engine.fast.rows, issues #60, #61): 2-16 rows of x (one
against a weight read from memory) against the head's layout (x @ W.T, W (V, C)) and the linear layers' (x @ W, W (i, o)), within float32 rounding of BLAS;
what they were not written for answers NotImplemented (BLAS runs); a model's head and a decode step reach them
on the fast engine only; greedy tokens through the Scheduler equal the NumPy engine's at 2-5 rows. Tiny shapes.
"""

import numpy as np
import pytest

from tests.test_fast_decode import PROMPTS, STEPS
from tests.test_gguf import GPT2, LLAMA, tiny
from zerollm.engine import use_engine
from zerollm.engine.amp import autocast
from zerollm.engine.threads import limit_threads
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling
from zerollm.model.kvcache import KVCache
from zerollm.nn import linear as nn_linear

pytest.importorskip("numba")                               # the fast engine's one requirement
from zerollm.engine.fast import KERNELS, decode, rows      # noqa: E402
from zerollm.engine.fast import linear as fast_linear      # noqa: E402
from zerollm.engine.fast.blas import (blas_threads, own_threads, owns_threads, planned_splits, run_rows,  # noqa: E402
                                      thread_cap)


def close(got, ref):
    """Within float32 rounding, relative to the output's scale (the same products summed in another order)."""
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [2, 3, 5, 16])
def test_head_product_equals_blas(n, threads):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 23)).astype(np.float32)          # 23: no multiple of a vector
    w = rng.standard_normal((301, 23)).astype(np.float32)        # 301 rows: split over 2 threads unevenly
    with limit_threads(threads):
        got = rows.head_product(x, w)
    close(got, x @ w.T)
    assert got.shape == (n, 301) and KERNELS["head_product"] is rows.head_product


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [1, 3, 4, 6, 13])
@pytest.mark.parametrize("pairs", [False, True])
def test_each_head_kernel_equals_blas(pairs, n, threads):
    """One row of W at a time and two (an odd row count: the last row alone; 1-3 rows of x left over)."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 37)).astype(np.float32)
    w = rng.standard_normal((301, 37)).astype(np.float32)
    y = np.full((n, 301), np.nan, np.float32)
    run_rows(rows._HEAD, threads, 301, x, w, y, pairs, per_thread=64)
    close(y, x @ w.T)


def test_the_head_takes_two_rows_of_w_where_the_products_take_the_time():
    small = np.zeros((301, 23), np.float32)                       # stays in the cache: any number of rows
    large = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (rows.PAIRS_UP_TO_BYTES // 4 + 1, 1), (0, 4))
    assert rows.two_rows_of_w(2, small)
    assert not rows.two_rows_of_w(rows.PAIRS_FROM_ROWS - 1, large)                   # read from memory, few rows
    assert rows.two_rows_of_w(rows.PAIRS_FROM_ROWS, large)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_rows_product_equals_blas(n, threads, monkeypatch):
    monkeypatch.setattr(rows, "SPLIT_FROM_BYTES", 0)               # this small w split too, at 2 threads
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 23)).astype(np.float32)          # 23 = 5 x 4 + 3: the last rows of w one by one
    w = rng.standard_normal((23, rows.COLUMNS + 70)).astype(np.float32)   # two column blocks, the last short
    close(rows.rows_product(x, w, threads), x @ w)


def test_what_the_few_row_kernels_were_not_written_for_answers_not_implemented():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((40, 8)).astype(np.float32)
    for x in (np.ones((1, 8), np.float32),                       # one row, a small w: BLAS's matrix-vector product
              np.ones((rows.ROWS_UP_TO + 1, 8), np.float32),     # many rows: BLAS's sgemm
              np.ones((3, 8)),                                   # float64
              np.ones((3, 16), np.float32)[:, ::2],              # not contiguous
              np.ones((3, 7), np.float32)):                      # C does not match
        assert rows.head_product(x, w) is NotImplemented
    with autocast("bf16"):
        assert rows.head_product(np.ones((3, 8), np.float32), w) is NotImplemented
    up_to = rows.COLUMN_ROWS_UP_TO
    assert not rows.few_rows(np.ones((up_to + 1, 8), np.float32), w.T.copy(), up_to)
    assert rows.few_rows(np.ones((up_to, 8), np.float32), w.T.copy(), up_to)


@pytest.mark.parametrize("i", [23, 1024])
def test_one_row_goes_as_four_streams_equal_to_blas_on_any_number_of_threads(i):
    """One row of x against a w of at least ONE_ROW_FROM_BYTES: rows k, k + q, k + 2q, k + 3q of w at a time (23:
    the last 3 rows one by one), y's columns split between threads, so 1 and 2 threads give the same bits."""
    rng = np.random.default_rng(i)
    o = rows.ONE_ROW_FROM_BYTES // (4 * i) + 70                  # just past the size, columns split unevenly
    x = rng.standard_normal((1, i)).astype(np.float32)
    w = rng.standard_normal((i, o)).astype(np.float32)
    assert rows.column_rows(x, w, 1) and not rows.column_rows(x, w[:, :o // 2].copy(), 1)   # a small w: BLAS's
    assert not rows.column_rows(x, w, 2)                                          # 2 threads: BLAS's
    got = rows.rows_product(x, w, 1)
    close(got, x @ w)
    np.testing.assert_array_equal(rows.rows_product(x, w, 2), got)


def test_one_row_reaches_the_head_kernel_only_for_a_head_read_from_memory():
    rng = np.random.default_rng(3)
    V = rows.PAIRS_UP_TO_BYTES // (4 * 64) + 5                    # 64 columns, just past PAIRS_UP_TO_BYTES
    w = rng.standard_normal((V, 64)).astype(np.float32)
    x = rng.standard_normal((1, 64)).astype(np.float32)
    close(rows.head_product(x, w), x @ w.T)
    assert rows.head_product(x, w[: V // 2]) is NotImplemented   # in the cache: BLAS's matrix-vector product


def test_linear_forward_takes_the_few_row_kernels_with_the_bias_added(monkeypatch):
    calls = []
    monkeypatch.setattr(fast_linear, "rows_product", lambda x, w, t: calls.append("rows") or rows.rows_product(x, w, t))
    monkeypatch.setattr(fast_linear, "head_product", lambda x, w: calls.append("head") or rows.head_product(x, w))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 24)).astype(np.float32)
    w = rng.standard_normal((24, 40)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    for weight in (w, np.ascontiguousarray(w.T).T):              # (i, o), and the transpose of (o, i) (tied)
        y, _ = fast_linear.linear_forward(x, weight, b)
        close(y, x @ w + b)
    assert calls == ["rows", "head"]


def test_the_head_and_a_decode_step_reach_the_kernels_on_the_fast_engine_only(monkeypatch):
    calls = []
    head, product = rows.head_product, rows.rows_product
    monkeypatch.setitem(KERNELS, "head_product", lambda x, w: calls.append(("head", x.shape[0])) or head(x, w))
    monkeypatch.setattr(decode, "rows_product", lambda x, w, t: calls.append(("rows", x.shape[0])) or product(x, w, t))
    model = tiny(GPT2)

    def step(engine):
        cache = KVCache(model.config, 3, 16, per_row=True)
        with use_engine(engine):
            model.forward(PROMPTS, kv_cache=cache)               # the prompt: 15 rows through the head
            assert calls == ([("head", 15)] if engine == "fast" else [])
            calls.clear()
            return model.forward(np.array([[1], [2], [3]]), kv_cache=cache)[0]

    got = step("fast")
    assert ("head", 3) in calls and ("rows", 3) in calls
    calls.clear()
    ref = step("numpy")
    assert calls == []
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    assert nn_linear.head_product.reference(np.ones((2, 3), np.float32), np.eye(3, dtype=np.float32)).shape == (2, 3)


@pytest.mark.parametrize("layout", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_greedy_tokens_at_2_to_5_rows_equal_the_numpy_engine(layout):
    model = tiny(layout)
    prompts = np.concatenate([PROMPTS, PROMPTS[:2] + 1])         # 5 prompts
    for n in (2, 3, 5):
        with use_engine("numpy"):
            ref = greedy_rows(model, prompts[:n])
        with use_engine("fast"):
            assert greedy_rows(model, prompts[:n]) == ref, n


def greedy_rows(model, prompts):
    return [[int(t) for t in step] for step in generate(model, prompts, STEPS, Sampling(0.0))]


# ----------------------------------------------------------------------------
# the register-tile sgemm at 7-256 rows (rows.packless_product): on any x86-64 host (LLVM splits the 16-lane
# vectors where there is no AVX-512), so the tests set microkernel.USE and the size limits themselves

@pytest.fixture
def packless(monkeypatch):
    """microkernel.USE on, any weight size, one thread: every 7..256-row float32 product of the fast engine goes
    there, and every head product of 7..16 rows to the padded head."""
    from zerollm.engine.fast import microkernel
    monkeypatch.setattr(microkernel, "USE", True)
    monkeypatch.setattr(rows, "PACKLESS_FROM_BYTES", 0)
    monkeypatch.setattr(rows, "PACKLESS_SMALL_FROM_BYTES", 0)
    monkeypatch.setattr(rows, "PADDED_HEAD_FROM_ROWS", 7)
    calls = []
    product, head = rows.packless_product, rows._padded_head
    spy = (lambda x, w: calls.append(x.shape[0]) or product(x, w))
    monkeypatch.setattr(fast_linear, "packless_product", spy)
    monkeypatch.setattr(decode, "packless_product", spy)
    monkeypatch.setattr(rows, "_padded_head", lambda x, w: calls.append(("head", x.shape[0])) or head(x, w))
    with limit_threads(1):                                   # one thread only (rows.packless_rows says why)
        yield calls


@pytest.mark.parametrize("n, i, o", [(7, 37, 300), (13, 64, 129), (64, 23, 1000), (256, 5, 77)])
def test_packless_product_equals_blas(n, i, o):
    """Odd sizes: 6-row tiles and the 4/2/1-row ones, 64-column tiles and the 32/16/scalar rest."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, i)).astype(np.float32)
    w = rng.standard_normal((i, o)).astype(np.float32)
    close(rows.packless_product(x, w), x @ w)


def test_which_products_go_to_the_packless_sgemm(monkeypatch):
    from zerollm.engine.fast import microkernel
    monkeypatch.setattr(microkernel, "USE", True)
    big = np.zeros((128, rows.PACKLESS_FROM_BYTES // 512), np.float32)           # exactly PACKLESS_FROM_BYTES
    small = np.zeros((128, rows.PACKLESS_SMALL_FROM_BYTES // 512), np.float32)   # exactly PACKLESS_SMALL_FROM_BYTES
    rows_of = (lambda n, dtype=np.float32: np.zeros((n, 128), dtype))
    assert rows.packless_rows(rows_of(rows.PACKLESS_FROM_ROWS), big, 1)
    assert rows.packless_rows(rows_of(rows.PACKLESS_UP_TO_ROWS), big, 1)
    assert not rows.packless_rows(rows_of(rows.PACKLESS_FROM_ROWS), big, 2)       # numba's threads against BLAS's
    assert not rows.packless_rows(rows_of(rows.PACKLESS_FROM_ROWS - 1), big, 1)    # rows_product's
    assert not rows.packless_rows(rows_of(rows.PACKLESS_UP_TO_ROWS + 1), big, 1)   # BLAS is level there
    assert not rows.packless_rows(rows_of(rows.PACKLESS_FROM_ROWS), small, 1)      # in the cache: BLAS's, at few rows
    assert rows.packless_rows(rows_of(rows.PACKLESS_ANY_FROM_ROWS), small, 1)
    assert not rows.packless_rows(rows_of(rows.PACKLESS_ANY_FROM_ROWS), small[:, :-1], 1)
    assert not rows.packless_rows(rows_of(8, np.float64), big.astype(np.float64), 1)
    assert not rows.packless_rows(rows_of(8), np.asfortranarray(big), 1)
    assert not rows.packless_rows(np.zeros((8, 127), np.float32), big, 1)           # shapes that do not multiply
    with autocast("bf16"):
        assert not rows.packless_rows(rows_of(8), big, 1)
    monkeypatch.setattr(microkernel, "USE", False)                                 # no AVX-512, or switched off
    assert not rows.packless_rows(rows_of(8), big, 1)


def test_linear_forward_takes_the_packless_sgemm_with_and_without_bias(packless):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 24)).astype(np.float32)                       # 10 rows
    w = rng.standard_normal((24, 40)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    y, cache = fast_linear.linear_forward(x, w, b)
    close(y, x @ w + b)
    assert cache.has_bias and packless == [10]
    y, cache = fast_linear.linear_forward(x, w)
    close(y, x @ w)
    assert not cache.has_bias and packless == [10, 10]
    assert fast_linear.linear_forward(x[:, :1], w) is NotImplemented             # 2 rows, no bias: the reference
    assert fast_linear.linear_forward(x, np.ascontiguousarray(w.T).T) is NotImplemented   # (o, i).T, no bias


@pytest.mark.parametrize("layout", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_greedy_tokens_at_7_and_9_rows_through_the_packless_sgemm_equal_the_numpy_engine(packless, layout):
    model = tiny(layout)
    prompts = np.concatenate([PROMPTS, PROMPTS + 1, PROMPTS[:1] + 2, PROMPTS[:2] + 3])   # 9 prompts
    for n in (7, 9):
        with use_engine("numpy"):
            ref = greedy_rows(model, prompts[:n])
        packless.clear()
        with use_engine("fast"):
            assert greedy_rows(model, prompts[:n]) == ref, n
        assert n in packless and ("head", n) in packless                           # the decode steps' products


@pytest.mark.parametrize("n", [1, 7, 8, 13, 16])
def test_the_padded_head_equals_blas(packless, n):
    """x^T padded to 16 columns; 301 rows of W: 8-row tiles and a rest of 5."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 37)).astype(np.float32)
    w = rng.standard_normal((301, 37)).astype(np.float32)
    got = rows._padded_head(x, w)
    close(got, x @ w.T)
    assert got.shape == (n, 301) and got.flags.c_contiguous


def test_which_head_products_go_to_the_padded_sgemm(monkeypatch):
    from zerollm.engine.fast import microkernel
    monkeypatch.setattr(microkernel, "USE", True)
    cached = np.zeros((301, 23), np.float32)
    read = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (rows.PAIRS_UP_TO_BYTES // 4 + 1, 1), (0, 4))
    assert rows.padded_head(rows.PADDED_HEAD_FROM_ROWS, cached, 1) and rows.padded_head(rows.HEAD_LANES, cached, 1)
    assert not rows.padded_head(rows.PADDED_HEAD_FROM_ROWS, cached, 2)           # as packless_rows: one thread
    assert not rows.padded_head(rows.PADDED_HEAD_FROM_ROWS - 1, cached, 1)       # the head kernel's
    assert rows.padded_head(rows.PADDED_HEAD_READ_FROM_ROWS, read, 1)
    assert not rows.padded_head(rows.PADDED_HEAD_READ_FROM_ROWS - 1, read, 1)
    assert not rows.padded_head(rows.HEAD_LANES + 1, read, 1)                      # past one vector of x^T
    calls = []
    monkeypatch.setattr(rows, "_padded_head", lambda x, w: calls.append(x.shape[0]) or x @ w.T)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 23)).astype(np.float32)
    with limit_threads(1):
        for n in (rows.PADDED_HEAD_FROM_ROWS - 1, rows.PADDED_HEAD_FROM_ROWS):
            close(rows.head_product(x[:n], cached + 1), x[:n] @ (cached + 1).T)
    assert calls == [rows.PADDED_HEAD_FROM_ROWS]
    monkeypatch.setattr(microkernel, "USE", False)                                 # no AVX-512, or switched off
    assert not rows.padded_head(rows.HEAD_LANES, cached, 1)


def test_numba_s_threads_only_for_large_weights_and_never_beside_blas_s(monkeypatch):
    """At 2 threads: rows_product splits y's columns only for a w of SPLIT_FROM_BYTES or more; the head takes numba's
    threads only for a head read from memory at 2..COLUMN_ROWS_UP_TO rows, where a float32 model's large layers
    multiply on them too (rows_product). At 1 row and from 7 rows, where the layers' products go to BLAS, and for a
    head in the cache, one thread: numba's threads beside BLAS's took the cores from each other (a 16-row tang step
    7.6-7.9 -> 2.2-2.6 ms), and a short launch lost more than it saved. Every case still equals BLAS."""
    from zerollm.engine.fast import microkernel
    monkeypatch.setattr(microkernel, "USE", False)           # the head kernel at every row count (no padded sgemm)
    seen = []
    real = rows.run_rows
    monkeypatch.setattr(rows, "run_rows",
                        lambda pair, threads, *a, **k: seen.append(threads) or real(pair, threads, *a, **k))
    rng = np.random.default_rng(4)
    small = rng.standard_normal((301, 64)).astype(np.float32)
    big = rng.standard_normal((rows.PAIRS_UP_TO_BYTES // (4 * 64) + 5, 64)).astype(np.float32)   # read from memory
    with limit_threads(2):
        for n in (1, 2, rows.COLUMN_ROWS_UP_TO, rows.COLUMN_ROWS_UP_TO + 1, 16):
            x = rng.standard_normal((n, 64)).astype(np.float32)
            close(rows.head_product(x, big), x @ big.T)
        assert seen == [1, 2, 2, 1, 1]
        seen.clear()
        x = rng.standard_normal((3, 64)).astype(np.float32)
        close(rows.head_product(x, small), x @ small.T)
        close(rows.rows_product(x, small.T.copy(), 2), x @ small.T)                     # 77 KB: one thread
        wide = rng.standard_normal((64, rows.SPLIT_FROM_BYTES // (4 * 64))).astype(np.float32)
        close(rows.rows_product(x, wide, 2), x @ wide)                                   # 1 MiB: two
        assert seen == [1, 1, 2]


# ----------------------------------------------------------------------------
# the server's scheduler thread: BLAS on one thread, the kernels split what is large (blas.own_threads)

def test_own_threads_holds_blas_to_one_thread_while_the_kernels_keep_the_count():
    with limit_threads(2):
        assert blas_threads() == 2 and not owns_threads()
        with own_threads():
            assert (blas_threads(), thread_cap(), owns_threads()) == (1, 2, True)
            with own_threads():                              # nested: no change, and the outer block still holds
                assert (blas_threads(), thread_cap()) == (1, 2)
            assert (blas_threads(), thread_cap(), owns_threads()) == (1, 2, True)
        assert (blas_threads(), thread_cap(), owns_threads()) == (2, 2, False)
    with limit_threads(1), own_threads():                    # one thread: nothing to hold
        assert (blas_threads(), thread_cap(), owns_threads()) == (1, 1, False)


@pytest.mark.parametrize("own", [True, False], ids=["register-tile", "blas"])
@pytest.mark.parametrize("n", [7, 300])
def test_split_product_gives_the_same_numbers_as_one_thread(monkeypatch, n, own):
    """Inside own_threads a w of SPLIT_FROM_BYTES or more goes to split_product at 2 threads from 7 rows, past
    PACKLESS_UP_TO_ROWS too: y's columns in two parts of whole 64-column tiles, each by the register-tile sgemm (the
    same sums as on one thread, bit for bit) or, without AVX-512, by BLAS's sgemm. Outside own_threads, BLAS keeps
    the product."""
    from zerollm.engine.fast import microkernel
    monkeypatch.setattr(microkernel, "USE", own)
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 128)).astype(np.float32)
    w = rng.standard_normal((128, rows.SPLIT_FROM_BYTES // 512 + 37)).astype(np.float32)   # 1 MiB + 37 columns
    with limit_threads(2):
        assert not rows.split_rows(x, w, 2)
        with own_threads():
            assert rows.split_rows(x, w, thread_cap())
            before = planned_splits()
            two = rows.split_product(x, w, thread_cap())
            assert planned_splits() == before + 1                # two parts, on two threads
            one = rows.split_product(x, w, 1)
    if own:
        np.testing.assert_array_equal(two, rows.packless_product(x, w))
    close(two, one)
    close(two, x @ w)


def test_inside_own_threads_a_small_weight_stays_on_one_thread(monkeypatch):
    from zerollm.engine.fast import microkernel
    monkeypatch.setattr(microkernel, "USE", True)
    big = np.zeros((128, rows.PACKLESS_FROM_BYTES // 512), np.float32)           # 512 KB: under SPLIT_FROM_BYTES
    wide = np.zeros((128, rows.SPLIT_FROM_BYTES // 512), np.float32)
    rows_of = (lambda n: np.ones((n, 128), np.float32))
    with limit_threads(2), own_threads():
        assert rows.packless_rows(rows_of(rows.PACKLESS_FROM_ROWS), big, 2)          # one thread: BLAS's is one too
        assert not rows.split_rows(rows_of(rows.PACKLESS_FROM_ROWS), big, 2)
        assert not rows.packless_rows(rows_of(rows.PACKLESS_UP_TO_ROWS + 1), big, 2)
        assert rows.split_rows(rows_of(rows.PACKLESS_UP_TO_ROWS + 1), wide, 2)
        assert not rows.split_rows(rows_of(rows.PACKLESS_FROM_ROWS - 1), wide, 2)     # rows_product's
        assert rows.column_rows(rows_of(1), wide, 2)              # one row: four streams (on one thread)
    with limit_threads(2):
        assert not rows.packless_rows(rows_of(rows.PACKLESS_FROM_ROWS), big, 2)      # beside BLAS's two threads
        assert not rows.column_rows(rows_of(1), wide, 2)
    monkeypatch.setattr(microkernel, "USE", False)
    with limit_threads(2), own_threads():
        assert not rows.packless_rows(rows_of(rows.PACKLESS_FROM_ROWS), big, 2)
        assert rows.split_rows(rows_of(rows.PACKLESS_FROM_ROWS), wide, 2)             # by BLAS's sgemm, in parts


@pytest.mark.parametrize("avx512", [True, False])
def test_the_scheduler_thread_runs_blas_on_one_thread_on_the_fast_engine(monkeypatch, avx512):
    """Scheduler.run (the server's thread) steps inside serving_threads: on the fast engine, BLAS on that thread
    only and the kernels' count kept, with or without the register-tile sgemm; on the NumPy engine BLAS keeps its
    threads. The tokens are the NumPy engine's."""
    import threading
    from zerollm.engine.fast import microkernel
    from zerollm.generation import batching
    monkeypatch.setattr(microkernel, "USE", avx512)
    model = tiny(LLAMA)
    seen = []
    step = batching.Scheduler._step
    monkeypatch.setattr(batching.Scheduler, "_step", lambda s: seen.append((blas_threads(), thread_cap())) or step(s))

    def served(engine):
        got = []
        with use_engine(engine), limit_threads(2):
            s = batching.Scheduler(model, max_batch=4)
            stop = threading.Event()
            thread = threading.Thread(target=s.run, args=(stop,))
            thread.start()
            for i, prompt in enumerate(PROMPTS[:3]):
                s.submit(batching.Request(list(prompt), STEPS, Sampling(0.0), np.random.default_rng(i),
                                          emit=got.append))
            while s.busy or len(got) < 3 * STEPS:
                thread.join(0.01)
            stop.set()
            thread.join()
            assert blas_threads() == 2                           # given back when the thread ends
        return [ev.id for ev in got if hasattr(ev, "id")]

    fast = served("fast")
    assert set(seen) == {(1, 2)}
    seen.clear()
    assert served("numpy") == fast and set(seen) == {(2, 2)}
