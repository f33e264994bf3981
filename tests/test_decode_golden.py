"""The one decode loop gives every client the very ids and texts the two loops of commit e7f1a09 gave.

tests/golden/decode_e7f1a09.json was written by tests/golden/make_decode_golden.py running the cases of
tests/golden/decode_cases.py through e7f1a09's API (OldApi): generate() and sample_completions() with their
own loops, and the server's Scheduler. Here the same cases run through today's API (NewApi), where
`zerollm sample`, the chat REPL, the training samples, rollouts, task evaluation, lm-eval and the server
all decode in zerollm.generation.batching.Scheduler. Greedy and seeded outputs must not move by one bit.
"""

import json
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).with_name("golden")
sys.path.insert(0, str(GOLDEN))

from decode_cases import CASES, NewApi  # noqa: E402

RECORDED = json.loads((GOLDEN / "decode_e7f1a09.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("client", sorted(CASES))
def test_outputs_equal_those_of_e7f1a09(client, tmp_path):
    ours = json.loads(json.dumps(CASES[client](NewApi, tmp_path), ensure_ascii=False))
    assert sorted(ours) == sorted(RECORDED[client])
    for name, old in RECORDED[client].items():
        assert ours[name] == old, name
