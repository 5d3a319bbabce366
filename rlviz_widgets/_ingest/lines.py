"""Read a log file as chunks of complete lines, zero-copy into Arrow, with line numbers.

Only complete lines (ending in a newline) are consumed, so a line a job is still writing
is left for the next read; what follows the last newline is handed back by ``tail`` for
the caller to decide (a finished record without a final newline, or a half-written one).
Files are read with plain reads, chunk by chunk, so memory stays flat however big the log.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa

from rlviz_widgets._ingest import native
from rlviz_widgets._ingest.pages import plain_empty

CHUNK_BYTES = 32 * 1024 * 1024
FIRST_CHUNK_BYTES = 2 * 1024 * 1024  # a small first read: the parser starts sooner
LAST_CHUNK_BYTES = 4 * 1024 * 1024  # a small last one: what waits on it (writing the last part) is short
_BLOCK = 1 << 20  # bytes read and scanned at a time
_SLACK = 4 << 20  # room in a new pooled buffer for the line carried over from the chunk before
T = TypeVar("T")


@dataclass
class Chunk:
    """A run of complete lines as Arrow strings, and where they came from."""

    lines: pa.LargeStringArray  # one per line, each with its trailing newline
    numbers: np.ndarray  # 1-based line numbers
    first_bytes: np.ndarray  # first byte of each line (cheap triage of blank / odd lines)
    start: int  # byte offset of the chunk in the file
    end: int  # byte offset just past the chunk's last newline
    keys: set[str] | None = None  # the JSON keys found in the lines, when a reader asked for them early
    buffer: np.ndarray | None = None  # the memory the lines live in (handed back to a BufferPool when done)
    found: np.ndarray | None = None  # positions of read_chunks' ``also_find`` byte in the lines
    odd: np.ndarray | None = None  # line numbers a reader wants looked at closely, when it found them early
    repeats: np.ndarray | None = None  # line numbers where a key may be written twice, when a reader found them early
    steps: np.ndarray | None = None  # each line's step as its bytes tell it, when a reader asked early
    final: bool = False  # the read reached the end of the file (as it was when its reading began)
    native: list[Future] | None = None  # (its lines with their number and token lists written [], {field: the
    # lists}) when read ahead by ``rlviz_widgets._ingest.native``: a Future of that per piece of ``lines`` (or of None)


def owner(a: np.ndarray) -> np.ndarray:
    """The whole array ``a`` is a view of (``a`` itself if it is one)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class BufferPool:
    """Read buffers handed back once their chunk is parsed, to be read into again.

    Fresh memory costs more than the read itself (the kernel zeroes every page on first touch; on a
    virtual machine the host may have to back each page too), so at most ``limit`` buffers are made:
    one being parsed, one whose arrays and tokens are being read (``native``, on a thread of its own) and one
    being read (with two, the read of a chunk waited for the parse of the one two before, and the parser
    for both). Past that, ``get`` waits for one to come back (and makes a new
    one after ``patience`` seconds, so a consumer that stopped handing chunks back never blocks the
    reader for good).
    """

    def __init__(self, limit: int = 3, patience: float = 1.0) -> None:
        self._free: queue.SimpleQueue = queue.SimpleQueue()
        self.limit, self.patience, self.made = limit, patience, 0

    def get(self, size: int, reserve: int = 0) -> np.ndarray:
        """A buffer of at least ``size`` bytes; a new one has room for ``reserve`` bytes too (later, bigger reads
        reuse it: untouched room costs nothing) and for an unfinished line carried over."""
        try:
            buf = self._free.get(timeout=self.patience) if self.made >= self.limit else self._free.get_nowait()
        except queue.Empty:
            buf = None
        if buf is not None and len(buf) >= size:
            return buf
        if buf is not None:  # too small (a line longer than the room): replaced
            self.made -= 1
        self.made += 1
        return plain_empty(max(size, reserve) + _SLACK)

    def put(self, chunk: Chunk) -> None:
        """``chunk`` is done with: nothing may use its lines any more (its reading in C, if still under way, is
        waited for: a small file's chunk is copied and handed back before it is parsed)."""
        if chunk.native:
            wait([f for f in chunk.native if isinstance(f, Future)])
        if chunk.buffer is not None:
            self.release(chunk.buffer)
            chunk.buffer = None

    def release(self, buf: np.ndarray) -> None:
        """A buffer from ``get`` that holds nothing anyone uses."""
        self._free.put(owner(buf))


def read_chunks(path: str | os.PathLike, start: int = 0, first_line: int = 1,  # noqa: C901, PLR0915 - the hot loop
                chunk_bytes: int | None = None, first_chunk_bytes: int | None = None,
                pool: BufferPool | None = None, also_find: int | None = None,
                last_chunk_bytes: int | None = None, stop: int | None = None) -> Iterator[Chunk]:
    """Yield chunks of complete lines from byte ``start`` on; stops at the last newline.

    ``first_chunk_bytes``: a smaller first read, so that whoever parses the chunks starts sooner;
    ``last_chunk_bytes``: about this much is left for the last chunk (the file's size when opened
    decides), so that whatever follows the parse of the last chunk waits on little.
    Each chunk has a buffer of its own, valid until the chunk is handed back to ``pool`` (without
    a pool: for as long as the chunk lives). ``also_find``: a byte whose positions a reader wants
    (``chunk.found``); it is looked for with the newlines, a block at a time, while the block just
    read is still in the CPU's cache. ``stop``: read no byte at or past this offset (the size a refresh
    saw: a job that never stops writing is not chased).
    """
    with open(path, "rb", buffering=0) as f:
        f.seek(start)
        end = os.fstat(f.fileno()).st_size  # it may grow meanwhile: this only shapes the last chunks
        if stop is not None:
            end = min(end, stop)
        pos, line_no, carry = start, first_line, b""
        chunk_bytes = chunk_bytes or CHUNK_BYTES  # read at call time (tests make chunks small)
        want = first_chunk_bytes or chunk_bytes
        while True:
            left = end - pos - len(carry)
            if last_chunk_bytes and want == chunk_bytes and last_chunk_bytes < left <= chunk_bytes + last_chunk_bytes:
                want = left - last_chunk_bytes
            if stop is not None:
                want = min(want, stop - pos - len(carry))
                if want <= 0:
                    return
            cap = len(carry) + want  # a line longer than a chunk fits too
            buf = pool.get(cap, chunk_bytes)[:cap] if pool is not None else np.empty(cap, dtype=np.uint8)
            buf[:len(carry)] = np.frombuffer(carry, dtype=np.uint8)
            size, newlines, found = len(carry), [], []
            scanned = 0
            while size < cap:
                n = f.readinto(memoryview(buf)[size:min(size + _BLOCK, cap)])
                if not n:
                    break
                size += n
                at, also = find_bytes(buf[scanned:size], 10, also_find)
                newlines.append(at + scanned)
                if also is not None:
                    found.append(also + scanned)
                scanned = size
            read = size - len(carry)
            ends = np.concatenate(newlines) if newlines else np.zeros(0, dtype=np.int64)
            if not len(ends):  # nothing read, or no line ended yet: the bytes live on in ``carry``
                carry = buf[:size].tobytes()
                if pool is not None:
                    pool.release(buf)
                if not read:
                    return
                # a line longer than the reads so far: the next read is twice as big, so a line of n bytes
                # costs O(n) copies and scans in all (at a fixed size it cost O(n^2): minutes for 400 MB)
                want = max(2 * want, chunk_bytes)
                continue
            nl = int(ends[-1])
            carry = buf[nl + 1:size].tobytes()
            want = chunk_bytes
            chunk = _to_arrow(buf, ends, line_no)
            chunk.start, chunk.end, chunk.buffer = pos, pos + nl + 1, owner(buf)
            chunk.final = pos + size >= end
            if also_find is not None:
                at = np.concatenate(found)
                chunk.found = at[at < nl]
            yield chunk
            pos += nl + 1
            line_no += len(chunk.lines)


_scratch = threading.local()


def find_byte(data: np.ndarray, value: int) -> np.ndarray:
    """Positions of ``value`` in ``data`` (uint8)."""
    return find_bytes(data, value)[0]


def find_bytes(data: np.ndarray, value: int, also: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Positions of ``value`` in ``data`` (uint8), and of ``also`` (None when not asked), in one pass of the compiled
    finder where there is one."""
    got = native.find_bytes(data, value, also)
    if got is not None:
        return got
    return _find_byte(data, value), None if also is None else _find_byte(data, also)


def _find_byte(data: np.ndarray, value: int) -> np.ndarray:
    """Positions of ``value`` in ``data`` (uint8), a block at a time, with NumPy.

    One comparison over the whole buffer would allocate a mask as big as the chunk, fresh
    memory the kernel must map page by page on every call: a reused 1 MB mask is ~2x faster.
    The bytes looked for are sparse, so the mask is first read 8 bytes at a time (a word per
    8 flags: nonzero over bytes walks every byte, the costliest step), then only the hit words.
    """
    mask = getattr(_scratch, "mask", None)
    if mask is None:
        mask = _scratch.mask = np.empty(_BLOCK, dtype=bool)
        _scratch.words = np.empty(_BLOCK // 8, dtype=bool)
    found = []
    for off in range(0, len(data), _BLOCK):
        part = data[off:off + _BLOCK]
        m = mask[:len(part)]
        np.equal(part, value, out=m)
        n8 = len(part) // 8 * 8
        hits = _scratch.words[:n8 // 8]
        np.not_equal(m[:n8].view(np.uint64), 0, out=hits)
        words = np.flatnonzero(hits)
        if len(words):
            row, col = np.nonzero(m[:n8].reshape(-1, 8)[words])
            found.append(words[row] * 8 + col + off)
        if n8 < len(part):
            found.append(np.flatnonzero(m[n8:]) + n8 + off)
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def _to_arrow(buf: np.ndarray, ends: np.ndarray, first_line: int) -> Chunk:
    """The lines ending at ``ends`` as Arrow strings over ``buf``, without copying (UTF-8 is checked later)."""
    offsets = np.empty(len(ends) + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:] = ends + 1
    arr = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(buf))
    numbers = np.arange(first_line, first_line + len(ends), dtype=np.int64)
    return Chunk(arr, numbers, buf[offsets[:-1]], 0, 0)


def last_line(data: bytes, number: int, start: int) -> Chunk:
    """A file's last line, which has no newline, as a chunk of one line of its bytes as they are (not checked
    for UTF-8 here: the parser reports bytes that are not, as for any other line)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    chunk = _to_arrow(buf, np.array([len(data) - 1], dtype=np.int64), number)
    chunk.start, chunk.end = start, start + len(data)
    return chunk


def line_bytes(arr: pa.LargeStringArray, i: int) -> bytes:
    """The raw bytes of line ``i`` (which may not be valid UTF-8)."""
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)
    a, b = offsets[arr.offset + i], offsets[arr.offset + i + 1]
    return bytes(memoryview(arr.buffers()[2])[a:b])


class Prefetch(Iterator[T]):
    """``items`` (chunks, or what holds them), read and ``prepare``d one ahead in a thread, so reading
    overlaps parsing. The thread starts at once: the caller may set up its parser meanwhile.

    The reads and the numpy passes over the bytes release the GIL; on a machine with few cores
    this keeps the second one busy while the parser of the chunk before works. ``close()`` (or
    leaving the ``with`` block) stops the thread, whether or not everything was taken.
    """

    def __init__(self, items: Iterator[T], prepare: Callable[[T], object] | None = None) -> None:
        self._q: queue.Queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._work, args=(items, prepare), name="rlviz-read", daemon=True)
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _work(self, items: Iterator[T], prepare) -> None:
        try:
            for item in items:
                if prepare is not None:
                    prepare(item)
                if not self._put(item):
                    return
            self._put(_DONE)
        except BaseException as e:  # handed to the consumer, raised there
            self._put(e)

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        item = self._q.get()
        if item is _DONE:
            self._done = True
            raise StopIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        return item

    def close(self) -> None:
        self._done = True
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> Prefetch[T]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_DONE = object()
