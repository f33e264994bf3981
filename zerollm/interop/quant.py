"""Q8_0 and Q4_0: ggml's block quantization, in NumPy, byte for byte as GGUF files store it.

A matrix is quantized row by row, in blocks of 32 numbers that share one scale d (a float16):

    Q8_0  34 bytes a block:  d (2 bytes) | q[0..31] as int8            x ~ d * q,        d = max|x| / 127
    Q4_0  18 bytes a block:  d (2 bytes) | 16 bytes of 4-bit codes      x ~ d * (c - 8),  d = m / -8

    m is the block's number of largest magnitude, WITH its sign, so that it lands exactly on code 0
    (c - 8 = -8): the 4-bit range -8..7 is lopsided and the big end gets the extra value.
    Q4_0's byte j holds code j in its low nibble and code j + 16 in its high nibble.

Q8_0 rounds x/d to the nearest integer (halves away from zero, C's roundf); Q4_0 truncates
x/d + 8.5 (so, rounds to nearest) and clips at 15. Both compute in float32 and store d rounded
to float16 -- the dequantized value uses that rounded d. These are ggml's reference rules
(ggml-quants.c, quantize_row_q8_0_ref / quantize_row_q4_0_ref); tests/test_gguf.py checks our
bytes against the `gguf` package's quantizer.

    >>> x = np.linspace(-1, 1, 32, dtype=np.float32)[None]      # one row, one block
    >>> blocks = quantize(x, "q8_0")
    >>> blocks.shape, float(np.abs(dequantize(blocks, "q8_0", x.shape) - x).max()) < 1 / 254
    ((1, 34), True)

Shapes: R rows, K numbers a row (K % 32 == 0), nb = K / 32 blocks a row.

The k-quants (Q4_K, Q5_K, Q6_K: super-blocks of 256) live in zerollm.interop.kquant; ``quantize``,
``dequantize`` and ``blocks_matrix`` here take every kind, so a caller names the kind and never the module.
"""

import numpy as np

from zerollm.engine.memory import move_into_huge_pages
from zerollm.io.errors import ZeroLLMError
from zerollm.interop import kquant

BLOCK = 32
BLOCK_BYTES = {"q8_0": 2 + BLOCK, "q4_0": 2 + BLOCK // 2}
KINDS = tuple(BLOCK_BYTES)
ALL_KINDS = KINDS + kquant.KINDS          # every block kind a GGUF tensor of ours may be


def _blocks(x):
    """(..., K) float -> (n, 32) float32 blocks, n = all of them in row order."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 0 or x.shape[-1] % BLOCK:
        raise ZeroLLMError(f"a row must hold a multiple of {BLOCK} numbers to be quantized, got shape {x.shape}")
    return x.reshape(-1, BLOCK)


def _round_half_away(v):
    """C's roundf: to the nearest integer, halves away from zero (np.round sends halves to even)."""
    a = np.abs(v)
    whole = np.floor(a)
    return np.sign(v) * (whole + (a - whole >= 0.5))       # a - floor(a) is exact in float32


def _pack(scale, body):
    """(n,) float32 scales + (n, b) uint8 bodies -> (n, 2 + b) bytes: the float16 scale first."""
    return np.concatenate([scale.astype(np.float16).reshape(-1, 1).view(np.uint8), body], axis=1)


# ----------------------------------------------------------------------------
# quantize: float rows -> block bytes

def quantize_q8_0(x):
    """(..., K) -> (n, 34) uint8 blocks."""
    xb = _blocks(x)                                          # (n, 32)
    d = np.abs(xb).max(axis=1) / np.float32(127)             # (n,)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    q = _round_half_away(xb * inv[:, None]).astype(np.int8)  # (n, 32) in -127..127
    return _pack(d, q.view(np.uint8))


def quantize_q4_0(x):
    """(..., K) -> (n, 18) uint8 blocks."""
    xb = _blocks(x)                                          # (n, 32)
    m = np.take_along_axis(xb, np.abs(xb).argmax(axis=1)[:, None], axis=1)[:, 0]   # signed, first of the largest
    d = m / np.float32(-8)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    codes = np.minimum(np.trunc(xb * inv[:, None] + np.float32(8.5)), 15).astype(np.uint8)   # (n, 32) in 0..15
    nibbles = codes[:, :16] | (codes[:, 16:] << 4)           # (n, 16): code j low, code j + 16 high
    return _pack(d, nibbles)


def quantize(x, kind):
    """(R, K) float -> (R, nb * bytes a block) uint8: the rows GGUF stores for a tensor of ``kind``."""
    x = np.asarray(x)
    if kind in kquant.KINDS:
        return kquant.quantize(x, kind)
    body = {"q8_0": quantize_q8_0, "q4_0": quantize_q4_0}[check_kind(kind)](x)
    return body.reshape(*x.shape[:-1], -1)


# ----------------------------------------------------------------------------
# dequantize: block bytes -> float32

def split_blocks(data, kind):
    """(R, row bytes) uint8 -> (scales (R, nb) float32, codes): int8 (R, K) for q8_0, the packed
    uint8 nibbles (R, K/2) for q4_0. The form the fast kernel reads (zerollm.engine.fast.quant)."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    R, size = data.reshape(-1, data.shape[-1]).shape if data.ndim else (0, 0)
    per = BLOCK_BYTES[check_kind(kind)]
    if data.ndim < 1 or size % per:
        raise ZeroLLMError(f"{kind} data must be whole {per}-byte blocks a row, got {size} bytes")
    blocks = data.reshape(R, size // per, per)               # (R, nb, bytes a block)
    scales = blocks[:, :, :2].copy().view(np.float16)[:, :, 0].astype(np.float32)   # exact: f16 -> f32
    codes = blocks[:, :, 2:].reshape(R, -1)
    return scales, (codes.view(np.int8) if kind == "q8_0" else codes).copy()


def dequantize_codes(scales, codes, kind):
    """The numbers back: x = d * q (q8_0) or d * (c - 8) (q4_0). (R, nb), codes -> (R, K) float32."""
    R, nb = scales.shape
    if kind == "q8_0":
        q = codes.astype(np.float32).reshape(R, nb, BLOCK)
    else:
        packed = codes.reshape(R, nb, BLOCK // 2)
        q = np.concatenate([packed & 15, packed >> 4], axis=2).astype(np.float32) - 8   # codes 0..15, 16..31
    return (q * scales[:, :, None]).reshape(R, nb * BLOCK)


def dequantize(data, kind, shape):
    """Block bytes -> float32 array of ``shape`` (the float shape the bytes were made from)."""
    rows = np.asarray(data).reshape(-1, np.asarray(data).shape[-1])
    if kind in kquant.KINDS:
        out = kquant.dequantize(rows, kind)
    else:
        out = dequantize_codes(*split_blocks(rows, kind), kind)
    if out.size != int(np.prod(shape)):
        raise ZeroLLMError(f"{kind} data holds {out.size} numbers, not the {int(np.prod(shape))} of shape {tuple(shape)}")
    return out.reshape(shape)


def blocks_matrix(data, kind, shape):
    """The matrix a model holds for block rows ``data`` (R, row bytes) of any kind: a QuantizedMatrix
    (Q8_0, Q4_0) or a kquant.KQuantMatrix (Q4_K, Q5_K, Q6_K)."""
    if kind in kquant.KINDS:
        return kquant.KQuantMatrix.from_bytes(data, kind, shape)
    return QuantizedMatrix.from_bytes(data, kind, shape)


def check_kind(kind):
    if kind not in BLOCK_BYTES:
        raise ZeroLLMError(f"unknown quantization {kind!r}; zerollm writes and reads {', '.join(KINDS)}")
    return kind


# ----------------------------------------------------------------------------
# a quantized weight matrix inside a model

class QuantizedMatrix:
    """A weight W (out, in) kept as blocks: what a model holds in place of a float matrix when it runs
    a GGUF file on the fast engine. A linear layer computes y = x @ W^T with it
    (zerollm.nn.linear.quantized_matmul); ``m[idx]`` dequantizes only the rows asked for (the token
    embedding's lookup). The scales are float16 values held as float32 (exact), the codes as stored."""

    def __init__(self, kind, scales, codes, shape):
        self.kind, self.scales, self.codes = check_kind(kind), scales, codes
        self.shape = tuple(int(n) for n in shape)              # (out, in)
        self.ndim, self.size, self.dtype = 2, self.shape[0] * self.shape[1], np.dtype(np.float32)

    @classmethod
    def from_bytes(cls, data, kind, shape):
        scales, codes = split_blocks(data, kind)
        return cls(kind, scales, codes, shape)

    @classmethod
    def from_float(cls, w, kind):
        """Quantize a float (out, in) matrix."""
        w = np.asarray(w, dtype=np.float32)
        return cls.from_bytes(quantize(w, kind), kind, w.shape)

    @property
    def nbytes(self):
        return self.codes.nbytes + self.scales.size * 2       # as stored: float16 scales

    def dequantize(self):
        """The whole (out, in) matrix in float32 (what the NumPy engine multiplies with)."""
        return dequantize_codes(self.scales, self.codes, self.kind)

    def __getitem__(self, idx):
        """Rows ``idx`` (ints of any shape) dequantized: (*idx.shape, in)."""
        idx = np.asarray(idx)
        rows = idx.reshape(-1)
        out = dequantize_codes(self.scales[rows], self.codes[rows], self.kind)
        return out.reshape(*idx.shape, self.shape[1])

    def __repr__(self):
        return f"QuantizedMatrix({self.kind}, shape={self.shape})"


class StackedBlocks:
    """A weight W (out, in) whose row ranges are blocks of different kinds, each part as its file stores it: a
    Llama Q4_K_M file's attn_q and attn_k in Q4_K and attn_v in Q6_K, which zerollm's c_attn stacks row on row.
    ``parts``: QuantizedMatrix / KQuantMatrix of the same width, in row order; ``offsets``: the first row of each
    and the total (len(parts) + 1). A kernel multiplies part by part into the output's columns (the fast engine's
    quantized_matmul); the NumPy engine dequantizes the whole, as for any other blocks, so its numbers stay the
    reference's. No part is ever turned into float32 to make the kinds agree."""

    kind = "stacked"
    scales = None

    def __init__(self, parts):
        self.parts = tuple(parts)
        widths = {p.shape[1] for p in self.parts}
        if not self.parts or len(widths) != 1:
            raise ZeroLLMError(f"stacked blocks need parts of one width, got {[p.shape for p in self.parts]}")
        self.offsets = np.cumsum([0] + [p.shape[0] for p in self.parts])
        self.shape = (int(self.offsets[-1]), widths.pop())
        self.ndim, self.size, self.dtype = 2, self.shape[0] * self.shape[1], np.dtype(np.float32)

    @property
    def kinds(self):
        return tuple(p.kind for p in self.parts)

    @property
    def nbytes(self):
        return sum(p.nbytes for p in self.parts)

    def dequantize(self):
        return np.concatenate([p.dequantize() for p in self.parts])

    def __getitem__(self, idx):
        """Rows ``idx`` (ints of any shape) dequantized, each from its own part: (*idx.shape, in)."""
        idx = np.asarray(idx)
        rows = idx.reshape(-1)
        out = np.empty((rows.size, self.shape[1]), np.float32)
        which = np.searchsorted(self.offsets, rows, side="right") - 1
        for i, part in enumerate(self.parts):
            at = np.flatnonzero(which == i)
            if at.size:
                out[at] = part[rows[at] - self.offsets[i]]
        return out.reshape(*idx.shape, self.shape[1])

    def __repr__(self):
        return f"StackedBlocks({'+'.join(self.kinds)}, shape={self.shape})"


def stacked_blocks(rows, kinds, shapes):
    """One matrix for parts ``rows`` (each (out_i, row bytes) uint8) of ``kinds`` and float ``shapes``, stacked row
    on row: blocks_matrix's matrix when every kind is the same (the bytes joined), else a StackedBlocks."""
    if len(set(kinds)) == 1:
        return blocks_matrix(np.concatenate(rows), kinds[0], (sum(s[0] for s in shapes), shapes[0][1]))
    return StackedBlocks([blocks_matrix(r, k, s) for r, k, s in zip(rows, kinds, shapes)])


# ----------------------------------------------------------------------------
# QLoRA: a base model's linear layers kept in blocks

LINEAR_SUFFIXES = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")


def quantize_linears(model, kind, also=()):
    """Replace the weight (i, o) of every linear layer of attention and MLP by a QuantizedMatrix of W^T (o, i), in
    place: QLoRA's frozen base (Dettmers et al. 2023, with zerollm's Q8_0 / Q4_0 blocks in place of NF4). The
    token table and the head stay float (they are looked up and may train). ``also``: other models (a frozen
    reference) whose entries are the very same arrays get the same blocks. -> the model."""
    check_kind(kind)
    if model.lora is None:
        raise ZeroLLMError("--quantize-base freezes the base in blocks: give --lora-r R too, so the adapters train")
    quantize_base(model.params, kind, [other.params for other in also])
    return model


def is_base_linear(name, w):
    """Is ``w`` (params[name]) a float weight that a QLoRA base keeps in blocks: a linear layer of attention or MLP?"""
    return name.endswith(LINEAR_SUFFIXES) and isinstance(w, np.ndarray) and w.ndim == 2


def base_blocks(name, w, kind):
    """The QuantizedMatrix of W^T (o, i) for the float linear weight ``w`` (i, o) named ``name``; an error when its
    inputs are not whole blocks."""
    if w.shape[0] % BLOCK:
        raise ZeroLLMError(f"{name} has {w.shape[0]} inputs, not a multiple of {BLOCK}: {kind} blocks cannot "
                           "hold it; quantize a model whose widths are multiples of 32, or leave out "
                           "--quantize-base")
    return QuantizedMatrix.from_float(np.ascontiguousarray(w.T), kind)


def quantize_base(params, kind, also=()):
    """Every float linear weight of ``params`` (a model's dict) put in ``kind`` blocks, in place, one matrix at a
    time; entries already in blocks stay as they are. ``also``: other params dicts holding the very same arrays
    (a frozen reference) get the same blocks."""
    check_kind(kind)
    for name, w in list(params.items()):
        if is_base_linear(name, w):
            blocks = base_blocks(name, w, kind)
            for other in also:
                if other.get(name) is w:
                    other[name] = blocks
            params[name] = blocks
    return params


class QuantizeOnRead:
    """A model's params dict as a reader fills it when the base is opened in blocks (zerollm.interop.opening's
    Source(quantize=KIND)): ``reading[name]`` is the array the reader fills; for a linear weight that is a float
    matrix allocated then, and the one asked for before it, complete by now, is quantized and let go. So the
    float base exists one matrix at a time, never whole (QLoRA's memory). ``peak_float_bytes``: the most bytes of
    such float matrices alive at once, the accounting the tests read; ``done()`` quantizes the last one.
    ``kept``: {name: blocks} read straight from a file's blocks (a GGUF base): ``reading[name]`` puts them in and
    hands the reader a zero-stride stand-in that holds nothing. ``kind`` None: the float linear weights stay float."""

    def __init__(self, params, kind, kept=None):
        self.params, self.kind, self.kept = params, None if kind is None else check_kind(kind), dict(kept or {})
        self.pending, self.float_bytes, self.peak_float_bytes = None, 0, 0

    def __getitem__(self, name):
        self.done()
        w = self.params[name]
        if name in self.kept:
            self.params[name] = self.kept.pop(name)
            return np.lib.stride_tricks.as_strided(np.zeros(1, w.dtype), w.shape, (0,) * w.ndim)   # writes vanish
        if self.kind is None or not is_base_linear(name, w) or w.shape[0] % BLOCK:
            return w                               # stays float (quantize_base names the too-narrow one later)
        fresh = np.empty(w.shape, w.dtype)          # the model's own array was never written: no memory held
        self.params[name], self.pending = fresh, name
        self.float_bytes += fresh.nbytes
        self.peak_float_bytes = max(self.peak_float_bytes, self.float_bytes)
        return fresh

    def done(self):
        if self.pending is not None:
            name, self.pending = self.pending, None
            w = self.params[name]
            self.params[name] = base_blocks(name, w, self.kind)
            self.float_bytes -= w.nbytes

    def finish(self, floats=False):
        """The reading is over: the last matrix quantized (done), then every matrix in blocks (and with ``floats``
        every float matrix too) moved onto 2 MiB pages (weights_in_huge_pages)."""
        self.done()
        weights_in_huge_pages(self.params, floats)


def weights_in_huge_pages(params, floats=False):
    """The arrays of every matrix in blocks of ``params`` (a QuantizedMatrix's codes and scales, a KQuantMatrix's
    blocks, each part's of a StackedBlocks), and with ``floats`` every 2-D float array too, copied side by side into
    memory on 2 MiB pages, in place of their own (zerollm.engine.memory.move_into_huge_pages): a decode step streams
    them all, and on 4 KiB pages each 4 KiB cost a TLB miss (llama Q4_K_M decode 8% faster, GPT-2 Q4_0 22%, a float
    llama 4-11%). Where the system gives no such memory nothing moves. Returns the bytes moved."""
    blocks = [(m, attr) for w in params.values() for m in getattr(w, "parts", (w,))
              if not isinstance(m, np.ndarray) for attr in ("codes", "scales", "blocks")]
    plain = [(params, name) for name, w in params.items() if floats and isinstance(w, np.ndarray) and w.ndim == 2]
    return move_into_huge_pages(blocks + plain)


def quantized_bytes(params, kind):
    """The bytes ``params`` would hold after quantize_linears(..., kind): the --dry-run estimate of a QLoRA base."""
    total = 0
    for name, w in params.items():
        if not isinstance(w, np.ndarray):      # in blocks already (read so): what they hold
            total += w.nbytes
            continue
        blocks = name.endswith(LINEAR_SUFFIXES) and getattr(w, "ndim", 0) == 2 and w.shape[0] % BLOCK == 0
        total += w.size // BLOCK * BLOCK_BYTES[kind] if blocks else w.nbytes
    return total


def float_param(name, w):
    """A model's parameter ``name`` as the float32 array of its own layout: itself when it is one; a linear weight
    held as blocks of W^T (o, i) dequantized and turned back to (i, o); a table in blocks (V, C) dequantized. What
    writers of float files (merge, the Hugging Face export) take from a QLoRA base, one matrix at a time."""
    if isinstance(w, np.ndarray):
        return w
    return np.ascontiguousarray(w.dequantize().T) if name.endswith(LINEAR_SUFFIXES) else w.dequantize()
