"""Many small files (a file per step, as verl and NeMo-RL write them) against the same records in one file.

    python benchmarks/many_files.py            # 200 files of 32 samples x 128 tokens (~73 MB), 3 runs per case
    python benchmarks/many_files.py --quick    # 20 files: a smoke run

Every measurement runs in its own process (this script in ``--worker`` mode) with an empty cache dir; only the
``open_run`` call is timed. Cases: (one) the records in one file, the baseline; (many) the same records in one file
per step, small files parsed several at once; (apart) the same files parsed one by one, as before that (the
reader's ``BATCH_BYTES`` set to 0). The table goes to stdout and to ``benchmarks/results/many_files.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import add_worker_args, interleaved, now, run_as_worker, write_results  # noqa: E402

FULL = {"files": 200, "samples": 32, "tokens": 128}
QUICK = {"files": 20, "samples": 16, "tokens": 64}
CASES = {"one": "one file (baseline)", "many": "a file per step", "apart": "a file per step, parsed one by one"}


def worker(case: str, logdir: str, cache: str) -> dict:
    """One cold open, in this process: imports first, then only the open is timed."""
    import warnings

    import rlviz_widgets
    from rlviz_widgets._store import cache as cachemod

    warnings.simplefilter("ignore")
    if case == "apart":
        cachemod.BATCH_BYTES = 0
    t0 = time.perf_counter()
    run = rlviz_widgets.open_run(logdir, cache_dir=cache, progress=False)
    return {"case": case, "seconds": time.perf_counter() - t0, "samples": run.n_samples}


def make_logs(root: Path, spec: dict) -> dict[str, Path]:
    """The per-step files and the one file, holding the same records."""
    from rlviz_widgets._synth import make_record

    many, one = root / "many", root / "one"
    many.mkdir(parents=True)
    one.mkdir()
    rng = random.Random(0)
    with open(one / "rollout.jsonl", "w") as whole:
        for step in range(spec["files"]):
            text = "".join(json.dumps(make_record(rng, step, i, spec["tokens"], progress=step / spec["files"])) + "\n"
                           for i in range(spec["samples"]))
            (many / f"{step}.jsonl").write_text(text)
            whole.write(text)
    return {"one": one, "many": many, "apart": many}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 small files (smoke run)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, help="markdown output (default benchmarks/results/many_files[_quick].md)")
    add_worker_args(ap, CASES)
    args = ap.parse_args(argv)
    if run_as_worker(args, worker):
        return 0

    spec = QUICK if args.quick else FULL
    scratch = Path(tempfile.mkdtemp(prefix="rlviz_many_"))
    try:
        logs = make_logs(scratch / "logs", spec)
        mb = sum(p.stat().st_size for p in logs["one"].iterdir()) / 2**20
        results = interleaved(__file__, CASES, args.repeats, scratch, logs.get)
        if len({r["samples"] for rs in results.values() for r in rs}) != 1:
            raise SystemExit("the cases disagree on the sample count")
        med = {c: statistics.median(r["seconds"] for r in rs) for c, rs in results.items()}
        rows = ["| case | seconds (median) | runs (s) | vs one file |", "|---|---:|---|---:|"]
        for c, name in CASES.items():
            runs = ", ".join(f"{r['seconds']:.3g}" for r in results[c])
            rows.append(f"| ({c}) {name} | {med[c]:.3f} | {runs} | {med[c] / med['one']:.1f}x |")
        head = (f"{spec['files']} files of {spec['samples']} samples x {spec['tokens']} tokens ({mb:.1f} MB in all), "
                f"{results['one'][0]['samples']} samples; each open cold, in its own process; {args.repeats} run(s) "
                "per case, interleaved.")
        text = "\n".join([head, "", *rows, "", f"Parsing small files together: {med['apart'] / med['many']:.1f}x "
                          "faster than one by one."])
        write_results(text, args.out, "many_files", "Many small files", args.quick,
                      f"`python benchmarks/many_files.py{' --quick' if args.quick else ''}`, {now()}")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
