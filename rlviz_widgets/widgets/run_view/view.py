"""RunView: the facade widget. Its traits are the filters and frames users read and link; it wires them to its
parts (chart, table, detail, token strip, groups tab) and to the queries that feed them (``_chart_data``). It is one
anywidget: its front end draws the controls and panes from its synced traits and mounts the parts' own front ends,
their state and messages carried by the hub over the view's comm."""

from __future__ import annotations

import html
import os

import pandas as pd
import traitlets

from rlviz_widgets import _chart_data as chart_data
from rlviz_widgets import _charts as charts
from rlviz_widgets._mismatch import MismatchRule
from rlviz_widgets._sql import bin_count
from rlviz_widgets.run.run import Run, open_run
from rlviz_widgets.run.runset import RunSet
from rlviz_widgets.widgets import _fallback as fallback
from rlviz_widgets.widgets._base import STATIC, RpcWidget, with_fallback
from rlviz_widgets.widgets._validate import clip
from rlviz_widgets.widgets.chart import ChartWidget
from rlviz_widgets.widgets.run_view import panes
from rlviz_widgets.widgets.run_view.controls import Button, Control, Tabs, boolean, number_in, one_of
from rlviz_widgets.widgets.run_view.filters import UNSET, condition, normalise_range, step_by, steps_label
from rlviz_widgets.widgets.run_view.following import Follower
from rlviz_widgets.widgets.run_view.groups_tab import GroupsTab
from rlviz_widgets.widgets.run_view.hub import Hub
from rlviz_widgets.widgets.sample_table import SampleTable
from rlviz_widgets.widgets.step_slider import StepSlider
from rlviz_widgets.widgets.token_strip import TokenStrip

KL_METRICS = ("kl_mean", "log_ratio_mean")
SLIDER_KEYS = ("min", "max", "step", "value", "readout", "disabled")


class RunView(RpcWidget):
    """A whole run in one display: curves, reward distribution, sample table, sample detail.

    Every filter is a traitlet (``steps``, ``reward``, ``search``, ``where``), so it can be
    observed or linked; ``filtered``, ``selected``, ``selected_tokens`` and ``selected_turns`` are DataFrames that
    follow the brushes and the picked rows (computed when read, or pushed to observers).
    """

    _esm = STATIC / "run_view.js"
    _front_end = "run_view"
    _browser_writes = {}  # the front end sends messages (controls, and its parts' updates through the hub)

    # what the front end draws (small: a page of text at most)
    header = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """The run's header line, in parts (text)."""

    status = traitlets.Unicode("").tag(sync=True)
    """The count line ("120 of 960 samples"), or what following the logs failed on."""

    controls = traitlets.Dict().tag(sync=True)
    """The controls' values: band, zero_shift, kl_metric, kl_shown, tab."""

    detail = traitlets.Dict().tag(sync=True)
    """The picked sample's pane: sample_id, facts, blocks (its turns) and a note; {} for none."""

    group_panes = traitlets.Dict().tag(sync=True)
    """The groups tab's panes: built, summary, detail, history."""

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
                                         help="The tokens of the picked samples, one row per token, with each "
                                              "token's turn, role and trained flag.")

    selected_turns = traitlets.Instance(pd.DataFrame, allow_none=True,
                                        help="The turns of the picked samples, one row per turn (run.turns).")

    mismatch_rule = traitlets.Any(None, allow_none=True,
                                  help="Which trained tokens a rollout-trainer mismatch correction masks (a "
                                       "MismatchRule, or a kind's name); set it to work every figure out again.")

    follow = traitlets.Bool(False, help="Watch the logs of a run still training (new lines and files).")

    follow_interval = traitlets.Float(3.0, help="Seconds between two looks at the logs while following.")

    def __init__(self, source: Run | str | os.PathLike | list | dict, *, bins: int = 30, follow: bool = False,
                 follow_interval: float = 3.0, mismatch_rule: MismatchRule | str | None = None,
                 **open_run_options):
        """``source``: what ``open_run`` takes, a ``Run`` already open, or a dict of them (runs overlaid); ``bins``:
        reward bins of the heat map and histograms; ``follow``: look at the logs every ``follow_interval``
        seconds; ``mismatch_rule``: the rule of the mismatch columns (``open_run``'s; it may be changed live);
        ``open_run_options``: passed to ``open_run`` (``steps=`` there keeps only those steps in the run;
        ``filter(steps=...)`` brushes them in the view)."""
        bins = bin_count(bins)  # before the logs are read: bins=0 failed only when the front end asked for data
        self.run = _open(source, open_run_options)
        if mismatch_rule is not None:
            _set_rule(self.run, mismatch_rule)
        self._runs = chart_data.run_names(self.run)
        self._generation = self.run.generation  # the run's data this view shows
        self.bins = bins
        self._syncing = False  # a change made by the view itself: not echoed back to where it came from
        self._has_tokens, self._has_ref = chart_data.capabilities(self.run)
        self._panels = chart_data.panels(self.run)  # mismatch / entropy: drawn where the run has them
        self._follower = Follower(self)
        self._make_parts()
        super().__init__(header=panes.header(self.run, self._runs, self._has_tokens))
        self.hub = Hub(self.send)
        for name, part, keys in (("chart", self.chart, None), ("table", self.table, None), ("strip", self.strip, None),
                                 ("slider", self.step_slider.children[0], SLIDER_KEYS),
                                 ("slider_label", self.step_slider.children[1], ["value"])):
            self.hub.add(name, part, keys)
        self.on_msg(self._on_message)
        self.color_by = self.strip.color_by
        self._wire()
        self._on_count()
        self._show_controls()
        self._show_groups()
        self.follow_interval = follow_interval
        self.follow = follow
        self.set_trait("mismatch_rule", getattr(self.run, "mismatch_rule", None))

    def _make_parts(self) -> None:
        run = self.run
        # controls (the front end draws them from ``controls``; Python sets their values)
        self.band = Control(1.0, number_in(0.0, 3.0))
        self.zero_shift = Control(False, boolean)
        self.kl_metric = Control("kl_mean", one_of(*KL_METRICS), visible=self._has_tokens)
        self.tabs = Tabs()
        self.step_slider = StepSlider(run.step_values)
        self.prev_button, self.next_button = Button("◀ prev"), Button("next ▶")
        self.clear_button = Button("clear filters")
        # parts (their own front ends, mounted by the view's)
        self.chart = ChartWidget(self._spec(), self._datasets)
        self.table = SampleTable(run, height=320)
        self.strip = TokenStrip(run, [])
        self.groups_box = GroupsTab(run, self._has_tokens, self._add_group_parts)

    def _add_group_parts(self, table: SampleTable, strip: TokenStrip) -> None:
        self.hub.add("group_table", table)
        self.hub.add("group_strip", strip)

    def _wire(self) -> None:
        """Every part follows the traits; the traits follow every part."""
        traitlets.link((self, "color_by"), (self.strip, "color_by"))
        traitlets.link((self, "selected_ids"), (self.table, "selected_ids"))
        traitlets.link((self, "search"), (self.table, "search"))
        self.chart.observe(self._on_brush, "selections")
        self.band.observe(self._on_controls, "value")
        self.zero_shift.observe(self._on_controls, "value")
        self.kl_metric.observe(self._on_metric, "value")
        for control in (self.band, self.zero_shift, self.kl_metric, self.tabs):
            control.observe(self._show_controls, ("value", "visible"))
        self.step_slider.observe(self._on_slider, "value")
        self.prev_button.on_click(lambda _: self._step_by(-1))
        self.next_button.on_click(lambda _: self._step_by(+1))
        self.clear_button.on_click(lambda _: self.clear())
        self.table.observe(self._on_count, "row_count")
        self.tabs.observe(self._on_tab, "value")
        self.groups_box.observe(self._show_groups, ("built", "summary", "detail", "history"))

    def _show_controls(self, _change=None) -> None:
        self.controls = {"band": self.band.value, "zero_shift": self.zero_shift.value,
                         "kl_metric": self.kl_metric.value, "kl_shown": self.kl_metric.visible,
                         "tab": self.tabs.value}

    def _show_groups(self, _change=None) -> None:
        g = self.groups_box
        self.group_panes = {"built": g.built, "summary": g.summary, "detail": g.detail, "history": g.history}

    # -- what the front end sends ------------------------------------------------------------------
    def _on_message(self, _widget, content, buffers) -> None:
        """A control moved or a button clicked in the browser (checked as from Python), or a part's message."""
        if not isinstance(content, dict):
            return
        kind, name = content.get("type"), content.get("name")
        controls = {"band": self.band, "zero_shift": self.zero_shift, "kl_metric": self.kl_metric, "tab": self.tabs}
        buttons = {"prev": self.prev_button, "next": self.next_button, "clear": self.clear_button}
        try:
            if kind == "control" and name in controls:
                controls[name].value = content.get("value")
            elif kind == "click" and name in buttons:
                buttons[name].click()
            elif kind in ("control", "click"):
                raise ValueError(f"no control {clip(repr(name), 60)}")
            else:
                self.hub.receive(content, buffers)
                return
            if self.error.startswith("control:"):
                self.error = ""
        except Exception as e:  # noqa: BLE001 - said in the view; its controls shown as the kernel has them
            self.show_error("control", e)
            self.send_state("controls")

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

    # the groups tab's parts (None until the tab is first opened) and panes
    group_table = property(lambda self: self.groups_box.table, doc="The table of GRPO groups.")
    group_strip = property(lambda self: self.groups_box.strip, doc="The picked group's token strips.")
    group_summary = property(lambda self: self.groups_box.summary, doc="The groups tab's summary line.")
    group_detail = property(lambda self: self.groups_box.detail, doc="The picked group's responses (data).")
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

    @traitlets.default("selected_turns")
    def _selected_turns_default(self):
        held = set(self.run.held_rows(self.selected_ids).sample_id)  # as selected_tokens: held samples only
        return self.run.turns([i for i in self.selected_ids if i in held])

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
            self.detail = {**self.detail, "note": panes.LEFT_FILTER}

    @traitlets.observe("selected_ids")
    def _on_selected(self, _change) -> None:
        self._refresh_frame("selected")
        self._refresh_frame("selected_tokens")
        self._refresh_frame("selected_turns")
        ids = self.selected_ids
        if not ids:
            self.detail = {}
            self.strip.sample_ids = []
            return
        sid = ids[-1]
        rows = self.run.held_rows([sid])
        self.detail = panes.detail(rows, self.run.turns([sid]) if len(rows) else None)
        if self._has_tokens:
            self.strip.sample_ids = [sid]

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
        self.status = f"{n:,} of {total:,} samples" if n != total else f"{total:,} samples"

    def _on_tab(self, change) -> None:
        if change["new"] == 1:  # (the browser's tab, or Python's)
            self.groups_box.build(self.strip.color_by)

    # -- a run still training ----------------------------------------------------------------------
    @traitlets.validate("mismatch_rule")
    def _check_rule(self, proposal):
        if proposal["value"] is None and isinstance(self.run, RunSet):
            return None
        try:
            _set_rule(self.run, proposal["value"])
        except (TypeError, ValueError) as e:
            raise traitlets.TraitError(str(e)) from None
        return self.run.mismatch_rule

    @traitlets.observe("mismatch_rule")
    def _on_rule(self, _change) -> None:
        if self.run.generation != self._generation:  # the figures moved: every part shows them again
            self._generation = self.run.generation
            self._data_changed()

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
        self.header = panes.header(self.run, self._runs, self._has_tokens)
        caps, panels = chart_data.capabilities(self.run), chart_data.panels(self.run)
        if (caps, panels) != ((self._has_tokens, self._has_ref), self._panels):  # a followed run gained them
            self._has_tokens, self._has_ref = caps
            self._panels = panels
            self.groups_box.has_tokens = self._has_tokens
            self.kl_metric.visible = self._has_tokens
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
                               runs=self._runs, panels=self._panels)

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
        bundle = super()._repr_mimebundle_(**kwargs)
        return with_fallback(bundle, lambda: fallback.run_view(self, html.escape(" · ".join(self.header))))


def _set_rule(run: Run, rule) -> None:
    """Puts the mismatch rule on the run (a set of runs has one per run: set it on those)."""
    if isinstance(run, RunSet):
        raise TypeError("a set of runs has a mismatch rule per run: open each with mismatch_rule=, or set "
                        "view.run.runs[name].mismatch_rule")
    run.mismatch_rule = rule


def _open(source, options: dict) -> Run:
    """The run a RunView shows: ``source`` itself when it is a Run, else opened (a dict: a set of runs)."""
    if isinstance(source, Run):
        if options:
            raise TypeError("open_run options apply when RunView opens the logs itself, not to a given Run")
        return source
    if isinstance(source, dict):  # several runs overlaid: {"baseline": path_a, "kl0.05": path_b}
        return RunSet.open(source, **options)
    return open_run(source, **options)
