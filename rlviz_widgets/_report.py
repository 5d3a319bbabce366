"""A RunView as one self-contained HTML file: the data it shows (gathered through the view's and run's public API),
embedded as inert JSON beside the report front end (``static/report.js``, which mounts the widgets' own
components on that data instead of a kernel)."""

from __future__ import annotations

import base64
import html
import json
import os
import re
from pathlib import Path

import pandas as pd

from rlviz_widgets.run.run import Run
from rlviz_widgets.widgets._base import front_end
from rlviz_widgets.widgets.run_view import panes
from rlviz_widgets.widgets.sample_table import MAX_PAGE, SampleTable
from rlviz_widgets.widgets.token_strip import TokenStrip

MAX_SAMPLES = 2000  # table rows written by default
EXTREMES = 5  # top and bottom samples by reward, each with its texts and token strip
MAX_SELECTED = 20  # of the view's picked samples shown with texts and strips
MAX_TEXT_CHARS = 20_000  # of each text of a highlighted sample
MAX_CONVERSATION_CHARS = 60_000  # of all the turns of a highlighted conversation
# JSON in a <script> element: these would end it or open a comment (``</script>``, ``<!--`` in model output);
# written as JSON escapes, they read back the same
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_UNSAFE = re.compile("[<>&\u2028\u2029]")


def script_json(data) -> str:
    """``data`` as JSON that is inert inside a ``<script type="application/json">`` element."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return _JSON_UNSAFE.sub(lambda m: _JSON_ESCAPES[m.group()], text)


def inline_script(code: str) -> str:
    """A bundle's text made safe to sit inside ``<script>``: ``</script`` and ``<!--`` (which only string or regex
    literals of a bundle can hold) are written with an escaped character that means the same there."""
    code = re.sub(r"</(script)", r"<\\/\1", code, flags=re.IGNORECASE)
    return code.replace("<!--", "<\\!--")


def report(source, path: str | os.PathLike, *, max_samples: int = MAX_SAMPLES, extremes: int = EXTREMES,
           title: str | None = None) -> Path:
    """Writes ``source`` (a RunView, or a Run shown as a new RunView would show it) to ``path`` as one HTML file
    that opens offline: the charts, the filters, the first ``max_samples`` filtered samples (sortable), the texts
    and token strips of the picked samples and of the ``extremes`` top and bottom ones by reward, and the run's
    metadata. Returns the path written."""
    from rlviz_widgets.widgets.run_view.view import RunView  # (RunView.to_html calls this module)

    view = source if isinstance(source, RunView) else RunView(source) if isinstance(source, Run) else None
    if view is None:
        raise TypeError(f"report needs a RunView or a Run, not {type(source).__name__}")
    if max_samples < 0:
        raise ValueError(f"max_samples must be 0 or more, not {max_samples}")
    data = gather(view, max_samples=max_samples, extremes=extremes)
    data["title"] = title or f"rlviz report: {data['meta']['name']}"
    out = Path(path)
    out.write_text(page(data), encoding="utf-8")
    return out


def gather(view, *, max_samples: int = MAX_SAMPLES, extremes: int = EXTREMES) -> dict:
    """Everything the report shows, as JSON-ready data."""
    table = table_data(view.table, max_samples)
    return {"meta": metadata(view.run), "filters": filters(view, table), "chart": chart_data(view),
            "table": table, "sections": sample_sections(view, extremes)}


def metadata(run: Run) -> dict:
    """Sources, counts and the problems by kind."""
    files = run.files
    problems = run.problems
    sources = run.source if isinstance(run.source, list) else [run.source]
    sources = [str(s) for s in sources] if sources != [None] else []
    names = list(getattr(run, "runs", {}) or {})
    return {"name": ", ".join(names) or (os.path.basename(str(sources[0]).rstrip("/")) if sources else "run"),
            "runs": names, "sources": sources, "summary": run.summary(), "samples": int(run.n_samples),
            "steps": len(run.step_values), "files": [str(f) for f in files["file"]],
            "token_metrics": list(run.token_metrics),
            "problems": {str(k): int(n) for k, n in problems["kind"].value_counts().items()} if len(problems) else {}}


def _range(rng) -> str | None:
    return None if rng is None else " … ".join("open" if v is None else f"{v:g}" for v in rng)


def filters(view, table: dict) -> dict:
    """The filters and options the view has now, by name (None: not set)."""
    return {"steps": _range(view.steps), "reward": _range(view.reward), "search": view.search or None,
            "where": view.where or None, "order": table["order"], "colour by": view.color_by,
            "band ×std": view.band.value, "zero shift": view.zero_shift.value, "KL metric": view.kl_metric.value,
            "reward bins": view.bins}


def chart_data(view) -> dict:
    """The chart's spec, brushes and datasets, as its front end gets them from the kernel."""
    reply = view.chart.data()
    return {"spec": view.chart.spec, "selections": view.chart.selections, "datasets": reply["datasets"]}


def table_data(table: SampleTable, max_samples: int) -> dict:
    """The first ``max_samples`` rows of the table in its order, as its front end's pages (texts clipped)."""
    total = table.row_count
    ids, rows, clipped = [], [], []
    while len(ids) < min(total, max_samples):
        page = table.rows(offset=len(ids), limit=min(MAX_PAGE, max_samples - len(ids)))
        if not page["ids"]:
            break
        ids += page["ids"]
        rows += page["rows"]
        clipped += page["clipped"] or [[False] * len(table.columns)] * len(page["ids"])
    order = (f"{table.sort_by}, {'descending' if table.sort_desc else 'ascending'}" if table.sort_by
             else "log order")
    return {"columns": table.columns, "total": total, "shown": len(ids), "limit": max_samples, "order": order,
            "sort_by": table.sort_by, "sort_desc": table.sort_desc, "ids": ids, "rows": rows,
            "clipped": clipped if any(any(c) for c in clipped) else None}


def extreme_ids(view, n: int, desc: bool) -> list[int]:
    """The ``n`` filtered samples of highest (``desc``) or lowest reward, ordered by the engine."""
    if n <= 0 or "reward" not in view.run.columns:
        return []
    table = SampleTable(view.run, columns=["sample_id", "reward"], sort_by="reward", sort_desc=desc)
    table.where, table.search = view.condition, view.search
    page = table.rows(offset=0, limit=n)
    return [i for i, (_, r) in zip(page["ids"], page["rows"]) if r is not None]


def sample_sections(view, extremes: int) -> list[dict]:
    """The highlighted samples: those picked in the view, then the top and bottom ones by reward."""
    wanted = [("selected samples", list(view.selected_ids)[:MAX_SELECTED]),
              (f"top {extremes} by reward", extreme_ids(view, extremes, True)),
              (f"bottom {extremes} by reward", extreme_ids(view, extremes, False))]
    return [section(view, title, ids) for title, ids in wanted if ids]


def _text(v) -> str | None:
    if v is None or (isinstance(v, float) and v != v):
        return None
    s = str(v)
    return s if len(s) <= MAX_TEXT_CHARS else f"{s[:MAX_TEXT_CHARS]}… [{len(s) - MAX_TEXT_CHARS:,} more characters]"


def _number(v) -> float | int | None:
    if v is None or pd.isna(v):
        return None
    return int(v) if isinstance(v, int) or float(v).is_integer() and abs(v) < 2**53 else float(v)


def _conversations(run: Run, ids: list[int]) -> dict[int, list[dict]]:
    """The turn blocks of the samples that are conversations (more than a prompt and a response, or a tool call),
    as the RunView's detail pane shows them, each text cut as the report's are."""
    rows = run.held_rows(ids, [c for c in ("sample_id", "n_turns", "n_tool_calls") if c in run.columns])
    if "n_turns" not in rows:
        return {}
    talk = rows[(rows["n_turns"].fillna(0) > 2) | (rows.get("n_tool_calls", 0) > 0)].sample_id.tolist()
    if not talk:
        return {}
    turns = run.turns([int(i) for i in talk])
    return {int(sid): panes.turn_blocks(t, each=MAX_TEXT_CHARS, total=MAX_CONVERSATION_CHARS)
            for sid, t in turns.groupby("sample_id", sort=False)}


def texts(run: Run, ids: list[int]) -> list[dict]:
    """Each sample's facts and texts (prompt, response, reference response), clipped; a conversation's turns as
    blocks instead of its prompt and response."""
    want = [c for c in ("sample_id", "run", "step", "reward", "ref_reward", "kl_mean", "n_tokens", "file", "line",
                        "prompt", "response", "ref_response", "ground_truth") if c in run.columns]
    talks = _conversations(run, ids)
    out = []
    for r in run.held_rows(ids, want).to_dict("records"):
        facts = {k: _number(r[k]) if k != "run" else _text(r[k])
                 for k in ("run", "step", "reward", "ref_reward", "kl_mean", "n_tokens") if k in r}
        if "file" in r:
            facts["from"] = f"{os.path.basename(str(r['file']))}:{r.get('line')}"
        blocks = talks.get(int(r["sample_id"]))
        shown = ("ref_response", "ground_truth") if blocks else ("prompt", "response", "ref_response", "ground_truth")
        out.append({"sample_id": int(r["sample_id"]), "facts": facts,
                    "texts": [[k.replace("_", " "), _text(r[k])] for k in shown if _text(r.get(k))],
                    **({"blocks": blocks} if blocks else {})})
    return out


def strips(run: Run, ids: list[int], color_by: str) -> dict | None:
    """The token strip of these samples, as its front end gets it from the kernel: the reply, its float32 buffers
    (base64) and the colour limits of each metric over the run and over the samples' steps."""
    if not run.token_metrics:
        return None
    strip = TokenStrip(run, ids, color_by=color_by if color_by in run.token_metrics else None)
    reply, buffers = strip.strips()
    steps = sorted({s["step"] for s in reply["samples"]})
    domains = {}
    for m in run.token_metrics:
        domains[f"{m}|run"] = run.token_domain(m, "run")
        domains[f"{m}|step"] = run.token_domain(m, "step", steps)
    return {"reply": reply, "buffers": [base64.b64encode(bytes(b)).decode("ascii") for b in buffers],
            "color_by": strip.color_by, "domains": {k: list(v) for k, v in domains.items()}}


def section(view, title: str, ids: list[int]) -> dict:
    return {"title": title, "samples": texts(view.run, ids), "strip": strips(view.run, ids, view.color_by)}


def _read(name: str) -> str:
    return front_end(name).read_text(encoding="utf-8")


PAGE_STYLE = """
body{margin:0;padding:16px 24px;font-family:system-ui,-apple-system,"Segoe UI",sans-serif;font-size:13px;
color:#1b1e23;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:14px;margin:16px 0 6px}
.rlv-report-meta,.rlv-report-filters{border-collapse:collapse}
.rlv-report-meta td,.rlv-report-filters td{padding:2px 12px 2px 0;vertical-align:top}
.rlv-report-meta td:first-child,.rlv-report-filters td:first-child{color:#555}
.rlv-report-note{color:#555;margin:4px 0}
.rlv-report-sample{border:1px solid #ddd;border-radius:4px;padding:8px;margin:8px 0}
.rlv-report-texts{display:grid;grid-template-columns:repeat(auto-fit,minmax(280px,1fr));gap:8px}
.rlv-report-texts pre{white-space:pre-wrap;word-break:break-word;margin:0;padding:6px;border:1px solid #ddd;
border-radius:3px;font-size:12px;max-height:240px;overflow:auto}
.rlv-report-summary{white-space:pre-wrap;font-size:12px}
"""


def page(data: dict) -> str:
    """The HTML page: the report front end and its style inlined, the data as inert JSON."""
    title = html.escape(data.get("title") or "rlviz report")
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n"
            # nothing may load from elsewhere: the page's own inline script and style, data: images (chart export);
            # eval for Vega, which compiles its expressions to functions
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:\">\n"
            f"<style>{PAGE_STYLE}</style></head>\n<body>\n<div id=\"rlviz-report\">"
            "<noscript>This report needs JavaScript to draw its charts and tables.</noscript></div>\n"
            f"<script type=\"application/json\" id=\"rlviz-data\">{script_json(data)}</script>\n"
            f"<script type=\"module\">{inline_script(_read('report'))}</script>\n</body></html>\n")
