"""TRL's JSONL conventions: what is read, what is refused (with the file and line), and atomic writes."""

import json
import os

import pytest

from zerollm.io.errors import ZeroLLMError
from zerollm.data.formats import prompt_text, read_prefs, read_prompts, read_sft, write_jsonl

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+2="},
        {"role": "assistant", "content": "3"}]


def _file(tmp_path, *rows):
    path = tmp_path / "data.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def test_read_the_three_kinds_and_keep_extra_fields(tmp_path):
    sft = read_sft(_file(tmp_path, {"prompt": "藏头诗：春夏秋冬", "completion": "春...", "heads": "春夏秋冬"}, "",
                         {"messages": CHAT, "source": "hand"}))
    assert sft[0]["heads"] == "春夏秋冬" and sft[1]["source"] == "hand" and len(sft) == 2    # blank line skipped
    prefs = read_prefs(_file(tmp_path, {"prompt": "p", "chosen": "a", "rejected": "b", "corruption": "shuffled"}))
    assert prefs == [{"prompt": "p", "chosen": "a", "rejected": "b", "corruption": "shuffled"}]
    prompts = read_prompts(_file(tmp_path, {"prompt": "1+2=", "answer": 3}, {"prompt": CHAT[:2]}))
    assert prompts[0]["answer"] == 3 and prompt_text(prompts[1]["prompt"]) == "1+2="


@pytest.mark.parametrize("reader, line, fragment", [
    (read_sft, '{"prompt": "a", "completion": "b"', "line 2: not valid JSON"),
    (read_sft, '[1, 2]', "line 2: expected a JSON object"),
    (read_sft, {"prompt": "a"}, "line 2: missing key(s) 'completion'"),
    (read_sft, {"question": "a", "answer": "b"}, "line 2: an SFT row needs 'prompt' and 'completion', or 'messages'"),
    (read_sft, {"prompt": "a", "completion": ""}, "line 2: 'completion' is empty"),
    (read_sft, {"prompt": "a", "completion": 3}, "'completion' must be a string"),
    (read_sft, {"messages": CHAT, "prompt": "a"}, "either messages or prompt"),
    (read_sft, {"messages": [{"role": "robot", "content": "x"}]}, "unknown role 'robot'"),
    (read_sft, {"messages": [{"role": "user", "content": "x"}]}, "no assistant message"),
    (read_sft, {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}]},
     "assistant message is empty"),
    (read_sft, {"messages": [{"role": "user", "content": "x", "name": "y"}]}, "exactly the keys"),
    (read_sft, {"messages": CHAT[1:] + CHAT[:1]}, "system message; it may only come first"),
    (read_prefs, {"prompt": "a", "chosen": "b", "rejected": "b"}, "line 2: 'chosen' and 'rejected' are the same"),
    (read_prefs, {"prompt": "a", "chosen": "b"}, "missing key(s) 'rejected'"),
    (read_prefs, {"prompt": "a", "chosen": "", "rejected": "c"}, "'chosen' is empty"),
    (read_prompts, {"completion": "a"}, "missing key(s) 'prompt'"),
    (read_sft, {"prompt": "", "completion": "b"}, "line 2: 'prompt' is empty"),
    (read_prefs, {"prompt": "", "chosen": "b", "rejected": "c"}, "line 2: 'prompt' is empty"),
    (read_prompts, {"prompt": ""}, "line 2: 'prompt' is empty"),
    (read_sft, '{"prompt": "a", "completion": "b", "completion": "c"}', "line 2: the key 'completion' appears twice"),
    (read_prefs, '{"prompt": "a", "chosen": "b", "rejected": "c", "chosen": "d"}', "line 2: the key 'chosen' appears"),
    (read_sft, '{"messages": [{"role": "user", "content": "x", "content": "y"}]}', "the key 'content' appears twice"),
    (read_prompts, {"prompt": [{"role": "human", "content": "a"}]}, "unknown role 'human'"),
])
def test_bad_rows_name_the_file_and_line(tmp_path, reader, line, fragment):
    good = {"prompt": "p", "completion": "c", "chosen": "a", "rejected": "b"} if reader is not read_sft else \
        {"prompt": "p", "completion": "c"}
    path = _file(tmp_path, good, line)
    with pytest.raises(ZeroLLMError, match=r"data\.jsonl") as err:
        reader(path)
    assert fragment in str(err.value)


@pytest.mark.parametrize("content, fragment", [(None, "not found"), ("\n\n", "no examples"),
                                               (b"\xff\xfe{}\n", "line 1: not UTF-8")])
def test_missing_empty_or_binary_files(tmp_path, content, fragment):
    path = tmp_path / "x.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(ZeroLLMError, match=fragment):
        read_prompts(path)


def test_write_jsonl_round_trips_and_is_atomic(tmp_path):
    rows = [{"prompt": "藏头诗：春夏秋冬", "completion": "x"}, {"prompt": "1+2=", "completion": "3", "answer": 3}]
    path = tmp_path / "out.jsonl"
    write_jsonl(path, rows)
    assert "藏头诗" in path.read_text(encoding="utf-8") and read_sft(path) == rows
    with pytest.raises(ZeroLLMError, match="row 1 cannot be written"):
        write_jsonl(path, [{"prompt": "a", "completion": "b"}, {"prompt": object()}])
    assert read_sft(path) == rows and os.listdir(tmp_path) == ["out.jsonl"]     # old file whole, no temp file


def test_a_folder_given_as_data_is_named_as_such(tmp_path):
    with pytest.raises(ZeroLLMError, match="is a directory, not a JSONL file"):
        read_sft(tmp_path)
