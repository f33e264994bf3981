"""The chat page with a model that thinks and calls tools (#58), in headless Chromium: the thinking folded
under one line, each tool call a card, the user's result sent back as a tool message, the answer after it.
The browser is tests/test_explain_browser.py's fixture; the model is fine-tuned in the test."""

import re

import pytest

from serve_helpers import server, tiny_tool_run
from test_explain_browser import browser, playwright  # noqa: F401  - the same headless Chromium fixtures

pytestmark = pytest.mark.slow   # a fine-tuned model, a server and a headless Chromium


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    with server(tiny_tool_run(tmp_path_factory), "--max-batch", "2", source="--ckpt") as (url, _):
        yield url


@pytest.fixture
def page(browser, base):
    page = browser.new_page()
    page.errors = []
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(base + "/")
    yield page
    assert page.errors == []
    page.close()


def _bubbles(page):
    return page.eval_on_selector_all(".msg.assistant", """els => els.map(e => ({
        thinking: e.querySelector('.thinking .thought')?.textContent ?? null,
        folded: e.querySelector('.thinking') ? !e.querySelector('.thinking').open : null,
        text: e.querySelector(':scope > span')?.textContent ?? '',
        cards: [...e.querySelectorAll('.toolcall')].map(c => [c.querySelector('.name').textContent,
                                                             c.querySelector('.args').textContent]),
        done: e.dataset.done}))""")


def test_thinking_folds_a_tool_call_is_a_card_and_its_result_goes_back(page):
    page.fill("#temperature", "0")
    page.check("#tools")
    page.fill("#input", "12*34=?")
    page.click("#send")
    page.wait_for_selector(".send-results")
    [first] = _bubbles(page)
    assert first == {"thinking": "calc", "folded": True, "text": "", "done": "finished",
                     "cards": [["calculator", '{"expression": "12*34"}']]}
    page.fill(".toolcall input", "408")                 # the user answers as the calculator
    page.click(".send-results")
    page.wait_for_function("() => document.querySelectorAll('.msg.assistant[data-done=finished]').length === 2")
    first, second = _bubbles(page)
    assert second == {"thinking": "ok", "folded": True, "text": "408", "cards": [], "done": "finished"}
    assert page.is_disabled(".toolcall input") and page.query_selector(".send-results") is None
    # under each answer: its think block's tokens (<think>, "calc" / "ok" in bytes, </think>); the second turn's
    # prompt begins with the first's, which the prefix cache holds
    thought, cached = page.locator(".stats").all_text_contents()
    assert thought == "6 tokens of thinking", thought
    assert re.fullmatch(r"4 tokens of thinking; \d+ of \d+ prompt tokens came from the prefix cache", cached), cached
    page.click(".thinking summary")                      # unfolds on a click
    assert page.eval_on_selector(".thinking", "e => e.open")


def test_without_the_tools_box_no_tools_are_sent(page):
    requests = []
    page.on("request", lambda r: requests.append(r.post_data_json) if r.url.endswith("/chat/completions") else None)
    page.fill("#temperature", "0")
    page.fill("#input", "12*34=?")
    page.click("#send")
    page.wait_for_selector(".msg.assistant[data-done]")
    assert "tools" not in requests[0]
    page.check("#tools")
    page.click("#regenerate")
    page.wait_for_selector(".msg.assistant[data-done]")
    page.wait_for_function("() => document.querySelectorAll('.msg.assistant[data-done]').length === 1")
    assert requests[1]["tools"][0]["function"]["name"] == "calculator"
