"""Memory for big scratch arrays: the read buffers and the C reader's outputs."""

from __future__ import annotations

import contextlib
import mmap
import queue
import threading
import weakref

import numpy as np

_PLAIN_FROM = 4 << 20  # bytes: NumPy asks for huge pages from this size on


def plain_empty(n: int, dtype=np.uint8) -> np.ndarray:
    """``np.empty(n, dtype)`` in memory the kernel backs with ordinary pages, not huge ones.

    NumPy asks for huge pages for every big array. The kernel must then find (or compact memory into) 2 MB
    of free contiguous memory on first touch: on this project's VMs that costs 10-20x more than ordinary
    pages about half the time (108 MB of read buffers took 10 ms one run, 230 ms the next; ordinary ones ~50 ms).
    """
    size = max(n, 1) * np.dtype(dtype).itemsize
    if size < _PLAIN_FROM or not hasattr(mmap, "MADV_NOHUGEPAGE"):
        return np.empty(n, dtype)
    try:
        # private and anonymous: unbacked (and zero) until touched, unmapped when the array goes
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        m.madvise(mmap.MADV_NOHUGEPAGE)  # EINVAL on a kernel built without huge pages
    except OSError:
        return np.empty(n, dtype)
    return np.frombuffer(m, dtype, count=n)


class Slabs:
    """Slabs of ordinary pages lent as a set of arrays (``lend``) and taken back for the next set once the last
    array viewing one goes: their pages are backed already. The first touches of fresh pages (the kernel zeroing
    each) were ~15% of a conversation log's cold open, the C reader's outputs for each chunk being fresh.

    Slabs are kept only while some caller is ``reading`` (an open): at most ``kept`` wait to be lent again, given
    back with MADV_FREE (the kernel takes their pages when it needs memory, else they are reused as they are); when
    the last reading ends they are let go, and so is any given back after: an open leaves no memory held."""

    def __init__(self, kept: int) -> None:
        self._kept = kept
        # slabs given back: by whichever thread drops the last array, in a finalizer that may run anywhere (in a
        # garbage collection in the middle of a ``_take``, say): a queue's put takes no lock of ours
        self._back: queue.SimpleQueue = queue.SimpleQueue()
        self._free: list[mmap.mmap] = []  # ... sorted out by size, under the lock
        self._readers = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def reading(self):
        """Slabs given back are kept for the next arrays lent until the end of this (and every other) reading."""
        with self._lock:
            self._readers += 1
        try:
            yield
        finally:
            with self._lock:
                self._readers -= 1
                self._sort_out()  # (none kept when it was the last: unmapped as they go)

    def waiting(self) -> int:
        """How many slabs wait to be lent again."""
        with self._lock:
            self._sort_out()
            return len(self._free)

    def lend(self, shapes: list[tuple[int, object]]) -> list[np.ndarray]:
        """Arrays of the (length, dtype) ``shapes``, uninitialised, in one slab (its untouched pages unbacked)."""
        ends, at = [], 0
        for n, dtype in shapes:
            at = -(-at // _ALIGN) * _ALIGN
            ends.append(at)
            at += max(n, 1) * np.dtype(dtype).itemsize
        slab = self._take(at)
        if slab is None:
            return [plain_empty(n, dtype) for n, dtype in shapes]
        # every array's base is ``whole`` (NumPy collapses a view's base no further than an array whose base is no
        # array): it goes once the last of them does (an Arrow buffer of one holds it), and gives the slab back
        whole = np.frombuffer(slab, np.uint8)
        arrays = [whole[a:a + max(n, 1) * np.dtype(dtype).itemsize].view(dtype)[:n]
                  for a, (n, dtype) in zip(ends, shapes)]
        if any(a.base is not whole for a in arrays):  # (a NumPy that collapses bases otherwise: not lent)
            return [plain_empty(n, dtype) for n, dtype in shapes]
        weakref.finalize(whole, self._give, slab)
        return arrays

    def _sort_out(self) -> None:
        """The slabs given back among those waiting (while a reading lasts), the ``kept`` biggest, by size."""
        while True:
            try:
                slab = self._back.get_nowait()
            except queue.Empty:
                break
            if self._readers:
                self._free.append(slab)
        if not self._readers:
            self._free.clear()
        self._free.sort(key=len)
        del self._free[:max(len(self._free) - self._kept, 0)]

    def _take(self, size: int) -> mmap.mmap | None:
        with self._lock:
            self._sort_out()
            fits = [m for m in self._free if len(m) >= size]
            if fits:  # the smallest that fits
                self._free.remove(fits[0])
                return fits[0]
        try:
            slab = mmap.mmap(-1, -(-size // _SLAB_STEP) * _SLAB_STEP, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            if hasattr(mmap, "MADV_NOHUGEPAGE"):
                slab.madvise(mmap.MADV_NOHUGEPAGE)
        except (OSError, ValueError):
            return None
        return slab

    def _give(self, slab: mmap.mmap) -> None:
        if not self._readers:
            return  # (not kept: unmapped when it goes)
        try:
            if _MADV_FREE is not None:
                slab.madvise(_MADV_FREE)
        except (OSError, ValueError):
            return
        self._back.put(slab)


_ALIGN = 64  # bytes: where each array of a slab starts
_SLAB_STEP = 16 << 20  # slab sizes are rounded up to this: a slab serves the next chunk of about the same size
_MADV_FREE = getattr(mmap, "MADV_FREE", None)  # (Linux; elsewhere the slabs kept stay as they are)
