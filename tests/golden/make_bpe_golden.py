"""Record the merges that the BPE trainer of commit ab437b9 (before the array trainer) learned, into
bpe_merges_ab437b9.json, which tests/test_bpe_golden.py compares today's trainers against.

    git worktree add /tmp/wt-old ab437b9
    PYTHONPATH=/tmp/wt-old python tests/golden/make_bpe_golden.py [OUT.json]

It must import the OLD zerollm (it checks): its learn_merges kept one Python list per distinct chunk.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bpe_cases import CASES, chunks_of  # noqa: E402
from zerollm.tokenizers import bpe_train  # noqa: E402


def main():
    if not hasattr(bpe_train, "apply_merge"):
        raise SystemExit("put commit ab437b9 on PYTHONPATH: this zerollm's bpe_train has no apply_merge")
    out = {}
    for name, (corpus, pattern, chars, n_new) in CASES.items():
        merges, vocab = bpe_train.learn_merges.reference(chunks_of(corpus, pattern, chars), n_new)
        out[name] = {"merges": merges, "vocab": [vocab[i].hex() for i in range(len(vocab))]}
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "bpe_merges_ab437b9.json"
    target.write_text(json.dumps(out, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
