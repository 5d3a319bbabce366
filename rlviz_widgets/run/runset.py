"""Several runs side by side: one set of log frames with a ``run`` column.

Each run keeps its own reader, options and cache; the set only unions their SQL (which
reads cache files, so it runs in the set's own database; each run's token files are registered
on the set's cursors under that run's names). File numbers come from the
cache registry, so sample_ids never collide between runs sharing a cache dir.
"""

from __future__ import annotations

import contextlib
import threading

import duckdb
import pandas as pd

from rlviz_widgets._ingest.custom_columns import column_names
from rlviz_widgets._problems import Problem
from rlviz_widgets._sql import literal
from rlviz_widgets._store import leases
from rlviz_widgets.run._db import Cursors
from rlviz_widgets.run._queries import Frames
from rlviz_widgets.run._views import NO_SAMPLES, NO_TOKENS, NO_TURNS, FileParts, NumsState, build_views
from rlviz_widgets.run.options import OpenOptions
from rlviz_widgets.run.run import Run


class RunSet(Frames):
    """Runs by name, e.g. ``RunSet({"baseline": run_a, "kl0.05": run_b})``, as one run.

    ``samples`` and ``rows()`` gain a ``run`` column, and ``run_steps`` is each run's ``steps`` with one. The
    other frames pool the runs: ``steps`` and the histograms take every run's samples of a step together
    (``histograms(..., by=("run",))`` splits them), ``tokens()``, ``files`` and ``problems`` are the runs'
    together (sample ids and files are each one run's: ``samples`` says which)."""

    def __init__(self, runs: dict[str, Run]):
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
        self._rel = SetViews(self.runs, self.cache_root, owner=self)
        self._forget()

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

    @property
    def generation(self) -> int:
        """Bumped whenever the set's data changes (a run's new lines, new files)."""
        return self._rel.builds - 1

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
        synced = self._rel.follow()
        if failed:
            name, e = failed[0]
            others = f"; {len(failed) - 1} more run(s) failed too" if len(failed) > 1 else ""
            raise _naming(e, f"(refreshing run {name!r} of the set; the other runs were refreshed{others})")
        return synced or changed

    @property
    def run_steps(self) -> pd.DataFrame:
        """Each run's steps frame, with a ``run`` column."""
        frames = [r.steps.assign(run=name) for name, r in self.runs.items()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def summary(self) -> str:
        return "\n".join(f"[{name}] " + r.summary() for name, r in self.runs.items())


Run.register(RunSet)  # widgets take a set wherever they take a run (``isinstance(x, Run)``)


class SetViews:
    """The set's relations (``_queries.Relations``): the union of its runs' SQL, over their files merged."""

    def __init__(self, runs: dict[str, Run], cache_root, owner: object):
        self.runs = runs
        self.files = FileParts()
        self.nums = NumsState()
        self.builds = 0
        self.column_names: dict[str, str] = {}  # the set's own: two runs' keys may collide where one's do not
        lock = threading.RLock()
        self.cursors = Cursors(self._register_all, lock, before=lambda: self.follow())  # late bound: patchable
        self.lease = leases.Lease(cache_root, owner)  # the parts the views read: not deleted under them
        self._seen = {name: r.generation for name, r in runs.items()}  # the runs' data the views show
        self._rebuilding = threading.local()  # .on: this thread is remaking the set's views (``follow``)
        try:
            self._merge()
            self.build()
        except BaseException:
            self.cursors.settle()
            raise

    def _merge(self) -> None:
        # new dicts, swapped in whole: a query in another thread never reads them half made
        owner: dict[int, str] = {}
        file_no, states, caches = {}, {}, {}
        paths: dict[int, str] = {}
        for name, r in self.runs.items():
            files = r.relations.files
            for p, n in files.file_no.items():
                if n in owner and owner[n] != name:
                    if paths[n] == p:  # sample ids are per file: one file cannot be in two runs of a set
                        raise ValueError(f"runs {owner[n]!r} and {name!r} both read {p}: a RunSet holds runs of "
                                         "different log files (to compare options on the same logs, compare the "
                                         "two runs' frames)")
                    raise ValueError(f"runs {owner[n]!r} and {name!r} number their files alike ({paths[n]} and "
                                     f"{p}): open them with the same cache_dir")
                owner[n], paths[n] = name, p
            file_no.update(files.file_no)
            states.update(files.states)
            caches.update(files.caches)
        merged = FileParts()
        merged.file_no, merged.states, merged.caches = file_no, states, caches
        self._owner, self.files = owner, merged
        # the runs' token files as of now, kept for the set's cursors: a run refreshed meanwhile names its new
        # ones otherwise, and the set's views name these until the set follows (``follow``)
        self._token_runs = [r.relations for r in self.runs.values() if r.relations.token_fields()]
        self._token_sources = [src for r in self.runs.values() for src in r.relations.token_sources()]
        self.names()  # custom fields named over every run's keys at once, before any run's SQL asks

    def build(self) -> None:
        with self.cursors.lock:  # no cursor is made meanwhile: each has the files its views name
            self.cursors.register_again()
            self.lease.hold(p for _, p in self.files.parts())
            # its number table is remade whole (each run's files are numbered on their own)
            build_views(self.cursors.cursor(), self, self.nums, {}, by_file=False)
            self.builds += 1

    def follow(self) -> bool:
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
            held.enter_context(self.cursors.lock)
            for r in self.runs.values():
                held.enter_context(r.relations.tokens.lock)
            seen = {name: r.generation for name, r in self.runs.items()}
            if seen == self._seen:
                return False
            self._rebuilding.on = True
            try:
                self._merge()
                self.build()
            finally:
                self._rebuilding.on = False
            self._seen = seen
        return True

    # -- what the queries read (``_queries.Relations``) ----------------------------------------------
    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.cursors.cursor()

    def execute(self, query: str, params: list | None = None) -> duckdb.DuckDBPyConnection:
        return self.cursors.execute(query, params)

    def parts(self, file_nos=None) -> list[tuple[int, str]]:
        self.follow()
        return self.files.parts(file_nos)

    def file_states(self) -> dict:
        # the runs' own, not those merged when the views were last made: a run that read only lines it skips (a
        # cap, a step range) changed its files' counts, not its data (no new generation, no merge)
        self.follow()
        return {p: st for r in self.runs.values() for p, st in r.relations.file_states().items()}

    def token_fields(self) -> list[str]:
        return list(dict.fromkeys(f for r in self.runs.values() for f in r.relations.token_fields()))

    def leaves_samples_out(self) -> bool:
        return any(r.relations.leaves_samples_out() for r in self.runs.values())

    def names(self) -> dict[str, str]:
        column_names(self.files.custom_keys(), self.column_names)
        return self.column_names

    def problems(self) -> list[Problem]:
        # fields renamed in the set (its runs' keys together), not as each run alone named them
        own = [p for r in self.runs.values() for p in r.relations.problems() if p.kind != "renamed_field"]
        renames = frozenset().union(*(r.relations.reader.own_renames for r in self.runs.values()))
        return own + self.files.renamed(self.names(), renames)

    # -- SQL: the union of the runs' own --------------------------------------------------------
    def _split(self, parts, lines=None):
        for name, r in self.runs.items():
            mine = [(n, p) for n, p in parts if self._owner.get(n) == name]
            if not mine:
                continue
            sub = None if lines is None else {n: v for n, v in lines.items() if self._owner.get(n) == name}
            if sub is not None and not sub:
                continue
            yield name, r.relations, mine, sub

    def samples_sql(self, parts, where: str = "", lines=None) -> str:
        selects = [_of_run(name, rel.samples_sql(mine, lines=sub, names=self.column_names))
                   for name, rel, mine, sub in self._split(parts, lines)]
        if not selects:
            return NO_SAMPLES
        # the runs read may lack some of the set's optional or custom columns: empty there
        extra = ["run", *self.files.optional(), *(self.names()[k] for k in self.files.custom_keys())]
        nulls = ", ".join(f'NULL::{self.nums.type_of(c)} AS "{c}"' for c in extra)
        selects.append(f"SELECT {nulls} WHERE false")
        return f"SELECT * FROM ({' UNION ALL BY NAME '.join(selects)}) {where}"

    def samples_raw_sql(self, scan=None) -> str:
        selects = [_of_run(name, r.relations.samples_raw_sql(self.column_names, scan=scan))
                   for name, r in self.runs.items()]
        return " UNION ALL BY NAME ".join(selects)

    def tokens_sql(self, parts, lines=None, limit=None) -> str:
        selects = [f"SELECT * FROM ({rel.tokens_sql(mine, sub, limit)})" for _, rel, mine, sub
                   in self._split(parts, lines) if rel.token_fields()]
        return " UNION ALL BY NAME ".join(selects) if selects else NO_TOKENS

    def turns_sql(self, parts, lines=None) -> str:
        selects = [f"SELECT {literal(name)} AS run, * FROM ({rel.turns_sql(mine, sub)})"
                   for name, rel, mine, sub in self._split(parts, lines)]
        return " UNION ALL ".join(selects) if selects else NO_TURNS

    def _register_all(self, cur) -> None:
        self.register_tokens(cur)

    def register_tokens(self, cur, parts=None, lines=None) -> None:
        if lines is None:  # the view's source: each run's every part, as the set's views name them
            for name, source in self._token_sources:
                cur.register(name, source)
            return
        for _, rel, mine, sub in self._split(parts, lines):
            rel.register_tokens(cur, mine, sub)

    def token_sources(self) -> list[tuple[str, object]]:
        """(name, Arrow source) of each run's token files as the runs name them now (``tokens_sql`` does too)."""
        return [src for r in self.runs.values() for src in r.relations.token_sources()]

    def map_token_files(self) -> None:
        for r in self.runs.values():
            r.relations.map_token_files()
        with self.cursors.lock:
            by_name = {rel.tokens.relation(): rel for rel in self._token_runs}  # (a rule's counts: no token file)
            self._token_sources = [(n, by_name[n].tokens.source()[1] if n in by_name else src)
                                   for n, src in self._token_sources]


def _of_run(name: str, samples: str) -> str:
    """A run's ``samples`` SQL with the set's ``run`` column, and the run's name in front of each readable id
    ("baseline/rank0.jsonl:12")."""
    return f"SELECT {literal(name)} AS run, * REPLACE ({literal(name + '/')} || id AS id) FROM ({samples})"


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
