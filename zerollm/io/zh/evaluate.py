"""中文 of the evaluate room's error messages (see zerollm/io/zh/__init__.py)."""

ZH = {
    "the text has fewer than 2 tokens: nothing to predict":
        "这段文本不到 2 个 token：没有可以预测的东西",
    "model_args {0} must be {1}, got {2}":
        "model_args {0} 必须是 {1}，收到的是 {2}",
    "model_args {0}: not known to --model zerollm; the known ones are {1} (and lm_eval's own --batch_size)":
        "model_args {0}: --model zerollm 不认识；认识的有 {1}（以及 lm_eval 自己的 --batch_size）",
    "give exactly one of model_args ckpt=DIR (zerollm) or hf=DIR (Hugging Face)":
        "请在 model_args 里给出 ckpt=DIR（zerollm）或 hf=DIR（Hugging Face）两者之一，只能给一个",
    "model_args chat must be auto, yes or no, got {0}":
        "model_args chat 必须是 auto、yes 或 no，收到的是 {0}",
    "a continuation needs at least one token to score":
        "要打分的续写（continuation）至少需要一个 token",
    "a continuation of {0} tokens does not fit the context of {1}":
        "{0} 个 token 的续写放不进 {1} 个 token 的上下文",
    "a context needs at least one token (give a prefix such as <|endoftext|>)":
        "上下文至少需要一个 token（给一个前缀，比如 <|endoftext|>）",
    "{0} is not an lm-eval results file ({1}: {2}); give the results_*.json that lm_eval --output_path wrote":
        "{0} 不是 lm-eval 的结果文件（{1}: {2}）；请给出 lm_eval --output_path 写出的 results_*.json",
    "{0}: its model_args name no ckpt=DIR, so it belongs to no zerollm run":
        "{0}: 它的 model_args 里没有 ckpt=DIR，所以它不属于任何 zerollm 运行",
    "{0}: lm-eval results for {1}, which is none of the runs given; add it as a RUN or leave its results out":
        "{0}: 这是 {1} 的 lm-eval 结果，但它不在给出的运行之中；把它作为 RUN 加上，或者不要给这份结果",
    "{0}: its model_args ckpt={1} is relative, and resolved against the current folder it is {2}, which is none of the runs given{3}; run zerollm report from the folder where lm_eval ran, or give the run as model_args names it ({4})":
        "{0}: 它的 model_args 里 ckpt={1} 是相对路径，按当前目录解析得到 {2}，不在给出的运行之中{3}；请在运行 lm_eval 的那个目录里运行 zerollm report，或者按 model_args 里的写法给出这个运行（{4}）",
    "{0} holds files that 'zerollm tasks make lm-eval' did not write; choose a new or empty folder for --out":
        "{0} 里有不是 'zerollm tasks make lm-eval' 写的文件；请给 --out 换一个新的或空的目录",
    "{0} holds files that 'zerollm tasks make lm-eval' did not write ({1}), which replacing the folder would delete; move them out, or choose a new or empty folder for --out":
        "{0} 里有不是 'zerollm tasks make lm-eval' 写的文件（{1}），替换这个目录会把它们删掉；先把它们移走，或者给 --out 换一个新的或空的目录",
    "{0} already holds lm-eval tasks {1}; pass --force to replace them with --n {2} --seed {3}, or choose another --out":
        "{0} 里已经有 lm-eval 任务 {1}；加 --force 用 --n {2} --seed {3} 替换它们，或者换一个 --out",
    "{0}: {1} lines are not JSON records of a run (edited by hand, or another file?); the report leaves them out":
        "{0}: 有 {1} 行不是一次运行的 JSON 记录（被手工改过，还是另一个文件？）；报告里不包括它们",
    "{0}: task {1}, metric {2} {3}; it is left out of the report":
        "{0}: 任务 {1} 的度量 {2} {3}；报告里不包括它",
    # issue 57 item 7: the pieces _run_ending_with (evaluate/report.py) and _why_not_rewritten
    # (evaluate/taskfiles.py) put into their messages
    ", and {0} runs given end with {1} ({2})":
        "；给出的运行里有 {0} 个以 {1} 结尾（{2}）",
    "but its zerollm-tasks.json is not as this command writes it (damaged or edited)":
        "，但其中的 zerollm-tasks.json 和这个命令写出的不一样（损坏了，或者被改过）",
    "written with --n {0} --seed {1}":
        "，但它们是用 --n {0} --seed {1} 写出的",
    "written with --n {0} --seed {1} and {2} changed since this command wrote them (edited by hand?), and the changes would be lost":
        "，但它们是用 --n {0} --seed {1} 写出的，而且 {2} 在这个命令写出之后被改过（手工改的？），替换会丢掉这些改动",
    "written with --n {0} --seed {1} and {2} changed since this command wrote it (edited by hand?), and the changes would be lost":
        "，但它们是用 --n {0} --seed {1} 写出的，而且 {2} 在这个命令写出之后被改过（手工改的？），替换会丢掉这些改动",
    "but {0} changed since this command wrote them (edited by hand?), and the changes would be lost":
        "，但 {0} 在这个命令写出之后被改过（手工改的？），替换会丢掉这些改动",
    "but {0} changed since this command wrote it (edited by hand?), and the changes would be lost":
        "，但 {0} 在这个命令写出之后被改过（手工改的？），替换会丢掉这些改动",
    "{0}, {1}, {2} and more":
        "{0}、{1}、{2} 等",
}
