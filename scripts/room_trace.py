"""Follow a command through the rooms of zerollm (docs/architecture.md) and list every call that climbs
back up: a function of a higher room called from a function of a lower one.

    python scripts/room_trace.py sft --init runs/sft-base --data train.jsonl --out /tmp/t --max-iters 1
    python scripts/room_trace.py --chat RUN --prompt "1+2="   # one chat request to the server's app

The import rule (tests/test_architecture.py) says which modules a room may import; this says where the
calls go while a command runs. Every call and return of a zerollm function, on every thread, is seen
with sys.setprofile. A lower room cannot import a higher one (the import rule), so whatever of room B
a function of a lower room A calls was handed down to it as a value. It is one of four kinds:
    contract   B's method overrides a method of a class that A or a room below declares (the Objective
               contract: the one training loop calls the objective a stage handed it)
    object     another method of an object handed down (nn reading the GPTConfig the model gave it)
    callback   a closure or lambda handed down to run (the AdamW update that engine.threads runs per shard)
    up         a module-level function of B: the path climbs back into a room it had left, where a
               lower room could have been given the result instead (a stage calling its command's
               objective builder; a checkpoint reader calling interop for a LoRA run's base)
A run prints the rooms it passed through and the calls of each kind (with their counts); the exit status
is 1 when there is an 'up' call. tests/test_architecture.py runs it on `zerollm sft --init RUN` and on a
chat request.
"""

import argparse
import collections
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import architecture  # noqa: E402  (scripts/architecture.py: the documented order of the rooms)

ORDER = architecture.documented_order()
RANK = {room: i for i, room in enumerate(ORDER)}


def room_of(module):
    """'zerollm.align.stage' -> 'align'; None outside the rooms (the package root, other packages)."""
    parts = (module or "").split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "zerollm" and parts[1] in RANK else None


def _where(frame):
    return f"{frame.f_globals.get('__name__')}.{frame.f_code.co_qualname}"


def _by_contract(frame, caller_rank):
    """Is this call a method overriding one that a class of the caller's room (or below) declares?"""
    args = frame.f_code.co_varnames[:frame.f_code.co_argcount]
    owner = frame.f_locals.get(args[0]) if args and args[0] in ("self", "cls") else None
    if owner is None:
        return False
    cls = owner if isinstance(owner, type) else type(owner)
    name = frame.f_code.co_name
    for base in cls.__mro__[1:]:
        room = room_of(base.__module__)
        if name in vars(base) and (room is None or RANK[room] <= caller_rank):
            return True
    return False


class Trace:
    """Calls seen: rooms entered, contract calls and up calls (caller -> callee, count)."""

    KINDS = ("contract", "object", "callback", "up")

    def __init__(self):
        self.rooms = collections.Counter()
        self.calls = {kind: collections.Counter() for kind in self.KINDS}
        self.lock = threading.Lock()

    @property
    def up(self):
        return self.calls["up"]

    def __call__(self, frame, event, arg):
        if event != "call":
            return
        room = room_of(frame.f_globals.get("__name__"))
        if room is None:
            return
        caller = frame.f_back
        while caller is not None and room_of(caller.f_globals.get("__name__")) is None:
            caller = caller.f_back                       # through numpy, threading, fastapi ... to our caller
        with self.lock:
            self.rooms[room] += 1
        if caller is None:
            return
        below = room_of(caller.f_globals.get("__name__"))
        if RANK[room] <= RANK[below]:
            return
        qualname = frame.f_code.co_qualname
        if _by_contract(frame, RANK[below]):
            kind = "contract"
        elif "<locals>" in qualname or "<lambda>" in qualname:
            kind = "callback"
        elif "." in qualname:
            kind = "object"
        else:
            kind = "up"
        with self.lock:
            self.calls[kind][(f"{below}: {_where(caller)}", f"{room}: {_where(frame)}")] += 1

    def __enter__(self):
        sys.setprofile(self)
        threading.setprofile(self)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)
        threading.setprofile(None)

    def report(self, out=sys.stdout):
        shown = ", ".join(f"{r} {self.rooms[r]:,}" for r in reversed(ORDER) if self.rooms[r])
        print(f"calls by room: {shown}", file=out)
        for kind in self.KINDS:
            calls = self.calls[kind]
            print(f"calls into a higher room, {kind}: {sum(calls.values()):,} ({len(calls)} distinct)", file=out)
            for (a, b), n in sorted(calls.items()):
                print(f"  {kind.upper():<8} {n:>6}x  {a}  ->  {b}", file=out)


def trace_command(argv):
    """Run `zerollm ARGV...` in this process under a Trace -> (exit code, Trace)."""
    from zerollm.cli.entry import main
    with Trace() as trace:
        code = main([str(a) for a in argv])
    return code, trace


def trace_chat(run, prompt="ROMEO:", max_tokens=8):
    """One chat request to the server's app (zerollm.serve.api) for the model of ``run``, in this process
    (FastAPI's test client: no socket) -> (the answer, Trace). Inside the trace, as `zerollm serve` does:
    the model opened from --ckpt, the backend and app built, the scheduler's thread started and stopped."""
    import argparse as ap

    from fastapi.testclient import TestClient

    from zerollm.cli.source import add_source_arguments, load_source
    from zerollm.serve.api import build_app
    from zerollm.serve.backend import Backend
    parser = ap.ArgumentParser()
    add_source_arguments(parser)
    args = parser.parse_args(["--ckpt", str(run)])
    args.force = False
    with Trace() as trace:
        model, tok = load_source(args, "zerollm serve")
        backend = Backend(model, tok, name="traced")
        backend.start()
        try:
            with TestClient(build_app(backend)) as client:
                r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": prompt}],
                                                              "max_tokens": max_tokens, "temperature": 0})
        finally:
            backend.close()
    r.raise_for_status()
    return r.json()["choices"][0]["message"]["content"], trace


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chat", metavar="RUN", help="trace one chat request to a server of this run's model")
    p.add_argument("--prompt", default="ROMEO:", help="the chat request's user message (default ROMEO:)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="a zerollm command line to trace")
    args = p.parse_args(argv)
    if args.chat:
        text, trace = trace_chat(args.chat, args.prompt)
        print(f"answer: {text!r}")
    else:
        code, trace = trace_command(args.command)
        print(f"exit code {code}")
    trace.report()
    return 1 if trace.up else 0


if __name__ == "__main__":
    sys.exit(main())
