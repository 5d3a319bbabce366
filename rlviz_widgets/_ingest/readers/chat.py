"""Chat-shaped samples (a list of messages) as the texts ``samples`` shows: ``prompt``, ``response``, ``answer``.

``prompt`` is the turns before the first assistant turn, ``response`` everything from it on, ``answer`` the last
assistant turn's text. Turns after the first of each text are introduced by a line naming their role
(``── tool ──``), so a reader sees who said what; a tool call reads ``name({"arg": 1})``, an image part ``[image]``
(reported: the image is not kept), a reasoning text ``<think>...</think>`` before the content. Messages are dicts
(TRL, NeMo-RL val files, the OpenAI format) or bare strings (NeMo-RL train files, roles given); each is read as a
``turns.Turn``, stored as the sample's turns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa

from rlviz_widgets._ingest.readers.turns import Call, Turn, turn_columns, utf8_bytes, with_turn_columns

KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function", "environment"})
ANSWER = "answer"  # the text column of the last assistant turn (a custom column of the log's part)


def header(role: str) -> str:
    """The line that introduces a turn of ``role``."""
    return f"── {role} ──"


def think(reasoning: str) -> str:
    """A reasoning text as ``shown`` writes it before the content."""
    return f"<think>\n{reasoning}\n</think>"


@dataclass
class Chat:
    """One sample's texts, and what was wrong with its messages (``kind|message``, as the checks read them)."""

    prompt: str | None
    response: str | None
    answer: str | None
    reports: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)


def _part_text(part) -> str:
    """A content part's text: text parts as written, images ``[image]``, others their type in brackets."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return json.dumps(part, ensure_ascii=False)
    kind = part.get("type")
    if part.get("text") is not None and kind in (None, "text", "input_text", "output_text"):
        return str(part["text"])
    if kind in ("image", "image_url", "input_image"):
        return "[image]"
    return f"[{kind}]" if kind else json.dumps(part, ensure_ascii=False)


def _images(content) -> int:
    if not isinstance(content, list):
        return 0
    return sum(isinstance(p, dict) and p.get("type") in ("image", "image_url", "input_image") for p in content)


def _content_text(content) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_part_text(p) for p in content)
    return json.dumps(content, ensure_ascii=False, default=str)


def _arguments_text(args, where: str, reports: list[str]) -> str:
    """A tool call's arguments as JSON text: TRL's struct (absent fields read null, dropped) written as JSON, the
    OpenAI format's JSON text as the model wrote it; text that is not JSON is reported (and shown as written too)."""
    if isinstance(args, str):
        try:
            json.loads(args)
        except ValueError:
            reports.append(f"wrong_type|{where} are not valid JSON: shown as written")
        return args
    elif isinstance(args, dict):
        args = {k: v for k, v in args.items() if v is not None}
    elif args is None:
        return ""
    return json.dumps(args, ensure_ascii=False, default=str)


def _call(call, where: str, reports: list[str]) -> Call:
    """A tool call: ``{type, function: {name, arguments}, id}`` (OpenAI, TRL) or a legacy ``function_call``."""
    fn = call.get("function") if isinstance(call, dict) else None
    fn = fn if isinstance(fn, dict) else (call if isinstance(call, dict) else {})
    name = str(fn.get("name") or "?")
    where = f"{where}: the arguments of the tool call {json.dumps(name)[:80]}"
    call_id = call.get("id") if isinstance(call, dict) else None
    return Call(name, _arguments_text(fn.get("arguments"), where, reports), None if call_id is None else str(call_id))


def _calls(message: dict, i: int, reports: list[str]) -> list[Call]:
    calls = message.get("tool_calls") or []
    if isinstance(calls, dict):  # one call, not in a list
        calls = [calls]
    elif not isinstance(calls, list):
        reports.append(f"wrong_type|message {i}: tool_calls is not a list of calls: ignored")
        calls = []
    if isinstance(message.get("function_call"), dict):  # the deprecated single call
        calls = [*calls, message["function_call"]]
    return [_call(c, f"message {i}", reports) for c in calls]


def _optional_text(value) -> str | None:
    return None if value is None or value == "" else str(value)


def read_message(message, i: int, reports: list[str]) -> Turn:
    """Message ``i`` as a turn; a message without a role or content is reported (its role shown as ``?``)."""
    if not isinstance(message, dict):
        reports.append(f"wrong_type|message {i} is not an object with role and content: shown as its JSON")
        return Turn("?", json.dumps(message, ensure_ascii=False, default=str))
    role = message.get("role")
    calls = _calls(message, i, reports)
    text = _content_text(message.get("content"))
    if role is None or role == "":
        reports.append(f"missing_field|message {i} has no role: shown as ?")
        role = "?"
    elif str(role) not in KNOWN_ROLES:
        reports.append(f"unknown_role|message {i} has the role {json.dumps(str(role))[:80]}: shown as written")
    reasoning = _optional_text(message.get("reasoning_content", message.get("thinking")))
    images = _images(message.get("content"))
    if images:
        reports.append(f"image|message {i} ({role}) holds {images} image part(s): shown as [image]")
    if text is None and not calls and reasoning is None:
        reports.append(f"missing_field|message {i} ({role}) has no content: shown empty")
    call_id = message.get("tool_call_id")
    return Turn(str(role), text or "", calls, None if call_id is None else str(call_id),
                _optional_text(message.get("name")), reasoning)


def shown(t: Turn, reasoning: bool = True) -> str:
    """A turn's text as the samples' texts show it: its reasoning (as the model wrote it, in ``<think>``; unless
    not ``reasoning``: the answer is what a verifier grades), its content, then each tool call as
    ``name(arguments)``."""
    lines = [think(t.reasoning)] if t.reasoning and reasoning else []
    lines += [t.text] if t.text else []
    lines += [f"{c.name}({c.arguments})" for c in t.calls]
    return "\n".join(lines)


def _joined(turns: list[Turn], bare: str, in_prompt: bool) -> str:
    """Turns as one text: each after a line naming its role, but a first turn of role ``bare``, and texts whose role
    the log does not say (NeMo-RL's train files' prompt), as they are. Each turn learns where its text stands in it
    (``Turn.text_at``; ``messages.c`` finds the same as it writes the texts)."""
    out = []
    at = 0  # bytes written so far, with the newlines joining them
    for i, t in enumerate(turns):
        if not t.plain and not (i == 0 and t.role == bare):
            out.append(header(t.role))
            at += utf8_bytes(out[-1]) + 1
        out.append(shown(t))
        t.in_prompt = in_prompt
        t.text_at = at + (utf8_bytes(think(t.reasoning)) + 1 if t.reasoning else 0)
        at += utf8_bytes(out[-1]) + 1
    return "\n".join(out)


def conversation(turns: list[Turn], first_response: int | None = None, reports: list[str] | None = None) -> Chat:
    """The texts of ``turns``. The response starts at ``first_response`` (default: the first assistant turn; none:
    everything is prompt, the response left empty)."""
    if first_response is None:
        first_response = next((i for i, t in enumerate(turns) if t.role == "assistant"), len(turns))
    before, after = turns[:first_response], turns[first_response:]
    answers = [shown(t, reasoning=False) for t in after if t.role == "assistant"]
    return Chat(_joined(before, "user", True) if before else None,
                _joined(after, "assistant", False) if after else None,
                answers[-1] if answers else None, reports if reports is not None else [], turns)


def messages_chat(messages: list) -> Chat:
    """The texts and turns of a list of message dicts."""
    reports: list[str] = []
    return conversation([read_message(m, i, reports) for i, m in enumerate(messages)], reports=reports)


def with_chats(t: pa.Table, chats: list[Chat | None]) -> pa.Table:
    """``t`` with each row's ``prompt``, ``response`` and ``answer`` from its chat (None: the row's own texts kept),
    its turns (``turns.TURN_COLUMNS``), the chats' reports added to ``_reports``. ``answer`` is a custom text column
    (added unless a field names it)."""
    prompts, responses, reports = t["prompt"].to_pylist(), t["response"].to_pylist(), t["_reports"].to_pylist()
    answers: list[str | None] = [None] * t.num_rows
    for i, chat in enumerate(chats):
        if chat is not None:
            prompts[i], responses[i], answers[i] = chat.prompt, chat.response, chat.answer
            reports[i] = [*(reports[i] or []), *chat.reports]
    t = t.set_column(t.schema.get_field_index("prompt"), "prompt", pa.array(prompts, pa.string()))
    t = t.set_column(t.schema.get_field_index("response"), "response", pa.array(responses, pa.string()))
    t = t.set_column(t.schema.get_field_index("_reports"), "_reports", pa.array(reports, pa.list_(pa.string())))
    t = with_turn_columns(t, turn_columns([None if c is None else c.turns for c in chats]))
    return with_answers(t, pa.array(answers, pa.string()))


def chat_columns(chats: list[Chat], reports: pa.Array) -> dict[str, pa.Array]:
    """The columns ``with_chats`` sets, of rows that each have a chat: ``prompt``, ``response``, ``answer``, the
    turns (``turns.TURN_COLUMNS``) and ``_reports`` (the rows' own ``reports``, the chats' added)."""
    own = reports.to_pylist()
    return {"prompt": pa.array([c.prompt for c in chats], pa.string()),
            "response": pa.array([c.response for c in chats], pa.string()),
            ANSWER: pa.array([c.answer for c in chats], pa.string()),
            "_reports": pa.array([[*(r or []), *c.reports] for r, c in zip(own, chats)], reports.type),
            **turn_columns([c.turns for c in chats])}


def with_answers(t: pa.Table, answers: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``t`` with the custom text column ``answer`` (its ``_n_``, ``_s_``, ``_f_``, ``_o_`` columns, as the SQL gives
    a custom field's) of ``answers``, unless all are null or a field of the log names it."""
    if answers.null_count < len(answers) and "_n_" + ANSWER not in t.column_names:
        nulls = pa.nulls(t.num_rows, pa.string())
        for prefix, col in (("_n_", pa.nulls(t.num_rows, pa.float64())), ("_s_", answers), ("_f_", nulls),
                            ("_o_", nulls)):
            t = t.append_column(prefix + ANSWER, col)
    return t
