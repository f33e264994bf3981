"""Linear layer, stored (in, out) as GPT-2's Conv1D does: y = x @ w + b.

For a GGUF file (zerollm.interop.gguf) or a QLoRA base (zerollm.interop.quant.quantize_linears) the weight may
instead be a QuantizedMatrix (o, i) of Q8_0 / Q4_0 blocks: then y = x @ W^T + b through ``quantized_matmul``,
and the backward gives dx only (a quantized weight is frozen), through ``quantized_matmul_t``.
Shapes: N = all leading dims flattened (B*T), i = in features, o = out features.
"""

import numpy as np

from zerollm.engine.amp import cast
from zerollm.engine import accelerated
from zerollm.engine.caches import LinearCache      # (x, w, has_bias), below both engines
from zerollm.nn.reductions import column_sums


@accelerated
def linear_forward(x, w, b=None):
    """y = x @ w (+ b).  x: (..., i), w: (i, o), b: (o,) -> y: (..., o).

    Speed: the leading dims are flattened first, so BLAS gets one (N, i) @ (i, o) product; a 3-D
    ``x @ w`` would be one small product per sequence, about 15% slower at nanoGPT's sizes.
    Under zerollm.engine.amp.autocast x and w are first rounded to 16 bits; the cache keeps the rounded ones.
    The fast engine folds b into the product (zerollm.engine.fast.linear: BLAS adds x @ w onto rows of b).
    """
    if not isinstance(w, np.ndarray):           # a QuantizedMatrix (o, i): inference only
        y = quantized_matmul(np.ascontiguousarray(x.reshape(-1, x.shape[-1])), w)     # (N, i) -> (N, o)
        n_out = w.shape[0]
    else:
        x, w = cast(x), cast(w)                 # no-ops in float32 mode
        y = x.reshape(-1, x.shape[-1]) @ w      # (N, i) @ (i, o) -> (N, o)
        n_out = w.shape[1]
    if b is not None:
        y += b                                  # in place: no second (N, o) temporary
    return y.reshape(*x.shape[:-1], n_out), LinearCache(x, w, b is not None)


@accelerated
def quantized_matmul(x, w):
    """y = x @ W^T for a QuantizedMatrix W (o, i): x (N, i) float32 -> (N, o).

    This reference dequantizes the whole matrix and lets BLAS multiply; the fast engine's kernel
    (zerollm.engine.fast.quant) decodes one 32-number block at a time instead and never builds it.
    """
    return x @ w.dequantize().T                 # (N, i) @ (i, o)


@accelerated
def head_product(x, w):
    """logits = x @ w^T for the output head: x (N, C), w (V, C) float (lm_head or the tied embedding) -> (N, V).

    Here BLAS multiplies (under autocast both rounded to 16 bits first). The fast engine streams w once for 2-16
    rows of x, a decode step of several requests (zerollm.engine.fast.rows), where BLAS's sgemm would first copy
    all of w into its packed panels.
    """
    return cast(x) @ cast(w).T                  # (N, C) @ (C, V)


QUANT_ROWS = 256      # rows of a quantized W dequantized at a time in the backward: (256, i) floats, never all of W


@accelerated
def quantized_matmul_t(dy, w):
    """dx = dy @ W for a QuantizedMatrix W (o, i): dy (N, o) -> (N, i), W dequantized QUANT_ROWS rows at a time,
    so the backward through a quantized base never holds the whole float matrix (QLoRA's point). The fast
    engine's kernel (zerollm.engine.fast.qlora) decodes the same slabs from the blocks into one reused buffer."""
    dx = np.zeros((dy.shape[0], w.shape[1]), dtype=np.float32)
    for start in range(0, w.shape[0], QUANT_ROWS):
        rows = np.arange(start, min(start + QUANT_ROWS, w.shape[0]))
        dx += dy[:, rows] @ w[rows]                                   # (N, r) @ (r, i)
    return dx


def linear_backward(dy, cache, weights=True):
    """forward was y = x @ w + b, so:
        dx = dy @ w^T            (each input feeds every output through w)
        dw = x^T @ dy            (summed over every row N of the batch)
        db = sum_N dy
    Returns (dx, dw, db); db is None without bias. weights=False: a frozen layer (LoRA's base,
    zerollm.nn.lora), only dx is computed and dw, db are None.
    """
    x, w = cache.x, cache.w
    if not isinstance(w, np.ndarray):               # a quantized weight is frozen: dx only (QLoRA)
        dy2 = np.ascontiguousarray(dy.reshape(-1, dy.shape[-1]), dtype=np.float32)
        return quantized_matmul_t(dy2, w).reshape(x.shape), None, None
    dy = cast(dy)                                   # mixed precision: the gradient enters in 16 bits too
    x2 = x.reshape(-1, x.shape[-1])                 # (N, i)
    dy2 = dy.reshape(-1, dy.shape[-1])              # (N, o)
    dx = (dy2 @ w.T).reshape(x.shape)               # (N, o) @ (o, i) -> (N, i) -> (..., i)
    if not weights:
        return dx, None, None
    dw = x2.T @ dy2                                 # (i, N) @ (N, o) -> (i, o)
    db = column_sums(dy2) if cache.has_bias else None  # sum over N (through BLAS: nn.reductions)
    return dx, dw, db
