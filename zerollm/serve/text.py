"""Generated ids -> text for a client: whole UTF-8 characters only, and stop strings cut out.

    stream = TextStream(tokenizer, stop=["\\n\\n"])
    piece = stream.push(token_id)     # text safe to send now ("" while a character or a stop is unsure)
    if stream.stopped: ...            # a stop string was written: the answer ends before it
    rest = stream.flush()             # at the end: what was held back

Two things are held back: the bytes of a UTF-8 character that a byte-level token cut in two
(zerollm.generation.display.StreamDecoder waits for the rest), and a tail that may be the start of a stop
string (sent once the next tokens show it is not). So a streamed answer is exactly the answer
that is not streamed, and never shows a broken character or a piece of a stop string.
"""

from zerollm.generation.display import StreamDecoder


class TextStream:
    def __init__(self, tokenizer, stop=()):
        self.decoder = StreamDecoder(tokenizer, escape=False)
        self.stop = [s for s in stop if s]
        self.pending = ""                    # decoded, not sent: may begin a stop string
        self.text = ""                       # everything sent
        self.stopped = False

    def push(self, token_id):
        if self.stopped:
            return ""
        return self._release(self.pending + self.decoder.push(token_id))

    def flush(self):
        """The held-back text once no token follows (a stop string it begins never came)."""
        if self.stopped:
            return ""
        piece = self.pending + self.decoder.flush()
        hit = self._first_stop(piece)
        if hit is not None:
            piece, self.stopped = piece[:hit], True
        self.pending, self.text = "", self.text + piece
        return piece

    def _first_stop(self, text):
        hits = [i for i in (text.find(s) for s in self.stop) if i >= 0]
        return min(hits) if hits else None

    def _release(self, text):
        hit = self._first_stop(text)
        if hit is not None:
            self.stopped, self.pending = True, ""
            self.text += text[:hit]
            return text[:hit]
        keep = max((n for s in self.stop for n in range(1, len(s)) if text.endswith(s[:n])), default=0)
        send, self.pending = text[:len(text) - keep], text[len(text) - keep:]
        self.text += send
        return send
