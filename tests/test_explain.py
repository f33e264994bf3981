"""`zerollm explain` without a browser: the page's contents, its data, the command and its refusals.
What the page does when it runs is tested in a real browser in test_explain_browser.py."""

import json
import re
import string

import numpy as np
import pytest

from zerollm.cli.entry import main
from zerollm.cli.commands.explain import TEXT as CLI_TEXT
from zerollm.teach.explain import model_view as mv
from zerollm.teach.explain.fontsubset import OUT as FONT_FILE
from zerollm.teach.explain.fontsubset import is_han, page_han_chars
from zerollm.teach.explain.page import build_page, script_json, seed_example
from zerollm.teach.explain.text import PAGE_TEXT
from zerollm.teach.attention_walkthrough import SEED_WQ, SEED_X
from zerollm.tokenizers import ByteTokenizer, CharTokenizer, train_tokenizer

from explain_helpers import TEXT, bidirectional_view, flash_copy, model_truth, page_data, tiny_run
from zerollm.interop.opening import Source, open_model, save_zerollm


def opened(path):
    """(model, tokenizer, checkpoint) of a zerollm run, step or model directory."""
    o = open_model(Source(ckpt=str(path)), tokenizer="may")
    return o.model, o.tokenizer, o.checkpoint


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return tiny_run(tmp_path_factory)


def explain(*argv):
    return main(["explain", *map(str, argv)])


# ----------------------------------------------------------------------------
# the page itself

@pytest.mark.parametrize("lang", ["zh", "en"])
def test_seed_page_is_one_light_file_that_asks_for_nothing(lang):
    html = build_page(lang)
    assert f'<html lang="{"zh-Hans" if lang == "zh" else "en"}">' in html
    assert PAGE_TEXT["page_title"][lang] in html.split("</title>")[0]
    # nothing is fetched: no external script, style sheet, image or font, and the CSP forbids it anyway
    assert re.findall(r"""(?:src|href)\s*=\s*["']?(?!#|data:)[^"'\s>]+""", html) == []
    assert "<link" not in html and "@import" not in html and "url(http" not in html
    assert "default-src 'none'" in html
    assert len(html.encode()) < 150_000


def test_the_data_is_the_seed_example_and_every_text():
    data = page_data(build_page("en"))
    assert data["seed"]["x"] == SEED_X[0] and data["seed"]["wq"] == SEED_WQ
    assert data["text"] == PAGE_TEXT and data["model"] is None and data["lang"] == "en"
    assert seed_example()["x"] == [[0.1, 0.2, 0.3, 0.4], [0.5, 0.4, 0.3, 0.2], [0.0, 0.1, 0.0, 0.1]]


@pytest.mark.parametrize("evil", ["</script><script>alert(1)</script>", "@DATA@ @FONTS@ @FONT@", "<!--", "\u2028"])
def test_user_text_cannot_break_out_of_the_data(evil):
    view = {"name": evil, "tokens": [evil]}
    html = build_page("en", view)
    assert "<" not in script_json(view) and html.count("@DATA@") == 2 * evil.count("@DATA@")   # only the user's
    assert page_data(html)["model"] == view


@pytest.mark.parametrize("table", [PAGE_TEXT, CLI_TEXT], ids=["page", "cli"])
def test_every_text_exists_in_both_languages_with_the_same_fields(table):
    fields = lambda s: sorted(f for _, f, _, _ in string.Formatter().parse(s) if f)   # noqa: E731
    for key, entry in table.items():
        assert set(entry) == {"zh", "en"}, key
        assert fields(entry["zh"]) == fields(entry["en"]), key
        assert entry["zh"] != entry["en"] or key in ("hdr_token", "col_tok", "how_scale", "how_score", "how_out"), key


def test_the_font_covers_every_chinese_character_of_the_page():
    """If this fails, the Chinese text changed: run `python -m zerollm.teach.explain.fontsubset FONT.ttf`."""
    from fontTools.ttLib import TTFont            # the test extra installs fontTools and brotli
    cmap = TTFont(FONT_FILE).getBestCmap()
    missing = [c for c in page_han_chars() if ord(c) not in cmap]
    assert missing == [] and len(page_han_chars()) > 100
    assert all(is_han(c) for c in "注意力，：（）") and not any(is_han(c) for c in "ab1 —×·")


def test_the_font_is_smaller_than_the_rest_of_the_page():
    html = build_page("zh")
    font = len(re.search(r"base64,([A-Za-z0-9+/=]+)", html).group(1))
    assert font < len(html) - font


# ----------------------------------------------------------------------------
# the model's numbers

@pytest.mark.parametrize("tok, i, label", [
    (ByteTokenizer(), ord("a"), "a"), (ByteTokenizer(), 32, "␣"), (ByteTokenizer(), 10, "↵"),
    (ByteTokenizer(), 0xE4, "<e4>"), (CharTokenizer.train("中 文\n"), 2, "中"),
    (CharTokenizer.train("中 文\n"), 1, "␣"),
])
def test_token_labels_make_whitespace_and_half_characters_visible(tok, i, label):
    assert mv.token_label(tok, i) == label


def test_bpe_token_labels_show_their_text():
    tok = train_tokenizer("bpe", "the cat the hat the bat " * 20, vocab_size=270)
    ids = tok.encode(" the cat")
    assert "".join(mv.token_label(tok, i) for i in ids) == "␣the␣cat"


def test_model_view_equals_the_model(run):
    model, tok, _ = opened(run)
    view, notes = mv.model_view(model, tok, TEXT, name="x")
    ids, weights, probs, _ = model_truth(run, TEXT)
    assert view["ids"] == ids and notes == [] and len(view["att"]) == 2
    T = len(ids)
    below = np.tril_indices(T)                      # a causal model's page keeps j <= i only
    for layer, maps in enumerate(weights):
        stored = np.zeros(maps.shape)
        stored[:, below[0], below[1]] = np.array(view["att"][layer]) / mv.QUANT   # (nh, T(T+1)/2) -> (nh, T, T)
        np.testing.assert_allclose(stored, maps, atol=0.5 / mv.QUANT + 1e-7)     # so the rest was 0
    top = np.argsort(-probs, axis=-1, kind="stable")[:, :5]
    assert view["top_ids"] == top.tolist()
    np.testing.assert_allclose(np.array(view["top_p"]) / mv.QUANT, np.take_along_axis(probs, top, -1),
                               atol=0.5 / mv.QUANT + 1e-9)


def test_a_bidirectional_model_keeps_every_weight_and_says_so():
    view, notes, weights = bidirectional_view()
    assert [k for k, _ in notes] == ["note_bidirectional"] and view["causal"] is False
    stored = np.array(view["att"][0]).reshape(weights[0].shape) / mv.QUANT      # (nh, T*T) -> (nh, T, T)
    np.testing.assert_allclose(stored, weights[0], atol=0.5 / mv.QUANT + 1e-7)
    assert stored[0, 0, -1] > 0                    # the first token sees the last one


def test_loss_curve_is_the_log_thinned_and_survives_a_cut_line(tmp_path):
    log = tmp_path / "log.jsonl"
    lines = [json.dumps({"step": s, "loss": 4 - s / 1000}) for s in range(1000)]
    lines += [json.dumps({"step": 500, "train_loss": 3.5, "val_loss": 3.6}), '{"step": 1000, "lo']
    log.write_text("\n".join(lines))
    curve, bad = mv.loss_curve(log)
    assert bad == 1 and curve["evals"] == [(500, 3.5, 3.6)]
    assert len(curve["steps"]) <= mv.MAX_CURVE_POINTS + 1
    assert curve["steps"][0] == (0, 4.0) and curve["steps"][-1] == (999, 3.001)
    assert mv.loss_curve(None) == (None, 0)


# ----------------------------------------------------------------------------
# the command

def test_writes_the_seed_page_and_says_where(tmp_path, capsys):
    out = tmp_path / "explain.html"
    assert explain("--out", out, "--lang", "en") == 0
    assert "Wrote" in capsys.readouterr().out and page_data(out.read_text())["lang"] == "en"


def test_default_language_follows_the_locale(tmp_path, monkeypatch):
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert explain("--out", tmp_path / "a.html") == 0
    assert page_data((tmp_path / "a.html").read_text())["lang"] == "zh"
    assert explain("--out", tmp_path / "b.html", "--lang", "en") == 0      # --lang wins over the locale
    assert page_data((tmp_path / "b.html").read_text())["lang"] == "en"


def test_model_page_carries_tokens_attention_top5_and_the_loss(run, tmp_path, capsys):
    out = tmp_path / "m.html"
    assert explain("--ckpt", run, "--text", TEXT, "--out", out, "--lang", "en") == 0
    assert "32 tokens, 2 layers x 2 heads" in capsys.readouterr().out
    model = page_data(out.read_text())["model"]
    assert model["tokens"][:6] == list("ROMEO:") and model["tokens"][6] == "␣"
    assert len(model["top_p"]) == 32 and model["loss"]["evals"][0][0] == 0
    assert len(out.read_bytes()) < 300_000


def test_text_longer_than_the_context_is_cut_with_a_note(run, tmp_path, capsys):
    out = tmp_path / "long.html"
    assert explain("--ckpt", run, "--text", TEXT * 3, "--out", out, "--lang", "en") == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warning: Your text is 96 tokens; the page shows the first 32" in err
    model = page_data(out.read_text())["model"]
    assert len(model["tokens"]) == 32 and model["notes"][0]["key"] == "note_truncated"


def test_flash_checkpoint_shows_the_same_weights_with_a_note(run, tmp_path, capsys):
    flash = flash_copy(run, tmp_path / "flash")
    for name, ckpt in (("naive", run), ("flash", flash)):
        assert explain("--ckpt", ckpt, "--text", TEXT, "--out", tmp_path / f"{name}.html", "--lang", "en") == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "attn_impl=flash" in err and "attn_impl=naive" in err
    naive, flashed = (page_data((tmp_path / f"{n}.html").read_text())["model"] for n in ("naive", "flash"))
    assert flashed["att"] == naive["att"] and flashed["top_p"] == naive["top_p"]
    assert [n["key"] for n in flashed["notes"]] == ["note_flash"]


def test_a_model_directory_from_convert_is_read_like_its_run(run, tmp_path, capsys):
    """A Hugging Face directory converted back (``zerollm convert --from HF --to DIR``) is a zerollm model directory
    that sample and chat take as --ckpt; explain and heads took it for an incomplete checkpoint."""
    folder = tmp_path / "model"
    assert main(["convert", "--from", str(run), "--to", str(tmp_path / "hf")]) == 0
    assert main(["convert", "--from", str(tmp_path / "hf"), "--to", str(folder)]) == 0
    pages = {}
    for name, ckpt in (("run", run), ("dir", folder)):
        pages[name] = tmp_path / f"{name}.html"
        assert explain("--ckpt", ckpt, "--text", TEXT, "--out", pages[name], "--lang", "en") == 0, capsys.readouterr()
    assert "Model section: model, 32 tokens" in capsys.readouterr().out
    ours, theirs = (page_data(pages[n].read_text())["model"] for n in ("dir", "run"))
    assert ours["att"] == theirs["att"] and ours["top_p"] == theirs["top_p"] and ours["loss"] is None


def test_hugging_face_directory(tmp_path, capsys):
    from zerollm.interop import hf
    from zerollm.model.gpt import GPT, GPTConfig
    tok = train_tokenizer("bpe", "to be or not to be, that is the question " * 30, vocab_size=280)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16))
    hf.export(model, tmp_path / "hf", tokenizer=tok)
    out = tmp_path / "hf.html"
    assert explain("--hf", tmp_path / "hf", "--text", "to be or not", "--out", out, "--lang", "en") == 0
    data = page_data(out.read_text())["model"]
    assert data["name"] == "hf" and data["loss"] is None and "".join(data["tokens"]) == "to␣be␣or␣not"


@pytest.mark.parametrize("argv, fragment", [
    (["--out", "page.txt"], "must name an .html file"),
    (["--out", "no/such/dir/page.html"], "does not exist"),
    (["--out", "pages.html", "--force"], "is a directory"),
    (["--text", "hi", "--out", "p.html"], "--text is read by a model"),
    (["--ckpt", "RUN", "--out", "p.html"], "--ckpt needs --text"),
    (["--ckpt", "RUN", "--text", "", "--out", "p.html"], "--text is empty"),
    (["--ckpt", "RUN", "--text", "ROMEO é 中", "--out", "p.html"], "--text holds 2 characters this model does not know"),
    (["--ckpt", "RUN", "--text", "ROMEO \udcff", "--out", "p.html"], "not UTF-8 text"),
    (["--ckpt", "no-such-run", "--text", "hi", "--out", "p.html"], "checkpoint directory not found"),
    (["--hf", "no-such-model", "--text", "hi", "--out", "p.html"], "model directory not found"),
])
def test_bad_input_is_one_line_and_exit_1(run, tmp_path, monkeypatch, capsys, argv, fragment):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pages.html").mkdir()
    assert explain(*[str(run) if a == "RUN" else a for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zerollm explain: error:") and fragment in err
    assert not (tmp_path / "p.html").exists()


def test_an_existing_page_is_kept_unless_force(tmp_path, capsys):
    out = tmp_path / "mine.html"
    out.write_text("my notes")
    assert explain("--out", out) == 1
    assert "already exists; pass --force" in capsys.readouterr().err and out.read_text() == "my notes"
    assert explain("--out", out, "--force") == 0 and "zerollm-data" in out.read_text()


def test_a_failed_write_leaves_the_old_page_and_no_temp_file(tmp_path, monkeypatch, capsys):
    import zerollm.teach.explain.page as page
    out = tmp_path / "old.html"
    out.write_text("old page")
    monkeypatch.setattr(page, "build_page", lambda *a, **k: "<p>half" + "\ud800")   # UTF-8 cannot encode it
    with pytest.raises(UnicodeEncodeError):
        explain("--out", out, "--force")
    assert out.read_text() == "old page" and [p.name for p in tmp_path.iterdir()] == ["old.html"]


def test_ckpt_and_hf_together_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "--ckpt", "a", "--hf", "b", "--out", "p.html"])
    assert exit_.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_text_with_characters_an_sft_run_added(tmp_path, run, capsys):
    """藏头诗：春夏秋冬 is in an SFT checkpoint's tokenizer (sft adds the task's characters after the base's),
    so explain reads it as sample does: the tokenizer's own encode decides (issue 22)."""
    import json
    data = tmp_path / "sft.jsonl"
    data.write_text(json.dumps({"prompt": "藏头诗：春夏秋冬", "completion": "春眠不觉晓"}, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    sft = tmp_path / "sft"
    assert main(["sft", "--init", str(run), "--data", str(data), "--out", str(sft), "--max-iters", "1",
                 "--batch-size", "1", "--no-progress"]) == 0
    out = tmp_path / "sft.html"
    assert explain("--ckpt", sft, "--text", "藏头诗：春夏秋冬", "--out", out, "--lang", "zh") == 0, capsys.readouterr().err
    assert "".join(page_data(out.read_text())["model"]["tokens"]) == "藏头诗：春夏秋冬"


def test_the_size_the_docs_give_for_the_walkthrough_page_is_its_size(tmp_path, capsys):
    from conftest import REPO
    # README and docs/explain.md said 68 KB when the page was 70 KB
    import re
    from zerollm.cli import main
    assert main(["explain", "--out", str(tmp_path / "walk.html")]) == 0
    kb = round((tmp_path / "walk.html").stat().st_size / 1024)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    page = (REPO / "docs" / "explain.md").read_text(encoding="utf-8")
    stated = [int(n) for n in re.findall(r"(\d+) KB for the walkthrough alone", readme)]
    stated += [int(n) for n in re.findall(r"\| (?:the walkthrough alone|只有手算部分)[^|]*\| (\d+) KB", page)]
    assert len(stated) == 3 and set(stated) == {kb}, (stated, kb)
