"""Generated ids -> text for a client: whole UTF-8 characters only, and stop strings cut out.

    stream = TextStream(tokenizer, stop=["\\n\\n"])       # escape=True: for a terminal (zerollm sample, chat)
    piece = stream.push(token_id)     # text safe to send now ("" while a character or a stop is unsure)
    if stream.stopped: ...            # a stop string was written: the answer ends before it
    rest = stream.flush()             # at the end: what was held back

Two things are held back: the bytes of a UTF-8 character that a byte-level token cut in two
(zerollm.generation.display.StreamDecoder waits for the rest), and a tail that may be the start of a stop
string (sent once the next tokens show it is not). So a streamed answer is exactly the answer
that is not streamed, and never shows a broken character or a piece of a stop string. A request of
zerollm.generation.batching carries one: the scheduler pushes each id and ends the row at a stop string.

Stop strings are matched as in Knuth-Morris-Pratt (1977): each keeps how much of it the text so far ends
with, updated character by character, so a token costs O(its characters x stop strings), amortized, whatever the
stop strings' length (re-testing every prefix of a long stop string after each token froze the server).
The answer ends before the first stop string to be completed (the longest, if two end together),
wherever the token boundaries fall.
"""

from zerollm.generation.display import StreamDecoder


def border_table(s):
    """fail[n] = the length of the longest proper prefix of s[:n] that is also a suffix of it: where a
    match of n characters falls back to when the next character does not continue it.

    >>> border_table("abab")
    [0, 0, 0, 1, 2]
    """
    fail, k = [0] * (len(s) + 1), 0
    for i in range(1, len(s)):
        while k and s[i] != s[k]:
            k = fail[k]
        k += s[i] == s[k]
        fail[i + 1] = k
    return fail


class TextStream:
    """``escape``: control characters and bytes that are not UTF-8 shown as escapes, for a terminal
    (zerollm.generation.display.StreamDecoder); False (the default): the text for a program (JSON)."""

    def __init__(self, tokenizer, stop=(), escape=False):
        self.decoder = StreamDecoder(tokenizer, escape=escape)
        self.stop = [s for s in stop if s]
        self.fail = [border_table(s) for s in self.stop]
        self.matched = [0] * len(self.stop)  # per stop string: how many of its first characters the text ends with
        self.pending = ""                    # decoded, not sent: may begin a stop string
        self.text = ""                       # everything sent
        self.stopped = False

    def push(self, token_id):
        if self.stopped:
            return ""
        return self._release(self.decoder.push(token_id))

    def flush(self):
        """The held-back text once no token follows (a stop string it begins never came)."""
        if self.stopped:
            return ""
        piece = self._release(self.decoder.flush())
        if not self.stopped:
            piece, self.text, self.pending = piece + self.pending, self.text + self.pending, ""
        return piece

    def _advance(self, c):
        """Read one character -> the length of the longest stop string it completes, 0 if none."""
        done = 0
        for j, s in enumerate(self.stop):
            k, fail = self.matched[j], self.fail[j]
            while k and s[k] != c:
                k = fail[k]
            k += s[k] == c
            if k == len(s):
                done, k = max(done, k), fail[k]
            self.matched[j] = k
        return done

    def _release(self, new):
        """Send what of pending + new can no longer be part of a stop string. The held-back tail is the
        longest stop prefix the text ends with, so a stop completed in ``new`` starts within pending + new."""
        text = self.pending + new
        for i, c in enumerate(new, start=len(self.pending)):
            n = self._advance(c)
            if n:
                self.stopped, self.pending = True, ""
                self.text += text[:i + 1 - n]
                return text[:i + 1 - n]
        keep = max(self.matched, default=0)
        send, self.pending = text[:len(text) - keep], text[len(text) - keep:]
        self.text += send
        return send
