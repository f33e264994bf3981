"""Local stand-ins for the internet, for the documentation's [online] commands (tests/test_docs_run.py).

    with serve(folder) as base:            # plain files: http://127.0.0.1:PORT/NAME
    with serve(folder, hub=True) as base:  # a Hugging Face Hub of the model folders under folder/ORG/NAME

The hub answers what ``hf download`` and ``huggingface_hub.snapshot_download`` ask for (found by
running them against it): the repository's revision (``/api/models/ORG/NAME/revision/REV``), its file
tree (``/api/models/ORG/NAME/tree/REV``) and each file (``/ORG/NAME/resolve/REV/FILE``, with the
commit and ETag headers the client checks). Clients reach it through ``HF_ENDPOINT``, as users
reach a mirror.
"""

import contextlib
import hashlib
import http.server
import json
import threading
import urllib.parse
from functools import partial
from pathlib import Path

COMMIT = "0" * 39 + "1"                 # the one revision every repository has


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Hub(_Quiet):
    """The few Hub routes the clients use, over the model folders of ``self.directory``."""

    def do_HEAD(self):
        self._answer(body=False)

    def do_GET(self):
        self._answer(body=True)

    def _answer(self, body):
        path = urllib.parse.urlsplit(self.path).path.strip("/").split("/")
        if path[:2] == ["api", "models"] and len(path) >= 6 and path[4] in ("revision", "tree"):
            repo = "/".join(path[2:4])
            listing = self._files(repo)
            if listing is None:
                return self._send(404, b'{"error": "Repository not found"}', "application/json", body)
            if path[4] == "revision":
                info = {"id": repo, "modelId": repo, "sha": COMMIT, "private": False,
                        "siblings": [{"rfilename": name} for name in listing]}
            else:
                info = [{"type": "file", "path": name, "size": size, "oid": oid} for name, (size, oid) in
                        listing.items()]
            return self._send(200, json.dumps(info).encode(), "application/json", body)
        if len(path) >= 5 and path[2] == "resolve":
            file = Path(self.directory, path[0], path[1], *path[4:])
            if file.is_file():
                data = file.read_bytes()
                return self._send(200, data, "application/octet-stream", body,
                                  {"X-Repo-Commit": COMMIT, "ETag": f'"{_oid(data)}"'})
        return self._send(404, b"not found", "text/plain", body)

    def _files(self, repo):
        folder = Path(self.directory, repo)
        if not folder.is_dir():
            return None
        return {p.relative_to(folder).as_posix(): (p.stat().st_size, _oid(p.read_bytes()))
                for p in sorted(folder.rglob("*")) if p.is_file()}

    def _send(self, code, data, kind, body, headers=None):
        self.send_response(code)
        for name, value in {"Content-Type": kind, "Content-Length": str(len(data)), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(data)


def _oid(data):
    return hashlib.sha1(data).hexdigest()


@contextlib.contextmanager
def serve(folder, hub=False):
    """Serve ``folder`` on 127.0.0.1 (as plain files, or as a Hub); yields the base URL."""
    handler = partial(_Hub if hub else _Quiet, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
