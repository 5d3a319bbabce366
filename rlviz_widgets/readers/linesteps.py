"""Each line's step, told from its bytes alone where that is certain (no JSON parse).

A run opened with a per-step cap or a step range skips the lines it would leave out, so their
records are never parsed. That needs each line's step before the parse: the value of the one
top-level key ``"step"`` (or the key the format reads the step from), when it is a plain integer.
Only what is certain for a valid JSON line counts; every other line is parsed as usual:

- the key's opening quote follows ``{``, ``,`` or a blank (so it opens a string: a quote inside
  a string is escaped) and its closing quote a colon (so the string is a key);
- the line holds that key once (in any spelling: a key with escapes that reads as it counts, found
  wherever a key ends as it does), and no object is open around it: ``{`` appears before it only
  as the line's first byte, or inside strings;
- the value is an integer (``-12``, ``0``; not ``12.0``, ``"12"`` or ``1e3``) ended by ``,`` or ``}``.

A line that is not valid JSON may still be given a step: skipped, it goes unreported, as any
line a cap leaves out is unread (RL Logging Board's cap works the same way).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa

from ..lines import find_byte
from .jsonkeys import blank, equal_at, key_before, key_ends, lines_buffer

NO_STEP = np.iinfo(np.int64).min  # the step cannot be told from the bytes: the line is parsed
BRACE, CLOSE, QUOTE, BACKSLASH, COMMA = 123, 125, 34, 92, 44
_INT = re.compile(rb"[ \t\r]*(-?(?:0|[1-9][0-9]{0,17}))[ \t\r]*[,}]")


def line_steps(lines: pa.Array | pa.ChunkedArray, key: str, colons: np.ndarray | None = None) -> np.ndarray:
    """Per line of ``lines`` (a large_string array), its step (``key``'s value), or ``NO_STEP``.

    ``colons``: the positions of every ':' in the lines' data buffer, when already known.
    """
    out = np.full(len(lines), NO_STEP, dtype=np.int64)
    pattern = json.dumps(key, ensure_ascii=False).encode()
    if len(lines) == 0 or pattern != b'"' + key.encode() + b'"':  # a key JSON escapes: only the parser reads it
        return out
    offsets, data, colons = lines_buffer(lines, colons)
    starts, ends = offsets[:-1] - offsets[0], offsets[1:] - offsets[0]
    close, c = key_ends(data, colons)
    q = close - len(pattern) + 1  # where the key would open, if it is ``key``
    mine = q >= 1
    mine[mine] = equal_at(data, q[mine], pattern)
    before = data[np.maximum(q, 1) - 1]
    mine &= (before == BRACE) | (before == COMMA) | blank(before)
    where = np.searchsorted(starts, close, side="right") - 1
    escaped = _escaped_spellings(data, close[~mine], key)
    escaped = np.flatnonzero(~mine)[escaped]
    count = np.bincount(where[mine], minlength=len(starts))
    doubt = np.bincount(where[escaped], minlength=len(starts))
    q, c, line = q[mine], c[mine], where[mine]
    once = (count[line] == 1) & (doubt[line] == 0)  # the key once, and no key that may be it spelled otherwise
    q, c, line = q[once], c[once], line[once]
    if not len(q):
        return out
    first = starts[line]
    braces = find_byte(data, BRACE)
    nested = np.searchsorted(braces, q) - np.searchsorted(braces, first)  # '{' before the key in its line
    ok = (data[first] == BRACE) & (nested >= 1)
    view = memoryview(data)
    for i in np.flatnonzero(ok).tolist():
        at, s = int(q[i]), int(first[i])
        if nested[i] > 1 and not _top_level(data[s:at]):
            continue
        m = _INT.match(view, int(c[i]) + 1, int(ends[line[i]]))
        if m is not None:
            out[line[i]] = int(m.group(1))
    return out


def _escaped_spellings(data: np.ndarray, close: np.ndarray, key: str) -> np.ndarray:
    """Which of the keys closed at ``close`` spell ``key`` with escapes (``"st\\u0065p"``): a JSON parser reads
    them as ``key``. Looked at closely only where the key ends as ``key`` does (its last character, or the last
    hex digit of its escape) and a backslash lies within reach before."""
    last = key[-1]
    enders = [ord(last)] + [ord(h) for h in {f"{ord(last):x}"[-1], f"{ord(last):X}"[-1]}]
    reach = 12 * len(key)  # a character escaped takes 6 bytes (12 for a surrogate pair)
    near = np.isin(data[np.maximum(close - 1, 0)], enders)
    at = np.flatnonzero(near)
    if len(at):
        window = close[at, None] - np.arange(1, reach + 1)
        near[at] = (data[np.maximum(window, 0)] == BACKSLASH).any(axis=1)
    out = np.zeros(len(close), dtype=bool)
    for i in np.flatnonzero(near).tolist():
        raw = key_before(data, int(close[i]))
        if isinstance(raw, bytes) and b"\\" in raw:
            try:
                out[i] = json.loads(b'"' + raw + b'"') == key
            except ValueError:
                out[i] = True  # not JSON: whatever the parser makes of it, the line is its to read
    return out


def _top_level(head: np.ndarray) -> bool:
    """Whether a key right after ``head`` (the start of its line, which opens with '{') is in no nested object:
    every other '{' in ``head`` is inside a string or closed."""
    quotes = np.flatnonzero(head == QUOTE)
    escaped = quotes[(quotes > 0) & (head[quotes - 1] == BACKSLASH)]
    if len(escaped):  # a quote after an odd run of backslashes is a character of its string
        drop = [q for q in escaped.tolist() if _backslashes(head, q) % 2]
        quotes = quotes[~np.isin(quotes, drop)]
    # a brace outside strings has an even number of quotes before it
    opened, closed = (np.flatnonzero(head == b) for b in (BRACE, CLOSE))
    outside = [np.count_nonzero(np.searchsorted(quotes, at) % 2 == 0) for at in (opened, closed)]
    return outside[0] - outside[1] == 1


def _backslashes(head: np.ndarray, q: int) -> int:
    n = 0
    while q - n - 1 >= 0 and head[q - n - 1] == BACKSLASH:
        n += 1
    return n
