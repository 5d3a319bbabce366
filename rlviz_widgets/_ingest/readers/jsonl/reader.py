"""``JsonlReader``: one chunk of raw JSON lines -> one Arrow table in the common columns (scalar fields, per-sample
token reductions, the token arrays as float32 lists) plus the problems it found, each located by line.

The JSON is parsed by DuckDB (C++, both cores); the number arrays by the C reader beside it, where it can; Python
only triages odd lines and runs vectorized numpy over the arrays. What sets a format apart is its ``JsonlFormat``.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlviz_widgets._ingest.lines import Chunk
from rlviz_widgets._ingest.metrics import ARRAYS, with_reductions
from rlviz_widgets._ingest.native import KINDS, Found, read_arrays_later
from rlviz_widgets._ingest.readers.jsonl.batches import combine, register, split
from rlviz_widgets._ingest.readers.jsonl.checks import Naming, check
from rlviz_widgets._ingest.readers.jsonl.derive import Derive, deriver
from rlviz_widgets._ingest.readers.jsonl.format import JsonlFormat
from rlviz_widgets._ingest.readers.jsonl.keyscan import candidate_keys, odd_values, repeated_keys, scan
from rlviz_widgets._ingest.readers.jsonl.sql import Spec, field_ref, record_spec, transform
from rlviz_widgets._ingest.readers.jsonl.triage import duplicate_key_reports, repair
from rlviz_widgets._ingest.readers.options import (
    TEXT_FIELDS,
    cache_name,
    default_fields,
    name_accepted,
    name_step,
    normalize_columns,
)
from rlviz_widgets._ingest.readers.tokens import spell_ids
from rlviz_widgets._problems import short as _short
from rlviz_widgets._sql import ident

_BRACE = ord("{")
BATCH_TEXT = 256 << 10  # bytes of lines per batch DuckDB reads of a chunk C read
GUESS_LINES = 64  # a chunk's keys are guessed from its first lines, for C to read it by (C then gives them all)
Parsed = tuple[pa.Table | None, list[list]]


class JsonlReader:
    """Records of a JSON-lines format (``format``, or the class's), with the options a run was opened with."""

    format: JsonlFormat  # set by each format's class, or given
    suffixes = (".jsonl",)
    whole_file = False
    scan_byte = ord(":")  # read_chunks finds these with the newlines: keys end at colons
    keys_in_c = True  # C finds a chunk's keys as it reads its lists (``_read_in_c``)

    def __init__(self, columns: dict[str, str] | None = None, tokenizer=None, format: JsonlFormat | None = None):
        if format is not None:
            self.format = format
        fmt = self.format
        self.columns = normalize_columns(columns)
        self.tokenizer = tokenizer
        self.file_step: int | None = None
        self.file_pattern, self.step_pattern, self.own_renames = fmt.file_pattern, fmt.step_pattern, fmt.own_renames
        self.name = cache_name(fmt.name, self.columns, tokenizer)  # the cache key: other options, other parts
        self._fields = {**default_fields(), **fmt.renames, **self.columns}
        self._naming: Naming | None = None  # once known (``naming``)

    def for_file(self, path: str | os.PathLike) -> JsonlReader:
        """This reader bound to one file (the step its name gives, if the format has one)."""
        bound = copy.copy(self)
        bound.file_step = self.name_step(Path(path).name)
        return bound

    def name_step(self, name: str) -> int | None:
        return name_step(self.step_pattern, name)

    def accepts(self, path: str | os.PathLike) -> bool:
        return name_accepted(self.file_pattern, path)

    # -- where the fields are ----------------------------------------------------------------
    def fields(self) -> dict[str, str]:
        """Common field -> the record key holding it (``columns=`` overrides)."""
        return self._fields

    def shown_names(self) -> dict[str, str]:
        """Common field -> the name messages give it: the file's own key, or for fields the format reads through an
        expression, the key it reads."""
        return {**self._fields, **{c: k for c, k in self.format.shown.items() if c not in self.columns}}

    def spec(self, keys: set[str]) -> Spec:
        """(json_transform schema, SQL per common field over ``r``, record keys used) for a chunk with ``keys``."""
        return record_spec(self.format, self._fields, set(self.columns), keys)

    def step_key(self) -> str | None:
        """The top-level key a record's step is read from as it is (lines can then be sorted by step from their bytes,
        ``readers.selective``), or None when the format derives it otherwise."""
        key = self._fields["step"]
        return key if self.spec(set())[1]["step"] == field_ref(key) else None

    def naming(self) -> Naming:
        """What the checks need to know of the fields. Worked out once per reader: every chunk asks, twice."""
        if self._naming is None:
            _, ex, _ = self.spec(set())
            f, fmt = self._fields, self.format
            texts = {c: f[c] for c in TEXT_FIELDS if ex.get(c) == field_ref(f[c])}
            self._naming = Naming(f, self.shown_names(), texts, fmt.text_steps,
                                  "token ids" if fmt.token_ids else "strings",
                                  fmt.tokens_required and "response" not in self.columns)
        return self._naming

    # -- parsing -----------------------------------------------------------------------------
    def prepare(self, chunk: Chunk, arrays: bool = True) -> None:
        """Work on a chunk's bytes that can run ahead of ``parse``, in the reading thread: its keys, the lines
        where a text field may not be a string, and those where a key may be written twice; with ``arrays``, its
        number arrays and token strings too (``native_arrays``: on a thread of their own)."""
        if arrays and self.keys_in_c and self._read_in_c(chunk):
            return
        scanned = scan(chunk.lines, chunk.found) if len(chunk.lines) else None
        chunk.keys = candidate_keys(chunk.lines, chunk.found, scanned)
        chunk.odd = self._odd_lines(chunk, scanned)
        chunk.repeats = chunk.numbers[repeated_keys(chunk.lines, chunk.found, scanned)]
        chunk.native = self.native_arrays(chunk) if arrays else None

    def _read_in_c(self, chunk: Chunk) -> bool:
        """Whether C reads the chunk whole (``native_plan`` of the keys of its first lines): its lists, and its keys,
        odd lines and keys written twice, which the byte scan would find (``settle`` takes them). A chunk C cannot
        read, or whose keys turn out to need another plan, gets them from the byte scan then."""
        keys = self._guessed_keys(chunk)
        plan = None if keys is None else self.native_plan(keys)
        if plan is None:
            return False
        return self._read_whole_in_c(chunk, lambda p, texts: read_arrays_later(p, plan.lists, plan.strings, plan.split,
                                                                                texts))

    def _guessed_keys(self, chunk: Chunk) -> set[str] | None:
        """The keys of a chunk's first lines, which C is asked to read it by (it then gives them all); None for a
        chunk not only of lines that open an object (left to DuckDB)."""
        if not len(chunk.lines) or (chunk.first_bytes != _BRACE).any():
            return None
        return candidate_keys(chunk.lines.slice(0, GUESS_LINES))

    def _read_whole_in_c(self, chunk: Chunk, read: Callable[[pa.LargeStringArray, list[str]], Future | None]) -> bool:
        """Whether ``read`` (a piece of the chunk's lines and the text keys -> a future of C's reading, or None)
        reads every piece: then its futures are ``chunk.native``, and its keys, odd lines and repeats for ``settle``
        to take."""
        texts = list(self.naming().texts.values())
        pieces = chunk.lines.chunks if isinstance(chunk.lines, pa.ChunkedArray) else [chunk.lines]
        futures = [read(p, texts) for p in pieces]
        if any(f is None for f in futures):
            return False
        chunk.keys = chunk.odd = chunk.repeats = None
        chunk.native = futures
        return True

    def settle(self, chunk: Chunk) -> None:
        """A chunk C read whole (``_read_in_c``): its keys and odd lines as C saw them (no line of it writes a key
        twice), its lists kept if the plan of those keys is the one C read by; or, where C could not read it, its
        keys and lines found by the byte scan (in this thread)."""
        if chunk.keys is not None or chunk.native is None:
            return
        parts = [_result(f) for f in chunk.native]
        chunk.native = None
        if any(p is None for p in parts):
            self.prepare(chunk, arrays=False)
            return
        chunk.keys = set().union(*(p[3].keys for p in parts))
        starts = np.cumsum([0, *(len(p[0]) for p in parts[:-1])])
        chunk.odd = chunk.numbers[np.concatenate([p[3].odd + at for p, at in zip(parts, starts)])]
        chunk.repeats = np.zeros(0, np.int64)
        if self.native_plan(chunk.keys) == parts[0][4]:
            chunk.native = parts

    def native_arrays(self, chunk: Chunk) -> list[Future] | None:
        """The chunk's lists being read by ``native.read_arrays`` (beside DuckDB's parse of the chunk before; a
        future per piece of its lines, of (lines, {column: list} set after the SQL, {key: list} the SQL reads)), or
        None: see ``native_plan``. Only chunks of object lines."""
        if chunk.keys is None or not len(chunk.lines) or (chunk.first_bytes != _BRACE).any():
            return None
        plan = self.native_plan(chunk.keys)
        if plan is None:
            return None
        pieces = chunk.lines.chunks if isinstance(chunk.lines, pa.ChunkedArray) else [chunk.lines]
        texts = list(self.naming().texts.values())
        futures = [read_arrays_later(p, plan.lists, plan.strings, plan.split, texts) for p in pieces]
        return None if any(f is None for f in futures) else futures

    def native_plan(self, keys: set[str]) -> NativePlan | None:
        """Which of a chunk's keys (``keys``) C reads: every list the transform's schema types as one of C's kinds
        (``native.KINDS``), the tokens' strings, and lists of keys the format uses but no column reads (written [],
        not kept). A list one column takes as it is (``r.key`` once in the SQL) is set after the SQL; the others
        are given to it (``transform``'s ``given``). None: nothing to read, or a key spelled otherwise in the chunk
        (json_transform matches keys whatever their case)."""
        schema, ex, used = self.spec(keys)
        lists, strings = {}, None
        for key in keys:
            kind = schema.get(key)
            if kind in KINDS:
                lists[key] = kind
            elif kind == "VARCHAR[]" and key == self._fields["tokens"]:
                strings = key
            elif kind is None and key in used:
                lists[key] = "DROP"
        read = {k for k, kind in lists.items() if kind != "DROP"} | ({strings} if strings else set())
        if not read:
            return None
        folded = {k.casefold() for k in (*lists, *read)}
        if any(k.casefold() in folded and k not in lists and k != strings for k in keys):
            return None
        refs = " ".join(v for v in ex.values() if v)
        direct = {c: k for k in read for c, v in ex.items()
                  if v == field_ref(k) and (c in ARRAYS or c == "tokens" or c.startswith("_"))
                  and _mentions(refs, k) == 1}
        return NativePlan(lists, strings, direct, tuple(sorted(read - set(direct.values()))),
                          deriver(ex, direct, read, self.format, self._fields, self.tokenizer))

    def _odd_lines(self, chunk: Chunk, scanned: tuple | None = None) -> np.ndarray:
        """The numbers of the lines where a text field may hold a value that is not a string."""
        return chunk.numbers[odd_values(chunk.lines, chunk.found, list(self.naming().texts.values()), scanned)]

    def parse(self, con: duckdb.DuckDBPyConnection, chunk: Chunk) -> Parsed:
        """One chunk of raw lines as one Arrow table in the common columns, and the problems found (by line)."""
        self.settle(chunk)
        return self._parse(con, chunk, [self.file_step])

    def parse_many(self, con: duckdb.DuckDBPyConnection, chunks: list[Chunk],
                   readers: list[JsonlReader]) -> list[Parsed]:
        """Small chunks (of several files: ``readers``, this reader bound to each chunk's file) parsed in one query,
        each chunk's (table, problems) as ``parse`` gives them (see ``batches``)."""
        if len(chunks) == 1:
            return [readers[0].parse(con, chunks[0])]
        for c, r in zip(chunks, readers):
            r.settle(c)
            if c.keys is None or c.odd is None or c.repeats is None:
                r.prepare(c, arrays=False)
        table, problems = self._parse(con, combine(chunks), [r.file_step for r in readers])
        # the per-sample reductions once for all (the writer adds them to a part that lacks them: ~2 ms each)
        return split(None if table is None else with_reductions(table), problems, len(chunks))

    def _parse(self, con: duckdb.DuckDBPyConnection, chunk: Chunk, steps: list[int | None]) -> Parsed:
        """``parse`` of a chunk whose lines may be of several chunks (``parse_many``): ``steps``, the step each
        one's file name gives."""
        problems: list[list] = []
        raw = pa.table({"line": chunk.numbers, "j": chunk.lines})
        odd = np.flatnonzero(chunk.first_bytes != _BRACE)
        if len(odd):  # blank, indented or not an object: sort those out first
            raw = repair(raw, odd, problems)
        # the lists read already (``native_arrays``): DuckDB reads the rest (a line it refuses: the chunk is
        # read as it is, below, its odd lines found and reported as always)
        table = self._native_transform(con, chunk, steps) if chunk.native is not None and not len(odd) else None
        keys = chunk.keys
        if table is None:
            table, raw, keys = self._read(con, chunk, raw, steps, problems)
            if table is None:
                return None, problems
        odd = chunk.odd if chunk.odd is not None else self._odd_lines(chunk)
        table = check(con, self._post(table), keys, problems, odd, self.naming(), apart=len(steps) > 1)
        repeats = chunk.repeats if chunk.repeats is not None else chunk.numbers[repeated_keys(chunk.lines,
                                                                                              chunk.found)]
        if table is not None and len(repeats):
            problems += duplicate_key_reports(con, raw, repeats[np.isin(repeats, table["line"].to_numpy())])
        con.unregister("raw")
        return table, problems

    def _read(self, con: duckdb.DuckDBPyConnection, chunk: Chunk, raw: pa.Table, steps: list[int | None],
              problems: list[list]) -> tuple[pa.Table | None, pa.Table, set[str]]:
        """(the transform, the lines kept registered as ``raw``, their keys) of lines DuckDB reads itself: the lines
        it refuses found, reported and left out. No table: nothing left (``raw`` then unregistered)."""
        for attempt in range(3):
            if raw.num_rows == 0:
                return None, raw, chunk.keys
            # small batches: DuckDB parses them on every core
            register(con, raw, steps, max_chunksize=128)
            # the keys of the chunk's raw lines cover those of repaired ones (only trimmed or dropped)
            keys = chunk.keys if chunk.keys is not None else candidate_keys(raw["j"])
            try:
                return self._transform(con, keys)[0], raw, keys
            except (duckdb.Error, UnicodeDecodeError):
                # some lines are not JSON (or not UTF-8): locate them; keep what can be kept
                bad = np.array([n for (n,) in con.execute("SELECT line FROM raw WHERE NOT json_valid(j)").fetchall()])
                if not len(bad):  # valid JSON that DuckDB still refuses: find the records it refuses
                    table, raw = self._transform_apart(con, raw, keys, problems, steps)
                    if table is None:
                        con.unregister("raw")
                    return table, raw, keys
                idx = np.searchsorted(raw["line"].to_numpy(), bad)
                raw = repair(raw, idx, problems, strict=attempt > 0)
        raise RuntimeError("could not isolate the malformed lines")  # pragma: no cover

    def _native_transform(self, con: duckdb.DuckDBPyConnection, chunk: Chunk,
                          steps: list[int | None]) -> pa.Table | None:
        """``_transform`` of the chunk's lines with their lists read already (``chunk.native``): those the SQL reads
        given to it, the others put back in after; None when DuckDB refuses a line (the chunk is then read as it
        is, its odd lines found and reported as always) or the pieces of a batch were read otherwise. Leaves the
        lines it read registered as ``raw`` for the checks after it."""
        parts = [_result(f) if isinstance(f, Future) else f for f in chunk.native]
        chunk.native = None  # not held past this parse
        if any(p is None for p in parts):
            return None
        if len(parts[0]) > 2:  # lists read by a plan: the plan of the chunk's keys (of several chunks', in a batch)
            plan = self.native_plan(chunk.keys)
            if any(p[4] != plan for p in parts):
                return None
        elif any(p[1].keys() != parts[0][1].keys() for p in parts):
            return None
        given_keys = list(parts[0][2]) if len(parts[0]) > 2 else []
        text = _joined([p[0] for p in parts])
        arrays = {a: _joined([p[1][a] for p in parts]) for a in parts[0][1]}
        raw = pa.table({"line": chunk.numbers, "j": text,
                        **{f"_given{i}": _joined([p[2][k] for p in parts]) for i, k in enumerate(given_keys)}})
        # batches of ~BATCH_TEXT bytes of what is left for DuckDB (its cores share them): short lines (prime-rl's,
        # lists taken out) in batches of 128 spent a quarter of the query on the batches
        rows = int(np.clip(BATCH_TEXT * len(text) // max(text.nbytes, 1), 128, 2048))
        register(con, raw, steps, max_chunksize=rows)
        try:
            table, _ = self._transform(con, chunk.keys, {k: f"_given{i}" for i, k in enumerate(given_keys)})
        except (duckdb.Error, UnicodeDecodeError):
            return None
        lines = table["line"].to_numpy()
        rows = None if len(lines) == len(chunk.numbers) else np.searchsorted(chunk.numbers, lines)
        for a, values in arrays.items():
            col = values if rows is None else values.take(rows)
            i = table.schema.get_field_index(a)
            # (a column the SQL does not give, as the chat messages read in C: the format's decode takes it)
            table = table.set_column(i, a, col.cast(table.schema.field(i).type)) if i >= 0 else \
                table.append_column(a, col)
        return table

    def _transform_apart(self, con: duckdb.DuckDBPyConnection, raw: pa.Table, keys: set[str],
                         problems: list[list], steps: list[int | None]) -> tuple[pa.Table | None, pa.Table]:
        """(the transform, the lines kept) of lines that are valid JSON but that DuckDB refuses as a whole:
        halved until the records it refuses are found one by one; each is reported and left out, the rest
        kept. Registers the kept lines as ``raw`` (the checks after the transform read them)."""
        tables, refused, todo = [], [], [raw]
        while todo:
            part = todo.pop()
            register(con, part, steps)
            try:
                tables.append(self._transform(con, keys)[0])
            except (duckdb.Error, UnicodeDecodeError) as e:
                if part.num_rows > 1:
                    half = part.num_rows // 2
                    todo += [part.slice(half), part.slice(0, half)]  # first half first: tables stay in line order
                else:
                    n = int(part["line"][0].as_py())
                    refused.append(n)
                    problems.append([n, "unreadable", f"valid JSON that could not be read: {_short(str(e), 160)}"])
        keep = raw.filter(pc.invert(pc.is_in(raw["line"], pa.array(refused, pa.int64()))))
        register(con, keep, steps)
        return (pa.concat_tables(tables) if tables else None), keep

    def _transform(self, con: duckdb.DuckDBPyConnection, keys: set[str],
                   given: dict[str, str] | None = None) -> tuple[pa.Table, set[str]]:
        return transform(con, self.spec(keys), keys, self.format.unwrap, self.step_pattern is not None, given)

    def _post(self, t: pa.Table) -> pa.Table:
        """Python-side fixes after the SQL: the format's own, then token ids spelled as strings."""
        if self.format.decode is not None:
            t = self.format.decode(t, self.tokenizer)
        if pa.types.is_integer(t.schema.field("tokens").type.value_type):
            t = t.set_column(t.schema.get_field_index("tokens"), "tokens", spell_ids(t["tokens"], self.tokenizer))
        return t


def _mentions(sql: str, key: str) -> int:
    """How often ``sql`` reads the record's ``key`` (``r.key``, quoted or not)."""
    return len(re.findall(rf"\br\.(?:{re.escape(ident(key))}|{re.escape(key)}(?![\w\"]))", sql))


def _joined(arrays: list[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


@dataclass(frozen=True)
class NativePlan:
    """What C reads of a chunk (``JsonlReader.native_plan``): ``lists`` (record key -> ``native.KINDS`` name),
    ``strings`` (the key of the tokens' strings), ``direct`` (column -> record key: set after the SQL), ``given``
    (record keys the SQL reads from the lists C read)."""

    lists: dict[str, str]
    strings: str | None
    direct: dict[str, str]
    given: tuple[str, ...]
    derive: Derive | None = field(default=None, compare=False)  # more columns of the lists (``derive.deriver``)

    def split(self, got: tuple[pa.Array, dict[str, pa.Array], Found]) -> tuple[pa.Array, dict, dict, Found,
                                                                                  NativePlan]:
        """C's reading (lines, {key: list}, what else it saw) as ``_native_transform`` takes it: (lines, {column:
        list}, {key: list}, what else it saw, this plan). Runs on C's thread: so do the derived columns."""
        lines, arrays, found = got
        columns = {c: arrays[k] for c, k in self.direct.items()}
        if self.derive is not None:
            columns |= self.derive(arrays)
        return lines, columns, {k: arrays[k] for k in self.given}, found, self


def _result(future: Future):
    """A future's result; None if it failed (the chunk is then read as it is: the C reader is only a shortcut)."""
    try:
        return future.result()
    except Exception:  # noqa: BLE001 - MemoryError, say: DuckDB reads the chunk instead
        return None
