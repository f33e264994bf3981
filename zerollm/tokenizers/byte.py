"""ByteTokenizer: the 256 possible bytes of UTF-8 text are the vocabulary. Nothing to train.

Every text can be encoded (no unknown characters ever), at the price of long sequences:
a CJK character is 3 ids and an emoji 4.

>>> ByteTokenizer().encode("hi 你")
[104, 105, 32, 228, 189, 160]

Special tokens (a chat template's "<|user|>", ...) get ids 256, 257, ... in the order they were added:

>>> tok = ByteTokenizer().with_special_tokens(["<|end|>"])
>>> tok.encode("hi<|end|>", allowed_special="all"), tok.decode([104, 105, 256])
([104, 105, 256], 'hi<|end|>')
"""

from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers.base import Tokenizer, as_id_list, specials_by_id, text_bytes

N_BYTES = 256


class ByteTokenizer(Tokenizer):
    """id = byte value, 0..255; then one id per special token, 256.. in order."""
    name = "byte"

    def __init__(self, special_tokens=()):
        specials = list(special_tokens)
        if len(set(specials)) != len(specials) or any(not isinstance(s, str) or not s for s in specials):
            raise ZeroLLMError(f"special tokens must be distinct non-empty strings, got {specials}")
        self._specials = {s: N_BYTES + k for k, s in enumerate(specials)}
        self._table = [bytes([b]) for b in range(N_BYTES)] + [s.encode("utf-8") for s in specials]

    def _encode_ordinary(self, text):
        """Bytes of the command line that were not UTF-8 are encoded as themselves (see text_bytes)."""
        return list(text_bytes(text))

    def decode(self, ids):
        """ids -> text. Invalid UTF-8 (e.g. a model that stopped in the middle of a 3-byte
        character, or generated a stray continuation byte) becomes U+FFFD '\ufffd' instead of an
        error (errors="replace"), because generated text is often cut at an arbitrary byte.

        >>> ByteTokenizer().decode([228, 189])   # the first 2 of the 3 bytes of '你'
        '\ufffd'
        """
        ids = as_id_list(ids, self.vocab_size)
        if not self._specials:
            return bytes(ids).decode("utf-8", errors="replace")
        table = self._table
        return b"".join([table[i] for i in ids]).decode("utf-8", errors="replace")

    @property
    def vocab_size(self):
        return N_BYTES + len(self._specials)

    @property
    def special_tokens(self):
        return dict(self._specials)

    def with_special_tokens(self, tokens):
        return ByteTokenizer([*self._specials, *self._new_specials(tokens)])

    # ------------------------------------------------------------------
    def _format_version(self):
        return 2 if self._specials else 1

    def hf_tokenizer_json(self):
        from zerollm.tokenizers.hf_export import byte_tokenizer_dict, checked_json
        return checked_json(self, byte_tokenizer_dict(self))

    def _payload(self):
        return {"special_tokens": dict(self._specials)} if self._specials else {}

    @classmethod
    def _from_payload(cls, data):
        extra = sorted(set(data) - {"format", "version", "type", "special_tokens"})
        if extra:
            raise ZeroLLMError(f"a byte tokenizer has no settings but its special tokens, yet the file has {extra}")
        return cls(specials_by_id(data.get("special_tokens", {}), N_BYTES, "special_tokens"))
