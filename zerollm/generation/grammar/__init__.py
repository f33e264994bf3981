"""Grammar-constrained decoding: a regex or a JSON Schema decides which token ids may come next.

    pattern (regex.py) -> tree -> byte DFA (automaton.py) -> token index over a vocabulary (index.py)
    JSON Schema (schema.py) -> tree, the same way

The API other parts of zerollm call (the server's response_format, `zerollm sample --regex/--json-schema`,
rollouts, forced tool calls):

    grammar = grammar_for_regex(r"(yes|no)")              # or grammar_for_schema(schema), json_object_grammar()
    regex_for_schema(schema)                              # the same schema as a pattern (to show, or compare)
    index = grammar.index(tokenizer, model.config.vocab_size)    # cached per (grammar, tokenizer)
    Grammar(Cat((marker(0), tree)), "...").index(tok, V, markers=[think_id])   # special tokens in a grammar
    Request(prompt, 64, sampling, rng, stop_ids={end}, grammar=index)    # zerollm.generation.batching

The Scheduler (zerollm.generation.batching) keeps one state per row: before each choice the row's mask is
index.allowed(state, stop ids) (next to the model's own ``allowed``), after it the state moves on with
index.next_state. The stop ids (the end-of-turn id of a chat model) are allowed only in an accepting state;
a state that accepts and can go no further ends the row with Done("stop"); max_new_tokens reached before
the text is complete ends it with Done("length") and a message saying so. Rows of one batch each have their
own grammar or none. Grammar rows are not speculated (a draft model's tokens would need the same mask).

Grammars are cached: by pattern (grammar_for_regex) or by the schema's canonical JSON, and each grammar
keeps its index per tokenizer, so a second request with the same schema reuses the rows already made.
"""

import functools
import json
import threading
import weakref

from zerollm.io.errors import ZeroLLMError
from zerollm.generation.grammar.automaton import DEAD, compile_tree
from zerollm.generation.grammar.index import TokenIndex, vocab_of
from zerollm.generation.grammar.regex import parse, to_regex
from zerollm.generation.grammar.schema import json_object, schema_tree

__all__ = ["Grammar", "grammar_for_regex", "grammar_for_schema", "json_object_grammar", "regex_for_schema",
           "TokenIndex", "DEAD"]


class Grammar:
    """A pattern compiled to its byte DFA, with an index per tokenizer made on first use."""

    def __init__(self, tree, source):
        self.tree, self.source = tree, source
        self.dfa = compile_tree(tree)
        if self.dfa.accepting[0] and not (self.dfa.delta[0] >= 0).any():
            raise ZeroLLMError("the pattern matches only the empty text, so there is nothing to generate")
        self._indexes = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    @property
    def pattern(self):
        return to_regex(self.tree)

    def index(self, tokenizer, vocab_size=None, markers=()):
        """The TokenIndex of this grammar over ``tokenizer`` (padded to ``vocab_size`` ids); ``markers``: the
        special token ids its automaton.marker(k) nodes stand for (a forced tool call's <tool_call>)."""
        V = tokenizer.vocab_size if vocab_size is None else vocab_size
        key = (V, tuple(markers))
        with self._lock:
            per = self._indexes.setdefault(tokenizer, {})
            if key not in per:
                per[key] = TokenIndex(self.dfa, vocab_of(tokenizer, V, key[1]))
            return per[key]


@functools.lru_cache(maxsize=64)
def grammar_for_regex(pattern):
    """The Grammar of a regular expression (regex.py's syntax); the whole text must match."""
    return Grammar(parse(pattern), pattern)


def grammar_for_schema(schema):
    """The Grammar of a JSON Schema (schema.py's subset)."""
    return _schema_grammar(_canonical(schema))


def regex_for_schema(schema):
    """A JSON Schema as a regular expression (whitespace as schema.py states)."""
    return to_regex(schema_tree(schema))


@functools.lru_cache(maxsize=8)
def json_object_grammar(depth=None):
    """Any JSON object, nested at most ``depth`` deep (schema.JSON_DEPTH by default)."""
    return Grammar(json_object() if depth is None else json_object(depth), "json_object")


@functools.lru_cache(maxsize=64)
def _schema_grammar(text):
    return Grammar(schema_tree(json.loads(text)), text)


def _canonical(schema):
    try:
        return json.dumps(schema, ensure_ascii=False)      # key order kept: properties are written in it
    except (TypeError, ValueError) as err:
        raise ZeroLLMError(f"the JSON Schema is not plain JSON: {err}") from None
