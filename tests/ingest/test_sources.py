"""What ``open_run`` accepts as a source: folder (any depth, links followed, hidden names passed over), file, glob,
list; merge of rank files; what a folder holds but cannot be read, reported; errors."""

from __future__ import annotations

import gzip
import json
import os
import random
from pathlib import Path

import pytest
from conftest import read_records, write_lines

from rlviz_widgets import NoLogsError
from rlviz_widgets._ingest import lines
from rlviz_widgets._ingest.readers.jsonl import triage as rlb
from rlviz_widgets._ingest.sources import resolve
from rlviz_widgets._synth import make_record, write_log
from rlviz_widgets.run import _sync as runmod


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


def records(step: int, n: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [make_record(rng, step, i, 6, progress=0.5) for i in range(n)]


def kinds(run) -> list[tuple[str, str]]:
    return sorted(zip((os.path.basename(f) for f in run.problems["file"]), run.problems["kind"]))


def test_hidden_folders_such_as_jupyter_checkpoints_are_passed_over(tmp_path, open_run):
    """JupyterLab keeps a copy of a log opened in its editor in .ipynb_checkpoints: it was read as one more rank
    file, every sample of it twice, without a word. Names starting with a dot are passed over in a folder; named
    (as a path or a glob), such a file is read."""
    logs = tmp_path / "logs"
    write_lines(logs / "rank0.jsonl", records(0, 2))
    write_lines(logs / ".ipynb_checkpoints" / "rank0-checkpoint.jsonl", records(0, 2))
    write_lines(logs / ".rank9.jsonl", records(0, 3))
    run = open_run(logs)
    assert len(run.samples) == 2 and run.files["file"].tolist() == [str((logs / "rank0.jsonl").resolve())]
    assert len(open_run(logs / ".rank9.jsonl").samples) == 3
    assert len(open_run(str(logs / ".ipynb_checkpoints" / "*.jsonl")).samples) == 2


def test_links_to_folders_are_followed_and_a_link_loop_ends(tmp_path, open_run):
    """A rank folder linked in from other storage was left out of a folder's logs (a ``**`` glob took it)."""
    logs, storage = tmp_path / "logs", tmp_path / "storage"
    write_lines(logs / "rank0" / "a.jsonl", records(0, 2))
    write_lines(storage / "b.jsonl", records(0, 3, seed=2))
    (logs / "rank1").symlink_to(storage, target_is_directory=True)
    (storage / "loop").symlink_to(logs, target_is_directory=True)  # back up: each folder is read once
    (logs / "again").symlink_to(logs / "rank0", target_is_directory=True)  # the same folder twice
    run = open_run(logs)
    assert len(run.samples) == 5 and len(run.files) == 2
    assert kinds(run) == [("loop", "looping_link")]  # up to the folder itself: not followed, said
    assert run.problems["message"][0].endswith("(line 0: the link as a whole)")


def test_a_file_reached_by_two_hard_links_is_read_once(tmp_path, open_run):
    """A rank file hard-linked into a second folder (``cp -l`` of a run's logs) was read twice, every sample of it
    doubled: files were told apart by their resolved path only. The file is read once, by the first of its paths,
    and the other is said."""
    logs = tmp_path / "logs"
    write_lines(logs / "a" / "rank0.jsonl", records(0, 2))
    write_lines(logs / "a" / "rank1.jsonl", records(0, 3, seed=2))
    os.makedirs(logs / "b")
    os.link(logs / "a" / "rank0.jsonl", logs / "b" / "rank0.jsonl")
    for source in (logs, [logs / "a", logs / "b" / "rank0.jsonl"], str(logs / "*" / "rank0.jsonl")):
        run = open_run(source)
        assert len(run.samples) == (5 if not isinstance(source, str) else 2)
        assert sorted(set(run.samples["file"])) == sorted({str((logs / "a" / "rank0.jsonl").resolve())} | (
            set() if isinstance(source, str) else {str((logs / "a" / "rank1.jsonl").resolve())}))
        assert kinds(run) == [("rank0.jsonl", "same_file")]
        assert run.problems["file"][0].endswith(os.path.join("b", "rank0.jsonl"))
        assert "the same file as " + str((logs / "a" / "rank0.jsonl").resolve()) in run.problems["message"][0]


def test_what_a_folder_holds_but_cannot_be_read_is_reported(tmp_path, open_run):
    """A file name that is not UTF-8 crashed the whole open (UnicodeEncodeError, the file not named); a gzipped log
    was passed over in silence. Each is now a problem of its own, and the other files are read."""
    logs = tmp_path / "logs"
    write_lines(logs / "rank0.jsonl", records(0, 2))
    with gzip.open(logs / "rank1.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records(0, 2, seed=3)))
    bad = os.path.join(os.fsencode(logs), b"rank\xff.jsonl")
    with open(bad, "wb") as f:
        f.write(json.dumps(records(0, 1)[0]).encode() + b"\n")
    run = open_run(logs)
    assert len(run.samples) == 2
    assert kinds(run) == [("rank1.jsonl.gz", "compressed_file"), ("rank\\xff.jsonl", "unreadable_file")]
    os.remove(logs / "rank0.jsonl")
    os.remove(logs / "rank1.jsonl.gz")
    with pytest.raises(NoLogsError, match=r"that can be read found in folder .*1 cannot, e\.g\. .*rank\\xff\.jsonl "
                                          r"\(the path is not UTF-8"):
        open_run(logs)
    # named by a glob or by its path (both crashed with UnicodeEncodeError)
    write_lines(logs / "rank0.jsonl", records(0, 2))
    with gzip.open(logs / "rank1.jsonl.gz", "wt") as f:
        f.write(json.dumps(records(0, 1)[0]) + "\n")
    run = open_run(str(logs / "rank*"))
    assert len(run.samples) == 2
    assert kinds(run) == [("rank1.jsonl.gz", "compressed_file"), ("rank\\xff.jsonl", "unreadable_file")]
    with pytest.raises(NoLogsError, match=r"the log path is not UTF-8: .*rank\\xff\.jsonl"):
        open_run(bad.decode(errors="surrogateescape"))


def test_a_compressed_or_parquet_file_named_as_a_log_is_said_not_read_as_text(tmp_path, open_run):
    """A gzipped log or a Parquet file named by its path was read as JSON lines: thousands of malformed_json and
    non_utf8 problems of binary bytes and no samples. Named alone it is an error saying why; among others, a
    problem of its own (by its name, or by its first bytes under any name); Parquet with TRL's columns is TRL's."""
    import pandas as pd

    logs = tmp_path / "logs"
    good = write_lines(logs / "rank0.jsonl", records(0, 2))
    body = "".join(json.dumps(r) + "\n" for r in records(0, 2, seed=3))
    with gzip.open(logs / "rank1.jsonl.gz", "wt") as f:
        f.write(body)
    (logs / "rank2.jsonl").write_bytes(gzip.compress(body.encode()))  # gzipped under a .jsonl name
    pd.DataFrame(records(0, 2, seed=4)).to_parquet(logs / "rank3.parquet")
    for name, why in [("rank1.jsonl.gz", "a compressed log is not read: decompress it"),
                      ("rank2.jsonl", "a compressed log is not read"), ("rank3.parquet", "a Parquet file, not JSON")]:
        with pytest.raises(NoLogsError, match=rf"no log file that can be read: .*{name} \({why}"):
            open_run(logs / name)
    run = open_run([good, logs / "rank1.jsonl.gz", logs / "rank2.jsonl", logs / "rank3.parquet"])
    assert len(run.samples) == 2
    assert kinds(run) == [("rank1.jsonl.gz", "compressed_file"), ("rank2.jsonl", "compressed_file"),
                          ("rank3.parquet", "parquet_file")]
    with pytest.raises(NoLogsError, match=r"matches no file that can be read: e\.g\. .*rank1\.jsonl\.gz \(a compr"):
        open_run(str(logs / "*.gz"))
    trl = tmp_path / "trl" / "my_completions.parquet"  # TRL's columns, another name
    trl.parent.mkdir()
    pd.DataFrame({"step": [3, 3], "prompt": ["p", "p"], "completion": ["a", "b"], "reward": [1.0, 0.0]}).to_parquet(trl)
    run = open_run(trl)
    assert run.format == "trl" and run.samples["response"].tolist() == ["a", "b"]
    assert open_run(str(trl.parent / "*.parquet")).format == "trl"
    # such a Parquet file (a dataset) in a folder of logs is none of them: the folder's logs decide
    trl.rename(logs / "sft_data.parquet")
    run = open_run(logs)
    assert run.format == "rlb" and len(run.samples) == 2
    # the gzip under a .jsonl name, found by the folder's walk: said so by its first bytes (it was read as text:
    # "76 bytes without a newline (a job still writing?)")
    assert kinds(run) == [("rank1.jsonl.gz", "compressed_file"), ("rank2.jsonl", "compressed_file")]


def test_a_file_that_is_not_json_lines_is_named_as_such_with_the_formats_read(tmp_path, open_run):
    """A CSV file given as a log gave 51 ``malformed_json`` problems and never said CSV is no log format. A CSV, a
    TSV, a pickle, a NumPy array, an SQLite database, an Arrow file or an HTML page is named as such, in one
    problem (an error when it is the only file), with the formats that are read; a log whose first line alone is
    bad is still read."""
    import pickle
    import sqlite3

    from rlviz_widgets._ingest.readers import READERS

    logs = tmp_path / "logs"
    good = write_lines(logs / "rank0.jsonl", records(0, 2))
    header = "step,prompt,response,reward"
    others = {"results.csv": (header + "\n" + "\n".join(f"{i},p,r,1.0" for i in range(50)) + "\n").encode(),
              "results.tsv": b"step\tprompt\treward\n0\tp\t1.0\n",
              "samples.pkl": pickle.dumps(records(0, 2)), "tokens.npy": b"\x93NUMPY\x01\x00v\x00{'descr'",
              "table.arrow": b"ARROW1\x00\x00\xff\xff", "page.html": b"<!DOCTYPE html>\n<html><body>login</body>"}
    for name, body in others.items():
        (logs / name).write_bytes(body)
    sqlite3.connect(logs / "runs.sqlite").execute("CREATE TABLE t (x)").connection.commit()
    what = {"results.csv": "a CSV file", "results.tsv": "a TSV file", "samples.pkl": "a Python pickle",
            "tokens.npy": "a NumPy array", "table.arrow": "an Arrow file", "page.html": "an HTML page",
            "runs.sqlite": "an SQLite database"}
    for name, says in what.items():
        with pytest.raises(NoLogsError, match=rf"no log file that can be read: .*{name} \({says}, not JSON lines") as e:
            open_run(logs / name)
        assert all(f in str(e.value) for f in READERS), str(e.value)
    run = open_run([good, *(logs / n for n in what)])
    assert len(run.samples) == 2 and kinds(run) == sorted((n, "not_json_lines") for n in what)
    assert "columns=" in run.problems["message"][0] and "format='trl'" in run.problems["message"][0]
    # under a log's name, found by a folder's walk or a glob: one problem, not a problem per line
    os.replace(logs / "results.csv", logs / "rank1.jsonl")
    run = open_run(logs)
    assert len(run.samples) == 2 and kinds(run) == [("rank1.jsonl", "not_json_lines")]
    assert "a CSV file, not JSON lines" in run.problems["message"][0]
    assert kinds(open_run(str(logs / "rank*.jsonl"))) == [("rank1.jsonl", "not_json_lines")]
    # a log whose first line alone is bad (with commas, even) is a log with a bad line
    write_lines(logs / "rank1.jsonl", ["oops, a stray line, here", *records(1, 2)])
    run = open_run(logs)
    assert len(run.samples) == 4 and kinds(run) == [("rank1.jsonl", "malformed_json")]


def test_a_dangling_link_or_a_pipe_among_the_logs_is_said(tmp_path, open_run):
    """A rank's log linked from a drive not mounted (a link to nothing) or a FIFO named *.jsonl: a folder passed
    over them in silence (named directly, each was an error)."""
    logs = tmp_path / "logs"
    write_lines(logs / "rank0.jsonl", records(0, 2))
    os.symlink(tmp_path / "gone" / "rank1.jsonl", logs / "rank1.jsonl")
    os.mkfifo(logs / "rank2.jsonl")
    for source in (logs, str(logs / "rank*.jsonl")):
        run = open_run(source)
        assert len(run.samples) == 2
        assert kinds(run) == [("rank1.jsonl", "unreadable_file"), ("rank2.jsonl", "unreadable_file")]
        assert "a link to nothing" in run.problems.message[0] and "a pipe" in run.problems.message[1]


def test_a_log_that_cannot_be_read_is_left_out_and_said_so(tmp_path, open_run, monkeypatch):
    """A log file the user may not read (another user's, mode 000) failed the whole open with an error blaming the
    cache dir. It is now left out and reported (or, read before, keeps what was read); if no file can be read at
    all, the error names the file."""
    logs = tmp_path / "logs"
    write_lines(logs / "rank0.jsonl", records(0, 2))
    secret = write_lines(logs / "rank1.jsonl", records(0, 3, seed=4))
    real_open = open

    def denied(path, *args, **kwargs):  # the tests run as root, whom permissions do not stop
        if os.fspath(path) == str(secret.resolve()):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(runmod, "open", denied, raising=False)
    run = open_run(logs)
    assert len(run.samples) == 2 and kinds(run) == [("rank1.jsonl", "unreadable_file")]
    assert "cannot be read (Permission denied): its samples are left out" in run.problems["message"][0]
    with pytest.raises(NoLogsError, match=r"no log file can be read: .*rank1\.jsonl \(Permission denied\)"):
        open_run(secret)
    monkeypatch.undo()
    assert run.refresh() is True and len(run.samples) == 5 and run.problems.empty
    monkeypatch.setattr(runmod, "open", denied, raising=False)
    run.refresh()
    assert len(run.samples) == 5 and "as read before" in run.problems["message"][0]


def test_odd_sources_get_a_clear_error(tmp_path, open_run):
    """``""`` opened the working directory; a pipe named as the source was said not to exist; a cache dir that is
    a file gave a bare FileExistsError."""
    for source in ("", [""], "  "):
        with pytest.raises(NoLogsError, match="an empty log path"):
            open_run(source)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(NoLogsError, match="neither a file nor a folder"):
        open_run(fifo)
    log = write_lines(tmp_path / "logs" / "rank0.jsonl", records(0, 2))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"):
        open_run(log, cache_dir=tmp_path / "afile")


def test_a_relative_source_stays_where_it_was_opened(tmp_path, open_run, monkeypatch):
    """``open_run("logs")`` then a chdir: the next refresh read another folder's logs and called the first ones
    gone."""
    for exp, step in (("a", 0), ("b", 7)):
        write_lines(tmp_path / exp / "logs" / "x.jsonl", records(step, 2))
    monkeypatch.chdir(tmp_path / "a")
    run = open_run("logs")
    monkeypatch.chdir(tmp_path / "b")
    assert run.refresh() is False
    assert run.samples["step"].tolist() == [0, 0] and run.problems.empty


def test_a_long_line_without_a_newline_is_read_in_few_reads(tmp_path, monkeypatch):
    """The reads of a line longer than a chunk stayed at the first chunk's size, each copying and scanning all the
    bytes so far: a 400 MB line took 41 s. They now double."""
    path = tmp_path / "one_line.jsonl"
    path.write_bytes(b"[" + b"0, " * (4 << 20) + b"0]")  # 12 MB, no newline
    sizes = []
    real_get = lines.BufferPool.get

    def get(self, size, reserve=0):
        sizes.append(size)
        return real_get(self, size, reserve)

    monkeypatch.setattr(lines.BufferPool, "get", get)
    chunks = list(lines.read_chunks(path, first_chunk_bytes=1 << 20, chunk_bytes=2 << 20, pool=lines.BufferPool()))
    assert chunks == [] and len(sizes) <= 6  # 1, 3, 7, 15 MB: at a fixed 1 MB more, it was 13 reads


def test_a_huge_line_that_is_no_object_is_reported_without_parsing_it(tmp_path, open_run, monkeypatch):
    """A run written with one json.dump of a list (300 MB on one line) took a minute and GBs to be called
    ``not_an_object``: Python parsed it whole. Past 1 MB, a line that does not open an object is reported as it
    is."""
    monkeypatch.setattr(rlb, "BIG_LINE", 4096)
    listed = json.dumps(records(0, 30))
    # broken at its end: parsed, it would be called malformed_json
    write_lines(tmp_path / "logs" / "rank0.jsonl", [listed[:-1] + ", oops]", records(0, 1)[0]])
    run = open_run(tmp_path / "logs")
    assert run.problems[["line", "kind"]].values.tolist() == [[1, "not_an_object"]] and len(run.samples) == 1
    assert "a JSON list of 0 MB on one line: skipped (one record per line is expected)" in run.problems["message"][0]


def test_a_source_through_a_link_and_dotdot_goes_where_the_os_goes(tmp_path, open_run, monkeypatch):
    """``latest/../baseline`` with ``latest`` a link to ``exp/runs/current``: the OS (and the code before the source
    was made absolute) opens ``exp/runs/baseline``; making it absolute as text went to ``baseline`` beside it."""
    runs = tmp_path / "exp" / "runs"
    write_lines(runs / "baseline" / "rank0.jsonl", records(0, 3))
    (runs / "current").mkdir()
    (tmp_path / "latest").symlink_to(runs / "current", target_is_directory=True)
    assert len(open_run(tmp_path / "latest" / ".." / "baseline").samples) == 3
    monkeypatch.chdir(tmp_path)
    assert len(open_run("latest/../baseline").samples) == 3


def test_a_folder_that_cannot_be_listed_at_a_refresh_keeps_its_files(tmp_path, open_run, monkeypatch):
    """A rank folder that could not be listed at a refresh: its files were called deleted and their samples left
    the run; once listable again, they never came back. Its files now keep what was read of them."""
    logs = tmp_path / "logs"
    write_lines(logs / "node0" / "rank0.jsonl", records(0, 2))
    write_lines(logs / "node1" / "rank1.jsonl", records(0, 3, seed=2))
    run = open_run(logs)
    real_scandir = os.scandir

    def denied(path="."):
        if os.fspath(path) == str(logs / "node1"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", denied)
    run.refresh()
    assert len(run.samples) == 5 and kinds(run) == [("node1", "unreadable_folder")]
    assert run.problems["message"][0].endswith("(line 0: the folder as a whole)")
    monkeypatch.undo()
    run.refresh()
    assert len(run.samples) == 5 and run.problems.empty


def test_a_file_back_or_read_by_another_run_joins_the_run(tmp_path, open_run):
    """A rank file moved away and back unchanged, or a new one another Run read first: its cache was complete, so
    this run's refresh said nothing changed and left its samples out (``files`` listed it)."""
    logs = tmp_path / "logs"
    write_lines(logs / "rank0.jsonl", records(0, 2))
    b = write_lines(logs / "rank1.jsonl", records(0, 3, seed=2))
    run = open_run(logs)
    b.rename(tmp_path / "away.jsonl")
    assert run.refresh() is True and len(run.samples) == 2
    (tmp_path / "away.jsonl").rename(b)
    assert run.refresh() is True and len(run.samples) == 5 and run.problems.empty
    write_lines(logs / "rank2.jsonl", records(0, 4, seed=3))
    assert len(open_run(logs).samples) == 9  # another Run reads the new file first
    assert run.refresh() is True and len(run.samples) == 9 and run.steps["samples"].tolist() == [9]


def test_a_followed_run_whose_files_are_all_gone_is_empty_not_an_error(tmp_path, open_run):
    """Every file of a followed run deleted (a job about to write them anew): refresh raised NoLogsError."""
    logs = tmp_path / "logs"
    a = write_lines(logs / "rank0.jsonl", records(0, 2))
    run = open_run(logs)
    data = a.read_bytes()
    a.unlink()
    assert run.refresh() is True
    assert len(run.samples) == 0 and kinds(run) == [("rank0.jsonl", "file_removed")] and len(run.files) == 0
    assert "token arrays: none (no samples)" in run.summary()  # not "a sample-level log"
    a.write_bytes(data)
    assert run.refresh() is True and len(run.samples) == 2 and run.problems.empty


def test_a_big_indented_record_is_read(tmp_path, open_run, monkeypatch):
    """A record past the big-line size, indented by 80 blanks, was taken for a line that opens no object."""
    monkeypatch.setattr(rlb, "BIG_LINE", 256)
    r = records(0, 1)[0]
    write_lines(tmp_path / "logs" / "rank0.jsonl", [" " * 80 + json.dumps(r)])
    run = open_run(tmp_path / "logs")
    assert len(run.samples) == 1 and run.problems.empty


def test_a_walk_sniffs_each_file_once_while_it_is_unchanged(tmp_path, monkeypatch):
    """A followed run walks its folder every few seconds: the first bytes of each log were read on every walk."""
    from rlviz_widgets._ingest import sources

    logs = tmp_path / "logs"
    for r in range(3):
        write_lines(logs / f"rank{r}.jsonl", records(0, 2))
    seen = []
    real = sources._no_json_lines
    monkeypatch.setattr(sources, "_no_json_lines", lambda p, s: seen.append(p.name) or real(p, s))
    assert len(sources.resolve(logs, (".jsonl",))) == 3
    assert sorted(seen) == ["rank0.jsonl", "rank1.jsonl", "rank2.jsonl"]
    with open(logs / "rank1.jsonl", "a") as f:
        f.write(json.dumps(records(1, 1)[0]) + "\n")
    seen.clear()
    assert len(sources.resolve(logs, (".jsonl",))) == 3 and seen == ["rank1.jsonl"]  # the one written since
