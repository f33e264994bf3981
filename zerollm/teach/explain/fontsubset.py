"""Make han-subset.woff2: the Chinese characters of the explainer page, and nothing else.

A machine without a CJK font (a fresh Debian, a CI container) draws Chinese as empty boxes. The
page lists the usual system fonts first (PingFang, YaHei, Noto CJK, ...); this small font is the
last resort, and it only covers the characters the page itself prints. Run it again whenever the
Chinese text in text.py changes (a test fails until you do):

    python -m zerollm.teach.explain.fontsubset /usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf

The source font is Droid Sans Fallback (Apache License 2.0; Debian: apt-get download
fonts-droid-fallback). Needs fontTools and brotli (pip install fonttools brotli), at this step only.
"""

import argparse
import os
import unicodedata

from zerollm.teach.explain.text import PAGE_TEXT

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "han-subset.woff2")
EXTRA = "中文"       # the language button, written in the template itself


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


def subset(source, out=OUT):
    from fontTools import subset as ft_subset
    options = ft_subset.Options()
    options.flavor = "woff2"
    options.layout_features = []          # no ligatures or vertical forms: plain glyphs are enough
    options.name_IDs = [0, 1, 2, 13, 14]  # copyright, family, style, licence, licence URL
    options.hinting = False               # browsers at screen sizes do fine without it
    font = ft_subset.load_font(source, options)
    subsetter = ft_subset.Subsetter(options)
    subsetter.populate(text=page_han_chars())
    subsetter.subset(font)
    ft_subset.save_font(font, out, options)
    return os.path.getsize(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", help="a CJK TrueType font, e.g. DroidSansFallbackFull.ttf")
    args = p.parse_args(argv)
    size = subset(args.source)
    print(f"wrote {OUT}: {len(page_han_chars())} characters, {size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
