"""Generic chat JSON lines (``format="chat"``): records holding a ``messages`` list in the OpenAI chat format.

One record per sample: ``messages`` (``{role, content}`` objects; ``content`` text, a list of parts or null beside
assistant ``tool_calls`` ``[{id, type, function: {name, arguments: JSON text}}]``; tool results ``{role: "tool",
tool_call_id, content}``), beside the dumper's own ``reward``, ``step`` and group (the first of ``uid``,
``group_index``, ``group_id``, ``group``, ``prompt_idx``), or wherever ``columns=`` maps them. ``prompt``,
``response`` and ``answer`` come from the messages (``chat``); every other scalar field is a custom column.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pyarrow as pa

from rlviz_widgets._ingest.readers.chat import Chat, messages_chat, with_chats
from rlviz_widgets._ingest.readers.jsonl import JsonlFormat, JsonlReader

MESSAGES = "messages"


def _adjust(schema: dict[str, str], ex: dict[str, str | None], used: set[str], f: Mapping[str, str],
            mapped: set[str]) -> None:
    """The messages as JSON text, split into the texts in Python (``_decode``); unless ``columns=`` maps the
    prompt or the response elsewhere."""
    if "prompt" in mapped or "response" in mapped:
        return
    for c in ("prompt", "response"):
        schema.pop(f[c], None)  # a field of that name beside the messages stays a custom column
        ex[c] = "NULL::VARCHAR"
    schema[MESSAGES] = "JSON"
    ex["_messages"] = f"(r.{MESSAGES})::VARCHAR"
    ex["_reports"] = "[]::VARCHAR[]"
    used.add(MESSAGES)


def _read(text: str | None) -> Chat:
    """A record's texts from its ``messages`` (JSON text); a record without a list of them is reported."""
    messages = json.loads(text) if text else None
    if isinstance(messages, list):
        return messages_chat(messages)
    if messages is None:
        return Chat(None, None, None, ["missing_field|no messages: prompt and response left empty"])
    return Chat(None, None, None, ["wrong_type|messages is not a list of messages: prompt and response left empty"])


def _decode(t: pa.Table, tokenizer) -> pa.Table:
    """The prompt, response, answer and turns of each record from its messages."""
    if "_messages" not in t.column_names:
        return t
    return with_chats(t, [_read(text) for text in t["_messages"].to_pylist()])


CHAT = JsonlFormat(name="chat", group_keys=("uid", "group_index", "group_id", "group", "prompt_idx"),
                   shown={"prompt": MESSAGES, "response": MESSAGES}, adjust=_adjust, decode=_decode)


class ChatReader(JsonlReader):
    format = CHAT
