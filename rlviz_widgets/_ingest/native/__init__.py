"""The number arrays and token strings of a chunk's JSON lines read by a small C function (``arrays.c``), when it
was compiled.

``read_arrays`` gives the float32 lists of the named keys, the list of strings of another, and the lines with those
lists written as ``[]`` (for DuckDB to read the rest), or None: no compiled function, or a line it does not fully
understand (the caller then reads the chunk as before). The shared library is built by the package's build hook
(``hatch_build.py``); without a C compiler the package works as before, only its cold open is slower.
"""

from __future__ import annotations

import ctypes
import os
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from rlviz_widgets._ingest.pages import Slabs, plain_empty

POW_MIN, POW_MAX = -348, 347  # the powers of ten arrays.c has a 128-bit mantissa for
LIBRARY = "_arrays.so"
ABI = 8  # arrays.c's rlviz_abi(): the functions' arguments as called here
_lib = None  # ctypes library, loaded on first use (False: not there)
_loading = threading.Lock()  # the reading thread and the caller's may ask first at once
_thread = ThreadPoolExecutor(1, thread_name_prefix="rlviz-arrays")  # ctypes lets go of the GIL: a core of its own


def _new_thread() -> None:
    # a forked child has no threads: the parent's executor would take its work and never run it
    global _thread
    _thread = ThreadPoolExecutor(1, thread_name_prefix="rlviz-arrays")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_thread)


def powers() -> tuple[np.ndarray, np.ndarray]:
    """The Eisel-Lemire table: 10**q for q in POW_MIN..POW_MAX as 128-bit mantissas (rounded down, top bit set),
    split into high and low 64 bits. Exact integer arithmetic, so it needs no generated source file."""
    hi, lo = [], []
    for q in range(POW_MIN, POW_MAX + 1):
        if q >= 0:
            v = 10**q
            n = v.bit_length()
            v = v << (128 - n) if n <= 128 else v >> (n - 128)
        else:
            d = 10**-q
            v = (1 << (127 + d.bit_length())) // d
        hi.append(v >> 64)
        lo.append(v & (2**64 - 1))
    return np.array(hi, np.uint64), np.array(lo, np.uint64)


def library():
    """The compiled function, or None (not built, or turned off with ``RLVIZ_NO_NATIVE=1``)."""
    global _lib
    if _lib is None:
        with _loading:
            if _lib is None:
                _lib = _load() or False
    return _lib or None


def _load(path: Path | None = None):
    path = path or Path(__file__).with_name(LIBRARY)
    if not path.exists() or os.environ.get("RLVIZ_NO_NATIVE"):
        return None
    try:
        lib = ctypes.CDLL(str(path))
    except OSError:  # built for another machine, say
        return None
    abi = getattr(lib, "rlviz_abi", None)
    if abi is None or _abi(abi) != ABI:
        warnings.warn(f"rlviz_widgets: {path} was built from other sources than this version's: it is not used (first "
                      "opens are slower) until the package is installed again (pip install -e . rebuilds it)",
                      RuntimeWarning, stacklevel=2)
        return None
    try:
        _declare(lib)
    except AttributeError:  # of this version, but without every function (built by hand from some of the sources)
        warnings.warn(f"rlviz_widgets: {path} lacks some of its functions: it is not used (first opens are slower) "
                      "until the package is installed again", RuntimeWarning, stacklevel=2)
        return None
    hi, lo = powers()
    lib.rlviz_set_powers(hi.ctypes.data, lo.ctypes.data)
    lib.find_vector = bool(lib.rlviz_find_vector())
    return lib


def _declare(lib) -> None:
    p = ctypes.c_void_p
    lib.rlviz_arrays.restype = ctypes.c_int64
    lib.rlviz_arrays.argtypes = [p, p, ctypes.c_int64, p, p, ctypes.c_int32, p, p, p, p, p, p, p, ctypes.c_int64,
                                 p, p, p, p, p, p, p, p, ctypes.c_int32, p, p, p, p, p]
    lib.rlviz_find.restype = ctypes.c_int64
    lib.rlviz_find.argtypes = [p, ctypes.c_int64, ctypes.c_uint8, ctypes.c_uint8, p, p, p]
    lib.rlviz_find_vector.restype, lib.rlviz_find_vector.argtypes = ctypes.c_int32, []
    lib.rlviz_set_powers.restype = None
    lib.rlviz_set_powers.argtypes = [p, p]
    lib.rlviz_count.restype = None
    lib.rlviz_count.argtypes = [p, p, ctypes.c_int64, p, ctypes.c_int64, p]
    lib.rlviz_messages.restype = ctypes.c_int64
    lib.rlviz_messages.argtypes = [p, p, ctypes.c_int64, p, ctypes.c_int64, p, ctypes.c_int64, p, p, p, ctypes.c_int64,
                                   ctypes.c_int64, p, p, p, p, p, p, p, p, p, p, p, p, p, p, p, p, p,
                                   ctypes.c_int32, p, p, p, p, p]


def _abi(fn) -> int:
    fn.restype, fn.argtypes = ctypes.c_int32, []
    return fn()


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


KEY_SLOTS = 8192  # arrays.c's: a chunk of more distinct keys than half of it is left to DuckDB
KINDS = {"FLOAT[]": 0, "DOUBLE[]": 1, "BOOLEAN[]": 2, "BIGINT[]": 3, "DROP": 4}  # arrays.c's list kinds by the
# json_transform type they stand for; DROP: a list no column reads (checked, written [], not kept)
_ITEMS = {0: (np.float32, pa.float32()), 1: (np.float64, pa.float64()), 2: (np.uint8, pa.bool_()),
          3: (np.int64, pa.int64())}


@dataclass(frozen=True)
class Found:
    """What C saw of a chunk's lines besides their lists (``read_messages``: of the lines it read): its top-level
    ``keys`` (exactly: no line of those writes one twice) and the indexes of the lines where a text key holds no
    string or null (``odd``)."""

    keys: frozenset[str]
    odd: np.ndarray


def read_arrays(lines: pa.LargeStringArray, keys: list[str], strings: str | None = None,
                kinds: list[str] | None = None, texts: list[str] = ()
                ) -> tuple[pa.LargeStringArray, list[pa.ListArray | None], pa.ListArray | None, Found] | None:
    """(the lines with the lists of ``keys`` and ``strings`` written as [], one list array per key (of its kind in
    ``kinds``, a ``KINDS`` name each; float32 lists by default; None for a DROP key), the list of strings of
    ``strings``: each null where a line has no such key, an item null where the line writes null; and what else it
    saw (``Found``: ``texts`` are the text keys), or None when the compiled function is missing or cannot read every
    line (see ``arrays.c``)."""
    lib = library()
    n = len(lines)
    if lib is None or n == 0 or not (keys or strings):
        return None
    codes = [KINDS[k] for k in kinds] if kinds is not None else [0] * len(keys)
    offsets = np.frombuffer(lines.buffers()[1], np.int64)[lines.offset:lines.offset + n + 1]
    data = np.frombuffer(lines.buffers()[2], np.uint8)
    size = int(offsets[-1] - offsets[0])
    names = [k.encode() for k in keys]
    key_bytes = np.frombuffer(b"".join(names) or b"\0", np.uint8)
    key_offs = np.concatenate([[0], np.cumsum([len(k) for k in names])]).astype(np.int64)
    # the outputs go to this thread's scratch arrays, reused from chunk to chunk, and are copied out at their size:
    # fresh memory for each chunk (zeroed by the kernel, 2 MB at a time where it backs it with huge pages) cost
    # more than the copies
    items = size // 2 + 1  # an item takes 2 bytes at least
    vals = [_scratch(f"v{k}.{c}", items if c != 4 else 1, _ITEMS.get(c, _ITEMS[2])[0]) for k, c in enumerate(codes)]
    evalid = [_scratch(f"e{k}", items if c != 4 else 1, np.uint8) for k, c in enumerate(codes)]
    nulls = np.zeros(max(len(keys), 1), np.int64)
    voffs = [np.empty(n + 1, np.int32) for _ in keys]
    valid = [np.empty(n, np.uint8) for _ in keys]
    skey = (strings or "").encode()
    sdata = _scratch("sdata", size if strings else 1, np.uint8)  # unescaped, a string is no longer than its JSON
    soffs = _scratch("soffs", size // 3 + 2 if strings else 1, np.int32)  # "", takes 3 bytes
    slist = np.empty(n + 1, np.int32)
    svalid = np.empty(n, np.uint8)
    text = _scratch("text", size, np.uint8)
    toffs = np.empty(n + 1, np.int64)
    ptrs = [(ctypes.c_void_p * max(len(keys), 1))(*map(_ptr, a)) for a in (vals, voffs, valid, evalid)]
    kind_bytes = np.array(codes or [0], np.uint8)
    text_bytes, text_offs, n_texts = _names(texts)
    found_at, found_len = np.empty(KEY_SLOTS // 2, np.int64), np.empty(KEY_SLOTS // 2, np.int32)
    odd, counts = np.empty(n, np.int64), np.zeros(2, np.int64)
    done = lib.rlviz_arrays(_ptr(data), _ptr(offsets), n, _ptr(key_bytes), _ptr(key_offs), len(keys),
                            _ptr(kind_bytes), *ptrs, _ptr(nulls), skey, len(skey) if strings else -1, _ptr(sdata),
                            _ptr(soffs), _ptr(slist), _ptr(svalid), _ptr(text), _ptr(toffs), _ptr(text_bytes),
                            _ptr(text_offs), n_texts, _ptr(found_at), _ptr(found_len), _ptr(counts[:1]),
                            _ptr(odd), counts[1:].ctypes.data)
    if done != n:
        return None
    out = pa.LargeStringArray.from_buffers(n, pa.py_buffer(toffs), pa.py_buffer(text[:toffs[-1]].copy()))
    lists = [None if c == 4 else _list(o, _items(v, ev, int(o[-1]), int(nn), c), ok)
             for v, ev, o, ok, nn, c in zip(vals, evalid, voffs, valid, nulls, codes)]
    texts = None
    if strings:
        count = int(slist[-1])
        values = pa.StringArray.from_buffers(count, pa.py_buffer(soffs[:count + 1].copy()),
                                             pa.py_buffer(sdata[:soffs[count]].copy()))
        texts = _list(slist, values, svalid)
    return out, lists, texts, _found(data, found_at, found_len, odd, counts)


def _names(names: list[str]) -> tuple[np.ndarray, np.ndarray, int]:
    """Names as C takes them: their UTF-8 bytes one after the other, their offsets (int64), how many."""
    raw = [k.encode() for k in names]
    offs = np.concatenate([[0], np.cumsum([len(k) for k in raw])]).astype(np.int64)
    return np.frombuffer(b"".join(raw) or b"\0", np.uint8), offs, len(raw)


def _found(data: np.ndarray, at: np.ndarray, lengths: np.ndarray, odd: np.ndarray, counts: np.ndarray) -> Found:
    """``Found`` of C's keys (``counts[0]`` of them, where in ``data`` and how long) and odd lines (``counts[1]``)."""
    keys = frozenset(bytes(data[a:a + b]).decode() for a, b in zip(at[:counts[0]].tolist(),
                                                                  lengths[:counts[0]].tolist()))
    return Found(keys, odd[:counts[1]].copy())


def _items(values: np.ndarray, valid: np.ndarray, m: int, nulls: int, code: int) -> pa.Array:
    """A list's items as Arrow: the first ``m`` of ``values`` (copied out of the scratch), null where ``valid`` is
    0 (``nulls`` of them)."""
    mask = pa.py_buffer(np.packbits(valid[:m], bitorder="little")) if nulls else None
    if code == 2:  # booleans: Arrow packs them to bits
        data = pa.py_buffer(np.packbits(values[:m], bitorder="little"))
    else:
        data = pa.py_buffer(values[:m].copy())
    return pa.Array.from_buffers(_ITEMS[code][1], m, [mask, data], null_count=nulls)


MESSAGE_TEXTS = ("prompt", "response", "role", "text", "tool_name", "tool_arguments", "tool_call_id",
                 "reasoning")  # messages.c's text columns, in its order: by line, then by turn row
_BY_LINE = 2  # (the first two)
_TEXT = MESSAGE_TEXTS.index("text")  # a line's scratch in C: its turns' texts are spans of the prompt or response


def read_messages(lines: pa.LargeStringArray, key: str, pad: bytes = b"", text_keys: list[str] = ()
                  ) -> dict[str, pa.Array] | None:
    """What ``messages.c`` reads of the chat messages under the top-level ``key`` of each line, or None (no compiled
    function, nothing to read, or out of room): ``lines`` (those it read with their messages written as []),
    ``handled`` (bool, by line: read here; the others are Python's, as before), ``prompt``, ``response`` (by line,
    null where not read), ``answer_start``, ``answer_end`` (int32 by line: where the answer stands in the response,
    UTF-8 bytes; null where not read or none), ``n_turns``, ``n_tool_calls``, ``response_chars`` and
    ``response_pads`` (how often ``pad`` is in the response, as ``count_literal`` counts; by line, null where not
    read or no response), ``row_offsets`` (int32, n + 1: each line's turn rows), and by turn row ``turn`` (int32),
    ``trained`` (bool),
    ``text_start``, ``text_end``, ``in_prompt`` (where the turn's text stands, as ``turns.stored_rows`` has it) and
    the texts ``role``, ``tool_name``, ``tool_arguments``, ``tool_call_id``, ``reasoning``; and ``found``, what C
    saw of the lines it read (``Found``: their top-level keys, those where a text key of ``text_keys`` holds no
    string or null), not a column."""
    lib = library()
    n = len(lines)
    if lib is None or n == 0 or (pad and pad[0] in pad[1:]):
        return None
    offsets = np.frombuffer(lines.buffers()[1], np.int64)[lines.offset:lines.offset + n + 1]
    data = np.frombuffer(lines.buffers()[2], np.uint8)
    size = int(offsets[-1] - offsets[0])
    if size == 0 or size + 64 > INT32_LIMIT:  # the texts' offsets are int32
        return None
    cap, cap_rows = size + 64, size // 2 + 2  # a text is no longer than the JSON it comes from; a row takes 2 bytes
    # the outputs are kept as they are at the size written (copies out of reused scratch arrays took longer than C's
    # reading), in a slab of memory lent for them (only the pages written are backed; once they go, the slab serves
    # a later chunk, its pages backed already); the turns' texts are a line's scratch, reused
    k_n = len(MESSAGE_TEXTS)
    out = _OUTPUTS.lend([*((cap, np.uint8) for _ in range(k_n)),
                         *(((n if k < _BY_LINE else cap_rows) + 1, np.int32) for k in range(k_n)),
                         *((n if k < _BY_LINE else cap_rows, np.uint8) for k in range(k_n)),
                         (cap_rows, np.int32), (cap_rows, np.bool_), (cap_rows, np.int32), (cap_rows, np.int32),
                         (cap_rows, np.uint8), (size, np.uint8)])
    texts, toffs, valid = out[:k_n], out[k_n:2 * k_n], out[2 * k_n:3 * k_n]
    turn, trained, starts, ends, span, text = out[3 * k_n:]
    texts[_TEXT] = _scratch("message_text", cap, np.uint8)
    row_offs, n_turns, n_calls = np.empty(n + 1, np.int32), np.empty(n, np.int32), np.empty(n, np.int32)
    chars, pads = np.empty(n, np.int64), np.empty(n, np.int64)
    answer_start, answer_end = np.empty(n, np.int32), np.empty(n, np.int32)
    handled = np.empty(n, np.bool_)
    lineoffs = np.empty(n + 1, np.int64)
    raw = key.encode()
    ptrs = [(ctypes.c_void_p * len(a))(*map(_ptr, a)) for a in (texts, toffs, valid)]
    text_bytes, text_offs, n_texts = _names(text_keys)
    found_at, found_len = np.empty(KEY_SLOTS // 2, np.int64), np.empty(KEY_SLOTS // 2, np.int32)
    odd, counts = np.empty(n, np.int64), np.zeros(2, np.int64)
    rows = lib.rlviz_messages(_ptr(data), _ptr(offsets), n, raw, len(raw), pad, len(pad), *ptrs, cap, cap_rows,
                              _ptr(turn), _ptr(trained), _ptr(starts), _ptr(ends), _ptr(span), _ptr(answer_start),
                              _ptr(answer_end), _ptr(row_offs), _ptr(n_turns), _ptr(n_calls), _ptr(chars),
                              _ptr(pads), _ptr(handled), _ptr(text), _ptr(lineoffs), _ptr(text_bytes),
                              _ptr(text_offs), n_texts, _ptr(found_at), _ptr(found_len), _ptr(counts[:1]),
                              _ptr(odd), counts[1:].ctypes.data)
    if rows < 0:
        return None
    spanned = (span[:rows] & 1) == 0  # (the mask of the rows without a span: a turn's later tool calls)
    out = {"lines": pa.LargeStringArray.from_buffers(n, pa.py_buffer(lineoffs), pa.py_buffer(text[:lineoffs[-1]])),
           "handled": pa.array(handled), "n_turns": pa.array(n_turns, mask=~handled),
           "n_tool_calls": pa.array(n_calls, mask=~handled), "response_chars": pa.array(chars, mask=chars < 0),
           "response_pads": pa.array(pads, mask=pads < 0), "row_offsets": pa.array(row_offs),
           "turn": pa.array(turn[:rows]), "trained": pa.array(trained[:rows]),
           "text_start": pa.array(starts[:rows], mask=spanned), "text_end": pa.array(ends[:rows], mask=spanned),
           "in_prompt": pa.array((span[:rows] & 2) > 0, mask=spanned),
           "answer_start": pa.array(answer_start, mask=answer_start < 0),
           "answer_end": pa.array(answer_end, mask=answer_start < 0), "found": _found(data, found_at, found_len,
                                                                                     odd, counts)}
    for k, name in enumerate(MESSAGE_TEXTS):
        if k != _TEXT:
            m = n if k < _BY_LINE else rows
            out[name] = _strings(toffs[k][:m + 1], texts[k], valid[k][:m])
    return out


INT32_LIMIT = 2**31 - 1
_OUTPUTS = Slabs(kept=4)  # read_messages' outputs: about the chunks parsed and written at a time


def outputs_reused():
    """A context in which the memory of the C readers' outputs, once they go, is kept for the next chunk's (the
    cold open's pipeline: one ``update_files``); none is kept outside any."""
    return _OUTPUTS.reading()


def _strings(offsets: np.ndarray, data: np.ndarray, valid: np.ndarray) -> pa.StringArray:
    """A string array of C's offsets, bytes and validity (0 or 1 each)."""
    nulls = int(len(valid) - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.StringArray.from_buffers(len(valid), pa.py_buffer(offsets), pa.py_buffer(data[:offsets[-1]]), bitmap,
                                       nulls)


def read_messages_later(lines: pa.LargeStringArray, key: str, then, pad: bytes = b"",
                        text_keys: list[str] = ()) -> Future | None:
    """``then(read_messages(lines, key, pad, text_keys))`` on the thread of ``read_arrays_later`` (None at once
    without the compiled function): the reading thread goes on to the next chunk meanwhile."""
    if library() is None:
        return None
    return _thread.submit(lambda: then(read_messages(lines, key, pad, text_keys)))


FIND_BLOCK = 1 << 20  # bytes looked through per call: the positions' scratch is 8x that


def find_bytes(data: np.ndarray, value: int, also: int | None = None
               ) -> tuple[np.ndarray, np.ndarray | None] | None:
    """Positions (int64) of byte ``value`` in ``data`` (uint8, contiguous) and of ``also`` (None when not asked), or
    None: no compiled function, or one that looks a byte at a time (NumPy's search is faster), or other input."""
    lib = library()
    if lib is None or not lib.find_vector or data.dtype != np.uint8 or not data.flags.c_contiguous:
        return None
    if not 0 <= value <= 255 or (also is not None and not 0 <= also <= 255):  # ctypes would wrap them
        return None
    n = len(data)
    step = min(n, FIND_BLOCK)
    out_a, out_b = _scratch("find_a", step, np.int64), _scratch("find_b", step if also is not None else 0, np.int64)
    nb = ctypes.c_int64(0)
    found_a, found_b = [], []
    base = _ptr(data)
    for off in range(0, n, FIND_BLOCK):
        m = min(FIND_BLOCK, n - off)
        ka = lib.rlviz_find(base + off, m, value, also if also is not None else 0, _ptr(out_a),
                            _ptr(out_b) if also is not None else None, ctypes.byref(nb))
        found_a.append(out_a[:ka] + off)
        if also is not None:
            found_b.append(out_b[:nb.value] + off)
    return _joined(found_a), None if also is None else _joined(found_b)


def count_literal(texts: pa.StringArray | pa.LargeStringArray, needle: bytes) -> np.ndarray | None:
    """How often ``needle`` occurs in each text (0 for null), or None without the compiled function. Only a needle
    whose first byte does not recur in it (its matches cannot overlap: every one is counted)."""
    lib = library()
    if lib is None or not needle or needle[0] in needle[1:]:
        return None
    n = len(texts)
    large = pa.types.is_large_string(texts.type)
    offsets = np.frombuffer(texts.buffers()[1], np.int64 if large else np.int32)[texts.offset:texts.offset + n + 1]
    offsets = np.ascontiguousarray(offsets, np.int64)
    data = texts.buffers()[2]
    counts = np.zeros(n, np.int64)
    if n and offsets[-1] > offsets[0]:
        lib.rlviz_count(data.address, _ptr(offsets), n, needle, len(needle), _ptr(counts))
    return counts


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The blocks' positions as one array (the reading thread asks a block at a time: no second copy then)."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


_local = threading.local()


SCRATCH_KEPT = 1 << 27  # bytes: a scratch array this big at most is kept for the next chunk (a chunk's is 2x its size)


def _scratch(name: str, n: int, dtype) -> np.ndarray:
    """This thread's scratch array ``name``, ``n`` long (only the pages written are backed). One for a huge line is
    not kept: the thread would hold its pages for good."""
    have = getattr(_local, name, None)
    if have is None or len(have) < n:
        have = plain_empty(max(n, 1), dtype)
        if have.nbytes <= SCRATCH_KEPT:
            setattr(_local, name, have)
    return have[:n]


def _list(offsets: np.ndarray, values: pa.Array, valid: np.ndarray) -> pa.ListArray:
    mask = valid == 0
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(mask) if mask.any() else None)


def read_arrays_later(lines: pa.LargeStringArray, lists: dict[str, str], strings: str | None = None,
                      then: Callable | None = None, texts: list[str] = ()) -> Future | None:
    """``read_arrays`` of ``lists`` (record key -> its ``KINDS`` name), ``strings`` (the key of a list of
    strings) and ``texts`` on a thread of its own, so the reading thread goes on to the next chunk: a future of
    ``then((lines, {key: list array}, Found))`` (DROP keys left out; without ``then``, that triple) or of None; None
    at once without the compiled function."""
    if library() is None or not (lists or strings):
        return None

    def read():
        got = read_arrays(lines, list(lists), strings, list(lists.values()), texts)
        if got is None:
            return None
        arrays = {k: a for k, a in zip(lists, got[1]) if a is not None}
        if strings:
            arrays[strings] = got[2]
        return (got[0], arrays, got[3]) if then is None else then((got[0], arrays, got[3]))

    return _thread.submit(read)
