"""scripts/tools_experiment.py's --curve: a GRPO/PPO run's rollout success, counted from the run's own log."""

import importlib.util
import json

from conftest import REPO

spec = importlib.util.spec_from_file_location("tools_experiment", REPO / "scripts" / "tools_experiment.py")
tools_experiment = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tools_experiment)


def write_log(run, rows):
    run.mkdir()
    (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return run


def test_the_curve_counts_the_answers_the_run_logged(tmp_path, capsys):
    # a docs-mode run: --per-step 64 was asked for, each rollout batch had 4 answers (GRPO logs "answers")
    rows = [{"step": s, "reward": 0.5, "success": w / 4, "answers": 4} for s, w in ((1, 1), (2, 3), (3, 0))]
    run = write_log(tmp_path / "docs", [{"step": 0, "loss": 1.0}, *rows])
    first, second = tools_experiment.curve_rows(str(run), per_step=64, window=2)
    assert (first[:4], second[:4]) == ((1, 2, 4, 8), (3, 3, 0, 4))
    tools_experiment.print_curve(str(run), 64, 2)
    out = capsys.readouterr().out
    assert "| 1–2 | 4/8 = 50.0%" in out and "| 3–3 | 0/4 = 0.0%" in out


def test_a_log_without_the_count_takes_the_flags(tmp_path):
    run = write_log(tmp_path / "old", [{"step": s, "reward": 0.1, "success": 0.25} for s in (1, 2)])
    (row,) = tools_experiment.curve_rows(str(run), per_step=16, window=2)
    assert row[:4] == (1, 2, 8, 32)
