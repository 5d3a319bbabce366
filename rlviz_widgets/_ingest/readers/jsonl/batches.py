"""Many small files' chunks parsed in one query: a query costs ~8 ms however small, and a log of a file per step
opened 8x slower than the same records in one file. Chunk k's line n is ``k * BATCH_STRIDE + n`` meanwhile; the
result is split back into each chunk's table and problems, as a parse of that chunk alone gives them."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pyarrow as pa

from rlviz_widgets._ingest.custom_columns import FIRST_LINES, LISTED_PREFIX, STORED_PREFIX, listed_column, stored_key
from rlviz_widgets._ingest.lines import Chunk
from rlviz_widgets._ingest.readers.jsonl.arrow import mask
from rlviz_widgets._ingest.readers.jsonl.checks import NUMBERS, OBJECTS, TEXTS, non_scalars, scalar_values

BATCH_STRIDE = 1 << 40  # line numbers of chunks parsed together: chunk k's line n is k * this + n


def combine(chunks: list[Chunk]) -> Chunk:
    """Prepared chunks as one, their line numbers apart (``BATCH_STRIDE``)."""
    at = [k * BATCH_STRIDE for k in range(len(chunks))]
    return Chunk(pa.concat_arrays([c.lines for c in chunks]),
                 np.concatenate([c.numbers + a for c, a in zip(chunks, at)]),
                 np.concatenate([c.first_bytes for c in chunks]), 0, 0,
                 keys=set().union(*(c.keys for c in chunks)),
                 odd=np.concatenate([np.asarray(c.odd, np.int64) + a for c, a in zip(chunks, at)]),
                 repeats=np.concatenate([np.asarray(c.repeats, np.int64) + a for c, a in zip(chunks, at)]),
                 native=None if any(c.native is None for c in chunks) else
                 [f for c in chunks for f in c.native])


def register(con: duckdb.DuckDBPyConnection, raw: pa.Table, steps: list[int | None],
              max_chunksize: int | None = None) -> None:
    """``raw`` (line, j) as the view ``raw``, with ``fs``: the step the name of each line's file gives (``steps``:
    one per chunk parsed together, see ``combine``)."""
    n = raw.num_rows
    if all(s is None for s in steps):
        fs = pa.nulls(n, pa.int64())
    elif len(steps) == 1:
        fs = pa.array(np.full(n, steps[0], np.int64))
    else:
        k = raw["line"].to_numpy() // BATCH_STRIDE
        known = np.array([s is not None for s in steps])
        fs = pa.array(np.array([s or 0 for s in steps], np.int64)[k], mask=~known[k])
    raw = raw.append_column("fs", fs)
    con.register("raw", pa.Table.from_batches(raw.to_batches(max_chunksize=max_chunksize)) if max_chunksize else raw)



def split(table: pa.Table | None, problems: list[list], n: int) -> list[tuple[pa.Table | None, list[list]]]:
    """A table and problems of ``n`` chunks parsed together (``combine``) as each chunk's, with its own line
    numbers; a column a chunk has no value in is left out of its table, as ``parse`` leaves it out."""
    found: list[list[list]] = [[] for _ in range(n)]
    for p in problems:
        k, line = divmod(p[0], BATCH_STRIDE)
        found[k].append([line, *p[1:]])
    if table is None:
        return [(None, f) for f in found]
    line = table["line"].to_numpy()
    k = line // BATCH_STRIDE
    out = []
    for j in range(n):
        mine = k == j
        if not mine.any():
            out.append((None, found[j]))
            continue
        t = table.filter(pa.array(mine))
        own = line[mine] - j * BATCH_STRIDE
        t = t.set_column(t.schema.get_field_index("line"), "line", pa.array(own))
        out.append((_own_columns(t, own, found[j]), found[j]))
    return out


def _own_columns(t: pa.Table, own: np.ndarray, found: list[list]) -> pa.Table:
    """One chunk's rows of a batch, each custom field as this chunk alone holds it: numbers, texts, or both as text
    (as the checks settle it); its reports added to ``found``."""
    names, columns = [], []
    for c in t.column_names:
        if c.endswith(NUMBERS):
            name = c[:-len(NUMBERS)]
            nums, strs = t[c], t[name + TEXTS]
            objects = t[name + OBJECTS]
            if nums.null_count < t.num_rows or strs.null_count < t.num_rows:
                names.append(name)
                columns.append(scalar_values(nums, strs))
                found += non_scalars(stored_key(name), objects, own)
            elif objects.null_count < t.num_rows:  # lists or objects only, in this chunk: the run tells
                names.append(listed_column(stored_key(name)))
                columns.append(objects)
        elif c.startswith(LISTED_PREFIX):  # lists or objects only, in all the chunks: kept where this has any
            if t[c].null_count < t.num_rows:
                names.append(c)
                columns.append(t[c])
        elif not c.endswith((TEXTS, OBJECTS)):
            names.append(c)
            columns.append(t[c])
    t = pa.Table.from_arrays(columns, names=names)
    t = t.drop_columns([c for c in ("group_id", "advantage") if c in names and t[c].null_count == t.num_rows])
    first = {stored_key(c): int(own[np.flatnonzero(mask(t[c].is_valid()))[0]])
             for c in t.column_names if c.startswith(STORED_PREFIX)}
    return t.replace_schema_metadata({FIRST_LINES: json.dumps(first)})
