"""The Parquet cache: reused while files are unchanged, grown with only the new lines, rebuilt on other changes,
never written into the log folder."""

from __future__ import annotations

import fcntl
import json
import os
import random
import warnings
from pathlib import Path

import pandas as pd
import pytest
from conftest import file_mtimes, folder_fingerprint, write_lines

import rlviz_widgets
from rlviz_widgets import LogWarning
from rlviz_widgets._ingest.readers import rlb as rlbmod
from rlviz_widgets._ingest.readers.jsonl.batches import BATCH_STRIDE
from rlviz_widgets._ingest.readers.rlb import RLBReader
from rlviz_widgets._store import cache as cachemod
from rlviz_widgets._store import file_numbers
from rlviz_widgets._synth import make_record, write_log


@pytest.fixture
def spy(monkeypatch):
    """Counts the files cache.update_files reads and records the line numbers every parse() is given."""
    calls = {"update": 0, "parsed": []}
    real_update, real_parse = cachemod.update_files, RLBReader._parse

    def update(con, jobs, *a, **kw):
        calls["update"] += len(jobs)
        return real_update(con, jobs, *a, **kw)

    def parse(self, con, chunk, steps):  # one chunk, or several parsed together (their own numbers, in order)
        calls["parsed"].extend(int(n) % BATCH_STRIDE for n in chunk.numbers)
        return real_parse(self, con, chunk, steps)

    monkeypatch.setattr(cachemod, "update_files", update)
    monkeypatch.setattr(RLBReader, "_parse", parse)

    def reset():
        calls["update"], calls["parsed"] = 0, []

    calls["reset"] = reset
    return calls


def parts(cache_dir) -> dict[str, tuple[int, str]]:
    return {k: v for k, v in folder_fingerprint(cache_dir).items() if k.endswith(".parquet")}


def frame(run) -> pd.DataFrame:
    return run.samples.sort_values("sample_id").reset_index(drop=True)


def records(step: int, n: int, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    return [make_record(rng, step, i, 8, progress=0.3) for i in range(n)]


def assert_same_as_fresh(run, source, tmp_path, name="fresh_cache"):
    fresh = rlviz_widgets.open_run(source, cache_dir=tmp_path / name, progress=False)
    pd.testing.assert_frame_equal(frame(run), frame(fresh))
    pd.testing.assert_frame_equal(run.steps, fresh.steps)
    ids = run.samples["sample_id"].tolist()
    pd.testing.assert_frame_equal(run.tokens(ids), fresh.tokens(ids))


def _no_leases(entries: dict) -> dict:
    return {k: v for k, v in entries.items() if "leases" not in Path(k).parts}


def test_second_open_reads_nothing(synth_logs, open_run, cache_dir, spy):
    folder, files = synth_logs(ranks=3)
    first = open_run(folder)
    assert spy["update"] == 3 and len(spy["parsed"]) == len(first.samples)
    before = folder_fingerprint(cache_dir)
    before_mtimes = file_mtimes(cache_dir)
    assert len(parts(cache_dir)) == 3
    spy["reset"]()
    again = open_run(folder)
    assert spy["update"] == 0 and spy["parsed"] == []
    # nothing rewritten; only the lease naming the parts the new Run reads (``leases``) was added
    assert _no_leases(folder_fingerprint(cache_dir)) == _no_leases(before)
    assert _no_leases(file_mtimes(cache_dir)) == _no_leases(before_mtimes)
    pd.testing.assert_frame_equal(frame(first), frame(again))
    assert again.refresh() is False and spy["update"] == 0


def test_in_place_change_of_same_size_rebuilds(synth_logs, open_run, cache_dir, spy, tmp_path):
    folder, files = synth_logs(ranks=1, steps=3, samples_per_step=10)
    f = files[0]
    open_run(folder)
    lines = f.read_bytes().split(b"\n")
    assert sum(len(x) + 1 for x in lines[:20]) > 2 * cachemod.HEAD_BYTES  # the edit is far from both ends
    rec = json.loads(lines[14])
    old = json.dumps(rec["reward"]).encode()
    new = (b"9" if old[:1] != b"9" else b"8") + old[1:]
    assert lines[14].count(b'"reward": ' + old) == 1
    lines[14] = lines[14].replace(b'"reward": ' + old, b'"reward": ' + new)
    size = f.stat().st_size
    f.write_bytes(b"\n".join(lines))
    assert f.stat().st_size == size
    spy["reset"]()
    run = open_run(folder)
    assert spy["update"] == 1 and spy["parsed"] == list(range(1, 31))  # every line read again
    assert run.samples.set_index("line").loc[15, "reward"] == float(new)
    assert_same_as_fresh(run, folder, tmp_path)


def test_rewritten_or_shrunk_file_rebuilds(synth_logs, open_run, cache_dir, spy, tmp_path, monkeypatch):
    monkeypatch.setattr(cachemod, "RETIRED_GRACE_S", 0.0)  # parts replaced are deleted at once
    folder, files = synth_logs(ranks=1, steps=3, samples_per_step=10)
    f = files[0]
    open_run(folder)
    n_parts = len(parts(cache_dir))
    # a new job overwrote the log with other content, longer than before
    write_log(folder, steps=4, samples_per_step=10, tokens=12, ranks=1, seed=99)
    spy["reset"]()
    run = open_run(folder)
    assert spy["parsed"] == list(range(1, 41))
    assert len(parts(cache_dir)) == n_parts  # the old parts were dropped
    assert_same_as_fresh(run, folder, tmp_path, "fresh1")
    # then truncated to its first 5 lines
    f.write_bytes(b"".join(f.read_bytes().splitlines(keepends=True)[:5]))
    spy["reset"]()
    run = open_run(folder)
    assert spy["parsed"] == [1, 2, 3, 4, 5] and len(run.samples) == 5
    assert_same_as_fresh(run, folder, tmp_path, "fresh2")


def test_grown_file_reads_only_new_lines(synth_logs, open_run, cache_dir, spy, tmp_path):
    folder, files = synth_logs(ranks=2, steps=2, samples_per_step=6)
    open_run(folder)
    old_parts = parts(cache_dir)
    grown = files[1]
    n_old = len(grown.read_text().splitlines())
    with open(grown, "a", encoding="utf-8") as fh:
        for r in records(step=2, n=4):
            fh.write(json.dumps(r) + "\n")
    spy["reset"]()
    run = open_run(folder)
    assert spy["update"] == 1  # the other rank file is untouched
    assert spy["parsed"] == list(range(n_old + 1, n_old + 5))
    now = parts(cache_dir)
    assert {k: now[k] for k in old_parts} == old_parts  # the old parts are kept as they were (the grown file's
    # is retired: its new lines' part was merged with it into one, so re-opens of a growing log keep few parts)
    assert [len(run.relations.files.states[str(f.resolve())].parts) for f in files] == [1, 1]
    assert len(now) == len(old_parts) + 2
    assert run.step_values == [0, 1, 2] and run.steps["samples"].tolist() == [6, 6, 4]
    assert_same_as_fresh(run, folder, tmp_path)


def test_refresh_of_an_open_run_reads_new_lines_and_files(synth_logs, open_run, spy, tmp_path):
    folder, files = synth_logs(ranks=1, steps=2, samples_per_step=5)
    run = open_run(folder)
    ids = run.samples["sample_id"].tolist()
    assert run.n_samples == 10  # a scalar query first: its result must not block the next read
    gen = run.generation
    with open(files[0], "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in records(step=5, n=3)))
    write_lines(folder / "rollout_rank9.jsonl", records(step=5, n=2, seed=4))  # sorts last: see test_sources
    spy["reset"]()
    assert run.refresh() is True
    assert sorted(spy["parsed"]) == [1, 2, 11, 12, 13]
    assert run.generation > gen
    assert run.n_samples == 15 and run.steps["samples"].tolist() == [5, 5, 5]
    assert run.samples["sample_id"].tolist()[:10] == ids  # earlier samples keep their ids
    assert_same_as_fresh(run, folder, tmp_path)
    spy["reset"]()
    assert run.refresh() is False and spy["update"] == 0


def test_half_written_last_line_is_read_once_complete(tmp_path, open_run, cache_dir):
    folder = tmp_path / "logs"
    recs = records(step=0, n=4)
    f = write_lines(folder / "rank0.jsonl", recs[:3])
    last = (json.dumps(recs[3]) + "\n").encode()
    with open(f, "ab") as fh:
        fh.write(last[:57])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = rlviz_widgets.open_run(folder, cache_dir=cache_dir, progress=False)
    assert [w for w in caught if issubclass(w.category, LogWarning)]
    p = run.problems
    assert p[["line", "kind"]].values.tolist() == [[4, "incomplete_last_line"]]
    assert p["file"].iloc[0] == str(f.resolve())
    assert run.samples["line"].tolist() == [1, 2, 3]
    # still unfinished: nothing new, no second warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run.refresh() is False
    assert not [w for w in caught if issubclass(w.category, LogWarning)]
    assert len(run.problems) == 1
    # the job finishes the line
    with open(f, "ab") as fh:
        fh.write(last[57:])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run.refresh() is True
    assert not [w for w in caught if issubclass(w.category, LogWarning)]
    assert run.problems.empty
    assert run.samples["line"].tolist() == [1, 2, 3, 4]
    assert run.samples["reward"].tolist() == [r["reward"] for r in recs]
    assert_same_as_fresh(run, folder, tmp_path)
    assert open_run(folder).problems.empty  # and from the cache


def test_finished_last_record_without_newline(tmp_path, open_run, spy):
    folder = tmp_path / "logs"
    recs = records(step=0, n=5)
    f = write_lines(folder / "rank0.jsonl", recs[:3], newline_at_end=False)
    run = open_run(folder)
    assert run.problems.empty and run.samples["line"].tolist() == [1, 2, 3]
    with open(f, "a", encoding="utf-8") as fh:  # the writer adds the newline, then more records
        fh.write("\n" + "".join(json.dumps(r) + "\n" for r in recs[3:]))
    spy["reset"]()
    assert run.refresh() is True
    assert spy["parsed"] == [4, 5]
    assert run.samples["line"].tolist() == [1, 2, 3, 4, 5]
    assert run.samples["reward"].tolist() == [r["reward"] for r in recs]
    assert_same_as_fresh(run, folder, tmp_path)


@pytest.mark.parametrize("ending", ["\r\n", " \n", "\r"])
def test_last_record_taken_without_newline_then_finished_by_blanks(tmp_path, open_run, spy, ending):
    """A record taken without its newline, then ended by "\r\n" (a CRLF writer flushing between "}" and its line
    end) or blanks: only a bare "\n" was understood, so the next line began at the "\r", every later refresh read
    the file again and said it changed, and the line after never showed. Now as a fresh open reads it."""
    folder = tmp_path / "logs"
    recs = records(step=0, n=4)
    lines = [json.dumps(r) for r in recs]
    f = folder / "rank0.jsonl"
    folder.mkdir()
    f.write_bytes((lines[0] + "\r\n" + lines[1]).encode())
    run = open_run(folder)
    assert run.samples["line"].tolist() == [1, 2]
    with open(f, "ab") as fh:
        fh.write(ending.encode())
    assert run.refresh() is False  # blanks after a record: nothing new
    with open(f, "ab") as fh:
        fh.write(("" if "\n" in ending else "\n").encode() + (lines[2] + "\r\n" + lines[3][:20]).encode())
    spy["reset"]()
    assert run.refresh() is True and spy["parsed"] == [3]
    assert run.samples["line"].tolist() == [1, 2, 3]
    assert run.problems[["line", "kind"]].values.tolist() == [[4, "incomplete_last_line"]]
    spy["reset"]()
    assert [run.refresh() for _ in range(3)] == [False] * 3 and spy["update"] == 0  # settled: nothing re-read
    assert_same_as_fresh(run, folder, tmp_path)


def test_last_record_taken_without_newline_then_continued(tmp_path, open_run):
    """The record taken was not the whole line after all (a job appending to it): the file is read again, as a
    fresh open reads it (one malformed line), instead of keeping the first half as a record."""
    folder = tmp_path / "logs"
    recs = [json.dumps(r) for r in records(step=0, n=3)]
    f = write_lines(folder / "rank0.jsonl", recs[:1], newline_at_end=False)
    run = open_run(folder)
    assert len(run.samples) == 1
    with open(f, "a") as fh:
        fh.write(recs[1] + "\n" + recs[2] + "\n")
    with pytest.warns(LogWarning):
        assert run.refresh() is True
    assert run.samples["line"].tolist() == [2]
    assert run.problems[["line", "kind"]].values.tolist() == [[1, "malformed_json"]]
    assert_same_as_fresh(run, folder, tmp_path)


@pytest.mark.parametrize("when", ["before", "after"])
def test_log_rewritten_while_a_refresh_reads_it(tmp_path, open_run, monkeypatch, when):
    """A job restarts (the log truncated and written anew, longer) just before or just after a refresh reads it:
    the refresh kept the old lines with the new ones, for good (the hashes were taken of the new file at the end,
    so later refreshes took it for a file that had only grown). Now what was read is checked against the file
    at the end, and a file that changed meanwhile is read again from its start."""
    folder = tmp_path / "logs"
    old = [dict(r, epoch=0) for r in records(step=0, n=20)]
    f = write_lines(folder / "rank0.jsonl", old)
    run = open_run(folder)
    with open(f, "a") as fh:  # the old job wrote more: the refresh will read from where the last one stopped
        fh.write("".join(json.dumps(dict(r, epoch=0)) + "\n" for r in records(step=1, n=5, seed=4)))
    new = "".join(json.dumps(dict(r, epoch=1)) + "\n" for s in range(3) for r in records(step=s, n=20, seed=5 + s))
    real = cachemod.linereader.read_chunks

    def rewritten(*a, **kw):
        if when == "before":
            f.write_text(new)
        yield from real(*a, **kw)
        if when == "after":
            f.write_text(new)

    monkeypatch.setattr(cachemod.linereader, "read_chunks", rewritten)
    assert run.refresh() is True
    monkeypatch.setattr(cachemod.linereader, "read_chunks", real)
    assert run.samples["epoch"].tolist() == [1] * 60
    assert run.refresh() is False
    assert_same_as_fresh(run, folder, tmp_path)


def test_a_log_rewritten_during_every_read_is_not_shown_mixed(tmp_path, open_run, monkeypatch):
    """A job rewriting its log again and again, faster than it is read: after the last try, the run showed what
    the last read got (lines of two contents, and problems of neither). Now the file keeps the samples it had
    (or, never read whole, has none) and one ``changing_file`` problem says so, until a read finds it settled."""
    folder = tmp_path / "logs"
    f = write_lines(folder / "rank0.jsonl", [dict(r, epoch=0) for r in records(step=0, n=20)])
    g = write_lines(folder / "rank1.jsonl", records(step=0, n=4, seed=9))
    run = open_run(folder)
    before = run.samples
    real = cachemod.linereader.read_chunks
    version = iter(range(1, 100))

    def rewritten(path, *a, **kw):
        if Path(path) != f.resolve():
            yield from real(path, *a, **kw)
            return
        e = next(version)  # each read sees another content: a half of one, then the file is rewritten
        f.write_text("".join(json.dumps(dict(r, epoch=e)) + "\n" for r in records(step=0, n=20 + e, seed=e)))
        for chunk in real(path, *a, **kw):
            yield chunk
            f.write_text("".join(json.dumps(dict(r, epoch=-e)) + "\n" for r in records(step=1, n=20 + e)))

    monkeypatch.setattr(cachemod.linereader, "read_chunks", rewritten)
    for path in (f, g):  # both grew: each is read; the other rank as usual
        with open(path, "a") as fh:
            fh.write(json.dumps(records(step=1, n=1, seed=10)[0]) + "\n")
    with pytest.warns(LogWarning, match="changing file"):
        assert run.refresh() is True
    after = run.samples
    assert after[after["file"] == str(f.resolve())].equals(before[before["file"] == str(f.resolve())])
    assert len(after[after["file"] == str(g.resolve())]) == 5
    assert run.problems[["file", "line", "kind"]].values.tolist() == [[str(f.resolve()), 0, "changing_file"]]
    assert "as read before" in run.problems["message"][0]
    # opened afresh meanwhile: the file is left out, and said so
    fresh = rlviz_widgets.open_run(folder, cache_dir=tmp_path / "other_cache", progress=False)
    assert str(f.resolve()) not in set(fresh.samples["file"]) and len(fresh.samples) == 5
    assert fresh.problems["kind"].tolist() == ["changing_file"] and "left out" in fresh.problems["message"][0]
    monkeypatch.setattr(cachemod.linereader, "read_chunks", real)  # the job is done: the next read finds it settled
    for r in (run, fresh):
        assert r.refresh() is True
        assert r.problems.empty and len(set(r.samples[r.samples["file"] == str(f.resolve())]["epoch"])) == 1
    assert_same_as_fresh(run, folder, tmp_path)
    assert_same_as_fresh(fresh, folder, tmp_path, name="fresh_cache_2")


def test_a_log_rewritten_and_back_during_a_read_is_read_again(tmp_path, open_run, monkeypatch):
    """A job rewrote its log while it was read (other records), then wrote it back as it was: the read held lines
    of both (and broken ones where they met), and its ends, all that was checked, matched the file. Samples of
    what was read, spread over it, are now checked too: the file is read again."""
    monkeypatch.setattr(cachemod.linereader, "CHUNK_BYTES", 8192)  # the read and its samples at this log's scale
    monkeypatch.setattr(cachemod.linereader, "FIRST_CHUNK_BYTES", 8192)
    monkeypatch.setattr(cachemod, "SAMPLE_EVERY", 4096)
    folder = tmp_path / "logs"
    a = "".join(json.dumps(dict(r, reward=1.0)) + "\n" for r in records(step=0, n=60))
    b = "".join(json.dumps(dict(r, reward=2.0)) + "\n" for r in records(step=0, n=60, seed=8))
    f = folder / "rank0.jsonl"
    folder.mkdir()
    f.write_text(a)
    real = cachemod.linereader.read_chunks
    reads = []

    def aba(path, *args, **kw):
        reads.append(path)
        for k, chunk in enumerate(real(path, *args, **kw)):
            yield chunk
            if len(reads) == 1 and k in (1, 2):  # the first read only: B after its 2nd chunk, A again after its 3rd
                f.write_text(b if k == 1 else a)

    monkeypatch.setattr(cachemod.linereader, "read_chunks", aba)
    run = open_run(folder)
    assert len(reads) == 2  # read again
    assert run.samples["reward"].tolist() == [1.0] * 60 and run.problems.empty


@pytest.mark.parametrize("when", ["listed", "planned", "read"])
def test_a_log_deleted_during_a_refresh_leaves_the_run(tmp_path, open_run, monkeypatch, when):
    """A job restarting deletes its log and writes it anew: deleted after the folder was listed, after the file's
    plan, or while it was read, the refresh raised FileNotFoundError. Now the file leaves the run (said so), and
    the next refresh reads it when it is back."""
    folder = tmp_path / "logs"
    f = write_lines(folder / "rank0.jsonl", records(step=0, n=6))
    write_lines(folder / "rank1.jsonl", records(step=0, n=3, seed=9))
    run = open_run(folder)
    with open(f, "a") as fh:
        fh.write(json.dumps(records(step=1, n=1)[0]) + "\n")
    back = f.read_bytes()
    if when == "listed":
        real_plan = cachemod.plan

        def plan(cache, *a, **kw):
            if cache.path == f.resolve():
                f.unlink(missing_ok=True)
            return real_plan(cache, *a, **kw)

        monkeypatch.setattr(cachemod, "plan", plan)
    elif when == "planned":
        real_update = cachemod.update_files

        def update(*a, **kw):
            f.unlink(missing_ok=True)
            return real_update(*a, **kw)

        monkeypatch.setattr(cachemod, "update_files", update)
    else:
        real_read = cachemod.linereader.read_chunks

        def read(path, *a, **kw):
            for chunk in real_read(path, *a, **kw):
                yield chunk
                if Path(path) == f.resolve():
                    f.unlink(missing_ok=True)

        monkeypatch.setattr(cachemod.linereader, "read_chunks", read)
    with pytest.warns(LogWarning, match="file removed"):
        assert run.refresh() is True
    assert set(run.samples["file"]) == {str((folder / "rank1.jsonl").resolve())}
    assert run.problems[["file", "kind"]].values.tolist() == [[str(f.resolve()), "file_removed"]]
    monkeypatch.undo()
    f.write_bytes(back)
    assert run.refresh() is True
    assert len(run.samples) == 10 and run.problems.empty  # back: no longer said
    assert_same_as_fresh(run, folder, tmp_path)


def test_refresh_reads_up_to_the_size_it_saw(tmp_path, open_run, monkeypatch, spy):
    """A refresh stops where the file ended when it began reading: one that followed a job still appending read
    on for as long as the job wrote (a small part per read). The lines written meanwhile are the next one's."""
    folder = tmp_path / "logs"
    recs = records(step=0, n=12)
    f = write_lines(folder / "rank0.jsonl", recs[:4])
    run = open_run(folder)
    real = cachemod.linereader.read_chunks

    def job_writes_on(*a, **kw):
        wrote = False
        for chunk in real(*a, **kw):
            yield chunk
            if not wrote:  # while the refresh reads, the job appends
                with open(f, "a") as fh:
                    fh.write("".join(json.dumps(r) + "\n" for r in recs[8:]))
                wrote = True

    with open(f, "a") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in recs[4:8]))
    monkeypatch.setattr(cachemod.linereader, "read_chunks", job_writes_on)
    spy["reset"]()
    assert run.refresh() is True
    assert spy["parsed"] == [5, 6, 7, 8] and run.samples["line"].tolist() == list(range(1, 9))
    monkeypatch.setattr(cachemod.linereader, "read_chunks", real)
    assert run.refresh() is True and run.samples["line"].tolist() == list(range(1, 13))
    assert_same_as_fresh(run, folder, tmp_path)


def test_log_folder_is_never_written(synth_logs, open_run, cache_dir):
    folder, files = synth_logs(ranks=2)
    with open(files[0], "ab") as fh:
        fh.write(b'{"step": 3, "rew')  # a half line, as a running job leaves it
    before, mtimes = folder_fingerprint(folder), file_mtimes(folder)
    run = open_run(folder)
    ids = run.samples["sample_id"].tolist()
    assert len(run.steps) == 4 and len(run.tokens(ids[:3])) > 0 and not run.problems.empty
    assert run.reward_histogram("reward", 5)["count"].sum() == len(ids) and run.summary()
    assert run.sql("SELECT count(*) AS n FROM tokens JOIN samples USING (sample_id)")["n"].iloc[0] > 0
    assert run.refresh() is False
    assert len(open_run(folder, max_samples_per_step=2, steps=(1, 2)).samples) == 4
    one = open_run(files[1])
    assert len(one.tokens(one.samples["sample_id"].iloc[-1])) > 0
    assert folder_fingerprint(folder) == before
    assert file_mtimes(folder) == mtimes
    assert any(cache_dir.rglob("*.parquet"))  # the cache went where it was told


def test_cache_dir_inside_the_log_folder_is_refused(synth_logs):
    folder, files = synth_logs(ranks=1)
    before = folder_fingerprint(folder)
    for bad in (folder, folder / ".rlviz_cache", folder / "a" / "b"):
        with pytest.raises(ValueError, match="inside the log folder"):
            rlviz_widgets.open_run(folder, cache_dir=bad, progress=False)
        with pytest.raises(ValueError, match="inside the log folder"):
            rlviz_widgets.open_run(files[0], cache_dir=bad, progress=False)
    assert folder_fingerprint(folder) == before


def test_cache_dir_in_the_top_log_folder_with_nested_runs_is_refused(tmp_path):
    root = tmp_path / "runs"
    write_log(root / "run_a", steps=1, samples_per_step=2, tokens=4, ranks=1)
    before = folder_fingerprint(root)
    try:
        with pytest.raises(ValueError, match="inside the log folder"):
            rlviz_widgets.open_run(root, cache_dir=root / ".cache", progress=False)
    finally:
        assert folder_fingerprint(root) == before


def test_a_log_file_in_home_opens_with_the_platform_cache_dir(tmp_path, monkeypatch):
    """``open_run("~/rollout.jsonl")`` with no cache_dir failed: the platform's cache dir (~/.cache/rlviz_widgets)
    is below the file's folder, which counted as a log folder. The user chose neither; a cache dir they name
    there, or their home named as the log folder, is still refused. So with a glob of files in the home."""
    home = tmp_path / "home"
    log = write_lines(home / "rollout.jsonl", records(0, 3))
    monkeypatch.delenv("RLVIZ_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    before = folder_fingerprint(home)
    run = rlviz_widgets.open_run(log, progress=False)
    assert len(run.samples) == 3 and run.cache_root == home / ".cache" / "rlviz_widgets"
    assert any(run.cache_root.rglob("*.parquet"))
    # a glob there too ("~/*.jsonl", "~/**/*.jsonl": globs pass over hidden folders, as the cache's): it was refused
    for pattern in ("*.jsonl", "**/*.jsonl"):
        assert len(rlviz_widgets.open_run(str(home / pattern), progress=False).samples) == 3
    for bad in ({"cache_dir": home / ".rlviz"}, {"source": home}):
        with pytest.raises(ValueError, match="inside the log folder"):
            rlviz_widgets.open_run(bad.get("source", log), cache_dir=bad.get("cache_dir"), progress=False)
    assert {p: h for p, h in folder_fingerprint(home).items() if ".cache" not in str(p)} == before


def test_a_log_file_whose_path_looks_like_a_glob_is_a_file(tmp_path):
    """A file in a Hydra-style folder ``exp[lr=1e-4]`` was taken for a glob pattern by the cache dir check: its
    fixed part (the folder above) counted as a log folder, and a cache dir beside the run was refused."""
    log = write_lines(tmp_path / "exp[lr=1e-4]" / "rank0.jsonl", records(0, 2))
    assert len(rlviz_widgets.open_run(log, cache_dir=tmp_path / "cache", progress=False).samples) == 2


def test_a_cache_on_a_read_only_mount_is_said_in_our_words(tmp_path):
    """A warm cache on a read-only mount (EROFS, not EACCES) and a log that grew: pyarrow's bare OSError from deep
    in the writer, not the error naming the cache dir and the way out."""
    import subprocess

    log = write_lines(tmp_path / "logs" / "r0.jsonl", records(0, 2))
    cache = tmp_path / "cache"
    rlviz_widgets.open_run(log, cache_dir=cache, progress=False).close()
    mount = f"mount --bind {cache} {cache} && mount -o remount,bind,ro {cache}"
    if subprocess.run(mount, shell=True, capture_output=True).returncode:
        pytest.skip("no bind mount here (needs root)")
    try:
        run = rlviz_widgets.open_run(log, cache_dir=cache, progress=False)  # warm: read-only is fine
        assert len(run.samples) == 2
        with open(log, "a") as f:
            f.write(json.dumps(records(1, 1)[0]) + "\n")
        for call in (run.refresh, lambda: rlviz_widgets.open_run(log, cache_dir=cache, progress=False)):
            with pytest.raises(PermissionError, match=r"cannot write the cache in .*Read-only file system.*pass "
                                                      r"cache_dir= or set \$RLVIZ_CACHE_DIR"):
                call()
        assert len(run.samples) == 2  # as read before
    finally:
        subprocess.run(["umount", str(cache)], check=True)


def test_duckdb_spills_to_a_temporary_folder_not_the_working_directory(tmp_path, monkeypatch):
    """An in-memory DuckDB spills what does not fit in memory to ``.tmp`` in the working directory: a notebook
    started in the log folder would have had DuckDB write there. Each database of ours spills to a folder of its
    own in the system's temporary folder, which it removes when it closes."""
    import tempfile

    import duckdb

    from rlviz_widgets._store import cache as cachemod

    logs = tmp_path / "logs"
    write_lines(logs / "r0.jsonl", records(0, 2))
    monkeypatch.chdir(logs)
    run = rlviz_widgets.open_run(logs, cache_dir=tmp_path / "cache", progress=False)
    table = rlviz_widgets.SampleTable(run.samples)
    for spill in (run.sql("SELECT current_setting('temp_directory') AS t").t[0],
                  table._source.con.execute("SELECT current_setting('temp_directory')").fetchone()[0]):
        assert Path(spill).parent == Path(tempfile.gettempdir()) and "rlviz_widgets-spill-" in spill
    db = duckdb.connect()  # a real spill, with a memory limit our databases lock
    cachemod.spill_to_temp(db)
    db.execute("SET memory_limit = '32MB'")
    db.execute("SET threads = 1")
    db.execute("CREATE TABLE t AS SELECT random() AS x, range AS i FROM range(2500000) ORDER BY x")
    spill = Path(db.execute("SELECT current_setting('temp_directory')").fetchone()[0])
    assert any(spill.iterdir())
    db.close()
    assert not spill.exists() and sorted(p.name for p in logs.iterdir()) == ["r0.jsonl"]


def test_a_live_runs_sample_ids_survive_its_cache_dir_deleted(tmp_path):
    """The cache dir deleted under a live run (another kernel cleaning up), then a new rank file: the refresh
    numbered the files afresh, b.jsonl's ids went to a.jsonl's lines and a view's selected_ids named other
    samples, without a word."""
    import shutil

    logs, cache = tmp_path / "logs", tmp_path / "cache"
    write_lines(logs / "b.jsonl", [dict(r, prompt="from b") for r in records(0, 2)])
    run = rlviz_widgets.open_run(logs, cache_dir=cache, progress=False)
    before = dict(zip(run.samples.sample_id, run.samples.prompt))
    shutil.rmtree(cache)
    write_lines(logs / "a.jsonl", [dict(r, prompt="from a") for r in records(0, 2, seed=5)])
    assert run.refresh()
    after = dict(zip(run.samples.sample_id, run.samples.prompt))
    assert {i: after[i] for i in before} == before and sorted(after.values()) == ["from a"] * 2 + ["from b"] * 2
    again = rlviz_widgets.open_run(logs, cache_dir=cache, progress=False)  # the registry has them back
    assert dict(zip(again.samples.sample_id, again.samples.prompt)) == after
    # deleted again, and another kernel numbers the files afresh (a before b) before the run sees a new file:
    # the run's numbers still win in the run (the registry's would swap a's and b's ids)
    shutil.rmtree(cache)
    rlviz_widgets.open_run(logs, cache_dir=cache, progress=False).close()
    write_lines(logs / "c.jsonl", [dict(r, prompt="from c") for r in records(0, 1, seed=6)])
    assert run.refresh()
    now = dict(zip(run.samples.sample_id, run.samples.prompt))
    assert {i: now[i] for i in after} == after and sorted(now.values()).count("from c") == 1


def test_default_cache_dir_comes_from_the_environment(synth_logs, tmp_path, monkeypatch):
    folder, files = synth_logs(ranks=1)
    monkeypatch.setenv("RLVIZ_CACHE_DIR", str(tmp_path / "env_cache"))
    run = rlviz_widgets.open_run(folder, progress=False)
    assert len(run.samples) == 48
    assert len(list((tmp_path / "env_cache").rglob("*.parquet"))) == 1


def test_damaged_cache_is_rebuilt(synth_logs, open_run, cache_dir, spy, tmp_path):
    folder, files = synth_logs(ranks=2)
    first = frame(open_run(folder))
    states = sorted(cache_dir.rglob("state.json"))
    assert len(states) == 2
    states[0].write_text("{not json")  # a state file cut short
    for p in sorted(states[1].parent.glob("*.parquet")):  # a part deleted by hand
        p.unlink()
    spy["reset"]()
    run = open_run(folder)
    assert spy["update"] == 2 and len(spy["parsed"]) == 48
    pd.testing.assert_frame_equal(frame(run), first)


def test_a_failure_mid_read_stops_cleanly_and_the_next_open_recovers(synth_logs, cache_dir, monkeypatch, tmp_path):
    """An error while parsing (here: the second chunk) reaches the caller at once; the reading thread stops,
    no file state claims parts that were never written, and the next open reads everything again."""
    import threading
    import time

    from rlviz_widgets._ingest import lines

    folder, files = synth_logs(ranks=2)
    monkeypatch.setattr(lines, "CHUNK_BYTES", 4096)  # several chunks per file
    monkeypatch.setattr(lines, "FIRST_CHUNK_BYTES", 4096)
    real_parse, calls = RLBReader.parse, []

    def failing(self, con, chunk):
        calls.append(chunk.start)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return real_parse(self, con, chunk)

    monkeypatch.setattr(RLBReader, "parse", failing)
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="disk on fire"):
        rlviz_widgets.open_run(folder, cache_dir=cache_dir, progress=False)
    assert time.perf_counter() - t0 < 5
    assert not [t for t in threading.enumerate() if t.name == "rlviz-read"]  # the reader is gone
    assert not list(cache_dir.rglob("state.json"))  # nothing half-done is taken for a cache
    monkeypatch.setattr(RLBReader, "parse", real_parse)
    run = rlviz_widgets.open_run(folder, cache_dir=cache_dir, progress=False)
    assert_same_as_fresh(run, folder, tmp_path)


@pytest.mark.parametrize("chunk_bytes", [1500, 6000, 1 << 20])
def test_many_chunks_with_bad_lines_and_a_new_key_midway(tmp_path, monkeypatch, chunk_bytes):
    """A file read in many chunks: a malformed line, bytes that are not UTF-8, a blank line and a key first
    seen in a later chunk; every record and every problem lands where it belongs, whatever the chunk size."""
    from rlviz_widgets._ingest import lines

    monkeypatch.setattr(lines, "CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(lines, "FIRST_CHUNK_BYTES", chunk_bytes)
    recs = records(0, 30) + records(1, 30, seed=4)
    out = []
    for n, r in enumerate(recs, start=1):
        if n >= 40:
            r = {**r, "judge": n / 100}  # a custom field that only later records have
        out.append(json.dumps(r).encode())
    out[9] = b'{"step": 0, "prompt": "cut'  # line 10: not JSON
    out[24] = out[24].replace(b'"prompt": "', b'"prompt": "\xff\xfe ', 1)  # line 25: not UTF-8
    out[49] = b""  # line 50: blank
    path = tmp_path / "logs" / "rollout_rank0.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\n".join(out) + b"\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    kinds = {(int(p.line), p.kind) for p in run.problems.itertuples()}
    assert kinds == {(10, "malformed_json"), (25, "non_utf8"), (50, "empty_line")}
    s = run.samples.sort_values("line")
    assert s["line"].tolist() == [n for n in range(1, 61) if n not in (10, 50)]
    assert s.loc[s["line"] == 25, "prompt"].iloc[0].startswith("\ufffd")
    judged = s.dropna(subset=["judge"])
    assert judged["line"].tolist() == [n for n in range(40, 61) if n != 50]
    assert judged["judge"].tolist() == pytest.approx([n / 100 for n in judged["line"]])
    assert s["kl_mean"].notna().all() and (s["n_tokens"] == 8).all()


def test_a_part_is_parquet_without_token_lists_and_an_arrow_file_with_them(tmp_path, open_run, cache_dir):
    """Token lists go to an Arrow IPC file per part (written as they lie in memory); the Parquet file keeps
    the rest, texts dictionary-encoded (GRPO repeats each prompt) but the responses (each its own). Both read
    back, and a part whose Arrow file is gone is not trusted."""
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    from rlviz_widgets._store import token_store

    write_log(tmp_path / "logs", steps=2, samples_per_step=8, tokens=40, ranks=1)
    run = open_run(tmp_path / "logs")
    assert run.n_samples == 16
    (path,) = [p for p in cache_dir.rglob("part-*.parquet")]
    meta = pq.ParquetFile(path)
    assert not set(token_store.TOKEN_COLUMNS) & set(meta.schema_arrow.names)
    assert {"n_tokens", "kl_mean", "response"} <= set(meta.schema_arrow.names)
    rg = meta.metadata.row_group(0)
    cols = {rg.column(i).path_in_schema: rg.column(i) for i in range(rg.num_columns)}
    assert "RLE_DICTIONARY" in cols["prompt"].encodings and "RLE_DICTIONARY" not in cols["response"].encodings
    with ipc.open_file(token_store.path_for(str(path))) as f:
        toks = f.read_all()
    assert toks.schema == token_store.SCHEMA and toks.num_rows == 16
    assert toks["line"].to_pylist() == run.samples.sort_values("line")["line"].tolist()
    first = run.samples.sort_values("line").iloc[0]
    got = run.tokens(first["sample_id"])
    assert got["token"].notna().all() and len(got) == first["n_tokens"] > 0
    assert got["logprob"].tolist() == pytest.approx(toks["logprobs"][0].as_py())
    os.remove(token_store.path_for(str(path)))
    again = open_run(tmp_path / "logs")  # rebuilt, not read half
    assert len(again.tokens(first["sample_id"])) == first["n_tokens"]


@pytest.mark.parametrize("writers", [1, 2])
def test_parsed_parts_wait_for_a_slow_writer(synth_logs, cache_dir, monkeypatch, writers):
    """A disk slower than the parser: at most MAX_PENDING_WRITES parsed parts wait in memory for the writers,
    each part is written once; with one writer the parser writes the ones it has not started instead of waiting
    for them, with two (``WRITERS``, as an open has) both write."""
    import threading
    import time

    from rlviz_widgets._ingest import lines

    folder, _ = synth_logs(ranks=2)
    monkeypatch.setattr(cachemod, "WRITERS", writers)
    monkeypatch.setattr(lines, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(lines, "FIRST_CHUNK_BYTES", 4096)
    real_write, real_add = cachemod._write, cachemod._add_part
    count = {"parsed": 0, "written": 0, "most_waiting": 0}
    lock = threading.Lock()
    parts, names = [], set()

    def slow_write(*a, **k):
        time.sleep(0.1)  # well past a 4 KB chunk's parse, even on a busy machine (0.02 s was not, at times, in CI)
        real_write(*a, **k)
        with lock:
            count["written"] += 1
            parts.append(a[2])
            names.add(threading.current_thread().name)

    def add_part(*a, **k):
        fut = real_add(*a, **k)
        with lock:
            count["parsed"] += 1
            count["most_waiting"] = max(count["most_waiting"], count["parsed"] - count["written"])
        return fut

    monkeypatch.setattr(cachemod, "_write", slow_write)
    monkeypatch.setattr(cachemod, "_add_part", add_part)
    run = rlviz_widgets.open_run(folder, cache_dir=cache_dir, progress=False)
    assert count["parsed"] >= 10 and count["written"] == count["parsed"]  # many parts, all written
    assert count["most_waiting"] <= cachemod.MAX_PENDING_WRITES + 1 == 3  # + the one just handed over
    assert len(set(parts)) == len(parts) == count["written"]
    main = threading.main_thread().name
    if writers == 1:  # the writer and the parser
        assert main in names and len(names - {main}) == 1
    else:  # both writers (the parser only now and then: the writers take each part as it comes)
        assert len(names - {main}) == 2
    assert run.n_samples == len(run.samples)
    assert run.samples["sample_id"].is_unique


def test_parts_with_and_without_missing_token_values_read_as_one(tmp_path, monkeypatch):
    """Parts whose token lists hold no missing value, one with a NaN (left empty), one with a record without
    arrays: read together, every token comes back in place."""
    from rlviz_widgets._ingest import lines

    monkeypatch.setattr(lines, "CHUNK_BYTES", 1500)
    monkeypatch.setattr(lines, "FIRST_CHUNK_BYTES", 1500)
    recs = records(0, 12) + records(1, 12, seed=5)
    recs[2] = {**recs[2], "logprobs": [float("nan")] + recs[2]["logprobs"][1:]}  # json.dumps writes NaN
    recs[20] = {k: v for k, v in recs[20].items() if k not in ("logprobs", "ref_logprobs")}
    path = tmp_path / "logs" / "rollout_rank0.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    assert len(list((tmp_path / "cache").rglob("part-*.arrow"))) > 2  # the records above are in different parts
    s = run.samples.sort_values("line").reset_index(drop=True)
    toks = run.tokens(s["sample_id"].tolist())
    assert len(toks) == int(s["n_tokens"].sum())
    for i in (0, 2, 20, 23):
        got = toks[toks["sample_id"] == s["sample_id"][i]].sort_values("position")
        want = recs[i].get("logprobs")
        if want is None:
            assert got["logprob"].isna().all() and got["token"].tolist() == recs[i]["response_tokens"]
        else:
            assert got["logprob"].tolist()[1:] == pytest.approx(want[1:], rel=1e-6)
            assert pd.isna(got["logprob"].iloc[0]) == (i == 2)


def test_a_write_runs_once_by_whoever_takes_it_and_lets_go_of_its_table():
    """The writer thread or, if it has not started the part, the thread waiting for it: once, either way.
    A written part's table is not held on to (the list of writes lives as long as the whole read)."""
    import gc
    import threading
    import weakref
    from concurrent.futures import ThreadPoolExecutor

    class Table:  # stands for a parsed part
        pass

    ran, gate = [], threading.Event()
    with ThreadPoolExecutor(1) as writer:
        writer.submit(gate.wait)  # the writer is busy with an earlier part
        table = Table()
        held = weakref.ref(table)
        waited = cachemod._Write(writer, lambda t=table: ran.append(("here", threading.current_thread().name)))
        del table
        waited.result()  # not started by the writer: written here
        gate.set()
        queued = cachemod._Write(writer, lambda: ran.append(("writer", threading.current_thread().name)))
        queued.wait()
    gc.collect()
    assert ran == [("here", threading.current_thread().name), ("writer", ran[1][1])] and ran[1][1] != ran[0][1]
    assert held() is None


def test_a_token_query_by_step_opens_only_the_parts_holding_that_step(tmp_path, monkeypatch):
    """Each part's token file carries its step range: a scan filtered by step skips the other files whole
    (Arrow files have no statistics of their own), and still finds every token of that step."""
    import pyarrow.compute as pc

    from rlviz_widgets._ingest import lines

    monkeypatch.setattr(lines, "CHUNK_BYTES", 20000)
    monkeypatch.setattr(lines, "FIRST_CHUNK_BYTES", 20000)
    write_log(tmp_path / "logs", steps=6, samples_per_step=8, tokens=30, ranks=1)
    run = rlviz_widgets.open_run(tmp_path / "logs", cache_dir=tmp_path / "cache", progress=False)
    run.sql("SELECT 1")  # the token dataset is made for the cursor
    (state,) = run.relations.files.states.values()
    assert len(state.part_steps) == len(state.parts) > 3
    step = 3
    holding = [lo <= step <= hi for lo, hi in state.part_steps].count(True)
    opened = [f.path for f in run.relations.tokens.dataset.get_fragments(filter=pc.field("step") == step)]
    assert 0 < len(opened) == holding < len(state.parts)
    got = run.sql(f"SELECT count(*) AS n FROM tokens WHERE step = {step}")["n"].iloc[0]
    assert got == run.samples.query("step == @step")["n_tokens"].sum() > 0


def test_queries_over_every_token_follow_new_lines_on_both_scan_paths(tmp_path):
    """``run.sql`` naming tokens maps every token file into one table (read on every core); a cursor from
    ``run.con`` scans them as a dataset. Both give the same answer, before and after the file grows."""
    path = tmp_path / "logs" / "rollout_rank0.jsonl"
    path.parent.mkdir()
    first, more = records(0, 10), records(1, 6, seed=4)
    path.write_text("".join(json.dumps(r) + "\n" for r in first))
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    query = "SELECT count(*) AS n, sum(kl) AS kl FROM tokens"

    def both() -> tuple:
        mapped = run.sql(query).iloc[0]
        assert run.relations.tokens.table is not None  # the mapped table answered
        # a cursor made now gets the dataset instead
        run.relations.tokens.table, kept = None, run.relations.tokens.table
        try:
            scanned = run.con.execute(query).df().iloc[0]
        finally:
            run.relations.tokens.table = kept
        assert mapped["n"] == scanned["n"] and mapped["kl"] == pytest.approx(scanned["kl"])
        return int(mapped["n"]), float(mapped["kl"])

    n_first, _ = both()
    assert n_first == run.samples["n_tokens"].sum() == sum(len(r["response_tokens"]) for r in first)
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in more))
    assert run.refresh()
    assert run.relations.tokens.table is None  # new parts: mapped again on the next query
    n_both, _ = both()
    assert n_both == n_first + sum(len(r["response_tokens"]) for r in more)


def test_a_rebuild_removes_this_logs_cache_from_earlier_package_versions(tmp_path, monkeypatch):
    """A new CACHE_VERSION builds a new cache folder; the old one (never read again) goes when the new one is
    made, and only that log's: another log's cache stays."""
    logs = tmp_path / "logs"
    write_log(logs, steps=2, samples_per_step=4, tokens=8, ranks=2)
    rank0, rank1 = sorted(logs.glob("*.jsonl"))
    cache = tmp_path / "cache"
    rlviz_widgets.open_run(rank0, cache_dir=cache, progress=False)
    rlviz_widgets.open_run(rank1, cache_dir=cache, progress=False)
    before = {p.name for p in (cache / "files").iterdir()}
    assert len(before) == 2
    monkeypatch.setattr(cachemod, "CACHE_VERSION", cachemod.CACHE_VERSION + 1)
    with pytest.warns(UserWarning, match="1 log file.s. had a cache written by an older version"):
        run = rlviz_widgets.open_run(rank0, cache_dir=cache, progress=False)  # rebuilt under the new version
    with warnings.catch_warnings():  # said once: the next open reads the new cache and says nothing
        warnings.simplefilter("error")
        rlviz_widgets.open_run(rank0, cache_dir=cache, progress=False)
    after = {p.name for p in (cache / "files").iterdir()}
    old0 = cachemod.FileCache._folder(cache.resolve(), rank0.resolve(), run.relations.reader.name,
                                      cachemod.CACHE_VERSION - 1)
    assert old0.name in before and old0.name not in after
    assert len(after) == 2 and len(after & before) == 1  # rank1's cache is untouched, rank0 has a new one
    assert run.n_samples == 4


def test_a_rebuild_keeps_an_earlier_versions_cache_that_is_in_use(tmp_path, monkeypatch):
    """The old version's folder of a log stays while a live Run of the old version reads it (its lease names
    it: another environment sharing the cache) or while another process holds its lock; it went under both."""
    logs = tmp_path / "logs"
    write_log(logs, steps=2, samples_per_step=4, tokens=8, ranks=2)
    rank0, rank1 = sorted(logs.glob("*.jsonl"))
    cache = tmp_path / "cache"
    old_run = rlviz_widgets.open_run(rank0, cache_dir=cache, progress=False)  # a live Run of the old version
    rlviz_widgets.open_run(rank1, cache_dir=cache, progress=False).close()
    old0, old1 = (cachemod.FileCache._folder(cache.resolve(), p.resolve(), "rlb", cachemod.CACHE_VERSION)
                  for p in (rank0, rank1))
    samples = old_run.samples
    first = int(samples["sample_id"].iloc[0])
    monkeypatch.setattr(cachemod, "CACHE_VERSION", cachemod.CACHE_VERSION + 1)
    with open(cache / "locks" / f"{old1.name}.lock", "a") as held:  # another process reads rank1's old cache
        fcntl.flock(held, fcntl.LOCK_EX)
        assert rlviz_widgets.open_run(rank0, cache_dir=cache, progress=False).n_samples == 4
        assert rlviz_widgets.open_run(rank1, cache_dir=cache, progress=False).n_samples == 4
    assert old0.is_dir() and old1.is_dir()
    assert old_run.samples.equals(samples)
    assert len(old_run.tokens([first])) == samples["n_tokens"].iloc[0] > 0  # still reads its parts
    old_run.close()
    assert rlviz_widgets.prune_cache(cache)["removed"].all()
    assert not old0.exists() and not old1.exists()


def test_a_relative_cache_dir_in_the_environment_is_made_absolute(tmp_path, monkeypatch):
    """$RLVIZ_CACHE_DIR=logs/cache named the log folder relatively: it escaped the check that keeps the cache out
    of the log folder (the cache was written there), and a chdir broke every query."""
    logs = tmp_path / "logs"
    write_log(logs, steps=2, samples_per_step=4, tokens=8, ranks=1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLVIZ_CACHE_DIR", "logs/cache")
    with pytest.raises(ValueError, match="inside the log folder"):
        rlviz_widgets.open_run("logs", progress=False)
    assert not (logs / "cache").exists()
    monkeypatch.setenv("RLVIZ_CACHE_DIR", "cache")
    run = rlviz_widgets.open_run("logs", progress=False)
    assert run.cache_root == tmp_path / "cache"
    monkeypatch.chdir(logs)
    first = run.samples.iloc[0]
    assert len(run.samples) == 8 and len(run.tokens(first["sample_id"])) == first["n_tokens"] > 0


def test_a_cache_dir_that_cannot_be_made_is_named_in_the_error(tmp_path, monkeypatch):
    """A cache dir under a folder that cannot be made (the default ~/.cache/rlviz_widgets in a read-only home)
    gave a bare PermissionError on that folder, without the way out."""
    logs = tmp_path / "logs"
    write_log(logs, steps=1, samples_per_step=2, tokens=4, ranks=1)
    deeper = tmp_path / "ro" / "deeper"
    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):  # the tests run as root, whom permissions do not stop
        if self == deeper:
            raise PermissionError(13, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    with pytest.raises(PermissionError, match=r"cannot write the cache in .*deeper/cache .*pass cache_dir="):
        rlviz_widgets.open_run(logs, cache_dir=deeper / "cache", progress=False)


def test_a_cursor_kept_across_a_refresh_reads_the_new_tokens(tmp_path):
    """Cursors from run.con are given the token files again when the parts change (a kept cursor saw
    the old ones: old tokens beside new samples)."""
    path = tmp_path / "logs" / "rollout_rank0.jsonl"
    path.parent.mkdir()
    first, more = records(0, 10), records(1, 6, seed=4)
    path.write_text("".join(json.dumps(r) + "\n" for r in first))
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    kept = run.con
    count = "SELECT (SELECT count(*) FROM tokens) AS t, (SELECT count(*) FROM samples) AS s"
    assert kept.execute(count).fetchall() == [(sum(len(r["response_tokens"]) for r in first), 10)]
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in more))
    assert run.refresh()
    assert kept.execute(count).fetchall() == [(sum(len(r["response_tokens"]) for r in first + more), 16)]


def test_mapping_every_token_file_during_a_refresh_keeps_no_stale_table(tmp_path, monkeypatch):
    """run.sql maps the token files while another thread refreshes: the refresh waits for the mapping and then
    drops it, so the next query reads the new parts too."""
    import threading

    from rlviz_widgets._store import token_store

    path = tmp_path / "logs" / "rollout_rank0.jsonl"
    path.parent.mkdir()
    first, more = records(0, 10), records(1, 6, seed=4)
    path.write_text("".join(json.dumps(r) + "\n" for r in first))
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    mapping, go_on = threading.Event(), threading.Event()
    real_table = token_store.table

    def slow_table(parts):
        out = real_table(parts)
        mapping.set()
        go_on.wait(5)
        return out

    monkeypatch.setattr(token_store, "table", slow_table)
    query = "SELECT count(DISTINCT sample_id) AS n FROM tokens"
    reader = threading.Thread(target=run.sql, args=(query,))
    reader.start()
    assert mapping.wait(5)  # the old parts are being mapped
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in more))
    refresher = threading.Thread(target=run.refresh)
    refresher.start()
    refresher.join(0.3)
    assert refresher.is_alive()  # it waits for the mapping
    go_on.set()
    reader.join(5)
    refresher.join(5)
    monkeypatch.setattr(token_store, "table", real_table)
    assert run.n_samples == 16 and run.sql(query)["n"].iloc[0] == 16


def test_a_log_emptied_while_open_is_read_as_empty_on_refresh(tmp_path):
    """A job restarted over its log truncates it: refresh drops its samples and says so (before, the views still
    named the parts the reset had removed, and every query failed), and reads it again once it refills."""
    path = tmp_path / "logs" / "rollout_rank0.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in records(0, 5)))
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    assert run.n_samples == 5
    path.write_text("")
    with pytest.warns(LogWarning, match="empty"):
        assert run.refresh()
    assert run.n_samples == len(run.samples) == 0 and len(run.sql("SELECT * FROM tokens")) == 0
    assert run.problems["kind"].tolist() == ["empty_file"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records(1, 3, seed=9)))
    assert run.refresh()
    assert run.n_samples == 3 and set(run.samples["step"]) == {1} and run.problems.empty


@pytest.mark.parametrize("last", ["complete", "unfinished"])
def test_lines_written_while_a_refresh_reads_are_kept(tmp_path, monkeypatch, last):
    """The job appends right after the refresh's reader reached the end of the file. Those lines were lost for
    good (the unfinished-line check looked only after the file's last newline), a complete line was reported
    as unfinished, and a last record without its newline got the line before it's number. Now they are left
    for the next refresh, which reads them all, with the right line numbers."""
    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    recs = records(0, 8)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs[:4]))
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    real = cachemod.linereader.read_chunks

    def read_then_the_job_writes(*a, **kw):
        yield from real(*a, **kw)
        with open(path, "a") as f:
            f.write(json.dumps(recs[5]) + "\n" + json.dumps(recs[6]) + ("\n" if last == "complete" else ""))

    with open(path, "a") as f:
        f.write(json.dumps(recs[4]) + "\n")
    monkeypatch.setattr(cachemod.linereader, "read_chunks", read_then_the_job_writes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to report: no line is unfinished as of what was read
        run.refresh()
    monkeypatch.setattr(cachemod.linereader, "read_chunks", real)
    assert run.samples.sort_values("line")["line"].tolist() == [1, 2, 3, 4, 5] and run.problems.empty
    run.refresh()  # the job wrote nothing since: what it wrote during the last refresh is read now
    if last == "complete":
        assert run.samples.sort_values("line")["line"].tolist() == [1, 2, 3, 4, 5, 6, 7] and run.problems.empty
    else:  # a record without its newline yet: read as it is (valid JSON), its newline expected later
        assert run.samples.sort_values("line")["line"].tolist() == [1, 2, 3, 4, 5, 6, 7]
    with open(path, "a") as f:
        f.write(("" if last == "complete" else "\n") + json.dumps(recs[7]) + "\n")
    run.refresh()

    def check(r):
        s = r.samples.sort_values("line")
        assert s["line"].tolist() == list(range(1, 9)) and r.problems.empty
        assert s["reward"].tolist() == pytest.approx([x["reward"] for x in recs])

    check(run)
    check(rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False))


def test_a_deleted_log_file_leaves_the_run_on_refresh(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    for rank in (0, 1):
        (folder / f"r{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records(0, 3, seed=rank)))
    run = rlviz_widgets.open_run(folder, cache_dir=tmp_path / "cache", progress=False)
    assert run.n_samples == 6
    (folder / "r1.jsonl").unlink()
    with pytest.warns(LogWarning, match="gone"):
        assert run.refresh()
    assert run.n_samples == len(run.samples) == 3 and {p.rsplit("/", 1)[-1] for p in run.files["file"]} == {"r0.jsonl"}
    assert_same_as_fresh(run, folder, tmp_path)


def test_blanks_after_the_last_newline_are_no_line_cold_or_warm(tmp_path):
    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in records(0, 2)) + "   ")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):  # cold, then warm: the same answer, and nothing to warn about
            run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
            assert run.problems.empty and run.n_samples == 2
        assert not run.refresh()


def test_a_followed_log_keeps_few_parts(tmp_path, monkeypatch):
    """Each refresh of a growing log adds a part; followed for hours a log became thousands of parts, and every
    refresh and open slowed with their number. Refreshes merge the small trailing parts; the files merged away
    stay for a grace time (a Run opened earlier still reads them), then go."""
    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    recs = records(0, 60)
    path.write_text(json.dumps(recs[0]) + "\n")
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    other = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    for r in recs[1:]:
        with open(path, "a") as f:
            f.write(json.dumps(r) + "\n")
        assert run.refresh()
    state = next(iter(run.relations.files.states.values()))
    assert len(state.parts) <= 6 and len(state.retired) > 50
    assert run.samples.sort_values("line")["reward"].tolist() == pytest.approx([r["reward"] for r in recs])
    assert_same_as_fresh(run, path.parent, tmp_path)
    assert other.n_samples == len(other.samples) == 1 and len(other.tokens(other.samples["sample_id"])) > 0
    reopened = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    assert reopened.n_samples == 60
    monkeypatch.setattr(cachemod, "RETIRED_GRACE_S", 0.0)
    with open(path, "a") as f:
        f.write(json.dumps(records(1, 1)[0]) + "\n")
    assert run.refresh()
    state = next(iter(run.relations.files.states.values()))
    cache_files = {p.name for p in run.relations.files.caches[str(path.resolve())].dir.glob("part-*")}
    assert len(state.retired) <= 6  # only what this refresh merged away: the older ones are deleted
    assert cache_files == {f"part-{p}{s}" for p in state.parts for s in (".parquet", ".arrow")} | {
        f"part-{p}{s}" for p, _ in state.retired for s in (".parquet", ".arrow")}
    assert run.n_samples == 61


def test_a_rebuild_leaves_other_runs_on_the_cache_working(tmp_path):
    """A log rewritten and opened again used to delete the parts every other Run on that cache (other threads,
    other kernels) still read: their next query failed. The old parts now stay until the grace time ends."""
    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in records(0, 5)))
    first = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    path.write_text("".join(json.dumps(r) + "\n" for r in records(1, 3, seed=8)))  # a new job, another log
    second = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    assert second.n_samples == 3 and set(second.samples["step"]) == {1}
    assert len(first.samples) == 5 and len(first.tokens(first.samples["sample_id"])) > 0  # stale, but it answers
    assert len(first.sql("SELECT * FROM tokens")) > 0
    assert first.refresh() and first.n_samples == 3


def test_two_processes_opening_one_log_at_once(tmp_path):
    """Two kernels opening the same logs into one cache at the same time: the second waits for the first's
    build (a lock per log file) and reads nothing; before, each deleted the other's parts and one failed."""
    import subprocess
    import sys

    write_log(tmp_path / "logs", steps=30, samples_per_step=32, tokens=64, ranks=2, seed=5)
    code = ("import rlviz_widgets as rw, sys\n"
            f"run = rw.open_run({str(tmp_path / 'logs')!r}, cache_dir={str(tmp_path / 'cache')!r}, progress=False)\n"
            "print(run.n_samples, len(run.samples), len(run.tokens(run.samples['sample_id'][:3])))\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-800:]
    assert len({out for out, _ in outs}) == 1 and outs[0][0].split()[:2] == ["960", "960"]
    states = [json.loads(f.read_text()) for f in (tmp_path / "cache").glob("files/*/state.json")]
    on_disk = {f.name for f in (tmp_path / "cache").glob("files/*/part-*.parquet")}
    assert on_disk == {f"part-{p}.parquet" for st in states for p in st["parts"]}  # no part built twice


def test_queries_in_other_threads_while_refresh_runs(tmp_path):
    """run.sql over tokens, run.tokens and run.samples in threads while the main thread appends and refreshes:
    no query fails. Before, a new cursor could be registered for the token files just before a refresh renamed
    them (CatalogException), and a refresh re-registered cursors busy in other threads (connection is busy)."""
    import threading

    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in records(0, 20)))
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    ids = list(run.samples["sample_id"][:4])
    stop, errors, calls = threading.Event(), [], []

    def loop(fn):
        while not stop.is_set():
            try:
                fn()
                calls.append(1)
            except Exception as e:  # noqa: BLE001 - every failure is the finding
                errors.append(repr(e)[:200])

    threads = [threading.Thread(target=loop, args=(f,)) for f in (
        lambda: run.sql("SELECT count(*) FROM tokens"), lambda: run.tokens(ids), lambda: run.samples)]
    for t in threads:
        t.start()
    try:
        for k in range(25):
            with open(path, "a") as f:
                f.write(json.dumps(records(k + 1, 1, seed=k)[0]) + "\n")
            run.refresh()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == [] and len(calls) > 25
    assert run.n_samples == 45


def test_a_cache_dir_we_cannot_write_is_named(tmp_path, monkeypatch):
    """(As root no folder is unwritable: the refusal the OS would give is made here.)"""
    write_log(tmp_path / "logs", steps=1, samples_per_step=2, tokens=4, ranks=1)

    def refuse(*a, **kw):
        raise PermissionError(13, "Permission denied", str(tmp_path / "cache" / "file_numbers.lock"))

    monkeypatch.setattr(file_numbers, "assign", refuse)
    with pytest.raises(PermissionError, match=r"cannot write the cache in .*cache.*RLVIZ_CACHE_DIR"):
        rlviz_widgets.open_run(tmp_path / "logs", cache_dir=tmp_path / "cache", progress=False)


def test_merged_parts_with_a_field_of_two_types(tmp_path):
    """A custom field that is a number in one refresh's records and text in another's: the merged part holds it
    as text (as a part mixing both does); other columns appear in later parts only."""
    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    recs = records(0, 6)
    path.write_text(json.dumps(dict(recs[0], tag=1.5)) + "\n")
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    for i, r in enumerate(recs[1:], 1):
        extra = {"tag": "x"} if i % 2 else {"tag": 2.0, f"only{i}": i}
        with open(path, "a") as f:
            f.write(json.dumps(dict(r, **extra)) + "\n")
        assert run.refresh()
    state = next(iter(run.relations.files.states.values()))
    assert len(state.parts) < 6
    s = run.samples.sort_values("line")
    assert s["tag"].tolist() == ["1.5", "x", "2.0", "x", "2.0", "x"] and s["only2"].tolist()[2] == 2
    fresh = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "fresh", progress=False)
    # custom columns come in the order first seen: read at once, they are in one order, read in refreshes another
    pd.testing.assert_frame_equal(frame(run), frame(fresh)[frame(run).columns])


def test_retired_parts_of_a_log_left_alone_are_deleted(tmp_path, monkeypatch):
    """A log rewritten, opened (its old parts retired), then never changed again: the old parts go once their
    grace time is over, at the next open or refresh, though nothing is read."""
    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in records(0, 5)))
    rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    path.write_text("".join(json.dumps(r) + "\n" for r in records(1, 3, seed=8)))
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    folder = run.relations.files.caches[str(path.resolve())].dir
    assert len(list(folder.glob("part-*"))) == 4  # the new part and the retired one, each .parquet + .arrow
    monkeypatch.setattr(cachemod, "RETIRED_GRACE_S", 0.0)
    again = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    assert len(list(folder.glob("part-*"))) == 2 and again.n_samples == 3
    assert not run.refresh() and run.n_samples == 3 and len(run.tokens(run.samples["sample_id"])) > 0


def test_a_run_never_refreshed_keeps_its_parts_while_it_lives(tmp_path, monkeypatch):
    """A plain Run beside a followed one: the follower's refreshes merge the parts the plain Run reads, and
    once the grace time was over its next refresh deleted them: the plain Run's queries failed. A live Run's
    parts are now leased (``leases``): kept while it lives, deleted once it is gone."""
    import gc

    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    recs = records(0, 6)
    path.write_text(json.dumps(recs[0]) + "\n")
    plain = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    followed = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    monkeypatch.setattr(cachemod, "RETIRED_GRACE_S", 0.0)  # as if long after
    for r in recs[1:]:
        with open(path, "a") as f:
            f.write(json.dumps(r) + "\n")
        assert followed.refresh()
    assert plain.n_samples == len(plain.samples) == 1 and len(plain.tokens(plain.samples["sample_id"])) > 0
    folder = followed.relations.files.caches[str(path.resolve())].dir
    plain_part = {f"part-{p}.parquet" for p in plain.relations.files.states[str(path.resolve())].parts}
    assert plain_part <= {f.name for f in folder.glob("part-*")}
    del plain
    gc.collect()
    with open(path, "a") as f:
        f.write(json.dumps(records(1, 1)[0]) + "\n")
    assert followed.refresh() and followed.n_samples == 7
    state = followed.relations.files.states[str(path.resolve())]
    assert not plain_part & {f.name for f in folder.glob("part-*")}  # gone with the Run that read it
    assert {f.name for f in folder.glob("part-*.parquet")} == {f"part-{p}.parquet" for p in state.parts} | {
        f"part-{p}.parquet" for p, _ in state.retired}


def test_a_lease_of_a_dead_process_holds_nothing(tmp_path, monkeypatch):
    """A kernel killed leaves its lease behind: a lease whose process is gone is ignored and removed."""
    from rlviz_widgets._store import leases

    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(records(0, 1)[0]) + "\n")
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    part = run.relations.parts()[0][1]
    dead = tmp_path / "cache" / "leases" / "dead.json"
    dead.write_text(json.dumps({"host": leases._HOST, "pid": 2 ** 22 + 12345, "parts": [leases.key(part)]}))
    other_host = tmp_path / "cache" / "leases" / "elsewhere.json"
    other_host.write_text(json.dumps({"host": "another-host", "pid": 1, "parts": ["x/part-1"]}))
    assert leases.in_use(tmp_path / "cache") == {leases.key(part), "x/part-1"}  # this run's own, the other host's
    assert not dead.exists() and other_host.exists()
    del run
    import gc

    gc.collect()
    assert leases.in_use(tmp_path / "cache") == {"x/part-1"}


def test_parts_of_a_killed_refresh_are_collected(tmp_path, monkeypatch):
    """A refresh killed between writing its parts and saving the state (kernel killed, Ctrl-C) left parts no
    state names, and temporary files, for good. They are now retired (then deleted) by the file's next read."""
    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in records(0, 3)))
    run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    folder = run.relations.files.caches[str(path.resolve())].dir
    real_save = cachemod.FileCache.save

    def killed(self, state):
        raise KeyboardInterrupt

    for k in range(3):
        with open(path, "a") as f:
            f.write(json.dumps(records(k + 1, 1, seed=k)[0]) + "\n")
        monkeypatch.setattr(cachemod.FileCache, "save", killed)
        with pytest.raises(KeyboardInterrupt):
            run.refresh()
        monkeypatch.setattr(cachemod.FileCache, "save", real_save)
    stale_tmp = folder / ".part-00009-deadbeef.tmp"
    stale_tmp.write_bytes(b"half a part")
    os.utime(stale_tmp, (0, 0))  # written long ago
    assert len(list(folder.glob("part-*.parquet"))) > 3  # the killed refreshes' parts, named nowhere
    del run
    monkeypatch.setattr(cachemod, "RETIRED_GRACE_S", 0.0)  # as if long after
    with open(path, "a") as f:
        f.write(json.dumps(records(9, 1)[0]) + "\n")
    again = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    assert again.n_samples == 7
    state = again.relations.files.states[str(path.resolve())]
    on_disk = {f.name for f in folder.glob("part-*.parquet")}
    assert on_disk == {f"part-{p}.parquet" for p in state.parts} | {f"part-{p}.parquet" for p, _ in state.retired}
    again.refresh()
    with open(path, "a") as f:
        f.write(json.dumps(records(10, 1)[0]) + "\n")
    assert again.refresh()
    state = again.relations.files.states[str(path.resolve())]
    assert {f.name for f in folder.glob("part-*.parquet")} <= {f"part-{p}.parquet" for p in state.parts} | {
        f"part-{p}.parquet" for p, _ in state.retired} and len(state.retired) <= 4
    assert not stale_tmp.exists()


def test_a_short_line_appended_is_read_on_refresh(tmp_path, open_run):
    """A job appending a line of fewer than 16 bytes, then a short last line without its newline: the refresh
    failed (the reading of those bytes alone made a key window numpy refused); a fresh open of the same bytes
    worked. Both now read and report them alike."""
    log = tmp_path / "logs" / "rank0.jsonl"
    log.parent.mkdir()
    log.write_text(json.dumps({"step": 0, "prompt": "p", "response": "r", "reward": 1.0}) + "\n")
    run = open_run(log.parent)
    for more in ('{"step": 1}\n', '{"a":1}'):
        with open(log, "a") as f:
            f.write(more)
        run.refresh()
    fresh = open_run(log.parent, cache_dir=tmp_path / "fresh")
    assert len(run.samples) == len(fresh.samples) == 2  # a record without its reward is kept, reward empty
    assert sorted(run.problems[["line", "kind"]].itertuples(index=False)) == \
        sorted(fresh.problems[["line", "kind"]].itertuples(index=False))
    assert set(run.problems.line) == {2, 3}


def test_files_counts_the_problems_the_run_finds_across_parts(tmp_path, open_run):
    """A list appended in a field of numbers is reported by the run when the numbers are in another part (a grown
    log), by the reader when they share one (a fresh open): run.files["problems"] counted only the second."""
    rec = lambda acc: json.dumps({"step": 0, "prompt": "p", "response": "r", "reward": 1.0, "acc": acc}) + "\n"  # noqa: E731
    log = tmp_path / "logs" / "r.jsonl"
    log.parent.mkdir()
    log.write_text(rec(0.5))
    run = open_run(log.parent)
    with open(log, "a") as f:
        f.write(rec([1, 2]))
    run.refresh()
    fresh = open_run(log.parent, cache_dir=tmp_path / "fresh")
    for r in (run, fresh):
        assert r.problems[["line", "kind"]].values.tolist() == [[2, "wrong_type"]]
        assert r.files["problems"].tolist() == [1]


def test_refresh_says_a_new_empty_file_changed_the_problems(tmp_path, open_run):
    """A rank that has made its file but written nothing yet: reported (empty_file), but refresh() said nothing
    changed, so a followed view kept its old count of problems."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.jsonl").write_text(json.dumps({"step": 0, "prompt": "p", "response": "r", "reward": 1.0}) + "\n")
    run = open_run(logs)
    generation = run.generation
    (logs / "rank1.jsonl").write_bytes(b"")
    with pytest.warns(UserWarning, match="empty"):
        assert run.refresh() is True
    assert run.problems.kind.tolist() == ["empty_file"] and run.generation > generation
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run.refresh() is False  # said once


def test_parts_merged_by_a_refresh_that_brings_no_record_stay_leased(tmp_path, open_run, monkeypatch):
    """The newline of a last line already taken without it: the refresh reads no record, but merges the file's
    small parts. Its Run then read the merged part without holding it (the lease is renewed with the views, and
    nothing had changed), so another Run's merge deleted it and the first one's tokens() failed."""
    monkeypatch.setattr(cachemod, "RETIRED_GRACE_S", 0.0)
    rec = lambda i: json.dumps({"step": 0, "prompt": "p", "response": f"r{i}", "reward": 1.0,  # noqa: E731
                                "response_tokens": ["a", "b"], "logprobs": [-0.5, -0.25]})
    log = tmp_path / "logs" / "r.jsonl"
    log.parent.mkdir()
    log.write_text(rec(1) + "\n")
    a = open_run(log.parent)
    monkeypatch.setattr(cachemod, "COMPACT_BYTES", 0)  # no merge yet (as when the parts are too big to)
    with open(log, "a") as f:
        f.write(rec(2))  # a last line without its newline: taken
    assert a.refresh() is True
    monkeypatch.setattr(cachemod, "COMPACT_BYTES", 16 << 20)
    with open(log, "a") as f:
        f.write("\n")  # its newline: nothing new, the parts merged
    assert a.refresh() is False
    with open(log, "a") as f:
        f.write(rec(3) + "\n")
    b = open_run(log.parent)  # reads line 3 and merges again: what a reads must not go
    assert len(a.tokens(a.samples.sample_id.tolist())) == 4 and len(b.samples) == 3


def test_refresh_sees_a_problem_another_run_read_first_in_its_place(tmp_path, open_run):
    """A file with no record: empty, then one bad line that another Run reads first. This one's refresh compared
    the number of problems only (1 and 1): it said nothing changed and warned of nothing, though its problem was
    another."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.jsonl").write_text(json.dumps({"step": 0, "prompt": "p", "response": "r", "reward": 1.0}) + "\n")
    (logs / "rank1.jsonl").write_bytes(b"")
    a = open_run(logs)
    assert a.problems.kind.tolist() == ["empty_file"]
    (logs / "rank1.jsonl").write_text("not json\n")
    open_run(logs)  # another kernel reads it first
    with pytest.warns(UserWarning, match="malformed"):
        assert a.refresh() is True
    assert a.problems.kind.tolist() == ["malformed_json"]


def test_a_growing_log_opened_again_and_again_keeps_few_parts(tmp_path):
    """Only refreshes merged parts: a growing log opened again and again (a notebook re-run, a script every few
    minutes) gained a part per open, never merged. An open reading on where the last read stopped merges too."""
    path = tmp_path / "logs" / "r0.jsonl"
    path.parent.mkdir()
    recs = records(0, 40)
    path.write_text(json.dumps(recs[0]) + "\n")
    for r in recs[1:]:
        with open(path, "a") as f:
            f.write(json.dumps(r) + "\n")
        run = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False)
    assert len(run.relations.files.states[str(path.resolve())].parts) <= 6
    assert run.samples.sort_values("line")["reward"].tolist() == pytest.approx([r["reward"] for r in recs])
    assert_same_as_fresh(run, path.parent, tmp_path)


def test_a_refresh_swaps_the_runs_file_dicts_whole(tmp_path):
    """A refresh that found new files changed the run's dicts of files in place: a query in another thread
    iterating them (every SQL over the parts, ``rows``, ``files``) failed now and then with "dictionary changed
    size during iteration" (58 of ~1M calls with 60 files joining). The refresh now builds new dicts and swaps
    them in whole, so what a query iterates never changes under it."""
    logs = tmp_path / "logs"
    write_lines(logs / "r0.jsonl", records(0, 1))
    run = rlviz_widgets.open_run(logs, cache_dir=tmp_path / "cache", progress=False)
    states, caches = run.relations.files.states, run.relations.files.caches
    seen = (dict(states), dict(caches))
    write_lines(logs / "r1.jsonl", records(1, 1, seed=1))
    (logs / "r0.jsonl").unlink()
    with pytest.warns(LogWarning, match="file_removed|gone"):
        assert run.refresh()
    assert (states, caches) == seen  # the dicts a query may be iterating are left as they were
    assert list(run.relations.files.states) == [str((logs / "r1.jsonl").resolve())] and run.n_samples == 1


def test_a_last_record_continued_between_plan_and_read(tmp_path, open_run, monkeypatch):
    """A record taken without its newline, then continued by the job after the refresh planned its read but
    before it read: the continuation was read as lines of its own (the record kept, numbers one off). The file
    is read again from its start, as a fresh open reads it."""
    folder = tmp_path / "logs"
    lines = [json.dumps(r) for r in records(step=0, n=4)]
    f = write_lines(folder / "rank0.jsonl", [lines[0], lines[1]], newline_at_end=False)
    run = open_run(folder)
    with open(f, "ab") as fh:
        fh.write(b" ")  # the plan sees blanks after the record: read on
    real = cachemod.update_files

    def job_goes_on(con, jobs, *a, **kw):
        with open(f, "ab") as fh:
            fh.write((lines[2] + "\n" + lines[3] + "\n").encode())
        monkeypatch.setattr(cachemod, "update_files", real)
        return real(con, jobs, *a, **kw)

    monkeypatch.setattr(cachemod, "update_files", job_goes_on)
    with pytest.warns(LogWarning):
        assert run.refresh()
    assert run.samples["line"].tolist() == [1, 3]
    assert run.problems[["line", "kind"]].values.tolist() == [[2, "malformed_json"]]
    assert run.refresh() is False
    assert_same_as_fresh(run, folder, tmp_path)


def test_close_releases_the_lease_and_a_with_block_closes(tmp_path):
    from rlviz_widgets._store import leases

    write_lines(tmp_path / "logs" / "r0.jsonl", records(0, 2))
    run = rlviz_widgets.open_run(tmp_path / "logs", cache_dir=tmp_path / "cache", progress=False)
    assert leases.in_use(tmp_path / "cache") == {leases.key(p) for _, p in run.relations.parts()}
    run.close()
    assert leases.in_use(tmp_path / "cache") == set()
    # a with block closes it (there was no way but close())
    with rlviz_widgets.open_run(tmp_path / "logs", cache_dir=tmp_path / "cache", progress=False) as run:
        assert len(run.samples) == 2 and "  problems: none" in repr(run)  # was "problems: 0"
        assert leases.in_use(tmp_path / "cache")
    assert leases.in_use(tmp_path / "cache") == set()


def test_a_field_of_numbers_and_text_reads_alike_however_the_lines_fall_into_parts(tmp_path, monkeypatch):
    """Numbers of a field that also holds text were "18" where a part held both and "18.0" where a part held only
    numbers (DuckDB turns those to text when it reads them with the others): the same log gave other values
    read in small chunks than in one."""
    from rlviz_widgets._ingest import lines as linereader

    path = tmp_path / "logs" / "r0.jsonl"
    recs = [dict(r, score=i if i < 30 else f"t{i}") for i, r in enumerate(records(0, 60))]
    write_lines(path, recs)
    for name, size in (("CHUNK_BYTES", 4000), ("FIRST_CHUNK_BYTES", 4000), ("LAST_CHUNK_BYTES", 2000)):
        monkeypatch.setattr(linereader, name, size)
    small = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "small", progress=False)
    assert len(small.relations.files.states[str(path.resolve())].parts) > 3
    monkeypatch.undo()
    whole = rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "whole", progress=False)
    assert len(whole.relations.files.states[str(path.resolve())].parts) == 1
    expected = [repr(float(i)) for i in range(30)] + [f"t{i}" for i in range(30, 60)]
    assert frame(small)["score"].tolist() == frame(whole)["score"].tolist() == expected
    pd.testing.assert_frame_equal(frame(small), frame(whole))


def test_problems_another_run_read_first_are_news(tmp_path):
    """Two Runs on one cache (two kernels, two views): when the other read a malformed line first, this one found
    nothing left to read and said nothing changed: its problems (and a view's count of them) stayed old."""
    logs = tmp_path / "logs"
    f = write_lines(logs / "r0.jsonl", records(0, 2))
    first = rlviz_widgets.open_run(logs, cache_dir=tmp_path / "cache", progress=False)
    other = rlviz_widgets.open_run(logs, cache_dir=tmp_path / "cache", progress=False)
    with open(f, "a") as fh:
        fh.write('{"step": 1, "prompt": oops}\n')
    with pytest.warns(LogWarning):
        assert other.refresh()
    with pytest.warns(LogWarning, match="malformed"):
        assert first.refresh() is True
    assert first.problems[["line", "kind"]].values.tolist() == [[3, "malformed_json"]]
    assert first.refresh() is False


def _opened_both_ways(source, tmp_path, monkeypatch, **options) -> tuple:
    """The run of ``source`` opened with small files parsed together (as usual) and one by one (``BATCH_BYTES``
    0), each in its own cache dir; and how many queries parsed the first."""
    queries = []
    real_parse = RLBReader._parse

    def counted(self, con, chunk, steps):
        queries.append(len(steps))
        return real_parse(self, con, chunk, steps)

    monkeypatch.setattr(RLBReader, "_parse", counted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        together = rlviz_widgets.open_run(source, cache_dir=tmp_path / "together", progress=False, **options)
        with monkeypatch.context() as m:
            m.setattr(cachemod, "BATCH_BYTES", 0)
            apart = rlviz_widgets.open_run(source, cache_dir=tmp_path / "apart", progress=False, **options)
    return together, apart, queries


def _same(a, b) -> None:
    key = ["file", "line"]
    pd.testing.assert_frame_equal(a.samples.sort_values(key).reset_index(drop=True),
                                  b.samples.sort_values(key).reset_index(drop=True))
    pd.testing.assert_frame_equal(a.problems.sort_values(["file", "line", "kind", "message"]).reset_index(drop=True),
                                  b.problems.sort_values(["file", "line", "kind", "message"]).reset_index(drop=True))
    ids = a.samples["sample_id"].tolist()
    pd.testing.assert_frame_equal(a.tokens(ids), b.tokens(ids))
    pd.testing.assert_frame_equal(a.steps, b.steps)


def test_many_small_files_parsed_together_read_as_each_alone(tmp_path, monkeypatch):
    """A log of many small files (a file per step) took a query per file, ~8 ms each: 200 files of 365 KB opened
    in 3.2 s against 0.4 s for the same records in one file. Small files are now parsed several at once; what the
    run holds is the same as when each is parsed alone: samples, tokens, steps, problems (each in its own file and
    line), custom fields only some files have, a field of numbers in one file and text in another."""
    folder = tmp_path / "logs"
    rng = random.Random(5)
    for k in range(30):
        recs = [make_record(rng, k, i, 6, progress=k / 30) for i in range(3)]
        if k % 3 == 0:
            recs[1]["only_here"] = k  # a custom field in some files only
        recs[2]["mixed"] = k if k % 2 else f"t{k}"  # numbers in one file, text in the next
        lines = [json.dumps(r) for r in recs]
        if k % 7 == 0:
            lines.insert(1, "{not json")
        if k % 5 == 0:
            lines.append(json.dumps(dict(recs[0], reward=float("nan")), allow_nan=True))
        if k % 11 == 0:
            lines.insert(0, "")
        tail = "" if k == 29 else "\n"  # the last file's last record has no newline
        (folder / f"r{k:02d}.jsonl").parent.mkdir(exist_ok=True)
        (folder / f"r{k:02d}.jsonl").write_text("\n".join(lines) + tail)
    together, apart, queries = _opened_both_ways(folder, tmp_path, monkeypatch)
    _same(together, apart)
    assert len(together.samples) == 30 * 3 + 6 and set(together.problems["kind"]) == {
        "malformed_json", "nan", "empty_line"}
    # each file's part as that file alone gives it: a file of numbers keeps numbers (parsed with files of text,
    # they were stored as text)
    for cache in ("together", "apart"):
        alone = rlviz_widgets.open_run(folder / "r01.jsonl", cache_dir=tmp_path / cache, progress=False)
        assert alone.samples["mixed"].dropna().tolist() == [1.0] and alone.samples["mixed"].dtype == float
    parsed_together = queries[:len(queries) - 31]  # the rest: the files one by one, and the last record
    assert len(parsed_together) < 5 and sum(parsed_together) >= 30
    # and as it grows: each file gets a line, read as a refresh (small reads, parsed together too)
    for k in range(30):
        with open(folder / f"r{k:02d}.jsonl", "a") as f:
            f.write(("\n" if k == 29 else "") + json.dumps(make_record(rng, 40, k, 6, progress=1.0)) + "\n")
    assert together.refresh() is True and apart.refresh() is True
    _same(together, apart)


def test_per_step_files_of_other_formats_parsed_together(tmp_path, monkeypatch):
    """verl and NeMo-RL write a file per step, the step in its name (read for records without one; NeMo's groups
    are named by it): parsed together, each record keeps its own file's step and group."""
    from formats import write_nemo, write_verl

    write_verl(tmp_path / "verl", steps=range(1, 13), with_step=False)
    together, apart, _ = _opened_both_ways(tmp_path / "verl", tmp_path / "v", monkeypatch, format="verl")
    _same(together, apart)
    assert sorted(set(together.samples["step"])) == list(range(1, 13))
    write_nemo(tmp_path / "nemo", steps=range(1, 9))
    together, apart, _ = _opened_both_ways(tmp_path / "nemo", tmp_path / "n", monkeypatch, format="nemo")
    _same(together, apart)
    groups = together.samples.groupby("step")["group_id"].nunique()
    assert groups.tolist() == [2] * 8 and together.samples["group_id"].str.match(r"^\d+:").all()


def test_a_batch_of_small_files_is_capped(tmp_path, monkeypatch):
    """Thousands of tiny files: a batch holds at most BATCH_CHUNKS of them (its size was checked by summing every
    chunk held, at each new one, and its split takes a pass per chunk)."""
    folder = tmp_path / "logs"
    rng = random.Random(2)
    for k in range(10):
        write_lines(folder / f"r{k}.jsonl", [make_record(rng, k, 0, 4, progress=0.5)])
    monkeypatch.setattr(cachemod, "BATCH_CHUNKS", 3)
    together, apart, queries = _opened_both_ways(folder, tmp_path, monkeypatch)
    _same(together, apart)
    assert queries[:4] == [3, 3, 3, 1] and len(together.samples) == 10


def test_a_file_saved_empty_is_said_empty_as_a_fresh_open_says_it(tmp_path):
    """A rank file emptied while a Run read it (a job restarting) left a cache state of an empty file without the
    ``empty_file`` problem, which an open on that cache then never said, while a fresh open did (found by two
    processes refreshing one cache while a job rewrote its files)."""
    path = tmp_path / "logs" / "r1.jsonl"
    path.parent.mkdir()
    (tmp_path / "logs" / "r0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records(0, 2)))
    path.write_text("")
    reader = RLBReader()
    cache = cachemod.FileCache(tmp_path / "cache", path.resolve(), reader.name)
    cache.dir.mkdir(parents=True)
    st = os.stat(path)
    cache.save(cachemod.FileState(path=str(path.resolve()), reader=reader.name, size=0, mtime_ns=st.st_mtime_ns,
                                  epoch="e"))  # as such a read saves it
    kinds = [k for k in rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "cache", progress=False).problems.kind]
    fresh = [k for k in rlviz_widgets.open_run(path.parent, cache_dir=tmp_path / "fresh", progress=False).problems.kind]
    assert kinds == fresh == ["empty_file"]



def test_custom_columns_come_in_the_same_order_however_the_file_was_read(tmp_path):
    """Each file's custom columns by the line that first holds them: a cold open (whose one part listed its keys by
    name) and an open that read the file as it grew gave ``zz, aa`` and ``aa, zz``."""
    folder = tmp_path / "logs"
    folder.mkdir()
    log = folder / "x.jsonl"
    lines = [b'{"step": 0, "prompt": "p", "response": "r", "reward": 1.0, "zz": 1}\n',
             b'{"step": 0, "prompt": "p", "response": "r", "reward": 2.0, "aa": 2, "Zz": 3}\n',
             b'{"step": 1, "prompt": "p", "response": "r", "reward": 3.0, "bb": 4, "ab": 5}\n']
    log.write_bytes(lines[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grown = rlviz_widgets.open_run(folder, cache_dir=tmp_path / "grown", progress=False)
        for line in lines[1:]:
            with log.open("ab") as f:
                f.write(line)
            assert grown.refresh() is True
        cold = rlviz_widgets.open_run(folder, cache_dir=tmp_path / "cold", progress=False)
    for run in (grown, cold):
        custom = [c for c in run.columns if c in ("zz", "aa", "ab", "bb") or c.lower().startswith("zz_")]
        # by line, then by name (upper case first); Zz's plain name is zz's, which came first
        assert custom[0] == "zz" and custom[1].lower().startswith("zz_") and custom[2:] == ["aa", "ab", "bb"], custom
    assert grown.columns == cold.columns
    pd.testing.assert_frame_equal(grown.samples, cold.samples)


def _records(n_steps, per_step, seed=0, tokens=6):
    rng = random.Random(seed)
    return [make_record(rng, s, i, tokens, progress=0.5) for s in range(n_steps) for i in range(per_step)]


@pytest.mark.parametrize("where", ["first", "last"])
def test_a_grown_file_whose_first_or_last_read_bytes_changed_is_read_again(tmp_path, monkeypatch, open_run, where):
    """A grown file keeps its cache only if the bytes read are unchanged at both ends (each hash covers 4 KB)."""
    parsed: list[int] = []  # every line number the JSON parser is given
    real = rlbmod.RLBReader._parse

    def spy(self, con, chunk, steps):
        parsed.extend(chunk.numbers.tolist())
        return real(self, con, chunk, steps)

    monkeypatch.setattr(rlbmod.RLBReader, "_parse", spy)
    path = tmp_path / "logs" / "r0.jsonl"
    recs = _records(1, 40, tokens=12)
    write_lines(path, recs)
    assert path.stat().st_size > 3 * 4096  # an edit at one end is seen by that end's hash alone
    open_run(path.parent)
    lines = path.read_bytes().split(b"\n")
    k = 0 if where == "first" else len(recs) - 1
    old = json.dumps(recs[k]["reward"]).encode()
    new = (b"9" if old[:1] != b"9" else b"8") + old[1:]  # same length
    assert lines[k].count(b'"reward": ' + old) == 1
    lines[k] = lines[k].replace(b'"reward": ' + old, b'"reward": ' + new)
    path.write_bytes(b"\n".join(lines) + json.dumps(_records(1, 1, seed=9)[0]).encode() + b"\n")  # and grown
    parsed.clear()
    run = open_run(path.parent)
    assert parsed == list(range(1, 42))  # told changed by the plan: read once, from the start
    assert run.samples.set_index("line").loc[k + 1, "reward"] == float(new)
    assert len(run.samples) == 41


def _followed(tmp_path, open_run, n=9):
    """A log followed by refreshes, one new record (of a new step) each: its small parts get merged."""
    path = tmp_path / "logs" / "r0.jsonl"
    recs = _records(n, 1)
    write_lines(path, recs[:1])
    run = open_run(path.parent)
    for r in recs[1:]:
        with open(path, "a") as f:
            f.write(json.dumps(r) + "\n")
        assert run.refresh()
    (state,) = run.relations.files.states.values()
    assert len(state.parts) < n  # parts were merged
    return run, recs


def test_each_sample_of_a_followed_log_is_found_alone(tmp_path, open_run):
    """A merged part's line range covers every line of the parts it replaced."""
    run, recs = _followed(tmp_path, open_run)
    for row in run.samples.itertuples():
        assert run.rows([row.sample_id])["line"].tolist() == [row.line]
        assert len(run.tokens(row.sample_id)) == row.n_tokens > 0


def test_tokens_by_step_of_a_followed_log_on_a_cursor(tmp_path, open_run):
    """A merged part's step range (the token dataset skips files by it) covers every step it holds."""
    run, recs = _followed(tmp_path, open_run)
    s = run.samples
    con = run.con  # the token files as a dataset, each file's step range its partition
    for step in range(len(recs)):
        got = con.execute(f"SELECT count(*) FROM tokens WHERE step = {step}").fetchone()[0]
        assert got == s.loc[s["step"] == step, "n_tokens"].sum() > 0, step


@pytest.mark.parametrize("options", [{}, {"steps": (1, 6)}])
def test_a_refresh_updates_the_number_table_by_what_changed(tmp_path, open_run, options, monkeypatch):
    """A refresh rebuilt the in-memory numbers from every part (0.45 s at a million samples, for 16 new lines); it
    now reads only new parts, and a file's rows from the first line of a part that was merged or read again. After
    every kind of change the table is what a whole rebuild makes."""
    logs = tmp_path / "logs"
    recs = _records(8, 6, tokens=4)
    write_lines(logs / "r0.jsonl", recs[:6])
    write_lines(logs / "r1.jsonl", recs[6:12])
    run = open_run(logs, **options)
    used = []
    from rlviz_widgets.run import _views

    real = _views._update_nums
    monkeypatch.setattr(_views, "_update_nums", lambda *a: used.append(real(*a)) or used[-1])

    def check():
        con = run.cursor()
        nums = [r[0] for r in con.execute("SELECT column_name FROM (DESCRIBE _nums)").fetchall()]
        cols = ", ".join(f'"{c}"' for c in nums)
        got = con.execute(f"SELECT {cols} FROM _nums ORDER BY sample_id").fetchall()
        assert got == con.execute(f"SELECT {cols} FROM _samples_raw ORDER BY sample_id").fetchall()
        assert len(got) == len(run.samples) > 0

    def append(name, rows):
        with open(logs / name, "a") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
        assert run.refresh()
        check()

    for k in range(12, 40, 4):  # appends, one refresh each: small parts, merged as they pile up
        append("r0.jsonl", recs[k:k + 2])
        append("r1.jsonl", recs[k + 2:k + 4])
    assert used and all(used)
    write_lines(logs / "r1.jsonl", recs[40:44])  # rewritten shorter: read again from its start
    assert run.refresh()
    check()
    write_lines(logs / "r2.jsonl", recs[44:48])  # a new file
    assert run.refresh()
    check()
    (logs / "r0.jsonl").unlink()  # a file gone
    assert run.refresh()
    check()
    assert all(used)
    append("r2.jsonl", [{**recs[20], "new_metric": 1.5}])  # another column (step 3, in the range): made whole
    assert used[-1] is False and "new_metric" in run.samples
