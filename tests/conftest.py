"""Shared fixtures. The corpora live outside the repository, in ../shared/data (never committed).

Set ZEROLLM_DATA_DIR to point elsewhere. A missing corpus is a hard failure with a clear message,
not a skip: CI must run every test.
"""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def data_dir():
    return Path(os.environ.get("ZEROLLM_DATA_DIR", REPO.parent / "shared" / "data"))


def _corpus(name):
    path = data_dir() / name
    if not path.is_file():
        pytest.fail(f"corpus {path} not found: put the shared data next to the repository "
                    "(../shared/data) or set ZEROLLM_DATA_DIR")
    return path


@pytest.fixture(scope="session")
def shakespeare_path():
    """tinyshakespeare.txt: 1,115,394 ASCII characters."""
    return _corpus("tinyshakespeare.txt")


@pytest.fixture(scope="session")
def tang_path():
    """tang_poems.txt: 17,826 five-character Tang poems, one per line."""
    return _corpus("tang_poems.txt")
