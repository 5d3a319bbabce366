"""A sample's turns as a part stores them: the list column ``turns`` (one struct per turn, or per tool call of a
turn that makes several), and ``n_turns`` / ``n_tool_calls`` beside it. The contract: docs/internals.md, "Turns".

A turn's text is stored as where it stands in the sample's ``prompt`` or ``response`` (``text_start`` /
``text_end``, UTF-8 bytes, and ``in_prompt``), not as a copy: the run cuts it out when asked. Only a text shown
nowhere else (none so far) would keep ``text``.

A log without message structure stores none (its parts have no such columns): the run makes its two turns from
the prompt and the response when asked (``run.turns``), so its parts stay as they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

TURN = pa.struct([("turn", pa.int32()), ("role", pa.string()), ("text", pa.string()), ("tool_name", pa.string()),
                  ("tool_arguments", pa.string()), ("tool_call_id", pa.string()), ("start", pa.int32()),
                  ("end", pa.int32()), ("trained", pa.bool_()), ("reasoning", pa.string()),
                  ("text_start", pa.int32()), ("text_end", pa.int32()), ("in_prompt", pa.bool_())])
TURNS = pa.list_(TURN)
TURN_COLUMNS = {"turns": TURNS, "n_turns": pa.int32(), "n_tool_calls": pa.int32()}  # a part's, in this order
# ... and where the answer (``chat.ANSWER``, a custom text column) stands in the response (UTF-8 bytes), in the rows
# whose stored answer is "" in its place (read in C: the answer is not written twice); null in the others
ANSWER_SPAN = {"answer_start": pa.int32(), "answer_end": pa.int32()}


@dataclass
class Call:
    """A tool call: the tool's name, its arguments as JSON text (as written where they are not JSON), its id."""

    name: str
    arguments: str
    id: str | None = None


@dataclass
class Turn:
    """One message of a sample, as read (``chat.read_message``)."""

    role: str
    text: str  # the content as text ("" when it has none)
    calls: list[Call] = field(default_factory=list)
    call_id: str | None = None  # a tool result's ``tool_call_id``
    name: str | None = None  # a tool result's ``name`` (TRL writes no ids: the name pairs it with its call)
    reasoning: str | None = None  # ``reasoning_content`` (TRL, OpenAI-compatible servers) or ``thinking``
    plain: bool = False  # a text whose role the log does not say (NeMo-RL train files' prompt): shown without one
    start: int | None = None  # its token span in the whole sequence, where the log has tokens
    end: int | None = None
    trained: bool | None = None  # None: an assistant turn is, others are not (a log without a loss mask)
    text_at: int | None = None  # where its text starts in the prompt or response showing it (UTF-8 bytes), once shown
    in_prompt: bool = False  # ... in the prompt (else the response)


def utf8_bytes(text: str) -> int:
    """``text``'s length in UTF-8 bytes (``str.isascii`` is a flag of the string: no pass over it)."""
    return len(text) if text.isascii() else len(text.encode())


def turn_rows(turns: list[Turn]) -> list[dict]:
    """The stored rows of a sample's turns: one per turn, or one per tool call of a turn making several (the text on
    the first of them only)."""
    rows = []
    for k, t in enumerate(turns):
        base = {"turn": k, "role": t.role, "text": t.text, "tool_name": t.name, "tool_arguments": None,
                "tool_call_id": t.call_id, "start": t.start, "end": t.end,
                "trained": t.role == "assistant" if t.trained is None else t.trained, "reasoning": t.reasoning}
        if not t.calls:
            rows.append(base)
            continue
        for j, c in enumerate(t.calls):
            rows.append({**base, "text": base["text"] if j == 0 else None,
                         "reasoning": base["reasoning"] if j == 0 else None,
                         "tool_name": c.name, "tool_arguments": c.arguments, "tool_call_id": c.id})
    return rows


def stored_rows(turns: list[Turn]) -> list[dict]:
    """``turn_rows`` as a part stores them: a text shown in the prompt or response as its span there."""
    rows = turn_rows(turns)
    for row in rows:
        t = turns[row["turn"]]
        if row["text"] is not None and t.text_at is not None:
            row.update(text=None, text_start=t.text_at, text_end=t.text_at + utf8_bytes(t.text),
                       in_prompt=t.in_prompt)
    return rows


def turn_columns(samples: list[list[Turn] | None]) -> dict[str, pa.Array]:
    """``TURN_COLUMNS`` of each sample's turns (None: the sample has none stored). Built field by field: a list of
    row dicts handed to ``pa.array`` took longer than reading the log's JSON."""
    fields: dict[str, list] = {f.name: [] for f in TURN}
    offsets, n_turns, n_calls = [0], [], []
    for turns in samples:
        if turns is not None:
            for row in stored_rows(turns):
                for name, values in fields.items():
                    values.append(row.get(name))
        offsets.append(len(fields["turn"]))
        n_turns.append(None if turns is None else len(turns))
        n_calls.append(None if turns is None else sum(len(t.calls) for t in turns))
    rows = {f.name: pa.array(fields[f.name], f.type) for f in TURN}
    turns = turn_list(pa.array(offsets, pa.int32()), rows, pa.array([s is None for s in samples]))
    return {"turns": turns, "n_turns": pa.array(n_turns, pa.int32()), "n_tool_calls": pa.array(n_calls, pa.int32())}


def turn_list(offsets: pa.Array, rows: dict[str, pa.Array], missing: pa.Array) -> pa.ListArray:
    """The ``turns`` column of the stored rows' fields (``TURN``'s, in any order; one left out is null), each
    sample's rows given by ``offsets`` (int32), ``missing`` (bool) the samples with none stored."""
    n = len(next(iter(rows.values())))
    structs = pa.StructArray.from_arrays([rows[f.name] if f.name in rows else pa.nulls(n, f.type) for f in TURN],
                                         fields=list(TURN))
    return pa.ListArray.from_arrays(offsets, structs, type=TURNS, mask=missing)


def with_turn_columns(t: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    """``t`` with ``columns`` (``turn_columns``') set or added, and ``ANSWER_SPAN`` (null: the answers read here are
    stored as they are) unless it has them."""
    for name, col in columns.items():
        i = t.schema.get_field_index(name)
        t = t.set_column(i, name, col) if i >= 0 else t.append_column(name, col)
    for name, kind in ANSWER_SPAN.items():
        if name not in t.column_names:
            t = t.append_column(name, pa.nulls(t.num_rows, kind))
    return t
