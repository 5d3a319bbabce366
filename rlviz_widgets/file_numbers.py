"""Stable file numbers: a log file keeps its number for as long as the cache lives.

sample_id = file number * 1e9 + line, so numbering files by their sorted position would shift
every id when a new file sorts first (verl's 10.jsonl before 9.jsonl). Numbers are instead
handed out once, in the cache root's registry, in the order files are first seen.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def assign(root: Path, paths: Iterable[str], held: dict[str, int] | None = None) -> dict[str, int]:
    """The number of each path, giving new paths the next free numbers (sorted order among them). ``held``: the
    numbers a live run already gave its files, kept where the registry lost them (the cache dir deleted under
    it): its sample ids would otherwise name other samples."""
    paths = list(paths)
    registry = root / "file_numbers.json"
    known = _read(registry)
    if all(p in known for p in paths):  # the usual reopen: read only, touch nothing
        return {p: known[p] for p in paths}
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "file_numbers.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # several kernels may open runs at once
        known = _read(registry)
        taken, restored = set(known.values()), False
        for p, n in sorted((held or {}).items(), key=lambda x: x[1]):
            if p not in known and n not in taken:
                known[p] = n
                taken.add(n)
                restored = True
        new = [p for p in sorted(set(paths)) if p not in known]
        if new or restored:
            nxt = max(known.values(), default=-1) + 1
            for k, p in enumerate(new):
                known[p] = nxt + k
            fd, tmp = tempfile.mkstemp(dir=root, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(known, f)
            os.replace(tmp, registry)
        return {p: known[p] for p in paths}


def _read(registry: Path) -> dict[str, int]:
    try:
        return json.loads(registry.read_text())
    except (OSError, ValueError):
        return {}
