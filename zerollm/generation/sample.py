"""Choosing the next token from logits: temperature, top-k, top-p, min-p and the repetition penalties.

    sampling = Sampling(temperature=0.8, top_k=40)
    ids = choose(logits, rng, sampling)       # (B, V) -> (B,), one uniform number per row from rng

The draw is inverse-CDF sampling in float64 (draw_exact); ``draw`` finds the same ids with float32 exp and
block sums, drawing a row again in float64 only where float32 could have picked another id.

The one decode loop that calls it step after step is zerollm.generation.batching.Scheduler.
"""

from dataclasses import dataclass

import numpy as np

from zerollm.engine import accelerated
from zerollm.io.argtypes import Range
from zerollm.nn.self_attention import softmax
from zerollm.io.errors import ZeroLLMError


# ----------------------------------------------------------------------------
# choosing the next token from logits

def filter_logits(logits, top_k=None, top_p=None, min_p=None):
    """Hide (set to -inf) every logit outside the top-k, outside the top-p nucleus, and below min-p.

    top-k keeps the k largest logits; top-p (Holtzman et al. 2019) keeps the smallest set of tokens
    whose probabilities add up to at least p; min-p (Nguyen et al. 2024) keeps the tokens whose
    probability is at least min_p times the most likely token's. logits: (B, V) -> (B, V).
    """
    logits = np.array(logits, dtype=np.float64)
    V = logits.shape[-1]
    if top_k is not None and top_k < V:
        kth = np.partition(logits, V - top_k, axis=-1)[:, V - top_k][:, None]   # (B, 1) k-th largest
        logits[logits < kth] = -np.inf
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-logits, axis=-1)                                     # (B, V) best first
        probs = softmax(np.take_along_axis(logits, order, axis=-1))
        before = np.cumsum(probs, axis=-1) - probs        # mass of the better tokens
        drop_sorted = before >= top_p                     # already reached p without this token
        drop = np.zeros_like(drop_sorted)
        np.put_along_axis(drop, order, drop_sorted, axis=-1)
        logits[drop] = -np.inf
    if min_p is not None and min_p > 0:
        # p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p): no softmax needed
        logits[logits < logits.max(axis=-1, keepdims=True) + np.log(min_p)] = -np.inf
    return logits


def penalize(logits, counts, seen=None, *, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0):
    """Logits made less (or more) keen on ids already there. logits, counts: (B, V) -> (B, V) float64.

    counts[b, i]: how often row b has generated id i so far; seen[b, i]: id i is in row b's prompt.
    - repetition_penalty r (Keskar et al. 2019, CTRL; as transformers' RepetitionPenaltyLogitsProcessor):
      every id in the prompt or the output so far has its logit divided by r when positive, multiplied
      by r when negative, so r > 1 always makes it less likely.
    - presence_penalty a and frequency_penalty f (OpenAI's definitions): over the OUTPUT so far,
      logit_i -= a * [counts_i > 0] + f * counts_i.
    """
    logits = np.array(logits, dtype=np.float64)
    counts = np.asarray(counts)
    if repetition_penalty != 1.0:
        there = counts > 0 if seen is None else (counts > 0) | seen
        scaled = np.where(logits < 0, logits * repetition_penalty, logits / repetition_penalty)
        logits = np.where(there, scaled, logits)
    if presence_penalty or frequency_penalty:
        logits -= presence_penalty * (counts > 0) + frequency_penalty * counts
    return logits


# a temperature below this is greedy: dividing the logits by 1e-320 would make them infinite (NaN
# probabilities), and below 1e-5 the most likely token wins every draw anyway (as vLLM does)
GREEDY_BELOW = 1e-5
# repetition_penalty's range: a logit divided by less than 0.01 could overflow in the same way
PENALTY_RANGE = (0.01, 100.0)


def sample_next(logits, rng, temperature=1.0, top_k=None, top_p=None, min_p=None):
    """(B, V) logits -> (B,) ids. temperature 0 (or below GREEDY_BELOW) means greedy (argmax). ``rng``:
    one generator for all rows, or a list of one per row (then row b's draw depends on rngs[b] only)."""
    if temperature < GREEDY_BELOW:
        return np.argmax(logits, axis=-1)
    # inverse-CDF sampling with one uniform number per row: reproducible from the rng alone
    if isinstance(rng, (list, tuple)):
        u = np.array([r.random() for r in rng])                           # (B,) each from its own row's
    else:
        u = rng.random((np.shape(logits)[0], 1))[:, 0]
    if top_k is None and top_p is None and min_p is None:
        return draw(logits, u, temperature)
    return draw(_scaled(logits, temperature, top_k, top_p, min_p), u)


def _scaled(logits, temperature, top_k, top_p, min_p):
    """(B, V) logits -> (B, V) float64 logits / temperature, filtered (temperature >= GREEDY_BELOW)."""
    scaled = np.divide(logits, temperature, dtype=np.float64)        # one pass: cast and divide (a new array)
    if top_k is not None or top_p is not None or min_p is not None:
        scaled = filter_logits(scaled, top_k, top_p, min_p)
    return scaled


def _probabilities(logits, temperature, top_k, top_p, min_p):
    """(B, V) logits -> (B, V) the distribution sample_next draws from (temperature >= GREEDY_BELOW)."""
    scaled = _scaled(logits, temperature, top_k, top_p, min_p)
    return softmax(scaled, out=scaled)


def draw_exact(scaled, u):
    """(B, V) float64 logits (temperature and filters applied), (B,) uniform numbers -> (B,) ids by inverse-CDF
    sampling in float64: the first id whose cumulative probability reaches u. This defines the ids a seed
    gives; ``draw`` gives the same ids faster."""
    probs = softmax(scaled.copy())
    # the CDF never decreases, so a binary search finds the first id at or above u
    cdf = np.cumsum(probs, axis=-1, out=probs)
    ids = np.array([np.searchsorted(row, x, side="left") for row, x in zip(cdf, u)], dtype=np.int64)
    return np.minimum(ids, probs.shape[-1] - 1)


# draw's shortcut: float64 exp and a sequential cumsum over every id of every row were most of the sampler
# (three quarters of it at 16 rows of a 5,713-id vocabulary; numpy's float64 exp is not vectorised without
# AVX-512). float32 exp and float32 sums of BLOCK ids find the id instead; where u falls within the margin
# (_margin) of that id's cumulative bounds, the row is drawn again by draw_exact. Outside it both give the
# same id; on a nearly flat distribution (a small model's, every id near 1/V) a few percent of the rows fall
# inside it. tests/test_sample_draw.py checks the ids against draw_exact's, at the margins too.
BLOCK = 8
_ONES = np.ones(BLOCK, np.float32)        # the blocks' sums as one matrix-vector product
_U32 = 2.0 ** -24                         # float32's unit roundoff


def _margin(V, m, temperature):
    """(B, 1) max logits -> (B,) how far the float32 CDF may be from draw_exact's, bounded: the exponent z =
    (logit - max) / temperature with three float32 roundings (3 u |z|; over the probabilities the mean |z| is
    at most the entropy, <= ln V); float32 exp within 4 ulps (8 u); a block's float32 sum, BLOCK - 1 roundings;
    float64's own rounding of logit / temperature (|max| / temperature * 2^-51). Twice that once divided by
    the total mass (both sides move)."""
    per = 3 * _U32 * np.log(V) + 8 * _U32 + (BLOCK - 1) * _U32 + np.abs(m[:, 0]) / temperature * 2.0 ** -51
    return 2 * per + 1e-12


@accelerated
def draw_shortcut(x, u, temperature):
    """(B, V) float32 or float64 logits, (B,) float64 uniform numbers -> ((B,) ids, (B,) sure): the ids found
    with float32 exp and float32 sums of BLOCK ids (see BLOCK above), and whether each is certainly the one
    draw_exact gives (u farther than the margin from its cumulative bounds). ``draw`` draws the others again.
    The fast engine's kernel (zerollm.engine.fast.sampler) does a row in one pass over its logits."""
    B, V = x.shape
    nb = -(-V // BLOCK)
    m = x.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0                                     # an all -inf row: exp gives zeros, no NaN
    e = np.zeros((B, nb * BLOCK), np.float32)                  # padded with zeros to whole blocks
    z = e[:, :V]
    np.subtract(x, m, out=z, casting="same_kind")              # float32 logits: float32 throughout
    if temperature != 1.0:
        z *= np.float32(1 / temperature)
    np.exp(z, out=z)
    e = e.reshape(B, nb, BLOCK)
    cum = np.cumsum(e @ _ONES, axis=-1, dtype=np.float64)                            # (B, nb) mass up to each block's end
    total = cum[:, -1]
    target = u * total
    b = np.minimum((cum < target[:, None]).sum(axis=-1), nb - 1)                    # the block reaching the target
    rows = np.arange(B)
    before = np.where(b > 0, cum[rows, b - 1], 0.0)                                  # (B,) mass before that block
    inside = before[:, None] + np.cumsum(e[rows, b], axis=-1, dtype=np.float64)      # (B, BLOCK)
    j = np.minimum((inside < target[:, None]).sum(axis=-1), BLOCK - 1)               # the id within the block
    lower = np.where(j > 0, inside[rows, j - 1], before)                             # cumulative mass before the id
    upper = inside[rows, j]                                                          # ... and up to it
    ids = b * BLOCK + j
    margin = _margin(V, m, temperature) * total
    return ids, (lower < target - margin) & (upper >= target + margin) & (ids < V)


def draw(logits, u, temperature=1.0):
    """(B, V) logits, (B,) uniform numbers -> (B,) ids: those draw_exact gives for the float64 logits / temperature,
    without float64 exp or a cumsum over the whole row (see BLOCK above)."""
    x = np.asarray(logits)
    if x.dtype.itemsize < 4:                                   # float16, bfloat16: exactly in float32
        x = x.astype(np.float32)
    u = np.asarray(u, np.float64)
    ids, sure = draw_shortcut(x, u, temperature)
    unsure = np.flatnonzero(~sure)                             # near a boundary, or NaN, or nothing to draw
    if len(unsure):
        ids[unsure] = draw_exact(np.divide(x[unsure], temperature, dtype=np.float64), u[unsure])
    return ids


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen; ``choose`` applies it. The defaults leave the model's distribution
    as it is (temperature 1, no filter, no penalty)."""
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    def __post_init__(self):
        check_sampling_args(self.temperature, self.top_k, self.top_p, self.min_p, self.repetition_penalty,
                            self.presence_penalty, self.frequency_penalty)

    @property
    def penalized(self):
        return self.repetition_penalty != 1.0 or bool(self.presence_penalty) or bool(self.frequency_penalty)


def choose(logits, rng, sampling, counts=None, seen=None, allowed=None):
    """(B, V) logits -> (B,) ids: penalties (``counts``/``seen`` as in penalize), then the ``allowed``
    ids only, then temperature, top-k, top-p, min-p and one uniform number per row from ``rng`` (one
    generator, or one per row as in sample_next)."""
    s = sampling
    return sample_next(_processed(logits, s, counts, seen, allowed), rng, s.temperature, s.top_k, s.top_p, s.min_p)


def probabilities(logits, sampling, counts=None, seen=None, allowed=None):
    """(B, V) logits -> (B, V) the distribution ``choose`` draws from with the same arguments; greedy
    (temperature below GREEDY_BELOW): all the mass on the id choose picks. Speculative decoding's
    acceptance rule (zerollm.generation.batching) needs it whole, not one draw from it."""
    logits = _processed(logits, sampling, counts, seen, allowed)
    if sampling.temperature < GREEDY_BELOW:
        probs = np.zeros(logits.shape)
        np.put_along_axis(probs, np.argmax(logits, axis=-1)[:, None], 1.0, axis=-1)
        return probs
    return _probabilities(logits, sampling.temperature, sampling.top_k, sampling.top_p, sampling.min_p)


def _processed(logits, sampling, counts, seen, allowed):
    """The logits after the penalties and the ``allowed`` mask: what temperature and the filters act on."""
    s = sampling
    if s.penalized:
        logits = penalize(logits, counts, seen, repetition_penalty=s.repetition_penalty,
                          presence_penalty=s.presence_penalty, frequency_penalty=s.frequency_penalty)
    if allowed is not None:
        logits = np.where(allowed, logits, -np.inf)
    return logits


def check_sampling_args(temperature, top_k, top_p, min_p=None, repetition_penalty=1.0, presence_penalty=0.0,
                        frequency_penalty=0.0):
    if not temperature >= 0:
        raise ZeroLLMError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ZeroLLMError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ZeroLLMError(f"top_p must be in (0, 1], got {top_p}")
    if min_p is not None and not 0 <= min_p <= 1:
        raise ZeroLLMError(f"min_p must be in [0, 1], got {min_p}")
    if not PENALTY_RANGE[0] <= repetition_penalty <= PENALTY_RANGE[1]:
        raise ZeroLLMError(f"repetition_penalty must be in [{PENALTY_RANGE[0]:g}, {PENALTY_RANGE[1]:g}] (1 = none, "
                           f"> 1 discourages repeats), got {repetition_penalty}")
    for name, value in (("presence_penalty", presence_penalty), ("frequency_penalty", frequency_penalty)):
        if not -2 <= value <= 2:
            raise ZeroLLMError(f"{name} must be in [-2, 2] (0 = none), got {value}")


def token_counts(ids, vocab_size):
    """(B, T) ids -> (B, V) how often each id occurs in each row."""
    ids = np.atleast_2d(np.asarray(ids, dtype=np.int64))
    counts = np.zeros((ids.shape[0], vocab_size), dtype=np.int64)
    np.add.at(counts, (np.arange(ids.shape[0])[:, None], ids), 1)
    return counts


def add_penalty_arguments(p):
    """--min-p and the three repetition penalties (zerollm.generation.sample.penalize), for `zerollm sample`, `chat`, `serve`."""
    p.add_argument("--min-p", type=Range(float, 0, 1), default=None,
                   help="keep only tokens at least this fraction as likely as the most likely one")
    p.add_argument("--repetition-penalty", type=Range(float, *PENALTY_RANGE), default=1.0,
                   help="divide the logit of every id already in the text by this (1 = off; as transformers)")
    p.add_argument("--presence-penalty", type=Range(float, -2, 2), default=0.0,
                   help="subtract this from the logit of every id already generated (as OpenAI's)")
    p.add_argument("--frequency-penalty", type=Range(float, -2, 2), default=0.0,
                   help="subtract this times its count from the logit of every id generated (as OpenAI's)")


def sampling_of(args):
    """The zerollm.generation.sample.Sampling the command-line flags describe."""
    return Sampling(args.temperature, args.top_k, args.top_p, args.min_p, args.repetition_penalty,
                    args.presence_penalty, args.frequency_penalty)
