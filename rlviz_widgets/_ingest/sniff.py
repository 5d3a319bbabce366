"""A cheap look at a file's first record: does it look like a log of the format being opened?"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

CHUNK = 1 << 16
HEAD = 1 << 20  # bytes looked at, at the most: a first record may be larger (token arrays), its opening is enough

# (fields, path, device, inode) -> the verdict on a complete first line: a followed run's walk (every few seconds)
# does not read the same files again
_SEEN: dict[tuple, bool] = {}


def first_record_has(fields: Iterable[str]) -> Callable[[Path], bool]:
    """A check of a JSON-lines file: its first non-blank line is a JSON object holding at least one of ``fields``
    (top-level keys). A first record longer than ``HEAD`` bytes is judged by its opening: an object whose first
    ``HEAD`` bytes name one of the fields as a key. An empty or blank file (a run's file not written yet) and a file
    that cannot be opened (its read says why) pass: they are no evidence against the folder holding them."""
    wanted = frozenset(fields)
    key = re.compile(rb'"(' + b"|".join(re.escape(json.dumps(f)[1:-1].encode()) for f in sorted(wanted))
                     + rb')"\s*:') if wanted else None

    def judge(line: bytes, whole: bool) -> bool:
        if not whole:  # cut: the opening decides
            return line.startswith(b"{") and key is not None and key.search(line) is not None
        try:
            record = json.loads(line)
        except ValueError:  # not JSON, or not UTF-8
            return False
        return isinstance(record, dict) and not wanted.isdisjoint(record)

    def looks_like(path: Path) -> bool:
        try:
            st = os.stat(path)
            seen = (wanted, os.fspath(path), st.st_dev, st.st_ino)
            if seen in _SEEN:
                return _SEEN[seen]
            with open(path, "rb") as f:
                line, whole, final = _first_line(f)
        except OSError:
            return True
        if not line:  # nothing yet
            return True
        verdict = judge(line, whole)
        if final:  # not a first line still being written
            if len(_SEEN) > 100_000:
                _SEEN.clear()
            _SEEN[seen] = verdict
        return verdict

    return looks_like


def _first_line(f) -> tuple[bytes, bool, bool]:
    """(the first non-blank line of an open file, whether it is whole, whether more bytes could change that): read
    a chunk at a time up to ``HEAD`` bytes."""
    head = b""
    while len(head) < HEAD:
        chunk = f.read(CHUNK)
        if not chunk:
            break
        head += chunk
        line, newline, _ = head.lstrip(b"\xef\xbb\xbf").lstrip().partition(b"\n")
        if newline:
            return line, True, True
    return head.lstrip(b"\xef\xbb\xbf").lstrip()[:HEAD], False, len(head) >= HEAD
