"""nn: the layers of zerollm, each a forward/backward pair side by side, from the seed's self-attention
(nn.self_attention) to the pre-norm block, with the losses beside them (cross-entropy, log-probabilities, the
distillation divergences of nn.distill). May import io and engine only.

Convention (as in llm.c):  ``out, cache = op_forward(...)``  then  ``grads = op_backward(dout, cache)``.
The cache is a small NamedTuple with exactly what the backward needs; so are a layer's weights
(``AttentionWeights``, ``MLPWeights``), its settings (``AttentionConfig``, ``MoEConfig``, ``Dropout``) and what
one forward pass of the model tells every block (``ForwardPass``: positions, mask, KV cache). Every pair is checked
against finite differences (``zerollm gradcheck``) and against PyTorch autograd (the tests).
"""
