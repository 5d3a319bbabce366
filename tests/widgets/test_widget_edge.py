"""The widgets' edge to the browser: what a front end sends is checked before it runs, and always answered."""

from __future__ import annotations

import json
import time

import pytest
from browser_side import Browser

import rlviz_widgets as rw
from rlviz_widgets._synth import write_log
from rlviz_widgets.widgets._base import RpcWidget, rpc
from rlviz_widgets.widgets.sample_table import MAX_SELECTED


@pytest.fixture
def run(tmp_path, open_run):
    write_log(tmp_path / "logs", steps=5, samples_per_step=20, tokens=30, ranks=2, seed=3)
    return open_run(tmp_path / "logs")


@pytest.mark.parametrize("envelope", [
    {"type": "rpc", "id": "b1", "method": 123, "params": {}},
    {"type": "rpc", "id": "b1", "method": ["rows"], "params": {}},
    {"type": "rpc", "id": "b1", "method": None},
    {"type": "rpc", "id": "b1"},
    {"type": "rpc", "id": "b1", "method": "rows", "params": [1, 2]},
    {"type": "rpc", "id": "b1", "method": "rows", "params": "offset=1"},
    {"type": "rpc", "id": "b1", "method": "rows", "params": {"offset": "x"}},
    {"type": "rpc", "id": "b1", "method": "rows", "params": {"nope": 1}},
])
def test_a_malformed_request_is_answered_with_an_error(run, envelope):
    """A method that was no text raised outside the handler's try: no answer, and the browser waited 30 s."""
    table = rw.SampleTable(run)
    browser = Browser(table)
    replies = browser.custom(envelope)
    assert replies == [{"type": "rpc", "id": "b1", "ok": False, "error": replies[0]["error"]}]
    assert replies[0]["error"] and not browser.escaped
    assert browser.request("rows", {"offset": 0, "limit": 2})["ok"] is True


def test_a_request_without_a_usable_id_is_still_answered(run):
    table = rw.SampleTable(run)
    browser = Browser(table)
    for rid in ({"a": 1}, "x" * 10_000, 1.5, None):
        (reply,) = browser.custom({"type": "rpc", "id": rid, "method": "rows", "params": {}})
        assert reply["type"] == "rpc" and reply["id"] is None and reply["ok"] is True
        (reply,) = browser.custom({"type": "rpc", "id": rid, "method": 5})
        assert reply["type"] == "rpc" and reply["id"] is None and reply["ok"] is False
    assert browser.custom({"type": "not rpc"}) == [] and browser.custom([1]) == [] and not browser.escaped


def test_only_requests_run(run):
    """A property's name as method ran the property before "unknown request": 200 x "shown" took 6.9 s."""
    looked = []

    class Probe(RpcWidget):
        @property
        def costly(self):
            looked.append(1)
            return 1

        @rpc
        def answer(self):
            return 42

    probe = Probe()
    browser = Browser(probe)
    for name in ("costly", "__init__", "send", "close", "set_state", "_repr_mimebundle_", "__class__", "keys"):
        reply = browser.request(name)
        assert reply["ok"] is False and "unknown request" in reply["error"], name
    assert looked == [] and browser.request("answer") == {"type": "rpc", "id": "b1", "ok": True, "result": 42}
    table = rw.SampleTable(run)
    browser = Browser(table)
    t0 = time.perf_counter()
    for _ in range(50):
        assert browser.request("shown")["ok"] is False
    assert time.perf_counter() - t0 < 0.5


def test_a_domain_request_is_bounded(run):
    """Every distinct steps list was cached for good (2,000 requests: +390 MB); 200k steps took 2.8 s."""
    strip = rw.TokenStrip(run, run.samples.sample_id.head(2).tolist(), color_by="kl")
    browser = Browser(strip)
    t0 = time.perf_counter()
    reply = browser.request("domain", {"metric": "kl", "scope": "step", "steps": list(range(200_000))})
    assert reply["ok"] is False and "steps" in reply["error"] and time.perf_counter() - t0 < 0.5
    for steps in ([1.5], ["a"], [2**80], "0,1", [[1]], [True]):
        reply = browser.request("domain", {"metric": "kl", "scope": "step", "steps": steps})
        assert reply["ok"] is False and "steps" in reply["error"], steps
    ok = browser.request("domain", {"metric": "kl", "scope": "step", "steps": [2, 2, 1]})
    assert ok["ok"] is True and ok["result"]["hi"] > 0 and not strip.error and not browser.escaped


def test_the_domain_cache_is_bounded(run):
    """Every distinct steps list was cached for good: 2,000 requests took RSS from 231 to 622 MB."""
    from rlviz_widgets.run._queries import MAX_DOMAINS

    strip = rw.TokenStrip(run, run.samples.sample_id.head(2).tolist(), color_by="kl")
    browser = Browser(strip)
    first = browser.request("domain", {"metric": "kl", "scope": "step", "steps": [0]})["result"]
    for k in range(MAX_DOMAINS + 50):  # distinct step lists: the cache keeps the last MAX_DOMAINS
        browser.request("domain", {"metric": "kl", "scope": "step", "steps": [k % 5, 100 + k]})
    assert len(run._domains) <= MAX_DOMAINS
    assert browser.request("domain", {"metric": "kl", "scope": "step", "steps": [0]})["result"] == first


def test_echoed_input_is_clipped(run):
    """A 10 MB column name gave a 10 MB error trait and reply."""
    table = rw.SampleTable(run)
    browser = Browser(table)
    name = "c" * 10_000_000
    reply = browser.request("cell", {"sample_id": int(run.samples.sample_id[0]), "column": name})
    assert reply["ok"] is False and len(reply["error"]) < 1000 and len(table.error) < 1000
    assert table.error.startswith("cell: ") and "characters" in table.error
    strip = rw.TokenStrip(run, [])
    reply = Browser(strip).request("domain", {"metric": name, "scope": "run"})
    assert reply["ok"] is False and len(reply["error"]) < 1000 and len(strip.error) < 1000
    back = browser.update({"sort_by": name})  # refused, said in a line, and the view told the kernel's value
    assert table.sort_by == "" and len(table.error) < 1000 and back["sort_by"] == ""


def test_the_browser_sets_only_what_it_may(run):
    """Browser-writable traits were trusted as sent: 3,000 copies of a column made a page take 2.95 s, hidden
    columns could be asked for, and the read-only ``max_selected`` took set_state."""
    table = rw.SampleTable(run)
    browser = Browser(table)
    columns = list(table.columns)
    back = browser.update({"columns": [{"name": "prompt", "kind": "text"}] * 3000})
    assert table.columns == columns and back["columns"] == columns and "columns" in table.error
    browser.update({"columns": [{"name": "file", "kind": "text"}]})
    assert "file" not in table.visible_columns
    browser.update({"max_selected": 10**9, "generation": 99, "_esm": "alert(1)", "error": "", "row_count": 1})
    assert table.max_selected == MAX_SELECTED and table.generation != 99 and table.row_count == len(run.samples)
    assert "max_selected" in table.error
    browser.update({"sort_by": "reward", "sort_desc": True})  # what the table's front end sets still sets
    assert (table.sort_by, table.sort_desc) == ("reward", True) and not table.error
    browser.update({"selected_ids": [int(i) for i in run.samples.sample_id.head(3)]})
    assert len(table.selected_ids) == 3
    for ids in ([2**80], [1.5], ["1"], list(range(MAX_SELECTED + 1))):
        browser.update({"selected_ids": ids})
        assert len(table.selected_ids) == 3 and table.error.startswith("update: ")
    assert not browser.escaped
    # from Python, the columns shown are checked too: known, each once, at most MAX_COLUMNS
    table.columns = [{"name": "prompt", "kind": "text"}] * 3000
    assert table.visible_columns == ["prompt"]
    with pytest.raises(Exception, match="no column"):
        table.columns = [{"name": "nope", "kind": "text"}]
    page = Browser(table).request("rows", {"offset": 0, "limit": 5})
    assert page["ok"] is True and len(page["result"]["rows"][0]) == 1
    strip = rw.TokenStrip(run, run.samples.sample_id.head(1).tolist())
    browser = Browser(strip)
    browser.update({"metrics": ["x"], "sample_ids": list(range(5))})
    assert strip.metrics == run.token_metrics and strip.sample_ids == run.samples.sample_id.head(1).tolist()
    sid = strip.sample_ids[0]
    browser.update({"pinned": {"sample_id": sid, "position": 3}, "color_by": "log_ratio", "scale_scope": "run"})
    assert strip.pinned == {"sample_id": sid, "position": 3} and strip.color_by == "log_ratio"
    for pin in ({"sample_id": sid, "position": 2**80}, {"sample_id": "x" * 10**6, "position": 1}, {"a": 1}, [1],
                {"sample_id": sid, "position": 1, "more": "x" * 10**6}):
        browser.update({"pinned": pin})
        assert strip.pinned == {"sample_id": sid, "position": 3} and len(strip.error) < 1000
    assert not browser.escaped


def test_a_brush_of_numbers_no_float_holds_is_said_not_raised(tmp_path):
    """``_on_brush`` let an OverflowError escape on a brush of [2**1024, 1]."""
    write_log(tmp_path / "logs", steps=5, samples_per_step=8, tokens=6, ranks=1, seed=3)
    view = rw.RunView(tmp_path / "logs", cache_dir=tmp_path / "cache", progress=False)
    browser = Browser(view.chart)
    for bad in ([2**1024, 1], [float("nan"), 1], [float("inf"), 1], ["a", 1], [1, 2, 3], [True, 2], "x" * 10**6):
        browser.update({"selections": {"steps_brush": {"step": bad}}})
        assert view.steps is None and 0 < len(view.chart.error) < 1000, bad
    browser.update({"selections": {"steps_brush": {"step": [1, 3]}}})
    assert view.steps == (1.0, 3.0) and not view.chart.error and not browser.escaped
    browser.update({"selections": {f"p{k}": None for k in range(10_000)}})
    assert view.chart.error and len(view.chart.selections) < 100
    assert not browser.escaped


def test_a_lone_surrogate_in_the_search_does_not_break_the_table(run):
    """A search of "\\ud800" put the table in a failing state until the search changed."""
    table = rw.SampleTable(run)
    browser = Browser(table)
    browser.update({"search": "Question\ud800"})
    assert not table.error and not browser.escaped
    page = browser.request("rows", {"offset": 0, "limit": 3})
    assert page["ok"] is True and page["result"]["total"] == table.row_count == 0
    json.dumps(table.get_state()["search"], ensure_ascii=False).encode()  # UTF-8 text again
    table.search = "Question 3:"
    assert table.row_count > 0
