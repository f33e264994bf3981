"""CharTokenizer: one id per distinct character of the training text, in sorted order.

Sequences are as short as the characters (a CJK poem line is 12 ids, not 36 bytes), but the
vocabulary only knows characters it saw. An unknown character is an error by default, or maps
to a reserved ``unk`` id if you ask for one.

>>> tok = CharTokenizer.train("hello")
>>> tok.chars, tok.encode("hole")
(['e', 'h', 'l', 'o'], [1, 3, 2, 0])

Tokens can be appended later without moving any existing id: characters a task needs that the
corpus lacks (``with_chars``; the full-width colon of 「藏头诗：春夏秋冬」 is not in tang_poems.txt)
and special tokens (``with_special_tokens``; a chat template's role markers). Both go into one list,
``added``, in the order they were added; their ids follow the trained characters (and unk).

>>> tok = CharTokenizer.train("ab").with_chars("：").with_special_tokens(["<|end|>"])
>>> tok.encode("a：b<|end|>", allowed_special="all"), tok.decode([2, 3])
([0, 2, 1, 3], '：<|end|>')
"""

from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers.base import Tokenizer, as_id_list, describe_char

MAX_SHOWN = 5   # unknown characters named in an error message


class UnknownCharacters(ZeroLLMError):
    """Text with characters a char vocabulary lacks. ``found`` says which; the message adds what a Python
    caller can do about it (a server or command line gives its own advice with ``found``, or
    ``command_line()``). ``chars``: the unknown characters, sorted; ``specials``: the tokenizer's special
    tokens the text holds (read as plain characters unless encoded with allowed_special)."""

    def __init__(self, found, fix, chars=(), specials=()):
        super().__init__(f"{found}; {fix}")
        self.found, self.chars, self.specials = found, list(chars), list(specials)

    def command_line(self, where="the text"):
        """The one line a command prints: the first few characters ``where`` holds that the model does not
        know, and what a command-line user can do (not the Python advice of the message)."""
        n = len(self.chars)
        shown = ", ".join(describe_char(c) for c in self.chars[:MAX_SHOWN])
        more = f" and {n - MAX_SHOWN} more" if n > MAX_SHOWN else ""
        specials = ""
        if self.specials:
            specials = (f"; it also holds the special token(s) {', '.join(map(repr, self.specials[:MAX_SHOWN]))}, "
                        "which are read here as plain characters: leave them out")
        return (f"{where} holds {n} character{'s' if n != 1 else ''} this model does not know: {shown}{more}"
                f"{specials}; a char tokenizer knows only the characters of the text the model was trained on: "
                "use text written in those characters, or train a model with --tokenizer byte or bpe, "
                "which read any text")


class CharTokenizer(Tokenizer):
    """Vocabulary: ``chars`` (ids 0..len-1), then, if ``unk`` is a string, one id for it, then
    ``added``: [(text, is_special), ...], plain characters and special tokens appended later.

    unk: None (default) = unknown characters raise ZeroLLMError; a string such as "<unk>" =
    they map to the unk id, which decodes back to that string.
    """
    name = "char"

    def __init__(self, chars, unk=None, added=()):
        chars = list(chars)
        if not chars:
            raise ZeroLLMError("a char tokenizer needs at least one character; train it on non-empty text")
        if any(not isinstance(c, str) or len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ZeroLLMError("chars must be distinct single characters")
        if unk is not None and (not isinstance(unk, str) or not unk):
            raise ZeroLLMError(f"unk must be None or a non-empty string such as '<unk>', got {unk!r}")
        self.chars, self.unk = chars, unk
        self.added = [(text, bool(special)) for text, special in added]
        self._itos = chars + ([unk] if unk is not None else []) + [text for text, _ in self.added]
        first = len(chars) + (unk is not None)
        plain = [(t, first + k) for k, (t, special) in enumerate(self.added) if not special]
        self._specials = {t: first + k for k, (t, special) in enumerate(self.added) if special}
        self._stoi = {**{c: i for i, c in enumerate(chars)}, **dict(plain)}
        self._check_added(plain)

    def _check_added(self, plain):
        if any(len(t) != 1 for t, _ in plain):
            raise ZeroLLMError("added plain characters must be single characters; add longer strings as "
                               "special tokens")
        if len(set(self._itos)) != len(self._itos) or any(not t for t in self._specials):
            raise ZeroLLMError("every token of a char tokenizer (characters, unk, added tokens) must be a "
                               "distinct non-empty string")

    @classmethod
    def train(cls, text, unk=None):
        """The vocabulary is every distinct character of ``text``, sorted by code point."""
        if not isinstance(text, str):
            raise ZeroLLMError(f"a char tokenizer trains on a str, got {type(text).__name__}")
        if not text:
            raise ZeroLLMError("cannot build a char tokenizer from empty text; give it your corpus")
        return cls(sorted(set(text)), unk=unk)

    @property
    def unk_id(self):
        return len(self.chars) if self.unk is not None else None

    @property
    def vocab_size(self):
        return len(self._itos)

    @property
    def special_tokens(self):
        return dict(self._specials)

    # ------------------------------------------------------------------
    # appending tokens (a new tokenizer each time; existing ids never move)

    def with_chars(self, chars):
        """A NEW tokenizer that also knows the characters of ``chars`` (a string or an iterable of
        characters); those it knows already are skipped, the others are appended in sorted order."""
        new = sorted({c for c in chars} - set(self._stoi))
        if any(not isinstance(c, str) or len(c) != 1 for c in new):
            raise ZeroLLMError(f"with_chars takes single characters, got {new[:MAX_SHOWN]!r}")
        clash = [c for c in new if c in self._specials]
        if clash:
            raise ZeroLLMError(f"{clash} are already special tokens of this tokenizer")
        return CharTokenizer(self.chars, self.unk, self.added + [(c, False) for c in new])

    def with_special_tokens(self, tokens):
        new = self._new_specials(tokens)
        clash = [t for t in new if t in self._stoi or t == self.unk]
        if clash:
            raise ZeroLLMError(f"{clash} are already ordinary tokens of this tokenizer, so they cannot "
                               "become special tokens")
        return CharTokenizer(self.chars, self.unk, self.added + [(t, True) for t in new])

    # ------------------------------------------------------------------
    def _encode_ordinary(self, text):
        stoi = self._stoi
        try:
            return [stoi[c] for c in text]
        except KeyError:
            pass   # rare path: find all unknown characters, then raise or map them to unk
        if self.unk is None:
            raise self._unknown_error(text)
        unk_id = self.unk_id
        return [stoi.get(c, unk_id) for c in text]

    def _unknown_error(self, text):
        unknown = sorted(set(text) - set(self._stoi))
        shown = ", ".join(describe_char(c) for c in unknown[:MAX_SHOWN])
        more = f" and {len(unknown) - MAX_SHOWN} more" if len(unknown) > MAX_SHOWN else ""
        hint, specials = "", [s for s in self._specials if s in text]
        if specials:
            hint = ("; the text holds special tokens, which encode(text, allowed_special='all') turns into "
                    "their ids")
        return UnknownCharacters(
            f"{len(unknown)} character(s) are not in this char tokenizer's vocabulary: {shown}{more}{hint}",
            "train the tokenizer on text that contains them, add them with tokenizer.with_chars(...), use the "
            "byte or bpe tokenizer, or create it with unk='<unk>' to map unknown characters to one id",
            chars=unknown, specials=specials)

    def decode(self, ids):
        itos = self._itos
        return "".join([itos[i] for i in as_id_list(ids, len(itos))])

    # ------------------------------------------------------------------
    def _format_version(self):
        return 2 if self.added else 1

    def hf_tokenizer_json(self):
        from zerollm.tokenizers.hf_export import char_tokenizer_dict, checked_json
        return checked_json(self, char_tokenizer_dict(self))

    def _payload(self):
        payload = {"unk": self.unk, "chars": self.chars}
        if self.added:
            payload["added"] = [[text, special] for text, special in self.added]
        return payload

    @classmethod
    def _from_payload(cls, data):
        chars, added = data["chars"], data.get("added", [])
        if not isinstance(chars, list):
            raise ZeroLLMError("'chars' must be a list of single characters")
        if not isinstance(added, list) or any(not isinstance(a, list) or len(a) != 2 or not isinstance(a[0], str)
                                              or not isinstance(a[1], bool) for a in added):
            raise ZeroLLMError("'added' must be a list of [text, is_special] pairs")
        return cls(chars, unk=data.get("unk"), added=added)
