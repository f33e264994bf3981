"""The training loop, written once for every stage: pre-training, SFT, reward models, DPO, PPO, GRPO.

What differs between those stages is an objective (zerollm.align.objectives): where batches come from and
how a batch becomes a loss and its gradients. Everything else lives here, once: the schedule,
gradient accumulation, clipping, AdamW, thread shards, log.jsonl, the progress bar, evaluation,
crash-safe checkpoints, exact resume and Ctrl-C.

One optimizer step (``Trainer.step``):
    1. lr = warmup + cosine schedule at this step
    2. for each of grad_accum micro-batches: the objective's next batch, cut into shards (one per
       thread), each shard's loss and gradients, their weighted sum; then add grads / grad_accum
    3. clip the global gradient norm, AdamW update (in place)
With --amp fp16 (zerollm.engine.amp) the backward of step 2 starts from the loss gradient times the loss
scale; step 3 first divides the gradients by it and skips the update when one overflowed.

Exact resume: everything that decides the future is in the checkpoint: parameters (the model's and
any head's), AdamW moments and step count, the dropout RNG, the objective's RNGs and state (e.g. a
batch sampler, a rollout buffer). Evaluation and the samples printed at each eval use their own
generators seeded from (seed, step), so they never shift the training stream. A resumed run
therefore produces bit-identical losses to one that never stopped.
"""

import functools
import os
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from zerollm.io import docsmode
from zerollm.engine.amp import FORMATS, OFF, GradScaler, check_format
from zerollm.engine.threads import by_name_in_parts
from zerollm.training.checkpoint import Snapshot, latest_checkpoint, load_checkpoint, save_checkpoint
from zerollm.model.config import GPTConfig
from zerollm.training.dist import SINGLE
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT
from zerollm.training.lm import LMObjective
from zerollm.training.objective import RunContext
from zerollm.training.optim import AdamW, clip_grad_norm, lr_at
from zerollm.training.parallel import ShardedModel
from zerollm.io.validate import dataclass_from_dict, restore_generator
from zerollm.training.outlets import closed_pipes_tolerated, write_fd


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
    amp: str = field(default=OFF, metadata={"choices": (OFF, *FORMATS),
                                            "help": "emulated mixed precision: 16-bit matmul inputs (zerollm.engine.amp)"})

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
        check_format(self.amp)

    @property
    def decay_iters(self):
        return self.lr_decay_iters or self.max_iters


def check_schedule(train_cfg, given=()):
    """A new run's warmup must end before its learning-rate decay does: a warmup longer than the decay
    would still be raising the rate when it should have come down to min_lr (the trainer cut it short
    without a word). Checked when the decay end was set (--lr-decay-iters) or the warmup was given
    (``given``: the fields the user set); a short --max-iters under a preset's warmup is a quick trial."""
    cfg = train_cfg
    if cfg.warmup_iters <= cfg.decay_iters or (cfg.lr_decay_iters is None and "warmup_iters" not in given):
        return
    if cfg.lr_decay_iters is not None:
        end, flag = f"--lr-decay-iters {cfg.lr_decay_iters}", "--lr-decay-iters"
    else:
        end, flag = f"--max-iters {cfg.max_iters}, as no --lr-decay-iters is given", "--max-iters"
    raise ZeroLLMError(f"--warmup-iters {cfg.warmup_iters} is longer than the learning-rate decay, which ends at "
                       f"step {cfg.decay_iters} ({end}); give --warmup-iters {cfg.decay_iters} or less, or a larger "
                       f"{flag}")


# ----------------------------------------------------------------------------
# the trainer

class Trainer:
    """Holds one run: the objective (and through it the model), AdamW, the thread shards, the step count.
    ``step()`` is one optimizer step; ``fit()`` below is the loop around it."""

    def __init__(self, objective, train_cfg, *, threads=1, tokenizer_path=None, world=None):
        """threads > 1: each batch is cut into that many shards computed in parallel threads
        (zerollm.training.parallel); the caller should then limit BLAS to one thread per shard.
        world: the MPI ranks of this job (zerollm.training.dist); each takes its share of the shards."""
        self.objective, self.cfg = objective, train_cfg
        self.model = objective.model
        self.model_cfg = self.model.config
        self.params = objective.params()
        self.threads = threads
        self.tokenizer_path = tokenizer_path
        self.world = world or SINGLE
        self.sharded = ShardedModel(self.model, threads, self.world)     # the model on its thread shards
        self.optimizer = AdamW(self.params, lr=train_cfg.lr, betas=(train_cfg.beta1, train_cfg.beta2),
                               weight_decay=train_cfg.weight_decay)
        self.model.amp = check_format(train_cfg.amp)
        # fp16 needs loss scaling (its range ends at 6e-8 and 65504); bf16 has float32's range
        self.scaler = GradScaler() if train_cfg.amp == "fp16" else None
        self.iter = 0                   # optimizer steps done
        self.best_val_loss = float("inf")
        self.stop = None                # set by fit(): Ctrl-C / SIGTERM requests
        self.context = RunContext(self.sharded, self.stop_requested)    # all an objective sees of the run
        objective.attach(self.context)
        self.world.check_same({"model": self.model_cfg.to_dict(), "train": asdict(train_cfg), "threads": threads,
                               "objective": objective.fingerprint()}, "settings, weights or data")

    def stop_requested(self):
        """True once Ctrl-C or SIGTERM arrived; long evaluations and rollouts check it. With several MPI
        ranks it stays False there (ranks must run the same collective steps) and the loop decides at the
        next step boundary, for all ranks together (stop_agreed)."""
        return self.stop is not None and self.stop.requested and self.world.size == 1

    def stop_agreed(self):
        """Did any rank get Ctrl-C / SIGTERM? (Collective: every rank calls it at the same point.)"""
        local = self.stop is not None and self.stop.requested
        return any(self.world.allgather(local)) if self.world.size > 1 else local

    # ------------------------------------------------------------------
    def step(self):
        """One optimizer step -> a log record: loss (mean over the micro-batches), lr, grad_norm, tokens,
        and the objective's metrics (and with fp16 loss_scale and skipped)."""
        cfg, scaler = self.cfg, self.scaler
        lr = lr_at(self.iter, lr=cfg.lr, min_lr=cfg.min_lr, warmup_iters=min(cfg.warmup_iters, cfg.decay_iters),
                   decay_iters=cfg.decay_iters)
        if scaler is None:
            total, grads, tokens, metrics = self._accumulate()
        else:
            self.model.grad_scale = float(scaler.scale)      # the backward differentiates scale * loss
            with np.errstate(over="ignore", invalid="ignore"):  # an fp16 overflow is the scaler's to handle
                total, grads, tokens, metrics = self._accumulate()
        # only the model's own gradients were scaled (a head's come from the objective, unscaled)
        skip = scaler is not None and scaler.unscale({name: grads[name] for name in self.model.trainable()})
        pool = self.sharded.pool         # the shard threads share the per-parameter work too
        norm = clip_grad_norm(grads, cfg.grad_clip, pool) if cfg.grad_clip > 0 and not skip else float("nan")
        if not np.isfinite(total) or (cfg.grad_clip > 0 and not skip and not np.isfinite(norm)):
            raise ZeroLLMError(f"training diverged at step {self.iter} (loss {total}, gradient norm {norm}); "
                               "lower --lr or resume from the last checkpoint with a smaller one")
        if not skip:                 # an overflowed fp16 step changes nothing but the loss scale
            self.optimizer.step(grads, lr=lr, pool=pool)
        record = dict(loss=total / cfg.grad_accum, lr=lr, grad_norm=norm, tokens=tokens, **metrics)
        if scaler is not None:
            record.update(loss_scale=float(scaler.scale), skipped=skip)
            scaler.update(skip)
        self.iter += 1
        return record

    def _accumulate(self):
        """grad_accum micro-batches -> (sum of their losses, mean of their gradients, tokens, mean metrics)."""
        cfg = self.cfg
        total, grads, tokens, metrics = 0.0, None, 0, {}
        for _ in range(cfg.grad_accum):
            batch = self.objective.next_batch()    # may sample from the model (RL rollouts) in eval mode
            self.model.train()
            result = self.sharded.run(self.objective.shard_loss, batch)
            total += result.loss
            tokens += self.objective.tokens(batch)
            for name, value in {**batch.get("_metrics", {}), **result.metrics}.items():
                metrics[name] = metrics.get(name, 0.0) + value / cfg.grad_accum
            if grads is None:
                grads = result.grads
            else:                                           # gradient accumulation: sum the micro-batches
                by_name_in_parts(self.sharded.pool, grads, functools.partial(_add_into, grads, result.grads))
        if cfg.grad_accum > 1:
            share = 1.0 / cfg.grad_accum
            by_name_in_parts(self.sharded.pool, grads, lambda name: _scale(grads[name], share))
        return total, grads, tokens, metrics

    def evaluate(self):
        """The objective's evaluation -> (metrics, text or None); keeps best_val_loss up to date."""
        metrics, text = self.objective.evaluate(replace(self.context, step=self.iter))
        if np.isfinite(metrics.get("val_loss", np.nan)):
            self.best_val_loss = min(self.best_val_loss, metrics["val_loss"])
        return metrics, text

    # ------------------------------------------------------------------
    def rng_state(self):
        return {"model": self.model.rng.bit_generator.state,
                **{name: g.bit_generator.state for name, g in self.objective.rngs().items()}}

    def save(self, run_dir):
        """Write a checkpoint (rank 0 only: the other ranks hold the very same numbers)."""
        if not self.world.is_main:
            return None
        state, arrays = self.objective.state()
        return save_checkpoint(run_dir, Snapshot(
            step=self.iter, model_config=self.model_cfg.to_dict(), train_config=asdict(self.cfg),
            params=self.params, optimizer_state=self.optimizer.state_dict(), rng_state=self.rng_state(),
            tokenizer_path=self.tokenizer_path, objective=self.objective.config(), objective_arrays=arrays,
            extra={"best_val_loss": self.best_val_loss, "threads": self.threads, "objective_state": state,
                   **({"grad_scaler": self.scaler.state_dict()} if self.scaler is not None else {})}))

    def restore(self, ckpt):
        missing, unexpected = sorted(set(self.params) - set(ckpt.params)), sorted(set(ckpt.params) - set(self.params))
        if missing or unexpected:
            raise ZeroLLMError(f"checkpoint {ckpt.path} does not fit this run (missing {missing}, unexpected "
                               f"{unexpected}); resume with the command that wrote it")
        if self.model.lora is None:      # with LoRA the checkpoint holds the adapters only, never the base
            self.model.load_state_dict({k: v for k, v in ckpt.params.items() if k in self.model.params})
        for name, value in ckpt.params.items():
            np.copyto(self.params[name], value, casting="same_kind")
        self.optimizer.load_state_dict(ckpt.optimizer_state)
        rng_file = os.path.join(ckpt.path, "rng.json")
        for name, g in {"model": self.model.rng, **self.objective.rngs()}.items():
            restore_generator(g, ckpt.rng_state.get(name), f"{rng_file} (\"{name}\")")
        try:
            self.objective.restore(ckpt.extra.get("objective_state", {}), ckpt.objective_arrays)
        except (KeyError, IndexError, TypeError, ValueError) as err:      # a field missing or of the wrong kind
            raise ZeroLLMError(f"{ckpt.path}: the {self.objective.kind} objective's saved state (state.json "
                               f"objective_state, objective.safetensors) is damaged at {err!r}; resume from the "
                               "run directory to use the checkpoint before it") from None
        if self.scaler is not None:
            if "grad_scaler" not in ckpt.extra:
                raise ZeroLLMError(f"checkpoint {ckpt.path} has no loss-scaler state, so it was not trained with "
                                   "--amp fp16; resume it without changing --amp")
            self.scaler.load_state_dict(ckpt.extra["grad_scaler"])
        self.iter = ckpt.step
        self.best_val_loss = ckpt.extra.get("best_val_loss", float("inf"))
        saved = ckpt.extra.get("threads", 1)
        if saved != self.threads:
            warnings.warn(f"this run was saved with --threads {saved} and resumes with {self.threads}: the batch "
                          "is split differently, so losses may differ in the last digits from an uninterrupted run")


def _add_into(total, part, name):
    total[name] += part[name]


def _scale(g, factor):
    g *= g.dtype.type(factor)


def lm_objective(model_cfg, train_cfg, train_data, val_data, *, tokenizer=None, lora=None):
    """Pre-training's objective: a fresh GPT (seeded by train_cfg.seed) and the language-modelling loss.
    lora (zerollm.nn.lora.LoRAConfig): freeze that seeded model and train adapters on it."""
    model = GPT(model_cfg, seed=train_cfg.seed)
    objective = LMObjective(model, train_data, val_data, batch_size=train_cfg.batch_size, seed=train_cfg.seed,
                            eval_iters=train_cfg.eval_iters, sample_tokens=train_cfg.sample_tokens,
                            tokenizer=tokenizer)
    if lora is not None:
        from zerollm.training.checkpoint import weights_digest
        objective.saved = {"lora": lora.to_dict(), "base_digest": weights_digest(model.params)}
        model.add_lora(lora, lora_rng(train_cfg.seed))
    return objective


def lm_trainer(model_cfg, train_cfg, train_data, val_data, *, threads=1, tokenizer=None):
    """A pre-training Trainer in one call, for a library caller or a test (``zerollm train`` builds its
    Trainer in the one run recipe, zerollm.training.run)."""
    return Trainer(lm_objective(model_cfg, train_cfg, train_data, val_data, tokenizer=tokenizer), train_cfg,
                   threads=threads)


def lora_rng(seed):
    """The generator of the adapters' A matrices: decided by the run's seed."""
    return np.random.default_rng([seed, 24])


# ----------------------------------------------------------------------------
# resuming

def resume_point(run_dir, force=None):
    """The checkpoint to resume from, or a clear error."""
    path = latest_checkpoint(run_dir) if os.path.isdir(run_dir) else None
    if path is None:
        raise ZeroLLMError(f"--resume: no checkpoint in {run_dir}; run without --resume to start training")
    return load_checkpoint(path, force=force)


# the TrainConfig fields a --resume may change; every other one is the checkpoint's
CHANGEABLE_ON_RESUME = ("max_iters", "eval_interval", "checkpoint_interval", "eval_iters", "sample_tokens")


def configs_from_checkpoint(ckpt, overrides):
    """On resume the saved configs win; only max_iters / intervals may be changed."""
    allowed = set(CHANGEABLE_ON_RESUME)
    model_cfg = GPTConfig.from_dict(ckpt.model_config, ckpt.config_path, "model")
    train_cfg = dataclass_from_dict(TrainConfig, ckpt.train_config, ckpt.config_path, "train")
    changed = {k: v for k, v in (overrides or {}).items() if k in allowed}
    ignored = sorted(set(overrides or {}) - allowed)
    train_cfg = replace(train_cfg, **changed)
    check_max_iters(ckpt, train_cfg)
    return model_cfg, train_cfg, ignored


def check_max_iters(ckpt, train_cfg):
    """A resumed run may end later or where it stands, never before: --max-iters below the checkpoint's
    step would save that step again under a configuration that says the run ended earlier."""
    if train_cfg.max_iters < ckpt.step:
        raise ZeroLLMError(f"{ckpt.path} is already at step {ckpt.step}; --max-iters {train_cfg.max_iters} would "
                           f"end the run before where it stands: give {ckpt.step} or more, or leave it out")


def timed(fn):
    """(fn(), wall seconds, CPU seconds of the whole process: every thread's)."""
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - t0, time.process_time() - c0


# ----------------------------------------------------------------------------
# the loop

def fit(trainer, run_dir, *, log, progress=True, echo=functools.partial(print, flush=True)):
    """Train from trainer.iter to max_iters: log every step, evaluate every eval_interval (and at the
    end), checkpoint every checkpoint_interval and at the end. Returns the best validation loss.

    Ctrl-C (SIGINT) or SIGTERM stop cleanly: the step in progress finishes, a checkpoint is saved,
    then ``TrainingInterrupted`` is raised. Evaluations and samples stop within a batch or a token.
    A second Ctrl-C (one process) stops at once, without waiting for a long step: the last checkpoint
    remains, as after SIGKILL, which cannot be caught at all.
    """
    cfg = trainer.cfg
    bar = None
    if not trainer.world.is_main:            # rank 0 alone prints, logs and saves (zerollm.training.dist)
        progress, echo, log = False, _quiet, _NullLog()
    several_ranks = trainer.world.size > 1
    try:
        with StopRequests(hard=not several_ranks, announce=trainer.world.is_main, hold=several_ranks) as stop:
            trainer.stop = stop
            first = trainer.iter
            steps = "pre-training steps" if trainer.objective.kind == "lm" else "training steps"
            end = first + docsmode.limit(steps, max(cfg.max_iters - first, 0))
            if first % cfg.eval_interval == 0 and first < end:
                _evaluate(trainer, log, echo)        # before the bar, so its rate measures steps only
            _stop_if_asked(trainer, run_dir)
            bar = _progress_bar(trainer.iter, cfg.max_iters, progress, several_ranks)
            write = bar.write if bar is not None else echo
            while trainer.iter < end:
                if trainer.iter % cfg.eval_interval == 0 and trainer.iter != first:
                    _evaluate(trainer, log, write)
                    if bar is not None:
                        bar.unpause()                # leave the evaluation's time out of the step rate
                step = trainer.iter
                record, dt, cpu = timed(trainer.step)
                record = {"step": step, **record, "dt_ms": dt * 1000, "cpu_ms": cpu * 1000,
                          "tokens_per_s": record["tokens"] / dt}
                log.write(**record)
                if bar is not None:
                    bar.set_postfix(_shown(record, trainer.objective.progress), refresh=False)
                    bar.update(1)
                _stop_if_asked(trainer, run_dir)
                if trainer.iter % cfg.checkpoint_interval == 0 and trainer.iter < end:
                    trainer.save(run_dir)
            _evaluate(trainer, log, write)
            trainer.save(run_dir)
    finally:
        trainer.stop = None
        if bar is not None:
            bar.close()
    return trainer.best_val_loss


def _shown(record, names):
    """The progress bar's numbers: the objective's own (loss; reward, success and KL for RL; accuracy
    for pairs), then the learning rate and the speed."""
    shown = {name: f"{record[name]:.4f}" for name in names if isinstance(record.get(name), (int, float))}
    return {**shown, "lr": f"{record['lr']:.2e}", "tok_s": f"{record['tokens_per_s']:,.0f}"}


def _quiet(*args, **kwargs):
    pass


class _NullLog:
    def write(self, **record):
        pass


def _stop_if_asked(trainer, run_dir):
    if trainer.stop_agreed():
        trainer.save(run_dir)
        raise TrainingInterrupted(f"stopped at step {trainer.iter}; checkpoint saved in {run_dir}; "
                                  "continue with --resume")


class TrainingInterrupted(ZeroLLMError):
    """Training stopped on request after saving a checkpoint."""


class StopRequests:
    """While active, SIGINT/SIGTERM only set ``requested``; the loop stops at the next step boundary,
    so a checkpoint never captures a half-applied optimizer step. With ``hard``, a second one raises
    KeyboardInterrupt at once (checkpoints are written whole or not at all, so the last one stays).

    A closed stdout or stderr (``... | tee log`` and tee ended, by the same Ctrl-C or alone) also asks
    for a stop, but never counts as the first Ctrl-C: the signal that follows it still saves
    (zerollm.training.outlets). With ``hold`` (several MPI ranks), everything printed from the stop request
    on is held back until the block ends, after the checkpoint: a write that reaches a closed pipe through
    mpiexec would get every rank killed before it saves."""

    def __init__(self, hard=False, announce=False, hold=False):
        self.hard, self.announce, self.hold = hard, announce, hold

    @property
    def requested(self):
        return self.signals > 0 or self.output_closed

    def __enter__(self):
        import signal
        import threading
        self.signals, self.output_closed, self._old = 0, False, {}
        self._outlets = closed_pipes_tolerated(self._closed)
        self._streams = self._outlets.__enter__()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _closed(self):
        self.output_closed = True

    def _handle(self, signum, frame):
        if self.signals and self.hard:
            raise KeyboardInterrupt
        if self.hold:
            for stream in self._streams:
                stream.hold()
        if self.announce and not self.signals:
            message = ("\nstopping: the step in progress finishes, then a checkpoint is saved"
                       + (" (Ctrl-C again: stop at once, keeping the last checkpoint)\n" if self.hard else "\n"))
            if self.hold and sys.stderr is not None:
                sys.stderr.write(message)    # an Outlet that holds: the text waits in memory
            else:
                # os.write, not print: a handler may run while the main thread is inside a print to stderr
                write_fd(2, message.encode())
        self.signals += 1

    def __exit__(self, *exc):
        import signal
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        self._outlets.__exit__(*exc)
        return False


def _progress_bar(start, total, enabled, several_ranks=False):
    """tqdm, redrawn at most every 0.1 s (every second under MPI: each redraw that reaches mpiexec after a
    piped reader ended kills the job, zerollm.training.outlets)."""
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=start, unit="step", dynamic_ncols=True, leave=True,
                mininterval=1.0 if several_ranks else 0.1)


def _evaluate(trainer, log, write):
    metrics, text = trainer.evaluate()
    if trainer.stop_requested() or not (metrics or text):
        return                                   # interrupted part-way, or nothing to evaluate on
    log.write(step=trainer.iter, **metrics)
    shown = ", ".join(f"{k.replace('_', ' ')} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
    write(f"step {trainer.iter}: {shown}")
    if text:
        write(text)
