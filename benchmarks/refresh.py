"""Following a growing run: what a refresh of a few new lines costs, by the number table brought up to date by what
changed (now) against rebuilt whole (before; the baseline, measured in the same run).

    python benchmarks/refresh.py            # 1,000,000 samples (sample-level, 4 ranks), 20 refreshes per case
    python benchmarks/refresh.py --quick    # 50,000 samples, 5 refreshes: a smoke run

Each case runs in its own process (this script in ``--worker`` mode) on its own copy of the log and cache: the log
is opened (cache built, not timed), then 16 lines are appended to one rank file and ``run.refresh()`` timed, again
and again (the small parts get merged on the way, as in a long follow). Cases: (whole) the number table rebuilt
from every part on each refresh (``Run._NUMS_BY_FILE = False``, the code before); (by_change) only what changed read.
The table goes to stdout and to ``benchmarks/results/refresh.md``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import add_worker_args, interleaved, now, peak_rss_mb, run_as_worker, write_results  # noqa: E402

FULL = {"samples": 1_000_000, "refreshes": 20}
QUICK = {"samples": 50_000, "refreshes": 5}
CASES = {"whole": "number table rebuilt whole (before)", "by_change": "brought up to date by what changed"}
APPEND = 16  # lines per refresh


def worker(case: str, logdir: str, cache: str) -> dict:
    """Open (not timed), then time each refresh after appending APPEND lines to the first rank file."""
    import warnings

    import rlviz_widgets
    from rlviz_widgets.run.run import Run

    warnings.simplefilter("ignore")
    Run._NUMS_BY_FILE = case == "by_change"
    run = rlviz_widgets.open_run(logdir, cache_dir=cache, progress=False)
    log = sorted(Path(logdir).glob("*.jsonl"))[0]
    with open(log) as f:
        line = f.readline()
    times = []
    for _ in range(int(Path(logdir, "refreshes").read_text())):
        with open(log, "a") as f:
            f.write(line * APPEND)
        t0 = time.perf_counter()
        changed = run.refresh()
        times.append(time.perf_counter() - t0)
        if not changed:
            raise SystemExit("a refresh saw nothing new")
    return {"case": case, "seconds": statistics.median(times), "times": times, "samples": run.n_samples,
            "peak_rss_mb": peak_rss_mb()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="50,000 samples, 5 refreshes (smoke run)")
    ap.add_argument("--repeats", type=int, default=1, help="processes per case (each times every refresh)")
    ap.add_argument("--out", type=Path, help="markdown output (default benchmarks/results/refresh[_quick].md)")
    add_worker_args(ap, CASES)
    args = ap.parse_args(argv)
    if run_as_worker(args, worker):
        return 0

    from rlviz_widgets._synth import write_sample_log

    spec = QUICK if args.quick else FULL
    scratch = Path(tempfile.mkdtemp(prefix="rlviz_refresh_"))
    try:
        source = scratch / "source"
        write_sample_log(source, samples=spec["samples"], steps=100, ranks=4)
        (source / "refreshes").write_text(str(spec["refreshes"]))
        mb = sum(p.stat().st_size for p in source.glob("*.jsonl")) / 2**20
        # each on a copy of its own: the appends of one case are not the other's
        results = interleaved(__file__, CASES, args.repeats, scratch, lambda c: source, copy=True)
        if len({r["samples"] for rs in results.values() for r in rs}) != 1:
            raise SystemExit("the cases disagree on the sample count")
        med = {c: statistics.median(r["seconds"] for r in rs) for c, rs in results.items()}
        rows = ["| case | refresh, median (s) | slowest (s) | peak RSS MB | vs (whole) |", "|---|---:|---:|---:|---:|"]
        for c, name in CASES.items():
            slowest = max(t for r in results[c] for t in r["times"])
            rss = max(r["peak_rss_mb"] for r in results[c])
            rows.append(f"| ({c}) {name} | {med[c]:.3f} | {slowest:.3f} | {rss:.0f} | {med['whole'] / med[c]:.1f}x |")
        head = (f"{spec['samples']:,} samples in 4 rank files ({mb:.1f} MB), {spec['refreshes']} refreshes of "
                f"{APPEND} appended lines each, per process; {args.repeats} process(es) per case.")
        text = "\n".join([head, "", *rows, "", f"A refresh is {med['whole'] / med['by_change']:.1f}x faster "
                          "when only what changed is read."])
        write_results(text, args.out, "refresh", "Following a growing run", args.quick,
                      f"`python benchmarks/refresh.py{' --quick' if args.quick else ''}`, {now()}")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
