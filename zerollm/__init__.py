"""zerollm: a large language model built from zero in NumPy.

Every layer has a forward pass and a hand-written backward pass, checked against
PyTorch. Start with ``zerollm attention`` on the command line, or::

    from zerollm.nn.self_attention import self_attention

The package is a stack of rooms, each importing only the rooms below it (docs/architecture.md)::

    cli > serve > evaluate > teach > interop > align > training > generation > data > model > nn
        > tokenizers > engine > io
"""

__version__ = "0.1.0"
