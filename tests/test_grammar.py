"""Grammar-constrained decoding (zerollm.generation.grammar): the automaton against Python's re, the token
index against outlines-core's, the one decode loop's per-row masks, and what is refused."""

import json
import random
import re
import time

import jsonschema
import numpy as np
import pytest
from outlines_core import Index, Vocabulary

from zerollm.data import corpora
from zerollm.generation.batching import INCOMPLETE, Done, Request, Scheduler
from zerollm.generation.grammar import (DEAD, grammar_for_regex, grammar_for_schema, json_object_grammar,
                                        regex_for_schema)
from zerollm.generation.grammar.index import token_pieces
from zerollm.generation.grammar.regex import parse
from zerollm.generation.grammar.automaton import compile_tree
from zerollm.generation.sample import Sampling
from zerollm.io.errors import ZeroLLMError
from zerollm.model import GPT, GPTConfig
from zerollm.tokenizers import ByteTokenizer, CharTokenizer
from zerollm.tokenizers.bpe import BPETokenizer

PATTERNS = [r"ab?", r"[a-z]{1,3}x", r"(a|b)*c", r'"[^"\\]*"', r"春[夏秋]+", r".+", r"(ab|a)(c|bcd)",
            r"[^a-c]{2,4}", r"\d+\.\w*", r"(a*)+b", r"(|a)b", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?"]
SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
                                      "ok": {"type": "boolean"}}, "required": ["name", "age"]},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["red", "green", 3]},
                                               "minItems": 1, "maxItems": 3},
                                      "score": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
     "required": ["tags"]},
    {"$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                         "required": ["x", "y"]}},
     "type": "array", "items": {"$ref": "#/$defs/point"}, "maxItems": 2},
    {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
                                      "when": {"type": "string", "format": "date"}}, "required": ["id", "when"]},
]


# ----------------------------------------------------------------------------
# the automaton

@pytest.mark.parametrize("pattern", PATTERNS)
def test_automaton_accepts_what_python_re_fullmatches(pattern):
    dfa, ref = compile_tree(parse(pattern)), re.compile(pattern, re.ASCII)
    rng = random.Random(0)
    alphabet = 'abcdx"\\春夏秋.1é😀\n-0'
    for _ in range(1500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        state = dfa.step(0, text.encode())
        assert (state != DEAD and bool(dfa.accepting[state])) == bool(ref.fullmatch(text)), text


@pytest.mark.parametrize("pattern, limit", [
    ("(a|b)*a(a|b){20}", "20,000 states"), ("((a{100}){100}){100}", "200,000 states"),
    ("(" * 100 + "a" + ")" * 100, "more than 64 deep"), ("a{100000}", "limited to 1000"),
])
def test_hostile_patterns_are_refused_with_the_limit_quickly(pattern, limit):
    start = time.perf_counter()
    with pytest.raises(ZeroLLMError, match=re.escape(limit)):
        grammar_for_regex(pattern)
    assert time.perf_counter() - start < 60                  # refused, not hung (a generous bound under load)
    assert grammar_for_regex("(a|b)*a(a|b){3}").dfa.n_states == 16    # the same shape within the limit: 2**4


@pytest.mark.parametrize("pattern, named", [("(?=a)b", "look-ahead"), ("a*?", "lazy quantifier"),
                                            (r"(a)\1", "back-reference"), (r"\bx", "word boundary"),
                                            ("(?P<n>a)", "named group"), ("a^b", "anchor")])
def test_unsupported_syntax_is_refused_by_name(pattern, named):
    with pytest.raises(ZeroLLMError, match=named):
        parse(pattern)


# ----------------------------------------------------------------------------
# the token index against outlines-core's

def _gpt2_like(tmp):
    """A byte-level BPE the way GPT-2's is made (the 256 byte characters first, then merges), trained offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    text = corpora.read_text("shakespeare")[:60_000] + corpora.read_text("tang")[:20_000] + \
        ' {"name": "x", "age": 12, "ok": true, "tags": ["red"]} 2024-01-31 AB123'
    hf.train_from_iterator([text], trainers.BpeTrainer(vocab_size=700, special_tokens=["<|endoftext|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp / "tokenizer.json"
    hf.save(str(path))
    return BPETokenizer.from_hf_tokenizer_json(str(path))


TOKENIZERS = {
    "gpt2-like": _gpt2_like,
    "zerollm-bpe": lambda tmp: BPETokenizer.train(corpora.read_text("shakespeare")[:20_000] + ' {"a": 1}', 400),
    "zerollm-char": lambda tmp: CharTokenizer.train('{}[]":, -.@0123456789abcdefghijklmnopqrstuvwxyzABCEXYZT春夏秋')
    .with_special_tokens(["<|end|>"]),
}


def _outlines(tok, pattern):
    pieces = token_pieces(tok)
    by_bytes = {}
    for i, p in enumerate(pieces):
        if p:
            by_bytes.setdefault(p, []).append(i)
    eos = len(pieces)                            # an id of its own: outlines lists it in final states
    return Index(pattern, Vocabulary(eos, by_bytes)), eos


@pytest.mark.parametrize("tok_name", list(TOKENIZERS))
def test_allowed_tokens_match_outlines_core_along_random_walks(tok_name, tmp_path):
    """State by state, the same ids as outlines-core's Index for the same pattern and vocabulary. The one
    difference is outlines-core's: in an accepting state it lists only tokens that end in an accepting state
    (after "1" under -?[0-9]+(\\.[0-9]+)? it refuses "."), so there ours may hold more, each leading on."""
    tok = TOKENIZERS[tok_name](tmp_path)
    patterns = [r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", r"(yes|no|maybe)", r"[a-z]+@[a-z]+\.(com|org)", r'"[^"\\]*"',
                "春[夏秋]{1,3}" if tok_name != "zerollm-char" else "[a-c]{2,5}"] + \
        [regex_for_schema(s) for s in SCHEMAS]
    rng = random.Random(1)
    for pattern in patterns:
        index = grammar_for_regex(pattern).index(tok)
        ref, eos = _outlines(tok, pattern)
        extra = 0
        for _ in range(8):
            ours, theirs = index.start, ref.get_initial_state()
            for _ in range(40):
                mine = set(np.flatnonzero(index.allowed(ours, {eos} if eos < tok.vocab_size else ())).tolist())
                if eos >= tok.vocab_size and index.accepting(ours):
                    mine.add(eos)
                other = set(ref.get_allowed_tokens(theirs))
                assert other <= mine, (pattern, ours)
                assert index.accepting(ours) or mine == other, (pattern, ours, sorted(mine ^ other)[:5])
                for t in mine - other:                      # outlines-core's accepting-state rule, nothing else
                    assert not index.accepting(index.next_state(ours, t)), (pattern, t)
                extra += len(mine - other)
                pick = sorted(other - {eos})
                if not pick:
                    break
                t = rng.choice(pick)
                ours, theirs = index.next_state(ours, t), ref.get_next_state(theirs, t)
                assert index.accepting(ours) == ref.is_final_state(theirs)
        assert grammar_for_regex(pattern).dfa.n_states > 1


def test_special_tokens_are_never_text_and_the_end_only_where_the_text_is_complete():
    tok = ByteTokenizer().with_special_tokens(["<|user|>", "<|end|>"])
    user, end = tok.special_tokens["<|user|>"], tok.special_tokens["<|end|>"]
    index = grammar_for_regex("a+").index(tok)
    assert not index.allowed(index.start, {end})[[user, end]].any()
    after = index.next_state(index.start, ord("a"))
    assert index.allowed(after, {end})[end] and not index.allowed(after, {end})[user]
    assert index.next_state(index.start, ord("b")) == DEAD


# ----------------------------------------------------------------------------
# JSON Schema

def test_schema_text_matches_what_json_dumps_writes_both_ways():
    dfa = grammar_for_schema(SCHEMAS[0]).dfa
    value = {"name": "春 \"x\"", "age": -3, "ok": True}
    for text in (json.dumps(value), json.dumps(value, separators=(",", ":")), json.dumps(value, ensure_ascii=False)):
        state = dfa.step(0, text.encode())
        assert state != DEAD and dfa.accepting[state], text
    for wrong in ('{"age": 3}', '{"name": "x", "age": 03}', '{"name": "x",  "age": 3}', '{"name":"x","age":3,}'):
        state = dfa.step(0, wrong.encode())
        assert state == DEAD or not dfa.accepting[state], wrong


@pytest.mark.parametrize("schema, named", [
    ({"type": "integer", "minimum": 0}, "minimum"), ({"type": "object", "properties": {}, "allOf": []}, "allOf"),
    ({"type": "string", "format": "email"}, "format 'email'"), ({"not": {}}, "not"),
    ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "recursive"),
    ({"type": "string", "pattern": "[^x]"}, "could write"),
])
def test_unsupported_schema_keywords_are_refused_by_name(schema, named):
    with pytest.raises(ZeroLLMError, match=re.escape(named)):
        grammar_for_schema(schema)


def test_hostile_schemas_are_refused_with_the_limit_and_their_neighbours_accepted():
    def nested(n):
        schema = {"type": "integer"}
        for _ in range(n):
            schema = {"type": "array", "items": schema, "maxItems": 2}
        return schema
    with pytest.raises(ZeroLLMError, match="more than 32 schemas deep"):
        grammar_for_schema(nested(40))
    dfa = grammar_for_schema(nested(5)).dfa
    state = dfa.step(0, b"[[[[[1, 2]]]], []]")
    assert state != DEAD and dfa.accepting[state]
    with pytest.raises(ZeroLLMError, match="200,000 states"):
        grammar_for_schema({"enum": [f"value number {i}" for i in range(8_000)]})    # refused before it is built
    assert grammar_for_schema({"enum": [f"v{i}" for i in range(200)]}).dfa.n_states > 3


# ----------------------------------------------------------------------------
# in the one decode loop

def _model(tok, seed=0):
    np.random.seed(seed)
    return GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=256, n_layer=1, n_head=2, n_embd=16))


def _run(model, reqs):
    done = {}
    for events in Scheduler(model).stream(reqs):
        done.update({i: ev for i, ev in events if isinstance(ev, Done)})
    return done


def test_sampled_outputs_validate_under_each_schema_and_unconstrained_ones_mostly_do_not():
    """At temperature 1.5 from an untrained model: every constrained output is valid (scripts/grammar_outputs.py
    runs 500 per schema); without the grammar almost none even parses."""
    tok = ByteTokenizer().with_special_tokens(["<|end|>"])
    end = tok.special_tokens["<|end|>"]
    model = _model(tok)
    valid_free = 0
    for k, schema in enumerate(SCHEMAS + [None]):
        index = (grammar_for_schema(schema) if schema else json_object_grammar()).index(tok)
        reqs = [Request([10], 200, Sampling(temperature=1.5), np.random.default_rng(100 * k + i),
                        stop_ids=frozenset({end}), grammar=index) for i in range(12)]
        free = [Request([10], 60, Sampling(temperature=1.5), np.random.default_rng(i), stop_ids=frozenset({end}))
                for i in range(12)]
        done = _run(model, reqs + free)
        for i, req in enumerate(reqs):
            if done[i].reason == "length":
                assert done[i].message == INCOMPLETE
                continue
            value = json.loads(bytes(t for t in req.ids if t != end).decode("utf-8"))
            jsonschema.validate(value, schema or {"type": "object"})
        valid_free += sum(_valid(bytes(t for t in r.ids if t < 256), schema) for r in free)
        assert sum(done[i].reason == "stop" for i in range(12)) >= 6       # most end well within 200 tokens
    assert valid_free <= 2


def _valid(data, schema):
    try:
        jsonschema.validate(json.loads(data.decode("utf-8")), schema or {"type": "object"})
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


def test_rows_of_one_batch_have_their_own_grammar_or_none_and_length_says_incomplete():
    tok = ByteTokenizer()
    model = _model(tok, 1)
    yes_no, digits = grammar_for_regex("(yes|no)").index(tok), grammar_for_regex("[0-9]{30}").index(tok)
    reqs = [Request([5], 20, Sampling(temperature=1.0), np.random.default_rng(i), grammar=g)
            for i, g in enumerate([yes_no, None, digits, yes_no])]
    reqs.append(Request([5], 5, Sampling(temperature=1.0), np.random.default_rng(9), grammar=digits))
    done = _run(model, reqs)
    assert bytes(reqs[0].ids) in (b"yes", b"no") and bytes(reqs[3].ids) in (b"yes", b"no")
    assert done[0].reason == done[3].reason == "stop"
    assert re.fullmatch(rb"[0-9]{20}", bytes(reqs[2].ids)) and done[2] == Done("length", INCOMPLETE)
    assert not re.fullmatch(rb"[0-9]*", bytes(reqs[1].ids))             # the free row is not masked
    assert re.fullmatch(rb"[0-9]{5}", bytes(reqs[4].ids)) and done[4].message == INCOMPLETE


# ----------------------------------------------------------------------------
# the commands

@pytest.mark.slow
def test_zerollm_sample_regex_and_json_schema(tmp_path_factory, capsys):
    from tiny_runs import run_main, tiny_run
    run = tiny_run(tmp_path_factory, "bpe")
    code, out, err = run_main(["sample", "--ckpt", run, "--prompt", "Age: ", "--regex", "[1-9][0-9]{0,2} years",
                               "--temperature", "1.5", "--seed", "1", "--num-samples", "3"], capsys)
    assert code == 0, err
    answers = [a.strip().removeprefix("Age: ") for a in out.split("---------------")]
    assert len(answers) == 3 and all(re.fullmatch(r"[1-9][0-9]{0,2} years", a) for a in answers), answers
    schema = tmp_path_factory.mktemp("schema") / "s.json"
    person = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[a-z ]{1,8}$"},
                                               "age": {"type": "integer"}}, "required": ["name", "age"]}
    schema.write_text(json.dumps(person))       # printable names: sample shows other characters escaped
    code, out, err = run_main(["sample", "--ckpt", run, "--prompt", "x", "--json-schema", schema,
                               "--temperature", "1.5", "--seed", "2", "--max-new-tokens", "150"], capsys)
    assert code == 0, err
    jsonschema.validate(json.loads(out.removeprefix("x")), person)
    code, out, err = run_main(["sample", "--ckpt", run, "--prompt", "x", "--regex", "[0-9]{40}",
                               "--max-new-tokens", "3"], capsys)
    assert code == 0 and INCOMPLETE in err
    code, out, err = run_main(["sample", "--ckpt", run, "--regex", "(?=x)y"], capsys)
    assert code != 0 and "look-ahead" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("lang, words", [("en", "accepting"), ("zh", "接受")])
def test_zerollm_grammar_explain_walks_the_text(capsys, lang, words):
    from tiny_runs import run_main
    code, out, err = run_main(["grammar", "--regex", "(yes|no)!", "--text", "yes!", "--explain", "--lang", lang,
                               "--tokenizer", "byte"], capsys)
    assert code == 0, err
    assert words in out and out.count("2/256") + out.count("1/256") == 4    # 'n' 'y', then one byte at a time
    code, out, err = run_main(["grammar", "--regex", "(yes|no)!", "--text", "yep", "--explain", "--tokenizer", "byte"],
                              capsys)
    assert code == 0 and "NOT allowed" in out


def test_rollouts_of_sample_completions_follow_the_grammar():
    from zerollm.generation.decode import Completions, sample_completions
    tok = ByteTokenizer().with_special_tokens(["<|end|>"])
    end = tok.special_tokens["<|end|>"]
    how = Completions(40, Sampling(temperature=1.5), (end,), grammar_for_regex(r"\d+ apples?").index(tok))
    outs = sample_completions(_model(tok, 2), [[1, 2], [3], [4, 5, 6]], how, seeds=range(3))
    for ids in outs:
        text = bytes(t for t in ids if t != end)
        assert re.fullmatch(rb"\d+ apples?", text) or (len(ids) == 40 and re.fullmatch(rb"\d+( a?p?p?l?e?s?)?", text))


def test_grammars_are_cached_per_pattern_and_tokenizer_and_rows_made_lazily():
    tok, other = ByteTokenizer(), ByteTokenizer()
    grammar = grammar_for_regex("[a-z]+@[a-z]+")
    assert grammar_for_regex("[a-z]+@[a-z]+") is grammar
    index = grammar.index(tok)
    assert grammar.index(tok) is index and grammar.index(other) is not index
    assert index.rows == {}                                   # nothing made before it is asked for
    index.allowed(index.start)
    assert list(index.rows) == [index.start]
    assert grammar_for_schema(SCHEMAS[0]) is grammar_for_schema(json.loads(json.dumps(SCHEMAS[0])))


def test_a_grammar_indexed_over_another_vocabulary_size_is_refused_before_it_runs():
    tok = ByteTokenizer()
    model = GPT(GPTConfig(vocab_size=300, block_size=32, n_layer=1, n_head=2, n_embd=16))
    wrong = Request([1], 4, Sampling(), np.random.default_rng(0), grammar=grammar_for_regex("a+").index(tok))
    with pytest.raises(ZeroLLMError, match="indexed over 256 ids but the model has 300"):
        list(Scheduler(model).stream([wrong]))
    right = Request([1], 4, Sampling(), np.random.default_rng(0), grammar=grammar_for_regex("a+").index(tok, 300))
    _run(model, [right])
    assert bytes(right.ids) == b"aaaa"
