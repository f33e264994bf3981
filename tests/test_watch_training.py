"""RL you can watch (issue 22): the progress bar shows what matters for the objective, and loss.png has one
panel per number the run logged, each labelled for its stage (never "cross-entropy" for GRPO), with the
evaluation points' 95% intervals, in English or 中文."""

import dataclasses
import json
import types

import pytest

from zerollm.training.runlog import JsonlLog, plot_losses


def test_grpo_progress_bar_shows_reward_and_kl(tmp_path, capsys):
    from tests.test_rl import bandit
    from zerollm.training.trainer import fit
    trainer, _ = bandit("grpo")
    trainer.cfg = dataclasses.replace(trainer.cfg, max_iters=3, eval_interval=100)
    fit(trainer, tmp_path / "run", log=JsonlLog(tmp_path / "log.jsonl"), progress=True)
    bar = capsys.readouterr().err.splitlines()[-1]
    assert "reward=" in bar and "kl=" in bar and "loss=" not in bar, bar


def _log(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


RL_LOG = [*({"step": s, "loss": 0.0, "lr": 1e-5, "reward": 0.1 * s, "success": 0.05 * s, "kl": 0.01 * s}
            for s in range(10)),
          {"step": 10, "eval_reward": 0.8, "eval_success": 0.5, "eval_success_low": 0.3, "eval_success_high": 0.7}]
PAIR_LOG = [*({"step": s, "loss": 0.7 - 0.01 * s, "lr": 1e-5, "accuracy": 0.5 + 0.02 * s} for s in range(10)),
            {"step": 10, "val_loss": 0.6, "val_accuracy": 0.7, "val_accuracy_low": 0.6, "val_accuracy_high": 0.8}]


def test_a_grpo_plot_shows_reward_success_and_kl(tmp_path):
    panels = dict(plot_losses(_log(tmp_path / "log.jsonl", RL_LOG), tmp_path / "loss.png", kind="grpo"))
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"
    assert not any("cross-entropy" in label for label in panels)
    assert set(panels) >= {"reward", "success rate", "KL to the reference"}
    assert panels["success rate"] == ["rollouts (per step)", "heldout (eval, 95% interval)"]
    assert all(all(labels) for labels in panels.values())          # no empty legend entries


@pytest.mark.parametrize("kind, loss", [("dpo", "DPO loss"), ("reward", "Bradley-Terry loss")])
def test_a_pair_plot_shows_accuracy_with_its_interval(tmp_path, kind, loss):
    panels = dict(plot_losses(_log(tmp_path / "log.jsonl", PAIR_LOG), tmp_path / "loss.png", kind=kind))
    assert panels == {loss: ["train (per step)", "heldout (eval)"],
                      "pairwise accuracy": ["train batch (per step)", "heldout (eval, 95% interval)"]}


def test_labels_in_chinese_only_with_a_font_that_draws_them(tmp_path):
    log = _log(tmp_path / "log.jsonl", RL_LOG)
    assert "奖励" not in dict(plot_losses(log, tmp_path / "a.png", kind="grpo", lang="zh"))    # no CJK font given
    panels = dict(plot_losses(log, tmp_path / "b.png", kind="grpo", lang="zh", families=["DejaVu Sans"]))
    assert {"奖励", "成功率"} <= set(panels)


def test_a_chinese_locale_gets_chinese_plot_labels_when_a_cjk_font_is_there(tmp_path, monkeypatch, plots):
    from zerollm.training import run
    seen = {}
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setattr(run, "find_fonts", lambda fm: (["DejaVu Sans", "Some CJK"], set()))
    monkeypatch.setattr(run, "plot_losses", lambda log, png, **kw: seen.update(kw))
    run._maybe_plot(str(tmp_path / "log.jsonl"), str(tmp_path), types.SimpleNamespace(n_expert=0), "grpo")
    assert seen == {"kind": "grpo", "lang": "zh", "families": ["DejaVu Sans", "Some CJK"]}
    monkeypatch.setattr(run, "find_fonts", lambda fm: (["DejaVu Sans"], set()))     # no CJK font: English
    run._maybe_plot(str(tmp_path / "log.jsonl"), str(tmp_path), types.SimpleNamespace(n_expert=0), "grpo")
    assert seen["lang"] == "zh" and seen["families"] is None


def test_zerollm_plots_0_skips_the_pictures_with_a_line_and_the_default_draws_them(tmp_path, monkeypatch, capsys):
    from zerollm.training import run
    log = _log(tmp_path / "log.jsonl", RL_LOG)
    monkeypatch.setenv("ZEROLLM_PLOTS", "0")
    run._maybe_plot(str(log), str(tmp_path), types.SimpleNamespace(n_expert=0), "grpo")
    assert capsys.readouterr().out == "plots skipped: ZEROLLM_PLOTS=0 (log.jsonl holds every number)\n"
    assert not (tmp_path / "loss.png").exists()
    monkeypatch.delenv("ZEROLLM_PLOTS")                 # a user's default: drawn
    run._maybe_plot(str(log), str(tmp_path), types.SimpleNamespace(n_expert=0), "grpo")
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"
