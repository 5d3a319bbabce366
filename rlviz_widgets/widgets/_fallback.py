"""The static summary each widget adds to its mime bundle as ``text/html``: what a page without a widget front end
(an exported notebook, a viewer without the widget manager) shows instead of an empty box. Built from the widgets'
public API; every log text escaped; small (a few rows, a few hundred tokens)."""

from __future__ import annotations

import html

MAX_ROWS = 10  # table rows shown
MAX_CELL_CHARS = 80  # of a text cell
MAX_TOKENS = 300  # of each sample's strip
MAX_TITLES = 8  # chart titles named
NOTE = "static summary (no widget front end here: run the notebook for the interactive widget)"
BOX = ("<div class='rlv-static' style='font-family: sans-serif; font-size: 12px; border: 1px solid #ddd; "
       "border-radius: 3px; padding: 6px; max-height: 320px; overflow: auto'>{body}"
       "<div style='color: #777; margin-top: 4px'>{note}</div></div>")
CELL = "style='border: 1px solid #eee; padding: 1px 4px; text-align: left; white-space: nowrap'"
CHIP = "style='border: 1px solid #ccc; border-radius: 2px; margin: 1px; padding: 0 2px; white-space: pre'"


def _e(v) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _cell(v) -> str:
    text = "–" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)
    return _e(text if len(text) <= MAX_CELL_CHARS else f"{text[:MAX_CELL_CHARS]}…")


def box(body: str, note: str = NOTE) -> str:
    return BOX.format(body=body, note=_e(note))


def sample_table(table) -> str:
    """The first rows of a SampleTable, in its order, as an HTML table."""
    page = table.rows(offset=0, limit=MAX_ROWS)
    names = table.visible_columns
    head = "".join(f"<th {CELL}>{_e(n)}</th>" for n in names)
    body = "".join("<tr>" + "".join(f"<td {CELL}>{_cell(v)}</td>" for v in row) + "</tr>" for row in page["rows"])
    shown = len(page["rows"])
    line = f"SampleTable: {table.row_count:,} rows" + (f", the first {shown} shown" if shown < table.row_count else "")
    return box(f"<div>{_e(line)}</div><table style='border-collapse: collapse'><tr>{head}</tr>{body}</table>")


def token_strip(strip) -> str:
    """The shown samples' tokens as escaped text chips, each sample on its own line."""
    toks = strip.tokens
    parts = []
    for sid, g in (toks.groupby("sample_id", sort=False) if len(toks) and "token" in toks else ()):
        chips = "".join(f"<span {CHIP}>{_e(t)}</span>" for t in g["token"].head(MAX_TOKENS).tolist())
        more = f" … {len(g) - MAX_TOKENS:,} more tokens" if len(g) > MAX_TOKENS else ""
        parts.append(f"<div style='margin: 4px 0'><b>sample {_e(sid)}</b> ({len(g):,} tokens){_e(more)}"
                     f"<div style='line-height: 1.9'>{chips}</div></div>")
    line = f"TokenStrip: {len(strip.sample_ids)} sample(s), coloured by {strip.color_by}"
    return box(f"<div>{_e(line)}</div>{''.join(parts)}")


def _titles(spec, out: list[str]) -> list[str]:
    """The titles of a Vega-Lite spec's units, in order."""
    if isinstance(spec, dict):
        t = spec.get("title")
        t = t.get("text") if isinstance(t, dict) else t
        if isinstance(t, str) and t and t not in out:
            out.append(t)
        for k, v in spec.items():
            if k not in ("encoding", "axis", "legend", "scale"):  # units' titles, not their axes'
                _titles(v, out)
    elif isinstance(spec, list):
        for v in spec:
            _titles(v, out)
    return out


def chart(widget) -> str:
    """A line naming the chart's panels."""
    titles = _titles(widget.spec, [])[:MAX_TITLES]
    return box(f"<div>Chart (Vega-Lite): {_e('; '.join(titles) or 'untitled')}</div>")


def run_view(view, header: str) -> str:
    """The run's header line (``header``, HTML the view made), its summary and filters, and how to share it."""
    shown = [f"{k}={v!r}" for k, v in (("steps", view.steps), ("reward", view.reward), ("search", view.search),
                                        ("where", view.where)) if v]
    return box(f"{header}<pre style='margin: 4px 0'>{_e(view.run.summary())}</pre>"
               f"<div>filters: {_e(', '.join(shown) or 'none')}</div>"
               "<div>Write <code>view.to_html(\"report.html\")</code> for an interactive report that opens "
               "anywhere, offline.</div>")


BY_FRONT_END = {"sample_table": sample_table, "token_strip": token_strip, "charts": chart}
