"""A run's log files brought up to date with its cache: plan (list the files, lock their caches, see what is new),
read (what is new, into the cache), reconcile (file states, pending and removed files)."""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

from rlviz_widgets import _problems as problemsmod
from rlviz_widgets._ingest.sniff import first_record_has
from rlviz_widgets._ingest.sources import NoLogsError, resolve, source_folders
from rlviz_widgets._problems import Problem
from rlviz_widgets._progress import Progress
from rlviz_widgets._store import cache as cachemod
from rlviz_widgets._store import file_numbers
from rlviz_widgets.run._views import FileParts


@dataclass
class Outcome:
    """What a sync found: whether the samples changed, whether parts were remade with the same records (merged:
    the views and their lease must follow them), the problems new since the last sync."""

    changed: bool = False
    merged: bool = False
    new_problems: list[Problem] = field(default_factory=list)


@dataclass
class _Plan:
    """The files listed and their caches (locked), each cache's plan, and what was found along the way."""

    files: list[Path]
    caches: list[cachemod.FileCache]
    plans: list
    gone: set[str]
    found: list[tuple[str, str, str]]  # what the folders hold but cannot be read: (path, kind, message)
    unreadable: dict[str, str]  # path -> why it cannot be read


def plan_file(cache: cachemod.FileCache,
              unreadable: dict[str, str] | None = None) -> tuple[cachemod.FileState, int] | None:
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


def _looks_like(reader):
    """The check on a file's first record that lets the folder walk leave a link to files of another kind:
    JSON-lines formats only (a Parquet file's first bytes say nothing of its columns)."""
    if ".jsonl" not in reader.suffixes:
        return None
    fmt = getattr(reader, "format", None)
    keys = {*reader.fields().values(), *(getattr(fmt, "shown", {}) or {}).values(), *getattr(fmt, "group_keys", ()),
            "prompt_tokens", "token_ids", "tokens"}  # the keys a format reads through an expression, too
    return first_record_has(keys)


class FileSync:
    """The log files of a source, kept in step with their caches in ``files``: numbers, states, caches, and the
    problems of the files as wholes (``pending``: unreadable, unfinished or changing files; ``removed``)."""

    def __init__(self, files: FileParts, source, format: str, reader, selective, cache_root: Path, db_future,
                 progress: bool):
        self.files, self.source, self.format, self.reader, self.selective = files, source, format, reader, selective
        self.cache_root, self.db_future, self.progress = cache_root, db_future, progress

    def sync(self, first: bool, held: contextlib.ExitStack) -> Outcome:
        """Plan, read and reconcile; the caches stay locked in ``held`` until the caller's views name them."""
        plan = self._plan(first, held)
        updated = self._read(plan, first)
        return self._reconcile(plan, updated, first)

    # -- plan ----------------------------------------------------------------------------------------
    def _plan(self, first: bool, held: contextlib.ExitStack) -> _Plan:
        reader = self.reader
        what = f"{self.format} files: {reader.file_pattern}" if reader.file_pattern else ""
        found: list[tuple[str, str, str]] = []
        try:
            files = resolve(self.source, reader.suffixes, reader.accepts, what, found,
                            looks_like=_looks_like(reader), progress=self.progress and first)
        except NoLogsError:
            if first:
                raise
            files = []  # every file of a followed run gone: each said so below, the run empty until they are back
        self._check_cache_location(files)
        if any(str(f) not in self.files.file_no for f in files):  # numbers of known files never change
            with self.writable_cache():
                given = file_numbers.assign(self.cache_root, [str(f) for f in files], self.files.file_no)
            self.files.file_no = file_numbers.keeping(self.files.file_no, given)
        caches = [self._cache_for(f) for f in files]
        # every file's cache is locked from its first look until the views read it and their lease names it (the
        # end of the refresh): prune_cache in another process must not take a folder in between (it takes only
        # what it can lock and no lease names). A read-only cache is read without its locks.
        held.enter_context(cachemod.locked(caches, quiet=True))
        unreadable: dict[str, str] = {}
        plans = [plan_file(c, unreadable) for c in caches]
        if rebuilt := sum(c.replaced_older for c in caches):  # said once: the next open finds the new cache
            problemsmod.note(f"{rebuilt} log file(s) had a cache written by an older version of rlviz_widgets: read "
                             f"again into a new one (in {self.cache_root})")
        if first and unreadable and len(unreadable) == len(files):  # nothing to show: say why at once
            path, why = next(iter(unreadable.items()))
            raise NoLogsError(f"no log file can be read: {path} ({why})"
                              + (f" and {len(files) - 1} more" if len(files) > 1 else ""))
        gone = {str(c.path) for c, p in zip(caches, plans) if p is None}  # since listed (a job restarting)
        caches, plans = [c for c, p in zip(caches, plans) if p], [p for p in plans if p]
        return _Plan(files, caches, plans, gone, found, unreadable)

    def _cache_for(self, path: Path) -> cachemod.FileCache:
        """A file's cache: the full one (every line read), or with a cap or a step range, one of the lines they may
        keep. A file keeps the kind it was first given; a full cache that can serve is used whatever the options."""
        known = self.files.caches.get(str(path))
        if known is not None:
            return cachemod.FileCache(self.cache_root, path, known.reader_name)
        full = cachemod.FileCache(self.cache_root, path, self.reader.name)
        if self.selective is None or cachemod.reusable(full):
            return full
        return cachemod.FileCache(self.cache_root, path, self.selective.name)

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

    # -- read ----------------------------------------------------------------------------------------
    def _read(self, plan: _Plan, first: bool) -> dict:
        """Read what is new of each file; path -> ((state, problems), problems before) of those read."""
        caches, plans = plan.caches, plan.plans
        # files with something to read are planned again (under the locks taken in _plan, for which another kernel
        # reading them was waited: what it read is not read again)
        with self.writable_cache():
            for i in [i for i, (_, n) in enumerate(plans) if n]:
                again = plan_file(caches[i], plan.unreadable)
                if again is None:
                    plan.gone.add(str(caches[i].path))
                plans[i] = again or (plans[i][0], 0)
            todo = sum(n for _, n in plans)
            bar = Progress(todo, sum(1 for _, n in plans if n), enabled=self.progress and first)
            try:
                return self._read_planned(plan, bar)
            finally:
                bar.close()

    def _read_planned(self, plan: _Plan, bar: Progress) -> dict:
        jobs = [(c, state) for c, (state, n) in zip(plan.caches, plan.plans) if n]
        befores = [len(state.problems) for _, state in jobs]
        results = self._update(jobs, bar)
        updated = {str(c.path): (r, before) for (c, _), r, before in zip(jobs, results, befores)}
        for _ in range(3):  # a file rewritten while it was read (a job restarted) is read again, afresh
            stale = [c for (c, _), (st, _) in zip(jobs, results) if cachemod.is_stale(st)]
            if not stale:
                break
            again = [(c, plan_file(c, plan.unreadable)) for c in stale]
            plan.gone |= {str(c.path) for c, p in again if p is None}
            jobs = [(c, p[0]) for c, p in again if p is not None]
            results = self._update(jobs, bar)
            updated.update({str(c.path): (r, 0) for (c, _), r in zip(jobs, results)})
        return updated

    def _update(self, jobs: list[tuple[cachemod.FileCache, cachemod.FileState]], bar: Progress) -> list:
        """``cache.update_files`` of each job, through the reader its cache is of; results in the jobs' order."""
        readers = {r.name: r for r in (self.reader, self.selective) if r is not None}
        out: list = [None] * len(jobs)
        for name, reader in readers.items():
            mine = [i for i, (c, _) in enumerate(jobs) if c.reader_name == name]
            if mine:
                results = cachemod.update_files(self.db_future, [jobs[i] for i in mine], reader, bar.bytes,
                                                bar.file_done)
                for i, r in zip(mine, results):
                    out[i] = r
        return out

    @contextlib.contextmanager
    def writable_cache(self):
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

    # -- reconcile -------------------------------------------------------------------------------------
    def _reconcile(self, plan: _Plan, updated: dict, first: bool) -> Outcome:
        """The new file states, swapped in whole (queries in other threads iterate the old ones meanwhile), and
        what changed."""
        out = Outcome(changed=first)
        pending = self._pending_found(plan)
        states, caches = dict(self.files.states), dict(self.files.caches)
        for c, (state, n) in zip(plan.caches, plan.plans):
            path = str(c.path)
            if path in plan.gone:
                continue
            state = self._read_state(path, updated[path], pending, out, first) if n else \
                self._unread_state(path, state, pending, out, first)
            if state is None:
                states.pop(path, None)
                continue
            if state is not True:  # True: the old state kept
                states[path] = state
                caches[path] = c
        cachemod.drop_expired([(c, state) for c, (state, n) in zip(plan.caches, plan.plans) if not n], held=True)
        removed = self._removed_files(plan, states, caches, out)
        self.files.states, self.files.caches, self.files.pending, self.files.removed = states, caches, pending, removed
        return out

    def _pending_found(self, plan: _Plan) -> list[Problem]:
        """Problems of files and folders as wholes: those listing found, unreadable files, same-step files."""
        pending = [Problem(path, 0, kind, f"{message} (line 0: the {kind.split('_')[-1]} as a whole)")
                   for path, kind, message in plan.found]
        pending += [Problem(path, 0, "unreadable_file", f"the file cannot be read ({why}): its samples are "
                            + ("as read before" if path in self.files.states else "left out")
                            + " (line 0: the file as a whole)") for path, why in plan.unreadable.items()]
        return pending + _same_step_files(plan.files, self.reader)

    def _read_state(self, path: str, result, pending: list[Problem], out: Outcome, first: bool):
        """The state of a file just read: None to leave it out, True to keep the old one."""
        (state, problems), before = result
        old = self.files.states.get(path)
        if cachemod.is_stale(state):  # rewritten during every read: what was read may mix two contents
            pending.append(Problem(state.path, 0, "changing_file", (
                "the file changed each time it was read (a job rewriting it?): "
                + ("its samples are as read before" if old else "its samples are left out")
                + " until it settles (line 0: the file as a whole)")))
            return True if old is not None else None
        # read, but maybe only blanks: a change if it gave records or problems, or was read afresh
        out.changed = (out.changed or old is None or (old.epoch, old.records) != (state.epoch, state.records)
                       or len(state.problems) != before)
        out.merged = out.merged or (old is not None and old.parts != state.parts)
        pending += problems
        if not first:
            out.new_problems += [Problem(state.path, *q) for q in state.problems[before:]]
        return state

    def _unread_state(self, path: str, state, pending: list[Problem], out: Outcome, first: bool):
        """The state of a file with nothing left to read: yet another Run (another kernel) may have read new lines
        or problems."""
        old = self.files.states.get(path)
        # (problems compared whole: another problem may stand in the place of one)
        if old is not None and (old.parts != state.parts or old.problems != state.problems):
            out.changed = True
            seen = len(old.problems) if old.epoch == state.epoch else 0
            out.new_problems += [Problem(state.path, *q) for q in state.problems[seen:]]
        elif old is None and not first:
            # new to this run, its cache complete already: a file back after it was gone, or one another
            # Run read first (its samples were left out of the views, and refresh said nothing changed)
            out.changed = out.changed or bool(state.parts)
            out.new_problems += [Problem(state.path, *q) for q in state.problems]
        if state.consumed < state.size:
            pending += _pending_for(state)
        return state

    def _removed_files(self, plan: _Plan, states: dict, caches: dict, out: Outcome) -> dict[str, Problem]:
        """Files read before and gone now leave ``states`` and ``caches``, said once; those back are no longer.
        A file that cannot be read now (or is in a folder that cannot be listed now) keeps what was read of it
        before, if anything."""
        hidden = [Path(path) for path, kind, _ in plan.found if kind == "unreadable_folder"]
        present = ({str(c.path) for c in plan.caches} - plan.gone) | set(plan.unreadable) | {
            p for p in states if any(folder in Path(p).parents for folder in hidden)}
        removed = {p: q for p, q in self.files.removed.items() if p not in present}  # back: no longer said
        for path in [p for p in states if p not in present]:  # deleted (or renamed) since the last read
            del states[path], caches[path]
            out.changed = True
            removed[path] = Problem(path, 0, "file_removed", "the file is gone: its samples left the run "
                                                             "(line 0: the file as a whole)")
            out.new_problems.append(removed[path])
        return removed


def _pending_for(state: cachemod.FileState) -> list[Problem]:
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
