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
    numbers a live run already gave its files, written back where the registry lost them (the cache dir deleted
    under it) and no other path took them since; new paths are numbered past them too (``keeping`` settles the
    rest)."""
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
            nxt = max([*known.values(), *(held or {}).values()], default=0) + 1  # from 1: no id is a bare line number
            for k, p in enumerate(new):
                known[p] = nxt + k
            fd, tmp = tempfile.mkstemp(dir=root, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(known, f)
            os.replace(tmp, registry)
        return {p: known[p] for p in paths}


def keeping(held: dict[str, int], given: dict[str, int]) -> dict[str, int]:
    """A live run's numbers after ``assign`` gave ``given``: its own kept whatever the registry says now (its
    sample ids must go on naming the same samples), a new path taking the registry's number unless the run
    holds that number already (the registry rebuilt by another kernel meanwhile), else one past all."""
    out = dict(held)
    taken = set(out.values())
    for p, n in given.items():
        if p not in out:
            if n in taken:
                n = max(taken | set(given.values())) + 1
            out[p] = n
            taken.add(n)
    return out


def _read(registry: Path) -> dict[str, int]:
    try:
        return json.loads(registry.read_text())
    except (OSError, ValueError):
        return {}
