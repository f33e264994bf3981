"""teach: step-by-step walkthroughs in 中文 and English (grammar: constrained decoding), the explainer
page (explain/), gradcheck, the exercises that grade themselves (exercises/: ``zerollm exercise``), and
the PyTorch twin the parity tests measure against (torch_ref). May import every room up to align.

Each module here is one ``zerollm`` subcommand (``add_arguments`` + ``run``), or one part of one
(quantize_k: the Q4_K super-block of ``zerollm quantize --explain``). The maths lives
in the library modules; these modules only choose examples, print, and explain.
"""
