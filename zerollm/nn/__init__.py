"""The layers of zerollm, each a forward/backward pair side by side.

Convention (as in llm.c):  ``out, cache = op_forward(...)``  then  ``grads = op_backward(dout, cache)``.
The cache is a small NamedTuple with exactly what the backward needs. Every pair is checked
against finite differences (``zerollm gradcheck``) and against PyTorch autograd (the tests).
"""
