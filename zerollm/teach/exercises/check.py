"""``zerollm exercise check``: a learner's file graded in a child process with a time limit.

The child (``python -m zerollm.teach.exercises.check NAME FILE LANG``) imports the file (it is the
learner's own code, run because they asked), grades its function (catalog -> grading) and prints one
line of JSON, {"ok": ..., "message": ...}, as its last line. The parent waits at most ``time_limit``
seconds, so a file that loops forever, dies, or prints a flood of text still ends in one line.
"""

import contextlib
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

from zerollm.teach.exercises.grading import Raised, Wrong

TEXT = {
    "passed": {"en": "{name}: right on all {n} checks (against zerollm's own code, and finite differences "
                     "for gradients)",
               "zh": "{name}：全部 {n} 项检查都对（与 zerollm 自己的代码一致，梯度也与有限差分一致）"},
    "syntax": {"en": "{file} does not import: {kind} at line {line}: {msg}",
               "zh": "{file} 无法导入：第 {line} 行 {kind}：{msg}"},
    "import": {"en": "{file} does not import: {kind}: {msg}{at}", "zh": "{file} 无法导入：{kind}：{msg}{at}"},
    "missing": {"en": "{file} has no function {fn}: write def {sig} (as `zerollm exercise start` wrote it)",
                "zh": "{file} 里没有函数 {fn}：请写 def {sig}（与 `zerollm exercise start` 生成的一致）"},
    "todo": {"en": "{fn} is not written yet: it still raises NotImplementedError (replace that line with your code)",
             "zh": "{fn} 还没写：它仍然 raise NotImplementedError（把那一行换成你的代码）"},
    "raised": {"en": "your {fn} raised {kind}{at}: {msg}", "zh": "你的 {fn} 抛出了 {kind}{at}：{msg}"},
    "at": {"en": " at line {line}", "zh": "（第 {line} 行）"},
    "timeout": {"en": "{fn} did not finish within {limit:g} s: an endless loop? (raise the limit with --time-limit)",
                "zh": "{fn} 在 {limit:g} 秒内没有结束：是不是死循环？（可用 --time-limit 放宽时限）"},
    "died": {"en": "checking {fn} stopped the checker itself (exit code {code}){tail}",
             "zh": "检查 {fn} 时检查程序自身退出了（退出码 {code}）{tail}"},
}


def say(key, lang, **fields):
    return TEXT[key][lang].format(**fields)


def _at(line, lang):
    return say("at", lang, line=line) if line else ""


def load(path, exercise, lang):
    """The learner's function from ``path``; raises Wrong with one line when the file cannot give it."""
    spec = importlib.util.spec_from_file_location(f"zerollm_exercise_{exercise.name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))     # their file may import a helper beside it
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise Wrong(say("syntax", lang, file=path, kind=type(err).__name__, line=err.lineno, msg=err.msg)) from None
    except BaseException as err:      # noqa: BLE001 -- SystemExit and KeyboardInterrupt in their file too
        import traceback
        lines = [f.lineno for f in traceback.extract_tb(err.__traceback__) if f.filename == os.path.abspath(path)
                 or f.filename == path]
        raise Wrong(say("import", lang, file=path, kind=type(err).__name__, msg=str(err).split("\n")[0],
                        at=_at(lines[-1] if lines else None, lang))) from None
    finally:
        sys.path.pop(0)
    fn = getattr(module, exercise.function, None)
    if not callable(fn):
        raise Wrong(say("missing", lang, file=path, fn=exercise.function, sig=exercise.signature))
    return fn


def grade_function(exercise, fn, lang):
    """(ok, one line) for a function already loaded: the in-process half of ``check``."""
    try:
        with np.errstate(all="ignore"), contextlib.redirect_stdout(sys.stderr):
            n = exercise.grade(fn, lang)
    except Wrong as err:
        return False, f"{exercise.name}: {err}"
    except Raised as err:
        if err.kind == "NotImplementedError":
            return False, say("todo", lang, fn=exercise.function)
        return False, say("raised", lang, fn=exercise.function, kind=err.kind, at=_at(err.line, lang), msg=err)
    except Exception as err:   # noqa: BLE001 -- e.g. their function returned a type the grader's numpy refuses
        return False, say("raised", lang, fn=exercise.function, kind=type(err).__name__, at="",
                          msg=str(err).split("\n")[0])
    return True, say("passed", lang, name=exercise.name, n=n)


def grade_file(exercise, path, lang):
    try:
        with contextlib.redirect_stdout(sys.stderr):
            fn = load(path, exercise, lang)
    except Wrong as err:
        return False, str(err)
    return grade_function(exercise, fn, lang)


def check(exercise, path, lang, time_limit):
    """Grade ``path`` in a child process; (ok, one line)."""
    cmd = [sys.executable, "-m", "zerollm.teach.exercises.check", exercise.name, str(path), lang]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=time_limit, errors="replace")
    except subprocess.TimeoutExpired:
        return False, say("timeout", lang, fn=exercise.function, limit=time_limit)
    lines = done.stdout.strip().splitlines()
    try:
        verdict = json.loads(lines[-1])
        return bool(verdict["ok"]), str(verdict["message"])
    except (IndexError, ValueError, KeyError, TypeError):
        tail = done.stderr.strip().splitlines()
        tail = f": {tail[-1][:200]}" if tail else ""
        return False, say("died", lang, fn=exercise.function, code=done.returncode, tail=tail)


def main(argv=None):
    from zerollm.teach.exercises.catalog import BY_NAME
    name, path, lang = (sys.argv[1:] if argv is None else argv)[:3]
    real_stdout = sys.stdout
    ok, message = grade_file(BY_NAME[name], path, lang)
    real_stdout.write("\n" + json.dumps({"ok": ok, "message": message}, ensure_ascii=False) + "\n")
    real_stdout.flush()
    os._exit(0)        # no atexit hooks or threads of the learner's file may change the verdict now


if __name__ == "__main__":
    main()
