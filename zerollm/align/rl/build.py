"""How a PPO or GRPO stage builds its objective: the prompts through the chat template, the model and
its frozen reference extended alike, and the reward sources named by the flags.
"""

import math
import sys

from zerollm.align.rl.objective import Prompts
from zerollm.align.stage import Stage, frozen_reference
from zerollm.align.tasks.evaluate import check_examples
from zerollm.data.chat import chat_model
from zerollm.io.errors import ZeroLLMError


def rollout_inputs(model, tok, inputs, seed, tools=()):
    """The model and tokenizer extended for the chat template, and the Prompts to train on and to evaluate;
    ``tools`` (OpenAI specs, from --tools) go into every prompt that lists none."""
    from zerollm.data import chat
    from zerollm.data.formats import read_prompts
    rows = read_prompts(inputs["data"])
    eval_rows = read_prompts(inputs["eval_data"]) if inputs["eval_data"] else []
    if not eval_rows:
        print("note: no --eval-data, so no heldout evaluations (log.jsonl still has each step's rollout "
              "rewards)", file=sys.stderr)
    if tools:       # --tools: every prompt offers them (a row's own "tools" list stays as it is)
        rows, eval_rows = ([{**r, "tools": r.get("tools") or tools} for r in rs] for rs in (rows, eval_rows))
    model, tok = chat_model(model, tok, rows + eval_rows, seed)
    encode = lambda rs: Prompts(tuple(rs), tuple(chat.encode_prompt(tok, r["prompt"], tools=r.get("tools")) for r in rs))
    return model, tok, encode(rows), encode(eval_rows)


def reward_sources(cfg, tok):
    from zerollm.training.parallel import ShardedModel
    from zerollm.align.rl.rewards import sources_from_flags
    specs = [s.strip() for s in cfg.reward.split(",") if s.strip()] if cfg.reward else []
    try:
        weights = [float(w) for w in cfg.reward_weights.split(",")] if cfg.reward_weights else None
    except ValueError:
        raise ZeroLLMError(f"--reward-weights must be comma-separated numbers, got {cfg.reward_weights!r}") from None
    if weights is not None and not all(math.isfinite(w) for w in weights):
        raise ZeroLLMError(f"--reward-weights must be finite numbers, got {cfg.reward_weights!r}: a nan or inf "
                           "weight makes every reward nan and the run diverges at its first step")
    return sources_from_flags(specs, weights, cfg.rm, tok, lambda m: ShardedModel(m, 1), timeout=cfg.reward_timeout)


def build_rollout_objective(cls, model, tok, inputs, train_cfg, cfg, start, **kw):
    from zerollm.align.rl.objective import rollout_tools
    box = rollout_tools(cfg)                  # a broken tools module stops here, before the model is extended
    model, tok, prompts, heldout = rollout_inputs(model, tok, inputs, train_cfg.seed, box.specs() if box else ())
    reference = frozen_reference(model, tok, start, train_cfg.seed)      # the same new rows as the policy
    sources = reward_sources(cfg, tok)
    for src in sources:                 # a task verifier reads every prompt's fields before any rollout
        if src.task is not None:
            check_examples(src.task, prompts.rows, f"--data {inputs['data']} example")
            check_examples(src.task, heldout.rows, f"--eval-data {inputs['eval_data']} example")
    objective = cls(model, reference, tok, prompts, sources=sources, config=cfg, seed=train_cfg.seed, heldout=heldout,
                    **kw)
    return objective, tok


def rollout_stage(name, config_cls, objective_cls):
    """The Stage of ``zerollm ppo`` or ``zerollm grpo``: the same defaults and flags, its own objective."""
    def build(model, tok, inputs, train_cfg, cfg, start):
        return build_rollout_objective(objective_cls, model, tok, inputs, train_cfg, cfg, start)
    return Stage(name, config_cls, build=build, reference=True,
                 defaults=dict(lr=1e-5, min_lr=1e-6, warmup_iters=0, max_iters=200, weight_decay=0.0,
                               eval_interval=50, checkpoint_interval=25, sample_tokens=0, grad_clip=1.0),
                 skip=("batch_size", "eval_iters", "sample_tokens"))
