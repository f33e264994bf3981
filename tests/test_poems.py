"""The five-character form checker used to judge samples of a model trained on tang_poems.txt."""

import pytest

from zerollm.align.tasks.poems import couplets, form_report


def test_the_corpus_itself_is_entirely_in_form(tang_path):
    poems = tang_path.read_text(encoding="utf-8").splitlines()
    r = form_report(poems)
    assert r["poems"] == 17826 and r["poems_ok"] == r["poems_ok_2_or_4"] == r["couplets_ok"] == 1.0


@pytest.mark.parametrize("poem, ok, ok24", [
    ("床前明月光，疑是地上霜。举头望明月，低头思故乡。", True, True),
    ("床前明月光，疑是地上霜。", True, False),                      # one couplet: form ok, not 2 or 4
    ("床前明月光，疑是地上霜。举头望明月，低头思故乡", False, False),  # no final full stop
    ("床前明月光光，疑是地上霜。举头望明月，低头思故乡。", False, False),  # six characters
    ("床前明月光,疑是地上霜。举头望明月，低头思故乡。", False, False),   # ASCII comma
    ("abcde，疑是地上霜。举头望明月，低头思故乡。", False, False),
])
def test_form(poem, ok, ok24):
    r = form_report([poem])
    assert (r["poems_ok"] == 1.0) == ok and (r["poems_ok_2_or_4"] == 1.0) == ok24


def test_couplets_and_empty():
    assert couplets("甲乙丙丁戊，己庚辛壬癸。子丑") == ["甲乙丙丁戊，己庚辛壬癸。", "子丑"]
    assert form_report([])["poems"] == 0
