"""The two corpora that ship inside the package (provenance and licences: SOURCES.md beside this file).

    >>> path("shakespeare").name
    'tinyshakespeare.txt'

Nothing is read at import time; ``path`` only locates the file, ``read_text`` reads it.
"""

from pathlib import Path

from zerollm.io.errors import ZeroLLMError

# name -> (file name, one line about it)
CORPORA = {
    "shakespeare": ("tinyshakespeare.txt", "tiny Shakespeare: 1.1 MB of plays, 65 distinct characters"),
    "tang": ("tang_poems.txt", "17,826 five-character Tang poems, one per line"),
}
HERE = Path(__file__).resolve().parent


def path(name):
    """Where corpus ``name`` ('shakespeare' or 'tang') lies on disk."""
    if name not in CORPORA:
        raise ZeroLLMError(f"unknown corpus {name!r}; the package ships {', '.join(CORPORA)}")
    found = HERE / CORPORA[name][0]
    if not found.is_file():
        raise ZeroLLMError(f"the corpus file {found} is missing from this installation; reinstall zerollm "
                           "(pip install -e .) from a complete checkout")
    return found


def read_text(name):
    """The whole corpus as one string."""
    return path(name).read_text(encoding="utf-8")
