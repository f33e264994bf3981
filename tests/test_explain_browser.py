"""The explainer page in a real browser: headless Chromium driven by playwright.

Chromium comes from the system (Debian: apt-get install chromium; CI installs it) or from
`playwright install chromium`. Without one these tests FAIL and say how to get it; a developer who
cannot install a browser may set ZEROLLM_NO_BROWSER=1 to skip them (CI never does). Screenshots of
every view go to $ZEROLLM_ARTIFACTS when set, else to pytest's temporary folder.
"""

import io
import json
import os
import shutil
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from zerollm.nn.self_attention import self_attention
from zerollm.cli.entry import main
from zerollm.teach.explain.fontsubset import is_han
from zerollm.teach.explain.text import PAGE_TEXT
from zerollm.teach.attention_walkthrough import SEED_WK, SEED_WQ, SEED_WV, SEED_X

from explain_helpers import (TEXT, artifact_dir, bidirectional_view, flash_copy, model_truth, shown, tiny_run,
                             visible)

pytestmark = pytest.mark.slow   # a headless Chromium: not in the fast loop

if os.environ.get("ZEROLLM_NO_BROWSER") == "1":
    pytest.skip("ZEROLLM_NO_BROWSER=1: the browser tests are switched off on purpose", allow_module_level=True)

HOW_TO_GET_ONE = ("install a browser for the explainer tests: `apt-get install chromium` (Debian/Ubuntu), or "
                  "`playwright install chromium` where the internet is reachable; or point ZEROLLM_CHROMIUM at a "
                  "Chromium/Chrome executable")
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MATRICES = ("q", "k", "v", "scores", "masked_scores", "weights", "out")


# ----------------------------------------------------------------------------
# one browser for the module, one fresh page per test

def chromium_path():
    """$ZEROLLM_CHROMIUM, else a system Chromium, else None (playwright's own download, if any)."""
    named = os.environ.get("ZEROLLM_CHROMIUM")
    if named:
        return named
    return next((shutil.which(c) for c in CANDIDATES if shutil.which(c)), None)


@pytest.fixture(scope="module")
def playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail('playwright is not installed: pip install -e ".[test]"; then ' + HOW_TO_GET_ONE)
    with sync_playwright() as p:
        yield p


def launch(playwright, **kw):
    from playwright.sync_api import Error
    try:
        return playwright.chromium.launch(executable_path=chromium_path(), **kw)
    except Error as err:
        pytest.fail(f"no headless Chromium could start ({str(err).splitlines()[0]}); {HOW_TO_GET_ONE}")


@pytest.fixture(scope="module")
def browser(playwright):
    chrome = launch(playwright)
    yield chrome
    chrome.close()


class Opened:
    """A page plus everything it tried: console errors, uncaught exceptions, requests."""

    def __init__(self, browser, path):
        self.errors, self.requests = [], []
        self.page = browser.new_page(viewport={"width": 1200, "height": 900})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.route("**/*", self._route)
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("body[data-ready=true]", state="attached", timeout=10_000)

    def _route(self, route):
        self.requests.append(route.request.url)
        route.continue_() if route.request.url.startswith("file://") else route.abort()

    def cells(self, name):
        """{(i, j): (text, data-v)} of one walkthrough matrix."""
        rows = self.page.eval_on_selector_all(
            f'td[data-m="{name}"]', "cs => cs.map(c => [+c.dataset.i, +c.dataset.j, c.textContent, c.dataset.v])")
        return {(i, j): (text, v) for i, j, text, v in rows}


@pytest.fixture
def opened(browser):
    made = []

    def open_(path):
        made.append(Opened(browser, path))
        return made[-1]
    yield open_
    for o in made:
        o.page.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return artifact_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return tiny_run(tmp_path_factory)


@pytest.fixture(scope="module")
def truth(run):
    return model_truth(run, TEXT)


@pytest.fixture(scope="module")
def pages(tmp_path_factory, run):
    folder = tmp_path_factory.mktemp("pages")
    out = {"seed": folder / "seed.html", "model": folder / "model.html", "notes": folder / "notes.html"}
    flash = flash_copy(run, folder / "flash-run")
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        assert main(["explain", "--out", str(out["seed"]), "--lang", "en"]) == 0
        assert main(["explain", "--ckpt", str(run), "--text", TEXT, "--out", str(out["model"]), "--lang", "en"]) == 0
        assert main(["explain", "--ckpt", str(flash), "--text", TEXT * 2, "--out", str(out["notes"]),
                     "--lang", "zh"]) == 0
    return out


def cli_json(*flags):
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["attention", "--json", *flags]) == 0
    return json.loads(buf.getvalue())


# ----------------------------------------------------------------------------
# loading

@pytest.mark.parametrize("which", ["seed", "model", "notes"])
def test_loads_from_file_with_no_console_error_and_no_network(opened, pages, shots, which):
    o = opened(pages[which])
    assert o.errors == []
    assert o.requests == [pages[which].as_uri()]          # the page itself, nothing else
    o.page.screenshot(path=str(shots / f"{which}.png"), full_page=True)


# ----------------------------------------------------------------------------
# section 1: the walkthrough

@pytest.mark.parametrize("flags", [(), ("--bidirectional",)], ids=["causal", "bidirectional"])
def test_every_number_equals_zerollm_attention_json(opened, pages, shots, flags):
    o = opened(pages["seed"])
    if flags:
        o.page.check('input[name="mask"][value="bidirectional"]')
    expected = cli_json(*flags)
    for name in MATRICES:
        cells = o.cells(name)
        want = np.array(expected[name], dtype=object)[0]                  # (1, T, n) -> (T, n)
        assert len(cells) == want.size, name
        for (i, j), (text, _) in cells.items():
            assert text == shown(want[i, j]), (name, i, j)
    mask = o.cells("mask")
    assert {k: v == "true" for k, (_, v) in mask.items()} == {
        (i, j): h for i, row in enumerate(expected["mask"][0]) for j, h in enumerate(row)}
    assert {t for t, _ in mask.values()} <= {"✕", "✓"}
    assert o.page.text_content("#scale-cell") == shown(expected["scale"])
    o.page.screenshot(path=str(shots / f"seed-{'bidirectional' if flags else 'causal'}.png"), full_page=True)


def numpy_truth(x, causal):
    arrays = [np.array(a, dtype=np.float64) for a in (x, SEED_WQ, SEED_WK, SEED_WV)]
    return self_attention(*arrays, causal=causal)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_editing_x_recomputes_like_numpy(opened, pages, causal):
    o = opened(pages["seed"])
    if not causal:
        o.page.check('input[name="mask"][value="bidirectional"]')
    x = np.array(SEED_X[0], dtype=np.float64)
    for (i, j), value in {(0, 0): "-1.25", (1, 2): "0.9", (2, 3): "3e-1"}.items():
        o.page.fill(f'#t-x input[data-i="{i}"][data-j="{j}"]', value)
        x[i, j] = float(value)
    r = numpy_truth(x, causal)
    for name in MATRICES:
        want = getattr(r, "masked_scores" if name == "masked_scores" else name)
        for (i, j), (text, v) in o.cells(name).items():
            if np.isneginf(want[i, j]):
                assert v == "-inf" and text == "−∞"
            else:
                assert abs(float(v) - want[i, j]) <= 1e-6, (name, i, j)
                assert text == shown(float(v))
    o.page.click("#reset-x")
    assert o.cells("weights")[(1, 0)][0] == shown(numpy_truth(np.array(SEED_X[0]), causal).weights[1, 0])


def test_a_bad_x_is_flagged_and_changes_nothing(opened, pages):
    o = opened(pages["seed"])
    before = o.cells("out")
    o.page.fill('#t-x input[data-i="1"][data-j="1"]', "abc")
    assert o.page.get_attribute('#t-x input[data-i="1"][data-j="1"]', "aria-invalid") == "true"
    assert "abc" in o.page.text_content("#x-error") and o.page.is_visible("#x-error")
    assert o.cells("out") == before and o.errors == []


@pytest.mark.parametrize("cell, words", [
    ('td[data-m="weights"][data-i="2"][data-j="1"]', ["exp(", "max", "0.3332"]),
    ('td[data-m="weights"][data-i="0"][data-j="2"]', ["exp(−∞)", "= 0"]),
    ('td[data-m="scores"][data-i="1"][data-j="0"]', ["Q[1] · K[0]", "× 0.7071", "= 0.0079"]),
    ('td[data-m="out"][data-i="2"][data-j="0"]', ["0.3334×0.0500", "= 0.0367"]),
])
def test_hovering_a_number_shows_how_it_was_made(opened, pages, shots, cell, words):
    o = opened(pages["seed"])
    o.page.hover(cell)
    tip = o.page.text_content("#tip")
    assert o.page.is_visible("#tip") and all(w in tip for w in words), tip
    o.page.keyboard.press("Escape")
    assert not o.page.is_visible("#tip")
    o.page.focus(cell)                                   # the keyboard gets the same explanation
    assert o.page.text_content("#tip") == tip
    if "weights" in cell and 'i="2"' in cell:
        o.page.hover(cell)
        o.page.screenshot(path=str(shots / "seed-tooltip.png"))


def test_the_language_switch_changes_the_visible_text(opened, pages, shots):
    o = opened(pages["seed"])
    assert o.page.text_content("h1") == PAGE_TEXT["page_title"]["en"]
    o.page.click('button[data-lang="zh"]')
    assert o.page.text_content("h1") == PAGE_TEXT["page_title"]["zh"]
    assert o.page.evaluate("document.documentElement.lang") == "zh-Hans"
    assert o.page.text_content("#seed-h") == PAGE_TEXT["seed_h"]["zh"]
    assert o.page.get_attribute('button[data-lang="zh"]', "aria-pressed") == "true"
    o.page.screenshot(path=str(shots / "seed-zh.png"), full_page=True)
    o.page.click('button[data-lang="en"]')
    assert o.page.text_content("#seed-h") == PAGE_TEXT["seed_h"]["en"]


NOTDEF = "\U0010FFFD"     # a private-use code point no font draws: what a missing glyph looks like


def drawn_as_boxes(page, chars, missing):
    """The characters of ``chars`` that the page's body font draws exactly like one of ``missing``
    (characters without a glyph): each is drawn on a canvas and the pixels compared."""
    return page.evaluate("""([chars, missing]) => {
        const canvas = document.createElement("canvas"), ctx = canvas.getContext("2d");
        canvas.width = canvas.height = 40;
        ctx.font = "32px " + getComputedStyle(document.body).fontFamily;
        const draw = (c) => { ctx.clearRect(0, 0, 40, 40); ctx.fillText(c, 2, 32);
                              return Array.from(ctx.getImageData(0, 0, 40, 40).data).join(); };
        const box = missing.map(draw);
        return chars.filter((c) => box.includes(draw(c)));
    }""", [chars, missing])


def test_chinese_is_drawn_not_boxes_even_without_cjk_fonts(opened, pages):
    """Draw every Chinese character the page shows, in the page's own font order, and compare each
    with the box a missing glyph gets. On a machine without CJK fonts only the page's fallback font
    can make them differ."""
    o = opened(pages["model"])
    o.page.click('button[data-lang="zh"]')
    chars = sorted({c for c in o.page.inner_text("body") if is_han(c)})
    assert len(chars) > 100
    assert drawn_as_boxes(o.page, chars, [NOTDEF]) == []


def test_keyboard_reaches_every_control(opened, pages):
    o = opened(pages["model"])
    o.page.evaluate("""() => { window.reached = new Set();
        document.addEventListener("focusin", ({ target: e }) => window.reached.add(
            e.dataset.lang ? "lang" : e.name === "mask" ? "mask" : e.closest("#t-x") ? "x"
            : e.classList.contains("tok") ? "token" : e.classList.contains("thumb") ? "thumb"
            : e.id || e.tagName)); }""")
    want, reached = {"lang", "mask", "reset-x", "x", "layer", "head", "token", "thumb"}, set()
    for _ in range(8):                                  # Tab, Tab, ... until every kind of control had focus
        for _ in range(40):
            o.page.keyboard.press("Tab")
        reached = set(o.page.evaluate("[...window.reached]"))
        if want <= reached:
            break
    assert want <= reached


def test_tables_have_headers_and_colour_is_not_the_only_cue(opened, pages):
    o = opened(pages["model"])
    tables = o.page.eval_on_selector_all("table", """ts => ts.map(t => [t.id,
        t.querySelectorAll("thead th[scope=col]").length, t.querySelectorAll("tbody th[scope=row]").length])""")
    for name, cols, rows in tables:
        if name:                                   # the one-cell scale table has a row header only
            assert cols > 0 and rows > 0, name
    hidden = o.page.eval_on_selector_all("#heat td.hid", "ts => ts.map(t => t.textContent)")
    assert hidden and set(hidden) == {"·"}          # hidden cells are marked, not only greyed
    assert o.page.eval_on_selector_all("#tokens .tok-w", "ws => ws.every(w => w.textContent !== '')")


# ----------------------------------------------------------------------------
# section 2: a trained checkpoint

@pytest.mark.parametrize("layer, head, pos", [(0, 0, 31), (1, 1, 7), (0, 1, 0)])
def test_attention_shown_equals_the_model(opened, pages, truth, shots, layer, head, pos):
    o = opened(pages["model"])
    ids, weights, _, _ = truth
    o.page.select_option("#layer", str(layer))
    o.page.select_option("#head", str(head))
    o.page.click(f'#tokens button[data-pos="{pos}"]')
    shown_w = o.page.eval_on_selector_all("#tokens .tok-w", "ws => ws.map(w => w.textContent)")
    assert len(shown_w) == len(ids) == 32
    for j, text in enumerate(shown_w):
        if j > pos:
            assert text == "·"                     # the future is hidden from a causal model
        else:
            assert abs(float(text) - weights[layer][head, pos, j]) <= 0.5e-4 + 1e-7, j
    heat = o.page.eval_on_selector_all(f'#heat td[data-i="{pos}"]', "ts => ts.map(t => t.getAttribute('aria-label'))")
    assert heat[:pos + 1] == shown_w[:pos + 1]
    assert o.page.get_attribute(f'#grid button[data-layer="{layer}"][data-head="{head}"]', "aria-pressed") == "true"
    if (layer, head) == (1, 1):
        o.page.screenshot(path=str(shots / "model-attention.png"), full_page=True)


def test_top5_shown_equals_the_model(opened, pages, truth):
    o = opened(pages["model"])
    ids, _, probs, tok = truth
    rows = o.page.eval_on_selector_all("#top5 tbody tr", """rs => rs.map(r =>
        Array.from(r.querySelectorAll("td[data-rank]"))
        .map(c => [c.querySelector(".cand").textContent, c.querySelector(".p").textContent]))""")
    assert len(rows) == len(ids)
    for t, row in enumerate(rows):
        top = np.argsort(-probs[t], kind="stable")[:5]
        assert [label for label, _ in row] == [visible(tok.decode([int(i)])) for i in top], t
        for (_, p), i in zip(row, top):
            assert abs(float(p) - probs[t, i]) <= 0.5e-4 + 1e-9, t


def test_loss_curve_is_drawn_from_log_jsonl(opened, pages, run):
    from zerollm.training.runlog import read_log
    o = opened(pages["model"])
    records = read_log(run / "log.jsonl")
    evals = [r for r in records if "val_loss" in r]
    assert o.page.eval_on_selector_all("#loss circle", "cs => cs.length") == len(evals)
    assert o.page.eval_on_selector_all("#loss polyline", "ps => ps.length") == 3
    steps = [r for r in records if "loss" in r]
    summary = o.page.text_content("#loss-summary")
    assert f"{steps[0]['loss']:.4f}" in summary and f"{steps[-1]['loss']:.4f}" in summary


def test_truncation_and_flash_are_said_on_the_page(opened, pages, shots):
    o = opened(pages["notes"])
    notes = o.page.eval_on_selector_all("#notes li", "ls => ls.map(l => l.textContent)")
    assert notes == [PAGE_TEXT["note_truncated"]["zh"].format(n=64, T=32, ctx=32, max=64),
                     PAGE_TEXT["note_flash"]["zh"]]
    assert o.page.is_visible("#notes") and len(o.page.eval_on_selector_all("#tokens button", "bs => bs")) == 32
    o.page.screenshot(path=str(shots / "model-notes-zh.png"), full_page=True)


def test_a_bidirectional_model_looks_both_ways(opened, tmp_path):
    from zerollm.teach.explain.page import build_page
    view, _, weights = bidirectional_view("to be")
    path = tmp_path / "encoder.html"
    path.write_text(build_page("en", view), encoding="utf-8")
    o = opened(path)
    o.page.click('#tokens button[data-pos="0"]')
    shown_w = o.page.eval_on_selector_all("#tokens .tok-w", "ws => ws.map(w => w.textContent)")
    np.testing.assert_allclose([float(w) for w in shown_w], weights[0][0, 0], atol=0.5e-4 + 1e-7)
    assert o.page.eval_on_selector_all("#heat td.hid", "ts => ts.length") == 0 and o.errors == []


# ----------------------------------------------------------------------------
# a Chinese model's page where the system has no CJK font at all (issue 22)

@pytest.fixture(scope="module")
def fontless_browser(playwright, tmp_path_factory):
    """Chromium whose fontconfig sees one Latin font only (matplotlib's DejaVu Sans; with none at all Chromium
    does not start): every Chinese glyph must come from the page."""
    import matplotlib
    folder = tmp_path_factory.mktemp("no-fonts")
    (folder / "fonts").mkdir()
    shutil.copy(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf"), folder / "fonts")
    (folder / "fonts.conf").write_text(
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>'
        f'<dir>{folder / "fonts"}</dir><cachedir>{folder / "cache"}</cachedir></fontconfig>')
    chrome = launch(playwright, env={**os.environ, "FONTCONFIG_FILE": str(folder / "fonts.conf")})
    yield chrome
    chrome.close()


def test_a_chinese_models_tokens_and_top5_are_drawn_without_system_fonts(fontless_browser, tmp_path, recwarn):
    import re
    from zerollm.data import corpora
    from zerollm.teach.explain.fontsubset import FONT_BUDGET
    from zerollm.teach.explain.model_view import model_view
    from zerollm.teach.explain.page import build_page
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import CharTokenizer
    poems = corpora.path("tang").read_text(encoding="utf-8")[:600]
    tok = CharTokenizer.train(poems)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=24, n_layer=1, n_head=2, n_embd=16), seed=0)
    text = "".join(ch for ch in poems if is_han(ch))[100:124]
    view, _ = model_view(model, tok, text, name="poems")
    html = build_page("zh", view)
    assert not [w for w in recwarn if "beyond its embedded fonts" in str(w.message)]
    fonts = sum(len(b) * 3 // 4 for b in re.findall(r"base64,([A-Za-z0-9+/=]+)", html))
    assert fonts <= FONT_BUDGET, fonts
    path = tmp_path / "poems.html"
    path.write_text(html, encoding="utf-8")
    o = Opened(fontless_browser, path)
    shown = {ch for ch in o.page.inner_text("body") + "".join(view["tokens"])
             + "".join(t for row in view["top_tokens"] for t in row) if is_han(ch)}
    assert set(text) <= shown and len(shown) > 250
    # a missing glyph is drawn as the box of whichever font claims the character: compare with both the
    # box of a code point no font has and that of an ideograph no embedded font holds (U+3400)
    assert "\u3400" not in html
    assert drawn_as_boxes(o.page, sorted(shown), [NOTDEF, "\u3400"]) == [] and o.errors == []
    o.page.close()
