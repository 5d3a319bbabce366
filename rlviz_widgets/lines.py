"""Read a log file as chunks of complete lines, zero-copy into Arrow, with line numbers.

Only complete lines (ending in a newline) are consumed, so a line a job is still writing
is left for the next read; what follows the last newline is handed back by ``tail`` for
the caller to decide (a finished record without a final newline, or a half-written one).
Files are read with plain reads, chunk by chunk, so memory stays flat however big the log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

CHUNK_BYTES = 32 * 1024 * 1024


@dataclass
class Chunk:
    """A run of complete lines as Arrow strings, and where they came from."""

    lines: pa.LargeStringArray  # one per line, each with its trailing newline
    numbers: np.ndarray  # 1-based line numbers
    first_bytes: np.ndarray  # first byte of each line (cheap triage of blank / odd lines)
    start: int  # byte offset of the chunk in the file
    end: int  # byte offset just past the chunk's last newline


def read_chunks(path: str | os.PathLike, start: int = 0, first_line: int = 1,
                chunk_bytes: int = CHUNK_BYTES) -> Iterator[Chunk]:
    """Yield chunks of complete lines from byte ``start`` on; stops at the last newline.

    The chunks share one buffer: each is valid until the next one is asked for.
    """
    with open(path, "rb", buffering=0) as f:
        f.seek(start)
        pos, line_no, carry = start, first_line, b""
        buf = bytearray(chunk_bytes)
        while True:
            if len(buf) < len(carry) + chunk_bytes:  # a line longer than a chunk
                buf = bytearray(len(carry) + chunk_bytes)
            buf[:len(carry)] = carry
            n = f.readinto(memoryview(buf)[len(carry):len(carry) + chunk_bytes])
            if not n:
                return
            size = len(carry) + n
            nl = buf.rfind(b"\n", 0, size)
            if nl < 0:
                carry = bytes(buf[:size])
                continue
            carry = bytes(buf[nl + 1:size])
            chunk = _to_arrow(buf, nl + 1, line_no)
            chunk.start, chunk.end = pos, pos + nl + 1
            yield chunk
            pos += nl + 1
            line_no += len(chunk.lines)


def tail(path: str | os.PathLike, start: int) -> bytes:
    """The bytes after the last newline at or after ``start``: an unfinished last line, if any."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = size
        while pos > start:  # scan back for the last newline, a block at a time
            step = min(1 << 16, pos - start)
            f.seek(pos - step)
            block = f.read(step)
            i = block.rfind(b"\n")
            if i >= 0:
                f.seek(pos - step + i + 1)
                return f.read()
            pos -= step
        f.seek(start)
        return f.read()


def _to_arrow(data: bytearray, size: int, first_line: int) -> Chunk:
    """Lines of ``data[:size]`` as Arrow strings, without copying (UTF-8 is checked by the JSON parser)."""
    buf = np.frombuffer(data, dtype=np.uint8, count=size)
    ends = np.flatnonzero(buf == 10)
    offsets = np.empty(len(ends) + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:] = ends + 1
    arr = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(data))
    numbers = np.arange(first_line, first_line + len(ends), dtype=np.int64)
    return Chunk(arr, numbers, buf[offsets[:-1]], 0, 0)


def line_bytes(arr: pa.LargeStringArray, i: int) -> bytes:
    """The raw bytes of line ``i`` (which may not be valid UTF-8)."""
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)
    a, b = offsets[arr.offset + i], offsets[arr.offset + i + 1]
    return bytes(memoryview(arr.buffers()[2])[a:b])
