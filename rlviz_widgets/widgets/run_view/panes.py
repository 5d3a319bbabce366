"""The RunView's panes as data its front end shows as text (never HTML): the run's header line and the picked
sample's detail. Long texts are cut, saying so (a pane is widget state, sent and saved whole)."""

from __future__ import annotations

import pandas as pd

from rlviz_widgets.run.run import Run
from rlviz_widgets.widgets._validate import clip as cut

MAX_CARD_CHARS = 2000  # of each short text (a card scrolls; the sample table and detail give the whole text)
MAX_DETAIL_CHARS = 50_000  # of each text of the picked sample (a model's longest answers; view.selected has all)
LEFT_FILTER = "the sample shown left the filter"


def clip(text: str, limit: int = MAX_CARD_CHARS) -> str:
    """``text`` cut to ``limit`` characters (a card's by default), saying so."""
    return cut(text, limit)


def header(run: Run, runs: tuple[str, ...], has_tokens: bool) -> list[str]:
    """The run's header line as parts of text: samples, steps, files, the runs overlaid, token arrays, and problems
    if the logs have any (shown as text: run names come from the user's paths)."""
    probs = len(run.problems)
    parts = [f"{run.n_samples:,} samples", f"{len(run.step_values)} steps", f"{len(run.files)} file(s)",
             *([f"runs: {', '.join(runs)}"] if runs else []),
             "token arrays: " + (", ".join(run.token_metrics[:4]) + "…" if has_tokens else "none")]
    if probs:
        parts.append(f"{probs} problem(s) in the logs: see view.run.problems")
    return parts


def _num(v) -> str:
    return "–" if v is None or pd.isna(v) else f"{v:.4g}"


def _text(v) -> str:
    return "" if v is None or (isinstance(v, float) and v != v) else str(v)


def _facts(r: pd.Series) -> list[list[str]]:
    """The sample's readable id (its file and line), then its numbers, as (name, value) text pairs."""
    facts = [("id", _text(r["id"])), *([("run", _text(r["run"]))] if "run" in r else []),
             ("sample", _text(r["sample_id"])), ("step", _text(r["step"])), ("reward", _num(r.get("reward"))),
             ("ref_reward", _num(r.get("ref_reward"))), ("gap", _num(r.get("reward_gap"))),
             ("kl mean", _num(r.get("kl_mean"))), ("tokens", _text(r.get("n_tokens")))]
    if r.get("ground_truth") is not None:
        truth = r["ground_truth"]
        facts.append(("ground truth", clip(truth) if isinstance(truth, str) else _text(truth)))
    return [list(f) for f in facts]


def block(role: str, text, tool_name: str | None = None, tool_arguments=None) -> dict:
    """One turn of the detail pane: who speaks (``role``), what (``text``, cut at MAX_DETAIL_CHARS, saying so) and
    the tool called, if any (its arguments: JSON, shown as text)."""
    return {"role": role, "text": clip(_text(text), MAX_DETAIL_CHARS), "tool_name": tool_name,
            "tool_arguments": tool_arguments}


def detail_blocks(r: pd.Series) -> list[dict]:
    """The picked sample as the turns the detail pane shows, one block each: today its prompt, response, answer
    and reference response (the one place to read a conversation's turns instead)."""
    cols = [("prompt", "prompt"), ("response", "response"), ("answer", "answer"), ("ref response", "ref_response")]
    return [block(role, r.get(col)) for role, col in cols
            if col in ("prompt", "response") or (col in r and r.get(col) is not None)]


def detail(row: pd.DataFrame) -> dict:
    """The picked sample's pane (a frame of its one row, or none): its facts and its blocks; {} for none."""
    if not len(row):
        return {}
    r = row.iloc[0]
    return {"sample_id": int(r["sample_id"]), "facts": _facts(r), "blocks": detail_blocks(r), "note": ""}
