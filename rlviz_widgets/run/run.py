"""Run: the log frames and queries of one training run, answered by DuckDB over the cache."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import math
import os
import re
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from rlviz_widgets import _problems as problemsmod
from rlviz_widgets._ingest.custom_columns import (
    RESERVED,
    column_names,
    extra_column,
    listed_column,
    load_names,
    plain_column,
    save_names,
    stored_column,
)
from rlviz_widgets._ingest.metrics import per_token_sql
from rlviz_widgets._ingest.readers import READERS
from rlviz_widgets._ingest.readers.detect import detect
from rlviz_widgets._ingest.readers.rlb import DEFAULT_PAD_TOKEN, non_scalar_message
from rlviz_widgets._ingest.readers.selective import SelectiveReader
from rlviz_widgets._ingest.sources import NoLogsError, absolute, resolve, source_folders, source_key
from rlviz_widgets._problems import Problem
from rlviz_widgets._progress import Progress
from rlviz_widgets._sql import bin_count, ident, literal, mean_sql, std_sql
from rlviz_widgets._store import cache as cachemod
from rlviz_widgets._store import file_numbers, leases, token_store
from rlviz_widgets.run import _sqlguard as sqlguard
from rlviz_widgets.run.options import OpenOptions

ID_STRIDE = 1_000_000_000  # sample_id = file_no * ID_STRIDE + line: readable, and exact in JavaScript
STAT_COLUMNS = {  # steps frame: output prefix -> samples column
    "reward": "reward", "ref_reward": "ref_reward", "reward_gap": "reward_gap",
    "kl": "kl_mean", "log_ratio": "log_ratio_mean", "length": "n_tokens", "chars": "response_chars",
}
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
TOKEN_FIELDS = {  # stored list column -> tokens frame column
    "tokens": "token", "logprobs": "logprob", "ref_logprobs": "ref_logprob",
    "values": "value", "token_rewards": "token_reward",
}


TOKEN_METRIC_ORDER = ("token_reward", "kl", "log_ratio", "logprob", "ref_logprob", "prob", "ref_prob", "value")
SIGNED_METRICS = ("token_reward", "log_ratio", "value")
DOMAIN_SAMPLES = 400  # samples whose tokens set a step's or the run's colour limits


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


def _selective(reader, options: OpenOptions) -> SelectiveReader | None:
    """The reader that skips what a cap and a step range leave out, if any is set and the format allows it."""
    cap = options.cap()
    if (cap is None and options.steps == (None, None)) or reader.step_key() is None:
        return None
    return SelectiveReader(reader, cap, *options.whole_steps())


def _same_step_files(files: list[Path], reader) -> list[Problem]:
    """A file named as one in another folder, in a format whose file names give the step (verl's ``12.jsonl``):
    their samples are merged into the same steps, which two dumps of one run (verl's rollouts and validation
    folders) or two runs side by side should not be."""
    if not getattr(reader, "step_pattern", None):
        return []
    first: dict[str, Path] = {}
    out = []
    for f in files:
        if reader.name_step(f.name) is None:  # not a name that gives a step (columns=: a rank's file)
            continue
        other = first.setdefault(f.name, f)
        if other is not f:
            out.append(Problem(str(f), 0, "same_step_file", f"named as {other}: the samples of both are read as the "
                               "same step's (two dumps, such as a run's rollouts and its validation? open each folder "
                               "on its own) (line 0: the file as a whole)"))
    return out


def _id_list(sample_ids) -> list[int]:
    """One sample id or many, as ints; anything else (text, 1.5, None) is a TypeError that says what was given."""
    if isinstance(sample_ids, (str, bytes)) or not isinstance(sample_ids, Iterable):
        return [_sample_id(sample_ids)]
    return [_sample_id(i) for i in sample_ids]


def _sample_id(i) -> int:
    if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
        return int(i)
    if isinstance(i, (float, np.floating)) and float(i).is_integer():  # ids from a float column (pandas, NaN)
        return int(i)
    raise TypeError(f"sample ids are whole numbers (run.samples['sample_id']), not {i!r}")


def _by_file(ids: list[int]) -> dict[int, list[int]]:
    by_file: dict[int, list[int]] = {}
    for i in ids:
        by_file.setdefault(i // ID_STRIDE, []).append(i % ID_STRIDE)
    return by_file



def _after_last(expr: str, marker: str) -> str:
    """SQL: the text of ``expr`` after the last occurrence of ``marker`` (all of it without one).

    ``string_split`` finds occurrences left to right without overlap (a regular expression was ~50x slower): the
    last one may start up to ``len(marker) - 1`` characters later, overlapping the last found ("\\n\\n" in
    "\\n\\n\\nQ"). It can only where the marker's last ``len(marker) - k`` characters are also its first, and the
    text after the found one starts with the marker's last ``k`` (and one was found): those ``k`` are checked, the
    largest first.
    """
    piece, n = f"string_split({expr}, {literal(marker)})[-1]", len(marker)
    shifts = [k for k in range(n - 1, 0, -1) if marker[k:] == marker[:n - k]]
    if not shifts:
        return piece
    cases = " ".join(f"WHEN starts_with({piece}, {literal(marker[n - k:])}) THEN substr({piece}, {k + 1})"
                     for k in shifts)
    return f"(CASE WHEN NOT contains({expr}, {literal(marker)}) THEN {expr} {cases} ELSE {piece} END)"


def _connect() -> duckdb.DuckDBPyConnection:
    db = duckdb.connect()  # private, in memory: views and the numeric table live here
    # Parquet footers parsed once, not on every page request (cache parts never change in place)
    db.execute("SET GLOBAL parquet_metadata_cache = true")
    cachemod.spill_to_temp(db)
    # no setting changes after this one: run.sql's CALL and PRAGMA could otherwise turn on DuckDB's logging or
    # profiling to a file (into the log folder), or change the run's threads or memory under it
    db.execute("SET lock_configuration = true")
    return db


def _connect_in_background() -> Future:
    """A new database, made in a thread: building DuckDB's catalog takes a few tens of ms, which the
    first open spends reading its first chunks instead."""
    future: Future = Future()

    def work() -> None:
        try:
            future.set_result(_connect())
        except BaseException as e:  # raised where the connection is first needed
            future.set_exception(e)

    threading.Thread(target=work, name="rlviz-connect", daemon=True).start()
    return future


def _settle(future: Future) -> None:
    """Wait for a connection being made in the background, when what needed it failed: a thread still inside
    DuckDB when the interpreter exits aborts the process (exit code 134, after the caller's traceback)."""
    try:
        future.result()
    except BaseException:  # noqa: BLE001 - the caller's error is the one to raise
        pass


def open_run(source, *, format: str = "auto", columns: dict[str, str] | None = None, tokenizer=None,
             pad_token: str | None = DEFAULT_PAD_TOKEN,
             system_prompt_end: str | None = None, max_samples_per_step: int | None = None,
             steps: tuple[int | None, int | None] | None = None, cache_dir: str | os.PathLike | None = None,
             progress: bool = True) -> Run:
    """Open rollout logs: a folder (every log file below it), a file, a glob, or a list of these.

    ``format`` is ``"auto"`` (from the file names and first records), ``"rlb"`` (RL Logging
    Board schema), ``"verl"``, ``"trl"``, ``"openinstruct"``, ``"nemo"`` or ``"columns"``.
    ``columns`` maps common names to the file's field names (``{"reward": "score"}``), for any
    other JSON-lines dump. ``tokenizer`` (anything with ``convert_ids_to_tokens`` or ``decode``)
    spells logged token ids; without one they are shown as ``#1234``.

    ``pad_token`` is stripped from displayed texts; prompt text before the last
    ``system_prompt_end`` marker is dropped; at most ``max_samples_per_step`` samples are
    kept per step (the first ones, in line order across rank files); ``steps=(lo, hi)``
    keeps an inclusive step range. With either, the lines they leave out are skipped unread
    where each line's step can be told from its bytes (``run.skipped_lines`` counts them; their
    problems go unreported). The columnar cache lives in ``cache_dir`` (default:
    ``$RLVIZ_CACHE_DIR`` or the user cache dir), never in the log folder. ``progress``: a progress bar
    (in a notebook, else in the terminal) when a first open takes more than half a second.
    """
    return Run.with_options(source, OpenOptions(
        format=format, columns=columns, tokenizer=tokenizer, pad_token=pad_token, system_prompt_end=system_prompt_end,
        max_samples_per_step=max_samples_per_step, steps=steps, cache_dir=cache_dir, progress=progress))


def _plan(cache: cachemod.FileCache, unreadable: dict[str, str] | None = None) -> tuple[cachemod.FileState, int] | None:
    """``cache.plan``, or None for a file gone since it was listed (a job restarting deletes and writes it anew)
    or that cannot be read (added to ``unreadable``: path -> why)."""
    try:
        with open(cache.path, "rb"):  # readable at all (a file of another user's, mode 000): else skipped, said so
            pass
        return cachemod.plan(cache)
    except FileNotFoundError:
        return None
    except OSError as e:
        if unreadable is not None:
            unreadable[str(cache.path)] = e.strerror or type(e).__name__
        return None


class Run:
    """A training run's rollout logs as lazy log frames (pandas out, DuckDB inside)."""

    _NUMS_BY_FILE = True  # _nums brought up to date file by file (not for a RunSet: its runs' files share numbers)

    def __init__(self, source, *, format: str = "auto", columns: dict[str, str] | None = None, tokenizer=None,
                 pad_token: str | None = DEFAULT_PAD_TOKEN,
                 system_prompt_end: str | None = None, max_samples_per_step: int | None = None,
                 steps: tuple[int | None, int | None] | None = None, cache_dir=None, progress: bool = True):
        self._start(source, OpenOptions(format=format, columns=columns, tokenizer=tokenizer, pad_token=pad_token,
                                        system_prompt_end=system_prompt_end,
                                        max_samples_per_step=max_samples_per_step, steps=steps,
                                        cache_dir=cache_dir, progress=progress))

    @classmethod
    def with_options(cls, source, options: OpenOptions) -> Run:
        """``Run(source, ...)`` with its options given as one ``OpenOptions``."""
        run = cls.__new__(cls)
        run._start(source, options)
        return run

    def _start(self, source, options: OpenOptions) -> None:
        self._db_future = _connect_in_background()
        try:
            self._open(source, options)
        except BaseException:
            _settle(self._db_future)
            raise

    def _open(self, source, options: OpenOptions) -> None:
        self.options = options
        self.source = source = absolute(source)
        format = detect(source, options.columns) if options.format == "auto" else options.format
        self.format = format
        self.pad_token = options.pad_token or None
        self.system_prompt_end = options.system_prompt_end or None
        self.max_samples_per_step = options.max_samples_per_step
        self.step_range = options.steps
        self.cache_root = options.cache_root()
        self._reader = READERS[format](columns=options.columns, tokenizer=options.tokenizer)
        # a cap or a range: files never read before are read through a reader that skips the lines left out
        self._selective = _selective(self._reader, options)
        self._progress = options.progress
        self._file_no: dict[str, int] = {}
        self._states: dict[str, cachemod.FileState] = {}
        self._caches: dict[str, cachemod.FileCache] = {}
        self._pending: list[Problem] = []
        self._listed: list[Problem] = []  # lists or objects in a field the run has numbers or text in (``_listed_in``)
        self._removed: dict[str, Problem] = {}  # files gone since read (said in ``problems`` until they are back)
        # custom field key -> its samples column: kept while open, and for the next open of the same logs
        self._names_file = self.cache_root / "column_names" / (hashlib.sha1(
            f"{self._reader.name}\n{source_key(source)}".encode()).hexdigest()[:20] + ".json")
        self._column_names: dict[str, str] = load_names(self._names_file)
        self._steps_cache: pd.DataFrame | None = None
        self._where_checked: tuple = (None, "")  # ((where, generation), the condition sqlguard gave)
        self._init_token_sources()
        self.generation = 0  # bumped whenever the data changes (new lines, new files)
        with contextlib.ExitStack() as held:
            self._refresh(True, held)

    @property
    def _db(self) -> duckdb.DuckDBPyConnection:
        """The run's database (waits for it the first time)."""
        return self._db_future.result()

    # -- reading ---------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Read what was appended or added since the last read; True if anything changed (samples or problems)."""
        with contextlib.ExitStack() as held:
            return self._refresh(False, held)

    def _refresh(self, _first: bool, held: contextlib.ExitStack) -> bool:
        reader = self._reader
        what = f"{self.format} files: {reader.file_pattern}" if reader.file_pattern else ""
        found: list[tuple[str, str, str]] = []  # what the folders hold but cannot be read
        try:
            files = resolve(self.source, reader.suffixes, reader.accepts, what, found)
        except NoLogsError:
            if _first:
                raise
            files = []  # every file of a followed run gone: each said so below, the run empty until they are back
        self._check_cache_location(files)
        if any(str(f) not in self._file_no for f in files):  # numbers of known files never change
            with self._writable_cache():
                given = file_numbers.assign(self.cache_root, [str(f) for f in files], self._file_no)
            self._file_no = file_numbers.keeping(self._file_no, given)
        caches = [self._cache_for(f) for f in files]
        # every file's cache is locked from its first look until the views read it and their lease names it (the
        # end of the refresh): prune_cache in another process must not take a folder in between (it takes only
        # what it can lock and no lease names). A read-only cache is read without its locks.
        held.enter_context(cachemod.locked(caches, quiet=True))
        unreadable: dict[str, str] = {}
        plans = [_plan(c, unreadable) for c in caches]
        if _first and unreadable and len(unreadable) == len(files):  # nothing to show: say why at once
            path, why = next(iter(unreadable.items()))
            raise NoLogsError(f"no log file can be read: {path} ({why})"
                              + (f" and {len(files) - 1} more" if len(files) > 1 else ""))
        gone = {str(c.path) for c, p in zip(caches, plans) if p is None}  # since listed (a job restarting)
        caches, plans = [c for c, p in zip(caches, plans) if p], [p for p in plans if p]
        busy = [i for i, (_, n) in enumerate(plans) if n]
        old_pending = self._pending
        renamed = set(self._renamed())
        changed = _first
        merged = False  # parts remade with the same records (merged): the views and their lease must follow
        # files with something to read are planned again (under the locks taken above, for which another kernel
        # reading them was waited: what it read is not read again)
        with self._writable_cache():
            for i in busy:
                plan = _plan(caches[i], unreadable)
                if plan is None:
                    gone.add(str(caches[i].path))
                plans[i] = plan or (plans[i][0], 0)
            todo = sum(n for _, n in plans)
            bar = Progress(todo, sum(1 for _, n in plans if n), enabled=self._progress and _first)
            try:
                todo_jobs = [(c, state) for c, (state, n) in zip(caches, plans) if n]
                befores = [len(state.problems) for _, state in todo_jobs]
                results = self._update(todo_jobs, bar)
                updated = {str(c.path): (r, before) for (c, _), r, before in zip(todo_jobs, results, befores)}
                for _ in range(3):  # a file rewritten while it was read (a job restarted) is read again, afresh
                    stale = [c for (c, _), (st, _) in zip(todo_jobs, results) if cachemod.is_stale(st)]
                    if not stale:
                        break
                    again = [(c, _plan(c, unreadable)) for c in stale]
                    gone |= {str(c.path) for c, p in again if p is None}
                    todo_jobs = [(c, p[0]) for c, p in again if p is not None]
                    results = self._update(todo_jobs, bar)
                    updated.update({str(c.path): (r, 0) for (c, _), r in zip(todo_jobs, results)})
            finally:
                bar.close()
        pending = [Problem(path, 0, kind, f"{message} (line 0: the {kind.split('_')[-1]} as a whole)")
                   for path, kind, message in found]
        pending += [Problem(path, 0, "unreadable_file", f"the file cannot be read ({why}): its samples are "
                            + ("as read before" if path in self._states else "left out")
                            + " (line 0: the file as a whole)") for path, why in unreadable.items()]
        pending += _same_step_files(files, reader)
        new_problems: list[Problem] = []
        # new dicts, swapped in whole: queries in other threads iterate the old ones meanwhile
        states, file_caches = dict(self._states), dict(self._caches)
        for c, (state, n) in zip(caches, plans):
            if str(c.path) in gone:
                continue
            if n:
                (state, p), before = updated[str(c.path)]
                if cachemod.is_stale(state):  # rewritten during every read: what was read may mix two contents
                    old = self._states.get(str(c.path))
                    pending.append(Problem(state.path, 0, "changing_file", (
                        "the file changed each time it was read (a job rewriting it?): "
                        + ("its samples are as read before" if old else "its samples are left out")
                        + " until it settles (line 0: the file as a whole)")))
                    if old is None:
                        states.pop(str(c.path), None)
                    continue  # else ``states`` holds the old state still
                old = self._states.get(str(c.path))
                # read, but maybe only blanks: a change if it gave records or problems, or was read afresh
                changed = (changed or old is None or (old.epoch, old.records) != (state.epoch, state.records)
                           or len(state.problems) != before)
                merged = merged or (old is not None and old.parts != state.parts)
                pending += p
                if not _first:
                    new_problems += [Problem(state.path, *q) for q in state.problems[before:]]
            else:
                # nothing left to read: yet another Run (another kernel) may have read new lines or problems
                old = self._states.get(str(c.path))
                # (problems compared whole: another problem may stand in the place of one)
                if old is not None and (old.parts != state.parts or old.problems != state.problems):
                    changed = True
                    seen = len(old.problems) if old.epoch == state.epoch else 0
                    new_problems += [Problem(state.path, *q) for q in state.problems[seen:]]
                elif old is None and not _first:
                    # new to this run, its cache complete already: a file back after it was gone, or one another
                    # Run read first (its samples were left out of the views, and refresh said nothing changed)
                    changed = changed or bool(state.parts)
                    new_problems += [Problem(state.path, *q) for q in state.problems]
                if state.consumed < state.size:
                    pending += self._pending_for(state)
            states[str(c.path)] = state
            file_caches[str(c.path)] = c
        cachemod.drop_expired([(c, state) for c, (state, n) in zip(caches, plans) if not n], held=True)
        # a file that cannot be read now (or is in a folder that cannot be listed now) keeps what was read of it
        # before, if anything
        hidden = [Path(path) for path, kind, _ in found if kind == "unreadable_folder"]
        present = ({str(c.path) for c in caches} - gone) | set(unreadable) | {
            p for p in states if any(folder in Path(p).parents for folder in hidden)}
        removed = {p: q for p, q in self._removed.items() if p not in present}  # back: no longer said
        for path in [p for p in states if p not in present]:  # deleted (or renamed) since the last read
            del states[path], file_caches[path]
            changed = True
            removed[path] = Problem(path, 0, "file_removed", "the file is gone: its samples left the run "
                                                             "(line 0: the file as a whole)")
            new_problems.append(removed[path])
        self._states, self._caches, self._pending, self._removed = states, file_caches, pending, removed
        new_problems += [p for p in self._renamed() if p not in renamed]
        if changed:  # before the views: a refresh that brings a field's numbers says where its lists were
            listed, self._listed = set(self._listed), self._listed_in()
            new_problems += [p for p in self._listed if p not in listed]
        # an unfinished last line that appeared or went is news too (not its byte count growing: no rebuild)
        moved = {(p.file, p.line) for p in pending} != {(p.file, p.line) for p in old_pending}
        if changed or merged:
            with self._token_lock:  # new token files and the generation saying so: seen together (RunSet)
                self._build_views()
                self._steps_cache = None
                self.generation += 1
        elif moved or new_problems:  # problems only (a new empty file): no rebuild, but news to a view
            self.generation += 1
        shown = self._all_problems() if _first else new_problems + [p for p in pending if p not in old_pending]
        problemsmod.warn(shown)
        if _first:
            self._check_options()
        return changed or moved or bool(new_problems)

    def _check_options(self) -> None:
        """An OptionWarning for an option that kept nothing or changed nothing: it looked like a log without
        samples, or a prompt without a system prompt (a marker misspelt)."""
        n = self.n_samples if self._states else 0
        parts = self._parts()
        lo, hi = self.step_range
        if (lo is not None or hi is not None) and self._states and not n:
            # only where the logs hold samples (an empty log, or a followed run before its first lines, is no news)
            held, first, last = self._execute(f"SELECT count(*), min(step), max(step) FROM "
                                              f"({self._samples_sql(parts)})").fetchall()[0] if parts else (0, 0, 0)
            if held or self.skipped_lines:
                span = f"; their steps run {first}..{last}" if held else ""
                problemsmod.warn_option(f"steps=({lo}, {hi}) keeps no sample of these logs ({held + self.skipped_lines}"
                                        f" samples of other steps{span})")
        mapped = getattr(self._reader, "columns", {})  # columns=: common name -> the logs' field
        if mapped and self._states:
            cols = [c for c in mapped if c in self.columns and c not in ("sample_id", "line")]
            listed = ", ".join(f"count({ident(c)})" for c in cols)
            counts = self._execute(f"SELECT {listed} FROM _samples_raw").fetchall()[0] if cols and n else []
            empty = [c for c, k in zip(cols, counts) if not k]
            if "step" in mapped and not n and any(p.kind == "missing_step" for p in self._all_problems()):
                empty.append("step")  # every record skipped for want of it (not kept out by a step range)
            bad_type = {p.message.split(" is ", 1)[0] for p in self._all_problems() if p.kind == "wrong_type"}
            for c in empty:
                lost = "every record was skipped" if c == "step" else f"{c} is empty"
                if mapped[c] in bad_type:  # the field is there, its values are not of the kind (the LogWarning says)
                    problemsmod.warn_option(f"columns= maps {c!r} to {mapped[c]!r}, whose values are all of the "
                                            f"wrong type (see the LogWarning): {lost}")
                else:
                    problemsmod.warn_option(f"columns= maps {c!r} to {mapped[c]!r}, which no record holds a value "
                                            f"of: {lost} (a misspelt field?)")
        if self.system_prompt_end and parts:
            src = f"{self._source_sql(parts, None, [])} s"
            # the first prompt holding the marker ends the scan: only a marker no prompt holds reads them all
            if not self._execute(f"SELECT 1 FROM {src} WHERE contains(s.prompt, {literal(self.system_prompt_end)}) "
                                 "LIMIT 1").fetchall():
                prompts = self._execute(f"SELECT count(s.prompt) FROM {src}").fetchall()[0][0]
                if prompts:
                    problemsmod.warn_option(f"system_prompt_end={self.system_prompt_end!r} occurs in none of the "
                                            f"{prompts} prompts: they are kept whole")

    def _cache_for(self, path: Path) -> cachemod.FileCache:
        """A file's cache: the full one (every line read), or with a cap or a step range, one of the lines they may
        keep. A file keeps the kind it was first given; a full cache that can serve is used whatever the options."""
        known = self._caches.get(str(path))
        if known is not None:
            return cachemod.FileCache(self.cache_root, path, known.reader_name)
        full = cachemod.FileCache(self.cache_root, path, self._reader.name)
        if self._selective is None or cachemod.reusable(full):
            return full
        return cachemod.FileCache(self.cache_root, path, self._selective.name)

    def _update(self, jobs: list[tuple[cachemod.FileCache, cachemod.FileState]], bar: Progress) -> list:
        """``cache.update_files`` of each job, through the reader its cache is of; results in the jobs' order."""
        readers = {r.name: r for r in (self._reader, self._selective) if r is not None}
        out: list = [None] * len(jobs)
        for name, reader in readers.items():
            mine = [i for i, (c, _) in enumerate(jobs) if c.reader_name == name]
            if mine:
                results = cachemod.update_files(self._db_future, [jobs[i] for i in mine], reader, bar.bytes,
                                                bar.file_done)
                for i, r in zip(mine, results):
                    out[i] = r
        return out

    @contextlib.contextmanager
    def _writable_cache(self):
        """A cache dir we may not write to is named in the error, with the way out (a warm cache opens read-only)."""
        try:
            yield
        except OSError as e:
            # a read-only mount too (EROFS; pyarrow's writer says so in its message, without the errno's name)
            if not isinstance(e, PermissionError) and e.errno != errno.EROFS and "Read-only file system" not in str(e):
                raise
            where = Path(os.path.abspath(e.filename)) if e.filename is not None else self.cache_root
            root = self.cache_root
            if where != root and root not in where.parents and where not in root.parents:
                raise  # not the cache's (a log that cannot be read is skipped and reported before this)
            why = f"{e.strerror}: {e.filename}" if e.filename is not None else str(e)
            raise PermissionError(f"cannot write the cache in {self.cache_root} ({why}): pass "
                                  "cache_dir= or set $RLVIZ_CACHE_DIR to a folder you can write") from e

    def _pending_for(self, state: cachemod.FileState) -> list[Problem]:
        try:
            with open(state.path, "rb") as f:  # blanks after the last newline are no line (as the first read found)
                f.seek(state.consumed)
                if not f.read(min(state.size - state.consumed, 1 << 16)).strip():
                    return []
        except FileNotFoundError:  # gone since it was planned: the next refresh says so
            return []
        return [Problem(state.path, state.lines + 1, "incomplete_last_line",
                        f"{state.size - state.consumed} bytes without a newline (a job still writing?): "
                        "skipped until the line is complete")]

    def _check_cache_location(self, files: list[Path]) -> None:
        named = source_folders(self.source, globs=False)
        for d in source_folders(self.source) | {f.parent for f in files}:
            if self.cache_root == d or d in self.cache_root.parents:
                if d not in named and self.cache_root == cachemod.user_cache_root() and d != self.cache_root:
                    # the platform's own (~/.cache/...) by log files in ~, named or matched by a glob (which passes
                    # over hidden folders, as the cache's): no choice of the user's
                    continue
                raise ValueError(f"the cache dir {self.cache_root} is inside the log folder {d}; "
                                 "logs are read-only to rlviz_widgets: choose another cache_dir")

    def _parts(self, file_nos: Iterable[int] | dict[int, list[int]] | None = None) -> list[tuple[int, str]]:
        """(file_no, parquet path) of every cache part, optionally only of some files.

        Given ``{file_no: lines}``, only the parts holding those lines: a huge log has hundreds of
        parts per file, and a page of rows should open one or two of them.
        """
        if isinstance(file_nos, dict):
            out = []
            for p, st in self._states.items():
                lines = file_nos.get(self._file_no[p])
                if not lines:
                    continue
                lo, hi = min(lines), max(lines)
                paths = self._caches[p].part_paths(st)
                for path, (first, last) in zip(paths, st.part_lines):  # one [first, last] per part
                    if first <= hi and last >= lo and any(first <= x <= last for x in lines):
                        out.append((self._file_no[p], path))
            return out
        wanted = None if file_nos is None else set(file_nos)
        return [(self._file_no[p], part) for p, st in self._states.items()
                if wanted is None or self._file_no[p] in wanted
                for part in self._caches[p].part_paths(st)]

    def _custom_keys(self) -> list[str]:
        """Every custom key, file by file, each file's by the line it first holds it (then by name): the same order
        however the file was read (whole, in chunks, or grown and read on)."""
        return list(dict.fromkeys(k for st in self._states.values()
                                  for k, _ in sorted(st.columns, key=lambda c: (c[1], c[0]))))

    def _names(self, names: dict[str, str] | None = None) -> dict[str, str]:
        """``names`` (default: the run's own, kept for its next open) with every custom field of the run named."""
        own = names is None
        names = self._column_names if own else names
        known = len(names)
        column_names(self._custom_keys(), names)
        # names are kept for the next open only from every line: a cache of a cap's lines lacks some keys, and
        # names it gave would stick to a later open of every line (``Score`` kept, ``score`` renamed)
        if own and len(names) > known and self._names_file is not None and all(
                c.reader_name == self._reader.name for c in self._caches.values()):
            save_names(self._names_file, names)
        return names

    def _extras(self, names: dict[str, str] | None = None) -> list[tuple[str, str]]:
        """(stored column, samples column) of each custom field, named by ``names`` (default: the run's)."""
        names = self._names(names)
        return [(stored_column(k), names[k]) for k in self._custom_keys()]

    def _optional(self) -> list[str]:
        """The optional common columns some record of the run has."""
        return [c for c in cachemod.OPTIONAL_COLUMNS if any(c in st.optional for st in self._states.values())]

    def _own_renames(self) -> frozenset[str]:
        """Fields the format writes beside a common column of their name (``RLBReader.own_renames``)."""
        return self._reader.own_renames

    def _renamed(self, names: dict[str, str] | None = None) -> list[Problem]:
        """A custom field whose column is not its cleaned name (a column of the run's own, or another field, has
        that): where it first is."""
        names = self._names(names)
        own = self._own_renames()
        out = []
        for st in self._states.values():
            for key, line in st.columns:
                if key in own:
                    continue
                plain = plain_column(key)
                if names[key] != extra_column(key):
                    why = "its plain name is, or was, another field's"
                elif extra_column(key) != plain:
                    why = f"the run has a column {plain.lower()} of its own"
                else:
                    continue
                out.append(Problem(st.path, line, "renamed_field",
                                   f"field {problemsmod.short(key)!r} is kept as column {names[key]} ({why})"))
        return out

    def _listed_in(self) -> list[Problem]:
        """Lines where a custom field held a list or an object, in a part where it held nothing else, when the run
        has numbers or text in it (its column is empty there). A part holding both reports them as it is read."""
        keys = set(self._custom_keys())
        out = []
        for path, st in self._states.items():
            found = [k for k in st.listed if k in keys]
            if not found:
                continue
            parts = "[" + ", ".join(literal(p) for p in self._caches[path].part_paths(st)) + "]"
            cols = [listed_column(k) for k in found]
            with self._db.cursor() as cur:
                rows = cur.execute(
                    f"SELECT line, {', '.join(cols)} FROM read_parquet({parts}, union_by_name=true) "
                    f"WHERE {' OR '.join(f'{c} IS NOT NULL' for c in cols)} ORDER BY line").fetchall()
            for line, *kinds in rows:
                out += [Problem(path, line, "wrong_type", non_scalar_message(k, kind))
                        for k, kind in zip(found, kinds) if kind is not None]
        return out

    def _samples_sql(self, parts: list[tuple[int, str]], where: str = "",
                     lines: dict[int, list[int]] | None = None, names: dict[str, str] | None = None,
                     pad: bool = False) -> str:
        """Samples of the given cache parts, texts cleaned, no run options applied (``pad``: see ``_source_sql``)."""
        if not parts:
            return ("SELECT NULL::BIGINT sample_id, NULL::BIGINT step, NULL::VARCHAR prompt, NULL::VARCHAR response, "
                    "NULL::DOUBLE reward, NULL::VARCHAR ref_response, NULL::DOUBLE ref_reward, "
                    "NULL::DOUBLE reward_gap, "
                    "NULL::VARCHAR ground_truth, NULL::BIGINT response_chars, NULL::INTEGER n_tokens, "
                    "NULL::DOUBLE log_ratio_mean, NULL::DOUBLE log_ratio_sum, NULL::DOUBLE kl_mean, "
                    "NULL::DOUBLE kl_sum, NULL::DOUBLE logprob_mean, NULL::DOUBLE value_mean, "
                    "NULL::DOUBLE token_reward_sum, NULL::VARCHAR file, NULL::BIGINT line, NULL::BIGINT file_no "
                    "WHERE false")
        extras = [(c, c) for c in self._optional()] + self._extras(names)
        extra_sel = "".join(f', s.{stored} AS "{column}"' for stored, column in extras)
        return f"""SELECT s.file_no::BIGINT * {ID_STRIDE} + s.line AS sample_id, s.step,
                   {self._text('s.prompt', prompt=True)} AS prompt, {self._text('s.response')} AS response,
                   s.reward, {self._text('s.ref_response')} AS ref_response, s.ref_reward, s.reward_gap,
                   s.ground_truth, {self._response_chars()} AS response_chars, s.n_tokens, s.log_ratio_mean,
                   s.log_ratio_sum, s.kl_mean, s.kl_sum, s.logprob_mean, s.value_mean, s.token_reward_sum {extra_sel},
                   s.file AS file, s.line AS line, s.file_no AS file_no
            FROM {self._source_sql(parts, lines, [(stored, self._type_of(c)) for stored, c in extras], pad)} s
            {where}"""

    def _response_chars(self) -> str:
        """The length of the response as shown (without pad tokens): counted when read for the default pad token,
        here for another (which reads every response's text)."""
        if not self.pad_token:
            return "s.response_chars"
        if self.pad_token == DEFAULT_PAD_TOKEN:
            return "s.response_chars - coalesce(s.response_pad_chars, 0)"
        return f"length({self._text('s.response')})::BIGINT"

    def _type_of(self, column: str) -> str:
        """A samples column's SQL type ("NULL" before the views are made)."""
        return self._kinds.get(column, '"NULL"')

    def _source_sql(self, parts: list[tuple[int, str]], lines: dict[int, list[int]] | None = None,
                    extras: Iterable[tuple[str, str]] = (), pad: bool = False) -> str:
        """The cache parts as one relation with file_no and file columns.

        With ``lines`` (file_no -> line numbers), each file is read on its own with the line filter
        pushed into the Parquet scan, so only the row groups holding those lines are read. With ``pad``
        too, or with ``lines``, the ``extras`` columns the parts lack are there, empty.
        """
        if lines is None and pad:
            lines = {n: None for n, _ in parts}
        if lines is None:
            plist = "[" + ", ".join(literal(p) for _, p in parts) + "]"
            files = ", ".join(f"({n}, {literal(p)}, {literal(self._path_of(n))})" for n, p in parts)
            return (f"(SELECT r.* EXCLUDE (filename), m.file_no, m.file "
                    f"FROM read_parquet({plist}, filename=true, union_by_name=true) r "
                    f"JOIN (VALUES {files}) m(file_no, parquet, file) ON r.filename = m.parquet)")
        selects = []
        for n in sorted(lines):
            plist = "[" + ", ".join(literal(p) for f, p in parts if f == n) + "]"
            if plist == "[]":
                continue
            kept = "" if lines[n] is None else f"WHERE r.line IN ({', '.join(map(str, sorted(set(lines[n]))))})"
            selects.append(f"SELECT r.*, {n}::BIGINT AS file_no, {literal(self._path_of(n))} AS file "
                           f"FROM read_parquet({plist}, union_by_name=true) r {kept}")
        # the parts read may lack some optional or custom fields the run has: empty there, of the type they have
        # in samples (a page of numbers stays numbers)
        selects.append(f"SELECT {', '.join(['NULL AS line', *(f'NULL::{t} AS {c}' for c, t in extras)])} WHERE false")
        return "(" + " UNION ALL BY NAME ".join(selects) + ")"

    def _path_of(self, file_no: int) -> str:
        if not hasattr(self, "_paths") or len(self._paths) != len(self._file_no):
            self._paths = {n: p for p, n in self._file_no.items()}
        return self._paths[file_no]

    def _samples_raw_sql(self, names: dict[str, str] | None = None, parts: list[tuple[int, str]] | None = None) -> str:
        """Every sample passing the run's options (step range, per-step cap), texts cleaned (``parts``: of those cache
        parts only, each column there even where they lack it)."""
        where = []
        lo, hi = self.options.whole_steps()
        if lo is not None:
            where.append(f"step >= {lo}")
        if hi is not None:
            where.append(f"step <= {hi}")
        qualify = ""
        if self.max_samples_per_step:
            # ties of line number broken by path, not file number: numbers follow the order a cache dir first
            # saw the files, so the same logs would keep other samples on another cache
            qualify = (f"QUALIFY row_number() OVER (PARTITION BY step ORDER BY line, file) "
                       f"<= {int(self.max_samples_per_step)}")
        source = (self._samples_sql(self._parts(), names=names) if parts is None else
                  self._samples_sql(parts, names=names, pad=True))
        return (f"SELECT * FROM ({source}) "
                f"{'WHERE ' + ' AND '.join(where) if where else ''} {qualify}")

    def _init_token_sources(self) -> None:
        self._token_parts = None  # every part's token file as one dataset (made when first needed)
        self._token_table = None  # ... or as one mapped table (made by the first query naming tokens)
        self._token_version = 0  # bumped when the parts change: part of the name cursors know them by
        # a source and its name belong to one version of the parts; a refresh holds it while it remakes the views
        self._token_lock = threading.RLock()
        self._cursors: weakref.WeakSet = weakref.WeakSet()  # cursors handed out, given the new files on a change
        self._lease = leases.Lease(self.cache_root, self)  # the parts the views read: not deleted under them
        self._kinds: dict[str, str] = {}  # samples column -> SQL type, as of the last views made
        self._not_in_nums: list[str] = []  # samples columns the in-memory numbers lack (texts, custom ones too)

    def _build_views(self) -> None:
        with self._token_lock:  # no cursor is made meanwhile: each has the files its views name
            self._rebuild_views()

    def _rebuild_views(self) -> None:
        self._token_parts = self._token_table = None  # the parts changed: token files found again, under a new name
        self._token_version += 1
        for cur in list(self._cursors):  # a cursor kept by the caller reads the new token files too
            try:
                self._register_tokens(cur)
            except duckdb.Error:  # closed, or busy with a query: its next one naming tokens fails (old name)
                pass
        self._lease.hold(p for _, p in self._parts())
        con = self._cursor()
        con.execute(f"CREATE OR REPLACE VIEW _samples_raw AS {self._samples_raw_sql()}")
        # the numbers are small: keep them in memory for fast sorting, paging and aggregates
        kinds = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE _samples_raw)").fetchall())
        self._kinds = kinds
        nums = [c for c, t in kinds.items() if c not in ("prompt", "response", "ref_response", "ground_truth", "file")
                and (not t.startswith("VARCHAR") or c == "run")]
        parts: dict[int, dict[str, tuple[int, int]]] = {}  # file_no -> {part: (first line, last line)}
        for p, st in self._states.items():
            parts[self._file_no[p]] = {path: (int(lines[0]), int(lines[1]))
                                       for path, lines in zip(self._caches[p].part_paths(st), st.part_lines)}
        if not self._update_nums(con, kinds, nums, parts):
            con.execute(f"""CREATE OR REPLACE TABLE _nums AS
                SELECT {', '.join(f'"{c}"' for c in nums)} FROM _samples_raw""")
        self._nums_of = (kinds, parts)
        self._not_in_nums = [c for c in kinds if c not in nums]
        con.execute("CREATE OR REPLACE VIEW samples AS SELECT * EXCLUDE (file_no) FROM _samples_raw "
                    "ORDER BY step, line, file_no")
        self._domains: dict = {}
        self._build_tokens_view(con)

    def _update_nums(self, con: duckdb.DuckDBPyConnection, kinds: dict[str, str], nums: list[str],
                     parts: dict[int, dict[str, tuple[int, int]]]) -> bool:
        """Bring ``_nums`` up to ``parts`` (file_no -> {cache part: its first and last line}) reading only what
        changed, where it can: a followed run's refresh read every part again (0.3 s a refresh at a million samples).
        A file's new parts are added; where parts of a file were replaced (merged, or the file read again from its
        start) or left, its rows from the first line they held on are taken out and read again from the parts
        holding them now. False where only a whole rebuild will do: the first views, other columns, a per-step
        cap (which samples are kept depends on every file), a set of runs."""
        old = getattr(self, "_nums_of", None)
        if old is None or old[0] != kinds or self.max_samples_per_step or not self._NUMS_BY_FILE:
            return False
        before = old[1]
        cut: dict[int, int] = {}  # file_no -> the first line whose rows are read again
        for n, was in before.items():
            now = parts.get(n, {})
            gone = [lines for path, lines in was.items() if now.get(path) != lines]
            if gone:
                cut[n] = min(first for first, _ in gone)
        read = [(n, path) for n, now in parts.items() for path, (_, last) in sorted(now.items(), key=lambda x: x[1])
                if (n in cut and last >= cut[n]) or (n not in cut and path not in before.get(n, {}))]
        if not cut and not read:
            return True
        cols = ", ".join(f'"{c}"' for c in nums)
        kept = " OR ".join(f"(file_no = {n} AND line < {first})" for n, first in sorted(cut.items()))
        redone = " OR ".join(f"(file_no = {n} AND line >= {first})" for n, first in sorted(cut.items()))
        try:
            con.execute("BEGIN TRANSACTION")  # readers meanwhile see the table before or after, never between
            if cut:
                con.execute(f"DELETE FROM _nums WHERE {redone}")
            if read:
                con.execute(f"INSERT INTO _nums ({cols}) SELECT {cols} FROM ({self._samples_raw_sql(parts=read)}) "
                            + (f"WHERE NOT ({kept})" if kept else ""))
            con.execute("COMMIT")
        except duckdb.Error:  # (a part's column of another type than the run's, say): read it all
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            return False
        return True

    def _text(self, col: str, prompt: bool = False) -> str:
        expr = col
        if prompt and self.system_prompt_end:  # cut first: the marker may hold the pad token (Llama 3's <|eot_id|>)
            expr = _after_last(expr, self.system_prompt_end)
        if self.pad_token:
            expr = f"replace({expr}, {literal(self.pad_token)}, '')"
        return expr

    def _token_fields(self) -> list[str]:
        present = {f for st in self._states.values() for f in st.fields}
        return [f for f in TOKEN_FIELDS if f in present]

    def _tokens_sql(self, parts: list[tuple[int, str]], lines: dict[int, list[int]] | None = None,
                    limit: int | None = None) -> str:
        """``limit``: only the first that many tokens of each sample (cut before unnesting)."""
        fields = self._token_fields()
        if not parts or not fields:
            # AS: DuckDB before 2.0 reads a bare "position" as its POSITION(... IN ...)
            return ("SELECT NULL::BIGINT AS sample_id, NULL::BIGINT AS step, NULL::INTEGER AS position, "
                    "NULL::VARCHAR AS token "
                    "WHERE false")
        cut = f"[1:{int(limit)}]" if limit is not None else ""
        cols = ", ".join(f'r."{f}"{cut} AS "{f}"' for f in fields)
        unn = ", ".join(f'unnest(t."{f}") AS {TOKEN_FIELDS[f]}' for f in fields)
        lens = ", ".join(f'len(t."{f}")' for f in fields)
        derived = ""
        names = {TOKEN_FIELDS[f] for f in fields}
        if {"logprob", "ref_logprob"} <= names:
            derived = ", " + per_token_sql()
        elif names & {"logprob", "ref_logprob"}:  # one of the two: its probability, still
            derived = ", exp(logprob) AS prob" if "logprob" in names else ", exp(ref_logprob) AS ref_prob"
        order = ["token", "token_reward", "kl", "log_ratio", "logprob", "ref_logprob", "prob", "ref_prob", "value"]
        made = set(re.findall(r" AS (\w+)", derived))  # (names, not text: "logprob" is in "ref_logprob")
        out = [c for c in order if c in names or c in made]
        return f"""SELECT sample_id, step, position::INTEGER AS position, {', '.join(out)} FROM (
            SELECT sample_id, step, position, * EXCLUDE (sample_id, step, position) {derived} FROM (
                SELECT t.file_no::BIGINT * {ID_STRIDE} + t.line AS sample_id, t.step,
                       unnest(range(greatest({lens}))) AS position, {unn}
                FROM (SELECT r.file_no, r.line, r.step, {cols} FROM {self._token_relation(lines)} r) t))"""

    def _token_relation(self, lines: dict | None = None) -> str:
        """The name a cursor knows this run's token files by (``_register_tokens``): all of them (as of this
        version of the parts), or a selection registered just before its query."""
        return f"_tokens_{id(self):x}_" + ("sel" if lines is not None else str(self._token_version))

    def _register_tokens(self, cur: duckdb.DuckDBPyConnection, parts: list[tuple[int, str]] | None = None,
                         lines: dict[int, list[int]] | None = None) -> None:
        """Give ``cur`` the token files ``_tokens_sql`` reads: every part's, or only the rows of ``lines`` in
        ``parts``. Every part's is a dataset (made once per change of the parts: nothing is opened), or, once
        ``_map_token_files`` has made it, one mapped table (scanned on every core). Nothing for a run without
        token arrays (its ``tokens`` SQL reads no files)."""
        if not self._token_fields():
            return
        if lines is not None:
            cur.register(self._token_relation(lines), token_store.rows(parts or [], lines))
            return
        cur.register(*self._token_source())

    def _token_source(self) -> tuple[str, object]:
        """(the name, the source) of every part's token files, as of this version of the parts."""
        with self._token_lock:
            if self._token_table is None and self._token_parts is None:
                steps = (s for st in self._states.values() for s in st.part_steps)  # in the order of _parts()
                self._token_parts = token_store.dataset([(n, p, s) for (n, p), s in zip(self._parts(), steps)])
            return self._token_relation(), self._token_table if self._token_table is not None else self._token_parts

    def _map_token_files(self) -> None:
        """Map every token file once (per change of the parts), for queries over all tokens."""
        with self._token_lock:  # a refresh meanwhile waits, then drops this table: never a stale one kept
            if self._token_table is None and self._token_fields():
                self._token_table = token_store.table(self._parts())

    def _build_tokens_view(self, con: duckdb.DuckDBPyConnection) -> None:
        sql = self._tokens_sql(self._parts())
        con.execute(f"""CREATE OR REPLACE VIEW tokens AS
            SELECT t.* FROM ({sql}) t SEMI JOIN _nums i ON t.sample_id = i.sample_id""")

    # -- frames ----------------------------------------------------------------------------
    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB cursor on the run's database (views ``samples`` and ``tokens``).

        Each access gives a new cursor, so widget requests and the user's own queries never
        collide on one connection (DuckDB refuses concurrent calls on the same connection).
        A cursor kept across ``refresh()`` is given the new token files, unless it is busy then or
        holds an unfinished result (DuckDB refuses): its queries over ``tokens`` then fail. Take a
        new cursor after a refresh.
        """
        with self._token_lock:  # in the set before a refresh can rename the token files, or after it
            cur = self._cursor()
            self._cursors.add(cur)
        return cur

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for the run's own queries: given the token files, but never re-registered by a refresh
        (it may be busy in another thread then: DuckDB would fail that thread's query)."""
        with self._token_lock:
            cur = self._db.cursor()
            self._register_tokens(cur)  # the ``tokens`` view reads the token files through this registration
        return cur

    def _execute(self, query: str, params: list | None = None) -> duckdb.DuckDBPyConnection:
        """``query`` on a cursor of its own, ready to fetch. Again on a new cursor if a refresh renamed the
        token files between the cursor's registration and the query (a few times: a run refreshed back to
        back in another thread may do it again)."""
        for attempt in range(4):
            cur = self._cursor()
            try:
                return cur.execute(query, params or [])
            except duckdb.CatalogException as e:
                if attempt == 3 or "_tokens_" not in str(e):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def samples(self) -> pd.DataFrame:
        """One row per sample: texts, rewards, token reductions, custom fields, file and line."""
        return self._execute("SELECT * FROM samples").df()

    @property
    def n_samples(self) -> int:
        """How many samples pass the run's options."""
        return self._execute("SELECT count(*) FROM _nums").fetchall()[0][0]

    @property
    def step_values(self) -> list[int]:
        """The distinct steps, ascending (gaps need not be uniform)."""
        return [s for (s,) in self._execute("SELECT DISTINCT step FROM _nums ORDER BY step").fetchall()]

    @property
    def steps(self) -> pd.DataFrame:
        """One row per step: sample count and mean, std, min, max, p05..p95 of the main metrics."""
        if self._steps_cache is None:
            self._steps_cache = self._execute(self.steps_sql()).df()
        return self._steps_cache.copy()

    def steps_sql(self, where: str = "", starts: list[int] | None = None) -> str:
        """The SQL behind ``steps`` (optionally restricted by a WHERE clause over samples). With ``starts`` (sorted
        steps, the first at most the run's first), one row per bucket of the steps from one start to the next,
        named by its start: the statistics of the bucket's samples."""
        where = self._condition(where)
        src = self._numeric(where)
        if starts is not None:
            src = _in_buckets(f"(SELECT * FROM {src} {'WHERE ' + where if where else ''})", starts)
            where = ""
        aggs = []
        for out, col in STAT_COLUMNS.items():
            aggs += [f"{mean_sql(col)} AS {out}_mean", f"{std_sql(col)} AS {out}_std",
                     f"min({col}) AS {out}_min", f"max({col}) AS {out}_max"]
            aggs.append(f"quantile_cont({col}, {list(QUANTILES)}) AS _q_{out}")  # one sort for all five
        unpack = ", ".join(f"_q_{out}[{k + 1}] AS {out}_p{round(q * 100):02d}"
                           for out in STAT_COLUMNS for k, q in enumerate(QUANTILES))
        order = [f"{out}_{s}" for out in STAT_COLUMNS
                 for s in ("mean", "std", "min", "max", *(f"p{round(q * 100):02d}" for q in QUANTILES))]
        return (f"SELECT step, samples, {', '.join(order)} FROM (SELECT *, {unpack} FROM ("
                f"SELECT step, count(*) AS samples, {', '.join(aggs)} FROM {src} "
                f"{'WHERE ' + where if where else ''} GROUP BY step)) ORDER BY step")

    def _condition(self, where: str) -> str:
        """``where`` checked to be one SQL condition, in parentheses (``sqlguard.condition``)."""
        key = (where, self.generation)  # bound once while the views stay (a brushed view asks on every redraw)
        if self._where_checked[0] != key:
            with self._cursor() as cur:  # given the token files: a where may ask the tokens view
                self._where_checked = (key, sqlguard.condition(cur, where, "samples"))
        return self._where_checked[1]

    def _numeric(self, where: str = "") -> str:
        """The in-memory numeric table when ``where`` needs no column it lacks, else the full view."""
        return "samples" if where and sqlguard.names_any(where, self._not_in_nums) else "_nums"

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
        where = self._condition(where)
        c = f'"{column}"'
        src = self._numeric(where)
        lo, hi = self._execute(f"SELECT min({c}), max({c}) FROM {src} WHERE isfinite({c})").fetchall()[0]
        cols = ["step", "bin", "bin_start", "bin_end", "count"]
        if lo is None:
            return _no_bins(cols)
        bin_sql, edge = _binning(lo, hi, bins)
        cond = f"isfinite({c})" + (f" AND {where}" if where else "")
        df = self._execute(f"""
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
        where = self._condition(where)
        cond = f"WHERE {where}" if where else ""
        rng = ", ".join(f'min("{c}") FILTER (WHERE isfinite("{c}")), max("{c}") FILTER (WHERE isfinite("{c}"))'
                        for c in cols)
        src = self._numeric(where)
        vals = [v for v in self._execute(f"SELECT {rng} FROM {src} {cond}").fetchall()[0] if v is not None]
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
        df = self._execute(f"""SELECT {extra}"column", step, bin, count(*) AS count FROM ({unions})
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
        nums = [c for c, t in self._execute("SELECT column_name, column_type FROM (DESCRIBE _nums)").fetchall()
                if not t.startswith("VARCHAR")]  # a set's run column is kept there, as text
        texts = [c for c in columns if c not in nums]
        if texts:
            raise ValueError(f"{', '.join(map(repr, texts))}: not a numeric column; numeric columns: "
                             f"{', '.join(c for c in nums if c not in ('sample_id', 'file_no'))}")

    def tokens(self, sample_ids: int | Iterable[int]) -> pd.DataFrame:
        """One row per token of the given samples: token text, metrics, and derived metrics. An id that is no
        sample of this run is a KeyError naming it (a row position, say, where a ``sample_id`` was due)."""
        return self._tokens_of(self.check_ids(sample_ids))

    def check_ids(self, sample_ids: int | Iterable[int]) -> list[int]:
        """``sample_ids`` as a list; a KeyError naming those that are no samples of this run."""
        ids = _id_list(sample_ids)
        if ids:
            held = self._held(ids)
            missing = [i for i in dict.fromkeys(ids) if i not in held]
            if missing:
                more = len(missing) - 10
                shown = ", ".join(map(str, missing[:10])) + (f" and {more} more" if more > 0 else "")
                raise KeyError(f"not samples of this run: {shown} (sample ids are values of run.samples['sample_id'], "
                               "not row positions)")
        return ids

    def _tokens(self, sample_ids: int | Iterable[int]) -> pd.DataFrame:
        """``tokens`` of those of the ids the run holds (the others left out: ids a view kept while its run
        changed)."""
        return self._tokens_of(self._in_run(_id_list(sample_ids)))

    def _tokens_of(self, ids: list[int], limit: int | None = None) -> pd.DataFrame:
        """``tokens`` of ids the run holds (``limit``: the first that many of each)."""
        by_file = _by_file(ids)
        parts = self._parts(by_file)
        if not ids or not parts:  # the tokens view's columns, no rows
            return self._execute("SELECT * FROM tokens WHERE false").df()
        sql = self._tokens_sql(parts, lines=by_file, limit=limit)
        cur = self._cursor()
        self._register_tokens(cur, parts, by_file)
        df = cur.execute(f"SELECT * FROM ({sql}) ORDER BY sample_id, position").df()
        order = {sid: k for k, sid in enumerate(dict.fromkeys(ids))}
        return df.sort_values(["sample_id", "position"], key=lambda s: s.map(order) if s.name == "sample_id" else s,
                              kind="stable").reset_index(drop=True)

    def rows(self, sample_ids: Iterable[int], columns: list[str] | None = None) -> pd.DataFrame:
        """The samples rows of the given ids, in that order (fast: reads only their row groups). An id that is no
        sample of this run is a KeyError naming it."""
        return self._rows_of(self.check_ids(sample_ids), columns)

    def _rows(self, sample_ids: Iterable[int], columns: list[str] | None = None) -> pd.DataFrame:
        """``rows`` of those of the ids the run holds (the others left out)."""
        return self._rows_of(self._in_run(_id_list(sample_ids)), columns)

    def _rows_of(self, ids: list[int], columns: list[str] | None = None) -> pd.DataFrame:
        """``rows`` of ids the run holds."""
        known = set(self.columns) if columns else set()  # one DESCRIBE, not one per column (a page asks ~15)
        unknown = [c for c in columns or () if c not in known]
        if unknown:
            raise KeyError(f"no column {', '.join(map(repr, unknown))} in samples; columns: {', '.join(self.columns)}")
        cols = ", ".join(f'"{c}"' for c in columns) if columns else "* EXCLUDE (file_no)"
        by_file = _by_file(ids)
        parts = self._parts(by_file)
        if not ids or not parts:
            return self._execute(f"SELECT {cols if columns else '*'} FROM samples WHERE false").df()
        sql = self._samples_sql(parts, lines=by_file)
        df = self._execute(f"SELECT {cols}, sample_id AS __id FROM ({sql})").df()
        at = {sid: k for k, sid in enumerate(df["__id"].tolist())}
        df = df.iloc[[at[i] for i in ids if i in at]]  # in the order asked, an id asked twice given twice
        return df.drop(columns="__id").reset_index(drop=True)

    def _leaves_samples_out(self) -> bool:
        """Whether the run's options keep only some samples of its files (a step range, a per-step cap)."""
        return self.step_range != (None, None) or bool(self.max_samples_per_step)

    def _in_run(self, ids: list[int]) -> list[int]:
        """Those of ``ids`` that are samples of this run, in their order: the step range and the per-step cap
        leave samples in the cache parts that the run does not hold (ids of them may come from another Run)."""
        if not ids or not self._leaves_samples_out():
            return ids  # every sample of the parts is the run's (ids of other files find no part)
        held = self._held(ids)
        return [i for i in ids if i in held]

    def _held(self, ids: list[int]) -> set[int]:
        """Those of ``ids`` that are samples of this run (as one list parameter: 80k ids written into the SQL
        text took a second to parse)."""
        query = "SELECT sample_id FROM _nums WHERE sample_id IN (SELECT unnest(?::BIGINT[]))"
        wanted = [i for i in dict.fromkeys(ids) if -2**63 <= i < 2**63]  # others are no id (nor a BIGINT)
        return {i for (i,) in self._execute(query, [wanted]).fetchall()}

    def data_key(self, sample_ids: Iterable[int]) -> tuple:
        """What these samples' records depend on: which of them the run holds (a cap or step range may let one
        go), and the epoch of each file holding them (new whenever a file is read again from its start). While
        it stays the same, so do their records: a followed view redraws a token strip only when it changes."""
        ids = self._in_run(_id_list(sample_ids))
        held = {i // ID_STRIDE for i in ids}
        epochs = sorted((self._file_no.get(p), st.epoch) for p, st in self._file_states().items()
                        if self._file_no.get(p) in held)
        return tuple(ids), tuple(epochs)

    def token_arrays(self, sample_ids: Iterable[int],
                     limit: int | Callable[[list[int]], int] | None = None) -> list[dict]:
        """Per sample: id, step, reward, n_tokens, token strings and each token metric as a float32 array (``limit``:
        the first that many tokens of each, or a function of the samples' ``n_tokens`` giving it; ``n_tokens``
        counts them all)."""
        ids = self._in_run(_id_list(sample_ids))
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
                        "tokens": tokens, "metrics": metrics})
        return out

    @property
    def token_metrics(self) -> list[str]:
        """The token metrics this run has (those `tokens()` can fill), in display order."""
        names = {TOKEN_FIELDS[f] for f in self._token_fields()}
        if {"logprob", "ref_logprob"} <= names:
            names |= {"log_ratio", "kl", "prob", "ref_prob"}
        elif "logprob" in names:
            names |= {"prob"}
        elif "ref_logprob" in names:
            names |= {"ref_prob"}
        return [m for m in TOKEN_METRIC_ORDER if m in names]

    def token_domain(self, metric: str, scope: str = "run", steps: Iterable[int] | None = None) -> tuple[float, float]:
        """Colour limits of a token metric over the run or some steps (p99 clip; symmetric if signed).

        Estimated from the tokens of up to DOMAIN_SAMPLES samples of the scope, chosen by a hash
        (the same ones every time), which is exact for small runs and fast for huge ones.
        """
        if scope not in ("run", "step") or (scope == "step" and steps is None):
            raise ValueError(f"scope={scope!r}: 'run', or 'step' with the steps to cover (steps=[...])")
        if metric in ("prob", "ref_prob"):
            return 0.0, 1.0
        if metric in ("logprob", "ref_logprob"):
            return -10.0, 0.0
        if metric not in self.token_metrics:
            raise KeyError(f"no token metric {metric!r}; this run has {', '.join(self.token_metrics)}")
        key = (metric, scope, tuple(sorted(steps)) if steps is not None and scope == "step" else None)
        if key not in self._domains:
            # a fixed, spread-out subset of samples is enough for a p99, and keeps this fast on
            # runs of hundreds of millions of tokens (only their row groups are read)
            cond = f"WHERE step IN ({', '.join(str(int(s)) for s in key[2])})" if key[2] else ""
            ids = [i for (i,) in self._execute(
                f"SELECT sample_id FROM _nums {cond} ORDER BY hash(sample_id) LIMIT {DOMAIN_SAMPLES}").fetchall()]
            toks = self._tokens(ids)
            vals = toks[metric].to_numpy(dtype="float64", na_value=np.nan) if metric in toks else np.zeros(0)
            vals = vals[np.isfinite(vals)]
            if metric in SIGNED_METRICS:
                q = float(np.quantile(np.abs(vals), 0.99)) if len(vals) else 0.0
                q = q if q > 0 else 1.0
                self._domains[key] = (-q, q)
            else:
                q = float(np.quantile(vals, 0.99)) if len(vals) else 0.0
                self._domains[key] = (0.0, q if q > 0 else 1.0)
        return self._domains[key]

    def sql(self, query: str, params: list | None = None) -> pd.DataFrame:
        """Run SQL over the ``samples`` and ``tokens`` views; returns a DataFrame. Queries only (SELECT, PIVOT,
        EXPLAIN, CALL, and the PRAGMAs that tell): a statement that would change the run's views or tables (DROP,
        CREATE, INSERT, COPY, also under EXPLAIN ANALYZE, or run by a pragma such as import_database) is refused,
        so that a slip does not break the run (a guard, not a sandbox: ``sqlguard``)."""
        with self._db.cursor() as cur:  # parsed only, on a cursor of its own (another thread may be querying)
            sqlguard.check_query(cur, query)
        if re.search(r"\btokens\b", query, re.IGNORECASE):  # the view, not a column such as n_tokens
            self._map_token_files()
        return self._execute(query, params).df()

    @property
    def columns(self) -> list[str]:
        """Column names of ``samples``."""
        return [c for (c,) in self._execute("SELECT column_name FROM (DESCRIBE samples)").fetchall()]

    @property
    def problems(self) -> pd.DataFrame:
        """Every problem found: file, line, kind, message."""
        return problemsmod.problems_frame(self._all_problems())

    def _all_problems(self) -> list[Problem]:
        out = [Problem(st.path, *p) for st in self._states.values() for p in st.problems]
        return out + self._listed + self._renamed() + list(self._pending) + list(self._removed.values())

    @property
    def files(self) -> pd.DataFrame:
        """The log files read: number, path, bytes, lines read, problems (those of ``problems`` in the file, whether
        found as a line was read or by the run across the file's parts), lines skipped unread (``skipped``)."""
        found = Counter(p.file for p in self._all_problems())
        rows = [{"file_no": self._file_no[p], "file": p, "bytes": st.size, "lines": st.lines,
                 "problems": found[p], "skipped": st.skipped} for p, st in self._file_states().items()]
        columns = ["file_no", "file", "bytes", "lines", "problems", "skipped"]
        return pd.DataFrame(rows, columns=columns).sort_values("file_no").reset_index(drop=True)

    @property
    def skipped_lines(self) -> int:
        """Lines left unread: their step, told from their bytes, is past the per-step cap or out of the step range.
        Their records were never parsed, so their problems are not in ``problems`` (0 when the run was read from a
        cache of every line, made by an open without those options)."""
        return sum(st.skipped for st in self._file_states().values())

    def _file_states(self) -> dict:
        """Each file's state as last read (what ``files`` and ``skipped_lines`` tell of)."""
        return self._states

    def summary(self) -> str:
        """A few lines saying what the run holds."""
        steps = self.steps
        n = int(steps["samples"].sum()) if len(steps) else 0
        lines = [f"Run: {len(self._states)} file(s), {n} samples over {len(steps)} steps"
                 + (f" ({steps['step'].iloc[0]}..{steps['step'].iloc[-1]})" if len(steps) else "")]
        if len(steps):
            first, last = steps.iloc[0], steps.iloc[-1]
            def at(row, out: str) -> str:  # a step without the metric says so (it printed <NA>)
                if pd.isna(row[f"{out}_mean"]):
                    return f"{'none':>9} at step {int(row['step'])}"
                return f"{row[f'{out}_mean']:>9.4g} (std {row[f'{out}_std']:.3g}) at step {int(row['step'])}"

            for out in ("reward", "ref_reward", "kl", "length", "chars"):
                if pd.notna(first[f"{out}_mean"]) or pd.notna(last[f"{out}_mean"]):
                    lines.append(f"  {out:<10} mean {at(first, out)} -> {at(last, out)}")
        fields = self._token_fields()
        lines.append("  token arrays: " + (", ".join(fields) + f" (token metrics: {', '.join(self.token_metrics)})"
                                           if fields else "none (sample-level log)" if n else "none (no samples)"))
        probs = self._all_problems()
        lines.append("  problems: " + (problemsmod.summarize(probs) if probs else "none"))
        if self.skipped_lines:
            lines.append(f"  lines skipped unread (past the per-step cap or out of the step range): "
                         f"{self.skipped_lines} (not checked for problems)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def close(self) -> None:
        """Release the DuckDB connection (and the lease on the cache parts the run read)."""
        self._lease.release()
        self._db.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
