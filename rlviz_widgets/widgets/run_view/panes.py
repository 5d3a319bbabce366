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
    writing = list(getattr(run, "steps_in_progress", None) or [])
    if writing:  # prime-rl: a step folder without its STABLE marker; its samples so far are shown
        shown = ", ".join(map(str, writing[:5])) + (", …" if len(writing) > 5 else "")
        parts.append(f"still being written: step {shown}")
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


MAX_DETAIL_TURNS = 200  # blocks of the picked sample sent at most (an agent's trajectory may have thousands)
MAX_DETAIL_TOTAL = 400_000  # characters of all its blocks (the pane is widget state, sent whole)


def block(role: str, text, tool_name: str | None = None, tool_arguments=None, *, trained: bool | None = None,
          reasoning=None, limit: int = MAX_DETAIL_CHARS) -> dict:
    """One turn of the detail pane: who speaks (``role``), what (``text``, cut at ``limit``, saying so), the tool
    called, if any (its arguments: JSON, shown as text), whether the policy was trained on it, and its reasoning."""
    out = {"role": _text(role), "text": clip(_text(text), limit), "tool_name": tool_name or None,
           "tool_arguments": tool_arguments if isinstance(tool_arguments, str) and tool_arguments else None}
    if trained is not None:
        out["trained"] = bool(trained)
    if isinstance(reasoning, str) and reasoning:
        out["reasoning"] = clip(reasoning, limit)
    return out


def turn_blocks(turns: pd.DataFrame, each: int = MAX_DETAIL_CHARS, total: int = MAX_DETAIL_TOTAL) -> list[dict]:
    """A sample's turns (``run.turns`` rows) as blocks, each text cut at ``each`` characters and all at about
    ``total``; what is left out is said in a last block."""
    blocks, left = [], total
    rows = turns.to_dict("records")
    for t in rows[:MAX_DETAIL_TURNS]:
        b = block(t.get("role"), t.get("text"), _text(t.get("tool_name")) or None, t.get("tool_arguments"),
                  trained=None if pd.isna(t.get("trained")) else t.get("trained"), reasoning=t.get("reasoning"),
                  limit=max(min(each, left), 200))
        left -= len(b["text"]) + len(b.get("reasoning", "")) + len(b["tool_arguments"] or "")
        blocks.append(b)
        if left <= 0:
            break
    if len(blocks) < len(rows):
        blocks.append(block("…", f"{len(rows) - len(blocks):,} more turn rows not shown here: view.selected_turns "
                                 "has every one"))
    return blocks


def detail_blocks(r: pd.Series, turns: pd.DataFrame | None = None) -> list[dict]:
    """The picked sample as the blocks the detail pane shows: one per turn (``run.turns`` rows: a log without
    message structure has its prompt and response), then the reference response where there is one. Without
    ``turns``: the prompt, response and answer texts."""
    if turns is not None and len(turns):
        blocks = turn_blocks(turns)
    else:
        cols = [("prompt", "prompt"), ("response", "response"), ("answer", "answer")]
        blocks = [block(role, r.get(col)) for role, col in cols
                  if col in ("prompt", "response") or (col in r and r.get(col) is not None)]
    if "ref_response" in r and r.get("ref_response") is not None:
        blocks.append(block("ref response", r.get("ref_response")))
    return blocks


def detail(row: pd.DataFrame, turns: pd.DataFrame | None = None) -> dict:
    """The picked sample's pane (a frame of its one row, or none, and its turns): its facts and its blocks; {} for
    none."""
    if not len(row):
        return {}
    r = row.iloc[0]
    return {"sample_id": int(r["sample_id"]), "facts": _facts(r), "blocks": detail_blocks(r, turns), "note": ""}
