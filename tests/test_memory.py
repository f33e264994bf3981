"""zerollm.engine.memory: the malloc setting is applied once, and it changes no result."""

import numpy as np

from zerollm.engine.memory import keep_freed_memory
from zerollm.model.gpt import GPT, GPTConfig


def test_keep_freed_memory_is_idempotent_and_harmless():
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
    idx = np.arange(8)[None] % 11
    before = model.forward(idx)[0]
    first = keep_freed_memory()
    assert keep_freed_memory() == first            # a second call is a no-op with the same answer
    assert first is True                           # this project runs on glibc (Linux CI)
    np.testing.assert_array_equal(model.forward(idx)[0], before)


# ----------------------------------------------------------------------------
# elementwise chains in cache-sized blocks: the same numbers as on the whole array

def test_cache_blocks_cover_every_index_once():
    from zerollm.engine.memory import cache_blocks
    for n, unit, budget in ((0, 4, 16), (1, 4, 16), (10, 4, 16), (10, 4, 1), (10, 4, 10 ** 9)):
        parts = cache_blocks(n, unit, budget)
        assert [i for p in parts for i in range(p.start, p.stop)] == list(range(n))
        assert all(p.stop - p.start >= 1 for p in parts)
        assert all(p.stop - p.start == max(1, budget // unit) for p in parts[:-1])


def _blocked_and_whole(monkeypatch, fn):
    """fn() with blocks of 64 bytes (many blocks, a ragged last one) and with one block for everything."""
    from zerollm.engine import memory, use_engine
    with use_engine("numpy"):
        monkeypatch.setattr(memory, "CACHE_BLOCK", 64)
        small = fn()
        monkeypatch.setattr(memory, "CACHE_BLOCK", 1 << 40)
        whole = fn()
    return small, whole


def test_gelu_and_masked_softmax_in_blocks_are_bit_identical_to_one_pass(monkeypatch):
    from zerollm.nn import activation, attention
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal((3, 7, 37)) * 4).astype(dtype)
        dy = rng.standard_normal((3, 7, 37)).astype(dtype)
        att = rng.standard_normal((2, 3, 1, 9, 11)).astype(dtype)
        datt = rng.standard_normal((2, 3, 1, 9, 11)).astype(dtype)

        def run():
            y, cache = activation.gelu_tanh_forward(x[:, ::2])        # a strided view: copied, then blocked
            dx = activation.gelu_tanh_backward(dy[:, ::2], cache)
            a = attention.masked_softmax(att.copy(), causal=True)
            da = attention.masked_softmax_backward(datt.copy(), a)
            return y, dx, a, da
        small, whole = _blocked_and_whole(monkeypatch, run)
        for s, w in zip(small, whole):
            assert s.dtype == dtype and s.shape == w.shape
            np.testing.assert_array_equal(s, w)
        y, dx, a, da = whole                                          # and the numbers are the maths
        xs = x[:, ::2].astype(np.float64)
        gelu = 0.5 * xs * (1 + np.tanh(np.sqrt(2 / np.pi) * (xs + 0.044715 * xs ** 3)))
        np.testing.assert_allclose(y, gelu, rtol=1e-5, atol=1e-6)
        assert np.all(np.triu(a[..., :9], 3) == 0)                    # Tk - T = 2: keys after i + 2 hidden
        np.testing.assert_allclose(a.sum(-1), 1, rtol=1e-6)


def test_adamw_in_blocks_is_bit_identical_to_one_pass(monkeypatch):
    from zerollm.training.optim import AdamWStep, adamw_update
    rng = np.random.default_rng(1)
    start = [rng.standard_normal((5, 13)).astype(np.float32) for _ in range(4)]      # p, g, m, v
    start[3] = np.abs(start[3])

    def run():
        p, g, m, v = (a.copy() for a in start)
        for step in (1, 2):
            adamw_update(p, g, m, v, np.empty_like(p), AdamWStep(
                lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, step_size=1e-2 / (1 - 0.9 ** step),
                bc2_sqrt=(1 - 0.95 ** step) ** 0.5))
        return p, m, v
    small, whole = _blocked_and_whole(monkeypatch, run)
    for s, w, before in zip(small, whole, (start[0], start[2], start[3])):
        np.testing.assert_array_equal(s, w)
        assert not np.array_equal(w, before)                        # the update did change every array


# ----------------------------------------------------------------------------
# arrays placed apart in the 4 KiB page (4K aliasing)

def _page_offset(a):
    return a.__array_interface__["data"][0] % 4096


def _distance(a, b):
    d = abs(_page_offset(a) - _page_offset(b))
    return min(d, 4096 - d)


def test_empty_apart_places_each_new_array_far_from_the_others_in_the_page():
    from zerollm.engine.memory import APART_MIN_BYTES, empty_apart
    shape = (512, APART_MIN_BYTES // 512)                          # float32: 4x the threshold
    for dtype in (np.float32, np.float64):
        x = np.empty(shape, dtype)
        y = empty_apart(shape, x, dtype=dtype)
        s = empty_apart(shape, x, y, dtype=dtype)
        d = empty_apart(shape, x, y, s, dtype=dtype)
        assert _distance(x, y) >= 2048 - 64                          # the far side of the page (on a line)
        assert min(_distance(x, s), _distance(y, s)) >= 1024 - 64
        assert min(_distance(a, d) for a in (x, y, s)) >= 512 - 64
        for a in (y, s, d):
            assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
            assert _page_offset(a) % 64 == 0                          # on a cache line
        y[...], s[...], d[...] = 1, 2, 3                              # three separate blocks of memory
        assert (y == 1).all() and (s == 2).all() and (d == 3).all()


def test_empty_apart_picks_the_line_farthest_from_the_others():
    """_farthest_line (the middle of each gap) gives what trying every cache line of the page gives: the
    line whose distance to the nearest taken offset, around the page, is largest; the first on a tie."""
    from zerollm.engine.memory import LINE, PAGE, _farthest_line
    rng = np.random.default_rng(5)
    lines = np.arange(0, PAGE, LINE)
    cases = [[], [0], [4080], [0, 2048], [16, 16, 16], [0, 1024, 2048, 3072]]
    cases += [list(rng.integers(0, PAGE // 16, k) * 16) for k in (1, 2, 3, 4) for _ in range(300)]
    for taken in cases:
        if taken:
            gap = np.abs(lines[:, None] - np.array(taken)[None, :])
            want = int(lines[np.argmax(np.minimum(gap, PAGE - gap).min(axis=1))])
        else:
            want = 0
        assert _farthest_line([int(t) for t in taken]) == want, taken


def test_empty_apart_leaves_small_arrays_to_numpy():
    from zerollm.engine.memory import empty_apart
    a = empty_apart((3, 5), np.empty((3, 5), np.float32))
    assert a.shape == (3, 5) and a.dtype == np.float32 and a.base is None
    assert empty_apart((0, 7)).shape == (0, 7)


def test_fast_gelu_and_norm_outputs_are_apart_from_their_inputs():
    """The kernels whose loops stream same-size arrays (engine/fast/activation.py, norm.py) allocate
    their outputs apart from their inputs, whatever offset the input has."""
    from zerollm.engine.fast import activation, norm
    from zerollm.engine.memory import APART_MIN_BYTES
    n = 4 * APART_MIN_BYTES // 4
    block = np.empty(n + 4096, np.float32)
    for shift in (0, 4, 16, 500):                                    # input offsets in the page, in floats
        start = (-_page_offset(block) // 4 + shift) % 1024
        x = block[start:start + n].reshape(-1, 256)
        x[...] = np.linspace(-3, 3, n, dtype=np.float32).reshape(x.shape)
        y, (xc, s) = activation.gelu_tanh_forward(x)                  # keeps x only (s is recomputed)
        assert xc is x and s is None and _distance(x, y) >= 2048 - 64
        dx = activation.gelu_tanh_backward(y, (x, s))
        assert min(_distance(dx, x), _distance(dx, y)) >= 1024 - 64
        y, (_, s) = activation.silu_forward(x)                          # output and cache
        assert min(_distance(x, y), _distance(x, s), _distance(y, s)) >= 1024 - 64
        dx = activation.silu_backward(y, (x, s))
        assert min(_distance(dx, a) for a in (x, s, y)) >= 512 - 64
        out, cache = norm.layernorm_forward(x, np.ones(256, np.float32), np.zeros(256, np.float32))
        assert min(_distance(x, out), _distance(x, cache.xhat), _distance(out, cache.xhat)) >= 1024 - 64


# ----------------------------------------------------------------------------
# the weights a decode step streams, side by side on 2 MiB pages

def _thp_setting():
    """The bracketed word of /sys/kernel/mm/transparent_hugepage/enabled (always, madvise, never), or None."""
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return None
    return text[text.index("[") + 1:text.index("]")]


def _huge_kib_at(address):
    """AnonHugePages (KiB) of the mapping of this process that holds ``address`` (/proc/self/smaps)."""
    inside, huge = False, None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and head == "AnonHugePages:":
                huge = int(line.split()[1])
    return huge


class _Holder:
    pass


def test_move_into_huge_pages_puts_equal_copies_side_by_side_in_place():
    from zerollm.engine.memory import HUGE_PAGE, move_into_huge_pages
    rng = np.random.default_rng(0)
    holders = [_Holder() for _ in range(3)]
    holders[0].codes = rng.integers(-127, 128, (1000, 1500), dtype=np.int8)      # 1.5 MB
    holders[0].scales = rng.standard_normal((1000, 47)).astype(np.float32)      # not a multiple of 64 bytes
    holders[1].blocks = rng.integers(0, 256, (300, 3, 144), dtype=np.uint8)
    holders[2].codes = rng.integers(0, 256, (700, 1024), dtype=np.uint8)
    holders[2].scales = None                                                    # no array: left alone
    slots = [(h, a) for h in holders for a in ("codes", "scales", "blocks")]
    before = {(id(h), a): getattr(h, a).copy() for h, a in slots if isinstance(getattr(h, a, None), np.ndarray)}
    old = {(id(h), a): getattr(h, a) for h, a in slots if isinstance(getattr(h, a, None), np.ndarray)}
    moved = move_into_huge_pages(slots)
    sizes = [(v.nbytes + 63) // 64 * 64 for v in before.values()]
    assert moved == sum(sizes) >= HUGE_PAGE and holders[2].scales is None and not hasattr(holders[2], "blocks")
    starts = []
    for (h, a) in [(h, a) for h, a in slots if (id(h), a) in before]:
        got = getattr(h, a)
        assert got is not old[id(h), a] and got.dtype == before[id(h), a].dtype
        np.testing.assert_array_equal(got, before[id(h), a])
        assert got.flags.c_contiguous and got.flags.writeable and got.ctypes.data % 64 == 0
        starts.append(got.ctypes.data)
    assert starts[0] % HUGE_PAGE == 0
    assert [b - a for a, b in zip(starts, starts[1:])] == sizes[:-1]                # side by side, in order
    if _thp_setting() in ("always", "madvise"):          # Linux honours the request on this machine
        assert _huge_kib_at(starts[0]) >= HUGE_PAGE // 1024
    holders[0].codes[0, 0] = 5                            # still an ordinary writable array
    assert holders[0].codes[0, 0] == 5


def test_an_array_held_in_two_places_is_moved_once_and_stays_one_array():
    from zerollm.engine.memory import move_into_huge_pages
    table = np.arange(3 << 20, dtype=np.uint8).reshape(3, -1)            # 3 MiB, as a tied token table and head
    params = {"wte.weight": table, "lm_head.weight": table}
    moved = move_into_huge_pages([(params, "wte.weight"), (params, "lm_head.weight")])
    assert moved == table.nbytes and params["wte.weight"] is params["lm_head.weight"] is not table
    np.testing.assert_array_equal(params["wte.weight"], table)


def test_move_into_huge_pages_leaves_small_sets_and_systems_without_the_advice_alone(monkeypatch):
    from zerollm.engine import memory
    small = _Holder()
    small.codes = np.ones((100, 100), np.int8)
    kept = small.codes
    assert memory.move_into_huge_pages([(small, "codes")]) == 0 and small.codes is kept     # under one 2 MiB page
    big = _Holder()
    big.codes = np.ones((3000, 1000), np.int8)
    kept = big.codes
    monkeypatch.setattr(memory, "huge_page_arena", lambda nbytes: None)                  # no madvise here
    assert memory.move_into_huge_pages([(big, "codes")]) == 0 and big.codes is kept


def test_a_quantized_gguf_on_the_fast_engine_runs_from_one_huge_page_arena(tmp_path, monkeypatch):
    """Every matrix in blocks and every float matrix lies in one arena after loading, and the logits are those of
    the same file loaded with its matrices left where the reader put them."""
    from zerollm.engine import memory, use_engine
    from zerollm.interop.gguf import export_gguf
    from zerollm.interop.gguf_load import load_gguf
    cfg = GPTConfig(vocab_size=300, block_size=32, n_layer=4, n_head=4, n_embd=256, norm="rmsnorm", pos="rope",
                    mlp="swiglu", bias=False, tie_embeddings=False)
    path = tmp_path / "m.gguf"
    export_gguf(GPT(cfg, seed=0).eval(), path, quant_kind="q8_0")
    idx = np.array([[1, 7, 42, 99, 5]])
    with use_engine("fast"):
        moved, _, _ = load_gguf(path)
        got = moved.forward(idx)[0]
        monkeypatch.setattr(memory, "huge_page_arena", lambda nbytes: None)
        stayed, _, _ = load_gguf(path)
        want = stayed.forward(idx)[0]
    np.testing.assert_array_equal(got, want)
    blocks = {n: w for n, w in moved.params.items() if not isinstance(w, np.ndarray)}
    assert {f"h.{i}.mlp.c_fc.weight" for i in range(4)} <= set(blocks)
    arrays = [a for w in blocks.values() for a in (w.codes, w.scales)]
    floats = [w for w in moved.params.values() if isinstance(w, np.ndarray) and w.ndim == 2]
    assert floats                                                   # the token table: float, in the arena too
    arrays += floats
    first = min(a.ctypes.data for a in arrays)
    span = max(a.ctypes.data + a.nbytes for a in arrays) - first
    assert span <= sum((a.nbytes + 63) // 64 * 64 for a in arrays) and first % memory.HUGE_PAGE == 0
