"""``zerollm report``: training runs and their lm-eval scores side by side, as one offline HTML page.

    lm_eval --model zerollm --model_args ckpt=runs/sft --tasks lm-eval-tasks --output_path scores
    zerollm report runs/base runs/sft runs/grpo --results scores --out report.html

See zerollm.evaluate.report for what the page shows and where each number comes from.
"""

import glob
import os

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import require_regular


def add_arguments(p):
    p.add_argument("runs", nargs="+", metavar="RUN", help="training run directories, in pipeline order")
    p.add_argument("--results", nargs="*", default=[], metavar="FILE|DIR",
                   help="lm-eval results_*.json files, or folders searched for them (lm_eval --output_path)")
    p.add_argument("--out", required=True, metavar="FILE", help="the .html file to write")
    p.add_argument("--lang", choices=("en", "zh"), default=None,
                   help="the language it opens in (default en), and of this command's help and errors")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")


def results_files(items):
    """The files given, and every results_*.json under the folders given (each must be a regular file: a
    pipe or a folder of that name is refused when it is read, zerollm.evaluate.report.read_result_files)."""
    files = []
    for item in items:
        if os.path.isdir(item):
            found = sorted(glob.glob(os.path.join(item, "**", "results_*.json"), recursive=True))
            if not found:
                raise ZeroLLMError(f"{item} holds no lm-eval results_*.json; give lm_eval's --output_path folder")
            files += found
        elif os.path.exists(item):
            files.append(require_regular(item, "results_*.json file"))
        else:
            raise ZeroLLMError(f"--results {item}: no such file or folder")
    return files


def check_distinct(paths):
    """Each run once: the same folder twice (spelled alike, with a trailing /, or through a link) would be two
    identical columns of the page that read as two runs."""
    seen = {}
    for path in paths:
        key = os.path.realpath(path)
        if key in seen:
            same = f"as {seen[key]} and {path}" if seen[key] != path else "twice"
            raise ZeroLLMError(f"RUN {path} is given {same}; each run appears once in the report: drop the repeat")
        seen[key] = path


def run(args):
    from zerollm.evaluate.report import build_report, match_results, read_result_files, run_summary
    from zerollm.teach.explain.page import check_out, write_page
    inputs = [("RUN", r) for r in args.runs] + [("--results", r) for r in args.results]
    check_out(args.out, args.force, example="report.html", inputs=inputs)     # --force never replaces an input
    check_distinct(args.runs)
    runs = [run_summary(r) for r in args.runs]
    results = match_results(read_result_files(results_files(args.results)), runs)   # each file to its run
    size = write_page(args.out, build_report(runs, results, args.lang or "en"), force=args.force)
    scored = sum(1 for r in runs if r["path"] in results)
    print(f"wrote {args.out} ({size:,} bytes): {len(runs)} runs, {scored} with lm-eval scores")
    return 0
