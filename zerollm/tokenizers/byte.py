"""ByteTokenizer: the 256 possible bytes of UTF-8 text are the vocabulary. Nothing to train.

Every text can be encoded (no unknown characters ever), at the price of long sequences:
a CJK character is 3 ids and an emoji 4.

>>> ByteTokenizer().encode("hi 你")
[104, 105, 32, 228, 189, 160]
"""

from zerollm.errors import ZeroLLMError
from zerollm.tokenizers.base import Tokenizer, as_id_list, check_text, text_bytes


class ByteTokenizer(Tokenizer):
    """id = byte value, 0..255."""
    name = "byte"

    def encode(self, text):
        """Bytes of the command line that were not UTF-8 are encoded as themselves (see text_bytes)."""
        check_text(text)
        return list(text_bytes(text))

    def decode(self, ids):
        """ids -> text. Invalid UTF-8 (e.g. a model that stopped in the middle of a 3-byte
        character, or generated a stray continuation byte) becomes U+FFFD '\ufffd' instead of an
        error (errors="replace"), because generated text is often cut at an arbitrary byte.

        >>> ByteTokenizer().decode([228, 189])   # the first 2 of the 3 bytes of '你'
        '\ufffd'
        """
        return bytes(as_id_list(ids, 256)).decode("utf-8", errors="replace")

    @property
    def vocab_size(self):
        return 256

    def _payload(self):
        return {}

    @classmethod
    def _from_payload(cls, data):
        extra = sorted(set(data) - {"format", "version", "type"})
        if extra:
            raise ZeroLLMError(f"a byte tokenizer has no settings, but the file has {extra}")
        return cls()
