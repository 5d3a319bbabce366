"""Every top-level key of a chunk of JSON lines, found from the bytes with numpy (no JSON parse).

A key is a string followed by a colon (after any JSON whitespace). So the search starts from the
colons, which are rare in rollout logs (unlike quotes: every token string has two), keeps those
right after an unescaped quote, and walks back to the opening quote. That finds every real key
(none is missed) plus, rarely, a string value holding '": ' (a harmless extra candidate, whose
column simply comes out empty). The same few keys repeat on every line, so candidates are grouped
by the 8 bytes before their closing quote; one key per group is read in Python and checked against
every member at once (a member whose bytes differ is read next). No second parse of every float.
Keys are looked for up to 64 KB back from their closing quote; a longer one is returned as ``LONG_KEY``.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from rlviz_widgets._ingest.lines import find_byte

QUOTE, COLON, SPACE, TAB, CR, BACKSLASH = 34, 58, 32, 9, 13, 92
MAX_READS = 8  # keys read per group before the rest of it is read one by one
MAX_KEY_BYTES = 65536  # keys are looked for this far back from their closing quote
WINDOW_ROWS = 8192  # keys whose bytes before are looked at in one go (each a row of up to 12 bytes per character)


def scan(lines: pa.Array | pa.ChunkedArray, colons: np.ndarray | None = None) -> tuple:
    """What the searches below share, worked out once per chunk: (``lines_buffer``'s three, ``key_ends``'s two).

    ``colons``: the positions of every ':' in the lines' data buffer, when already known.
    """
    offsets, data, colons = lines_buffer(lines, colons)
    return offsets, data, colons, *key_ends(data, colons)


def candidate_keys(lines: pa.Array | pa.ChunkedArray, colons: np.ndarray | None = None,
                   scanned: tuple | None = None) -> set[str]:
    """A superset of the top-level keys of the JSON objects in ``lines`` (a large_string array).

    ``colons``: the positions of every ':' in the lines' data buffer, when already known; ``scanned``: ``scan``'s.
    """
    if len(lines) == 0:
        return set()
    _, data, colons, end, _ = scanned or scan(lines, colons)
    if not len(end):
        return set()
    slow = []  # candidates resolved in Python: keys ending in a backslash
    escaped = data[end - 1] == BACKSLASH
    if escaped.any():  # \" closes nothing; \\" (a key ending in a backslash) is looked at closely
        double = escaped & (data[np.maximum(end - 2, 0)] == BACKSLASH)
        slow += end[double].tolist()
        end = end[~escaped]
    raw = {key_before(data, e) for e in slow} | _grouped_keys(data, end)
    keys = set()
    for b in raw:
        if b is None:
            continue
        text = b.decode("utf-8", errors="replace")
        if "\\" in text:  # escaped characters: let the JSON parser spell the key
            try:
                text = json.loads('"' + text + '"')
                text.encode()  # a lone surrogate (\\ud800) is no key DuckDB can read: its line is reported
            except (ValueError, UnicodeEncodeError):
                continue
        keys.add(text)
    return keys


def key_ends(data: np.ndarray, colons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(closing quote, colon) of every string followed by a colon after any JSON blanks (every key's end, and rarely
    a string value holding '": ') in ``data``, a buffer of JSON lines; ``colons``: every ':' in it."""
    closes, cols = [], []
    for gap in (0, 1, 2):  # directly, or after one or two blanks
        c = colons[colons > gap + 1]
        ok = data[c - gap - 1] == QUOTE
        for k in range(1, gap + 1):
            ok &= blank(data[c - k])
        closes.append(c[ok] - gap - 1)
        cols.append(c[ok])
    c = colons[colons > 2]
    for at in c[blank(data[c - 1]) & blank(data[c - 2]) & blank(data[c - 3])].tolist():  # 3+ blanks: rare
        b = at - 3
        while b > 0 and blank(data[b - 1]):
            b -= 1
        if b > 1 and data[b - 1] == QUOTE:
            closes.append(np.array([b - 1]))
            cols.append(np.array([at]))
    return np.concatenate(closes), np.concatenate(cols)


def odd_values(lines: pa.Array | pa.ChunkedArray, colons: np.ndarray | None, keys: list[str],
               scanned: tuple | None = None) -> np.ndarray:
    """The indexes of the lines where a key of ``keys`` may hold a value other than a string or null.

    A superset: every colon after one of the keys whose value does not open with a quote or ``n``
    (after up to two blanks; more, and the line is in), and every colon with three or more blanks
    before it whose value does not. A key that only ends in one (``"a\\"prompt"``), and one that spells it with
    escapes (``"\\u0070rompt"``, which a parser reads as ``prompt``), add their lines too; the caller looks at these
    few lines closely.
    """
    if len(lines) == 0 or not keys:
        return np.zeros(0, dtype=np.int64)
    offsets, data, colons, closes, afters = scanned or scan(lines, colons)
    at = colons + 1
    for _ in range(2):
        at = np.where(blank(data[np.minimum(at, len(data) - 1)]) & (at < len(data)), at + 1, at)
    first = np.where(at < len(data), data[np.minimum(at, len(data) - 1)], 0)
    valued = (first != QUOTE) & (first != ord("n"))
    c = colons[valued]
    # three or more blanks before the colon (rare): the line is looked at whatever the key
    hit = blank(data[np.maximum(c - 1, 0)]) & blank(data[np.maximum(c - 2, 0)]) & blank(data[np.maximum(c - 3, 0)])
    for key in keys:
        raw = json.dumps(key, ensure_ascii=False).encode()  # with its quotes
        for gap in (0, 1, 2):  # blanks between the key and its colon
            start = c - gap - len(raw)
            ok = start >= 0
            for k in range(1, gap + 1):
                ok &= blank(data[np.maximum(c - k, 0)])
            ok[ok] = equal_at(data, start[ok], raw)
            hit |= ok
    mine = valued[np.searchsorted(colons, afters)]  # the keys of these colons
    close, after = closes[mine], afters[mine]
    for key in keys:  # a key spelled with escapes
        found = after[escaped_spellings(data, close, key)]
        if len(found):
            hit |= np.isin(c, found)
    return np.unique(np.searchsorted(offsets - offsets[0], c[hit], side="right") - 1)


def repeated_keys(lines: pa.Array | pa.ChunkedArray, colons: np.ndarray | None = None,
                  scanned: tuple | None = None) -> np.ndarray:
    """The indexes of the lines where a key may appear twice: a superset (a key in a nested object counts, and
    two keys alike in their last 32 bytes, or with a backslash in them, do too); the caller looks closely.

    Keys are told apart by their bytes up to 32 before the closing quote and their length up to 32: a key
    written twice the same way always matches itself. One spelled otherwise the second time (with escapes)
    has a backslash in those bytes, or differs only before them. (16 bytes were too few: prime-rl's
    ``importance_ratio`` and ``log_importance_ratio`` flagged every line, and each was parsed again.)
    """
    if len(lines) == 0:
        return np.zeros(0, dtype=np.int64)
    offsets, data, colons, close, _ = scanned or scan(lines, colons)
    if not len(close):
        return np.zeros(0, dtype=np.int64)
    words, start, escaped = _key_tail(data, close)
    longer = np.flatnonzero(start == 0)  # no opening quote in the 16 bytes: the 16 before them tell more
    words2, start2 = np.zeros((len(close), 2), np.uint64), np.full(len(close), -1)
    if len(longer):
        w, s, e = _key_tail(data, close[longer] - KEY_TAIL)
        words2[longer], start2[longer] = w, s
        escaped[longer] |= e
    line = np.searchsorted(offsets - offsets[0], close, side="right") - 1
    cols = (line, words[:, 0], words[:, 1], start, words2[:, 0], words2[:, 1], start2)
    order = np.lexsort(cols[::-1])
    same = np.ones(len(order) - 1, dtype=bool)
    for col in cols:
        same &= col[order[1:]] == col[order[:-1]]
    return np.unique(np.concatenate([line[order[1:][same]], line[escaped]]))


KEY_TAIL = 16  # bytes of a key compared at a time


def _key_tail(data: np.ndarray, close: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the ``KEY_TAIL`` bytes before each of ``close`` as two words, zeroed up to the last quote among them; where
    that quote ends, 0 when there is none; whether a backslash is among them). Bytes before the buffer read as 0."""
    width = KEY_TAIL
    # the bytes before each closing quote (rows of a sliding view: an index per byte cost 5x more)
    padded = data if len(data) >= width else np.concatenate([data, np.zeros(width - len(data), np.uint8)])
    window = np.lib.stride_tricks.sliding_window_view(padded, width)[np.clip(close - width, 0, None)]
    early = np.flatnonzero(close < width)  # near the buffer's start: fewer bytes before
    if len(early):
        at = close[early, None] - np.arange(width, 0, -1)
        window[early] = np.where(at >= 0, data[np.maximum(at, 0)], 0)
    quote = window == QUOTE
    opened = quote.any(axis=1)
    start = width - np.argmax(quote[:, ::-1], axis=1)  # just past the last quote in the window
    start[~opened] = 0  # a longer key: its last 16 bytes
    window[np.arange(width)[None, :] < start[:, None]] = 0
    escaped = (window == BACKSLASH).any(axis=1)
    return window.view("<u8"), start, escaped


def escaped_spellings(data: np.ndarray, close: np.ndarray, key: str) -> np.ndarray:
    """Which of the keys closed at ``close`` spell ``key`` with escapes (``"st\\u0065p"``): a JSON parser reads
    them as ``key``. Looked at closely only where the key ends as ``key`` does (its last character, or the last
    hex digit of its escape) and a backslash lies within reach before."""
    last = key[-1]
    enders = [ord(last)] + [ord(h) for h in {f"{ord(last):x}"[-1], f"{ord(last):X}"[-1]}]
    reach = 12 * len(key)  # a character escaped takes 6 bytes (12 for a surrogate pair)
    last_bytes = data[np.maximum(close - 1, 0)]
    near = np.zeros(len(close), dtype=bool)
    for e in set(enders):
        near |= last_bytes == e
    at = np.flatnonzero(near)
    back = np.arange(1, reach + 1)
    for k in range(0, len(at), WINDOW_ROWS):  # in batches: a window per key ending so (keys ending in digits: all)
        rows = at[k:k + WINDOW_ROWS]
        near[rows] = (data[np.maximum(close[rows, None] - back, 0)] == BACKSLASH).any(axis=1)
    out = np.zeros(len(close), dtype=bool)
    for i in np.flatnonzero(near).tolist():
        raw = key_before(data, int(close[i]))
        if isinstance(raw, bytes) and b"\\" in raw:
            try:
                out[i] = json.loads(b'"' + raw + b'"') == key
            except ValueError:
                out[i] = True  # not JSON: whatever the parser makes of it, the line is its to read
    return out


def lines_buffer(lines: pa.Array | pa.ChunkedArray,
                 colons: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(line offsets, the lines' bytes, the colons' positions in them) of a non-empty large_string array."""
    arr = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    if colons is None:
        colons = find_byte(data, COLON)
    else:
        colons = colons[(colons >= offsets[0]) & (colons < offsets[-1])] - offsets[0]
    return offsets, data, colons


def equal_at(data: np.ndarray, starts: np.ndarray, pattern: bytes) -> np.ndarray:
    """Whether ``data[s:s + len(pattern)] == pattern`` for each ``s`` in ``starts`` (every window inside ``data``).

    Compared 8 bytes at a time (a key is 5-20 bytes): a gather per byte, as (starts x bytes) index arrays, was
    most of the time spent finding the keys."""
    n = len(pattern)
    starts = np.asarray(starts, dtype=np.int64)
    if n < 8 or len(data) < 8:
        return (data[starts[:, None] + np.arange(n)] == np.frombuffer(pattern, np.uint8)).all(axis=1)
    words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))  # 8 bytes at every offset
    same = np.ones(len(starts), dtype=bool)
    for j in (*range(0, n - 8, 8), n - 8):  # the last word overlaps the one before when n is no multiple of 8
        same &= words[starts + j] == np.frombuffer(pattern[j:j + 8], "<u8")[0]
    return same


def blank(b):
    """Whether the byte(s) ``b`` are JSON whitespace (a line holds no newline)."""
    return (b == SPACE) | (b == TAB) | (b == CR)


def _grouped_keys(data: np.ndarray, end: np.ndarray) -> set[bytes | None]:
    """The raw keys closed by the quotes at ``end`` (none escaped), read once per distinct key."""
    out: set[bytes | None] = set()
    near = end < 8
    out |= {key_before(data, e) for e in end[near].tolist()}
    end = end[~near]
    if not len(end):
        return out
    words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))  # 8 bytes at every offset
    sig = words[end - 8]
    order = np.argsort(sig, kind="stable")
    end, sig = end[order], sig[order]
    starts = np.flatnonzero(np.r_[True, sig[1:] != sig[:-1]])
    for members in np.split(end, starts[1:]):
        for _ in range(MAX_READS):
            key = key_before(data, int(members[0]))
            out.add(key)
            if key is None or key == _LONG:
                members = members[1:]
            else:  # members ending in the same quote + key, that quote not escaped, have this key
                n = len(key) + 1
                ok = members >= n
                at = members[ok]
                same = equal_at(data, at - n, b'"' + key)
                same &= (at == n) | (data[np.maximum(at - n - 1, 0)] != BACKSLASH)
                ok[ok] = same
                members = members[~ok]
            if not len(members):
                break
        else:  # many keys with the same last 8 bytes: the rest one by one
            out |= {key_before(data, e) for e in members.tolist()}
    return out


LONG_KEY = "\x00a key longer than 64 KB"  # stands for keys too long to be looked at (their lines are found apart)
_LONG = LONG_KEY.encode()


def key_before(data: np.ndarray, end: int) -> bytes | None:
    """The raw bytes of the string closed by the quote at ``end`` (None when that quote is escaped;
    ``LONG_KEY`` when its opening quote is more than 64 KB back)."""
    for span in (256, MAX_KEY_BYTES):  # keys are short: a short look back first
        start = max(end - span, 0)
        found = _scan_back(bytes(data[start:end]), whole=start == 0)
        if found is not _UNSURE:
            return found
    return _LONG


_UNSURE = object()


def _scan_back(text: bytes, whole: bool):
    """The string closed by a quote just after ``text``; _UNSURE when that depends on bytes before ``text``
    (``whole``: there are none, or they are not looked at)."""
    i = len(text)
    n = _backslashes_before(text, i)
    if n == i and not whole:
        return _UNSURE
    if n % 2:
        return None  # an escaped quote closes nothing
    while True:
        i = text.rfind(b'"', 0, i)
        if i < 0:
            return None if whole else _UNSURE
        n = _backslashes_before(text, i)
        if n == i and not whole:
            return _UNSURE
        if n % 2 == 0:
            return text[i + 1:]


def _backslashes_before(text: bytes, i: int) -> int:
    """The length of the run of backslashes just before index ``i``."""
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == BACKSLASH:
        n += 1
    return n
