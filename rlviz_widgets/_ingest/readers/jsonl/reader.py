"""``JsonlReader``: one chunk of raw JSON lines -> one Arrow table in the common columns (scalar fields, per-sample
token reductions, the token arrays as float32 lists) plus the problems it found, each located by line.

The JSON is parsed by DuckDB (C++, both cores); the number arrays by the C reader beside it, where it can; Python
only triages odd lines and runs vectorized numpy over the arrays. What sets a format apart is its ``JsonlFormat``.
"""

from __future__ import annotations

import copy
import os
from concurrent.futures import Future
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlviz_widgets._ingest.lines import Chunk
from rlviz_widgets._ingest.metrics import ARRAYS, with_reductions
from rlviz_widgets._ingest.native import read_arrays_later
from rlviz_widgets._ingest.readers.jsonl.batches import combine, register, split
from rlviz_widgets._ingest.readers.jsonl.checks import Naming, check
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

_BRACE = ord("{")
Parsed = tuple[pa.Table | None, list[list]]


class JsonlReader:
    """Records of a JSON-lines format (``format``, or the class's), with the options a run was opened with."""

    format: JsonlFormat  # set by each format's class, or given
    suffixes = (".jsonl",)
    whole_file = False
    scan_byte = ord(":")  # read_chunks finds these with the newlines: keys end at colons

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
        scanned = scan(chunk.lines, chunk.found) if len(chunk.lines) else None
        chunk.keys = candidate_keys(chunk.lines, chunk.found, scanned)
        chunk.odd = self._odd_lines(chunk, scanned)
        chunk.repeats = chunk.numbers[repeated_keys(chunk.lines, chunk.found, scanned)]
        chunk.native = self.native_arrays(chunk) if arrays else None

    def native_arrays(self, chunk: Chunk) -> list[Future] | None:
        """The chunk's number arrays and token strings being read by ``native.read_arrays`` (beside DuckDB's parse
        of the chunk before; a future per piece of its lines), or None. Only the lists the transform would read as
        FLOAT[] (or VARCHAR[], the tokens) from a key of their own, in chunks of object lines without another
        spelling of those keys (json_transform matches keys whatever their case)."""
        if chunk.keys is None or not len(chunk.lines) or (chunk.first_bytes != _BRACE).any():
            return None
        schema, ex, _ = self.spec(chunk.keys)
        refs = " ".join(v for v in ex.values() if v)
        keys = self._fields
        fields = {}
        for a in (*ARRAYS, "tokens"):
            key = keys[a]
            ref = field_ref(key)
            if schema.get(key) == ("VARCHAR[]" if a == "tokens" else "FLOAT[]") and ex.get(a) == ref \
                    and refs.count(ref) == 1:
                fields[a] = key
        folded = {k.casefold() for k in fields.values()}
        if not fields or any(k.casefold() in folded and k not in fields.values() for k in chunk.keys):
            return None
        strings = ("tokens", fields.pop("tokens")) if "tokens" in fields else None
        pieces = chunk.lines.chunks if isinstance(chunk.lines, pa.ChunkedArray) else [chunk.lines]
        futures = [read_arrays_later(p, fields, strings) for p in pieces]
        return None if any(f is None for f in futures) else futures

    def _odd_lines(self, chunk: Chunk, scanned: tuple | None = None) -> np.ndarray:
        """The numbers of the lines where a text field may hold a value that is not a string."""
        return chunk.numbers[odd_values(chunk.lines, chunk.found, list(self.naming().texts.values()), scanned)]

    def parse(self, con: duckdb.DuckDBPyConnection, chunk: Chunk) -> Parsed:
        """One chunk of raw lines as one Arrow table in the common columns, and the problems found (by line)."""
        return self._parse(con, chunk, [self.file_step])

    def parse_many(self, con: duckdb.DuckDBPyConnection, chunks: list[Chunk],
                   readers: list[JsonlReader]) -> list[Parsed]:
        """Small chunks (of several files: ``readers``, this reader bound to each chunk's file) parsed in one query,
        each chunk's (table, problems) as ``parse`` gives them (see ``batches``)."""
        if len(chunks) == 1:
            return [readers[0].parse(con, chunks[0])]
        for c, r in zip(chunks, readers):
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
        """``_transform`` of the chunk's lines with their number arrays and token strings read already
        (``chunk.native``), those lists put back in; None when DuckDB refuses a line (the chunk is then read as it
        is, its odd lines found and reported as always). Leaves the lines it read registered as ``raw`` for the
        checks after it."""
        parts = [_result(f) for f in chunk.native]
        chunk.native = None  # not held past this parse
        if any(p is None for p in parts):
            return None
        text = parts[0][0] if len(parts) == 1 else pa.concat_arrays([p[0] for p in parts])
        arrays = {a: pa.concat_arrays([p[1][a] for p in parts]) if len(parts) > 1 else parts[0][1][a]
                  for a in parts[0][1]}
        register(con, pa.table({"line": chunk.numbers, "j": text}), steps, max_chunksize=128)
        try:
            table, _ = self._transform(con, chunk.keys)
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

    def _transform(self, con: duckdb.DuckDBPyConnection, keys: set[str]) -> tuple[pa.Table, set[str]]:
        return transform(con, self.spec(keys), keys, self.format.unwrap, self.step_pattern is not None)

    def _post(self, t: pa.Table) -> pa.Table:
        """Python-side fixes after the SQL: the format's own, then token ids spelled as strings."""
        if self.format.decode is not None:
            t = self.format.decode(t, self.tokenizer)
        if pa.types.is_integer(t.schema.field("tokens").type.value_type):
            t = t.set_column(t.schema.get_field_index("tokens"), "tokens", spell_ids(t["tokens"], self.tokenizer))
        return t


def _result(future: Future):
    """A future's result; None if it failed (the chunk is then read as it is: the C reader is only a shortcut)."""
    try:
        return future.result()
    except Exception:  # noqa: BLE001 - MemoryError, say: DuckDB reads the chunk instead
        return None
