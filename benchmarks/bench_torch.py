"""The PyTorch side of every benchmark: the same work as bench_zerollm.py, in eager float32 torch.

Weights come from zerollm's own ``GPT(config, seed)`` (NumPy, cheap to build), so both sides start
from identical numbers. Contender "torch" for every task:
    train, forward, check   zerollm.teach.torch_ref.TorchGPT + torch.optim.AdamW + clip_grad_norm_
    generate                transformers GPT2LMHeadModel, greedy, a loop over past_key_values
    attention               F.scaled_dot_product_attention(is_causal=True) + autograd backward
    gemm                    torch.mm
"""

import inspect

import numpy as np
import torch
import torch.nn.functional as F

from bench_workloads import OPTIM, attention_inputs, batches, model_gemm_operands, prompt

from zerollm.model.config import GPTConfig
from zerollm.model.gpt import GPT
from zerollm.teach.torch_ref import TorchGPT

# ----------------------------------------------------------------------------
# the model: training step, forward only


def make_model(params):
    """TorchGPT in float32 holding the weights of zerollm's GPT(config, seed)."""
    cfg = GPTConfig(**params["config"])
    model = TorchGPT(cfg, dtype=torch.float32)
    model.load_numpy_state(GPT(cfg, seed=params["seed"]).params)
    return model


def _torch_batches(params):
    return [(torch.from_numpy(x), torch.from_numpy(y))
            for x, y in batches(params["config"], params["batch"], seed=params["seed"])]


def train_step(params):
    """zero_grad, forward, backward, clip_grad_norm_, AdamW step: the loop of nanoGPT's train.py."""
    model = make_model(params).train()
    data = _torch_batches(params)
    named = list(model.named_parameters())
    groups = [{"params": [p for _, p in named if p.ndim >= 2], "weight_decay": OPTIM["weight_decay"]},
              {"params": [p for _, p in named if p.ndim < 2], "weight_decay": 0.0}]   # zerollm's rule
    opt = torch.optim.AdamW(groups, lr=OPTIM["lr"], betas=OPTIM["betas"], eps=OPTIM["eps"])
    count = [0]

    def step():
        x, y = data[count[0] % len(data)]
        count[0] += 1
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)                               # (B, T) -> logits (B, T, V), loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), OPTIM["max_norm"])
        opt.step()
        return loss.item()
    return step


def forward_step(params):
    model = make_model(params).eval()
    x, _ = _torch_batches(params)[0]

    def step():
        with torch.no_grad():
            model(x)                                        # (B, T) -> (B, T, V)
    return step


def check_losses(params, n_steps):
    step = train_step(params)
    return [step() for _ in range(n_steps)]


# ----------------------------------------------------------------------------
# generation with Hugging Face GPT-2 and its KV cache (past_key_values)

def to_gpt2(model_np):
    """A float32 GPT2LMHeadModel holding zerollm's weights.

    Our names are GPT-2's without the "transformer." prefix, and GPT-2's Conv1D stores (in, out)
    like we do, so every tensor is a plain copy; the tied lm_head is wte itself.
    """
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg, ours = model_np.config, model_np.params
    hf_cfg = GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.n_embd,
                        n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=cfg.n_inner,
                        activation_function="gelu_new", layer_norm_epsilon=cfg.norm_eps,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True,
                        bos_token_id=None, eos_token_id=None)
    hf = GPT2LMHeadModel(hf_cfg).eval()
    used = set()
    with torch.no_grad():
        for name, p in hf.named_parameters():             # a tied lm_head is listed once, as wte
            key = name.removeprefix("transformer.")
            p.copy_(torch.from_numpy(ours[key]))           # KeyError = a config GPT-2 cannot express
            used.add(key)
    if used != set(ours):
        raise RuntimeError(f"weights not copied into GPT-2: {sorted(set(ours) - used)}")
    return hf


def _cache_name(hf):
    """The KV-cache argument (and output) of HF's forward: 'cache' from transformers 5.2x,
    'past_key_values' before."""
    return "cache" if "cache" in inspect.signature(hf.forward).parameters else "past_key_values"


def generate_step(params):
    """Greedy decoding, 1 prefill + (new_tokens - 1) one-token steps, like zerollm.generation.sample.generate."""
    model_np = GPT(GPTConfig(**params["config"]), seed=params["seed"]).eval()
    hf = to_gpt2(model_np)
    ids_np = prompt(params["config"], params["prompt_tokens"], seed=params["seed"])   # (1, P)
    ids = torch.from_numpy(ids_np)
    with torch.no_grad():                                  # the twin computes our logits: same weights?
        gap = np.abs(hf(ids).logits.numpy() - model_np.forward(ids_np)[0]).max()
    if not gap < 1e-4:
        raise RuntimeError(f"GPT-2 twin's logits differ from zerollm's by {gap:.2e}")

    cache = _cache_name(hf)

    def step():
        with torch.no_grad():
            out = hf(input_ids=ids, use_cache=True)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)                    # (1, 1)
            new = [nxt]
            for _ in range(params["new_tokens"] - 1):
                out = hf(input_ids=nxt, use_cache=True, **{cache: out[cache]})   # one token, cached k/v
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                new.append(nxt)
        return torch.cat(new, dim=1)[0].tolist()
    return step


# ----------------------------------------------------------------------------
# attention alone and the GEMM peak

def attention_step(params):
    """q, k, v (B, nh, T, hs), the same numbers as the zerollm side; causal flash/math kernel of torch."""
    q, k, v, dout = (torch.from_numpy(a) for a in attention_inputs(params["T"], params["B"], params["nh"],
                                                                   params["hs"], seed=params["seed"]))
    for t in (q, k, v):
        t.requires_grad_(True)

    def step():
        for t in (q, k, v):
            t.grad = None                                  # fresh gradients, not accumulated ones
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # (B, nh, T, hs)
        out.backward(dout)
    return step


def gemm_model_step(params):
    """The same products as bench_zerollm.gemm_model_step, by torch.mm (the transposes stay views)."""
    pairs = [(torch.from_numpy(a), torch.from_numpy(b))
             for a, b in model_gemm_operands(GPTConfig(**params["config"]), params["batch"], seed=params["seed"])]
    outs = [torch.empty(a.shape[0], b.shape[1]) for a, b in pairs]

    def step():
        for (a, b), c in zip(pairs, outs):
            torch.mm(a, b, out=c)
    return step


def gemm_step(params):
    n = params["n"]
    rng = np.random.default_rng(params["seed"])
    a, b = (torch.from_numpy(rng.standard_normal((n, n), dtype=np.float32)) for _ in range(2))
    c = torch.empty(n, n)

    def step():
        torch.mm(a, b, out=c)                              # (n, n) @ (n, n) -> (n, n)
    return step


# ----------------------------------------------------------------------------

BUILDERS = {"train": train_step, "forward": forward_step, "generate": generate_step,
            "attention": attention_step, "gemm": gemm_step, "gemm_model": gemm_model_step}


def build(task, contender, params):
    return BUILDERS[task](params)
