"""Mixed-precision training, emulated in NumPy (Part 4.2 of the course).

On a GPU, "mixed precision" (Micikevicius et al. 2018, "Mixed Precision Training") means: keep a
float32 master copy of the weights and of the optimizer state, but run the matrix products on
16-bit inputs, which tensor cores multiply several times faster and which take half the memory to
store for the backward pass. NumPy has no fast bf16/fp16 matrix product on a CPU, so zerollm
*emulates* it: every value that would be 16-bit on a GPU is rounded to the nearest 16-bit number
and kept in a float32 array; the arithmetic itself runs in float32, as tensor cores accumulate.
The losses you see are therefore those of real mixed precision; the speed and the memory are not.

What is rounded (``cast`` below, called by the layers while ``autocast`` is active):
    forward   the inputs of every matrix product: activations and weights of each linear layer and
              of the language-model head; q, k, v and the attention weights of attention. Those
              rounded inputs are also what the backward pass keeps (the stored activations).
    backward  the gradient that enters every matrix product.
What stays float32: the master weights, AdamW's moments, the residual stream, the norms and the
softmax (torch.autocast keeps those in float32 too), the loss and the weight gradients.

The two 16-bit formats (1 sign bit, e exponent bits, m mantissa bits):

    format  e  m   largest     smallest normal   relative step
    fp16    5  10  65504       6.1e-5 (2^-14)    2^-11 ~ 4.9e-4   (subnormals down to 6e-8)
    bf16    8  7   3.4e38      1.2e-38           2^-8  ~ 3.9e-3

bf16 keeps float32's exponent (its range) and drops mantissa; fp16 keeps more mantissa but its range
is small: a gradient below ~6e-8 becomes exactly 0 ("underflow") and a value above 65504 becomes
inf. Hence **loss scaling** for fp16 (``GradScaler``): multiply the loss gradient by a large S
before the backward pass, so the small gradients land inside fp16's range, and divide the weight
gradients by S before the optimizer sees them. If S was too large, some gradient overflowed to inf:
that step is skipped and S halved; after ``growth_interval`` clean steps S is doubled again.

    >>> round_to(np.array([1 + 2**-9, 1 + 3 * 2**-9, 70000.0], np.float32), "bf16").tolist()
    [1.0, 1.0078125, 70144.0]
    >>> round_to(np.array([1e-8, 70000.0], np.float32), "fp16").tolist()
    [0.0, inf]
"""

import contextlib
import threading

import numpy as np

from zerollm.io.errors import ZeroLLMError

FORMATS = ("bf16", "fp16")
OFF = "off"


# ----------------------------------------------------------------------------
# rounding to a 16-bit format (round to nearest, ties to even), kept in the input's dtype

def round_to(x, fmt):
    """x rounded to the nearest bf16 or fp16 number, returned in x's own float dtype (a new array).

    Both conversions round to nearest with ties to even, as the hardware does: 1 + 2^-8 lies exactly
    between the bf16 numbers 1 and 1 + 2^-7 and goes to 1 (even last bit); overflow gives inf and
    NaN stays NaN.
    """
    x = np.asarray(x)
    if fmt == "bf16":
        return x.astype(_bfloat16()).astype(x.dtype)
    if fmt == "fp16":
        with np.errstate(over="ignore"):           # overflow to inf is the point, not an accident
            return x.astype(np.float16).astype(x.dtype)
    raise ZeroLLMError(f"unknown 16-bit format {fmt!r}; choose one of {', '.join(FORMATS)}")


def _bfloat16():
    """NumPy has no bfloat16; the ml_dtypes package (from the JAX project) adds it."""
    try:
        import ml_dtypes
    except ImportError:
        raise ZeroLLMError('bf16 needs the ml_dtypes package: pip install "zerollm[amp]"') from None
    return ml_dtypes.bfloat16


def check_format(amp):
    """'off' | 'bf16' | 'fp16' -> the format, or None for 'off'; anything else is a ZeroLLMError."""
    if amp == OFF:
        return None
    if amp not in FORMATS:
        raise ZeroLLMError(f"--amp must be one of {OFF}, {', '.join(FORMATS)}; got {amp!r}")
    if amp == "bf16":
        _bfloat16()                                 # fail now, with the install hint, not mid-run
    return amp


# ----------------------------------------------------------------------------
# autocast: the precision setting the layers consult

_active = threading.local()      # per thread, like torch.autocast: data-parallel shards run in threads


@contextlib.contextmanager
def _in_this_thread(name, value):
    """Set the per-thread setting ``name`` to ``value`` inside the block, and back after it."""
    previous = getattr(_active, name, None)
    setattr(_active, name, value)
    try:
        yield
    finally:
        setattr(_active, name, previous)


def autocast(fmt):
    """Inside this block, ``cast`` rounds to ``fmt`` ('bf16' | 'fp16'); ``fmt=None`` is float32."""
    return _in_this_thread("fmt", fmt)


def autocast_format():
    """The 16-bit format ``cast`` rounds to in this thread now, or None (float32)."""
    return getattr(_active, "fmt", None)


def exact_block_products():
    """Inside this block the fast engine multiplies by Q8_0 / Q4_0 weights in float32 (the blocks decoded,
    x as it is), not with x rounded to 8-bit blocks and integer products (llama.cpp's way, ~0.5% off):
    what a model in train mode uses (a QLoRA base), so its gradients are the NumPy reference's.
    zerollm.model.gpt sets it; zerollm.engine.fast.quant reads it. Per thread, like autocast."""
    return _in_this_thread("exact_blocks", True)


def block_products_exact():
    """True inside exact_block_products() in this thread."""
    return bool(getattr(_active, "exact_blocks", False))


def cast(x):
    """What a layer calls on a matrix product's input: x itself in float32 mode (no copy, no cost),
    else x rounded to the active 16-bit format."""
    fmt = getattr(_active, "fmt", None)
    return x if fmt is None else round_to(x, fmt)


# ----------------------------------------------------------------------------
# dynamic loss scaling, with torch.amp.GradScaler's rules

class GradScaler:
    """Dynamic loss scaling for fp16, step for step what ``torch.amp.GradScaler`` does.

    One training step:
        1. backward of (loss * scale)                     (the model multiplies its loss gradient)
        2. found_inf = unscale(grads)                     grads *= 1/scale; any inf or NaN?
        3. if not found_inf: optimizer step               else the step is skipped
        4. update(found_inf):
               found_inf:  scale *= backoff_factor, and the count of clean steps restarts at 0
               else:       one more clean step; after growth_interval of them in a row,
                           scale *= growth_factor (unless that overflows float32) and the count restarts

    The scale is a float32 number, as torch keeps it; 1/scale is rounded to float32 from a float64
    reciprocal, as torch computes it.
    """

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        if not init_scale > 0 or not growth_factor > 1 or not 0 < backoff_factor < 1:
            raise ZeroLLMError("GradScaler needs init_scale > 0, growth_factor > 1 and 0 < backoff_factor < 1")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) or growth_interval < 1:
            raise ZeroLLMError(f"GradScaler growth_interval must be an int >= 1, got {growth_interval!r}")
        self.scale = np.float32(init_scale)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = growth_interval
        self.growth_tracker = 0        # clean steps in a row since the scale last changed
        self.skipped = 0               # steps skipped so far (for the log)

    def unscale(self, grads):
        """Divide every gradient by the scale, in place -> True when some gradient holds inf or NaN."""
        inv_scale = np.float32(1.0 / np.float64(self.scale))
        found_inf = False
        for g in grads.values():
            found_inf = found_inf or not np.isfinite(g).all()
            g *= g.dtype.type(inv_scale)
        return found_inf

    def update(self, found_inf):
        """The new scale after a step that did (found_inf) or did not overflow."""
        if found_inf:
            self.scale = np.float32(np.float64(self.scale) * self.backoff_factor)
            self.growth_tracker = 0
            self.skipped += 1
            return
        self.growth_tracker += 1
        if self.growth_tracker == self.growth_interval:
            with np.errstate(over="ignore"):
                grown = np.float32(np.float64(self.scale) * self.growth_factor)
            if np.isfinite(grown):
                self.scale = grown
            self.growth_tracker = 0

    # -- exact resume ------------------------------------------------------------
    def state_dict(self):
        """JSON-able; a float32 scale survives JSON exactly (it is a float64 with fewer digits)."""
        return {"scale": float(self.scale), "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "growth_tracker": self.growth_tracker, "skipped": self.skipped}

    def load_state_dict(self, state):
        try:
            self.__init__(state["scale"], state["growth_factor"], state["backoff_factor"],
                          state["growth_interval"])
            self.growth_tracker, self.skipped = int(state["growth_tracker"]), int(state["skipped"])
        except (KeyError, TypeError) as err:
            raise ZeroLLMError(f"the checkpoint's loss-scaler state is incomplete ({err}); resume with "
                               "the zerollm version that wrote it") from None
