"""Turn what the user points at (folder, file, glob, list) into a sorted list of log files."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from pathlib import Path

from rlviz_widgets._progress import Discovery

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
            problems: list[tuple[str, str, str]] | None = None, *,
            looks_like: Callable[[Path], bool] | None = None, progress: bool = False) -> list[Path]:
    """Every log file named by ``source``, absolute and sorted, without duplicates.

    A folder means every file with one of ``suffixes`` below it, at any depth, through links to folders too
    (and, with ``accepts``, only the files it accepts: a format's file names, ``what`` describing them); names
    starting with a dot (``.ipynb_checkpoints``, ``.git``) are passed over. A link up to a folder holding the
    source is not followed; with ``looks_like`` (a cheap check of a file, e.g. ``sniff.first_record_has``), a link
    out of the folder whose first files mostly fail it is left. A glob pattern means its matches; a list means the
    union of its items. What a folder holds but cannot be read (a folder that cannot be listed, a file name that is
    not UTF-8, a compressed log, a link not followed) goes to ``problems`` as (path, kind, message).

    ``progress``: folders walked and files found are shown once the search takes half a second. Ctrl-C stops the
    search: a ``KeyboardInterrupt`` is raised from here, saying so, ``problems`` untouched.
    """
    items = _items(source)
    if not items:
        raise NoLogsError("no log source given (an empty list)")
    found: dict[Path, None] = {}
    said: list[tuple[str, str, str]] = []
    bar = Discovery(enabled=progress)
    try:
        for item in items:
            for path in _resolve_one(os.fspath(item), suffixes, accepts, what, said, looks_like=looks_like,
                                     bar=bar):
                found[path] = None
    except KeyboardInterrupt:
        # raised anew, without the walk's frames: nothing was kept, nothing is half done
        raise KeyboardInterrupt(f"stopped while looking for log files in {_shown(items[0])}"
                                + (" and the other sources" if len(items) > 1 else "")
                                + f" ({bar.files} found in {bar.folders} folders so far): nothing was read") from None
    finally:
        bar.close()
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


LOOK = 8  # files through one link looked at before it is judged: most of them not the format, it is left


def _walk(folder: Path, suffixes: tuple[str, ...], problems: list | None, *,
          accepts: Callable[[Path], bool] | None = None, looks_like: Callable[[Path], bool] | None = None,
          bar: Discovery | None = None) -> list[Path]:
    """The files with ``suffixes`` below ``folder``, following links to folders (see ``_Walk``), hidden names
    passed over; what cannot be read is added to ``problems``."""
    return _Walk(folder, suffixes, accepts, looks_like, bar or Discovery(enabled=False)).run(problems)


class _Walk:
    """One walk of a folder. Each real folder and file is entered once. A link up to a folder holding the source
    folder, or holding the link itself, is not followed (it would walk the source's own tree again, or the whole
    disk for ``root -> /``): it is said, as a ``looping_link``. A link elsewhere is followed (a run on another
    mount); with ``looks_like``, once most of the first ``LOOK`` files found through it fail that check, the walk
    leaves it (its files are not read) and says so, as a ``foreign_link``. Files in the source's own tree are never
    left that way."""

    def __init__(self, folder: Path, suffixes: tuple[str, ...], accepts: Callable[[Path], bool] | None,
                 looks_like: Callable[[Path], bool] | None, bar: Discovery):
        self.folder, self.home = folder, os.path.realpath(folder)
        self.suffixes, self.accepts, self.looks_like, self.bar = suffixes, accepts, looks_like, bar
        self.seen_folders: set[tuple[int, int]] = set()
        self.seen_files: set[str] = set()
        self.via: dict[str, str] = {}  # a folder walked -> the link out of the source's tree that led to it
        self.looked: dict[str, list[bool]] = {}  # a link -> its files' checks
        self.left: set[str] = set()  # links given up
        self.out: list[tuple[Path, str | None]] = []
        self.said: list[tuple[str | None, tuple[str, str, str]]] = []  # (link that led there, problem)

    def run(self, problems: list | None) -> list[Path]:
        for root, dirs, names in os.walk(self.folder, onerror=self._failed, followlinks=True):
            link = self.via.get(root)
            if not self._enter(root, link):
                dirs[:] = []
                continue
            self.bar.folder()
            dirs[:] = self._followed(root, sorted(d for d in dirs if not d.startswith(".")), link)
            for name in sorted(names):  # sorted: the same files are looked at by every walk
                if link in self.left:
                    break
                if not name.startswith("."):
                    self._file(root, name, link)
        if problems is not None:
            problems += [p for link, p in self.said if link not in self.left]
        return sorted({path for path, link in self.out if link not in self.left})

    def _say(self, link: str | None, path, kind: str, message: str) -> None:
        self.said.append((link, (_shown(path), kind, message)))

    def _failed(self, e: OSError) -> None:
        self._say(self.via.get(e.filename), e.filename or self.folder, "unreadable_folder",
                  f"the folder cannot be listed ({e.strerror}): its logs are not read")

    def _enter(self, root: str, link: str | None) -> bool:
        """Whether to walk ``root``: not under a link given up, not a real folder already walked."""
        if link in self.left:
            return False
        try:
            st = os.stat(root)
        except OSError:
            return False
        if (st.st_dev, st.st_ino) in self.seen_folders:  # reached again through a link
            return False
        self.seen_folders.add((st.st_dev, st.st_ino))
        return True

    def _followed(self, root: str, dirs: list[str], link: str | None) -> list[str]:
        """``dirs`` less the links leading up; where each leads from the source's tree noted in ``via``."""
        kept, here = [], None
        for d in dirs:
            child = os.path.join(root, d)
            if not os.path.islink(child):
                if link is not None:
                    self.via[child] = link
                kept.append(d)
                continue
            target = os.path.realpath(child)
            here = here or os.path.realpath(root)
            up = next((f for f in (self.home, here) if _within(f, target)), None)
            if up is not None:
                self._say(link, child, "looping_link",
                          f"a link to {_shown(target)}, a folder holding {_shown(up)}: not followed (it would walk "
                          "that folder again, and the tree around it)")
                continue
            if not _within(target, self.home):  # (a link back into the source's tree leads to the source's files)
                self.via[child] = child
            kept.append(d)
        return kept

    def _file(self, root: str, name: str, link: str | None) -> None:
        path = os.path.join(root, name)
        if name.endswith(tuple(s + c for s in self.suffixes for c in COMPRESSED)):
            self._say(link, path, "compressed_file", COMPRESSED_LOG)
        if not name.endswith(self.suffixes):
            return
        if not _utf8(path):
            self._say(link, path, "unreadable_file", NOT_UTF8)
        elif not os.path.isfile(path):
            if (why := _not_a_file(path)) is not None:
                self._say(link, path, "unreadable_file", why)
        elif (real := os.path.realpath(path)) not in self.seen_files:
            self.seen_files.add(real)
            if (why := _sniffed(path, self.suffixes)) is not None:  # a .jsonl that is gzip...
                self._say(link, path, *why)
                return
            self.out.append((Path(real), link))
            self.bar.file()
            if link is not None and not _within(real, self.home):
                self._look(link, Path(real))

    def _look(self, link: str, path: Path) -> None:
        """Check a file reached through ``link`` (the first ``LOOK`` of them): mostly failed, the link is left."""
        checks = self.looked.setdefault(link, [])
        if self.looks_like is None or len(checks) >= LOOK or (self.accepts is not None and not self.accepts(path)):
            return
        checks.append(bool(self.looks_like(path)))
        failed = checks.count(False)
        if len(checks) == LOOK and 2 * failed > LOOK:
            self.left.add(link)
            found = sum(1 for _, via in self.out if via == link)
            self._say(None, link, "foreign_link",
                      f"a link to {_shown(os.path.realpath(link))}: what it leads to does not look like these logs "
                      f"({failed} of the first {LOOK} files found there do not), so it is left: the {found} files "
                      "found there are not read, and the rest of it is not searched")


def _within(path: str, folder: str) -> bool:
    """Whether real path ``path`` is ``folder`` or below it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


NOT_UTF8 = "the path is not UTF-8: rename it to read the file"
COMPRESSED_LOG = "a compressed log is not read: decompress it to read it"
PARQUET_LOG = "a Parquet file, not JSON lines: not read; Parquet is read as TRL's completions, by format='trl'"
# the first bytes of what a file named as a log may really be: read as text, each gave a problem per "line"
_MAGIC = ((b"\x1f\x8b", "compressed_file", COMPRESSED_LOG), (b"\xfd7zXZ\x00", "compressed_file", COMPRESSED_LOG),
          (b"\x28\xb5\x2f\xfd", "compressed_file", COMPRESSED_LOG), (b"PK\x03\x04", "compressed_file", COMPRESSED_LOG),
          (b"PAR1", "parquet_file", PARQUET_LOG))


FORMATS_READ = ("logs are JSON lines, one record per line (format= rlb, verl, openinstruct, nemo, chat, prime, or "
                "columns= to map any record's fields), or TRL's Parquet completions (format='trl')")
NOT_JSON_LINES = "{what}, not JSON lines: not read; " + FORMATS_READ
# the first bytes of files that are no log at all (kept for another tool: a table, an array, a checkpoint)
_NOT_LOGS = ((b"\x80", "a Python pickle"), (b"\x93NUMPY", "a NumPy array"),
             (b"SQLite format 3\x00", "an SQLite database"), (b"ARROW1", "an Arrow file"))
_ZIPPED_NOT_LOGS = {".pt": "a PyTorch file", ".pth": "a PyTorch file", ".npz": "a NumPy archive"}  # zip inside
HEAD_BYTES = 8192  # enough for a table's header and first row


def _no_json_lines(path: Path, suffixes: tuple[str, ...]) -> tuple[str, str] | None:
    """(kind, message) when a file named as a JSON-lines log (by its path or a glob, or found by a walk) is
    compressed, Parquet or another kind of file (a CSV, a pickle...), by its name or first bytes; None when it may
    hold JSON lines, or what ``suffixes`` wants (Parquet, for TRL)."""
    if ".jsonl" not in suffixes:
        return None
    name = path.name.lower()
    if name.endswith(COMPRESSED):
        return "compressed_file", COMPRESSED_LOG
    if name.endswith(".parquet"):
        return None if ".parquet" in suffixes else ("parquet_file", PARQUET_LOG)
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return None  # the read reports it
    what = _not_a_log(head, name)
    if what is not None:
        return "not_json_lines", NOT_JSON_LINES.format(what=what)
    if head[:3] == b"BZh" and head[3:4].isdigit():
        return "compressed_file", COMPRESSED_LOG
    return next(((kind, why) for magic, kind, why in _MAGIC
                 if head.startswith(magic) and not (kind == "parquet_file" and ".parquet" in suffixes)), None)


def _not_a_log(head: bytes, name: str) -> str | None:
    """What a file is ("a CSV file"...) when its first bytes say it is another kind of file than a log."""
    if head.startswith(b"PK\x03\x04") and name.endswith(tuple(_ZIPPED_NOT_LOGS)):
        return _ZIPPED_NOT_LOGS[os.path.splitext(name)[1]]
    known = next((what for magic, what in _NOT_LOGS if head.startswith(magic)), None)
    return known or _text_table(head)


def _text_table(head: bytes) -> str | None:
    """"an HTML page", "a CSV file" or "a TSV file" by the first lines of ``head``. A table's first two lines are
    each fields split by commas (tabs), neither ``{``-led: a log whose first line alone is bad is still a log."""
    lines = [ln.strip() for ln in head.decode("utf-8", "replace").lstrip("\ufeff").splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return None
    if lines[0].lower().startswith(("<!doctype", "<html")):
        return "an HTML page"
    if len(lines) < 2 and len(head) == HEAD_BYTES:  # a first line longer than the look: too little seen to say
        return None
    if any(ln.startswith(("{", "[")) for ln in lines[:2]):
        return None
    return next((what for sep, what in (("\t", "a TSV file"), (",", "a CSV file"))
                 if all(sep in ln for ln in lines[:2])), None)


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
                 problems: list | None = None, *, looks_like: Callable[[Path], bool] | None = None,
                 bar: Discovery | None = None) -> list[Path]:
    if not item.strip():
        raise NoLogsError("an empty log path was given (\"\"): name a folder, a file or a glob")
    path = Path(item).expanduser()
    if path.is_dir():
        return _folder_files(path, suffixes, accepts, what, problems, looks_like, bar)
    if path.is_file():
        if not _utf8(str(path)):
            raise NoLogsError(f"the log path is not UTF-8: {_shown(path)} (rename it to read it)")
        if (why := _no_json_lines(path, suffixes)) is not None:
            _report(problems, _shown(path), *why)
            return []
        return [path.resolve()]
    if glob.has_magic(item):
        return _glob_files(item, suffixes, problems)
    if path.exists():
        raise NoLogsError(f"log path is neither a file nor a folder (a pipe or a device?): {path}")
    raise NoLogsError(f"log path does not exist: {path}")


def _folder_files(path: Path, suffixes: tuple[str, ...], accepts, what: str, problems: list | None,
                  looks_like: Callable[[Path], bool] | None, bar: Discovery | None) -> list[Path]:
    here: list = []
    candidates = _walk(path, suffixes, here, accepts=accepts, looks_like=looks_like, bar=bar)
    if problems is not None:
        problems += here
    files = [p for p in candidates if accepts is None or accepts(p)]
    if files:
        return files
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


def _glob_files(item: str, suffixes: tuple[str, ...], problems: list | None) -> list[Path]:
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
