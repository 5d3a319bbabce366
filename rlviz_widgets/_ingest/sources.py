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


def absolute(source):
    """``source`` with each path or pattern made absolute (``~`` expanded): a run follows the logs it was opened
    on, wherever the working directory goes later. An empty path is refused (it would mean the working
    directory)."""
    def one(item):
        try:
            text = os.fspath(item)
        except TypeError:
            raise TypeError(f"a log source is a folder, a file or a glob (a str or a path), or a list of them; "
                            f"not {item!r}") from None
        if not str(text).strip():
            raise NoLogsError("an empty log path was given (\"\"): name a folder, a file or a glob")
        text = os.path.expanduser(text)
        # joined, not normalised: "latest/../base" with latest a link goes where the OS goes, not where text would
        return text if os.path.isabs(text) else os.path.join(os.getcwd(), text)

    return [one(i) for i in source] if isinstance(source, (list, tuple)) else one(source)


def resolve(source: str | os.PathLike | list | tuple, suffixes: tuple[str, ...] = LOG_SUFFIXES,
            accepts: Callable[[Path], bool] | None = None, what: str = "",
            problems: list[tuple[str, str, str]] | None = None) -> list[Path]:
    """Every log file named by ``source``, absolute and sorted, without duplicates.

    A folder means every file with one of ``suffixes`` below it, at any depth, through links to folders too
    (and, with ``accepts``, only the files it accepts: a format's file names, ``what`` describing them); names
    starting with a dot (``.ipynb_checkpoints``, ``.git``) are passed over. A glob pattern means its matches; a
    list means the union of its items. What a folder holds but cannot be read (a folder that cannot be listed,
    a file name that is not UTF-8, a compressed log) goes to ``problems`` as (path, kind, message).
    """
    items = _items(source)
    if not items:
        raise NoLogsError("no log source given (an empty list)")
    found: dict[Path, None] = {}
    said: list[tuple[str, str, str]] = []
    for item in items:
        for path in _resolve_one(os.fspath(item), suffixes, accepts, what, said):
            found[path] = None
    if problems is not None:
        problems += said
    if not found and said:  # only files named that cannot be read (a compressed log named by its path)
        path, _, why = said[0]
        raise NoLogsError(f"no log file that can be read: {path} ({why})"
                          + (f" and {len(said) - 1} more" if len(said) > 1 else ""))
    return _one_path_per_file(sorted(found), problems)


def _one_path_per_file(paths: list[Path], problems: list | None) -> list[Path]:
    """``paths`` less those that reach a file already named (hard links: a resolved path does not tell them
    apart), each said in ``problems``: its samples would be read twice."""
    out, first = [], {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:  # gone since it was listed: left for the read to report
            out.append(path)
            continue
        key = (st.st_dev, st.st_ino)
        if key in first:
            _report(problems, _shown(path), "same_file",
                    f"the same file as {_shown(first[key])} (a hard link): its samples are read once, from there")
        else:
            first[key] = path
            out.append(path)
    return out


COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip")


def _walk(folder: Path, suffixes: tuple[str, ...], problems: list | None) -> list[Path]:
    """The files with ``suffixes`` below ``folder``, following links to folders (each folder once: a link loop
    ends), hidden names passed over; what cannot be read is added to ``problems``."""
    out, seen = [], set()

    def failed(e: OSError) -> None:
        _report(problems, _shown(e.filename or folder), "unreadable_folder",
                f"the folder cannot be listed ({e.strerror}): its logs are not read")

    for root, dirs, names in os.walk(folder, onerror=failed, followlinks=True):
        try:
            st = os.stat(root)
        except OSError:
            dirs[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:  # reached again through a link
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            if name.startswith("."):
                continue
            path = os.path.join(root, name)
            if name.endswith(suffixes):
                if not _utf8(path):
                    _report(problems, _shown(path), "unreadable_file", NOT_UTF8)
                elif os.path.isfile(path):
                    if (why := _sniffed(path, suffixes)) is not None:  # a .jsonl that is gzip...
                        _report(problems, _shown(path), *why)
                    else:
                        out.append(Path(path).resolve())
                elif (why := _not_a_file(path)) is not None:
                    _report(problems, _shown(path), "unreadable_file", why)
            elif name.endswith(tuple(s + c for s in suffixes for c in COMPRESSED)):
                _report(problems, _shown(path), "compressed_file", COMPRESSED_LOG)
    return sorted(set(out))


NOT_UTF8 = "the path is not UTF-8: rename it to read the file"
COMPRESSED_LOG = "a compressed log is not read: decompress it to read it"
PARQUET_LOG = "a Parquet file, not JSON lines: not read; Parquet is read as TRL's completions, by format='trl'"
# the first bytes of what a file named as a log may really be: read as text, each gave a problem per "line"
_MAGIC = ((b"\x1f\x8b", "compressed_file", COMPRESSED_LOG), (b"\xfd7zXZ\x00", "compressed_file", COMPRESSED_LOG),
          (b"\x28\xb5\x2f\xfd", "compressed_file", COMPRESSED_LOG), (b"PK\x03\x04", "compressed_file", COMPRESSED_LOG),
          (b"PAR1", "parquet_file", PARQUET_LOG))


def _no_json_lines(path: Path, suffixes: tuple[str, ...]) -> tuple[str, str] | None:
    """(kind, message) when a file named as a JSON-lines log (by its path or a glob) is compressed or Parquet, by
    its name or first bytes; None when it may hold JSON lines, or what ``suffixes`` wants (Parquet, for TRL)."""
    if ".jsonl" not in suffixes:
        return None
    name = path.name.lower()
    if name.endswith(COMPRESSED):
        return "compressed_file", COMPRESSED_LOG
    if name.endswith(".parquet"):
        return None if ".parquet" in suffixes else ("parquet_file", PARQUET_LOG)
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError:
        return None  # the read reports it
    if head[:3] == b"BZh" and head[3:4].isdigit():
        return "compressed_file", COMPRESSED_LOG
    return next(((kind, why) for magic, kind, why in _MAGIC
                 if head.startswith(magic) and not (kind == "parquet_file" and ".parquet" in suffixes)), None)


_SNIFFED: dict[tuple, tuple[str, str] | None] = {}  # (path, suffixes, file identity) -> _no_json_lines' answer


def _sniffed(path: str, suffixes: tuple[str, ...]) -> tuple[str, str] | None:
    """``_no_json_lines`` of a file a folder's walk found, remembered while the file is unchanged: a followed run's
    walk (every few seconds) opens only the files written since, not thousands (on a network mount, a round trip
    each)."""
    try:
        st = os.stat(path)
    except OSError:
        return None  # the read reports it
    key = (path, suffixes, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _SNIFFED:
        if len(_SNIFFED) > 100_000:
            _SNIFFED.clear()
        _SNIFFED[key] = _no_json_lines(Path(path), suffixes)
    return _SNIFFED[key]


def _not_a_file(path: str) -> str | None:
    """Why a log's path that is no regular file cannot be read (None: a folder, read as one)."""
    if not os.path.exists(path):
        return "a link to nothing (a drive not mounted? a file deleted?): not read"
    if not os.path.isdir(path):
        return "not a regular file (a pipe or a device?): not read"
    return None


def _report(problems: list | None, path: str, kind: str, message: str) -> None:
    if problems is not None:
        problems.append((path, kind, message))


def _utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(path) -> str:
    """A path as text that any later step can hold (bytes that are not UTF-8 escaped)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _resolve_one(item: str, suffixes: tuple[str, ...], accepts=None, what: str = "",
                 problems: list | None = None) -> list[Path]:
    if not item.strip():
        raise NoLogsError("an empty log path was given (\"\"): name a folder, a file or a glob")
    path = Path(item).expanduser()
    if path.is_dir():
        here: list = []
        candidates = _walk(path, suffixes, here)
        if problems is not None:
            problems += here
        files = [p for p in candidates if accepts is None or accepts(p)]
        if not files:
            kinds = what or ", ".join("*" + s for s in suffixes)
            if here:  # what is there cannot be read
                raise NoLogsError(f"no log files ({kinds}) that can be read found in folder {path}: "
                                  f"{len(here)} cannot, e.g. {here[0][0]} ({here[0][2]})")
            if candidates:  # the format was told (or guessed from the records), but its file names are others
                raise NoLogsError(f"no log files ({kinds}) found in folder {path}: its {len(candidates)} "
                                  f"{'/'.join('*' + s for s in suffixes)} file(s) (e.g. {candidates[0].name}) are "
                                  "named otherwise; open a file by its path, or choose another format=")
            if not os.access(path, os.R_OK | os.X_OK):
                raise NoLogsError(f"the folder {path} cannot be listed (permission denied)")
            raise NoLogsError(f"no log files ({kinds}) found in folder {path}")
        return files
    if path.is_file():
        if not _utf8(str(path)):
            raise NoLogsError(f"the log path is not UTF-8: {_shown(path)} (rename it to read it)")
        if (why := _no_json_lines(path, suffixes)) is not None:
            _report(problems, _shown(path), *why)
            return []
        return [path.resolve()]
    if glob.has_magic(item):
        matches = []
        for p in glob.glob(os.path.expanduser(item), recursive=True):
            if os.path.isfile(p):
                matches.append(p)
            elif p.endswith(suffixes) and (why := _not_a_file(p)) is not None:
                _report(problems, _shown(p), "unreadable_file", why)
        files = []
        for p in matches:
            if not _utf8(p):
                _report(problems, _shown(p), "unreadable_file", NOT_UTF8)
            elif p.endswith(tuple(s + c for s in suffixes for c in COMPRESSED)):
                _report(problems, _shown(p), "compressed_file", COMPRESSED_LOG)
            elif (why := _no_json_lines(Path(p), suffixes)) is not None:
                _report(problems, _shown(p), *why)
            else:
                files.append(Path(p).resolve())
        if not files:
            said = [m for q, _, m in (problems or []) if q == _shown(matches[0])] if matches else []
            raise NoLogsError(f"the pattern {item} matches no file" if not matches else
                              f"the pattern {item} matches no file that can be read: e.g. {_shown(matches[0])}"
                              + (f" ({said[-1]})" if said else ""))
        return sorted(files)
    if path.exists():
        raise NoLogsError(f"log path is neither a file nor a folder (a pipe or a device?): {path}")
    raise NoLogsError(f"log path does not exist: {path}")


def source_key(source) -> str:
    """What the user named, spelled one way (absolute paths, sorted): the same run opened again has the same key."""
    items = _items(source)
    out = set()
    for item in items:
        path = Path(os.fspath(item)).expanduser()
        out.add(str(path.resolve()) if path.exists() else os.path.abspath(path))
    return "\n".join(sorted(out))


def named_files(source) -> set[Path]:
    """The files the user named by their path or a glob (not those found in a folder named)."""
    out = set()
    for item in _items(source):
        path = Path(os.fspath(item)).expanduser()
        if path.is_file():
            out.add(path.resolve())
        elif not path.is_dir() and glob.has_magic(str(path)):
            out |= {Path(p).resolve() for p in glob.glob(str(path), recursive=True)}
    return out


def source_folders(source, globs: bool = True) -> set[Path]:
    """The folders the user named (and, with ``globs``, the fixed folders of glob patterns): logs live below them."""
    items = _items(source)
    out = set()
    for item in items:
        path = Path(os.fspath(item)).expanduser()
        if path.is_dir():
            out.add(path.resolve())
        elif globs and glob.has_magic(str(path)) and not path.exists():  # exp[lr=1e-4].jsonl is no pattern
            parts = []
            for part in path.parts:
                if glob.has_magic(part):
                    break
                parts.append(part)
            if parts and Path(*parts).is_dir():
                out.add(Path(*parts).resolve())
    return out
