"""The RunView's HTML panes: the run's header line and the picked sample's detail. Log text is escaped, never
HTML; long texts are cut, saying so (a pane is widget state, sent and saved whole)."""

from __future__ import annotations

import html

import pandas as pd

from rlviz_widgets.run.run import Run
from rlviz_widgets.widgets._validate import clip as cut

MAX_CARD_CHARS = 2000  # of each short text (a card scrolls; the sample table and detail give the whole text)
MAX_DETAIL_CHARS = 50_000  # of each text of the picked sample (a model's longest answers; view.selected has all)
BOX_STYLE = ("style='white-space: pre-wrap; word-break: break-word; margin: 0; padding: 6px; "
             "border: 1px solid var(--jp-border-color2, #ddd); border-radius: 3px; "
             "background: var(--jp-layout-color1, #fff); color: var(--jp-ui-font-color1, #222); "
             "font-family: var(--jp-code-font-family, monospace); font-size: 12px; max-height: 240px; "
             "overflow: auto'")

LEFT_FILTER_HTML = ("<div class='rlv-detail-note' style='color: var(--jp-ui-font-color2, #666); margin: 6px 0'>"
                    "the sample shown left the filter</div>")


def clip(text: str, limit: int = MAX_CARD_CHARS) -> str:
    """``text`` cut to ``limit`` characters (a card's by default), saying so."""
    return cut(text, limit)


def header_html(run: Run, runs: tuple[str, ...], has_tokens: bool) -> str:
    """One line: samples, steps, files, the runs overlaid, token arrays, and problems if the logs have any."""
    probs = len(run.problems)
    n_steps = len(run.step_values)
    parts = [f"<b>{run.n_samples:,}</b> samples", f"<b>{n_steps}</b> steps", f"<b>{len(run.files)}</b> file(s)",
             *([f"runs: {', '.join(html.escape(n) for n in runs)}"] if runs else []),
             "token arrays: " + (", ".join(run.token_metrics[:4]) + "…" if has_tokens else "none")]
    if probs:
        parts.append(f"<span style='color: var(--jp-warn-color0, #b45309)'>{probs} problem(s) in the logs: "
                     f"see <code>view.run.problems</code></span>")
    return "<div class='rlv-run-header'>" + " · ".join(parts) + "</div>"


def _esc(v) -> str:
    return "" if v is None or (isinstance(v, float) and v != v) else html.escape(str(v), quote=True)


def _num(v) -> str:
    return "–" if v is None or pd.isna(v) else f"{v:.4g}"


def _facts(r: pd.Series) -> str:
    """The sample's readable id (its file and line), then its numbers, on one line."""
    facts = [("id", _esc(r["id"])), *([("run", _esc(r["run"]))] if "run" in r else []),
             ("sample", _esc(r["sample_id"])), ("step", _esc(r["step"])), ("reward", _num(r.get("reward"))),
             ("ref_reward", _num(r.get("ref_reward"))), ("gap", _num(r.get("reward_gap"))),
             ("kl mean", _num(r.get("kl_mean"))), ("tokens", _esc(r.get("n_tokens")))]
    if r.get("ground_truth") is not None:
        facts.append(("ground truth", _esc(clip(r["ground_truth"]) if isinstance(r["ground_truth"], str)
                                           else r["ground_truth"])))
    return " · ".join(f"{k} <b>{v}</b>" for k, v in facts)


def detail_html(row: pd.DataFrame) -> str:
    """The picked sample (a frame of its one row, or none): its facts, then prompt, response and reference
    response side by side."""
    if not len(row):
        return ""
    r = row.iloc[0]
    cols = [("prompt", r.get("prompt")), ("response", r.get("response"))]
    if "ref_response" in r and r.get("ref_response") is not None:
        cols.append(("ref response", r.get("ref_response")))
    # a text past MAX_DETAIL_CHARS is cut: view.selected has it
    grid = "".join(f"<div><div style='font-weight: 600; margin-bottom: 2px'>{t}</div>"
                   f"<pre class='rlv-detail-{t.replace(' ', '-')}' {BOX_STYLE}>"
                   f"{_esc(clip(v, MAX_DETAIL_CHARS) if isinstance(v, str) else v)}</pre></div>" for t, v in cols)
    return (f"<div class='rlv-detail' style='color: var(--jp-ui-font-color1, #222)'>"
            f"<div style='margin: 6px 0'>{_facts(r)}</div>"
            f"<div style='display: grid; grid-template-columns: repeat({len(cols)}, 1fr); gap: 8px'>{grid}</div>"
            f"</div>")
