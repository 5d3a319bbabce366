"""Chat-shaped samples (a list of messages) as the texts ``samples`` shows: ``prompt``, ``response``, ``answer``.

``prompt`` is the turns before the first assistant turn, ``response`` everything from it on, ``answer`` the last
assistant turn's text. Turns after the first of each text are introduced by a line naming their role
(``── tool ──``), so a reader sees who said what; a tool call reads ``name({"arg": 1})``, an image part ``[image]``.
Messages are dicts (TRL, NeMo-RL val files, the OpenAI format) or bare strings (NeMo-RL train files, roles given).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa

KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function", "environment"})
ANSWER = "answer"  # the text column of the last assistant turn (a custom column of the log's part)


def header(role: str) -> str:
    """The line that introduces a turn of ``role``."""
    return f"── {role} ──"


@dataclass
class Chat:
    """One sample's texts, and what was wrong with its messages (``kind|message``, as the checks read them)."""

    prompt: str | None
    response: str | None
    answer: str | None
    reports: list[str] = field(default_factory=list)


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


def _content_text(content) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_part_text(p) for p in content)
    return json.dumps(content, ensure_ascii=False, default=str)


def _arguments_text(args, where: str, reports: list[str]) -> str:
    """A tool call's arguments as JSON text: TRL's struct (absent fields read null, dropped), or the OpenAI format's
    JSON text, parsed and written again; text that is not JSON is reported and shown as written."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            reports.append(f"wrong_type|{where} are not valid JSON: shown as written")
            return args
    elif isinstance(args, dict):
        args = {k: v for k, v in args.items() if v is not None}
    elif args is None:
        return ""
    return json.dumps(args, ensure_ascii=False, default=str)


def _call_text(call, where: str, reports: list[str]) -> str:
    """A tool call as ``name(arguments as JSON)``."""
    fn = call.get("function") if isinstance(call, dict) else None
    fn = fn if isinstance(fn, dict) else (call if isinstance(call, dict) else {})
    name = fn.get("name") or "?"
    where = f"{where}: the arguments of the tool call {json.dumps(str(name))[:80]}"
    return f"{name}({_arguments_text(fn.get('arguments'), where, reports)})"


def turn(message, i: int, reports: list[str]) -> tuple[str, str]:
    """(role, text) of message ``i``; a message without a role or content is reported (its role shown as ``?``)."""
    if not isinstance(message, dict):
        reports.append(f"wrong_type|message {i} is not an object with role and content: shown as its JSON")
        return "?", json.dumps(message, ensure_ascii=False, default=str)
    role = message.get("role")
    calls = message.get("tool_calls") or []
    text = _content_text(message.get("content"))
    if role is None or role == "":
        reports.append(f"missing_field|message {i} has no role: shown as ?")
        role = "?"
    elif str(role) not in KNOWN_ROLES:
        reports.append(f"unknown_role|message {i} has the role {json.dumps(str(role))[:80]}: shown as written")
    if text is None and not calls:
        reports.append(f"missing_field|message {i} ({role}) has no content: shown empty")
    lines = [text] if text else []
    lines += [_call_text(c, f"message {i}", reports) for c in calls]
    return str(role), "\n".join(lines)


def _joined(turns: list[tuple[str | None, str]], bare: str) -> str:
    """Turns as one text: each after a line naming its role, but a first turn of role ``bare`` (or of no known
    role: NeMo-RL's train files give none for the prompt) as it is."""
    out = []
    for i, (role, text) in enumerate(turns):
        if role is not None and not (i == 0 and role == bare):
            out.append(header(role))
        out.append(text)
    return "\n".join(out)


def conversation(turns: list[tuple[str | None, str]], first_response: int | None = None,
                 reports: list[str] | None = None) -> Chat:
    """The texts of ``turns`` ((role, text) each). The response starts at ``first_response`` (default: the first
    assistant turn; none: everything is prompt, the response left empty)."""
    if first_response is None:
        first_response = next((i for i, (r, _) in enumerate(turns) if r == "assistant"), len(turns))
    before, after = turns[:first_response], turns[first_response:]
    answers = [text for role, text in after if role == "assistant"]
    return Chat(_joined(before, "user") if before else None, _joined(after, "assistant") if after else None,
                answers[-1] if answers else None, reports if reports is not None else [])


def messages_chat(messages: list) -> Chat:
    """The texts of a list of message dicts."""
    reports: list[str] = []
    return conversation([turn(m, i, reports) for i, m in enumerate(messages)], reports=reports)


def with_chats(t: pa.Table, chats: list[Chat | None]) -> pa.Table:
    """``t`` with each row's ``prompt``, ``response`` and ``answer`` from its chat (None: the row's own texts kept),
    the chats' reports added to ``_reports``. ``answer`` is a custom text column (added unless a field names it)."""
    prompts, responses, reports = t["prompt"].to_pylist(), t["response"].to_pylist(), t["_reports"].to_pylist()
    answers: list[str | None] = [None] * t.num_rows
    for i, chat in enumerate(chats):
        if chat is not None:
            prompts[i], responses[i], answers[i] = chat.prompt, chat.response, chat.answer
            reports[i] = [*(reports[i] or []), *chat.reports]
    t = t.set_column(t.schema.get_field_index("prompt"), "prompt", pa.array(prompts, pa.string()))
    t = t.set_column(t.schema.get_field_index("response"), "response", pa.array(responses, pa.string()))
    t = t.set_column(t.schema.get_field_index("_reports"), "_reports", pa.array(reports, pa.list_(pa.string())))
    if any(a is not None for a in answers) and "_n_" + ANSWER not in t.column_names:
        nulls = pa.nulls(t.num_rows, pa.string())
        for prefix, col in (("_n_", pa.nulls(t.num_rows, pa.float64())), ("_s_", pa.array(answers, pa.string())),
                            ("_f_", nulls), ("_o_", nulls)):
            t = t.append_column(prefix + ANSWER, col)
    return t
