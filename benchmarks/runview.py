"""RunView benchmark: a million-sample, 200-million-token run rendered in a real JupyterLab, and its brushes.

    python benchmarks/runview.py                 # 1,000,000 samples, ~200M tokens (~15 GB of logs; ~15 minutes)
    python benchmarks/runview.py --quick         # 20,000 samples: a smoke run, the targets are not meaningful there
    python benchmarks/runview.py --dir D         # the logs live in D (default /tmp/rv_bench_data; kept and reused)

Steps (every figure is a median, beside a baseline measured in the same run; ratio = baseline / ours):

1. Data: 500 steps x 2,000 samples over 4 rank files (RL Logging Board schema: response_tokens, logprobs,
   ref_logprobs, values, token_rewards), ~200 tokens a response. A pool of a few hundred records made by
   ``synth.make_record`` (lengths around 200 tokens, KL growing with training progress) is serialised once; each
   line is a pool record with its step, reward, ref_reward, acc and last token reward substituted by string
   formatting. Reused when ``--dir`` holds it (marker ``.runview_params.json``).
2. The cache is built once, cold, in its own process (``open_run(dir, cache_dir=CACHE)``): time and throughput
   are reported, not judged.
3. Warm render in JupyterLab (served on 127.0.0.1, ``RLVIZ_CACHE_DIR=CACHE``, headless Chromium): a fresh
   notebook and kernel per run, whose one cell is ``import rlviz_widgets as rw; view = rw.RunView(PATH,
   progress=False); view``. Timed in the page from the cell's execution to a complete render: chart data
   inserted (curves, steps and hist datasets non-empty) and drawn (the next animation frame), table rows with a
   data-id visible, the header and the counts shown. The kernel reports its own part (import and ``RunView()``).
   Baseline (own process): ``run.samples`` (the full pandas frame), ``groupby("step")`` mean/std of reward and
   kl_mean, and a per-step numpy reward histogram on shared edges.
4. Brush update, Python: in the last render's kernel, a brush arriving from the browser (``chart.set_state({
   "selections": {"steps_brush": {"step": [a, b]}, "reward_brush": None}})``, as the comm applies it) until the
   table's ``row_count`` is updated and the ``rows`` rpc for offset 0, limit 100 is answered (reply serialised
   with ``json.dumps`` inside the timed part), over 12 step ranges; once in the table's default order and once
   sorted by reward (descending), like the baseline: pandas on the 1M-row frame, filter by the step range,
   ``sort_values("reward")``, first 100 rows as the same JSON rows.
   Brush update, browser: a mouse drag on the KL chart, timed from the mouse button's release until the table
   shows the new count (the chart waits 150 ms for the brush to settle before it tells Python).

Targets: render < 3 s, brush update < 200 ms. Every request of the page is recorded: the script exits non-zero if
any leaves 127.0.0.1 (or a measurement breaks). The table goes to stdout and, as markdown, to
``benchmarks/results/runview.md`` (``runview_quick.md`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import (  # noqa: E402
    chromium_missing,
    launch_chromium,
    local_context,
    median,
    naive_rows_reply,
    now,
    outside_requests,
    page_failures,
    peak_rss_mb,
    run_worker,
    write_results,
)

DEFAULT_DIR = Path("/tmp/rv_bench_data")
FULL = {"steps": 500, "samples_per_step": 2000, "ranks": 4, "tokens": 200, "pool": 400, "min_free_gb": 40}
QUICK = {"steps": 40, "samples_per_step": 500, "ranks": 4, "tokens": 200, "pool": 100, "min_free_gb": 2}
PHASES = 10  # pool records are made at this many training-progress levels (KL and values drift with progress)
MARKER = ".runview_params.json"
RENDER_TARGET_S = 3.0
BRUSH_TARGET_MS = 200.0
PAGE = 100
GB = 1024 ** 3


# ---------------------------------------------------------------------------------------------------- 1. data
def _pool(spec: dict, seed: int = 0) -> list[list[tuple[str, str, float, int]]]:
    """Per phase: (head, tail, kl part of the last token reward, n_tokens) of distinct records.

    A line is ``head + step/reward/ref_reward/acc + tail + last token reward + "]}"``.
    """
    import importlib.util

    # synth.py needs nothing else from the package: loaded on its own, the writers skip pandas and DuckDB
    mod_spec = importlib.util.spec_from_file_location("_rlviz_synth", ROOT / "rlviz_widgets" / "_synth.py")
    synth = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(synth)
    make_record = synth.make_record

    rng = random.Random(seed)
    per_phase = max(spec["pool"] // PHASES, 2)
    mu = math.log(spec["tokens"]) - 0.35 ** 2 / 2  # a lognormal whose mean is spec["tokens"]
    pool = []
    for ph in range(PHASES):
        progress = ph / (PHASES - 1)
        recs = []
        for k in range(per_phase):
            n = max(2, int(round(rng.lognormvariate(mu, 0.35))))
            index = ph * per_phase + k
            rec = make_record(rng, 0, index, n, progress=progress)
            tr = rec.pop("token_rewards")
            kl_last = tr[-1] - rec["reward"]
            for key in ("step", "reward", "ref_reward", "acc"):
                rec.pop(key)
            body = json.dumps(rec, ensure_ascii=False)
            head = "{" + body[1:-1] + ", "
            tail = ', "token_rewards": [' + "".join(f"{v!r}, " for v in tr[:-1])
            recs.append((head, tail, kl_last, len(rec["response_tokens"])))
        pool.append(recs)
    return pool


def _write_rank(folder: str, spec: dict, rank: int, seed: int) -> dict:
    """Writes rollout_rank{rank}.jsonl: the samples i of each step with i % ranks == rank."""
    import numpy as np

    pool = _pool(spec)
    rng = np.random.default_rng([seed, rank])
    steps, per_step, ranks = spec["steps"], spec["samples_per_step"], spec["ranks"]
    path = Path(folder) / f"rollout_rank{rank}.jsonl"
    n_lines = n_tokens = 0
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as f:
        for s in range(steps):
            progress = s / max(steps - 1, 1)
            phase = pool[min(int(progress * PHASES), PHASES - 1)]
            m = len(range(rank, per_step, ranks))
            reward = np.round(rng.normal(-0.5 + 1.5 * progress, 1.0 - 0.6 * progress, m), 4).tolist()
            ref = np.round(rng.normal(0.0, 1.0, m), 4).tolist()
            pick = rng.integers(0, len(phase), m).tolist()
            buf = []
            for r, rr, j in zip(reward, ref, pick):
                head, tail, kl_last, nt = phase[j]
                buf.append(f'{head}"step": {s}, "reward": {r!r}, "ref_reward": {rr!r}, "acc": {float(r > 0)!r}'
                           f'{tail}{kl_last + r!r}]}}\n')
                n_tokens += nt
            n_lines += m
            f.write("".join(buf))
    return {"lines": n_lines, "tokens": n_tokens, "bytes": path.stat().st_size}


def log_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.jsonl"))


def make_data(folder: Path, spec: dict) -> dict:
    """Writes the run (in parallel, one process per rank file) unless ``folder`` already holds it."""
    keys = ("steps", "samples_per_step", "ranks", "tokens", "pool")
    want = {k: spec[k] for k in keys}
    marker = folder / MARKER
    if marker.exists():
        info = json.loads(marker.read_text())
        sizes = {p.name: p.stat().st_size for p in log_files(folder)}
        if info.get("params") == want and info.get("sizes") == sizes:
            print(f"reusing the run in {folder}", flush=True)
            return info
    if not marker.exists() and log_files(folder):
        raise SystemExit(f"{folder} holds .jsonl files this benchmark did not write: pass an empty or new --dir")
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free / GB
    if free < spec["min_free_gb"]:
        raise SystemExit(f"only {free:.1f} GB free on the disk of {folder}: this benchmark needs "
                         f"{spec['min_free_gb']} GB (the logs plus their cache). Free some space or pass --dir "
                         "on a larger disk.")
    marker.unlink(missing_ok=True)
    for p in log_files(folder):
        p.unlink()
    samples = spec["steps"] * spec["samples_per_step"]
    print(f"generating {samples:,} samples (~{samples * spec['tokens'] / 1e6:.0f}M tokens) into {folder} ...",
          flush=True)
    t0 = time.perf_counter()
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(spec["ranks"], os.cpu_count() or 1)) as ex:
        parts = list(ex.map(_write_rank, [str(folder)] * spec["ranks"], [spec] * spec["ranks"],
                            range(spec["ranks"]), [0] * spec["ranks"]))
    seconds = time.perf_counter() - t0
    info = {"params": want, "samples": sum(p["lines"] for p in parts), "tokens": sum(p["tokens"] for p in parts),
            "bytes": sum(p["bytes"] for p in parts), "seconds": seconds,
            "sizes": {p.name: p.stat().st_size for p in log_files(folder)}}
    marker.write_text(json.dumps(info))
    print(f"  {info['bytes'] / GB:.2f} GB in {seconds:.0f} s", flush=True)
    return info


# ---------------------------------------------------------------------------------------------------- workers
def worker_cold(logdir: str, cache: str) -> dict:
    """Builds the cache from nothing (this process only); the import is not timed."""
    import warnings

    import rlviz_widgets as rw

    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    run = rw.open_run(logdir, cache_dir=cache, progress=False)
    seconds = time.perf_counter() - t0
    n, tokens = run.sql("SELECT count(*) n, sum(n_tokens) t FROM _nums").iloc[0]
    steps = run.step_values
    run.close()
    return {"seconds": seconds, "samples": int(n), "tokens": int(tokens), "steps": [steps[0], steps[-1]],
            "n_steps": len(steps), "peak_rss_mb": peak_rss_mb()}


def naive_brush(df, lo: float, hi: float, columns: list[str]) -> tuple[int, str]:
    """The baseline brush answer: filter the frame by the step range, sort by reward, first 100 rows as JSON."""
    sub = df[(df["step"] >= lo) & (df["step"] <= hi)]
    total = len(sub)
    page = sub.sort_values("reward", ascending=False).head(PAGE)
    return total, naive_rows_reply(page, columns, 0, total)


def worker_naive(logdir: str, cache: str, ranges: list, bins: int = 30) -> dict:
    """The pandas path without rlviz_widgets' views, on the run loaded from the warm cache."""
    import warnings

    import numpy as np

    import rlviz_widgets as rw

    warnings.simplefilter("ignore")
    from rlviz_widgets._table_source import TableSource

    run = rw.open_run(logdir, cache_dir=cache, progress=False)
    columns = TableSource.from_run(run).default_columns()  # the columns the table shows
    t0 = time.perf_counter()
    df = run.samples
    t1 = time.perf_counter()
    per_step = df.groupby("step").agg(reward_mean=("reward", "mean"), reward_std=("reward", "std"),
                                      kl_mean=("kl_mean", "mean"), kl_std=("kl_mean", "std"))
    rewards = df["reward"].to_numpy(dtype="float64")
    edges = np.histogram_bin_edges(rewards[np.isfinite(rewards)], bins=bins)
    hist = {int(s): np.histogram(g.to_numpy(dtype="float64"), bins=edges)[0]
            for s, g in df.groupby("step")["reward"]}
    t2 = time.perf_counter()
    assert len(per_step) == len(hist)
    brush, totals = [], []
    for lo, hi in ranges:
        b0 = time.perf_counter()
        total, _reply = naive_brush(df, lo, hi, columns)
        brush.append((time.perf_counter() - b0) * 1000)
        totals.append(total)
    peak = peak_rss_mb()
    return {"render_s": t2 - t0, "samples_s": t1 - t0, "aggregate_s": t2 - t1, "rows": len(df),
            "brush_ms": brush, "totals": totals, "peak_rss_mb": peak}


# ---------------------------------------------------------------------------------------------------- 3. lab
# Runs the notebook and times, frame by frame, until the RunView is complete; then one more frame (drawn).
RENDER_JS = """async (total) => {
  const q = (s) => document.querySelector(s);
  const text = (s) => (q(s)?.textContent || "").trim();
  const visible = (el) => {
    if (!el) return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const seen = {};
  const mark = (k, ok) => { if (ok && seen[k] === undefined) seen[k] = performance.now() - t0; return ok; };
  const state = () => {
    const chart = q(".rlv-run-view .rlv-chart");
    const v = chart && chart._rlvView;
    let data = false;
    if (v) {
      try {
        data = ["hist", "curves", "steps"].every((d) => v.data(d).length > 0);
      } catch (e) {
        data = false;
      }
    }
    const drawn = visible(chart && chart.querySelector("canvas, svg"));
    const row = q(".rlv-run-view .rlv-sample-table .rlv-row[data-id]");
    const rows = visible(row) && !row.classList.contains("rlv-loading") && (row.textContent || "").trim().length > 0;
    const header = text(".rlv-run-view .rlv-run-header").includes(total);
    const counts = text(".rlv-run-view .rlv-count").includes(total)
      && text(".rlv-run-view .rlv-sample-table .rlv-count").length > 0;
    const errs = [...document.querySelectorAll(".rlv-run-view .rlv-error")]
      .filter((e) => !e.hidden && e.textContent.trim());
    return { chart: mark("chart", data && drawn), rows: mark("rows", rows), header: mark("header", header && counts),
             error: errs.map((e) => e.textContent.trim()).join("; ") };
  };
  const frame = () => new Promise((r) => requestAnimationFrame(r));
  const t0 = performance.now();
  window.jupyterapp.commands.execute("notebook:run-all-cells");
  for (;;) {
    const s = state();
    if (s.error) return { error: s.error, seen };
    if (s.chart && s.rows && s.header) break;
    if (performance.now() - t0 > 300000) return { error: "timed out (300 s)", seen, last: s };
    await frame();
  }
  const complete = performance.now() - t0;
  await frame();
  return { ms: performance.now() - t0, complete, seen };
}"""

# Before a drag: watch the mouse release, the brush signal and the table's count.
ARM_JS = """() => {
  const root = document.querySelector(".rlv-run-view");
  const countEl = () => root.querySelector(".rlv-sample-table .rlv-count");
  const rec = { before: countEl().textContent, up: null, lastSignal: null, count: null, countText: null };
  window.__rlvBrush = rec;
  const onUp = () => { if (rec.up === null) rec.up = performance.now(); };
  window.addEventListener("mouseup", onUp, { capture: true, once: true });
  window.addEventListener("pointerup", onUp, { capture: true, once: true });
  const view = root.querySelector(".rlv-chart")._rlvView;
  view.addSignalListener("steps_brush", () => { rec.lastSignal = performance.now(); });
  const check = () => {
    const t = countEl()?.textContent;
    if (rec.count === null && t !== rec.before) { rec.count = performance.now(); rec.countText = t; mo.disconnect(); }
  };
  const mo = new MutationObserver(check);
  mo.observe(root, { childList: true, subtree: true, characterData: true });
}"""


def brush_ranges(step_lo: int, step_hi: int, n: int = 12) -> list[tuple[int, int]]:
    """Python brushes: n step ranges of assorted widths (1 step to half the run), reproducible."""
    rng = random.Random(7)
    span = step_hi - step_lo + 1
    widths = [1, 5, 20, 50, span // 10, span // 4, span // 2, 2, 10, 100, span // 3, 30]
    out = []
    for k in range(n):
        w = max(1, min(widths[k % len(widths)], span))
        a = step_lo + rng.randrange(0, span - w + 1)
        out.append((a, a + w - 1))
    return out


# start and width as fractions of the step span: consecutive drags include different numbers of steps, and each
# starts outside the previous brush (so it draws a new brush instead of moving the old one)
DRAGS = [(0.08, 0.06), (0.36, 0.10), (0.60, 0.04), (0.84, 0.12), (0.24, 0.08), (0.50, 0.14), (0.04, 0.05)]

PY_BRUSH = """
import json as _json, time as _time
_t = view.table
_sent = []
_t.send = lambda content, buffers=None: _sent.append(_json.dumps(content))
_res = []
try:
    for _k, (_a, _b) in enumerate(RANGES):
        _t0 = _time.perf_counter()
        # the state change as the comm applies a brush from the browser
        view.chart.set_state({"selections": {"steps_brush": {"step": [_a, _b]}, "reward_brush": None}})
        _n = _t.row_count
        _t1 = _time.perf_counter()
        _t._on_rpc(_t, {"type": "rpc", "id": f"bench{_k}", "method": "rows",
                        "params": {"offset": 0, "limit": 100}}, [])
        _t2 = _time.perf_counter()
        _reply = _json.loads(_sent[-1])
        assert _reply["ok"], _reply
        _r = _reply["result"]
        assert _r["total"] == _n and len(_r["ids"]) == min(100, _n), (_r["total"], _n, len(_r["ids"]))
        _res.append({"ms": (_t2 - _t0) * 1000, "count_ms": (_t1 - _t0) * 1000, "total": _n,
                     "steps": list(view.steps), "bytes": len(_sent[-1])})
finally:
    del _t.send
print(_json.dumps(_res))
"""


def bench_lab(spec: dict, logdir: Path, cache: Path, scratch: Path, total: int, step_range: tuple[int, int],
              render_runs: int, drags: int, ranges: list) -> dict:
    from playwright.sync_api import sync_playwright

    from tests.browser.lab import Notebook, drag, jupyter_server, write_notebook

    root, state = scratch / "lab-root", scratch / "lab-state"
    root.mkdir()
    state.mkdir()
    cell = ("import time as _bt\n_b0 = _bt.perf_counter()\n"
            "import rlviz_widgets as rw\n_b1 = _bt.perf_counter()\n"
            f"view = rw.RunView({str(logdir)!r}, progress=False)\n_b2 = _bt.perf_counter()\n"
            "print(f'import {_b1 - _b0:.3f} s, RunView {_b2 - _b1:.3f} s')\nview")
    requests: list[str] = []
    problems: list[str] = []
    out: dict = {"render": [], "complete": [], "parts": [], "py": [], "drag": [], "drag_signal": [],
                 "drag_counts": []}
    # the kernel imports rlviz_widgets from this checkout and reads the warm cache
    env = {"RLVIZ_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    with jupyter_server(root, state, env_extra=env) as base:
        with sync_playwright() as p:
            browser = launch_chromium(p, scratch / "chrome-home")
            out["version"] = browser.version
            fmt_total = f"{total:,}"
            page = ctx = None
            for i in range(render_runs):
                name = f"runview_{i}.ipynb"
                write_notebook(root / name, [cell])
                if page is not None:  # the previous run's kernel goes away with its page
                    page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
                    ctx.close()
                # a fresh page: nothing cached in it but what the browser's HTTP cache holds
                ctx = local_context(browser, requests, 1400, 1000)
                page = ctx.new_page()
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                # a fresh workspace: JupyterLab must not reopen the notebooks of the previous runs
                nb = Notebook(page, base, name)
                r = page.evaluate(RENDER_JS, fmt_total)
                if r.get("error"):
                    raise SystemExit(f"render {i + 1} failed: {r['error']} (seen {r.get('seen')}, "
                                     f"last {r.get('last')})\n" + (state / "jupyterlab.log").read_text()[-3000:])
                py = nb.eval("[_b1 - _b0, _b2 - _b1]")
                out["render"].append(r["ms"] / 1000)
                out["complete"].append(r["complete"] / 1000)
                out["parts"].append(r["seen"])
                out["py"].append(py)
                print(f"  render {i + 1}/{render_runs}: {r['ms'] / 1000:.2f} s (kernel: import {py[0]:.2f} s, "
                      f"RunView {py[1]:.2f} s; chart {r['seen']['chart'] / 1000:.2f} s, rows "
                      f"{r['seen']['rows'] / 1000:.2f} s, counts {r['seen']['header'] / 1000:.2f} s)", flush=True)

            # -- brushes from Python, in the last kernel: default order, then sorted by reward as the baseline
            time.sleep(1.0)
            columns = nb.eval("view.table.visible_columns")
            out["columns"] = columns
            for key, sort in (("py_brush", None), ("py_brush_sorted", ("reward", True))):
                if sort:
                    nb.exec(f"view.table.set_state({{'sort_by': {sort[0]!r}, 'sort_desc': {sort[1]}}})")
                res = json.loads(nb.exec(f"RANGES = {json.dumps(ranges)}\n" + PY_BRUSH)
                                 .strip().splitlines()[-1])
                out[key] = res
                print(f"  python brush ({'sorted by reward' if sort else 'default order'}): "
                      f"{median([x['ms'] for x in res]):.1f} ms median", flush=True)
            nb.exec("view.table.set_state({'sort_by': '', 'sort_desc': False})\n"
                               "view.chart.set_state({'selections': {'steps_brush': None, 'reward_brush': None}})")
            page.wait_for_function(
                "(t) => (document.querySelector('.rlv-run-view .rlv-count')?.textContent || '').trim() === "
                "t + ' samples'", arg=fmt_total, timeout=60_000)
            time.sleep(1.0)

            # -- brushes with the mouse on the KL chart
            lo, hi = step_range
            span = hi - lo + 1
            for k in range(drags):
                f0, w = DRAGS[k % len(DRAGS)]
                x0, x1 = lo + f0 * span, lo + (f0 + w) * span
                page.evaluate(ARM_JS)
                drag(page, 1, x0, x1, chart=".rlv-run-view .rlv-chart")
                try:
                    page.wait_for_function("window.__rlvBrush.count !== null", timeout=30_000)
                except Exception:  # noqa: BLE001 - reported, the others still count
                    problems.append(f"drag {k + 1} ({x0:.1f}..{x1:.1f}): the table's count did not change")
                    continue
                rec = page.evaluate("window.__rlvBrush")
                out["drag"].append(rec["count"] - rec["up"])
                if rec["lastSignal"] is not None:
                    out["drag_signal"].append(rec["count"] - rec["lastSignal"])
                out["drag_counts"].append(rec["countText"])
                page.wait_for_function(
                    "document.querySelector('.rlv-run-view .rlv-sample-table .rlv-row[data-id]') !== null",
                    timeout=30_000)
                time.sleep(0.8)  # let the rows page and the chart settle before the next drag
            got = nb.eval("[list(view.steps or []), view.table.row_count, "
                                     "int(view.run.sql('select count(*) n from _nums where ' + view.condition).n[0])]")
            out["last_drag"] = got
            if got[1] != got[2]:
                problems.append(f"after the drags the table counts {got[1]} rows, the filter selects {got[2]}")
            err = page.evaluate("[...document.querySelectorAll('.rlv-run-view .rlv-error')]"
                                ".filter(e => !e.hidden && e.textContent.trim()).map(e => e.textContent.trim())")
            problems += [f"widget error: {e}" for e in err]
            page.close()
            ctx.close()
            browser.close()
    out["requests"] = len(requests)
    out["outside"] = outside_requests(requests)
    out["problems"] = problems
    return out


# ---------------------------------------------------------------------------------------------------- report
def report(info: dict, cold: dict, naive: dict, lab: dict, command: str, quick: bool) -> tuple[str, bool]:
    ok_all = True
    rows = ["| measurement | median | baseline (median) | ratio (baseline / ours) | target | result |",
            "|---|---:|---:|---:|---|---|"]

    def row(name: str, ours: float, base: float | None, unit: str, target: float | None):
        nonlocal ok_all
        fmt = (lambda v: f"{v:.2f} s") if unit == "s" else (lambda v: f"{v:.1f} ms")
        if target is None:
            tgt, res = "(reported)", "-"
        else:
            passed = ours < target
            ok_all &= passed
            tgt, res = f"< {target:g} {unit}", "PASS" if passed else "FAIL"
        b = fmt(base) if base is not None else "-"
        ratio = f"{base / ours:.1f}x" if base is not None and ours > 0 else "-"
        rows.append(f"| {name} | {fmt(ours)} | {b} | {ratio} | {tgt} | {res} |")

    n = f"{info['samples']:,}"
    gb = info["bytes"] / GB
    rows_cold = (f"| cold cache build, `open_run` in its own process ({n} samples, {gb:.1f} GB) | "
                 f"{cold['seconds']:.1f} s | - | - | (reported: {info['bytes'] / 2**20 / cold['seconds']:.0f} MB/s, "
                 f"{info['samples'] / cold['seconds']:,.0f} samples/s, {info['tokens'] / 1e6 / cold['seconds']:.1f}M "
                 f"tokens/s) | - |")
    rows.append(rows_cold)
    render, py_view = median(lab["render"]), median(p[1] for p in lab["py"])
    row("warm render in JupyterLab: cell run → complete RunView (fresh kernel)", render, naive["render_s"], "s",
        RENDER_TARGET_S)
    row("… of which `rw.RunView(PATH)` in the kernel (Python only)", py_view, naive["render_s"], "s", None)
    base_brush = median(naive["brush_ms"])
    py_d = [x["ms"] for x in lab["py_brush"]]
    py_s = [x["ms"] for x in lab["py_brush_sorted"]]
    row(f"brush (Python side) → row_count + first 100 rows, table sorted by reward ({len(py_s)} ranges)",
        median(py_s), base_brush, "ms", BRUSH_TARGET_MS)
    row(f"brush (Python side) → row_count + first 100 rows, table in default order ({len(py_d)} ranges)",
        median(py_d), base_brush, "ms", BRUSH_TARGET_MS)
    if lab["drag"]:
        row(f"brush by mouse on the KL chart → new count in the table (browser, {len(lab['drag'])} drags)",
            median(lab["drag"]), base_brush, "ms", BRUSH_TARGET_MS)
    else:
        ok_all = False
        rows.append("| brush by mouse on the KL chart → new count in the table | no drag changed the count | - | - | "
                    f"< {BRUSH_TARGET_MS:g} ms | FAIL |")

    j = ", ".join
    parts = lab["parts"]
    totals_agree = [x["total"] for x in lab["py_brush"]] == naive["totals"] == \
        [x["total"] for x in lab["py_brush_sorted"]]
    notes = [
        "",
        f"Render runs (s): {j(f'{x:.2f}' for x in lab['render'])}; kernel import "
        f"{j(f'{p[0]:.2f}' for p in lab['py'])}; `RunView()` {j(f'{p[1]:.2f}' for p in lab['py'])}; first seen "
        f"(median, s): chart drawn with data {median(p['chart'] for p in parts) / 1000:.2f}, table rows "
        f"{median(p['rows'] for p in parts) / 1000:.2f}, header and counts "
        f"{median(p['header'] for p in parts) / 1000:.2f}.",
        f"Python brush runs (ms), sorted: {j(f'{x:.0f}' for x in py_s)}; default order: {j(f'{x:.0f}' for x in py_d)}"
        f"; of which the state change and count (default order, median): "
        f"{median(x['count_ms'] for x in lab['py_brush']):.1f} ms. Rows per range: "
        f"{j(f'{x:,}' for x in naive['totals'])}; the same counts as pandas: {'yes' if totals_agree else 'NO'}.",
        f"Mouse brush runs (ms from the button's release): {j(f'{x:.0f}' for x in lab['drag'])}; from the brush's "
        f"last move (includes the chart's 150 ms debounce): {j(f'{x:.0f}' for x in lab['drag_signal'])}; counts "
        f"shown: {j(str(c) for c in lab['drag_counts'])}.",
        f"Pandas baseline runs (ms): {j(f'{x:.0f}' for x in naive['brush_ms'])}.",
        "",
        f"- Data: {n} samples, {info['tokens']:,} tokens ({info['tokens'] / info['samples']:.0f} a response), "
        f"{gb:.2f} GB in {len(info['sizes'])} rank files; {cold['n_steps']} steps ({cold['steps'][0]}.."
        f"{cold['steps'][1]}). Cold cache: {cold['seconds']:.1f} s, peak RSS {cold['peak_rss_mb']:,.0f} MB, cache "
        f"{info['cache_bytes'] / GB:.2f} GB on disk.",
        f"- Render baseline (own process, run opened from the warm cache first, not timed): `run.samples` "
        f"{naive['samples_s']:.2f} s + groupby mean/std and per-step numpy histograms {naive['aggregate_s']:.2f} s; "
        f"peak RSS {naive['peak_rss_mb']:,.0f} MB.",
        f"- Brush baseline: the same step ranges on that frame: boolean filter, `sort_values('reward')`, first "
        f"{PAGE} rows turned into the same JSON rows (columns: {', '.join(lab['columns'])}).",
        f"- Browser: Chromium {lab.get('version', '?')} headless, JupyterLab on 127.0.0.1; {lab['requests']} requests, "
        f"{len(lab['outside'])} outside 127.0.0.1. After the last drag the kernel had steps={lab['last_drag'][0]}, "
        f"row_count={lab['last_drag'][1]:,}.",
        f"- {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPU(s), "
        f"{_mem_gb():.0f} GB RAM; load average (1 min) {info.get('load_start', float('nan')):.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end (other work on the machine slows every figure).",
        "",
        f"Overall: {'PASS' if ok_all else 'FAIL'}."
        + (" (quick: targets not meaningful at this size)" if quick else ""),
    ]
    return "\n".join(rows + notes), ok_all


def _mem_gb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GB
    except (ValueError, OSError):
        return float("nan")


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, help=f"the logs (kept and reused; default {DEFAULT_DIR}, "
                                             f"{DEFAULT_DIR}_quick with --quick)")
    ap.add_argument("--quick", action="store_true", help="20,000 samples (smoke run)")
    ap.add_argument("--runs", type=int, default=5, help="render runs, each a fresh kernel (at least 3)")
    ap.add_argument("--drags", type=int, default=7, help="mouse brushes (at least 5)")
    ap.add_argument("--out", type=Path, help="markdown output (default benchmarks/results/runview[_quick].md)")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        kind, *rest = args.worker
        if kind == "cold":
            print(json.dumps(worker_cold(*rest)))
        elif kind == "naive":
            logdir, cache, ranges = rest
            print(json.dumps(worker_naive(logdir, cache, json.loads(ranges))))
        else:
            raise SystemExit(f"unknown worker {kind}")
        return 0

    command = "python benchmarks/runview.py" + (f" --dir {args.dir}" if args.dir else "") + \
        (" --quick" if args.quick else "") + (f" --runs {args.runs}" if args.runs != 5 else "") + \
        (f" --drags {args.drags}" if args.drags != 7 else "")
    print(f"command: {command}", flush=True)
    if chromium_missing():
        return 2
    spec = QUICK if args.quick else FULL
    render_runs, drags = max(args.runs, 3), max(args.drags, 5)
    logdir = (args.dir or (DEFAULT_DIR.with_name(DEFAULT_DIR.name + "_quick") if args.quick else DEFAULT_DIR))
    logdir = logdir.resolve()
    load_start = os.getloadavg()[0]
    info = make_data(logdir, spec)
    info["load_start"] = load_start
    print(f"data: {info['samples']:,} samples, {info['tokens']:,} tokens, {info['bytes'] / GB:.2f} GB in "
          f"{len(info['sizes'])} files; machine: {os.cpu_count()} CPU(s), {_mem_gb():.0f} GB RAM", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="rlviz_runview_"))
    try:
        free = shutil.disk_usage(scratch).free
        if free < info["bytes"] * 0.6:
            raise SystemExit(f"only {free / GB:.1f} GB free for the cache in {scratch}; it needs about "
                             f"{info['bytes'] * 0.6 / GB:.0f} GB")
        cache = scratch / "cache"
        print("cold cache build (own process) ...", flush=True)
        cold = run_worker(__file__, ["cold", str(logdir), str(cache)])
        info["cache_bytes"] = _dir_bytes(cache)
        print(f"  {cold['seconds']:.1f} s ({info['bytes'] / 2**20 / cold['seconds']:.0f} MB/s), "
              f"{cold['samples']:,} samples, {cold['tokens']:,} tokens, cache {info['cache_bytes'] / GB:.2f} GB",
              flush=True)
        if (cold["samples"], cold["tokens"]) != (info["samples"], info["tokens"]):
            raise SystemExit(f"the run has {cold['samples']:,} samples and {cold['tokens']:,} tokens; "
                             f"{info['samples']:,} and {info['tokens']:,} were written")
        ranges = brush_ranges(*cold["steps"])
        print("baseline: pandas on run.samples (own process) ...", flush=True)
        naive = run_worker(__file__, ["naive", str(logdir), str(cache), json.dumps(ranges)])
        print(f"  render path {naive['render_s']:.2f} s (run.samples {naive['samples_s']:.2f} s), brush "
              f"{median(naive['brush_ms']):.0f} ms", flush=True)
        print(f"JupyterLab + Chromium: {render_runs} renders, {len(ranges)} Python brushes x 2, {drags} mouse "
              "brushes ...", flush=True)
        lab = bench_lab(spec, logdir, cache, scratch, info["samples"], tuple(cold["steps"]), render_runs, drags,
                        ranges)
        text, _ok = report(info, cold, naive, lab, command, args.quick)
        write_results(text, args.out, "runview", "RunView benchmark", args.quick, f"{now()}\n\n`{command}`")
        code = page_failures(lab["outside"], lab["problems"])
        if len(lab["drag"]) < 5:
            print(f"FAIL: only {len(lab['drag'])} mouse brushes changed the count (need 5)", file=sys.stderr)
            code = 1
        return code
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
