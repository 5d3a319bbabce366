"""What the run and the cache ask of a reader: ``Reader`` for every format, then ``LineReader`` (JSON lines, read
chunk by chunk as files grow) or ``FileReader`` (a file read whole, rebuilt when it changes: TRL's Parquet)."""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

import duckdb
import pyarrow as pa

from rlviz_widgets._ingest.lines import Chunk

Parsed = tuple[pa.Table | None, list[list]]  # a table in the common columns, and the problems [line, kind, message]


@runtime_checkable
class Reader(Protocol):
    """A log format, with the options it was opened with (``READERS[format](columns=..., tokenizer=...)``)."""

    name: str  # the cache key: the format's name and the options that change what is read
    suffixes: tuple[str, ...]  # the file suffixes a folder is searched for
    file_pattern: str | None  # names a folder's files must match (None: every file with a suffix)
    step_pattern: str | None  # the step in a file's name, for records without one
    columns: dict[str, str]  # ``columns=``: common field -> the file's field
    own_renames: frozenset[str]  # fields written beside a common column of their name: no news when renamed
    whole_file: bool  # read whole (``FileReader``), not line by line (``LineReader``)
    file_step: int | None  # the step the bound file's name gives (``for_file``)

    def fields(self) -> dict[str, str]:
        """Common field -> the record key holding it."""
        ...

    def accepts(self, path: str | os.PathLike) -> bool:
        """Whether a file found in a folder belongs to this format."""
        ...

    def name_step(self, name: str) -> int | None:
        """The step a file's name gives, if any."""
        ...

    def step_key(self) -> str | None:
        """The top-level key a record's step is read from as it is, or None (no line can be skipped unparsed)."""
        ...

    def for_file(self, path: str | os.PathLike) -> Reader:
        """This reader bound to one file."""
        ...


class LineReader(Reader, Protocol):
    """A reader of JSON lines, chunk by chunk."""

    scan_byte: int  # a byte the line reader finds with the newlines, for ``prepare``

    def prepare(self, chunk: Chunk) -> None:
        """Work on a chunk's bytes that can run ahead of ``parse``, in the reading thread."""
        ...

    def parse(self, con: duckdb.DuckDBPyConnection, chunk: Chunk) -> Parsed:
        """One chunk of lines in the common columns, and its problems by line."""
        ...

    def parse_many(self, con: duckdb.DuckDBPyConnection, chunks: list[Chunk], readers: list) -> list[Parsed]:
        """Small chunks of several files (``readers``: this reader bound to each) parsed at once."""
        ...


class FileReader(Reader, Protocol):
    """A reader of files read whole."""

    rows_read: int  # the rows of the last file read (its ``lines`` in the cache state)

    def parse_file(self, con: duckdb.DuckDBPyConnection, path: str | os.PathLike) -> Parsed:
        """The whole file in the common columns (problems of the file as a whole are on line 0)."""
        ...
