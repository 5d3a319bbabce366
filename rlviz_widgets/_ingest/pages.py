"""Memory for big scratch arrays: the read buffers and the C reader's outputs."""

from __future__ import annotations

import mmap

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
