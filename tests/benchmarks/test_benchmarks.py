"""Smoke test of the ingest benchmark: it runs end to end and prints its table (no timing assertions here:
the performance goals live in the benchmark itself)."""

from __future__ import annotations

import re

from conftest import run_benchmark


def test_ingest_quick_prints_the_table(tmp_path):
    out_md = tmp_path / "ingest_quick.md"
    out = run_benchmark("ingest.py", "--quick", "--repeats", "1", "--dir", str(tmp_path / "logs"),
                        "--out", str(out_md), "--settle", "0.5", timeout=600)
    assert "each in its own process after a 0.5 s pause" in out
    assert "| case | seconds (median) |" in out
    rows = {}
    for case in ("a", "b", "c"):
        m = re.search(rf"^\| \({case}\) [^|]+\| ([0-9.]+) \|[^|]*\| ([0-9]+) \| ([0-9.]+)x \| ([0-9.]+) \|(.*)$", out,
                      re.M)
        assert m, f"no row for case ({case}) in:\n{out}"
        rows[case] = m
        assert float(m.group(1)) > 0 and int(m.group(2)) > 0
    assert float(rows["a"].group(3)) == 1.0
    for case in ("b", "c"):
        assert re.search(r"\| (PASS|FAIL) \(speed (ok|FAIL), memory (ok|FAIL)\) \|", rows[case].group(5))
    assert re.search(r"Overall: (PASS|FAIL) \(quick: targets not meaningful at this size\)\.", out)
    size_mb = float(re.search(r"Log: ([0-9.]+) MB", out).group(1))
    assert size_mb >= 20
    md = out_md.read_text()
    assert "| (a) RL Logging Board load() |" in md and "| (c) open_run, warm cache |" in md
    # the generated log stays where it was asked to be, and the cache never went into it
    assert sorted(p.suffix for p in (tmp_path / "logs").iterdir() if p.suffix) == [".json", ".jsonl", ".jsonl"]


def test_many_files_quick_prints_the_table(tmp_path):
    out_md = tmp_path / "many_files_quick.md"
    out = run_benchmark("many_files.py", "--quick", "--repeats", "1", "--out", str(out_md), timeout=600)
    for case in ("one", "many", "apart"):
        m = re.search(rf"^\| \({case}\) [^|]+\| ([0-9.]+) \| [0-9.]+ \| ([0-9.]+)x \|$", out, re.M)
        assert m, f"no row for case ({case}) in:\n{out}"
        assert float(m.group(1)) > 0 and (case != "one" or float(m.group(2)) == 1.0)
    assert re.search(r"Parsing small files together: [0-9.]+x faster than one by one\.", out)
    assert "| (many) a file per step |" in out_md.read_text()


def test_refresh_quick_prints_the_table(tmp_path):
    out_md = tmp_path / "refresh_quick.md"
    out = run_benchmark("refresh.py", "--quick", "--out", str(out_md), timeout=600)
    for case in ("whole", "by_change"):
        m = re.search(rf"^\| \({case}\) [^|]+\| ([0-9.]+) \| ([0-9.]+) \| [0-9]+ \| ([0-9.]+)x \|$", out, re.M)
        assert m, f"no row for case ({case}) in:\n{out}"
        assert 0 < float(m.group(1)) <= float(m.group(2)) and (case != "whole" or float(m.group(3)) == 1.0)
    assert re.search(r"A refresh is [0-9.]+x faster when only what changed is read\.", out)
    assert "| (by_change) brought up to date by what changed |" in out_md.read_text()


def test_cap_quick_prints_the_table(tmp_path):
    out_md = tmp_path / "cap_quick.md"
    out = run_benchmark("cap.py", "--quick", "--repeats", "1", "--out", str(out_md), timeout=600)
    rows = {}
    for case in ("b", "d", "e"):
        m = re.search(rf"^\| \({case}\) [^|]+\| ([0-9]+) \| ([0-9]+) \| ([0-9.]+) \|[^|]*\| [0-9]+ \| ([0-9.]+)x \|$",
                      out, re.M)
        assert m, f"no row for case ({case}) in:\n{out}"
        rows[case] = [float(x) for x in m.groups()]
    assert rows["b"][1] == 0 and rows["b"][3] == 1.0  # the baseline skips nothing
    assert rows["d"][0] < rows["b"][0] and rows["d"][1] > 0 and rows["e"][1] > 0  # the checked counts, skipping
    assert "| (d) max_samples_per_step=16 |" in out_md.read_text()


def test_memory_quick_prints_the_table(tmp_path):
    out_md = tmp_path / "memory_quick.md"
    out = run_benchmark("memory.py", "--quick", "--repeats", "1", "--dir", str(tmp_path / "logs"),
                        "--out", str(out_md), timeout=600)
    rows = {}
    for case in ("x1", "x4"):
        m = re.search(rf"^\| \({case}\) [^|]+\| ([0-9.]+) \| ([0-9]+) \| ([0-9.]+) \| ([0-9]+) \| ([0-9]+) \| "
                      r"([0-9.]+) \|$", out, re.M)
        assert m, f"no row for case ({case}) in:\n{out}"
        rows[case] = [float(x) for x in m.groups()]
    assert rows["x4"][1] == 4 * rows["x1"][1]  # samples: 4x the steps, as many per step
    assert 3.5 < rows["x4"][0] / rows["x1"][0] < 4.5  # MB
    assert all(r[3] > 0 and r[4] >= r[3] for r in rows.values())  # peak RSS only grows
    assert re.search(r"4x the log: [0-9.]+x the peak RSS of the open \(target <= 1.25x\): (PASS|FAIL) "
                     r"\(quick: targets not meaningful at this size\)\.", out)
    assert "| (x4) 4x the steps |" in out_md.read_text()
    # the logs stay where they were asked to be, and no cache went into them
    for case in ("x1", "x4"):
        assert sorted(p.suffix for p in (tmp_path / "logs" / case).iterdir()) == [".json", ".jsonl", ".jsonl"]
