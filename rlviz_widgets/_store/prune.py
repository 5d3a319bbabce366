"""What the cache holds, and pruning what no log needs any more.

The cache keeps one folder per log file (``<cache>/files/<hash>``). A log deleted or moved, or a cache
written by another version of the package (an upgrade), leaves its folder behind: nothing reads it again,
and on big runs it is a third of the log's size. ``prune_cache`` deletes those folders, and only on request:
a log on a network mount that is briefly away looks deleted too, so nothing is ever pruned on its own.
A folder a live Run reads (its lease names it) or whose lock another process holds is left alone.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd

from rlviz_widgets._store import cache, leases

COLUMNS = ["log", "lines", "state", "bytes", "in_use", "removed", "folder"]


def cache_usage(cache_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per cached log file: ``log`` (its path), ``lines`` (``all``, or the per-step cap and step range
    whose lines alone it holds: ``cap=16 steps=..``), ``state`` (``current``; ``log gone``, ``other version``,
    ``superseded`` (a cap's lines of a log whose every line is cached too) or ``unreadable``: what ``prune_cache``
    removes), ``bytes`` on disk, ``in_use`` (a live Run reads it, or
    another process is writing it), ``folder``."""
    return _scan(_root(cache_dir), remove=False)


def prune_cache(cache_dir: str | os.PathLike | None = None, dry_run: bool = False) -> pd.DataFrame:
    """Delete the cache of log files that are gone, of other package versions (another environment sharing
    the cache rebuilds its own) and unreadable leftovers, unless in use. Returns ``cache_usage``'s rows of
    those folders, ``removed`` saying which went (none with ``dry_run``). Logs are never touched: only
    folders under ``<cache>/files``."""
    found = _scan(_root(cache_dir), remove=not dry_run)
    return found[found["state"] != "current"].reset_index(drop=True)


def _root(cache_dir) -> Path:
    return Path(cache_dir).expanduser().resolve() if cache_dir is not None else cache.default_cache_root()


def _scan(root: Path, remove: bool) -> pd.DataFrame:
    rows = []
    try:
        folders = sorted(p for p in (root / "files").iterdir() if p.is_dir())
    except OSError:  # no cache yet
        folders = []
    used = leases.folders_in_use(root) if folders else set()
    for folder in folders:
        log, state, lines = _state(folder)
        row = {"log": log, "lines": lines, "state": state, "bytes": _bytes(folder), "in_use": folder.name in used,
               "removed": False, "folder": str(folder)}
        if state != "current" and not row["in_use"]:
            lock = cache.try_lock(root, folder)
            if lock is None:  # another process is building or reading it
                row["in_use"] = True
            else:
                with lock:
                    # looked at again under the lock: a process may have built the folder (or made its log
                    # current again) and leased it between the first look and the lock
                    row["log"], row["state"], row["lines"] = _state(folder)
                    row["in_use"] = folder.name in leases.folders_in_use(root)
                    if remove and row["state"] != "current" and not row["in_use"]:
                        shutil.rmtree(folder, ignore_errors=True)
                        row["removed"] = not folder.exists()
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS).astype({"bytes": "int64", "in_use": bool, "removed": bool})


def _state(folder: Path) -> tuple[str | None, str, str | None]:
    """(the log the folder caches, what it is: current / log gone / other version / superseded (a cap's lines of a
    log whose every line is cached too) / unreadable, which of its lines it holds: ``all``, or those of a cap and a
    step range, see ``readers.selective``)."""
    try:
        data = json.loads((folder / "state.json").read_text())
        log, version = str(data["path"]), int(data.get("version", 0))
        base, sep, options = str(data.get("reader", "")).partition("|")
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None, "unreadable", None
    lines = options.replace("|", " ") if sep else "all"
    if version != cache.CACHE_VERSION:
        return log, "other version", lines
    if not os.path.exists(log):
        return log, "log gone", lines
    if sep and cache.reusable(cache.FileCache(folder.parent.parent, Path(log), base)):
        # every line of the log is cached too (of its present content: a cache of a log since rewritten is not),
        # and an open with a cap or range would take that cache
        return log, "superseded", lines
    return log, "current", lines


def _bytes(folder: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(folder):
        for n in names:
            try:
                total += os.stat(os.path.join(dirpath, n)).st_size
            except OSError:
                pass
    return total

