"""RunView in a real JupyterLab (and Notebook 7): brushes with the mouse, filters from Python, row clicks."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from .conftest import copy_to_docs
from .lab import Notebook, drag, jupyter_server, write_notebook

CELLS = ["import rlviz_widgets as rw\nview = rw.RunView('logs', progress=False)\nview"]


def _wait_rendered(page):
    expect(page.locator(".rlv-chart canvas, .rlv-chart svg").first).to_be_visible(timeout=90_000)
    expect(page.locator(".rlv-sample-table .rlv-row[data-id]").first).to_be_visible(timeout=60_000)
    page.wait_for_function("document.querySelector('.rlv-chart')?._rlvView?.data('hist')?.length > 0",
                           timeout=30_000)


def test_run_view_brush_filter_click(page, lab, lab_root, artifacts):
    write_notebook(lab_root / "run_view.ipynb", CELLS)
    nb = Notebook(page, lab, "run_view.ipynb")
    nb.run_all()
    _wait_rendered(page)
    total = nb.eval("view.run.n_samples")

    # brush steps on the KL curve with the mouse: the table follows, view.filtered comes back
    drag(page, 1, 3.0, 7.0)
    steps = nb.wait_for("view.steps", lambda v: v is not None, what="view.steps after a brush")
    assert 2.5 < steps[0] < 3.5 and 6.5 < steps[1] < 7.5, steps
    got = nb.eval("[view.filtered.step.min(), view.filtered.step.max(), len(view.filtered), view.table.row_count]")
    assert steps[0] <= got[0] and got[1] <= steps[1] and got[2] == got[3] < total
    expect(page.locator(".rlv-step-row .rlv-count").first).to_contain_text(f"{got[3]:,} of {total:,}")

    # brush a reward range on the histogram: the rows of the table are inside both ranges
    drag(page, 4, 0.0, 1.0)
    reward = nb.wait_for("view.reward", lambda v: v is not None, what="view.reward after a brush")
    assert -0.3 < reward[0] < 0.3 and 0.7 < reward[1] < 1.3, reward
    rows = nb.eval("[[float(x) for x in view.filtered.reward], [float(x) for x in view.filtered.step]]")
    assert rows[0] and all(reward[0] <= r <= reward[1] for r in rows[0])
    assert all(steps[0] <= s <= steps[1] for s in rows[1])
    first_id = int(page.locator(".rlv-sample-table .rlv-row[data-id]").first.get_attribute("data-id"))
    assert first_id in nb.eval("view.filtered.sample_id.tolist()")

    # Python moves the brushes and the table
    nb.exec("view.filter(steps=(2, 5), reward=None)")
    page.wait_for_function(
        "(() => { const s = document.querySelector('.rlv-chart')._rlvView.signal('steps_brush');"
        " return s && s.step && Math.abs(s.step[0] - 2) < 1e-6 && Math.abs(s.step[1] - 5) < 1e-6; })()",
        timeout=20_000)
    assert page.evaluate("Object.keys(document.querySelector('.rlv-chart')._rlvView.signal('reward_brush') || {})"
                         ".length") == 0
    want = nb.eval("int(view.run.sql('select count(*) n from samples where step between 2 and 5').n[0])")
    assert nb.eval("view.table.row_count") == want
    expect(page.locator(".rlv-step-row .rlv-count").first).to_contain_text(f"{want:,} of {total:,}")
    assert nb.eval("sorted(set(view.filtered.step))") == [2, 3, 4, 5]

    # click a row: its detail and token strip open; view.selected comes back
    row = page.locator(".rlv-sample-table .rlv-row[data-id]").nth(1)
    sid = int(row.get_attribute("data-id"))
    row.click()
    nb.wait_for("view.selected.sample_id.tolist()", lambda v: v == [sid], what="view.selected")
    expect(page.locator(".rlv-detail").first).to_contain_text(str(sid))
    expect(page.locator(".rlv-run-view .rlv-token-strip .rlv-tok").first).to_be_visible(timeout=30_000)
    assert nb.eval("len(view.selected_tokens)") == nb.eval(f"int(view.run.rows([{sid}]).n_tokens[0])")
    nb.exec("view.color_by = 'log_ratio'")
    expect(page.locator(".rlv-run-view .rlv-metric-select").first).to_have_value("log_ratio")

    # a data update (band control) keeps the brush
    nb.exec("view.band.value = 2.0")
    time.sleep(1.5)
    assert page.evaluate("document.querySelector('.rlv-chart')._rlvView.signal('steps_brush').step") == [2, 5]
    assert nb.eval("view.steps") == [2.0, 5.0]

    shot = artifacts / "run_view.png"
    page.set_viewport_size({"width": 1400, "height": 2600})  # the whole view, detail and token strip included
    time.sleep(1.0)
    page.locator(".rlv-run-view").first.screenshot(path=str(shot))
    copy_to_docs(shot, "run_view.png")


@pytest.fixture
def notebook7(lab_root, tmp_path_factory, chromium_path):
    with jupyter_server(lab_root, tmp_path_factory.mktemp("nb7-state"), app="notebook") as base:
        yield base


def test_run_view_in_notebook7(notebook7, browser, lab_root, artifacts):
    from .lab import is_local

    write_notebook(lab_root / "run_view_nb7.ipynb", CELLS)
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    try:
        nb = Notebook(page, notebook7, "run_view_nb7.ipynb", app="notebook")
        nb.run_all()
        _wait_rendered(page)
        nb.exec("view.filter(steps=(1, 3))")
        want = nb.eval("int(view.run.sql('select count(*) n from samples where step between 1 and 3').n[0])")
        expect(page.locator(".rlv-step-row .rlv-count").first).to_contain_text(f"{want:,} of")
        page.locator(".rlv-run-view").first.screenshot(path=str(artifacts / "run_view_notebook7.png"))
    finally:
        ctx.close()
    assert requests and not [u for u in requests if not is_local(u)]


def test_run_view_follows_a_growing_log(page, lab, lab_root):
    import json
    import random

    from rlviz_widgets._synth import make_record, write_log

    folder = lab_root / "growing"
    write_log(folder, steps=5, samples_per_step=16, tokens=20, ranks=2, seed=2)
    write_notebook(lab_root / "follow.ipynb", [
        "import rlviz_widgets as rw\nview = rw.RunView('growing', progress=False, follow=True, follow_interval=1.0)\n"
        "view"])
    nb = Notebook(page, lab, "follow.ipynb")
    nb.run_all()
    _wait_rendered(page)
    nb.exec("view.filter(steps=(1, 3))")
    brush = ("(() => { const s = document.querySelector('.rlv-chart')._rlvView.signal('steps_brush');"
             " return s && s.step && s.step[0] === 1 && s.step[1] === 3; })()")
    page.wait_for_function(brush, timeout=20_000)
    expect(page.locator(".rlv-step-row .rlv-count").first).to_contain_text("48 of 80")

    # the job writes a new step, the last line only half at first
    lines = [json.dumps(make_record(random.Random(i), 5, i, 20, progress=1.0)) for i in range(8)]
    with open(folder / "rollout_rank0.jsonl", "a") as f:
        f.write("\n".join(lines[:7]) + "\n" + lines[7][:40])
        f.flush()
    page.wait_for_function(
        "document.querySelector('.rlv-chart')._rlvView.data('steps').some(d => d.step === 5)", timeout=30_000)
    expect(page.locator(".rlv-step-row .rlv-count").first).to_contain_text("48 of 87", timeout=20_000)
    with open(folder / "rollout_rank0.jsonl", "a") as f:
        f.write(lines[7][40:] + "\n")
    expect(page.locator(".rlv-step-row .rlv-count").first).to_contain_text("48 of 88", timeout=20_000)
    assert page.evaluate(brush)  # the user's brush is still there
    assert nb.eval("view.steps") == [1.0, 3.0] and nb.eval("view.follow") is True
    nb.exec("view.follow = False")
    assert nb.eval("view._follow_task is None") is True


def test_run_view_grpo_groups(page, lab, lab_root):
    from rlviz_widgets._synth import write_log

    write_log(lab_root / "grpo", steps=4, samples_per_step=32, tokens=16, ranks=2, group_size=8, seed=3)
    write_notebook(lab_root / "groups.ipynb", [
        "import rlviz_widgets as rw\nview = rw.RunView('grpo', progress=False)\nview.tabs.value = 1\nview"])
    nb = Notebook(page, lab, "groups.ipynb")
    nb.run_all()
    expect(page.locator(".rlv-groups-summary").first).to_contain_text("16 groups of 8", timeout=90_000)
    table = page.locator(".rlv-run-view .rlv-sample-table").nth(1)
    expect(table.locator(".rlv-row[data-id]").first).to_be_visible(timeout=30_000)
    expect(table.locator('.rlv-th[data-col="reward_std"]')).to_be_visible()
    # sorted by reward spread, widest first
    stds = nb.eval("view.group_table.shown.reward_std.head(3).tolist()")
    assert stds == sorted(stds, reverse=True)
    table.locator(".rlv-row[data-id]").first.click()
    expect(page.locator(".rlv-group-card").first).to_be_visible(timeout=20_000)
    assert page.locator(".rlv-group-card").count() == 8
    strips = page.locator(".rlv-run-view .rlv-token-strip").nth(1).locator(".rlv-strip")
    expect(strips.first).to_be_visible(timeout=20_000)
    assert strips.count() == 8
    expect(page.locator(".rlv-prompt-history").first).to_contain_text("across steps")
