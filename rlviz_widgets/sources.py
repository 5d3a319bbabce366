"""Turn what the user points at (folder, file, glob, list) into a sorted list of log files."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from pathlib import Path

LOG_SUFFIXES = (".jsonl",)


class NoLogsError(FileNotFoundError):
    """The source names a missing path or holds no log files."""


def _items(source) -> list:
    """The paths or patterns a source names (a list of them, or one)."""
    return list(source) if isinstance(source, (list, tuple)) else [source]


def resolve(source: str | os.PathLike | list | tuple, suffixes: tuple[str, ...] = LOG_SUFFIXES,
            accepts: Callable[[Path], bool] | None = None, what: str = "") -> list[Path]:
    """Every log file named by ``source``, absolute and sorted, without duplicates.

    A folder means every file with one of ``suffixes`` below it, at any depth (and, with
    ``accepts``, only the files it accepts: a format's file names, ``what`` describing them);
    a glob pattern means its matches; a list means the union of its items.
    """
    items = _items(source)
    if not items:
        raise NoLogsError("no log source given (an empty list)")
    found: dict[Path, None] = {}
    for item in items:
        for path in _resolve_one(os.fspath(item), suffixes, accepts, what):
            found[path] = None
    return sorted(found)


def _resolve_one(item: str, suffixes: tuple[str, ...], accepts=None, what: str = "") -> list[Path]:
    path = Path(item).expanduser()
    if path.is_dir():
        candidates = sorted(p.resolve() for p in path.rglob("*") if p.is_file() and p.name.endswith(suffixes))
        files = [p for p in candidates if accepts is None or accepts(p)]
        if not files:
            kinds = what or ", ".join("*" + s for s in suffixes)
            if candidates:  # the format was told (or guessed from the records), but its file names are others
                raise NoLogsError(f"no log files ({kinds}) found in folder {path}: its {len(candidates)} "
                                  f"{'/'.join('*' + s for s in suffixes)} file(s) (e.g. {candidates[0].name}) are "
                                  "named otherwise; open a file by its path, or choose another format=")
            raise NoLogsError(f"no log files ({kinds}) found in folder {path}")
        return files
    if path.is_file():
        return [path.resolve()]
    if glob.has_magic(item):
        files = sorted(Path(p).resolve() for p in glob.glob(os.path.expanduser(item), recursive=True)
                       if Path(p).is_file())
        if not files:
            raise NoLogsError(f"the pattern {item} matches no file")
        return files
    raise NoLogsError(f"log path does not exist: {path}")


def source_key(source) -> str:
    """What the user named, spelled one way (absolute paths, sorted): the same run opened again has the same key."""
    items = _items(source)
    out = set()
    for item in items:
        path = Path(os.fspath(item)).expanduser()
        out.add(str(path.resolve()) if path.exists() else os.path.abspath(path))
    return "\n".join(sorted(out))


def source_folders(source) -> set[Path]:
    """The folders the user named (and the fixed folders of glob patterns): logs live below them."""
    items = _items(source)
    out = set()
    for item in items:
        path = Path(os.fspath(item)).expanduser()
        if path.is_dir():
            out.add(path.resolve())
        elif glob.has_magic(str(path)):
            parts = []
            for part in path.parts:
                if glob.has_magic(part):
                    break
                parts.append(part)
            if parts and Path(*parts).is_dir():
                out.add(Path(*parts).resolve())
    return out
