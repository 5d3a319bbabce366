"""The self-contained report (rw.report, RunView.to_html) and the widgets' static text/html fallback, without a
browser: escaping, the cap, the size."""

from __future__ import annotations

import json
import random
import re

import pytest

import rlviz_widgets as rw
from rlviz_widgets._report import gather, inline_script, script_json
from rlviz_widgets._synth import make_record, write_log

EVIL = ['<img src=x onerror=window.__xss=1>', '</script><script>window.__xss=1</script>', '<!--', "\u2028&"]


def evil_log(folder):
    """A small run whose texts, tokens and a field name try to be HTML."""
    write_log(folder, steps=4, samples_per_step=10, tokens=16, ranks=1, seed=3)
    rec = make_record(random.Random(1), 3, 999, 12, progress=1.0)
    rec["prompt"], rec["response"] = EVIL[0] + EVIL[2], EVIL[1] + EVIL[3]
    rec["response_tokens"] = [*EVIL, *rec["response_tokens"][len(EVIL):]]
    rec["<b>field</b></script>"] = EVIL[1]  # the reader names its column b_field_b_script
    rec["reward"] = 99.0  # the top sample: its texts and strip are in the report
    with open(next(folder.glob("*.jsonl")), "a") as f:
        f.write(json.dumps(rec) + "\n")
    return folder


@pytest.fixture
def view(tmp_path, cache_dir):
    return rw.RunView(evil_log(tmp_path / "logs"), cache_dir=cache_dir, progress=False)


def embedded(path) -> dict:
    text = path.read_text(encoding="utf-8")
    return json.loads(re.search(r'<script type="application/json" id="rlviz-data">(.*?)</script>', text, re.S)[1])


def test_script_json_is_inert_and_reads_back():
    data = {"t": EVIL, EVIL[1]: 1}
    text = script_json(data)
    assert not re.search(r"[<>&\u2028\u2029]", text)
    assert json.loads(text) == data
    with pytest.raises(ValueError):
        script_json({"x": float("nan")})  # not JSON: refused, not written as NaN


def test_inline_script_cannot_end_its_element():
    code = 'const a = "</script>", b = "</SCRIPT >", c = "<!--";'
    out = inline_script(code)
    assert "</script" not in out.lower() and "<!--" not in out
    assert out == 'const a = "<\\/script>", b = "<\\/SCRIPT >", c = "<\\!--";'  # the same strings in JS


def test_report_holds_the_run_inertly(view, tmp_path):
    path = view.to_html(tmp_path / "report.html")
    text = path.read_text(encoding="utf-8")
    body = text.split('id="rlviz-data">', 1)[1].split("</script>", 1)[0]
    for bad in ("<img", "<script", "<!--", "</script", "\u2028"):
        assert bad not in body
    tags = re.findall(r"<script[^>]*>", text)
    assert tags == ['<script type="application/json" id="rlviz-data">', '<script type="module">']  # no src
    outside = re.sub(r"<script[^>]*>.*?</script>", "", text, flags=re.S)
    assert not re.search(r"<(link|img|iframe)\b", outside)
    data = embedded(path)
    top = next(s for s in data["sections"] if s["title"].startswith("top"))
    assert top["samples"][0]["texts"][0] == ["prompt", EVIL[0] + EVIL[2]]  # the same text, read back
    assert top["strip"]["reply"]["samples"][0]["tokens"][:4] == EVIL
    names = [c["name"] for c in data["table"]["columns"]]
    assert EVIL[1] in [r[names.index("b_field_b_script")] for r in data["table"]["rows"]]
    assert data["meta"]["samples"] == view.run.n_samples == data["table"]["total"]


def test_cap_and_order_are_stated(view, tmp_path):
    view.table.sort_by, view.table.sort_desc = "reward", True
    view.filter(steps=(1, 3))
    data = gather(view, max_samples=7)
    t = data["table"]
    assert t["shown"] == len(t["ids"]) == len(t["rows"]) == 7 and t["total"] == view.table.row_count > 7
    assert t["order"] == "reward, descending" and data["filters"]["order"] == "reward, descending"
    assert t["ids"] == view.table.shown["sample_id"].tolist()[:7]
    assert data["filters"]["steps"] == "1 … 3"
    top = next(s for s in data["sections"] if s["title"].startswith("top"))
    rewards = [s["facts"]["reward"] for s in top["samples"]]
    assert rewards == sorted(rewards, reverse=True) and rewards[0] == 99.0
    assert gather(view, max_samples=0)["table"]["rows"] == []


def test_report_of_a_run_and_refusals(tmp_path, cache_dir):
    run = rw.open_run(evil_log(tmp_path / "logs"), cache_dir=cache_dir, progress=False)
    out = rw.report(run, tmp_path / "r.html", max_samples=5)
    assert embedded(out)["table"]["shown"] == 5
    with pytest.raises(TypeError):
        rw.report("not a run", tmp_path / "x.html")
    with pytest.raises(ValueError):
        rw.report(run, tmp_path / "x.html", max_samples=-1)


def test_demo_report_is_under_3_mb(tmp_path, cache_dir):
    from rlviz_widgets.demo import demo_log

    view = rw.RunView(demo_log(tmp_path / "demo"), cache_dir=cache_dir, progress=False)
    view.selected_ids = [int(view.run.samples.sample_id[3])]
    path = view.to_html(tmp_path / "demo.html")
    size = path.stat().st_size
    data = embedded(path)
    assert data["table"]["shown"] == 2000 and data["table"]["total"] == 2560
    assert size < 3_000_000, f"{size:,} bytes"


def bundle_of(widget) -> dict:
    out = widget._repr_mimebundle_()
    return out[0] if isinstance(out, tuple) else out


def test_every_widget_has_an_escaped_static_fallback(view):
    strip = rw.TokenStrip(view.run, [int(view.run.samples.sample_id.iloc[-1])])
    table = rw.SampleTable(view.run, sort_by="reward", sort_desc=True)
    for w in (view, view.chart, table, strip):
        data = bundle_of(w)
        assert "application/vnd.jupyter.widget-view+json" in data, type(w).__name__
        page = data["text/html"]
        assert "rlv-static" in page and "<img" not in page and "<script" not in page and "<!--" not in page
        assert len(page) < 50_000
    assert "&lt;img src=x onerror=window.__xss=1&gt;" in bundle_of(strip)["text/html"]
    assert "&lt;img src=x onerror" in bundle_of(table)["text/html"]  # the top reward's prompt, escaped
    assert "to_html" in bundle_of(view)["text/html"]


def test_a_conversation_shows_its_turns_in_the_report(tmp_path, cache_dir):
    """A multi-turn sample's card holds its turn blocks (roles, tool calls, JSON arguments: the detail pane's) in
    place of its prompt and response texts; markup in roles, tool names and arguments stays inert in the page."""
    from chat_formats import XSS, agent_turns, write_agent_chat

    write_agent_chat(tmp_path / "agent")
    run = rw.open_run(tmp_path / "agent", cache_dir=cache_dir, progress=False)
    path = rw.report(run, tmp_path / "agent.html")
    body = path.read_text(encoding="utf-8").split('id="rlviz-data">', 1)[1].split("</script>", 1)[0]
    assert "<img" not in body and "</script" not in body
    top = next(s for s in embedded(path)["sections"] if s["title"].startswith("top"))
    card = top["samples"][0]  # the best reward: trajectory 2
    assert [b["role"] for b in card["blocks"]] == [t["role"] for t in agent_turns(2)]
    assert [b["tool_name"] for b in card["blocks"]][2:4] == ["search", f"fetch{XSS}"]
    assert json.loads(card["blocks"][2]["tool_arguments"])["q"] == f"{XSS}</script>"
    assert [name for name, _ in card["texts"]] == []  # no prompt / response texts beside the turns
