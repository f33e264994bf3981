"""``zerollm heads``: byte tokens and their labels, the grid, a real PNG, clear errors for bad paths."""

import os
import sys
import warnings
from types import SimpleNamespace

import matplotlib.image
import numpy as np
import pytest

from zerollm.cli import main
from zerollm.teach.heads import (TEXT, attention_maps, build_figure, byte_tokens, find_fonts, import_matplotlib,
                                 tick_label)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_cli(capsys, *argv):
    code = main(["heads", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def model_args(**kw):
    base = dict(n_layer=2, n_head=3, n_embd=24, seed=0, bidirectional=False, force=False)
    return SimpleNamespace(**{**base, **kw})


# ----------------------------------------------------------------------------
# tokens and labels

@pytest.mark.parametrize("text, labels", [
    ("a", ["a"]),
    ("hi!", ["h", "i", "!"]),
    ("é", ["é", "·"]),                       # 2 bytes
    ("唐诗", ["唐", "·", "·", "诗", "·", "·"]),   # 3 bytes each
    ("😀x", ["😀", "·", "·", "·", "x"]),       # 4 bytes
])
def test_each_utf8_byte_is_a_token(text, labels):
    ids, got = byte_tokens(text)
    assert ids == list(text.encode("utf-8"))
    assert got == labels


def test_tick_labels_never_ask_for_missing_glyphs():
    glyphs = {ord(c) for c in "ab$␣·"}
    assert [tick_label(c, glyphs) for c in "a \n\t$中\x07"] == ["a", "␣", "\\n", "\\t", "\\$", "U+4E2D", "U+0007"]
    assert tick_label(" ", set()) == "sp"


def test_fonts_always_include_dejavu():
    families, glyphs = find_fonts(import_matplotlib()[0])
    assert families[0] == "DejaVu Sans" and ord("a") in glyphs and ord("·") in glyphs


# ----------------------------------------------------------------------------
# the weights and the figure

@pytest.mark.parametrize("bidirectional", [False, True])
def test_attention_maps_per_layer_and_head(bidirectional):
    ids, _ = byte_tokens("attention")
    maps = attention_maps(ids, model_args(bidirectional=bidirectional))
    assert len(maps) == 2 and all(m.shape == (3, 9, 9) for m in maps)
    for m in maps:
        np.testing.assert_allclose(m.sum(-1), 1.0, rtol=1e-5)
        upper = np.triu(m, k=1)
        assert np.all(upper == 0) if not bidirectional else np.all(upper[:, 0, 1:] > 0)


@pytest.mark.parametrize("n_layer, n_head", [(1, 1), (2, 4), (3, 2)])
def test_grid_is_layers_by_heads(n_layer, n_head):
    maps = [np.full((n_head, 5, 5), 0.2) for _ in range(n_layer)]
    fig, axes = build_figure(maps, list("hello"), causal=True, families=["DejaVu Sans"])
    assert axes.shape == (n_layer, n_head)
    assert axes[-1, -1].get_title() == f"layer {n_layer - 1}, head {n_head - 1}"
    assert [t.get_text() for t in axes[0, 0].get_xticklabels()] == list("hello")
    width, height = fig.get_size_inches()
    assert (width > height) == (n_head > n_layer) or n_head == n_layer


def test_long_inputs_drop_the_tick_labels():
    fig, axes = build_figure([np.eye(60)[None]], [str(i) for i in range(60)], causal=True,
                             families=["DejaVu Sans"])
    assert len(axes[0, 0].get_xticklabels()) == 0


# ----------------------------------------------------------------------------
# the command

@pytest.mark.slow
@pytest.mark.parametrize("argv, n_layer, n_head, lang, words", [
    (["--text", "to be 或不", "--n-layer", "2", "--n-head", "4"], 2, 4, "en", ["Wrote", "lower triangle", "U+6216"]),
    (["--random", "--seq", "12", "--n-layer", "3", "--n-head", "1", "--bidirectional"], 3, 1, "zh",
     ["已写入", "双向", "行 = 层"]),
])
def test_writes_a_png_of_the_grid(capsys, tmp_path, monkeypatch, argv, n_layer, n_head, lang, words):
    # the fonts are fixed to DejaVu Sans, which matplotlib always ships: on a machine with a CJK font
    # installed the code-point note for 或 would otherwise not appear (the test must not depend on fonts)
    from zerollm.teach import heads
    from zerollm.training import runlog

    def dejavu_only(font_manager):
        base = font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans"), fallback_to_default=True)
        return ["DejaVu Sans"], runlog._charmap(base)
    monkeypatch.setattr(heads, "find_fonts", dejavu_only)
    out_path = tmp_path / "heads.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # e.g. matplotlib's "Glyph ... missing from font(s)"
        code, out, err = run_cli(capsys, *argv, "--out", str(out_path), "--lang", lang)
    assert code == 0 and err == ""
    assert str(out_path) in out
    for word in words:
        assert word in out, word
    assert out_path.read_bytes()[:8] == PNG_MAGIC
    image = matplotlib.image.imread(out_path)
    height, width = image.shape[:2]
    # panels are square, so the picture's aspect follows the grid: wide for 2x4, tall for 3x1
    assert (width / height > 1.5) if n_head > n_layer else (height / width > 1.5)
    assert os.listdir(tmp_path) == ["heads.png"]     # no temp file left behind


@pytest.mark.slow
def test_same_seed_same_picture(capsys, tmp_path):
    for name in ("a.png", "b.png"):
        assert run_cli(capsys, "--random", "--seed", "3", "--out", str(tmp_path / name))[0] == 0
    a, b = (matplotlib.image.imread(tmp_path / n) for n in ("a.png", "b.png"))
    np.testing.assert_array_equal(a, b)


def test_missing_matplotlib_says_how_to_install(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # `import matplotlib` now fails
    code, out, err = run_cli(capsys, "--text", "hi", "--out", str(tmp_path / "x.png"))
    assert code == 1 and out == ""
    assert err.strip() == 'zerollm heads: error: matplotlib is not installed: pip install "zerollm[viz]"'


def bad_path(tmp_path, case):
    if case == "missing_dir":
        return tmp_path / "no" / "such" / "dir" / "x.png"
    if case == "is_dir":
        (tmp_path / "d.png").mkdir()
        return tmp_path / "d.png"
    if case == "parent_is_file":
        (tmp_path / "f").write_text("a file")
        return tmp_path / "f" / "x.png"
    return tmp_path / "x.jpg"


@pytest.mark.parametrize("case, fragment", [
    ("missing_dir", "does not exist"),
    ("is_dir", "is a directory"),
    ("parent_is_file", "does not exist"),
    ("not_png", "must name a .png file"),
])
def test_bad_out_path_is_one_line_exit_1(capsys, tmp_path, case, fragment):
    code, out, err = run_cli(capsys, "--random", "--seq", "4", "--out", str(bad_path(tmp_path, case)))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("zerollm heads: error:") and fragment in err


def test_unwritable_directory_is_a_clear_error(capsys, tmp_path, monkeypatch):
    import zerollm.io.fileio

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(zerollm.io.fileio.tempfile, "mkstemp", refuse)   # tests may run as root: simulate it
    code, _, err = run_cli(capsys, "--random", "--seq", "4", "--out", str(tmp_path / "x.png"))
    assert code == 1 and "permission denied; choose a writable --out" in err


def test_a_failed_save_keeps_the_old_file(capsys, tmp_path, monkeypatch):
    from matplotlib.figure import Figure
    target = tmp_path / "x.png"
    target.write_bytes(b"old picture")

    def broken(self, *args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(Figure, "savefig", broken)
    code, _, err = run_cli(capsys, "--random", "--seq", "4", "--out", str(target), "--force")
    assert code == 1 and "disk full" in err
    assert target.read_bytes() == b"old picture" and os.listdir(tmp_path) == ["x.png"]


def test_a_file_the_user_saved_is_replaced_only_with_force(capsys, tmp_path):
    target = tmp_path / "x.png"
    target.write_bytes(b"my own picture")
    code, out, err = run_cli(capsys, "--random", "--seq", "4", "--out", str(target))
    assert code == 1 and out == "" and err.count("\n") == 1 and "already exists" in err and "--force" in err
    assert target.read_bytes() == b"my own picture"
    assert run_cli(capsys, "--random", "--seq", "4", "--out", str(target), "--force")[0] == 0
    assert target.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv, fragment", [
    (["--text", ""], "--text is empty"),
    (["--text", "abc", "--seq", "5"], "--seq is for --random"),
    (["--text", "x" * 300], "more than this picture can show"),
    (["--random", "--n-layer", "20", "--n-head", "20"], "400 panels"),
    (["--random", "--n-embd", "30", "--n-head", "4"], "not divisible by n_head"),
])
def test_bad_inputs_are_one_line_exit_1(capsys, tmp_path, argv, fragment):
    code, out, err = run_cli(capsys, *argv, "--out", str(tmp_path / "x.png"))
    assert code == 1 and out == "" and err.count("\n") == 1 and fragment in err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("argv", [["--out", "x.png"], ["--text", "a", "--random", "--out", "x.png"],
                                  ["--random"], ["--random", "--seq", "0", "--out", "x.png"],
                                  ["--random", "--seq", "100000000", "--out", "x.png"],
                                  ["--random", "--n-head", "0", "--out", "x.png"]])
def test_missing_or_conflicting_flags_are_usage_errors(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(["heads", *argv])
    assert exc.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_every_text_exists_in_both_languages():
    for key, versions in TEXT.items():
        assert set(versions) == {"zh", "en"}, key
