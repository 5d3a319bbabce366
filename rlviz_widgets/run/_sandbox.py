"""run.sql's sandbox: user SQL runs on a DuckDB instance of its own, made for the one query, that holds the run's
samples and tokens as registered Arrow data and can touch no file: DuckDB's own ``enable_external_access = false``
and ``lock_configuration = true`` enforce it, not a reading of the SQL.

What it cannot do: write or read files (COPY, EXPORT, read_text, glob, read_parquet, import_database, http URLs),
attach a database file, install or load an extension, change a setting, or reach the run's own database (its
internal tables are not in the sandbox). What the user makes there (a view, a table, a memory database) is gone
when the query returns.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from concurrent.futures import Future

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from rlviz_widgets._store import cache as cachemod
from rlviz_widgets.run._db import connect_in_background
from rlviz_widgets.run._views import SAMPLES_VIEW, tokens_view

REFUSED = ("run.sql runs in a sandbox: it reads the run's samples and tokens and cannot write files, read other "
           "files, attach databases, load extensions or change settings")
LOCKDOWN = (  # in this order: the last one forbids every later SET
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",  # an http:// URL would otherwise fetch httpfs
    "SET autoload_known_extensions = false",
    "SET python_enable_replacements = false",  # no caller's variable (a DataFrame named in the SQL) is read
    "SET lock_configuration = true",
)


# DuckDB before 2.0 lets enable_logging by the locked configuration, and a database whose file logging then failed
# aborts the process when closed: there the call is refused by its name (2.0's lock refuses it itself)
_LOGGING_PASSES_THE_LOCK = tuple(int(x) for x in duckdb.__version__.split(".")[:2]) < (2, 0)
_LOGGING = re.compile(r"enable_logging", re.IGNORECASE)


class SandboxError(PermissionError, ValueError):
    """What run.sql's sandbox refused (a PermissionError, and a ValueError as run.sql's refusals always were)."""


def one_statement(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """A TypeError unless ``query`` is text, a ValueError unless it holds one statement: of several, only the last
    one's result came back."""
    if not isinstance(query, str):
        raise TypeError(f"run.sql takes SQL as text, such as \"SELECT * FROM samples\", not {query!r}")
    statements = con.extract_statements(query)
    if not statements:
        raise ValueError(f"no SQL statement in {query!r}")
    # DuckDB before 2.0 gives a PIVOT as several statements without text of their own: one the user wrote
    given = [st for st in statements if st.query.strip()] or statements[:1]
    if len(given) > 1:
        raise ValueError(f"run.sql runs one statement at a time; {len(given)} were given (only the last one's "
                         "result would come back)")


def _refusal(e: duckdb.Error) -> SandboxError | None:
    """The sandbox's refusal ``e`` is, in our words (None: an error of the query's own)."""
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    if isinstance(e, duckdb.PermissionException):
        return SandboxError(f"{REFUSED} ({first})")
    if isinstance(e, duckdb.InvalidInputException) and "configuration" in first:
        return SandboxError(f"{REFUSED} ({first})")
    internal = re.search(r"with name (_\w+) does not exist", first)
    if isinstance(e, duckdb.CatalogException) and internal:
        return SandboxError(f"{REFUSED}; {internal.group(1)} is none of the run's views ({first})")
    return None


class Sandbox:
    """Makes run.sql's sandboxes for one run (or set). The Arrow datasets of its cache parts are kept by their paths
    (a part never changes in place): a query finds them made."""

    def __init__(self):
        self._datasets: dict[tuple[str, ...], list] = {}
        self._lock = threading.Lock()  # (run.sql from two threads: each takes a database of its own)
        self._next: Future | None = None  # the next query's database, made meanwhile (a connect takes ~30 ms)

    def query(self, rel, query: str, params: list | None = None) -> pd.DataFrame:
        """``query`` (with ``params``) over ``rel``'s samples and tokens (a ``Relations``), in a new sandbox."""
        with self._lock:
            made, self._next = self._next, None
        con = made.result() if made is not None else duckdb.connect()  # in memory: none of the run's tables
        with self._lock:
            self._next = self._next or connect_in_background(duckdb.connect)
        try:
            if _LOGGING_PASSES_THE_LOCK and isinstance(query, str) and _LOGGING.search(query):
                raise SandboxError(f"{REFUSED} (enable_logging)")
            self._fill(con, rel)
            try:
                # parsed once locked: DuckDB 1.5 reads import_database's files while parsing the pragma
                one_statement(con, query)
                out = con.execute(query, params or []).df()
                con.execute("SELECT 1")  # DuckDB 1.5 lets CALL enable_logging by the lock: later statements fail
            except duckdb.Error as e:
                refusal = _refusal(e)
                if refusal is None:
                    raise
                raise refusal from None
            return out
        finally:
            con.close()  # (DuckDB 1.5 aborts the process when one whose file logging failed is only collected)

    def _fill(self, con: duckdb.DuckDBPyConnection, rel) -> None:
        """The views ``samples`` and ``tokens`` of ``rel`` on ``con``, over registered Arrow data; then locked."""
        rel.follow()
        used: dict[tuple[str, ...], list] = {}

        def scan(paths: list[str]) -> str:
            key = tuple(paths)
            sets = used[key] = used.get(key) or self._datasets.get(key) or _datasets(paths)
            names = []
            for dataset in sets:
                names.append(f"_part_{len(names)}_{len(used)}")
                con.register(names[-1], dataset)
            return "(" + " UNION ALL BY NAME ".join(f"SELECT * FROM {n}" for n in names) + ")"

        with rel.cursors.lock:  # the parts and the token files of one version of the views
            raw = rel.samples_raw_sql(scan=scan)
            tokens = rel.tokens_sql(rel.parts())
            for name, source in rel.token_sources():
                con.register(name, source)
        self._datasets = used  # the parts of now: those merged away are let go
        cachemod.spill_to_temp(con)  # (an in-memory database spills into the working directory)
        con.execute(f"CREATE VIEW _samples_raw AS {raw}")
        con.execute(f"CREATE VIEW samples AS {SAMPLES_VIEW}")
        texts = ", ".join(f'"{c}"' for c in rel.nums.not_in_nums)  # the run's _nums: what steps_sql() reads
        con.execute(f"CREATE VIEW _nums AS SELECT * {f'EXCLUDE ({texts})' if texts else ''} FROM _samples_raw")
        con.execute(f"CREATE VIEW tokens AS {tokens_view(tokens, '_samples_raw')}")
        for setting in LOCKDOWN:
            _set(con, setting)


def _set(con: duckdb.DuckDBPyConnection, setting: str) -> None:
    try:
        con.execute(setting)
    except duckdb.CatalogException:  # a setting this DuckDB lacks (python_enable_replacements before 1.1)
        if "lock_configuration" in setting or "external_access" in setting:
            raise


def _datasets(paths: Iterable[str]) -> list:
    """The parts of one log file as Arrow datasets: one over them all where their columns agree (a column missing
    from a part is null there), else one per part (DuckDB's UNION BY NAME then widens types, as read_parquet's
    union_by_name did)."""
    paths = list(paths)
    try:
        schema = pa.unify_schemas([pq.read_schema(p) for p in paths])
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return [ds.dataset(p, format="parquet") for p in paths]
    return [ds.dataset(paths, schema=schema, format="parquet")]
