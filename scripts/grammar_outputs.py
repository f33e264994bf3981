"""How often sampled text is valid JSON for a schema, with the grammar mask and without (docs/structured.md).

    python scripts/grammar_outputs.py --ckpt runs/json-base --n 500 --temperature 1.5

For each schema below, --n completions of the same prompt at --temperature go through the one decode
loop (zerollm.generation.decode.sample_completions, as RL rollouts do) once under the schema's grammar
and once free; each is checked with the ``jsonschema`` package. Prints one row per schema: valid,
ended by the grammar (complete) or by max tokens, and the free outputs that are valid.
"""

import argparse
import json
import sys
import time

import jsonschema

from zerollm.generation.decode import Completions, sample_completions
from zerollm.generation.grammar import grammar_for_schema
from zerollm.generation.sample import Sampling
from zerollm.interop.opening import Source, open_model
from zerollm.io import docsmode

SCHEMAS = {
    "person": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 16},
                                                "age": {"type": "integer"}, "id": {"type": "string", "format": "uuid"}},
               "required": ["name", "age"]},
    "tags": {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]},
                                                       "minItems": 1, "maxItems": 4},
                                              "score": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
             "required": ["tags", "score"]},
    "points": {"$defs": {"p": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                               "required": ["x", "y"]}},
               "type": "array", "items": {"$ref": "#/$defs/p"}, "maxItems": 3},
    "answer": {"type": "object", "properties": {"verdict": {"enum": ["yes", "no", "unsure"]},
                                                "reason": {"type": "string", "pattern": "[a-z ]{1,40}"}},
               "required": ["verdict", "reason"]},
}


def valid(text, schema):
    try:
        jsonschema.validate(json.loads(text), schema)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


def measure(model, tok, schema, args):
    """(valid constrained, complete constrained, valid free) counts out of args.n."""
    end = tok.special_tokens.get("<|endoftext|>")
    stops = () if end is None else (end,)
    prompt = [tok.encode(args.prompt)] * args.n
    sampling = Sampling(temperature=args.temperature)
    text = (lambda ids: tok.decode([t for t in ids if t not in stops]))
    index = grammar_for_schema(schema).index(tok, model.config.vocab_size)
    held = sample_completions(model, prompt, Completions(args.max_new_tokens, sampling, stops, index),
                              seeds=range(args.n))
    free = sample_completions(model, prompt, Completions(args.max_new_tokens, sampling, stops), seeds=range(args.n))
    complete = sum(index.accepting(_state(index, ids, stops)) for ids in held)
    return sum(valid(text(ids), schema) for ids in held), complete, sum(valid(text(ids), schema) for ids in free)


def _state(index, ids, stops):
    state = index.start
    for t in ids:
        if t not in stops:
            state = index.next_state(state, t)
    return state


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckpt", required=True, help="a run or model directory (a barely trained one shows it best)")
    p.add_argument("--n", type=int, default=500, help="completions per schema and side (default 500)")
    p.add_argument("--temperature", type=float, default=1.5)
    p.add_argument("--max-new-tokens", type=int, default=200)
    p.add_argument("--prompt", default="JSON: ")
    args = p.parse_args(argv)
    if docsmode.active():          # tests/test_docs_run.py runs every documented command line, in seconds
        print(f"{docsmode.ENV} is set: 4 completions per schema and side, 40 tokens", file=sys.stderr)
        args.n, args.max_new_tokens = 4, 40
    opened = open_model(Source(ckpt=args.ckpt))
    print(f"{args.n} completions per schema at temperature {args.temperature}, at most {args.max_new_tokens} "
          f"tokens, prompt {args.prompt!r}, model {args.ckpt}")
    print(f"{'schema':<8} {'valid with grammar':>19} {'complete':>9} {'valid without':>14} {'seconds':>8}")
    for name, schema in SCHEMAS.items():
        start = time.perf_counter()
        ok, complete, free = measure(opened.model, opened.tokenizer, schema, args)
        print(f"{name:<8} {ok:>12}/{args.n:<6} {complete:>9} {free:>8}/{args.n:<5} {time.perf_counter() - start:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
