"""中文 of the engine room's error messages (see zerollm/io/zh/__init__.py)."""

ZH = {
    "engine must be one of {0}; got {1}":
        "engine 必须是 {0} 之一；收到的是 {1}",
    "{0}; or use --engine numpy":
        "{0}；或者改用 --engine numpy",
    "the fast engine needs numba ({0}); install it with pip install \"zerollm[fast]\", or use --engine numpy":
        "fast 引擎需要 numba（{0}）；用 pip install \"zerollm[fast]\" 安装它，或者改用 --engine numpy",
    "${0}={1} cannot be read by numba ({2}); fix it or unset it, or use --engine numpy":
        "${0}={1} 无法被 numba 读取（{2}）；改正它或取消这个变量，或者改用 --engine numpy",
    "$ZEROLLM_ENGINE must be one of {0}; got {1} (set it to one of them, or unset it for numpy)":
        "$ZEROLLM_ENGINE 必须是 {0} 之一；收到的是 {1}（设为其中之一，或者取消这个变量以使用 numpy）",
    "unknown 16-bit format {0}; choose one of {1}":
        "未知的 16 位格式 {0}；请从 {1} 中选一个",
    "bf16 needs the ml_dtypes package: pip install \"zerollm[amp]\"":
        "bf16 需要 ml_dtypes 包：pip install \"zerollm[amp]\"",
    "--amp must be one of {0}, {1}; got {2}":
        "--amp 必须是 {0}、{1} 之一；收到的是 {2}",
    "GradScaler needs init_scale > 0, growth_factor > 1 and 0 < backoff_factor < 1":
        "GradScaler 要求 init_scale > 0、growth_factor > 1 且 0 < backoff_factor < 1",
    "GradScaler growth_interval must be an int >= 1, got {0}":
        "GradScaler 的 growth_interval 必须是 >= 1 的整数，收到的是 {0}",
    "the checkpoint's loss-scaler state is incomplete ({0}); resume with the zerollm version that wrote it":
        "检查点里损失缩放器（loss scaler）的状态不完整（{0}）；请用写出它的那个 zerollm 版本续训",
    "$NUMBA_CPU_FEATURES holds {0}, which is not +NAME or -NAME of a feature LLVM knows (such as +avx2, -avx512f): fix it or unset it, or use --engine numpy":
        "$NUMBA_CPU_FEATURES 里有 {0}，它不是 LLVM 认识的某个特性的 +NAME 或 -NAME 形式（例如 +avx2、-avx512f）：改正它或取消这个变量，或者改用 --engine numpy",
    "$NUMBA_CPU_NAME={0} is not a processor LLVM knows (such as host, generic, {1}): fix it or unset it, or use --engine numpy":
        "$NUMBA_CPU_NAME={0} 不是 LLVM 认识的处理器（例如 host、generic、{1}）：改正它或取消这个变量，或者改用 --engine numpy",
    "--threads must be >= 1, got {0}":
        "--threads 必须 >= 1，收到的是 {0}",
    # issue 57 item 7: what _numba_environment_problem (engine/__init__.py) says, inside "{0}; or use --engine numpy"
    "$NUMBA_DISABLE_JIT={0} turns numba's compiler off, and the fast engine's kernels run only compiled: unset it":
        "$NUMBA_DISABLE_JIT={0} 会关掉 numba 的编译器，而 fast 引擎的内核只能编译后运行：请取消这个变量",
    "$NUMBA_NUM_THREADS={0} must be a whole number above 0: set it to one (e.g. 2) or unset it":
        "$NUMBA_NUM_THREADS={0} 必须是大于 0 的整数：把它设成这样一个数（例如 2），或者取消这个变量",
}
