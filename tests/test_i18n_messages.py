"""中文 for the command line (issue 57 item 7): every error message and --help string has its 中文, and
``--lang zh`` or a Chinese locale shows it; ``--lang en`` and the default stay English, byte for byte."""

import importlib.util
import pathlib
import subprocess
import sys
import warnings

import pytest

from tests.tiny_runs import copy_run, run_main, tiny_run
from zerollm.cli import entry
from zerollm.cli.lang import help_strings, lang_of, wrap
from zerollm.io.i18n import default_lang
from zerollm.io.zh import catalog, fields, lookup, pieces, translate

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("zh_catalog", ROOT / "scripts" / "zh_catalog.py")
zh_catalog = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zh_catalog)

FOUND, ELSEWHERE = zh_catalog.error_templates()
ROOMS = sorted({zh_catalog.room(where[0][0]) for where in FOUND.values()})


def _no_locale(monkeypatch, **env):
    for var in ("ZEROLLM_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)


# ----------------------------------------------------------------------------
# the catalog: every message and help string has its 中文

@pytest.mark.parametrize("room", ROOMS)
def test_every_message_template_has_chinese_with_the_same_fields(room):
    zh = catalog()
    mine = {t: where for t, where in FOUND.items() if zh_catalog.room(where[0][0]) == room}
    missing = [f"{where[0][0]}:{where[0][1]} {t}" for t, where in mine.items() if t not in zh]
    assert not missing, f"{len(missing)} messages of {room} have no 中文 (zerollm/io/zh/{room}.py):\n" + \
        "\n".join(missing)
    changed = [t for t in mine if fields(zh[t]) != fields(t)]
    assert not changed, f"the 中文 must keep every {{n}} of the English: {changed}"


# How each message that is not written in place (a variable, a call) reaches 中文. A new site fails this test
# until it is made a template in place or explained here.
BUILT_ELSEWHERE = {
    ("zerollm/cli/commands/chat.py", "err.command_line('your message' if user else 'the system message')"):
        "UnknownCharacters.command_line's template and its 'where' words are in zerollm/io/zh/cli.py",
    ("zerollm/cli/commands/evaluate.py", "err.command_line(f'--data {args.data}')"):
        "UnknownCharacters.command_line's template is in zerollm/io/zh/cli.py; a flag stays a flag",
    ("zerollm/cli/commands/tasks.py", "err.command_line(f'a prompt of --data {args.data}')"):
        "UnknownCharacters.command_line's template and 'a prompt of --data {0}' are in zerollm/io/zh/cli.py",
    ("zerollm/cli/commands/serve.py", "_bind_failure(args.host, args.port, getattr(server, 'bind_error', None))"):
        "each sentence _bind_failure returns is a template in zerollm/io/zh/cli.py",
    ("zerollm/cli/entry.py", "self.message"):
        "the two closed-stream messages of _stand_in_for_closed_streams are in zerollm/io/zh/cli.py",
    ("zerollm/data/download.py", "f'must be 64 hex digits (as sha256sum prints them), got {shown!r}' + "
                                 "(f' ({len(text.strip())} characters)' if isinstance(text, str) else '')"):
        "both forms (with and without the count) are templates in zerollm/io/zh/cli.py",
    ("zerollm/cli/commands/sample.py", "note"):
        "generation.batching.context_notes's sentence, shown before the text: its templates are the generation "
        "room's (zerollm/io/zh/generation.py)",
    ("zerollm/cli/commands/sample.py", "w.message"):
        "a warning caught and shown again: it was made by a template where it was first raised",
    ("zerollm/training/run.py", "message"):
        "rank 0's error, passed to the other ranks: it was made by a template where it was first raised",
    ("zerollm/teach/exercises/command.py", "message"):
        "check's verdict, made in the language --lang chose by the TEXT tables of zerollm/teach/exercises/",
    # the rooms align, generation, interop, model, teach: the pieces are in zerollm/io/zh/<room>.py
    ("zerollm/align/objectives/sft.py", "message"):
        "fitting()'s warning: a template in zerollm/io/zh/align.py, with the words that name the examples",
    ("zerollm/align/objectives/sft.py", "message.replace(' and were left out', ', so none is left') + "
                                        "'; fine-tune a model with a longer context or use shorter examples'"):
        "fitting()'s error: a template in zerollm/io/zh/align.py",
    ("zerollm/align/stage.py", "message"):
        "an input's error with the user's path put back for its copy's: made by a template where it was raised",
    ("zerollm/generation/batching.py", "full_message(self.cfg)"):
        "the sentence and the pieces it is made of are templates in zerollm/io/zh/generation.py",
    ("zerollm/generation/batching.py", "context_notes(cfg, idx.shape[1], 1)[0]"):
        "context_notes's sentences are templates in zerollm/io/zh/generation.py",
    ("zerollm/interop/gguf.py", "problems[0]"):
        "each reason of gguf_problems is a template in zerollm/io/zh/interop.py (or export_family's own error)",
    ("zerollm/interop/opening.py", "self.tokenizer_error or f'{self.path} has no tokenizer.json, so text cannot be "
                                   "encoded; open the run or model directory that was saved with its tokenizer'"):
        "the reader's own error (made by its template), or the default sentence: a template in "
        "zerollm/io/zh/interop.py",
    ("zerollm/model/budget.py", "message + tail"):
        "require()'s error, with and without its --force tail: templates in zerollm/io/zh/model.py",
    ("zerollm/model/budget.py", "message + f'; trying anyway because of {force_flag}'"):
        "require()'s warning under --force: a template in zerollm/io/zh/model.py",
    ("zerollm/teach/explain/model_view.py", "say(key, **fields)"):
        "a note of the explain page, made in the page's language by the page's own tables",
    ("zerollm/teach/explain/model_view.py", "err.command_line('--text')"):
        "UnknownCharacters.command_line's template is in zerollm/io/zh/cli.py; a flag stays a flag",
    ("zerollm/teach/heads.py", "err.command_line('--text')"):
        "UnknownCharacters.command_line's template is in zerollm/io/zh/cli.py; a flag stays a flag",
}


def test_every_message_built_elsewhere_is_explained():
    unexplained = [f"{path}:{line} {expression}" for path, line, expression in ELSEWHERE
                   if (path, expression) not in BUILT_ELSEWHERE]
    assert not unexplained, "messages that are not templates in place; make them so, or say in " \
                            "BUILT_ELSEWHERE how they reach 中文:\n" + "\n".join(unexplained)


def test_the_explained_pieces_are_in_the_catalog():
    from zerollm.cli.commands.serve import _bind_failure
    from zerollm.data.download import sha256_hex
    import argparse
    import errno
    assert translate(_bind_failure("127.0.0.1", 80, OSError(errno.EACCES, "Permission denied"))).startswith(
        "无法在 127.0.0.1:80 上监听")
    with pytest.raises(argparse.ArgumentTypeError) as err:
        sha256_hex("abc")
    assert translate(str(err.value)) == "必须是 64 位十六进制数（和 sha256sum 打印的一样），实际是 'abc'（3 个字符）"


def test_every_help_string_of_every_command_has_chinese():
    parser = entry.build_parser()
    missing = sorted({f"{where}: {text!r}" for where, text in help_strings(parser) if lookup(text) is None})
    assert not missing, f"{len(missing)} help strings have no 中文 (zerollm/io/zh/help.py, or your feature's " \
                        "file there; scripts/zh_catalog.py --help-strings lists them):\n" + "\n".join(missing)
    untranslated = sorted({where for where, text in help_strings(parser) if translate(text) == text})
    assert not untranslated, untranslated


def test_every_commands_help_renders_in_chinese():
    from zerollm.cli.lang import parsers, translate_parser
    chinese = entry.build_parser()
    translate_parser(chinese, "zh")
    for parser in parsers(chinese):
        text = parser.format_help()          # argparse fills %(default)s: a stray % in the 中文 would fail here
        assert text.startswith(f"用法：{parser.prog}") and "显示这条帮助信息并退出" in text, parser.prog


def test_every_chinese_entry_keeps_its_fields_and_formats():
    for english, chinese in catalog().items():
        assert fields(chinese) <= fields(english), (english, chinese)
        chinese.format(*[f"<{n}>" for n in range(max(fields(english), default=-1) + 1)])   # no stray brace


# ----------------------------------------------------------------------------
# translate(): values come back whole, whatever they hold

@pytest.mark.parametrize("value", [
    "runs/{x}/{{0}}", "a.*(b+)+$\\1[^]", "two\nlines", "训练/目录 ✓", "", "--out runs/x is a file",
])
def test_translate_puts_every_value_back_unchanged(value):
    english = f"--out {value} is a file, not a folder; training writes a run directory there: choose a new " \
              "directory name"
    assert translate(english) == f"--out {value} 是一个文件，不是文件夹；训练要在那里写一个运行目录：换一个新的目录名"


def test_translate_with_several_values_and_an_unknown_message():
    english = "checkpoint runs/a{b} does not fit this run (missing ['x'], unexpected ['y']); resume with the " \
              "command that wrote it"
    assert translate(english) == "检查点 runs/a{b} 和这次运行对不上（缺少 ['x']，多出 ['y']）；请用写它的那个命令续训"
    assert translate("something nobody wrote: {0}") == "something nobody wrote: {0}"
    assert translate("a: b; c") == "a: b; c"             # only punctuation in common: not a message of ours


def test_a_translated_word_loses_the_space_kept_for_an_english_one():
    english = "/dev/zero is a character device, not a text file: it must be a regular file (a pipe or a device " \
              "can wait forever or never end); give the path of a regular file, or put one in its place"
    assert translate(english).startswith("/dev/zero 是字符设备，不是文本文件：它必须是普通文件（管道或设备")
    assert translate(english.replace("a text file", "a zebra")).startswith("/dev/zero 是字符设备，不是 zebra：")


def test_a_message_inside_a_message_is_translated_too():
    assert translate("argument --lr: must be a number from 0 to 10, got 'x'") == \
        "参数 --lr：必须是 0 到 10 之间的数，实际是 'x'"


def test_pieces_reads_fields_and_doubled_braces():
    assert pieces("{0} is {{x}}: {1}") == [0, " is {x}: ", 1]


def test_wrap_counts_a_chinese_character_as_two_columns():
    lines = wrap("模拟混合精度：矩阵乘法的输入用 16 位（zerollm.engine.amp）", 20)
    assert all(sum(2 if ord(c) > 0x2E80 else 1 for c in line) <= 20 for line in lines[:-1]), lines
    assert not any(line[0] in "，。）；：" for line in lines), lines


# ----------------------------------------------------------------------------
# choosing the language

def test_the_language_comes_from_the_flag_then_zerollm_lang_then_the_locale(monkeypatch):
    assert lang_of(["--lang", "zh", "train"]) == "zh"
    assert lang_of(["sample", "--lang=en", "--", "--lang", "zh"]) == "en"      # after -- it is data
    _no_locale(monkeypatch, LANG="zh_CN.UTF-8")
    assert lang_of(["sample"]) == "zh"
    monkeypatch.setenv("ZEROLLM_LANG", "en")
    assert lang_of(["sample"]) == "en"
    assert default_lang({"ZEROLLM_LANG": "zh", "LANG": "C.UTF-8"}) == "zh"


def test_help_follows_the_locale_in_a_fresh_process(monkeypatch):
    _no_locale(monkeypatch, LANG="zh_CN.UTF-8")
    out = subprocess.run([sys.executable, "-m", "zerollm", "train", "--help"], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.startswith("用法：zerollm train") and "选项" in out and "显示这条帮助信息并退出" in out, out[:300]
    assert "在文本文件上训练一个 GPT" in out and "从 --out 里最后一个检查点继续训练" in out
    assert "--resume" in out and "--data FILE|DIR|NAME" in out              # flags and metavars stay


def test_english_help_and_errors_are_unchanged_under_a_chinese_locale(monkeypatch, capsys):
    _no_locale(monkeypatch)
    plain = run_main(["sample", "--ckpt", "missing-run"], capsys)
    _no_locale(monkeypatch, LANG="zh_CN.UTF-8")
    assert run_main(["--lang", "en", "sample", "--ckpt", "missing-run"], capsys) == plain
    assert run_main(["sample", "--ckpt", "missing-run", "--lang", "en"], capsys) == plain
    assert plain[0] == 1 and plain[2].startswith("zerollm sample: error: checkpoint directory not found: missing-run")
    code, out, _ = run_main(["--lang", "en", "train", "--help"], capsys)
    assert code == 0 and out.startswith("usage: zerollm train") and "show this help message and exit" in out


def test_an_error_in_chinese_is_one_line_with_exit_1(monkeypatch, capsys):
    _no_locale(monkeypatch)
    code, _, err = run_main(["--lang", "zh", "sample", "--ckpt", "missing-run"], capsys)
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err == "zerollm sample: 错误：找不到检查点目录：missing-run；请先用 `zerollm train` 训练（它会把检查点存在那里）\n"


@pytest.mark.parametrize("argv, expected", ids=["command", "flag", "range", "value", "required", "elsewhere"],
                         argvalues=[
    (["--lang", "zh", "sampel"], "zerollm: 错误：参数 COMMAND：无效的选择：'sampel'"),
    (["sample", "--temprature", "1", "--lang", "zh"],
     "zerollm sample: 错误：无法识别的参数：--temprature 1（你是不是想输入 --temperature？）（见 'zerollm sample --help'）"),
    (["--lang", "zh", "train", "--n-layer", "x"],
     "zerollm train: 错误：参数 --n-layer：必须是 1 到 10000 之间的整数，实际是 'x'（见 'zerollm train --help'）"),
    (["--lang", "zh", "sample", "--ckpt"], "zerollm sample: 错误：参数 --ckpt：后面需要跟一个值"),
    (["--lang", "zh", "report"], "zerollm report: 错误：缺少必需的参数："),
    (["--lang", "zh", "train", "--init", "x"],
     "zerollm train: 错误：无法识别的参数：--init x；zerollm train 从随机权重开始：要微调训练好的模型请用 "
     "`zerollm sft --init RUN`"),
])
def test_a_usage_error_in_chinese_exits_2(argv, expected, monkeypatch, capsys):
    _no_locale(monkeypatch)
    code, _, err = run_main(argv, capsys)
    assert code == 2 and err.startswith(expected) and len(err.splitlines()) == 1, err
    if "sampel" in argv:
        assert "（你是不是想输入 'sample'？）（见 'zerollm --help'）" in err


def test_a_warning_in_chinese(tmp_path_factory, tmp_path, monkeypatch, capsys):
    _no_locale(monkeypatch)
    run = copy_run(tiny_run(tmp_path_factory, "char"), tmp_path)
    code, _, err = run_main(["train", "--out", run, "--resume", "--threads", "2", "--no-progress", "--lang", "zh"],
                            capsys)
    assert code == 0, err
    assert "zerollm train: 警告：这次运行保存时用的是 --threads 1，续训用的是 2：" in err, err


def test_the_lines_for_a_full_disk_and_for_memory_in_chinese():
    import errno
    full = OSError(errno.ENOSPC, "No space left on device", "runs/x/log.jsonl")
    assert translate(entry._os_error(full) + entry._disk_full_hint(full)) == \
        "runs/x/log.jsonl：设备上没有剩余空间；磁盘（或你的配额，或 ulimit -f）满了：请腾出一些空间再运行一次（原有的内容没有被改动）"
    assert translate(entry._out_of_memory(MemoryError(), "sample")) == \
        "内存不足；估计说放得下，实际却放不下：请关掉其他程序，或用更小的模型"


def test_an_os_error_of_a_command_in_chinese(monkeypatch, capsys, tmp_path):
    _no_locale(monkeypatch)
    (tmp_path / "a-file").write_text("")
    below = tmp_path / "a-file" / "below"
    assert run_main(["--lang", "zh", "download", "shakespeare", "--dir", below], capsys) == \
        (1, "", f"zerollm download: 错误：{below}：不是目录\n")
    assert run_main(["download", "shakespeare", "--dir", below], capsys) == \
        (1, "", f"zerollm download: error: {below}: Not a directory\n")


def test_the_warning_line_in_english_is_as_before(capsys):
    old = entry._one_line_warnings("zerollm x", "en")
    try:
        warnings.warn("this run was saved with --threads 1 and resumes with 2: the batch is split differently, "
                      "so losses may differ in the last digits from an uninterrupted run")
    finally:
        warnings.showwarning = old
    assert capsys.readouterr().err.startswith("zerollm x: warning: this run was saved with --threads 1")


def test_a_subcommand_takes_the_flag_after_its_own_words(monkeypatch, capsys):
    _no_locale(monkeypatch)
    code, _, err = run_main(["tasks", "eval", "acrostic", "--ckpt", "missing-run", "--data", "missing.jsonl",
                             "--lang", "zh"], capsys)
    assert code == 1 and err.startswith("zerollm tasks eval: 错误："), err


def test_the_chat_repl_says_its_errors_in_chinese(tmp_path_factory, monkeypatch, capsys):
    import io
    _no_locale(monkeypatch, LANG="zh_CN.UTF-8")
    run = tiny_run(tmp_path_factory, "char")
    monkeypatch.setattr(sys, "stdin", io.StringIO("/frob\n/save\n/exit\n"))
    code, out, _ = run_main(["chat", "--ckpt", run, "--raw"], capsys)
    assert code == 0, out
    assert "zerollm chat: 命令：/reset  /system TEXT" in out
    assert "zerollm chat: 未知的命令 '/frob'；命令：" in out and "zerollm chat: /save 需要一个文件名" in out, out
    monkeypatch.setattr(sys, "stdin", io.StringIO("/frob\n/exit\n"))
    code, out, _ = run_main(["chat", "--ckpt", run, "--raw", "--lang", "en"], capsys)
    assert "zerollm chat: unknown command '/frob'; commands: /reset" in out, out


def test_report_opens_in_the_language_the_flag_names_and_in_english_by_default(tmp_path_factory, tmp_path,
                                                                                monkeypatch, capsys):
    _no_locale(monkeypatch, LANG="zh_CN.UTF-8")
    run = tiny_run(tmp_path_factory, "char")
    for argv, lang in ((["report", run], "en"), (["--lang", "zh", "report", run], "zh"),
                       (["report", run, "--lang", "zh"], "zh")):
        out = tmp_path / f"{len(argv)}-{lang}.html"
        assert run_main([*argv, "--out", out, "--force"], capsys)[0] == 0
        assert f'<body data-lang="{lang}">' in out.read_text(encoding="utf-8"), argv


def test_one_flag_before_or_after_the_command_reaches_the_walkthrough(monkeypatch, capsys):
    _no_locale(monkeypatch)
    before = run_main(["--lang", "zh", "attention"], capsys)
    assert before == run_main(["attention", "--lang", "zh"], capsys)
    assert before[0] == 0 and "第 1 步" in before[1]
