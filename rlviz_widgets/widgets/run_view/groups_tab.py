"""The RunView's "GRPO groups" tab: a table of groups with their reward spread, the picked group's responses side
by side, and its prompt across steps. Built the first time the tab is opened (grouping a big run takes a while).
Its panes are data the view's front end shows as text."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import traitlets

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


class GroupsTab(traitlets.HasTraits):
    """The tab's state: ``summary``, ``detail`` (the picked group) and ``history`` (its prompt across steps) are
    data the front end shows as text; ``table`` and ``strip`` are parts, made when the tab is first opened and
    handed to ``on_parts``."""

    built = traitlets.Bool(False, help="The tab was opened: groups computed, the parts made.")
    summary = traitlets.Unicode("", help="The groups in one line.")
    detail = traitlets.Dict(help="The picked group: name, step, prompt, its best responses as cards; {} for none.")
    history = traitlets.Dict(help="The picked group's prompt across steps; {} for none.")

    def __init__(self, run: Run, has_tokens: bool, on_parts: Callable[[SampleTable, TokenStrip], None]):
        super().__init__()
        self.run = run
        self.has_tokens = has_tokens  # kept up to date by the view: a followed run may gain token arrays
        self._on_parts = on_parts
        self.table: SampleTable | None = None
        self.strip: TokenStrip | None = None
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
        self.summary = self._summary_text()
        self.strip = TokenStrip(self.run, [], color_by=color_by, scale_scope="step", show_table=False)
        self.table.observe(self._on_pick, "selected_ids")
        self._on_parts(self.table, self.strip)
        self.built = True

    def reload(self) -> None:
        """The run changed: groups computed again; the table keeps its sort and pick (the picked group may have
        grown, or gone)."""
        self._groups = None
        if self.table is None:
            return
        self.strip.reload()
        self.table.replace_data(self._table_frame())
        self.summary = self._summary_text()
        self._on_pick({"new": self.table.selected_ids})

    def _table_frame(self) -> pd.DataFrame:
        df = self.groups.drop(columns=["sample_ids"]).copy()
        # the table's row id: a number per group name, kept across polls (a position would name another group
        # once groups sorting before it appear, and the pick would move)
        ids = self._ids
        df.insert(0, "sample_id", [ids.setdefault(g, len(ids)) for g in df["group"]])
        return df

    def _summary_text(self) -> str:
        if not len(self.groups):
            return "no samples"
        n, smallest, largest, zero = groupsmod.spread_counts(self.groups)
        if not n:
            return "Every prompt has a single response at each step: no GRPO groups in this log."
        return (f"{n:,} groups of {groupsmod.sizes_text(smallest, largest)} · {zero:,} with zero reward spread "
                "(no learning signal) · sort the table by reward_std or zero_spread; click a group to see its "
                "responses")

    def _on_pick(self, change) -> None:
        names = [g for g, i in self._ids.items() if i == int(change["new"][-1])] if change["new"] else []
        rows = self.groups[self.groups["group"].isin(names)]
        if not len(rows):  # nothing picked, or the group is gone (the log was rewritten)
            self.detail, self.history = {}, {}
            self.strip.sample_ids = []
            return
        row = rows.iloc[0]
        members = groupsmod.group_samples(self.run, row["group"])
        self.detail = group_detail(row, members)
        if self.has_tokens:
            self.strip.sample_ids = [int(i) for i in members["sample_id"].head(MAX_GROUP_CARDS)]
        self.history = history(groupsmod.group_history(self.run, row))


def _number(v) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def _card(r: pd.Series) -> dict:
    """One response of a group: its id, reward, advantage and text."""
    return {"sample_id": int(r["sample_id"]), "reward": _number(r["reward"]),
            "advantage": _number(r["advantage"]) if "advantage" in r else None,
            "text": clip(str(r["response"] or ""))}


def group_detail(row: pd.Series, members: pd.DataFrame) -> dict:
    """The picked group: its name, step and prompt, then its responses (the best MAX_GROUP_CARDS first)."""
    name = repr(row["group"]) if len(repr(row["group"])) <= MAX_NAME_CHARS else "<the group's name>"
    more = max(len(members) - MAX_GROUP_CARDS, 0)  # the group table has every one
    return {"group": clip(str(row["group"]), MAX_NAME_CHARS), "step": int(row["step"]),
            "prompt": clip(str(row["prompt"] or "")),
            "cards": [_card(r) for _, r in members.head(MAX_GROUP_CARDS).iterrows()],
            "more": more, "more_code": f"rw.groups.group_samples(view.run, {name})" if more else ""}


def _history_row(h: dict) -> list:
    return [int(h["step"]), int(h["responses"]), _number(h["reward_mean"]), _number(h["reward_std"]),
            _number(h["reward_min"]), _number(h["reward_max"])]


def history(hist: pd.DataFrame) -> dict:
    """The prompt's steps as rows (step, responses, reward mean, std, min, max): its first and last
    MAX_HISTORY_ROWS // 2 when asked at more steps (``skipped`` between them)."""
    if len(hist) <= 1:
        return {"rows": [], "skipped": 0, "note": "this prompt appears at one step only"}
    half = MAX_HISTORY_ROWS // 2
    if len(hist) > MAX_HISTORY_ROWS:  # a prompt asked at every step of a long run
        return {"rows": [*map(_history_row, hist.head(half).to_dict("records")),
                         *map(_history_row, hist.tail(half).to_dict("records"))],
                "skipped": len(hist) - 2 * half, "skipped_at": half,
                "note": "rw.groups.prompt_history(view.run, prompt) gives every one"}
    return {"rows": list(map(_history_row, hist.to_dict("records"))), "skipped": 0, "note": ""}
