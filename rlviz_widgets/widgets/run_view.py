"""RunView: the linked notebook view of a whole run (curves, distributions, table, sample detail)."""

from __future__ import annotations

import html
import math
import os

import ipywidgets as W
import pandas as pd
import traitlets

from rlviz_widgets import _charts as charts
from rlviz_widgets import _groups as groupsmod
from rlviz_widgets._sql import bin_count
from rlviz_widgets.run.run import Run, open_run
from rlviz_widgets.run.runset import RunSet
from rlviz_widgets.widgets.chart import ChartWidget
from rlviz_widgets.widgets.sample_table import SampleTable
from rlviz_widgets.widgets.step_slider import StepSlider
from rlviz_widgets.widgets.token_strip import TokenStrip


class _Unset:
    """``filter``'s default: the argument not given, that filter left as it is."""

    def __repr__(self) -> str:
        return "<unchanged>"


_UNSET = _Unset()
MAX_HIST_STEPS = 200
MAX_GROUP_CARDS = 16  # responses of a picked group shown side by side (as many as its token strips)
MAX_CARD_CHARS = 2000  # of each (a card scrolls; the sample table and detail give the whole text)
MAX_DETAIL_CHARS = 50_000  # of each text of the picked sample (a model's longest answers; view.selected has all)
MAX_NAME_CHARS = 200  # of a group's name (an id may be a whole question)
MAX_HISTORY_ROWS = 200  # steps of the prompt history table (its first and last; groups.prompt_history has all)
MAX_CURVE_STEPS = 1000  # points per curve at most (a few per pixel): the chart's data stay small on any run
MIN_RUN_CURVE_STEPS = 100  # points per run's curve at least, when several runs share MAX_CURVE_STEPS
MIN_RUN_HIST_STEPS = 20  # step buckets per run's heat map at least, when several runs share MAX_HIST_STEPS


def _range(value, name: str):
    """Normalise a (lo, hi) range; either end may be None; None clears it."""
    if value is None:
        return None
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise traitlets.TraitError(f"{name} must be a (lo, hi) pair or None; got {value!r}") from None
    try:
        lo = None if lo is None else float(lo)
        hi = None if hi is None else float(hi)
    except (TypeError, ValueError):
        raise traitlets.TraitError(f"{name}: each end must be a number or None; got {value!r}") from None
    if any(x is not None and math.isnan(x) for x in (lo, hi)):
        raise traitlets.TraitError(f"{name}: an end cannot be NaN; got {value!r} (None leaves an end open)")
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    lo = None if lo == -math.inf else lo  # as open as None (and SQL has no literal for it)
    hi = None if hi == math.inf else hi
    return None if lo is None and hi is None else (lo, hi)


def _clip(text: str, limit: int = MAX_CARD_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying so: HTML panes are widget state, sent (and saved) whole."""
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit:,} more characters]"


class RunView(W.VBox):
    """A whole run in one display: curves, reward distribution, sample table, sample detail.

    Every filter is a traitlet (``steps``, ``reward``, ``search``, ``where``), so it can be
    observed or linked; ``filtered``, ``selected`` and ``selected_tokens`` are DataFrames that
    follow the brushes and the picked rows (computed when read, or pushed to observers).
    """

    steps = traitlets.Tuple(allow_none=True, default_value=None)
    """Inclusive step range (lo, hi) brushed or set with ``filter``; None = every step."""

    reward = traitlets.Tuple(allow_none=True, default_value=None)
    """Inclusive reward range (lo, hi); None = every reward."""

    search = traitlets.Unicode("")
    """Text searched for in prompt, response and ref_response."""

    where = traitlets.Unicode("")
    """Extra SQL condition over the samples columns, e.g. "kl_mean > 0.1"."""

    selected_ids = traitlets.List(traitlets.Int())
    """sample_ids of the rows picked in the table."""

    color_by = traitlets.Unicode("kl")
    """The token metric colouring the sample's token strip."""

    filtered = traitlets.Instance(pd.DataFrame, allow_none=True)
    """The samples passing every filter (DataFrame)."""

    selected = traitlets.Instance(pd.DataFrame, allow_none=True)
    """The picked samples (DataFrame)."""

    selected_tokens = traitlets.Instance(pd.DataFrame, allow_none=True)
    """The tokens of the picked samples, one row per token."""

    follow = traitlets.Bool(False)
    """Watch the logs of a run still training: new lines and files appear every few seconds."""

    follow_interval = traitlets.Float(3.0)
    """Seconds between two looks at the logs while following."""

    def __init__(self, source: Run | str | os.PathLike | list, *, bins: int = 30, follow: bool = False,
                 follow_interval: float = 3.0, **open_run_options):
        """``source``: what ``open_run`` takes, a ``Run`` already open, or a dict of them (runs overlaid); ``bins``:
        reward bins of the heat map and histograms; ``follow``: look at the logs every ``follow_interval``
        seconds; ``open_run_options``: passed to ``open_run`` (``steps=`` there keeps only those steps in the
        run; ``filter(steps=...)`` brushes them in the view)."""
        bins = bin_count(bins)  # before the logs are read: bins=0 failed only when the front end asked for data
        if isinstance(source, Run):
            if open_run_options:
                raise TypeError("open_run options apply when RunView opens the logs itself, not to a given Run")
            self.run = source
        elif isinstance(source, dict):  # several runs overlaid: {"baseline": path_a, "kl0.05": path_b}
            self.run = RunSet.open(source, **open_run_options)
        else:
            self.run = open_run(source, **open_run_options)
        self._runs = tuple(self.run.runs) if isinstance(self.run, RunSet) else ()
        self._generation = self.run.generation  # the run's data this view shows
        self.bins = bins
        self._syncing = False
        run = self.run
        self._has_tokens, self._has_ref = self._capabilities()
        # controls
        self.band = W.FloatSlider(value=1.0, min=0.0, max=3.0, step=0.1, description="band ×std",
                                  continuous_update=False, layout=W.Layout(width="260px"))
        self.zero_shift = W.Checkbox(value=False, description="zero shift", indent=False,
                                     layout=W.Layout(width="110px"))
        self.kl_metric = W.ToggleButtons(options=[("KL", "kl_mean"), ("log-ratio", "log_ratio_mean")],
                                         value="kl_mean", style={"button_width": "80px"})
        self.kl_metric.layout.display = None if self._has_tokens else "none"
        self.step_slider = StepSlider(run.step_values)
        self.prev_button = W.Button(description="◀ prev", layout=W.Layout(width="80px"))
        self.next_button = W.Button(description="next ▶", layout=W.Layout(width="80px"))
        self.clear_button = W.Button(description="clear filters", layout=W.Layout(width="110px"))
        self.status = W.HTML()
        # parts
        self.chart = ChartWidget(self._spec(), self._datasets)
        self.table = SampleTable(run, height=320)
        self.detail = W.HTML()
        self.strip = TokenStrip(run, [])
        self.strip.layout.display = "none"
        header = W.HTML(self._header_html())
        super().__init__(children=[
            header,
            W.HBox([self.band, self.zero_shift, self.kl_metric], layout=W.Layout(flex_flow="row wrap")),
            self.chart,
            W.HBox([self.step_slider, self.prev_button, self.next_button, self.clear_button, self.status],
                   layout=W.Layout(flex_flow="row wrap", align_items="center")),
            self._tabs(),
        ])
        self.add_class("rlv-run-view")
        self.color_by = self.strip.color_by
        # wiring: every part follows the traits; the traits follow every part
        traitlets.link((self, "color_by"), (self.strip, "color_by"))
        traitlets.link((self, "selected_ids"), (self.table, "selected_ids"))
        traitlets.link((self, "search"), (self.table, "search"))
        self.chart.observe(self._on_brush, "selections")
        self.band.observe(self._on_controls, "value")
        self.zero_shift.observe(self._on_controls, "value")
        self.kl_metric.observe(self._on_metric, "value")
        self.step_slider.observe(self._on_slider, "value")
        self.prev_button.on_click(lambda _: self._step_by(-1))
        self.next_button.on_click(lambda _: self._step_by(+1))
        self.clear_button.on_click(lambda _: self.clear())
        self.table.observe(self._on_count, "row_count")
        self._on_count()
        self._header = header
        self._follow_task = None
        self.follow_interval = follow_interval
        self.follow = follow

    # -- the Python API ----------------------------------------------------------------------------
    def __repr__(self) -> str:
        shown = [f"{k}={v!r}" for k, v in (("steps", self.steps), ("reward", self.reward), ("search", self.search),
                                            ("where", self.where)) if v]
        # the first line of each run's summary (a RunSet's has one per run, each starting "[name] Run:")
        heads = [ln for ln in self.run.summary().splitlines() if ln.startswith(("Run:", "["))]
        return (f"RunView of {'; '.join(heads)}\n  filters: {', '.join(shown) or 'none'}; "
                f"{len(self.selected_ids)} selected")

    def filter(self, steps=_UNSET, reward=_UNSET, search: str | None = None, where: str | None = None) -> RunView:
        """Restrict the view: inclusive (lo, hi) ranges (either end None), text search, SQL condition.

        Only the arguments given change; ``steps=None`` (or ``reward=None``) clears that range.
        Moves the brushes and the table, exactly as the mouse would.
        """
        if where is not None:
            self.table._source.check(where)  # a ValueError before anything moves
        with self.hold_trait_notifications():
            if steps is not _UNSET:
                self.steps = _range(steps, "steps")
            if reward is not _UNSET:
                self.reward = _range(reward, "reward")
            if search is not None:
                self.search = search
            if where is not None:
                self.where = where
        return self

    def clear(self) -> RunView:
        """Remove every filter and brush."""
        return self.filter(steps=None, reward=None, search="", where="")

    @property
    def condition(self) -> str:
        """The SQL condition the table and ``filtered`` use (without the text search)."""
        conds = []
        for col, rng in (("step", self.steps), ("reward", self.reward)):
            if rng:
                lo, hi = rng
                if lo is not None:
                    conds.append(f"{col} >= {lo!r}::DOUBLE" if math.isfinite(lo) else "false")  # only +inf left
                if hi is not None:
                    conds.append(f"{col} <= {hi!r}::DOUBLE" if math.isfinite(hi) else "false")  # only -inf left
        if self.where.strip():
            conds.append(f"({self.where}\n)")  # a where ending in a -- comment must not swallow the ")"
        return " AND ".join(conds)

    # -- lazily computed frames -----------------------------------------------------------------
    @traitlets.default("filtered")
    def _filtered_default(self):
        return self.table._source.rows(self.table._source.ids(self.search, self.condition))

    @traitlets.default("selected")
    def _selected_default(self):
        # the view's own ids: the table's follow through a link that may not have run yet (observers of
        # selected_ids run in the order they were made, this view's first)
        return self.table._source.rows(self.selected_ids)

    @traitlets.default("selected_tokens")
    def _selected_tokens_default(self):
        return self.run._tokens(self.selected_ids)  # a selection the run let go (a rewritten file) shows nothing

    def _refresh_frame(self, name: str) -> None:
        """Observers get the new frame now; everyone else computes it when they read it."""
        if self._trait_notifiers.get(name):
            setattr(self, name, getattr(self, f"_{name}_default")())
        else:
            self._trait_values.pop(name, None)

    # -- reactions ---------------------------------------------------------------------------------
    @traitlets.validate("steps", "reward")
    def _check_range(self, proposal):
        return _range(proposal["value"], proposal["trait"].name)

    @traitlets.validate("selected_ids", "color_by", "search")
    def _check_linked(self, proposal):
        """As the linked part takes it: a value the part refuses is refused here too (it stayed on the view while
        the part kept the old one, and the two disagreed)."""
        name = proposal["trait"].name
        part = getattr(self, "strip" if name == "color_by" else "table", None)
        return proposal["value"] if part is None else part.traits()[name]._validate(part, proposal["value"])

    @traitlets.validate("where")
    def _check_where(self, proposal):
        """A condition the samples cannot take is refused, the old one kept (it was kept, and broke ``filtered``)."""
        try:
            self.table._source.check(proposal["value"])
        except (TypeError, ValueError) as e:
            raise traitlets.TraitError(str(e)) from None
        return proposal["value"]

    @traitlets.observe("steps", "reward", "where")
    def _on_filters(self, change) -> None:
        if not self._syncing:  # a change from Python: move the brushes
            self._draw_brushes()
        if change["name"] == "steps":
            self._sync_slider()
        self.table.where = self.condition
        self._refresh_frame("filtered")

    @traitlets.observe("search")
    def _on_search(self, _change) -> None:
        self._refresh_frame("filtered")

    @traitlets.observe("selected_ids")
    def _on_selected(self, _change) -> None:
        self._refresh_frame("selected")
        self._refresh_frame("selected_tokens")
        ids = self.selected_ids
        if not ids:
            self.detail.value = ""
            self.strip.sample_ids = []
            self.strip.layout.display = "none"
            return
        sid = ids[-1]
        self.detail.value = self._detail_html(sid)
        if self._has_tokens:
            self.strip.sample_ids = [sid]
            self.strip.layout.display = None

    def _on_brush(self, change) -> None:
        if self._syncing:
            return
        old, new = change["old"] or {}, change["new"] or {}
        self._syncing = True
        try:
            with self.hold_trait_notifications():  # only the brush that moved: an open end of the other stays open
                if old.get(charts.STEPS_BRUSH) != new.get(charts.STEPS_BRUSH):
                    self.steps = self.chart.interval(charts.STEPS_BRUSH, "step")
                if old.get(charts.REWARD_BRUSH) != new.get(charts.REWARD_BRUSH):
                    self.reward = self.chart.interval(charts.REWARD_BRUSH, "bin_start")
            if self.chart.error.startswith("brush:"):
                self.chart.error = ""
        except (TypeError, ValueError, AttributeError, traitlets.TraitError) as e:
            self.chart._show_error("brush", e)  # a brush the front end sent malformed: said, the filters as they were
        finally:
            self._syncing = False

    def _on_controls(self, _change) -> None:
        self.chart.refresh_view()

    def _on_metric(self, _change) -> None:
        self.chart.spec = self._spec()
        self.chart.refresh_view()

    def _on_slider(self, change) -> None:
        if self._syncing:
            return
        s = change["new"]
        if s is not None:
            self.steps = (s, s)

    def _sync_slider(self) -> None:
        values = set(self.run.step_values)
        if self.steps and self.steps[0] == self.steps[1] and self.steps[0] in values:
            self._syncing = True
            try:
                self.step_slider.value = int(self.steps[0])
            finally:
                self._syncing = False

    def _step_by(self, delta: int) -> None:
        values = list(self.run.step_values)
        if not values:
            return
        current = self.steps[0] if self.steps and self.steps[0] is not None else values[0] - 1
        import bisect

        i = bisect.bisect_right(values, current) if delta > 0 else bisect.bisect_left(values, current) - 1
        i = max(0, min(len(values) - 1, i))
        self.steps = (values[i], values[i])

    def _on_count(self, *_):
        n = self.table.row_count
        total = self.run.n_samples
        self.status.value = (f"<span class='rlv-count'>{n:,} of {total:,} samples</span>"
                             if n != total else f"<span class='rlv-count'>{total:,} samples</span>")

    # -- GRPO groups ---------------------------------------------------------------------------------
    def _tabs(self) -> W.Tab:
        self.samples_box = W.VBox([self.table, self.detail, self.strip])
        self.groups_box = W.VBox([W.HTML("<i>computing groups…</i>")])
        tabs = W.Tab(children=[self.samples_box, self.groups_box])
        tabs.set_title(0, "samples")
        tabs.set_title(1, "GRPO groups")
        tabs.observe(self._on_tab, "selected_index")
        self.tabs = tabs
        self.group_table = None
        self._group_ids: dict[str, int] = {}  # group name -> its row id in the group table
        return tabs

    @property
    def groups(self) -> pd.DataFrame:
        """One row per GRPO group (prompt x step, or the log's own group ids) with reward spread."""
        if getattr(self, "_groups", None) is None:
            self._groups = groupsmod.groups(self.run)
        return self._groups

    def _on_tab(self, change) -> None:
        if change["new"] == 1 and self.group_table is None:
            self._build_groups()

    def _groups_frame(self) -> pd.DataFrame:
        df = self.groups.drop(columns=["sample_ids"]).copy()
        # the table's row id: a number per group name, kept across polls (a position would name another group
        # once groups sorting before it appear, and the pick would move)
        ids = self._group_ids
        df.insert(0, "sample_id", [ids.setdefault(g, len(ids)) for g in df["group"]])
        return df

    def _build_groups(self) -> None:
        df = self._groups_frame()
        cols = [c for c in ("run", "step", "size", "reward_mean", "reward_std", "reward_range", "zero_spread",
                            "advantage_mean", "prompt") if c in df]
        self.group_table = SampleTable(df, columns=cols, height=260)
        self.group_table.sort_by, self.group_table.sort_desc = "reward_std", True
        self.group_summary = W.HTML(self._groups_summary())
        self.group_detail = W.HTML()
        self.group_strip = TokenStrip(self.run, [], color_by=self.strip.color_by, scale_scope="step",
                                      show_table=False)
        self.group_strip.layout.display = "none"
        self.prompt_history = W.HTML()
        self.group_table.observe(self._on_group_pick, "selected_ids")
        self.groups_box.children = [self.group_summary, self.group_table, self.group_detail, self.group_strip,
                                    self.prompt_history]

    def _groups_summary(self) -> str:
        g = self.groups
        if not len(g):
            return "<i>no samples</i>"
        multi = g[g["size"] > 1]
        if not len(multi):
            return ("<div class='rlv-groups-summary'>Every prompt has a single response at each step: "
                    "no GRPO groups in this log.</div>")
        zero = int(multi["zero_spread"].sum())
        return (f"<div class='rlv-groups-summary'><b>{len(multi):,}</b> groups of {int(multi['size'].min())}–"
                f"{int(multi['size'].max())} responses · <b style='color: var(--jp-warn-color0, #b45309)'>"
                f"{zero:,}</b> with zero reward spread (no learning signal) · sort the table by reward_std or "
                f"zero_spread; click a group to see its responses</div>")

    def _on_group_pick(self, change) -> None:
        if not change["new"]:
            self.group_detail.value = ""
            self.group_strip.layout.display = "none"
            return
        names = [g for g, i in self._group_ids.items() if i == int(change["new"][-1])]
        rows = self.groups[self.groups["group"].isin(names)]
        if not len(rows):  # gone (the log was rewritten)
            self.group_detail.value = ""
            self.group_strip.layout.display = "none"
            return
        row = rows.iloc[0]
        members = groupsmod.group_samples(self.run, row["group"])
        cards = []
        for _, r in members.head(MAX_GROUP_CARDS).iterrows():  # the best first; the group table has every one
            adv = "" if "advantage" not in r or pd.isna(r.get("advantage")) else f" · advantage {r['advantage']:.3g}"
            cards.append(f"<div class='rlv-group-card' style='border: 1px solid var(--jp-border-color2, #ddd); "
                         f"border-radius: 3px; padding: 4px; min-width: 220px; flex: 1'>"
                         f"<div style='font-size: 11px'>sample {int(r['sample_id'])} · reward "
                         f"<b>{'–' if pd.isna(r['reward']) else format(r['reward'], '.4g')}</b>{adv}</div>"
                         f"<pre style='white-space: pre-wrap; margin: 2px 0; font-size: 12px; max-height: 160px; "
                         f"overflow: auto'>{html.escape(_clip(str(r['response'] or '')))}</pre></div>")
        more = len(members) - MAX_GROUP_CARDS
        name = repr(row["group"]) if len(repr(row["group"])) <= MAX_NAME_CHARS else "<the group's name>"
        if more > 0:
            cards.append(f"<div style='align-self: center; font-size: 12px'>… and {more:,} more (lower rewards): "
                         f"<code>rw.groups.group_samples(view.run, {html.escape(name)})</code></div>")
        self.group_detail.value = (
            f"<div class='rlv-group-detail' style='color: var(--jp-ui-font-color1, #222)'>"
            f"<div style='margin: 6px 0'>group <code>{html.escape(_clip(str(row['group']), MAX_NAME_CHARS))}</code>"
            f" · step "
            f"{int(row['step'])} · prompt:</div><pre style='white-space: pre-wrap; font-size: 12px'>"
            f"{html.escape(_clip(str(row['prompt'] or '')))}</pre>"
            f"<div style='display: flex; gap: 6px; overflow-x: auto'>{''.join(cards)}</div></div>")
        if self._has_tokens:
            self.group_strip.sample_ids = [int(i) for i in members["sample_id"].head(MAX_GROUP_CARDS)]
            self.group_strip.layout.display = None
        hist = groupsmod.prompt_history(self.run, row["prompt"]) if row["prompt"] is not None else pd.DataFrame()
        if "run" in hist.columns:  # a set of runs: the picked group's run
            hist = hist[hist["run"] == row["run"]]
        if len(hist) > 1:
            def tr(h) -> str:
                return (f"<tr><td>{int(h['step'])}</td><td>{int(h['responses'])}</td><td>{h['reward_mean']:.4g}</td>"
                        f"<td>{h['reward_std']:.3g}</td><td>{h['reward_min']:.4g} … {h['reward_max']:.4g}</td></tr>")

            half = MAX_HISTORY_ROWS // 2
            if len(hist) > MAX_HISTORY_ROWS:  # a prompt asked at every step of a long run: its first and last steps
                gap = (f"<tr><td colspan='5'><i>… {len(hist) - 2 * half:,} steps between: "
                       f"<code>rw.groups.prompt_history(view.run, prompt)</code> gives every one</i></td></tr>")
                rows = "".join(map(tr, hist.head(half).to_dict("records"))) + gap + "".join(
                    map(tr, hist.tail(half).to_dict("records")))
            else:
                rows = "".join(map(tr, hist.to_dict("records")))
            self.prompt_history.value = (
                "<div class='rlv-prompt-history'><b>The same prompt across steps</b><table style='font-size: 12px'>"
                "<tr><th>step</th><th>responses</th><th>reward mean</th><th>std</th><th>range</th></tr>"
                f"{rows}</table></div>")
        else:
            self.prompt_history.value = "<i>this prompt appears at one step only</i>"

    # -- a run still training ----------------------------------------------------------------------
    def poll(self) -> bool:
        """Read what was appended to the logs since the last look; update every part. True if anything changed."""
        self.run.refresh()
        # the run's generation, not refresh()'s answer: another view of this run (or a set holding it) may have
        # read the change first
        changed = self.run.generation != self._generation
        if changed:
            self._generation = self.run.generation
            self._data_changed()
        return changed

    def _data_changed(self) -> None:
        """The run grew: redraw curves and counts; brushes, sort and selection stay where they are."""
        self._syncing = True
        try:
            self.step_slider.set_values(self.run.step_values)
        finally:
            self._syncing = False
        self._header.value = self._header_html()
        caps = self._capabilities()
        if caps != (self._has_tokens, self._has_ref):  # a run followed from its first (empty) file gained them
            self._has_tokens, self._has_ref = caps
            self.kl_metric.layout.display = None if self._has_tokens else "none"
            self.chart.spec = self._spec()
        self.strip.reload()
        if self.group_table is not None:
            self.group_strip.reload()
        if any(r is not None and None in r for r in (self.steps, self.reward)):
            self._draw_brushes()  # an open end reaches the new data
        self.chart.refresh_view()
        self.table.reload()
        self._groups = None
        if self.group_table is not None:
            self.group_table.replace_data(self._groups_frame())
            self.group_summary.value = self._groups_summary()
            self._on_group_pick({"new": self.group_table.selected_ids})  # the picked group may have grown
        self._on_count()
        self._refresh_frame("filtered")
        # the picked sample as the log has it now (a file rewritten, or gone): its detail, strip and frames
        self._on_selected(None)

    @traitlets.observe("follow")
    def _on_follow(self, change) -> None:
        import asyncio

        if change["new"] and self._follow_task is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is None:  # a plain script: no event loop to wait in without blocking
                self.follow = False
                raise RuntimeError("follow=True needs a running event loop, as in Jupyter; "
                                   "call view.poll() to look at the logs yourself")
            self._follow_task = loop.create_task(self._follow_loop())
        elif not change["new"] and self._follow_task is not None:
            self._follow_task.cancel()
            self._follow_task = None

    async def _follow_loop(self) -> None:
        import asyncio
        import logging

        try:
            while self.follow:
                await asyncio.sleep(self.follow_interval)
                try:
                    self.poll()
                except Exception as e:  # noqa: BLE001 - shown in the view, then we keep watching
                    logging.getLogger("rlviz_widgets").exception("follow: reading the logs failed")
                    self.status.value = ("<span style='color: var(--jp-error-color1, #c00)'>follow: "
                                         f"{html.escape(str(e))}</span>")
        finally:
            self._follow_task = None

    # -- pieces ------------------------------------------------------------------------------------
    def _full(self, rng, kind: str):
        """A range with open ends filled from the data, for drawing a brush (an end at infinity is no number JSON
        can carry); None where the data has no range (no rewards at all)."""
        if rng is None:
            return None
        col = "step" if kind == "step" else "reward"
        dmin, dmax = self.run.sql(f"select min({col}) FILTER (WHERE isfinite({col})) lo, "
                                  f"max({col}) FILTER (WHERE isfinite({col})) hi from _nums").iloc[0]
        if pd.isna(dmin) or pd.isna(dmax):
            return None
        lo, hi = rng
        if lo == math.inf:  # keeps nothing: a brush just past the data (a finite number), over no value
            lo = hi = math.nextafter(float(dmax), math.inf)
        elif hi == -math.inf:
            lo = hi = math.nextafter(float(dmin), -math.inf)
        # an open end filled from the data stays on the far side of the given one ((100, None) on steps 0..2 is
        # [100, 100], not [100, 2], which covers step 2)
        lo = min(float(dmin), hi) if lo is None else float(lo)
        hi = max(float(dmax), lo) if hi is None else float(hi)
        return (lo, hi)

    def _draw_brushes(self) -> None:
        """The brushes moved to the ranges (from Python, or open ends after the data grew)."""
        self._syncing = True
        try:
            self.chart.set_interval(charts.STEPS_BRUSH, "step", self._full(self.steps, "step"))
            self.chart.set_interval(charts.REWARD_BRUSH, "bin_start", self._full(self.reward, "reward"))
        finally:
            self._syncing = False

    def _capabilities(self) -> tuple[bool, bool]:
        """(token arrays, reference rewards): what the charts and the strip have to show."""
        run = self.run
        has_ref = "ref_reward" in run.columns and bool(run.sql("select count(ref_reward) n from _nums").n[0] > 0)
        return bool(run.token_metrics), has_ref

    def _spec(self) -> dict:
        return charts.run_spec(metric=self.kl_metric.value if hasattr(self, "kl_metric") else "kl_mean",
                               has_ref=self._has_ref, has_tokens=self._has_tokens, runs=self._runs)

    def _datasets(self) -> dict[str, pd.DataFrame]:
        runs = self.run.runs if self._runs else {"": self.run}
        values = self.run.step_values
        # several runs share the limits (each at least a few buckets): the data grow with neither steps nor runs
        points = min(MAX_CURVE_STEPS, max(MAX_CURVE_STEPS // len(runs), MIN_RUN_CURVE_STEPS))
        hist_steps = min(MAX_HIST_STEPS, max(MAX_HIST_STEPS // len(runs), MIN_RUN_HIST_STEPS))
        if len(values) > points:  # a long run: its curves in buckets of steps, as the heat map's
            starts = values[:: -(-len(values) // points)]
            per_run = {name: r.sql(r.steps_sql(starts=starts)) for name, r in runs.items()}
        else:
            per_run = {name: r.steps for name, r in runs.items()}
        curves = pd.concat([charts.curves_frame(st, self.band.value, self.zero_shift.value, run=name)
                            for name, st in per_run.items()], ignore_index=True)
        stats = pd.concat([charts.steps_frame(st, run=name) for name, st in per_run.items()], ignore_index=True)
        by = ("run",) if self._runs else ()
        if self._runs:  # runs overlaid on one edge set: reward and gap
            hist = pd.concat([self.run.histograms(["reward"], self.bins, max_steps=hist_steps, by=by)]
                             + ([self.run.histograms(["reward_gap"], self.bins, max_steps=hist_steps, by=by)]
                                if self._has_ref else []), ignore_index=True)
        else:  # policy and reference on one edge set, gap on its own
            cols = ["reward", "ref_reward"] if self._has_ref else ["reward"]
            hist = pd.concat([self.run.histograms(cols, self.bins, max_steps=hist_steps)]
                             + ([self.run.histograms(["reward_gap"], self.bins, max_steps=hist_steps)]
                                if self._has_ref else []), ignore_index=True)
        return {"curves": curves, "steps": stats, "hist": hist}

    def _header_html(self) -> str:
        run = self.run
        probs = len(run.problems)
        n_steps = len(run.step_values)
        parts = [f"<b>{run.n_samples:,}</b> samples", f"<b>{n_steps}</b> steps", f"<b>{len(run.files)}</b> file(s)",
                 *([f"runs: {', '.join(html.escape(n) for n in self._runs)}"] if self._runs else []),
                 "token arrays: " + (", ".join(run.token_metrics[:4]) + "…" if self._has_tokens else "none")]
        if probs:
            parts.append(f"<span style='color: var(--jp-warn-color0, #b45309)'>{probs} problem(s) in the logs: "
                         f"see <code>view.run.problems</code></span>")
        return "<div class='rlv-run-header'>" + " · ".join(parts) + "</div>"

    def _detail_html(self, sample_id: int) -> str:
        df = self.run._rows([sample_id])
        if not len(df):
            return ""
        r = df.iloc[0]

        def esc(v) -> str:
            return "" if v is None or (isinstance(v, float) and v != v) else html.escape(str(v), quote=True)

        def num(v) -> str:
            return "–" if v is None or pd.isna(v) else f"{v:.4g}"

        box = ("style='white-space: pre-wrap; word-break: break-word; margin: 0; padding: 6px; "
               "border: 1px solid var(--jp-border-color2, #ddd); border-radius: 3px; "
               "background: var(--jp-layout-color1, #fff); color: var(--jp-ui-font-color1, #222); "
               "font-family: var(--jp-code-font-family, monospace); font-size: 12px; max-height: 240px; "
               "overflow: auto'")
        cols = [("prompt", r.get("prompt")), ("response", r.get("response"))]
        if "ref_response" in r and r.get("ref_response") is not None:
            cols.append(("ref response", r.get("ref_response")))
        # a text past MAX_DETAIL_CHARS is cut (this pane is widget state, sent and saved whole): view.selected has it
        grid = "".join(f"<div><div style='font-weight: 600; margin-bottom: 2px'>{t}</div>"
                       f"<pre class='rlv-detail-{t.replace(' ', '-')}' {box}>"
                       f"{esc(_clip(v, MAX_DETAIL_CHARS) if isinstance(v, str) else v)}</pre></div>" for t, v in cols)
        facts = [*([("run", esc(r["run"]))] if "run" in r else []), ("sample", esc(r["sample_id"])),
                 ("step", esc(r["step"])), ("reward", num(r.get("reward"))),
                 ("ref_reward", num(r.get("ref_reward"))), ("gap", num(r.get("reward_gap"))),
                 ("kl mean", num(r.get("kl_mean"))), ("tokens", esc(r.get("n_tokens")))]
        if r.get("ground_truth") is not None:
            facts.append(("ground truth", esc(_clip(r["ground_truth"]) if isinstance(r["ground_truth"], str)
                                              else r["ground_truth"])))
        facts.append(("from", f"{esc(os.path.basename(str(r['file'])))}:{esc(r['line'])}"))
        fact_html = " · ".join(f"{k} <b>{v}</b>" for k, v in facts)
        return (f"<div class='rlv-detail' style='color: var(--jp-ui-font-color1, #222)'>"
                f"<div style='margin: 6px 0'>{fact_html}</div>"
                f"<div style='display: grid; grid-template-columns: repeat({len(cols)}, 1fr); gap: 8px'>{grid}</div>"
                f"</div>")
