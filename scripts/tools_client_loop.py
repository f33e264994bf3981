"""The whole tool loop, driven by the official openai client against `zerollm serve` (#58), on many problems.

    zerollm serve --ckpt runs/calc-sft --port 8125 &
    python scripts/tools_client_loop.py --url http://127.0.0.1:8125/v1 --data calc-heldout.jsonl --n 200

For each problem (a row of `zerollm tasks make calc`: "prompt" and "answer"), the client sends the question
with the calculator in `tools` (temperature 0); when the answer holds tool calls, it runs each with
zerollm's calculator (the client's own tool, as an application would), sends the results as `tool`
messages, and asks again; the loop succeeds when the model asked for the calculator and its final
`content` is the product. Not streamed and streamed (the calls put together from the deltas as OpenAI
sends them), the same problems. Prints the success of each with its 95% Wilson interval, how often the
model called, and the first conversation whole (--show). ZEROLLM_DOCS_TEST=1: 4 problems.
"""

import argparse
import json
import os
import sys

from zerollm.io import docsmode


def ask(client, messages, stream, tools):
    """One chat request -> (reasoning, content, [(id, name, arguments)], finish_reason)."""
    client, model = client
    create = dict(model=model, messages=messages, tools=tools, temperature=0)   # max_tokens: what the context leaves
    if not stream:
        choice = client.chat.completions.create(**create).choices[0]
        m = choice.message
        calls = [(c.id, c.function.name, c.function.arguments) for c in m.tool_calls or ()]
        return getattr(m, "reasoning_content", None), m.content, calls, choice.finish_reason
    reasoning, content, calls, finish = "", "", {}, None
    for chunk in client.chat.completions.create(stream=True, **create):
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta.model_dump()
        reasoning += delta.get("reasoning_content") or ""
        content += delta.get("content") or ""
        for c in choice.delta.tool_calls or ():
            if c.index not in calls:                      # the first delta of a call: its id, type and name
                calls[c.index] = [c.id, c.function.name, ""]
            else:
                calls[c.index][2] += c.function.arguments
        finish = choice.finish_reason or finish
    return reasoning or None, content or None, [tuple(c) for c in calls.values()], finish


def loop(client, row, stream, box):
    """One problem through the whole loop -> (success, called, the conversation)."""
    from zerollm.align.tools import CALCULATOR
    from zerollm.data.chat import ToolCall
    messages = [{"role": "user", "content": row["prompt"]}]
    reasoning, content, calls, finish = ask(client, messages, stream, [CALCULATOR])
    said = {"role": "assistant", "content": content, "finish_reason": finish}
    if reasoning is not None:
        said["reasoning_content"] = reasoning
    if not calls:
        return False, False, messages + [said]
    said["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls]
    messages.append({k: v for k, v in said.items() if k != "finish_reason"})
    shown = messages[:-1] + [said]
    for cid, name, arguments in calls:                # the client runs each call itself
        try:
            result = box.run(ToolCall(name, json.loads(arguments)))
        except ValueError:
            result = "error: the arguments are not JSON"
        messages.append({"role": "tool", "tool_call_id": cid, "content": result})
        shown.append(messages[-1])
    reasoning, content, calls, finish = ask(client, messages, stream, [CALCULATOR])
    shown.append({"role": "assistant", "content": content, "finish_reason": finish,
                  **({"reasoning_content": reasoning} if reasoning is not None else {})})
    return (content or "").strip() == str(row["answer"]), True, shown


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the server's /v1 address")
    p.add_argument("--data", required=True, help="calc rows (tasks make calc), heldout")
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--show", action="store_true", help="print the first problem's conversation, each mode")
    p.add_argument("--json", default=None, help="write the results there")
    args = p.parse_args()
    import openai
    from zerollm.align.tasks.evaluate import wilson
    from zerollm.align.tools import load_tools
    n = min(args.n, 4) if docsmode.active() else args.n
    rows = [json.loads(line) for line in open(args.data, encoding="utf-8")][:n]
    os.environ["NO_PROXY"] = "127.0.0.1,localhost," + os.environ.get("NO_PROXY", "")
    client = openai.OpenAI(base_url=args.url, api_key="none", max_retries=0, timeout=120)
    client = (client, client.models.list().data[0].id)              # the served model's name
    box, results = load_tools(), {}
    for stream in (False, True):
        mode = "streamed" if stream else "not streamed"
        outcomes = [loop(client, row, stream, box) for row in rows]
        k, called = sum(o[0] for o in outcomes), sum(o[1] for o in outcomes)
        low, high = wilson(k, len(rows))
        results[mode] = {"n": len(rows), "successes": k, "called": called, "ci95": [low, high],
                         "first": outcomes[0][2]}
        print(f"{mode}: the whole loop right on {k}/{len(rows)} = {k / len(rows):.1%} (95% CI {low:.1%}-{high:.1%}); "
              f"the model called the calculator on {called}/{len(rows)}")
        if args.show:
            for m in outcomes[0][2]:
                print("   ", json.dumps(m, ensure_ascii=False))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
