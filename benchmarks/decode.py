"""Decode and prefill speed on the same GGUF file: zerollm's NumPy and fast engines against llama.cpp (issue #61).

    python benchmarks/decode.py --out /tmp/decode-bench                        # the table of docs/gguf.md
    python benchmarks/decode.py --out /tmp/decode-bench --shapes gpt2 --kinds q8_0 --threads 1 --repeats 1

Two model shapes with random weights and a 512-token BPE vocabulary (trained on tiny Shakespeare):
``gpt2``, GPT-2-124M's trunk (12 layers, width 768, 12 heads, MLP 3072, learned positions, tied head) and
``llama``, a Llama of about the same size (12 layers, width 768, 12 query heads and 4 key/value heads,
SwiGLU MLP of width 2048, RoPE, RMSNorm, its own head). Each is written once as f32 / q8_0 / q4_0 by
zerollm; q4_K is llama.cpp's own quantization of the f32 file (``llama_model_quantize``, Q4_K_M), and runs on
zerollm only when it reads k-quants (otherwise its row says so).

Each row is one file at one thread count: the three engines load it once, then take turns (numpy, fast,
llama.cpp, numpy, ...) for ``--repeats`` rounds, so a burst of load from other jobs hits all three; the
best round of each is printed. Threads are pinned equal: BLAS and numba (threadpoolctl) and llama.cpp's
n_threads / n_threads_batch. Greedy; decode is tokens/s of one token at a time through the KV cache after
the prompt (the Scheduler for zerollm, ``Llama.eval`` for llama.cpp); prefill is the prompt's tokens/s.

Beside the table: the host (lscpu), NumPy's BLAS (threadpoolctl), the load average, and the memory
bandwidth of one thread (a 256 MiB NumPy copy: bytes read + written per second); for a quantized row,
"of bandwidth" is the fast engine's decode tokens/s times the bytes of the matrices it reads per token
(every linear weight and the head, as stored), over that bandwidth.
"""

import argparse
import os
import subprocess
import sys
import time

import zerollm  # noqa: F401  (first: it sets OpenBLAS's thread spin before NumPy loads OpenBLAS, as the CLI gets it)
import numpy as np

SHAPES = {"gpt2": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, gelu="tanh"),
          "llama": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, norm="rmsnorm", pos="rope",
                        mlp="swiglu", bias=False, n_kv_head=4, tie_embeddings=False, n_inner=2048)}
KINDS = ("f32", "q8_0", "q4_0", "q4_K")
ENGINES = ("numpy", "fast", "llama.cpp")
VOCAB = 512


def host():
    """lscpu's model name, the CPU count, and NumPy's BLAS as threadpoolctl sees it."""
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines()
        model = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Model name")), "?")
        flags = next((ln.split(":", 1)[1].split() for ln in lines if ln.startswith("Flags")), [])
    except (OSError, subprocess.CalledProcessError):
        model, flags = "?", []
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    from threadpoolctl import threadpool_info
    blas = [f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture')})" for i in threadpool_info()
            if i.get("user_api") == "blas"]
    return f"{model}, {os.cpu_count()} CPUs, {simd}", ", ".join(blas) or "?"


def copy_bandwidth(mib=256, repeats=5):
    """GB/s of one thread copying a large array: (read + written bytes) / best time."""
    a = np.ones(mib * 2 ** 20 // 4, np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - start)
    return 2 * a.nbytes / best / 1e9


def sgemv_row():
    """GB/s of NumPy's float32 matrix-vector product (BLAS gemv) on a 3072 x 768 matrix: the f32 rows' kernel."""
    w = np.random.default_rng(0).standard_normal((768, 3072)).astype(np.float32)
    x = np.ones((1, 768), np.float32)
    best = float("inf")
    for _ in range(50):
        start = time.perf_counter()
        x @ w
        best = min(best, time.perf_counter() - start)
    return w.nbytes / best / 1e9


def make_files(out, shapes):
    """{(shape, kind): path}: the GGUF files, written once into ``out`` (kept between runs)."""
    from zerollm.data import corpora
    from zerollm.interop.gguf import export_gguf
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import BPETokenizer
    tok = None
    files = {}
    for shape in shapes:
        paths = {kind: os.path.join(out, f"{shape}-{kind}.gguf") for kind in KINDS}
        if not all(os.path.isfile(paths[k]) for k in KINDS[:3]):
            tok = tok or BPETokenizer.train(corpora.path("shakespeare").read_text(encoding="utf-8")[:200_000], VOCAB)
            model = GPT(GPTConfig(vocab_size=VOCAB, **SHAPES[shape]), seed=0).eval()
            for kind in KINDS[:3]:
                export_gguf(model, paths[kind], tokenizer=tok, quant_kind=kind, overwrite=True)
        if not os.path.isfile(paths["q4_K"]):
            quantize_q4_k(paths["f32"], paths["q4_K"])
        files.update({(shape, kind): paths[kind] for kind in KINDS})
    return files


def quantize_q4_k(src, dst):
    """llama.cpp's Q4_K_M of the f32 file (what users download)."""
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    params.nthread = 2
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), params) != 0:
        sys.exit(f"llama.cpp could not quantize {src} to Q4_K_M")


# ----------------------------------------------------------------------------
# the three engines, each as (prefill seconds, decode tokens/s) of one greedy run

class Zerollm:
    def __init__(self, path, engine):
        from zerollm.engine import use_engine
        from zerollm.interop.gguf_load import load_gguf
        self.engine = engine
        with use_engine(engine):
            self.model, _, info = load_gguf(path)
        self.info = info

    def run(self, prompt, new_tokens):
        """The Scheduler's greedy decode: its first token comes after the prefill, the rest one step each."""
        from zerollm.engine import use_engine
        from zerollm.generation.decode import generate
        from zerollm.generation.sample import Sampling
        with use_engine(self.engine):
            start = time.perf_counter()
            times = []
            for _ in generate(self.model, np.array([prompt]), new_tokens + 1, Sampling(0.0)):
                times.append(time.perf_counter())
        return times[0] - start, new_tokens / (times[-1] - times[0])

    def read_bytes(self):
        """Bytes of the matrices one decode step multiplies by: every 2-D weight but the position table,
        and the token table only as the tied head."""
        p, total = self.model.params, 0
        for name, w in p.items():
            if getattr(w, "ndim", 0) == 2 and name not in ("wpe.weight", "wte.weight"):
                total += w.nbytes
        head = self.model.head_weight
        return total + (head.nbytes if head is p["wte.weight"] else 0)


class LlamaCpp:
    def __init__(self, path, threads):
        import llama_cpp
        self.llm = llama_cpp.Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=256,
                                   n_batch=256, verbose=False)

    def run(self, prompt, new_tokens):
        llm = self.llm
        llm.reset()
        start = time.perf_counter()
        llm.eval(prompt)
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(new_tokens):
            llm.eval([token])
            token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        return prefill, new_tokens / (time.perf_counter() - start)


def measure(path, threads, args):
    """{engine: (prefill tok/s, decode tok/s) or a reason it did not run}, plus the fast engine's bytes a token."""
    from zerollm.engine.threads import limit_threads
    from zerollm.io.errors import ZeroLLMError
    prompt = [int(i) for i in np.random.default_rng(1).integers(0, VOCAB, args.prompt)]
    runners, results, read = {}, {}, None
    with limit_threads(threads):
        for engine in ENGINES:
            try:
                runners[engine] = LlamaCpp(path, threads) if engine == "llama.cpp" else Zerollm(path, engine)
            except ZeroLLMError as err:
                results[engine] = f"zerollm cannot read it yet: {str(err)[:90]}"
        if "fast" in runners:
            read = runners["fast"].read_bytes()
        best = {engine: (0.0, 0.0) for engine in runners}
        for engine, runner in runners.items():              # warm-up: numba's first call, llama.cpp's buffers
            runner.run(prompt[:8], 2)
        for _ in range(args.repeats):
            for engine, runner in runners.items():          # interleaved: load from other jobs hits all three
                prefill_s, decode = runner.run(prompt, args.new_tokens)
                best[engine] = (max(best[engine][0], len(prompt) / prefill_s), max(best[engine][1], decode))
    results.update(best)
    return results, read


def table(rows, bandwidth):
    out = ["| shape | file | threads | numpy decode | fast decode | llama.cpp decode | **fast / llama.cpp** | "
           "numpy prefill | fast prefill | llama.cpp prefill | **fast / llama.cpp** | MB read a token | "
           "of bandwidth |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for shape, kind, threads, res, read in rows:
        def cell(engine, i):
            r = res.get(engine)
            return f"{r[i]:.1f}" if isinstance(r, tuple) else "—"

        def ratio(i):
            f, ll = res.get("fast"), res.get("llama.cpp")
            return f"**{f[i] / ll[i]:.2f}×**" if isinstance(f, tuple) and isinstance(ll, tuple) else "—"
        fast = res.get("fast")
        frac = f"{fast[1] * read / 1e9 / bandwidth:.0%}" if isinstance(fast, tuple) and read else "—"
        mb = f"{read / 1e6:.1f}" if read else "—"
        out.append(f"| {shape} | {kind} | {threads} | {cell('numpy', 1)} | {cell('fast', 1)} | {cell('llama.cpp', 1)} | "
                   f"{ratio(1)} | {cell('numpy', 0)} | {cell('fast', 0)} | {cell('llama.cpp', 0)} | {ratio(0)} | "
                   f"{mb} | {frac} |")
    notes = [f"- {shape} {kind} at {threads} thread(s), {engine}: {r}" for shape, kind, threads, res, _ in rows
             for engine, r in res.items() if isinstance(r, str)]
    return "\n".join(out + ([""] + notes if notes else []))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="a folder for the GGUF files (about 1.3 GB; kept between runs)")
    p.add_argument("--shapes", nargs="+", choices=tuple(SHAPES), default=list(SHAPES))
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--prompt", type=int, default=64, help="prompt tokens (prefill)")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens decoded after the prompt")
    p.add_argument("--repeats", type=int, default=3, help="rounds of the three engines, taken in turns")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    files = make_files(args.out, args.shapes)
    cpu, blas = host()
    from zerollm.engine.threads import limit_threads
    with limit_threads(1):
        bandwidth, gemv = copy_bandwidth(), sgemv_row()
    load_before = os.getloadavg()
    rows = []
    for shape in args.shapes:
        for kind in args.kinds:
            for threads in args.threads:
                res, read = measure(files[(shape, kind)], threads, args)
                rows.append((shape, kind, threads, res, read))
                print(f"  {shape} {kind} {threads} thread(s): done", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    print(f"host: {cpu}; BLAS: {blas}")
    print(f"memory bandwidth (one thread, 256 MiB copy, read + write): {bandwidth:.1f} GB/s; "
          f"float32 gemv 768 x 3072 (BLAS, one row): {gemv:.1f} GB/s of weights")
    print(f"load average (1 min) before / after: {load_before[0]:.1f} / {load_after[0]:.1f}; "
          f"tokens/s, best of {args.repeats} interleaved rounds; prompt {args.prompt}, {args.new_tokens} new tokens, greedy")
    print()
    print(table(rows, bandwidth))


if __name__ == "__main__":
    main()
