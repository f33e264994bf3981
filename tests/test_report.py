"""``zerollm report`` in headless Chromium: every number on the page is the one in the runs' files, no
console error, no request; 中文 switches every label; the Chinese labels are all in the page's font."""

import json
import os
import re
import shutil

import pytest

from zerollm.cli.entry import main
from zerollm.evaluate.report import LABELS
from zerollm.teach.explain.fontsubset import OUT as FONT_FILE
from zerollm.teach.explain.fontsubset import is_han
from zerollm.align.tasks.evaluate import wilson

from tiny_runs import copy_run, run_main, tiny_run

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium_path():
    return os.environ.get("ZEROLLM_CHROMIUM") or next((shutil.which(c) for c in CANDIDATES if shutil.which(c)), None)


def read_jsonl(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def lm_eval_results(path, ckpt):
    """A results file as lm_eval --output_path writes it (the fields the report reads)."""
    data = {"results": {"zerollm_tang_next": {"alias": "zerollm_tang_next", "acc,none": 0.37, "acc_stderr,none": 0.048,
                                              "acc_norm,none": 0.41, "acc_norm_stderr,none": 0.049},
                        "zerollm_acrostic": {"alias": "zerollm_acrostic", "success,none": 0.05,
                                             "success_stderr,none": 0.02, "reward,none": 0.3125,
                                             "reward_stderr,none": 0.0311}},
            "n-samples": {"zerollm_tang_next": {"original": 200, "effective": 100},
                          "zerollm_acrostic": {"original": 200, "effective": 100}},
            "config": {"model": "zerollm", "model_args": f"ckpt={ckpt}"}}
    path.write_text(json.dumps(data), encoding="utf-8")
    return data


def expected_numbers(run, results=None):
    """{(field, task, metric): text} computed here from the run's own files."""
    from zerollm.io.safetensors import load_file
    latest = json.loads((run / "latest.json").read_text())
    step, params = latest["step"], load_file(str(run / latest["dir"] / "model.safetensors"))
    log = read_jsonl(run / "log.jsonl")
    steps, evals = [r for r in log if "dt_ms" in r], [r for r in log if "val_loss" in r]
    out = {("params", "", ""): f"{sum(a.size for a in params.values()):,}", ("steps", "", ""): f"{step:,}",
           ("wall_s", "", ""): f"{sum(r['dt_ms'] for r in steps) / 1000:.1f} s",
           ("cpu_s", "", ""): f"{sum(r['cpu_ms'] for r in steps) / 1000:.1f} s",
           ("val_loss", "", ""): f"{evals[-1]['val_loss']:.4f}",
           ("val_bpb", "", ""): f"{evals[-1]['val_bpb']:.4f}" if "val_bpb" in evals[-1] else "—"}
    for task, metrics in (results or {}).get("results", {}).items():
        n = results["n-samples"][task]["effective"]
        for key, value in metrics.items():
            if "," not in key or "_stderr" in key:
                continue
            metric = key.split(",")[0]
            if metric in ("acc", "acc_norm", "success"):
                low, high = wilson(round(value * n), n)
            else:
                se = metrics[f"{metric}_stderr,none"]
                low, high = value - 1.96 * se, value + 1.96 * se
            out[("score", task, metric)] = f"{value:.4f} [{low:.4f}, {high:.4f}] n={n:,}"
    return out


def test_chinese_labels_are_in_the_font():
    from fontTools.ttLib import TTFont
    cmap = TTFont(FONT_FILE).getBestCmap()
    han = {c for _, zh in LABELS.values() for c in zh if is_han(c)}
    assert han and sorted(c for c in han if ord(c) not in cmap) == []


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    char = copy_run(tiny_run(tmp_path_factory, "char"), folder, "base-char")
    byte = copy_run(tiny_run(tmp_path_factory, "byte"), folder, "base-byte")
    results = lm_eval_results(folder / "results_2026.json", byte)
    page = folder / "report.html"
    assert main(["report", str(char), str(byte), "--results", str(folder / "results_2026.json"),
                 "--out", str(page)]) == 0
    return page, (char, byte, results)


@pytest.mark.slow
def test_report_numbers_equal_the_run_files_in_a_browser(report, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    page_path, (char, byte, results) = report
    want = {char.name: expected_numbers(char), byte.name: expected_numbers(byte, results)}
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path())
        page = browser.new_page()
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.route("**/*", lambda route: (requests.append(route.request.url), route.continue_()
                                          if route.request.url.startswith("file://") else route.abort()))
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-ready=true]")
        cells = page.eval_on_selector_all("td.num", """cs => cs.map(c => [c.dataset.run, c.dataset.field,
            c.dataset.task || "", c.dataset.metric || "", c.textContent.replace(/\\s+/g, " ").trim()])""")
        shown = {}
        for run, field, task, metric, text in cells:
            shown.setdefault(run, {})[(field, task, metric)] = text
        assert shown == want and len(want) == 2
        assert page.text_content("h1") == LABELS["title"][0]
        page.click("#lang")
        assert page.text_content("h1") == LABELS["title"][1]
        labels = page.eval_on_selector_all("[data-zh]", "ls => ls.map(l => l.textContent)")
        assert labels and all(any(t == zh for _, zh in LABELS.values()) for t in labels)
        assert page.eval_on_selector_all("#curves polyline", "ps => ps.length") == 2
        # both axes are named (the chart used to show "4.06 @ 0" and nothing else), in the page's language
        assert page.eval_on_selector_all("#curves text[data-zh]", "ts => ts.map(t => t.textContent)") == \
            [LABELS["axis_loss"][1], LABELS["axis_step"][1]]
        assert "@" not in page.text_content("#curves")
        assert page.eval_on_selector_all("#curves circle", "cs => cs.length") == sum(
            sum("val_loss" in r for r in read_jsonl(run / "log.jsonl")) for run in (char, byte))
        page.screenshot(path=str(tmp_path / "report-zh.png"), full_page=True)
        browser.close()
    assert errors == [] and requests == [page_path.as_uri()]


def test_report_refuses_results_of_another_run(tmp_path, tmp_path_factory, capsys):
    char = tiny_run(tmp_path_factory, "char")
    lm_eval_results(tmp_path / "results_x.json", tmp_path / "elsewhere")
    code, _, err = run_main(["report", char, "--results", tmp_path / "results_x.json", "--out",
                             tmp_path / "r.html"], capsys)
    assert code == 1 and "none of the runs given" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


def test_a_relative_ckpt_from_another_folder_goes_to_the_run_ending_with_it(tmp_path, tmp_path_factory, capsys,
                                                                            monkeypatch):
    """lm_eval ran in lm/ with ckpt=runs/base and ckpt=./runs/sft/; report runs one folder up, given lm/runs/..."""
    from zerollm.evaluate.report import match_results, read_result_files, run_summary
    char, byte = tiny_run(tmp_path_factory, "char"), tiny_run(tmp_path_factory, "byte")
    base = copy_run(char, tmp_path / "lm" / "runs", "base")
    sft = copy_run(byte, tmp_path / "lm" / "runs", "sft")
    lm_eval_results(tmp_path / "results_base.json", "runs/base")
    lm_eval_results(tmp_path / "results_sft.json", "./runs/sft/")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(["report", "lm/runs/base", "lm/runs/sft", "--results", "results_base.json",
                               "results_sft.json", "--out", "r.html"], capsys)
    assert code == 0 and "2 with lm-eval scores" in out, err
    files = read_result_files(["results_base.json", "results_sft.json"])
    matched = match_results(files, [run_summary("lm/runs/base"), run_summary("lm/runs/sft")])
    assert sorted(matched) == sorted([os.path.realpath(base), os.path.realpath(sft)])


@pytest.mark.parametrize("ckpt, runs, fragment", [
    ("runs/other", ["a/runs/base"], "which is none of the runs given; run zerollm report from the folder where "
                                    "lm_eval ran, or give the run as model_args names it (runs/other)"),
    ("runs/base", ["a/runs/base", "b/runs/base"], "and 2 runs given end with runs/base"),
    ("../runs/base", ["a/runs/base"], "which is none of the runs given; add it as a RUN"),
])
def test_a_relative_ckpt_matching_no_run_or_several_is_explained(tmp_path, tmp_path_factory, capsys, monkeypatch,
                                                                 ckpt, runs, fragment):
    for run in runs:
        copy_run(tiny_run(tmp_path_factory, "char"), tmp_path / os.path.dirname(run), os.path.basename(run))
    lm_eval_results(tmp_path / "results_x.json", ckpt)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(["report", *runs, "--results", "results_x.json", "--out", "r.html"], capsys)
    assert code == 1 and fragment in err and len(err.strip().splitlines()) == 1, err
    if not ckpt.startswith(".."):
        assert f"ckpt={ckpt} is relative, and resolved against the current folder it is" in err
    assert not (tmp_path / "r.html").exists()


def test_report_refuses_a_results_file_nested_too_deeply(tmp_path, tmp_path_factory, capsys):
    char = tiny_run(tmp_path_factory, "char")
    (tmp_path / "results_x.json").write_text("[" * 100_000 + "]" * 100_000)      # json: RecursionError
    code, _, err = run_main(["report", char, "--results", tmp_path / "results_x.json", "--out",
                             tmp_path / "r.html"], capsys)
    assert code == 1 and "is not an lm-eval results file" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.html").exists()


def test_an_out_that_is_a_folder_is_told_to_name_a_report_page(tmp_path, tmp_path_factory, capsys):
    char = tiny_run(tmp_path_factory, "char")
    code, _, err = run_main(["report", char, "--out", tmp_path], capsys)
    assert code == 1 and os.path.join(str(tmp_path), "report.html") in err and "explain.html" not in err, err


def test_a_log_with_numbers_near_float64s_limit_is_drawn_or_skipped_never_a_crash(tmp_path, tmp_path_factory,
                                                                                   capsys, plots):
    """A run whose losses reach ~1e308 (a diverging objective): the report's curve and the end-of-run loss.png
    (matplotlib cannot place ticks between 1e308 and 1e308: ValueError) give a page and a one-line note."""
    from types import SimpleNamespace

    from zerollm.training.run import _maybe_plot
    run = copy_run(tiny_run(tmp_path_factory, "char"), tmp_path)
    with open(run / "log.jsonl", "w", encoding="utf-8") as f:
        for step in range(3):
            f.write(json.dumps({"step": step, "loss": 1e308, "lr": 0.001, "dt_ms": 1.0}) + "\n")
        f.write(json.dumps({"step": 3, "val_loss": 1e308}) + "\n")
    code, _, err = run_main(["report", run, "--out", tmp_path / "r.html"], capsys)
    assert code == 0 and (tmp_path / "r.html").exists(), err
    (run / "loss.png").unlink(missing_ok=True)
    _maybe_plot(str(run / "log.jsonl"), str(run), SimpleNamespace(n_expert=0), "lm")
    err = capsys.readouterr().err
    assert "plots skipped: the log holds numbers matplotlib cannot draw" in err and len(err.splitlines()) == 1
    assert not (run / "loss.png").exists()


@pytest.mark.parametrize("results", [5, [1, 2], {"zerollm_tang_next": 3}, {"zerollm_tang_next": ["acc,none"]},
                                     {"t": {"acc,none": 0.5}, "n": None}],
                         ids=["int", "list", "task-int", "task-list", "task-null"])
def test_report_refuses_results_of_the_wrong_shape_in_one_line(tmp_path, tmp_path_factory, capsys, results):
    char = tiny_run(tmp_path_factory, "char")
    data = {"config": {"model_args": f"ckpt={char}"}, "results": results}
    (tmp_path / "results_x.json").write_text(json.dumps(data))
    code, _, err = run_main(["report", char, "--results", tmp_path / "results_x.json", "--out",
                             tmp_path / "r.html"], capsys)
    assert code == 1 and "is not an lm-eval results file" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.html").exists()


def test_report_leaves_out_scores_that_are_not_finite_numbers(tmp_path, tmp_path_factory, capsys):
    from zerollm.evaluate.report import read_results
    char = tiny_run(tmp_path_factory, "char")
    data = {"config": {"model_args": f"ckpt={char}"}, "n-samples": {"t": {"effective": 10}},
            "results": {"t": {"acc,none": 0.5, "acc_norm,none": float("nan"), "alias": "t", "flag,none": True}}}
    (tmp_path / "results_x.json").write_text(json.dumps(data))
    (scores,) = read_results([tmp_path / "results_x.json"]).values()
    assert [s[0] for s in scores["t"]] == ["acc"]


def score_cells(page):
    """{(task, metric): the cell's text without tags} of a report page."""
    import re
    cells = re.findall(r'data-task="([^"]*)" data-metric="([^"]*)">(.*?)</td>', page.read_text(encoding="utf-8"))
    return {(task, metric): re.sub(r"<[^>]+>", "", text) for task, metric, text in cells}


@pytest.mark.parametrize("value, problem", [
    (float("nan"), "is nan, not a finite number"),
    ("0.5", "is '0.5' (text), not a number"),
    (None, "is null, not a number"),
    ([0.5], "is a list, not a number"),
    (5.0, "is 5.0, but a rate (acc) lies between 0 and 1"),          # was "math domain error", rc 1
    (-0.25, "is -0.25, but a rate (acc) lies between 0 and 1"),
], ids=["nan", "text", "null", "list", "rate-above-1", "rate-below-0"])
def test_a_metric_that_cannot_be_shown_is_left_out_with_a_warning(tmp_path, tmp_path_factory, capsys, value,
                                                                   problem):
    char = tiny_run(tmp_path_factory, "char")
    data = lm_eval_results(tmp_path / "results_x.json", char)
    data["results"]["zerollm_tang_next"]["acc,none"] = value
    (tmp_path / "results_x.json").write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run_main(["report", char, "--results", tmp_path / "results_x.json", "--out",
                             tmp_path / "r.html"], capsys)
    assert code == 0 and err.count("\n") == 1, err
    assert err == (f"zerollm report: warning: {tmp_path / 'results_x.json'}: task zerollm_tang_next, metric acc,none "
                   f"{problem}; it is left out of the report\n")
    cells = score_cells(tmp_path / "r.html")
    assert ("zerollm_tang_next", "acc") not in cells and ("zerollm_tang_next", "acc_norm") in cells
    assert len(cells) == 4 - 1


def test_no_interval_when_no_example_was_counted(tmp_path, tmp_path_factory, capsys):
    """n=0 used to show acc 0.3333 [-0.3200, 0.9867]: the stderr interval of a rate, below 0."""
    char = tiny_run(tmp_path_factory, "char")
    data = lm_eval_results(tmp_path / "results_x.json", char)
    data["results"]["zerollm_tang_next"].update({"acc,none": 1 / 3, "acc_stderr,none": 0.3333})
    data["n-samples"]["zerollm_tang_next"]["effective"] = 0
    (tmp_path / "results_x.json").write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run_main(["report", char, "--results", tmp_path / "results_x.json", "--out",
                             tmp_path / "r.html"], capsys)
    assert code == 0 and err == "", err
    cells = score_cells(tmp_path / "r.html")
    assert cells[("zerollm_tang_next", "acc")] == "0.3333 n=0"
    assert cells[("zerollm_tang_next", "acc_norm")] == "0.4100 n=0"
    assert cells[("zerollm_acrostic", "success")].startswith("0.0500 [")          # n=100: an interval


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 10 ** 6])
def test_a_rates_interval_stays_inside_0_and_1(n):
    from zerollm.evaluate.report import score
    for value in (0.0, 1e-9, 0.001, 0.25, 1 / 3, 0.5, 0.999, 1 - 1e-9, 1.0):
        _, _, _, low, high = score("acc", value, 10.0, n)           # a nonsense stderr is not used for a rate
        assert 0.0 <= low <= high <= 1.0 and low <= value + 0.5 / n and high >= value - 0.5 / n


@pytest.mark.parametrize("stderr", [float("nan"), "N/A", None, -1.0, True])
def test_a_mean_without_a_usable_stderr_has_no_interval(stderr):
    from zerollm.evaluate.report import score
    assert score("reward", 0.3, stderr, 100) == ("reward", 0.3, 100, None, None)


def test_a_negative_n_is_named(tmp_path, tmp_path_factory, capsys):
    char = tiny_run(tmp_path_factory, "char")
    data = lm_eval_results(tmp_path / "results_x.json", char)
    data["n-samples"]["zerollm_tang_next"]["effective"] = -3
    (tmp_path / "results_x.json").write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run_main(["report", char, "--results", tmp_path / "results_x.json", "--out",
                             tmp_path / "r.html"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert '"n-samples"."zerollm_tang_next"."effective" must be a whole number >= 0, got -3' in err


@pytest.mark.parametrize("row", [{"step": 401, "val_loss": "x"}, {"step": 401, "val_loss": {"a": 1}},
                                 {"step": 401, "val_loss": True}, {"step": "x", "loss": 1.0, "dt_ms": 2.0},
                                 {"step": 402, "loss": "1", "dt_ms": 2.0, "cpu_ms": "3"},
                                 {"step": 403, "val_loss": 2.0, "val_bpb": "x"}],
                         ids=["val-str", "val-obj", "val-bool", "step-str", "loss-str", "bpb-str"])
def test_a_log_row_of_the_wrong_type_is_left_out_not_a_traceback(tmp_path, tmp_path_factory, capsys, row):
    from zerollm.evaluate.report import run_summary
    run = copy_run(tiny_run(tmp_path_factory, "char"), tmp_path)
    before = run_summary(run)
    with open(run / "log.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    code, _, err = run_main(["report", run, "--out", tmp_path / "r.html"], capsys)
    assert code == 0 and (tmp_path / "r.html").exists() and "Traceback" not in err, err
    after = run_summary(run)
    if "val_bpb" in row:          # the row's loss counts; its bpb, not a number, is shown as missing
        assert after["val_loss"] == 2.0 and after["val_bpb"] is None
    else:
        assert after == before


@pytest.mark.parametrize("spelling", ["same", "slash", "link"])
def test_report_refuses_the_same_run_twice(tmp_path, tmp_path_factory, capsys, spelling):
    run = copy_run(tiny_run(tmp_path_factory, "char"), tmp_path)
    if spelling == "link":
        os.symlink(run, tmp_path / "alias")
    again = {"same": str(run), "slash": str(run) + os.sep, "link": str(tmp_path / "alias")}[spelling]
    code, out, err = run_main(["report", run, again, "--out", tmp_path / "r.html"], capsys)
    assert code == 1 and err.count("\n") == 1 and err.startswith("zerollm report: error: "), err
    assert f"RUN {again} is given" in err and "drop the repeat" in err and out == ""
    assert not (tmp_path / "r.html").exists()


def test_a_log_of_garbage_is_reported_with_a_warning(tmp_path, tmp_path_factory, capsys):
    """log.jsonl lines that are not records are left out of the page; more than one (not just a last line cut
    by a crash) is said in one warning line, and the page is still written."""
    run = copy_run(tiny_run(tmp_path_factory, "char"), tmp_path)
    with open(run / "log.jsonl", "a", encoding="utf-8") as f:
        f.write("garbage\n{not json\n")
    code, _, err = run_main(["report", run, "--out", tmp_path / "r.html"], capsys)
    assert code == 0 and (tmp_path / "r.html").exists(), err
    assert err.count("\n") == 1 and "2 lines are not JSON records of a run" in err, err
    (run / "log.jsonl").write_text((run / "log.jsonl").read_text().replace("garbage\n", ""))
    code, _, err = run_main(["report", run, "--out", tmp_path / "r2.html"], capsys)
    assert code == 0 and "lines are not JSON records" not in err, err       # one cut line: no warning


def test_the_loss_chart_names_its_axes_and_keeps_their_ends_apart():
    from zerollm.evaluate.report import _curves
    runs = [{"name": "a", "curve": [(0, 4.06), (50, 2.5), (100, 2.0)], "val_curve": [(100, 2.1)]}]
    svg = _curves(runs)
    for key in ("axis_loss", "axis_step"):
        en, zh = LABELS[key]
        assert f'data-en="{en}" data-zh="{zh}"' in svg and f">{en}</text>" in svg
    texts = re.findall(r">([^<>]*)</text>", svg)
    assert "@" not in svg and {"4.06", "2.00", "0", "100"} <= set(texts), texts
