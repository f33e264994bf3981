"""Knowledge distillation: a small student learns a bigger teacher's next-token distribution, not only the data.

    batch: x (B, T) windows of the text (or, with probability ``on_policy``, the student's own samples after
           a prompt cut from the text: GKD's lambda), y (B, T) the next ids, kd (B, T) where the divergence counts
    loss:  (1 - ce_weight) D(teacher || student) + ce_weight CE(y | x)       D: zerollm.nn.distill

The teacher runs forward only (no activations kept, no gradient), once per row of the batch, and its logits
serve the divergence of that row. On an on-policy batch (Agarwal et al. 2024, "On-Policy Distillation of
Language Models") the student samples the continuation through the one decode loop
(zerollm.generation.decode.sample_completions); the divergence counts on the sampled tokens only, and the
cross-entropy, which would teach the student its own samples, is left out of those rows.

Teacher and student share one tokenizer (the same bytes or text under every id), the same number of
logits, and the teacher reads at least the student's context: otherwise the run is refused in one line.
"""

import os
from dataclasses import dataclass, field

import numpy as np

from zerollm.align.stage import load_start, reload_start
from zerollm.data.tokens import read_corpus, split_counts, get_batch
from zerollm.generation.display import first_difference
from zerollm.io import docsmode
from zerollm.io.errors import ZeroLLMError
from zerollm.nn.distill import DIVERGENCES, distill_backward, distill_forward
from zerollm.nn.loss import IGNORE_INDEX, cross_entropy_backward, cross_entropy_forward, token_nll
from zerollm.tokenizers.bytecount import bits_and_bytes
from zerollm.training.checkpoint import weights_digest
from zerollm.training.lm import LMObjective
from zerollm.training.objective import ShardResult


@dataclass(frozen=True)
class DistillConfig:
    divergence: str = field(default="forward_kl", metadata={
        "choices": DIVERGENCES, "help": "forward_kl = KL(teacher||student); reverse_kl = KL(student||teacher); "
                                        "jsd = generalized Jensen-Shannon with --beta (GKD)"})
    beta: float = field(default=0.5, metadata={"help": "the JSD's beta in [0, 1]: 0 is the forward KL, 1 the "
                                                       "reverse KL (as TRL's generalized_jsd_loss)"})
    temperature: float = field(default=1.0, metadata={"help": "both sets of logits are divided by it before "
                                                              "the softmax"})
    ce_weight: float = field(default=0.0, metadata={"help": "the share of the data's cross-entropy in the loss: "
                                                            "(1 - w) divergence + w cross-entropy"})
    on_policy: float = field(default=0.0, metadata={"help": "GKD's lambda: the probability that a batch is "
                                                            "sampled by the student after a prompt cut from the data"})
    sample_temperature: float = field(default=1.0, metadata={"help": "the temperature of the student's "
                                                                     "on-policy samples"})

    def __post_init__(self):
        if self.divergence not in DIVERGENCES:
            raise ZeroLLMError(f"--divergence must be one of {', '.join(DIVERGENCES)}; got {self.divergence!r}")
        for name in ("beta", "ce_weight", "on_policy"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ZeroLLMError(f"--{name.replace('_', '-')} must lie in [0, 1]; got {value}")
        for name in ("temperature", "sample_temperature"):
            if not getattr(self, name) > 0:
                raise ZeroLLMError(f"--{name.replace('_', '-')} must be > 0; got {getattr(self, name)}")


# ----------------------------------------------------------------------------
# the teacher and the student

TEACHER_FLAGS = (("ckpt", "--teacher"), ("hf", "--hf"), ("gguf", "--gguf"))


def teacher_source(args):
    """{"kind", "path"} of the one teacher flag given (--teacher RUN, --hf DIR or --gguf FILE)."""
    given = [(kind, getattr(args, dest)) for kind, dest in (("ckpt", "teacher"), ("hf", "hf"), ("gguf", "gguf"))
             if getattr(args, dest, None)]
    if len(given) != 1:
        raise ZeroLLMError("give the teacher with exactly one of --teacher RUN, --hf DIR or --gguf FILE")
    kind, path = given[0]
    return {"kind": kind, "path": os.path.abspath(path)}


def open_teacher(record, force=None):
    """The teacher a record names (zerollm.interop.opening.open_model), adapters folded in, in eval mode;
    -> (model, tokenizer, digest of its float weights)."""
    from zerollm.interop.opening import Source, open_model
    opened = open_model(Source(**{record["kind"]: record["path"]}, force=force), merged=True)
    floats = {k: v for k, v in opened.model.params.items() if isinstance(v, np.ndarray)}
    return opened.model.eval(), opened.tokenizer, weights_digest(floats)


def check_pair(student, tok, teacher, teacher_tok, where):
    """Refuse a teacher that cannot teach this student: another tokenizer, another number of logits, or a
    shorter context."""
    said = f"the teacher {where}"
    if teacher.config.vocab_size != student.config.vocab_size or teacher_tok.vocab_size != tok.vocab_size:
        raise ZeroLLMError(f"{said} has {teacher_tok.vocab_size} token ids ({teacher.config.vocab_size} logits), the "
                           f"student {tok.vocab_size} ({student.config.vocab_size}): distillation needs one "
                           "tokenizer; train the student with the teacher's tokenizer")
    differ = first_difference(tok, teacher_tok)
    if differ is not None:
        i, mine, theirs = differ
        raise ZeroLLMError(f"{said} has another tokenizer: id {i} is {theirs!r} there and {mine!r} in the "
                           "student; distillation needs one tokenizer")
    if teacher.config.block_size < student.config.block_size:
        raise ZeroLLMError(f"{said} reads {teacher.config.block_size} tokens, less than the student's context of "
                           f"{student.config.block_size}; give the student a --block-size of at most "
                           f"{teacher.config.block_size}")


def open_student(args, train_cfg):
    """The stage's starting model: --init RUN, or a fresh --preset NAME model on the teacher's tokenizer (the
    model flags on top); -> (student, tokenizer, start record holding the teacher's record too)."""
    from zerollm.model.config import GPTConfig
    from zerollm.model.gpt import GPT
    from zerollm.training.presets import build_configs
    record = teacher_source(args)
    teacher, teacher_tok, digest = open_teacher(record, args.force)
    if args.init and args.preset:
        raise ZeroLLMError("give the student with one of --init RUN or --preset NAME, not both")
    if args.init:
        student, tok, start = load_start(args.init, None, args.force, args.adapter, args.quantize_base)
    elif args.preset:
        overrides = {f: getattr(args, f) for f in GPTConfig.__dataclass_fields__
                     if f != "vocab_size" and getattr(args, f, None) is not None}
        model_cfg, _ = build_configs(args.preset, overrides, vocab_size=teacher.config.vocab_size)
        student, tok = GPT(model_cfg, seed=train_cfg.seed), teacher_tok
        start = {"path": f"preset:{args.preset}", "hf": False, "digest": weights_digest(student.params),
                 "model": {f: getattr(model_cfg, f) for f in GPTConfig.__dataclass_fields__}, "seed": train_cfg.seed}
    else:
        raise ZeroLLMError("give the student: --init RUN (a trained zerollm model) or --preset NAME (a new one)")
    check_pair(student, tok, teacher, teacher_tok, record["path"])
    size = {"model": teacher.config.to_dict(), "bytes": int(sum(w.nbytes for w in teacher.params.values()))}
    return student.eval(), tok, {**start, "teacher": {**record, "digest": digest, **size}}


def teacher_memory(estimate, plan, rows):
    """The --dry-run / memory estimate of a distill step plus the teacher at its own size (zerollm.model.budget
    .with_teacher), from the config and bytes open_student recorded; ``rows``: sequences a process puts through."""
    from zerollm.model.budget import with_teacher
    from zerollm.model.config import GPTConfig
    teacher = plan.start.get("teacher") or {}
    if "model" not in teacher:           # a run begun before the teacher's size was recorded
        return estimate
    cfg = GPTConfig.from_dict(teacher["model"], "the teacher's record", "model")
    return with_teacher(estimate, cfg, teacher["bytes"], rows, plan.model.config.block_size)


def reopen_student(start):
    """The starting student again on --resume (checked by digest); a preset student is rebuilt from its config."""
    from zerollm.model.config import GPTConfig
    from zerollm.model.gpt import GPT
    if "model" not in start:
        return reload_start(start)
    student = GPT(GPTConfig(**start["model"]), seed=start["seed"])
    if weights_digest(student.params) != start["digest"]:
        raise ZeroLLMError(f"the {start['path']} student rebuilt from its seed has another digest than the run's; "
                           "resume with the zerollm version that started the run")
    _, tok, _ = open_teacher(start["teacher"])
    return student.eval(), tok


def reopen_teacher(record, force=None):
    teacher, tok, digest = open_teacher(record, force)
    if digest != record.get("digest"):
        raise ZeroLLMError(f"the teacher {record['path']} has changed since this run began (its weights' digest "
                           "differs); put the original back")
    return teacher, tok


def text_ids(path, tok, block_size):
    """The text file's ids, split into (train, val) as zerollm prepare splits (the last tenth validates)."""
    text, _ = read_corpus(path)
    ids = np.asarray(tok.encode(text), dtype=np.int64)
    n_train, _ = split_counts(len(ids), 0.1, block_size)
    return ids[:n_train], ids[n_train:]


# ----------------------------------------------------------------------------
# the objective

class DistillObjective(LMObjective):
    """Pre-training's windows of the corpus (its data, generator, token count and fingerprint), learned from
    the teacher's distribution instead of (or mixed with) the next token alone."""
    kind = "distill"
    progress = ("loss", "kd")

    def __init__(self, model, teacher, data, *, batch_size, seed, eval_iters, cfg=DistillConfig(), tokenizer=None):
        """data: (train ids, val ids); teacher: a GPT in eval mode, never trained."""
        super().__init__(model, *data, batch_size=batch_size, seed=seed, eval_iters=eval_iters, tokenizer=tokenizer)
        self.teacher, self.cfg = teacher, cfg

    def describe(self):
        c = self.cfg
        how = c.divergence + (f" beta={c.beta}" if c.divergence == "jsd" else "")
        return f"distill ({how}, temperature {c.temperature}, ce_weight {c.ce_weight}, on_policy {c.on_policy})"

    def next_batch(self):
        T = self.model.config.block_size
        x, y = get_batch(self.train_data, self.batch_size, T, self.data_rng)
        kd = np.ones_like(x, dtype=bool)
        if self.cfg.on_policy and self.data_rng.random() < self.cfg.on_policy:
            x, y, kd = self._sampled(x)
            y = np.where(kd, y, IGNORE_INDEX)
        return {"x": x, "y": y, "kd": kd, "sampled": np.full(len(x), not kd.all())}

    def _sampled(self, x):
        """The student continues the first quarter of each window up to T + 1 tokens (the one decode loop)."""
        from zerollm.generation.decode import Completions, sample_completions
        from zerollm.generation.sample import Sampling
        B, T = x.shape
        P = max(T // 4, 1)
        base = int(self.data_rng.integers(2 ** 31))         # the draws depend on the saved generator only
        how = Completions(T + 1 - P, Sampling(temperature=self.cfg.sample_temperature))
        rows = sample_completions(self.model, [row[:P].tolist() for row in x], how,
                                  seeds=[(self.seed, 7, base, i) for i in range(B)])
        seq = np.array([x[i, :P].tolist() + rows[i] for i in range(B)], dtype=np.int64)   # (B, T + 1)
        kd = np.zeros((B, T), dtype=bool)
        kd[:, P - 1:] = True                                 # targets the student sampled
        return seq[:, :-1], seq[:, 1:], kd

    def shard_loss(self, model, batch):
        x, y, kd, cfg = batch["x"], batch["y"], batch["kd"], self.cfg
        logits, _ = model.forward(x)                                          # (B, T, V), activations kept
        teacher, _ = self.teacher.forward(x, keep=False)                      # forward only, nothing kept
        D, cache = distill_forward(logits, teacher, kd, cfg.divergence, cfg.beta, cfg.temperature)
        dz = distill_backward(cache, 1.0 - cfg.ce_weight)
        ce = 0.0
        if cfg.ce_weight and not batch["sampled"].any():                      # never the student's own samples
            ce, ce_cache = cross_entropy_forward(logits, y)
            dz += cross_entropy_backward(ce_cache, cfg.ce_weight)
        loss = (1.0 - cfg.ce_weight) * D + (cfg.ce_weight * ce if not batch["sampled"].any() else 0.0)
        grads = model.backward(dz)
        return ShardResult(loss + model.moe_loss(), grads, max(int(kd.sum()), 1), {"kd": D, "ce": float(ce)})

    # ------------------------------------------------------------------
    def evaluate(self, context):
        """On eval_iters validation windows (a generator seeded by the step): the student's cross-entropy, its
        bits per byte and the divergence from the teacher."""
        self.model.eval()
        rng = np.random.default_rng([self.seed, 2, context.step])
        ce, kd, bits, nbytes = [], [], 0.0, 0
        cfg = self.cfg
        for _ in range(docsmode.limit("evaluation batches", self.eval_iters)):
            if context.stop_requested():
                break
            x, y = get_batch(self.val_data, self.batch_size, self.model.config.block_size, rng)
            logits = context.sharded.forward(x)
            teacher, _ = self.teacher.forward(x, keep=False)
            ce.append(cross_entropy_forward(logits, y)[0])
            kd.append(distill_forward(logits, teacher, np.ones_like(x, dtype=bool), cfg.divergence, cfg.beta,
                                      cfg.temperature)[0])
            if self.byte_lengths is not None:
                b, n = bits_and_bytes(token_nll(logits, y), y, self.byte_lengths)
                bits, nbytes = bits + b, nbytes + n
        out = {"val_loss": float(np.mean(ce)) if ce else float("nan"),
               "val_kd": float(np.mean(kd)) if kd else float("nan")}
        if nbytes:
            out["val_bpb"] = bits / nbytes
        return out, None
