"""`python -m rlviz_widgets [LOGS...]`: open rollout logs and print a summary of the run.

With no argument, reads the bundled real data and a generated token-level log.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from . import cache_usage, open_run, prune_cache
from .demo import demo_sources
from .problems import LogWarning


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rlviz_widgets", description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="*", help="log folders, files or globs (default: the bundled demo data)")
    ap.add_argument("--cache-dir", default=None,
                    help="where the columnar cache lives (default: $RLVIZ_CACHE_DIR, else the user cache dir)")
    ap.add_argument("--system-prompt-end", default=None, metavar="MARKER",
                    help="drop the prompt text up to the last occurrence of MARKER")
    ap.add_argument("--max-samples-per-step", type=int, default=None, metavar="N",
                    help="keep the first N samples of each step (the lines past them are skipped unread)")
    ap.add_argument("--steps", type=_step_range, default=None, metavar="LO:HI",
                    help="keep an inclusive step range; either end may be left out (10:, :50)")
    ap.add_argument("--cache-usage", action="store_true", help="list what the cache holds, per log file, and stop")
    ap.add_argument("--prune-cache", action="store_true",
                    help="delete the cache of logs gone and of other package versions (unless in use), and stop")
    ap.add_argument("--dry-run", action="store_true", help="with --prune-cache: only list what would go")
    args = ap.parse_args(argv)
    if args.cache_usage or args.prune_cache:
        return _cache_report(args)
    sources = args.logs or [str(p) for p in demo_sources(args.cache_dir)]
    for src in sources:
        t = time.perf_counter()
        try:
            with warnings.catch_warnings():  # the summary below says the same, once
                warnings.simplefilter("ignore", LogWarning)
                run = open_run(src, cache_dir=args.cache_dir, system_prompt_end=args.system_prompt_end,
                               max_samples_per_step=args.max_samples_per_step, steps=args.steps)
        except (OSError, ValueError) as e:  # a missing path, a bad option: said in one line, not a traceback
            print(f"{ap.prog}: error: {e}", file=sys.stderr)
            return 2
        print(f"== {src}  (opened in {time.perf_counter() - t:.2f}s)")
        print(run.summary())
        steps = run.steps
        if len(steps):
            cols = [c for c in ("step", "samples", "reward_mean", "reward_std", "ref_reward_mean", "kl_mean",
                                "length_mean") if c in steps and steps[c].notna().any()]
            print(steps[cols].to_string(index=False, max_rows=12, float_format=lambda v: f"{v:.4g}"))
        print()
    return 0


def _step_range(text: str) -> tuple[int | None, int | None]:
    """``LO:HI`` as ``steps=(lo, hi)``, an end left out open."""
    lo, sep, hi = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"steps as LO:HI (either end may be left out), not {text!r}")
    try:
        return (int(lo) if lo.strip() else None, int(hi) if hi.strip() else None)
    except ValueError:
        raise argparse.ArgumentTypeError(f"steps as LO:HI, whole numbers, not {text!r}") from None


def _cache_report(args) -> int:
    """``--cache-usage`` / ``--prune-cache``: a table of the log files' caches, and a total."""
    if not args.prune_cache:
        rows = cache_usage(args.cache_dir)
        total, what = rows["bytes"].sum(), "cached"
    elif args.dry_run:
        rows = prune_cache(args.cache_dir, dry_run=True)
        total, what = rows["bytes"][~rows["in_use"]].sum(), "would be removed"
    else:
        rows = prune_cache(args.cache_dir)
        total, what = rows["bytes"][rows["removed"]].sum(), "removed"
    if len(rows):
        print(rows.assign(MB=(rows["bytes"] / 2**20).round(1))[["log", "lines", "state", "MB", "in_use", "removed"]]
              .to_string(index=False))
    print(f"{len(rows)} log file(s); {total / 2**20:.1f} MB {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
