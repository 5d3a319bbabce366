"""A run's DuckDB database and the cursors it hands out, each given the run's token files."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future

import duckdb

from rlviz_widgets._store import cache as cachemod


def connect() -> duckdb.DuckDBPyConnection:
    db = duckdb.connect()  # private, in memory: views and the numeric table live here
    # Parquet footers parsed once, not on every page request (cache parts never change in place)
    db.execute("SET GLOBAL parquet_metadata_cache = true")
    cachemod.spill_to_temp(db)
    # no setting changes after this one: run.sql's CALL and PRAGMA could otherwise turn on DuckDB's logging or
    # profiling to a file (into the log folder), or change the run's threads or memory under it
    db.execute("SET lock_configuration = true")
    return db


def connect_in_background(make: Callable[[], duckdb.DuckDBPyConnection] = connect) -> Future:
    """A new database (``make``'s), made in a thread: building DuckDB's catalog takes a few tens of ms, which the
    first open spends reading its first chunks instead (and run.sql the time between two queries)."""
    future: Future = Future()

    def work() -> None:
        try:
            future.set_result(make())
        except BaseException as e:  # raised where the connection is first needed
            future.set_exception(e)

    threading.Thread(target=work, name="rlviz-connect", daemon=True).start()
    return future


def settle(future: Future) -> None:
    """Wait for a connection being made in the background, when what needed it failed: a thread still inside
    DuckDB when the interpreter exits aborts the process (exit code 134, after the caller's traceback)."""
    try:
        future.result()
    except BaseException:  # noqa: BLE001 - the caller's error is the one to raise
        pass


class Cursors:
    """The database (made in the background) and its cursors. Each cursor is given the token files through
    ``register``; ``before`` runs first (a RunSet follows its runs there). ``lock`` is held while a cursor is
    made and registered: whoever renames the token files holds it too, so no cursor is given half of a change."""

    def __init__(self, register: Callable[[duckdb.DuckDBPyConnection], None], lock: threading.RLock,
                 before: Callable[[], object] | None = None):
        self.future = connect_in_background()
        self.lock = lock
        self._register = register
        self._before = before
        self._handed: weakref.WeakSet = weakref.WeakSet()  # cursors handed out, given the new files on a change

    @property
    def db(self) -> duckdb.DuckDBPyConnection:
        """The database (waits for it the first time)."""
        return self.future.result()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for the run's own queries: given the token files, but never re-registered by a refresh
        (it may be busy in another thread then: DuckDB would fail that thread's query)."""
        if self._before is not None:
            self._before()
        with self.lock:
            cur = self.db.cursor()
            self._register(cur)  # the ``tokens`` view reads the token files through this registration
        return cur

    def hand_out(self) -> duckdb.DuckDBPyConnection:
        """A cursor for the user (``Run.con``): kept in the set that a refresh gives the new token files."""
        with self.lock:  # in the set before a refresh can rename the token files, or after it
            cur = self.cursor()
            self._handed.add(cur)
        return cur

    def register_again(self) -> None:
        """Give every cursor handed out the token files as they are now (the caller holds ``lock``)."""
        for cur in list(self._handed):  # a cursor kept by the caller reads the new token files too
            try:
                self._register(cur)
            except duckdb.Error:  # closed, or busy with a query: its next one naming tokens fails (old name)
                pass

    def execute(self, query: str, params: list | None = None) -> duckdb.DuckDBPyConnection:
        """``query`` on a cursor of its own, ready to fetch. Again on a new cursor if a refresh renamed the
        token files between the cursor's registration and the query (a few times: a run refreshed back to
        back in another thread may do it again)."""
        for attempt in range(4):
            cur = self.cursor()
            try:
                return cur.execute(query, params or [])
            except duckdb.CatalogException as e:
                if attempt == 3 or "_tokens_" not in str(e):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def settle(self) -> None:
        """``settle`` the database being made (the open failed)."""
        settle(self.future)

    def close(self) -> None:
        self.db.close()
