"""The RunView chart datasets as functions of a run, without a widget: curves, step statistics in buckets,
histograms, the limits several runs share, brush extents; and the groups tab's helpers."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import rlviz_widgets as rw
from rlviz_widgets import _chart_data as cd
from rlviz_widgets import _groups as groups
from rlviz_widgets._synth import write_log


@pytest.fixture
def run(tmp_path, open_run):
    write_log(tmp_path / "logs", steps=6, samples_per_step=10, tokens=8, ranks=2, seed=2)
    return open_run(tmp_path / "logs")


def _plain_log(folder, steps: int, k: int = 1, ref: bool = True):
    folder.mkdir()
    (folder / "r.jsonl").write_text("".join(
        json.dumps({"step": s, "prompt": f"p{s % 3}", "response": "r", "reward": (s * k) % 7,
                    **({"ref_reward": 1.0} if ref else {})}) + "\n" for s in range(steps)))
    return folder


def test_limits_are_shared_by_runs_with_a_floor():
    assert cd.limits(1) == (cd.MAX_CURVE_STEPS, cd.MAX_HIST_STEPS)
    assert cd.limits(4) == (cd.MAX_CURVE_STEPS // 4, cd.MAX_HIST_STEPS // 4)
    assert cd.limits(1000) == (cd.MIN_RUN_CURVE_STEPS, cd.MIN_RUN_HIST_STEPS)


def test_datasets_of_one_run(run):
    assert cd.run_names(run) == () and cd.capabilities(run) == (True, True)
    data = cd.run_datasets(run, bins=10, band=1.0, zero_shift=False, has_ref=False)
    assert set(data) == {"curves", "steps", "hist"}
    steps = run.steps
    curves = data["curves"]
    assert set(curves.series) == {"reward", "ref_reward"} and set(curves.run) == {""}
    curves = curves[curves.series == "reward"]
    assert curves["mean"].tolist() == pytest.approx(steps.reward_mean.tolist())
    assert (curves["hi"] - curves["mean"]).tolist() == pytest.approx(steps.reward_std.fillna(0).tolist())
    assert data["steps"].samples.tolist() == steps.samples.tolist()
    hist = data["hist"]
    assert set(hist.column) == {"reward"} and hist["count"].sum() == run.samples.reward.notna().sum()
    assert hist.bin.max() < 10
    wide = cd.run_datasets(run, bins=10, band=2.0, zero_shift=True, has_ref=False)["curves"]
    wide = wide[wide.series == "reward"]
    assert wide["mean"].iloc[0] == 0.0
    assert (wide["hi"] - wide["mean"]).tolist() == pytest.approx((2 * steps.reward_std.fillna(0)).tolist())


def test_a_long_run_travels_in_buckets(run):
    per_run = cd.step_stats(run, points=2)
    (name, buckets), = per_run.items()
    assert name == "" and buckets.step.tolist() == [0, 3] and buckets.samples.sum() == run.n_samples
    assert cd.step_stats(run, points=100)[""].step.tolist() == run.step_values


def test_a_set_of_runs_overlays_each_runs_data(tmp_path, cache_dir):
    runs = {f"r{k}": _plain_log(tmp_path / f"r{k}", 30, k) for k in range(3)}
    rs = rw.RunSet.open(runs, cache_dir=cache_dir, progress=False)
    assert cd.run_names(rs) == ("r0", "r1", "r2") and cd.capabilities(rs) == (False, True)
    data = cd.run_datasets(rs, bins=5, band=1.0, zero_shift=False, has_ref=True)
    assert sorted(set(data["curves"].run)) == ["r0", "r1", "r2"]
    assert set(data["curves"].series) == {"reward", "ref_reward"}
    hist = data["hist"]
    assert set(hist.column) == {"reward", "reward_gap"}  # a set: each run's rewards, then its gaps
    assert hist[hist.run == "r1"].groupby("column")["count"].sum().tolist() == [30, 30]


def test_one_run_overlays_policy_and_reference(tmp_path, open_run):
    run = open_run(_plain_log(tmp_path / "a", 8))
    assert cd.run_names(run) == () and cd.capabilities(run) == (False, True)
    hist = cd.reward_histograms(run, bins=4, max_steps=200, has_ref=True)
    assert set(hist.column) == {"reward", "ref_reward", "reward_gap"}
    run2 = open_run(_plain_log(tmp_path / "b", 8, ref=False))
    assert cd.capabilities(run2) == (False, False)


def test_brush_extent_fills_open_ends_from_the_data(run):
    s = run.samples
    assert cd.brush_extent(run, None, "step") is None
    assert cd.brush_extent(run, (2.0, None), "step") == (2.0, 5.0)
    assert cd.brush_extent(run, (None, 3.0), "step") == (0.0, 3.0)
    assert cd.brush_extent(run, (100.0, None), "step") == (100.0, 100.0)  # past the data: over no step
    lo, hi = cd.brush_extent(run, (math.inf, None), "reward")
    assert lo == hi > s.reward.max()
    assert cd.brush_extent(run, (None, 0.0), "reward") == (pytest.approx(s.reward.min()), 0.0)


def test_curves_frame_of_no_rewards_is_typed():
    empty = cd.curves_frame(pd.DataFrame({"step": [0, 1], "samples": [1, 1]}))
    assert len(empty) == 0 and empty.dtypes["mean"] == "float64" and empty.dtypes["step"] == "int64"


def test_group_history_and_spread_counts(tmp_path, open_run):
    write_log(tmp_path / "grpo", steps=3, samples_per_step=8, tokens=4, ranks=1, group_size=4)
    run = open_run(tmp_path / "grpo")
    g = groups.groups(run)
    n, smallest, largest, zero = groups.spread_counts(g)
    assert (n, smallest, largest) == (len(g), 4, 4) and zero == int(g.zero_spread.sum())
    assert groups.spread_counts(g[g["size"] > 4]) == (0, 0, 0, 0)
    row = g.iloc[0]
    hist = groups.group_history(run, row)
    assert hist.equals(groups.prompt_history(run, row["prompt"]))
    no_prompt = row.copy()
    no_prompt["prompt"] = None
    assert groups.group_history(run, no_prompt).empty
