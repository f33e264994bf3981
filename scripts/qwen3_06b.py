"""A model of Qwen3-0.6B's shape (random weights, a bf16 safetensors file) loaded and sampled on this CPU,
zerollm beside transformers: the numbers of docs/huggingface.md ("Qwen3-0.6B on a CPU").

    python scripts/qwen3_06b.py --dir /tmp/qwen3-0.6b-random          # writes it (once), then measures
    python scripts/qwen3_06b.py --dir /tmp/qwen3-0.6b-random --tokens 32 --prompt-tokens 16

Nothing is downloaded: the config is Qwen3-0.6B's (its config.json on the hub: 28 layers, width 1024, 16 query
heads and 8 key/value heads of 128, SwiGLU 3072, vocabulary 151936, tied embeddings, RoPE base 1e6) and the
weights are drawn by transformers' own initialisation, then stored in bfloat16 as the hub's file is. The
tokens are random ids: speed does not depend on what they spell.

Printed: the memory estimate zerollm checks before loading (zerollm.model.budget.loading) against the peak
resident memory of loading and of sampling (in a child process each, so that one does not count the
other), then greedy decoding tokens/s of zerollm (numpy and fast engines, through the KV cache) and of
transformers' generate (float32, eager and sdpa attention) on the same CPU, with the host, BLAS and a GEMM
row beside them. The machine may be shared: the load average is printed with the numbers.
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

QWEN3_06B = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=151936, hidden_size=1024,
                 intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                 head_dim=128, hidden_act="silu", max_position_embeddings=40960, rms_norm_eps=1e-6,
                 rope_theta=1000000.0, tie_word_embeddings=True, attention_bias=False, use_sliding_window=False,
                 sliding_window=None, max_window_layers=28, bos_token_id=151643, eos_token_id=151645)


def write_model(folder):
    """The random bf16 model, written by transformers (save_pretrained, safetensors)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    if os.path.isfile(os.path.join(folder, "tokenizer.json")):
        return
    torch.manual_seed(0)
    config = Qwen3Config(**{k: v for k, v in QWEN3_06B.items() if k not in ("architectures", "model_type")})
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder, safe_serialization=True)
    # a byte tokenizer, so that `zerollm sample --hf DIR` has one (the real model's is Qwen's 151,669 tokens)
    from zerollm.tokenizers import ByteTokenizer
    ByteTokenizer().to_hf_tokenizer_json(os.path.join(folder, "tokenizer.json"))


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(args):
    """One measurement in this process: 'load', 'zerollm:ENGINE' or 'torch:ATTN'; prints a JSON line."""
    import numpy as np
    prompt = np.random.default_rng(0).integers(0, 151643, (1, args.prompt_tokens))
    if args.child == "load" or args.child.startswith("zerollm"):
        from zerollm.engine import use_engine
        from zerollm.generation.decode import generate
        from zerollm.generation.sample import Sampling
        from zerollm.interop.opening import Source, open_model
        from zerollm.model import budget
        before = peak_mib()                     # the interpreter, numpy and zerollm, before any weight
        t0 = time.perf_counter()
        model = open_model(Source(hf=args.dir), tokenizer="may").model
        loaded, load_s = peak_mib(), time.perf_counter() - t0
        estimate = budget.loading(model.config).total / 2 ** 20
        if args.child == "load":
            print(json.dumps({"estimate_mib": estimate, "peak_mib": loaded, "before_mib": before, "load_s": load_s,
                              "params": model.num_params()}))
            return
        with use_engine(args.child.split(":")[1]):
            list(generate(model, prompt, 2, Sampling(temperature=0)))             # warm-up (numba compiles)
            t0 = time.perf_counter()
            list(generate(model, prompt, args.tokens, Sampling(temperature=0)))
            seconds = time.perf_counter() - t0
    else:
        import torch
        from transformers import AutoModelForCausalLM
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
        model = AutoModelForCausalLM.from_pretrained(args.dir, dtype=torch.float32,
                                                     attn_implementation=args.child.split(":")[1]).eval()
        ids = torch.tensor(prompt)
        with torch.no_grad():
            model.generate(ids, do_sample=False, max_new_tokens=2, min_new_tokens=2)
            t0 = time.perf_counter()
            model.generate(ids, do_sample=False, max_new_tokens=args.tokens, min_new_tokens=args.tokens)
            seconds = time.perf_counter() - t0
    print(json.dumps({"tok_s": args.tokens / seconds, "peak_mib": peak_mib()}))


def run_child(args, what):
    cmd = [sys.executable, __file__, "--dir", args.dir, "--tokens", str(args.tokens),
           "--prompt-tokens", str(args.prompt_tokens), "--child", what]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()
    return json.loads(out[-1])


def gemm_gflops(n=1024, repeat=5):
    import numpy as np
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best / 1e9


def host_lines():
    import numpy as np
    lines = [f"host: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average "
             f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}"]
    try:
        model = [ln.split(":", 1)[1].strip() for ln in subprocess.run(["lscpu"], capture_output=True, text=True)
                 .stdout.splitlines() if ln.startswith("Model name")]
        lines.append(f"lscpu: {model[0] if model else '?'}")
    except OSError:
        pass
    blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    lines.append(f"BLAS: {blas.get('name', '?')} {blas.get('version', '')}")
    lines.append(f"GEMM 1024x1024 float32 (numpy): {gemm_gflops():.1f} GFLOP/s")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, help="where the random Qwen3-0.6B-shaped model is (written if absent)")
    p.add_argument("--tokens", type=int, default=32, help="greedy tokens generated per measurement")
    p.add_argument("--prompt-tokens", type=int, default=16)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    os.makedirs(args.dir, exist_ok=True)
    write_model(args.dir)
    size = os.path.getsize(os.path.join(args.dir, "model.safetensors")) / 2 ** 20
    load = run_child(args, "load")
    print(f"model.safetensors (bf16): {size:.0f} MiB, {load['params']:,} parameters")
    print(f"loading: estimate {load['estimate_mib']:.0f} MiB (float32 parameters); peak resident memory "
          f"{load['peak_mib']:.0f} MiB, of which {load['before_mib']:.0f} MiB before any weight was read (Python, "
          f"numpy, zerollm), so {load['peak_mib'] - load['before_mib']:.0f} MiB for the model; {load['load_s']:.1f} s")
    rows = [(name, run_child(args, name)) for name in ("zerollm:numpy", "zerollm:fast", "torch:eager", "torch:sdpa")]
    base = rows[2][1]["tok_s"]
    print(f"\ngreedy decoding, {args.prompt_tokens} prompt tokens + {args.tokens} new, batch 1, float32")
    print(f"{'':16}{'tokens/s':>10}{'vs torch eager':>16}{'peak MiB':>10}")
    for name, r in rows:
        print(f"{name:16}{r['tok_s']:>10.2f}{r['tok_s'] / base:>16.2f}{r['peak_mib']:>10.0f}")
    print()
    for line in host_lines():
        print(line)


if __name__ == "__main__":
    main()
