"""Q4_K, Q5_K and Q6_K: ggml's k-quants, in NumPy, byte for byte as GGUF files store them.

A row is cut into super-blocks of 256 numbers. Each super-block has one or two float16 scales for the
whole block and small integer scales for its sub-blocks, so a sub-block's scale costs 6 or 8 bits
instead of Q4_0's 16:

    Q4_K  144 bytes / 256 numbers (4.5 bits each):
          d, dmin (float16) | 12 bytes: 8 six-bit scales sc and 8 six-bit mins m | 128 bytes of 4-bit codes q
          sub-block j (32 numbers):  x ~ d * sc[j] * q - dmin * m[j]           q in 0..15
    Q5_K  176 bytes (5.5 bits): as Q4_K, plus 32 bytes holding each code's 5th bit     q in 0..31
    Q6_K  210 bytes (6.5625 bits): 128 bytes of low 4 bits | 64 bytes of high 2 bits |
          16 int8 scales sc | d (float16);  sub-block j (16 numbers):  x ~ d * sc[j] * (q - 32),  q in 0..63

The 12 scale bytes of Q4_K/Q5_K hold 16 six-bit numbers (sc[0..7], m[0..7]):

    byte 0..3    sc[j] in bits 0..5, bits 4..5 of sc[j+4] in bits 6..7
    byte 4..7    m[j]  in bits 0..5, bits 4..5 of m[j+4]  in bits 6..7
    byte 8..11   bits 0..3 of sc[j+4] low, bits 0..3 of m[j+4] high

Codes go by 64 numbers: byte l of a 32-byte group holds number l (low nibble) and number l + 32 (high).
Q5_K's 5th bit of number 64 g + l (low) / 64 g + 32 + l (high) is bit 2 g / 2 g + 1 of qh[l]. Q6_K goes by
128 numbers: ql[l] holds numbers l (low) and l + 64 (high), ql[l + 32] numbers l + 32 and l + 96, and
qh[l]'s four 2-bit pairs are the high bits of l, l + 32, l + 64, l + 96.

The dequantizers compute in float32 in gguf.quants' order ((d * sc) * q - dmin * m), so the numbers are the
same to the bit. The quantizers follow llama.cpp's reference (ggml-quants.c, quantize_row_q4_K_ref and the
others, which llama-quantize runs when no importance matrix is given): a weighted least-squares search of
each sub-block's scale and min, then the scales rounded to 6 (or 8) bits and the codes taken again with
them. Every sum runs in float32 in the reference's order. tests/test_kquant.py checks the bytes against
llama.cpp's own library.

A row that is not whole super-blocks is stored by llama.cpp in a 32-number type instead (llama-quant.cpp's
tensor_type_fallback): Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0. Q5_0 and Q5_1 are here too, so that the
Q4_K_M / Q5_K_M files of a model 64 to 192 wide (every README preset) read and write as llama.cpp's:

    Q5_0  22 bytes / 32: d (float16) | 4 bytes: bit j = 5th bit of code j | 16 bytes of 4-bit codes
          x ~ d * (q - 16),  d = m / -16 (m the number of largest magnitude, with its sign)
    Q5_1  24 bytes / 32: d, min (float16) | the same 20 bytes;  x ~ d * q + min,  d = (max - min) / 31
    (byte j of the codes holds code j low and code j + 16 high, as Q4_0's.)

Shapes: R rows, K numbers a row (K % 256 == 0; K % 32 for Q5_0 / Q5_1), nb = K / 256 super-blocks, S
sub-blocks in all.
"""

import numpy as np

from zerollm.io.errors import ZeroLLMError

QK = 256
BLOCK_BYTES = {"q4_K": 144, "q5_K": 176, "q6_K": 210, "q5_0": 22, "q5_1": 24}
BLOCK_NUMBERS = {"q4_K": QK, "q5_K": QK, "q6_K": QK, "q5_0": 32, "q5_1": 32}
KINDS = tuple(BLOCK_BYTES)
K_KINDS = KINDS[:3]
FALLBACK = {"q4_K": "q5_0", "q5_K": "q5_1", "q6_K": "q8_0"}      # for a row that is not whole super-blocks
_EPS = np.float32(1e-15)              # ggml's GROUP_MAX_EPS: a smaller sub-block is all zeros


# ----------------------------------------------------------------------------
# float helpers with the reference's rounding

def nearest_int(v):
    """ggml's nearest_int: float32 + 1.5 * 2^23, whose low mantissa bits are the integer (halves to even)."""
    bits = (np.asarray(v, np.float32) + np.float32(12582912.0)).view(np.int32)
    return (bits & 0x007FFFFF) - 0x00400000


def _f16(v):
    """float32 -> the float16 it is stored as, and that value back as float32."""
    h = np.asarray(v, np.float32).astype(np.float16)
    return h, h.astype(np.float32)


def _running(terms):
    """sum over the last axis, one number after the other, as a C loop adds (float32 throughout)."""
    acc = terms[..., 0].copy()
    for i in range(1, terms.shape[-1]):
        acc += terms[..., i]
    return acc


# ----------------------------------------------------------------------------
# the 12 bytes of six-bit scales and mins (Q4_K, Q5_K)

def unpack_scales(packed):
    """(..., 12) uint8 -> (sc, m), each (..., 8) uint8 in 0..63."""
    lo, mid, hi = packed[..., 0:4], packed[..., 4:8], packed[..., 8:12]
    sc = np.concatenate([lo & 63, (hi & 15) | ((lo >> 6) << 4)], axis=-1)
    m = np.concatenate([mid & 63, (hi >> 4) | ((mid >> 6) << 4)], axis=-1)
    return sc, m


def pack_scales(sc, m):
    """(..., 8) integers in 0..63 each -> (..., 12) uint8, the inverse of unpack_scales."""
    sc, m = sc.astype(np.uint8), m.astype(np.uint8)
    lo = sc[..., :4] | ((sc[..., 4:] >> 4) << 6)
    mid = m[..., :4] | ((m[..., 4:] >> 4) << 6)
    hi = (sc[..., 4:] & 15) | ((m[..., 4:] & 15) << 4)
    return np.concatenate([lo, mid, hi], axis=-1)


# ----------------------------------------------------------------------------
# dequantize: (n, bytes) blocks -> (n, 256) float32

def _scale(raw):
    """(n, 2) uint8 -> (n,) float32 (a stored float16)."""
    return np.ascontiguousarray(raw).view(np.float16)[:, 0].astype(np.float32)


def _nibbles(qs):
    """(n, 128) bytes -> (n, 8, 32) codes: group g's bytes give sub-block 2g (low) and 2g + 1 (high)."""
    g = qs.reshape(-1, 4, 1, 32)
    return np.concatenate([g & 15, g >> 4], axis=2).reshape(-1, 8, 32)


def dequantize_q4_k(blocks):
    d, dmin = _scale(blocks[:, 0:2]), _scale(blocks[:, 2:4])
    sc, m = unpack_scales(blocks[:, 4:16])                                  # (n, 8) each
    q = _nibbles(blocks[:, 16:144]).astype(np.float32)                      # (n, 8, 32)
    scale = (d[:, None] * sc.astype(np.float32))[:, :, None]
    shift = (dmin[:, None] * m.astype(np.float32))[:, :, None]
    return (scale * q - shift).reshape(-1, QK)


def dequantize_q5_k(blocks):
    d, dmin = _scale(blocks[:, 0:2]), _scale(blocks[:, 2:4])
    sc, m = unpack_scales(blocks[:, 4:16])
    qh = blocks[:, 16:48]                                                   # (n, 32): bit j = sub-block j
    high = (qh[:, None, :] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1     # (n, 8, 32)
    q = (_nibbles(blocks[:, 48:176]) | (high << 4)).astype(np.float32)
    scale = (d[:, None] * sc.astype(np.float32))[:, :, None]
    shift = (dmin[:, None] * m.astype(np.float32))[:, :, None]
    return (scale * q - shift).reshape(-1, QK)


def dequantize_q6_k(blocks):
    ql = blocks[:, 0:128].reshape(-1, 2, 1, 64)                             # two halves of 128 numbers
    qh = blocks[:, 128:192].reshape(-1, 2, 1, 32)
    sc = np.ascontiguousarray(blocks[:, 192:208]).view(np.int8).astype(np.float32)   # (n, 16)
    d = _scale(blocks[:, 208:210])
    low = np.concatenate([ql & 15, ql >> 4], axis=2).reshape(-1, 2, 4, 32)   # l, l+32 | l+64, l+96
    high = (qh >> np.array([0, 2, 4, 6], dtype=np.uint8)[None, None, :, None]) & 3   # (n, 2, 4, 32)
    q = ((low | (high << 4)).astype(np.int8) - np.int8(32)).astype(np.float32).reshape(-1, 16, 16)
    return ((d[:, None] * sc)[:, :, None] * q).reshape(-1, QK)


def _five_bit_codes(qh, qs):
    """Q5_0 / Q5_1: (n, 4) bytes of 5th bits + (n, 16) bytes of nibbles -> (n, 32) codes in 0..31."""
    high = (qh[:, :, None] >> np.arange(8, dtype=np.uint8)[None, None, :]) & 1      # (n, 4, 8): bit j = code j
    return np.concatenate([qs & 15, qs >> 4], axis=1) | (high.reshape(-1, 32) << 4)


def dequantize_q5_0(blocks):
    q = (_five_bit_codes(blocks[:, 2:6], blocks[:, 6:22]).astype(np.int8) - np.int8(16)).astype(np.float32)
    return _scale(blocks[:, 0:2])[:, None] * q


def dequantize_q5_1(blocks):
    q = _five_bit_codes(blocks[:, 4:8], blocks[:, 8:24]).astype(np.float32)
    return _scale(blocks[:, 0:2])[:, None] * q + _scale(blocks[:, 2:4])[:, None]


_DEQUANTIZE = {"q4_K": dequantize_q4_k, "q5_K": dequantize_q5_k, "q6_K": dequantize_q6_k,
               "q5_0": dequantize_q5_0, "q5_1": dequantize_q5_1}


def check_rows(data, kind):
    """(R, row bytes) uint8 that are whole super-blocks of ``kind`` -> (R * nb, bytes a block) blocks."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    per = BLOCK_BYTES[kind]
    if data.ndim < 1 or data.shape[-1] % per:
        got = data.shape[-1] if data.ndim else 0
        raise ZeroLLMError(f"{kind} data must be whole {per}-byte blocks a row, got {got} bytes; the file is "
                           "truncated or damaged")
    return data.reshape(-1, per)


def dequantize(data, kind):
    """(R, row bytes) uint8 -> (R, K) float32."""
    data = np.asarray(data)
    blocks = check_rows(data, kind)
    R = int(np.prod(data.shape[:-1], dtype=np.int64)) if data.ndim > 1 else 1
    return _DEQUANTIZE[kind](blocks).reshape(R, -1)


# ----------------------------------------------------------------------------
# quantize: llama.cpp's reference search, in float32

def _scale_and_min(x, w, nmax, search):
    """make_qkx2_quants for S sub-blocks at once: x, w (S, n) -> (scale (S,), min (S,) <= 0, codes (S, n)).

    The codes q in 0..nmax with x ~ scale * q + min minimise sum w (x - x~)^2 over ``search`` = (rmin,
    rdelta, nstep) trial steps iscale = (nmax + rmin + rdelta * i) / (max - min), each refit by least squares."""
    rmin, rdelta, nstep = search
    lo, hi = np.minimum(x.min(axis=1), 0), x.max(axis=1)
    sum_w, sum_x = _running(w), _running(w * x)
    flat = hi == lo
    span = np.where(flat, np.float32(1), hi - lo)
    iscale = np.float32(nmax) / span
    scale = np.float32(1) / iscale
    L = np.clip(nearest_int(iscale[:, None] * (x - lo[:, None])), 0, nmax).astype(np.float32)
    best = _running(w * np.square(scale[:, None] * L + lo[:, None] - x))
    for i in range(nstep + 1):                   # a better fit moves min, and with it the next trials' grid
        span = np.where(flat, np.float32(1), hi - lo)
        iscale = (np.float32(rmin) + np.float32(rdelta) * np.float32(i) + np.float32(nmax)) / span
        Lt = np.clip(nearest_int(iscale[:, None] * (x - lo[:, None])), 0, nmax).astype(np.float32)
        wl = w * Lt
        sum_l, sum_l2, sum_xl = _running(wl), _running(wl * Lt), _running(wl * x)
        D = sum_w * sum_l2 - sum_l * sum_l
        with np.errstate(divide="ignore", invalid="ignore"):
            t_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            t_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            pos = t_min > 0
            t_scale = np.where(pos, sum_xl / sum_l2, t_scale)
        t_min = np.where(pos, np.float32(0), t_min)
        err = _running(w * np.square(t_scale[:, None] * Lt + t_min[:, None] - x))
        better = (D > 0) & (err < best) & ~flat
        L[better], best[better] = Lt[better], err[better]
        scale, lo = np.where(better, t_scale, scale), np.where(better, t_min, lo)
    scale, L = np.where(flat, np.float32(0), scale), np.where(flat[:, None], np.float32(0), L)
    return scale.astype(np.float32), lo.astype(np.float32), L


def _sub_blocks(x, n, whole=QK):
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 0 or x.shape[-1] % whole:
        raise ZeroLLMError(f"a row must hold a multiple of {whole} numbers for k-quants, got shape {x.shape}")
    return x.reshape(-1, n)


SEARCH = {"q4_K": (15, (-1.0, 0.1, 20)), "q5_K": (31, (-0.5, 0.1, 15))}     # nmax, (rmin, rdelta, nstep)


def fit_sub_blocks(xs, kind):
    """(S, 32) sub-blocks -> (scale, min <= 0, codes) of Q4_K / Q5_K's search, with the reference's weights
    w = the sub-block's RMS + |x| (a big number's error counts more)."""
    nmax, search = SEARCH[kind]
    av = np.sqrt(_running(xs * xs) / np.float32(32))
    return _scale_and_min(xs, av[:, None] + np.abs(xs), nmax, search)


def _quantize_qk(x, kind):
    """Q4_K / Q5_K: (..., K) -> (d16, dmin16 (nb,), packed scales (nb, 12), codes (nb, 256) in 0..nmax)."""
    xs = _sub_blocks(x, 32)                                                  # (S, 32)
    nmax = SEARCH[kind][0]
    scale, lo, L = fit_sub_blocks(xs, kind)
    scale, mins = scale.reshape(-1, 8), (-lo).reshape(-1, 8)                 # (nb, 8)
    max_scale, max_min = np.maximum(scale.max(axis=1), 0), np.maximum(mins.max(axis=1), 0)
    with np.errstate(divide="ignore"):
        inv_s = np.where(max_scale > 0, np.float32(63) / max_scale, np.float32(0))
        inv_m = np.where(max_min > 0, np.float32(63) / max_min, np.float32(0))
    ls = np.minimum(nearest_int(inv_s[:, None] * scale) & 255, 63)
    lm = np.minimum(nearest_int(inv_m[:, None] * mins) & 255, 63)
    d16, d = _f16(max_scale / np.float32(63))
    dmin16, dmin = _f16(max_min / np.float32(63))
    dl = (d[:, None] * ls.astype(np.float32)).reshape(-1, 1)                 # (S, 1)
    dm = (dmin[:, None] * lm.astype(np.float32)).reshape(-1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        again = np.clip(nearest_int((xs + dm) / dl), 0, nmax)
    L = np.where(dl != 0, again, L).astype(np.uint8)                          # a zero scale keeps the search's codes
    return d16, dmin16, pack_scales(ls, lm), L.reshape(-1, QK)


def _nibble_bytes(L):
    """(nb, 256) codes (low 4 bits used) -> (nb, 128): byte l of group g = code 64 g + l | code 64 g + 32 + l << 4."""
    g = (L & 15).reshape(-1, 4, 2, 32)
    return (g[:, :, 0] | (g[:, :, 1] << 4)).reshape(-1, 128)


def quantize_q4_k(x):
    d, dmin, scales, L = _quantize_qk(x, "q4_K")
    return np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), scales,
                           _nibble_bytes(L)], axis=1)


def quantize_q5_k(x):
    d, dmin, scales, L = _quantize_qk(x, "q5_K")
    bit5 = (L >> 4).reshape(-1, 8, 32)                                       # sub-block j -> bit j of qh
    qh = (bit5 << np.arange(8, dtype=np.uint8)[None, :, None]).sum(axis=1).astype(np.uint8)
    return np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), scales, qh,
                           _nibble_bytes(L)], axis=1)


def _symmetric_scale(x, nmax=32):
    """make_qx_quants(rmse_type 1) for S sub-blocks: x (S, n) -> (scale (S,), codes (S, n) in 0..2 nmax - 1).

    x ~ scale * (q - nmax), the scale chosen among 19 trial steps by the weighted (w = x^2) least squares."""
    amax_at = np.abs(x).argmax(axis=1)
    big = np.take_along_axis(x, amax_at[:, None], axis=1)[:, 0]              # signed, first of the largest
    tiny = np.abs(big) < _EPS
    big = np.where(tiny, np.float32(1), big)
    w = x * x

    def trial(iscale):
        l = np.clip(nearest_int(iscale[:, None] * x), -nmax, nmax - 1).astype(np.float32)
        return l, _running(w * x * l), _running(w * l * l)

    l, sumlx, suml2 = trial(np.float32(-nmax) / big)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(suml2 != 0, sumlx / suml2, np.float32(0))
    best, L = scale * sumlx, l
    for i in (*range(-9, 0), *range(1, 10)):
        l, sumlx, suml2 = trial(-(np.float32(nmax) + np.float32(0.1) * np.float32(i)) / big)
        better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = sumlx / suml2
        L = np.where(better[:, None], l, L)
        scale = np.where(better, s, scale)
        best = np.where(better, scale * sumlx, best)
    return np.where(tiny, np.float32(0), scale), np.where(tiny[:, None], np.float32(0), L + nmax)


def quantize_q6_k(x):
    xs = _sub_blocks(x, 16)                                                  # (S, 16)
    scale, L = _symmetric_scale(xs)
    scale, L = scale.reshape(-1, 16), L.reshape(-1, 16, 16)                  # (nb, 16), (nb, 16, 16)
    at = np.abs(scale).argmax(axis=1)
    max_scale = np.take_along_axis(scale, at[:, None], axis=1)[:, 0]
    empty = np.abs(max_scale) < _EPS
    with np.errstate(divide="ignore"):
        iscale = np.float32(-128) / np.where(empty, np.float32(1), max_scale)
    d16, d = _f16(np.float32(1) / iscale)
    sc = np.minimum(nearest_int(iscale[:, None] * scale), 127).astype(np.int8)     # (nb, 16)
    dl = (d[:, None] * sc.astype(np.float32))[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        again = np.clip(nearest_int(xs.reshape(-1, 16, 16) / dl), -32, 31) + 32
    L = np.where(dl != 0, again, L).astype(np.uint8).reshape(-1, 2, 4, 32)  # halves of 128, quarters of 32
    ql = np.concatenate([(L[:, :, 0] & 15) | ((L[:, :, 2] & 15) << 4),
                         (L[:, :, 1] & 15) | ((L[:, :, 3] & 15) << 4)], axis=2)          # (nb, 2, 64)
    qh = (L[:, :, 0] >> 4) | ((L[:, :, 1] >> 4) << 2) | ((L[:, :, 2] >> 4) << 4) | ((L[:, :, 3] >> 4) << 6)
    out = np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64), sc.view(np.uint8),
                          d16.view(np.uint8).reshape(-1, 2)], axis=1)
    out[empty] = 0                                                           # the reference zeroes the block
    return out


def _five_bit_bytes(q):
    """(n, 32) codes in 0..31 -> (n, 4) bytes of 5th bits (bit j = code j) + (n, 16) bytes of nibbles."""
    qh = ((q >> 4).reshape(-1, 4, 8) << np.arange(8, dtype=np.uint8)).sum(axis=2).astype(np.uint8)
    return qh, (q[:, :16] & 15) | ((q[:, 16:] & 15) << 4)


def quantize_q5_0(x):
    """ggml's quantize_row_q5_0_ref: as Q4_0 with 32 codes, d = m / -16, code = min(31, trunc(x / d + 16.5))."""
    xb = _sub_blocks(x, 32, 32)
    m = np.take_along_axis(xb, np.abs(xb).argmax(axis=1)[:, None], axis=1)[:, 0]
    d = m / np.float32(-16)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(np.trunc(xb * inv[:, None] + np.float32(16.5)), 31).astype(np.uint8)
    return np.concatenate([_f16(d)[0].view(np.uint8).reshape(-1, 2), *_five_bit_bytes(q)], axis=1)


def quantize_q5_1(x):
    """ggml's quantize_row_q5_1_ref: d = (max - min) / 31, code = trunc((x - min) / d + 0.5), min stored too."""
    xb = _sub_blocks(x, 32, 32)
    lo, hi = xb.min(axis=1), xb.max(axis=1)
    d = (hi - lo) / np.float32(31)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(np.trunc((xb - lo[:, None]) * inv[:, None] + np.float32(0.5)), 31).astype(np.uint8)
    return np.concatenate([_f16(d)[0].view(np.uint8).reshape(-1, 2), _f16(lo)[0].view(np.uint8).reshape(-1, 2),
                           *_five_bit_bytes(q)], axis=1)


_QUANTIZE = {"q4_K": quantize_q4_k, "q5_K": quantize_q5_k, "q6_K": quantize_q6_k,
             "q5_0": quantize_q5_0, "q5_1": quantize_q5_1}


def quantize(x, kind):
    """(R, K) float -> (R, nb * bytes a block) uint8: the rows GGUF stores for a tensor of ``kind``."""
    x = np.asarray(x, dtype=np.float32)
    return _QUANTIZE[kind](x).reshape(*x.shape[:-1], -1)


# ----------------------------------------------------------------------------
# a k-quant weight matrix inside a model

class KQuantMatrix:
    """A weight W (out, in) kept as k-quant super-blocks (or Q5_0 / Q5_1 blocks), as the file stores them:
    ``blocks`` (out, nb, bytes a block) uint8. Same use as zerollm.interop.quant.QuantizedMatrix: a linear layer computes
    y = x @ W^T with it (zerollm.nn.linear.quantized_matmul; the fast engine's kernels in
    zerollm.engine.fast.kquant read the blocks directly), ``m[idx]`` dequantizes only the rows asked for."""

    scales = None            # no separate scale array: a super-block carries its own

    def __init__(self, kind, blocks, shape):
        self.kind, self.blocks = kind, blocks
        self.shape = tuple(int(n) for n in shape)
        self.ndim, self.size, self.dtype = 2, self.shape[0] * self.shape[1], np.dtype(np.float32)

    @classmethod
    def from_bytes(cls, data, kind, shape):
        data = np.asarray(data, dtype=np.uint8).reshape(shape[0], -1)
        blocks = check_rows(data, kind)
        numbers = blocks.shape[0] * BLOCK_NUMBERS[kind]
        if numbers != shape[0] * shape[1]:
            raise ZeroLLMError(f"{kind} data holds {numbers} numbers, not the {shape[0] * shape[1]} of shape "
                               f"{tuple(shape)}; the file is damaged")
        return cls(kind, blocks.reshape(shape[0], -1, BLOCK_BYTES[kind]), shape)

    @classmethod
    def from_float(cls, w, kind):
        w = np.asarray(w, dtype=np.float32)
        return cls.from_bytes(quantize(w, kind), kind, w.shape)

    @property
    def nbytes(self):
        return self.blocks.nbytes

    def dequantize(self):
        """The whole (out, in) matrix in float32 (what the NumPy engine multiplies with)."""
        return dequantize(self.blocks.reshape(self.shape[0], -1), self.kind)

    def __getitem__(self, idx):
        idx = np.asarray(idx)
        rows = self.blocks[idx.reshape(-1)]
        return dequantize(rows.reshape(rows.shape[0], -1), self.kind).reshape(*idx.shape, self.shape[1])

    def __repr__(self):
        return f"KQuantMatrix({self.kind}, shape={self.shape})"
