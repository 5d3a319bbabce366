"""python -m rlviz_widgets [LOGS...]: open rollout logs and print a summary of each run.

With no argument, reads the bundled real data and a generated token-level log. Exits with 1 when a source gave
no samples (its problems say why), 2 on an error (a missing path, a bad option).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

from rlviz_widgets import Run, cache_usage, prune_cache
from rlviz_widgets._ingest.readers import READERS
from rlviz_widgets._ingest.readers.rlb import DEFAULT_PAD_TOKEN
from rlviz_widgets._problems import SEE_EVERY_ONE, LogWarning, problems_text
from rlviz_widgets.demo import demo_sources
from rlviz_widgets.run import OpenOptions


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # the output piped into `head`, which stopped reading: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rlviz_widgets", epilog=__doc__.split("\n\n")[1],
                                 description="Open rollout logs and print a summary of each run.")
    ap.add_argument("logs", nargs="*", help="log folders, files or globs (default: the bundled demo data)")
    ap.add_argument("--cache-dir", default=None,
                    help="where the columnar cache lives (default: $RLVIZ_CACHE_DIR, else the user cache dir)")
    ap.add_argument("--system-prompt-end", default=None, metavar="MARKER",
                    help="drop the prompt text up to the last occurrence of MARKER")
    ap.add_argument("--max-samples-per-step", type=int, default=None, metavar="N",
                    help="keep the first N samples of each step (the lines past them are skipped unread)")
    ap.add_argument("--steps", type=_step_range, default=None, metavar="LO:HI",
                    help="keep an inclusive step range; either end may be left out (10:, :50; a negative one "
                         "after =: --steps=-5:10)")
    ap.add_argument("--format", default="auto", choices=["auto", *(r for r in READERS if r != "columns")],
                    help="the logs' format (default: told from their files)")
    ap.add_argument("--pad-token", default=DEFAULT_PAD_TOKEN, metavar="TEXT",
                    help=f"stripped from the texts shown (default: {DEFAULT_PAD_TOKEN}; '' strips nothing)")
    ap.add_argument("--problems", action="store_true",
                    help="list every problem found in the logs (file, line, kind, message) after each summary")
    ap.add_argument("--cache-usage", action="store_true", help="list what the cache holds, per log file, and stop")
    ap.add_argument("--prune-cache", action="store_true",
                    help="delete the cache of logs gone and of other package versions (unless in use), and stop")
    ap.add_argument("--dry-run", action="store_true", help="with --prune-cache: only list what would go")
    args = ap.parse_args(argv)
    if args.dry_run and not args.prune_cache:
        ap.error("--dry-run goes with --prune-cache (it lists what pruning would remove)")
    if args.cache_usage or args.prune_cache:
        return _cache_report(args)
    try:
        options = OpenOptions(format=args.format, cache_dir=args.cache_dir, pad_token=args.pad_token,
                              system_prompt_end=args.system_prompt_end,
                              max_samples_per_step=args.max_samples_per_step, steps=args.steps)
    except ValueError as e:  # a bad option: said in one line, not a traceback
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 2
    sources = args.logs or [str(p) for p in demo_sources(args.cache_dir)]
    empty = []
    for src in sources:
        t = time.perf_counter()
        try:
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                warnings.simplefilter("ignore", LogWarning)  # the summary below says the same, once
                run = Run.with_options(src, options)
        except (OSError, ValueError) as e:  # a missing path, a bad option: said in one line, not a traceback
            print(f"{ap.prog}: error: {e}", file=sys.stderr)
            return 2
        print(f"== {src}  (opened in {time.perf_counter() - t:.2f}s)")
        for w in said:  # an option that kept nothing: said here in our words, not at runpy's line
            print(f"{ap.prog}: warning: {w.message}", file=sys.stderr)
        # a terminal has no `run` to look in: the summary points to the flag that lists them
        see = "Every one is listed below." if args.problems else f"Run {ap.prog} --problems to list every one."
        print(run.summary().replace(SEE_EVERY_ONE, see))
        steps = run.steps
        if len(steps):
            cols = [c for c in ("step", "samples", "reward_mean", "reward_std", "ref_reward_mean", "kl_mean",
                                "length_mean") if c in steps and steps[c].notna().any()]
            print(steps[cols].to_string(index=False, max_rows=12, float_format=lambda v: f"{v:.4g}"))
        else:
            empty.append(src)
        if args.problems:
            print(f"-- problems of {src}\n{problems_text(run.problems)}")
        print()
    for src in empty:  # a file that is no JSON lines, say: not a success
        print(f"{ap.prog}: no samples read from {src} (see its problems, or the warnings, above)", file=sys.stderr)
    return 1 if empty else 0


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
