"""Several runs side by side: one set of log frames with a ``run`` column.

Each run keeps its own reader, options and cache; the set only unions their SQL (which
reads cache files, so it runs in the set's own database; each run's token files are registered
on the set's cursors under that run's names). File numbers come from the
cache registry, so sample_ids never collide between runs sharing a cache dir.
"""

from __future__ import annotations

import contextlib
import threading

import pandas as pd

from rlviz_widgets._problems import Problem
from rlviz_widgets._sql import literal
from rlviz_widgets.run.options import OpenOptions
from rlviz_widgets.run.run import Run, _connect_in_background, _settle


class RunSet(Run):
    """Runs by name, e.g. ``RunSet({"baseline": run_a, "kl0.05": run_b})``, as one run.

    ``samples`` and ``rows()`` gain a ``run`` column, and ``run_steps`` is each run's ``steps`` with one. The
    other frames pool the runs: ``steps`` and the histograms take every run's samples of a step together
    (``histograms(..., by=("run",))`` splits them), ``tokens()``, ``files`` and ``problems`` are the runs'
    together (sample ids and files are each one run's: ``samples`` says which)."""

    _NUMS_BY_FILE = False  # its number table is remade whole (each run's files are numbered on their own)

    def __init__(self, runs: dict[str, Run]):  # not super().__init__: that would open logs again
        if not runs:
            raise ValueError("RunSet needs at least one run")
        self.runs = dict(runs)
        self.source = {name: r.source for name, r in self.runs.items()}
        self.format = ",".join(sorted({r.format for r in self.runs.values()}))
        self.step_range = (None, None)
        self.max_samples_per_step = None
        self.pad_token = self.system_prompt_end = None
        first = next(iter(self.runs.values()))
        self.cache_root = first.cache_root
        other = next(((n, r) for n, r in self.runs.items() if r.cache_root != first.cache_root), None)
        if other is not None:  # checked now: the collision of file numbers would come with some later new file
            raise ValueError(f"runs {next(iter(self.runs))!r} and {other[0]!r} use different cache dirs "
                             f"({first.cache_root} and {other[1].cache_root}): sample ids are numbered per cache "
                             "dir, so a set's runs must share one; open them with the same cache_dir")
        self._db_future = _connect_in_background()
        self._pending: list[Problem] = []
        self._removed: dict = {}
        self._column_names: dict[str, str] = {}  # the set's own: two runs' keys may collide where one's do not
        self._names_file = None  # (not kept for a next open: a set is made of runs, not opened from logs)
        self._steps_cache = None
        self._where_checked: tuple = (None, "")  # as a run's (``Run._condition``)
        self.generation = 0
        self._init_token_sources()
        self._seen = {name: r.generation for name, r in self.runs.items()}  # the runs' data the views show
        self._rebuilding = threading.local()  # .on: this thread is remaking the set's views (``_sync``)
        try:
            self._merge()
            self._build_views()
        except BaseException:
            _settle(self._db_future)
            raise

    @classmethod
    def open(cls, sources: dict, options: OpenOptions | None = None, **kwargs) -> RunSet:
        """Open each source with the same ``open_run`` options, given as keywords or as one ``OpenOptions`` (a
        ``Run`` already open is taken as it is, and then no options may be given: they would apply to some runs
        only)."""
        if (options is not None or kwargs) and any(isinstance(src, Run) for src in sources.values()):
            raise TypeError("open_run options apply to the logs a RunSet opens itself, not to a Run already open")
        if options is not None and kwargs:
            raise TypeError("RunSet.open takes options= or open_run's keywords, not both")
        options = OpenOptions(**kwargs) if options is None else options
        return cls({str(name): src if isinstance(src, Run) else Run.with_options(src, options)
                    for name, src in sources.items()})

    def _merge(self) -> None:
        # new dicts, swapped in whole: a query in another thread never reads them half made
        owner: dict[int, str] = {}
        file_no, states, caches = {}, {}, {}
        paths: dict[int, str] = {}
        for name, r in self.runs.items():
            for p, n in r._file_no.items():
                if n in owner and owner[n] != name:
                    if paths[n] == p:  # sample ids are per file: one file cannot be in two runs of a set
                        raise ValueError(f"runs {owner[n]!r} and {name!r} both read {p}: a RunSet holds runs of "
                                         "different log files (to compare options on the same logs, compare the "
                                         "two runs' frames)")
                    raise ValueError(f"runs {owner[n]!r} and {name!r} number their files alike ({paths[n]} and "
                                     f"{p}): open them with the same cache_dir")
                owner[n], paths[n] = name, p
            file_no.update(r._file_no)
            states.update(r._states)
            caches.update(r._caches)
        self._owner, self._file_no, self._states, self._caches = owner, file_no, states, caches
        self._paths = {n: p for p, n in self._file_no.items()}
        # the runs' token files as of now, kept for the set's cursors: a run refreshed meanwhile names its new
        # ones otherwise, and the set's views name these until the set follows (``_sync``)
        self._token_runs = [r for r in self.runs.values() if r._token_fields()]
        self._token_sources = [r._token_source() for r in self._token_runs]
        self._extras()  # custom fields named over every run's keys at once, before any run's SQL asks

    def _own_renames(self) -> frozenset[str]:
        return frozenset().union(*(r._own_renames() for r in self.runs.values()))

    def refresh(self) -> bool:
        """Every run reads what is new; True if anything changed. A run whose refresh fails (a disk full, a
        cache dir gone read-only) does not keep the others from theirs: its error is raised once the set shows
        them, naming the run."""
        changed, failed = False, []
        for name, r in self.runs.items():
            try:
                changed = r.refresh() or changed
            except Exception as e:  # noqa: BLE001 - raised below, after the others
                failed.append((name, e))
        synced = self._sync()
        if failed:
            name, e = failed[0]
            others = f"; {len(failed) - 1} more run(s) failed too" if len(failed) > 1 else ""
            raise _naming(e, f"(refreshing run {name!r} of the set; the other runs were refreshed{others})")
        return synced or changed

    def _sync(self) -> bool:
        """Follow the runs: one refreshed on its own (a view following it) changed its parts and token files,
        which the set's views name. True if the views were remade.

        The runs' own view locks are held meanwhile (always taken after the set's: no run takes the set's), so
        no run renames its token files between the set's cursor and the views naming them; the runs' data is
        noted as seen only once the views show it, so other threads wait for them rather than read half."""
        if getattr(self._rebuilding, "on", False):  # inside this thread's own rebuild: what it asks for is new
            return False
        if all(r.generation == self._seen[name] for name, r in self.runs.items()):
            return False
        with contextlib.ExitStack() as held:
            held.enter_context(self._token_lock)
            for r in self.runs.values():
                held.enter_context(r._token_lock)
            seen = {name: r.generation for name, r in self.runs.items()}
            if seen == self._seen:
                return False
            self._rebuilding.on = True
            try:
                self._merge()
                self._build_views()
            finally:
                self._rebuilding.on = False
            self._steps_cache = None
            self._seen = seen
            self.generation += 1
        return True

    # what a query is made of (a cursor, the parts, cached frames) is asked for through these: each follows the runs
    def _cursor(self):
        self._sync()
        return super()._cursor()

    def _parts(self, file_nos=None):
        self._sync()
        return super()._parts(file_nos)

    @property
    def steps(self) -> pd.DataFrame:
        self._sync()
        return Run.steps.fget(self)

    @property
    def files(self) -> pd.DataFrame:
        self._sync()
        return Run.files.fget(self)

    def _file_states(self) -> dict:
        # the runs' own, not those merged when the views were last made: a run that read only lines it skips (a
        # cap, a step range) changed its files' counts, not its data (no new generation, no merge)
        self._sync()
        return {p: st for r in self.runs.values() for p, st in r._file_states().items()}

    def token_domain(self, *args, **kwargs):
        self._sync()
        return super().token_domain(*args, **kwargs)

    # -- SQL: the union of the runs' own --------------------------------------------------------
    def _split(self, parts, lines=None):
        for name, r in self.runs.items():
            mine = [(n, p) for n, p in parts if self._owner.get(n) == name]
            if not mine:
                continue
            sub = None if lines is None else {n: v for n, v in lines.items() if self._owner.get(n) == name}
            if sub is not None and not sub:
                continue
            yield name, r, mine, sub

    def _samples_sql(self, parts, where: str = "", lines=None) -> str:
        selects = [
            f"SELECT {literal(name)} AS run, * FROM ({r._samples_sql(mine, lines=sub, names=self._column_names)})"
            for name, r, mine, sub in self._split(parts, lines)]
        if not selects:
            return Run._samples_sql(self, [], where)
        # the runs read may lack some of the set's optional or custom columns: empty there
        extra = ["run", *self._optional(), *(c for _, c in self._extras())]
        nulls = ", ".join(f'NULL::{self._type_of(c)} AS "{c}"' for c in extra)
        selects.append(f"SELECT {nulls} WHERE false")
        return f"SELECT * FROM ({' UNION ALL BY NAME '.join(selects)}) {where}"

    def _leaves_samples_out(self) -> bool:
        return any(r._leaves_samples_out() for r in self.runs.values())

    def _samples_raw_sql(self) -> str:
        selects = [f"SELECT {literal(name)} AS run, * FROM ({r._samples_raw_sql(self._column_names)})"
                   for name, r in self.runs.items()]
        return " UNION ALL BY NAME ".join(selects)

    def _tokens_sql(self, parts, lines=None, limit=None) -> str:
        selects = [f"SELECT * FROM ({r._tokens_sql(mine, sub, limit)})" for _, r, mine, sub in self._split(parts, lines)
                   if r._token_fields()]
        return " UNION ALL BY NAME ".join(selects) if selects else Run._tokens_sql(self, [], None)

    def _register_tokens(self, cur, parts=None, lines=None) -> None:
        if lines is None:  # the view's source: each run's every part, as the set's views name them
            for name, source in self._token_sources:
                cur.register(name, source)
            return
        for _, r, mine, sub in self._split(parts, lines):
            r._register_tokens(cur, mine, sub)

    def _map_token_files(self) -> None:
        for r in self.runs.values():
            r._map_token_files()
        with self._token_lock:
            self._token_sources = [(n, r._token_source()[1] if n == r._token_relation() else src)
                                   for (n, src), r in zip(self._token_sources, self._token_runs)]

    def _token_fields(self) -> list[str]:
        return list(dict.fromkeys(f for r in self.runs.values() for f in r._token_fields()))

    def _all_problems(self) -> list[Problem]:
        # fields renamed in the set (its runs' keys together), not as each run alone named them
        own = [p for r in self.runs.values() for p in r._all_problems() if p.kind != "renamed_field"]
        return own + self._renamed()

    @property
    def run_steps(self) -> pd.DataFrame:
        """Each run's steps frame, with a ``run`` column."""
        frames = [r.steps.assign(run=name) for name, r in self.runs.items()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def summary(self) -> str:
        return "\n".join(f"[{name}] " + r.summary() for name, r in self.runs.items())


def _naming(e: BaseException, text: str) -> BaseException:
    """``e`` itself (its type and fields kept, for whoever catches it) with ``text`` added to its message: a note
    alone is not in ``str(e)``, nor on Python 3.10."""
    if isinstance(e, OSError) and e.strerror:
        e.strerror = f"{e.strerror} {text}"  # what str() of an OSError shows
    elif e.args and isinstance(e.args[0], str):
        e.args = (f"{e.args[0]} {text}", *e.args[1:])
    elif hasattr(e, "add_note"):  # Python 3.11+
        e.add_note(text)
    return e
