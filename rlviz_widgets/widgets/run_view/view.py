"""RunView: the facade widget. Its traits are the filters and frames users read and link; it wires them to its
parts (chart, table, detail, token strip, groups tab) and to the queries that feed them (``_chart_data``)."""

from __future__ import annotations

import os

import ipywidgets as W
import pandas as pd
import traitlets

from rlviz_widgets import _chart_data as chart_data
from rlviz_widgets import _charts as charts
from rlviz_widgets._sql import bin_count
from rlviz_widgets.run.run import Run, open_run
from rlviz_widgets.run.runset import RunSet
from rlviz_widgets.widgets.chart import ChartWidget
from rlviz_widgets.widgets.run_view import panes
from rlviz_widgets.widgets.run_view.filters import UNSET, condition, normalise_range, step_by, steps_label
from rlviz_widgets.widgets.run_view.following import Follower
from rlviz_widgets.widgets.run_view.groups_tab import GroupsTab
from rlviz_widgets.widgets.sample_table import SampleTable
from rlviz_widgets.widgets.step_slider import StepSlider
from rlviz_widgets.widgets.token_strip import TokenStrip


class RunView(W.VBox):
    """A whole run in one display: curves, reward distribution, sample table, sample detail.

    Every filter is a traitlet (``steps``, ``reward``, ``search``, ``where``), so it can be
    observed or linked; ``filtered``, ``selected`` and ``selected_tokens`` are DataFrames that
    follow the brushes and the picked rows (computed when read, or pushed to observers).
    """

    steps = traitlets.Tuple(allow_none=True, default_value=None,
                            help="Inclusive step range (lo, hi) brushed or set with filter(); None = every step.")

    reward = traitlets.Tuple(allow_none=True, default_value=None,
                             help="Inclusive reward range (lo, hi); None = every reward.")

    search = traitlets.Unicode("", help="Text searched for in prompt, response and ref_response.")

    where = traitlets.Unicode("", help='Extra SQL condition over the samples columns, e.g. "kl_mean > 0.1".')

    selected_ids = traitlets.List(traitlets.Int(), help="sample_ids of the rows picked in the table.")

    color_by = traitlets.Unicode("kl", help="The token metric colouring the sample's token strip.")

    filtered = traitlets.Instance(pd.DataFrame, allow_none=True, help="The samples passing every filter.")

    selected = traitlets.Instance(pd.DataFrame, allow_none=True, help="The picked samples.")

    selected_tokens = traitlets.Instance(pd.DataFrame, allow_none=True,
                                         help="The tokens of the picked samples, one row per token.")

    follow = traitlets.Bool(False, help="Watch the logs of a run still training (new lines and files).")

    follow_interval = traitlets.Float(3.0, help="Seconds between two looks at the logs while following.")

    def __init__(self, source: Run | str | os.PathLike | list | dict, *, bins: int = 30, follow: bool = False,
                 follow_interval: float = 3.0, **open_run_options):
        """``source``: what ``open_run`` takes, a ``Run`` already open, or a dict of them (runs overlaid); ``bins``:
        reward bins of the heat map and histograms; ``follow``: look at the logs every ``follow_interval``
        seconds; ``open_run_options``: passed to ``open_run`` (``steps=`` there keeps only those steps in the
        run; ``filter(steps=...)`` brushes them in the view)."""
        bins = bin_count(bins)  # before the logs are read: bins=0 failed only when the front end asked for data
        self.run = _open(source, open_run_options)
        self._runs = chart_data.run_names(self.run)
        self._generation = self.run.generation  # the run's data this view shows
        self.bins = bins
        self._syncing = False  # a change made by the view itself: not echoed back to where it came from
        self._has_tokens, self._has_ref = chart_data.capabilities(self.run)
        self._follower = Follower(self)
        self._make_parts()
        super().__init__(children=[
            self._header,
            W.HBox([self.band, self.zero_shift, self.kl_metric], layout=W.Layout(flex_flow="row wrap")),
            self.chart,
            W.HBox([self.step_slider, self.prev_button, self.next_button, self.clear_button, self.status],
                   layout=W.Layout(flex_flow="row wrap", align_items="center")),
            self.tabs,
        ])
        self.add_class("rlv-run-view")
        self.color_by = self.strip.color_by
        self._wire()
        self._on_count()
        self.follow_interval = follow_interval
        self.follow = follow

    def _make_parts(self) -> None:
        run = self.run
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
        self._header = W.HTML(panes.header_html(run, self._runs, self._has_tokens))
        self.samples_box = W.VBox([self.table, self.detail, self.strip])
        self.groups_box = GroupsTab(run, self._has_tokens)
        self.tabs = W.Tab(children=[self.samples_box, self.groups_box])
        self.tabs.set_title(0, "samples")
        self.tabs.set_title(1, "GRPO groups")

    def _wire(self) -> None:
        """Every part follows the traits; the traits follow every part."""
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
        self.tabs.observe(self._on_tab, "selected_index")

    # -- the Python API ----------------------------------------------------------------------------
    def __repr__(self) -> str:
        shown = [f"{k}={v!r}" for k, v in (("steps", self.steps), ("reward", self.reward), ("search", self.search),
                                            ("where", self.where)) if v]
        # the first line of each run's summary (a RunSet's has one per run, each starting "[name] Run:")
        heads = [ln for ln in self.run.summary().splitlines() if ln.startswith(("Run:", "["))]
        return (f"RunView of {'; '.join(heads)}\n  filters: {', '.join(shown) or 'none'}; "
                f"{len(self.selected_ids)} selected")

    def filter(self, steps=UNSET, reward=UNSET, search: str | None = None, where: str | None = None) -> RunView:
        """Restrict the view: inclusive (lo, hi) ranges (either end None), text search, SQL condition.

        Only the arguments given change; ``steps=None`` (or ``reward=None``) clears that range.
        Moves the brushes and the table, exactly as the mouse would.
        """
        if where is not None:
            self.table.check_where(where)  # a ValueError before anything moves
        with self.hold_trait_notifications():
            if steps is not UNSET:
                self.steps = normalise_range(steps, "steps")
            if reward is not UNSET:
                self.reward = normalise_range(reward, "reward")
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
        return condition(self.steps, self.reward, self.where)

    @property
    def groups(self) -> pd.DataFrame:
        """One row per GRPO group (prompt x step, or the log's own group ids) with reward spread."""
        return self.groups_box.groups

    # the groups tab's parts (None until the tab is first opened)
    group_table = property(lambda self: self.groups_box.table, doc="The table of GRPO groups.")
    group_summary = property(lambda self: self.groups_box.summary, doc="The groups tab's summary line.")
    group_detail = property(lambda self: self.groups_box.detail, doc="The picked group's responses.")
    group_strip = property(lambda self: self.groups_box.strip, doc="The picked group's token strips.")
    prompt_history = property(lambda self: self.groups_box.history, doc="The picked group's prompt across steps.")

    # -- lazily computed frames -----------------------------------------------------------------
    @traitlets.default("filtered")
    def _filtered_default(self):
        return self.table.rows_of(self.table.ids_matching(self.search, self.condition))

    @traitlets.default("selected")
    def _selected_default(self):
        # the view's own ids: the table's follow through a link that may not have run yet (observers of
        # selected_ids run in the order they were made, this view's first)
        return self.table.rows_of(self.selected_ids)

    @traitlets.default("selected_tokens")
    def _selected_tokens_default(self):
        return self.run.held_tokens(self.selected_ids)  # a selection the run let go (a rewritten file) shows nothing

    def _refresh_frame(self, name: str) -> None:
        """Observers get the new frame now; everyone else computes it when they read it."""
        if self._trait_notifiers.get(name):
            setattr(self, name, getattr(self, f"_{name}_default")())
        else:
            self._trait_values.pop(name, None)

    # -- reactions ---------------------------------------------------------------------------------
    @traitlets.validate("steps", "reward")
    def _check_range(self, proposal):
        return normalise_range(proposal["value"], proposal["trait"].name)

    @traitlets.validate("selected_ids", "color_by", "search")
    def _check_linked(self, proposal):
        """As the linked part takes it: a value the part refuses is refused here too (it stayed on the view while
        the part kept the old one, and the two disagreed)."""
        name = proposal["trait"].name
        part = getattr(self, "strip" if name == "color_by" else "table", None)
        # traitlets has no public call for a trait's whole check (its type and the owner's @validate)
        return proposal["value"] if part is None else part.traits()[name]._validate(part, proposal["value"])  # noqa: SLF001

    @traitlets.validate("where")
    def _check_where(self, proposal):
        """A condition the samples cannot take is refused, the old one kept (it was kept, and broke ``filtered``)."""
        try:
            self.table.check_where(proposal["value"])
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
        self._keep_passing()

    @traitlets.observe("search")
    def _on_search(self, _change) -> None:
        self._refresh_frame("filtered")
        self._keep_passing()

    def _keep_passing(self) -> None:
        """The picked rows the filters now leave out are let go (``selected`` is of the rows shown); when the one
        in the detail was among them, the detail says so above the last picked one left, if any."""
        ids = self.selected_ids
        if not ids:
            return
        passing = set(self.table.ids_matching(self.search, self.condition))
        kept = [i for i in ids if i in passing]
        if kept == ids:
            return
        self.selected_ids = kept
        if ids[-1] not in passing:
            self.detail.value = panes.LEFT_FILTER_HTML + self.detail.value

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
        self.detail.value = panes.detail_html(self.run.held_rows([sid]))
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
            self.chart.show_error("brush", e)  # a brush the front end sent malformed: said, the filters as they were
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
        """The slider at the one step filtered; else at none, saying what is shown (every step, or a range)."""
        one = self.steps[0] if self.steps and self.steps[0] == self.steps[1] else None
        self._syncing = True
        try:
            with self.step_slider.hold_trait_notifications():
                self.step_slider.idle = steps_label(self.steps)
                self.step_slider.value = int(one) if one in set(self.run.step_values) else None
        finally:
            self._syncing = False

    def _step_by(self, delta: int) -> None:
        step = step_by(list(self.run.step_values), self.steps[0] if self.steps else None, delta)
        if step is not None:
            self.steps = (step, step)

    def _on_count(self, *_):
        n = self.table.row_count
        total = self.run.n_samples
        self.status.value = (f"<span class='rlv-count'>{n:,} of {total:,} samples</span>"
                             if n != total else f"<span class='rlv-count'>{total:,} samples</span>")

    def _on_tab(self, change) -> None:
        if change["new"] == 1:
            self.groups_box.build(self.strip.color_by)

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
        self._header.value = panes.header_html(self.run, self._runs, self._has_tokens)
        caps = chart_data.capabilities(self.run)
        if caps != (self._has_tokens, self._has_ref):  # a run followed from its first (empty) file gained them
            self._has_tokens, self._has_ref = caps
            self.groups_box.has_tokens = self._has_tokens
            self.kl_metric.layout.display = None if self._has_tokens else "none"
            self.chart.spec = self._spec()
        self.strip.reload()
        if any(r is not None and None in r for r in (self.steps, self.reward)):
            self._draw_brushes()  # an open end reaches the new data
        self.chart.refresh_view()
        self.table.reload()
        self.groups_box.reload()
        self._on_count()
        self._refresh_frame("filtered")
        # the picked sample as the log has it now (a file rewritten, or gone): its detail, strip and frames
        self._on_selected(None)

    @property
    def _follow_task(self):
        """The polling task while following, else None."""
        return self._follower.task

    @traitlets.observe("follow")
    def _on_follow(self, change) -> None:
        if not change["new"]:
            self._follower.stop()
            return
        try:
            self._follower.start()
        except RuntimeError:  # a plain script: no event loop to wait in without blocking
            self.follow = False
            raise

    # -- pieces ------------------------------------------------------------------------------------
    def _draw_brushes(self) -> None:
        """The brushes moved to the ranges (from Python, or open ends after the data grew)."""
        self._syncing = True
        try:
            self.chart.set_interval(charts.STEPS_BRUSH, "step", chart_data.brush_extent(self.run, self.steps, "step"))
            self.chart.set_interval(charts.REWARD_BRUSH, "bin_start",
                                    chart_data.brush_extent(self.run, self.reward, "reward"))
        finally:
            self._syncing = False

    def _spec(self) -> dict:
        return charts.run_spec(metric=self.kl_metric.value, has_ref=self._has_ref, has_tokens=self._has_tokens,
                               runs=self._runs)

    def _datasets(self) -> dict[str, pd.DataFrame]:
        """What the chart shows, as the controls have it now (the chart asks for it)."""
        return chart_data.run_datasets(self.run, bins=self.bins, band=self.band.value,
                                       zero_shift=self.zero_shift.value, has_ref=self._has_ref)

    def to_html(self, path: str | os.PathLike, *, max_samples: int = 2000, extremes: int = 5) -> os.PathLike:
        """Write what this view shows to ``path`` as ONE self-contained HTML file (no kernel, no network): the
        charts, the filters, the first ``max_samples`` filtered samples (sortable), the texts and token strips of
        the picked samples and of the ``extremes`` top and bottom ones by reward, the run's metadata."""
        from rlviz_widgets import _report  # (_report imports RunView)

        return _report.report(self, path, max_samples=max_samples, extremes=extremes)

    def _repr_mimebundle_(self, **kwargs):
        """The widget view, and the run's summary as ``text/html`` for pages without the widget front end (an
        exported notebook)."""
        from rlviz_widgets.widgets import _fallback as fallback
        from rlviz_widgets.widgets._base import with_fallback

        bundle = super()._repr_mimebundle_(**kwargs)
        return with_fallback(bundle, lambda: fallback.run_view(self, self._header.value))


def _open(source, options: dict) -> Run:
    """The run a RunView shows: ``source`` itself when it is a Run, else opened (a dict: a set of runs)."""
    if isinstance(source, Run):
        if options:
            raise TypeError("open_run options apply when RunView opens the logs itself, not to a given Run")
        return source
    if isinstance(source, dict):  # several runs overlaid: {"baseline": path_a, "kl0.05": path_b}
        return RunSet.open(source, **options)
    return open_run(source, **options)
