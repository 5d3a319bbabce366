"""GRPO groups: from the prompt within a step, spread, zero-spread flag, the prompt across steps, the view's tab."""

from __future__ import annotations

import json

import rlviz_widgets as rw
from rlviz_widgets import groups
from rlviz_widgets.synth import write_log


def test_groups_from_prompts_within_a_step(tmp_path, open_run):
    write_log(tmp_path / "grpo", steps=3, samples_per_step=16, tokens=8, ranks=2, group_size=4)
    # one group where every response got the same reward: no learning signal
    f = tmp_path / "grpo" / "rollout_rank0.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    target = recs[0]["prompt"]
    for r in recs:
        if r["step"] == 0 and r["prompt"] == target:
            r["reward"] = 1.0
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    g2 = tmp_path / "grpo" / "rollout_rank1.jsonl"
    recs2 = [json.loads(x) for x in g2.read_text().splitlines()]
    for r in recs2:
        if r["step"] == 0 and r["prompt"] == target:
            r["reward"] = 1.0
    g2.write_text("".join(json.dumps(r) + "\n" for r in recs2))
    run = open_run(tmp_path / "grpo")
    g = groups.groups(run)
    assert len(g) == 12 and set(g["size"]) == {4}
    s = run.samples
    for _, row in g.iterrows():
        members = s[s.sample_id.isin(row["sample_ids"])]
        assert members.step.nunique() == 1 and members.prompt.nunique() == 1
        assert abs(row["reward_std"] - members.reward.std(ddof=0)) < 1e-9
    flagged = g[g.zero_spread]
    assert len(flagged) == 1 and flagged.iloc[0]["step"] == 0 and flagged.iloc[0]["prompt"] == target
    members = groups.group_samples(run, flagged.iloc[0]["group"])
    assert len(members) == 4 and set(members.reward) == {1.0}
    hist = groups.prompt_history(run, target)
    assert hist.step.tolist() == [0, 1, 2] and hist.responses.tolist() == [4, 4, 4]


def test_group_tab_in_run_view(tmp_path, cache_dir):
    write_log(tmp_path / "grpo", steps=3, samples_per_step=16, tokens=8, ranks=2, group_size=8)
    view = rw.RunView(tmp_path / "grpo", cache_dir=cache_dir, progress=False)
    assert view.group_table is None  # built when the tab is opened
    view.tabs.selected_index = 1
    assert view.group_table.row_count == 6 and view.group_table.sort_by == "reward_std"
    assert "6</b> groups of 8" in view.group_summary.value
    view.group_table.selected_ids = [2]
    row = view.groups.iloc[2]
    assert sorted(view.group_strip.sample_ids) == sorted(row["sample_ids"])
    assert view.group_detail.value.count("rlv-group-card") == 8
    assert "The same prompt across steps" in view.prompt_history.value


def test_single_response_logs_say_there_are_no_groups(tmp_path, cache_dir):
    write_log(tmp_path / "ppo", steps=2, samples_per_step=4, tokens=8, ranks=1)
    view = rw.RunView(tmp_path / "ppo", cache_dir=cache_dir, progress=False)
    view.tabs.selected_index = 1
    assert "no GRPO groups" in view.group_summary.value
