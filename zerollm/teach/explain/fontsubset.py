"""Make the explainer page's fallback Chinese font: han-subset.woff2 and han-slices.zip.

A machine without a CJK font (a fresh Debian, a CI container) draws Chinese as empty boxes. The
page lists the usual system fonts first (PingFang, YaHei, Noto CJK, ...); these fonts are the last
resort. han-subset.woff2 covers the characters the page's interface prints. han-slices.zip covers
the text of a Chinese model: every character of the shipped Chinese corpus (and CJK punctuation and
full-width forms), most frequent first, in slices of SLICE characters, one small font each; a page
embeds the interface font plus only the slices that hold characters it shows (tokens, heat-map
labels, top-5 tables), at most FONT_BUDGET bytes of fonts in all (zerollm.teach.explain.page). Run it
again whenever the Chinese text in text.py changes (a test fails until you do):

    python -m zerollm.teach.explain.fontsubset /usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf

The source font is Droid Sans Fallback (Apache License 2.0; Debian: apt-get download
fonts-droid-fallback). Needs fontTools and brotli (pip install fonttools brotli), at this step only.
"""

import argparse
import collections
import io
import json
import os
import unicodedata
import zipfile

from zerollm.teach.explain.text import PAGE_TEXT

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "han-subset.woff2")
SLICES = os.path.join(HERE, "han-slices.zip")
EXTRA = "中文"       # the language button, written in the template itself
SLICE = 100          # characters per slice: about 9 KB of WOFF2 each
FONT_BUDGET = 300_000     # bytes of font a page may embed (interface font + slices), before base64


def is_han(ch):
    """Characters a Latin font lacks and the page's CJK fonts provide: ideographs, CJK punctuation,
    full-width forms (the @font-face unicode-range of page.html).

    >>> [is_han(c) for c in "注：a—"]
    [True, True, False, False]
    """
    cp = ord(ch)
    return (0x2E80 <= cp <= 0x9FFF or 0xF900 <= cp <= 0xFAFF or 0xFE30 <= cp <= 0xFE4F
            or 0xFF00 <= cp <= 0xFFEF) and not unicodedata.category(ch).startswith("Z")


def page_han_chars():
    """Every such character the page prints, sorted."""
    text = "".join(entry["zh"] for entry in PAGE_TEXT.values()) + EXTRA
    return "".join(sorted({ch for ch in text if is_han(ch)}))


def corpus_han_chars():
    """The shipped Chinese corpus's characters, CJK punctuation and full-width forms, not already in the
    interface font: most frequent first, so a real text needs few slices."""
    from zerollm.data import corpora
    counts = collections.Counter(ch for ch in corpora.path("tang").read_text(encoding="utf-8") if is_han(ch))
    punctuation = [chr(cp) for cp in [*range(0x3000, 0x3040), *range(0xFF01, 0xFF5F)] if is_han(chr(cp))]
    interface = set(page_han_chars())
    order = [*punctuation, *(ch for ch, _ in counts.most_common())]
    return "".join(ch for ch in dict.fromkeys(order) if ch not in interface)


def subset_bytes(source, chars):
    """WOFF2 bytes of ``source`` cut down to the glyphs of ``chars`` (the ones it has)."""
    from fontTools import subset as ft_subset
    options = ft_subset.Options()
    options.flavor = "woff2"
    options.layout_features = []          # no ligatures or vertical forms: plain glyphs are enough
    options.name_IDs = [0, 1, 2, 13, 14]  # copyright, family, style, licence, licence URL
    options.hinting = False               # browsers at screen sizes do fine without it
    font = ft_subset.load_font(source, options)
    subsetter = ft_subset.Subsetter(options)
    subsetter.populate(text=chars)
    subsetter.subset(font)
    buf = io.BytesIO()
    ft_subset.save_font(font, buf, options)
    return buf.getvalue(), "".join(ch for ch in chars if ord(ch) in font.getBestCmap())


def subset(source, out=OUT):
    data, _ = subset_bytes(source, page_han_chars())
    with open(out, "wb") as f:
        f.write(data)
    return len(data)


def slices(source, out=SLICES):
    """han-slices.zip: index.json ({"slices": [the characters of each]}) and NN.woff2, one per slice."""
    chars, index = corpus_han_chars(), []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:     # WOFF2 is compressed already
        for n, start in enumerate(range(0, len(chars), SLICE)):
            data, covered = subset_bytes(source, chars[start:start + SLICE])
            z.writestr(f"{n:02d}.woff2", data)
            index.append(covered)
        z.writestr("index.json", json.dumps({"slices": index}, ensure_ascii=False))
    return len(index), os.path.getsize(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", help="a CJK TrueType font, e.g. DroidSansFallbackFull.ttf")
    args = p.parse_args(argv)
    size = subset(args.source)
    print(f"wrote {OUT}: {len(page_han_chars())} characters, {size} bytes")
    n, size = slices(args.source)
    print(f"wrote {SLICES}: {n} slices of up to {SLICE} characters, {size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
