"""Smoke test of the widget benchmark: it runs end to end (small sizes) and prints its table. No timing assertions:
the targets live in the benchmark itself."""

from __future__ import annotations

import re

from conftest import run_benchmark


def test_widgets_quick_prints_the_table(tmp_path, chromium):
    out_md = tmp_path / "widgets_quick.md"
    out = run_benchmark("widgets.py", "--quick", "--out", str(out_md), timeout=600)
    assert out.splitlines()[0] == "command: python benchmarks/widgets.py --quick"
    assert "| measurement | median ms | baseline median ms | ratio (baseline / ours) | target | result | bytes |" in out
    for name in ("rows page, first after sort change (20,000 samples)", "rows page, scrolling (20,000 samples)",
                 "token strip, first render (500 tokens, fresh page)",
                 "token strip, re-render on color_by change (500 tokens)"):
        m = re.search(rf"^\| {re.escape(name)} \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+)x \| < 100 ms[^|]*\| "
                      r"(PASS|FAIL) \| ([0-9,]+) \|$", out, re.M)
        assert m, f"no row {name!r} in:\n{out}"
        assert float(m.group(1)) > 0 and float(m.group(2)) > 0 and int(m.group(5).replace(",", "")) > 0
    assert re.search(r"0 outside 127\.0\.0\.1", out)
    assert "Same rewards in the same order as ours: yes" in out
    assert re.search(r"Overall: (PASS|FAIL)\.", out)
    assert "| rows page, scrolling (20,000 samples) |" in out_md.read_text()
