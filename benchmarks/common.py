"""What the benchmarks share: workers in their own process, the naive rows reply (the pandas baseline), headless
Chromium as the browser tests drive it (``tests/browser/lab.py``), and the results file.

The benchmarks run as ``python benchmarks/X.py`` from the repo root: each puts the root on ``sys.path`` first and
imports this module as ``benchmarks.common``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# tests.browser.lab is imported where it is used: a worker measuring its peak RSS loads nothing more than it needs

RESULTS = HERE / "results"
QUICK_NOTE = " (quick: targets not meaningful at this size)"


def median(xs) -> float:
    return statistics.median(xs)


def peak_rss_mb() -> float:
    """This process's peak resident set size (ru_maxrss is in KB on Linux)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def add_worker_args(ap, cases) -> None:
    """The hidden arguments of a benchmark's worker mode (``run_worker``: one measurement in its own process)."""
    import argparse

    ap.add_argument("--worker", choices=sorted(cases), help=argparse.SUPPRESS)
    ap.add_argument("--logdir", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)


def run_as_worker(args, worker) -> bool:
    """In worker mode (``add_worker_args``), the one measurement printed as a JSON line; whether it was."""
    if not args.worker:
        return False
    print(json.dumps(worker(args.worker, args.logdir, args.cache)))
    return True


def run_worker(script: str | Path, args: list[str]) -> dict:
    """Runs ``script --worker *args`` in its own process; returns the JSON of its last stdout line."""
    cmd = [sys.executable, str(Path(script).resolve()), "--worker", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"worker {args[0]} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def interleaved(script: str | Path, cases, repeats: int, scratch: Path, logdir, copy: bool = False,
                shown=lambda r: f"{r['seconds']:.3f} s") -> dict[str, list[dict]]:
    """Every case once per repeat, interleaved (a machine growing busier slows every case alike), each by
    ``run_worker`` on ``logdir(case)`` and a fresh cache dir, deleted after; a line per repeat, ``shown`` per case.
    ``copy``: the worker gets a copy of the log folder of its own (it appends to it), deleted after too."""
    import shutil

    results: dict[str, list[dict]] = {c: [] for c in cases}
    for i in range(repeats):
        for c in cases:
            logs, cache = Path(logdir(c)), scratch / f"cache_{c}_{i}"
            if copy:
                logs = Path(shutil.copytree(logs, scratch / f"logs_{c}_{i}"))
            results[c].append(run_worker(script, [c, "--logdir", str(logs), "--cache", str(cache)]))
            shutil.rmtree(cache, ignore_errors=True)
            if copy:
                shutil.rmtree(logs, ignore_errors=True)
        print(f"run {i + 1}/{repeats}: " + ", ".join(f"({c}) {shown(results[c][-1])}" for c in cases), flush=True)
    return results


# ---------------------------------------------------------------------------------------------------- baseline
def json_cell(v):
    """A DataFrame value as JSON (what a naive rows handler would do)."""
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item"):
        v = v.item()
        if isinstance(v, float) and math.isnan(v):
            return None
    try:
        import pandas as pd

        if v is pd.NA:
            return None
    except ImportError:  # pragma: no cover
        pass
    return v if isinstance(v, (int, float, bool, str)) else str(v)


def naive_rows_reply(page, columns: list[str], offset: int, total: int) -> str:
    """The rows rpc reply for a page of the frame, built naively: the same JSON rows (texts clipped at 300)."""
    rows, clipped = [], []
    for rec in page[columns].itertuples(index=False, name=None):
        row, flags = [], []
        for v in rec:
            if isinstance(v, str):
                flags.append(len(v) > 300)
                row.append(v[:300])
            else:
                flags.append(False)
                row.append(json_cell(v))
        rows.append(row)
        clipped.append(flags)
    result = {"offset": offset, "ids": [int(i) for i in page["sample_id"]], "rows": rows,
              "clipped": clipped if any(any(f) for f in clipped) else None, "generation": 0, "total": total}
    return json.dumps({"type": "rpc", "id": "naive", "ok": True, "result": result})


# ---------------------------------------------------------------------------------------------------- browser
def chromium_missing() -> bool:
    """True (and says so on stderr) when there is no Chromium to drive."""
    from tests.browser.lab import CHROMIUM

    if Path(CHROMIUM).exists():
        return False
    print(f"Chromium not found at {CHROMIUM} (apt-get install chromium)", file=sys.stderr)
    return True


def launch_chromium(playwright, home: Path):
    """Headless Chromium as the browser tests launch it, with ``home`` as its HOME."""
    from tests.browser.lab import CHROMIUM, CHROMIUM_ARGS

    home.mkdir(parents=True, exist_ok=True)
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                                      env={**os.environ, "HOME": str(home)})


def local_context(browser, requests: list[str], width: int, height: int):
    """A browser context that records every request's URL in ``requests``.

    Nothing may leave this machine: such requests are recorded (and fail the run), and never sent.
    """
    from tests.browser.lab import is_local

    ctx = browser.new_context(viewport={"width": width, "height": height})
    ctx.on("request", lambda r: requests.append(r.url))
    ctx.route(lambda u: not is_local(u), lambda route: route.abort())
    return ctx


def outside_requests(requests: list[str]) -> list[str]:
    """The recorded requests that left 127.0.0.1."""
    from tests.browser.lab import is_local

    return [u for u in requests if not is_local(u)]


def page_failures(outside: list[str], problems: list[str]) -> int:
    """1 (said on stderr) if a request left 127.0.0.1 or the page reported problems, else 0."""
    code = 0
    if outside:
        print(f"FAIL: requests left 127.0.0.1: {outside[:10]}", file=sys.stderr)
        code = 1
    if problems:
        print("FAIL: problems in the page:\n  " + "\n  ".join(problems[:20]), file=sys.stderr)
        code = 1
    return code


# ---------------------------------------------------------------------------------------------------- results
def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M")


def write_results(text: str, out: Path | None, name: str, title: str, quick: bool, heading: str | None = None) -> Path:
    """Prints the table, then writes it as markdown to ``out`` (default ``benchmarks/results/<name>[_quick].md``)
    under ``# <title>`` and ``heading`` (default: the date and time)."""
    print()
    print(text)
    out = out or RESULTS / (f"{name}_quick.md" if quick else f"{name}.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    title = f"# {title}" + (QUICK_NOTE if quick else "")
    out.write_text(f"{title}\n\n{heading or now()}\n\n{text}\n", encoding="utf-8")
    print(f"\nwritten to {out}")
    return out
