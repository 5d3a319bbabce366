"""RunView as one widget: its parts' state and messages carried over its one comm (the hub), its controls moved by
messages, the detail pane as text blocks. Browser messages are played by ``browser_side.Browser``."""

from __future__ import annotations

import json

import pytest
from browser_side import Browser

import rlviz_widgets as rw
from rlviz_widgets._synth import write_log
from rlviz_widgets.widgets.run_view import panes


@pytest.fixture
def view(tmp_path, cache_dir):
    write_log(tmp_path / "logs", steps=6, samples_per_step=20, tokens=24, ranks=2, seed=4)
    return rw.RunView(tmp_path / "logs", cache_dir=cache_dir, progress=False)


def parts_sent(browser: Browser) -> list[dict]:
    return [d["content"] for d, _ in browser.published if d.get("method") == "custom"
            and d["content"].get("type") == "part"]


def test_hello_gets_every_parts_state_and_the_state_stays_small(view):
    browser = Browser(view)
    snap = browser.custom({"type": "hello"})
    assert [m["type"] for m in snap] == ["snapshot"]
    parts = snap[0]["parts"]
    assert set(parts) == {"chart", "table", "strip", "slider", "slider_label"}
    assert parts["table"]["row_count"] == view.run.n_samples and parts["strip"]["sample_ids"] == []
    assert parts["slider"]["max"] == 5 and parts["slider_label"]["value"] == "all steps"
    assert not any(k.startswith("_") or k == "layout" for p in parts.values() for k in p)
    assert len(json.dumps(parts)) < 30_000  # pages and aggregates travel by request, not as state
    own = {k: v for k, v in view.get_state().items() if not k.startswith("_")}
    assert len(json.dumps(own, default=str)) < 5_000
    view.tabs.value = 1  # the groups tab opened: its parts join, sent to the views already open
    added = {m["part"] for m in parts_sent(browser)}
    assert {"group_table", "group_strip"} <= added
    assert set(browser.custom({"type": "hello"})[0]["parts"]) >= {"group_table", "group_strip"}


def test_a_parts_update_goes_through_its_own_checks(view):
    browser = Browser(view)
    browser.custom({"type": "part", "part": "chart", "state": {"selections": {"steps_brush": {"step": [1, 3]}}},
                    "client": "c1"})
    assert view.steps == (1.0, 3.0) and view.table.row_count == len(view.filtered) == 60
    # refused by the part's allow-list: said in the part, and the sender told the kernel's value
    browser.custom({"type": "part", "part": "table", "state": {"row_count": 5}, "client": "c1"})
    assert view.table.row_count == 60 and "may not set 'row_count'" in view.table.error
    assert {"type": "part", "part": "table", "state": {"row_count": 60}} in parts_sent(browser)
    # refused by the part's check: a malformed brush, the filters as they were
    browser.custom({"type": "part", "part": "chart", "state": {"selections": {"steps_brush": {"step": ["a", 2]}}}})
    assert view.steps == (1.0, 3.0) and view.chart.error
    browser.custom({"type": "part", "part": "nope", "state": {"x": 1}})  # no such part: nothing moves
    browser.custom({"type": "part", "part": "slider_label", "state": {"value": "hacked"}})  # takes no writes
    assert view.step_slider.children[1].value == "steps 1–3"
    assert not browser.escaped


def test_an_echo_names_the_client_that_sent_it(view):
    browser = Browser(view)
    browser.custom({"type": "part", "part": "table", "state": {"search": "Question 3:"}, "client": "c1"})
    sent = parts_sent(browser)
    echo = [m for m in sent if "search" in m.get("state", {})]
    assert echo and all(m.get("origin") == "c1" for m in echo)  # the sender shows it already; others take it
    counts = [m for m in sent if "row_count" in m.get("state", {})]
    assert counts and all("origin" not in m for m in counts)  # what the kernel made of it: for every view
    # a value the kernel changed on the way is sent to the sender too: a number between steps, the nearest step
    browser.custom({"type": "part", "part": "slider", "state": {"value": 3}, "client": "c1"})
    assert view.steps == (3.0, 3.0)
    browser.custom({"type": "part", "part": "slider", "state": {"value": 70}, "client": "c1"})
    assert view.step_slider.value == 5 and view.steps == (5.0, 5.0)
    last = [m for m in parts_sent(browser) if m["part"] == "slider" and "value" in m["state"]][-1]
    assert last["state"]["value"] == 5 and "origin" not in last


def test_part_requests_and_their_buffers_travel_through_the_view(view):
    browser = Browser(view)
    rows = browser.custom({"type": "part", "part": "table",
                           "msg": {"type": "rpc", "id": "r1", "method": "rows", "params": {"offset": 0, "limit": 3}}})
    (reply,) = rows
    assert reply["part"] == "table" and reply["msg"]["id"] == "r1" and reply["msg"]["ok"]
    assert len(reply["msg"]["result"]["ids"]) == 3
    sid = reply["msg"]["result"]["ids"][0]
    view.selected_ids = [sid]
    browser.published = []
    request = {"type": "part", "part": "strip", "msg": {"type": "rpc", "id": "r2", "method": "strips", "params": {}}}
    view.comm.handle_msg({"content": {"comm_id": view.comm.comm_id, "data": {"method": "custom", "content": request}},
                          "buffers": []})
    (data, buffers), = [(d, b) for d, b in browser.published if d.get("content", {}).get("type") == "part"]
    assert data["content"]["msg"]["ok"] and len(buffers) == len(view.strip.metrics)
    assert len(buffers[0]) == 4 * int(view.selected.n_tokens.iloc[0])  # float32 per token
    bad = browser.custom({"type": "part", "part": "table", "msg": {"type": "rpc", "id": "r3", "method": "_source"}})
    (answer,) = [m["msg"] for m in bad if "msg" in m]  # (after the table's error line, sent as its state)
    assert answer["ok"] is False and "unknown request" in answer["error"] and "unknown request" in view.table.error
    assert not browser.escaped


def test_controls_move_by_message_as_from_python(view):
    browser = Browser(view)
    gen = view.chart.generation
    browser.custom({"type": "control", "name": "band", "value": 2.0})
    assert view.band.value == 2.0 and view.controls["band"] == 2.0 and view.chart.generation > gen
    for bad in (99, "x", None, float("nan")):
        browser.custom({"type": "control", "name": "band", "value": bad})
        assert view.band.value == 2.0 and view.error.startswith("control:")
    browser.custom({"type": "control", "name": "kl_metric", "value": "log_ratio_mean"})
    assert view.kl_metric.value == "log_ratio_mean" and not view.error
    browser.custom({"type": "control", "name": "run", "value": 1})  # not a control
    assert view.error.startswith("control:")
    browser.custom({"type": "click", "name": "next"})
    assert view.steps == (0.0, 0.0)
    browser.custom({"type": "click", "name": "next"})
    assert view.steps == (1.0, 1.0)
    browser.custom({"type": "click", "name": "clear"})
    assert view.steps is None
    browser.custom({"type": "control", "name": "tab", "value": 1})
    assert view.group_panes["built"] and view.group_table is not None
    assert view.tabs.selected_index == 1 and view.controls["tab"] == 1  # (ipywidgets' Tab's name, kept)
    view.tabs.selected_index = 0
    assert view.controls["tab"] == 0
    # the browser may set none of the view's traits directly
    browser.update({"steps": [1, 2], "detail": {"blocks": []}, "status": "x"})
    assert view.steps is None and view.status.endswith("samples")
    for junk in ([1], "x", {"type": 5}, {"type": "part", "part": ["table"]}, {"type": "control"}):
        browser.custom(junk)
    assert not browser.escaped


def test_detail_blocks_are_turns_of_text(view):
    sid = int(view.run.samples.sample_id.iloc[3])
    view.selected_ids = [sid]
    row = view.selected.iloc[0]
    assert view.detail["blocks"] == [panes.block("user", row.prompt, trained=False),
                                     panes.block("assistant", row.response, trained=True),
                                     panes.block("ref response", row.ref_response)]
    assert all(set(b) <= {"role", "text", "tool_name", "tool_arguments", "trained"} for b in view.detail["blocks"])
    r = row.copy()
    r["answer"] = "42"
    r["ref_response"] = None
    assert [b["role"] for b in panes.detail_blocks(r)] == ["prompt", "response", "answer"]
    long = panes.block("response", "x" * 60_000)
    assert len(long["text"]) < 50_100 and long["text"].endswith("more characters]")


def test_two_views_of_one_run_keep_their_own_parts(view):
    other = rw.RunView(view.run)
    view.filter(steps=(1, 1))
    assert other.steps is None and other.table.row_count == view.run.n_samples
    assert view.hub.state("table")["row_count"] == 20 and other.hub.state("table")["row_count"] == 120
