"""Where one training step's time goes, op by op and direction: zerollm's per-op profile.

    python benchmarks/profile.py --config 6x384-T256                   # a table, 1 thread, NumPy engine
    python benchmarks/profile.py --config nanogpt-4x128 --engine fast
    python benchmarks/profile.py --config all --engine numpy,fast --out DIR   # DIR/profile-*.json
    python benchmarks/profile.py --config nanogpt-4x128 --engine fast,torch    # beside PyTorch's own step
    python benchmarks/profile.py --from-json DIR --update-docs         # the tables of docs/benchmarks.md

The step is the benchmark's (benchmarks/bench_zerollm.py): forward, backward, clipping, AdamW, on the
same config, batch and seed. It runs in a process of its own with the benchmark's worker settings:
one thread, pinned to one CPU, OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed, freed memory kept.

How: the layer functions the model calls (linear_forward, masked_softmax, norm_backward, ...) are
wrapped, in this process only, by timers that charge each call's time, minus the time of the
wrapped calls inside it, to a label such as "qkv GEMM / bwd". Linear layers are told apart by
their weight array (c_attn, c_proj, c_fc). What no wrapper covers (Python glue, the batch, the loss
read-out) is "everything else": the step's total minus every label. Each GEMM row also gets its
FLOPs (2 m n k per product), so the table shows how close each product runs to the BLAS peak.
Times are the CPU time of the one thread (time.thread_time), the mean over the faster half of the steps.

``--engine torch`` profiles the benchmark's PyTorch step (bench_torch.train_step) with torch.profiler
instead, its ops charged to the same rows where they are the same work (softmax, GELU, cross-entropy,
AdamW, ...) and to rows of their own where torch's ops do not tell the layers apart (all linear
layers' products are aten::mm, all norms one op). So both sides' time outside the matrix products can
be read side by side; the profiler's own cost per op is larger than our timers', so its shares are
of the profiled step.
"""

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# the zerollm of this checkout first; benchmarks/ (the bench_* modules) LAST, so that
# benchmarks/profile.py never hides the standard library's profile module (torch imports it)
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

import bench_workloads as W  # noqa: E402
import profile_report  # noqa: E402
from zerollm.io import docsmode  # noqa: E402
from bench_measure import worker_env  # noqa: E402

CONFIGS = {name: (cfg, B) for mode in ("full", "smoke") for name, cfg, B in W.MODELS[mode]}
# the CPU time of this (only) thread: on a busy shared machine it leaves out the time spent waiting for
# a CPU, which wall time would charge to whatever op was running; on a quiet machine the two agree
CLOCK = time.thread_time
WORKER_TIMEOUT_S = 900


# ----------------------------------------------------------------------------
# the timers

class Profiler:
    """Exclusive time per (label, direction): a call's time minus that of the wrapped calls inside it."""

    def __init__(self):
        self.seconds = defaultdict(float)
        self.flops = defaultdict(float)
        self.calls = defaultdict(int)
        self._stack = []                       # time spent in wrapped children, one entry per open call
        self._undo = []

    def wrap(self, fn, label):
        """``label(*args, **kwargs) -> (name, direction, flops)`` names each call before it runs."""
        def timed(*args, **kwargs):
            key_name, direction, flops = label(*args, **kwargs)
            self._stack.append(0.0)
            start = CLOCK()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = CLOCK() - start
                inner = self._stack.pop()
                key = (key_name, direction)
                self.seconds[key] += spent - inner
                self.flops[key] += flops
                self.calls[key] += 1
                if self._stack:
                    self._stack[-1] += spent
        return timed

    def patch(self, owner, attr, label):
        original = getattr(owner, attr)
        self._undo.append((owner, attr, original))
        setattr(owner, attr, self.wrap(original, label))

    def patch_item(self, table, key, index, label):
        """For functions held in a dict of tuples (zerollm.nn.mlp._GELU)."""
        original = table[key]
        self._undo.append((table, key, original))
        items = list(original)
        items[index] = self.wrap(items[index], label)
        table[key] = tuple(items)

    def restore(self):
        for owner, attr, original in reversed(self._undo):
            if isinstance(owner, dict):
                owner[attr] = original
            else:
                setattr(owner, attr, original)
        self._undo.clear()

    def reset(self):
        self.seconds.clear(), self.flops.clear(), self.calls.clear()


def _fixed(name, direction):
    return lambda *a, **k: (name, direction, 0.0)


def install(prof, model, bench):
    """Wrap every op of the model's step. ``bench`` is the bench_zerollm module (clip lives there)."""
    import numpy as np

    from zerollm.model import gpt as m

    from zerollm.engine import get_engine
    from zerollm.training import optim
    from zerollm.nn import attention as att, block, lora, mlp
    cfg = model.config
    weights = {id(p): name for name, p in model.params.items()}
    gemm_names = {"attn.c_attn": "qkv GEMM", "attn.c_proj": "attention projection GEMM",
                  "mlp.c_fc": "MLP fc GEMM", "mlp.c_proj": "MLP proj GEMM"}

    def linear(direction):
        def label(*args, **kwargs):
            x, w = (args[0], args[1]) if direction == "fwd" else (args[1].x, args[1].w)
            name = weights.get(id(w), "?").split(".", 2)[-1].rsplit(".", 1)[0]   # h.0.attn.c_attn.weight
            n = x.size // x.shape[-1]
            return gemm_names.get(name, "other linear"), direction, 2.0 * n * w.size * (1 if direction == "fwd" else 2)
        return label

    def norm(direction):
        return lambda *a, **k: (a[2].rsplit(".", 1)[-1], direction, 0.0)       # "h.3.ln_1" -> "ln_1"

    def scores(direction):
        def label(*args, **kwargs):
            q, k = (args[0], args[1]) if direction == "fwd" else (args[1], args[2])
            return "scores q k^T", direction, 2.0 * q.size * k.shape[-2] * (1 if direction == "fwd" else 2)
        return label

    def mix(direction):
        """sdpa itself: its product weights @ V when it runs the general path (a padding mask, dropout,
        autocast), else only glue around softmax_attention (whose own row counts the products)."""
        def label(*args, **kwargs):
            if direction == "fwd":
                q, k = args[0], args[1]
                general = not att.is_plain(kwargs.get("mask"), kwargs.get("dropout", 0.0), kwargs.get("training", False))
            else:
                q, k = args[1].q, args[1].k
                general = not att.is_plain_cache(args[1])
            if not general:                       # the attention sub-layer's glue, like mha's own
                return "split/merge heads", direction, 0.0
            return "weights @ V", direction, 2.0 * q.size * k.shape[-2] * (1 if direction == "fwd" else 2)
        return label

    def product(name, direction, operand, width):
        """A block step of the numpy engine's softmax_attention (nn.attention.block_*, key_block_*): one
        matrix product of 2 hs FLOPs per entry of its argument number ``operand`` (the block's S, A or
        dS); hs is the last size of argument number ``width``."""
        return lambda *args, **kwargs: (name, direction, 2.0 * args[operand].size * args[width].shape[-1])

    def fused(direction):
        """softmax_attention: on the fast engine one kernel does the products and the softmax (its FLOPs:
        the products over the (query, key) pairs it multiplies, 2 forward, 4 backward); on the numpy
        engine its block steps (block_scores, ...) are rows of their own and this is their glue (the
        hidden keys' zeros, the scaled q), counted with the mask."""
        def label(*args, **kwargs):
            q, k = args[0], args[1]
            if direction == "bwd":
                q, k = args[1], args[2]
            T, Tk, hs = q.shape[-2], k.shape[-2], q.shape[-1]
            heads = q.size // (T * hs)
            if get_engine() == "fast":
                from zerollm.engine.fast.sdpa import block_pairs     # (numba: only with the fast engine)
                causal = args[4] if direction == "fwd" else args[6]
                flops = (2 if direction == "fwd" else 4) * 2.0 * heads * block_pairs(T, Tk, causal) * hs
                return "attention, fused (q k^T, softmax, weights @ V)", direction, flops
            return "mask + softmax", direction, 0.0
        return label

    def flash(direction):
        """Flash attention's products as it does them: causal skips the keys after each query, so a
        product costs 2 hs FLOPs per visible (query, key) pair; 2 products forward, 5 backward."""
        def label(*args, **kwargs):
            q, k, causal = (args[0], args[1], kwargs.get("causal", True)) if direction == "fwd" else \
                (args[1].q, args[1].k, args[1].causal)
            T, Tk = q.shape[-2], k.shape[-2]
            pairs = T * (Tk - T) + T * (T + 1) / 2 if causal else T * Tk
            heads = q.size // (T * q.shape[-1])
            return "flash attention (all of it)", direction, (2 if direction == "fwd" else 5) * 2.0 * pairs * q.shape[-1] * heads
        return label

    def head(direction):
        def label(self, *args, **kwargs):
            if direction == "fwd":
                n, mult = np.size(args[0]), 1                          # idx (B, T)
            else:
                n, mult = self._cache["x_f"].size // cfg.n_embd, 2     # dx and dW
            return "head GEMM + model glue", direction, 2.0 * n * cfg.n_embd * cfg.vocab_size * mult
        return label

    for direction, suffix in (("fwd", "forward"), ("bwd", "backward")):
        back = "" if direction == "fwd" else "_backward"
        prof.patch(m, f"embedding_{suffix}", _fixed("embedding", direction))
        prof.patch(m, f"norm_{suffix}", norm(direction))
        prof.patch(block, f"norm_{suffix}", norm(direction))
        prof.patch(m, f"cross_entropy_{suffix}", _fixed("cross-entropy", direction))
        prof.patch(m, f"block_{suffix}", _fixed("residual adds + block glue", direction))
        prof.patch(block, f"mha_{suffix}", _fixed("split/merge heads", direction))
        prof.patch(lora, f"linear_{suffix}", linear(direction))     # every projection goes through nn.lora
        prof.patch(att, f"sdpa_{suffix}", mix(direction))
        prof.patch(att, f"softmax_attention{back}", fused(direction))
        prof.patch(att, f"flash_sdpa_{suffix}", flash(direction))
        prof.patch(att, f"attention_scores{back}", scores(direction))
        prof.patch(att, f"masked_softmax{back}", _fixed("mask + softmax", direction))
        prof.patch(att, f"block_softmax{back}", _fixed("mask + softmax", direction))
        prof.patch(att, f"rope_{suffix}", _fixed("rope", direction))
        prof.patch(mlp, f"silu_{suffix}", _fixed("activation", direction))
        for kind in mlp._GELU:
            prof.patch_item(mlp._GELU, kind, 0 if direction == "fwd" else 1, _fixed("activation", direction))
        prof.patch(m.GPT, suffix, head(direction))
    prof.patch(att, "block_scores", product("scores q k^T", "fwd", 2, 0))            # (q_rows, kt_keys, S)
    prof.patch(att, "block_scores_backward", product("scores q k^T", "bwd", 0, 1))   # (dS_rows, k_keys, dq): dq
    prof.patch(att, "key_block_scores", product("scores q k^T", "bwd", 0, 1))        # (dS_cols, q_rows, dk): dk
    prof.patch(att, "block_values", product("weights @ V", "fwd", 0, 1))             # (A, v_keys, out)
    prof.patch(att, "block_values_backward", product("weights @ V", "bwd", 2, 0))    # (dout, vt_keys, dA): dA
    prof.patch(att, "key_block_values", product("weights @ V", "bwd", 0, 1))         # (A_cols, dout_rows, dv): dv
    prof.patch(optim.AdamW, "step", _fixed("AdamW", "update"))
    prof.patch(bench, "clip_grad_norm", _fixed("clip grad norm", "update"))


# ----------------------------------------------------------------------------
# one profile, in the worker process

def measure(name, engine, steps, warmup, attn="naive"):
    """{config, engine, step_s (unwrapped median), rows: [{op, direction, ms, share, gflops}], ...}"""
    import numpy as np

    import bench_zerollm as bench
    cfg, B = CONFIGS[name]
    cfg = dict(cfg, attn_impl=attn)
    params = dict(config=cfg, batch=B, seed=0, engine=engine)
    step = bench.train_step(params)
    plain = _plain_times(step, warmup, steps)            # the step without the timers
    prof = Profiler()
    install(prof, step.model, bench)
    step()                                               # one untimed step through the wrappers
    prof.reset()
    per_step, total = [], []
    for _ in range(steps):
        prof.seconds.clear()
        t0 = CLOCK()
        step()
        total.append(CLOCK() - t0)
        per_step.append(dict(prof.seconds))
    prof.restore()
    # the quieter half of the steps: another process that slowed a step down moves no row
    quiet = sorted(range(steps), key=total.__getitem__)[:max(steps // 2, 1)]
    for key in per_step[0]:
        prof.seconds[key] = sum(per_step[i].get(key, 0.0) for i in quiet) / len(quiet) * steps
    step_s = sum(total[i] for i in quiet) / len(quiet)
    rows = profile_report.rows(prof, steps, step_s)
    return {"config": name, "engine": engine, "attn_impl": attn, "batch": B, "tokens": B * cfg["block_size"], "steps": steps,
            "step_s": _quiet_mean(plain), "profiled_step_s": step_s, "rows": rows,
            "flops_per_step": W.train_flops(_gpt_config(cfg), B, cfg["block_size"])}


# torch's ops -> the rows of our table (benchmarks/profile_report.py); what is not here (copies, views, adds,
# autograd's bookkeeping, Python) is "everything else"
TORCH_ROWS = {
    "aten::mm": profile_report.TORCH_LINEAR, "aten::addmm": profile_report.TORCH_LINEAR,
    "aten::bmm": profile_report.TORCH_BMM, "aten::baddbmm": profile_report.TORCH_BMM,
    "aten::_softmax": "mask + softmax", "aten::_softmax_backward_data": "mask + softmax",
    "aten::masked_fill_": "mask + softmax", "aten::div": "mask + softmax",          # the scores' 1 / sqrt(hs)
    "aten::gelu": "activation", "aten::gelu_backward": "activation", "aten::silu": "activation",
    "aten::silu_backward": "activation",
    "aten::native_layer_norm": profile_report.TORCH_NORMS, "aten::native_layer_norm_backward": profile_report.TORCH_NORMS,
    "aten::embedding": "embedding", "aten::embedding_dense_backward": "embedding",
    "aten::_log_softmax": "cross-entropy", "aten::_log_softmax_backward_data": "cross-entropy",
    "aten::nll_loss_forward": "cross-entropy", "aten::nll_loss_backward": "cross-entropy",
}
TORCH_STEP, TORCH_CLIP = "benchmark step", "clip grad norm"


def measure_torch(name, steps, warmup):
    """The same step on torch (bench_torch.train_step), under torch.profiler: each op's own CPU time charged
    to a row by its name (TORCH_ROWS) and direction (bwd: inside autograd's backward; update: inside
    AdamW's step or the clipping). The profiler costs time of its own, more per op than our timers: the
    shares are of the profiled step, printed beside the plain one."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    import bench_torch
    cfg, B = CONFIGS[name]
    step = bench_torch.train_step(dict(config=cfg, batch=B, seed=0))
    plain = _plain_times(step, warmup, steps)
    clip = torch.nn.utils.clip_grad_norm_

    def named_clip(*args, **kwargs):
        with record_function(TORCH_CLIP):
            return clip(*args, **kwargs)
    torch.nn.utils.clip_grad_norm_ = named_clip
    try:
        with profile(activities=[ProfilerActivity.CPU], with_flops=True) as p:
            for _ in range(steps):
                with record_function(TORCH_STEP):
                    step()
    finally:
        torch.nn.utils.clip_grad_norm_ = clip
    totals, charged = {}, []                           # step event id -> seconds; (step id, row key, s, FLOPs)
    for e in p.events():
        scopes, parent, step_id = [], e.cpu_parent, None
        while parent is not None:
            scopes.append(parent.name)
            step_id = parent.id if parent.name == TORCH_STEP else step_id
            parent = parent.cpu_parent
        if e.name == TORCH_STEP:
            totals[e.id] = e.cpu_time_total * 1e-6
            continue
        if step_id is None:
            continue
        if any(s.startswith("Optimizer.step") for s in scopes) or e.name.startswith("Optimizer.step"):
            key = ("AdamW", "update")
        elif TORCH_CLIP in scopes or e.name == TORCH_CLIP:
            key = (TORCH_CLIP, "update")
        else:
            direction = "bwd" if any(s.startswith("autograd::engine") for s in scopes) else "fwd"
            # the op itself or the nearest op around it that has a row (aten::embedding's index_select)
            row = next((TORCH_ROWS[n] for n in [e.name] + scopes if n in TORCH_ROWS), None)
            if row is None:
                continue                                   # "everything else": the step minus the rows
            key = (row, direction)
        charged.append((step_id, key, e.self_cpu_time_total * 1e-6, e.flops or 0))
    # the quieter half of the steps, as for zerollm's profile
    quiet = set(sorted(totals, key=totals.get)[:max(len(totals) // 2, 1)])
    prof = Profiler()
    for step_id, key, seconds, flops in charged:
        if step_id in quiet:
            prof.seconds[key] += seconds * steps / len(quiet)
            prof.flops[key] += flops * steps / len(quiet)
            prof.calls[key] += steps // len(quiet)
    step_s = sum(totals[i] for i in quiet) / len(quiet)
    return {"config": name, "engine": "torch", "attn_impl": "naive", "batch": B, "tokens": B * cfg["block_size"],
            "steps": steps, "step_s": _quiet_mean(plain), "profiled_step_s": step_s,
            "rows": profile_report.rows(prof, steps, step_s), "flops_per_step": W.train_flops(_gpt_config(cfg), B, cfg["block_size"])}


def _plain_times(step, warmup, steps):
    """``warmup`` untimed calls of step(), then the CLOCK seconds of ``steps`` more."""
    for _ in range(warmup):
        step()
    return [_timed(step) for _ in range(steps)]


def _quiet_mean(times):
    """The mean of the faster half of ``times``."""
    fast = sorted(times)[:max(len(times) // 2, 1)]
    return sum(fast) / len(fast)


def _gpt_config(cfg):
    from zerollm.model.config import GPTConfig
    return GPTConfig(**cfg)


def gemm_peak(n=2048, repeat=5):
    """NumPy's best FLOP rate on an (n, n) @ (n, n) float32 product: the benchmark's GEMM peak."""
    import bench_zerollm
    step = bench_zerollm.gemm_step(dict(n=n, seed=0))
    step()
    best = min(_timed(step) for _ in range(repeat))
    return 2.0 * n ** 3 / best


def _timed(fn):
    t0 = CLOCK()
    fn()
    return CLOCK() - t0


def worker(spec):
    import bench_measure
    from zerollm.engine.memory import keep_freed_memory
    bench_measure.pin_cpus(1)
    keep_freed_memory()
    use_torch = spec["engine"] == "torch"
    limiter = bench_measure.limit_threads(1, use_torch=use_torch)   # noqa: F841 (held until exit)
    if use_torch:
        out = measure_torch(spec["config"], spec["steps"], spec["warmup"])
    else:
        out = measure(spec["config"], spec["engine"], spec["steps"], spec["warmup"], spec.get("attn", "naive"))
    out["numpy_peak_flops"] = gemm_peak()
    out["info"] = bench_measure.library_info(use_torch=use_torch)
    print(json.dumps(out))


def run_profile(name, engine, steps, warmup, attn="naive"):
    spec = json.dumps(dict(config=name, engine=engine, steps=steps, warmup=warmup, attn=attn))
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", spec], env=worker_env(1),
                          capture_output=True, text=True, cwd=ROOT, timeout=WORKER_TIMEOUT_S)
    if proc.returncode != 0:
        raise SystemExit(f"profile of {name} ({engine}) failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="6x384-T256",
                   help=f"{', '.join(CONFIGS)}, several with commas, or all: the benchmark's two (default %(default)s)")
    p.add_argument("--engine", default="numpy",
                   help="numpy, fast, torch (the same step in PyTorch, under torch.profiler), or several with "
                        "commas, e.g. numpy,fast,torch (default %(default)s)")
    p.add_argument("--attn", default="naive", choices=("naive", "flash"),
                   help="the model's attention: naive (full T x T scores, the benchmark's) or flash (default %(default)s)")
    p.add_argument("--steps", type=int, default=10, help="profiled steps (default %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default %(default)s)")
    p.add_argument("--out", type=Path, help="also write DIR/profile-<config>-<engine>.json")
    p.add_argument("--from-json", type=Path, metavar="DIR", help="measure nothing: read DIR/profile-*.json")
    p.add_argument("--update-docs", action="store_true",
                   help="paste the tables (with DOCS/profiles/before-*.json as 'before') into DOCS/benchmarks.md")
    p.add_argument("--docs", type=Path, default=ROOT / "docs", help="the docs folder (default %(default)s)")
    p.add_argument("--worker", help=argparse.SUPPRESS)      # the measuring child process
    args = p.parse_args(argv)
    if args.worker:
        return worker(json.loads(args.worker))
    if args.from_json:
        profiles = [json.loads(f.read_text(encoding="utf-8")) for f in sorted(args.from_json.glob("profile-*.json"))]
    else:
        names = [n for n, _, _ in W.MODELS["full"]] if args.config == "all" else args.config.split(",")
        unknown = [n for n in names if n not in CONFIGS]
        if unknown:
            p.error(f"unknown config {unknown}; choose from {', '.join(CONFIGS)} or all")
        if docsmode.active():     # tests/test_docs_run.py runs every documented command line, in seconds
            print(f"{docsmode.ENV} is set: the smoke config only, 1 warm-up and 2 profiled steps", file=sys.stderr)
            names, args.steps, args.warmup = [W.MODELS["smoke"][0][0]], 2, 1
        engines = args.engine.split(",")
        if not set(engines) <= {"numpy", "fast", "torch"}:
            p.error(f"unknown engine in {args.engine!r}; choose from numpy, fast, torch")
        if "torch" in engines and args.attn == "flash":
            p.error("--attn flash profiles zerollm's flash attention; torch's step has no such switch: drop torch")
        profiles = [run_profile(n, e, args.steps, args.warmup, args.attn) for n in names for e in engines]
    for prof in profiles:
        print(profile_report.table(prof) + "\n")
    if args.out:
        profile_report.write(profiles, args.out)
    if args.update_docs:
        profile_report.update_docs(profiles, args.docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
