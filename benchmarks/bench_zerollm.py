"""The zerollm (NumPy) side of every benchmark: one ``step()`` closure per task.

Each builder does all the setup (weights, batches, optimizer) outside the closure, so the timed
step is exactly the work being compared. Never imports torch.

Contenders: "zerollm" (train, forward, generate, check), "naive" and "flash" (attention),
"numpy" (gemm, gemm_model). params["engine"] picks zerollm's engine: 'numpy' (the reference) or 'fast'.
Imports torch only for the training step with params["gemm"] == "torch" (use_torch_gemms).
"""

import numpy as np

from bench_workloads import OPTIM, attention_inputs, batches, model_gemm_operands, prompt

from zerollm.model.config import GPTConfig
from zerollm.engine import get_engine, set_engine
from zerollm.model.gpt import GPT
from zerollm.training.optim import AdamW, clip_grad_norm
from zerollm.training.parallel import ShardedModel
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling

# ----------------------------------------------------------------------------
# the model: training step, forward only, generation


def make_model(params):
    """The model every contender starts from: GPT(config, seed) in float32, on the engine asked for
    (params["engine"]: 'numpy' or 'fast'; default numpy)."""
    set_engine(params.get("engine", "numpy"))
    return GPT(GPTConfig(**params["config"]), seed=params["seed"])


def use_torch_gemms():
    """Have zerollm's linear layers multiply with torch.mm (MKL in torch's wheel) instead of NumPy's BLAS,
    in this process only: the "same GEMMs" measurement (run.py), which takes a host's BLAS difference out
    of the training comparison. Only the three products of nn.linear change (x @ w, dy @ w^T, x^T @ dy,
    zero-copy through torch.from_numpy); everything else is zerollm's, and the attention's products still
    run in NumPy's BLAS or the fast engine's kernels. Every projection goes through nn.lora's names
    (benchmarks/profile.py patches the same two). One torch thread: zerollm trains with N threads as N
    single-threaded shards (zerollm.training.parallel), forked after this patch, so they inherit it. With the
    fast engine, whose linear forward starts y as rows of b and lets BLAS add x @ w (engine/fast/linear.py),
    the forward is torch.addmm, which does the same."""
    import torch

    from zerollm.nn import linear, lora
    torch.set_num_threads(1)

    def mm(a, b):
        return torch.mm(torch.from_numpy(a), torch.from_numpy(b)).numpy()

    def linear_forward(x, w, b=None):
        x2 = x.reshape(-1, x.shape[-1])
        if b is not None and get_engine() == "fast":         # the fast engine folds b into the product
            y = torch.addmm(torch.from_numpy(b), torch.from_numpy(x2), torch.from_numpy(w)).numpy()
        else:
            y = mm(x2, w)                                    # (N, i) @ (i, o)
            if b is not None:
                y += b
        return y.reshape(*x.shape[:-1], w.shape[1]), linear.LinearCache(x, w, b is not None)

    def linear_backward(dy, cache, weights=True):
        x, w = cache.x, cache.w
        x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
        dx = mm(dy2, w.T).reshape(x.shape)                   # (N, o) @ (o, i)
        if not weights:
            return dx, None, None
        return dx, mm(x2.T, dy2), dy2.sum(axis=0) if cache.has_bias else None   # (i, N) @ (N, o)
    lora.linear_forward, lora.linear_backward = linear_forward, linear_backward


def train_step(params):
    """forward + backward + global-norm clip + AdamW, cycling over the shared batches (params["gemm"] ==
    "torch": with torch.mm's products in the linear layers, see use_torch_gemms)."""
    if params.get("gemm") == "torch":
        use_torch_gemms()
    model = make_model(params).train()
    sharded = ShardedModel(model, params.get("threads", 1))   # 1 thread: the plain model
    data = batches(params["config"], params["batch"], seed=params["seed"])
    opt = AdamW(model.params, lr=OPTIM["lr"], betas=OPTIM["betas"], eps=OPTIM["eps"],
                weight_decay=OPTIM["weight_decay"])       # decays matrices only, as torch's groups below
    count = [0]

    def step():
        x, y = data[count[0] % len(data)]
        count[0] += 1
        loss, grads = sharded.forward_backward(x, y)       # (B, T) -> loss, gradients
        clip_grad_norm(grads, OPTIM["max_norm"], sharded.pool)   # the shard threads share these, as in the Trainer
        opt.step(grads, pool=sharded.pool)
        return float(loss)
    step.model = model                                     # for benchmarks/profile.py
    step.worker_memory_mib = lambda: worker_memory_mib(sharded)
    return step


def worker_memory_mib(sharded):
    """The peak memory growth of the shard worker processes (zerollm.training.processes), in MiB: with
    --threads 2 the second shard runs in one, and its memory belongs in the peak column too."""
    if sharded.procs is None:
        return 0.0
    return sum(k or 0 for k in sharded.procs.memory_kib()) / 1024


def forward_step(params):
    sharded = ShardedModel(make_model(params).eval(), params.get("threads", 1))
    x, _ = batches(params["config"], params["batch"], seed=params["seed"])[0]

    def step():
        sharded.forward(x)                                 # (B, T) -> (B, T, V)
    step.worker_memory_mib = lambda: worker_memory_mib(sharded)
    return step


def generate_step(params):
    """Greedy generation with the KV cache; returns the new token ids."""
    model = make_model(params)
    ids = prompt(params["config"], params["prompt_tokens"], seed=params["seed"])   # (1, P)
    rng = np.random.default_rng(params["seed"])            # unused by greedy decoding

    def step():
        tokens = generate(model, ids, params["new_tokens"], Sampling(0.0), rng=rng)
        return [int(t[0]) for t in tokens]
    return step


def check_losses(params, n_steps):
    """The losses of the first n training steps (the harness compares them with torch's)."""
    step = train_step(params)
    return [step() for _ in range(n_steps)]


# ----------------------------------------------------------------------------
# attention alone and the GEMM peak

def attention_step(params, contender):
    """Forward + backward of causal attention, heads as zerollm lays them out:
    q (B, nh, 1, T, hs) (g = 1 query head per kv head), k and v (B, nh, 1, T, hs)."""
    if contender == "flash":
        from zerollm.nn.flash import flash_sdpa_backward as backward, flash_sdpa_forward as forward
    else:
        from zerollm.nn.attention import sdpa_backward as backward, sdpa_forward as forward
    q, k, v, dout = (a[:, :, None] for a in attention_inputs(params["T"], params["B"], params["nh"],
                                                              params["hs"], seed=params["seed"]))

    def step():
        out, cache = forward(q, k, v, causal=True)         # (B, nh, 1, T, hs)
        backward(dout, cache)                              # dq, dk, dv: dropped at once
    return step


def gemm_model_step(params):
    """The linear layers' products of one block's training step (bench_workloads.model_gemm_operands),
    each into a buffer of its own, as the GEMM peak's step does."""
    pairs = model_gemm_operands(GPTConfig(**params["config"]), params["batch"], seed=params["seed"])
    outs = [np.empty((a.shape[0], b.shape[1]), np.float32) for a, b in pairs]

    def step():
        for (a, b), c in zip(pairs, outs):
            np.matmul(a, b, out=c)
    return step


def gemm_step(params):
    n = params["n"]
    rng = np.random.default_rng(params["seed"])
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    c = np.empty((n, n), np.float32)

    def step():
        np.matmul(a, b, out=c)                             # (n, n) @ (n, n) -> (n, n)
    return step


# ----------------------------------------------------------------------------

BUILDERS = {"train": train_step, "forward": forward_step, "generate": generate_step, "gemm": gemm_step,
            "gemm_model": gemm_model_step}


def build(task, contender, params):
    """The step() of ``task``; params["engine"] ('numpy' or 'fast') selects zerollm's engine first."""
    set_engine(params.get("engine", "numpy"))
    if task == "attention":
        return attention_step(params, contender)
    return BUILDERS[task](params)
