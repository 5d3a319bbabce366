"""The RunView charts as one Altair (Vega-Lite) spec over named datasets, and those datasets' wire form.

Nothing here touches samples: the datasets (``_chart_data``) are per-step statistics and per-(step, bin)
counts that the engine computes, so the browser gets the same few kilobytes for a run of any size.
Brushes are interval params: ``steps_brush`` over step on the curves and the heat map,
``reward_brush`` over reward on the histogram.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings

import numpy as np
import pandas as pd

STEPS_BRUSH = "steps_brush"
REWARD_BRUSH = "reward_brush"
SERIES_COLORS = {"reward": "#d6604d", "ref_reward": "#4393c3"}
SPEC_VERSION = 2  # bump when _run_spec changes, so cached specs are rebuilt


def columns_payload(df: pd.DataFrame) -> dict[str, list]:
    """A DataFrame as column arrays with JSON-safe values (NaN and infinities become null)."""
    out = {}
    for c in df.columns:
        s = df[c]
        if pd.api.types.is_numeric_dtype(s):
            arr = s.astype("float64").to_numpy()
            ints = pd.api.types.is_integer_dtype(s)
            if not ints:  # 7 significant digits are plenty for a chart and halve the JSON
                arr = np.array([float(f"{v:.7g}") if np.isfinite(v) else v for v in arr.tolist()])
            out[c] = [None if not np.isfinite(v) else (int(v) if ints else float(v)) for v in arr]
        else:
            out[c] = [None if v is None or (isinstance(v, float) and v != v) else str(v) for v in s.tolist()]
    return out


def run_spec(**kwargs) -> dict:
    """The whole RunView chart: step curves on top, reward distribution below.

    Built with Altair once per set of options and kept in the cache dir: importing Altair (its
    schema validation) takes over a second, which a RunView should not pay every time.
    """
    from importlib.metadata import version

    from rlviz_widgets._store.cache import default_cache_root

    key = json.dumps([SPEC_VERSION, version("altair"), {k: str(v) for k, v in kwargs.items()}], sort_keys=True)
    key = hashlib.sha1(key.encode()).hexdigest()
    path = default_cache_root() / "specs" / f"{key[:20]}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    import altair as alt

    with warnings.catch_warnings():  # one brush shared by several views is the point, not an accident
        warnings.simplefilter("ignore", UserWarning)
        spec = _run_spec(alt, **kwargs)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(spec))
        os.replace(tmp, path)
    except OSError:  # a read-only cache dir only costs the rebuild next time
        pass
    return spec


def _run_spec(alt, *, metric: str = "kl_mean", has_ref: bool = True, has_tokens: bool = True, width: int = 215,
              height: int = 150, runs: tuple[str, ...] = ()) -> dict:
    multi = len(runs) > 1
    steps_brush = alt.selection_interval(name=STEPS_BRUSH, encodings=["x"])
    reward_brush = alt.selection_interval(name=REWARD_BRUSH, encodings=["x"])
    x = alt.X("step:Q", title="step", axis=alt.Axis(tickMinStep=1, format="~s"))
    series_scale = alt.Scale(domain=list(SERIES_COLORS), range=list(SERIES_COLORS.values()))
    run_color = alt.Color("run:N", title="run", scale=alt.Scale(domain=list(runs)), legend=alt.Legend(orient="top"))
    if multi:  # several runs: colour is the run, a dashed line the reference
        color = run_color
        dash = alt.StrokeDash("series:N", title=None, legend=alt.Legend(orient="top"))
    else:
        color = alt.Color("series:N", title=None, scale=series_scale, legend=alt.Legend(orient="top"))
        dash = alt.StrokeDash("series:N", legend=None)
    curves = alt.Chart(alt.Data(name="curves"))
    band = curves.mark_area(opacity=0.15).encode(x=x, y=alt.Y("lo:Q", title="reward"), y2="hi:Q", color=color,
                                                 detail="series:N")
    line = curves.mark_line().encode(
        x=x, y="mean:Q", color=color, strokeDash=dash,
        tooltip=[alt.Tooltip("step:Q"), alt.Tooltip("series:N"), alt.Tooltip("run:N"),
                 alt.Tooltip("mean:Q", format=".4g"), alt.Tooltip("lo:Q", format=".4g"),
                 alt.Tooltip("hi:Q", format=".4g")]).add_params(steps_brush)
    reward_chart = (band + line).properties(title="reward (mean ± band·std)", width=width, height=height)

    stats = alt.Chart(alt.Data(name="steps"))
    label = {"kl_mean": "mean KL (k3)", "log_ratio_mean": "mean log-ratio"}.get(metric, metric)
    kl_chart = stats.mark_line(point=alt.OverlayMarkDef(size=12)).encode(
        x=x, y=alt.Y(f"{metric}:Q", title=label), color=run_color if multi else alt.value("#5e3c99"),
        tooltip=["step:Q", "run:N", alt.Tooltip(f"{metric}:Q", format=".4g"), "samples:Q"],
    ).add_params(steps_brush).properties(title=label + " per step", width=width, height=height)
    length_field = "length_mean" if has_tokens else "chars_mean"
    length_chart = stats.mark_line(point=alt.OverlayMarkDef(size=12)).encode(
        x=x, y=alt.Y(f"{length_field}:Q", title="tokens" if has_tokens else "characters"),
        color=run_color if multi else alt.value("#1b7837"),
        tooltip=["step:Q", "run:N", alt.Tooltip(f"{length_field}:Q", format=".4g")],
    ).add_params(steps_brush).properties(title="mean response length", width=width, height=height)
    top = [reward_chart, kl_chart, length_chart] if has_tokens else [reward_chart, length_chart]

    hist = alt.Chart(alt.Data(name="hist"))
    heat = hist.transform_filter(alt.datum.column == "reward")
    title = "reward distribution per step"
    if multi:  # one run's heat map at a time, picked in the chart
        heat_run = alt.param(name="heat_run", value=runs[0],
                             bind=alt.binding_select(options=list(runs), name="heat map of run "))
        heat = heat.add_params(heat_run).transform_filter(alt.datum.run == heat_run)
        title = "reward distribution per step (one run)"
    heat = heat.mark_rect().encode(
        x=alt.X("step:Q", title="step"), x2="step_end:Q",
        y=alt.Y("bin_start:Q", title="reward"), y2="bin_end:Q",
        color=alt.Color("sum(count):Q", title="samples", scale=alt.Scale(scheme="blues")),
        tooltip=["step:Q", alt.Tooltip("bin_start:Q", format=".3g"), alt.Tooltip("bin_end:Q", format=".3g"),
                 alt.Tooltip("sum(count):Q", title="samples")],
    ).add_params(steps_brush).properties(title=title, width=width, height=height)
    tip = [alt.Tooltip("bin_start:Q", format=".3g"), alt.Tooltip("bin_end:Q", format=".3g"),
           alt.Tooltip("sum(count):Q", title="samples")]
    if multi:  # the runs overlaid
        histogram = hist.transform_filter(steps_brush).transform_filter(alt.datum.column == "reward").mark_bar(
            opacity=0.5, binSpacing=0).encode(
            x=alt.X("bin_start:Q", title="reward (brushed steps)"), x2="bin_end:Q",
            y=alt.Y("sum(count):Q", title="samples", stack=None), color=run_color, tooltip=["run:N", *tip])
    else:  # policy and reference overlaid
        overlay = ["reward", "ref_reward"] if has_ref else ["reward"]
        histogram = hist.transform_filter(steps_brush).transform_filter(
            alt.FieldOneOfPredicate(field="column", oneOf=overlay)).mark_bar(opacity=0.55, binSpacing=0).encode(
            x=alt.X("bin_start:Q", title="reward (brushed steps)"), x2="bin_end:Q",
            y=alt.Y("sum(count):Q", title="samples", stack=None),
            color=alt.Color("column:N", title=None, scale=series_scale, legend=alt.Legend(orient="top")),
            tooltip=["column:N", *tip])
    histogram = histogram.add_params(reward_brush).properties(
        title="reward histogram (drag to pick a range)", width=width, height=height)
    charts = [heat, histogram]
    if has_ref:
        gap = hist.transform_filter(steps_brush).transform_filter(alt.datum.column == "reward_gap").mark_bar(
            binSpacing=0, opacity=0.5 if multi else 1.0).encode(
            x=alt.X("bin_start:Q", title="reward − ref_reward (brushed steps)"), x2="bin_end:Q",
            y=alt.Y("sum(count):Q", title="samples", stack=None),
            color=run_color if multi else alt.value("#8073ac"), tooltip=["run:N", *tip] if multi else tip,
        ).properties(title="reward gap", width=width, height=height)
        charts.append(gap)
    # one flat concat: Vega-Lite's interval brushes break in nested concats that start without data
    spec = alt.concat(*top, *charts, columns=3).configure_view(stroke=None).to_dict()
    spec.pop("datasets", None)
    spec.pop("$schema", None)  # nothing is fetched: the bundled vega-lite knows its own schema
    return spec
