"""The log frames and queries a Run and a RunSet share (steps, histograms, token domains, rows, tokens), written
once against their ``Relations``: the SQL of their samples and tokens, their cache parts, and a cursor."""

from __future__ import annotations

import math
import re
import sys
from abc import ABCMeta
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from typing import Protocol

import duckdb
import numpy as np
import pandas as pd

from rlviz_widgets import _problems as problemsmod
from rlviz_widgets._ingest.custom_columns import RESERVED
from rlviz_widgets._mismatch import STEP_FIGURES, step_figures
from rlviz_widgets._problems import Problem
from rlviz_widgets._sql import bin_count, ident, mean_sql, std_sql
from rlviz_widgets._where import condition, names_any
from rlviz_widgets.run._sandbox import Sandbox
from rlviz_widgets.run._views import ID_STRIDE, TOKEN_FIELDS

STAT_COLUMNS = {  # steps frame: output prefix -> samples column
    "reward": "reward", "ref_reward": "ref_reward", "reward_gap": "reward_gap",
    "kl": "kl_mean", "log_ratio": "log_ratio_mean", "length": "n_trained_tokens", "chars": "response_chars",
}
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
TOKEN_METRIC_ORDER = ("token_reward", "kl", "log_ratio", "logprob", "ref_logprob", "prob", "ref_prob", "value",
                      "mismatch_log_ratio", "importance_ratio", "mismatch_kl", "prob_delta", "entropy", "advantage",
                      "inference_logprob", "trainer_logprob")
SIGNED_METRICS = ("token_reward", "log_ratio", "value", "mismatch_log_ratio", "prob_delta", "advantage")
LOGPROB_METRICS = ("logprob", "ref_logprob", "inference_logprob", "trainer_logprob")  # colour limits -10..0
DERIVED_MISMATCH = ("mismatch_log_ratio", "importance_ratio", "mismatch_kl", "prob_delta")  # of the two log-probs
DOMAIN_SAMPLES = 400  # samples whose tokens set a step's or the run's colour limits
MAX_DOMAINS = 256  # colour limits kept (least recently asked dropped first)


def _binning(lo: float, hi: float, bins: int):
    """(SQL of a column's bin numbers, a function giving the lower edge of bin numbers) for ``bins`` equal bins
    over [lo, hi]. Where hi - lo overflows a double (values of -1e308 and 1e308), values are halved first; where the
    width would underflow (subnormal values: 0 and 5e-324), they are scaled by 2**600. Either is exact, so the bins
    are those the unscaled values would have. All values equal: bins of width 1. A width under a few ulps of the
    values (1e16 and 1e16 + 2 in 30 bins, or 1e16 alone) would give bins whose edges are equal: it is widened."""
    f = 1.0 if math.isfinite(hi - lo) else 0.5
    if hi > lo and (hi - lo) / bins < sys.float_info.min:  # all such values are < 2**-938: x 2**600 stays finite
        f = 2.0**600
    start, width = lo * f, ((hi * f - lo * f) / bins if hi > lo else 1.0)
    top = hi  # the last edge is the largest value, not short of it (lo + bins * width rounds)
    least = 4 * math.ulp(max(abs(lo), abs(hi)) * f)
    if hi == lo or width < least:
        width = max(width, least)
        if not math.isfinite(start + bins * width):  # near the largest double: the bins end at it
            start = hi * f - bins * width
        top = (start + bins * width) / f

    def sql(column: str) -> str:
        value = column if f == 1.0 else f"({column} * {f!r}::DOUBLE)"
        guess = f"least(floor(({value} - {start!r}) / {width!r}), {bins - 1})"
        # the guess checked against the edges reported: the quotient is rounded (in bins over -1e20..1e20,
        # (-1 + 1e20) / 1e20 is 1.0, which put -1 into the bin [0, 1e20])
        return (f"({guess} - ({value} < {start!r} + {guess} * {width!r})::INTEGER"
                f" + ({guess} < {bins - 1} AND {value} >= {start!r} + ({guess} + 1) * {width!r})::INTEGER)::INTEGER")

    return sql, lambda b: np.where(b >= bins, top, (start + b * width) / f)


def _in_buckets(src: str, starts: list[int]) -> str:
    """``src`` with each sample's step replaced by the first step of its bucket: the last of ``starts`` (sorted,
    the first at most the lowest step) at or before it. An ASOF join: a VALUES table of every step joined by hash
    took 7x as long on 3,000 steps."""
    listed = "[" + ", ".join(str(int(s)) for s in starts) + "]"
    return (f"(SELECT x.* EXCLUDE (step), b.first AS step FROM {src} x "
            f"ASOF JOIN (SELECT unnest({listed}) AS first) b ON x.step >= b.first)")


_BIN_TYPES = {"step": "int64", "step_end": "int64", "bin": "int64", "bin_start": "float64", "bin_end": "float64",
              "count": "int64"}


def _no_bins(columns: list[str]) -> pd.DataFrame:
    """An empty histogram with its columns' types: untyped (object) columns made every column of a concat with
    it object, and the chart got its numbers as text."""
    return pd.DataFrame({c: pd.Series(dtype=_BIN_TYPES.get(c, "object")) for c in columns})


def id_list(sample_ids) -> list[int]:
    """One sample id or many, as ints; anything else (text, 1.5, None) is a TypeError that says what was given."""
    if isinstance(sample_ids, (str, bytes)) or not isinstance(sample_ids, Iterable):
        return [sample_id(sample_ids)]
    return [sample_id(i) for i in sample_ids]


def sample_id(i) -> int:
    if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
        return int(i)
    if isinstance(i, (float, np.floating)) and float(i).is_integer():  # ids from a float column (pandas, NaN)
        return int(i)
    raise TypeError(f"sample ids are whole numbers (run.samples['sample_id']), not {i!r}")


def bigints(ids: Iterable[int]) -> list[int]:
    """Those of ``ids`` a BIGINT holds (the others are no sample's id), for a list parameter."""
    return [i for i in ids if -2**63 <= i < 2**63]


def ids_by_file(ids: list[int]) -> dict[int, list[int]]:
    by_file: dict[int, list[int]] = {}
    for i in ids:
        by_file.setdefault(i // ID_STRIDE, []).append(i % ID_STRIDE)
    return by_file


def _sequence_arrays(g: pd.DataFrame | None) -> dict[str, np.ndarray | list]:
    """A sample's tokens' ``turn`` (int32, -1 where unknown), ``role`` (text, "" where unknown) and ``trained``."""
    if g is None or "turn" not in g:
        return {"turn": np.zeros(0, np.int32), "role": [], "trained": np.zeros(0, bool)}
    return {"turn": g["turn"].to_numpy(dtype="float64", na_value=-1).astype(np.int32),
            "role": [r if isinstance(r, str) else "" for r in g["role"].tolist()],
            "trained": g["trained"].to_numpy(dtype=bool, na_value=True)}


class Relations(Protocol):
    """What the queries read: a ``RunViews`` (one run) or a ``SetViews`` (several)."""

    builds: int  # how many times the views were made
    nums: object  # ``_views.NumsState``: the columns ``_nums`` lacks
    files: object  # ``_views.FileParts``: file numbers
    cursors: object  # ``_db.Cursors``
    lease: object  # ``_store.leases.Lease``: the parts the views read

    def follow(self) -> bool: ...  # bring the views up to what they show (a set's runs refreshed on their own)
    def cursor(self) -> duckdb.DuckDBPyConnection: ...
    def execute(self, query: str, params: list | None = None) -> duckdb.DuckDBPyConnection: ...
    def parts(self, file_nos=None) -> list[tuple[int, str]]: ...
    def samples_sql(self, parts: list[tuple[int, str]], where: str = "", lines: dict | None = None) -> str: ...
    def tokens_sql(self, parts: list[tuple[int, str]], lines: dict | None = None, limit: int | None = None) -> str: ...
    def turns_sql(self, parts: list[tuple[int, str]], lines: dict | None = None) -> str: ...
    def register_tokens(self, cur, parts=None, lines=None) -> None: ...
    def token_fields(self) -> list[str]: ...
    def map_token_files(self) -> None: ...
    def leaves_samples_out(self) -> bool: ...
    def file_states(self) -> dict: ...
    def problems(self) -> list[Problem]: ...


class Frames(metaclass=ABCMeta):
    """The frames and queries of a run or a set of runs, over ``self._rel`` (its ``Relations``). ABCMeta: a
    ``RunSet`` is registered as a ``Run`` (widgets take either), without deriving from it."""

    _rel: Relations

    def _forget(self) -> None:
        """What was computed from the views, forgotten (kept while they stay: ``_fresh``)."""
        self._steps_cache: pd.DataFrame | None = None
        self._steps_parts: dict[tuple, pd.DataFrame] = {}  # ``steps_of``'s frames, by the figures asked
        self._where_checked: tuple = (None, "")  # ((where, views' builds), the condition ``_where.condition`` gave)
        self._domains: OrderedDict = OrderedDict()  # least recently asked first (``MAX_DOMAINS``)
        self._built = self._rel.builds  # the views they were computed from
        self._sandbox = getattr(self, "_sandbox", None) or Sandbox()  # kept: its datasets of parts outlive views

    def _fresh(self) -> None:
        """Follow the views (a set's runs may have refreshed on their own); forget what was computed from older
        ones."""
        self._rel.follow()
        if self._built != self._rel.builds:
            self._forget()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB cursor on the run's database (views ``samples`` and ``tokens``).

        Each access gives a new cursor, so widget requests and the user's own queries never
        collide on one connection (DuckDB refuses concurrent calls on the same connection).
        A cursor kept across ``refresh()`` is given the new token files, unless it is busy then or
        holds an unfinished result (DuckDB refuses): its queries over ``tokens`` then fail. Take a
        new cursor after a refresh.
        """
        return self._rel.cursors.hand_out()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for one query of a widget's or a tool's, given the token files; unlike ``con``'s, never given new
        ones by a refresh (it may be busy in another thread then): take a new one per query."""
        return self._rel.cursor()

    @property
    def samples(self) -> pd.DataFrame:
        """One row per sample: texts, rewards, token reductions, custom fields, file and line."""
        return self._rel.execute("SELECT * FROM samples").df()

    @property
    def n_samples(self) -> int:
        """How many samples pass the run's options."""
        return self._rel.execute("SELECT count(*) FROM _nums").fetchall()[0][0]

    @property
    def step_values(self) -> list[int]:
        """The distinct steps, ascending (gaps need not be uniform)."""
        return [s for (s,) in self._rel.execute("SELECT DISTINCT step FROM _nums ORDER BY step").fetchall()]

    @property
    def steps(self) -> pd.DataFrame:
        """One row per step: sample count and mean, std, min, max, p05..p95 of the main metrics."""
        self._fresh()
        if self._steps_cache is None:
            self._steps_cache = self._rel.execute(self.steps_sql()).df()
        return self._steps_cache.copy()

    @property
    def step_fields(self) -> list[str]:
        """The figures of ``steps`` after ``step`` and ``samples``, in its order (known without computing them)."""
        return list(self._step_aggregates())

    def steps_of(self, fields: Iterable[str]) -> pd.DataFrame:
        """``steps``' ``step``, ``samples`` and those of ``fields`` it has, in its order: taken from ``steps`` where
        it was computed, else by a query of those figures alone (a chart draws a few of its dozens, which cost a
        sort of a million values for each quantile); kept while the views stay."""
        self._fresh()
        wanted = set(fields)
        names = [f for f in self._step_aggregates() if f in wanted]
        if self._steps_cache is not None:
            return self._steps_cache[["step", "samples", *names]].copy()
        key = tuple(names)
        if key not in self._steps_parts:
            self._steps_parts[key] = self._rel.execute(self.steps_sql(fields=names)).df()
        return self._steps_parts[key].copy()

    def _step_aggregates(self) -> dict[str, str]:
        """Figure of ``steps`` -> its SQL aggregate over a step's samples: per ``STAT_COLUMNS`` the mean, std, min,
        max and ``QUANTILES`` (items of one ``quantile_cont`` list, which DuckDB computes once), then the mismatch
        figures of the fields the run has (``_mismatch.step_figures``)."""
        out: dict[str, str] = {}
        for name, col in STAT_COLUMNS.items():
            out |= {f"{name}_mean": mean_sql(col), f"{name}_std": std_sql(col), f"{name}_min": f"min({col})",
                    f"{name}_max": f"max({col})"}
            listed = f"quantile_cont({col}, {list(QUANTILES)})"  # one sort for all five
            out |= {f"{name}_p{round(q * 100):02d}": f"{listed}[{k + 1}]" for k, q in enumerate(QUANTILES)}
        return out | step_figures("n_trained_tokens", tuple(f for f in STEP_FIGURES if f in self._rel.nums.kinds))

    def steps_sql(self, where: str = "", starts: list[int] | None = None, fields: Iterable[str] | None = None) -> str:
        """The SQL behind ``steps`` (optionally restricted by a WHERE clause over samples). With ``starts`` (sorted
        steps, the first at most the run's first), one row per bucket of the steps from one start to the next,
        named by its start: the statistics of the bucket's samples. ``fields``: only those figures (and ``step``,
        ``samples``), in ``steps``' order."""
        where = self.check_where(where)
        src = self._numeric(where)
        if starts is not None:
            src = _in_buckets(f"(SELECT * FROM {src} {'WHERE ' + where if where else ''})", starts)
            where = ""
        aggs = self._step_aggregates()
        if fields is not None:
            wanted = set(fields)
            aggs = {name: sql for name, sql in aggs.items() if name in wanted}
        cols = "".join(f", {sql} AS {ident(name)}" for name, sql in aggs.items())
        return (f"SELECT step, count(*) AS samples{cols} FROM {src} {'WHERE ' + where if where else ''} "
                f"GROUP BY step ORDER BY step")

    def check_where(self, where: str) -> str:
        """``where`` checked to be one SQL condition over ``samples``, in parentheses (``_where.condition``): a
        ValueError says what is wrong with it."""
        key = (where, self._rel.builds)  # bound once while the views stay (a brushed view asks on every redraw)
        if self._where_checked[0] != key:
            with self._rel.cursor() as cur:  # given the token files: a where may ask the tokens view
                self._where_checked = (key, condition(cur, where, "samples"))
        return self._where_checked[1]

    def _numeric(self, where: str = "") -> str:
        """The in-memory numeric table when ``where`` needs no column it lacks, else the full view."""
        return "samples" if where and names_any(where, self._rel.nums.not_in_nums) else "_nums"

    def reward_histogram(self, column: str = "reward", bins: int = 30, where: str = "") -> pd.DataFrame:
        """Counts per (step, bin) on one set of bin edges shared by every step.

        The edges span the column's finite values over the whole run: ``where`` filters what is counted, not the
        edges, so a filtered histogram lines up bin for bin with the unfiltered one (``histograms`` instead
        spans what its ``where`` keeps).
        """
        if column not in self.columns:
            raise KeyError(f"no column {column!r} in samples; columns: {', '.join(self.columns)}")
        bins = bin_count(bins)
        self._check_numeric([column])
        where = self.check_where(where)
        c = f'"{column}"'
        src = self._numeric(where)
        lo, hi = self._rel.execute(f"SELECT min({c}), max({c}) FROM {src} WHERE isfinite({c})").fetchall()[0]
        cols = ["step", "bin", "bin_start", "bin_end", "count"]
        if lo is None:
            return _no_bins(cols)
        bin_sql, edge = _binning(lo, hi, bins)
        cond = f"isfinite({c})" + (f" AND {where}" if where else "")
        df = self._rel.execute(f"""
            SELECT step, {bin_sql(c)} AS bin, count(*) AS count
            FROM {src} WHERE {cond} GROUP BY ALL ORDER BY step, bin""").df()
        df["bin_start"], df["bin_end"] = edge(df["bin"]), edge(df["bin"] + 1)
        return df[cols]

    def histograms(self, columns: Iterable[str] = ("reward", "ref_reward"), bins: int = 30, where: str = "",
                   max_steps: int | None = None, by: tuple[str, ...] = ()) -> pd.DataFrame:
        """Long-form counts per (column, step, bin) with ONE edge set shared by the given columns.

        Columns on one edge set can be overlaid (reward vs ref_reward). The edges span the finite values that
        ``where`` keeps (the bins zoom in on a selection; ``reward_histogram`` keeps the whole run's). With
        ``max_steps``, steps are grouped into at most that many buckets (each named by its first step), so the
        result stays small however long the run. ``by``: more columns to count per (a RunSet's ``("run",)``: each
        run's own counts, on the same edges).
        """
        columns = [columns] if isinstance(columns, str) else list(columns)
        unknown = [c for c in columns if c not in self.columns and c not in RESERVED]
        if unknown:
            raise KeyError(f"no column {', '.join(map(repr, unknown))} in samples; columns: {', '.join(self.columns)}")
        cols = [c for c in columns if c in self.columns]  # a common column this log lacks is left out
        out_cols = [*by, "column", "step", "step_end", "bin", "bin_start", "bin_end", "count"]
        extra = "".join(f'"{b}", ' for b in by)
        bins = bin_count(bins)
        self._check_numeric(cols)
        if not cols:
            return _no_bins(out_cols)
        where = self.check_where(where)
        cond = f"WHERE {where}" if where else ""
        rng = ", ".join(f'min("{c}") FILTER (WHERE isfinite("{c}")), max("{c}") FILTER (WHERE isfinite("{c}"))'
                        for c in cols)
        src = self._numeric(where)
        vals = [v for v in self._rel.execute(f"SELECT {rng} FROM {src} {cond}").fetchall()[0] if v is not None]
        if not vals:
            return _no_bins(out_cols)
        lo, hi = min(vals), max(vals)
        steps = self.step_values
        starts = steps  # the steps (or buckets' first steps) rows are named by
        if where:  # on the samples' own steps, before any bucketing
            src = f"(SELECT * FROM {src} WHERE {where})"
        if max_steps and len(steps) > max_steps:
            starts = steps[:: -(-len(steps) // max_steps)]
            src = _in_buckets(src, starts)
        bin_sql, edge = _binning(lo, hi, bins)
        unions = " UNION ALL ".join(
            f"""SELECT {extra}'{c}' AS "column", step, {bin_sql(f'"{c}"')} AS bin
                FROM {src} WHERE isfinite("{c}")""" for c in cols)
        df = self._rel.execute(f"""SELECT {extra}"column", step, bin, count(*) AS count FROM ({unions})
                                   GROUP BY ALL ORDER BY ALL""").df()
        if df.empty:
            return _no_bins(out_cols)
        df["bin_start"], df["bin_end"] = edge(df["bin"]), edge(df["bin"] + 1)
        # a row spans its step (bucket) up to the run's next one; the last one a typical gap past the run's last
        # step (a bucket of steps 9 and 100 ends past 100)
        last = steps[-1] + (int(np.median(np.diff(steps))) if len(steps) > 1 else 1)
        df["step_end"] = df["step"].map(dict(zip(starts, [*starts[1:], last])))
        return df[out_cols]

    def _check_numeric(self, columns: list[str]) -> None:
        """Raise a ValueError naming any of ``columns`` that holds text (a histogram needs numbers)."""
        nums = [c for c, t in self._rel.execute("SELECT column_name, column_type FROM (DESCRIBE _nums)").fetchall()
                if not t.startswith("VARCHAR")]  # a set's run column is kept there, as text
        texts = [c for c in columns if c not in nums]
        if texts:
            raise ValueError(f"{', '.join(map(repr, texts))}: not a numeric column; numeric columns: "
                             f"{', '.join(c for c in nums if c not in ('sample_id', 'file_no'))}")

    def tokens(self, sample_ids: int | Iterable[int]) -> pd.DataFrame:
        """One row per token of the given samples: token text, metrics, and derived metrics. An id that is no
        sample of this run is a KeyError naming it (a row position, say, where a ``sample_id`` was due)."""
        return self._tokens_of(self.check_ids(sample_ids))

    def turns(self, sample_ids: int | Iterable[int] | None = None) -> pd.DataFrame:
        """One row per turn of the given samples (default: every sample of the run), in order: ``sample_id``,
        ``turn`` (0, 1, ...), ``role`` (as the log writes it), ``text``, ``tool_name`` / ``tool_arguments`` (JSON
        text) / ``tool_call_id`` of a tool call (a turn making several calls has a row for each, its text on the
        first), ``tool_call_id`` (and ``tool_name``, where given) of a tool result, ``start`` / ``end`` (the turn's
        token span in ``tokens()``, where known), ``trained`` and ``reasoning``; a set's turns have ``run`` too. A log
        without message structure gives two turns per sample: the prompt (user), the response (assistant). See
        docs/internals.md, "Turns"."""
        if sample_ids is None:
            sql = (f"SELECT t.* FROM ({self._rel.turns_sql(self._rel.parts())}) t "
                   f"SEMI JOIN _nums i ON t.sample_id = i.sample_id ORDER BY t.sample_id, t._k")
            return self._rel.execute(sql).df().drop(columns="_k")
        ids = self.check_ids(sample_ids)
        by_file = ids_by_file(ids)
        parts = self._rel.parts(by_file)
        sql = self._rel.turns_sql(parts, lines=by_file) if ids and parts else self._rel.turns_sql([])
        df = self._rel.execute(f"SELECT * FROM ({sql}) ORDER BY sample_id, _k").df()
        order = {sid: k for k, sid in enumerate(dict.fromkeys(ids))}
        df = df.sort_values(["sample_id", "_k"], key=lambda s: s.map(order) if s.name == "sample_id" else s,
                            kind="stable")
        return df.drop(columns="_k").reset_index(drop=True)

    def check_ids(self, sample_ids: int | Iterable[int]) -> list[int]:
        """``sample_ids`` as a list; a KeyError naming those that are no samples of this run."""
        ids = id_list(sample_ids)
        if ids:
            held = self._held(ids)
            missing = [i for i in dict.fromkeys(ids) if i not in held]
            if missing:
                more = len(missing) - 10
                shown = ", ".join(map(str, missing[:10])) + (f" and {more} more" if more > 0 else "")
                raise KeyError(f"not samples of this run: {shown} (sample ids are values of run.samples['sample_id'], "
                               "not row positions)")
        return ids

    def held_tokens(self, sample_ids: int | Iterable[int]) -> pd.DataFrame:
        """``tokens`` of those of the ids the run holds (the others left out: ids a view kept while its run
        changed)."""
        return self._tokens_of(self._in_run(id_list(sample_ids)))

    def _tokens_of(self, ids: list[int], limit: int | None = None) -> pd.DataFrame:
        """``tokens`` of ids the run holds (``limit``: the first that many of each)."""
        by_file = ids_by_file(ids)
        parts = self._rel.parts(by_file)
        if not ids or not parts:  # the tokens view's columns, no rows
            return self._rel.execute("SELECT * FROM tokens WHERE false").df()
        sql = self._rel.tokens_sql(parts, lines=by_file, limit=limit)
        cur = self._rel.cursor()
        self._rel.register_tokens(cur, parts, by_file)
        df = cur.execute(f"SELECT * FROM ({sql}) ORDER BY sample_id, position").df()
        order = {sid: k for k, sid in enumerate(dict.fromkeys(ids))}
        return df.sort_values(["sample_id", "position"], key=lambda s: s.map(order) if s.name == "sample_id" else s,
                              kind="stable").reset_index(drop=True)

    def rows(self, sample_ids: Iterable[int], columns: list[str] | None = None) -> pd.DataFrame:
        """The samples rows of the given ids, in that order (fast: reads only their row groups). An id that is no
        sample of this run is a KeyError naming it."""
        return self._rows_of(self.check_ids(sample_ids), columns)

    def held_rows(self, sample_ids: Iterable[int], columns: list[str] | None = None) -> pd.DataFrame:
        """``rows`` of those of the ids the run holds (the others left out)."""
        return self._rows_of(self._in_run(id_list(sample_ids)), columns)

    def _rows_of(self, ids: list[int], columns: list[str] | None = None) -> pd.DataFrame:
        """``rows`` of ids the run holds."""
        known = set(self.columns) if columns else set()  # one DESCRIBE, not one per column (a page asks ~15)
        unknown = [c for c in columns or () if c not in known]
        if unknown:
            raise KeyError(f"no column {', '.join(map(repr, unknown))} in samples; columns: {', '.join(self.columns)}")
        cols = ", ".join(f'"{c}"' for c in columns) if columns else "* EXCLUDE (file_no)"
        by_file = ids_by_file(ids)
        parts = self._rel.parts(by_file)
        if not ids or not parts:
            return self._rel.execute(f"SELECT {cols if columns else '*'} FROM samples WHERE false").df()
        if columns:
            df = self._columns_of(ids, list(dict.fromkeys(columns)), by_file, parts)
        else:
            sql = self._rel.samples_sql(parts, lines=by_file)
            df = self._rel.execute(f"SELECT {cols}, sample_id AS __id FROM ({sql})").df()
        at = {sid: k for k, sid in enumerate(df["__id"].tolist())}
        df = df.iloc[[at[i] for i in ids if i in at]]  # in the order asked, an id asked twice given twice
        df = df.drop(columns="__id").reset_index(drop=True)
        return df[list(columns)] if columns else df

    def _columns_of(self, ids: list[int], columns: list[str], by_file: dict, parts: list) -> pd.DataFrame:
        """``columns`` of the ids' rows, unordered, with their id (``__id``): the numbers from ``_nums`` in memory,
        only the texts from the cache parts (a sorted page's rows lie in dozens of parts, each opened to read them,
        and the fewer columns read there the sooner)."""
        not_in = set(self._rel.nums.not_in_nums)
        frames = []
        if [c for c in columns if c not in not_in]:
            cols = ", ".join(ident(c) for c in columns if c not in not_in)
            frames.append(self._rel.execute(f"SELECT {cols}, sample_id AS __id FROM _nums WHERE sample_id IN "
                                            f"(SELECT unnest(?::BIGINT[]))", [bigints(ids)]).df())
        if [c for c in columns if c in not_in]:
            cols = ", ".join(ident(c) for c in columns if c in not_in)
            sql = self._rel.samples_sql(parts, lines=by_file)
            frames.append(self._rel.execute(f"SELECT {cols}, sample_id AS __id FROM ({sql})").df())
        if len(frames) == 1:
            return frames[0][[*columns, "__id"]]
        both = frames[0].set_index("__id").join(frames[1].set_index("__id"), how="inner")
        return both[columns].reset_index()

    def _in_run(self, ids: list[int]) -> list[int]:
        """Those of ``ids`` that are samples of this run, in their order: the step range and the per-step cap
        leave samples in the cache parts that the run does not hold (ids of them may come from another Run)."""
        if not ids or not self._rel.leaves_samples_out():
            return ids  # every sample of the parts is the run's (ids of other files find no part)
        held = self._held(ids)
        return [i for i in ids if i in held]

    def _held(self, ids: list[int]) -> set[int]:
        """Those of ``ids`` that are samples of this run (as one list parameter: 80k ids written into the SQL
        text took a second to parse)."""
        query = "SELECT sample_id FROM _nums WHERE sample_id IN (SELECT unnest(?::BIGINT[]))"
        return {i for (i,) in self._rel.execute(query, [bigints(dict.fromkeys(ids))]).fetchall()}

    def data_key(self, sample_ids: Iterable[int]) -> tuple:
        """What these samples' records depend on: which of them the run holds (a cap or step range may let one
        go), and the epoch of each file holding them (new whenever a file is read again from its start). While
        it stays the same, so do their records: a followed view redraws a token strip only when it changes."""
        ids = self._in_run(id_list(sample_ids))
        held = {i // ID_STRIDE for i in ids}
        epochs = sorted((self._rel.files.file_no.get(p), st.epoch) for p, st in self._rel.file_states().items()
                        if self._rel.files.file_no.get(p) in held)
        return tuple(ids), tuple(epochs)

    def token_arrays(self, sample_ids: Iterable[int],
                     limit: int | Callable[[list[int]], int] | None = None) -> list[dict]:
        """Per sample: id, step, reward, n_tokens, token strings, each token metric as a float32 array, and each
        token's ``turn`` (int32, -1 where unknown), ``role`` (text) and ``trained`` (bool) (``limit``: the first that
        many tokens of each, or a function of the samples' ``n_tokens`` giving it; ``n_tokens`` counts them all)."""
        ids = self._in_run(id_list(sample_ids))
        info = self._rows_of(ids, ["sample_id", "step", "reward", "n_tokens"]) if ids else pd.DataFrame()
        if callable(limit):
            limit = limit([0 if pd.isna(n) else int(n) for n in info["n_tokens"]] if ids else [])
        toks = self._tokens_of(ids, limit)
        out = []
        groups = dict(tuple(toks.groupby("sample_id", sort=False))) if len(toks) else {}
        for _, r in info.iterrows():
            sid = int(r["sample_id"])
            g = groups.get(sid)
            metrics = {}
            tokens: list[str] = []
            if g is not None:
                if "token" in g:
                    tokens = [t if isinstance(t, str) else "" for t in g["token"].tolist()]
                for m in TOKEN_METRIC_ORDER:
                    if m in g:
                        metrics[m] = g[m].to_numpy(dtype="float32", na_value=float("nan"))
            out.append({"sample_id": sid, "step": int(r["step"]),
                        "reward": None if pd.isna(r["reward"]) else float(r["reward"]),
                        "n_tokens": 0 if pd.isna(r["n_tokens"]) else int(r["n_tokens"]),
                        "tokens": tokens, "metrics": metrics, **_sequence_arrays(g)})
            if g is not None and "masked" in g:  # the mismatch mask (the log's, else the rule's)
                out[-1]["masked"] = g["masked"].to_numpy(dtype=bool, na_value=False)
        return out

    @property
    def token_metrics(self) -> list[str]:
        """The token metrics this run has (those `tokens()` can fill), in display order."""
        names = {TOKEN_FIELDS[f] for f in self._rel.token_fields()}
        if {"logprob", "ref_logprob"} <= names:
            names |= {"log_ratio", "kl", "prob", "ref_prob"}
        elif "logprob" in names:
            names |= {"prob"}
        elif "ref_logprob" in names:
            names |= {"ref_prob"}
        if {"inference_logprob", "trainer_logprob"} <= names:
            names |= set(DERIVED_MISMATCH)
        return [m for m in TOKEN_METRIC_ORDER if m in names]

    def token_domain(self, metric: str, scope: str = "run", steps: Iterable[int] | None = None) -> tuple[float, float]:
        """Colour limits of a token metric over the run or some steps (p99 clip; symmetric if signed).

        Estimated from the tokens of up to DOMAIN_SAMPLES samples of the scope, chosen by a hash
        (the same ones every time), which is exact for small runs and fast for huge ones.
        """
        self._fresh()
        if scope not in ("run", "step") or (scope == "step" and steps is None):
            raise ValueError(f"scope={scope!r}: 'run', or 'step' with the steps to cover (steps=[...])")
        if metric in ("prob", "ref_prob"):
            return 0.0, 1.0
        if metric in LOGPROB_METRICS:
            return -10.0, 0.0
        if metric not in self.token_metrics:
            raise KeyError(f"no token metric {metric!r}; this run has {', '.join(self.token_metrics)}")
        key = (metric, scope, tuple(sorted(steps)) if steps is not None and scope == "step" else None)
        if key in self._domains:
            self._domains.move_to_end(key)
        else:
            # a fixed, spread-out subset of samples is enough for a p99, and keeps this fast on
            # runs of hundreds of millions of tokens (only their row groups are read)
            cond = f"WHERE step IN ({', '.join(str(int(s)) for s in key[2])})" if key[2] else ""
            ids = [i for (i,) in self._rel.execute(
                f"SELECT sample_id FROM _nums {cond} ORDER BY hash(sample_id) LIMIT {DOMAIN_SAMPLES}").fetchall()]
            toks = self.held_tokens(ids)
            toks = toks[toks["trained"].fillna(True).astype(bool)] if "trained" in toks else toks  # the loss's
            vals = toks[metric].to_numpy(dtype="float64", na_value=np.nan) if metric in toks else np.zeros(0)
            vals = vals[np.isfinite(vals)]
            if metric in SIGNED_METRICS:
                q = float(np.quantile(np.abs(vals), 0.99)) if len(vals) else 0.0
                q = q if q > 0 else 1.0
                self._domains[key] = (-q, q)
            else:
                q = float(np.quantile(vals, 0.99)) if len(vals) else 0.0
                self._domains[key] = (0.0, q if q > 0 else 1.0)
            while len(self._domains) > MAX_DOMAINS:  # each distinct steps list is a key: a browser can ask many
                self._domains.popitem(last=False)
        return self._domains[key]

    def query_frame(self, query: str, params: list | None = None) -> pd.DataFrame:
        """A query of the package's own (the charts', the groups') on the run's database, its internal tables
        too; user SQL goes through ``sql``, in the sandbox."""
        return self._rel.execute(query, params).df()

    def sql(self, query: str, params: list | None = None) -> pd.DataFrame:
        """Run one SQL statement over the ``samples`` and ``tokens`` views; returns a DataFrame.

        It runs in a sandbox, a DuckDB database of its own holding the run's data and nothing else: it cannot write
        or read files, attach databases, load extensions or change settings (a ``SandboxError``, both a
        PermissionError and a ValueError, says so), and what it makes (a view, a table) lasts the one call."""
        if isinstance(query, str) and re.search(r"\btokens\b", query, re.IGNORECASE):  # not a column: n_tokens
            self._rel.map_token_files()
        return self._sandbox.query(self._rel, query, params)

    @property
    def columns(self) -> list[str]:
        """Column names of ``samples``."""
        self._rel.follow()  # (a set's runs may have refreshed on their own)
        # as the views were made (``samples`` is ``_samples_raw`` without file_no): a DESCRIBE of the view reads the
        # footers of its parts, ~20 ms on a thousand
        return [c for c in self._rel.nums.kinds if c != "file_no"]

    @property
    def problems(self) -> pd.DataFrame:
        """Every problem found: file, line, kind, message."""
        return problemsmod.problems_frame(self._rel.problems())

    @property
    def files(self) -> pd.DataFrame:
        """The log files read: number, path, bytes, lines read, problems (those of ``problems`` in the file, whether
        found as a line was read or by the run across the file's parts), lines skipped unread (``skipped``)."""
        self._rel.follow()
        found = Counter(p.file for p in self._rel.problems())
        rows = [{"file_no": self._rel.files.file_no[p], "file": p, "bytes": st.size, "lines": st.lines,
                 "problems": found[p], "skipped": st.skipped} for p, st in self._rel.file_states().items()]
        columns = ["file_no", "file", "bytes", "lines", "problems", "skipped"]
        return pd.DataFrame(rows, columns=columns).sort_values("file_no").reset_index(drop=True)

    @property
    def skipped_lines(self) -> int:
        """Lines left unread: their step, told from their bytes, is past the per-step cap or out of the step range.
        Their records were never parsed, so their problems are not in ``problems`` (0 when the run was read from a
        cache of every line, made by an open without those options)."""
        return sum(st.skipped for st in self._rel.file_states().values())

    def close(self) -> None:
        """Release the DuckDB connection (and the lease on the cache parts the views read)."""
        self._rel.lease.release()
        self._rel.cursors.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return self.summary()
