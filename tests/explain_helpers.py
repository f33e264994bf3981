"""What the explainer tests share: a small trained run, and how the page prints and stores numbers."""

import json
import re
from pathlib import Path

import numpy as np

from zerollm.data import corpora
from zerollm.cli import main
from zerollm.interop.opening import Source, open_model, save_zerollm


def opened(path):
    """(model, tokenizer, checkpoint) of a zerollm run, step or model directory."""
    o = open_model(Source(ckpt=str(path)), tokenizer="may")
    return o.model, o.tokenizer, o.checkpoint

# a char model small enough to train in a couple of seconds, big enough to have learnt something
TRAIN = ["--tokenizer", "char", "--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--block-size", "32",
         "--batch-size", "8", "--max-iters", "40", "--eval-interval", "20", "--eval-iters", "2",
         "--checkpoint-interval", "40", "--sample-tokens", "0", "--no-progress", "--seed", "3"]
TEXT = "ROMEO: What light through yonder"   # 32 characters: the whole context


def tiny_run(tmp_path_factory):
    """A trained run directory, made once per test session (both explain test modules use it)."""
    run = tmp_path_factory.getbasetemp() / "explain-run"
    if not (run / "latest.json").exists():
        data = tmp_path_factory.getbasetemp() / "explain-data.txt"
        data.write_text(corpora.path("shakespeare").read_text()[:40_000])
        assert main(["train", "--data", str(data), "--out", str(run), *TRAIN]) == 0
    return run


def flash_copy(run, target):
    """The run's checkpoint with attn_impl='flash' in its config: the same weights, no stored weights."""
    import shutil
    shutil.copytree(run, target)
    step_dir = next(target.glob("step-*"))
    config = json.loads((step_dir / "config.json").read_text())
    config["model"]["attn_impl"] = "flash"
    (step_dir / "config.json").write_text(json.dumps(config))
    return target


def shown(v):
    """A number as the page prints it: 4 decimals, -0 as 0, a hidden score (None) as −∞."""
    if v is None:
        return "−∞"
    text = f"{v:.4f}"
    return "0.0000" if text == "-0.0000" else text


def page_data(html):
    """The JSON object the page's script reads."""
    match = re.search(r'<script id="zerollm-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(match.group(1))


def model_truth(run, text):
    """What the model itself says, computed here without the page's code: (ids, weights per layer
    (nh, T, T), probabilities (T, V), the tokenizer)."""
    model, tok, _ = opened(run)
    ids = tok.encode(text)[:model.config.block_size]
    logits, _ = model.forward(np.array([ids]), keep=True)
    weights = [w[0] for w in model.attention_weights()]
    z = logits[0].astype(np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return ids, weights, e / e.sum(axis=-1, keepdims=True), tok


def bidirectional_view(text="a bc"):
    """A small bidirectional GPT over bytes reads ``text``: (view, notes, its own weights per layer)."""
    from zerollm.teach.explain.model_view import model_view
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import ByteTokenizer
    model = GPT(GPTConfig(vocab_size=256, block_size=16, n_layer=1, n_head=2, n_embd=16, causal=False), seed=1)
    view, notes = model_view(model, ByteTokenizer(), text, name="encoder")
    model.forward(np.array([list(text.encode())]), keep=True)
    return view, notes, [w[0] for w in model.attention_weights()]


def visible(text):
    return text.replace(" ", "␣").replace("\n", "↵")


ARTIFACTS_ENV = "ZEROLLM_ARTIFACTS"


def artifact_dir(tmp_path_factory):
    """Where screenshots go: $ZEROLLM_ARTIFACTS if set (CI can keep them), else pytest's temp folder."""
    import os
    folder = os.environ.get(ARTIFACTS_ENV)
    path = Path(folder) if folder else tmp_path_factory.mktemp("explain-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path
