"""GRPO groups: from the prompt within a step, spread, zero-spread flag, the prompt across steps, the view's tab."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlviz_widgets as rw
from rlviz_widgets import _groups as groups
from rlviz_widgets._synth import write_log


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
    assert view.group_summary.startswith("6 groups of 8 responses")  # not "8–8 responses"
    view.group_table.selected_ids = [2]
    row = view.groups.iloc[2]
    assert sorted(view.group_strip.sample_ids) == sorted(row["sample_ids"])
    assert len(view.group_detail["cards"]) == 8
    assert [r[0] for r in view.prompt_history["rows"]] == [0, 1, 2]  # the same prompt across steps


def test_group_sizes_in_words():
    """The groups tab said "8–8 responses" of groups all of 8."""
    assert groups.sizes_text(8, 8) == "8 responses" and groups.sizes_text(2, 8) == "2–8 responses"


def test_single_response_logs_say_there_are_no_groups(tmp_path, cache_dir):
    write_log(tmp_path / "ppo", steps=2, samples_per_step=4, tokens=8, ranks=1)
    view = rw.RunView(tmp_path / "ppo", cache_dir=cache_dir, progress=False)
    view.tabs.selected_index = 1
    assert "no GRPO groups" in view.group_summary


# -- a group is one step's: ids the log repeats at every step name a new group at each step ---------------------
def _write_jsonl(path, recs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_group_index_repeating_across_steps_gives_one_group_per_step(tmp_path, open_run, cache_dir):
    rewards = {(0, 0): [1.0, 1.0], (0, 1): [0.0, 0.5, 1.0], (1, 0): [0.25, 0.25, 0.25], (1, 1): [0.0, 1.0]}
    recs = [{"step": step, "prompt": f"prompt {gi}", "response": f"s{step} g{gi} r{k}", "reward": r, "group_index": gi}
            for (step, gi), rs in rewards.items() for k, r in enumerate(rs)]
    _write_jsonl(tmp_path / "logs" / "rollouts.jsonl", recs)
    run = open_run(tmp_path / "logs")
    g = groups.groups(run)
    assert g["step"].tolist() == [0, 0, 1, 1] and g["size"].tolist() == [2, 3, 3, 2]
    assert g["group"].tolist() == ["0:0", "0:1", "1:0", "1:1"]  # one name per group, the step first
    assert g["reward_mean"].tolist() == pytest.approx([1.0, 0.5, 0.25, 0.5])
    assert g["reward_std"].tolist() == pytest.approx([0.0, (1 / 6) ** 0.5, 0.0, 0.5], abs=1e-9)
    assert g["reward_range"].tolist() == pytest.approx([0.0, 1.0, 0.0, 1.0])
    assert g["zero_spread"].tolist() == [True, False, True, False]
    assert g["prompt"].tolist() == ["prompt 0", "prompt 1", "prompt 0", "prompt 1"]
    s = run.samples
    for _, row in g.iterrows():  # the members: that step's, that group index's
        members = groups.group_samples(run, row["group"])
        assert sorted(members["sample_id"]) == sorted(row["sample_ids"])
        assert set(members["step"]) == set(s[s.sample_id.isin(row["sample_ids"])].step) == {row["step"]}
        step, gi = (int(x) for x in row["group"].split(":"))
        assert sorted(members["reward"]) == sorted(rewards[step, gi])
    with pytest.raises(ValueError, match="groups"):
        groups.group_samples(run, "0")  # the log's bare id names no single group
    # the view's tab: 4 groups, and a click shows that step's responses only
    view = rw.RunView(tmp_path / "logs", cache_dir=cache_dir, progress=False)
    view.tabs.selected_index = 1
    assert view.group_table.row_count == 4 and view.group_summary.startswith("4 groups of 2–3")
    view.group_table.selected_ids = [2]
    assert len(view.group_detail["cards"]) == 3 and view.group_detail["group"] == "1:0"


def test_prompt_idx_names_the_group_in_any_log(tmp_path, open_run):
    """The README names ``prompt_idx`` among the group ids, but only open-instruct's reader read it: an RL Logging
    Board log with ``prompt_idx`` was grouped by prompt (four samples of one prompt, two prompt_idx, one group).
    It names the group now, and stays a column of its own too."""
    recs = [{"step": 0, "prompt": "same prompt", "response": f"r{k}", "reward": float(k), "prompt_idx": k // 2}
            for k in range(4)]
    _write_jsonl(tmp_path / "logs" / "rollouts.jsonl", recs)
    run = open_run(tmp_path / "logs")
    g = groups.groups(run)
    assert g["group"].tolist() == ["0:0", "0:1"] and g["size"].tolist() == [2, 2]
    assert run.samples.sort_values("line")["prompt_idx"].tolist() == [0, 0, 1, 1]
    assert groups.groups(run, where="reward > 2 OR reward < 1")["size"].tolist() == [1, 1]
    with pytest.raises(ValueError, match="SQL condition"):  # checked as every where= is
        groups.groups(run, where="true; SELECT 1")


def test_mapped_group_id_repeating_across_steps(tmp_path, open_run):
    recs = [{"iteration": it, "question": "what is 17?", "completion": f"it{it} #{k}", "score": sc, "qid": "q17"}
            for it, scores in ((1, [1.0, 1.0]), (2, [0.0, 1.0])) for k, sc in enumerate(scores)]
    recs.append({"iteration": 2, "question": "what is 18?", "completion": "x", "score": 0.5, "qid": "q18"})
    _write_jsonl(tmp_path / "dump" / "dump.jsonl", recs)
    run = open_run(tmp_path / "dump", columns={"prompt": "question", "response": "completion", "reward": "score",
                                                "step": "iteration", "group_id": "qid"})
    g = groups.groups(run)
    assert g["step"].tolist() == [1, 2, 2] and g["size"].tolist() == [2, 2, 1]
    assert g["group"].tolist() == ["1:q17", "2:q17", "2:q18"]
    assert g["reward_mean"].tolist() == pytest.approx([1.0, 0.5, 0.5])
    assert g["reward_std"].tolist() == pytest.approx([0.0, 0.5, 0.0], abs=1e-9)
    assert g["zero_spread"].tolist() == [True, False, False]
    assert groups.group_samples(run, "1:q17")["response"].tolist() == ["it1 #0", "it1 #1"]
    assert groups.group_samples(run, "2:q17")["response"].tolist() == ["it2 #1", "it2 #0"]  # best reward first
    assert groups.group_samples(run, "2:q18")["response"].tolist() == ["x"]


def test_step_prefixed_group_ids_are_kept(tmp_path, open_run):
    """Ids already naming their step (open-instruct "step:prompt_idx", TRL, NeMo-RL) are the group's name as is."""
    recs = [{"step": step, "prompt": "p", "response": f"r{k}", "reward": float(k), "uid": f"{step}:{gi}"}
            for step in (3, 4) for gi in (0, 1) for k in range(2)]
    _write_jsonl(tmp_path / "logs" / "rollouts.jsonl", recs)
    run = open_run(tmp_path / "logs")
    g = groups.groups(run)
    assert g["group"].tolist() == ["3:0", "3:1", "4:0", "4:1"] and g["size"].tolist() == [2, 2, 2, 2]
    assert groups.group_samples(run, "4:1")["response"].tolist() == ["r1", "r0"]


def test_a_set_of_runs_on_the_same_prompts_keeps_each_runs_groups(tmp_path, cache_dir):
    """Two runs trained on the same prompts share group ids (group_index 0 at each step): the groups of a view of
    both mixed them (8 responses a group, the baseline's zero spread hidden by the other run's rewards)."""
    for name, rewards in (("baseline", [1.0] * 4), ("kl", [0.0, 1.0, 2.0, 3.0])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "r0.jsonl").write_text("".join(
            json.dumps({"step": s, "prompt": "q", "response": f"a{k}", "reward": r, "group_index": 0}) + "\n"
            for s in (0, 1) for k, r in enumerate(rewards)))
    view = rw.RunView({"baseline": tmp_path / "baseline", "kl": tmp_path / "kl"}, cache_dir=cache_dir)
    g = view.groups
    assert sorted(g["group"]) == ["baseline/0:0", "baseline/1:0", "kl/0:0", "kl/1:0"]
    assert g["size"].tolist() == [4] * 4 and g.set_index("group")["zero_spread"].to_dict() == {
        "baseline/0:0": True, "baseline/1:0": True, "kl/0:0": False, "kl/1:0": False}
    members = groups.group_samples(view.run, "kl/1:0")
    assert members["run"].unique().tolist() == ["kl"] and members["reward"].tolist() == [3.0, 2.0, 1.0, 0.0]
    view.tabs.selected_index = 1
    table = view.group_table
    assert table.visible_columns[0] == "run"
    table.selected_ids = table._data.loc[table._data["group"] == "baseline/1:0", "sample_id"].tolist()
    assert view.group_detail["group"] == "baseline/1:0"
    # step 0 counts this run's 4 responses, not the 8 of both runs
    assert [r[:2] for r in view.prompt_history["rows"]] == [[0, 4], [1, 4]]


def test_the_demo_grpo_run_has_groups_to_flag(tmp_path, open_run):
    """The quickstart says groups whose rewards are all equal are flagged; the demo run had none to show."""
    from rlviz_widgets.demo import demo_grpo_log

    run = open_run(demo_grpo_log(tmp_path / "grpo"))
    g = groups.groups(run)
    assert len(g) == 30 * 16 and g["zero_spread"].sum() == 30 * 3  # groups 4, 9 and 14 of each step
    assert set(g.loc[g.zero_spread, "reward_mean"]) == {1.0}
    s = run.samples
    assert (s.loc[s.reward == 1.0, "acc"] == 1.0).all()


def test_the_groups_module_is_public(tmp_path):
    """``rw.groups.groups`` and ``rw.groups.group_samples`` are the documented way to the group frames."""
    poem = Path(rw.__file__).parent / "data" / "rlb_eval_poem_task.jsonl"
    run = rw.open_run(poem, cache_dir=tmp_path / "cache", progress=False)
    frame = rw.groups.groups(run)
    assert len(frame) > 0 and {"group", "size", "sample_ids"} <= set(frame.columns)
    first = rw.groups.group_samples(run, frame.group.iloc[0])
    assert first.sample_id.tolist() == list(frame.sample_ids.iloc[0]) and len(first) == frame["size"].iloc[0]
