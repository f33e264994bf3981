"""Answers that call tools (#58): the tool loop over the one decode loop, the tool turns kept out of the
loss and the KL, evaluation with and without tools, and the GRPO flags."""

import json
import warnings

import numpy as np
import pytest

from zerollm.align import tools
from zerollm.align.rl import rollouts
from zerollm.align.rl.losses import grpo_loss, policy_stats
from zerollm.data import chat
from zerollm.tokenizers import ByteTokenizer

TOK = chat.prepare_tokenizer(ByteTokenizer(), needs=("think", "tools"))
CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'


def _scripted(segments):
    """A stand-in for the decode loop: answer k of every prompt is segments[k] (encoded, <|end|> added),
    and each call is recorded (so the test sees what the loop submitted)."""
    seen = []

    def sample(prompts, seeds, how):
        seen.append((prompts, seeds, how.max_new_tokens))
        k = len(seen) - 1
        return [TOK.encode(segments[k], allowed_special="all") + [chat.end_id(TOK)] for _ in prompts]
    return sample, seen


def _loop(max_new=200, calls=3):
    from zerollm.generation.decode import Completions
    return tools.ToolLoop(Completions(max_new, stop_ids=(chat.end_id(TOK),)), 512, calls)


def test_a_tool_call_is_run_and_its_turn_is_context_only():
    prompt = chat.encode_prompt(TOK, "6*7=", tools=[tools.CALCULATOR])
    sample, seen = _scripted(["<think>mul</think>" + CALL, "42"])
    [answer] = tools.run_tool_loop(sample, TOK, [prompt], [(0, 1)], tools.load_tools(), _loop())
    assert answer.reply == chat.Reply("42") and (answer.calls, answer.attempted, answer.valid) == (1, 1, 1)
    assert answer.format_ok and answer.think_tokens == 3
    assert TOK.decode(list(answer.ids)) == ("<think>mul</think>" + CALL + "<|end|><|user|><tool_response>42"
                                            "</tool_response><|end|><|assistant|>42<|end|>")
    learned = TOK.decode([i for i, m in zip(answer.ids, answer.learned) if m])
    assert learned == "<think>mul</think>" + CALL + "<|end|>42<|end|>"           # the tool turn: never learned
    assert seen[1][0][0] == prompt + list(answer.ids[:len(answer.ids) - 3])      # segment 2 continues segment 1
    assert seen[0][1] == [(0, 1)] and seen[1][1] == [(0, 1, 1001)]               # its own seed per segment
    assert seen[1][2] == 200 - len(TOK.encode("<think>mul</think>" + CALL, allowed_special="all")) - 1   # one budget


def test_tool_tokens_are_out_of_the_loss_and_the_kl():
    prompt = chat.encode_prompt(TOK, "6*7=", tools=[tools.CALCULATOR])
    sample, _ = _scripted([CALL, "42"])
    answers = tools.run_tool_loop(sample, TOK, [prompt, prompt], [0, 1], tools.load_tools(), _loop())
    ids, mask = rollouts.sequences([prompt] * 2, [list(a.ids) for a in answers], [list(a.learned) for a in answers])
    tool_part = np.zeros_like(mask)
    start = len(prompt) + len(TOK.encode(CALL, allowed_special="all")) + 1
    tool_part[:, start:start + len(tools.tool_turn_ids(TOK, ["42"]))] = True
    assert not (mask & tool_part).any() and mask[:, start - 1].all() and mask[:, -1].all()
    rng = np.random.default_rng(0)
    logp, old, ref = (rng.normal(-2, 0.5, ids.shape) for _ in range(3))
    adv = np.array([1.0, -1.0])
    loss, dlogp = grpo_loss(logp, old, ref, adv, mask, beta=0.1)
    assert np.all(dlogp[tool_part] == 0) and np.all(dlogp[mask] != 0)
    moved = ref.copy()
    moved[tool_part] += 5.0                                   # the reference disagrees only on the tool's tokens
    assert policy_stats(logp, old, moved, adv, mask)["kl"] == policy_stats(logp, old, ref, adv, mask)["kl"]
    assert grpo_loss(logp, old, moved, adv, mask, beta=0.1)[0] == loss
    without = rollouts.sequences([prompt] * 2, [list(a.ids) for a in answers])[1]   # what it was before #58
    assert (without & tool_part).any()


def test_the_loop_stops_at_max_tool_calls_and_leaves_malformed_calls_as_text():
    prompt = chat.encode_prompt(TOK, "6*7=", tools=[tools.CALCULATOR])
    sample, seen = _scripted([CALL, CALL, CALL])
    [answer] = tools.run_tool_loop(sample, TOK, [prompt], [0], tools.load_tools(), _loop(calls=2))
    assert answer.calls == 2 and len(seen) == 3 and answer.reply.content == ""   # the third call is not run
    bad = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}</tool_call>'
    sample, seen = _scripted([bad])
    [answer] = tools.run_tool_loop(sample, TOK, [prompt], [0], tools.load_tools(), _loop())
    assert (answer.calls, answer.attempted, answer.valid, answer.format_ok) == (0, 1, 0, False)
    assert answer.reply.content == bad and len(seen) == 1
    sample, seen = _scripted([CALL])
    [answer] = tools.run_tool_loop(sample, TOK, [prompt], [0], None, _loop())     # no tools offered: none run
    assert answer.calls == 0 and answer.reply.content == CALL and len(seen) == 1


def test_grpo_tool_flags_refuse_bad_values_in_one_line(tmp_path, capsys):
    from zerollm.cli import main
    for flags, fragment in [(["--max-tool-calls", "-1"], "--max-tool-calls"), (["--format-reward", "nan"], "--format-reward"),
                            (["--tools", str(tmp_path / "none.py")], "no such file")]:
        try:
            code = main(["grpo", "--init", str(tmp_path / "missing"), "--data", str(tmp_path / "p.jsonl"),
                         "--reward", "calc", "--out", str(tmp_path / "r"), *flags])
        except SystemExit as exit_:                  # argparse's own refusal: one line, status 2
            code = exit_.code
        err = capsys.readouterr().err.strip()
        assert code != 0 and fragment in err and "Traceback" not in err, err


@pytest.mark.slow
def test_grpo_with_tools_runs_and_logs_what_the_tools_did(tmp_path):
    """zerollm grpo --tools: a tiny model that knows the tool tokens, two steps; the log holds the tool
    measures of the rollouts and of the heldout answers, and a resumed run carries on."""
    from zerollm.align.tasks import calc
    from zerollm.cli import main
    from zerollm.data.formats import write_jsonl
    from zerollm.interop.opening import save_zerollm
    from zerollm.model.gpt import GPT, GPTConfig
    rows = calc.make(8, "train", 0)
    write_jsonl(tmp_path / "p.jsonl", rows)
    tok = chat.prepare_tokenizer(ByteTokenizer(), needs=("tools",))
    save_zerollm(GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=320, n_layer=1, n_head=2, n_embd=16)),
                 tmp_path / "m", tokenizer=tok)
    args = ["grpo", "--init", str(tmp_path / "m"), "--data", str(tmp_path / "p.jsonl"), "--eval-data",
            str(tmp_path / "p.jsonl"), "--reward", "calc", "--tools", "calculator", "--max-tool-calls", "1",
            "--format-reward", "0.5", "--group-size", "2", "--prompts-per-step", "2", "--max-new-tokens", "8",
            "--eval-prompts", "2", "--eval-interval", "2", "--out", str(tmp_path / "run"), "--no-progress"]
    assert main([*args, "--max-iters", "2"]) == 0
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    steps = [r for r in log if "reward" in r]
    assert steps and all({"tool_calls", "tool_call_valid", "format_ok", "response_tokens"} <= set(r) for r in steps)
    assert any("eval_tool_calls" in r for r in log)
    assert main(["grpo", "--out", str(tmp_path / "run"), "--resume", "--max-iters", "3", "--no-progress"]) == 0


def test_a_wrong_type_of_argument_is_the_tool_s_error_response_and_the_answer_goes_on(tmp_path):
    path = tmp_path / "typed_tools.py"
    path.write_text('TOOLS = [{"type": "function", "function": {"name": "count", "parameters": {"type": "object", '
                    '"properties": {"text": {"type": "string"}}}}}]\ndef count(text):\n    return len(text)\n')
    box = tools.load_tools(path, timeout=5)
    call = '<tool_call>{"name": "count", "arguments": {"text": 5}}</tool_call>'
    sample, seen = _scripted([call, "sorry"])
    [answer] = tools.run_tool_loop(sample, TOK, [chat.encode_prompt(TOK, "x", tools=box.specs())], [0], box, _loop())
    assert answer.reply == chat.Reply("sorry") and answer.calls == 1 and len(seen) == 2
    assert "<tool_response>error: object of type 'int' has no len()</tool_response>" in TOK.decode(list(answer.ids))


def test_a_char_model_reading_a_tool_response_with_unknown_characters_is_warned_once():
    from zerollm.tokenizers import CharTokenizer
    tok = chat.prepare_tokenizer(CharTokenizer.train("0123456789 error:"), needs=("tools",))
    tool_text = lambda ids: tok.decode(ids[2:-3])              # between <|user|><tool_response> and its end
    with pytest.warns(UserWarning, match=r"does not have \('⊕' '⊗'\); they are left out") as caught:
        ids = tools.tool_turn_ids(tok, ["12⊗3⊕4"])
    assert len(caught) == 1 and tool_text(ids) == "1234"
    with warnings.catch_warnings():
        warnings.simplefilter("error")                           # the same characters again: no second warning
        assert tool_text(tools.tool_turn_ids(tok, ["⊕5"])) == "5"
        assert tool_text(tools.tool_turn_ids(tok, ["42"])) == "42"   # known characters: nothing to say


@pytest.mark.slow
def test_ppo_with_tools_runs_the_tool_keeps_its_turn_out_of_loss_and_kl_and_moves_the_policy(tmp_path_factory,
                                                                                            monkeypatch):
    """zerollm ppo --tools calculator from a tiny model that learned to call the calculator (serve_helpers):
    its rollouts stop at the call, the tool runs, its turn is in the sequences with the mask off (the mask
    is what PPO's loss and its per-token KL reward are taken over), the loss is finite and the weights move."""
    from serve_helpers import TOOL_PROBLEMS, tiny_tool_run
    from zerollm.align.rl.ppo import PPOObjective
    from zerollm.cli import main
    from zerollm.data.formats import write_jsonl
    from zerollm.io.safetensors import load_file
    run, tmp = tiny_tool_run(tmp_path_factory), tmp_path_factory.mktemp("ppo-tools")
    write_jsonl(tmp / "p.jsonl", [{"prompt": q + "=?", "answer": int(a)} for q, a in TOOL_PROBLEMS])
    seen, shard_loss, advantages = [], PPOObjective.shard_loss, PPOObjective.advantages

    def record_loss(self, model, batch):
        out = shard_loss(self, model, batch)
        seen.append((batch["ids"].copy(), batch["mask"].copy(), out.loss))
        return out

    def record_kl(self, buffer):                 # the KL term of the reward: (old - ref) * mask, per token
        ref = buffer["ref_logp"]
        moved = {**buffer, "ref_logp": (ref + 5 * ~buffer["mask"]).astype(ref.dtype)}    # differs only off the mask
        kept = advantages(self, dict(buffer))
        assert np.array_equal(advantages(self, moved)["adv"], kept["adv"])
        return kept
    monkeypatch.setattr(PPOObjective, "shard_loss", record_loss)
    monkeypatch.setattr(PPOObjective, "advantages", record_kl)
    assert main(["ppo", "--init", str(run), "--data", str(tmp / "p.jsonl"), "--reward", "calc", "--tools", "calculator",
                 "--prompts-per-step", "2", "--max-new-tokens", "80", "--temperature", "0.5", "--epochs", "1",
                 "--minibatches", "1", "--max-iters", "2", "--lr", "1e-3", "--eval-interval", "2", "--out",
                 str(tmp / "run"), "--no-progress", "--threads", "1"]) == 0
    log = [json.loads(line) for line in (tmp / "run" / "log.jsonl").read_text().splitlines()]
    assert any(r.get("tool_calls", 0) > 0 for r in log)                 # the rollouts called, the tool ran
    tok = chat.prepare_tokenizer(ByteTokenizer(), needs=("think", "tools"))
    sid = lambda t: chat.special_id(tok, t)
    turns = 0
    for ids, mask, loss in seen:
        assert np.isfinite(loss)
        for b, t in zip(*np.nonzero(ids == sid(chat.TOOL_RESPONSE))):  # each tool turn: <|user|> .. <|assistant|>
            start, stop = t - 1, t + list(ids[b, t:]).index(sid(chat.ASSISTANT))
            assert ids[b, start] == sid(chat.USER) and not mask[b, start:stop + 1].any()
            assert mask[b, start - 1] and mask[b, stop + 1]             # the call's <|end|> and the answer after it
            segment = tok.decode(list(ids[b, :start - 1])).rsplit("<|assistant|>", 1)[1]
            [call] = chat.parse_reply(segment, ("calculator",)).tool_calls          # what the model asked for
            assert tok.decode(list(ids[b, t + 1:stop - 2])) == tools.load_tools().run(call)   # what the tool said
            turns += 1
    assert turns > 0
    before = load_file(str(run / "model.safetensors")) if (run / "model.safetensors").exists() else None
    after_dir = tmp / "run" / json.loads((tmp / "run" / "latest.json").read_text())["dir"]
    after = load_file(str(after_dir / "model.safetensors"))
    if before is None:
        before = load_file(str(run / json.loads((run / "latest.json").read_text())["dir"] / "model.safetensors"))
    assert any(not np.array_equal(before[k], after[k]) for k in before if k in after)
