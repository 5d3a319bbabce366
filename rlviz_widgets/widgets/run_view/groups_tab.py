"""The RunView's "GRPO groups" tab: a table of groups with their reward spread, the picked group's responses side
by side, and its prompt across steps. Built the first time the tab is opened (grouping a big run takes a while)."""

from __future__ import annotations

import html

import ipywidgets as W
import pandas as pd

from rlviz_widgets import _groups as groupsmod
from rlviz_widgets.run.run import Run
from rlviz_widgets.widgets.run_view.panes import clip
from rlviz_widgets.widgets.sample_table import SampleTable
from rlviz_widgets.widgets.token_strip import TokenStrip

MAX_GROUP_CARDS = 16  # responses of a picked group shown side by side (as many as its token strips)
MAX_NAME_CHARS = 200  # of a group's name (an id may be a whole question)
MAX_HISTORY_ROWS = 200  # steps of the prompt history table (its first and last; groups.prompt_history has all)
TABLE_COLUMNS = ("run", "step", "size", "reward_mean", "reward_std", "reward_range", "zero_spread",
                 "advantage_mean", "prompt")


class GroupsTab(W.VBox):
    """The tab's box; its parts (``table``, ``summary``, ``detail``, ``strip``, ``history``) exist once built."""

    def __init__(self, run: Run, has_tokens: bool):
        super().__init__([W.HTML("<i>computing groups…</i>")])
        self.run = run
        self.has_tokens = has_tokens  # kept up to date by the view: a followed run may gain token arrays
        self.table: SampleTable | None = None
        self.summary = self.detail = self.strip = self.history = None
        self._groups: pd.DataFrame | None = None
        self._ids: dict[str, int] = {}  # group name -> its row id in the group table

    @property
    def groups(self) -> pd.DataFrame:
        """One row per GRPO group (prompt x step, or the log's own group ids) with reward spread."""
        if self._groups is None:
            self._groups = groupsmod.groups(self.run)
        return self._groups

    def build(self, color_by: str) -> None:
        """Make the parts (once: the tab was opened); ``color_by``: the token metric colouring the group's
        strips."""
        if self.table is not None:
            return
        df = self._table_frame()
        self.table = SampleTable(df, columns=[c for c in TABLE_COLUMNS if c in df], height=260)
        self.table.sort_by, self.table.sort_desc = "reward_std", True
        self.summary = W.HTML(self._summary_html())
        self.detail = W.HTML()
        self.strip = TokenStrip(self.run, [], color_by=color_by, scale_scope="step", show_table=False)
        self.strip.layout.display = "none"
        self.history = W.HTML()
        self.table.observe(self._on_pick, "selected_ids")
        self.children = [self.summary, self.table, self.detail, self.strip, self.history]

    def reload(self) -> None:
        """The run changed: groups computed again; the table keeps its sort and pick (the picked group may have
        grown, or gone)."""
        self._groups = None
        if self.table is None:
            return
        self.strip.reload()
        self.table.replace_data(self._table_frame())
        self.summary.value = self._summary_html()
        self._on_pick({"new": self.table.selected_ids})

    def _table_frame(self) -> pd.DataFrame:
        df = self.groups.drop(columns=["sample_ids"]).copy()
        # the table's row id: a number per group name, kept across polls (a position would name another group
        # once groups sorting before it appear, and the pick would move)
        ids = self._ids
        df.insert(0, "sample_id", [ids.setdefault(g, len(ids)) for g in df["group"]])
        return df

    def _summary_html(self) -> str:
        if not len(self.groups):
            return "<i>no samples</i>"
        n, smallest, largest, zero = groupsmod.spread_counts(self.groups)
        if not n:
            return ("<div class='rlv-groups-summary'>Every prompt has a single response at each step: "
                    "no GRPO groups in this log.</div>")
        return (f"<div class='rlv-groups-summary'><b>{n:,}</b> groups of {groupsmod.sizes_text(smallest, largest)}"
                f" · <b style='color: var(--jp-warn-color0, #b45309)'>"
                f"{zero:,}</b> with zero reward spread (no learning signal) · sort the table by reward_std or "
                f"zero_spread; click a group to see its responses</div>")

    def _on_pick(self, change) -> None:
        names = [g for g, i in self._ids.items() if i == int(change["new"][-1])] if change["new"] else []
        rows = self.groups[self.groups["group"].isin(names)]
        if not len(rows):  # nothing picked, or the group is gone (the log was rewritten)
            self.detail.value = ""
            self.strip.layout.display = "none"
            return
        row = rows.iloc[0]
        members = groupsmod.group_samples(self.run, row["group"])
        self.detail.value = _group_html(row, members)
        if self.has_tokens:
            self.strip.sample_ids = [int(i) for i in members["sample_id"].head(MAX_GROUP_CARDS)]
            self.strip.layout.display = None
        self.history.value = _history_html(groupsmod.group_history(self.run, row))


def _card_html(r: pd.Series) -> str:
    """One response of a group: its id, reward, advantage and text."""
    adv = "" if "advantage" not in r or pd.isna(r.get("advantage")) else f" · advantage {r['advantage']:.3g}"
    return (f"<div class='rlv-group-card' style='border: 1px solid var(--jp-border-color2, #ddd); "
            f"border-radius: 3px; padding: 4px; min-width: 220px; flex: 1'>"
            f"<div style='font-size: 11px'>sample {int(r['sample_id'])} · reward "
            f"<b>{'–' if pd.isna(r['reward']) else format(r['reward'], '.4g')}</b>{adv}</div>"
            f"<pre style='white-space: pre-wrap; margin: 2px 0; font-size: 12px; max-height: 160px; "
            f"overflow: auto'>{html.escape(clip(str(r['response'] or '')))}</pre></div>")


def _group_html(row: pd.Series, members: pd.DataFrame) -> str:
    """The picked group: its name, step and prompt, then its responses side by side (the best first)."""
    cards = [_card_html(r) for _, r in members.head(MAX_GROUP_CARDS).iterrows()]  # the group table has every one
    more = len(members) - MAX_GROUP_CARDS
    name = repr(row["group"]) if len(repr(row["group"])) <= MAX_NAME_CHARS else "<the group's name>"
    if more > 0:
        cards.append(f"<div style='align-self: center; font-size: 12px'>… and {more:,} more (lower rewards): "
                     f"<code>rw.groups.group_samples(view.run, {html.escape(name)})</code></div>")
    return (f"<div class='rlv-group-detail' style='color: var(--jp-ui-font-color1, #222)'>"
            f"<div style='margin: 6px 0'>group <code>{html.escape(clip(str(row['group']), MAX_NAME_CHARS))}</code>"
            f" · step "
            f"{int(row['step'])} · prompt:</div><pre style='white-space: pre-wrap; font-size: 12px'>"
            f"{html.escape(clip(str(row['prompt'] or '')))}</pre>"
            f"<div style='display: flex; gap: 6px; overflow-x: auto'>{''.join(cards)}</div></div>")


def _history_row(h: dict) -> str:
    return (f"<tr><td>{int(h['step'])}</td><td>{int(h['responses'])}</td><td>{h['reward_mean']:.4g}</td>"
            f"<td>{h['reward_std']:.3g}</td><td>{h['reward_min']:.4g} … {h['reward_max']:.4g}</td></tr>")


def _history_html(hist: pd.DataFrame) -> str:
    """The prompt's steps as a table: its first and last MAX_HISTORY_ROWS // 2 when asked at more steps."""
    if len(hist) <= 1:
        return "<i>this prompt appears at one step only</i>"
    half = MAX_HISTORY_ROWS // 2
    if len(hist) > MAX_HISTORY_ROWS:  # a prompt asked at every step of a long run
        gap = (f"<tr><td colspan='5'><i>… {len(hist) - 2 * half:,} steps between: "
               f"<code>rw.groups.prompt_history(view.run, prompt)</code> gives every one</i></td></tr>")
        rows = "".join(map(_history_row, hist.head(half).to_dict("records"))) + gap + "".join(
            map(_history_row, hist.tail(half).to_dict("records")))
    else:
        rows = "".join(map(_history_row, hist.to_dict("records")))
    return ("<div class='rlv-prompt-history'><b>The same prompt across steps</b><table style='font-size: 12px'>"
            "<tr><th>step</th><th>responses</th><th>reward mean</th><th>std</th><th>range</th></tr>"
            f"{rows}</table></div>")
