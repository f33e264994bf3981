"""Build the explainer page: one HTML file with its data, styles, script and font inline.

    html = build_page("en", model=None)          # the seed's walkthrough only
    write_page("explain.html", html, force=False)

The template (page.html, package data) holds the styles and the script; this module fills in the
language, the numbers (one JSON object) and a small font of the page's own Chinese characters
(han-subset.woff2, see SOURCES.md), so the file opens from disk with no network at all.
"""

import base64
import html as html_escape
import json
import os
import re
from importlib import resources

import numpy as np

from zerollm import __version__
from zerollm.io.errors import ZeroLLMError
from zerollm.teach.explain.text import PAGE_TEXT
from zerollm.io.fileio import atomic_write
from zerollm.teach.attention_walkthrough import SEED_WK, SEED_WQ, SEED_WV, SEED_X
from zerollm.teach.fmt import to_json

TEMPLATE, FONT = "page.html", "han-subset.woff2"
HTML_LANG = {"zh": "zh-Hans", "en": "en"}
_FIELD = re.compile(r"@(LANG|TITLE|FONT|DATA)@")


def seed_example():
    """X (T, C) and Wq, Wk, Wv as the float32 numbers `zerollm attention` starts from."""
    x, wq, wk, wv = (np.asarray(a, dtype=np.float32) for a in (SEED_X, SEED_WQ, SEED_WK, SEED_WV))
    return {"x": to_json(x[0]), "wq": to_json(wq), "wk": to_json(wk), "wv": to_json(wv)}   # (1, T, C) -> (T, C)


def page_data(lang, model=None):
    """Everything the page's script reads: texts in both languages, the seed example, the model view."""
    return {"lang": lang, "version": __version__, "text": PAGE_TEXT, "seed": seed_example(), "model": model}


def script_json(obj):
    """JSON that is safe inside <script>: every "<" becomes \\u003c, so no "</script>" or "<!--" in a
    user's text can end or confuse the element (HTML's script data states); JSON.parse reads it back."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def _package_file(name):
    return resources.files("zerollm.teach.explain").joinpath(name)


def build_page(lang, model=None):
    """The whole page as one string; ``model`` is model_view()'s data or None."""
    if lang not in HTML_LANG:
        raise ZeroLLMError(f"lang must be one of {', '.join(HTML_LANG)}, got {lang!r}")
    fields = {
        "LANG": HTML_LANG[lang],
        "TITLE": html_escape.escape(PAGE_TEXT["page_title"][lang]),
        "FONT": base64.b64encode(_package_file(FONT).read_bytes()).decode("ascii"),
        "DATA": script_json(page_data(lang, model)),
    }
    # one pass, so text inside the data (a user's "@FONT@") is never replaced again
    return _FIELD.sub(lambda m: fields[m.group(1)], _package_file(TEMPLATE).read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------
# writing it

def check_out(path, force):
    """Refuse an --out that cannot or must not be written, before any model is loaded."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ZeroLLMError(f"--out {path!r} is a directory; give a file name such as "
                           f"{os.path.join(path, 'explain.html')}")
    if not path.lower().endswith((".html", ".htm")):
        raise ZeroLLMError(f"--out must name an .html file, got {path!r}; e.g. --out explain.html")
    if os.path.exists(path) and not force:
        raise ZeroLLMError(f"{path} already exists; add --force to replace it, or choose another --out")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ZeroLLMError(f"cannot write {path!r}: the directory {parent!r} does not exist; create it "
                           "first (mkdir -p) or choose another --out")


def write_page(path, html, force=False):
    """Write atomically: a reader (or a crash) sees the old file or the whole new one, never half."""
    check_out(path, force)          # again: the file may have appeared while the model was loading
    try:
        with atomic_write(path, "w") as f:
            f.write(html)
    except PermissionError:
        raise ZeroLLMError(f"cannot write {path!r}: permission denied; choose a writable --out") from None
    return os.path.getsize(path)
