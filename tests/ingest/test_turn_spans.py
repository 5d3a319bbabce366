"""A turn's text is stored as its span in the sample's prompt or response (``turns.stored_rows``, and
``messages.c`` for the turns it reads): cut out of them, every span gives the turn's text, and C's reading
gives the spans Python's does."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from test_chat_native import fuzz_records, needs_lib

from rlviz_widgets._ingest import native
from rlviz_widgets._ingest.readers.chat import conversation, messages_chat
from rlviz_widgets._ingest.readers.sequence import train_turns
from rlviz_widgets._ingest.readers.turns import Call, Turn, stored_rows, turn_rows

SPAN = ("text_start", "text_end", "in_prompt")


def _cut(chat, row: dict) -> str:
    """The text a stored row's span names."""
    text = chat.prompt if row["in_prompt"] else chat.response
    return text.encode()[row["text_start"]:row["text_end"]].decode()


def _check(chat) -> None:
    """Every stored row with a text has a span giving it; the others (a turn's later calls) have neither."""
    shown = turn_rows(chat.turns)
    for row, want in zip(stored_rows(chat.turns), shown, strict=True):
        assert row["text"] is None
        if want["text"] is None:
            assert all(row.get(f) is None for f in SPAN)
        else:
            assert _cut(chat, row) == want["text"], (row, want)


@pytest.mark.parametrize("seed", range(4))
def test_every_text_is_its_span_of_the_prompt_or_response(seed):
    """Python's reading, of plain and odd messages alike (reasoning, calls without text, empty texts, non-ASCII)."""
    for line in fuzz_records(seed, 300):
        messages = json.loads(line).get("messages")
        if isinstance(messages, list):
            _check(messages_chat(messages))


def test_spans_of_turns_without_roles_and_a_given_response_start():
    """NeMo-RL train files: prompt texts shown without a role line, the response where the loss mask says."""
    texts = ["<|im_start|>user\nQ é<|im_end|>", "A1", "Environment: correct", "A2 数据"]
    turns, first = train_turns(texts, [False] * 3 + [True] * 2 + [False] * 2 + [True] * 3)
    chat = conversation(turns, first)
    _check(chat)
    assert [r["in_prompt"] for r in stored_rows(chat.turns)] == [True, False, False, False]
    reasoning = [Turn("user", "q"), Turn("assistant", "", [Call("f", "{}", "a"), Call("g", "[1]", "b")], reasoning="r"),
                 Turn("tool", "1", call_id="a"), Turn("assistant", "ünï", reasoning="ok")]
    chat = conversation(reasoning, 1)
    _check(chat)


@needs_lib
def test_c_reading_gives_python_spans():
    lines = [x for seed in range(4) for x in fuzz_records(seed, 400)]
    got = native.read_messages(pa.array([x + "\n" for x in lines], pa.large_string()), "messages")
    spans = {f: got[f].to_pylist() for f in SPAN}
    offsets = got["row_offsets"].to_pylist()
    read = 0
    for i, line in enumerate(lines):
        if not got["handled"][i].as_py():
            continue
        read += 1
        mine = [{f: spans[f][r] for f in SPAN} for r in range(offsets[i], offsets[i + 1])]
        turns = messages_chat(json.loads(line)["messages"]).turns
        python = [{f: row.get(f) for f in SPAN} for row in stored_rows(turns)]
        assert mine == python, line
    assert read > len(lines) // 4
