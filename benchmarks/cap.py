"""Cap benchmark: a first open with a per-step cap or a step range against a first open of everything.

    python benchmarks/cap.py              # the ingest benchmark's >= 300 MB log, 3 runs per case
    python benchmarks/cap.py --quick      # a ~20 MB log: a smoke run
    python benchmarks/cap.py --dir D      # the log in D (kept; reused when big enough, as ingest.py does)

Each measurement runs in its own process, on an empty cache dir. Cases: (b) ``open_run`` of every line, the
baseline; (d) ``max_samples_per_step=16`` (of 256 per step); (e) ``steps=`` a fifth of the steps. Lines a cap or a
range leave out are skipped unread (``readers/selective.py``): every byte is still read, to find each line's step,
but only the lines kept are parsed. Printed: each case's time and its speed-up over (b); each case's sample count is
checked against (b)'s steps. The markdown goes to ``benchmarks/results/cap.md`` (``cap_quick.md`` for ``--quick``).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import interleaved, now, peak_rss_mb, run_as_worker, write_results  # noqa: E402
from benchmarks.ingest import MB, log_args, log_dir, log_size  # noqa: E402

CAP = 16
CASES = {"b": "open_run, every line", "d": f"max_samples_per_step={CAP}", "e": "steps= a fifth of the steps"}


def options(case: str, steps: int) -> dict:
    """The open's options of a case (``steps``: how many steps the log has, numbered from 0)."""
    if case == "d":
        return {"max_samples_per_step": CAP}
    if case == "e":
        first = steps * 2 // 5
        return {"steps": (first, first + max(steps // 5, 1) - 1)}
    return {}


def worker(case: str, logdir: str, cache: str | None) -> dict:
    """One first open, in this process: imports first, then only ``open_run`` is timed."""
    import warnings

    import rlviz_widgets

    warnings.simplefilter("ignore")
    steps = json.loads((Path(logdir) / ".ingest_params.json").read_text())["steps"]
    t0 = time.perf_counter()
    run = rlviz_widgets.open_run(logdir, cache_dir=cache, progress=False, **options(case, steps))
    seconds = time.perf_counter() - t0
    counts = run.steps.set_index("step")["samples"]
    return {"case": case, "seconds": seconds, "peak_rss_mb": peak_rss_mb(), "skipped": run.skipped_lines,
            "counts": {str(int(s)): int(n) for s, n in counts.items()}}


def expected(case: str, full: dict[str, int], steps: int) -> int:
    """The samples a case must hold, from the counts per step of a read of everything."""
    opts = options(case, steps)
    lo, hi = opts.get("steps", (None, None))
    cap = opts.get("max_samples_per_step")
    return sum(min(n, cap or n) for s, n in full.items()
               if (lo is None or int(s) >= lo) and (hi is None or int(s) <= hi))


def main(argv: list[str] | None = None) -> int:
    args = log_args(__doc__, "cap", CASES, argv)
    if run_as_worker(args, worker):
        return 0

    scratch = Path(tempfile.mkdtemp(prefix="rlviz_cap_"))
    try:
        logdir, params = log_dir(args, scratch)
        results = interleaved(__file__, CASES, args.repeats, scratch, lambda c: logdir)
        full = results["b"][0]["counts"]
        for c, rs in results.items():
            want = expected(c, full, params["steps"])
            got = {sum(r["counts"].values()) for r in rs}
            if got != {want}:
                raise SystemExit(f"({c}) holds {got} samples, not {want}")
        base = statistics.median(r["seconds"] for r in results["b"])
        rows = ["| case | samples | lines skipped | seconds (median) | runs (s) | peak RSS MB | speed-up vs (b) |",
                "|---|---:|---:|---:|---|---:|---:|"]
        for c, name in CASES.items():
            rs = results[c]
            sec = statistics.median(r["seconds"] for r in rs)
            rows.append(f"| ({c}) {name} | {sum(rs[0]['counts'].values())} | {rs[0]['skipped']} | {sec:.3f} | "
                        + ", ".join(f"{r['seconds']:.3g}" for r in rs)
                        + f" | {statistics.median(r['peak_rss_mb'] for r in rs):.0f} | {base / sec:.2f}x |")
        head = [f"Log: {log_size(logdir) / MB:.1f} MB, {params}; {args.repeats} run(s) per case, each in its own "
                "process on an empty cache.", ""]
        write_results("\n".join(head + rows), args.out, "cap", "Cap benchmark", args.quick,
                      f"`python benchmarks/cap.py{' --quick' if args.quick else ''}`, {now()}")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
