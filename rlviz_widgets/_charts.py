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
SPEC_VERSION = 4  # bump when _run_spec changes, so cached specs are rebuilt


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


# One number format per kind of axis, on every chart: d3's "s" formats share the largest tick's SI prefix
# ("0k, 0.5k"), and Vega's default differs per scale, so each quantitative axis names its kind here.
INTEGER_FORMAT = ",d"  # steps and sample counts: "500", "1,000"
REAL_FORMAT = ",f"  # rewards, KL, lengths: the decimals the tick step needs, the same on every tick
# The reference is the dashed line, the policy the solid one (a dash is [dash, gap] in pixels).
SERIES_DASHES = {"reward": [1, 0], "ref_reward": [4, 3]}


def axis(alt, *, integer: bool = False):
    """The axis of a quantitative channel: one format per kind (integers get no fractional ticks)."""
    if integer:
        return alt.Axis(format=INTEGER_FORMAT, tickMinStep=1)
    return alt.Axis(format=REAL_FORMAT)


def legend(alt, *, symbol: str):
    """A legend inside its chart, between the title and the plot; ``symbol`` draws the mark it stands for
    ("stroke": a line segment that carries the line's colour and dash; "square": a bar)."""
    if symbol == "stroke":  # long and thick enough for a dash of [4, 3] to show; opaque, not the band's tint
        return alt.Legend(orient="top", symbolType="stroke", symbolSize=400, symbolStrokeWidth=2, symbolOpacity=1)
    return alt.Legend(orient="top", symbolType=symbol)


def _encodings(alt, runs: tuple[str, ...]) -> dict:
    """The shared channels: the step axis and the colour and dash of curves and histograms."""
    series_scale = alt.Scale(domain=list(SERIES_COLORS), range=list(SERIES_COLORS.values()))
    dash_scale = alt.Scale(domain=list(SERIES_DASHES), range=list(SERIES_DASHES.values()))
    run_scale = alt.Scale(domain=list(runs))
    enc = {"x": alt.X("step:Q", title="step", axis=axis(alt, integer=True)),
           "run_line": alt.Color("run:N", title="run", scale=run_scale, legend=legend(alt, symbol="stroke")),
           "run_bar": alt.Color("run:N", title="run", scale=run_scale, legend=legend(alt, symbol="square")),
           "column_bar": alt.Color("column:N", title=None, scale=series_scale, legend=legend(alt, symbol="square"))}
    if len(runs) > 1:  # several runs: colour is the run, a dashed line the reference
        enc["color"] = enc["run_line"]
        enc["dash"] = alt.StrokeDash("series:N", title=None, scale=dash_scale, legend=legend(alt, symbol="stroke"))
    else:  # colour and dash both name the series, on the same domain: Vega-Lite draws one legend of both
        enc["color"] = alt.Color("series:N", title=None, scale=series_scale, legend=legend(alt, symbol="stroke"))
        enc["dash"] = alt.StrokeDash("series:N", title=None, scale=dash_scale, legend=legend(alt, symbol="stroke"))
    return enc


def _step_charts(alt, enc: dict, steps_brush, *, metric: str, has_tokens: bool, multi: bool, size: dict) -> list:
    """The top row: reward mean ± band per step, KL (or log-ratio) per step, mean response length."""
    x = enc["x"]
    real = axis(alt)
    curves = alt.Chart(alt.Data(name="curves"))
    band = curves.mark_area(opacity=0.15).encode(x=x, y=alt.Y("lo:Q", title="reward", axis=real), y2="hi:Q",
                                                 color=enc["color"], detail="series:N")
    line = curves.mark_line().encode(
        x=x, y=alt.Y("mean:Q", axis=real), color=enc["color"], strokeDash=enc["dash"],
        tooltip=[alt.Tooltip("step:Q"), alt.Tooltip("series:N"), alt.Tooltip("run:N"),
                 alt.Tooltip("mean:Q", format=".4g"), alt.Tooltip("lo:Q", format=".4g"),
                 alt.Tooltip("hi:Q", format=".4g")]).add_params(steps_brush)
    reward_chart = (band + line).properties(title="reward (mean ± band·std)", **size)

    stats = alt.Chart(alt.Data(name="steps"))
    label = {"kl_mean": "mean KL (k3)", "log_ratio_mean": "mean log-ratio"}.get(metric, metric)
    kl_chart = stats.mark_line(point=alt.OverlayMarkDef(size=12)).encode(
        x=x, y=alt.Y(f"{metric}:Q", title=label, axis=real),
        color=enc["run_line"] if multi else alt.value("#5e3c99"),
        tooltip=["step:Q", "run:N", alt.Tooltip(f"{metric}:Q", format=".4g"), "samples:Q"],
    ).add_params(steps_brush).properties(title=label + " per step", **size)
    length_field = "length_mean" if has_tokens else "chars_mean"
    length_chart = stats.mark_line(point=alt.OverlayMarkDef(size=12)).encode(
        x=x, y=alt.Y(f"{length_field}:Q", title="tokens" if has_tokens else "characters", axis=real),
        color=enc["run_line"] if multi else alt.value("#1b7837"),
        tooltip=["step:Q", "run:N", alt.Tooltip(f"{length_field}:Q", format=".4g")],
    ).add_params(steps_brush).properties(title="mean response length", **size)
    return [reward_chart, kl_chart, length_chart] if has_tokens else [reward_chart, length_chart]


# The diagnostics panels, each drawn only when the run has its fields: what a collapsing run is read by.
PANELS = {
    "mismatch": ("mismatch_kl_mean", "mismatch KL (k3): mean and p95 over sequences", "#b35806"),
    "entropy": ("entropy_mean", "mean token entropy (trained tokens)", "#542788"),
}


def _panel_charts(alt, enc: dict, steps_brush, *, panels: tuple[str, ...], multi: bool, size: dict) -> list:
    """A step curve per panel (brushable like the top row); the mismatch panel adds the p95 over sequences,
    dashed, and names the masked fraction in its tooltip."""
    stats = alt.Chart(alt.Data(name="steps"))
    real = axis(alt)
    charts = []
    for name in panels:
        field, title, colour = PANELS[name]
        color = enc["run_line"] if multi else alt.value(colour)
        tip = ["step:Q", "run:N", alt.Tooltip(f"{field}:Q", format=".4g")]
        if name == "mismatch":
            tip += [alt.Tooltip(f"{field}_p95:Q", format=".4g"),
                    alt.Tooltip("masked_sequences_fraction:Q", title="sequences masked", format=".1%")]
        line = stats.mark_line(point=alt.OverlayMarkDef(size=12)).encode(
            x=enc["x"], y=alt.Y(f"{field}:Q", title=field, axis=real), color=color, tooltip=tip,
        ).add_params(steps_brush)
        if name == "mismatch":
            p95 = stats.mark_line(strokeDash=[4, 3], opacity=0.7).encode(
                x=enc["x"], y=alt.Y(f"{field}_p95:Q"), color=color)
            line = line + p95
        charts.append(line.properties(title=title, **size))
    return charts


def _distribution_charts(alt, enc: dict, steps_brush, reward_brush, *, has_ref: bool, runs: tuple[str, ...],
                         size: dict) -> list:
    """The bottom row: the reward heat map per step, the histogram of the brushed steps, the reward gap."""
    multi = len(runs) > 1
    real, count = axis(alt), axis(alt, integer=True)
    hist = alt.Chart(alt.Data(name="hist"))
    heat = hist.transform_filter(alt.datum.column == "reward")
    title = "reward distribution per step"
    if multi:  # one run's heat map at a time, picked in the chart
        heat_run = alt.param(name="heat_run", value=runs[0],
                             bind=alt.binding_select(options=list(runs), name="heat map of run "))
        heat = heat.add_params(heat_run).transform_filter(alt.datum.run == heat_run)
        title = "reward distribution per step (one run)"
    heat = heat.mark_rect().encode(
        x=enc["x"], x2="step_end:Q",
        y=alt.Y("bin_start:Q", title="reward", axis=real), y2="bin_end:Q",
        color=alt.Color("sum(count):Q", title="samples", scale=alt.Scale(scheme="blues"),
                        legend=alt.Legend(format=INTEGER_FORMAT)),
        tooltip=["step:Q", alt.Tooltip("bin_start:Q", format=".3g"), alt.Tooltip("bin_end:Q", format=".3g"),
                 alt.Tooltip("sum(count):Q", title="samples")],
    ).add_params(steps_brush).properties(title=title, **size)
    tip = [alt.Tooltip("bin_start:Q", format=".3g"), alt.Tooltip("bin_end:Q", format=".3g"),
           alt.Tooltip("sum(count):Q", title="samples")]
    brushed = hist.transform_filter(steps_brush)
    samples = alt.Y("sum(count):Q", title="samples", stack=None, axis=count)
    if multi:  # the runs overlaid
        histogram = brushed.transform_filter(alt.datum.column == "reward").mark_bar(opacity=0.5, binSpacing=0).encode(
            x=alt.X("bin_start:Q", title="reward (brushed steps)", axis=real), x2="bin_end:Q",
            y=samples, color=enc["run_bar"], tooltip=["run:N", *tip])
    else:  # policy and reference overlaid
        overlay = ["reward", "ref_reward"] if has_ref else ["reward"]
        histogram = brushed.transform_filter(alt.FieldOneOfPredicate(field="column", oneOf=overlay)).mark_bar(
            opacity=0.55, binSpacing=0).encode(
            x=alt.X("bin_start:Q", title="reward (brushed steps)", axis=real), x2="bin_end:Q",
            y=samples, color=enc["column_bar"], tooltip=["column:N", *tip])
    histogram = histogram.add_params(reward_brush).properties(title="reward histogram (drag to pick a range)", **size)
    charts = [heat, histogram]
    if has_ref:
        gap = brushed.transform_filter(alt.datum.column == "reward_gap").mark_bar(
            binSpacing=0, opacity=0.5 if multi else 1.0).encode(
            x=alt.X("bin_start:Q", title="reward − ref_reward (brushed steps)", axis=real), x2="bin_end:Q",
            y=samples, color=enc["run_bar"] if multi else alt.value("#8073ac"),
            tooltip=["run:N", *tip] if multi else tip,
        ).properties(title="reward gap", **size)
        charts.append(gap)
    return charts


def _run_spec(alt, *, metric: str = "kl_mean", has_ref: bool = True, has_tokens: bool = True, width: int = 215,
              height: int = 150, runs: tuple[str, ...] = (), panels: tuple[str, ...] = ()) -> dict:
    steps_brush = alt.selection_interval(name=STEPS_BRUSH, encodings=["x"])
    reward_brush = alt.selection_interval(name=REWARD_BRUSH, encodings=["x"])
    enc = _encodings(alt, runs)
    size = {"width": width, "height": height}
    top = _step_charts(alt, enc, steps_brush, metric=metric, has_tokens=has_tokens, multi=len(runs) > 1, size=size)
    bottom = _distribution_charts(alt, enc, steps_brush, reward_brush, has_ref=has_ref, runs=runs, size=size)
    bottom += _panel_charts(alt, enc, steps_brush, panels=tuple(panels), multi=len(runs) > 1, size=size)
    # one flat concat: Vega-Lite's interval brushes break in nested concats that start without data.
    # Legends stay in the chart that uses them (independent): a legend shared by the concat would sit
    # above the first row's titles, away from any chart.
    spec = (alt.concat(*top, *bottom, columns=3).resolve_legend(color="independent", strokeDash="independent")
            .configure_view(stroke=None).to_dict())
    spec.pop("datasets", None)
    spec.pop("$schema", None)  # nothing is fetched: the bundled vega-lite knows its own schema
    return spec
