"""The columnar cache: each log file's good records as parts, outside the log folder.

A part is a Parquet file (one row per sample: texts, numbers, per-sample reductions) and, beside it, an
Arrow IPC file with the same records' token arrays (``token_store``).

A file's cache is reused while the file is unchanged; when the file has only grown, only
the new lines are read into a new part; any other change rebuilds it. Files that are not
JSON lines (TRL's Parquet dumps: the reader has ``whole_file``) are read whole into one part,
and rebuilt whenever they change. Log files are only ever opened for reading.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb
import platformdirs
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rlviz_widgets._ingest import lines as linereader
from rlviz_widgets._ingest.custom_columns import FIRST_LINES, LISTED_PREFIX, listed_key, number_text
from rlviz_widgets._ingest.metrics import with_reductions
from rlviz_widgets._ingest.mismatch_metrics import FIGURES, with_mismatch_figures
from rlviz_widgets._ingest.native import outputs_reused
from rlviz_widgets._problems import Problem
from rlviz_widgets._store import leases, token_store
from rlviz_widgets._store.token_store import STORED

# what the parts hold; a cache of another version is rebuilt (the history: CHANGELOG.md, Cache versions)
CACHE_VERSION = 34
# common columns only some logs have: the group, the advantage, the per-sample mismatch and entropy figures
OPTIONAL_COLUMNS = ("group_id", "advantage", *FIGURES)
# ... and the turns of chat-shaped logs (``readers.turns``): in ``FileState.optional`` too, but no samples column
TURNS_COLUMN = "turns"
ANSWER_SPAN_COLUMN = "answer_start"  # ... and the answers stored as spans of the response (``turns.ANSWER_SPAN``)
HEAD_BYTES = 4096
# a read is checked at its end against samples of what it read, at most SAMPLES, at least SAMPLE_EVERY bytes apart:
# each is a read of its own, which waits for the GIL when it returns (~40 us, with the parser's threads busy: at
# one every 4 KB, files of 365 KB took 4 ms more each)
SAMPLES, SAMPLE_EVERY, SAMPLE_BYTES = 16, 64 << 10, 32
BATCH_BYTES = 4 << 20  # chunks smaller than this (small files) are parsed several at once: a query costs ~8 ms
BATCH_CHUNKS = 256  # at most this many at once (splitting the result back takes a pass over it per chunk)
MAX_PENDING_WRITES = 2  # parsed parts waiting for the writer, at most
WRITERS = 2  # parts written at once: a part of long texts takes its writer (Snappy) longer than the parse
COMPACT_BYTES = 16 << 20  # a refresh merges a file's small trailing parts up to this size
REUSE_GROWTH_BYTES = 16 << 20  # a cache of every line serves a cap if at most this (or 1/8 of it) is left to read
RETIRED_GRACE_S = 600.0  # parts merged away are deleted this long after: queries begun on them end first


def _writer_pool() -> pa.MemoryPool:
    """jemalloc for the Parquet writer where pyarrow has it: with the default pool (mimalloc) each part's
    buffers were mostly fresh pages again (freed ones go back to the kernel soon), each zeroed on first touch
    (profiles of a cold open, when the token lists were still written to Parquet: 3-7% of its CPU in page
    faults under the writer, 1-3% with jemalloc)."""
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # pragma: no cover - a pyarrow built without jemalloc
        return pa.default_memory_pool()


def default_cache_root() -> Path:
    """``$RLVIZ_CACHE_DIR`` or the user cache dir (e.g. ~/.cache/rlviz_widgets)."""
    env = os.environ.get("RLVIZ_CACHE_DIR")
    # absolute: a relative one would move with the working directory, and escape the check that keeps the cache
    # out of the log folder
    return Path(env).expanduser().resolve() if env else user_cache_root()


def spill_to_temp(db: duckdb.DuckDBPyConnection) -> None:
    """Where DuckDB spills what does not fit in memory: a folder of this database's own in the system's temporary
    folder (made by DuckDB only if it spills, removed when it closes). An in-memory database spills to ``.tmp`` in
    the working directory, which may be the log folder; the cache dir is not known to be writable yet."""
    spill = Path(tempfile.gettempdir()) / f"rlviz_widgets-spill-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    db.execute("SET temp_directory = " + "'" + str(spill).replace("'", "''") + "'")


def user_cache_root() -> Path:
    """The platform's cache dir for us (e.g. ~/.cache/rlviz_widgets), whatever ``$RLVIZ_CACHE_DIR`` says."""
    return Path(platformdirs.user_cache_dir("rlviz_widgets")).expanduser().resolve()


@dataclass
class FileState:
    """What the cache knows of one log file."""

    path: str
    reader: str
    size: int = 0
    mtime_ns: int = 0
    head: str = ""
    tail: str = ""  # hash of the last bytes read (up to HEAD_BYTES before ``consumed``)
    consumed: int = 0  # bytes read into parts (always ends a line)
    lines: int = 0  # lines consumed
    records: int = 0  # records kept in the parts
    epoch: str = ""  # new whenever the file is read from its start (a rebuilt file may hold as many records)
    open_tail: bool = False  # last consumed line had no newline yet
    parts: list[str] = field(default_factory=list)
    problems: list[list] = field(default_factory=list)  # [line, kind, message]
    fields: list[str] = field(default_factory=list)  # token arrays present in some record
    optional: list[str] = field(default_factory=list)  # OPTIONAL_COLUMNS present in some record
    columns: list[list] = field(default_factory=list)  # [key, first line] of each custom scalar field found
    listed: list[str] = field(default_factory=list)  # custom keys some part holds as lists only (``listed_column``)
    part_lines: list[list[int]] = field(default_factory=list)  # [first, last] line of each part
    part_steps: list[list[int]] = field(default_factory=list)  # [lowest, highest] step of each part
    retired: list[list] = field(default_factory=list)  # [part, time merged away]: deleted after a grace time
    skipped: int = 0  # lines left unread (a per-step cap or a step range: ``readers.selective``)
    step_counts: dict[str, int] = field(default_factory=dict)  # samples per step in the parts (a cap's cache only)
    version: int = CACHE_VERSION


class FileCache:
    """The cache folder of one log file."""

    def __init__(self, root: Path, path: Path, reader_name: str):
        self.dir = self._folder(root, path, reader_name, CACHE_VERSION)
        self.replaced_older = False  # reset() found this log's cache as an older version of the package wrote it
        self.path = path
        self.reader_name = reader_name

    @staticmethod
    def _folder(root: Path, path: Path, reader_name: str, version: int) -> Path:
        return root / "files" / FileCache._name(path, reader_name, version)

    @staticmethod
    def _name(path: Path, reader_name: str, version: int) -> str:
        return hashlib.sha1(f"{path}|{reader_name}|{version}".encode()).hexdigest()[:20]

    def load(self) -> FileState | None:
        try:
            data = json.loads((self.dir / "state.json").read_text())
            state = FileState(**data)
        except (OSError, ValueError, TypeError):
            return None
        if state.version != CACHE_VERSION or state.path != str(self.path):
            return None
        if not len(state.part_lines) == len(state.part_steps) == len(state.parts) or not all(
                os.path.exists(p) and os.path.exists(token_store.path_for(p)) for p in self.part_paths(state)):
            return None
        return state

    def save(self, state: FileState) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(state), f)
        os.replace(tmp, self.dir / "state.json")

    def reset(self) -> FileState:
        """A state to read the file from its start. The folder's parts are retired, not deleted: other Runs (other
        threads, other kernels) may still read them until they refresh; they go after ``RETIRED_GRACE_S``."""
        # this log's cache as earlier versions of the package wrote it is never read again here: without this,
        # every version bump would leave a full copy behind. Not while in use: a Run of the older version (another
        # environment sharing the cache) may still read it; ``prune_cache`` takes it later
        root = self.dir.parent.parent
        files = os.path.join(root, "files")
        old = [Path(files, name) for v in range(1, CACHE_VERSION)  # (string paths: this runs once per file read)
               if os.path.isdir(os.path.join(files, name := self._name(self.path, self.reader_name, v)))]
        self.replaced_older = bool(old)
        if old:
            used = leases.folders_in_use(root)
            for folder in old:
                lock = None if folder.name in used else try_lock(root, folder)
                if lock is not None:
                    with lock:
                        if folder.name not in leases.folders_in_use(root):  # nor leased since the first look
                            shutil.rmtree(folder, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        state = FileState(path=str(self.path), reader=self.reader_name, epoch=os.urandom(8).hex())
        now = time.time()
        try:
            old = {r[0]: r[1] for r in json.loads((self.dir / "state.json").read_text()).get("retired", [])}
        except (OSError, ValueError, TypeError, AttributeError, IndexError):
            old = {}
        parts = {f.name[len("part-"):].rsplit(".", 1)[0] for f in self.dir.glob("part-*")}  # orphans too
        state.retired = [[p, old.get(p, now)] for p in sorted(parts)]
        return state

    def lock(self):
        """An exclusive lock on this file's cache, across processes (held while its parts are read and saved)."""
        locks = self.dir.parent.parent / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        f = open(locks / f"{self.dir.name}.lock", "a")  # noqa: SIM115 - closed by the caller's stack
        fcntl.flock(f, fcntl.LOCK_EX)
        return f

    def part_paths(self, state: FileState) -> list[str]:
        return [str(self.dir / f"part-{p}.parquet") for p in state.parts]


def try_lock(root: Path, folder: Path):
    """The lock of the cache folder ``folder`` (as ``FileCache.lock`` takes it), open, if no one holds it; else
    None (another process is building or reading it, or the cache is read-only)."""
    try:
        (root / "locks").mkdir(parents=True, exist_ok=True)
        f = open(root / "locks" / f"{folder.name}.lock", "a")  # noqa: SIM115 - closed by the caller's ``with``
    except OSError:
        return None
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return None
    return f


def _head(path: Path, n: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha1(f.read(min(n, HEAD_BYTES))).hexdigest()


def _tail(path: Path, n: int) -> str:
    with open(path, "rb") as f:
        f.seek(max(n - HEAD_BYTES, 0))
        return hashlib.sha1(f.read(min(n, HEAD_BYTES))).hexdigest()


EMPTY_FILE = "the file is empty (line 0: the file as a whole)"


def plan(cache: FileCache, whole_file: bool = False) -> tuple[FileState, int]:
    """The state to continue from and how many bytes are left to read (``whole_file``: no growth, only rebuilds)."""
    st = os.stat(cache.path)
    state = cache.load()
    left = _left(cache, state, st, whole_file)
    if left is not None:
        if left == 0 and st.st_size == 0 and not any(p[1] == "empty_file" for p in state.problems):
            # saved empty (a file emptied while a Run read it, by a job restarting): said as a fresh open says it
            state.problems.append([0, "empty_file", EMPTY_FILE])
        return state, left
    if st.st_size == 0 and state is None and not cache.dir.exists():
        # nothing to read and nothing cached: no folder is made (one without a state would look like a leftover)
        state = FileState(path=str(cache.path), reader=cache.reader_name, epoch=os.urandom(8).hex())
    else:
        state = cache.reset()
    if st.st_size == 0:  # never read (nothing to read): reported on every open while empty
        state.problems.append([0, "empty_file", EMPTY_FILE])
    return state, st.st_size


def reusable(cache: FileCache) -> bool:
    """Whether the file's cache holds most of it, and ``plan`` keeps it: what is left to read (the file grew) is at
    most an eighth of what it holds, or 16 MB. (A cache of every line serves a per-step cap; one of the first few
    lines of a log grown since would have the rest read whole, where a cap's own cache skips lines.)"""
    try:
        state = cache.load()
        if state is None or state.consumed == 0:
            return False
        left = _left(cache, state, os.stat(cache.path), False)
    except OSError:
        return False
    return left is not None and left <= max(state.consumed // 8, REUSE_GROWTH_BYTES)


def _left(cache: FileCache, state: FileState | None, st: os.stat_result, whole_file: bool) -> int | None:
    """How many bytes are left to read after ``state`` (0: the cache is complete), or None if the file must be read
    from its start."""
    whole_file = whole_file or cache.path.suffix == ".parquet"
    if state is not None:
        if state.size == st.st_size and state.mtime_ns == st.st_mtime_ns:
            return 0
    if state is not None and not whole_file:
        # only a file that grew keeps its cache (same size, new mtime: rewritten in place); its first and
        # last bytes read must be unchanged
        grew = (st.st_size > state.size and st.st_size >= state.consumed and state.consumed > 0
                and _head(cache.path, state.consumed) == state.head
                and _tail(cache.path, state.consumed) == state.tail)
        if grew and not state.open_tail:
            with open(cache.path, "rb") as f:
                f.seek(state.consumed - 1)
                grew = f.read(1) == b"\n"
        elif grew:  # the last line was taken without its newline: only blanks may have come before it
            grew = _open_tail_end(cache.path, state.consumed) is not None
        if grew or (state.consumed == 0 and st.st_size >= state.size):
            return st.st_size - state.consumed
    return None


def update_files(  # noqa: C901, PLR0915 - the cold open's pipeline, tuned as one loop (docs/performance.md)
        con: duckdb.DuckDBPyConnection | Future, jobs: list[tuple[FileCache, FileState]], reader, on_bytes,
        on_file_done=lambda: None) -> list[tuple[FileState, list[Problem]]]:
    """Read what is new in each file into new parts; per file, the new state and a pending problem, if any.

    JSON-lines files go through one pipeline: the next chunk (of this file or the next one) is read
    while this one is parsed, and Parquet is written in the background, so no core waits at file ends.
    ``con`` may be a Future of the connection: the first chunks are read while it is being made.
    A file read on from where an earlier read stopped has its small trailing parts merged (``compact_tail``).
    """
    if not jobs:
        return []
    bound = [reader.for_file(c.path) if hasattr(reader, "for_file") else reader for c, _ in jobs]
    for (_, state), r in zip(jobs, bound):
        if hasattr(r, "resume"):  # a selective read goes on: how much of each step it has
            r.resume(state.step_counts)
    # a file read on from where an earlier read stopped gains small parts (a refresh, or an open of a log that
    # grew since): merged when done; a file read from its start has big parts already
    resumed = [state.consumed > 0 for _, state in jobs]
    out: list[tuple[FileState, list[Problem]] | None] = [None] * len(jobs)
    lines = [i for i, r in enumerate(bound) if not getattr(r, "whole_file", False)]
    prepare = getattr(reader, "prepare", None)
    pool = linereader.BufferPool()
    # no end-of-file markers between the chunks: one would let the reader get a chunk further ahead
    seen: dict[int, _Seen] = {}
    chunks = _chunks([jobs[i] for i in lines], lines, pool, getattr(reader, "scan_byte", None), seen)
    with linereader.Prefetch(chunks, (lambda item: prepare(item[1])) if prepare else None) as reading, \
            outputs_reused():
        db = con.result() if isinstance(con, Future) else con
        # a cursor of its own: the caller's connection may hold an unfinished result (a fetchone()), on
        # which DuckDB refuses register()
        with db.cursor() as cur, ThreadPoolExecutor(WRITERS) as writer:
            for i, ((cache, state), r) in enumerate(zip(jobs, bound)):
                if getattr(r, "whole_file", False):
                    try:
                        out[i] = _update_whole(cur, cache, state, r, on_bytes, writer)
                    except FileNotFoundError:  # gone meanwhile: the caller looks again
                        _mark_stale(state)
                        out[i] = (state, [])
                    on_file_done()
            writes: list = []
            unfinished = list(lines)  # files whose last chunk may still come, in reading order

            def finish_before(i: int | None) -> None:
                """Files are read in order: a chunk of file ``i`` (None: the end) means those before are done."""
                while unfinished and unfinished[0] != i:
                    j = unfinished.pop(0)
                    cache, state = jobs[j]
                    out[j] = (state, _finish(cur, cache, state, bound[j], on_bytes, writer, writes, seen[j]))
                    on_file_done()

            batch: list[tuple[int, linereader.Chunk]] = []  # small chunks (of small files) parsed together
            batch_bytes = [0]

            def parse_batch() -> None:
                parse_many = getattr(reader, "parse_many", None)
                if len(batch) > 1 and parse_many is not None:
                    parsed = parse_many(cur, [c for _, c in batch], [bound[i] for i, _ in batch])
                else:
                    parsed = [bound[i].parse(cur, c) for i, c in batch]
                for (i, _), (table, problems) in zip(batch, parsed):
                    finish_before(i)
                    if len(writes) >= MAX_PENDING_WRITES:  # a disk slower than the parser: the parser waits before
                        writes[-MAX_PENDING_WRITES].wait()  # the next chunk, so parsed tables do not pile up
                    writes.append(_add_part(*jobs[i], table, problems, writer))
                batch.clear()
                batch_bytes[0] = 0

            for i, chunk in reading:
                cache, state = jobs[i]
                size = chunk.end - chunk.start
                # a whole small file waits for others; a file's first chunk of more does not (its parse starts
                # while the rest is read)
                waits = size < BATCH_BYTES and chunk.final
                if not waits or batch_bytes[0] + size > BATCH_BYTES or len(batch) >= BATCH_CHUNKS:
                    parse_batch()
                seen[i].add(chunk.buffer[:size])
                if waits:  # its lines copied, the buffer goes back to the reader
                    chunk.lines = pa.concat_arrays([chunk.lines, pa.array([], pa.large_string())])
                    pool.put(chunk)
                batch.append((i, chunk))
                batch_bytes[0] += size
                if not waits:
                    parse_batch()
                    pool.put(chunk)  # parsed: the part holds copies of everything kept; the reader may go on
                state.consumed, state.lines = chunk.end, state.lines + len(chunk.lines)
                on_bytes(size)
            parse_batch()
            finish_before(None)
            for write in reversed(writes):  # nothing left to parse: write what the writer has not started
                write.result()
    for (cache, state), r, again in zip(jobs, bound, resumed):
        if hasattr(r, "resume"):
            state.skipped += r.skipped
            state.step_counts = r.counts()
        if again and not getattr(r, "whole_file", False):
            compact_tail(cache, state)
        _retire_orphans(cache, state)
        _drop_retired(cache, state)
        cache.save(state)  # only now: every part it names is written
    return out


def _retire_orphans(cache: FileCache, state: FileState) -> None:
    """Parts no state names (a refresh killed before it saved) are retired; temporary files of a write killed
    midway (an hour old: no live write takes that long) are deleted. Called under the file's lock."""
    named = set(state.parts) | {p for p, _ in state.retired}
    now = time.time()
    try:
        entries = list(os.scandir(cache.dir))
    except OSError:
        return
    for e in entries:
        if e.name.startswith("part-") and e.name.endswith((".parquet", ".arrow")):
            part = e.name[len("part-"):].rsplit(".", 1)[0]
            if part not in named:
                state.retired.append([part, now])
                named.add(part)
        elif e.name.endswith(".tmp"):
            try:
                if now - e.stat().st_mtime > 3600:
                    os.remove(e.path)
            except OSError:
                pass


@contextlib.contextmanager
def locked(caches: list[FileCache], quiet: bool = False):
    """Hold the caches' locks (in one order: two processes never wait on each other). ``quiet``: a lock that cannot
    be taken (a read-only cache dir) is passed over."""
    with contextlib.ExitStack() as stack:
        for c in sorted(caches, key=lambda c: str(c.dir)):
            try:
                stack.enter_context(c.lock())
            except OSError:
                if not quiet:
                    raise
        yield


def compact_tail(cache: FileCache, state: FileState) -> None:
    """Merge the file's small trailing parts (together at most ``COMPACT_BYTES``) into one part.

    Each refresh of a log a job is still writing adds a small part; followed for hours, a log would be
    thousands of parts, and every refresh and open would slow down with their number. Merged away, the
    old files are kept for ``RETIRED_GRACE_S`` (a query another thread or process began on them ends
    first; a mapped token file stays valid anyway) and deleted by a later call.
    """
    paths = cache.part_paths(state)
    sizes = [os.path.getsize(p) + os.path.getsize(token_store.path_for(p)) for p in paths[-64:]]
    # a part joins the merge when no bigger than twice what follows it: the parts grow geometrically, so each
    # byte is rewritten a few times only, and a file keeps few small parts
    k, total = 1, sizes[-1] if sizes else 0
    while k < len(sizes) and sizes[-k - 1] <= 2 * total and total + sizes[-k - 1] <= COMPACT_BYTES:
        total, k = total + sizes[-k - 1], k + 1
    if k < 2:
        return
    take = paths[-k:]
    part = f"{len(state.parts) - k:05d}-{os.urandom(4).hex()}"
    try:
        samples = pa.concat_tables(_same_types([pq.read_table(p) for p in take]), promote_options="default")
        token_store.write(pa.concat_tables([token_store.read(p) for p in take]), cache.dir / f"part-{part}.arrow")
        _write_parquet(samples, cache.dir, part)
    except (OSError, pa.ArrowException):  # a merge is only a speed-up: the parts stay as they are
        for suffix in (".arrow", ".parquet"):
            (cache.dir / f"part-{part}{suffix}").unlink(missing_ok=True)
        return
    now = time.time()
    state.retired += [[p, now] for p in state.parts[-k:]]
    lines, steps = state.part_lines[-k:], state.part_steps[-k:]
    state.parts[-k:] = [part]
    state.part_lines[-k:] = [[lines[0][0], lines[-1][1]]]
    state.part_steps[-k:] = [[min(a for a, _ in steps), max(b for _, b in steps)]]


def _same_types(tables: list[pa.Table]) -> list[pa.Table]:
    """Parts whose custom column has different types (numbers in one, text in another) with that column as text,
    as a part mixing both holds it."""
    types: dict[str, set] = {}
    for t in tables:
        for f in t.schema:
            types.setdefault(f.name, set()).add(f.type)
    mixed = {n for n, ts in types.items() if len(ts - {pa.null()}) > 1}
    if not mixed:
        return tables
    out = []
    for t in tables:
        for name in mixed & set(t.column_names):
            col = t[name]
            if not pa.types.is_string(col.type):
                text = number_text(col) if pa.types.is_floating(col.type) or pa.types.is_integer(col.type) \
                    else col.cast(pa.string())
                t = t.set_column(t.schema.get_field_index(name), name, text)
        out.append(t)
    return out


def drop_expired(unchanged: list[tuple[FileCache, FileState]], held: bool = False) -> None:
    """Delete the retired parts of files read nothing from, once their grace time is over (a log rebuilt and then
    left alone would otherwise keep its old parts for good). Best effort: a read-only cache keeps them. ``held``:
    the caller holds the caches' locks already."""
    now = time.time()
    due = [(c, st) for c, st in unchanged if any(now - when >= RETIRED_GRACE_S for _, when in st.retired)]
    if not due:
        return
    try:
        with contextlib.nullcontext() if held else locked([c for c, _ in due]):
            for c, st in due:
                current = c.load()  # as saved: another process may have read more meanwhile
                if current is not None and _drop_retired(c, current):
                    c.save(current)
                    st.retired = current.retired
    except OSError:
        pass


def _drop_retired(cache: FileCache, state: FileState) -> bool:
    """Delete the parts merged away more than ``RETIRED_GRACE_S`` ago that no live Run reads (``leases``);
    True if any went."""
    keep, now = [], time.time()
    due = [part for part, when in state.retired if now - when >= RETIRED_GRACE_S]
    used = leases.in_use(cache.dir.parent.parent) if due else set()
    for part, when in state.retired:
        if now - when < RETIRED_GRACE_S or leases.key(cache.dir / f"part-{part}.parquet") in used:
            keep.append([part, when])
            continue
        for suffix in (".parquet", ".arrow"):
            try:
                os.remove(cache.dir / f"part-{part}{suffix}")
            except FileNotFoundError:
                pass
    dropped = len(keep) < len(state.retired)
    state.retired = keep
    return dropped


@dataclass
class _Seen:
    """What a refresh read of one file, to tell at its end that the file still holds it (not rewritten meanwhile)."""

    start: int  # where this read began
    head: str  # the hash of the first bytes read before (``_head`` of ``before``, as the plan checked them)
    before: int  # the bytes read before
    first: bytes = b""  # the first bytes read (up to HEAD_BYTES)
    last: bytes = b""  # the last bytes read (up to HEAD_BYTES)
    pos: int = -1  # where the next bytes read lie (-1: at ``start``)
    every: int = 0  # a sample of the bytes read is kept at each multiple of this offset (0: none)
    samples: list = field(default_factory=list)  # [(offset, bytes)]

    def add(self, data) -> None:
        if len(self.first) < HEAD_BYTES:
            self.first += bytes(data[:HEAD_BYTES - len(self.first)])
        self.last = (self.last + bytes(data[-HEAD_BYTES:]))[-HEAD_BYTES:]
        pos = self.start if self.pos < 0 else self.pos
        if self.every:
            for at in range(-(-pos // self.every) * self.every, pos + len(data), self.every):
                self.samples.append((at, bytes(data[at - pos:at - pos + SAMPLE_BYTES])))
        self.pos = pos + len(data)

    def still_there(self, path: Path, end: int) -> bool:
        """Whether the file still holds, where they were, the bytes read up to ``end``: its ends, and samples
        spread over it (a file rewritten during the read, then back as it was at both ends, mixed two contents)."""
        with open(path, "rb") as f:
            if self.before and hashlib.sha1(f.read(min(self.before, HEAD_BYTES))).hexdigest() != self.head:
                return False
            for at, data in ((self.start, self.first), (end - len(self.last), self.last), *self.samples):
                if os.pread(f.fileno(), len(data), at) != data:
                    return False
        return True


def _chunks(jobs: list[tuple[FileCache, FileState]], ids: list[int], pool: linereader.BufferPool,
            also_find: int | None, seen: dict[int, _Seen]):
    """(job id, chunk) for the new complete lines of each file in turn (the last file ends in a small chunk:
    nothing else is left to parse while its part is written). Each file is read up to the size it has when
    its read begins: a job that never stops writing is not chased (what it adds is the next refresh's)."""
    first = linereader.FIRST_CHUNK_BYTES
    for n, (i, (cache, state)) in enumerate(zip(ids, jobs)):
        start = state.consumed
        seen[i] = _Seen(start, state.head, start)
        try:
            if state.open_tail:  # the line we took without a newline may now be finished by one ("\r\n" too)
                end = _open_tail_end(cache.path, start)
                if end is None:  # it was continued since the plan: the file is read again from its start
                    seen[i].head = ""  # (marked stale at its end: "" matches no hash)
                    continue
                if end:
                    start, state.open_tail = end, False
                    seen[i].start = start
                state.consumed = start
            last = linereader.LAST_CHUNK_BYTES if n == len(jobs) - 1 else None
            stop = os.stat(cache.path).st_size
            seen[i].every = max(SAMPLE_EVERY, (stop - start) // SAMPLES)
            for chunk in linereader.read_chunks(cache.path, start, state.lines + 1, first_chunk_bytes=first,
                                                pool=pool, also_find=also_find, last_chunk_bytes=last, stop=stop):
                yield i, chunk
                first = None
        except FileNotFoundError:  # gone meanwhile (a job restarting): marked stale at its end (``_finish``)
            continue


def _update_whole(con, cache: FileCache, state: FileState, reader, on_bytes, writer) -> tuple[FileState, list]:
    """A file read in one go (Parquet): one part, rebuilt from scratch whenever the file changes."""
    st = os.stat(cache.path)
    table, problems = reader.parse_file(con, cache.path)
    _add_part(cache, state, table, problems, writer).result()
    on_bytes(st.st_size)
    state.size, state.mtime_ns = st.st_size, st.st_mtime_ns
    state.consumed, state.lines = st.st_size, getattr(reader, "rows_read", 0)
    state.head = state.tail = ""
    return state, []


def _finish(con, cache: FileCache, state: FileState, reader, on_bytes, writer, writes: list,
            seen: _Seen) -> list[Problem]:
    """After a file's complete lines: its last line without a newline, and its new size and hashes.

    A file rewritten while it was read (a job restarted) is marked ``stale`` (size -1, no hashes): what was
    read may mix both contents, so the caller reads it again from its start."""
    path = cache.path
    pending: list[Problem] = []
    try:
        st = os.stat(path)
        with open(path, "rb") as f:  # what lies after the complete lines read, as of this size
            f.seek(state.consumed)
            rest = f.read(max(st.st_size - state.consumed, 0))
    except FileNotFoundError:  # gone while it was read: what was read may not be all (the caller looks again)
        _mark_stale(state)
        return pending
    if b"\n" in rest or (state.open_tail and rest.strip()) or st.st_size < state.consumed:
        # the job wrote more lines after the reading stopped (or cut the file): left for the next refresh,
        # which finds the file grown (or changed) past what is recorded as read
        state.mtime_ns = st.st_mtime_ns
        state.size = state.consumed
        _seal(path, state, seen)
        return pending
    if rest.strip() and not state.open_tail:
        # replaced bytes only for the validity check: the parser gets the bytes as they are (and reports any
        # that are not UTF-8, as on every other line); a byte order mark opens a file of one line
        text = rest.decode("utf-8", errors="replace").strip().removeprefix("\ufeff")
        if con.execute("SELECT json_valid(?)", [text]).fetchall()[0][0]:
            # a finished last record that simply lacks the final newline: one line, as a read gives it
            chunk = linereader.last_line(rest, state.lines + 1, state.consumed)
            writes.append(_ingest(con, cache, state, reader, chunk, writer))
            seen.add(rest)
            state.consumed += len(rest)
            state.lines += 1
            state.open_tail = True
        elif not _being_written(reader, path):  # (a folder the format says is still being written: no news)
            pending.append(Problem(str(path), state.lines + 1, "incomplete_last_line",
                                   f"{len(rest)} bytes without a newline (a job still writing?): "
                                   "skipped until the line is complete"))
    on_bytes(len(rest))
    state.size, state.mtime_ns = st.st_size, st.st_mtime_ns
    _seal(path, state, seen)
    return pending


def _being_written(reader, path: Path) -> bool:
    """Whether the format knows the file is still being written (prime-rl's step folder without its marker)."""
    check = getattr(reader, "being_written", None)
    return bool(check is not None and check(path))


def _seal(path: Path, state: FileState, seen: _Seen) -> None:
    """The hashes of a file read, if it still holds what was read; else it is marked stale (``is_stale``)."""
    try:
        if seen.still_there(path, state.consumed):
            _hash_ends(path, state)
            return
    except FileNotFoundError:
        pass
    _mark_stale(state)


def _mark_stale(state: FileState) -> None:
    state.size, state.mtime_ns, state.head, state.tail = -1, 0, "", ""


def is_stale(state: FileState) -> bool:
    """Whether the file was rewritten while it was read: its parts may mix old and new lines; read it again."""
    return state.size < 0


def _open_tail_end(path: Path, consumed: int) -> int | None:
    """After a last line taken without its newline: where its newline ends (0 while none has come), or None if
    anything but blanks came before it (the line was not finished after all: the file must be read again)."""
    with open(path, "rb") as f:
        f.seek(consumed)
        at = consumed
        while block := f.read(1 << 16):
            head, newline, _ = block.partition(b"\n")
            if head.strip():
                return None
            if newline:
                return at + len(head) + 1
            at += len(block)
    return 0


def _hash_ends(path, state: FileState) -> None:
    """The hashes telling, later, that the bytes read are still there (a file that only grew)."""
    state.head = _head(path, state.consumed) if state.consumed else ""
    state.tail = _tail(path, state.consumed) if state.consumed else ""


def _ingest(con, cache: FileCache, state: FileState, reader, chunk, writer):
    table, problems = reader.parse(con, chunk)
    return _add_part(cache, state, table, problems, writer)


def _add_part(cache: FileCache, state: FileState, table, problems: list[list], writer):
    state.problems.extend(sorted(problems, key=lambda p: p[0]))
    if table is None:
        return _Write(writer, lambda: None)
    table = with_mismatch_figures(table)
    state.fields = sorted(set(state.fields) | {f for f in STORED if f in table.column_names
                                                and table[f].null_count < table.num_rows})
    state.records += table.num_rows
    state.optional = [c for c in (*OPTIONAL_COLUMNS, TURNS_COLUMN, ANSWER_SPAN_COLUMN)
                      if c in state.optional or (c in table.column_names and table[c].null_count < table.num_rows)]
    first = json.loads((table.schema.metadata or {}).get(FIRST_LINES, b"{}"))
    known = {k for k, _ in state.columns}
    state.columns += [[k, n] for k, n in first.items() if k not in known]
    listed = [listed_key(c) for c in table.column_names if c.startswith(LISTED_PREFIX)]
    state.listed += [k for k in listed if k not in state.listed]
    # a fresh name for every part ever written: a rebuilt file never reuses a path whose Parquet
    # footer DuckDB may still hold in its metadata cache
    part = f"{len(state.parts):05d}-{os.urandom(4).hex()}"
    state.parts.append(part)
    for ranges, col in ((state.part_lines, "line"), (state.part_steps, "step")):
        lo_hi = pc.min_max(table[col])
        ranges.append([int(lo_hi["min"].as_py()), int(lo_hi["max"].as_py())])
    return _Write(writer, lambda: _write(table, cache.dir, part))


class _Write:
    """A part handed to a writer thread; ``result`` writes it in the calling thread if the writer has not
    started it (the parser, done with its last chunk, works instead of waiting). Whoever takes the job
    first runs it, and drops it: a written part's table is not held."""

    def __init__(self, writer: ThreadPoolExecutor, job) -> None:
        self._job = job
        self._lock = threading.Lock()
        self._future = writer.submit(self._run)

    def _run(self) -> bool:
        """Run the job unless another thread took it; whether it ran here."""
        with self._lock:
            job, self._job = self._job, None
        if job is not None:
            job()
        return job is not None

    def wait(self) -> None:
        self._future.result()

    def result(self) -> None:
        if not self._run():  # the writer has it (or had it): its outcome
            self._future.result()


def _write(table: pa.Table, folder: Path, part: str) -> None:
    """A parsed part: its token lists to an Arrow file, everything else (and the reductions) to Parquet."""
    if "n_tokens" not in table.column_names:  # a part of chunks parsed together has them already
        table = with_reductions(table)
    token_store.write(table, folder / f"part-{part}.arrow")
    _write_parquet(table.drop_columns([c for c in STORED if c in table.column_names]), folder, part)


# texts written without a dictionary: each response is its own (a dictionary of them, copied and hashed until the
# writer gives up on it at each row group, took ~5% of a conversation log's cold open and saved no byte)
UNIQUE_TEXTS = frozenset({"response"})


def _write_parquet(table: pa.Table, folder: Path, part: str) -> None:
    """A part's samples (no token lists), atomically."""
    tmp = folder / f".part-{part}.tmp"
    texts = [c for c in table.column_names if c not in UNIQUE_TEXTS and (pa.types.is_string(table.schema.field(c).type)
             or pa.types.is_large_string(table.schema.field(c).type))]
    # dictionaries for texts (GRPO repeats each prompt); stats on line/step for pruning; small row groups:
    # a page of scattered rows reads little text
    pq.write_table(table, tmp, compression="snappy", use_dictionary=texts, write_statistics=["line", "step"],
                   row_group_size=256, memory_pool=_writer_pool())
    os.replace(tmp, folder / f"part-{part}.parquet")
