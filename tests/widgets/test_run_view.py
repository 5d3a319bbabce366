"""RunView without a browser: the Python API, the links between its parts, following a run that grows."""

from __future__ import annotations

import asyncio
import json
import math
import random

import numpy as np
import pandas as pd
import pytest
import traitlets
from conftest import call, write_lines
from ipywidgets.widgets.widget import _instances

import rlviz_widgets as rw
from rlviz_widgets._synth import make_record, write_log


@pytest.fixture
def logs(tmp_path):
    write_log(tmp_path / "logs", steps=6, samples_per_step=20, tokens=24, ranks=2, seed=4)
    return tmp_path / "logs"


@pytest.fixture
def view(logs, cache_dir):
    return rw.RunView(logs, cache_dir=cache_dir, progress=False)


def test_filter_moves_brushes_table_and_frames(view):
    s = view.run.samples
    view.filter(steps=(2, 4), reward=(0.0, None), where="kl_mean > 0")
    want = s[(s.step >= 2) & (s.step <= 4) & (s.reward >= 0) & (s.kl_mean > 0)]
    assert view.table.row_count == len(want) == len(view.filtered)
    assert sorted(view.filtered.sample_id) == sorted(want.sample_id)
    assert view.chart.selections["steps_brush"] == {"step": [2.0, 4.0]}
    assert view.chart.selections["reward_brush"]["bin_start"][0] == 0.0
    assert view.chart.selections["reward_brush"]["bin_start"][1] == pytest.approx(s.reward.max())
    view.filter(steps=None)  # only what is given changes
    assert view.steps is None and view.reward == (0.0, None) and view.chart.selections["steps_brush"] is None
    view.clear()
    assert view.table.row_count == len(s) and view.where == "" and view.reward is None


def test_infinite_or_nan_range_ends_and_odd_pages(view):
    """``reward=(-inf, 0)`` passed the check and then failed in DuckDB (``reward >= -inf``: no such column); a NaN
    end did too. An infinite end is an open one (or keeps nothing: ``(inf, None)``); NaN is refused. A negative
    page offset sliced from the end."""
    s = view.run.samples
    view.filter(reward=(float("-inf"), 0.0))
    assert view.reward == (None, 0.0) and view.table.row_count == int((s.reward <= 0).sum())
    view.filter(reward=(0.0, float("inf")))
    assert view.reward == (0.0, None) and view.table.row_count == int((s.reward >= 0).sum())
    view.filter(reward=(float("inf"), None))
    assert view.table.row_count == 0 and not view.table.error
    with pytest.raises(traitlets.TraitError, match="NaN"):
        view.filter(reward=(float("nan"), 1.0))
    with pytest.raises(traitlets.TraitError, match="a number or None"):
        view.filter(steps=("a", 3))
    view.clear()
    src = view.table._source
    assert src.ids(offset=-2, limit=3) == src.ids(offset=0, limit=3) and src.ids(offset=0, limit=-1) == []
    page = call(view.table, "rows", offset=-2, limit=3)[0]["result"]
    assert page["offset"] == 0 and page["ids"] == src.ids(offset=0, limit=3)  # where its rows start


def test_an_inverted_range_is_refused_and_the_filters_stay(view):
    """``view.filter(steps=(5, 1))`` silently became (1, 5); setting the trait did too."""
    view.filter(steps=(1, 3))
    with pytest.raises(traitlets.TraitError, match=r"steps=\(5, 1\): the first step is after the last"):
        view.filter(steps=(5, 1))
    with pytest.raises(traitlets.TraitError, match="the first end is after the last"):
        view.reward = (1.0, 0.0)
    assert view.steps == (1.0, 3.0) and view.reward is None


def test_a_where_the_samples_cannot_take_is_refused_and_the_filters_stay(view):
    """``view.filter(where="kl_men > 0.1")`` returned as if it worked: the where was kept, the table showed
    DuckDB's BinderException, and view.filtered and view.selected_tokens raised it from then on. A where that binds
    but fails on the data (``reward > 'a'``) did the same; ``false) or (true`` undid the step range before it."""
    view.filter(steps=(1, None), where="kl_mean > 0")
    before = view.filtered
    for bad in ("kl_men > 0.1", "kl_mean >", 5, "false) or (true", "reward > 'a'"):
        with pytest.raises((ValueError, TypeError), match="where="):
            view.filter(steps=(3, None), where=bad)
        assert view.steps == (1.0, None) and view.where == "kl_mean > 0"  # nothing moved
        assert view.filtered.equals(before) and not view.table.error
    with pytest.raises(traitlets.TraitError, match="kl_men"):
        view.where = "kl_men > 0.1"
    assert view.where == "kl_mean > 0" and view.filtered.equals(before)
    view.filter(where="kl_mean > 0 -- a comment ends the where")  # it swallowed the view's closing parenthesis
    assert view.filtered.equals(before) and not view.table.error


def test_a_where_filter_may_ask_the_tokens_view(view):
    """The table's cursors come from the run, so SQL over tokens works in a filter as it does in run.sql."""
    cond = "sample_id IN (SELECT sample_id FROM tokens WHERE kl > 0.05)"
    want = set(view.run.sql(f"SELECT sample_id FROM samples WHERE {cond}")["sample_id"])
    view.filter(where=cond)
    assert 0 < view.table.row_count == len(want) < view.run.n_samples
    assert set(view.filtered.sample_id) == want


def test_brush_from_the_chart_reaches_the_traits(view):
    view.chart.selections = {"steps_brush": {"step": [1.2, 3.7]}, "reward_brush": {"bin_start": [-1, 1]}}
    assert view.steps == (1.2, 3.7) and view.reward == (-1.0, 1.0)
    f = view.filtered
    assert f.step.between(2, 3).all() and f.reward.between(-1, 1).all() and len(f) == view.table.row_count
    view.chart.selections = {"steps_brush": None, "reward_brush": None}
    assert view.steps is None and view.reward is None


def test_traits_are_observable_and_linkable(view):
    seen = []
    view.observe(lambda c: seen.append(len(c["new"])), "filtered")
    view.filter(steps=(0, 0))
    assert seen == [20]
    box = traitlets.HasTraits()
    box.add_traits(metric=traitlets.Unicode())
    traitlets.link((view, "color_by"), (box, "metric"))
    box.metric = "log_ratio"
    assert view.strip.color_by == "log_ratio"
    with pytest.raises(traitlets.TraitError):
        view.steps = (1, 2, 3)


def test_selection_opens_detail_and_tokens(view):
    sid = int(view.run.samples.sample_id.iloc[5])
    view.table.selected_ids = [sid]  # as a click in the table does
    assert view.selected_ids == [sid] and view.selected.sample_id.tolist() == [sid]
    assert view.strip.sample_ids == [sid]
    assert len(view.selected_tokens) == int(view.selected.n_tokens.iloc[0])
    detail = view.detail
    assert detail["sample_id"] == sid and ["sample", str(sid)] in detail["facts"]
    # a log without message structure: its prompt and response as run.turns gives them, then the reference
    assert [b["role"] for b in detail["blocks"]] == ["user", "assistant", "ref response"]
    row = view.selected.iloc[0]
    assert [b["text"] for b in detail["blocks"]] == [row.prompt, row.response, row.ref_response]


def test_the_detail_follows_the_filter(view):
    """A brush that filtered out the sample shown left its detail and strip on screen, and ``selected`` held it."""
    s = view.run.samples
    early, late = (int(s[s.step == k].sample_id.iloc[0]) for k in (1, 4))
    view.selected_ids = [late, early]  # the detail shows the last picked
    view.filter(steps=(3, 5))  # early leaves: the detail shows late, saying the one shown left
    assert view.selected_ids == [late] and view.selected.sample_id.tolist() == [late]
    assert view.detail["note"] == "the sample shown left the filter" and view.detail["sample_id"] == late
    assert view.strip.sample_ids == [late]
    view.filter(search="no such text anywhere")  # late leaves too: nothing is shown, the note says why
    assert view.selected_ids == [] and view.strip.sample_ids == []
    assert view.detail == {"note": "the sample shown left the filter"}
    view.clear()
    view.selected_ids = [late]
    view.filter(steps=(3, 5))  # still passing: kept, no note
    assert view.selected_ids == [late] and view.detail["note"] == "" and view.detail["sample_id"] == late


def test_detail_escapes_model_text(logs, cache_dir):
    rec = make_record(random.Random(1), 0, 0, 6, progress=0.0)
    rec["response"] = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    with open(logs / "rollout_rank0.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")
    view = rw.RunView(logs, cache_dir=cache_dir, progress=False)
    sid = int(view.run.sql("select sample_id from samples where response like '%onerror%'").sample_id[0])
    view.selected_ids = [sid]
    # the pane is data: the response as the log has it, which the front end shows as text (textContent)
    response = next(b for b in view.detail["blocks"] if b["role"] == "assistant")
    assert response["text"] == rec["response"]
    assert not any("<" in v for _, v in view.detail["facts"])


def test_step_navigation_uses_real_step_values(tmp_path, cache_dir):
    write_log(tmp_path / "gappy", steps=4, samples_per_step=4, tokens=8, ranks=1, step_gap=50)
    view = rw.RunView(tmp_path / "gappy", cache_dir=cache_dir, progress=False)
    assert view.step_slider.values == (0, 50, 100, 150)
    view.next_button.click()
    assert view.steps == (0, 0)
    view.next_button.click()
    assert view.steps == (50, 50) and view.step_slider.value == 50
    view.prev_button.click()
    assert view.steps == (0, 0)
    view.step_slider.value = 150
    assert view.steps == (150, 150) and view.table.row_count == 4
    slider = view.step_slider.children[0]  # evenly spaced: the browser's slider is over the steps, read live
    assert (slider.min, slider.max, slider.step, slider.readout) == (0, 150, 50, True)
    slider.value = 100
    assert view.steps == (100, 100) and view.step_slider.value == 100
    slider.value = 70  # a number typed into the readout: the nearest step
    assert view.steps == (50, 50) and slider.value == 50
    with pytest.raises(traitlets.TraitError, match="not one of the run's steps"):
        view.step_slider.value = 51


def test_the_step_slider_says_all_steps_while_no_step_filter_applies(tmp_path, cache_dir):
    """The slider sat at 0, its readout saying "0", while every step was shown."""
    write_log(tmp_path / "gappy", steps=4, samples_per_step=4, tokens=8, ranks=1, step_gap=50)
    view = rw.RunView(tmp_path / "gappy", cache_dir=cache_dir, progress=False)
    slider, label = view.step_slider.children
    assert view.step_slider.value is None and not slider.readout and label.layout.display != "none"
    assert label.value == "all steps"
    view.step_slider.value = 100  # a step picked: its number, the slider's own readout
    assert view.steps == (100, 100) and slider.readout and label.layout.display == "none"
    view.filter(steps=(50, 150))  # a range: no single step, said beside the slider
    assert view.step_slider.value is None and not slider.readout and label.value == "steps 50–150"
    view.filter(steps=(None, 100))
    assert label.value == "steps ≤ 100"
    view.filter(steps=(0, 0))
    assert view.step_slider.value == 0 and slider.readout
    view.clear()
    assert view.step_slider.value is None and label.value == "all steps" and not slider.readout


def test_a_step_slider_over_uneven_steps_moves_over_positions(tmp_path, cache_dir):
    log = tmp_path / "uneven"
    log.mkdir()
    (log / "r.jsonl").write_text("".join(json.dumps({"step": s, "prompt": "p", "response": "r", "reward": 1.0}) + "\n"
                                         for s in (3, 5, 40)))
    view = rw.RunView(log, cache_dir=cache_dir, progress=False)
    slider, label = view.step_slider.children
    assert (slider.min, slider.max, slider.readout) == (0, 2, False) and label.value == "all steps"
    slider.value = 2  # the label beside it shows the step
    assert view.steps == (40, 40) and label.value == "40"
    with open(log / "r.jsonl", "a") as f:  # steps evenly spaced no more, or again: the slider follows
        f.write(json.dumps({"step": 41, "prompt": "p", "response": "r", "reward": 1.0}) + "\n")
    assert view.poll() and view.step_slider.values == (3, 5, 40, 41) and view.step_slider.value == 40
    assert slider.value == 2 and slider.max == 3


def _synced_bytes(widget) -> int:
    """Bytes of the synced state of a widget and every widget below it."""
    state = widget.get_state()
    size = len(json.dumps(state, default=str))
    for v in state.values():
        for child in v if isinstance(v, (list, tuple)) else [v]:
            if isinstance(child, str) and child.startswith("IPY_MODEL_"):
                size += _synced_bytes(_instances[child[len("IPY_MODEL_"):]])
    return size


def test_step_slider_state_does_not_grow_with_the_steps(tmp_path, cache_dir):
    """ipywidgets' SelectionSlider synced a label per step (170 KB at 20,000 steps), again on every poll."""
    logs = tmp_path / "long"
    logs.mkdir()
    with open(logs / "r.jsonl", "w") as f:
        for s in range(5000):
            f.write(json.dumps({"step": s * 1000, "prompt": "p", "response": "r", "reward": s / 5000}) + "\n")
    view = rw.RunView(logs, cache_dir=cache_dir, progress=False)
    assert view.step_slider.value is None and view.step_slider.values[-1] == 4_999_000
    assert _synced_bytes(view.step_slider) < 10_000
    with open(logs / "r.jsonl", "a") as f:
        f.write(json.dumps({"step": 5_000_000, "prompt": "p", "response": "r", "reward": 1.0}) + "\n")
    view.step_slider.value = 4_999_000
    assert view.poll() and view.step_slider.values[-1] == 5_000_000 and view.step_slider.value == 4_999_000
    assert _synced_bytes(view.step_slider) < 10_000


def test_poll_reads_appended_lines_and_keeps_the_users_state(logs, view):
    view.filter(steps=(1, 3))
    view.table.sort_by, view.table.sort_desc = "reward", True
    picked = int(view.filtered.sample_id.iloc[0])
    view.selected_ids = [picked]
    gen = view.chart.generation
    with open(logs / "rollout_rank1.jsonl", "a") as f:
        for i in range(7):
            f.write(json.dumps(make_record(random.Random(i), 6, i, 10, progress=1.0)) + "\n")
        f.write('{"prompt": "still writ')  # a job in the middle of a line
    assert view.poll() is True
    assert 6 in view.run.step_values and view.step_slider.values[-1] == 6
    assert view.chart.generation > gen and view.steps == (1.0, 3.0)
    assert view.table.sort_by == "reward" and view.selected_ids == [picked]
    assert view.run.n_samples == 127
    assert "incomplete_last_line" in set(view.run.problems.kind)
    with open(logs / "rollout_rank1.jsonl", "a") as f:
        rest = json.dumps(make_record(random.Random(9), 6, 9, 10, progress=1.0))[len('{"prompt": "still writ'):]
        f.write(rest + "\n")
    assert view.poll() is True and view.run.n_samples == 128
    assert view.poll() is False


def test_follow_polls_in_the_event_loop(logs, view):
    async def scenario():
        view.follow_interval = 0.05
        view.follow = True
        with open(logs / "rollout_rank0.jsonl", "a") as f:
            f.write(json.dumps(make_record(random.Random(3), 7, 0, 10, progress=1.0)) + "\n")
        for _ in range(100):
            await asyncio.sleep(0.05)
            if 7 in view.run.step_values:
                break
        view.follow = False
        await asyncio.sleep(0.1)
        return view.run.step_values, view._follow_task

    steps, task = in_fresh_thread(lambda: asyncio.run(scenario()))
    assert 7 in steps and task is None


def test_follow_without_an_event_loop_says_what_to_do(view):
    def switch_on():
        with pytest.raises(RuntimeError, match="poll"):
            view.follow = True
        return view.follow

    assert in_fresh_thread(switch_on) is False


def in_fresh_thread(fn):
    """Run fn where no event loop runs (pytest may share the main thread with Playwright's)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result(timeout=60)


def test_frames_are_dataframes(view):
    assert isinstance(view.filtered, pd.DataFrame) and isinstance(view.selected, pd.DataFrame)


def test_a_view_shows_what_another_view_of_its_run_read_first(tmp_path, cache_dir):
    """Two views of one run (its own, and a view of a RunSet holding it): the one that polled second got False
    from refresh() (nothing left to read) and never redrew until the next change."""
    write_log(tmp_path / "a", steps=1, samples_per_step=2, tokens=4, ranks=1, seed=1)
    write_log(tmp_path / "b", steps=1, samples_per_step=2, tokens=4, ranks=1, seed=2)
    a = rw.open_run(tmp_path / "a", cache_dir=cache_dir, progress=False)
    b = rw.open_run(tmp_path / "b", cache_dir=cache_dir, progress=False)
    view_a = rw.RunView(a)
    view_set = rw.RunView(rw.RunSet({"a": a, "b": b}))
    with open(next((tmp_path / "a").glob("*.jsonl")), "a") as f:
        f.write(json.dumps(make_record(random.Random(5), 1, 0, 4, progress=1.0)) + "\n")
    assert view_set.poll() is True and view_set.table.row_count == 5
    assert view_a.poll() is True  # the set read a's new line first
    assert view_a.table.row_count == 3 and view_a.step_slider.values[-1] == 1
    assert view_a.poll() is False


def wire_json(widget) -> str:
    """The widget's synced state as Jupyter sends it: NaN and infinities are refused."""
    return json.dumps(widget.get_state(), allow_nan=False, default=str)


@pytest.mark.parametrize("rng", [{"reward": (float("inf"), None)}, {"steps": (float("-inf"), float("-inf"))},
                                 {"reward": (None, float("-inf"))}, {"reward": (-1e300, 1e300)}])
def test_brushes_carry_no_infinity(view, rng):
    """An infinite end reached the chart's synced selections as Infinity (no JSON: the message is refused, or
    sent with the string "inf"). Brush ends are finite numbers now."""
    view.filter(**rng)
    wire_json(view.chart)
    exts = [v.get("bin_start", v.get("step")) for v in view.chart.selections.values() if v]
    assert exts and all(math.isfinite(x) for ext in exts for x in ext)


def test_a_run_without_rewards_draws_no_reward_brush(tmp_path, cache_dir):
    """min(reward) of a run without rewards is NULL: an open reward range put NaN into the chart's selections."""
    log = tmp_path / "log"
    log.mkdir()
    rng = random.Random(1)
    recs = [{k: v for k, v in make_record(rng, i // 4, i, 5, progress=0.5).items() if k != "reward"} for i in range(8)]
    (log / "r0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    view = rw.RunView(log, cache_dir=cache_dir, progress=False)
    view.filter(reward=(None, 1.0), steps=(1, None))
    wire_json(view.chart)
    assert view.chart.selections["reward_brush"] is None and view.chart.selections["steps_brush"] == {"step": [1, 1]}


def test_an_open_end_stays_open_when_the_other_brush_moves(logs, view):
    """Dragging the reward brush read both brushes back: the step brush, drawn closed at the last step, closed the
    user's open range (2, None), and steps appended later were filtered out. A poll redraws an open brush."""
    view.filter(steps=(2, None))
    sel = dict(view.chart.selections)
    sel["reward_brush"] = {"bin_start": [-5.0, 5.0]}  # what the front end sends when the histogram is dragged
    view.chart.selections = sel
    assert view.steps == (2.0, None) and view.reward == (-5.0, 5.0)
    rng = random.Random(0)
    with open(sorted(logs.glob("*.jsonl"))[0], "a") as f:
        for i in range(5):
            f.write(json.dumps({**make_record(rng, 9, i, 6, progress=1.0), "reward": 0.0}) + "\n")
    assert view.poll()
    s = view.run.samples
    assert view.table.row_count == int(((s.step >= 2) & s.reward.between(-5, 5)).sum())
    assert view.chart.selections["steps_brush"] == {"step": [2.0, 9.0]}
    assert view.steps == (2.0, None)


def test_chart_data_are_numbers_where_a_histogram_or_a_curve_is_empty(tmp_path, cache_dir):
    """A run with ref_reward but no reward has no reward_gap histogram: its empty frame was untyped, so the concat
    with the others made every column object and the chart got step, bins and counts as text ("10" < "9"). The
    same for a set whose one run has no reward curve."""
    def numbers_only(datasets):
        for name, cols in datasets.items():
            for col, values in cols.items():
                if col not in ("column", "series", "run"):
                    assert not any(isinstance(v, str) for v in values), (name, col, values[:3])

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "r0.jsonl").write_text("".join(json.dumps({"step": i // 2, "prompt": "p", "response": "r", "ref_response": "x",
                                                    "ref_reward": i * 0.5}) + "\n" for i in range(6)))
    write_log(b, steps=3, samples_per_step=4, tokens=4, ranks=1, seed=1)
    for source in (a, {"a": a, "b": b}):
        view = rw.RunView(source, cache_dir=cache_dir, progress=False)
        content, _ = call(view.chart, "data")
        data = content["result"]["datasets"]
        assert data["hist"]["count"] and data["curves"]["mean"]
        numbers_only(data)


def test_a_picked_group_stays_picked_as_the_run_grows(tmp_path, cache_dir):
    """The group table's row ids were positions in groups(run): a late line of an earlier step (a group sorting
    before the picked one) shifted them, and after a poll the table named another group than the detail."""
    log = tmp_path / "logs"
    log.mkdir()
    path = log / "rank0.jsonl"
    with open(path, "w") as f:
        for step in range(3):
            for g in ("b", "c"):
                for k in range(2):
                    f.write(json.dumps({"step": step, "prompt": f"q{g}", "response": f"r{k}", "reward": k + step,
                                        "uid": g}) + "\n")
    view = rw.RunView(log, cache_dir=cache_dir, progress=False)
    view.tabs.value = 1  # the GRPO tab
    table = view.group_table
    frame = table._data
    table.selected_ids = frame.loc[frame["group"] == "1:c", "sample_id"].tolist()
    assert view.group_detail["group"] == "1:c"
    with open(path, "a") as f:  # a late line: group a of step 0, and a third response of the picked group
        f.write(json.dumps({"step": 0, "prompt": "qa", "response": "late", "reward": 0.5, "uid": "a"}) + "\n")
        f.write(json.dumps({"step": 1, "prompt": "qc", "response": "third", "reward": 9, "uid": "c"}) + "\n")
    assert view.poll()
    assert table.selected["group"].tolist() == ["1:c"] and view.group_detail["group"] == "1:c"
    assert "third" in [c["text"] for c in view.group_detail["cards"]]
    assert len(table._data) == 7 and table._data["sample_id"].is_unique
    table.selected_ids = table._data.loc[table._data["group"] == "0:a", "sample_id"].tolist()
    assert view.group_detail["group"] == "0:a" and "late" in [c["text"] for c in view.group_detail["cards"]]


def test_a_value_a_part_refuses_is_refused_by_the_view(view):
    """selected_ids and color_by are linked to the table's and the strip's, which check them: the view had no
    check, so after the part's TraitError the view kept the refused value and disagreed with its parts."""
    view.selected_ids = view.run.samples.sample_id.head(2).tolist()
    before = list(view.selected_ids)
    too_many = list(range(6000))
    with pytest.raises(traitlets.TraitError, match="at most"):
        view.selected_ids = too_many
    assert view.selected_ids == view.table.selected_ids == before and len(view.selected) == 2
    with pytest.raises(traitlets.TraitError, match="color_by"):
        view.color_by = "nope"
    assert view.color_by == view.strip.color_by == "kl"
    view.selected_ids = [before[0], before[0], before[1]]  # the table's own cleaning (duplicates) applies here too
    assert view.selected_ids == view.table.selected_ids == before


def test_a_long_runs_curves_travel_in_buckets(tmp_path, cache_dir, monkeypatch):
    """The curves were one point per step: 20,000 steps made the chart's data 2.3 MB, sent again on every control
    change and poll. Past MAX_CURVE_STEPS they are buckets of steps with the statistics of the bucket's samples
    (those without a value left out, huge values kept finite), computed by the engine."""
    from rlviz_widgets import _chart_data

    write_log(tmp_path / "logs", steps=12, samples_per_step=6, tokens=4, ranks=2, seed=3)
    with open(tmp_path / "logs" / "extra.jsonl", "w") as f:  # no reward, then two huge ones in step 10
        f.write(json.dumps({"step": 4, "prompt": "p", "response": "r"}) + "\n")
        for r in (-1e308, -1e308):
            f.write(json.dumps({"step": 10, "prompt": "p", "response": "r", "reward": r}) + "\n")
    monkeypatch.setattr(_chart_data, "MAX_CURVE_STEPS", 5)
    view = rw.RunView(tmp_path / "logs", cache_dir=cache_dir, progress=False)
    data = call(view.chart, "data")[0]["result"]["datasets"]
    assert data["steps"]["step"] == [0, 3, 6, 9] and sum(data["steps"]["samples"]) == view.run.n_samples
    s = view.run.samples
    s["bucket"] = s.step // 3 * 3
    want = ((s.reward * 2.0**-600).groupby(s.bucket).mean() * 2.0**600).tolist()  # scaled: -1e308 twice overflows
    rewards = [v for v, series in zip(data["curves"]["mean"], data["curves"]["series"]) if series == "reward"]
    assert rewards == pytest.approx(want, rel=1e-6)
    b = view.run.sql(view.run.steps_sql(starts=[0, 3, 6, 9]))
    assert b.samples.tolist() == s.groupby("bucket").size().tolist()
    assert b.reward_mean.tolist() == pytest.approx(want, rel=1e-9)
    assert b.reward_std[:3].tolist() == pytest.approx(s.groupby("bucket").reward.std(ddof=0)[:3].tolist(), rel=1e-9)
    assert np.isfinite(b.reward_std[3]) and np.isfinite(b.reward_mean[3])
    assert b.length_p50.tolist() == s.groupby("bucket").n_tokens.median().tolist()
    assert view.run.sql(view.run.steps_sql(where="step > 4", starts=[0, 6])).samples.tolist() == [
        int(((s.step > 4) & (s.step < 6)).sum()), int((s.step >= 6).sum())]


def test_several_runs_share_the_charts_limits(tmp_path, cache_dir):
    """Each run of a set had its own 1,000 curve points and 200 heat-map step buckets: 30 runs of 200 steps made
    the chart's data 6.9 MB, sent again on every control change and poll."""
    runs = {}
    for k in range(12):
        log = tmp_path / f"run{k}"
        log.mkdir()
        (log / "r.jsonl").write_text("".join(json.dumps({"step": s, "prompt": "p", "response": "r",
                                                         "reward": (s * k) % 7, "ref_reward": 1.0}) + "\n"
                                             for s in range(150)))
        runs[f"run{k}"] = log
    view = rw.RunView(runs, cache_dir=cache_dir, progress=False)
    data = call(view.chart, "data")[0]["result"]["datasets"]
    per_run = pd.DataFrame(data["steps"]).groupby("run").size()
    assert len(per_run) == 12 and per_run.max() <= 100  # 150 steps each: in buckets
    hist = pd.DataFrame(data["hist"])
    assert hist.groupby("run").step.nunique().max() <= 20
    assert hist[hist.run == "run3"].groupby("column")["count"].sum().tolist() == [150, 150]  # reward, gap: all


@pytest.mark.parametrize("rng", [{"steps": (100, None)}, {"steps": (None, -7)}, {"reward": (float("inf"), None)},
                                 {"reward": (None, float("-inf"))}, {"reward": (1e300, None)}])
def test_a_range_keeping_nothing_draws_a_brush_over_no_data(view, rng):
    """Brush ends were clamped into the data: steps=(100, None) on steps 0..5 kept no row but drew the brush
    [5, 5], so the histograms showed step 5 as picked while the table showed nothing."""
    view.filter(**rng)
    assert view.table.row_count == 0
    wire_json(view.chart)
    (name, field), = [(k, "step" if k == "steps_brush" else "bin_start") for k, v in view.chart.selections.items() if v]
    lo, hi = view.chart.interval(name, field)
    col = view.run.samples["step" if field == "step" else "reward"]
    assert not col.between(lo, hi).any()


def test_an_observer_of_selected_gets_the_rows_just_picked(view):
    """selected was read from the table, whose selected_ids follow the view's through a link that runs after the
    view's own observer: an observer of ``selected`` got the previous pick, and ``view.selected`` kept it."""
    got = []
    view.observe(lambda c: got.append(c["new"].sample_id.tolist()), "selected")
    ids = view.run.samples.sample_id.tolist()
    view.selected_ids = ids[:2]
    view.selected_ids = ids[5:6]
    assert got == [ids[:2], ids[5:6]] and view.selected.sample_id.tolist() == ids[5:6]


def test_following_a_run_from_its_empty_first_file(tmp_path, cache_dir):
    """A view opened on a log file the trainer has just created (empty) kept what it saw first: the table's
    columns (all empty then, so hidden), no KL panel or toggle and no token strip, however long it followed."""
    log = tmp_path / "logs"
    log.mkdir()
    (log / "rank0.jsonl").write_text("")
    view = rw.RunView(log, cache_dir=cache_dir, progress=False)
    assert view.kl_metric.visible is False and view.controls["kl_shown"] is False and view.strip.metrics == []
    rng = random.Random(2)
    with open(log / "rank0.jsonl", "a") as f:
        for i in range(12):
            f.write(json.dumps({**make_record(rng, i // 4, i, 6, progress=0.5), "acc": 1.0}) + "\n")
    assert view.poll()
    fresh = rw.RunView(log, cache_dir=cache_dir, progress=False)
    assert view.table.visible_columns == fresh.table.visible_columns and "kl_mean" in view.table.visible_columns
    assert "acc" in view.table.visible_columns
    assert view.strip.metrics == fresh.strip.metrics and view.color_by == "kl"
    assert view.kl_metric.visible is True and view.controls["kl_shown"] is True
    assert json.dumps(view.chart.spec) == json.dumps(fresh.chart.spec)
    view.selected_ids = view.run.samples.sample_id.head(1).tolist()
    assert view.strip.sample_ids == view.selected_ids


def test_a_token_strip_refuses_a_metric_it_does_not_have(view):
    """An explicit color_by the run lacks was replaced without a word by the constructor (the setter refused
    it); only the default falls back now."""
    ids = view.run.samples.sample_id.head(1).tolist()
    with pytest.raises(traitlets.TraitError, match="color_by"):
        rw.TokenStrip(view.run, ids, color_by="KL")
    assert rw.TokenStrip(view.run, ids).color_by == "kl"
    assert rw.TokenStrip(view.run, ids, color_by="value").color_by == "value"


def test_after_a_poll_the_detail_and_the_sort_follow_a_rewritten_file(tmp_path, cache_dir):
    """A job restarted and rewrote its file: the detail pane kept the old record (only a new pick redrew it), and a
    table sorted by a field the new file lacks answered every page with "cannot sort by 'acc'"."""
    log = tmp_path / "logs"
    log.mkdir()
    f = log / "rollout_rank0.jsonl"
    f.write_text("".join(json.dumps({"step": s, "prompt": "p", "response": r, "reward": 1.0, "acc": 0.5}) + "\n"
                         for s, r in ((0, "OLD answer"), (1, "other"))))
    view = rw.RunView(log, cache_dir=cache_dir, progress=False)
    view.selected_ids = [int(view.run.samples.sample_id.iloc[0])]
    view.table.sort_by = "acc"
    assert "OLD answer" in json.dumps(view.detail)
    f.write_text(json.dumps({"step": 0, "prompt": "p", "response": "NEW answer", "reward": 5.0}) + "\n")
    assert view.poll()
    assert "NEW answer" in json.dumps(view.detail) and "OLD answer" not in json.dumps(view.detail)
    assert view.table.sort_by == "" and not view.table.error
    page = call(view.table, "rows", offset=0, limit=5)[0]
    assert page["ok"] and len(page["result"]["ids"]) == 1


def test_the_panes_stay_small_whatever_the_texts(tmp_path, cache_dir):
    """The picked sample's pane held its whole prompt, response, ref response and ground truth (a 3 MB response:
    3 MB of widget state per click), a group's name went in whole twice, and the same prompt's history had a row
    per step (1.5 MB at 20,000 steps, again after each poll)."""
    log = tmp_path / "logs"
    log.mkdir()
    qid = "q" * 5000
    with open(log / "r0.jsonl", "w") as f:
        f.write(json.dumps({"step": 0, "prompt": "P" * 60_000, "response": "R" * 80_000, "ref_response": "F" * 70_000,
                            "ground_truth": "G" * 9000, "reward": 1.0, "qid": qid}) + "\n")
        for step in range(1, 301):
            f.write(json.dumps({"step": step, "prompt": "again", "response": "r", "reward": step, "qid": qid}) + "\n")
    view = rw.RunView(log, cache_dir=cache_dir, progress=False, columns={"group_id": "qid"})
    big = int(view.run.samples.query("step == 0").sample_id.iloc[0])
    view.selected_ids = [big]
    pane = json.dumps(view.detail, ensure_ascii=False)
    assert len(pane) < 3 * 50_000 + 2000 + 5000
    assert pane.count("more characters]") == 4  # prompt, response, ref response, ground truth
    assert view.selected.response[0] == "R" * 80_000  # the frame has every character
    view.tabs.value = 1
    frame = view.group_table._data
    view.group_table.selected_ids = frame.loc[frame["step"] == 300, "sample_id"].tolist()
    group = json.dumps(view.group_detail)
    assert len(group) < 3000 and view.group_detail["group"].startswith("300:")
    assert view.group_panes["detail"] == view.group_detail  # what the front end is sent
    history = view.prompt_history
    assert len(history["rows"]) == 200 and history["skipped"] == 100 and history["skipped_at"] == 100
    steps = [r[0] for r in history["rows"]]
    assert 1 in steps and 300 in steps and 150 not in steps


def test_a_big_groups_detail_stays_small(tmp_path, cache_dir):
    """Picking a group put every member's whole response into the detail's HTML: a step of 2,000 samples without
    prompts (one group by the prompt fallback) made 4.6 MB of widget state. The cards are the best 16, clipped."""
    log = tmp_path / "logs"
    log.mkdir()
    (log / "r0.jsonl").write_text("".join(json.dumps({"step": 0, "prompt": "", "response": "x" * 3000,
                                                      "reward": i / 300}) + "\n" for i in range(300)))
    view = rw.RunView(log, cache_dir=cache_dir, progress=False)
    view.tabs.value = 1
    view.group_table.selected_ids = [0]
    detail = view.group_detail
    assert len(detail["cards"]) == 16 and detail["more"] == 284
    s = view.run.samples.sort_values("reward")
    best, worst = int(s.sample_id.iloc[-1]), int(s.sample_id.iloc[0])
    cards = [c["sample_id"] for c in detail["cards"]]
    assert len(json.dumps(detail)) < 50_000 and best in cards and worst not in cards


def test_reprs_say_what_is_shown(view, logs, cache_dir):
    """repr(RunView) was ipywidgets' dump of every child widget; SampleTable and TokenStrip were ``<... object at
    0x...>``; filter's signature showed ``steps=<object object at 0x...>``."""
    import inspect

    view.filter(steps=(1, 3), where="reward > 0")
    assert repr(view) == (f"RunView of {view.run.summary().splitlines()[0]}\n"
                          "  filters: steps=(1.0, 3.0), where='reward > 0'; 0 selected")
    assert repr(view.table).startswith(f"SampleTable: {view.table.row_count} rows, where 'step >= 1.0")
    assert repr(view.strip).startswith("TokenStrip: samples [") and "coloured by" in repr(view.strip)
    assert "steps=<unchanged>" in str(inspect.signature(view.filter))
    write_log(logs.parent / "other", steps=3, samples_per_step=4, tokens=4, ranks=1)
    both = rw.RunView({"a": view.run, "b": rw.open_run(logs.parent / "other", cache_dir=cache_dir, progress=False)})
    assert repr(both).startswith("RunView of [a] Run: 2 file(s), 120 samples over 6 steps (0..5); "
                                 "[b] Run: 1 file(s), 12 samples over 3 steps (0..2)\n")  # it named the first run only


def test_summary_of_a_metric_a_step_lacks(tmp_path, open_run):
    """A metric the first step has and the last lacks printed "<NA> (std <NA>)"."""
    write_lines(tmp_path / "logs" / "r.jsonl", [
        {"step": 0, "prompt": "p", "response": "r", "reward": 1.0, "response_tokens": ["a", "b", "c"]},
        {"step": 1, "prompt": "p", "response": "r", "reward": 2.0}])
    text = open_run(tmp_path / "logs").summary()
    assert "  length     mean         3 (std 0) at step 0 ->      none at step 1" in text.splitlines()
    assert "<NA>" not in text


def test_bins_are_checked_before_the_logs_are_read(logs, cache_dir):
    """RunView(bins=0) was made; its ValueError came only when the front end asked for the histograms."""
    for bad, error in ((0, ValueError), (-3, ValueError), (2.5, TypeError)):
        with pytest.raises(error, match="bins must be"):
            rw.RunView(logs, bins=bad, cache_dir=cache_dir, progress=False)
    assert not any(cache_dir.rglob("*.parquet"))


def test_a_followed_views_strip_says_when_its_sample_is_gone(tmp_path, cache_dir):
    """The followed file rewritten shorter took the picked sample: the detail emptied, but the view's token strip
    kept the id and drew nothing, without a word (a TokenStrip given that id says it is not in the run)."""
    def rec(step, i):
        return {"step": step, "prompt": f"p{i}", "response": f"r{i}", "reward": float(i), "response_tokens": ["a"],
                "logprobs": [-0.1], "ref_logprobs": [-0.2]}

    log = tmp_path / "logs" / "r0.jsonl"
    log.parent.mkdir()
    log.write_text("".join(json.dumps(rec(0, i)) + "\n" for i in range(5)))
    view = rw.RunView(log.parent, cache_dir=cache_dir, progress=False)
    gone = int(view.run.samples.sample_id.iloc[-1])
    view.selected_ids = [gone]
    assert view.strip.sample_ids == [gone] and not view.strip.error
    log.write_text(json.dumps(rec(1, 0)) + "\n")
    assert view.poll()
    assert view.strip.error.startswith(f"sample_ids: not samples of this run: {gone} ")


def test_a_malformed_brush_is_said_and_the_filters_stay(view):
    """A brush the front end sent malformed ([None, None], text, not a dict) raised out of the chart's observer
    with nothing in its error line, the chart's selection and the view's steps then disagreeing."""
    view.chart.selections = {"steps_brush": {"step": [1, 2]}}
    assert view.steps == (1.0, 2.0)
    for bad in ({"step": [None, None]}, {"step": ["a", 2]}, "garbage", {"step": [float("nan"), 3]}):
        view.chart.selections = {"steps_brush": bad}
        assert view.steps == (1.0, 2.0) and view.chart.error.startswith("brush: ")
    view.chart.selections = {"steps_brush": {"step": [2, 3]}}
    assert view.steps == (2.0, 3.0) and view.chart.error == ""


def test_a_picked_conversation_shows_its_turns_and_selected_turns(tmp_path, cache_dir):
    """Issue 29: the detail pane holds one block per turn (role, text, the tool called and its arguments, whether
    it was trained, the reasoning), then nothing more; view.selected_turns is run.turns of the picked samples;
    markup in roles, tool names and arguments stays the text it is."""
    from chat_formats import XSS, agent_turns, write_agent_chat

    write_agent_chat(tmp_path / "agent")
    view = rw.RunView(tmp_path / "agent", cache_dir=cache_dir, progress=False)
    sid = int(view.run.samples.sort_values("reward").sample_id.iloc[1])
    view.selected_ids = [sid]
    want = agent_turns(1)
    blocks = view.detail["blocks"]
    assert [b["role"] for b in blocks] == [t["role"] for t in want]
    assert [b["tool_name"] for b in blocks] == [t["tool_name"] for t in want]
    assert [b["text"] for b in blocks] == [t["text"] or "" for t in want]
    assert [b.get("trained") for b in blocks] == [t["trained"] for t in want]
    assert blocks[-1]["reasoning"] == "think first"
    assert json.loads(blocks[2]["tool_arguments"]) == {"q": f"{XSS}</script>", "k": 1}
    assert blocks[6]["role"] == f"critic{XSS}"
    turns = view.selected_turns
    assert turns.equals(view.run.turns([sid]))
    assert turns.role.tolist() == [t["role"] for t in want]
    view.selected_ids = []
    assert view.detail == {} and view.selected_turns.empty



def test_a_prime_rl_export_gets_the_mismatch_panels_and_a_live_rule(tmp_path, cache_dir):
    """Issue 32: a run with both log-probs and entropy draws the mismatch and entropy panels; the table sorts by
    the largest |log ratio|; changing view.mismatch_rule works every figure out again (the table, the frames, the
    strip's masked tokens) and a bad rule is refused with the run's message."""
    from prime_formats import ChatMLTokenizer, write_prime

    write_prime(tmp_path / "prime", steps=(1, 2, 3), prompts=3, n=4, seed=2)
    view = rw.RunView(tmp_path / "prime", tokenizer=ChatMLTokenizer(), cache_dir=cache_dir, progress=False,
                      mismatch_rule="token_mask")
    assert view.mismatch_rule == view.run.mismatch_rule and view.mismatch_rule.kind == "token_mask"
    titles = [c.get("title") for c in view.chart.spec["concat"]]
    assert {"mismatch KL (k3): mean and p95 over sequences", "mean token entropy (trained tokens)"} <= set(titles)
    sent = view._datasets()["steps"]  # what the chart is sent: the panels' columns beside the others
    assert {"mismatch_kl_mean", "mismatch_kl_mean_p95", "masked_sequences_fraction", "entropy_mean"} <= set(sent)
    assert {"mismatch_log_ratio_abs_max", "masked_fraction", "entropy_mean"} <= set(view.table.visible_columns)
    view.table.sort_by, view.table.sort_desc = "mismatch_log_ratio_abs_max", True
    content, _ = call(view.table, "rows", offset=0, limit=5)
    col = [c["name"] for c in view.table.columns].index("mismatch_log_ratio_abs_max")
    top = [r[col] for r in content["result"]["rows"]]
    assert top == sorted(top, reverse=True)
    assert top[0] == pytest.approx(view.run.samples.mismatch_log_ratio_abs_max.max(), rel=1e-6)

    before = view.run.samples.set_index("sample_id").rule_masked_tokens
    view.mismatch_rule = rw.MismatchRule(kind="token_mask", high=1.0001, low=0.9999)  # masks nearly every token
    after = view.run.samples.set_index("sample_id").rule_masked_tokens
    assert (after >= before).all() and after.sum() > before.sum()
    assert view.mismatch_rule.high == 1.0001
    # the strip marks the masked tokens: as the log masked them where it says (prime-rl's is_masked)
    sid = int(view.run.samples.sort_values("masked_tokens").sample_id.iloc[-1])
    view.selected_ids = [sid]
    content, buffers = call(view.strip, "strips")
    (sample,) = content["result"]["samples"]
    masked = np.frombuffer(bytes(buffers[sample["flags"]["masked"]]), dtype=np.uint8)
    assert masked.tolist() == view.selected_tokens.masked.astype(int).tolist() and masked.sum() > 0
    with pytest.raises(traitlets.TraitError):
        view.mismatch_rule = "no such rule"
    assert view.mismatch_rule.high == 1.0001  # unchanged


def test_a_prime_rl_step_still_being_written_is_said_in_the_header(tmp_path, cache_dir):
    """A step folder without its STABLE marker is being written: its samples so far are shown, the header says
    which step, and its cut last line is no problem."""
    from prime_formats import ChatMLTokenizer, write_prime

    write_prime(tmp_path / "prime", steps=(1, 2, 3), prompts=2, n=2, seed=1, unfinished_step=3)
    view = rw.RunView(tmp_path / "prime", tokenizer=ChatMLTokenizer(), cache_dir=cache_dir, progress=False)
    assert view.run.steps_in_progress == [3] and 3 in set(view.run.samples.step)
    assert "still being written: step 3" in view.header
    assert view.run.problems[view.run.problems.kind != "no_tokenizer"].empty
