"""The done-when of #58 at the suite's size: a model SFT-trained on calculator traces beats the same model
without tools on heldout 3-digit products, with 95% intervals apart.

To fit the suite, the model is tiny (2 layers x 64, RoPE, from random weights), its BPE vocabulary is
learnt from the traces (so the JSON of a call is a few tokens), and its tool spec is the shortest valid
one. It learns two things: to copy the problem into a calculator call and to copy the tool's response
into its answer. Half of its training examples offer no tools and ask for the product directly, which
it cannot learn by heart: that is "the same model without tools". About 35 s of CPU (more under load).
"""

import json

import pytest

from zerollm.align.tasks import calc
from zerollm.cli import main
from zerollm.data import chat
from zerollm.data.formats import write_jsonl
from zerollm.interop.opening import save_zerollm
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.tokenizers import ENDOFTEXT, BPETokenizer

pytestmark = pytest.mark.slow
SPEC = [{"type": "function", "function": {"name": "calculator"}}]


def _with_tools(row):
    return {**calc.with_tools(row), "tools": SPEC}


def _eval(run, data, capsys, *flags):
    capsys.readouterr()
    assert main(["tasks", "eval", "calc", "--ckpt", str(run), "--data", str(data), "--temperature", "0", "--json",
                 "--threads", "1", *flags]) == 0
    return json.loads(capsys.readouterr().out)["summary"]


def test_the_tool_using_model_beats_itself_without_tools(tmp_path, capsys):
    train = calc.make(800, "train", 1)
    rows = [_with_tools(r) if i % 2 == 0 else r for i, r in enumerate(train)]
    held = calc.make(64, "heldout", 2)
    write_jsonl(tmp_path / "mix.jsonl", rows)
    write_jsonl(tmp_path / "held-tools.jsonl", [_with_tools(r) for r in held])
    write_jsonl(tmp_path / "held.jsonl", held)
    text = "".join(chat.render(chat.as_messages(r), r.get("tools")) for r in rows[:200])
    tok = chat.prepare_tokenizer(BPETokenizer.train(text, 400, special_tokens=(ENDOFTEXT,)), needs=("tools",))
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=80, n_layer=2, n_head=4, n_embd=64, pos="rope"))
    save_zerollm(model, tmp_path / "m", tokenizer=tok)
    assert main(["sft", "--init", str(tmp_path / "m"), "--data", str(tmp_path / "mix.jsonl"), "--out",
                 str(tmp_path / "sft"), "--max-iters", "400", "--batch-size", "32", "--lr", "4e-3",
                 "--eval-interval", "400", "--threads", "1", "--no-progress"]) == 0
    with_tools = _eval(tmp_path / "sft", tmp_path / "held-tools.jsonl", capsys)
    without = _eval(tmp_path / "sft", tmp_path / "held.jsonl", capsys)
    assert with_tools["tool_calls"] == 1.0 and with_tools["tool_call_valid"] == 1.0     # it calls, validly
    assert without["tool_calls"] == 0.0                                                   # none offered, none run
    assert with_tools["ci95"][0] > without["ci95"][1], (with_tools, without)           # intervals apart
    never_run = _eval(tmp_path / "sft", tmp_path / "held-tools.jsonl", capsys, "--max-tool-calls", "0")
    assert never_run["successes"] == 0          # the same calls, the tool never run: its result was the point
