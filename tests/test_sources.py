"""What ``open_run`` accepts as a source: folder (any depth), file, glob, list; merge of rank files; errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import read_records, write_lines

from rlviz_widgets import NoLogsError
from rlviz_widgets.sources import resolve
from rlviz_widgets.synth import write_log


@pytest.fixture
def tree(tmp_path) -> dict[str, list[Path]]:
    """root/run_a (2 ranks), root/deep/er/run_b (1 rank), plus files that are not logs."""
    root = tmp_path / "root"
    a = write_log(root / "run_a", steps=2, samples_per_step=4, tokens=6, ranks=2, seed=1)
    b = write_log(root / "deep" / "er" / "run_b", steps=3, samples_per_step=2, tokens=6, ranks=1, seed=2)
    (root / "notes.txt").write_text("not a log")
    (root / "run_a" / "metrics.json").write_text("{}")
    (root / "run_a" / "old.jsonl.bak").write_text("{}\n")
    return {"root": [root], "a": a, "b": b}


def test_folder_takes_every_jsonl_at_any_depth(tree):
    files = resolve(tree["root"][0])
    assert files == sorted(p.resolve() for p in tree["a"] + tree["b"])
    assert all(p.is_absolute() and p.suffix == ".jsonl" for p in files)


def test_file_glob_and_list(tree):
    a0, a1 = (p.resolve() for p in tree["a"])
    (b0,) = (p.resolve() for p in tree["b"])
    assert resolve(tree["a"][0]) == [a0]
    assert resolve(str(tree["root"][0] / "run_a" / "rollout_rank*.jsonl")) == [a0, a1]
    assert resolve(str(tree["root"][0] / "**" / "*.jsonl")) == sorted([a0, a1, b0])
    # a list is the union of its items, without duplicates, sorted
    assert resolve([tree["b"][0], tree["root"][0] / "run_a", tree["a"][1]]) == sorted([a0, a1, b0])
    assert resolve((str(tree["a"][1]), str(tree["a"][1]))) == [a1]


def test_missing_path_raises_naming_it(tmp_path):
    missing = tmp_path / "no_such_run"
    with pytest.raises(NoLogsError, match="no_such_run"):
        resolve(missing)
    assert issubclass(NoLogsError, FileNotFoundError)


def test_a_failed_open_exits_cleanly(tmp_path):
    """The database is made in a thread while the open starts; an open that fails at once must not leave that
    thread inside DuckDB at exit, which aborted the interpreter (exit code 134) after the traceback."""
    import subprocess
    import sys

    missing, cache = str(tmp_path / "missing"), str(tmp_path / "c")
    code = (f"import rlviz_widgets as rw\ntry:\n    rw.open_run({missing!r}, cache_dir={cache!r}, progress=False)\n"
            "except rw.NoLogsError:\n    print('raised')\n")
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert (out.returncode, out.stdout.strip()) == (0, "raised"), out.stderr[-500:]
        assert "terminate called" not in out.stderr


def test_folder_without_logs_raises_naming_it(tmp_path, open_run):
    empty = tmp_path / "empty_run"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "readme.txt").write_text("hi")
    with pytest.raises(NoLogsError, match="empty_run"):
        open_run(empty)
    with pytest.raises(NoLogsError, match="nothing_here"):
        open_run(str(tmp_path / "nothing_here*.jsonl"))
    with pytest.raises(NoLogsError):
        open_run([])
    with pytest.raises(NoLogsError, match="gone.jsonl"):
        open_run([empty / "sub" / "readme.txt", tmp_path / "gone.jsonl"])


def test_open_run_on_each_kind_of_source(tree, open_run):
    recs_a = read_records(tree["a"])
    recs_b = read_records(tree["b"])
    assert len(open_run(tree["root"][0]).samples) == len(recs_a) + len(recs_b)
    assert len(open_run(tree["a"][0]).samples) == len(read_records(tree["a"][:1]))
    assert len(open_run(str(tree["root"][0] / "*" / "rollout_rank1.jsonl")).samples) == len(read_records(tree["a"][1:]))
    run = open_run([tree["a"][1], tree["b"][0]])
    assert sorted(run.samples["file"].unique()) == sorted(str(p.resolve()) for p in [tree["a"][1], tree["b"][0]])


def test_rank_files_are_merged_by_step(synth_logs, open_run):
    folder, files = synth_logs(steps=3, samples_per_step=10, ranks=3, step_gap=50)
    run = open_run(folder)
    s = run.samples
    recs = read_records(files)
    assert len(s) == len(recs) == 30
    assert run.step_values == [0, 50, 100]
    # every step holds the samples of every rank file
    per_step = s.groupby("step")["file"].nunique()
    assert per_step.tolist() == [3, 3, 3]
    assert s.groupby("step").size().tolist() == [10, 10, 10]
    # ordered by step, then line, then file (the rank files interleaved)
    assert s["step"].is_monotonic_increasing
    order = [str(p.resolve()) for p in files]
    keys = list(zip(s["step"], s["line"], s["file"].map(order.index)))
    assert keys == sorted(keys)
    # each row is the record at its (file, line)
    by_loc = {(r["_file"], r["_line"]): r for r in recs}
    for row in s.itertuples():
        rec = by_loc[(row.file, row.line)]
        assert (row.step, row.reward, row.ref_reward) == (rec["step"], rec["reward"], rec["ref_reward"])
    assert run.steps["samples"].tolist() == [10, 10, 10]


def test_sample_ids_unique_and_stable_across_reopen(synth_logs, open_run, tmp_path):
    folder, files = synth_logs(ranks=2)
    first = open_run(folder).samples.set_index("sample_id")[["file", "line", "reward"]]
    assert first.index.is_unique
    again = open_run(folder).samples.set_index("sample_id")[["file", "line", "reward"]]  # from the cache
    fresh = open_run(folder, cache_dir=tmp_path / "other_cache").samples.set_index("sample_id")[
        ["file", "line", "reward"]]
    assert first.equals(again)
    assert first.equals(fresh)
    # the same id, whichever way the source is named
    listed = open_run([str(p) for p in reversed(files)]).samples.set_index("sample_id")[["file", "line", "reward"]]
    assert first.equals(listed)


def test_sample_ids_kept_when_a_new_file_appears_during_refresh(synth_logs, open_run):
    folder, files = synth_logs(ranks=1)
    run = open_run(folder)
    before = run.samples.set_index("sample_id")[["file", "line"]]
    # a file that sorts before the first one appears while the run is open
    write_lines(folder / "a_early.jsonl", [json.loads(files[0].read_text().splitlines()[0])])
    assert run.refresh() is True
    after = run.samples.set_index("sample_id")[["file", "line"]]
    assert len(after) == len(before) + 1
    assert after.loc[before.index].equals(before)


def test_sample_ids_kept_across_reopen_when_a_new_file_appears(synth_logs, open_run):
    folder, files = synth_logs(ranks=1)
    before = open_run(folder).samples.set_index("sample_id")[["file", "line"]]
    write_lines(folder / "a_early.jsonl", [json.loads(files[0].read_text().splitlines()[0])])
    after = open_run(folder).samples.set_index("sample_id")[["file", "line"]]
    assert set(before.index) <= set(after.index)
    assert after.loc[before.index].equals(before)


def test_relative_paths_and_user_home(tree, open_run, monkeypatch):
    monkeypatch.chdir(tree["root"][0])
    assert resolve("run_a") == sorted(p.resolve() for p in tree["a"])
    monkeypatch.setenv("HOME", str(tree["root"][0]))
    assert resolve(os.path.join("~", "run_a", "rollout_rank0.jsonl")) == [tree["a"][0].resolve()]
