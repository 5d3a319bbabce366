"""A reader that parses only the lines a run can keep: a per-step cap and a step range skip the rest unread.

RL Logging Board's ``max_samples_per_step`` stops reading a step's records once it holds enough.
Here the step of each line is told from its bytes (``line_steps``) before anything is parsed:

- a line of a step outside the range is skipped;
- a line past a step's first ``cap`` samples in its file is skipped. The run keeps a step's first
  ``cap`` samples across all files, by line then path: a sample that is not among the first ``cap``
  of its own file is never among them, so each file is capped on its own.

What a line that was not parsed would have held is unknown: the first ``cap`` lines of a step
may hold fewer than ``cap`` samples (a bad line is no sample). So after the parse, a step whose
samples before its first skipped line are too few has more lines parsed, until none are too few.
The parts this reader writes hold every sample the run keeps, and some more (lines whose step
the bytes do not tell are parsed as usual, and do not count towards the cap, so that what is parsed
does not hang on how the file fell into chunks or reads); the run's own filter then keeps exactly
what a full read would. A line skipped is not checked: its problems go unreported, and their count
is kept.
"""

from __future__ import annotations

import dataclasses
import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlviz_widgets._ingest.lines import Chunk
from rlviz_widgets._ingest.readers.jsonl import JsonlReader
from rlviz_widgets._ingest.readers.jsonl.keyscan import lines_buffer
from rlviz_widgets._ingest.readers.jsonl.linesteps import NO_STEP, line_steps

NO_KEY = NO_STEP + 1  # ``line_steps``'s mark of a line without the step key (told apart from the file name's step)


class SelectiveReader:
    """``reader``, reading only the lines that a per-step ``cap`` and a step range (``lo``..``hi``) may keep."""

    whole_file = False

    def __init__(self, reader: JsonlReader, cap: int | None, lo: int | None, hi: int | None):
        """``reader``: one whose ``step_key()`` is not None; ``cap``, ``lo``, ``hi``: None where not set."""
        self.reader, self.cap, self.lo, self.hi = reader, cap, lo, hi
        self.key = reader.step_key()
        self.scan_byte = reader.scan_byte
        # its own cache: its parts lack the lines skipped (another cap or range skips others)
        options = [f"cap={cap}"] if cap is not None else []
        if (lo, hi) != (None, None):
            options.append(f"steps={'' if lo is None else lo}..{'' if hi is None else hi}")
        self.name = "|".join([reader.name, *options])

    def inside(self, steps: np.ndarray) -> np.ndarray:
        """Which of ``steps`` (each line's, NO_STEP where not told) are known and in the step range."""
        ok = steps != NO_STEP
        if self.lo is not None:
            ok &= steps >= self.lo
        if self.hi is not None:
            ok &= steps <= self.hi
        return ok

    def prepare(self, chunk: Chunk) -> None:
        """Each line's step, early (in the reading thread). The reader's own early work (keys, odd lines) is left
        for the lines kept: most of a chunk may be skipped."""
        chunk.steps = line_steps(chunk.lines, self.key, chunk.found, no_key=NO_KEY)

    def for_file(self, path: str | os.PathLike) -> FileSelection:
        return FileSelection(self, self.reader.for_file(path))

    def parse_many(self, con: duckdb.DuckDBPyConnection, chunks: list[Chunk],
                   readers: list[FileSelection]) -> list[tuple[pa.Table | None, list]]:
        """Small chunks (of several files) parsed in one query, each first cut to the lines its file may keep."""
        picked = [r.select(c) for r, c in zip(readers, chunks)]
        todo = [i for i, (keep, _) in enumerate(picked) if keep.any()]
        parsed = dict(zip(todo, self.reader.parse_many(
            con, [_subset(chunks[i], picked[i][0], readers[i].inner, copy=True) for i in todo],
            [readers[i].inner for i in todo]))) if todo else {}
        return [r.settle(con, c, keep, steps, parsed.get(i, (None, [])))
                for i, (r, c, (keep, steps)) in enumerate(zip(readers, chunks, picked))]


class FileSelection:
    """A ``SelectiveReader`` bound to one file: how many samples of each step the file has given so far."""

    whole_file = False

    def __init__(self, owner: SelectiveReader, inner: JsonlReader) -> None:
        self.owner, self.inner = owner, inner
        self.have: dict[int, int] = {}  # step -> samples read of it (in this file)
        self.skipped = 0  # lines skipped unread

    @property
    def file_step(self) -> int | None:
        return self.inner.file_step

    def resume(self, counts: dict[str, int]) -> None:
        """The samples per step its earlier reads gave (``counts``, as ``counts()`` gave them): a read goes on."""
        self.have = {int(s): n for s, n in counts.items()}

    def counts(self) -> dict[str, int]:
        """The samples per step read so far (kept in the file's cache state, for the next read to go on from)."""
        return {str(s): n for s, n in self.have.items()}

    def parse(self, con: duckdb.DuckDBPyConnection, chunk: Chunk) -> tuple[pa.Table | None, list]:
        keep, steps = self.select(chunk)
        parsed = self.inner.parse(con, _subset(chunk, keep, self.inner)) if keep.any() else (None, [])
        return self.settle(con, chunk, keep, steps, parsed)

    def select(self, chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
        """(the lines to parse, each line's step or NO_STEP): those the range and the cap may keep, and every
        line whose step the bytes do not tell."""
        owner = self.owner
        steps = chunk.steps
        if steps is None:  # a chunk nobody prepared (the last line, without its newline)
            steps = line_steps(chunk.lines, owner.key, no_key=NO_KEY)
        # a line that names no step (the key in no spelling) is of the file name's step, if it gives one
        steps = np.where(steps == NO_KEY, NO_STEP if self.file_step is None else self.file_step, steps)
        known = steps != NO_STEP
        inside = owner.inside(steps)
        keep = ~known
        if owner.cap is None:
            return keep | inside, steps
        at = np.flatnonzero(inside)
        keep[at[_rank(steps[at]) < self._room(steps[at])]] = True
        return keep, steps

    def _room(self, steps: np.ndarray, extra: dict[int, int] | None = None) -> np.ndarray:
        """Per value of ``steps``: how many more samples of its step the cap takes (less ``extra``'s count)."""
        uniq, inverse = np.unique(steps, return_inverse=True)
        extra = extra or {}
        room = [self.owner.cap - self.have.get(s, 0) - extra.get(s, 0) for s in uniq.tolist()]
        return np.array(room, dtype=np.int64)[inverse]

    def settle(self, con: duckdb.DuckDBPyConnection, chunk: Chunk, keep: np.ndarray, steps: np.ndarray,
               parsed: tuple[pa.Table | None, list]) -> tuple[pa.Table | None, list]:
        """The parse of the lines kept, made enough: while a step has fewer than ``cap`` samples before the first
        line of it skipped, its next skipped lines are parsed too."""
        owner = self.owner
        table, problems = parsed
        rounds = 0
        while owner.cap is not None:
            # each round takes twice as many lines as samples are missing, then four times...: a run of bad
            # lines costs a few parses of the chunk, not one per line
            more = self._short(table, keep, steps, chunk.numbers, 2 ** rounds)
            if not more.any():
                break
            keep = keep | more
            rounds += 1
            table, problems = self.inner.parse(con, _subset(chunk, keep, self.inner))
        # the rounds may take lines past a step's cap (``select`` alone never does): parsed again without them, as a
        # read line by line
        past = self._past_cap(table, keep, steps, chunk.numbers) if rounds else None
        if past is not None and past.any():
            keep = keep & ~past
            table, problems = self.inner.parse(con, _subset(chunk, keep, self.inner)) if keep.any() else (None, [])
        if table is not None and table.num_rows:
            told = _told(table, steps, chunk.numbers)
            counts = pc.value_counts(table["step"].filter(told))
            for s, n in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()):
                self.have[s] = self.have.get(s, 0) + n
        self.skipped += int(len(keep) - np.count_nonzero(keep))
        return table, problems

    def _past_cap(self, table: pa.Table | None, keep: np.ndarray, steps: np.ndarray,
                  numbers: np.ndarray) -> np.ndarray:
        """The lines kept, of a step told by their bytes, that its samples before them (read before, and of told
        lines kept before them) already fill: a read line by line would have skipped them."""
        past = np.zeros(len(keep), dtype=bool)
        at = np.flatnonzero(keep & (steps != NO_STEP))
        if self.owner.cap is None or not len(at):
            return past
        n = np.zeros(len(at), dtype=np.int64)  # each line's samples
        if table is not None and table.num_rows:
            lines, counts = np.unique(table["line"].to_numpy(zero_copy_only=False), return_counts=True)
            i = np.searchsorted(lines, numbers[at]).clip(0, len(lines) - 1)
            n = np.where(lines[i] == numbers[at], counts[i], 0)
        s = steps[at]
        order = np.argsort(s, kind="stable")
        ss, nn = s[order], n[order]
        before = np.cumsum(nn) - nn  # samples before each line, over all steps
        first = np.r_[True, ss[1:] != ss[:-1]]
        before -= before[first][np.cumsum(first) - 1]  # ... of its own step
        past[at[order[before >= self._room(ss)]]] = True
        return past

    def _short(self, table: pa.Table | None, keep: np.ndarray, steps: np.ndarray, numbers: np.ndarray,
               factor: int) -> np.ndarray:
        """The skipped lines to parse next: of each step whose samples (read before, and parsed before its first
        skipped line) are fewer than the cap, its next skipped lines, ``factor`` times as many as are missing."""
        owner = self.owner
        more = np.zeros(len(keep), dtype=bool)
        skipped = np.flatnonzero(~keep & owner.inside(steps))
        if not len(skipped):
            return more
        uniq, first = np.unique(steps[skipped], return_index=True)  # first: each step's first skipped line
        before: dict[int, int] = {}
        if table is not None and table.num_rows:
            told = _told(table, steps, numbers)
            row_steps = table["step"].to_numpy(zero_copy_only=False)[told]
            row_lines = table["line"].to_numpy(zero_copy_only=False)[told]
            k = np.searchsorted(uniq, row_steps).clip(0, len(uniq) - 1)
            mine = (uniq[k] == row_steps) & (row_lines < numbers[skipped[first]][k])
            counts = np.bincount(k[mine], minlength=len(uniq))
            before = {s: n for s, n in zip(uniq.tolist(), counts.tolist()) if n}
        missing = self._room(steps[skipped], before)
        more[skipped[_rank(steps[skipped]) < np.where(missing > 0, missing * factor, 0)]] = True
        return more


def _told(table: pa.Table, steps: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    """Which of ``table``'s samples come from lines whose step the bytes told (``steps``, by line ``numbers``): only
    those count towards the cap. A line whose step they do not tell is parsed whatever the cap; were its sample
    counted, which lines after it are parsed would hang on whether it was read in the same chunk."""
    lines = table["line"].to_numpy(zero_copy_only=False)
    return steps[np.searchsorted(numbers, lines)] != NO_STEP


def _rank(steps: np.ndarray) -> np.ndarray:
    """Each value's count of equal values before it (0 for the first of each)."""
    order = np.argsort(steps, kind="stable")
    s = steps[order]
    at = np.arange(len(s))
    first = np.maximum.accumulate(np.where(np.r_[True, s[1:] != s[:-1]], at, 0))
    rank = np.empty(len(s), dtype=np.int64)
    rank[order] = at - first
    return rank


def _subset(chunk: Chunk, keep: np.ndarray, reader: JsonlReader, copy: bool = False) -> Chunk:
    """The chunk's lines marked in ``keep``, prepared by ``reader`` (their keys, their odd lines). Runs of lines
    kept are zero-copy slices of the chunk's, unless ``copy`` (or the runs are many and short)."""
    idx = np.flatnonzero(keep)
    found = chunk.found
    if found is not None:  # the colons of the lines kept: keys and odd lines are looked for there only
        offsets, _, _ = lines_buffer(chunk.lines, found)
        found = found[keep[np.searchsorted(offsets, found, side="right") - 1]]
    probe = dataclasses.replace(chunk, found=found, keys=None, odd=None, repeats=None)
    reader.prepare(probe, arrays=False)  # read with the lines kept (parse), not for the whole chunk
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    if copy or len(breaks) + 1 > max(8, len(idx) // 4):
        lines = chunk.lines.take(pa.array(idx))
    else:
        runs = np.split(idx, breaks)
        lines = pa.chunked_array([chunk.lines.slice(int(r[0]), len(r)) for r in runs], chunk.lines.type)
    kept = Chunk(lines, chunk.numbers[idx], chunk.first_bytes[idx], chunk.start, chunk.end, keys=probe.keys,
                 odd=probe.odd, repeats=probe.repeats, final=chunk.final)
    kept.native = reader.native_arrays(kept)  # the number arrays of the lines kept only
    return kept
