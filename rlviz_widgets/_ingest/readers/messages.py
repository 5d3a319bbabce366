"""Generic chat JSON lines (``format="chat"``): records holding a ``messages`` list in the OpenAI chat format.

One record per sample: ``messages`` (``{role, content}`` objects; ``content`` text, a list of parts or null beside
assistant ``tool_calls`` ``[{id, type, function: {name, arguments: JSON text}}]``; tool results ``{role: "tool",
tool_call_id, content}``), beside the dumper's own ``reward``, ``step`` and group (the first of ``uid``,
``group_index``, ``group_id``, ``group``, ``prompt_idx``), or wherever ``columns=`` maps them. ``prompt``,
``response`` and ``answer`` come from the messages (``chat``); every other scalar field is a custom column.

The messages of a chunk's lines are read in C where it can (``native.read_messages``: what ``chat`` makes of them,
byte for byte, for lines that give no report), beside the reading; Python reads the other lines' as before. DuckDB
reads the rest of every line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import Future

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlviz_widgets._ingest.lines import Chunk
from rlviz_widgets._ingest.metrics import ARRAYS
from rlviz_widgets._ingest.native import read_messages_later
from rlviz_widgets._ingest.readers.chat import (
    ANSWER,
    Chat,
    chat_columns,
    messages_chat,
    with_answers,
    with_chats,
)
from rlviz_widgets._ingest.readers.jsonl import JsonlFormat, JsonlReader
from rlviz_widgets._ingest.readers.jsonl.arrow import mask
from rlviz_widgets._ingest.readers.jsonl.checks import DEFAULT_PAD_TOKEN, RESPONSE_CHARS, RESPONSE_PAD_CHARS
from rlviz_widgets._ingest.readers.jsonl.keyscan import candidate_keys, odd_values, repeated_keys, scan
from rlviz_widgets._ingest.readers.turns import ANSWER_SPAN, TURN_COLUMNS, turn_list

MESSAGES = "messages"
_PAD = DEFAULT_PAD_TOKEN.encode()  # counted in the responses by C as it writes them (checks.RESPONSE_PAD_CHARS)
_ROWS = ("turn", "role", "tool_name", "tool_arguments", "tool_call_id", "trained", "reasoning", "text_start",
         "text_end", "in_prompt")


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
    """The prompt, response, answer and turns of each record from its messages: those C read (``n_turns`` set)
    kept, the others read in Python."""
    if "_messages" not in t.column_names:
        return t
    if "n_turns" not in t.column_names:
        return with_chats(t, [_read(text) for text in t["_messages"].to_pylist()])
    left = np.flatnonzero(~mask(t["n_turns"].is_valid()))
    if "_n_" + ANSWER in t.column_names:  # the log's own field of that name: no answer of the messages kept
        t = t.drop_columns(list(ANSWER_SPAN))
    # the answers C read are spans of the response (``ANSWER_SPAN``), "" in their place
    answers = pc.if_else(t["answer_start"].is_valid(), "", pa.scalar(None, pa.string())) \
        if "answer_start" in t.column_names else pa.chunked_array([pa.nulls(t.num_rows, pa.string())])
    if len(left):  # the lines C left: their columns as with_chats makes them, put in their places
        n = t.num_rows
        mine = chat_columns([_read(text) for text in t["_messages"].take(left).to_pylist()], t["_reports"].take(left))
        order = np.arange(n)  # rows C read keep their place, the others take Python's rows
        order[left] = n + np.arange(len(left))
        take = pa.array(order)
        answers = pa.concat_arrays([*answers.chunks, mine[ANSWER]]).take(take)
        for c in ("prompt", "response", "_reports", *TURN_COLUMNS):
            col = t[c]
            t = t.set_column(t.schema.get_field_index(c), c,
                             pa.concat_arrays([*col.chunks, mine[c].cast(col.type)]).take(take))
    return with_answers(t, answers)


def _native_columns(got: dict[str, pa.Array] | None) -> tuple[pa.Array, dict[str, pa.Array]] | None:
    """``native.read_messages``' reading as ``JsonlReader._native_transform`` takes it: (the lines for DuckDB, the
    columns C gives by name)."""
    if got is None:
        return None
    # (no text: each turn's is its span of the prompt or response)
    turns = turn_list(got["row_offsets"], {f: got[f] for f in _ROWS}, pc.invert(got["handled"]))
    return got["lines"], {"prompt": got["prompt"], "response": got["response"], "turns": turns,
                          "n_turns": got["n_turns"], "n_tool_calls": got["n_tool_calls"],
                          **{c: got[c] for c in ANSWER_SPAN}, RESPONSE_CHARS: got["response_chars"],
                          RESPONSE_PAD_CHARS: pc.multiply(got["response_pads"], len(DEFAULT_PAD_TOKEN))}


def _native_found(got: dict[str, pa.Array] | None) -> tuple | None:
    """``_native_columns``, and what C saw of the lines it read (their keys and odd lines: ``native.Found``) with
    which lines those are (bool by line): a chunk whose messages C read as its keys are guessed (``ChatReader.
    settle`` takes them)."""
    if got is None:
        return None
    return (*_native_columns(got), (got["found"], np.asarray(got["handled"])))


def _reading(future: Future):
    """A future's result; None if it failed (the chunk is then read as it is)."""
    try:
        return future.result()
    except Exception:  # noqa: BLE001 - MemoryError, say: Python and DuckDB read the chunk instead
        return None


CHAT = JsonlFormat(name="chat", group_keys=("uid", "group_index", "group_id", "group", "prompt_idx"),
                   shown={"prompt": MESSAGES, "response": MESSAGES}, adjust=_adjust, decode=_decode)


class ChatReader(JsonlReader):
    format = CHAT

    def _read_in_c(self, chunk: Chunk) -> bool:
        """``JsonlReader._read_in_c`` (a chunk with lists C reads); else whether C reads the chunk's messages (those
        of its first lines' keys: ``_messages_in_c``) and, for the lines it reads, what the byte scan would find of
        them (their keys, odd lines; it reads no line with a key written twice): ``settle`` takes them, and has the
        byte scan look only at the lines C left."""
        if super()._read_in_c(chunk):
            return True
        keys = self._guessed_keys(chunk)
        if keys is None or not self._messages_in_c(keys):
            return False
        return self._read_whole_in_c(chunk, lambda p, texts: read_messages_later(p, MESSAGES, _native_found, _PAD,
                                                                                  texts))

    def settle(self, chunk: Chunk) -> None:
        """``JsonlReader.settle``; a chunk whose messages C read (``_read_in_c``): the keys and odd lines C found in
        the lines it read, those the byte scan finds in the others (with their keys written twice), its messages
        kept if its keys are still those C reads messages by."""
        if chunk.keys is not None or chunk.native is None:
            return
        parts = [_reading(f) if isinstance(f, Future) else f for f in chunk.native]
        if any(p is None or len(p) != 3 for p in parts):  # lists read in C, or a reading that failed
            super().settle(chunk)
            return
        chunk.native = None
        handled = np.concatenate([p[2][1] for p in parts])
        starts = np.cumsum([0, *(len(p[0]) for p in parts[:-1])])
        keys = set().union(*(p[2][0].keys for p in parts))
        odd = [p[2][0].odd + at for p, at in zip(parts, starts)]
        repeats = np.zeros(0, np.int64)
        left = np.flatnonzero(~handled)
        if len(left):  # the lines C left (a report to make, a shape it does not read): scanned as before
            rest = chunk.lines.take(pa.array(left))
            scanned = scan(rest)
            keys |= candidate_keys(rest, None, scanned)
            odd.append(left[odd_values(rest, None, list(self.naming().texts.values()), scanned)])
            repeats = left[repeated_keys(rest, None, scanned)]
        chunk.keys = keys
        chunk.odd = chunk.numbers[np.unique(np.concatenate(odd))]
        chunk.repeats = chunk.numbers[repeats]
        if self._messages_in_c(keys):
            chunk.native = [p[:2] for p in parts]

    def _messages_in_c(self, keys: set[str]) -> bool:
        """Whether C reads the messages of a chunk with ``keys``: no number arrays or tokens (C reads those as every
        format's, ``native_arrays``), the messages read as text, and no other spelling of ``messages``
        (json_transform matches keys whatever their case)."""
        fields = self.fields()
        return MESSAGES in keys and not any(fields[a] in keys for a in (*ARRAYS, "tokens")) and \
            "_messages" in self.spec(keys)[1] and not any(k != MESSAGES and k.casefold() == MESSAGES for k in keys)

    def native_arrays(self, chunk: Chunk) -> list[Future] | None:
        """A chunk's number arrays read in C as every format's are, if it has any; else its messages, read by
        ``native.read_messages`` (in lines that all open an object, without another spelling of ``messages``:
        json_transform matches keys whatever their case)."""
        keys = chunk.keys
        if keys is None or not len(chunk.lines) or (chunk.first_bytes != ord("{")).any():
            return None
        fields = self.fields()
        if any(fields[a] in keys for a in (*ARRAYS, "tokens")):
            return super().native_arrays(chunk)
        if not self._messages_in_c(keys):
            return None
        pieces = chunk.lines.chunks if isinstance(chunk.lines, pa.ChunkedArray) else [chunk.lines]
        futures = [read_messages_later(p, MESSAGES, _native_columns, _PAD) for p in pieces]
        return None if any(f is None for f in futures) else futures

    def parse(self, con: duckdb.DuckDBPyConnection, chunk: Chunk):
        """``JsonlReader.parse``; the lines whose messages C read are not looked at for a key written twice: it reads
        no line with one at its top (a line of chat messages repeats their keys, so the byte scan flags them all)."""
        if chunk.native is not None and chunk.repeats is not None and len(chunk.repeats):
            got = [_reading(f) for f in chunk.native]
            if all(g is not None and "n_turns" in g[1] for g in got):
                read = np.concatenate([mask(g[1]["n_turns"].is_valid()) for g in got])
                chunk.repeats = chunk.repeats[~np.isin(chunk.repeats, chunk.numbers[read])]
        return super().parse(con, chunk)
