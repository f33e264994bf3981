"""Grammar-constrained decoding: index build time and per-step mask cost, zerollm beside outlines-core and
xgrammar on the same pattern and vocabulary, in one run (docs/structured.md has the table).

    python benchmarks/grammar.py                  # GPT-2-sized (50,257 ids) and zerollm's own BPE
    python benchmarks/grammar.py --steps 200

Vocabularies, built offline: "gpt2-size" is a byte-level BPE trained with the `tokenizers` package on the
two shipped corpora, then filled up to 50,257 ids with made-up merges (two existing tokens joined) where
the corpora run out of pairs: what matters to an index is the number of ids and their byte lengths.
"zerollm-bpe" is zerollm's own BPE (4,096 ids) learnt on tiny Shakespeare.

Columns, each in milliseconds:
- compile: the pattern to its automaton (zerollm: regex -> byte DFA; xgrammar: its grammar compiler, which
  builds its token masks ahead; outlines-core: included in its index);
- first mask: zerollm's index made lazily: compile + the start state's row, what the first token waits for;
- full index: every state's row (zerollm), outlines-core's Index (always whole);
- mask/step: one step of a random walk through the grammar: the (V,) mask of allowed ids, then advance by
  the chosen token (zerollm: allowed + next_state, rows already made; outlines-core: get_allowed_tokens into
  a mask + get_next_state; xgrammar: fill_next_token_bitmask + accept_token);
- the decode step it is set against: one token of the 124M-shape GPT (12 layers, 768 wide, 50,257 ids) with
  its KV cache, zerollm's NumPy engine.
"""

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time

import numpy as np

from zerollm.data import corpora
from zerollm.generation.grammar import grammar_for_regex, regex_for_schema
from zerollm.generation.grammar.index import TokenIndex, Vocab, token_pieces
from zerollm.io import docsmode

SCHEMAS = {
    "person": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 32},
                                                "age": {"type": "integer"}, "email": {"type": "string"},
                                                "role": {"enum": ["admin", "user", "guest"]}},
               "required": ["name", "age", "role"]},
    "order": {"type": "object", "properties": {
        "id": {"type": "string", "format": "uuid"},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string", "pattern": "[A-Z]{3}-[0-9]{4}"}, "qty": {"type": "integer"},
            "price": {"type": "number"}}, "required": ["sku", "qty", "price"]}, "minItems": 1, "maxItems": 5},
        "paid": {"type": "boolean"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["id", "items", "paid"]},
}
REGEXES = {"date-time": r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z",
           "email": r"[a-z0-9._]{1,20}@[a-z0-9]{1,12}\.(com|org|net)"}
GPT2_SIZE = 50_257


# ----------------------------------------------------------------------------
# vocabularies

def gpt2_size_pieces(size=GPT2_SIZE, chars=None, seed=0):
    """[bytes] of a byte-level BPE with ``size`` ids (the last one <|endoftext|>, as GPT-2's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from zerollm.tokenizers.hf import bytes_to_unicode
    text = corpora.read_text("shakespeare") + corpora.read_text("tang")
    text = text if chars is None else text[:chars]
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator([text], trainers.BpeTrainer(vocab_size=size - 1, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    back = {c: b for b, c in bytes_to_unicode().items()}
    vocab = sorted(hf.get_vocab().items(), key=lambda kv: kv[1])
    pieces = [bytes(back[c] for c in token) for token, _ in vocab]
    seen, rng = set(pieces), random.Random(seed)
    while len(pieces) < size - 1:                      # the corpora ran out of pairs: made-up merges
        joined = rng.choice(pieces) + rng.choice(pieces)
        if len(joined) <= 16 and joined not in seen:
            seen.add(joined)
            pieces.append(joined)
    return pieces + [None]                             # the last id: <|endoftext|>, no text


def zerollm_bpe_pieces(size, chars):
    from zerollm.tokenizers.bpe import BPETokenizer
    tok = BPETokenizer.train(corpora.read_text("shakespeare")[:chars], size)
    return token_pieces(tok)


# ----------------------------------------------------------------------------
# the three libraries, one pattern and one vocabulary each

def _ms(start):
    return (time.perf_counter() - start) * 1000


def walk_tokens(index, steps, rng):
    """A random walk of allowed ids through zerollm's index (restarting at the start when complete)."""
    out, state = [], index.start
    for _ in range(steps):
        ids = index.row(state).ids
        if len(ids) == 0:
            out.append(None)
            state = index.start
            continue
        t = int(ids[rng.integers(len(ids))])
        out.append(t)
        state = index.next_state(state, t)
    return out


def ours(pattern, vocab, end, steps, seed):
    start = time.perf_counter()
    grammar = grammar_for_regex.__wrapped__(pattern)            # not the cache: its compile is measured
    compile_ms = _ms(start)
    index = TokenIndex(grammar.dfa, vocab)
    index.row(index.start)
    first_ms = _ms(start)
    start = time.perf_counter()
    full = TokenIndex(grammar.dfa, vocab)
    for s in range(0, grammar.dfa.n_states, 64):               # every state's row, 64 states a walk
        chunk = np.arange(s, min(s + 64, grammar.dfa.n_states))
        after = full.walk(chunk)
        for k, state in enumerate(chunk):
            full.rows[int(state)] = full._row_from(after[k])
    full_ms = _ms(start)
    tokens = walk_tokens(full, steps, np.random.default_rng(seed))
    start, state = time.perf_counter(), full.start
    for t in tokens:
        full.allowed(state, (end,))
        state = full.start if t is None else full.next_state(state, t)
    return {"states": grammar.dfa.n_states, "compile": compile_ms, "first": first_ms, "full": full_ms,
            "step": _ms(start) / steps}, tokens


def outlines(pattern, pieces, end, tokens):
    from outlines_core import Index, Vocabulary
    by_bytes = {}
    for i, p in enumerate(pieces):
        if p:
            by_bytes.setdefault(p, []).append(i)
    vocabulary = Vocabulary(end, by_bytes)
    start = time.perf_counter()
    index = Index(pattern, vocabulary)
    full_ms = _ms(start)
    V = len(pieces)
    start, state = time.perf_counter(), index.get_initial_state()
    for t in tokens:
        mask = np.zeros(V, bool)
        mask[index.get_allowed_tokens(state)] = True
        state = index.get_initial_state() if t is None else index.get_next_state(state, t)
    return {"full": full_ms, "step": _ms(start) / len(tokens)}


def xgrammar_side(pattern, pieces, end, tokens):
    import xgrammar as xg
    info = xg.TokenizerInfo([p or b"" for p in pieces], xg.VocabType.RAW, vocab_size=len(pieces), stop_token_ids=[end])
    compiler = xg.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    start = time.perf_counter()
    compiled = compiler.compile_regex(pattern)
    compile_ms = _ms(start)
    matcher, bitmask = xg.GrammarMatcher(compiled), xg.allocate_token_bitmask(1, len(pieces))
    start = time.perf_counter()
    for t in tokens:
        matcher.fill_next_token_bitmask(bitmask)
        if t is None:
            matcher.reset()
        elif not matcher.accept_token(t):
            raise RuntimeError(f"xgrammar refused token {t} that zerollm allowed")
    return {"compile": compile_ms, "step": _ms(start) / len(tokens)}


# ----------------------------------------------------------------------------
# what it is set against

def decode_step_ms(vocab_size, n_tokens=8, small=False):
    """ms per token of the 124M-shape GPT (``small``: 2 layers, 64 wide) decoding with its KV cache (NumPy engine)."""
    from zerollm.generation.decode import generate
    from zerollm.generation.sample import Sampling
    from zerollm.model import GPT, GPTConfig
    shape = {"n_layer": 2, "n_head": 2, "n_embd": 64} if small else {}
    model = GPT(GPTConfig(vocab_size=vocab_size, block_size=256, **shape), seed=0)
    gen = generate(model, np.arange(16) % vocab_size, n_tokens + 1, Sampling(temperature=0))
    next(gen)                                                   # the prompt's prefill and first token
    start = time.perf_counter()
    for _ in gen:
        pass
    return _ms(start) / n_tokens


def gemm_gflops(n=1024):
    a, b = np.random.default_rng(0).standard_normal((2, n, n), dtype=np.float32)
    a @ b
    start = time.perf_counter()
    for _ in range(3):
        a @ b
    return 3 * 2 * n ** 3 / (time.perf_counter() - start) / 1e9


def host_lines():
    cpu = platform.processor() or "?"
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        cpu = next((ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")), cpu)
    except (OSError, subprocess.SubprocessError):
        pass
    from threadpoolctl import threadpool_info
    blas = ", ".join(f"{i['internal_api']} {i.get('version')} {i.get('architecture')} ({i['num_threads']} threads)"
                     for i in threadpool_info() if i["user_api"] == "blas")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return [f"host: {cpu}, {os.cpu_count()} CPUs, load average {load:.1f} (a shared machine: timings are noisy)",
            f"BLAS: {blas}"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="steps of the random walk timed per mask (default 300)")
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args(argv)
    sizes = {"gpt2-size": (GPT2_SIZE, None), "zerollm-bpe": (4096, 300_000)}
    if docsmode.active():          # tests/test_docs_run.py runs every documented command line, in seconds
        print(f"{docsmode.ENV} is set: 1,000- and 300-id vocabularies, 20 steps, a 2-layer model", file=sys.stderr)
        sizes, args.steps = {"gpt2-size": (1000, 50_000), "zerollm-bpe": (300, 20_000)}, 20
    for line in host_lines():
        print(line)
    print(f"GEMM 1024^3 float32: {gemm_gflops():.1f} GFLOP/s")
    decode = decode_step_ms(GPT2_SIZE, small=docsmode.active())
    shape = "a 2-layer, 64-wide GPT (docs test)" if docsmode.active() else "the 124M-shape GPT"
    print(f"decode step of {shape} (NumPy engine, KV cache): {decode:.1f} ms per token")
    patterns = {**{k: regex_for_schema(s) for k, s in SCHEMAS.items()}, **REGEXES}
    rows = []
    print(f"\n{'vocabulary':<12} {'pattern':<10} {'states':>6} | {'zerollm: compile':>16} {'first mask':>10} "
          f"{'full index':>10} {'mask/step':>9} {'% decode':>8} | {'outlines: index':>15} {'mask/step':>9} | "
          f"{'xgrammar: compile':>17} {'mask/step':>9} | {'full vs outlines':>16}")
    for vname, (size, chars) in sizes.items():
        pieces = gpt2_size_pieces(size, chars) if vname == "gpt2-size" else zerollm_bpe_pieces(size, chars)
        if pieces[-1] is not None:
            pieces = pieces + [None]                           # an end id of its own, no text
        end, vocab = len(pieces) - 1, Vocab(pieces)
        for pname, pattern in patterns.items():
            z, tokens = ours(pattern, vocab, end, args.steps, seed=0)
            o = outlines(pattern, pieces, end, tokens)
            x = xgrammar_side(pattern, pieces, end, tokens)
            row = {"vocab": vname, "V": len(pieces), "pattern": pname, "ours": z, "outlines": o, "xgrammar": x,
                   "decode_ms": decode}
            rows.append(row)
            print(f"{vname:<12} {pname:<10} {z['states']:>6} | {z['compile']:>16.1f} {z['first']:>10.1f} "
                  f"{z['full']:>10.1f} {z['step']:>9.3f} {100 * z['step'] / decode:>7.2f}% | {o['full']:>15.1f} "
                  f"{o['step']:>9.3f} | {x['compile']:>17.1f} {x['step']:>9.3f} | "
                  f"{(z['compile'] + z['full']) / o['full']:>15.2f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
