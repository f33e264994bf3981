"""Language choice for the teaching commands: 中文 (zh) or English (en).

Every walkthrough takes ``--lang zh|en`` (and every command, for its help and errors: zerollm.cli.lang).
Without it we follow ZEROLLM_LANG (zh or en) if set, else the user's locale: Chinese locales (zh_CN,
zh_TW, zh_HK, ...) get ``zh``, everything else ``en``.
"""

import os

LANGS = ("zh", "en")

# Checked in the order gettext uses them: LANGUAGE wins, then LC_ALL, LC_MESSAGES, LANG.
_LOCALE_VARS = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


def default_lang(environ=None):
    """Return 'zh' when the locale is Chinese, else 'en'.

    >>> default_lang({"LANG": "zh_CN.UTF-8"})
    'zh'
    >>> default_lang({"LANG": "C.UTF-8"})
    'en'
    """
    env = os.environ if environ is None else environ
    if env.get("ZEROLLM_LANG", "") in LANGS:       # zerollm's own choice, over the system's locale
        return env["ZEROLLM_LANG"]
    for var in _LOCALE_VARS:
        value = env.get(var, "")
        if value:
            # LANGUAGE may be a priority list such as "zh_CN:en_US"; the first entry decides.
            return "zh" if value.split(":")[0].lower().startswith("zh") else "en"
    return "en"


def add_lang_argument(parser):
    """The shared ``--lang`` flag of every teaching command."""
    parser.add_argument(
        "--lang", choices=LANGS, default=None,
        help="language of the explanations, help and errors: zh (中文) or en; default follows the locale",
    )


def resolve_lang(lang):
    return lang if lang in LANGS else default_lang()


def translator(table):
    """A ``say(key, lang, **fields)`` for one module's TEXT table {key: {"zh": ..., "en": ...}}.

    >>> say = translator({"hi": {"zh": "你好，{name}", "en": "hello, {name}"}})
    >>> say("hi", "en", name="Ada")
    'hello, Ada'
    """
    def say(key, lang, **fields):
        return table[key][lang].format(**fields)
    return say
