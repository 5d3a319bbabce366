"""Memory benchmark: does a first open's peak memory grow with the log? (The claim: a log larger than RAM opens.)

    python benchmarks/memory.py            # the ingest benchmark's log (~315 MB) and one 4x as long (~1.26 GB)
    python benchmarks/memory.py --quick    # ~20 MB and ~80 MB: a smoke run
    python benchmarks/memory.py --dir D    # the logs in D/x1 and D/x4 (kept; reused when big enough)

Both logs come from the same generator with the same samples per step, tokens and ranks; the second has 4x the
steps. Each open runs in its own process on an empty cache dir; its peak RSS is read right after ``open_run``, then
again after a first look (``run.steps``, ``run.reward_histogram()``, ``run.tokens`` of 5 samples). ``run.samples``
is left out: it is the user's pandas frame of every sample (texts included), as large as they asked for.
Target: 4x the log costs at most 1.25x the peak memory of the open. The markdown goes to
``benchmarks/results/memory.md`` (``memory_quick.md`` for ``--quick``).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import QUICK_NOTE, interleaved, now, peak_rss_mb, run_as_worker, write_results  # noqa: E402
from benchmarks.ingest import FULL, MB, QUICK, log_args, log_size, make_log  # noqa: E402

CASES = {"x1": "the ingest benchmark's log", "x4": "4x the steps"}
GROWTH_TARGET = 1.25  # peak RSS of the open at 4x the log, over that at 1x


def worker(case: str, logdir: str, cache: str | None) -> dict:
    """One first open in this process: peak RSS after it, and after a first look at the run."""
    import warnings

    import rlviz_widgets

    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    run = rlviz_widgets.open_run(logdir, cache_dir=cache, progress=False)
    seconds = time.perf_counter() - t0
    after_open = peak_rss_mb()
    steps = run.steps
    run.reward_histogram()
    ids = run.sql("SELECT sample_id FROM samples ORDER BY sample_id LIMIT 5")["sample_id"].tolist()
    tokens = len(run.tokens(ids))
    return {"case": case, "seconds": seconds, "after_open_mb": after_open, "after_look_mb": peak_rss_mb(),
            "samples": int(steps["samples"].sum()), "tokens": tokens}


def main(argv: list[str] | None = None) -> int:
    args = log_args(__doc__, "memory", CASES, argv)
    if run_as_worker(args, worker):
        return 0

    scratch = Path(tempfile.mkdtemp(prefix="rlviz_memory_"))
    try:
        base = args.dir.resolve() if args.dir else scratch / "logs"
        spec = QUICK if args.quick else FULL
        specs = {"x1": spec, "x4": {**spec, "steps": 4 * spec["steps"], "min_mb": 4 * spec["min_mb"]}}
        dirs = {}
        for c, s in specs.items():
            dirs[c] = base / c
            dirs[c].mkdir(parents=True, exist_ok=True)
            make_log(dirs[c], s)
        results = interleaved(__file__, CASES, args.repeats, scratch, dirs.get,
                              shown=lambda r: f"{r['after_open_mb']:.0f} MB")
        med = {c: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "after_open_mb", "after_look_mb")}
               for c, rs in results.items()}
        rows = ["| log | MB | samples | open s (median) | peak RSS after open MB | after a first look MB | "
                "RSS / log size |", "|---|---:|---:|---:|---:|---:|---:|"]
        for c, name in CASES.items():
            mb, m = log_size(dirs[c]) / MB, med[c]
            rows.append(f"| ({c}) {name} | {mb:.1f} | {results[c][0]['samples']} | {m['seconds']:.2f} | "
                        f"{m['after_open_mb']:.0f} | {m['after_look_mb']:.0f} | {m['after_open_mb'] / mb:.2f} |")
        growth = med["x4"]["after_open_mb"] / med["x1"]["after_open_mb"]
        ok = growth <= GROWTH_TARGET
        tail = ["", f"4x the log: {growth:.2f}x the peak RSS of the open (target <= {GROWTH_TARGET}x): "
                f"{'PASS' if ok else 'FAIL'}" + (QUICK_NOTE if args.quick else "") + "."]
        head = [f"{args.repeats} run(s) per log, each in its own process on an empty cache; the peak RSS of the "
                "process (Python, pandas, DuckDB and pyarrow loaded: ~140 MB before any log).", ""]
        write_results("\n".join(head + rows + tail), args.out, "memory", "Memory benchmark", args.quick,
                      f"`python benchmarks/memory.py{' --quick' if args.quick else ''}`, {now()}")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
