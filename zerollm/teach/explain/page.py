"""Build the explainer page: one HTML file with its data, styles, script and font inline.

    html = build_page("en", model=None)          # the seed's walkthrough only
    write_page("explain.html", html, force=False)

The template (page.html, package data) holds the styles and the script; this module fills in the
language, the numbers (one JSON object) and small fonts for the Chinese characters it shows: the
interface's (han-subset.woff2) and the slices of han-slices.zip that hold the model's text, tokens and
top-5 predictions (zerollm.teach.explain.fontsubset; SOURCES.md), so the file opens from disk with no network
at all and draws Chinese even where no CJK font is installed.
"""

import base64
import html as html_escape
import json
import os
import re
import warnings
import zipfile
from importlib import resources

import numpy as np

from zerollm import __version__
from zerollm.io.errors import ZeroLLMError
from zerollm.teach.explain.text import PAGE_TEXT
from zerollm.io.fileio import atomic_write
from zerollm.io.outdir import check_output_file
from zerollm.teach.explain.fontsubset import FONT_BUDGET, is_han, page_han_chars
from zerollm.teach.attention_walkthrough import SEED_WK, SEED_WQ, SEED_WV, SEED_X
from zerollm.teach.fmt import to_json

TEMPLATE, FONT, SLICES = "page.html", "han-subset.woff2", "han-slices.zip"
HTML_LANG = {"zh": "zh-Hans", "en": "en"}
_FIELD = re.compile(r"@(LANG|TITLE|FONTS|DATA)@")


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


def font_faces(shown):
    """The fonts for the Chinese characters of ``shown`` -> [(their characters, WOFF2 bytes)], characters
    no font holds: the interface font, then each slice that holds a character it lacks, most frequent
    characters first, as long as the fonts stay within FONT_BUDGET bytes."""
    interface = page_han_chars()
    faces = [(interface, _package_file(FONT).read_bytes())]
    need = {ch for ch in shown if is_han(ch)} - set(interface)
    if not need:
        return faces, ""
    size = len(faces[0][1])
    with _package_file(SLICES).open("rb") as f, zipfile.ZipFile(f) as z:
        for n, chars in enumerate(json.loads(z.read("index.json"))["slices"]):
            if need.isdisjoint(chars):
                continue
            data = z.read(f"{n:02d}.woff2")
            if size + len(data) <= FONT_BUDGET:
                faces.append((chars, data))
                size += len(data)
                need -= set(chars)
    return faces, "".join(sorted(need))


def unicode_range(chars):
    """CSS unicode-range of exactly these characters, runs merged.

    >>> unicode_range("一丁七万")
    'U+4E00-4E01, U+4E03, U+4E07'
    """
    points, runs = sorted({ord(ch) for ch in chars}), []
    for cp in points:
        if runs and cp == runs[-1][1] + 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return ", ".join(f"U+{a:X}" if a == b else f"U+{a:X}-{b:X}" for a, b in runs)


def font_css(faces):
    """One @font-face per font, all of family "zerollm han", each for exactly its own characters."""
    return "\n".join(
        '@font-face {\n  font-family: "zerollm han";\n  font-display: block;\n'
        f'  src: url(data:font/woff2;base64,{base64.b64encode(data).decode("ascii")}) format("woff2");\n'
        f"  unicode-range: {unicode_range(chars)};\n}}" for chars, data in faces)


def build_page(lang, model=None):
    """The whole page as one string; ``model`` is model_view()'s data or None."""
    if lang not in HTML_LANG:
        raise ZeroLLMError(f"lang must be one of {', '.join(HTML_LANG)}, got {lang!r}")
    data = script_json(page_data(lang, model))
    faces, missing = font_faces(data)
    if missing:
        warnings.warn(f"{len(missing)} Chinese character(s) of the page are beyond its embedded fonts (not in the "
                      f"shipped corpus, or over the {FONT_BUDGET // 1000} KB font budget) and need a CJK font "
                      f"on the reader's machine: {missing[:20]}{' ...' if len(missing) > 20 else ''}")
    fields = {
        "LANG": HTML_LANG[lang],
        "TITLE": html_escape.escape(PAGE_TEXT["page_title"][lang]),
        "FONTS": font_css(faces),
        "DATA": data,
    }
    # one pass, so text inside the data (a user's "@FONTS@") is never replaced again
    return _FIELD.sub(lambda m: fields[m.group(1)], _package_file(TEMPLATE).read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------
# writing it

def check_out(path, force, example="explain.html", inputs=()):
    """Refuse an --out that cannot or must not be written, before any model is loaded: the one output
    rule (zerollm.io.outdir.check_output_file: never over an input, never inside a run, checkpoint or
    model, never over a pipe or a device) and an .html name. ``example``: the file name the messages
    suggest (the command's default page); ``inputs``: the (flag, path) pairs the command reads."""
    path = os.fspath(path)
    if not os.path.isdir(path) and not path.lower().endswith((".html", ".htm")):
        raise ZeroLLMError(f"--out must name an .html file, got {path!r}; e.g. --out {example}")
    check_output_file(path, force=force, inputs=inputs, example=example)


def write_page(path, html, force=False):
    """Write atomically: a reader (or a crash) sees the old file or the whole new one, never half."""
    check_out(path, force)          # again: the file may have appeared while the model was loading
    try:
        with atomic_write(path, "w") as f:
            f.write(html)
    except PermissionError:
        raise ZeroLLMError(f"cannot write {path!r}: permission denied; choose a writable --out") from None
    return os.path.getsize(path)
