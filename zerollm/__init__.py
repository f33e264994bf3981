"""zerollm: a large language model built from zero in NumPy.

Every layer has a forward pass and a hand-written backward pass, checked against
PyTorch. Start with ``zerollm attention`` on the command line, or::

    from zerollm.attention import self_attention
"""

__version__ = "0.1.0"
