"""Docs that run: every fenced bash and python block of README.md and docs/*.md, run as a reader would.

Each tour (a page, or one language half of a page written twice: tests/docs_blocks.py) runs top to
bottom in a fresh copy of the repository's files, as a fresh clone, with its own empty HOME: the
package installed, nothing else. Each bash line is one command and must exit 0; each python block
runs with ``python``. The text is never edited for the test; what changes is the environment:

- ``ZEROLLM_DOCS_TEST=1`` (zerollm/io/docsmode.py): long runs stop early, and say so on stderr.
- BLAS gets one thread per process (``OPENBLAS_NUM_THREADS=1``): on a shared 2-core machine, BLAS
  threads that wait for each other made one 300-token sample take 28 s instead of 2 s.
- The network is cut off (every proxy variable points at a closed port, ``HF_HUB_OFFLINE=1``),
  except for commands marked ``[online]``, which reach local stand-ins instead
  (tests/docs_servers.py): a file server for ``ZEROLLM_MIRROR`` and a Hugging Face Hub for
  ``HF_ENDPOINT``, holding a small GPT-2-architecture model under ``openai-community/gpt2`` and a small
  Qwen3-architecture one under ``Qwen/Qwen3-0.6B``.
- ``pip install`` and ``apt-get install`` are checked, not run: a stand-in (tests/docs_installed.py)
  confirms that what they would install is installed already (a test must not change the
  environment it runs in), and fails otherwise.
- Commands marked ``[not tested: WHY]`` are skipped and counted.

The counts per tour are printed (run with -s to see them); a new block that fails breaks CI. A 中文 half
that runs exactly what its English half runs (the same commands in the same order, only the comments
translated: tests/docs_blocks.py ``what_runs``) is checked to be that, not run a second time. One that
begins with its English half's first k commands and then shows something else (``branch_of``) runs
only the rest, in a copy of the English tour's folder taken after its k-th command: where a reader of
the 中文 half stands after the same k commands. A rest that ends with the English half's own last
commands (``own_rest``: alignment's tools chapter, in both halves) leaves those to the English tour.
"""

import ast
import contextlib
import functools
import json
import re
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import docs_blocks
from conftest import REPO
from docs_servers import serve

TIMEOUT_S = 300
CHECKED = ("pip", "apt-get")            # the installers the stand-in checks instead of running
CLOSED = "http://127.0.0.1:9"           # nothing listens on the discard port: any request fails at once
PROXIES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
CONTEXT_NOTES = ("the context is full", "is longer than the context (")   # zerollm.generation's warnings
TOURS = [t for page in docs_blocks.pages(REPO) for t in docs_blocks.tours(REPO, page) if t.commands]


# ----------------------------------------------------------------------------
# the internet, locally

def fake_gpt2(folder):
    """A GPT-2-architecture model with GPT-2's file layout (config.json, model.safetensors, vocab.json,
    merges.txt, tokenizer.json, generation_config.json), small enough to download in a blink."""
    from zerollm.data import corpora
    from zerollm.interop import hf
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers.bpe import BPETokenizer
    text = corpora.path("shakespeare").read_text(encoding="utf-8")[:20_000]
    tok = BPETokenizer.train(text, 300, pattern="gpt2")
    # block 128: room for the pages' --max-new-tokens 50 after a prompt (GPT-2's own context is 1024)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=128, n_layer=2, n_head=2, n_embd=32), seed=0)
    hf.export(model, folder, tokenizer=tok)
    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]
    (folder / "vocab.json").write_text(json.dumps(spec["vocab"], ensure_ascii=False), encoding="utf-8")
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["merges"]]
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    (folder / "generation_config.json").write_text('{"do_sample": false}\n', encoding="utf-8")
    (folder / "pytorch_model.bin").write_bytes(b"a pickle the docs must not fetch")


def fake_qwen3(folder):
    """A Qwen3-architecture model (QK-norm, head_dim of its own, tied) with Qwen's file layout and a Qwen-style
    tokenizer (the Qwen2 split regex, NFC, <|im_start|> / <|im_end|> and the thinking tokens): what
    docs/huggingface.md downloads as Qwen/Qwen3-0.6B, small enough to download in a blink."""
    from zerollm.data import corpora
    from zerollm.interop import hf
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers.bpe import BPETokenizer
    from zerollm.tokenizers.patterns import QWEN2_PATTERN
    text = corpora.path("tang").read_text(encoding="utf-8")[:20_000]
    specials = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
                "<tool_response>", "</tool_response>")
    trained = BPETokenizer.train(text, 600, pattern=QWEN2_PATTERN, special_tokens=specials)
    tok = BPETokenizer(trained.pattern, trained.merges, trained.special_tokens, trained.vocab, normalizer="NFC")
    cfg = GPTConfig(vocab_size=tok.vocab_size + 7, block_size=256, n_layer=2, n_head=4, n_kv_head=2, n_embd=32,
                    head_dim=16, qk_norm=True, norm="rmsnorm", norm_eps=1e-6, pos="rope", rope_theta=1e6,
                    mlp="swiglu", bias=False)
    hf.export(GPT(cfg, seed=0), folder, tokenizer=tok)
    (folder / "generation_config.json").write_text('{"do_sample": true, "temperature": 0.6}\n', encoding="utf-8")


@pytest.fixture(scope="module")
def internet(tmp_path_factory):
    """{variable: value} that lead the [online] commands to the local servers."""
    root = tmp_path_factory.mktemp("internet")
    www, hub = root / "www", root / "hub" / "openai-community" / "gpt2"
    www.mkdir()
    hub.mkdir(parents=True)
    from zerollm.data import corpora, download
    shutil.copy(corpora.path("shakespeare"), www / download.DATASETS["shakespeare"]["file"])
    fake_gpt2(hub)
    (root / "hub" / "Qwen" / "Qwen3-0.6B").mkdir(parents=True)
    fake_qwen3(root / "hub" / "Qwen" / "Qwen3-0.6B")
    with serve(www) as files, serve(root / "hub", hub=True) as endpoint:
        yield {"ZEROLLM_MIRROR": files, "HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_TELEMETRY": "1",
               "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


# ----------------------------------------------------------------------------
# a reader's machine

# what a checkout may hold that git does not track yet and a clone should have: a contributor's new module,
# test or page. Anything else untracked (explain.html, data/, tokenizer.json ... that a reader's tour of the
# README wrote into the checkout) is the reader's, and a fresh clone would not have it.
PROJECT_FOLDERS = ("zerollm/", "tests/", "docs/", "scripts/", "benchmarks/", ".ci/")


def fresh_clone(dest, repo=REPO):
    """The repository's files (tracked, and new ones git does not ignore under PROJECT_FOLDERS) copied to
    ``dest``, and the fast engine's compiled kernels that the other tests left in zerollm/**/__pycache__
    (numba's cache: its key is the source file's content, not its path). Without them each tour that runs
    the fast engine compiles it anew, 5-15 s a command; with them a command behaves the same, only sooner."""
    def listed(*flags):
        out = subprocess.run(["git", "ls-files", "-z", *flags], cwd=repo, capture_output=True, check=True).stdout
        return [name for name in out.decode().split("\0") if name]
    tracked = listed("--cached")
    new = [name for name in listed("--others", "--exclude-standard") if name.startswith(PROJECT_FOLDERS)]
    kernels = [str(p.relative_to(repo)) for p in (Path(repo) / "zerollm").glob("**/__pycache__/*.nb[ic]")]
    for name in tracked + new + kernels:
        source = Path(repo) / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    seed_kernel_cache(dest, repo)


def _cache_folders(src, dst):
    """(numba's cache folder for a source folder of ``src``, the one for the same folder of ``dst``), for each
    source folder of the project; nothing without NUMBA_CACHE_DIR."""
    if not os.environ.get("NUMBA_CACHE_DIR"):
        return
    from numba.core.caching import _CacheLocator       # the subfolder numba's own lookup computes
    cache = Path(os.environ["NUMBA_CACHE_DIR"])
    folders = {p.parent.relative_to(src) for top in PROJECT_FOLDERS for p in (Path(src) / top).glob("**/*.py")}
    for folder in folders:
        yield tuple(cache / _CacheLocator.get_suitable_cache_subpath(str(root / folder / "x.py"))
                    for root in (src, dst))


@functools.lru_cache(maxsize=256)
def _folder_pairs(src, dst, cache_dir):
    """_cache_folders, listed once per pair of roots (twice a command: finding the folders is most of the cost)."""
    return tuple(_cache_folders(src, dst))


def seed_kernel_cache(dest, repo):
    """With NUMBA_CACHE_DIR set (tests/conftest.py), numba files a source's compiled kernels under a hash of
    its folder's path, so the clone's own path would find none and every tour that runs the fast engine
    would compile it anew (tens of seconds). The repository's entries, copied under the clone's paths,
    are found; numba still checks each source's size and time (kept by copy2) and each function's code."""
    for source, target in _cache_folders(repo, dest):
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            # the kernels before the indexes that name them, as numba itself writes them (another test may be
            # adding one now: an index whose kernel file is missing is only a miss)
            for kernel in sorted(source.glob("*.nb[ic]"), key=lambda f: f.suffix == ".nbi"):
                with contextlib.suppress(FileNotFoundError):      # replaced by a newer one meanwhile
                    shutil.copy2(kernel, target / kernel.name)


def return_kernel_cache(clone, repo):
    """seed_kernel_cache the other way: the kernels a tour compiled for a function that has none under the
    repository's paths yet are filed there too, so that later tours and tests load them instead of compiling
    them again (on a clean clone's first run, each tour's fast-engine commands compiled for tens of seconds,
    and the next tour compiled the same again)."""
    give_new_kernels(clone, repo)


def give_new_kernels(source_root, target_root):
    """The compiled kernels of every function that has an index under ``source_root``'s paths and none under
    ``target_root``'s, filed there. Whole functions only, each file created only where none is: an index names
    its kernels by number, and numbers merged into another index could pair one signature's entry with another
    signature's kernel; a function the target has already is left as it is, so nothing it holds is lost."""
    for source, target in _folder_pairs(Path(source_root), Path(target_root), os.environ.get("NUMBA_CACHE_DIR")):
        for index in (source.glob("*.nbi") if source.is_dir() else ()):
            if (target / index.name).exists():
                continue
            stem = index.name[:-len(".nbi")]
            kernels = [k for k in source.glob("*.nbc") if k.name.startswith(stem + ".")
                       and k.name[len(stem) + 1:-len(".nbc")].isdigit()]
            target.mkdir(parents=True, exist_ok=True)
            try:
                for kernel in kernels:                  # the kernels before the index that names them
                    with open(target / kernel.name, "xb") as out:
                        out.write(kernel.read_bytes())
                staged = target / f"{index.name}.{os.getpid()}.tmp"
                shutil.copyfile(index, staged)
                try:
                    os.link(staged, target / index.name)       # only if no process filed one meanwhile
                finally:
                    staged.unlink()
            except (FileExistsError, FileNotFoundError):       # another process is filing this function
                continue


def test_a_fresh_clone_finds_the_kernels_numba_compiled_for_the_repository(tmp_path, monkeypatch):
    repo, dest = tmp_path / "repo", tmp_path / "clone"
    (repo / "zerollm").mkdir(parents=True)
    (repo / "zerollm" / "kern.py").write_text("import numba\n\n\n@numba.njit(cache=True)\ndef twice(x):\n"
                                              "    return 2 * x\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-cache"))
    probe = "import kern; assert kern.twice(21) == 42; print(sum(kern.twice.stats.cache_hits.values()))"

    def cache_hits(root):
        return int(subprocess.run([sys.executable, "-c", probe], cwd=root / "zerollm", capture_output=True, text=True,
                                  check=True).stdout)
    assert cache_hits(repo) == 0                    # compiled here, and saved under the repository's path
    dest.mkdir()
    fresh_clone(dest, repo)
    assert cache_hits(dest) == 1                    # the clone loads it instead of compiling it again


def _two_kernel_repo(tmp_path, monkeypatch):
    """A git repository whose zerollm/kern.py has two cached kernels (twice, thrice), a numba cache of the
    test's own, and the path of a clone still to make: (repo, clone)."""
    repo, dest = tmp_path / "repo", tmp_path / "clone"
    (repo / "zerollm").mkdir(parents=True)
    (repo / "zerollm" / "kern.py").write_text("import numba\n\n\n@numba.njit(cache=True)\ndef twice(x):\n"
                                              "    return 2 * x\n\n\n@numba.njit(cache=True)\ndef thrice(x):\n"
                                              "    return 3 * x\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-cache"))
    return repo, dest


def test_kernels_a_tour_compiled_are_given_back_to_the_repository(tmp_path, monkeypatch):
    repo, dest = _two_kernel_repo(tmp_path, monkeypatch)

    def cache_hits(root, call):
        probe = f"import kern; kern.{call}; print(sum(kern.twice.stats.cache_hits.values()), " \
                f"sum(kern.thrice.stats.cache_hits.values()))"
        out = subprocess.run([sys.executable, "-c", probe], cwd=root / "zerollm", capture_output=True, text=True,
                             check=True).stdout
        return tuple(int(n) for n in out.split())
    assert cache_hits(repo, "twice(2)") == (0, 0)           # twice(int) compiled for the repository
    (index,) = (tmp_path / "numba-cache").glob("*/kern.twice-*.nbi")
    dest.mkdir()
    fresh_clone(dest, repo)
    assert cache_hits(dest, "thrice(2); kern.twice(2.5)") == (0, 0)    # the tour compiles new ones
    ours = {p: p.read_bytes() for p in index.parent.glob("kern.twice-*")}
    return_kernel_cache(dest, repo)
    # thrice, which the repository had none of, is loaded; twice's index of one kernel is left as it was
    assert {p: p.read_bytes() for p in index.parent.glob("kern.twice-*")} == ours
    assert cache_hits(repo, "thrice(2); kern.twice(2)") == (1, 1)


def test_kernels_pass_between_the_clone_and_the_repository_around_each_command(tmp_path, monkeypatch):
    # on a cold cache, the test beside a tour compiles a kernel the tour needs next (or the other way round):
    # each finds the other's before its next command, not after the whole tour
    repo, dest = _two_kernel_repo(tmp_path, monkeypatch)
    monkeypatch.setattr(sys.modules[__name__], "REPO", repo)
    dest.mkdir()
    fresh_clone(dest, repo)                          # nothing compiled yet: the clone has no kernels
    # another test compiles thrice, after the clone was made
    subprocess.run([sys.executable, "-c", "import kern; kern.thrice(2)"], cwd=repo / "zerollm", check=True)
    (ours, theirs), = [pair for pair in _cache_folders(repo, dest) if pair[0].is_dir()]
    assert [p.name.split("-")[0] for p in ours.glob("*.nbi")] == ["kern.thrice"] and not theirs.exists()
    # the tour's next command finds it (or fails), and compiles twice
    probe = "import kern; kern.twice(2); kern.thrice(2); assert sum(kern.thrice.stats.cache_hits.values()) == 1"
    command = docs_blocks.Command("bash", f'cd zerollm && python -c "{probe}"', 1, False, None)
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    counts = new_counts()
    run_commands(docs_blocks.Tour("kern.md", "kern.md", (command,)), (command,), dest, env, {}, counts, [])
    assert counts["bash"] == 1
    # ... and the repository has the kernel the command compiled, before the tour ends
    assert sorted(p.name.split("-")[0] for p in ours.glob("*.nbi")) == ["kern.thrice", "kern.twice"]


def test_a_fresh_clone_leaves_out_what_a_tour_wrote_into_the_checkout(tmp_path):
    # after the README's tour the checkout holds explain.html, data/ ... untracked: the docs tests must not
    # meet them ("explain.html already exists"); a contributor's new, not yet added module still comes along
    repo, dest = tmp_path / "repo", tmp_path / "clone"
    (repo / "zerollm").mkdir(parents=True)
    (repo / "zerollm" / "old.py").write_text("x = 1\n")
    (repo / "README.md").write_text("# readme\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    (repo / "zerollm" / "new.py").write_text("y = 2\n")                 # new work, not added yet
    (repo / "docs").mkdir()
    (repo / "docs" / "new.md").write_text("new page\n")
    for written in ("explain.html", "data/tokenizer.json", "lm-eval-tasks/a.yaml", "out.txt"):  # the tour's
        (repo / written).parent.mkdir(parents=True, exist_ok=True)
        (repo / written).write_text("from a tour\n")
    dest.mkdir()
    fresh_clone(dest, repo)
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == ["README.md", "docs/new.md", "zerollm/new.py", "zerollm/old.py"]


def reader_env(home, clone, shims):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEROLLM_", "HF_", "PYTHON", "XDG_"))
           and k not in PROXIES and k.lower() != "no_proxy"}
    # ZEROLLM_PLOTS=0: no loss.png at the end of each training command (matplotlib, ~0.8 s CPU each; tests/conftest.py)
    env.update(HOME=str(home), PYTHONPATH=str(clone), ZEROLLM_DOCS_TEST="1", ZEROLLM_PLOTS="0", LANG="C.UTF-8", LC_ALL="C.UTF-8",
               MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PATH=os.pathsep.join([str(shims), str(Path(sys.executable).parent),
                                                       "/usr/local/bin", "/usr/bin", "/bin"]))
    return env


def offline(env):
    return {**env, **{name: CLOSED for name in PROXIES}, "HF_HUB_OFFLINE": "1"}


def install_shims(folder):
    """``pip`` and ``apt-get`` that check instead of installing (tests/docs_installed.py)."""
    folder.mkdir()
    for name in CHECKED:
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests" / "docs_installed.py"}" {name} "$@"\n')
        shim.chmod(0o755)
    return folder


# ----------------------------------------------------------------------------
# running a tour

def run_command(command, cwd, env):
    """Run one command as written; returns (returncode, output)."""
    argv = ["bash", "-o", "pipefail", "-c", command.text] if command.lang == "bash" else ["python", "-"]
    proc = subprocess.run(argv, cwd=cwd, env=env, input=command.text if command.lang == "python" else None,
                          capture_output=True, text=True, timeout=TIMEOUT_S, errors="replace")
    return proc.returncode, proc.stdout + proc.stderr


def run_commands(tour, commands, clone, env, internet, counts, times):
    for command in commands:
        if command.untested:
            counts["not tested"] += 1
            continue
        t0 = time.perf_counter()
        # kernels the other tests compiled since the clone was made, and those this command compiles, pass
        # between the clone and the repository at once, not when the tour ends: on a cold numba cache the
        # suite's two workers otherwise compiled the same fast-engine kernels side by side (tens of seconds each)
        give_new_kernels(REPO, clone)
        rc, output = run_command(command, clone, {**env, **internet} if command.online else offline(env))
        give_new_kernels(clone, REPO)
        times.append((time.perf_counter() - t0, command.line))
        assert rc == 0, (f"{tour.page}:{command.line}: exit code {rc}\n$ {command.text}\n"
                         f"{output[-4000:]}")
        # a length the docs ask for fits the model's context: the reader should not meet a warning on every
        # run (a chat reply with the default length may still run on in the docs mode's barely trained models)
        noted = [n for n in CONTEXT_NOTES if n in output] if "--max-new-tokens" in command.text else []
        assert not noted, f"{tour.page}:{command.line}: warns {noted[0]!r}\n$ {command.text}\n{output[-2000:]}"
        checked = command.lang == "bash" and command.text.split()[0] in CHECKED
        counts["checked" if checked else command.lang] += 1
        counts["online"] += command.online


def new_counts():
    return {"bash": 0, "python": 0, "checked": 0, "not tested": 0, "online": 0}


def slowest(times):
    return ", ".join(f"line {line} {t:.0f} s" for t, line in sorted(times, reverse=True)[:3])


def run_tour(tour, root, internet, branches=()):
    """Run every command of ``tour`` in order, in a fresh clone under ``root``; returns the counts.

    ``branches``: (other tour, k) for each tour that begins with this tour's first k commands
    (tests/docs_blocks.py ``branch_of``). After the k-th command the clone and HOME are copied for it,
    and once this tour is done the rest of that tour runs in the copy: {name: counts} of those follow."""
    clone, home = root / "clone", root / "home"
    clone.mkdir()
    home.mkdir()
    fresh_clone(clone)
    shims = install_shims(root / "shims")
    env = reader_env(home, clone, shims)
    counts, times, forks = new_counts(), [], []
    for i in range(len(tour.commands) + 1):
        for other, k in branches:
            if k == i and docs_blocks.own_rest(other, tour, k):
                fork = root / f"branch-{len(forks)}"
                shutil.copytree(clone, fork / "clone", symlinks=True)
                seed_kernel_cache(fork / "clone", clone)
                shutil.copytree(home, fork / "home", symlinks=True)
                forks.append((other, k, fork))
        if i < len(tour.commands):
            run_commands(tour, tour.commands[i:i + 1], clone, env, internet, counts, times)
    return_kernel_cache(clone, REPO)
    counts["slowest"] = slowest(times)
    result = {tour.name: counts}
    for other, k, fork in forks:
        more, more_times = new_counts(), []
        run_commands(other, docs_blocks.own_rest(other, tour, k), fork / "clone", reader_env(fork / "home", fork / "clone", shims),
                     internet, more, more_times)
        return_kernel_cache(fork / "clone", REPO)
        more["slowest"] = slowest(more_times)
        result[f"{other.name} (after the first {k})"] = more
    return result


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.slow
@pytest.mark.parametrize("tour", TOURS, ids=[t.name for t in TOURS])
def test_every_command_of_the_docs_runs(tour, tmp_path, request):
    twin = docs_blocks.twin_of(tour, TOURS)
    if twin is not None:
        # the 中文 half runs, command for command, what the English half runs (only the comments differ,
        # and bash ignores them): that tour ran it, in the same order, in a fresh clone of its own
        assert docs_blocks.what_runs(tour) == docs_blocks.what_runs(twin) and tour.commands
        print(f"\n{tour.name}: the same {len(tour.commands)} commands as {twin.name}, which runs them")
        return
    branch = docs_blocks.branch_of(tour, TOURS)
    if branch is not None:
        # this tour begins with the first k commands of an earlier one, then goes its own way: that tour's
        # test copies its folder after its k-th command and runs the rest of this tour in the copy
        other, k = branch
        assert docs_blocks.what_runs(tour)[:k] == docs_blocks.what_runs(other)[:k]
        rest = docs_blocks.own_rest(tour, other, k)
        print(f"\n{tour.name}: its first {k} commands are those of {other.name}, whose test runs "
              f"the other {len(rest)} in a copy of its folder taken after them"
              + (f" (the last {len(tour.commands) - k - len(rest)} are {other.name}'s own last commands)"
                 if len(rest) < len(tour.commands) - k else ""))
        return
    internet = request.getfixturevalue("internet")
    branches = [(t, b[1]) for t in TOURS if (b := docs_blocks.branch_of(t, TOURS)) and b[0] == tour]
    start, cpu = time.perf_counter(), _children_cpu()
    results = run_tour(tour, tmp_path, internet, branches)
    for name, counts in results.items():
        print(f"\n{name}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print(f"({time.perf_counter() - start:.0f} s wall, {_children_cpu() - cpu:.0f} s CPU)")
    assert results[tour.name]["bash"] + results[tour.name]["python"] + results[tour.name]["checked"] > 0


def test_the_worked_examples_of_docs_blocks_hold():
    """tests/docs_blocks.py decides what runs (twins, branches, comments): its examples are run too."""
    import doctest
    result = doctest.testmod(docs_blocks)
    assert result.failed == 0 and result.attempted >= 8, result


def test_chinese_halves_that_repeat_their_english_half_are_twins_or_branches():
    kinds = {}
    for tour in TOURS:
        if tour.name.endswith("#中文"):
            kinds[tour.name] = ("twin" if docs_blocks.twin_of(tour, TOURS)
                                else "branch" if docs_blocks.branch_of(tour, TOURS) else "own")
    assert kinds["docs/serving.md#中文"] == kinds["docs/lora.md#中文"] == "twin"
    assert kinds["docs/evaluation.md#中文"] == kinds["docs/gguf.md#中文"] == "branch"
    other, k = docs_blocks.branch_of(next(t for t in TOURS if t.name == "docs/evaluation.md#中文"), TOURS)
    assert other.name == "docs/evaluation.md" and k == 8     # base, SFT and lm_eval on both, as the English tour
    # alignment's 中文 half runs what its English half's first commands run (the same folder names), so a
    # run of the docs trains and fine-tunes its demo models once, not twice
    zh = next(t for t in TOURS if t.name == "docs/alignment.md#中文")
    other, k = docs_blocks.branch_of(zh, TOURS)
    assert other.name == "docs/alignment.md" and k == 10
    # ... and then the tools chapter, the English half's last section, command for command: nothing of its own
    assert len(zh.commands) > k and docs_blocks.own_rest(zh, other, k) == ()


# ----------------------------------------------------------------------------
# the docs mode itself (zerollm/io/docsmode.py)

@pytest.mark.parametrize("value, size", [("", None), ("0", None), ("1", "smoke"), ("yes", "smoke"),
                                         ("small", "small"), (" Small ", "small")])
def test_the_docs_mode_has_two_sizes(value, size):
    from zerollm.io import docsmode
    assert docsmode.profile({docsmode.ENV: value}) == size
    steps = {None: 2000, "smoke": 4, "small": 800}[size]
    assert docsmode.limit("training steps", 2000, environ={docsmode.ENV: value}, quiet=True) == steps
    assert docsmode.limit("pre-training steps", 1500, environ={docsmode.ENV: value}, quiet=True) == \
        {None: 1500, "smoke": 4, "small": 150}[size]


@pytest.mark.parametrize("value, group", [("", 16), ("1", 4), ("small", 16)])
def test_the_docs_mode_gives_grpo_groups_of_four(monkeypatch, value, group):
    # docs/alignment.md section 9 runs three GRPOs with --group-size 16: in the smoke run each compares 4 answers
    # a prompt (a quarter of the rollouts); the small run, which still learns, keeps the group asked for
    import copy
    from zerollm.align.rl.grpo import GRPOConfig, GRPOObjective
    from zerollm.align.rl.objective import Prompts
    from zerollm.align.rl.rewards import RewardSource
    from zerollm.data.chat import encode_prompt, prepare_tokenizer
    from zerollm.io import docsmode
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import train_tokenizer
    from zerollm.training.trainer import TrainConfig, Trainer
    monkeypatch.setenv(docsmode.ENV, value)
    tok = prepare_tokenizer(train_tokenizer("char", "abcd"))
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16), seed=0)
    source = RewardSource("a", lambda prompts, answers, fields, seqs: [float(a == "a") for a in answers])
    cfg = GRPOConfig(group_size=16, prompts_per_step=2, max_new_tokens=1, beta=0.0)
    objective = GRPOObjective(model, copy.deepcopy(model), tok, Prompts(({"prompt": "d"},), (encode_prompt(tok, "d"),)),
                              config=cfg, sources=[source], seed=0)
    Trainer(objective, TrainConfig(max_iters=1), threads=1)          # gives the objective its shards
    objective.next_batch()
    assert len(objective.buffer["reward"]) == len(objective.buffer["adv"]) == 2 * group


@pytest.mark.parametrize("value", ["1", "small"])
def test_the_docs_mode_shrinks_a_presets_model_but_not_the_users_flags(monkeypatch, value):
    from zerollm.io import docsmode
    from zerollm.training.presets import build_configs, sources
    monkeypatch.setenv(docsmode.ENV, value)
    model_cfg, train_cfg = build_configs("tang", {}, vocab_size=100)
    assert (model_cfg.n_layer, model_cfg.n_embd, model_cfg.n_head) == (2, 64, 4)
    assert train_cfg.max_iters == 3000                       # the steps stop early in the loop, not here
    model_cfg, _ = build_configs("tang", {"n_layer": 3, "n_embd": 96}, vocab_size=100)
    assert (model_cfg.n_layer, model_cfg.n_embd) == (3, 96)
    where = sources("tang", {"n_layer": 3})             # what `train --dry-run` prints beside each value
    assert (where["n_layer"], where["n_embd"], where["n_head"]) == ("--n-layer", docsmode.ENV, "preset tang")
    monkeypatch.delenv(docsmode.ENV)
    assert build_configs("tang", {}, vocab_size=100)[0].n_embd == 192


@pytest.mark.parametrize("value, rows", [("", 2500), ("1", 2000), ("small", 2500)])
def test_the_docs_mode_makes_fewer_task_examples_and_says_so(tmp_path, monkeypatch, capsys, value, rows):
    # docs/alignment.md makes 100,000 sums and 15,000 acrostics, and each stage after it encodes all of them
    # for its 8 steps; the small run's 800 SFT steps learn from every one the recipe asks for
    from zerollm.cli import main
    from zerollm.io import docsmode
    monkeypatch.setenv(docsmode.ENV, value)
    monkeypatch.setattr(docsmode, "_said", set())
    assert main(["tasks", "make", "addition", "--out", str(tmp_path / "sums.txt"), "--n", "2500", "--format", "text"]) == 0
    lines = (tmp_path / "sums.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == rows and len(set(lines)) > 1
    out, err = capsys.readouterr()
    assert f"wrote {rows} addition examples" in out
    assert ("examples made limited to 2000 (asked for 2500)" in err) == (rows == 2000)


def test_the_docs_mode_teaches_a_bpe_the_texts_start_and_encodes_all_of_it(tmp_path, monkeypatch):
    from zerollm.data import tokens
    from zerollm.io import docsmode
    from zerollm.tokenizers import load_tokenizer, train_tokenizer
    cap = docsmode.LIMITS["BPE training characters"]
    text = ("ab " * cap)[:cap] + "xy " * cap           # "xy" is the commonest pair, but only after the cap
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    monkeypatch.setenv(docsmode.ENV, "1")
    meta = tokens.prepare(tmp_path / "t.txt", tmp_path / "prep", tokenizer="bpe", vocab_size=258)
    tok = load_tokenizer(tmp_path / "prep" / "tokenizer.json")
    head, whole = train_tokenizer("bpe", text[:cap], 258), train_tokenizer("bpe", text, 258)
    assert tok.merges == head.merges != whole.merges
    assert meta["source"]["characters"] == len(text)
    assert meta["train_tokens"] + meta["val_tokens"] == len(tok.encode(text, allowed_special="all"))


# ----------------------------------------------------------------------------
# a snippet imports only what its page installs

def _imports(body):
    """Top-level names a python block imports (not the standard library's, not zerollm)."""
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return set()
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            names |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            names.add(n.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"zerollm"}


def _installed_by(requirements, seen=None):
    """Every distribution that ``pip install REQUIREMENTS`` brings, read from the installed metadata:
    the named ones with their extras, and what they require, all the way down."""
    from importlib import metadata

    from packaging.requirements import Requirement
    seen = set() if seen is None else seen
    for text in requirements:
        req = Requirement(text)
        try:
            name = metadata.distribution(req.name).metadata["Name"].lower().replace("_", "-")
        except metadata.PackageNotFoundError:
            continue                    # not installed here: it provides nothing the check can see
        key = (name, tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        wanted = []
        for dep in metadata.requires(name) or []:
            dep_req = Requirement(dep)
            if dep_req.marker is None or any(dep_req.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                try:
                    metadata.distribution(dep_req.name)
                except metadata.PackageNotFoundError:
                    continue            # a dependency for another platform or Python
                wanted.append(f"{dep_req.name}{'[' + ','.join(sorted(dep_req.extras)) + ']' if dep_req.extras else ''}")
        _installed_by(wanted, seen)
    return {name for name, _ in seen}


def page_installs(text):
    """What a page's `pip install` lines (in blocks or in the prose) name; `-e .` is zerollm."""
    names = ["zerollm"]
    for line in re.findall(r"pip install ([^`\n]+)", text):
        for word in re.split(r"#|&&|;|\|", line)[0].split():
            word = word.strip("\"'()")
            if word.startswith("-e"):
                continue
            if word.startswith("."):
                word = "zerollm" + word[1:]            # -e ".[serve]"
            if re.fullmatch(r"[A-Za-z0-9_.-]+(\[[a-z,]+\])?", word):
                names.append(word)
    return names


@pytest.mark.parametrize("page", docs_blocks.pages(REPO))
def test_a_pages_snippets_import_only_what_it_installs(page):
    # docs/serving.md's openai snippet imported httpx, which the openai release of the day no longer brings:
    # a reader who ran the page's pip line got "No module named 'httpx'" on the snippet's first line
    from importlib import metadata
    text = (REPO / page).read_text(encoding="utf-8")
    wanted = set().union(*[_imports(body) for lang, body, _ in docs_blocks.blocks(text) if lang == "python"])
    if not wanted:
        return
    installed, provides = _installed_by(page_installs(text)), metadata.packages_distributions()
    missing = {name for name in wanted
               if not {d.lower().replace("_", "-") for d in provides.get(name, [])} & installed}
    assert not missing, f"{page}: snippets import {sorted(missing)}, which no pip install line of the page brings"


def test_the_snippet_check_sees_an_import_nothing_installs():
    assert _imports("import httpx, openai\nfrom os import path\nimport zerollm.io\n") == {"httpx", "openai"}
    assert "fastapi" in _installed_by(["zerollm[serve]"]) and "fastapi" not in _installed_by(["zerollm"])
    assert page_installs('run `pip install "zerollm[serve]" openai`, or pip install -e ".[viz]"') == \
        ["zerollm", "zerollm[serve]", "openai", "zerollm[viz]"]
