"""Reading a log as chunks of complete lines: every byte once, in order, whatever the chunk size."""

from __future__ import annotations

import pytest

from rlviz_widgets._ingest.lines import line_bytes, read_chunks


@pytest.mark.parametrize("chunk_bytes", [7, 64, 1000, 1 << 20])
def test_chunks_cover_every_complete_line(tmp_path, chunk_bytes):
    lines = [b'{"a": %d}' % i + b"x" * (i * 37 % 300) for i in range(200)] + [b"", b"\xff\xfe odd", b"y" * 5000]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n" + b'{"half": ')  # a half-written last line
    got, numbers, pos, kept = [], [], 0, []
    chunks = read_chunks(path, chunk_bytes=chunk_bytes, first_chunk_bytes=chunk_bytes // 2 or 1, also_find=ord(":"))
    for chunk in chunks:
        assert chunk.start == pos
        data = b"".join(line_bytes(chunk.lines, i) for i in range(len(chunk.lines)))
        assert chunk.found.tolist() == [i for i, b in enumerate(data) if b == ord(":")]
        kept.append(chunk)  # every chunk has its own buffer: still valid after the next is read
        got += [line_bytes(chunk.lines, i) for i in range(len(chunk.lines))]
        numbers += chunk.numbers.tolist()
        pos = chunk.end
    assert got == [ln + b"\n" for ln in lines]
    assert numbers == list(range(1, len(lines) + 1))
    assert [line_bytes(c.lines, 0) for c in kept][0] == lines[0] + b"\n"
    assert path.read_bytes()[pos:] == b'{"half": '  # the unfinished last line is left


def test_a_small_last_chunk_is_left_when_asked(tmp_path):
    """``last_chunk_bytes``: the chunk before the last is cut short, so about that much is left for the last."""
    lines = [b"%04d" % i + b"x" * 95 for i in range(100)]  # 100 lines of 100 bytes (with the newline)
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    sizes = [c.end - c.start for c in read_chunks(path, chunk_bytes=3000, last_chunk_bytes=700)]
    assert sizes == [3000, 3000, 3000, 300, 700]  # not [3000, 3000, 3000, 1000]: the last one is small
    got = [line_bytes(c.lines, i) for c in read_chunks(path, chunk_bytes=3000, last_chunk_bytes=700)
           for i in range(len(c.lines))]
    assert got == [ln + b"\n" for ln in lines]


def test_a_file_growing_while_read_loses_no_line(tmp_path):
    """The size taken when the file was opened only shapes the last chunks: lines appended meanwhile
    are read too, each once, in order (a job still writing while a run opens)."""
    first = [b"%04d" % i + b"x" * 95 for i in range(100)]
    more = [b"%04d" % i + b"y" * 45 for i in range(100, 160)]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(first) + b"\n")
    got = []
    for n, chunk in enumerate(read_chunks(path, chunk_bytes=3000, last_chunk_bytes=700)):
        got += [line_bytes(chunk.lines, i) for i in range(len(chunk.lines))]
        if n == 1:  # mid-read, the job appends lines (the last one still being written)
            with open(path, "ab") as f:
                f.write(b"\n".join(more) + b"\n" + b'{"half')
    assert got == [ln + b"\n" for ln in first + more]


def test_starts_mid_file_with_line_numbers(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"one\ntwo\nthree\n")
    (chunk,) = list(read_chunks(path, start=4, first_line=2))
    assert [line_bytes(chunk.lines, i) for i in range(2)] == [b"two\n", b"three\n"]
    assert chunk.numbers.tolist() == [2, 3] and (chunk.start, chunk.end) == (4, 14)
    assert list(read_chunks(path, start=14)) == []


def test_find_byte_across_blocks():
    import numpy as np

    from rlviz_widgets._ingest.lines import _BLOCK, find_byte

    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=3 * _BLOCK + 17, dtype=np.uint8)
    assert np.array_equal(find_byte(data, 10), np.flatnonzero(data == 10))
    assert len(find_byte(np.zeros(0, np.uint8), 10)) == 0
    assert find_byte(np.frombuffer(b"abc", np.uint8), 10).tolist() == []


def test_parsed_chunk_does_not_keep_its_buffer(tmp_path):
    """A chunk's buffer is read into again once parsed: the parsed table must hold copies."""
    import json

    import duckdb

    from rlviz_widgets._ingest.lines import BufferPool
    from rlviz_widgets._ingest.readers.rlb import RLBReader

    recs = [{"step": i // 4, "prompt": f"p{i}", "response": f"r{i} é", "reward": i / 7, "acc": "yes",
             "response_tokens": ["a", f"t{i}"], "logprobs": [-0.5, -1.0], "ref_logprobs": [-0.4, -1.1]}
            for i in range(40)]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + "not json\n")
    pool = BufferPool()
    (chunk,) = list(read_chunks(path, pool=pool))
    table, problems = RLBReader().parse(duckdb.connect(), chunk)
    before = table.to_pylist()
    buf = chunk.buffer
    pool.put(chunk)
    buf[:] = ord("x")  # the next read lands here
    assert table.to_pylist() == before
    assert [r["prompt"] for r in before] == [f"p{i}" for i in range(40)] and len(problems) == 1
    assert any(pool.get(10) is buf for _ in range(2))  # and it is reused (after the one the last read gave back)


def test_buffer_pool_is_bounded_and_never_blocks_for_good():
    import threading
    import time

    from rlviz_widgets._ingest.lines import BufferPool, Chunk

    pool = BufferPool(limit=2, patience=0.2)
    a, b = pool.get(100), pool.get(100)
    assert pool.made == 2
    chunk = Chunk(None, None, None, 0, 0, buffer=a)
    threading.Timer(0.05, pool.put, [chunk]).start()  # handed back while the next get waits
    assert pool.get(100) is a and pool.made == 2
    t0 = time.perf_counter()
    c = pool.get(100)  # nothing comes back: a new buffer after the patience
    assert c is not a and c is not b and pool.made == 3 and time.perf_counter() - t0 >= 0.2


def test_buffer_pool_makes_room_for_later_reads():
    """A buffer made for a small first read has room for the full-size reads after it: it is reused,
    not replaced (and the memory a small read does not touch costs nothing)."""
    from rlviz_widgets._ingest.lines import BufferPool, Chunk

    mb = 1 << 20
    pool = BufferPool(limit=1, patience=0.2)
    small = pool.get(100, reserve=8 * mb)
    assert len(small) >= 8 * mb
    pool.put(Chunk(None, None, None, 0, 0, buffer=small))
    assert pool.get(8 * mb) is small and pool.made == 1
    pool.release(small)
    bigger = pool.get(64 * mb)  # a line longer than the room: replaced, still one buffer made
    assert bigger is not small and len(bigger) >= 64 * mb and pool.made == 1


def test_prefetch_reads_ahead_at_once_and_stops_when_closed():
    """Reading starts before the first item is asked for; closing stops the thread, taken or not."""
    import threading

    from rlviz_widgets._ingest.lines import Prefetch

    prepared = []
    first = threading.Event()

    def prepare(item):
        prepared.append(item)
        first.set()

    with Prefetch(iter(range(100)), prepare) as reading:
        assert first.wait(5)  # prepared in the thread, nothing taken yet
        thread = reading._thread
    assert not thread.is_alive()  # left the block without taking anything: the thread is gone
    assert prepared[0] == 0 and len(prepared) < 100  # and it did not run ahead of the bounded queue

    assert list(Prefetch(iter(range(5)), None)) == [0, 1, 2, 3, 4]


def test_prefetch_hands_a_failure_to_the_consumer():
    from rlviz_widgets._ingest.lines import Prefetch

    def items():
        yield 1
        raise OSError("disk gone")

    reading = Prefetch(items())
    assert next(reading) == 1
    with pytest.raises(OSError, match="disk gone"):
        next(reading)
    with pytest.raises(StopIteration):  # and it stays ended
        next(reading)
    reading.close()


@pytest.mark.parametrize("compiled", [True, False])
def test_find_byte_matches_a_plain_scan(compiled, monkeypatch):
    """Every position, in order, at block ends and in a last partial word (or 16-byte vector), sparse or dense;
    with the compiled finder (where it is built) and with NumPy's."""
    import numpy as np

    from rlviz_widgets._ingest import native
    from rlviz_widgets._ingest.lines import _BLOCK, find_byte, find_bytes

    if compiled and native.library() is None:
        pytest.skip("the native library is not built here")
    if not compiled:
        monkeypatch.setattr(native, "_lib", False)
    rng = np.random.default_rng(3)
    for size in (0, 1, 7, 8, 9, 15, 16, 17, 31, 63, _BLOCK - 1, _BLOCK, _BLOCK + 5, 2 * _BLOCK + 13):
        for density in (0.0005, 0.3):
            data = np.where(rng.random(size) < density, 58, rng.integers(0, 256, size)).astype(np.uint8)
            data[data == 58] = 58  # the random fill may hold some too: all must be found
            for edge in (0, size - 1, _BLOCK - 1, _BLOCK, _BLOCK + 7):
                if 0 <= edge < size:
                    data[edge] = 58
            want = np.flatnonzero(data == 58)
            got = find_byte(data, 58)
            assert got.tolist() == want.tolist() and got.dtype.kind == "i"
            for start in (0, 3):  # an unaligned start too; two bytes at once, one of them absent or dense
                part = data[start:]
                for also in (10, 0xFF, 58):
                    a, b = find_bytes(part, 58, also)
                    assert a.tolist() == np.flatnonzero(part == 58).tolist()
                    assert b.tolist() == np.flatnonzero(part == also).tolist()
                assert find_bytes(part, 58)[1] is None


def test_find_byte_of_strided_or_other_typed_data():
    """What the compiled finder does not take (a strided view, another dtype) is looked through with NumPy."""
    import numpy as np

    from rlviz_widgets._ingest.lines import find_byte

    data = np.frombuffer(b"a\nb\n\nc" * 1000, np.uint8)
    assert find_byte(data[::2], 10).tolist() == np.flatnonzero(data[::2] == 10).tolist()
    as_int8 = data.view(np.int8)
    assert find_byte(as_int8, 10).tolist() == np.flatnonzero(data == 10).tolist()
    assert find_byte(data, 10 + 256).tolist() == []  # no byte is 266 (ctypes would have looked for 10)


def test_read_chunks_reads_nothing_past_stop_when_a_line_is_carried(tmp_path):
    """``stop``: no byte at or past it is read, even with an unfinished line carried into the next read."""
    path = tmp_path / "log.jsonl"
    lines = [b"%09d" % i for i in range(20)]  # 20 lines of 10 bytes
    seen = b"\n".join(lines) + b"\n" + b"AB"  # what a refresh saw: 200 bytes of lines, then a half-written one
    path.write_bytes(seen + b"C\n" + b"more\n")  # the job finished that line and went on meanwhile
    chunks = list(read_chunks(path, chunk_bytes=64, stop=len(seen)))
    got = [line_bytes(c.lines, i) for c in chunks for i in range(len(c.lines))]
    assert got == [ln + b"\n" for ln in lines]
    assert max(c.end for c in chunks) == 200


def test_line_bytes_of_a_sliced_array():
    import pyarrow as pa

    arr = pa.array(["x\n", "yy\n", "zzz\n"], pa.large_string()).slice(1)
    assert [line_bytes(arr, i) for i in range(len(arr))] == [b"yy\n", b"zzz\n"]


def _vm_flags(address: int) -> list[str] | None:
    """The kernel's flags of the mapping holding ``address`` (Linux), or None."""
    try:
        text = open("/proc/self/smaps").read()
    except OSError:
        return None
    inside = False
    for line in text.splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    return None


def test_big_buffers_ask_for_ordinary_pages():
    """Read buffers and the C reader's scratch are made in memory marked for ordinary pages: NumPy asks for huge
    ones, whose first touch cost 10-20x more about half the time on the VMs measured (see ``plain_empty``)."""
    import mmap
    import os

    import numpy as np

    from rlviz_widgets._ingest import native
    from rlviz_widgets._ingest.lines import BufferPool, Chunk
    from rlviz_widgets._ingest.pages import plain_empty

    small = plain_empty(100, np.int32)
    assert small.dtype == np.int32 and len(small) == 100 and small.flags.writeable
    big = plain_empty((8 << 20) + 3, np.float32)
    assert big.dtype == np.float32 and len(big) == (8 << 20) + 3 and big.flags.writeable
    big[-1] = 1.5
    assert big[-1] == 1.5
    pool = BufferPool(limit=1, patience=0.2)
    buf = pool.get(16 << 20)
    # where the kernel has huge pages to refuse (without, it refuses the advice: NumPy's own buffer, as tested below)
    if hasattr(mmap, "MADV_NOHUGEPAGE") and os.path.exists("/sys/kernel/mm/transparent_hugepage"):
        for a in (big, buf, native._scratch("test", 8 << 20, np.uint8)):
            flags = _vm_flags(a.ctypes.data + 8192)  # NumPy marks from the first whole page on
            if flags is not None:
                assert "nh" in flags and "hg" not in flags
    view = buf[5:100]
    pool.put(Chunk(None, None, None, 0, 0, buffer=view))  # a view of it handed back: the buffer itself is reused
    assert pool.get(10) is buf and pool.made == 1


def test_big_buffers_without_the_kernels_help(monkeypatch):
    """A kernel built without huge pages refuses the advice (EINVAL), and a mapping may be refused: the buffer is then
    NumPy's own, never an error."""
    import mmap

    import numpy as np

    from rlviz_widgets._ingest import pages

    class Refusing(mmap.mmap):
        def madvise(self, *args):
            raise OSError(22, "Invalid argument")

    monkeypatch.setattr(pages.mmap, "mmap", Refusing)
    a = pages.plain_empty(8 << 20, np.float32)
    assert len(a) == 8 << 20 and a.dtype == np.float32 and a.flags.writeable

    def no_map(*args, **kwargs):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(pages.mmap, "mmap", no_map)
    b = pages.plain_empty(8 << 20)
    assert len(b) == 8 << 20 and b.dtype == np.uint8


def test_output_slabs_come_back_once_their_last_array_goes():
    """The C reader's outputs are lent in a slab (``pages.Slabs``): one taken back only once no array (nor Arrow
    buffer) views it, lent again only during a reading, let go after it."""
    import gc

    import numpy as np
    import pyarrow as pa

    from rlviz_widgets._ingest.pages import Slabs

    slabs = Slabs(kept=2)
    shapes = [(5 << 20, np.uint8), (1001, np.int32), (3, np.int64), (0, np.bool_)]
    with slabs.reading():
        a, b, c, d = slabs.lend(shapes)
        assert [(len(x), x.dtype) for x in (a, b, c, d)] == [(n, np.dtype(t)) for n, t in shapes]
        assert all(x.ctypes.data % 8 == 0 for x in (a, b, c))
        a[:] = 1
        b[:], c[:] = -2, 3  # apart: none overlaps another
        assert a.min() == 1 and b.min() == -2 and c.min() == 3
        first = a.ctypes.data
        held = pa.Array.from_buffers(pa.int32(), 10, [None, pa.py_buffer(b[:10])])
        del a, b, c, d
        gc.collect()
        other = slabs.lend([(10, np.uint8)])
        assert other[0].ctypes.data != first and slabs.waiting() == 0  # still viewed: a new slab
        assert held.to_pylist() == [-2] * 10
        del held
        gc.collect()
        assert slabs.waiting() == 1
        again = slabs.lend(shapes)
        assert again[0].ctypes.data == first and slabs.waiting() == 0  # its memory lent again
        del again
        gc.collect()
        assert slabs.waiting() == 1
    assert slabs.waiting() == 0  # the reading over: let go
    del other
    gc.collect()
    assert slabs.waiting() == 0  # nor kept when it comes back after
