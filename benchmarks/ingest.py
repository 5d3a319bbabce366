"""Ingest benchmark: RL Logging Board's loader vs ``open_run`` (empty cache, then warm cache).

    python benchmarks/ingest.py            # a >= 300 MB synthetic log, 3 runs per case (a few minutes)
    python benchmarks/ingest.py --quick    # a ~20 MB log: a smoke run, the targets are not meaningful there
    python benchmarks/ingest.py --dir D    # generate into D (kept, and reused when big enough)
    python benchmarks/ingest.py --cases bd --repeats 7   # only (b) and (d), interleaved: the conversation target

Every measurement runs in its own process (this script in ``--worker`` mode), so peak RSS is that of one load
(``--settle S``: after a pause of S seconds).
A worker imports first, then times only the load call with ``time.perf_counter`` and prints one JSON line.

Cases: (a) ``benchmarks/rlb_baseline.py``'s ``load()``, (b) ``open_run`` with an empty cache dir (a fresh one
each run), (c) ``open_run`` again over a cache built by (b), (d) ``open_run`` with an empty cache dir of a
conversation log of the same bytes (OpenAI-chat ``messages`` JSON lines: 4 messages a sample on average, tool calls
and results; in ``{dir}_chat``). Targets: (b) >= 10x faster than (a), (c) >= 100x faster, peak RSS of (b) and (c)
<= 1/3 of (a); (d) within 1.2x of (b)'s time. The median of the runs is reported. The table goes to stdout and,
as markdown, to ``benchmarks/results/ingest.md`` (``ingest_quick.md`` for ``--quick``, ``ingest_bd.md`` for
``--cases bd``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import QUICK_NOTE, add_worker_args, now, peak_rss_mb, run_as_worker, run_worker, write_results  # noqa: E402

FULL = {"steps": 50, "samples_per_step": 256, "tokens": 256, "ranks": 4, "min_mb": 300}
QUICK = {"steps": 8, "samples_per_step": 64, "tokens": 448, "ranks": 2, "min_mb": 20}
CASES = {"a": "RL Logging Board load()", "b": "open_run, empty cache", "c": "open_run, warm cache",
         "d": "open_run, empty cache, conversation log"}
SPEED_TARGET = {"b": 10.0, "c": 100.0}
CHAT_TARGET = 1.2  # (d)'s time over (b)'s, at most
CHAT_WORDS = ("the", "answer", "is", "we", "compute", "file", "result", "so", "then", "value", "<b>", "naïve", "über",
              "42", "x", "=", "def", "return", "ok", "error", "line", "search", "found", "page", "数据")
MEMORY_TARGET = 1 / 3
MB = 1024 * 1024


# -- worker ------------------------------------------------------------------------------------------------------
def worker(case: str, logdir: str, cache: str | None) -> dict:
    """One measurement, in this process: imports first, then only the load call is timed."""
    sys.path[:0] = [str(ROOT), str(HERE)]
    if case == "a":
        import rlb_baseline

        t0 = time.perf_counter()
        data = rlb_baseline.load(logdir)
        seconds = time.perf_counter() - t0
        samples = sum(len(s["reward"]) for s in data.values())
        extra = {}
    else:
        import warnings

        import rlviz_widgets

        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        run = rlviz_widgets.open_run(logdir, cache_dir=cache, progress=False)
        seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        steps = run.steps  # not part of the timed load: what a first look costs on top
        extra = {"steps_seconds": time.perf_counter() - t1}
        samples = int(steps["samples"].sum())
    return {"case": case, "seconds": seconds, "peak_rss_mb": peak_rss_mb(), "samples": samples, **extra}


def measure(case: str, logdir: Path, cache: Path | None, settle: float = 0.0) -> dict:
    """One measurement in its own process (``worker``), after ``settle`` seconds of nothing (``--settle``: to check
    whether the process before, (a) freeing 1.6 GB, slows the next; no effect beyond the noise was found)."""
    time.sleep(settle)
    return run_worker(__file__, [case, "--logdir", str(logdir)] + (["--cache", str(cache)] if cache else []))


# -- log ---------------------------------------------------------------------------------------------------------
def log_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.jsonl"))


def make_log(folder: Path, spec: dict) -> dict:
    """Write the synthetic log (growing the token count until it is big enough); reuse one already there."""
    from rlviz_widgets._synth import write_log

    marker = folder / ".ingest_params.json"
    min_bytes = spec["min_mb"] * MB
    if marker.exists() and log_size(folder) >= min_bytes:
        params = json.loads(marker.read_text())
        if {k: params.get(k) for k in ("steps", "samples_per_step", "ranks")} == \
                {k: spec[k] for k in ("steps", "samples_per_step", "ranks")}:
            print(f"reusing the log in {folder}", flush=True)
            return params
    tokens = spec["tokens"]
    while True:
        for p in folder.glob("*.jsonl"):
            p.unlink()
        t0 = time.perf_counter()
        write_log(folder, steps=spec["steps"], samples_per_step=spec["samples_per_step"], tokens=tokens,
                  ranks=spec["ranks"], seed=0)
        size = log_size(folder)
        print(f"generated {size / MB:.1f} MB (tokens={tokens}) in {time.perf_counter() - t0:.1f} s", flush=True)
        if size >= min_bytes:
            break
        tokens = int(tokens * min_bytes / size * 1.05) + 1  # grow the responses and write again
    params = {k: spec[k] for k in ("steps", "samples_per_step", "ranks")} | {"tokens": tokens}
    marker.write_text(json.dumps(params))
    return params


def chat_record(rng, step: int, index: int, words: int) -> dict:
    """One agent trajectory in the OpenAI chat format: 2, 4 or 6 messages (4 on average) with 0, 1 or 2 tool calls,
    texts of about ``words`` words in all."""
    def text(n: int) -> str:
        return " ".join(rng.choice(CHAT_WORDS) for _ in range(max(n, 1)))

    share = max(words // 6, 1)
    user = {"role": "user", "content": f"Question {index % 97}: " + text(share // 2)}
    shape = index % 3
    if shape == 0:
        messages = [user, {"role": "assistant", "content": text(share * 2)}]
    else:
        calls = [{"id": f"call_{index}_{k}", "type": "function",
                  "function": {"name": rng.choice(("search", "read_file", "python")),
                               "arguments": json.dumps({"query": text(6), "k": k})}} for k in range(shape)]
        results = [{"role": "tool", "tool_call_id": c["id"], "content": text(share * 2)} for c in calls]
        messages = ([{"role": "system", "content": "You can call tools."}] if shape == 2 else []) + [
            user, {"role": "assistant", "content": None, "tool_calls": calls}, *results,
            {"role": "assistant", "content": text(share)}]
    return {"step": step, "group": f"{step}-{index // 8}", "reward": round(rng.gauss(0.5, 0.5), 4),
            "messages": messages}


def make_chat_log(folder: Path, target_bytes: int, spec: dict) -> None:
    """A conversation log of ``target_bytes`` (within 2%) in ``spec``'s steps and ranks; reused when it is."""
    import random

    marker = folder / ".chat_params.json"
    if marker.exists() and abs(log_size(folder) - target_bytes) <= target_bytes // 50:
        print(f"reusing the conversation log in {folder}", flush=True)
        return
    folder.mkdir(parents=True, exist_ok=True)
    samples = spec["steps"] * spec["samples_per_step"]
    words = 200
    for _ in range(6):  # the size grows with the words a sample: a few tries reach the target
        for p in folder.glob("*.jsonl"):
            p.unlink()
        rng = random.Random(0)
        files = [open(folder / f"rank{r}.jsonl", "w") for r in range(spec["ranks"])]  # noqa: SIM115
        try:
            for i in range(samples):
                step = i // spec["samples_per_step"]
                files[i % spec["ranks"]].write(json.dumps(chat_record(rng, step, i, words)) + "\n")
        finally:
            for f in files:
                f.close()
        size = log_size(folder)
        if abs(size - target_bytes) <= target_bytes // 50:
            break
        words = int(words * target_bytes / size)
    marker.write_text(json.dumps({"bytes": log_size(folder), "words": words}))
    print(f"conversation log: {log_size(folder) / MB:.1f} MB, {samples} samples", flush=True)


# -- report ------------------------------------------------------------------------------------------------------
def table(results: dict[str, list[dict]], info: dict, quick: bool = False) -> tuple[str, bool]:
    """The markdown table and whether every target measured passed (``results`` may lack cases: ``--cases``)."""
    med = {c: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "peak_rss_mb")}
           for c, rs in results.items() if rs}
    a = med.get("a")
    rows = ["| case | seconds (median) | runs (s) | peak RSS MB | speed-up vs (a) | memory vs (a) | target | result |",
            "|---|---:|---|---:|---:|---:|---|---|"]
    ok_all = True
    for c, name in CASES.items():
        if c not in med:
            continue
        m = med[c]
        runs = ", ".join(f"{r['seconds']:.3g}" for r in results[c])
        speed = a["seconds"] / m["seconds"] if a else float("nan")
        mem = m["peak_rss_mb"] / a["peak_rss_mb"] if a else float("nan")
        if c == "a":
            target, result = "baseline", "-"
        elif c == "d":
            ratio = m["seconds"] / med["b"]["seconds"]
            ok_all &= ratio <= CHAT_TARGET
            target = f"<= {CHAT_TARGET:g}x (b)'s time"
            result = f"{'PASS' if ratio <= CHAT_TARGET else 'FAIL'} ({ratio:.2f}x (b))"
        elif a is None:
            target, result = f">= {SPEED_TARGET[c]:g}x faster, memory <= 1/3", "- (no (a) measured)"
        else:
            ok_speed, ok_mem = speed >= SPEED_TARGET[c], mem <= MEMORY_TARGET
            ok_all &= ok_speed and ok_mem
            target = f">= {SPEED_TARGET[c]:g}x faster, memory <= 1/3"
            result = ("PASS" if ok_speed and ok_mem else "FAIL") + \
                f" (speed {'ok' if ok_speed else 'FAIL'}, memory {'ok' if ok_mem else 'FAIL'})"
        against = f"{speed:.1f}x | {mem:.2f}" if a else "- | -"
        rows.append(f"| ({c}) {name} | {m['seconds']:.3f} | {runs} | {m['peak_rss_mb']:.0f} | {against} | {target} | "
                    f"{result} |")
    steps_s = [r["steps_seconds"] for c in ("b", "c") for r in results[c] if "steps_seconds" in r]
    pause = f" after a {info['settle']:g} s pause" if info.get("settle") else ""
    head = [f"Log: {info['mb']:.1f} MB in {info['files']} files, {info['samples']} samples "
            f"({info['params']}); {info['repeats']} run(s) per case, each in its own process{pause}; "
            f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPU(s)."
            + (f" (d): a conversation log of {info['chat_mb']:.1f} MB, {info['chat_samples']} samples."
               if "d" in med else ""), ""]
    tail = ["", f"Not timed above: the first `run.steps` after `open_run` took {statistics.median(steps_s):.3f} s "
            "(median)." if steps_s else "",
            f"Overall: {'PASS' if ok_all else 'FAIL'}"
            + (QUICK_NOTE if quick else "") + "."]
    return "\n".join(head + rows + tail), ok_all


def log_args(doc: str, name: str, cases: dict, argv: list[str] | None, settle: bool = False,
             choose: bool = False) -> argparse.Namespace:
    """The arguments of a benchmark on this log (``--quick``, ``--dir``, ``--repeats``, ``--out``, the worker's;
    ``--cases`` with ``choose``)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    if choose:
        ap.add_argument("--cases", default="".join(cases), metavar="LETTERS",
                        help=f"the cases to run, of {''.join(cases)} (default all; (c) and (d) need (b))")
    ap.add_argument("--quick", action="store_true", help="a ~20 MB log (smoke run)")
    ap.add_argument("--dir", type=Path, help="where to write the log (kept; reused when big enough)")
    ap.add_argument("--repeats", type=int, default=3)
    if settle:
        ap.add_argument("--settle", type=float, default=0.0, metavar="S",
                        help="seconds of pause before each measurement (default 0)")
    ap.add_argument("--out", type=Path, help=f"markdown output (default benchmarks/results/{name}[_quick].md)")
    add_worker_args(ap, cases)
    return ap.parse_args(argv)


def log_dir(args: argparse.Namespace, scratch: Path) -> tuple[Path, dict]:
    """(the log's folder, its parameters): ``--dir``'s, or one in ``scratch``; generated unless already there."""
    logdir = args.dir.resolve() if args.dir else scratch / "logs"
    logdir.mkdir(parents=True, exist_ok=True)
    return logdir, make_log(logdir, QUICK if args.quick else FULL)


def main(argv: list[str] | None = None) -> int:
    args = log_args(__doc__, "ingest", CASES, argv, settle=True, choose=True)
    if run_as_worker(args, worker):
        return 0
    chosen = set(args.cases)
    if not chosen or chosen - set(CASES) or ({"c", "d"} & chosen and "b" not in chosen):
        raise SystemExit(f"--cases: letters of {''.join(CASES)}; (c) and (d) need (b)")

    scratch = Path(tempfile.mkdtemp(prefix="rlviz_ingest_"))
    try:
        logdir, params = log_dir(args, scratch)
        files = sorted(logdir.glob("*.jsonl"))
        chat_dir = logdir.parent / f"{logdir.name}_chat"
        make_chat_log(chat_dir, log_size(logdir), QUICK if args.quick else FULL)
        results: dict[str, list[dict]] = {c: [] for c in CASES}
        warm = scratch / "cache_warm"
        for i in range(args.repeats):
            if "a" in chosen:
                results["a"].append(measure("a", logdir, None, args.settle))
            if "b" in chosen:
                cold = scratch / f"cache_cold_{i}"  # a fresh, empty cache dir for each (b)
                results["b"].append(measure("b", logdir, cold, args.settle))
                if i == 0 and "c" in chosen:
                    shutil.copytree(cold, warm)  # (c) reads the cache (b) built
                shutil.rmtree(cold, ignore_errors=True)
            if "c" in chosen:
                results["c"].append(measure("c", logdir, warm, args.settle))
            if "d" in chosen:
                chat_cold = scratch / f"cache_chat_{i}"
                results["d"].append(measure("d", chat_dir, chat_cold, args.settle))
                shutil.rmtree(chat_cold, ignore_errors=True)
            print(f"run {i + 1}/{args.repeats}: " + ", ".join(f"({c}) {results[c][-1]['seconds']:.3f} s"
                                                            for c in CASES if results[c]), flush=True)
        counts = {c: {r["samples"] for r in rs} for c, rs in results.items() if c != "d" and rs}  # (d): its own
        if len(set().union(*counts.values())) > 1:
            raise SystemExit(f"the loaders disagree on the sample count: {counts}")
        first = next(rs[0] for c, rs in results.items() if c != "d" and rs)  # (d) comes with (b)
        info = {"mb": log_size(logdir) / MB, "files": len(files), "samples": first["samples"],
                "chat_mb": log_size(chat_dir) / MB, "chat_samples": results["d"][0]["samples"] if results["d"] else 0,
                "params": ", ".join(f"{k}={v}" for k, v in params.items()), "repeats": args.repeats,
                "settle": args.settle}
        text, ok = table(results, info, args.quick)
        some = "" if chosen == set(CASES) else f" --cases {''.join(c for c in CASES if c in chosen)}"
        write_results(text, args.out, "ingest" + some.replace(" --cases ", "_"), "Ingest benchmark", args.quick,
                      f"`python benchmarks/ingest.py{' --quick' if args.quick else ''}{some}`, {now()}")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
