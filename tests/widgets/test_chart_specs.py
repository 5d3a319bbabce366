"""The RunView chart spec: legends draw the marks they stand for, sit inside their chart, and every axis reads
numbers the same way (the newcomer's list of issue 30)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rlviz_widgets import _charts as charts

JS = Path(__file__).resolve().parents[2] / "js"
SHAPES = [{"runs": ()}, {"runs": ("policy", "grpo")}, {"runs": (), "has_ref": False, "has_tokens": False},
          {"runs": ("a", "b", "c"), "has_ref": False}]


def _units(spec: dict):
    """Every single-view spec (a concat's children, a layer's layers), with the title of the chart it is in."""
    for child in spec.get("concat", []):
        title = child.get("title")
        for unit in child.get("layer", [child]):
            yield title, unit


def _reward_line(spec: dict) -> dict:
    (line,) = [u for t, u in _units(spec) if t == "reward (mean ± band·std)" and u["mark"]["type"] == "line"]
    return line["encoding"]


@pytest.mark.parametrize("runs", [(), ("policy", "grpo")])
def test_the_reward_legend_draws_the_lines_dash(runs):
    """The legend showed dots while the lines differed by dash: it draws strokes, from the lines' dash scale."""
    enc = _reward_line(charts.run_spec(runs=runs))
    dash = enc["strokeDash"]
    assert dash["legend"]["symbolType"] == "stroke" and dash["legend"]["symbolOpacity"] == 1
    assert dict(zip(dash["scale"]["domain"], dash["scale"]["range"], strict=True)) == charts.SERIES_DASHES
    assert charts.SERIES_DASHES["reward"] == [1, 0] and charts.SERIES_DASHES["ref_reward"] != [1, 0]
    assert enc["color"]["legend"]["symbolType"] == "stroke"
    if not runs:  # colour and dash name the series on one domain: Vega-Lite merges them into one legend
        assert enc["color"]["field"] == dash["field"] == "series"
        assert enc["color"]["scale"]["domain"] == dash["scale"]["domain"]


@pytest.mark.parametrize("shape", SHAPES)
def test_legends_sit_inside_their_chart(shape):
    """The two-run dash legend was shared by the concat and floated above the first row's titles."""
    spec = charts.run_spec(**shape)
    assert spec["resolve"]["legend"] == {"color": "independent", "strokeDash": "independent"}
    legends = [(t, ch, e["legend"]) for t, u in _units(spec) for ch, e in u["encoding"].items()
               if isinstance(e, dict) and e.get("legend")]
    assert legends
    for title, channel, legend in legends:
        assert title, channel  # every legend belongs to a chart with a title
        if channel != "color" or "symbolType" in legend:  # the heat map's gradient keeps Vega's right side
            assert legend["orient"] == "top", (title, channel)


def _compiled_legends(spec: dict) -> dict:
    """The legends of the compiled Vega spec, by the title of their chart ("" for the top level)."""
    script = ("import * as vl from 'vega-lite';let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{"
              "const v=vl.compile(JSON.parse(s)).spec;const out={'':v.legends||[]};"
              "for(const m of v.marks||[])if(m.legends)out[m.title?.text??m.title]=m.legends;"
              "console.log(JSON.stringify(out))})")
    done = subprocess.run(["node", "--input-type=module", "-e", script], input=json.dumps(spec), cwd=JS,
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(not shutil.which("node") or not (JS / "node_modules" / "vega-lite").is_dir(),
                    reason="needs node and js/node_modules")
@pytest.mark.parametrize("runs", [(), ("policy", "grpo")])
def test_compiled_legends_carry_the_dash_and_stay_in_the_reward_chart(runs):
    """Checked on what Vega draws: no legend at the top level; in the reward chart one legend symbol is a stroke
    coloured and dashed by the same scales as the lines."""
    legends = _compiled_legends(charts.run_spec(runs=runs))
    assert legends[""] == []
    reward = legends["reward (mean ± band·std)"]
    assert all(leg["symbolType"] == "stroke" and leg["orient"] == "top" for leg in reward)
    assert any("strokeDash" in leg for leg in reward)
    if not runs:
        (leg,) = reward
        assert {"stroke", "strokeDash"} <= leg.keys()


def _quantitative_axes(spec: dict):
    for title, unit in _units(spec):
        for channel in ("x", "y"):
            enc = unit["encoding"].get(channel)
            if enc and enc.get("type") == "quantitative":
                yield title, channel, enc


@pytest.mark.parametrize("shape", SHAPES)
def test_every_axis_reads_numbers_one_way(shape):
    """Steps read "0k / 0.5k" on one chart and "500 / 1,000" on the next: each quantitative axis now takes its
    format from `charts.axis`, integers (steps, sample counts) with no fractional ticks."""
    import altair as alt

    integer, real = charts.axis(alt, integer=True).to_dict(), charts.axis(alt).to_dict()
    assert integer == {"format": ",d", "tickMinStep": 1} and real == {"format": ",f"}
    axes = list(_quantitative_axes(charts.run_spec(**shape)))
    assert len(axes) >= 10
    for title, channel, enc in axes:
        whole = enc["field"] in ("step", "count")  # "count" is sum(count): samples
        assert enc.get("axis") == (integer if whole else real), (title, channel, enc)
    assert not any("~s" in json.dumps(enc) for _, _, enc in axes)


@pytest.mark.parametrize("runs", [(), ("policy", "grpo")])
def test_the_mismatch_and_entropy_panels_are_brushable_step_curves(runs):
    """Issue 32: the panels show only when asked for (the run has their fields), on the steps dataset, brushable
    over step like the top row; the mismatch panel's p95 is dashed and its tooltip names the masked fraction."""
    plain = charts.run_spec(runs=runs)
    spec = charts.run_spec(runs=runs, panels=("mismatch", "entropy"))
    assert len(spec["concat"]) == len(plain["concat"]) + 2
    children = {c.get("title"): c for c in spec["concat"]}
    assert not {charts.PANELS["mismatch"][1], charts.PANELS["entropy"][1]} & {t for t, _ in _units(plain)}
    mismatch = [u for t, u in _units(spec) if t == charts.PANELS["mismatch"][1]]
    entropy = [u for t, u in _units(spec) if t == charts.PANELS["entropy"][1]]
    assert [u["encoding"]["y"]["field"] for u in mismatch] == ["mismatch_kl_mean", "mismatch_kl_mean_p95"]
    assert mismatch[1]["mark"]["strokeDash"] == [4, 3]
    assert [u["encoding"]["y"]["field"] for u in entropy] == ["entropy_mean"]
    for name, unit in (("mismatch", mismatch[0]), ("entropy", entropy[0])):
        child = children[charts.PANELS[name][1]]
        assert (child.get("data") or unit.get("data"))["name"] == "steps"
        (brush,) = [p for p in spec["params"] if p["name"] == charts.STEPS_BRUSH]
        assert unit["name"] in brush["views"]
    assert "masked_sequences_fraction" in json.dumps(mismatch[0]["encoding"]["tooltip"])
