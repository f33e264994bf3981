"""The one exception type for mistakes a user can make (bad shapes, configs, files, text).

Library code raises ``ZeroLLMError`` with a message that names the problem AND the fix.
The CLI catches it and prints that message as a single line on stderr (no traceback).
It subclasses ValueError so ``except ValueError`` in user scripts keeps working.
"""


class ZeroLLMError(ValueError):
    """A problem with the user's input; the message says what to change."""
