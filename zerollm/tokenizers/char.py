"""CharTokenizer: one id per distinct character of the training text, in sorted order.

Sequences are as short as the characters (a CJK poem line is 12 ids, not 36 bytes), but the
vocabulary only knows characters it saw. An unknown character is an error by default, or maps
to a reserved ``unk`` id if you ask for one.

>>> tok = CharTokenizer.train("hello")
>>> tok.chars, tok.encode("hole")
(['e', 'h', 'l', 'o'], [1, 3, 2, 0])
"""

from zerollm.errors import ZeroLLMError
from zerollm.tokenizers.base import Tokenizer, as_id_list, check_text, describe_char

MAX_SHOWN = 5   # unknown characters named in an error message


class CharTokenizer(Tokenizer):
    """Vocabulary: ``chars`` (ids 0..len-1), then, if ``unk`` is a string, one id for it.

    unk: None (default) = unknown characters raise ZeroLLMError; a string such as "<unk>" =
    they map to the last id, which decodes back to that string.
    """
    name = "char"

    def __init__(self, chars, unk=None):
        chars = list(chars)
        if not chars:
            raise ZeroLLMError("a char tokenizer needs at least one character; train it on non-empty text")
        if any(not isinstance(c, str) or len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ZeroLLMError("chars must be distinct single characters")
        if unk is not None and (not isinstance(unk, str) or not unk):
            raise ZeroLLMError(f"unk must be None or a non-empty string such as '<unk>', got {unk!r}")
        self.chars = chars
        self.unk = unk
        self._stoi = {c: i for i, c in enumerate(chars)}
        self._itos = chars + ([unk] if unk is not None else [])

    @classmethod
    def train(cls, text, unk=None):
        """The vocabulary is every distinct character of ``text``, sorted by code point."""
        check_text(text)
        if not text:
            raise ZeroLLMError("cannot build a char tokenizer from empty text; give it your corpus")
        return cls(sorted(set(text)), unk=unk)

    @property
    def unk_id(self):
        return len(self.chars) if self.unk is not None else None

    @property
    def vocab_size(self):
        return len(self._itos)

    # ------------------------------------------------------------------
    def encode(self, text):
        check_text(text)
        stoi = self._stoi
        try:
            return [stoi[c] for c in text]
        except KeyError:
            pass   # rare path: find all unknown characters, then raise or map them to unk
        unknown = sorted(set(text) - set(stoi))
        if self.unk is None:
            shown = ", ".join(describe_char(c) for c in unknown[:MAX_SHOWN])
            more = f" and {len(unknown) - MAX_SHOWN} more" if len(unknown) > MAX_SHOWN else ""
            raise ZeroLLMError(
                f"{len(unknown)} character(s) are not in this char tokenizer's vocabulary: {shown}{more}; "
                "train the tokenizer on text that contains them, use the byte or bpe tokenizer, "
                "or create it with unk='<unk>' to map unknown characters to one id")
        unk_id = self.unk_id
        return [stoi.get(c, unk_id) for c in text]

    def decode(self, ids):
        itos = self._itos
        return "".join([itos[i] for i in as_id_list(ids, len(itos))])

    # ------------------------------------------------------------------
    def _payload(self):
        return {"unk": self.unk, "chars": self.chars}

    @classmethod
    def _from_payload(cls, data):
        chars = data["chars"]
        if not isinstance(chars, list):
            raise ZeroLLMError("'chars' must be a list of single characters")
        return cls(chars, unk=data.get("unk"))
