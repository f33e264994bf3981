"""``zerollm shapes``: measured shapes for MHA, GQA and MQA, multiply-adds, both languages, bad configs."""

import numpy as np
import pytest

from zerollm.cli import main
from zerollm.teach.fmt import display_width, pad
from zerollm.teach import moe_shapes
from zerollm.teach.shapes import TEXT, make_config, matmul_macs, measure


def run_cli(capsys, *argv):
    code = main(["shapes", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def line_with(out, start):
    """The one output line whose text (after the step number) starts with ``start``."""
    hits = [line for line in out.splitlines() if line[4:].startswith(start)]
    assert len(hits) == 1, (start, hits)
    return hits[0]


# ----------------------------------------------------------------------------
# the printed trace

@pytest.mark.parametrize("lang, words", [
    ("en", ["shape by shape", "Why the transpose", "multiply-adds", "total", "ordinary multi-head", "T x T"]),
    ("zh", ["一步一步", "为什么转置", "乘加次数", "合计", "普通的多头注意力", "T x T"]),
])
def test_default_trace_in_each_language(capsys, lang, words):
    code, out, err = run_cli(capsys, "--lang", lang)
    assert code == 0 and err == ""
    for word in words:
        assert word in out, word
    # the brief's example line, with the default sizes B=2, T=8, C=64, nh=4
    assert line_with(out, "qkv = x @ c_attn.weight").endswith("(2, 8, 64) @ (64, 192) -> (2, 8, 192)")
    assert line_with(out, "out = y @ c_proj.weight").endswith("(2, 8, 64) @ (64, 64) -> (2, 8, 64)")
    assert "196,608" in out and "278,528" in out          # 2*8*64*192 and the total of the four matmuls


def test_gqa_shapes_come_from_the_config(capsys):
    # B=3, T=6, C=64, nh=8, nkv=2 -> hs=8, g=4, W=(8 + 2*2)*8 = 96; all sizes distinct where it matters
    code, out, _ = run_cli(capsys, "--batch", "3", "--seq", "6", "--n-head", "8", "--n-kv-head", "2", "--lang", "en")
    assert code == 0
    expected = {
        "x ": "(3, 6, 64)",
        "qkv = x @ c_attn.weight": "(3, 6, 64) @ (64, 96) -> (3, 6, 96)",
        "q = heads(qkv[..., 0:64])": "(3, 6, 64) -> (3, 2, 4, 6, 8)",
        "k = heads(qkv[..., 64:80])": "(3, 6, 16) -> (3, 2, 1, 6, 8)",
        "v = heads(qkv[..., 80:96])": "(3, 6, 16) -> (3, 2, 1, 6, 8)",
        "q4 = q.reshape(B, nh, T, hs)": "(3, 2, 4, 6, 8) -> (3, 8, 6, 8)",
        "k4 = repeat_kv(k, g=4)": "(3, 2, 1, 6, 8) -> (3, 8, 6, 8)",
        "scores = q @ k^T * scale": "(3, 2, 4, 6, 8) @ (3, 2, 1, 8, 6) -> (3, 2, 4, 6, 6)",
        "weights = softmax(mask(scores))": "(3, 2, 4, 6, 6) -> (3, 2, 4, 6, 6)",
        "ctx = weights @ v": "(3, 2, 4, 6, 6) @ (3, 2, 1, 6, 8) -> (3, 2, 4, 6, 8)",
        "y = merge_heads(ctx)": "(3, 2, 4, 6, 8) -> (3, 6, 64)",
        "out = y @ c_proj.weight": "(3, 6, 64) @ (64, 64) -> (3, 6, 64)",
    }
    for formula, shapes in expected.items():
        assert line_with(out, formula).endswith(shapes), formula
    macs = {"x @ c_attn": 3 * 6 * 64 * 96, "q @ k^T": 3 * 8 * 6 * 6 * 8, "weights @ v": 3 * 8 * 6 * 6 * 8,
            "y @ c_proj": 3 * 6 * 64 * 64}
    table = {line.split("  ")[0]: line for line in out.splitlines() if "@" in line and not line[0].isspace()}
    for name, n in macs.items():
        assert f" {n:,} " in table[name], name
    assert f"{sum(macs.values()):,}" in out
    # the GQA savings: k/v columns 2*2*8 = 32 instead of 2*8*8 = 128; cache 3*6*32*4 bytes = 2.2 KiB
    assert "(64, 96) instead of (64, 192)" in out
    assert "32 columns instead of 128 (1/4)" in out
    assert "2.2 KiB per layer in float32 instead of 9.0 KiB" in out
    assert "max difference 0.0e+00" in out


@pytest.mark.parametrize("n_kv_head, title", [(2, "Grouped-query attention: nkv = 2"),
                                               (1, "Multi-query attention: all nh = 4")])
def test_kv_sharing_has_its_own_section(capsys, n_kv_head, title):
    out = run_cli(capsys, "--n-kv-head", str(n_kv_head), "--lang", "en")[1]
    assert title in out and "ordinary multi-head" not in out


@pytest.mark.parametrize("n_head, n_kv_head", [(4, 4), (8, 2), (6, 1)])
def test_measured_arrays_are_the_real_pipeline(n_head, n_kv_head):
    cfg = make_config(2, 5, 48, n_head, n_kv_head)
    a = measure(cfg, 2)
    g, hs = n_head // n_kv_head, 48 // n_head
    assert a["q"].shape == (2, n_kv_head, g, 5, hs)
    assert a["k"].shape == a["v"].shape == (2, n_kv_head, 1, 5, hs)
    assert a["weights"].shape == a["scores"].shape == (2, n_kv_head, g, 5, 5)
    assert a["q4"].shape == a["k4"].shape == (2, n_head, 5, hs)
    # the 4-D view computes the same scores, and mha_forward agrees with the step-by-step trace
    np.testing.assert_allclose(a["scores4"], a["scores"].reshape(2, n_head, 5, 5), rtol=1e-6)
    np.testing.assert_allclose(a["mha_out"], a["out"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a["weights"].sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.triu(a["weights"], k=1) == 0)          # causal


@pytest.mark.parametrize("a, b, macs", [
    ((2, 8, 64), (64, 192), 2 * 8 * 64 * 192),
    ((2, 2, 4, 6, 8), (2, 2, 1, 8, 6), 2 * 2 * 4 * 6 * 8 * 6),     # broadcast over the group axis
    ((5, 3), (3, 7), 5 * 3 * 7),
])
def test_matmul_macs(a, b, macs):
    assert matmul_macs(a, b) == macs


def test_flops_table_is_aligned_in_chinese(capsys):
    out = run_cli(capsys, "--lang", "zh")[1]
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("矩阵乘法"))
    widths = {display_width(line) for line in lines[start:start + 6]}
    assert len(widths) == 1, lines[start:start + 6]
    assert pad("合计", 6) == "合计  " and display_width("合计") == 4


def test_every_text_exists_in_both_languages():
    for table in (TEXT, moe_shapes.TEXT):
        for key, versions in table.items():
            assert set(versions) == {"zh", "en"}, key


# ----------------------------------------------------------------------------
# --n-expert: a mixture-of-experts layer

@pytest.mark.parametrize("lang, words", [("en", ["mixture-of-experts", "active per token", "the busiest"]),
                                         ("zh", ["混合专家层", "每个 token 用到的", "分到最多的"])])
def test_moe_section_in_each_language(capsys, lang, words):
    # C=64, E=8, k=2, H=96, S=1, GELU: one expert 64*96 + 96*64 = 12,288; router 64*8 = 512
    code, out, err = run_cli(capsys, "--n-expert", "8", "--n-expert-active", "2", "--n-inner", "96",
                             "--n-shared-expert", "1", "--lang", lang)
    assert code == 0 and err == ""
    for word in words:
        assert word in out, word
    assert line_with(out, "logits = x2 @ router.weight").endswith("(16, 64) @ (64, 8) -> (16, 8)")
    assert line_with(out, "idx, g = top-2(probs)").endswith("(16, 8) -> (16, 2), (16, 2)")
    expert, router = 12_288, 512
    total, active = router + 9 * expert, router + 3 * expert          # 8 routed + 1 shared; 2 + 1 per token
    whole_layer = [line.split() for line in out.splitlines() if f" {total:,} " in line]
    assert whole_layer and whole_layer[0][-2:] == [f"{total:,}", f"{active:,}"]
    experts_row = [line.split() for line in out.splitlines() if f" {8 * expert:,} " in line]
    assert experts_row and experts_row[0][-1] == f"{2 * expert:,}"    # k experts run per token
    assert "max difference" in out or "最大差" in out


def test_moe_measurement_is_the_real_layer():
    cfg = moe_shapes.GPTConfig(vocab_size=11, block_size=7, n_layer=2, n_head=2, n_embd=12, n_inner=10, mlp="swiglu",
                               n_expert=5, n_expert_active=3, moe_norm_topk=True, n_shared_expert=2, bias=False)
    a = moe_shapes.measure_moe(cfg, 3)
    N = 3 * 7
    assert a["counts"].sum() == N * 3 and a["x_e"].shape == (a["counts"].max(), 12)
    assert a["h_e"].shape == (len(a["x_e"]), 20) and a["a_e"].shape == (len(a["x_e"]), 10)
    np.testing.assert_allclose(a["gates"].sum(axis=1), 1.0, rtol=1e-5)        # renormalised
    np.testing.assert_allclose(a["dense_y"], a["y"], rtol=1e-5, atol=1e-5)     # the slow way agrees
    total, active, macs, macs_all = moe_shapes.model_costs(cfg)
    expert = 12 * 20 + 10 * 12
    assert total - active == 2 * (5 - 3) * expert                                # 2 idle experts per block
    assert macs_all - macs == total - active


@pytest.mark.parametrize("argv, fragment", [
    (["--n-expert", "1"], "n_expert=1"),
    (["--n-expert", "4", "--n-expert-active", "5"], "n_expert_active=5 must be between 1 and n_expert=4"),
    (["--n-expert", "4", "--moe-every", "9"], "moe_every=9"),
    (["--n-expert", "4096", "--n-inner", "4096"], "too many for this demo"),
    (["--n-shared-expert", "3"], "--n-shared-expert shapes the mixture-of-experts section, which only --n-expert"),
    (["--n-expert", "0", "--mlp", "swiglu", "--moe-norm-topk"], "--mlp, --moe-norm-topk shape the"),
])
def test_bad_moe_flags_are_one_line_exit_1(capsys, argv, fragment):
    code, out, err = run_cli(capsys, *argv)
    assert code == 1 and out == "" and err.count("\n") == 1 and fragment in err


# ----------------------------------------------------------------------------
# bad input

@pytest.mark.parametrize("argv, fragment", [
    (["--n-embd", "65"], "not divisible by n_head"),
    (["--n-head", "8", "--n-kv-head", "3"], "must divide n_head"),
    (["--seq", "5000"], "too many for this demo"),
    (["--n-embd", "100000", "--n-head", "1"], "too many for this demo"),
])
def test_bad_config_is_one_line_exit_1(capsys, argv, fragment):
    code, out, err = run_cli(capsys, *argv)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("zerollm shapes: error:") and fragment in err


@pytest.mark.parametrize("argv", [["--seq", "eight"], ["--batch", "0"], ["--n-kv-head", "-1"]])
def test_non_numbers_and_out_of_range_are_usage_errors(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(["shapes", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "must be a whole number from 1 to" in err and err.count("\n") == 1
