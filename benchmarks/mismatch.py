"""Mismatch benchmark (issue 32): a generated prime-rl token export of 1M packed sequences.

    python benchmarks/mismatch.py                    # 1M sequences (~4.7 GB) and a 300 MB RLB-schema baseline
    python benchmarks/mismatch.py --sequences 50000  # smaller: a smoke run, the targets not meaningful
    python benchmarks/mismatch.py --dir D            # generate into D (kept with the caches, and reused)
    python benchmarks/mismatch.py --dir D --warm-only                # the warm figures only
    python benchmarks/mismatch.py --dir D --compare OLD --repeats 5  # warm: OLD's code and this, interleaved

Measured in this one process: (a) cold ingest of an RL Logging Board-schema log (the baseline,
``benchmarks/ingest.py``'s generator) and (b) of the prime-rl export, each with an empty cache dir, as MB/s, in
``--rounds`` interleaved rounds (the medians compared; a sub-second (a) alone swung 2x with the load); then,
warm (the export opened again from its cache), through the calls the RunView's widgets make (``warm``): (c) the
chart's datasets, which hold the mismatch and entropy step curves, asked first after the views are made (and, as
well, the step figures alone and the datasets asked again); (d) the SampleTable's first page after a sort by
``mismatch_log_ratio_abs_max`` descending, with a few numeric columns (and with the table's default columns, texts
too). Targets: (b)'s MB/s at least (a)'s / 1.5; (c) and (d) each under 200 ms (the median of 5). ``--compare OLD``
(a tree holding another version's ``rlviz_widgets/``) runs (c) and (d) in a process per version, alternating.
Sequences are short (24 tokens: a prompt of 12, a trained answer of 12), as the writer's ``main`` schema writes
them: every list of floats, ``null`` for non-finite.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import FULL, make_log  # noqa: E402

MB = 1024 * 1024
TOKENS, PROMPT = 24, 12
PER_FILE = 12_500  # sequences per rank file: 8 ranks x 10 steps at 1M


def _floats(a: np.ndarray) -> list[str]:
    """float32 values as the writer lists them (widened to Python floats' repr)."""
    return [repr(float(v)) for v in a.astype(np.float32).tolist()]


def write_export(folder: Path, sequences: int, seed: int = 0) -> int:
    """The export: ``token_exports/step_{N}/rank_{R}.jsonl`` of the ``main`` schema, ``STABLE`` in each step folder.
    Fast: each line is formatted from numpy arrays, not ``json.dumps`` of a dict."""
    rng = np.random.default_rng(seed)
    written, file_no = 0, 0
    while written < sequences:
        step, rank = 1 + file_no // 8, file_no % 8
        d = folder / "token_exports" / f"step_{step}"
        d.mkdir(parents=True, exist_ok=True)
        n = min(PER_FILE, sequences - written)
        mask = np.r_[np.zeros(PROMPT, bool), np.ones(TOKENS - PROMPT, bool)]
        mask_s = json.dumps(mask.tolist()).replace(" ", "")
        with open(d / f"rank_{rank}.jsonl", "w") as f:
            for i in range(n):
                ids = rng.integers(0, 150000, TOKENS)
                ids[:PROMPT] = (written + i) // 8 % 5000 + np.arange(PROMPT)  # 8 members share a prompt
                inf = np.where(mask, -rng.uniform(0, 2, TOKENS) ** 2, 0.0).astype(np.float32)
                tr = (np.where(mask, np.minimum(inf + rng.normal(0, 0.05, TOKENS), -1e-6),
                               -rng.uniform(0, 8, TOKENS))).astype(np.float32)
                ent = rng.uniform(0, 3, TOKENS).astype(np.float32)
                adv = np.where(mask, rng.normal(), 0.0).astype(np.float32)
                lr = tr - inf
                ratio = np.exp(lr)
                kl = ratio - lr - np.float32(1)
                delta = np.exp(tr) - np.exp(inf)
                masked = mask & np.where(adv > 0, delta > 0.2, delta < -0.2)
                lists = {"token_ids": "[" + ",".join(map(str, ids.tolist())) + "]",
                         "position_ids": "[" + ",".join(map(str, range(TOKENS))) + "]", "loss_mask": mask_s}
                for key, arr in (("advantages", adv), ("inference_logprobs", inf), ("trainer_logprobs", tr),
                                 ("entropy", ent), ("mismatch_kl", kl), ("log_importance_ratio", lr),
                                 ("importance_ratio", ratio), ("prob_delta", delta)):
                    lists[key] = "[" + ",".join(_floats(arr)) + "]"
                lists["is_masked"] = json.dumps(masked.tolist()).replace(" ", "")
                lists["is_masked_high"] = json.dumps((masked & (adv > 0)).tolist()).replace(" ", "")
                lists["is_masked_low"] = json.dumps((masked & (adv < 0)).tolist()).replace(" ", "")
                for key in ("rl_weights", "ce_weights", "ref_kl_weights"):
                    lists[key] = "[" + ",".join(["null"] * TOKENS) + "]"
                head = (f'{{"schema_version":1,"step":{step},"rank":{rank},"micro_step":{i // 16},'
                        f'"micro_sequence_idx":{i % 16},"export_sequence_idx":{i},"env_name":"math"')
                f.write(head + "".join(f',"{k}":{v}' for k, v in lists.items()) + "}\n")
        (d / "STABLE").touch()
        written += n
        file_no += 1
    return sum(p.stat().st_size for p in folder.rglob("*.jsonl"))


def timed(fn, repeat: int = 1, setup=None) -> tuple[float, object]:
    """(median seconds, the last answer) of ``repeat`` calls of ``fn``, ``setup`` untimed before each."""
    times, out = [], None
    for _ in range(repeat):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def cold(folder: Path, cache: Path, size: int) -> tuple[float, float]:
    """(seconds, MB/s) of an open with an empty cache dir (``cache``: kept after, for the warm figures)."""
    import rlviz_widgets as rw

    shutil.rmtree(cache, ignore_errors=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seconds, run = timed(lambda: rw.open_run(folder, cache_dir=cache, progress=False))
    run.close()
    return seconds, size / MB / seconds


PAGE_COLUMNS = ["sample_id", "step", "mismatch_log_ratio_abs_max", "masked_fraction", "entropy_mean", "reward"]


def warm(folder: Path, cache: Path, repeat: int = 5) -> dict[str, float]:
    """Median ms of what a RunView asks of a run opened from its cache, through the calls the widgets make: the
    chart's datasets (``_chart_data.run_datasets``: the step curves and the reward heat map) and their step
    figures alone (``step_stats``), each the first ask after the views are made (as after an open, a rule change
    or growth: ``_forget``) and asked again; the SampleTable's ``rows`` rpc (offset 0, a page of 100) after a
    sort by ``mismatch_log_ratio_abs_max`` descending, as the comm applies a header click (the table back in the
    log's order between, untimed), with the table's default columns (texts too) and with ``PAGE_COLUMNS``."""
    import rlviz_widgets as rw
    from rlviz_widgets import _chart_data as cd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = rw.open_run(folder, cache_dir=cache, progress=False)
    forget = run._forget  # noqa: SLF001 - the views as just made: nothing computed from them yet

    def datasets():
        return cd.run_datasets(run, bins=30, band=1.0, zero_shift=False, has_ref=False)

    out = {"samples": run.n_samples,
           "datasets_first_ms": timed(datasets, repeat, forget)[0] * 1000,
           "steps_first_ms": timed(lambda: cd.step_stats(run, cd.MAX_CURVE_STEPS), repeat, forget)[0] * 1000,
           "datasets_again_ms": timed(datasets, repeat)[0] * 1000}
    table = rw.SampleTable(run)
    sent: list[str] = []
    table.send = lambda content, buffers=None: sent.append(json.dumps(content))  # serialised, as the comm would

    def ask() -> None:
        table._on_rpc(table, {"type": "rpc", "id": "r", "method": "rows",  # noqa: SLF001 - as the comm calls it
                              "params": {"offset": 0, "limit": 100}}, [])
        if '"ok": true' not in sent[-1][:80]:
            raise SystemExit(f"rows failed: {sent[-1][:500]}")

    def unsorted() -> None:
        table.set_state({"sort_by": "", "sort_desc": False})
        ask()

    def sorted_page() -> None:
        table.set_state({"sort_by": "mismatch_log_ratio_abs_max", "sort_desc": True})
        ask()

    out["page_default_ms"] = timed(sorted_page, repeat, unsorted)[0] * 1000
    table.show_columns(PAGE_COLUMNS)
    out["page_ms"] = timed(sorted_page, repeat, unsorted)[0] * 1000
    run.close()
    return out


WARM_LINES = (("datasets_first_ms", "(c) chart datasets, first ask"),
              ("steps_first_ms", "    step figures alone, first ask"),
              ("datasets_again_ms", "    chart datasets, asked again"), ("page_ms", "(d) sorted page, numbers"),
              ("page_default_ms", "    sorted page, default columns"))


def compare(other: Path, root: Path, repeats: int) -> str:
    """The warm figures of the code in ``other`` (before) and this tree's (after), each in its own process,
    interleaved ``repeats`` times; a line per figure: the medians and every run's."""
    got: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(repeats):
        for label, code in (("before", other), ("after", ROOT)):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(code), "--dir", str(root)]
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            if done.returncode != 0:
                raise SystemExit(f"worker ({label}) failed:\n{done.stderr[-3000:]}")
            got[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(label, {k: round(v, 1) for k, v in got[label][-1].items()}, flush=True)
    head = "ms (median of the runs' medians)"
    lines = [f"{head:<38} {'before':>9} {'after':>9}   runs before / after"]
    for key, name in WARM_LINES:
        b, a = ([r[key] for r in got[x]] for x in ("before", "after"))
        lines.append(f"{name:<38} {statistics.median(b):9.1f} {statistics.median(a):9.1f}   "
                     f"{', '.join(f'{x:.0f}' for x in b)} / {', '.join(f'{x:.0f}' for x in a)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=None, help="the export, the baseline log and their caches: kept")
    ap.add_argument("--warm-only", action="store_true", help="no cold ingest (the caches in --dir made if missing)")
    ap.add_argument("--compare", type=Path, default=None,
                    help="a tree of another version of the code (its rlviz_widgets/): warm figures of both, "
                         "interleaved (implies --warm-only)")
    ap.add_argument("--repeats", type=int, default=5, help="processes per version with --compare")
    ap.add_argument("--rounds", type=int, default=3, help="cold ingests of each log, interleaved (the medians count)")
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)  # the code's tree
    args = ap.parse_args(argv)
    if args.worker is not None:  # one version's warm figures, as a JSON line
        sys.path.insert(0, str(args.worker))
        print(json.dumps(warm(args.dir / "prime", args.dir / "cache-prime")))
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="rlviz-mismatch-"))
    root = args.dir or scratch
    export, rlb = root / "prime", root / "rlb"
    marker = export / ".sequences"
    if not (marker.exists() and marker.read_text() == str(args.sequences)):
        shutil.rmtree(export, ignore_errors=True)
        t0 = time.perf_counter()
        write_export(export, args.sequences)
        marker.write_text(str(args.sequences))
        print(f"generated the export in {time.perf_counter() - t0:.0f} s", flush=True)
    size = sum(p.stat().st_size for p in export.rglob("*.jsonl"))
    lines = [f"prime-rl export: {args.sequences} sequences, {size / MB:.0f} MB"]
    ok = {}
    if args.warm_only or args.compare:
        if not (root / "cache-prime").exists():
            cold(export, root / "cache-prime", size)
    else:
        rlb.mkdir(parents=True, exist_ok=True)
        make_log(rlb, FULL)
        rlb_size = sum(p.stat().st_size for p in rlb.glob("*.jsonl"))
        rounds = []  # (a) then (b), interleaved: a shared machine's load falls on both alike
        for _ in range(args.rounds):
            rounds.append((cold(rlb, root / "cache-rlb", rlb_size), cold(export, root / "cache-prime", size)))
            print(f"round {len(rounds)}: (a) {rounds[-1][0][1]:.1f} MB/s, (b) {rounds[-1][1][1]:.1f} MB/s", flush=True)
        a_s, a_mbs = (statistics.median(r[0][k] for r in rounds) for k in (0, 1))
        b_s, b_mbs = (statistics.median(r[1][k] for r in rounds) for k in (0, 1))
        ok["ingest"] = b_mbs >= a_mbs / 1.5
        lines += [f"RLB-schema baseline {rlb_size / MB:.0f} MB; medians of {len(rounds)} interleaved rounds",
                  f"(a) RLB cold ingest      {a_s:8.1f} s  {a_mbs:7.1f} MB/s",
                  f"(b) prime cold ingest    {b_s:8.1f} s  {b_mbs:7.1f} MB/s  ratio {a_mbs / b_mbs:.2f}x "
                  f"(target <= 1.5x) {'ok' if ok['ingest'] else 'MISSED'}",
                  "    each round's ratio: " + ", ".join(f"{r[0][1] / r[1][1]:.2f}x" for r in rounds)]
    if args.compare:
        lines.append(compare(args.compare, root, args.repeats))
    else:
        w = warm(export, root / "cache-prime")
        ok |= {"steps": w["datasets_first_ms"] < 200, "page": max(w["page_ms"], w["page_default_ms"]) < 200}
        lines += [f"{name:<38} {w[key]:8.1f} ms" for key, name in WARM_LINES]
        lines.append(f"targets (< 200 ms): step curves {'ok' if ok['steps'] else 'MISSED'}, "
                     f"sorted page {'ok' if ok['page'] else 'MISSED'}")
    print("\n".join(lines))
    if args.dir is None:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
