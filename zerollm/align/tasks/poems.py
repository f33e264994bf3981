"""Checking the form of generated five-character Tang poems (五言诗).

A five-character poem is a sequence of couplets "XXXXX，XXXXX。": five Chinese characters, a
full-width comma, five more, a full-width full stop. tang_poems.txt holds one poem per line with
2 couplets (绝句, quatrains) or 4 couplets (律诗, regulated verse).

>>> form_report(["床前明月光，疑是地上霜。举头望明月，低头思故乡。", "春眠不觉晓，处处闻啼鸟"])["poems_ok"]
0.5
"""

import regex as re

HAN = r"\p{Han}"          # any CJK ideograph, including the rare extension blocks
COUPLET = re.compile(f"{HAN}{{5}}，{HAN}{{5}}。")
POEM = re.compile(f"(?:{COUPLET.pattern})+")


def couplets(line):
    """Split a poem into its couplets (each ending at a full stop); the rest is kept as a last piece."""
    parts = re.findall(r"[^。]*。|[^。]+$", line)
    return [p for p in parts if p]


def form_report(poems):
    """Fractions of poems that are entirely five-character couplets, of those with 2 or 4 couplets
    (the corpus's forms), and of well-formed couplets among all couplets."""
    poems = [p for p in poems if p]
    if not poems:
        return {"poems": 0, "poems_ok": 0.0, "poems_ok_2_or_4": 0.0, "couplets_ok": 0.0}
    ok = [bool(POEM.fullmatch(p)) for p in poems]
    ok24 = [good and len(couplets(p)) in (2, 4) for good, p in zip(ok, poems)]
    pieces = [c for p in poems for c in couplets(p)]
    return {"poems": len(poems), "poems_ok": sum(ok) / len(poems), "poems_ok_2_or_4": sum(ok24) / len(poems),
            "couplets_ok": sum(bool(COUPLET.fullmatch(c)) for c in pieces) / max(len(pieces), 1)}
