"""Fuzzing the widgets' edge: random envelopes, methods, parameters and trait states, sent through each widget's
comm as a browser's are. Every request is answered, nothing escapes the handlers, memory stays bounded, and the
widget still answers a normal request afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from browser_side import Browser

pytest.importorskip("hypothesis")  # the test extra has it (a bare `pip install . pytest` does not)
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import rlviz_widgets as rw
from rlviz_widgets._synth import write_log
from rlviz_widgets.widgets._base import RpcWidget
from rlviz_widgets.widgets.step_slider import StepSlider

EXAMPLES = 200  # per widget (the five take ~30 s together on 2 busy cores)
MAX_RSS_GROWTH = 200 * 2**20
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

NAMES = ["rows", "cell", "strips", "domain", "data", "shown", "selected", "tokens", "visible_columns", "send",
         "close", "set_state", "__init__", "__class__", "_on_rpc", "_request", "keys", "reload", "refresh_view",
         "offset", "limit", "sample_id", "column", "metric", "scope", "steps", "prompt", "response", "reward", "step",
         "kl", "log_ratio", "run", "step", "sample", "steps_brush", "reward_brush", "bin_start", "file", "",
         "\ud800", "x" * 5000]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from([2**1024, -(2**64), 2**53 + 1, 10**400]),
    st.floats(), st.text(max_size=20), st.sampled_from(NAMES), st.just("y" * 200_000))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(
    st.sampled_from(NAMES) | st.text(max_size=8), inner, max_size=5), max_leaves=12)
int_lists = st.lists(st.integers(-3, 120) | st.integers(), max_size=8) | st.just(list(range(70_000)))
params = st.one_of(
    st.dictionaries(st.sampled_from(NAMES), values | int_lists, max_size=4),
    st.fixed_dictionaries({"offset": st.integers(-5, 200) | values, "limit": st.integers(-5, 600) | values}),
    st.fixed_dictionaries({"metric": st.sampled_from(["kl", "log_ratio", "prob", "nope"]) | values,
                           "scope": st.sampled_from(["run", "step", "sample"]) | values, "steps": int_lists | values}),
    values)
envelopes = st.one_of(
    st.fixed_dictionaries({"type": st.just("rpc"), "id": st.text(max_size=10) | values,
                           "method": st.sampled_from(NAMES) | values, "params": params}),
    st.fixed_dictionaries({"type": st.just("rpc")}, optional={"id": values, "method": values, "params": values}),
    values)


def updates(writable: dict) -> st.SearchStrategy:
    """Trait states: the front end's own traits with good and bad values, and traits it may not set."""
    good = st.one_of(*(st.fixed_dictionaries({k: v}) for k, v in writable.items()))
    other = st.dictionaries(st.sampled_from(["columns", "max_selected", "generation", "error", "_esm", "metrics",
                                             "sample_ids", "height", "spec", "row_count", "min", "max", "step",
                                             "layout", "description", "disabled", *writable, *NAMES]),
                            values | int_lists, max_size=4)
    return good | other


def messages(writable: dict) -> st.SearchStrategy:
    return st.lists(st.tuples(st.just("custom"), envelopes) | st.tuples(st.just("update"), updates(writable)),
                    min_size=1, max_size=3)


def rss() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def send(browser: Browser, kind: str, message) -> None:
    """One message; a request (a {type: "rpc"} object) must be answered exactly once, nothing else answered."""
    if kind == "update":
        browser.update(message)
        return
    replies = [r for r in browser.custom(message) if isinstance(r, dict) and r.get("type") == "rpc"]
    is_request = isinstance(message, dict) and message.get("type") == "rpc" and isinstance(browser.widget, RpcWidget)
    assert len(replies) == (1 if is_request else 0), (message, replies)
    if is_request:
        assert isinstance(replies[0]["ok"], bool) and (replies[0]["ok"] or len(replies[0]["error"]) < 1000)


def fuzz(browsers: list[Browser], writable: list[dict], still_answers) -> None:
    before = rss()
    t0 = time.perf_counter()

    sent = [messages(w) for w in writable]

    @FUZZ
    @given(st.data())
    def run_examples(data):
        k = data.draw(st.integers(0, len(browsers) - 1))
        for kind, message in data.draw(sent[k]):
            send(browsers[k], kind, message)
        for b in browsers:
            assert not b.escaped, b.escaped[0].getMessage()
            error = getattr(b.widget, "error", "")
            assert len(error) < 1000

    run_examples()
    still_answers()
    grown = (rss() or 0) - (before or 0)
    print(f"{EXAMPLES} examples in {time.perf_counter() - t0:.1f} s, RSS {grown / 2**20:+.0f} MB")
    assert grown < MAX_RSS_GROWTH


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    write_log(folder / "logs", steps=5, samples_per_step=20, tokens=30, ranks=2, seed=3)
    return rw.open_run(folder / "logs", cache_dir=folder / "cache", progress=False)


def sample_ids(run) -> st.SearchStrategy:
    return st.lists(st.sampled_from([int(i) for i in run.samples.sample_id]), max_size=5)


def table_writes(run) -> dict:
    return {"sort_by": st.sampled_from(["", "reward", "prompt", "step", "nope"]) | values,
            "sort_desc": st.booleans() | values, "search": st.sampled_from(["", "Question 3", "\ud800", "%_"]) | values,
            "selected_ids": sample_ids(run) | int_lists | values}


def test_fuzz_sample_table(run):
    table = rw.SampleTable(run)
    browser = Browser(table)

    def still_answers():
        table.search, table.sort_by, table.selected_ids = "", "", []
        reply = browser.request("rows", {"offset": 0, "limit": 5})
        assert reply["ok"] and len(reply["result"]["rows"]) == 5 and table.row_count == len(run.samples)

    fuzz([browser], [table_writes(run)], still_answers)


def strip_writes(run) -> dict:
    ids = sample_ids(run)
    return {"pinned": st.none() | st.fixed_dictionaries({"sample_id": ids.map(lambda x: x[0] if x else 0) | values,
                                                        "position": st.integers(-2, 40) | values}) | values,
            "color_by": st.sampled_from(run.token_metrics) | values,
            "scale_scope": st.sampled_from(["sample", "step", "run"]) | values}


def test_fuzz_token_strip(run):
    strip = rw.TokenStrip(run, [int(i) for i in run.samples.sample_id.head(3)])
    browser = Browser(strip)

    def still_answers():
        reply = browser.request("strips")
        assert reply["ok"] and len(reply["result"]["samples"]) == 3
        assert browser.request("domain", {"metric": "kl", "scope": "step", "steps": [0, 1]})["ok"]

    fuzz([browser], [strip_writes(run)], still_answers)


def chart_writes() -> dict:
    extent = st.lists(st.floats() | st.integers() | values, min_size=0, max_size=3)
    return {"selections": st.dictionaries(st.sampled_from(["steps_brush", "reward_brush", "p"]) | st.text(max_size=5),
                                          st.none() | st.dictionaries(st.sampled_from(["step", "bin_start"]), extent,
                                                                      max_size=2) | values, max_size=3) | values}


def test_fuzz_chart_widget(run):
    chart = rw.ChartWidget({"mark": "point", "data": {"name": "d"}, "params": [{"name": "p", "select": "interval"}]},
                           lambda: {"d": run.samples[["step", "reward"]]})
    browser = Browser(chart)

    def still_answers():
        reply = browser.request("data")
        assert reply["ok"] and "d" in reply["result"]["datasets"]

    fuzz([browser], [chart_writes()], still_answers)


def test_fuzz_step_slider(run):
    slider = StepSlider([0, 1, 2, 5, 9])
    inner = next(c for c in slider.children if hasattr(c, "min"))
    browser = Browser(inner)

    def still_answers():
        browser.update({"value": 2})
        assert slider.value == 2

    fuzz([browser], [{"value": st.integers(-3, 12) | st.integers() | values}], still_answers)
    assert slider.value in slider.values


def test_fuzz_run_view(run):
    view = rw.RunView(run)
    parts = [view.chart, view.table, view.strip, next(c for c in view.step_slider.children if hasattr(c, "min"))]
    browsers = [Browser(w) for w in parts]
    writes = [chart_writes(), table_writes(run), strip_writes(run), {"value": st.integers(-3, 12) | values}]

    def still_answers():
        view.clear()
        assert browsers[1].request("rows", {"offset": 0, "limit": 3})["ok"]
        assert browsers[0].request("data")["ok"]
        browsers[0].update({"selections": {"steps_brush": {"step": [1, 3]}}})
        assert view.steps == (1.0, 3.0) and not view.chart.error

    fuzz(browsers, writes, still_answers)
