"""``zerollm attention``: the walkthrough in both languages, --json, own inputs, bad inputs."""

import json
import subprocess
import sys

import numpy as np
import pytest

from zerollm.cli import main
from zerollm.io.i18n import default_lang
from zerollm.teach import attention_walkthrough as walk
from zerollm.teach.attention_walkthrough import SEED_WK, SEED_WQ, SEED_WV, SEED_X, TEXT


def run_cli(capsys, *argv):
    code = main(["attention", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# numbers the seed printed, as they appear in its matrices
SEED_LINES = ["[[ 0.01  0.07]", "[ 0.11  0.05]", "[-0.01  0.01]]",   # Q
              "[0.4994 0.5006 0.    ]", "[0.3334 0.3332 0.3334]",     # weights
              "[0.0367 0.05  ]]", "0.7071"]


@pytest.mark.parametrize("lang, words", [
    ("en", ["Step 1", "Step 5", "query", "causal mask", "weighted average"]),
    ("zh", ["第 1 步", "第 5 步", "查询", "因果掩码", "加权平均"]),
])
def test_walkthrough_prints_seed_numbers_in_each_language(capsys, lang, words):
    code, out, err = run_cli(capsys, "--lang", lang)
    assert code == 0 and err == ""
    for line in SEED_LINES + words:
        assert line in out, line
    # the explanation of each row, with the seed's numbers
    assert "0.4994*V[0] + 0.5006*V[1] = [0.06, 0.06]" in out
    assert "= [0.0367, 0.05]" in out


def test_every_text_exists_in_both_languages():
    for key, versions in TEXT.items():
        assert set(versions) == {"zh", "en"}, key
        assert all(v.strip() for v in versions.values()), key


def test_default_language_follows_locale(capsys, monkeypatch):
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert "第 1 步" in run_cli(capsys)[1]
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    assert "Step 1" in run_cli(capsys)[1]
    assert default_lang({"LANGUAGE": "zh_TW:en"}) == "zh"
    assert default_lang({}) == "en"


def test_json_has_every_intermediate(capsys):
    code, out, _ = run_cli(capsys, "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"q", "k", "v", "scale", "scores", "mask", "masked_scores", "weights", "out"}
    assert np.array(data["q"]).shape == (1, 3, 2)
    np.testing.assert_allclose(data["q"][0][1], [0.11, 0.05], atol=1e-7)
    np.testing.assert_allclose(data["weights"][0][1], [0.4994, 0.5006, 0], atol=5e-5)
    np.testing.assert_allclose(data["out"][0][2], [0.0367, 0.05], atol=5e-5)
    assert data["scale"] == pytest.approx(0.70710678)
    assert data["mask"][0] == [[False, True, True], [False, False, True], [False, False, False]]
    assert data["masked_scores"][0][0][1] is None and data["masked_scores"][0][0][0] is not None


def test_bidirectional(capsys):
    code, out, _ = run_cli(capsys, "--bidirectional", "--lang", "en")
    assert code == 0
    assert "no mask" in out and "Compared with the causal version" in out
    assert "[0.3338 0.3336 0.3326]" in out          # row 0 now sees all three tokens
    assert "the last row is unchanged" in out
    data = json.loads(run_cli(capsys, "--bidirectional", "--json")[1])
    assert not any(any(row) for row in data["mask"][0])
    assert None not in data["masked_scores"][0][0]


def test_random_example_any_size(capsys):
    code, out, _ = run_cli(capsys, "--random", "--batch", "2", "--seq", "5", "--d-model", "6",
                           "--d-k", "3", "--seed", "7", "--json")
    assert code == 0
    data = json.loads(out)
    assert np.array(data["weights"]).shape == (2, 5, 5)
    assert np.array(data["out"]).shape == (2, 5, 3)
    np.testing.assert_allclose(np.array(data["weights"]).sum(-1), 1, atol=1e-6)
    # same seed, same numbers; another seed, other numbers
    again = json.loads(run_cli(capsys, "--seq", "5", "--batch", "2", "--d-model", "6", "--d-k", "3",
                               "--seed", "7", "--json")[1])
    assert again == data
    other = json.loads(run_cli(capsys, "--seq", "5", "--batch", "2", "--d-model", "6", "--d-k", "3",
                               "--seed", "8", "--json")[1])
    assert other["q"] != data["q"]


def test_precision(capsys):
    out = run_cli(capsys, "--precision", "2", "--lang", "en")[1]
    assert "[0.5  0.5  0.  ]" in out and "0.4994" not in out


def save_seed(tmp_path, fmt):
    paths = {}
    for name, value in (("x", SEED_X[0]), ("wq", SEED_WQ), ("wk", SEED_WK), ("wv", SEED_WV)):
        path = tmp_path / f"{name}.{fmt}"
        if fmt == "npy":
            np.save(path, np.array(value, dtype=np.float32))
        else:
            path.write_text(json.dumps(value))
        paths[name] = str(path)
    return paths


@pytest.mark.parametrize("fmt", ["npy", "json"])
def test_own_inputs_reproduce_the_seed(capsys, tmp_path, fmt):
    p = save_seed(tmp_path, fmt)
    code, out, _ = run_cli(capsys, "--x", p["x"], "--wq", p["wq"], "--wk", p["wk"], "--wv", p["wv"],
                           "--lang", "en")
    assert code == 0 and "your own numbers" in out
    for line in SEED_LINES:
        assert line in out


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("case, fragment", [
    ("wrong_shape", "wq has 3 rows"),
    ("ragged", "rectangular"),
    ("not_json", "not valid JSON"),
    ("too_deep", "not valid JSON"),
    ("non_finite", "NaN or infinity"),
    ("huge", "use numbers up to 1e+06 in size"),
    ("missing_file", "file not found"),
    ("bad_suffix", "must end in .npy or .json"),
    ("missing_flag", "missing --wv"),
    ("empty", "empty"),
    ("bad_npy", "not a readable .npy"),
    ("strings", "rectangular nested list of numbers"),
])
def test_bad_inputs_give_one_line_errors(capsys, tmp_path, case, fragment):
    p = save_seed(tmp_path, "json")
    if case == "wrong_shape":
        p["wq"] = write(tmp_path, "bad.json", "[[1, 2], [3, 4], [5, 6]]")
    elif case == "ragged":
        p["x"] = write(tmp_path, "bad.json", "[[1, 2, 3, 4], [1, 2]]")
    elif case == "not_json":
        p["x"] = write(tmp_path, "bad.json", "[[1, 2,")
    elif case == "too_deep":                     # json's decoder recurses per level: RecursionError
        p["x"] = write(tmp_path, "bad.json", "[" * 100_000 + "]" * 100_000)
    elif case == "huge":                         # finite, but x @ W and q . k overflow to inf, then NaN
        p["wk"] = write(tmp_path, "bad.json", "[[1e308, 1], [1, 1], [1, 1], [1, 1]]")
    elif case == "non_finite":
        p["wk"] = write(tmp_path, "bad.json", "[[NaN, 1], [1, 1], [1, 1], [1, 1]]")
    elif case == "missing_file":
        p["x"] = str(tmp_path / "nope.npy")
    elif case == "bad_suffix":
        p["x"] = write(tmp_path, "x.txt", "1 2 3")
    elif case == "missing_flag":
        del p["wv"]
    elif case == "empty":
        p["x"] = write(tmp_path, "bad.json", "[]")
    elif case == "bad_npy":
        p["x"] = write(tmp_path, "bad.npy", "this is not numpy")
    elif case == "strings":
        p["x"] = write(tmp_path, "bad.json", '[["a", "b"]]')
    argv = [a for name, path in p.items() for a in (f"--{name}", path)]
    code, out, err = run_cli(capsys, *argv)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("zerollm attention: error:")
    assert fragment in err
    assert "Traceback" not in err


# ----------------------------------------------------------------------------
# --json grows as T^2: it is capped, with the largest T named

@pytest.mark.parametrize("B, K, Kv", [(1, 4, 4), (2, 4, 4), (1, 1, 300), (3, 64, 2), (1000, 8, 8)])
def test_largest_json_T_is_the_largest_that_fits(B, K, Kv):
    most = walk.largest_json_T(B, K, Kv)
    assert most >= 1 and walk.json_numbers(B, most, K, Kv) <= walk.JSON_MAX_NUMBERS
    assert walk.json_numbers(B, most + 1, K, Kv) > walk.JSON_MAX_NUMBERS


def assert_json_refused(code, out, err, *fragments):
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("zerollm attention: error: --json prints every intermediate") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize("argv, fragment", [
    (["--seq", "5000"], "T can be at most 510 here: use --seq 510 or less"),
    (["--seq", "511"], "T can be at most 510 here: use --seq 510 or less"),
    (["--seq", "400", "--batch", "2"], "T can be at most 360 here: use --seq 360 or less"),
    (["--seq", "5", "--batch", "100000"], "too many even at T=1: use a smaller --batch or --d-k"),
])
def test_json_refuses_a_big_T_at_once(capsys, argv, fragment):
    """T=5000 used to print 100 million numbers: minutes and gigabytes, from a 160 KB input."""
    assert_json_refused(*run_cli(capsys, "--random", *argv, "--json"), fragment, "leave out --json")


def test_json_refuses_a_long_x_file(capsys, tmp_path):
    x, w = tmp_path / "x.npy", tmp_path / "w.npy"
    np.save(x, np.random.default_rng(0).random((5000, 8), dtype=np.float32))
    np.save(w, np.random.default_rng(1).random((8, 4)))
    code, out, err = run_cli(capsys, "--x", str(x), "--wq", str(w), "--wk", str(w), "--wv", str(w), "--json")
    assert_json_refused(code, out, err, "T=5000", "use an --x of at most 510 tokens")


def test_json_cap_leaves_the_walkthrough_and_small_json_alone(capsys):
    code, out, _ = run_cli(capsys, "--random", "--seq", "600", "--lang", "en")   # no --json: no cap
    assert code == 0 and "T=600" in out
    code, out, _ = run_cli(capsys, "--random", "--seq", "40", "--batch", "2", "--json")
    assert code == 0 and np.array(json.loads(out)["weights"]).shape == (2, 40, 40)


@pytest.mark.parametrize("argv, fragment", [
    (["--seq", "0"], "must be a whole number from 1"),
    (["--batch", "-2"], "must be a whole number from 1"),
    (["--d-k", "two"], "whole number"),
    (["--precision", "-1"], "0 to 16"),
    (["--lang", "fr"], "invalid choice"),
])
def test_bad_sizes_are_usage_errors(capsys, argv, fragment):
    with pytest.raises(SystemExit) as exc:
        main(["attention", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and fragment in err


def test_random_and_files_together_is_an_error(capsys, tmp_path):
    p = save_seed(tmp_path, "json")
    code, _, err = run_cli(capsys, "--random", "--x", p["x"])
    assert code == 1 and "choose one example" in err


def test_console_entry_points_run(tmp_path):
    # python -m zerollm works as a real process (the console script is the same function)
    res = subprocess.run([sys.executable, "-m", "zerollm", "attention", "--lang", "en"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0 and "[0.4994 0.5006 0.    ]" in res.stdout
    res = subprocess.run([sys.executable, "-m", "zerollm", "attention", "--seq", "x"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


@pytest.mark.parametrize("argv, named, not_named", [
    (["--d-model", "1000000000"], "lower --d-model or --d-k", "--seq"),
    (["--d-k", "1000000000"], "lower --d-k or --d-model", "--batch"),
    (["--seq", "100000"], "lower --seq", "--d-model"),
    (["--batch", "100000000"], "--batch", "--d-model"),
])
def test_memory_advice_names_the_sizes_that_drive_it(capsys, monkeypatch, argv, named, not_named):
    """--d-model or --d-k that cannot fit is named, not --batch or --seq (and a size of 1 is never named)."""
    monkeypatch.setenv("ZEROLLM_MEMORY_LIMIT", "1G")
    code, out, err = run_cli(capsys, *argv)
    assert code == 1 and err.count("\n") == 1 and "needs about" in err, err
    assert named in err and not_named not in err, err
