"""The RunView charts' datasets, computed from a Run or RunSet: curves, per-step statistics, reward histograms.

Pure functions of a run's public API returning DataFrames (the ChartWidget sends them as they are). The data stay
small on any run: past a few points per pixel, steps travel in buckets; several runs share the same limits.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rlviz_widgets._charts import PANELS
from rlviz_widgets.run.run import Run
from rlviz_widgets.run.runset import RunSet

MAX_CURVE_STEPS = 1000  # points per curve at most (a few per pixel): the chart's data stay small on any run
MAX_HIST_STEPS = 200  # step buckets of the heat map at most
MIN_RUN_CURVE_STEPS = 100  # points per run's curve at least, when several runs share MAX_CURVE_STEPS
MIN_RUN_HIST_STEPS = 20  # step buckets per run's heat map at least, when several runs share MAX_HIST_STEPS


# the steps frame's figures the panels draw: the curve, its p95, and what its tooltip names
PANEL_FIELDS = ("mismatch_kl_mean", "mismatch_kl_mean_p95", "masked_sequences_fraction", "entropy_mean")
# every figure of the steps frame the chart's datasets read (``curves_frame``, ``steps_frame``): only these are asked
STEP_FIELDS = ("reward_mean", "reward_std", "ref_reward_mean", "ref_reward_std", "kl_mean", "log_ratio_mean",
               "length_mean", "chars_mean", *PANEL_FIELDS)


def run_names(run: Run) -> tuple[str, ...]:
    """The names of the runs overlaid (a RunSet's); () for a single run."""
    return tuple(run.runs) if isinstance(run, RunSet) else ()


def capabilities(run: Run) -> tuple[bool, bool]:
    """(token arrays, reference rewards): what the charts and the token strip have to show."""
    has_ref = "ref_reward" in run.columns and bool(run.query_frame("select count(ref_reward) n from _nums").n[0] > 0)
    return bool(run.token_metrics), has_ref


def panels(run: Run) -> tuple[str, ...]:
    """The diagnostics panels the run has data for (``_charts.PANELS``): a panel shows only where its field is."""
    have = set(run.step_fields)
    return tuple(name for name, (field, _, _) in PANELS.items() if field in have)


def limits(n_runs: int) -> tuple[int, int]:
    """(points per curve, step buckets per heat map) for each of ``n_runs`` runs: several runs share the limits
    (each at least a few buckets), so the data grow with neither steps nor runs."""
    points = min(MAX_CURVE_STEPS, max(MAX_CURVE_STEPS // n_runs, MIN_RUN_CURVE_STEPS))
    hist_steps = min(MAX_HIST_STEPS, max(MAX_HIST_STEPS // n_runs, MIN_RUN_HIST_STEPS))
    return points, hist_steps


def step_stats(run: Run, points: int) -> dict[str, pd.DataFrame]:
    """Per run overlaid (``""`` for a single run): its ``steps`` frame's ``STEP_FIELDS``, or past ``points`` steps
    the same statistics per bucket of steps (as the heat map's), each bucket named by its first step."""
    runs = run.runs if isinstance(run, RunSet) else {"": run}
    values = run.step_values
    if len(values) > points:  # a long run
        starts = values[:: -(-len(values) // points)]
        return {name: r.query_frame(r.steps_sql(starts=starts, fields=STEP_FIELDS)) for name, r in runs.items()}
    return {name: r.steps_of(STEP_FIELDS) for name, r in runs.items()}


def curves_frame(steps: pd.DataFrame, band: float = 1.0, zero_shift: bool = False, run: str = "") -> pd.DataFrame:
    """Long form: one row per (step, series) with mean and the mean ± band*std limits."""
    rows = []
    for series in ("reward", "ref_reward"):
        mean, std = steps.get(f"{series}_mean"), steps.get(f"{series}_std")
        if mean is None or mean.isna().all():
            continue
        shift = float(mean.dropna().iloc[0]) if zero_shift else 0.0
        m = mean - shift
        s = std.fillna(0.0) * band
        rows.append(pd.DataFrame({"step": steps["step"], "series": series, "run": run, "mean": m,
                                  "lo": m - s, "hi": m + s}))
    if rows:
        return pd.concat(rows, ignore_index=True)
    # typed: a concat with an untyped empty frame is all object, and the chart would get its numbers as text
    types = {"step": "int64", "series": "object", "run": "object", "mean": "float64", "lo": "float64", "hi": "float64"}
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in types.items()})


def steps_frame(steps: pd.DataFrame, run: str = "") -> pd.DataFrame:
    """Per step: KL, log-ratio and length means and the sample count, and the panels' figures the run has."""
    cols = {"step": steps["step"], "run": run, "samples": steps["samples"]}
    for name in ("kl_mean", "log_ratio_mean", "length_mean", "chars_mean"):
        cols[name] = steps[name] if name in steps else np.nan
    for name in PANEL_FIELDS:
        if name in steps:
            cols[name] = steps[name]
    return pd.DataFrame(cols)


def reward_histograms(run: Run, bins: int, max_steps: int, has_ref: bool) -> pd.DataFrame:
    """The heat map's and histograms' counts. A single run: policy and reference rewards on one edge set, the gap
    on its own. Several runs: each run's rewards on one edge set, and each run's gaps on another."""
    if run_names(run):
        by, groups = ("run",), [["reward"], *([["reward_gap"]] if has_ref else [])]
    else:
        by, groups = (), [["reward", "ref_reward"] if has_ref else ["reward"], *([["reward_gap"]] if has_ref else [])]
    return pd.concat([run.histograms(cols, bins, max_steps=max_steps, by=by) for cols in groups], ignore_index=True)


def run_datasets(run: Run, *, bins: int, band: float, zero_shift: bool, has_ref: bool) -> dict[str, pd.DataFrame]:
    """The chart's named datasets: ``curves`` (reward mean ± ``band``·std per step and series, shifted to start at
    zero with ``zero_shift``), ``steps`` (KL, log-ratio, length per step) and ``hist`` (counts per step and
    reward bin), for every run overlaid."""
    points, hist_steps = limits(len(run_names(run)) or 1)
    per_run = step_stats(run, points)
    curves = pd.concat([curves_frame(st, band, zero_shift, run=name) for name, st in per_run.items()],
                       ignore_index=True)
    stats = pd.concat([steps_frame(st, run=name) for name, st in per_run.items()], ignore_index=True)
    return {"curves": curves, "steps": stats, "hist": reward_histograms(run, bins, hist_steps, has_ref)}


def brush_extent(run: Run, rng: tuple[float | None, float | None] | None,
                 column: str) -> tuple[float, float] | None:
    """A range with open ends filled from the data of ``column`` ("step" or "reward"), for drawing a brush (an end
    at infinity is no number JSON can carry); None where the data has no range (no rewards at all)."""
    if rng is None:
        return None
    dmin, dmax = run.query_frame(f"select min({column}) FILTER (WHERE isfinite({column})) lo, "
                         f"max({column}) FILTER (WHERE isfinite({column})) hi from _nums").iloc[0]
    if pd.isna(dmin) or pd.isna(dmax):
        return None
    lo, hi = rng
    if lo == math.inf:  # keeps nothing: a brush just past the data (a finite number), over no value
        lo = hi = math.nextafter(float(dmax), math.inf)
    elif hi == -math.inf:
        lo = hi = math.nextafter(float(dmin), -math.inf)
    # an open end filled from the data stays on the far side of the given one ((100, None) on steps 0..2 is
    # [100, 100], not [100, 2], which covers step 2)
    lo = min(float(dmin), hi) if lo is None else float(lo)
    hi = max(float(dmax), lo) if hi is None else float(hi)
    return (lo, hi)
