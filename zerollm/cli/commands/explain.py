"""``zerollm explain``: one offline HTML page that shows attention, from zerollm's own numbers.

    zerollm explain --out explain.html                                   # the seed's walkthrough
    zerollm explain --ckpt runs/shakespeare --text "ROMEO: What light" --out explain.html
    zerollm explain --hf path/to/gpt2 --text "Hello, I'm a language model" --out gpt2.html

The page is a single file (styles, script, data and a small font inline) that opens from disk with
no network: send it to a student as it is.
"""

import os

from zerollm.io.errors import ZeroLLMError
from zerollm.io.i18n import add_lang_argument, resolve_lang, translator

TEXT = {
    "wrote": {"zh": "已写入 {path}（{kb} KB）：用浏览器打开它，不需要联网。",
              "en": "Wrote {path} ({kb} KB): open it in a browser, no network needed."},
    "model": {"zh": "模型部分：{name}，{T} 个 token，{nl} 层 × {nh} 个头。",
              "en": "Model section: {name}, {T} tokens, {nl} layers x {nh} heads."},
}

say = translator(TEXT)


def add_arguments(p):
    add_lang_argument(p)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--ckpt", metavar="DIR", help="a training run directory (its latest checkpoint) or a step "
                     "directory; with --text the page shows what this model does with it")
    src.add_argument("--hf", metavar="DIR", help="a Hugging Face GPT-2/Llama directory instead of --ckpt")
    p.add_argument("--text", help="the text the model reads (with --ckpt or --hf)")
    p.add_argument("--out", required=True, metavar="FILE.html", help="where to write the page")
    p.add_argument("--force", action="store_true", help="replace --out if it already exists")


def _model_section(args, lang):
    from zerollm.teach.explain.model_view import load_source, model_view, warn_notes
    from zerollm.teach.explain.text import PAGE_TEXT
    if args.text is None:
        raise ZeroLLMError(f"{'--ckpt' if args.ckpt else '--hf'} needs --text: the page shows what the model "
                           "does with your text")
    if args.text == "":
        raise ZeroLLMError("--text is empty; give at least one character for the model to read")
    model, tok, name, log = load_source(ckpt=args.ckpt, hf=args.hf)
    view, notes = model_view(model, tok, args.text, name=name, log_path=log)
    warn_notes(notes, lambda key, **f: PAGE_TEXT[key][lang].format(**f))
    return view


def run(args):
    from zerollm.teach.explain.page import build_page, check_out, write_page
    lang = resolve_lang(args.lang)
    check_out(args.out, args.force, inputs=[("--ckpt", args.ckpt), ("--hf", args.hf)])   # before loading a model
    view = None
    if args.ckpt or args.hf:
        view = _model_section(args, lang)
    elif args.text is not None:
        raise ZeroLLMError("--text is read by a model: add --ckpt DIR (a zerollm run) or --hf DIR "
                           "(a Hugging Face model)")
    size = write_page(args.out, build_page(lang, view), force=args.force)
    print(say("wrote", lang, path=os.fspath(args.out), kb=f"{size / 1024:.0f}"))
    if view:
        print(say("model", lang, name=view["name"], T=view["facts"]["T"], nl=view["facts"]["n_layer"],
                  nh=view["facts"]["n_head"]))
    return 0
