"""Cache upkeep: what the cache holds, and pruning the folders no log needs (never one in use, never a log)."""

from __future__ import annotations

import fcntl
import json
import random
import socket
import subprocess
import sys

from conftest import ROOT, folder_fingerprint, write_lines

import rlviz_widgets
from rlviz_widgets._store import cache as cachemod
from rlviz_widgets._store import prune as cache_prune
from rlviz_widgets._synth import make_record, write_log


def records(step: int, n: int) -> list[dict]:
    rng = random.Random(step)
    return [make_record(rng, step, i, 6, progress=0.5) for i in range(n)]


def _open(src, cache, **options):
    return rlviz_widgets.open_run(src, cache_dir=cache, progress=False, **options)


def _two_logs(tmp_path):
    a = write_lines(tmp_path / "logs" / "a" / "r0.jsonl", records(0, 3))
    b = write_lines(tmp_path / "logs" / "b" / "r0.jsonl", records(1, 2))
    return a, b, tmp_path / "cache"


def test_usage_lists_every_log_and_prune_removes_only_what_no_log_needs(tmp_path):
    a, b, cache = _two_logs(tmp_path)
    _open(a, cache).close()
    kept = _open(b, cache)
    samples = kept.samples
    a.unlink()
    usage = rlviz_widgets.cache_usage(cache)
    assert sorted(zip(usage["log"], usage["state"])) == [(str(a.resolve()), "log gone"), (str(b.resolve()), "current")]
    assert (usage["bytes"] > 0).all() and not usage["in_use"][usage["state"] == "log gone"].any()
    listed = rlviz_widgets.prune_cache(cache, dry_run=True)
    assert listed["log"].tolist() == [str(a.resolve())] and not listed["removed"].any()
    assert len(list((cache / "files").iterdir())) == 2  # a dry run removes nothing
    before = folder_fingerprint(tmp_path / "logs")
    pruned = rlviz_widgets.prune_cache(cache)
    assert pruned["removed"].tolist() == [True] and not (cache / "files" / pruned["folder"][0].split("/")[-1]).exists()
    assert folder_fingerprint(tmp_path / "logs") == before  # the logs are never touched
    assert rlviz_widgets.cache_usage(cache)["state"].tolist() == ["current"]
    kept.refresh()
    assert kept.samples.equals(samples) and len(_open(b, cache).samples) == 2  # the other log's cache still serves


def test_a_log_gone_that_a_live_run_reads_is_kept_until_the_run_closes(tmp_path):
    a, _, cache = _two_logs(tmp_path)
    run = _open(a, cache)
    a.unlink()
    pruned = rlviz_widgets.prune_cache(cache)
    assert pruned["in_use"].tolist() == [True] and pruned["removed"].tolist() == [False]
    assert len(run.tokens(run.samples["sample_id"].iloc[0])) > 0  # its parts still there
    run.close()
    assert rlviz_widgets.prune_cache(cache)["removed"].tolist() == [True]


def test_old_versions_and_unreadable_folders_go_unless_locked(tmp_path, monkeypatch):
    a, b, cache = _two_logs(tmp_path)
    _open(a, cache).close()
    _open(b, cache).close()
    monkeypatch.setattr(cachemod, "CACHE_VERSION", cachemod.CACHE_VERSION + 1)
    assert set(rlviz_widgets.cache_usage(cache)["state"]) == {"other version"}
    stray = cache / "files" / "0123456789abcdef0123"  # a folder without a state (a build killed at its start)
    stray.mkdir()
    (stray / "part-00000-aa.parquet").write_bytes(b"x")
    # another process builds the second log's cache right now: its lock is held
    busy = cachemod.FileCache(cache.resolve(), b.resolve(), "rlb").dir.parent / cachemod.FileCache._folder(
        cache.resolve(), b.resolve(), "rlb", cachemod.CACHE_VERSION - 1).name
    with open(cache / "locks" / f"{busy.name}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        pruned = rlviz_widgets.prune_cache(cache)
    by_state = {(s, bool(r)) for s, r in zip(pruned["state"], pruned["removed"])}
    assert by_state == {("other version", True), ("unreadable", True), ("other version", False)}
    assert busy.exists() and not stray.exists()
    assert pruned.set_index("folder").loc[str(busy), "in_use"]
    assert len(_open(a, cache).samples) == 3  # rebuilt under the new version


def test_prune_looks_again_under_the_lock(tmp_path, monkeypatch):
    """Prune saw a folder without a state (an open had just made it) as a leftover, waited for its lock while the
    open built and leased it, then deleted it under the live Run. It now looks again once it holds the lock."""
    a, _, cache = _two_logs(tmp_path)
    folder = cachemod.FileCache(cache.resolve(), a.resolve(), "rlb").dir
    folder.mkdir(parents=True)  # as the open makes it, before its lock
    held = []
    real_bytes = cache_prune._bytes

    def open_meanwhile(f):  # between prune's first look and its lock: the open builds and leases the folder
        held.append(_open(a, cache))
        return real_bytes(f)

    monkeypatch.setattr(cache_prune, "_bytes", open_meanwhile)
    pruned = rlviz_widgets.prune_cache(cache)
    assert pruned.empty and folder.is_dir()  # current now: not listed, not removed
    run = held[0]
    assert len(run.tokens(run.samples["sample_id"])) > 0


def test_an_empty_log_makes_no_cache_folder(tmp_path):
    """An empty rank file got a cache folder without a state, listed as ``unreadable`` (a leftover) though its log
    is there and current."""
    a, _, cache = _two_logs(tmp_path)
    empty = a.parent / "r1.jsonl"
    empty.write_text("")
    assert len(_open(a.parent, cache).samples) == 3
    assert rlviz_widgets.cache_usage(cache)["state"].tolist() == ["current"]
    empty.write_text(a.read_text())  # it fills up: read as any log
    assert len(_open(a.parent, cache).samples) == 6
    assert rlviz_widgets.cache_usage(cache)["state"].tolist() == ["current", "current"]


def test_no_cache_yet_lists_nothing(tmp_path):
    assert rlviz_widgets.cache_usage(tmp_path / "none").empty
    assert rlviz_widgets.prune_cache(tmp_path / "none").empty
    assert not (tmp_path / "none").exists()


def test_command_line_lists_and_prunes(tmp_path):
    a, _, cache = _two_logs(tmp_path)
    _open(a, cache).close()
    a.unlink()

    def cli(*args):
        out = subprocess.run([sys.executable, "-m", "rlviz_widgets", "--cache-dir", str(cache), *args], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        return out

    assert "log gone" in cli("--cache-usage") and "1 log file(s)" in cli("--cache-usage")
    assert "would be removed" in cli("--prune-cache", "--dry-run") and (cache / "files").exists()
    out = cli("--prune-cache")
    assert "removed" in out and str(a.resolve()) in out
    assert list((cache / "files").iterdir()) == []
    assert json.loads((cache / "file_numbers.json").read_text())  # file numbers kept: ids stay stable


def test_a_damaged_lease_breaks_nothing(tmp_path):
    import os
    a, _, cache = _two_logs(tmp_path)
    _open(a, cache).close()
    (cache / "leases").mkdir(exist_ok=True)
    for i, parts in enumerate(([1, 2], None, "x")):
        (cache / "leases" / f"{socket.gethostname()}-{os.getpid()}-{i}.json").write_text(
            json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "parts": parts}))
    a.unlink()
    assert rlviz_widgets.prune_cache(cache)["removed"].tolist() == [True]


def test_a_cache_of_a_caps_lines_is_listed_as_such(tmp_path):
    a, _, cache = _two_logs(tmp_path)
    _open(a, cache, max_samples_per_step=1, steps=(0, 5))
    _open(a, cache, steps=(1, None))
    _open(a, cache)
    usage = rlviz_widgets.cache_usage(cache).sort_values("lines")
    assert usage["lines"].tolist() == ["all", "cap=1 steps=0..5", "steps=1.."]
    # every line cached too: the caps' caches are superseded, and pruned
    assert usage["state"].tolist() == ["current", "superseded", "superseded"] and set(usage["log"]) == {str(a)}
    pruned = rlviz_widgets.prune_cache(cache)
    assert sorted(pruned["lines"]) == ["cap=1 steps=0..5", "steps=1.."] and pruned["removed"].all()
    assert _open(a, cache, max_samples_per_step=1).skipped_lines == 0  # served by the cache of every line
    b = write_lines(tmp_path / "logs" / "c" / "r0.jsonl", records(0, 3))
    _open(b, cache, max_samples_per_step=1)  # only a cap's cache: current
    assert rlviz_widgets.cache_usage(cache).query("log == @b.as_posix()")["state"].tolist() == ["current"]


def test_a_range_cache_is_superseded_only_by_a_cache_of_the_log_as_it_is(tmp_path):
    """A cache of every line of a log since rewritten (a job restarted) made the range's own cache `superseded`,
    and prune removed it: yet the old cache holds other lines, and the range cache is the one an open takes."""
    logs, cache_dir = tmp_path / "logs", tmp_path / "cache"
    write_log(logs, steps=4, samples_per_step=4, tokens=6, ranks=1, seed=0)
    rlviz_widgets.open_run(logs, cache_dir=cache_dir, progress=False).close()  # every line, of the log as it was
    write_log(logs, steps=4, samples_per_step=5, tokens=6, ranks=1, seed=1)  # rewritten
    rlviz_widgets.open_run(logs, cache_dir=cache_dir, progress=False, steps=(1, 3)).close()
    usage = rlviz_widgets.cache_usage(cache_dir=cache_dir)
    assert usage.set_index("lines").loc["steps=1..3", "state"] == "current"
    assert not rlviz_widgets.prune_cache(cache_dir=cache_dir)["removed"].any()
    rlviz_widgets.open_run(logs, cache_dir=cache_dir, progress=False).close()  # every line of the log as it is now
    usage = rlviz_widgets.cache_usage(cache_dir=cache_dir)
    assert usage.set_index("lines").loc["steps=1..3", "state"] == "superseded"


def test_prune_in_another_process_waits_until_a_run_has_leased_what_it_read(tmp_path, monkeypatch):
    """A Run read a file's cache, then leased it only as its views were made: a prune in another process in between
    removed the folder (its log deleted by a job restarting, so "log gone", with no lease naming it yet) and the open
    failed ("No files found ... part-...parquet"). Every cache is now locked from its first look until the lease."""
    from rlviz_widgets._store import leases

    logs, cache_dir = tmp_path / "logs", tmp_path / "cache"
    write_log(logs, steps=4, samples_per_step=4, tokens=6, ranks=2, seed=0)
    orig, said = leases.Lease.hold, []

    def hold(self, parts):  # just before the lease is written: the job deletes a rank file, another process prunes
        parts = list(parts)
        if not said:
            (logs / "rollout_rank1.jsonl").unlink()
            code = ("import rlviz_widgets as rw; "
                    f"print(rw.prune_cache(cache_dir={str(cache_dir)!r})[['state', 'removed']].to_dict('records'))")
            said.append(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                       cwd=ROOT).stdout.strip())
        return orig(self, parts)

    monkeypatch.setattr(leases.Lease, "hold", hold)
    run = rlviz_widgets.open_run(logs, cache_dir=cache_dir, progress=False)
    assert said == ["[{'state': 'log gone', 'removed': False}]"]  # in use: kept
    assert len(run.samples) == 16 and len(run.tokens(run.samples["sample_id"][:2])) > 0

