"""A cheap look at a file's first record: does it look like a log of the format being opened?"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path

HEAD = 1 << 20  # bytes looked at: a first record may be larger (token arrays), its opening is enough


def first_record_has(fields: Iterable[str]) -> Callable[[Path], bool]:
    """A check of a JSON-lines file: its first non-blank line is a JSON object holding at least one of ``fields``
    (top-level keys). A first record longer than ``HEAD`` bytes is judged by its opening: an object whose first
    ``HEAD`` bytes name one of the fields as a key. An empty or blank file (a run's file not written yet) and a file
    that cannot be opened (its read says why) pass: they are no evidence against the folder holding them."""
    wanted = frozenset(fields)
    key = re.compile(rb'"(' + b"|".join(re.escape(json.dumps(f)[1:-1].encode()) for f in sorted(wanted))
                     + rb')"\s*:') if wanted else None

    def looks_like(path: Path) -> bool:
        try:
            with open(path, "rb") as f:
                head = f.read(HEAD)
        except OSError:
            return True
        text = head.lstrip(b"\xef\xbb\xbf").lstrip()
        if not text:
            return True
        line, newline, _ = text.partition(b"\n")
        if not newline and len(head) == HEAD:  # cut: the opening decides
            return line.startswith(b"{") and key is not None and key.search(line) is not None
        try:
            record = json.loads(line)
        except ValueError:  # not JSON, or not UTF-8
            return False
        return isinstance(record, dict) and not wanted.isdisjoint(record)

    return looks_like
