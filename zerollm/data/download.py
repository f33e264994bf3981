"""``zerollm download shakespeare``: fetch a public corpus into the user's cache, verified.

The file goes to ``$ZEROLLM_CACHE``, else ``$XDG_CACHE_HOME/zerollm``, else ``~/.cache/zerollm``
(or ``--dir``). ``$ZEROLLM_MIRROR`` (a base URL) fetches the same file name from a mirror instead,
checked against the same sha256. The file is streamed into a temp file and renamed only after its
sha256 checked out, so an interrupted or corrupt download never leaves a file that looks valid.
Only the standard library (urllib) is used. The path is printed on stdout, so this works:

    zerollm prepare --data "$(zerollm download shakespeare)" --tokenizer char
"""

import argparse
import hashlib
import http.client
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write
from zerollm.io.fileio import sha256_file as sha256_of

# name -> where it lives and what its bytes must hash to. Only datasets with a stable public
# URL are listed: the course's Tang poems (zerollm/data/corpora/tang_poems.txt, shipped with the
# package) are a selection made from the chinese-poetry repository, with no single file to fetch.
DATASETS = {
    "shakespeare": {
        "url": "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        "file": "tinyshakespeare.txt",
        "sha256": "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
        "about": "tiny Shakespeare, 1.1 MB of plays (Karpathy's char-rnn; public domain text)",
    },
}
CHUNK = 1 << 16


def cache_dir(environ=None):
    """$ZEROLLM_CACHE, else $XDG_CACHE_HOME/zerollm, else ~/.cache/zerollm.

    >>> str(cache_dir({"ZEROLLM_CACHE": "/tmp/c"}))
    '/tmp/c'
    """
    env = os.environ if environ is None else environ
    if env.get("ZEROLLM_CACHE"):
        return Path(env["ZEROLLM_CACHE"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "zerollm"
    return Path.home() / ".cache" / "zerollm"


def default_url(info, environ=None):
    """The dataset's own URL, or the same file name under $ZEROLLM_MIRROR.

    >>> default_url({"url": "https://a.org/x/input.txt", "file": "t.txt"}, {"ZEROLLM_MIRROR": "http://m/d/"})
    'http://m/d/t.txt'
    """
    mirror = (os.environ if environ is None else environ).get("ZEROLLM_MIRROR", "")
    return f"{mirror.rstrip('/')}/{info['file']}" if mirror else info["url"]


_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def sha256_hex(text):
    """--sha256: 64 hex digits (as sha256sum prints them), lower-cased; anything else is refused before a
    byte is downloaded (it could never match); ArgumentTypeError says why.

    >>> sha256_hex("AB" * 32) == "ab" * 32
    True
    """
    if not isinstance(text, str) or not _SHA256.fullmatch(text.strip()):
        shown = text if isinstance(text, str) and len(text) <= 80 else f"{str(text)[:77]}..."
        raise argparse.ArgumentTypeError(f"must be 64 hex digits (as sha256sum prints them), got {shown!r}"
                                         + (f" ({len(text.strip())} characters)" if isinstance(text, str) else ""))
    return text.strip().lower()


# ----------------------------------------------------------------------------
# fetching

def fetch(url, dest, expected_sha256=None, timeout=60, origin="--url"):
    """Stream ``url`` into ``dest`` atomically; check the sha256 if one is expected. ``origin`` is where the
    URL came from, named in the errors: "--url", "$ZEROLLM_MIRROR", or None (the dataset's own URL)."""
    given = f"{origin} {url!r}" if origin == "--url" else f"{url!r} (from {origin})" if origin else repr(url)
    fix = "set $ZEROLLM_MIRROR to a base URL such as https://example.org/data" if origin == "$ZEROLLM_MIRROR" \
        else "e.g. https://example.org/input.txt"
    if not url.startswith(("http://", "https://")):
        raise ZeroLLMError(f"{given} must start with http:// or https://; {fix}")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port                               # a bad port or "[::1" raises here, not deep in urlopen
    except ValueError as err:
        raise ZeroLLMError(f"{given} is not a valid URL ({err}); {fix}") from None
    if not parts.hostname:
        raise ZeroLLMError(f"{given} names no host; {fix}")
    h = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, atomic_write(dest) as f:
            for block in iter(lambda: response.read(CHUNK), b""):
                h.update(block)
                f.write(block)
            if expected_sha256 and h.hexdigest() != expected_sha256:
                raise ZeroLLMError(f"checksum mismatch for {url}: got sha256 {h.hexdigest()}, expected "
                                   f"{expected_sha256}; the download is damaged or the URL serves "
                                   "another file (nothing was saved)")
    except urllib.error.HTTPError as err:
        check = f"check the URL ({origin})" if origin else "the file may have moved; give another --url"
        raise ZeroLLMError(f"download failed: HTTP {err.code} {err.reason} for {url}; {check}") from None
    except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as err:
        reason = getattr(err, "reason", err)
        mirror = " and $ZEROLLM_MIRROR (it names the server)" if origin == "$ZEROLLM_MIRROR" else ""
        raise ZeroLLMError(f"could not download {url} ({reason}); check your internet connection{mirror}, "
                           "or fetch the file another way and use 'zerollm prepare --data FILE'; tiny Shakespeare also "
                           "ships with zerollm: 'zerollm train --data shakespeare' needs no download") from None
    return h.hexdigest()


def download(name, folder=None, url=None, sha256=None, force=False):
    """Make sure dataset ``name`` is in ``folder``; return (path, fetched: bool).

    The known sha256 is checked when the default URL is used; for another ``url`` pass
    ``sha256`` to check it. A valid file already present is not fetched again (unless ``force``).
    A file already there that fails the check is the user's, as far as we know: it is replaced
    only with ``force``.
    """
    if name not in DATASETS:
        raise ZeroLLMError(f"unknown dataset {name!r}; available: {', '.join(DATASETS)}")
    info = DATASETS[name]
    if sha256 is not None:
        try:
            sha256 = sha256_hex(sha256)
        except argparse.ArgumentTypeError as err:
            raise ZeroLLMError(f"--sha256 {err}") from None
    expected = sha256 if sha256 else (info["sha256"] if url in (None, info["url"]) else None)
    origin = "--url" if url else "$ZEROLLM_MIRROR" if os.environ.get("ZEROLLM_MIRROR") else None
    url = url or default_url(info)
    folder = Path(folder) if folder else cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / info["file"]
    if dest.is_file() and not force:
        found = None if expected is None else sha256_of(dest)
        if found != expected:
            raise ZeroLLMError(f"{dest} already exists and is not the expected download (sha256 {found}, "
                               f"expected {expected}); replace it with --force, or choose another --dir")
        return dest, False
    fetch(url, dest, expected, origin=origin)
    return dest, True


# ----------------------------------------------------------------------------
# the `zerollm download` command

def add_arguments(p):
    p.description = ("Download a public corpus into the cache and print its path. Available: "
                     + "; ".join(f"{k}: {v['about']}" for k, v in DATASETS.items())
                     + ". (The Tang poems corpus has no single public file, so it is not offered.)")
    p.add_argument("name", choices=sorted(DATASETS), help="the dataset")
    p.add_argument("--dir", metavar="DIR",
                   help="folder to save into (default $ZEROLLM_CACHE, else $XDG_CACHE_HOME/zerollm, "
                        "else ~/.cache/zerollm)")
    p.add_argument("--url", help="download from this http(s) URL instead (e.g. a mirror); "
                                 "$ZEROLLM_MIRROR=BASE fetches the same file name from BASE, still checked")
    p.add_argument("--sha256", metavar="HEX",
                   help="expected sha256 of the file, 64 hex digits (checked automatically for the default URL)")
    p.add_argument("--force", action="store_true", help="download again even if a valid file is present, and replace a file of the same "
                        "name in --dir that is not the expected download")


def run(args):
    path, fetched = download(args.name, args.dir, args.url, args.sha256, args.force)
    status = "downloaded" if fetched else "already present"
    print(f"zerollm download: {status}: {path}", file=sys.stderr)
    print(path)
    return 0
