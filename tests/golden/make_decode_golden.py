"""Record what the decode loop's clients gave at commit e7f1a09 (before the one Scheduler) into
decode_e7f1a09.json, which tests/test_decode_golden.py compares today's code against.

    git worktree add /tmp/wt-old e7f1a09
    PYTHONPATH=/tmp/wt-old:/tmp/wt-old/tests python tests/golden/make_decode_golden.py [OUT.json]

It must import the OLD zerollm (it checks), and runs the cases of decode_cases.py through OldApi.
"""

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import zerollm.generation.sample as sample  # noqa: E402
from decode_cases import CASES, OldApi       # noqa: E402


def main():
    if not hasattr(sample, "sample_completions"):
        raise SystemExit("put commit e7f1a09 on PYTHONPATH: this zerollm has no generation.sample.sample_completions")
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, case in CASES.items():
            out[name] = case(OldApi, folder)
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "decode_e7f1a09.json"
    target.write_text(json.dumps(out, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
