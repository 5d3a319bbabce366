"""Chat-shaped samples (a list of messages) as the texts ``samples`` shows: ``prompt``, ``response``, ``answer``.

``prompt`` is the turns before the first assistant turn, ``response`` everything from it on, ``answer`` the last
assistant turn's text. Turns after the first of each text are introduced by a line naming their role
(``── tool ──``), so a reader sees who said what; a tool call reads ``name({"arg": 1})``, an image part ``[image]``.
Messages are dicts (TRL, NeMo-RL val files, the OpenAI format) or bare strings (NeMo-RL train files, roles given).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

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


def _call_text(call) -> str:
    """A tool call as ``name(arguments as JSON)``; TRL's arguments are a struct whose absent fields read null."""
    fn = call.get("function") if isinstance(call, dict) else None
    fn = fn if isinstance(fn, dict) else (call if isinstance(call, dict) else {})
    args = fn.get("arguments")
    if isinstance(args, dict):
        args = json.dumps({k: v for k, v in args.items() if v is not None}, ensure_ascii=False, default=str)
    elif args is None:
        args = ""
    return f"{fn.get('name') or '?'}({args})"


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
    lines += [_call_text(c) for c in calls]
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
