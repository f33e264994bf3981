"""AdamW, gradient clipping and the warmup + cosine learning-rate schedule.

Parameters and gradients are dicts of NumPy arrays with the same names and shapes, e.g.
{"wte.weight": (V, C), "h.0.ln_1.bias": (C,), ...}. The optimizer updates the parameter arrays
IN PLACE, so the model that holds them sees the new values without any copying.

Gradient accumulation needs nothing special here: the training loop sums the gradients of
several micro-batches into one dict and passes that to ``clip_grad_norm`` and ``AdamW.step``.
"""

import math
import numbers
import threading
from typing import NamedTuple

import numpy as np

from zerollm.engine import accelerated
from zerollm.engine.memory import cache_blocks
from zerollm.engine.threads import by_name_in_parts
from zerollm.io.errors import ZeroLLMError


# ----------------------------------------------------------------------------
# AdamW

def default_decay(name, p):
    """Decay matrices and embeddings (ndim >= 2), not biases or norm gains (nanoGPT's rule).

    Shrinking a bias or a LayerNorm gain toward 0 does not make the model simpler, it only
    fights the normalisation, so these are left alone. Stacked experts' biases (E, out) are 2-D
    but still biases: the name decides.
    """
    return p.ndim >= 2 and not name.endswith(".bias")


class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019), as torch.optim.AdamW.

    With gradient g at step t (counting from 1), for each parameter p:

        p <- p * (1 - lr * wd)                   decay the weights directly (decoupled), only
                                                 for names chosen by ``decay``
        m <- b1 * m + (1 - b1) * g               running mean of gradients  (Kingma & Ba 2015)
        v <- b2 * v + (1 - b2) * g^2             running mean of squared gradients
        p <- p - lr/(1 - b1^t) * m / (sqrt(v)/sqrt(1 - b2^t) + eps)
                                                 the (1 - b^t) terms undo the bias of m, v
                                                 starting at 0

    ``decay``: None (matrices/embeddings only), a set of names, or a predicate f(name, p) -> bool.
    Moments are kept in each parameter's dtype; every step runs without allocating new arrays.

    >>> params = {"w": np.ones((2, 2)), "b": np.zeros(2)}
    >>> opt = AdamW(params, lr=0.1, weight_decay=0.1)
    >>> opt.step({"w": np.ones((2, 2)), "b": -np.ones(2)})
    >>> params["w"].round(6).tolist(), params["b"].round(6).tolist()   # 1*(1-0.01) - 0.1; 0 + 0.1
    ([[0.89, 0.89], [0.89, 0.89]], [0.1, 0.1])
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decay=None):
        _check_params(params)
        self.params = params
        self._set_hyperparams(lr, betas, eps, weight_decay)
        self.decay_names = _decay_names(params, decay)
        self.step_count = 0
        self.m = {name: np.zeros_like(p) for name, p in params.items()}   # first moment
        self.v = {name: np.zeros_like(p) for name, p in params.items()}   # second moment
        # scratch for the NumPy steps: one buffer per dtype (and per thread that updates), as large as
        # the largest parameter, made at the first step and reused by every later one
        self._largest = {}
        for p in params.values():
            self._largest[p.dtype] = max(p.size, self._largest.get(p.dtype, 0))
        self._scratch = {}          # thread id -> dtype -> buffer

    def _set_hyperparams(self, lr, betas, eps, weight_decay):
        b1, b2 = _check_betas(betas)
        for name, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not value >= 0:
                raise ZeroLLMError(f"AdamW {name} must be a number >= 0, got {value!r}")
        self.lr, self.betas, self.eps, self.weight_decay = float(lr), (b1, b2), float(eps), float(weight_decay)

    # ------------------------------------------------------------------
    def step(self, grads, lr=None, pool=None):
        """One update of every parameter, in place. ``lr`` overrides self.lr for this step only.
        ``pool``: a zerollm.engine.threads.ThreadPool whose threads share the parameters among them (with
        --threads N the update runs on N cores; every parameter's update is the same)."""
        _check_grads(self.params, grads)
        lr = self.lr if lr is None else float(lr)
        self.step_count += 1
        t, (b1, b2) = self.step_count, self.betas
        decayed = AdamWStep(lr=lr, betas=(b1, b2), eps=self.eps, weight_decay=self.weight_decay,
                            step_size=lr / (1 - b1 ** t),           # bias correction of m, folded into lr
                            bc2_sqrt=math.sqrt(1 - b2 ** t))       # bias correction of v, under the sqrt
        plain = decayed._replace(weight_decay=0.0)

        def update(name):
            p = self.params[name]
            step = decayed if name in self.decay_names else plain
            adamw_update(p, grads[name], self.m[name], self.v[name], self._buffer(p), step)
        by_name_in_parts(pool, self.params, update)

    def _buffer(self, p):
        """This thread's scratch of p's shape and dtype."""
        mine = self._scratch.setdefault(threading.get_ident(), {})
        if p.dtype not in mine:
            mine[p.dtype] = np.empty(self._largest[p.dtype], dtype=p.dtype)
        return mine[p.dtype][:p.size].reshape(p.shape)

    # ------------------------------------------------------------------
    def state_dict(self):
        """Everything needed to resume: step, moments and hyperparameters.

        Like torch, "m" and "v" hold the LIVE moment arrays (no copy of a large model's
        state); save them before the next ``step`` if you keep the dict.
        """
        return {"step": self.step_count, "lr": self.lr, "betas": list(self.betas), "eps": self.eps,
                "weight_decay": self.weight_decay, "decay": sorted(self.decay_names),
                "m": self.m, "v": self.v}

    def load_state_dict(self, sd):
        """Restore a ``state_dict()``: moments are copied into this optimizer's own arrays."""
        missing = sorted({"step", "lr", "betas", "eps", "weight_decay", "decay", "m", "v"} - set(sd))
        if missing:
            raise ZeroLLMError(f"optimizer state lacks {missing}; it was not saved by zerollm's AdamW")
        for key in ("m", "v"):
            _check_same_arrays(self.params, sd[key], f"optimizer state '{key}'")
        step = sd["step"]
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ZeroLLMError(f"optimizer state step must be an int >= 0, got {step!r}")
        unknown = sorted(set(sd["decay"]) - set(self.params))
        if unknown:
            raise ZeroLLMError(f"optimizer state decays unknown parameters {unknown}")
        self._set_hyperparams(sd["lr"], sd["betas"], sd["eps"], sd["weight_decay"])
        self.decay_names = frozenset(sd["decay"])
        self.step_count = step
        for name in self.params:
            np.copyto(self.m[name], sd["m"][name])
            np.copyto(self.v[name], sd["v"][name])


class AdamWStep(NamedTuple):
    """The numbers of one AdamW step of one parameter (all but weight_decay are the same for every parameter)."""
    lr: float
    betas: tuple            # (b1, b2)
    eps: float
    weight_decay: float     # 0.0 for the parameters that are not decayed
    step_size: float        # lr / (1 - b1^t): the bias correction of m, folded into lr
    bc2_sqrt: float         # sqrt(1 - b2^t): the bias correction of v, under the sqrt


@accelerated
def adamw_update(p, g, m, v, buf, step):
    """One AdamW update of one parameter, in place in p, m and v; ``buf`` is scratch of p's shape and
    ``step`` an AdamWStep.

    Speed: the thirteen steps below run block by block (engine.memory.cache_blocks), so that a block of
    p, g, m, v and buf stays in the CPU cache from the first step to the last.
    """
    arrays = (p, g, m, v, buf)
    if not all(a.flags.c_contiguous and a.shape == p.shape for a in arrays):
        return _adamw_steps(*arrays, step)
    flat = [a.reshape(-1) for a in arrays]                     # views: every array is C-contiguous
    for part in cache_blocks(p.size, p.itemsize):
        _adamw_steps(*(a[part] for a in flat), step)


def _adamw_steps(p, g, m, v, buf, step):
    lr, (b1, b2), eps, weight_decay, step_size, bc2_sqrt = step
    # 1. decoupled weight decay: not added to g, so Adam's scaling does not weaken it
    if weight_decay:
        p *= 1 - lr * weight_decay
    # 2. m = b1*m + (1-b1)*g
    m *= b1
    np.multiply(g, 1 - b1, out=buf)
    m += buf
    # 3. v = b2*v + (1-b2)*g*g
    v *= b2
    np.multiply(g, g, out=buf)
    buf *= 1 - b2
    v += buf
    # 4. p -= step_size * m / (sqrt(v)/sqrt(1-b2^t) + eps)
    np.sqrt(v, out=buf)
    buf /= bc2_sqrt
    buf += eps
    np.divide(m, buf, out=buf)
    buf *= step_size
    p -= buf


def _check_params(params):
    if not isinstance(params, dict) or not params:
        raise ZeroLLMError("AdamW needs a non-empty dict of name -> parameter array")
    for name, p in params.items():
        if not isinstance(p, np.ndarray) or not np.issubdtype(p.dtype, np.floating):
            raise ZeroLLMError(f"parameter {name!r} must be a float NumPy array, got "
                               f"{getattr(p, 'dtype', type(p).__name__)}")
        if not p.flags.writeable:
            raise ZeroLLMError(f"parameter {name!r} is read-only (e.g. loaded with mmap=True); "
                               "load the weights with mmap=False to train them")


def _check_betas(betas):
    try:
        b1, b2 = (float(b) for b in betas)
    except (TypeError, ValueError):
        raise ZeroLLMError(f"AdamW betas must be two numbers, got {betas!r}") from None
    if not (0 <= b1 < 1 and 0 <= b2 < 1):
        raise ZeroLLMError(f"AdamW betas must be in [0, 1), got {betas!r} (typical: 0.9, 0.95)")
    return b1, b2


def _decay_names(params, decay):
    if decay is None:
        decay = default_decay
    if callable(decay):
        return frozenset(name for name, p in params.items() if decay(name, p))
    names = frozenset([decay] if isinstance(decay, str) else decay)
    unknown = sorted(names - set(params))
    if unknown:
        raise ZeroLLMError(f"decay names {unknown} are not parameters; check the spelling against "
                           f"the model's names, e.g. {sorted(params)[:4]}")
    return names


def _check_same_arrays(params, arrays, what):
    """``arrays`` must have exactly the names and shapes of ``params``."""
    if not isinstance(arrays, dict):
        raise ZeroLLMError(f"{what} must be a dict of name -> array, got {type(arrays).__name__}")
    if arrays.keys() != params.keys():
        missing, extra = sorted(params.keys() - arrays.keys()), sorted(arrays.keys() - params.keys())
        raise ZeroLLMError(f"{what} does not match the parameters: missing {missing}, unexpected "
                           f"{extra}; it belongs to a different model")
    for name, p in params.items():
        shape = np.shape(arrays[name])
        if shape != p.shape:
            raise ZeroLLMError(f"{what}: {name!r} has shape {shape}, the parameter has {p.shape}")


def _check_grads(params, grads):
    _check_same_arrays(params, grads, "grads")


# ----------------------------------------------------------------------------
# gradient clipping

def clip_grad_norm(grads, max_norm, pool=None):
    """Scale all gradients together so their global L2 norm is at most ``max_norm``; return the norm.

    norm = sqrt(sum over every gradient entry of g^2). When max_norm / (norm + 1e-6) < 1 every
    gradient is multiplied by that factor, in place (torch.nn.utils.clip_grad_norm_'s formula).
    One global factor keeps the update's direction; only its length shrinks (Pascanu et al. 2013).
    A non-finite norm (a NaN/inf gradient) is returned as is and nothing is scaled: the
    training loop should skip that step. ``pool``: a zerollm.engine.threads.ThreadPool whose threads
    share the gradients among them (the same norm: the per-array sums are added in the dict's order).

    >>> g = {"a": np.array([3.0]), "b": np.array([4.0])}
    >>> clip_grad_norm(g, 1.0), g["a"].round(6), g["b"].round(6)
    (5.0, array([0.6]), array([0.8]))
    """
    if isinstance(max_norm, bool) or not isinstance(max_norm, numbers.Real) or not max_norm > 0:
        raise ZeroLLMError(f"max_norm must be a number > 0, got {max_norm!r} (typical: 1.0)")
    total = sum(by_name_in_parts(pool, grads, lambda name: sum_of_squares(grads[name])).values())
    norm = math.sqrt(total)
    coef = max_norm / (norm + 1e-6)
    if math.isfinite(norm) and coef < 1:
        def scale(name):
            g = grads[name]
            g *= coef
        by_name_in_parts(pool, grads, scale)
    return norm


@accelerated
def sum_of_squares(g, block=4096):
    """sum(g ** 2) as a Python float, accurate for millions of float32 entries.

    A plain float32 sum over millions of entries drifts by ~1e-5 relative; a float64 one is slow
    (every entry is converted). Here blocks of ``block`` entries are summed in g's dtype (short sums:
    small error) and the block sums are added in float64.
    """
    flat = g.reshape(-1)
    n = flat.size - flat.size % block
    blocks = flat[:n].reshape(-1, block)                       # (n / block, block)
    head = np.einsum("ij,ij->i", blocks, blocks).sum(dtype=np.float64)
    tail = flat[n:]
    return float(head) + float(np.dot(tail.astype(np.float64), tail.astype(np.float64)))


# ----------------------------------------------------------------------------
# learning-rate schedule

def lr_at(step, *, lr, min_lr, warmup_iters, decay_iters):
    """Learning rate at ``step`` (0-based): linear warmup, cosine decay, then constant min_lr.

        step < warmup_iters:             lr * (step + 1) / (warmup_iters + 1)   (nanoGPT's warmup)
        warmup_iters <= step < decay:    min_lr + (lr - min_lr) * (1 + cos(pi * r)) / 2,
                                         r = (step - warmup_iters) / (decay_iters - warmup_iters)
        step >= decay_iters:             min_lr

    Warmup keeps the first updates small while Adam's v is still a poor estimate; cosine decay
    (Loshchilov & Hutter 2017, SGDR) anneals smoothly from lr at the end of warmup to min_lr.

    >>> [round(lr_at(s, lr=1.0, min_lr=0.1, warmup_iters=4, decay_iters=8), 4) for s in (0, 3, 4, 6, 8, 9)]
    [0.2, 0.8, 1.0, 0.55, 0.1, 0.1]
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ZeroLLMError(f"step must be an int >= 0, got {step!r}")
    if not 0 <= min_lr <= lr:
        raise ZeroLLMError(f"need 0 <= min_lr <= lr, got min_lr={min_lr}, lr={lr}")
    if not 0 <= warmup_iters <= decay_iters:
        raise ZeroLLMError(f"need 0 <= warmup_iters <= decay_iters, got warmup_iters={warmup_iters}, "
                           f"decay_iters={decay_iters} (decay_iters is usually max_iters)")
    if step < warmup_iters:
        return lr * (step + 1) / (warmup_iters + 1)
    if step >= decay_iters:
        return min_lr
    ratio = (step - warmup_iters) / (decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)
