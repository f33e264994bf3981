"""The chat page of `zerollm serve` (GET /) in headless Chromium: streaming, stop, regenerate, 中文, and model
text shown as text. The browser is tests/test_explain_browser.py's fixture."""

import json
import time

import httpx
import pytest

from serve_helpers import server, tiny_chat_model
from test_explain_browser import browser, playwright  # noqa: F401  - the same headless Chromium fixtures

pytestmark = pytest.mark.slow   # a server and a headless Chromium: not in the fast loop


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    # wide and long enough that a 900-token greedy answer (it has no end-of-turn token in it) takes seconds
    model = tiny_chat_model(tmp_path_factory.mktemp("page"), block_size=1024, n_embd=160, n_layer=4, seed=1)
    with server(model, "--max-batch", "4") as (url, _):
        yield url


@pytest.fixture
def page(browser, base):
    page = browser.new_page()
    page.errors, page.urls = [], []
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("request", lambda r: page.urls.append(r.url))
    page.goto(base + "/")
    yield page
    assert page.errors == []
    assert all(u.startswith(base + "/") for u in page.urls), page.urls     # nothing leaves the server
    page.close()


def _settings(page, temperature, max_tokens, seed):
    page.fill("#temperature", str(temperature))
    page.fill("#max_tokens", str(max_tokens))
    page.fill("#seed", "" if seed is None else str(seed))


def _send(page, text):
    page.fill("#input", text)
    page.click("#send")


def _answers(page):
    return page.eval_on_selector_all(".msg.assistant", "els => els.map(e => [e.textContent, e.dataset.done])")


def test_answer_streams_in_equal_to_the_api_and_regenerate_repeats_it(page, base):
    _settings(page, 0.9, 20, 7)
    _send(page, "你好")
    page.wait_for_selector(".msg.assistant[data-done=finished]")
    api = httpx.post(base + "/v1/chat/completions", timeout=30, json={
        "messages": [{"role": "user", "content": "你好"}], "temperature": 0.9, "top_p": 1, "max_tokens": 20,
        "seed": 7}).json()["choices"][0]["message"]["content"]
    assert _answers(page) == [[api, "finished"]]
    page.click("#regenerate")
    page.wait_for_selector(".msg.assistant[data-done=finished]")
    assert _answers(page) == [[api, "finished"]]           # the same seed: the same answer, in the same place
    _send(page, "再来")                                     # a second turn: sent with the history
    page.locator(".msg.assistant[data-done=finished]").nth(1).wait_for()
    assert page.locator(".msg.user").all_text_contents() == ["你好", "再来"]


def test_stop_ends_the_answer_and_frees_the_row(page, base):
    _settings(page, 0, 900, None)
    _send(page, "hi")
    start = time.monotonic()
    while len(page.text_content(".msg.assistant") or "") < 5:        # the page's CSP forbids eval: poll here
        assert time.monotonic() - start < 10
        time.sleep(0.02)
    page.click("#stop")
    page.wait_for_selector(".msg.assistant[data-done=stopped]")
    start = time.monotonic()
    while httpx.get(base + "/health").json()["active"]:
        assert time.monotonic() - start < 5
        time.sleep(0.05)
    shown, done = _answers(page)[0]
    assert done == "stopped" and shown.endswith(" [stopped]")
    full = httpx.post(base + "/v1/chat/completions", timeout=60, json={
        "messages": [{"role": "user", "content": "hi"}], "temperature": 0, "max_tokens": 900}).json()
    full = full["choices"][0]["message"]["content"]
    cut = shown[:-len(" [stopped]")]
    assert full.startswith(cut) and len(cut) < len(full)                  # the answer so far, cut early


def test_model_html_is_shown_as_text(page):
    evil = '<img src=x onerror="window.pwned=1">'
    chunk = {"choices": [{"index": 0, "delta": {"content": evil}, "finish_reason": None}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
    page.route("**/v1/chat/completions", lambda r: r.fulfill(status=200, body=body,
                                                              headers={"Content-Type": "text/event-stream"}))
    _send(page, "say html")
    page.wait_for_selector(".msg.assistant[data-done=finished]")
    assert _answers(page)[0][0] == evil
    assert page.locator("#log img").count() == 0 and page.evaluate("window.pwned") is None


def test_chinese_interface(page):
    page.click("#lang")
    labels = (page.text_content("#send"), page.text_content("#stop"))
    page.click("#lang")
    assert {labels, (page.text_content("#send"), page.text_content("#stop"))} == {("发送", "停止"), ("Send", "Stop")}



def test_an_answer_says_what_the_prefix_cache_and_the_guesses_gave(browser, tmp_path):
    """With --speculate ngram: under each answer, the prompt tokens the prefix cache gave (none the first time;
    the system prompt's whole blocks when the answer is regenerated) and the guessed tokens kept, in the page's
    language, adding up to the server's /metrics counters."""
    import re
    from prometheus_client.parser import text_string_to_metric_families
    model = tiny_chat_model(tmp_path, block_size=256, seed=3)
    with server(model, "--speculate", "ngram") as (url, _):
        page = _open(browser, url, 1280, 800, "en-US")
        page.fill("#system", "You answer in one short line. " * 3)          # 90 bytes: 5 whole blocks of 16
        _settings(page, 0, 12, None)
        _send(page, "abcabcabc")
        page.wait_for_selector(".msg.assistant[data-done=finished]")
        first = page.text_content(".stats")
        page.click("#regenerate")
        page.wait_for_selector(".msg.assistant[data-done=finished]")
        lines = page.locator(".stats").all_text_contents()                  # the first answer's went with it
        counters = httpx.get(url + "/metrics", timeout=30).text
        page.click("#lang")
        chinese = page.text_content(".stats")
        assert page.errors == []
        page.close()
    assert "prefix cache" not in first and re.fullmatch(r"(\d+) of (\d+) guessed tokens kept", first), first
    assert len(lines) == 1, lines
    got = re.fullmatch(r"(\d+) of (\d+) prompt tokens came from the prefix cache; (\d+) of (\d+) guessed tokens "
                       r"kept", lines[0])
    assert got, lines[0]
    cached, prompt, kept, drafted = map(int, got.groups())
    assert cached >= 80 and cached % 16 == 0 and cached < prompt and kept <= drafted, lines[0]
    found = {s.name: s.value for fam in text_string_to_metric_families(counters) for s in fam.samples}
    first_kept, first_drafted = map(int, re.fullmatch(r"(\d+) of (\d+).*", first).groups())
    assert found["vllm:spec_decode_num_draft_tokens_total"] == first_drafted + drafted > 0
    assert found["vllm:spec_decode_num_accepted_tokens_total"] == first_kept + kept
    assert found["vllm:prefix_cache_hits_total"] == cached
    assert chinese == f"提示的 {prompt} 个词元里有 {cached} 个来自前缀缓存；猜测的 {drafted} 个词元留下了 {kept} 个"

# ----------------------------------------------------------------------------
# a small context, a phone, 中文

@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 64-token chat model, the context every shipped preset has."""
    model = tiny_chat_model(tmp_path_factory.mktemp("small-page"), block_size=64, seed=2)
    with server(model) as (url, _):
        yield url


def _open(browser, url, width, height, locale):
    page = browser.new_page(viewport={"width": width, "height": height}, locale=locale)
    page.errors = []
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(url + "/")
    return page


@pytest.mark.parametrize("width, height", [(390, 844), (1280, 800)])
def test_a_long_conversation_fits_a_64_token_context_at_its_defaults(browser, small, width, height):
    # the page used to ask for 200 new tokens of a 64-token model: its first message failed, on every preset
    page = _open(browser, small, width, height, "zh-CN")
    assert page.text_content("#send") == "发送"                         # 中文 from the browser's language
    page.wait_for_function("() => document.getElementById('used').textContent.includes('/ 64')")
    for i in range(6):
        _send(page, f"第{i}个问题：春眠不觉晓")
        page.locator(".msg.assistant[data-done]").nth(i).wait_for()
    assert [d for _, d in _answers(page)] == ["finished"] * 6, _answers(page)
    assert page.locator(".note").count() == 0
    notes = page.locator(".info").all_text_contents()                  # the REPL's note, in 中文
    assert notes and all(n.startswith("（对话超出了 64 个词元的上下文：丢掉了最早的") for n in notes), notes
    assert page.locator(".msg.forgotten").count() >= 2                 # the turns it left out, faded
    used = page.text_content("#used")
    assert used.endswith("/ 64 个词元") and 0 < int(used.split("/")[0]) <= 64, used
    page.click("#regenerate")                                          # again, on what is still remembered
    page.locator(".msg.assistant[data-done]").nth(5).wait_for()
    assert _answers(page)[-1][1] == "finished"
    page.click("#lang")
    assert page.locator(".info").first.text_content().startswith("(the conversation outgrew the context of 64 tokens")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0                                               # nothing wider than the screen
    folded = page.evaluate("!document.getElementById('settings').open")
    log = page.locator("#log").bounding_box()
    if width < 700:                    # a phone: settings folded away, the conversation has the screen
        assert folded and log["height"] > 0.5 * height, log
    else:
        assert not folded and log["width"] > 0.6 * width, log
    assert page.errors == []
    page.close()


def test_errors_are_shown_in_the_pages_language(browser, small):
    page = _open(browser, small, 1280, 800, "zh-CN")
    _send(page, "长" * 80)                                              # alone longer than the 64-token context
    page.wait_for_selector(".msg.assistant[data-done=error]")
    assert page.text_content(".note").strip() == "错误：这条消息对这个模型的上下文来说太长了：请缩短它（或缩短系统提示）"
    page.click("#lang")
    assert page.text_content(".note").strip() == ("Error: the message is too long for this model's context: shorten "
                                                  "it (or the system prompt)")
    page.close()
