"""The fast engine: numba kernels for the ops that the per-op profile shows outside the GEMMs.

Selected with ``--engine fast`` or ZEROLLM_ENGINE=fast (see zerollm.engine); installed with
``pip install "zerollm[fast]"``. Every kernel has the name, arguments and results of the NumPy
reference function it stands in for, and answers NotImplemented for what it was not written for
(float64, padding masks, non-contiguous arrays), so that the reference runs then.

    kernel (this package)               reference                                  exact?
    attention.masked_softmax            zerollm.nn.attention.masked_softmax        <= 2 ulp (exp)
    attention.masked_softmax_backward   zerollm.nn.attention.masked_softmax_backward   sums reordered
    attention.rope_forward              zerollm.nn.position.rope_forward           bit-identical
    sdpa.softmax_attention (+ backward) zerollm.nn.attention.softmax_attention     products reordered
    norm.layernorm_forward / backward   zerollm.nn.norm                            sums reordered
    norm.rmsnorm_forward / backward     zerollm.nn.norm                            sums reordered
    activation.gelu_tanh_forward        zerollm.nn.activation                      <= 2 ulp (exp)
    activation.gelu_tanh_backward       zerollm.nn.activation                      bit-identical given s (its own
                                                                               forward keeps x only)
    activation.gelu_erf_forward         zerollm.nn.activation                      <= 2 ulp (exp)
    activation.gelu_erf_backward        zerollm.nn.activation                      <= 2 ulp (exp)
    activation.silu_forward / backward  zerollm.nn.activation                      exp / bit-identical
    flash.tile_softmax_step             zerollm.nn.flash.tile_softmax_step          <= 2 ulp (exp)
    flash.tile_probs                    zerollm.nn.flash.tile_probs                 <= 2 ulp (exp)
    flash.tile_softmax_backward         zerollm.nn.flash.tile_softmax_backward      bit-identical
    flash.flash_forward_tiles           zerollm.nn.flash.flash_forward_tiles        products reordered
    flash.flash_sdpa_backward           zerollm.nn.flash.flash_sdpa_backward        (whole tile loops, own tiles)
    optim.adamw_update                  zerollm.training.optim.adamw_update                 bit-identical
    optim.sum_of_squares                zerollm.training.optim.sum_of_squares               float64 sum
    optim.add_scaled                    zerollm.training.objective.add_scaled               bit-identical
    linear.linear_forward               zerollm.nn.linear.linear_forward           b added first (BLAS beta = 1)
    quant.quantized_matmul              zerollm.nn.linear.quantized_matmul         x in 8-bit blocks (<= 2%; float32,
                                                                               sums reordered, in train mode)
      (Q4_K / Q5_K / Q6_K: kquant.kquant_matmul, the same branch; many rows of x in inference, a prefill:
       qgemm's integer GEMM on the blocks as stored, x86 with AVX2)
    qlora.quantized_matmul_t            zerollm.nn.linear.quantized_matmul_t       sums reordered (same slabs)
    rows.head_product                   zerollm.nn.linear.head_product             sums reordered (2-16 rows of x:
                                                                               W read once, not packed)
    rows.serving_threads                zerollm.engine.threads.serving_threads     (the server's scheduler thread:
                                                                               BLAS on it alone, large products
                                                                               split by ours)
    bpe.encode_chunks                   zerollm.tokenizers.bpe.encode_chunks       the same ids
    sampler.draw_shortcut               zerollm.generation.sample.draw_shortcut    <= 2 ulp (exp); sample.draw
                                                                               gives the same ids (its margin)
    decode.block_forward                zerollm.nn.block.block_forward             sums reordered, exp (decode rows
                                                                               through a KV cache only)

The attention kernels (sdpa, flash) multiply their small blocks with microkernel.sgemm, our own
AVX-512 register-blocked product, on CPUs with AVX-512 (OpenBLAS's sgemm elsewhere, or with
ZEROLLM_OWN_PRODUCTS=0).

Importing this package imports numba and compiles nothing: each kernel is compiled (or loaded from
numba's cache) the first time it runs.
"""

from zerollm.engine.fast import (activation, attention, bpe, decode, flash, linear, norm, optim, qlora, quant, rows,
                                  sampler, sdpa)

KERNELS = {**attention.KERNELS, **flash.KERNELS, **norm.KERNELS, **activation.KERNELS, **optim.KERNELS,
           **quant.KERNELS, **qlora.KERNELS, **bpe.KERNELS, **sdpa.KERNELS, **linear.KERNELS,
           **decode.KERNELS, **rows.KERNELS, **sampler.KERNELS}
