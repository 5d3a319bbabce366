"""Each line's step, told from its bytes alone where that is certain (no JSON parse).

A run opened with a per-step cap or a step range skips the lines it would leave out, so their
records are never parsed. That needs each line's step before the parse: the value of the one
top-level key ``"step"`` (or the key the format reads the step from), when it is a plain integer.
Only what is certain for a valid JSON line counts; every other line is parsed as usual:

- the key's opening quote follows ``{``, ``,`` or a blank (so it opens a string: a quote inside
  a string is escaped) and its closing quote a colon (so the string is a key);
- the line holds that key once (in any spelling: a key with escapes that reads as it counts, found
  wherever a key ends as it does), and no object is open around it: each ``{`` before it is the
  line's first byte, in a string, or closed again;
- the value is an integer (``-12``, ``0``; not ``12.0``, ``"12"`` or ``1e3``) ended by ``,`` or ``}``.

A line that is not valid JSON may still be given a step: skipped, it goes unreported, as any
line a cap leaves out is unread (RL Logging Board's cap works the same way).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa

from rlviz_widgets._ingest.lines import find_byte
from rlviz_widgets._ingest.readers.jsonl.keyscan import blank, equal_at, escaped_spellings, key_ends, lines_buffer

NO_STEP = np.iinfo(np.int64).min  # the step cannot be told from the bytes: the line is parsed
BRACE, CLOSE, QUOTE, COMMA, COLON, BRACKET = 123, 125, 34, 44, 58, 91
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)  # a JSON string (escapes included)
_INT = re.compile(rb"[ \t\r]*(-?(?:0|[1-9][0-9]{0,17}))[ \t\r]*[,}]")


def line_steps(lines: pa.Array | pa.ChunkedArray, key: str, colons: np.ndarray | None = None,
               no_key: int = NO_STEP) -> np.ndarray:
    """Per line of ``lines`` (a large_string array), its step (``key``'s value), or ``NO_STEP``; ``no_key`` for the
    lines that surely lack the key (no key in any spelling ends as it does).

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
    spelled = mine.copy()  # its bytes end a string before a colon: the key, or maybe (in a string) not
    before = data[np.maximum(q, 1) - 1]
    mine &= (before == BRACE) | (before == COMMA) | blank(before)
    where = np.searchsorted(starts, close, side="right") - 1
    escaped = escaped_spellings(data, close[~mine], key)
    escaped = np.flatnonzero(~mine)[escaped]
    count = np.bincount(where[mine], minlength=len(starts))
    respelled = np.bincount(where[escaped], minlength=len(starts))
    if no_key != NO_STEP:
        out[np.bincount(where[spelled], minlength=len(starts)) + respelled == 0] = no_key
    q, c, line = q[mine], c[mine], where[mine]
    once = (count[line] == 1) & (respelled[line] == 0)  # the key once, and no key that may be it spelled otherwise
    q, c, line = q[once], c[once], line[once]
    if not len(q):
        return out
    first = starts[line]
    # a '{' between the line's first byte and the key may open an object around it only where it stands as a value
    # does (after ':', '[' or ','); one that follows anything else is in a string ("\\frac{", "{") and is passed
    # over; the others' lines are looked at closely
    braces = find_byte(data, BRACE)
    lo, hi = np.searchsorted(braces, first + 1), np.searchsorted(braces, q)
    opens = np.r_[0, np.cumsum(_may_open(data, braces))]
    doubt = opens[hi] > opens[lo]
    view = memoryview(data)
    for i in np.flatnonzero(data[first] == BRACE).tolist():
        s = int(first[i])
        if doubt[i] and not _top_level(data[s:int(ends[line[i]])], int(q[i]) - s):
            continue
        m = _INT.match(view, int(c[i]) + 1, int(ends[line[i]]))
        if m is not None:
            out[line[i]] = int(m.group(1))
    return out


def _may_open(data: np.ndarray, braces: np.ndarray) -> np.ndarray:
    """Which '{' at ``braces`` may open an object: those after ':', '[' or ',' (up to two blanks between; more, and
    it may too). A '{' that opens an object always stands there; one in a string may too ("a:{")."""
    out = np.zeros(len(braces), dtype=bool)
    settled = np.zeros(len(braces), dtype=bool)
    for gap in (1, 2, 3):
        b = data[np.maximum(braces - gap, 0)]
        here = ~settled & ~blank(b)
        out |= here & ((b == COLON) | (b == BRACKET) | (b == COMMA))
        settled |= here
    return out | ~settled


def _braces_outside(seg: bytes) -> tuple[int, int]:
    """(opening, closing) braces of ``seg`` outside strings; ``seg`` starts outside any string."""
    bare = _STRING.sub(b"", seg)
    return bare.count(b"{"), bare.count(b"}")


def _top_level(line: np.ndarray, at: int) -> bool:
    """Whether the key opening at ``at`` in ``line`` (which opens with '{') is in no nested object: looked at on the
    shorter side of it. Before it, every '{' but the first is in a string or closed; after it (the key's quote opens
    a string), the braces left to close are the line's last one only."""
    if at <= len(line) - at:
        opened, closed = _braces_outside(line[:at].tobytes())
        return opened - closed == 1
    opened, closed = _braces_outside(line[at:].tobytes())
    return closed - opened == 1
