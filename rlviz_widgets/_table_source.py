"""Sorted, searched, filtered pages of samples, answered by DuckDB (never by the browser).

Works over a Run (numbers in memory, texts read by row group on demand) or any DataFrame.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import duckdb
import pandas as pd

from rlviz_widgets._sql import ident, literal
from rlviz_widgets._store.cache import spill_to_temp
from rlviz_widgets._where import condition, names_any

TEXT_CLIP = 300
TOP_ROWS = 1000  # rows ordered by a top-k while no later one is asked for (a sort of a million took 0.1-0.5 s)
DEFAULT_COLUMNS = ("id", "run", "sample_id", "step", "reward", "ref_reward", "reward_gap", "kl_mean", "kl_sum",
                   "log_ratio_mean", "log_ratio_sum", "mismatch_log_ratio_abs_max", "mismatch_kl_mean",
                   "masked_fraction", "entropy_mean", "n_tokens", "n_trained_tokens", "n_turns", "n_tool_calls",
                   "prompt", "response")
# shown only where they say something a single-turn log of response tokens does not: more than its two turns,
# a tool call, tokens outside the loss mask
CONVERSATION_COLUMNS = {"n_turns": "n_turns > 2", "n_tool_calls": "n_tool_calls > 0",
                        "n_trained_tokens": "n_trained_tokens IS DISTINCT FROM n_tokens"}
HIDDEN = {"file", "line", "file_no", "response_chars", "logprob_mean", "value_mean", "token_reward_sum",
          "ref_response", "ground_truth"}
MAX_EXTRA_COLUMNS = 24  # custom columns shown by default (a log may have hundreds: each is in every page sent)
FRAME_ROW = "__frame_row"  # a DataFrame's row position, beside its numbers (more _ in front if the frame has it)
SEARCH_COLUMNS = ("prompt", "response", "ref_response")
ID_COLUMN = "id"  # a run's readable sample id ("rank0.jsonl:12"): a search finds the sample it names
# DuckDB types a DataFrame's column may have that sort, filter and bin as numbers (times, enums, bytes do not)
_NUMBER_TYPE = re.compile(r"(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|FLOAT|DOUBLE|DECIMAL\(.*\)|BOOLEAN)")



def _free_name(names: Iterable, name: str) -> str:
    """``name``, with more _ in front while ``names`` hold it (in any letter case, as DuckDB reads names)."""
    taken = {str(c).lower() for c in names}
    while name.lower() in taken:
        name = "_" + name
    return name


class TableSource:
    """Pages over a relation whose rows an integer column tells apart (``sample_id``, else ``hidden_id``)."""

    def __init__(self, cursor: Callable[[], duckdb.DuckDBPyConnection], full: str, nums: str, rows_fn=None,
                 natural_order: str | None = None, hidden_id: str | None = None):
        self._cursor = cursor  # a run's cursors must come from it (they are given its token files)
        self._tag = f"_table_filter_{id(self):x}"  # several tables may share one run's database
        self.full = full  # relation with every column (texts too)
        self.nums = nums  # relation with the numeric columns only (fast to sort and count)
        self._rows_fn = rows_fn
        # the ids the browser and `selected_ids` use: sample_id, or a column of row positions not shown
        self.id_name = hidden_id or "sample_id"
        self._id = ident(self.id_name)
        kinds = self.con.execute(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {full})").fetchall()
        self.kinds = {c: t for c, t in kinds if c != hidden_id}
        self._alias = ident(_free_name(self.kinds, "__id"))  # rows()'s own id column
        num_cols = {c for (c, t) in self.con.execute(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "
                                                     f"{nums})").fetchall() if not t.startswith("VARCHAR")}
        self.num_columns = [c for c in self.kinds if c in num_cols]
        self.text_columns = [c for c in self.kinds if c not in num_cols]
        self._filter_key: tuple | None = None
        self._counted: tuple = (None, 0)  # ((search, where), its row count), forgotten as the filters are
        self._where_checked = ("", "")  # (a where, as _where.condition gave it): not parsed again on every page
        self._order_key: tuple | None = None
        self._order = None
        self._whole = True  # whether ``_order`` holds every row, not only the first ``TOP_ROWS``
        # the log's own order where there is one, else sample_id
        if natural_order is None:  # a run's: the log's order
            natural_order = "step, line, file_no" if {"step", "line", "file_no"} <= num_cols else self._id
        self._natural_order = natural_order

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """A fresh cursor: kernel-side requests may overlap the user's own queries."""
        return self._cursor()

    @classmethod
    def from_run(cls, run) -> TableSource:
        return cls(run.cursor, "samples", "_nums", rows_fn=run.held_rows)  # ids a view kept may go

    @classmethod
    def from_frame(cls, df: pd.DataFrame) -> TableSource:
        df = df.copy()
        df.columns = _flat_names(df.columns)
        if any(n is not None for n in df.index.names) or not pd.api.types.is_integer_dtype(df.index.dtype):
            # the index holds data (a groupby's keys, a describe()'s labels): shown as columns, as reset_index()
            # does; an unnamed integer index is positions (of a filtered or sorted frame), left out
            names = [n if n is not None and n not in df.columns else None for n in df.index.names]
            df.index = df.index.set_names([n if n is not None else
                                           _free_name(df.columns, f"index_{k}" if k else "index")
                                           for k, n in enumerate(names)])
            df = df.reset_index()
        if "sample_id" not in df.columns:
            df.insert(0, "sample_id", range(len(df)))
        # the frame's own row order, for a table that is not sorted (as a run's shows the log's order): a column of
        # positions beside the frame's, under a name none of them has (DuckDB's rowid is hidden by a "rowid" column)
        row = _free_name(df.columns, FRAME_ROW)
        df[row] = range(len(df))
        keyed = _usable_ids(df["sample_id"])  # else rows are told apart by position, and sample_id is plain data
        con = duckdb.connect()
        spill_to_temp(con)
        con.register("_frame", df)
        con.execute("CREATE TABLE _frame_rows AS SELECT * FROM _frame")
        con.unregister("_frame")
        con.execute(f"CREATE VIEW samples AS SELECT * {f'EXCLUDE ({ident(row)}) ' if keyed else ''}FROM _frame_rows")
        nums = [c for c, t in con.execute("SELECT column_name, column_type FROM (DESCRIBE samples)").fetchall()
                if _NUMBER_TYPE.fullmatch(t) and c != row]
        con.execute(f"CREATE VIEW _nums AS SELECT {', '.join([*map(ident, nums), ident(row)])} FROM _frame_rows")
        con.execute("SET lock_configuration = true")  # as a run's: a filter cannot turn on logging to a file
        return cls(con.cursor, "samples", "_nums", natural_order=ident(row), hidden_id=None if keyed else row)

    # -- columns -----------------------------------------------------------------------------
    def default_columns(self) -> list[str]:
        """The common columns the data have, then the first ``MAX_EXTRA_COLUMNS`` others; columns without a
        value are left out (unless there are no rows: hiding the empty ones would hide them all)."""
        present = [c for c in DEFAULT_COLUMNS if c in self.kinds]
        extras = [c for c in self.kinds if c not in DEFAULT_COLUMNS and c not in HIDDEN]
        if self.count():
            empty = self._all_null([c for c in present + extras if c in self.num_columns])
            empty |= self._plain(present)
            present = [c for c in present if c not in empty]
            extras = [c for c in extras if c not in empty]
        return present + extras[:MAX_EXTRA_COLUMNS]

    def _plain(self, cols: list[str]) -> set[str]:
        """The conversation columns that say nothing here (``CONVERSATION_COLUMNS``: no row holds more)."""
        nums = self.num_columns
        checks = {c: cond for c, cond in CONVERSATION_COLUMNS.items()
                  if c in cols and c in nums and (c != "n_trained_tokens" or "n_tokens" in nums)}
        if not checks:
            return set()
        row = self.con.execute(f"SELECT {', '.join(f'bool_or({cond})' for cond in checks.values())} "
                               f"FROM {self.nums}").fetchall()[0]
        return {c for c, said in zip(checks, row) if not said}

    def _all_null(self, cols: list[str]) -> set[str]:
        if not cols:
            return set()
        row = self.con.execute(f"SELECT {', '.join(f'count({ident(c)})' for c in cols)} FROM {self.nums}").fetchall()[0]
        return {c for c, n in zip(cols, row) if n == 0}

    def column_info(self, columns: list[str]) -> list[dict]:
        nums = [c for c in columns if c in self.num_columns]
        stats = {}
        if nums:
            aggs = ", ".join(f"min({ident(c)})::DOUBLE, max({ident(c)})::DOUBLE" for c in nums)
            row = self.con.execute(f"SELECT {aggs} FROM {self.nums}").fetchall()[0]
            stats = {c: (row[2 * i], row[2 * i + 1]) for i, c in enumerate(nums)}
        out = []
        for c in columns:
            if c not in self.kinds:
                raise KeyError(f"no column {c!r}; columns: {', '.join(self.kinds)}")
            if c in stats:
                t = self.kinds[c]
                kind = "int" if any(k in t for k in ("INT", "BIGINT", "HUGEINT")) else "number"
                lo, hi = stats[c]
                out.append({"name": c, "kind": kind, "min": _finite(lo), "max": _finite(hi)})
            else:
                out.append({"name": c, "kind": "text"})
        return out

    # -- filtering ----------------------------------------------------------------------------
    def condition(self, where: str) -> str:
        """``where`` as ``_where.condition`` gives it over these rows' columns (a ValueError if it is none)."""
        if where != self._where_checked[0]:
            # bound over the numbers in memory where it names no text (half the time of the view: a brush asks often)
            rel = self.nums if isinstance(where, str) and self._numeric_only(where) else self.full
            self._where_checked = (where, condition(self.con, where, rel))
        return self._where_checked[1]

    def check(self, where: str) -> None:
        """A ValueError unless ``where`` is a condition over these rows that runs: one that binds may still fail
        on the data (``reward > 'a'``), and failed on every page after."""
        self.condition(where)
        try:
            self.count("", where)
        except duckdb.Error as e:
            raise ValueError(f"where= fails on the samples: {where!r} ({str(e).splitlines()[0]})") from None

    def _filtered(self, search: str, where: str) -> str:
        """A relation of the sample_ids passing search and where (cached while they stay the same)."""
        key = (_needle(search), self.condition(where))
        if key == ("", ""):
            return self.nums
        if not key[0] and self._numeric_only(key[1]):  # a brush: scanning the numbers in memory is cheaper
            return f"(SELECT * FROM {self.nums} WHERE {key[1]})"
        if key != self._filter_key:
            conds = []
            if key[1]:
                conds.append(f"({key[1]})")
            if key[0]:
                conds.append(self._search_sql(key[0]))
            uses_text = key[0] or not self._numeric_only(key[1])
            src = self.full if uses_text else self.nums
            self.con.execute(f"CREATE OR REPLACE TABLE {self._tag} AS SELECT {self._id} FROM {src} "
                             f"WHERE {' AND '.join(conds)}")
            self._filter_key = key
            self._order_key = None
        return f"(SELECT n.* FROM {self.nums} n SEMI JOIN {self._tag} f ON n.{self._id} = f.{self._id})"

    def _search_sql(self, needle: str) -> str:
        """The condition of a search: ``needle`` inside a text column (prompt, response, ref_response where there
        are, else any), or the whole of a readable id, or its end after a "/" (a set's "run/" or a folder)."""
        cols = [c for c in SEARCH_COLUMNS if c in self.kinds] or self.text_columns
        inside = literal(f"%{_like_escape(needle)}%")
        # as text: a DataFrame's prompt may hold numbers (question ids) or only NaN (read as DOUBLE)
        conds = [f"CAST({ident(c)} AS VARCHAR) ILIKE {inside} ESCAPE '\\'" for c in cols]
        if ID_COLUMN in self.text_columns and ID_COLUMN not in cols:
            whole = _like_escape(needle.strip())  # not a substring: "rank0.jsonl:1" would find line 10, 100...
            conds.append(f"({ident(ID_COLUMN)} ILIKE {literal(whole)} ESCAPE '\\' OR "
                         f"{ident(ID_COLUMN)} ILIKE {literal('%/' + whole)} ESCAPE '\\')")
        return "(" + (" OR ".join(conds) or "false") + ")"

    def _numeric_only(self, where: str) -> bool:
        """Whether ``where`` names no text column (in any letter case, as DuckDB reads names)."""
        return not names_any(where, self.text_columns)

    def count(self, search: str = "", where: str = "") -> int:
        if self._counted[0] != (search, where):  # ``check`` counts what the table then counts again
            n = self.con.execute(f"SELECT count(*) FROM {self._filtered(search, where)}").fetchall()[0][0]
            self._counted = ((search, where), n)
        return self._counted[1]

    def ids(self, search: str = "", where: str = "", sort_by: str = "", desc: bool = False,
            offset: int = 0, limit: int | None = None) -> list[int]:
        """Ids (``id_name``) of the rows in display order (a slice of them).

        The order is computed once per (search, where, sort) and kept as an id array, so each
        page while scrolling is a slice instead of a new sort. While only its first ``TOP_ROWS`` are asked
        for, only those are found (a top-k, not a sort of every row).
        """
        key = (_needle(search), where.strip(), sort_by, bool(desc) if sort_by else False)
        offset = max(int(offset), 0)  # (a negative one would slice from the end)
        stop = None if limit is None else offset + max(int(limit), 0)
        if key != self._order_key or (not self._whole and (stop is None or stop > len(self._order))):
            self._order, self._whole = self._ordered(search, where, sort_by, desc, stop)
            self._order_key = key
        return [int(i) for i in self._order[offset:stop]]

    def _ordered(self, search: str, where: str, sort_by: str, desc: bool, stop: int | None) -> tuple:
        """(ids in display order, whether they are all of them): the first ``TOP_ROWS`` where no more than those are
        asked for (``stop``), else every one."""
        rel = self._filtered(search, where)
        if sort_by:
            if sort_by not in self.kinds:
                raise KeyError(f"cannot sort by {sort_by!r}: no such column")
            if sort_by in self.text_columns:  # texts live in the full relation
                rel = (f"(SELECT f.{self._id}, f.{ident(sort_by)} FROM {self.full} f "
                       f"SEMI JOIN {rel} r ON f.{self._id} = r.{self._id})")
            order = f"{ident(sort_by)} {'DESC' if desc else 'ASC'} NULLS LAST, {self._id}"
        else:  # the log's own order, filtered or not
            order = self._natural_order
        top = stop is not None and stop <= TOP_ROWS
        # 8 bytes a row: even a million rows is a small numpy array, and a page is a slice
        ids = self.con.execute(f"SELECT {self._id} FROM {rel} ORDER BY {order}"
                               + (f" LIMIT {TOP_ROWS + 1}" if top else "")).fetchnumpy()[self.id_name]
        if top and len(ids) > TOP_ROWS:  # (one more than kept: whether there are more)
            return ids[:TOP_ROWS], False
        return ids, True

    def invalidate(self) -> None:
        """Forget cached filters and orders (the data changed)."""
        self._filter_key = None
        self._order_key = None
        self._counted = (None, 0)

    def rows(self, ids: Iterable[int], columns: list[str] | None = None) -> pd.DataFrame:
        """Rows of the given ids, in that order."""
        ids = [int(i) for i in ids]
        if self._rows_fn is not None:
            return self._rows_fn(ids, columns)
        hidden = f" EXCLUDE ({self._id})" if self.id_name not in self.kinds else ""
        cols = ", ".join(ident(c) for c in columns) if columns else f"*{hidden}"
        if not ids:
            return self.con.execute(f"SELECT {cols} FROM {self.full} WHERE false").df()
        df = self.con.execute(f"SELECT {cols}, {self._id} AS {self._alias} FROM {self.full} "
                              f"WHERE {self._id} IN ({', '.join(map(str, ids))})").df()
        order = {sid: k for k, sid in enumerate(ids)}
        df = df.iloc[df.iloc[:, -1].map(order).argsort(kind="stable")]
        return df.iloc[:, :-1].reset_index(drop=True)

    def page(self, offset: int, limit: int, columns: list[str], search: str = "", where: str = "",
             sort_by: str = "", desc: bool = False, clip: int = TEXT_CLIP) -> dict:
        """One page for the front end: ids, rows (texts clipped) and clip flags."""
        ids = self.ids(search, where, sort_by, desc, offset, limit)
        df = self.rows(ids, list(dict.fromkeys([self.id_name, *columns])))
        rows, clipped = [], []
        for rec in df[columns].itertuples(index=False, name=None):
            row, flags = [], []
            for v in rec:
                if isinstance(v, str):
                    flags.append(len(v) > clip)
                    row.append(v[:clip])
                else:
                    flags.append(False)
                    row.append(_jsonable(v))
            rows.append(row)
            clipped.append(flags)
        return {"offset": int(offset), "ids": [int(i) for i in df[self.id_name]], "rows": rows,
                "clipped": clipped if any(any(f) for f in clipped) else None}

    def cell(self, sample_id: int, column: str) -> str:
        df = self.rows([sample_id], [column])
        if not len(df):
            raise KeyError(f"no sample {sample_id}")
        v = df.iloc[0, 0]
        return "" if v is None or (isinstance(v, float) and v != v) else str(v)


def _flat_names(columns: pd.Index) -> list:
    """A frame's column names as DuckDB can take them: a groupby's ``agg`` levels joined (``reward_mean``), NUL
    written out (DuckDB cuts a name at it)."""
    names = []
    for c in columns:
        if isinstance(c, tuple):
            c = "_".join(str(p) for p in c if str(p) != "")
        names.append(c.replace("\x00", "\\x00") if isinstance(c, str) else c)
    return names


def _usable_ids(ids: pd.Series) -> bool:
    """Whether a frame's sample_id column can tell its rows apart in the browser: unique integers that a
    JavaScript number holds exactly (text ids, gaps, duplicates or ids past 2**53 would name other rows)."""
    if not pd.api.types.is_integer_dtype(ids.dtype) or ids.isna().any() or not ids.is_unique:
        return False
    return ids.empty or (int(ids.min()) >= -(2**53) and int(ids.max()) <= 2**53)


def _needle(search: str) -> str:
    """The text searched for, as typed (" the" finds a word's start), unless it is only blanks: no search."""
    return search if search.strip() else ""


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _finite(v):
    return None if v is None or v != v or v in (float("inf"), float("-inf")) else float(v)


def _jsonable(v):
    if v is None:
        return None
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):  # shown as text (bytes that are not UTF-8 as \ufffd)
        return bytes(v).decode("utf-8", "replace")
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"  # JSON has no infinity; the table shows it as ∞ (not as missing)
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53:
        return str(v)  # a JavaScript number would round it: its digits, shown as they are
    return v if isinstance(v, (int, float, bool)) else str(v)
