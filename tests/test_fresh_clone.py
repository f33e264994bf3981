"""A fresh clone of the repository is all a user needs: the corpora ship in the package, nothing in the
repository points outside it, and the shipped files are the ones SOURCES.md describes."""

import hashlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from zerollm.data import corpora

from conftest import REPO, outside_paths

SHA256 = {"shakespeare": "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
          "tang": "6238f012306afa7c3fda841df01b3c6424a1e3042179f09d1f31c83712f1f6cc"}


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [REPO / line for line in out.splitlines()]


@pytest.mark.parametrize("name", sorted(SHA256))
def test_shipped_corpus_is_the_documented_file(name):
    data = corpora.path(name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHA256[name]
    assert SHA256[name] in (REPO / "zerollm" / "data" / "corpora" / "SOURCES.md").read_text(encoding="utf-8")


def test_corpora_and_their_provenance_are_committed():
    tracked = {p.relative_to(REPO).as_posix() for p in tracked_files()}
    for name in ("tinyshakespeare.txt", "tang_poems.txt", "SOURCES.md", "__init__.py"):
        assert f"zerollm/data/corpora/{name}" in tracked


def test_unknown_corpus_is_a_clear_error():
    from zerollm.io.errors import ZeroLLMError
    with pytest.raises(ZeroLLMError, match="shakespeare, tang"):
        corpora.path("wikipedia")


def test_no_committed_file_refers_outside_the_repository():
    """The old layout read the corpora from a sibling folder; a clone has no such folder."""
    suspects = ("../" + "shared", "'shared' / 'data'", '"shared" / "data"', "REPO.parent", "parents[2]")
    offenders = []
    for path in tracked_files():
        if path.suffix not in (".py", ".toml", ".cfg", ".ini", ".sh") and path.parent.name != ".ci":
            continue
        if path.name in ("test_fresh_clone.py", "conftest.py"):   # the checks themselves name the neighbours
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{path.relative_to(REPO)}: {s}" for s in suspects if s in text]
    assert offenders == []


def test_no_committed_text_file_holds_a_merge_conflict():
    """A merge left `<<<<<<< HEAD` ... `>>>>>>> main` in the README once: the page showed both halves and the
    markers. A line that starts with seven of those signs (and a space, or nothing after =) is such a left-over."""
    marks = ("<" * 7 + " ", ">" * 7 + " ", "=" * 7 + "\n")
    offenders = []
    for path in tracked_files():
        if path.suffix not in (".py", ".md", ".toml", ".cfg", ".txt", ".json", ".html", ".js", ".css", ".sh", ".yml"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(True), 1):
            if line.startswith(marks) or line == "=" * 7:
                offenders.append(f"{path.relative_to(REPO)}:{number}")
    assert offenders == []


def test_the_guard_sees_a_file_opened_beside_the_repository(tmp_path):
    """The audit hook in conftest.py would fail the run; here we only check that it notices."""
    import conftest
    before = list(conftest._OUTSIDE)
    try:
        open(REPO.parent / "zerollm-no-such-neighbour.txt").close()
    except OSError:
        pass
    try:
        assert str((REPO.parent / "zerollm-no-such-neighbour.txt").resolve()) in outside_paths()
    finally:
        conftest._OUTSIDE[:] = before


@pytest.mark.slow
def test_a_built_wheel_carries_the_corpora(tmp_path):
    """pip install . (not editable) must install the corpora too: they are package data. The wheel is
    built from a copy of the committed files, as a fresh clone has them (and setuptools' build/ folder
    lands in the copy, not in the repository)."""
    clone = tmp_path / "clone"
    for path in tracked_files():
        target = clone / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file():
            shutil.copy2(path, target)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(clone)], check=True, capture_output=True, timeout=300)
    wheel, = tmp_path.glob("zerollm-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("tinyshakespeare.txt", "tang_poems.txt", "SOURCES.md"):
        assert f"zerollm/data/corpora/{name}" in names
    for name in ("page.html", "han-subset.woff2", "han-slices.zip", "SOURCES.md", "LICENSE-Apache-2.0.txt"):   # zerollm explain
        assert f"zerollm/teach/explain/{name}" in names


def test_ci_runs_the_readmes_test_command_verbatim():
    """.ci/run must run the test command the README gives (its second line), not a variant of it."""
    import re
    from docs_blocks import without_comment
    block = re.search(r"```bash\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.S).group(1)
    line = block.splitlines()[1]
    command = without_comment(line).strip()
    assert "pytest" in command and "-n 2" in command, command
    assert command in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
