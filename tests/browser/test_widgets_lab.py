"""TokenStrip and SampleTable in a real JupyterLab, driven like a user would (issue: first widgets)."""

from __future__ import annotations

import time

from playwright.sync_api import expect

from .conftest import copy_to_docs
from .lab import Notebook, write_notebook

CELLS = [
    "import json, rlviz_widgets as rw\nrun = rw.open_run('logs', progress=False)\n"
    "evil = int(run.sql(\"select sample_id from samples where response like '%onerror%'\").sample_id[0])",
    "strip = rw.TokenStrip(run, [evil], color_by='kl')\nstrip",
    "table = rw.SampleTable(run, height=300)\ntable",
    "big_run = rw.open_run('million', progress=False)\nbig = rw.SampleTable(big_run, height=300)\nbig",
]


def _open(page, lab, lab_root, name="widgets.ipynb"):
    write_notebook(lab_root / name, CELLS)
    nb = Notebook(page, lab, name)
    nb.run_all()
    return nb


def _state_bytes(nb, name):
    return nb.eval(f"len(json.dumps({{k: v for k, v in {name}.get_state().items() if k not in ('_esm', '_css')}}))")


def test_token_strip_and_table(page, lab, lab_root, artifacts):
    nb = _open(page, lab, lab_root)
    strip = page.locator(".rlv-token-strip").first
    expect(strip.locator(".rlv-tok").first).to_be_visible(timeout=90_000)

    # untrusted text: markup shows as characters and runs nothing
    text = strip.inner_text()
    assert "<img src=x onerror=" in text and "<script>" in text
    assert page.evaluate("window.__xss") is None
    assert page.locator(".rlv-token-strip img, .rlv-sample-table img").count() == 0
    assert page.locator(".rlv-token-strip script").count() == 0

    # hover a token: the shared tooltip shows its metrics
    chip = strip.locator(".rlv-tok").nth(3)
    chip.hover()
    tip = page.locator(".rlv-tooltip").first
    expect(tip).to_be_visible()
    for metric in ("kl", "log_ratio", "logprob", "value"):
        expect(tip).to_contain_text(metric)
    # click pins it; Python hears of it
    chip.click()
    pinned = nb.wait_for("strip.pinned", lambda v: v is not None, what="strip.pinned")
    assert pinned["sample_id"] == nb.eval("evil")
    # the metric chooser drives color_by
    page.locator(".rlv-metric-select").first.select_option("log_ratio")
    nb.wait_for("strip.color_by", lambda v: v == "log_ratio")

    # the table: sort by reward (descending first for numbers), check the order shown
    table = page.locator(".rlv-sample-table").first
    expect(table.locator(".rlv-row").first).to_be_visible(timeout=60_000)
    header = table.locator('.rlv-th[data-col="reward"]')
    header.click()
    nb.wait_for("(table.sort_by, table.sort_desc)", lambda v: v[0] == "reward")
    if not nb.eval("table.sort_desc"):
        header.click()
        nb.wait_for("table.sort_desc", lambda v: v is True)
    time.sleep(1.0)
    expected = nb.eval("table.shown.reward.head(8).round(4).tolist()")
    cells = table.locator('.rlv-row .rlv-td[data-col="reward"]')
    expect(cells.first).to_contain_text(f"{expected[0]:g}"[:4], timeout=20_000)
    rows = table.locator(".rlv-row")
    shown = sorted((int(rows.nth(i).get_attribute("data-row")), rows.nth(i).get_attribute("data-id"))
                    for i in range(min(rows.count(), 8)))
    want_ids = nb.eval("table.shown.sample_id.head(8).tolist()")
    assert [int(i) for _, i in shown[:5]] == want_ids[:5]
    assert expected == sorted(expected, reverse=True)

    # click, then ctrl-click: table.selected comes back in the kernel
    r0, r2 = table.locator('.rlv-row[data-row="0"]'), table.locator('.rlv-row[data-row="2"]')
    r0.click()
    r2.click(modifiers=["Control"])
    ids = [int(r0.get_attribute("data-id")), int(r2.get_attribute("data-id"))]
    nb.wait_for("sorted(table.selected.sample_id.tolist())", lambda v: v == sorted(ids), what="table.selected")
    assert nb.eval("table.selected.columns.tolist()")[:3] == ["sample_id", "step", "prompt"]

    # search goes to the engine
    table.locator(".rlv-search").fill("onerror")
    nb.wait_for("table.row_count", lambda v: v == 1, what="search row_count")

    # a million rows: scroll to row 500,000 and read it in the DOM
    big = page.locator(".rlv-sample-table").nth(1)
    expect(big.locator(".rlv-row").first).to_be_visible(timeout=120_000)
    assert nb.eval("big.row_count") == 1_000_000
    big.evaluate("(el) => el.rlvScrollToRow(500000)")
    row = big.locator('.rlv-row[data-row="500000"][data-id]')
    expect(row).to_have_count(1, timeout=30_000)
    expect(row.locator(".rlv-td").first).not_to_be_empty(timeout=30_000)
    dom_id = int(row.get_attribute("data-id"))
    assert dom_id == nb.eval("big._source.ids(offset=500000, limit=1)[0]")
    assert str(nb.eval(f"int(big_run.rows([{dom_id}]).step[0])")) in row.inner_text()

    # widget state stays small however big the data
    assert _state_bytes(nb, "big") < 100_000
    assert _state_bytes(nb, "strip") < 100_000

    # screenshots in both themes
    for theme, name in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
        page.evaluate(f"window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{theme}'}})")
        page.wait_for_function(f"document.body.dataset.jpThemeLight === '{str(name == 'light').lower()}'")
        time.sleep(1.0)
        strip.scroll_into_view_if_needed()
        shot = artifacts / f"token_strip_{name}.png"
        page.locator(".jp-Notebook").screenshot(path=str(shot))
        copy_to_docs(shot, f"widgets_{name}.png")
