"""Links in a log folder: followed to a run elsewhere, but never up into the tree holding the folder, never to the
same real path twice, given up when what they lead to does not look like logs; the walk shows its progress and stops
cleanly on Ctrl-C."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import pytest
from conftest import write_lines

from rlviz_widgets import NoLogsError
from rlviz_widgets._ingest import sources
from rlviz_widgets._ingest.sniff import first_record_has
from rlviz_widgets._ingest.sources import resolve
from rlviz_widgets._synth import make_record

RLB_FIELDS = ("prompt", "response", "reward", "step", "response_tokens")


def records(step: int, n: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [make_record(rng, step, i, 6, progress=0.5) for i in range(n)]


@pytest.fixture
def disk(tmp_path) -> dict[str, Path]:
    """A fake disk: a user's log folder, a run on another mount, and a system tree of unrelated *.jsonl files."""
    top = tmp_path / "disk"
    logs = top / "home" / "u" / "logs"
    own = [write_lines(logs / "rank0.jsonl", records(0, 2)), write_lines(logs / "node1" / "rank1.jsonl",
                                                                          records(0, 3, seed=2))]
    other = [write_lines(top / "mnt" / "storage" / "run_b" / "rank2.jsonl", records(0, 4, seed=3))]
    for k in range(30):  # a package index, a language server's cache...: JSON lines, not logs
        write_lines(top / "usr" / "share" / f"pkg{k % 6}" / f"index{k}.jsonl",
                    [{"name": f"pkg{k}", "version": "1.0"}] * 3)
    write_lines(top / "home" / "u" / "notes.jsonl", [{"todo": "x"}])
    return {"top": top, "logs": logs, "own": own, "other": other, "usr": top / "usr"}


def kinds(problems) -> list[tuple[str, str]]:
    return sorted((os.path.basename(p), k) for p, k, _ in problems)


def real(paths) -> list[Path]:
    return sorted(Path(p).resolve() for p in paths)


def test_a_link_to_the_top_of_the_disk_is_not_followed(disk):
    """``logs/root -> /`` walked the whole disk: 911 unrelated files read as logs. A link to a folder holding the
    log folder (the top of the disk, ``..``) leads back up: it is not followed and is said, naming the link."""
    logs = disk["logs"]
    (logs / "root").symlink_to(disk["top"], target_is_directory=True)
    (logs / "node1" / "up").symlink_to("..", target_is_directory=True)
    walked = []
    real_walk = os.walk

    def spy(top, *a, **k):
        for entry in real_walk(top, *a, **k):
            walked.append(entry[0])
            yield entry

    problems: list = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(os, "walk", spy)
        files = resolve(logs, problems=problems)
    assert files == real(disk["own"])
    assert kinds(problems) == [("root", "looping_link"), ("up", "looping_link")]
    message = dict((os.path.basename(p), why) for p, _, why in problems)["root"]
    assert str(disk["top"]) in message and "not followed" in message
    assert not any("usr" in w or "mnt" in w for w in walked) and len(walked) == 2  # logs and logs/node1


def test_a_link_up_from_a_run_linked_in_is_not_followed(disk):
    """A run on another mount, linked in, is read; a link in it up to its own mount is not followed."""
    logs = disk["logs"]
    (logs / "rank2").symlink_to(disk["other"][0].parent, target_is_directory=True)
    (disk["other"][0].parent / "mnt").symlink_to(disk["top"] / "mnt", target_is_directory=True)
    problems: list = []
    assert resolve(logs, problems=problems) == real(disk["own"] + disk["other"])
    assert kinds(problems) == [("mnt", "looping_link")]
    assert problems[0][0] == str(logs / "rank2" / "mnt")  # the path the walk reached it by


def test_links_to_a_run_elsewhere_are_followed_and_nothing_is_entered_twice(disk, monkeypatch):
    """Links to a sibling run still work; a folder or file reached by two links is looked at once."""
    logs, run_b = disk["logs"], disk["other"][0].parent
    (logs / "b1").symlink_to(run_b, target_is_directory=True)
    (logs / "b2").symlink_to(run_b, target_is_directory=True)
    (logs / "same.jsonl").symlink_to(disk["own"][0])
    (run_b / "rank0.jsonl").symlink_to(disk["own"][0])
    sniffed, looked = [], []
    real_sniff = sources._no_json_lines
    monkeypatch.setattr(sources, "_no_json_lines", lambda p, s: sniffed.append(p.resolve()) or real_sniff(p, s))
    monkeypatch.setattr(sources, "_SNIFFED", {})
    check = first_record_has(RLB_FIELDS)
    problems: list = []
    files = resolve(logs, problems=problems, looks_like=lambda p: looked.append(p.resolve()) or check(p))
    assert files == real(disk["own"] + disk["other"]) and problems == []
    assert len(sniffed) == len(set(sniffed)) == 3
    assert len(looked) == len(set(looked)) == 1  # only the file reached through a link out of the folder


def test_a_link_to_files_that_are_no_logs_is_given_up_naming_it(disk):
    """A link to a tree of unrelated JSON lines (not up: ``data -> /usr``): once most of the first files found
    through it do not look like the format, the walk leaves it, saying which link led there."""
    logs = disk["logs"]
    (logs / "data").symlink_to(disk["usr"], target_is_directory=True)
    (logs / "rank2").symlink_to(disk["other"][0].parent, target_is_directory=True)
    looked = []
    check = first_record_has(RLB_FIELDS)
    problems: list = []
    files = resolve(logs, problems=problems, looks_like=lambda p: looked.append(p) or check(p))
    assert files == real(disk["own"] + disk["other"])
    assert kinds(problems) == [("data", "foreign_link")]
    path, _, message = problems[0]
    assert path == str(logs / "data") and str(disk["usr"]) in message and "8 files" in message
    assert len([p for p in looked if "usr" in str(p.resolve())]) == 8  # not the 30
    # without the check (a caller that has none) the files are found, as before
    assert len(resolve(logs)) == len(files) + 30


def test_files_in_the_folder_itself_are_never_given_up(disk):
    logs = disk["logs"]
    for k in range(12):
        write_lines(logs / "other" / f"x{k}.jsonl", [{"name": "x"}])
    problems: list = []
    files = resolve(logs, problems=problems, looks_like=first_record_has(RLB_FIELDS))
    assert len(files) == 14 and problems == []


def test_only_a_link_whose_files_are_mostly_no_logs_is_given_up(disk):
    """A linked run holding a few other JSON-lines files (metrics) is read whole."""
    run_b = disk["other"][0].parent
    for k in range(8):
        write_lines(run_b / f"rank{k + 3}.jsonl", records(0, 1, seed=k))
    for k in range(4):
        write_lines(run_b / f"m{k}.jsonl", [{"loss": 1.0}])
    (disk["logs"] / "b").symlink_to(run_b, target_is_directory=True)
    problems: list = []
    files = resolve(disk["logs"], problems=problems, looks_like=first_record_has(RLB_FIELDS))
    assert len(files) == 2 + 1 + 8 + 4 and problems == []


def test_a_folder_whose_only_link_is_given_up_says_why(disk):
    logs = disk["top"] / "empty_logs"
    logs.mkdir()
    (logs / "data").symlink_to(disk["usr"], target_is_directory=True)
    with pytest.raises(NoLogsError, match=r"data .*does not look like"):
        resolve(logs, looks_like=first_record_has(RLB_FIELDS))


def test_first_record_has(tmp_path):
    check = first_record_has(["prompt", "step"])
    cases = {"log": '\n  \n{"step": 1, "x": 2}\n', "other": '{"name": "a"}\n', "list": '[1, 2]\n',
             "broken": '{"step": \n', "text": "hello\n", "empty": "", "blank": "\n\n",
             "writing": '{"step": 1, "prompt": "ab', "writing_other": '{"name": "ab'}
    for name, body in cases.items():
        (tmp_path / name).write_text(body)
    (tmp_path / "binary").write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")
    got = {name: check(tmp_path / name) for name in [*cases, "binary"]}
    # empty: a run's file not written yet is no evidence against the link
    assert got == {"log": True, "other": False, "list": False, "broken": False, "text": False, "empty": True,
                   "blank": True, "writing": True, "writing_other": False, "binary": False}
    assert check(tmp_path / "missing") is True  # the read says what is wrong
    huge = tmp_path / "huge"  # a record larger than what is looked at: its opening is enough
    huge.write_text('{"prompt": "' + "x" * 3_000_000 + '"}\n')
    assert check(huge) is True
    (tmp_path / "huge_other").write_text('{"name": "' + "x" * 3_000_000 + '", "prompt": 1}\n')
    assert check(tmp_path / "huge_other") is False  # the opening says nothing of it: not taken on trust


def test_first_record_has_reads_a_file_once_while_its_first_line_stands(tmp_path, monkeypatch):
    """A followed run walks its folder every few seconds: a file's first line is read once, not at every walk."""
    from rlviz_widgets._ingest import sniff

    opened = []
    monkeypatch.setattr(sniff, "open", lambda p, m: opened.append(Path(p).name) or open(p, m), raising=False)
    monkeypatch.setattr(sniff, "_SEEN", {})
    log, new = tmp_path / "log.jsonl", tmp_path / "new.jsonl"
    log.write_text('{"step": 1}\n')
    new.write_text("")
    for _ in range(3):
        assert first_record_has(["step"])(log) and first_record_has(["step"])(new)
    assert opened == ["log.jsonl", "new.jsonl", "new.jsonl", "new.jsonl"]  # an empty file: looked at again
    assert first_record_has(["prompt"])(log) is False  # other fields, another verdict


def slow_walk(monkeypatch, pause: float):
    real_walk = os.walk

    def slow(top, *a, **k):
        for entry in real_walk(top, *a, **k):
            time.sleep(pause)
            yield entry

    monkeypatch.setattr(os, "walk", slow)


def test_the_walk_shows_its_progress_after_half_a_second(disk, monkeypatch, capsys):
    for k in range(6):
        write_lines(disk["logs"] / f"n{k}" / "rank.jsonl", records(0, 1))
    resolve(disk["logs"], progress=True)  # quick: nothing shown
    assert capsys.readouterr().err == ""
    slow_walk(monkeypatch, 0.09)  # 8 folders
    resolve(disk["logs"])  # slow, but not asked
    assert capsys.readouterr().err == ""
    resolve(disk["logs"], progress=True)
    err = capsys.readouterr().err
    assert "finding logs" in err and "folders" in err and "files found" in err


def test_ctrl_c_during_the_walk_stops_it_cleanly(disk, monkeypatch):
    """A KeyboardInterrupt deep in the walk: raised again from ``resolve`` saying what was stopped, the caller's
    problems untouched, the progress bar closed; the next walk is whole."""
    logs = disk["logs"]
    (logs / "rank2").symlink_to(disk["other"][0].parent, target_is_directory=True)
    real_walk = os.walk

    def interrupted(top, *a, **k):
        for n, entry in enumerate(real_walk(top, *a, **k)):
            if n == 2:
                raise KeyboardInterrupt
            yield entry

    closed = []
    real_close = sources.Discovery.close
    monkeypatch.setattr(sources.Discovery, "close", lambda self: closed.append(1) or real_close(self))
    problems: list = [("x", "kind", "said before")]
    with monkeypatch.context() as m:
        m.setattr(os, "walk", interrupted)
        with pytest.raises(KeyboardInterrupt, match=r"stopped while looking for log files in .*logs") as e:
            resolve(logs, problems=problems, progress=True)
    assert e.value.__suppress_context__ and e.traceback[-1].name == "resolve"  # no traceback from deep inside
    assert problems == [("x", "kind", "said before")] and closed == [1]
    assert resolve(logs) == real(disk["own"] + disk["other"])


def test_ctrl_c_as_a_signal_stops_a_slow_walk(disk, monkeypatch):
    import signal

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals go to the main thread")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    slow_walk(monkeypatch, 0.3)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt, match="stopped while looking for log files"):
            resolve(disk["logs"])
    finally:
        timer.cancel()


def test_open_run_on_a_folder_holding_a_link_to_the_top(disk, open_run):
    """The finding: ``open_run(folder, format="rlb")`` with ``root -> /`` in the folder."""
    (disk["logs"] / "root").symlink_to(disk["top"], target_is_directory=True)
    run = open_run(disk["logs"], format="rlb")
    assert len(run.samples) == 5
    assert run.problems[["kind"]].values.ravel().tolist() == ["looping_link"]
    assert run.problems["file"][0] == str(disk["logs"] / "root")
    assert json.dumps(run.problems["message"][0])  # text


@pytest.mark.parametrize("fmt", ["rlb", "auto"])
def test_open_run_leaves_a_link_to_files_that_are_no_logs(disk, open_run, fmt):
    """open_run gives the walk the format's first-record check: a link to unrelated JSON lines (``data -> /usr``)
    is left after a few files, named in the problems; a run linked in from another mount is still read."""
    (disk["logs"] / "data").symlink_to(disk["usr"], target_is_directory=True)
    (disk["logs"] / "rank2").symlink_to(disk["other"][0].parent, target_is_directory=True)
    run = open_run(disk["logs"], format=fmt)
    assert len(run.samples) == 2 + 3 + 4
    assert run.problems[["kind"]].values.ravel().tolist() == ["foreign_link"]
    assert run.problems["file"][0] == str(disk["logs"] / "data")
