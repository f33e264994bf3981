"""The command line's language: ``zerollm --lang zh|en COMMAND`` or ``zerollm COMMAND --lang zh|en``,
else ZEROLLM_LANG or the locale (zerollm.io.i18n.default_lang).

English is how every message and help string is written; 中文 is looked up in the catalog
(zerollm.io.zh) as each line is printed: one-line errors and warnings through ``say``, and --help by
``translate_parser``, which rewrites a built parser's descriptions, flag helps, group titles and argparse's
own words (flag names and metavars stay as they are).
"""

import argparse
import unicodedata

from zerollm.io.i18n import LANGS, default_lang

# how a line starts, by language: scripts grep "zerollm CMD: error" in English, "zerollm CMD:" in both
ERROR = {"en": "error: ", "zh": "错误："}
WARNING = {"en": "warning: ", "zh": "警告："}


def requested(argv):
    """The language the command line asks for with --lang (the last one given), or None.

    >>> requested(["--lang", "zh", "train", "--help"]), requested(["sample", "--lang=en"]), requested(["x"])
    ('zh', 'en', None)
    """
    lang = None
    for i, word in enumerate(argv):
        if word == "--":                 # what follows is data, not flags
            break
        if word == "--lang" and i + 1 < len(argv):
            lang = argv[i + 1]
        elif word.startswith("--lang="):
            lang = word.partition("=")[2]
    return lang if lang in LANGS else None


def lang_of(argv):
    """'zh' or 'en' for this command line: its --lang, else the environment."""
    return requested(argv) or default_lang()


def say(message, lang):
    """``message`` in ``lang``; the catalog is loaded only for 中文."""
    if lang != "zh":
        return str(message)
    from zerollm.io.zh import translate
    return translate(message)


def add_global_argument(parser):
    """``zerollm --lang zh COMMAND``: its own dest, since a command's --lang (default None) would
    overwrite it in the namespace."""
    parser.add_argument("--lang", dest="global_lang", choices=LANGS, default=None,
                        help="language of help, errors and explanations: zh (中文) or en; "
                             "default: ZEROLLM_LANG, else the locale")


def add_command_argument(command):
    """The same --lang after a command that has none of its own (the walkthroughs and report have one): on
    the parser that reads the last words, ``zerollm tasks eval ... --lang zh`` (a --lang on ``tasks`` too
    would be overwritten by eval's default)."""
    for parser in parsers(command):
        has_subcommands = any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
        if not has_subcommands and "--lang" not in parser._option_string_actions:
            parser.add_argument("--lang", choices=LANGS, default=None,
                                help="language of help and errors: zh (中文) or en; default: the locale")


# ----------------------------------------------------------------------------
# --help in 中文

_ARGPARSE_WORDS = {"positional arguments": "位置参数", "options": "选项", "optional arguments": "选项"}


def _columns(text):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


# a line never starts with a closing mark nor ends with an opening one
_CLOSING, _OPENING = set("，。、；：？！）」』》"), set("（「『《")


def _words(text):
    """Wrapping units: a run of non-CJK characters up to a space, or one CJK character; a closing mark
    sticks to the unit before it, an opening mark to the unit after it."""
    units, word = [], ""
    for c in text:
        wide = unicodedata.east_asian_width(c) in "WF"
        if c.isspace() or wide:
            if word:
                units.append(word)
            units.append(" " if c.isspace() else c)
            word = ""
        else:
            word += c
    units += [word] if word else []
    joined = []
    for unit in units:
        if joined and (unit in _CLOSING or joined[-1][-1] in _OPENING):
            joined[-1] += unit
        else:
            joined.append(unit)
    return joined


def wrap(text, width):
    """Lines of at most ``width`` terminal columns (a CJK character takes two), broken at a space or
    between CJK characters; argparse's own wrapping counts characters and would make them twice as wide."""
    lines, line = [], ""
    for unit in _words(" ".join(text.split())):
        if unit == " " and not line:
            continue
        if line and _columns(line + unit) > width:
            lines.append(line.rstrip())
            line = "" if unit == " " else unit
        else:
            line += unit
    return lines + ([line.rstrip()] if line.strip() else [])


def _chinese_formatter(base):
    """``base`` (a HelpFormatter class) with 中文 words and wrapping."""
    class Chinese(base):
        def add_usage(self, usage, actions, groups, prefix=None):
            super().add_usage(usage, actions, groups, "用法：" if prefix is None else prefix)

        def _split_lines(self, text, width):
            if base is argparse.RawTextHelpFormatter:
                return super()._split_lines(text, width)
            return wrap(text, width)

        def _fill_text(self, text, width, indent):
            if issubclass(base, argparse.RawDescriptionHelpFormatter):
                return super()._fill_text(text, width, indent)
            return "\n".join(indent + line for line in wrap(text, width - len(indent)))

        def start_section(self, heading):
            self._titles = getattr(self, "_titles", []) + [heading]
            super().start_section(heading)

        def format_help(self):
            # argparse puts an ASCII colon after a section's title; a 中文 title takes the full-width one
            text = super().format_help()
            for title in getattr(self, "_titles", []):
                if title and unicodedata.east_asian_width(title[-1]) in "WF":
                    text = text.replace(f"{title}:\n", f"{title}：\n")
            return text
    Chinese.__name__ = f"Chinese{base.__name__}"
    Chinese.chinese = True
    return Chinese


def parsers(parser):
    """The parser and every (sub)command parser under it, each once."""
    found, todo = [], [parser]
    while todo:
        p = todo.pop(0)
        if any(p is q for q in found):
            continue
        found.append(p)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


def help_strings(parser):
    """(where, English text) of every description, epilog and help of a parser tree: what --help shows
    in words (usage lines, flags and metavars are names, not words)."""
    for p in parsers(parser):
        for kind in ("description", "epilog"):
            if getattr(p, kind):
                yield f"{p.prog} {kind}", getattr(p, kind)
        for group in p._action_groups:
            if group.title and group.title not in _ARGPARSE_WORDS:
                yield f"{p.prog} group", group.title
            if group.description:
                yield f"{p.prog} group", group.description
        for action in p._actions:
            if action.help and action.help is not argparse.SUPPRESS:
                yield f"{p.prog} {'/'.join(action.option_strings) or action.dest}", action.help
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    if choice.help:
                        yield f"{p.prog} {choice.dest}", choice.help


def _put_in_chinese(thing, attr, lang):
    """``thing.attr`` in 中文, unless it holds the 中文 put there before: cli.entry's lazy parser translates a
    command's parser again once the command has added its flags (and maybe its own description)."""
    text = getattr(thing, attr)
    done = thing.__dict__.setdefault("_chinese", {})
    if text and text is not argparse.SUPPRESS and done.get(attr) is not text:
        text = _ARGPARSE_WORDS.get(text) or say(text, lang) if attr == "title" else say(text, lang)
        setattr(thing, attr, text)
        done[attr] = text


def translate_parser(parser, lang):
    """Set every parser's language (for its errors) and, for 中文, put its help in 中文."""
    for p in parsers(parser):
        p.lang = lang
        if lang != "zh":
            continue
        if not getattr(p.formatter_class, "chinese", False):
            p.formatter_class = _chinese_formatter(p.formatter_class)
        for kind in ("description", "epilog"):
            _put_in_chinese(p, kind, lang)
        for group in p._action_groups:
            _put_in_chinese(group, "title", lang)
            _put_in_chinese(group, "description", lang)
        for action in p._actions:
            _put_in_chinese(action, "help", lang)
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    _put_in_chinese(choice, "help", lang)
