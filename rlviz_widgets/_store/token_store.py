"""Token lists of a cache part, kept next to its Parquet file as an Arrow IPC file.

Arrow's own file format is written as the buffers lie in memory: no encoding, no repetition
levels, no pages. The token lists are most of a log, so this is most of the writing saved
(profiles of a cold open: Parquet's nested encoding of these lists cost ~10% of its CPU).
Reads map the file: taking a few samples touches only their pages. For the ``tokens`` view, every
part's file is one pyarrow dataset (nothing opened until scanned; a file whose step range misses a
filter is skipped) or, for queries over all tokens, one mapped table; DuckDB reads either where it is
registered (``DuckDBPyConnection.register``, per cursor).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs
import pyarrow.ipc as ipc

from rlviz_widgets._ingest.readers.mismatch_fields import COLUMNS as MISMATCH_COLUMNS
from rlviz_widgets._ingest.readers.sequence import SEQUENCE_COLUMNS

TOKEN_COLUMNS = ("tokens", "logprobs", "ref_logprobs", "values", "token_rewards")
# every file has every column (all-null where a part has no such array): one schema to scan them by. The sequence
# columns (``trained``, ``turn``, ``roles``) are null in a log of response tokens only; the mismatch and entropy
# fields (``readers.mismatch_fields``) where a log has none
SCHEMA = pa.schema([("line", pa.int64()), ("step", pa.int64()), ("tokens", pa.list_(pa.string())),
                    *((c, pa.list_(pa.float32())) for c in TOKEN_COLUMNS[1:]), *SEQUENCE_COLUMNS.items(),
                    *MISMATCH_COLUMNS.items()])
STORED = (*TOKEN_COLUMNS, *SEQUENCE_COLUMNS, *MISMATCH_COLUMNS)  # what a part keeps here, not in its Parquet file
SCAN_SCHEMA = SCHEMA.append(pa.field("file_no", pa.int64()))  # file_no: from each file's partition expression


def path_for(part: str) -> str:
    """The token file of the cache part whose Parquet file is ``part``."""
    return part[: -len(".parquet")] + ".arrow" if part.endswith(".parquet") else part + ".arrow"


def write(table: pa.Table, path: str | os.PathLike) -> None:
    """The line, step and token lists of ``table`` (a parsed part), atomically (a reader never sees half)."""
    cols = []
    for f in SCHEMA:
        if f.name in table.column_names:
            col = table[f.name]
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
    out = pa.Table.from_arrays(cols, schema=SCHEMA)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with ipc.new_file(tmp, SCHEMA) as writer:
        writer.write_table(out)
    os.replace(tmp, path)


def dataset(parts: list[tuple[int, str, list[int]]]) -> ds.Dataset:
    """Every part's tokens as one dataset with a ``file_no`` column (``parts``: (file_no, Parquet path,
    [lowest, highest] step)). The step range of each file lets a scan filtered by step skip it whole."""
    return ds.FileSystemDataset.from_paths(
        [path_for(p) for _, p, _ in parts], schema=SCAN_SCHEMA, format=ds.IpcFileFormat(),
        filesystem=pyarrow.fs.LocalFileSystem(),
        partitions=[(pc.field("file_no") == n) & (pc.field("step") >= lo) & (pc.field("step") <= hi)
                    for n, _, (lo, hi) in parts])


def read(part: str) -> pa.Table:
    """A part's token file, mapped: its buffers are the file's pages (they stay valid once the file is closed)."""
    with pa.memory_map(path_for(part)) as source:
        return ipc.open_file(source).read_all()


def _with_file_no(table: pa.Table, n: int) -> pa.Table:
    return table.append_column("file_no", pa.array(np.full(table.num_rows, n, np.int64)))


def table(parts: list[tuple[int, str]]) -> pa.Table:
    """Every part's tokens as one mapped table with ``file_no``, for a scan over all of them: DuckDB reads a
    table's batches on every core (a dataset it reads as one stream: ~3x slower over every token)."""
    tables = [_with_file_no(read(part), n) for n, part in parts]
    return pa.concat_tables(tables) if tables else SCAN_SCHEMA.empty_table()


def rows(parts: list[tuple[int, str]], lines: dict[int, list[int]]) -> pa.Table:
    """The token rows of the given lines (``lines``: file_no -> line numbers), with ``file_no``.

    Each file is mapped, not read: only the pages of the line column and of the rows taken are touched.
    """
    tables = []
    for n, part in parts:
        wanted = lines.get(n)
        if not wanted:
            continue
        t = read(part)
        t = t.filter(pc.is_in(t["line"], pa.array(sorted(set(wanted)), pa.int64())))
        if t.num_rows:
            tables.append(_with_file_no(t, n))
    return pa.concat_tables(tables) if tables else SCAN_SCHEMA.empty_table()
