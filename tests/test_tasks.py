"""The tasks: deterministic data, splits that share nothing, verifiers on hand-made right and wrong answers,
the registry, and the `zerollm tasks` command."""

import json

import pytest

from zerollm.data import chat

from zerollm.interop import hf
from zerollm.cli import main
from zerollm.io.errors import ZeroLLMError
from zerollm.data.formats import read_prefs, read_prompts, read_sft
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.align.tasks import TASKS, acrostic, addition, get_task, prefs
from zerollm.align.tasks.evaluate import score, wilson
from zerollm.tokenizers import CharTokenizer
from zerollm.interop.opening import Source, open_model, save_zerollm

HEADS = "春夏秋冬"
PROMPT = "藏头诗：" + HEADS


# ----------------------------------------------------------------------------
# splits and data

def test_acrostic_splits_share_no_poem_and_no_head_set():
    train, heldout = acrostic.pool("train"), acrostic.pool("heldout")
    assert len(heldout) >= 1000 and len(train) > 10 * len(heldout) * 0.7
    assert not {p for _, p in train} & {p for _, p in heldout}
    assert not {h for h, _ in train} & {h for h, _ in heldout}
    for heads, poem in heldout[:200]:
        assert acrostic.reward(acrostic.prompt_for(heads), poem) == 1.0      # every real poem passes its verifier


@pytest.mark.parametrize("name", ["acrostic", "addition", "prefs"])
def test_make_is_deterministic_and_splits_are_disjoint(name):
    task = get_task(name)
    first, again, other = task.make(300, "train", 3), task.make(300, "train", 3), task.make(300, "train", 4)
    assert first == again and first != other
    key = (lambda r: r["prompt"]) if name == "addition" else (lambda r: r["heads"])
    heldout = task.make(300, "heldout", 3)
    assert len({key(r) for r in first}) >= 290 and not {key(r) for r in first} & {key(r) for r in heldout}


def test_too_many_examples_is_a_clear_error():
    with pytest.raises(ZeroLLMError, match="has only"):
        acrostic.make(10**6, "heldout", 0)
    with pytest.raises(ZeroLLMError, match="split must be"):
        addition.make(5, "test", 0)


def test_addition_examples():
    rows = addition.make(2000, "train", 0)
    assert all(r["completion"] == str(eval(r["prompt"][:-1])) == str(r["answer"]) for r in rows)
    assert {len(r["prompt"].split("+")[0]) for r in rows} == {1, 2, 3}


def test_prefs_corruptions_are_what_their_label_says():
    rows = prefs.make(500, "heldout", 0)
    assert {r["corruption"] for r in rows} == set(prefs.CORRUPTIONS)
    assert all(sum(r["corruption"] == c for r in rows) == 100 for c in prefs.CORRUPTIONS)
    for r in rows:
        good, bad = acrostic.poem_lines(r["chosen"]), acrostic.poem_lines(r["rejected"])
        k, kind = r["line"], r["corruption"]
        assert [i for i in range(4) if good[i] != bad[i]] == [k] and r["chosen"] != r["rejected"]
        assert acrostic.reward(r["prompt"], r["chosen"]) == 1.0
        assert (acrostic.reward(r["prompt"], r["rejected"]) == 1.0) == (kind == "shuffled")
        if kind == "line_length":
            assert len(bad[k]) in (4, 6) and bad[k][0] == good[k][0]
        if kind == "shuffled":
            assert bad[k][0] == good[k][0] and sorted(bad[k]) == sorted(good[k])
        if kind == "repeated_line":
            assert bad[k] in good
        if kind in ("wrong_head", "foreign_line"):
            assert bad[k][0] != good[k][0] and len(bad[k]) == 5


# ----------------------------------------------------------------------------
# verifiers

RIGHT = "春眠不觉晓，夏日绿阴浓。秋风吹落叶，冬雪满山中。"


@pytest.mark.parametrize("completion, expected", [
    (RIGHT, 1.0),
    (RIGHT.rstrip("。"), 1.0),                                          # no final full stop
    ("春眠不觉晓\n夏日绿阴浓\n秋风吹落叶\n冬雪满山中\n", 1.0),              # one line per row
    (" 春眠不觉晓，\n夏日绿阴浓。\r\n秋风吹落叶，冬雪满山中 ", 1.0),          # mixed, spaces around lines
    ("夏眠不觉晓，夏日绿阴浓。秋风吹落叶，冬雪满山中。", 0.75),              # first head wrong
    ("春眠不觉，夏日绿阴浓。秋风吹落叶，冬雪满山中。", 0.75),                # a line of 4
    ("春眠不觉晓晓，夏日绿阴浓。秋风吹落叶，冬雪满山中。", 0.75),            # a line of 6
    ("春眠不觉晓，夏日绿阴浓。秋风吹落叶。", 0.75),                          # three lines
    (RIGHT + "春眠不觉晓。", 0.75),                                       # five lines: one too many
    ("春眠不觉晓,夏日绿阴浓。秋风吹落叶，冬雪满山中。", 0.0),                # ASCII comma: no separator, lines shift
    ("春眠abc晓，夏日绿阴浓。秋风吹落叶，冬雪满山中。", 0.75),               # not Han characters
    ("", 0.0), ("春" * 40, 0.0),
])
def test_acrostic_verifier(completion, expected):
    assert acrostic.reward(PROMPT, completion) == expected
    assert acrostic.reward("whatever", completion, heads=HEADS) == expected   # the heads field wins
    assert prefs.reward(PROMPT, completion) == expected


def test_acrostic_prompt_without_heads_is_an_error():
    with pytest.raises(ZeroLLMError, match="cannot find four head characters"):
        acrostic.reward("写一首诗", RIGHT)


@pytest.mark.parametrize("completion, expected", [("357", 1.0), (" 357\n", 1.0), ("0357", 0.0), ("35", 0.0),
                                                  ("357 358", 0.0), ("", 0.0), ("+357", 0.0)])
def test_addition_verifier(completion, expected):
    assert addition.reward("12+345=", completion) == expected
    assert addition.reward("ignored", completion, answer=357) == expected


def test_registry():
    assert set(TASKS) == {"acrostic", "addition", "calc", "prefs"} and get_task("addition") is addition
    with pytest.raises(ZeroLLMError, match="unknown task 'poetry'; the tasks are acrostic, addition, calc, prefs"):
        get_task("poetry")


def test_wilson_interval():
    assert [round(x, 4) for x in wilson(5, 10)] == [0.2366, 0.7634]        # the textbook value
    assert wilson(0, 20)[0] == 0.0 and wilson(20, 20)[1] == 1.0 and 0.8 < wilson(20, 20)[0] < 0.9
    summary, results = score(acrostic, [{"prompt": PROMPT}] * 2, [RIGHT, "春"])
    assert (summary["successes"], summary["mean_reward"]) == (1, 0.5) and [r["success"] for r in results] == [1, 0]


# ----------------------------------------------------------------------------
# the command

def test_tasks_make_writes_every_format(tmp_path, capsys):
    assert main(["tasks", "make", "acrostic", "--out", str(tmp_path / "a.jsonl"), "--n", "20", "--split",
                 "heldout", "--seed", "1"]) == 0
    assert read_sft(tmp_path / "a.jsonl") == acrostic.make(20, "heldout", 1)
    assert main(["tasks", "make", "prefs", "--out", str(tmp_path / "p.jsonl"), "--n", "10"]) == 0
    assert len(read_prefs(tmp_path / "p.jsonl")) == 10
    assert main(["tasks", "make", "addition", "--out", str(tmp_path / "s.txt"), "--n", "5", "--format", "text"]) == 0
    lines = (tmp_path / "s.txt").read_text().splitlines()
    assert lines == [r["prompt"] + r["completion"] for r in addition.make(5, "train", 0)]
    assert main(["tasks", "list"]) == 0 and "acrostic" in capsys.readouterr().out


def test_unknown_task_is_one_line_and_writes_nothing(tmp_path, capsys):
    assert main(["tasks", "make", "poetry", "--out", str(tmp_path / "x.jsonl"), "--n", "5"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown task 'poetry'" in err and not (tmp_path / "x.jsonl").exists()


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """A chat model (tokenizer with the template) and a base model, both random, saved as model dirs."""
    folder = tmp_path_factory.mktemp("models")
    base = CharTokenizer.train("\n0123456789+=" + "".join(p for _, p in acrostic.pool("heldout")))
    for name, tok in (("chat", chat.prepare_tokenizer(base, ["藏头诗："])), ("base", base)):
        model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=48, n_layer=1, n_head=2, n_embd=16), seed=0)
        save_zerollm(model, folder / name, tokenizer=tok)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("which, fmt", [("chat", "chat"), ("base", "plain")])
def test_tasks_eval_prints_the_rate_and_every_example(tiny_models, tmp_path, capsys, which, fmt):
    data = tmp_path / "h.jsonl"
    main(["tasks", "make", "acrostic", "--out", str(data), "--n", "30", "--split", "heldout"])
    capsys.readouterr()
    argv = ["tasks", "eval", "acrostic", "--ckpt", str(tiny_models / which), "--data", str(data), "--n", "12"]
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["n"] == 12 and out["summary"]["format"] == fmt and len(out["results"]) == 12
    rows = read_prompts(data)[:12]
    for row, r in zip(rows, out["results"]):
        assert r["prompt"] == row["prompt"] and r["reward"] == acrostic.reward(row["prompt"], r["completion"])
    if fmt == "plain":          # a base model continues its first head
        assert all(r["completion"][0] == row["heads"][0] for row, r in zip(rows, out["results"]))
    assert main(argv + ["--json"]) == 0 and json.loads(capsys.readouterr().out) == out    # seeded: reproducible
    assert main(argv) == 0
    line = capsys.readouterr().out
    assert line.startswith("acrostic: 0/12 = 0.0% success (95% CI 0.0%-24.3%)") and f"[{fmt} prompts" in line
    answers = tmp_path / "answers.jsonl"           # --answers: the same answers as prompt/completion JSONL
    assert main(argv + ["--answers", str(answers)]) == 0
    assert read_sft(answers) == [{"prompt": r["prompt"], "completion": r["completion"]} for r in out["results"]]


def test_tasks_eval_bad_input(tiny_models, tmp_path, capsys):
    (tmp_path / "bad.jsonl").write_text('{"prompt": "1+2="}\n{"prompt": \n')
    assert main(["tasks", "eval", "addition", "--ckpt", str(tiny_models / "chat"), "--data",
                 str(tmp_path / "bad.jsonl")]) == 1
    assert "bad.jsonl line 2: not valid JSON" in capsys.readouterr().err
    (tmp_path / "ok.jsonl").write_text('{"prompt": "1+2="}\n')
    assert main(["tasks", "eval", "addition", "--ckpt", str(tiny_models / "base"), "--data",
                 str(tmp_path / "ok.jsonl"), "--format", "chat"]) == 1
    assert "prepare_tokenizer" in capsys.readouterr().err


@pytest.mark.parametrize("answer, expected", [(357, 357), ("357", 357), (" 357 ", 357), (357.0, 357), (-3, -3),
                                              (None, 3)])
def test_addition_answer_is_a_whole_number_or_its_digits(answer, expected):
    assert addition.answer_from("1+2=", answer) == expected
    assert addition.reward("1+2=", str(expected), answer=answer) == 1.0


@pytest.mark.parametrize("answer", ["abc", "1e5", "3.5", "", True, 3.5, float("inf"), "٣"])
def test_addition_answer_that_is_no_whole_number_is_one_clear_error(answer):
    with pytest.raises(ZeroLLMError, match="must be a whole number like 357"):
        addition.reward("1+2=", "3", answer=answer)


# ----------------------------------------------------------------------------
# #58: calc with the calculator, and the thinking variants

def test_calc_problems_split_and_verify():
    from zerollm.align.tasks import calc
    train, held = calc.make(300, "train", 0), calc.make(100, "heldout", 0)
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in held}
    row = train[0]
    a, b = (int(x) for x in row["prompt"][:-1].split("*"))
    assert 100 <= a < 1000 and 100 <= b < 1000 and row["answer"] == a * b == int(row["completion"])
    assert calc.reward(row["prompt"], f" {a * b} ") == 1.0 and calc.reward(row["prompt"], str(a * b + 1)) == 0.0
    assert calc.reward("12*3=", "36") == 1.0
    with pytest.raises(ZeroLLMError, match="reads like '123\\*456='"):
        calc.reward("12+3=", "15")


def test_calc_tool_trace_calls_the_calculator_with_the_prompt():
    from zerollm.align import tools
    from zerollm.align.tasks import calc
    from zerollm.data import chat
    from zerollm.data.formats import check_sft_row
    row = calc.with_tools(calc.make(1, "train", 3)[0])
    check_sft_row(row, "row")
    call = row["completion"][0]["tool_calls"][0]["function"]
    assert tools.calculate(call["arguments"]["expression"]) == row["completion"][1]["content"] == str(row["answer"])
    assert row["completion"][-1]["content"] == str(row["answer"]) and row["tools"] == [tools.CALCULATOR]
    assert chat.template_needs([row]) == ("tools",)


def test_thinking_variants_write_the_steps():
    from zerollm.align.tasks import acrostic
    assert addition.steps(18, 15) == "8+5=13 1+1+1=3" and addition.steps(999, 1) == "9+1=10 9+0+1=10 9+0+1=10 0+0+1=1"
    row = addition.with_thinking({"prompt": "18+15=", "completion": "33", "answer": 33})
    assert row["completion"] == [{"role": "assistant", "reasoning_content": "8+5=13 1+1+1=3", "content": "33"}]
    poem = acrostic.with_thinking(acrostic.make(1, "train", 0)[0])
    assert poem["completion"][0]["reasoning_content"] == " ".join(f"{k}:{h}" for k, h in enumerate(poem["heads"], 1))


def test_tasks_make_tools_and_think_flags(tmp_path, capsys):
    from zerollm.cli import main
    assert main(["tasks", "make", "calc", "--out", str(tmp_path / "t.jsonl"), "--n", "3", "--tools"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["completion"][0]["tool_calls"] for r in rows)
    assert main(["tasks", "make", "addition", "--out", str(tmp_path / "a.jsonl"), "--n", "2", "--think"]) == 0
    assert "reasoning_content" in (tmp_path / "a.jsonl").read_text()
    for args, fragment in [(["calc", "--think"], "tasks make calc has no --think variant; --think is for acrostic, addition"),
                           (["addition", "--tools"], "no --tools variant; --tools is for calc")]:
        capsys.readouterr()
        code = main(["tasks", "make", *args[:1], "--out", str(tmp_path / "x"), "--n", "2", *args[1:]])
        err = capsys.readouterr().err
        assert code != 0 and fragment in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


def test_tasks_make_tools_format_text_writes_each_trace_as_the_template_renders_it(tmp_path):
    # the text a BPE vocabulary is learnt from for the served calculator model (docs/serving.md)
    from zerollm.cli import main
    from zerollm.data import chat
    for flag, task in (("--tools", "calc"), ("--think", "addition")):
        args = ["tasks", "make", task, "--n", "3", "--seed", "2", flag]
        assert main([*args, "--out", str(tmp_path / f"{task}.jsonl")]) == 0
        assert main([*args, "--out", str(tmp_path / f"{task}.txt"), "--format", "text"]) == 0
        rows = [json.loads(line) for line in (tmp_path / f"{task}.jsonl").read_text().splitlines()]
        lines = (tmp_path / f"{task}.txt").read_text(encoding="utf-8").split("\n")
        assert lines == [chat.render(chat.as_messages(r), r.get("tools")) for r in rows] + [""]
    assert lines[0].startswith("<|user|>") and "<think>" in lines[0] and lines[0].endswith("<|end|>")
    assert '<tool_call>{"name": "calculator"' in (tmp_path / "calc.txt").read_text()


def test_tasks_eval_runs_the_tool_loop_for_a_tool_model(tmp_path, capsys):
    from zerollm.align import tools
    from zerollm.align.tasks import calc
    held = [calc.with_tools(r) for r in calc.make(4, "heldout", 0)]
    tok = chat.prepare_tokenizer(CharTokenizer.train("0123456789*="), [t for r in held for t in chat.example_texts(r)],
                                 needs=("tools",))
    save_zerollm(GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=320, n_layer=1, n_head=2, n_embd=8)),
                 tmp_path / "m", tokenizer=tok)
    from zerollm.data.formats import write_jsonl
    write_jsonl(tmp_path / "held.jsonl", held)
    assert [r["tools"] for r in read_prompts(tmp_path / "held.jsonl")] == [[tools.CALCULATOR]] * 4
    assert main(["tasks", "eval", "calc", "--ckpt", str(tmp_path / "m"), "--data", str(tmp_path / "held.jsonl"),
                 "--max-new-tokens", "12", "--max-tool-calls", "1"]) == 0
    out = capsys.readouterr().out
    assert "calc: 0/4 = 0.0% success" in out and "tool calls 0.00 per answer" in out      # random weights
    with pytest.raises(SystemExit):
        main(["tasks", "eval", "calc", "--ckpt", str(tmp_path / "m"), "--data", str(tmp_path / "held.jsonl"),
              "--max-tool-calls", "65"])
    assert "--max-tool-calls: must be a whole number from 0 to 64" in capsys.readouterr().err
