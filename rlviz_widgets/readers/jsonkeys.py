"""Every top-level key of a chunk of JSON lines, found from the bytes with numpy (no JSON parse).

A key is a string followed by a colon (after at most two spaces). So the search starts from the
colons, which are rare in rollout logs (unlike quotes: every token string has two), keeps those
right after an unescaped quote, and walks back to the opening quote. That finds every real key
(none is missed) plus, rarely, a string value holding '": ' (a harmless extra candidate, whose
column simply comes out empty). It costs two vectorized passes over the bytes instead of a
second full parse of every float.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import sliding_window_view

from ..lines import find_byte

QUOTE, COLON, SPACE, BACKSLASH = 34, 58, 32, 92
WINDOW = 48  # keys up to this many bytes are read vectorized; longer ones one by one
_MIX = np.random.default_rng(0).integers(1, 2**63, size=WINDOW // 8, dtype=np.uint64) | np.uint64(1)


def candidate_keys(lines: pa.Array | pa.ChunkedArray, colons: np.ndarray | None = None) -> set[str]:
    """A superset of the top-level keys of the JSON objects in ``lines`` (a large_string array).

    ``colons``: the positions of every ':' in the lines' data buffer, when already known.
    """
    arr = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    if len(arr) == 0:
        return set()
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    if colons is None:
        colons = find_byte(data, COLON)
    else:
        colons = colons[(colons >= offsets[0]) & (colons < offsets[-1])] - offsets[0]
    ends = []  # closing quotes followed by a colon, directly or after one or two spaces
    for gap in (0, 1, 2):
        c = colons[colons > gap + 1]
        ok = data[c - gap - 1] == QUOTE
        for k in range(1, gap + 1):
            ok &= data[c - k] == SPACE
        ends.append(c[ok] - gap - 1)
    end = np.concatenate(ends)
    if not len(end):
        return set()
    slow = []  # candidates resolved in Python: keys with escapes or longer than the window
    escaped = data[end - 1] == BACKSLASH
    if escaped.any():  # \" closes nothing; \\" (a key ending in a backslash) is looked at closely
        double = escaped & (data[np.maximum(end - 2, 0)] == BACKSLASH)
        slow += end[double].tolist()
        end = end[~escaped]
    near = end <= WINDOW  # too close to the start for a whole window: one by one
    slow += end[near].tolist()
    end = end[~near]
    # the WINDOW bytes before each closing quote, through a strided view (no index arrays)
    rows = np.ascontiguousarray(sliding_window_view(data, WINDOW)[end - WINDOW]) if len(end) else \
        np.zeros((0, WINDOW), np.uint8)
    # walk back to the nearest quote; the byte before it (inside the window) says whether it is escaped
    isq = rows[:, ::-1] == QUOTE
    first = isq.argmax(axis=1)
    opening = WINDOW - 1 - first
    at = np.arange(len(rows))
    plain = isq[at, first] & (opening >= 1)
    plain[plain] &= rows[at[plain], opening[plain] - 1] != BACKSLASH
    slow += end[~plain].tolist()
    rows, opening = rows[plain], opening[plain]
    rows[np.arange(WINDOW)[None, :] <= opening[:, None]] = 0  # the key's bytes only (JSON text has no NULs)
    # then the many repeats of the same few keys collapse: grouped by a hash of the row (a sort of
    # 8-byte numbers, not of 48-byte strings), every row checked against its group's first one
    words = rows.view(np.uint64)
    h = (words * _MIX[None, :]).sum(axis=1, dtype=np.uint64)
    _, first_of, group = np.unique(h, return_index=True, return_inverse=True)
    same = (rows == rows[first_of[group]]).all(axis=1)
    raw = {bytes(r).lstrip(b"\0") for r in rows[first_of]} | {bytes(r).lstrip(b"\0") for r in rows[~same]}
    raw |= {_key_before(data, e) for e in slow}
    keys = set()
    for b in raw:
        if b is None:
            continue
        text = b.decode("utf-8", errors="replace")
        if "\\" in text:  # escaped characters: let the JSON parser spell the key
            try:
                text = json.loads('"' + text + '"')
            except ValueError:
                continue
        keys.add(text)
    return keys


def _key_before(data: np.ndarray, end: int) -> bytes | None:
    """The raw bytes of the string closed by the quote at ``end`` (None when that quote is escaped)."""
    text = bytes(data[max(end - 65536, 0):end])
    i = len(text)
    if _escaped(text, i):
        return None
    while True:
        i = text.rfind(b'"', 0, i)
        if i < 0:
            return None
        if not _escaped(text, i):
            return text[i + 1:]


def _escaped(text: bytes, i: int) -> bool:
    """Whether the byte at ``i`` follows an odd run of backslashes."""
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == BACKSLASH:
        n += 1
    return n % 2 == 1
