"""中文 for `zerollm serve`'s speed: its event loop and its engine (issue #60)."""

ZH = {
    '\'numpy\' (the readable reference) or \'fast\' (fused numba kernels, pip install "zerollm[fast]"); default: '
    '$ZEROLLM_ENGINE, else fast where numba is installed (it serves more tokens/s), else numpy':
        '\'numpy\'（易读的参考实现）或 \'fast\'（融合的 numba 内核，pip install "zerollm[fast]"）；默认：'
        '$ZEROLLM_ENGINE，没有时装了 numba 就用 fast（服务时每秒的 token 更多），否则用 numpy',
}
