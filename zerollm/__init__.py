"""zerollm: a large language model built from zero in NumPy.

Every layer has a forward pass and a hand-written backward pass, checked against
PyTorch. Start with ``zerollm attention`` on the command line, or::

    from zerollm.nn.self_attention import self_attention

The package is a stack of rooms, each importing only the rooms below it (docs/architecture.md)::

    cli > serve > evaluate > teach > interop > align > training > generation > data > model > nn
        > tokenizers > engine > io
"""

import os

__version__ = "0.1.0"

# OpenBLAS's threads keep spinning after each call (2^28 rounds by default) before they sleep. With 2 threads or
# more they then take the cores from the fast engine's own kernel threads, which run between BLAS calls: a
# quantized prefill at 2 threads went from 375-407 to 575-613 tokens/s with a shorter spin (docs/gguf.md#decode-speed).
# 2^18 rounds still bridge the gaps between back-to-back BLAS calls (training speed unchanged). OpenBLAS reads
# this once, when NumPy first loads it, so it must be set before NumPy is imported; a value the user set is kept.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "18")
