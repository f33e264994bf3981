"""Nothing typed on the command line crashes zerollm: every command, every numeric flag, every bad value.

The flags are read from the parser itself (zerollm.cli.entry.COMMANDS), so a command or a flag added later
is fuzzed here without anyone writing a test for it. Each bad value must end as a usage error:
exit code 2, exactly one line on stderr, no traceback, nothing on stdout, no file created.
"""

import functools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerollm.cli import entry as cli
from zerollm.io.argtypes import Range

BAD_FOR_EVERY_NUMBER = ["nan", "NaN", "inf", "-inf", "1e400", "-1e400", "", " ", "abc", "0x10", "1,000",
                        "1/2", "9" * 5000, "-" + "9" * 5000, "\udcff", "١٢", "1e3x"]
BAD_FOR_WHOLE_NUMBERS = ["1.5", "1e3", "2.0", "٣"]


@functools.lru_cache(maxsize=None)
def parser():
    return cli.build_parser()


def subparsers():
    sub = next(a for a in parser()._actions if isinstance(getattr(a, "choices", None), dict))
    return sub.choices


def numeric_flags():
    """(command, flag, type) of every option whose value is converted by a type (not a plain string)."""
    for name, sub in subparsers().items():
        for action in sub._actions:
            if action.option_strings and action.type not in (None, str):
                yield name, action.option_strings[0], action.type


NUMERIC = list(numeric_flags())


def out_of_range(r):
    """Values just outside, and far outside, a Range's declared bounds."""
    values = []

    def step(bound):
        return 1 if r.kind is int else max(abs(bound) * 1e-9, 1e-6)
    if r.low is not None:
        values += [repr(r.low) if r.low_open else str(r.low - step(r.low)), str(r.low - 10 ** 6)]
    if r.high is not None:
        values += [repr(r.high) if r.high_open else str(r.high + step(r.high)), str(r.high * 1000 + 10 ** 6)]
    if r.kind is int:
        values += [str(2 ** 64), str(-2 ** 64)]
    return [v.replace("inf", "1e999") for v in values]


def bad_values(r):
    extra = BAD_FOR_WHOLE_NUMBERS if r.kind is int else []
    return BAD_FOR_EVERY_NUMBER + extra + out_of_range(r)


def run_main(argv, capsys):
    """(exit code, stdout, stderr) of zerollm.cli.entry in this process."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fast_parser(monkeypatch, tmp_path):
    """One parser for the whole table (building it takes ~8 ms), and an empty working directory."""
    monkeypatch.setattr(cli, "build_parser", lambda lazy=False: parser())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def assert_usage_error(code, out, err, command, what):
    lines = err.splitlines()
    assert code == 2, f"{what}: exit {code}, stderr {err!r}"
    assert len(lines) == 1 and lines[0].startswith(f"zerollm {command}: error:"), f"{what}: {err!r}"
    assert "Traceback" not in err and out == "", what


# ----------------------------------------------------------------------------
# the declarations

def test_every_numeric_flag_has_a_declared_range():
    undeclared = [f"{c} {flag}" for c, flag, t in NUMERIC if not (isinstance(t, Range) and t.declared)]
    assert NUMERIC and not undeclared, ("give these flags a zerollm.io.argtypes.Range (or, for a config field, an "
                                        f"entry in FIELD_RANGES or metadata={{'range': ...}}): {undeclared}")


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_command_has_help(command, capsys):
    code, out, err = run_main([command, "--help"], capsys)
    assert code == 0 and out.startswith("usage: zerollm " + command) and err == ""


@pytest.mark.parametrize("command", sorted(set(cli.COMMANDS) - {"gradcheck", "attention", "shapes"}))
def test_no_arguments_is_one_line_and_leaves_nothing(command, capsys, fast_parser):
    code, out, err = run_main([command], capsys)
    assert code in (1, 2) and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert list(fast_parser.iterdir()) == []


def test_unknown_command_and_flag_are_usage_errors(capsys, fast_parser):
    for argv in (["frobnicate"], ["train", "--no-such-flag"], ["sample", "--top-k"]):
        code, out, err = run_main(argv, capsys)
        assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, argv


# ----------------------------------------------------------------------------
# the table: every numeric flag x every bad value

@pytest.mark.parametrize("command, flag, kind", NUMERIC, ids=[f"{c} {f}" for c, f, _ in NUMERIC])
def test_every_numeric_flag_rejects_bad_values(command, flag, kind, capsys, fast_parser):
    for value in bad_values(kind):
        code, out, err = run_main([command, f"{flag}={value}"], capsys)
        assert_usage_error(code, out, err, command, f"{command} {flag}={value!r}")
    assert list(fast_parser.iterdir()) == []


@pytest.mark.parametrize("command, flag, kind", NUMERIC[:: max(1, len(NUMERIC) // 12)],
                         ids=[f"{c} {f}" for c, f, _ in NUMERIC[:: max(1, len(NUMERIC) // 12)]])
def test_bad_value_as_a_separate_word(command, flag, kind, capsys, fast_parser):
    """`--flag value` (two words) as well as `--flag=value`: a leading '-' must not confuse anything."""
    for value in ("nan", "-1e400", "-" + "9" * 60, "abc"):
        code, out, err = run_main([command, flag, value], capsys)
        assert_usage_error(code, out, err, command, f"{command} {flag} {value!r}")


def bad_input_count():
    """How many bad command lines the table above tries (the report quotes it)."""
    return sum(len(bad_values(t)) for _, _, t in NUMERIC)


def test_the_table_is_large():
    assert len(NUMERIC) >= 100 and bad_input_count() >= 2000, (len(NUMERIC), bad_input_count())


# ----------------------------------------------------------------------------
# property: any text at all is either a value inside the range, or a usage error

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(index=st.integers(0, len(NUMERIC) - 1),
       text=st.one_of(st.text(max_size=12), st.floats().map(repr), st.integers(-10 ** 30, 10 ** 30).map(str)))
def test_any_text_is_a_value_in_range_or_a_usage_error(index, text, capsys):
    command, flag, kind = NUMERIC[index]
    sub = subparsers()[command]
    try:
        args = sub.parse_args([f"{flag}={text}"] + _required(command))
    except SystemExit as exc:
        err = capsys.readouterr().err
        assert exc.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (flag, text, err)
        return
    value = getattr(args, next(a.dest for a in sub._actions if flag in a.option_strings))
    assert isinstance(value, kind.kind) and kind.contains(value), (flag, text, value)
    assert not (isinstance(value, float) and not math.isfinite(value))


def _required(command):
    """Stand-in values for a command's required options, so a good value parses."""
    sub = subparsers()[command]
    argv = []
    for action in sub._actions:
        if action.required and action.option_strings:
            argv += [action.option_strings[0], "x"]
        elif action.required and not action.option_strings and action.choices:
            argv.append(sorted(action.choices)[0])
    groups = [g for g in sub._mutually_exclusive_groups if g.required]
    for g in groups:
        first = g._group_actions[0]
        argv += [first.option_strings[0]] + ([] if first.nargs == 0 else ["x"])
    return argv


@pytest.mark.parametrize("argv", [
    ["sample", "--ckpt", "{f}", "--prompt", "a"], ["sample", "--hf", "{f}", "--prompt", "a"],
    ["eval", "--ckpt", "{f}", "--data", "{f}"], ["explain", "--ckpt", "{f}", "--text", "hi", "--out", "{d}/p.html"],
    ["convert", "--from", "{f}", "--to", "{d}/out"], ["report", "{f}", "--out", "{d}/r.html"],
    ["sft", "--init", "{f}", "--data", "{f}", "--out", "{d}/run"],
], ids=lambda argv: " ".join(argv[:2]))
@pytest.mark.parametrize("kind", ["gguf", "text"])
def test_a_file_where_a_folder_belongs_is_named_as_such(argv, kind, tmp_path, capsys, monkeypatch):
    """A model or run folder argument given a file: the error says what the file is (a GGUF file: which
    flag reads it), not that a directory was 'not found'."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / ("model.gguf" if kind == "gguf" else "notes.txt")
    path.write_bytes(b"GGUF\x03\x00\x00\x00" if kind == "gguf" else b"some notes\n")
    code, out, err = run_main([a.format(f=path, d=tmp_path) for a in argv], capsys)
    said = {"gguf": f"{path} is a GGUF file, not a", "text": f"{path} is a file, not a"}[kind]
    assert code == 1 and err.count("\n") == 1 and said in err and "not found" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize("argv", [["explain", "--out", "{at}/page.html"], ["heads", "--text", "To be", "--out", "{at}/h.png"],
                                  ["report", "{run}", "--out", "{at}/r.html"]], ids=lambda a: a[0])
@pytest.mark.parametrize("inside", ["run", "checkpoint"])
def test_a_page_or_picture_is_never_written_inside_a_run(argv, inside, tmp_path_factory, capsys):
    """A checkpoint directory is deleted whole when a newer one replaces it: a page saved there would go
    with it. The one output rule (zerollm.io.outdir) refuses any output inside a run or a checkpoint."""
    from tiny_runs import run_main as run_fresh, step_dir, tiny_run
    run = tiny_run(tmp_path_factory, "char")
    at = run if inside == "run" else step_dir(run)
    before = sorted(p.name for p in at.iterdir())
    code, _, err = run_fresh([a.format(at=at, run=run) for a in argv], capsys)
    # report reads the run it is given: its page inside that run is an output over an input, said as such
    said = f"lies inside, RUN {run}, which this command reads" if argv[0] == "report" else f"lies inside {at}"
    assert code == 1 and err.count("\n") == 1 and said in err, err
    assert sorted(p.name for p in at.iterdir()) == before


def test_a_subcommands_runtime_error_carries_its_full_name(tmp_path, capsys, monkeypatch):
    """`zerollm tasks eval` printed its argparse errors as "zerollm tasks eval:" but the others as "zerollm tasks:"."""
    monkeypatch.chdir(tmp_path)
    code = cli.main(["tasks", "eval", "addition", "--ckpt", "nope", "--data", "missing.jsonl"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("zerollm tasks eval: error: ") and len(err.splitlines()) == 1, err
