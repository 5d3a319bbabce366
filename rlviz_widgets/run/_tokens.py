"""A run's token files as its cursors read them: registered under a name that changes with the cache parts."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import duckdb

from rlviz_widgets._store import token_store


class TokenFiles:
    """Every part's token files as one dataset (made once per change of the parts: nothing is opened), or, once
    ``map_all`` has made it, one mapped table (scanned on every core); or the rows of a few samples.

    ``parts`` gives (file_no, part) of every cache part, ``steps`` each part's steps in that order, ``fields`` the
    token fields the run has (none: nothing is registered, its ``tokens`` SQL reads no files)."""

    def __init__(self, parts: Callable[[], list[tuple[int, str]]], steps: Callable[[], Iterable],
                 fields: Callable[[], list[str]], lock: threading.RLock):
        self._parts, self._steps, self._fields = parts, steps, fields
        self.lock = lock  # a source and its name belong to one version of the parts; a refresh holds it meanwhile
        self.dataset = None
        self.table = None
        self.version = 0  # bumped when the parts change: part of the name cursors know them by

    def renew(self) -> None:
        """The parts changed: the token files are found again, under a new name."""
        self.dataset = self.table = None
        self.version += 1

    def relation(self, selection: bool = False) -> str:
        """The name a cursor knows the token files by: all of them (as of this version of the parts), or a
        selection registered just before its query."""
        return f"_tokens_{id(self):x}_" + ("sel" if selection else str(self.version))

    def register(self, cur: duckdb.DuckDBPyConnection, parts: list[tuple[int, str]] | None = None,
                 lines: dict[int, list[int]] | None = None) -> None:
        """Give ``cur`` the token files: every part's, or only the rows of ``lines`` in ``parts``."""
        if not self._fields():
            return
        if lines is not None:
            cur.register(self.relation(True), token_store.rows(parts or [], lines))
            return
        cur.register(*self.source())

    def source(self) -> tuple[str, object]:
        """(the name, the source) of every part's token files, as of this version of the parts."""
        with self.lock:
            if self.table is None and self.dataset is None:
                self.dataset = token_store.dataset([(n, p, s) for (n, p), s in zip(self._parts(), self._steps())])
            return self.relation(), self.table if self.table is not None else self.dataset

    def map_all(self) -> None:
        """Map every token file once (per change of the parts), for queries over all tokens."""
        with self.lock:  # a refresh meanwhile waits, then drops this table: never a stale one kept
            if self.table is None and self._fields():
                self.table = token_store.table(self._parts())
