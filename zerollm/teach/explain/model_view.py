"""The numbers of section 2 of the page: a model reads the user's text.

    view = model_view(model, tok, text, name="runs/shakespeare (step 500)", log_path="runs/shakespeare/log.jsonl")

gives the tokens, every layer's and head's attention weights, the top-5 next-token probabilities at
every position, and the loss curve of the run's log.jsonl. Weights and probabilities travel as
whole numbers of 1/10000 (the page shows 4 decimals), which keeps the page small.

Shapes: T tokens, L layers, nh heads, V vocabulary.
"""

import os
import warnings
from dataclasses import replace

import numpy as np

from zerollm.nn.self_attention import softmax
from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers.char import UnknownCharacters
from zerollm.training.runlog import read_log

MAX_TOKENS = 64        # the page keeps L x nh x T x T weights: 64 tokens of GPT-2 is already ~2 MB
TOP_K = 5
QUANT = 10_000         # weights and probabilities are stored as round(p * QUANT)
MAX_CURVE_POINTS = 400  # per-step losses beyond this are thinned (every k-th step is kept)
VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


# ----------------------------------------------------------------------------
# loading

def load_source(ckpt=None, hf=None):
    """(model in eval mode, tokenizer, display name, log.jsonl path or None) from --ckpt or --hf."""
    from zerollm.interop.opening import Source, open_model
    opened = open_model(Source(ckpt=ckpt, hf=hf))     # a run, a step, a model directory (convert, merge), or HF
    checkpoint = opened.checkpoint
    if checkpoint is None:                           # a model directory: no steps, no log
        return opened.model, opened.tokenizer, opened.name, None
    log = os.path.join(os.path.dirname(checkpoint.path), "log.jsonl")   # RUN/log.jsonl beside RUN/step-N
    return opened.model, opened.tokenizer, opened.name, log if os.path.isfile(log) else None


def naive_twin(model):
    """The same weights in a model that stores its attention weights; (model, True) if it had to switch.

    Flash attention (Dao et al. 2022) never materialises the T x T weights, that is its point; the
    naive path computes the very same function and keeps them.
    """
    if model.config.attn_impl != "flash":
        return model, False
    twin = type(model)(replace(model.config, attn_impl="naive"), init=False)
    return twin.load_state_dict(model.params).eval(), True


# ----------------------------------------------------------------------------
# tokens

def encode_text(tok, text, limit):
    """(ids, n): the first ``limit`` ids of ``text`` and how many the whole text has."""
    if not text:
        raise ZeroLLMError("--text is empty; give at least one character for the model to read")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:      # argv bytes that are not UTF-8 arrive as lone surrogates
        raise ZeroLLMError("--text holds bytes that are not UTF-8 text; give the text in UTF-8") from None
    try:
        ids = tok.encode(text)          # the tokenizer's own verdict (characters added by sft included)
    except UnknownCharacters as err:
        raise ZeroLLMError(err.command_line("--text")) from None
    except ZeroLLMError as err:
        raise ZeroLLMError(f"--text cannot be read by this checkpoint's tokenizer: {err}") from None
    if not ids:
        raise ZeroLLMError("--text encodes to no tokens; give some text the tokenizer can read")
    return ids[:limit], len(ids)


def _raw_bytes(tok, i):
    if hasattr(tok, "token_bytes"):
        return tok.token_bytes(i)
    if getattr(tok, "name", None) == "byte":
        return bytes([i])
    return None


def token_label(tok, i):
    """What the page prints for token ``i``: its text with whitespace made visible, or its bytes
    in hex when it holds part of a UTF-8 character.

    >>> from zerollm.tokenizers import ByteTokenizer
    >>> [token_label(ByteTokenizer(), i) for i in (72, 32, 10, 228)]
    ['H', '␣', '↵', '<e4>']
    """
    if not 0 <= int(i) < tok.vocab_size:     # a padding row of the embedding (Qwen's 151936 rows, 151669 tokens)
        return f"[unused {int(i)}]"
    raw = _raw_bytes(tok, int(i))
    try:
        text = raw.decode("utf-8") if raw is not None else tok.decode([int(i)])
    except UnicodeDecodeError:
        return "".join(f"<{b:02x}>" for b in raw)
    return "".join(VISIBLE.get(c, c) for c in text) or "∅"


# ----------------------------------------------------------------------------
# what the model does with the tokens

def quantize(p):
    """Probabilities -> whole numbers of 1/QUANT, the page's storage (it prints k / QUANT to 4 decimals)."""
    return np.rint(np.asarray(p, dtype=np.float64) * QUANT).astype(np.int64)


def pack(maps, causal):
    """(nh, T, T) weights -> per head one flat list of whole numbers: row after row, and for a causal
    model only the part a query can see (j <= i), since the rest is 0 by construction. Row i then
    starts at i(i+1)/2 instead of i*T, and the page is half the size.

    >>> pack(np.array([[[1.0, 0.0], [0.25, 0.75]]]), causal=True)
    [[10000, 2500, 7500]]
    """
    q = quantize(maps)
    if causal:
        rows, cols = np.tril_indices(q.shape[-1])
        return q[:, rows, cols].tolist()                                # (nh, T(T+1)/2)
    return q.reshape(q.shape[0], -1).tolist()                           # (nh, T*T)


def attention_and_top5(model, ids):
    """(maps, top): maps[l] is (nh, T, T) float attention weights, top is (T, TOP_K) ids and probs."""
    model.eval()
    logits, _ = model.forward(np.array([ids]), keep=True)               # (1, T) -> (1, T, V)
    maps = [w[0] for w in model.attention_weights()]                    # (1, nh, T, T) -> (nh, T, T) per layer
    probs = softmax(logits[0].astype(np.float64), axis=-1)              # (T, V)
    k = min(TOP_K, probs.shape[-1])
    top_ids = np.argsort(-probs, axis=-1, kind="stable")[:, :k]        # (T, k), most likely first
    return maps, top_ids, np.take_along_axis(probs, top_ids, axis=-1)


def _loss_records(path):
    """Records of log.jsonl; a line cut short by a crash is skipped (and counted). A value that was not
    finite is logged as null (strict JSON): such records are left out of the curve."""
    records, bad = read_log(path, count_skipped=True)
    numbers = ("loss", "train_loss", "val_loss")
    return [r for r in records if all(isinstance(r.get(k, 0), (int, float)) for k in numbers)], bad


def loss_curve(path):
    """{"steps": [(step, loss)], "evals": [(step, train, val)]} from log.jsonl, or (None, 0)."""
    if path is None:
        return None, 0
    records, bad = _loss_records(path)
    steps = [(r["step"], round(r["loss"], 4)) for r in records if isinstance(r, dict) and "loss" in r]
    evals = [(r["step"], round(r["train_loss"], 4), round(r["val_loss"], 4))
             for r in records if isinstance(r, dict) and "val_loss" in r and "train_loss" in r]
    every = -(-len(steps) // MAX_CURVE_POINTS) if steps else 1
    thinned = steps[::every] + ([steps[-1]] if steps and (len(steps) - 1) % every else [])
    if not thinned and not evals:
        return None, bad
    return {"steps": thinned, "evals": evals}, bad


# ----------------------------------------------------------------------------
# everything section 2 shows

def model_view(model, tok, text, *, name, log_path=None):
    """The model section's data (JSON-able) and its notes [(key, fields)], also issued as warnings."""
    model, flashed = naive_twin(model)
    cfg = model.config
    limit = min(cfg.block_size, MAX_TOKENS)
    ids, n = encode_text(tok, text, limit)
    notes = []
    if n > len(ids):
        notes.append(("note_truncated", {"n": n, "T": len(ids), "ctx": cfg.block_size, "max": MAX_TOKENS}))
    if flashed:
        notes.append(("note_flash", {}))
    if not cfg.causal:
        notes.append(("note_bidirectional", {}))
    maps, top_ids, top_p = attention_and_top5(model, ids)
    curve, bad = loss_curve(log_path)
    if bad:
        notes.append(("note_log_broken", {"n": bad}))
    labels = {i: token_label(tok, i) for i in set(ids) | set(top_ids.ravel().tolist())}
    view = {
        "name": name,
        "facts": {"n_layer": cfg.n_layer, "n_head": cfg.n_head, "n_embd": cfg.n_embd,
                  "block_size": cfg.block_size, "tokenizer": getattr(tok, "name", type(tok).__name__),
                  "T": len(ids)},
        "causal": bool(cfg.causal),
        "ids": [int(i) for i in ids],
        "tokens": [labels[i] for i in ids],
        "att": [pack(m, cfg.causal) for m in maps],                          # [L][nh][T(T+1)/2 or T*T]
        "top_tokens": [[labels[i] for i in row] for row in top_ids.tolist()],  # (T, k)
        "top_ids": top_ids.tolist(),
        "top_p": quantize(top_p).tolist(),                                     # (T, k)
        "loss": curve,
        "notes": [{"key": k, "fields": f} for k, f in notes],
    }
    return view, notes


def warn_notes(notes, say):
    """Each note once on stderr (the CLI prints warnings as one line), in the page's language."""
    for key, fields in notes:
        warnings.warn(say(key, **fields), stacklevel=2)
