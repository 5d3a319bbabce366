"""Smoke test of the RunView benchmark: it runs end to end on a small run (real JupyterLab in headless Chromium)
and prints its table. No timing assertions: the targets live in the benchmark itself."""

from __future__ import annotations

import re

from conftest import run_benchmark


def test_runview_quick_prints_the_table(tmp_path, chromium):
    data, out_md = tmp_path / "logs", tmp_path / "runview_quick.md"
    out = run_benchmark("runview.py", "--quick", "--dir", str(data), "--runs", "3", "--drags", "5",
                        "--out", str(out_md), timeout=900)
    assert out.splitlines()[0] == f"command: python benchmarks/runview.py --dir {data} --quick --runs 3 --drags 5"
    assert re.search(r"^data: 20,000 samples, [0-9,]+ tokens, [0-9.]+ GB in 4 files; machine: \d+ CPU", out, re.M)
    assert "| measurement | median | baseline (median) | ratio (baseline / ours) | target | result |" in out
    for name, unit in (("warm render in JupyterLab: cell run → complete RunView (fresh kernel)", "s"),
                       ("brush (Python side) → row_count + first 100 rows, table sorted by reward (12 ranges)", "ms"),
                       ("brush (Python side) → row_count + first 100 rows, table in default order (12 ranges)", "ms"),
                       ("brush by mouse on the KL chart → new count in the table (browser, 5 drags)", "ms")):
        m = re.search(rf"^\| {re.escape(name)} \| ([0-9.]+) {unit} \| ([0-9.]+) {unit} \| ([0-9.]+)x \| "
                      rf"< [0-9.]+ {unit} \| (PASS|FAIL) \|$", out, re.M)
        assert m, f"no row {name!r} in:\n{out}"
        assert float(m.group(1)) > 0 and float(m.group(2)) > 0
    assert re.search(r"^\| cold cache build, .*\| [0-9.]+ s \|", out, re.M)
    assert "the same counts as pandas: yes" in out
    assert re.search(r"\b0 outside 127\.0\.0\.1", out)
    assert re.search(r"Overall: (PASS|FAIL)\.", out)
    assert "| brush by mouse on the KL chart" in out_md.read_text()
    # the data are reused on a second run (marker), not written again
    assert (data / ".runview_params.json").exists()
