"""What PPO and GRPO share: a buffer of rollouts that several optimizer steps learn from.

    next_batch():  when the buffer is used up, sample a new rollout batch (prompts -> answers -> rewards ->
                   log-probabilities under the policy and the reference -> advantages); then hand out its
                   minibatches, ``epochs`` passes of ``minibatches`` steps each, in a shuffled order.

Exact resume: the buffer (arrays), the position in it and the prompt-picking generator are saved with
every checkpoint, and every answer is sampled from a generator seeded by (seed, rollout number, row),
so a resumed run samples exactly what an uninterrupted one would have.
"""

import os
from dataclasses import dataclass, field

import numpy as np

from zerollm.io import docsmode
from zerollm.io.argtypes import Range
from zerollm.data.chat import decode_completion, end_id, has_thinking, has_tools
from zerollm.io.errors import ZeroLLMError
from zerollm.training.objective import Objective
from zerollm.align.rl import rollouts
from zerollm.align.rl.rewards import DEFAULT_TIMEOUT, reward_tasks, score_all


@dataclass(frozen=True)
class RolloutConfig:
    reward: str | None = field(default=None, metadata={"help": "comma-separated reward sources: a task ("
                                                               + ", ".join(reward_tasks()) + ") or module:function"})
    reward_weights: str | None = field(default=None, metadata={"help": "comma-separated weights, one per source "
                                                                       "(--reward first, then --rm)"})
    rm: str | None = field(default=None, metadata={"help": "a reward model directory (zerollm reward)"})
    reward_timeout: float = field(default=DEFAULT_TIMEOUT, metadata={
        "help": "seconds a module:function reward may take per call (and to import); 0 = no limit",
        "range": Range(float, 0, 10 ** 6)})
    prompts_per_step: int = field(default=8, metadata={"help": "prompts sampled for each rollout batch"})
    max_new_tokens: int = field(default=40, metadata={"help": "longest answer, in tokens"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature of the rollouts"})
    top_k: int | None = field(default=None, metadata={"help": "sample rollouts from the k likeliest tokens only"})
    top_p: float | None = field(default=None, metadata={"help": "nucleus sampling for the rollouts"})
    epochs: int = field(default=1, metadata={"help": "passes over each rollout batch (PPO epochs; GRPO's mu)"})
    minibatches: int = field(default=1, metadata={"help": "optimizer steps per pass over a rollout batch"})
    epsilon: float = field(default=0.2, metadata={"help": "clip range of the probability ratio"})
    task: str | None = field(default=None, metadata={"help": "a task whose verifier success is logged and "
                                                             "evaluated (default: the --reward task, if any)"})
    eval_prompts: int = field(default=64, metadata={"help": "heldout prompts answered at each evaluation"})
    eval_temperature: float = field(default=0.0, metadata={"help": "0 = greedy answers at evaluation"})
    tools: str | None = field(default=None, metadata={
        "metavar": "MODULE", "help": "let answers call tools: 'calculator' (built in) or a .py module of your "
                                     "own TOOLS (the calculator comes too); tool responses are never learned"})
    max_tool_calls: int = field(default=3, metadata={"help": "tool calls run per answer (with --tools)",
                                                     "range": Range(int, 0, 64)})
    format_reward: float = field(default=0.0, metadata={
        "help": "added to the reward of an answer in the template's form: it ends at <|end|>, every "
                "<tool_call> parses and every <think> closes (0 = none)", "range": Range(float, 0, 100)})

    def __post_init__(self):
        if self.rm is not None:                  # saved with the run: an absolute path survives a cd
            object.__setattr__(self, "rm", os.path.abspath(self.rm))
        if self.tools not in (None, "calculator"):
            if not self.tools.endswith(".py") or not os.path.isfile(self.tools):
                raise ZeroLLMError(f"--tools {self.tools}: no such file; give 'calculator' or a .py module of your "
                                   "tools (TOOLS and a function for each, see zerollm.align.tools)")
            object.__setattr__(self, "tools", os.path.abspath(self.tools))
        for name in ("prompts_per_step", "max_new_tokens", "epochs", "minibatches", "eval_prompts"):
            if getattr(self, name) < 1:
                raise ZeroLLMError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.epsilon < 1:
            raise ZeroLLMError(f"--epsilon must be in (0, 1), got {self.epsilon}")
        if not (self.temperature > 0 and self.eval_temperature >= 0):
            raise ZeroLLMError("--temperature must be > 0 (rollouts sample) and --eval-temperature >= 0")


@dataclass(frozen=True)
class Prompts:
    """Prompts to answer: the rows ({"prompt", ...fields a verifier reads}) and the same prompts through the
    chat template (lists of token ids, zerollm.data.chat.encode_prompt), in the same order."""
    rows: tuple = ()
    ids: tuple = ()


class RolloutObjective(Objective):
    """Subclasses set ``group`` (answers per prompt) and implement ``advantages``, ``shard_loss``."""

    progress = ("reward", "success", "kl")     # an RL loss says little (GRPO's is about 0): watch these

    group = 1
    BUFFER = ("ids", "mask", "old_logp", "ref_logp", "reward")

    def __init__(self, model, reference, tokenizer, prompts, *, sources, config, seed, heldout=Prompts()):
        """prompts: the Prompts to train on; heldout: the Prompts answered at each evaluation. An answer ends at
        the chat template's end-of-turn token."""
        super().__init__(model)
        self.ref, self.tok, self.sources, self.cfg, self.seed = reference.eval(), tokenizer, sources, config, seed
        self.stop_ids = (end_id(tokenizer),)
        self.prompts, self.prompt_ids = list(prompts.rows), [list(p) for p in prompts.ids]
        self.eval_rows, self.eval_ids = list(heldout.rows)[:config.eval_prompts], list(heldout.ids)
        self._check_room(self.prompt_ids + self.eval_ids)
        self.task = config.task or next((s.name for s in sources if _is_task(s.name)), None)
        self.pick_rng = np.random.default_rng([seed, 1])
        # thinking and tools (#58): answers go through the tool loop, their content is what is scored
        self.toolbox = rollout_tools(config)
        self.parses = has_tools(tokenizer) or has_thinking(tokenizer)
        self.buffer, self.order, self.cursor, self.rollouts_done, self.rollout_metrics = None, [], 0, 0, {}

    def _check_room(self, prompt_ids):
        limit = self.model.config.block_size
        longest = max((len(p) for p in prompt_ids), default=0)
        if longest >= limit:
            raise ZeroLLMError(f"a prompt is {longest} tokens long, which leaves no room for an answer in the "
                               f"model's context of {limit} tokens; shorten the prompts")

    def describe(self):
        names = " + ".join(f"{s.weight:g}*{s.name}" if s.weight != 1 else s.name for s in self.sources)
        return f"{self.kind} on {len(self.prompts)} prompts, reward {names}"

    def tokens(self, batch):
        return int(batch["ids"].size)

    def rngs(self):
        return {"prompts": self.pick_rng}

    # ------------------------------------------------------------------
    # the buffer

    def next_batch(self):
        if self.buffer is None or self.cursor >= len(self.order):
            self.collect()
        rows = self.order[self.cursor]
        self.cursor += 1
        batch = {k: v[rows] for k, v in self.buffer.items()}
        batch["_metrics"] = self.rollout_metrics
        return batch

    def collect(self):
        """One rollout batch into the buffer, and its minibatch schedule."""
        sharded = self.context.sharded
        n = docsmode.limit("rollout prompts per step", self.cfg.prompts_per_step)   # tests/test_docs_run.py
        picks = self.pick_rng.integers(0, len(self.prompts), size=n)
        rows = np.repeat(picks, self.group)                                # G answers per prompt, consecutive
        seeds = [(self.seed, 5, self.rollouts_done, i) for i in range(len(rows))]
        prompt_ids = [self.prompt_ids[i] for i in rows]
        completions, learned, texts, answers = self._answer(sharded, prompt_ids, seeds, self.cfg.temperature)
        ids, mask = rollouts.sequences(prompt_ids, completions, learned)
        prompts = [self.prompts[i]["prompt"] for i in rows]
        fields = [{k: v for k, v in self.prompts[i].items() if k != "prompt"} for i in rows]
        reward, each = score_all(self.sources, prompts, texts, fields, [list(p) + list(c) for p, c in
                                                                       zip(prompt_ids, completions)])
        if answers is not None and self.cfg.format_reward:
            reward = reward + self.cfg.format_reward * np.array([a.format_ok for a in answers], dtype=reward.dtype)
        buffer = {"ids": ids, "mask": mask, "reward": reward,
                  "old_logp": rollouts.logprobs(sharded, self.model, ids, mask),
                  "ref_logp": rollouts.logprobs(sharded, self.ref, ids, mask)}
        buffer.update(self.advantages(buffer))
        self.buffer = buffer
        self.rollout_metrics = self._rollout_metrics(reward, each, prompts, texts, fields, completions)
        if answers is not None:
            from zerollm.align.tools import tool_stats
            self.rollout_metrics.update(tool_stats(answers))
        self.order = self._schedule(len(rows))
        self.cursor = 0
        self.rollouts_done += 1

    def _answer(self, sharded, prompt_ids, seeds, temperature):
        """-> (completions, learned masks or None, the texts the rewards read, ToolRollouts or None). A model
        that knows the think or tool tokens answers through the tool loop (zerollm.align.tools): each
        segment of every answer is one request of the one decode loop, the tools run between rounds, and
        the tool turns are in the completion but not learned (mask False: no loss, no KL)."""
        if not self.parses:
            completions = rollouts.sample(sharded, prompt_ids, seeds, **self._sampling(temperature))
            return completions, None, [decode_completion(self.tok, c) for c in completions], None
        from zerollm.align.tools import ToolLoop, run_tool_loop
        how = self._sampling(temperature)["how"]
        sample = lambda ps, ss, h: rollouts.sample(sharded, ps, ss, h, self._stopping)
        loop = ToolLoop(how, self.model.config.block_size, self.cfg.max_tool_calls if self.toolbox else 0)
        answers = run_tool_loop(sample, self.tok, prompt_ids, seeds, self.toolbox, loop)
        return ([list(a.ids) for a in answers], [list(a.learned) for a in answers],
                [a.reply.content for a in answers], answers)

    def _sampling(self, temperature):
        from zerollm.generation.decode import Completions
        from zerollm.generation.sample import Sampling
        how = Completions(self.cfg.max_new_tokens, Sampling(temperature, self.cfg.top_k, self.cfg.top_p),
                          tuple(self.stop_ids))
        return dict(how=how, should_stop=self._stopping)

    def _stopping(self):
        return self.context.stop_requested()

    def _schedule(self, B):
        """epochs x minibatches row sets, each epoch a fresh shuffle (groups are not kept together: the
        advantages already hold what the group had to say)."""
        if self.cfg.minibatches > B:
            raise ZeroLLMError(f"--minibatches {self.cfg.minibatches} is more than the {B} answers of a rollout batch")
        order = []
        for _ in range(self.cfg.epochs):
            perm = self.pick_rng.permutation(B) if self.cfg.minibatches > 1 else np.arange(B)
            order += [np.sort(part) for part in np.array_split(perm, self.cfg.minibatches)]
        return order

    def _rollout_metrics(self, reward, each, prompts, texts, fields, completions):
        m = {"reward": float(reward.mean()),
             "answers": len(completions),       # the batch's own count: --prompts-per-step x G, less in docs mode
             "completion_len": float(np.mean([len(c) for c in completions])),
             "stopped": float(np.mean([bool(c) and c[-1] in self.stop_ids for c in completions]))}
        if len(each) > 1:
            m.update({f"reward_{name}": float(v.mean()) for name, v in each.items()})
        if self.task:
            m["success"] = self.success(prompts, texts, fields)
        return m

    def success(self, prompts, texts, fields):
        """Share of answers the task's verifier scores fully right."""
        from zerollm.align.tasks import get_task
        task = get_task(self.task)
        return float(np.mean([task.reward(p, t, **{k: v for k, v in f.items() if k != "completion"}) >= 1.0
                              for p, t, f in zip(prompts, texts, fields)]))

    # ------------------------------------------------------------------
    # evaluation: answer heldout prompts with a fixed seed

    def evaluate(self, context):
        if not self.eval_rows:
            return {}, None
        rows = self.eval_rows[:docsmode.limit("examples evaluated", len(self.eval_rows))]
        seeds = [(self.seed, 3, i) for i in range(len(rows))]
        completions, _, texts, answers = self._answer(context.sharded, self.eval_ids[:len(rows)], seeds,
                                                      self.cfg.eval_temperature)
        prompts = [r["prompt"] for r in rows]
        fields = [{k: v for k, v in r.items() if k != "prompt"} for r in rows]
        sequences = [list(p) + list(c) for p, c in zip(self.eval_ids, completions)]
        reward, each = score_all(self.sources, prompts, texts, fields, sequences)
        metrics = {"eval_reward": float(reward.mean())}
        metrics.update({f"eval_reward_{k}": float(v.mean()) for k, v in each.items() if len(each) > 1})
        if answers is not None:
            from zerollm.align.tools import tool_stats
            metrics.update({f"eval_{k}": v for k, v in tool_stats(answers).items()})
        if self.task:
            from zerollm.align.tasks.evaluate import wilson
            metrics["eval_success"] = self.success(prompts, texts, fields)
            low, high = wilson(round(metrics["eval_success"] * len(rows)), len(rows))
            metrics.update(eval_success_low=low, eval_success_high=high)     # its 95% interval (loss.png)
        shown = "\n".join(f"  {p!r} -> {t!r}  (reward {r:+.3f})" for p, t, r in zip(prompts[:3], texts, reward))
        return metrics, "--- heldout answers ---\n" + shown

    # ------------------------------------------------------------------
    # exact resume

    def state(self):
        if self.buffer is None:
            return {"rollouts_done": self.rollouts_done}, {}
        arrays = {f"buffer.{k}": v for k, v in self.buffer.items()}
        arrays.update({f"order.{i}": rows for i, rows in enumerate(self.order)})
        state = {"rollouts_done": self.rollouts_done, "cursor": self.cursor, "metrics": self.rollout_metrics,
                 "steps_per_rollout": len(self.order)}
        return state, arrays

    def restore(self, state, arrays):
        self.rollouts_done = state.get("rollouts_done", 0)
        if not arrays:
            return
        self.buffer = {k[len("buffer."):]: v for k, v in arrays.items() if k.startswith("buffer.")}
        self.order = [arrays[f"order.{i}"] for i in range(state["steps_per_rollout"])]
        self.cursor, self.rollout_metrics = state["cursor"], state["metrics"]


def rollout_tools(config):
    """The tools of --tools (None without it): the calculator, and a module's TOOLS behind the guard of user
    code, with --reward-timeout as their time limit."""
    if not config.tools:
        return None
    from zerollm.align.tools import load_tools
    path = None if config.tools == "calculator" else config.tools
    return load_tools(path, config.reward_timeout, "--reward-timeout")


def _is_task(name):
    from zerollm.align.tasks import TASKS
    return name in TASKS
