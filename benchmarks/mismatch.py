"""Mismatch benchmark (issue 32): a generated prime-rl token export of 1M packed sequences.

    python benchmarks/mismatch.py                    # 1M sequences (~4.7 GB) and a 300 MB RLB-schema baseline
    python benchmarks/mismatch.py --sequences 50000  # smaller: a smoke run, the targets not meaningful
    python benchmarks/mismatch.py --dir D            # generate into D (kept, and reused when it holds the export)

Measured in this one process, one after the other: (a) cold ingest of an RL Logging Board-schema log (the baseline,
``benchmarks/ingest.py``'s generator) and (b) of the prime-rl export, each with an empty cache dir, as MB/s; then,
warm (the export opened again from its cache): (c) the mismatch and entropy step curves (``run.steps``' columns
the RunView panels draw), (d) a table page sorted by ``mismatch_log_ratio_abs_max``. Targets: (b)'s MB/s at least
(a)'s / 1.5; (c) and (d) each under 200 ms (the median of 5). Sequences are short (24 tokens: a prompt of 12, a
trained answer of 12), as the writer's ``main`` schema writes them: every list of floats, ``null`` for non-finite.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
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


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def cold(folder: Path, scratch: Path, size: int) -> tuple[float, float]:
    """(seconds, MB/s) of an open with an empty cache dir."""
    import rlviz_widgets as rw

    cache = scratch / f"cache-{folder.name}"
    shutil.rmtree(cache, ignore_errors=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seconds, run = timed(lambda: rw.open_run(folder, cache_dir=cache, progress=False))
    run.close()
    return seconds, size / MB / seconds


def warm(folder: Path, scratch: Path) -> dict[str, float]:
    """Median ms of the step curves and a sorted table page, over a run opened from its cache."""
    import rlviz_widgets as rw
    from rlviz_widgets._chart_data import PANEL_FIELDS
    from rlviz_widgets._table_source import TableSource

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = rw.open_run(folder, cache_dir=scratch / f"cache-{folder.name}", progress=False)

    def curves():
        run._forget()  # noqa: SLF001 - a benchmark asks afresh, as a new view would
        return run.steps[["step", *PANEL_FIELDS]]

    source = TableSource.from_run(run)
    cols = ["sample_id", "step", "mismatch_log_ratio_abs_max", "masked_fraction", "entropy_mean", "reward"]

    def page():
        source.invalidate()
        return source.page(0, 50, cols, sort_by="mismatch_log_ratio_abs_max", desc=True)

    out = {"steps_ms": timed(curves, 5)[0] * 1000, "page_ms": timed(page, 5)[0] * 1000, "samples": run.n_samples}
    run.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args(argv)
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
    rlb.mkdir(parents=True, exist_ok=True)
    make_log(rlb, FULL)
    rlb_size = sum(p.stat().st_size for p in rlb.glob("*.jsonl"))
    a_s, a_mbs = cold(rlb, scratch, rlb_size)
    b_s, b_mbs = cold(export, scratch, size)
    w = warm(export, scratch)
    ok = {"ingest": b_mbs >= a_mbs / 1.5, "steps": w["steps_ms"] < 200, "page": w["page_ms"] < 200}
    lines = [f"prime-rl export: {w['samples']} sequences, {size / MB:.0f} MB; "
             f"RLB-schema baseline {rlb_size / MB:.0f} MB",
             f"(a) RLB cold ingest      {a_s:8.1f} s  {a_mbs:7.1f} MB/s",
             f"(b) prime cold ingest    {b_s:8.1f} s  {b_mbs:7.1f} MB/s  ratio {a_mbs / b_mbs:.2f}x "
             f"(target <= 1.5x) {'ok' if ok['ingest'] else 'MISSED'}",
             f"(c) step curves, warm    {w['steps_ms']:8.1f} ms (target < 200) {'ok' if ok['steps'] else 'MISSED'}",
             f"(d) sorted page, warm    {w['page_ms']:8.1f} ms (target < 200) {'ok' if ok['page'] else 'MISSED'}"]
    print("\n".join(lines))
    if args.dir is None:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
