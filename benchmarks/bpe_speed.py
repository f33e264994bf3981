"""zerollm's BPE vs Hugging Face `tokenizers`: training and encoding time, side by side in one process.

    python benchmarks/bpe_speed.py                                  # both shipped corpora, vocab 1024 and 4096
    python benchmarks/bpe_speed.py --corpus tang --sizes 1024 --rounds 3
    python benchmarks/bpe_speed.py --corpus my_text.txt --engines fast

Both sides split with the same regex (GPT-4's by default: `tokenizers` gets Split(regex) + ByteLevel
without its own regex, so the chunks are identical), start from the 256 bytes, add <|endoftext|> and
stop at the same vocabulary size. Each round runs every contender once (tokenizers, zerollm with each
engine), so a busy moment of a shared machine hits all of them; the table shows medians over rounds and
the median of the paired time ratios zerollm / tokenizers (below 1.0: zerollm is faster). Training time
includes the split of the text on both sides. One thread: RAYON_NUM_THREADS=1 and one pinned CPU.
The fast engine's first call compiles its kernel (or loads it from numba's cache); that call is timed
apart ("first call") and the rounds run after it.
"""

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")      # before tokenizers loads: its thread pool reads it once

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # this checkout's zerollm

from zerollm.data import corpora  # noqa: E402
from zerollm.engine import use_engine  # noqa: E402
from zerollm.io import docsmode  # noqa: E402
from zerollm.tokenizers import ENDOFTEXT, BPETokenizer  # noqa: E402
from zerollm.tokenizers.hf import bytes_to_unicode  # noqa: E402
from zerollm.tokenizers.patterns import PATTERNS, compile_pattern, split_text  # noqa: E402

SIZES = {"full": [1024, 4096], "quick": [1024, 4096], "smoke": [300]}
ROUNDS = {"full": 3, "quick": 1, "smoke": 1}
SLICE = {"full": None, "quick": None, "smoke": 20_000}       # characters of each corpus (None: all)


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


# ----------------------------------------------------------------------------
# the two sides

def hf_train(text, vocab_size, pattern):
    """`tokenizers` BPE with zerollm's split: Split(regex, isolated) then ByteLevel without its regex."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERNS[pattern]), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[ENDOFTEXT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer)
    return tok


def hf_merges(tok):
    """The learned merges as (left bytes, right bytes), in order."""
    u2b = {c: b for b, c in bytes_to_unicode().items()}
    merges = json.loads(tok.to_str())["model"]["merges"]
    pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
    return [tuple(bytes(u2b[c] for c in part) for part in pair) for pair in pairs]


def zerollm_merges(tok):
    return [(tok.vocab[a], tok.vocab[b]) for a, b, _ in tok.merges]


def split_and_count(text, pattern):
    """zerollm's pre-tokenization alone: the regex split and the count of distinct chunks."""
    return Counter(split_text(text, compile_pattern(PATTERNS[pattern])))


def first_call_s():
    """Time of the fast engine's first training and encoding calls (numba compiles the kernels, or loads
    them from its cache), and which of the two it was."""
    from zerollm.engine.fast import bpe
    text = " ".join(f"word{i}" for i in range(2 * bpe.MIN_CHUNKS))     # enough chunks for the encode kernel
    start = time.perf_counter()
    with use_engine("fast"):
        BPETokenizer.train(text, 300).encode(text)
    t = time.perf_counter() - start
    hits = sum(bpe._train.stats.cache_hits.values()) + sum(bpe._encode.stats.cache_hits.values())
    return t, "loaded from numba's cache" if hits else "compiled"


def blas():
    """The BLAS libraries threadpoolctl sees (BPE does no matrix products; stated as on every table)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    import numpy  # noqa: F401  (loads its BLAS)
    return "; ".join(f"{p.get('internal_api')} {p.get('version')} {p.get('architecture')}" for p in threadpool_info())


# ----------------------------------------------------------------------------
# one corpus and vocabulary: every contender once per round

def compare(text, vocab_size, pattern, engines, rounds):
    contenders = ["tokenizers", *(f"zerollm-{e}" for e in engines)]
    runs = {c: {"train_s": [], "encode_s": []} for c in contenders}
    split_s, result = [], {}
    for _ in range(rounds):
        for c in contenders:
            if c == "tokenizers":
                tok, t_train = timed(hf_train, text, vocab_size, pattern)
                enc, t_enc = timed(tok.encode, text)
                result[c] = dict(vocab_size=tok.get_vocab_size(), tokens=len(enc.ids), merges=hf_merges(tok))
            else:
                with use_engine(c.partition("-")[2]):
                    tok, t_train = timed(BPETokenizer.train, text, vocab_size, pattern=pattern)
                    ids, t_enc = timed(tok.encode, text)        # a fresh tokenizer: its chunk cache is empty
                result[c] = dict(vocab_size=tok.vocab_size, tokens=len(ids), merges=zerollm_merges(tok))
            runs[c]["train_s"].append(t_train)
            runs[c]["encode_s"].append(t_enc)
        split_s.append(timed(split_and_count, text, pattern)[1])
    return summarize(runs, result, split_s)


def summarize(runs, result, split_s):
    """Medians per contender; paired ratios time(zerollm) / time(tokenizers) per round, their median."""
    ref = runs["tokenizers"]
    rec = {"split_s": statistics.median(split_s), "contenders": {}, "ratios": {}}
    for c, r in runs.items():
        rec["contenders"][c] = {"train_s": statistics.median(r["train_s"]), "encode_s": statistics.median(r["encode_s"]),
                                "round_train_s": r["train_s"], "vocab_size": result[c]["vocab_size"],
                                "merges": len(result[c]["merges"]), "tokens": result[c]["tokens"]}
        if c != "tokenizers":
            rec["ratios"][c] = {
                what: statistics.median(t / t_ref for t, t_ref in zip(r[f"{what}_s"], ref[f"{what}_s"]))
                for what in ("train", "encode")}
            theirs, ours = result["tokenizers"]["merges"], result[c]["merges"]
            rec["ratios"][c]["same_merges"] = sum(x == y for x, y in zip(ours, theirs)) / max(len(theirs), 1)
            rec["ratios"][c]["same_merge_set"] = len(set(ours) & set(theirs)) / max(len(theirs), 1)
    return rec


def run(corpus_names, sizes, pattern="gpt4", engines=("fast", "numpy"), rounds=1, chars=None):
    """Every (corpus, vocabulary) of the plan -> {"meta": ..., "rows": [...]}."""
    from bench_measure import pin_cpus
    from importlib.metadata import version
    cpus = pin_cpus(1)
    meta = {"pattern": pattern, "rounds": rounds, "engines": list(engines), "cpus": cpus, "chars": chars,
            "tokenizers": version("tokenizers"), "numba": version("numba"), "load": os.getloadavg(),
            "RAYON_NUM_THREADS": os.environ.get("RAYON_NUM_THREADS"), "blas": blas(),
            "cpu": _cpu_model()}
    if "fast" in engines:
        meta["first_call_s"], meta["first_call"] = first_call_s()
    rows = []
    for name in corpus_names:
        path = corpora.path(name) if name in corpora.CORPORA else Path(name)
        text = path.read_text(encoding="utf-8")[:chars]
        for size in sizes:
            rec = compare(text, size, pattern, engines, rounds)
            rec.update(corpus=path.name, chars=len(text), bytes=len(text.encode("utf-8")), vocab=size)
            rows.append(rec)
            print(f"  bpe {path.name} vocab {size}: " + ", ".join(
                f"{c} {e['train_s']:.2f} s" for c, e in rec["contenders"].items()), flush=True)
    meta["load_after"] = os.getloadavg()
    return {"meta": meta, "rows": rows}


def _cpu_model():
    with open("/proc/cpuinfo") as f:
        return next((line.partition(":")[2].strip() for line in f if line.startswith("model name")), "?")


# ----------------------------------------------------------------------------
# the table

def table(results):
    """Markdown: one row per (corpus, vocabulary, zerollm engine)."""
    m = results["meta"]
    part = f"the first {m['chars']:,} characters of each corpus" if m.get("chars") else "whole corpora"
    lines = [f"{m.get('cpu', '?')}; BLAS: {m.get('blas', '?')} (BPE multiplies no matrices). "
             f"Pattern {m['pattern']}, {part}, {m['rounds']} round(s), 1 thread (CPU {m['cpus']}), tokenizers "
             f"{m['tokenizers']}, load average {m['load'][0]:.2f} before, {m['load_after'][0]:.2f} after.",
             ""]
    if "first_call_s" in m:
        lines[0] += (f" The fast engine's first call took {m['first_call_s']:.2f} s ({m['first_call']}); "
                     "the rows are timed after it.")
    header = ["corpus", "vocab", "engine", "zerollm train s", "tokenizers train s", "train time ratio",
              "split + count s", "zerollm encode s", "tokenizers encode s", "encode time ratio",
              "vocab sizes", "same merges (order / set)"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results["rows"]:
        theirs = r["contenders"]["tokenizers"]
        for c, ratio in r["ratios"].items():
            ours = r["contenders"][c]
            cells = [r["corpus"], r["vocab"], c.partition("-")[2], f"{ours['train_s']:.3g}", f"{theirs['train_s']:.3g}",
                     f"{ratio['train']:.2f}x", f"{r['split_s']:.3g}", f"{ours['encode_s']:.3g}",
                     f"{theirs['encode_s']:.3g}", f"{ratio['encode']:.2f}x",
                     f"{ours['vocab_size']} / {theirs['vocab_size']}",
                     f"{ratio['same_merges']:.0%} / {ratio['same_merge_set']:.0%}"]
            lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description="BPE training and encoding: zerollm vs Hugging Face tokenizers")
    p.add_argument("--corpus", nargs="+", default=["shakespeare", "tang"],
                   help="shipped corpora (shakespeare, tang) or text files")
    p.add_argument("--sizes", type=int, nargs="+", default=SIZES["full"], help="vocabulary sizes")
    p.add_argument("--pattern", choices=sorted(PATTERNS), default="gpt4")
    p.add_argument("--engines", default="fast,numpy", help="zerollm engines, e.g. fast or fast,numpy")
    p.add_argument("--rounds", type=int, default=ROUNDS["full"])
    p.add_argument("--chars", type=int, help="use only the first CHARS characters of each corpus")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    if docsmode.active():       # tests/test_docs_run.py runs every documented command line, in seconds
        print(f"{docsmode.ENV} is set: the smoke size ({SLICE['smoke']:,} characters, vocabulary "
              f"{SIZES['smoke'][0]}, 1 round), numpy engine only (a fresh clone would compile the fast "
              "kernels first: ~10 s; tests/test_benchmarks.py runs them)", file=sys.stderr)
        args.sizes, args.rounds, args.chars, args.engines = SIZES["smoke"], 1, SLICE["smoke"], "numpy"
    results = run(args.corpus, args.sizes, args.pattern, args.engines.split(","), args.rounds, args.chars)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.path.append(str(Path(__file__).resolve().parent))          # bench_measure
    main()
