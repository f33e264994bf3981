"""The training loop, written out: batches, forward, backward, clipping, AdamW, evaluation,
logging, crash-safe checkpoints and exact resume.

One optimizer step (``Trainer.step``):
    1. lr = warmup + cosine schedule at this step
    2. for each of grad_accum micro-batches: forward, backward, add grads / grad_accum
    3. clip the global gradient norm, AdamW update (in place)

Exact resume: everything that decides the future is in the checkpoint: parameters, AdamW moments
and step count, the batch sampler's RNG and the dropout RNG. Evaluation and the samples printed
at each eval use their own generators seeded from (seed, step), so they never shift the training
stream. A resumed run therefore produces bit-identical losses to one that never stopped.
"""

import functools
import os
import time
import warnings
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from zerollm.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from zerollm.config import GPTConfig
from zerollm.data import get_batch
from zerollm.errors import ZeroLLMError
from zerollm.model import GPT
from zerollm.nn.loss import cross_entropy_forward
from zerollm.optim import AdamW, clip_grad_norm, lr_at
from zerollm.parallel import ShardedModel


@dataclass(frozen=True)
class TrainConfig:
    """Everything about a run except the architecture (that is GPTConfig)."""
    batch_size: int = 12
    max_iters: int = 2000
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_iters: int = 100
    lr_decay_iters: int | None = None     # None = max_iters
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0                # 0 = no clipping
    grad_accum: int = 1
    eval_interval: int = 250
    eval_iters: int = 50
    checkpoint_interval: int = 250
    sample_tokens: int = 200              # printed at each eval; 0 = none
    seed: int = 1337
    tokenizer: str = "char"               # byte | char | bpe
    vocab_size: int | None = None         # for bpe

    def __post_init__(self):
        positive = ("batch_size", "max_iters", "grad_accum", "eval_interval", "eval_iters", "checkpoint_interval")
        for name in positive:
            if getattr(self, name) < 1:
                raise ZeroLLMError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.min_lr <= self.lr:
            raise ZeroLLMError(f"need 0 <= min_lr <= lr, got min_lr={self.min_lr}, lr={self.lr}")
        if self.warmup_iters < 0 or self.grad_clip < 0 or self.weight_decay < 0 or self.sample_tokens < 0:
            raise ZeroLLMError("warmup_iters, grad_clip, weight_decay and sample_tokens must be >= 0")
        if self.tokenizer not in ("byte", "char", "bpe"):
            raise ZeroLLMError(f"tokenizer must be byte, char or bpe; got {self.tokenizer!r}")

    @property
    def decay_iters(self):
        return self.lr_decay_iters or self.max_iters


# ----------------------------------------------------------------------------
# presets: model fields and training fields in one flat dict

PRESETS = {
    # a demo that finishes in seconds: a few hundred steps of a very small byte-level model
    "tiny": dict(n_layer=2, n_head=4, n_embd=64, block_size=64, batch_size=16, max_iters=300,
                 lr=3e-3, min_lr=3e-4, warmup_iters=30, eval_interval=100, eval_iters=10,
                 checkpoint_interval=100, sample_tokens=120, tokenizer="byte", dropout=0.0, bias=False),
    # nanoGPT's CPU run of config/train_shakespeare_char.py (its README: val loss ~1.88); nanoGPT's
    # MLP uses torch.nn.GELU(), the exact erf form
    "shakespeare-cpu": dict(tokenizer="char", n_layer=4, n_head=4, n_embd=128, block_size=64, gelu="erf",
                            batch_size=12, max_iters=2000, lr=1e-3, min_lr=1e-4, warmup_iters=100,
                            lr_decay_iters=2000, beta1=0.9, beta2=0.99, weight_decay=0.1, grad_clip=1.0,
                            dropout=0.0, bias=False, eval_interval=250, eval_iters=50,
                            checkpoint_interval=250),
    # five-character Tang poems: one poem per line, 25 or 49 characters with the newline
    "tang": dict(tokenizer="char", n_layer=4, n_head=4, n_embd=192, block_size=64, batch_size=16,
                 max_iters=3000, lr=2e-3, min_lr=2e-4, warmup_iters=100, beta2=0.99, weight_decay=0.1,
                 grad_clip=1.0, dropout=0.0, bias=False, eval_interval=500, eval_iters=40,
                 checkpoint_interval=500, sample_tokens=150),
}

# the shipped corpus (zerollm.corpora) each preset trains on when no --data is given
PRESET_CORPUS = {"tiny": "shakespeare", "shakespeare-cpu": "shakespeare", "tang": "tang"}

MODEL_FIELDS = {f.name for f in fields(GPTConfig)} - {"vocab_size"}
TRAIN_FIELDS = {f.name for f in fields(TrainConfig)}


def split_overrides(values):
    """{field: value} -> (model overrides, train overrides); unknown names are an error."""
    unknown = set(values) - MODEL_FIELDS - TRAIN_FIELDS
    if unknown:
        raise ZeroLLMError(f"unknown settings {sorted(unknown)}")
    return ({k: v for k, v in values.items() if k in MODEL_FIELDS},
            {k: v for k, v in values.items() if k in TRAIN_FIELDS})


def build_configs(preset=None, overrides=None, vocab_size=None):
    """Preset, then the user's overrides, on top of the dataclass defaults."""
    if preset is not None and preset not in PRESETS:
        raise ZeroLLMError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    values = {**PRESETS.get(preset, {}), **(overrides or {})}
    model_kw, train_kw = split_overrides(values)
    train_cfg = TrainConfig(**train_kw)
    model_cfg = GPTConfig(vocab_size=vocab_size or 256, **model_kw)
    return model_cfg, train_cfg


# ----------------------------------------------------------------------------
# the trainer

class Trainer:
    """Holds the model, the optimizer and the RNGs of one run; ``step()`` is one optimizer step."""

    def __init__(self, model_cfg, train_cfg, train_data, val_data, *, threads=1):
        """threads > 1: each batch is cut into that many shards computed in parallel threads
        (zerollm.parallel); the caller should then limit BLAS to one thread per shard."""
        self.model_cfg, self.cfg = model_cfg, train_cfg
        self.train_data, self.val_data = train_data, val_data
        self.model = GPT(model_cfg, seed=train_cfg.seed)
        self.threads = threads
        self.engine = ShardedModel(self.model, threads)
        self.optimizer = AdamW(self.model.params, lr=train_cfg.lr, betas=(train_cfg.beta1, train_cfg.beta2),
                               weight_decay=train_cfg.weight_decay)
        self.data_rng = np.random.default_rng([train_cfg.seed, 1])
        self.iter = 0                   # optimizer steps done
        self.best_val_loss = float("inf")

    # ------------------------------------------------------------------
    def batch(self, data, rng):
        return get_batch(data, self.cfg.batch_size, self.model_cfg.block_size, rng)

    def step(self):
        """One optimizer step; returns (mean loss over the micro-batches, lr, grad norm)."""
        cfg, model = self.cfg, self.model
        lr = lr_at(self.iter, lr=cfg.lr, min_lr=cfg.min_lr, warmup_iters=min(cfg.warmup_iters, cfg.decay_iters),
                   decay_iters=cfg.decay_iters)
        model.train()
        total, grads = 0.0, None
        for _ in range(cfg.grad_accum):
            x, y = self.batch(self.train_data, self.data_rng)
            loss, g = self.engine.forward_backward(x, y)
            total += loss
            if grads is None:
                grads = g
            else:
                for name, value in g.items():   # gradient accumulation: sum the micro-batches
                    grads[name] += value
        if cfg.grad_accum > 1:
            for value in grads.values():
                value *= value.dtype.type(1.0 / cfg.grad_accum)
        norm = clip_grad_norm(grads, cfg.grad_clip) if cfg.grad_clip > 0 else float("nan")
        if not np.isfinite(total) or (cfg.grad_clip > 0 and not np.isfinite(norm)):
            raise ZeroLLMError(f"training diverged at step {self.iter} (loss {total}, gradient norm {norm}); "
                               "lower --lr or resume from the last checkpoint with a smaller one")
        self.optimizer.step(grads, lr=lr)
        self.iter += 1
        return total / cfg.grad_accum, lr, norm

    def estimate_loss(self):
        """Mean loss over eval_iters random batches of each split, from an RNG seeded by the step."""
        self.model.eval()
        out = {}
        for split, data in (("train", self.train_data), ("val", self.val_data)):
            rng = np.random.default_rng([self.cfg.seed, 2, self.iter])
            losses = []
            for _ in range(self.cfg.eval_iters):
                x, y = self.batch(data, rng)
                losses.append(cross_entropy_forward(self.engine.forward(x), y)[0])
            out[split] = float(np.mean(losses))
        return out

    def sample(self, tokenizer, n_tokens):
        """A short sample from the start of the validation text (for the eval printout)."""
        from zerollm.sample import generate
        prompt = np.asarray(self.val_data[:1], dtype=np.int64)
        rng = np.random.default_rng([self.cfg.seed, 3, self.iter])
        with warnings.catch_warnings():          # a sample longer than the context is expected here
            warnings.simplefilter("ignore")
            ids = [int(t[0]) for t in generate(self.model, prompt, n_tokens, temperature=0.8, rng=rng)]
        return tokenizer.decode([int(prompt[0])] + ids)

    # ------------------------------------------------------------------
    def state(self):
        return dict(rng={"data": self.data_rng.bit_generator.state, "model": self.model.rng.bit_generator.state})

    def save(self, run_dir, tokenizer_path):
        return save_checkpoint(
            run_dir, step=self.iter, model_config=self.model_cfg.to_dict(), train_config=asdict(self.cfg),
            params=self.model.params, optimizer_state=self.optimizer.state_dict(),
            rng_state=self.state()["rng"], tokenizer_path=tokenizer_path,
            extra={"best_val_loss": self.best_val_loss, "threads": self.threads})

    def restore(self, ckpt):
        self.model.load_state_dict(ckpt.params)
        self.optimizer.load_state_dict(ckpt.optimizer_state)
        self.data_rng.bit_generator.state = ckpt.rng_state["data"]
        self.model.rng.bit_generator.state = ckpt.rng_state["model"]
        self.iter = ckpt.step
        self.best_val_loss = ckpt.extra.get("best_val_loss", float("inf"))
        saved = ckpt.extra.get("threads", 1)
        if saved != self.threads:
            warnings.warn(f"this run was saved with --threads {saved} and resumes with {self.threads}: the batch "
                          "is split differently, so losses may differ in the last digits from an uninterrupted run")


# ----------------------------------------------------------------------------
# resuming

def resume_point(run_dir):
    """The checkpoint to resume from, or a clear error."""
    path = latest_checkpoint(run_dir) if os.path.isdir(run_dir) else None
    if path is None:
        raise ZeroLLMError(f"--resume: no checkpoint in {run_dir}; run without --resume to start training")
    return load_checkpoint(path)


def configs_from_checkpoint(ckpt, overrides):
    """On resume the saved configs win; only max_iters / intervals may be changed."""
    allowed = {"max_iters", "eval_interval", "checkpoint_interval", "eval_iters", "sample_tokens"}
    model_cfg = GPTConfig.from_dict(ckpt.model_config)
    train_cfg = TrainConfig(**ckpt.train_config)
    changed = {k: v for k, v in (overrides or {}).items() if k in allowed}
    ignored = sorted(set(overrides or {}) - allowed)
    return model_cfg, replace(train_cfg, **changed), ignored


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


# ----------------------------------------------------------------------------
# the loop

def fit(trainer, run_dir, tokenizer, tokenizer_path, *, log, progress=True, echo=functools.partial(print, flush=True)):
    """Train from trainer.iter to max_iters: log every step, evaluate and sample every eval_interval,
    checkpoint every checkpoint_interval and at the end. Returns the best validation loss.

    Ctrl-C (SIGINT) or SIGTERM stop cleanly: the step in progress finishes, a checkpoint is saved,
    then ``TrainingInterrupted`` is raised. (SIGKILL cannot be caught; the last checkpoint remains.)
    """
    cfg = trainer.cfg
    tokens_per_step = cfg.batch_size * cfg.grad_accum * trainer.model_cfg.block_size
    bar = _progress_bar(trainer.iter, cfg.max_iters, progress)
    write = bar.write if bar is not None else echo
    try:
        with StopRequests() as stop:
            while trainer.iter < cfg.max_iters:
                if trainer.iter % cfg.eval_interval == 0:
                    _evaluate(trainer, tokenizer, log, write)
                step = trainer.iter
                (loss, lr, norm), dt = timed(trainer.step)
                log.write(step=step, loss=loss, lr=lr, grad_norm=norm, dt_ms=dt * 1000,
                          tokens_per_s=tokens_per_step / dt)
                if bar is not None:
                    bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_step / dt:,.0f}")
                    bar.update(1)
                if stop.requested:
                    trainer.save(run_dir, tokenizer_path)
                    raise TrainingInterrupted(f"stopped at step {trainer.iter}; checkpoint saved in {run_dir}; "
                                              "continue with --resume")
                if trainer.iter % cfg.checkpoint_interval == 0 and trainer.iter < cfg.max_iters:
                    trainer.save(run_dir, tokenizer_path)
            _evaluate(trainer, tokenizer, log, write)
            trainer.save(run_dir, tokenizer_path)
    finally:
        if bar is not None:
            bar.close()
    return trainer.best_val_loss


class TrainingInterrupted(ZeroLLMError):
    """Training stopped on request after saving a checkpoint."""


class StopRequests:
    """While active, SIGINT/SIGTERM only set ``requested``; the loop stops at the next step boundary,
    so a checkpoint never captures a half-applied optimizer step."""

    def __enter__(self):
        import signal
        import threading
        self.requested, self._old = False, {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.requested = True

    def __exit__(self, *exc):
        import signal
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        return False


def _progress_bar(start, total, enabled):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=start, unit="step", dynamic_ncols=True, leave=True)


def _evaluate(trainer, tokenizer, log, write):
    losses = trainer.estimate_loss()
    trainer.best_val_loss = min(trainer.best_val_loss, losses["val"])
    log.write(step=trainer.iter, train_loss=losses["train"], val_loss=losses["val"])
    write(f"step {trainer.iter}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    if trainer.cfg.sample_tokens:
        write("--- sample ---\n" + trainer.sample(tokenizer, trainer.cfg.sample_tokens) + "\n--------------")
