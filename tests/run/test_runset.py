"""Several runs at once: one set of frames with a run column, overlaid in RunView."""

from __future__ import annotations

import pytest

import rlviz_widgets as rw
from rlviz_widgets._synth import write_log
from rlviz_widgets.run.runset import RunSet, SetViews


@pytest.fixture
def two(tmp_path):
    write_log(tmp_path / "a", steps=4, samples_per_step=10, tokens=12, ranks=2, seed=1)
    write_log(tmp_path / "b", steps=6, samples_per_step=10, tokens=12, ranks=1, seed=2)
    return {"baseline": tmp_path / "a", "kl0.05": tmp_path / "b"}


def test_frames_gain_a_run_column(two, open_run, cache_dir):
    rs = RunSet({name: open_run(p) for name, p in two.items()})
    s = rs.samples
    assert s.groupby("run").size().to_dict() == {"baseline": 40, "kl0.05": 60}
    assert s.sample_id.is_unique and rs.step_values == [0, 1, 2, 3, 4, 5]
    a = open_run(two["baseline"]).samples
    pd_a = s[s.run == "baseline"].drop(columns="run").reset_index(drop=True)
    assert pd_a.sample_id.tolist() == a.sample_id.tolist() and pd_a.reward.tolist() == a.reward.tolist()
    ids = [int(s.sample_id.iloc[0]), int(s.sample_id.iloc[-1])]
    assert rs.rows(ids).run.tolist() == [s.run.iloc[0], s.run.iloc[-1]]
    assert set(rs.tokens(ids).sample_id) == set(ids)
    h = rs.histograms(["reward"], 8, by=("run",))
    assert h.groupby("run")["count"].sum().to_dict() == {"baseline": 40, "kl0.05": 60}
    assert (h.groupby("bin").bin_start.nunique() == 1).all()  # one edge set for both runs
    assert set(rs.run_steps.run) == {"baseline", "kl0.05"}


def test_run_view_overlays_runs(two, cache_dir):
    view = rw.RunView(two, cache_dir=cache_dir, progress=False)
    assert view.table.visible_columns[:2] == ["id", "run"]
    data = view._datasets()
    assert set(data["curves"].run) == {"baseline", "kl0.05"} and set(data["hist"].run) == {"baseline", "kl0.05"}
    params = {p["name"] for p in view.chart.spec["params"]}
    assert {"steps_brush", "reward_brush", "heat_run"} <= params
    view.filter(steps=(4, 5))  # only the longer run has those steps
    assert set(view.filtered.run) == {"kl0.05"} and len(view.filtered) == 20
    view.table.where = ""
    view.filter(where="run = 'baseline'", steps=None)
    assert set(view.filtered.run) == {"baseline"}


def test_runs_must_share_a_cache(two, tmp_path):
    a = rw.open_run(two["baseline"], cache_dir=tmp_path / "c1", progress=False)
    b = rw.open_run(two["kl0.05"], cache_dir=tmp_path / "c2", progress=False)
    with pytest.raises(ValueError, match="same cache_dir"):
        RunSet({"a": a, "b": b})


def test_a_set_follows_a_run_refreshed_on_its_own(tmp_path, open_run, monkeypatch):
    """A run of a set refreshed alone (a view following it): the set's views still named the run's old token
    files and parts, so its queries over tokens failed, and over samples too once the old parts were deleted."""
    import json

    from rlviz_widgets._store import cache as cachemod

    write_log(tmp_path / "a", steps=2, samples_per_step=3, tokens=5, ranks=1, seed=1)
    write_log(tmp_path / "b", steps=2, samples_per_step=3, tokens=5, ranks=1, seed=2)
    a, b = open_run(tmp_path / "a"), open_run(tmp_path / "b")
    rs = RunSet({"a": a, "b": b})
    assert rs.sql("SELECT count(*) AS n FROM samples")["n"].tolist() == [12]
    log = next((tmp_path / "a").glob("*.jsonl"))
    first = json.loads(log.read_text().splitlines()[0])
    monkeypatch.setattr(cachemod, "RETIRED_GRACE_S", 0.0)
    for step in (5, 6):
        with open(log, "a") as f:
            f.write(json.dumps(dict(first, step=step)) + "\n")
        assert a.refresh()
        n = rs.sql("SELECT count(*) AS n FROM samples")["n"].iloc[0]
        assert n == 12 + step - 4 and len(rs.samples) == n
        assert rs.sql("SELECT count(DISTINCT sample_id) AS n FROM tokens")["n"].iloc[0] == n
        assert rs.step_values[-1] == step
    assert rs.refresh() is False  # nothing new since: the set had already followed


def test_a_set_answers_every_question_from_its_runs_as_they_are_now(tmp_path, open_run):
    """The set followed a run refreshed alone only when asked for a cursor: ``rows`` and ``tokens`` picked parts
    from what the set knew before (a new sample's id matched none: empty results), ``steps`` and the token
    colour domains came from caches. And ``rows(ids, columns)`` of one run's samples failed on a column only
    the other run has (a custom field, group_id): the table asks exactly that for a page of one run."""
    import json

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base = {"prompt": "p", "response": "r", "response_tokens": ["x", "y"], "logprobs": [-0.5, -1.0]}
    log_a = tmp_path / "a" / "a.jsonl"
    log_a.write_text("".join(json.dumps(dict(base, step=0, reward=i)) + "\n" for i in range(2)))
    (tmp_path / "b" / "b.jsonl").write_text(
        "".join(json.dumps(dict(base, step=0, reward=i, score=i, group_id=f"g{i}")) + "\n" for i in range(2)))
    a, b = open_run(tmp_path / "a"), open_run(tmp_path / "b")
    rs = RunSet({"a": a, "b": b})
    ids_a = a.samples["sample_id"].tolist()
    page = rs.rows(ids_a, ["sample_id", "score", "group_id"])
    assert page["sample_id"].tolist() == ids_a and page[["score", "group_id"]].isna().all().all()
    assert page["score"].dtype == "float64"  # numbers, as in samples (not objects)
    assert rs.steps["samples"].tolist() == [4] and rs.token_domain("logprob") == (-10.0, 0.0)
    with open(log_a, "a") as f:
        f.write(json.dumps(dict(base, step=1, reward=5.0)) + "\n")
    assert a.refresh()
    new = [i for i in a.samples["sample_id"] if i not in ids_a]
    assert rs.rows(new)["reward"].tolist() == [5.0]  # the first question after the run's refresh: no stale parts
    assert len(rs.tokens(new)) == 2
    assert rs.steps["samples"].tolist() == [4, 1] and rs.files["lines"].sum() == 5


def test_a_sets_cursors_always_match_its_views(tmp_path, open_run, monkeypatch):
    """The set's cursors were given each run's token files as the run names them now, its views named them as
    they were when the set last followed: a run refreshed in another thread between the two made the set's
    queries over tokens fail (Table _tokens_..._N does not exist), under back-to-back refreshes even after
    retries. The set now keeps the runs' token files its views name, until it follows them."""
    write_log(tmp_path / "a", steps=1, samples_per_step=2, tokens=4, ranks=1, seed=1)
    write_log(tmp_path / "b", steps=1, samples_per_step=2, tokens=4, ranks=1, seed=2)
    a, b = open_run(tmp_path / "a"), open_run(tmp_path / "b")
    rs = RunSet({"a": a, "b": b})
    before = rs.sql("SELECT count(*) AS n FROM tokens")["n"].iloc[0]
    log = next((tmp_path / "a").glob("*.jsonl"))
    with open(log, "a") as f:
        f.write(log.read_text().splitlines()[0] + "\n")
    monkeypatch.setattr(SetViews, "follow", lambda self: False)  # the set has not followed yet (another thread's turn)
    assert a.refresh()
    assert rs.query_frame("SELECT count(*) AS n FROM tokens")["n"].iloc[0] == before  # the set's views, as they were
    monkeypatch.undo()
    assert rs.sql("SELECT count(*) AS n FROM tokens")["n"].iloc[0] == before + 4  # followed: a's new sample too


def test_one_log_in_two_runs_of_a_set_is_named(two, tmp_path):
    a = rw.open_run(two["baseline"], cache_dir=tmp_path / "c", progress=False)
    b = rw.open_run(two["baseline"], cache_dir=tmp_path / "c", progress=False, max_samples_per_step=1)
    with pytest.raises(ValueError, match="runs 'a' and 'b' both read .*rank0.jsonl: a RunSet holds runs of different"):
        RunSet({"a": a, "b": b})


def test_a_run_failing_to_refresh_does_not_stop_the_others(tmp_path, open_run, monkeypatch):
    """One run's refresh failing (a disk full): the runs after it in the set were never refreshed, and the set
    did not follow those before it. Now every run reads, the set shows them, and the error names the run."""
    import json
    import sys

    write_log(tmp_path / "a", steps=2, samples_per_step=3, tokens=5, ranks=1, seed=1)
    write_log(tmp_path / "b", steps=2, samples_per_step=3, tokens=5, ranks=1, seed=2)
    a, b = open_run(tmp_path / "a"), open_run(tmp_path / "b")
    rs = RunSet({"a": a, "b": b})
    assert len(rs.samples) == 12
    log = next((tmp_path / "b").glob("*.jsonl"))
    first = json.loads(log.read_text().splitlines()[0])
    with open(log, "a") as f:
        f.write(json.dumps(dict(first, step=7)) + "\n")

    def full(_first=False):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(a, "refresh", full)
    with pytest.raises(OSError, match="No space left on device .refreshing run 'a' of the set") as err:
        rs.refresh()
    assert err.value.errno == 28  # still the run's own error, named in its message on every Python (notes: 3.11+)
    assert len(b.samples) == 7 and len(rs.samples) == 13 and rs.step_values[-1] == 7

    def odd(_first=False):
        raise KeyError("state.json")

    monkeypatch.setattr(a, "refresh", odd)
    with pytest.raises(KeyError, match="state.json.*refreshing run 'a' of the set"):
        rs.refresh()

    class Bare(Exception):
        def __str__(self):
            return "bare"

    def bare(_first=False):
        raise Bare()

    monkeypatch.setattr(a, "refresh", bare)
    with pytest.raises(Bare) as err:
        rs.refresh()
    if sys.version_info >= (3, 11):  # no text to add to: a note, where Python has them
        assert "refreshing run 'a' of the set" in "".join(err.value.__notes__)


def test_a_set_tells_the_files_of_a_run_that_read_only_lines_it_skips(tmp_path, open_run):
    """A run of a step range whose log grew by lines out of its range changed its files (bytes, lines, skipped)
    but not its data: the set's ``files`` and ``skipped_lines`` kept the old counts, refreshed or not."""
    import json

    import pandas as pd

    for name, steps in (("a", [0, 1]), ("b", [5, 6])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "log.jsonl").write_text("".join(
            json.dumps({"step": s, "prompt": "p", "response": "r", "reward": 1.0}) + "\n" for s in steps))
    a, b = open_run(tmp_path / "a"), open_run(tmp_path / "b", steps=(0, 2))
    rs = RunSet({"a": a, "b": b})
    assert rs.skipped_lines == 2
    for how in ("set", "run"):
        with open(tmp_path / "b" / "log.jsonl", "a") as f:
            f.write(json.dumps({"step": 7, "prompt": "p", "response": "r", "reward": 1.0}) + "\n")
        (rs if how == "set" else b).refresh()
        cols = ["file", "bytes", "lines", "skipped"]
        want = pd.concat([a.files, b.files]).sort_values("file_no")[cols].reset_index(drop=True)
        assert rs.files[cols].equals(want), how
        assert rs.skipped_lines == a.skipped_lines + b.skipped_lines == (3 if how == "set" else 4)


def test_runs_of_different_cache_dirs_are_refused_at_once(tmp_path):
    """A set of runs with different cache dirs was made when their file numbers happened not to collide, and failed
    at a later refresh (one run's new file numbered like another's), and every question after it. It is refused
    when made, saying why."""
    write_log(tmp_path / "a", steps=1, samples_per_step=2, tokens=4, ranks=1, seed=1)
    write_log(tmp_path / "b", steps=1, samples_per_step=2, tokens=4, ranks=1, seed=2)
    write_log(tmp_path / "other", steps=1, samples_per_step=2, tokens=4, ranks=2, seed=3)
    rw.open_run(tmp_path / "other", cache_dir=tmp_path / "c2", progress=False)  # c2's numbers start past b's
    a = rw.open_run(tmp_path / "a", cache_dir=tmp_path / "c1", progress=False)
    b = rw.open_run(tmp_path / "b", cache_dir=tmp_path / "c2", progress=False)
    with pytest.raises(ValueError, match="use different cache dirs .*open them with the same cache_dir"):
        RunSet({"a": a, "b": b})



def test_a_view_of_a_dict_of_runs_already_open(two, cache_dir):
    """The README says RunView takes "a Run already open, or a dict of them": a dict of open Runs was refused
    ("a log source is a folder, a file or a glob")."""
    runs = {name: rw.open_run(src, cache_dir=cache_dir, progress=False) for name, src in two.items()}
    view = rw.RunView(runs)
    assert set(view.run.runs) == set(two) and set(view.run.samples.run) == set(two)
    with pytest.raises(TypeError, match="not to a Run already open"):
        rw.RunView(runs, cache_dir=cache_dir)
