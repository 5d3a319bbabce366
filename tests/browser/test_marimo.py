"""RunView in marimo (``marimo run``, headless Chromium): shown bare and through ``mo.ui.anywidget``, it renders; a
brush on the step chart reaches the kernel (``view.filtered``), a row click opens that sample's token strip; nothing
is fetched from outside this machine. The kernel's state is read from the files the notebook's observers write."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .lab import UNIT_POINT, free_port, is_local, serving

pytest.importorskip("marimo")

NOTEBOOK = Path(__file__).with_name("marimo_run_view.py")

@pytest.fixture(scope="module")
def marimo_app(tmp_path_factory, chromium_path):
    out = tmp_path_factory.mktemp("marimo")
    port = free_port()
    env = {**os.environ, "RLVIZ_MARIMO_OUT": str(out), "RLVIZ_CACHE_DIR": str(out / "cache"), "HOME": str(out),
           "XDG_CONFIG_HOME": str(out / "config"), "XDG_CACHE_HOME": str(out / "xdg-cache"),
           "XDG_STATE_HOME": str(out / "state")}
    cmd = [sys.executable, "-m", "marimo", "run", str(NOTEBOOK), "--headless", "--host", "127.0.0.1", "--port",
           str(port), "--no-token"]
    base = f"http://127.0.0.1:{port}"
    with serving(cmd, env, out / "marimo.log", f"{base}/health", cwd=out):
        yield base, out


def kernel_state(out: Path, name: str, predicate, what: str, timeout: float = 30.0) -> dict:
    """What the notebook's observer last wrote of view ``name``, once ``predicate`` holds."""
    deadline = time.time() + timeout
    state = None
    while time.time() < deadline:
        try:
            state = json.loads((out / f"{name}.json").read_text())
        except (OSError, ValueError):  # not written yet, or being written
            state = None
        if state is not None and predicate(state):
            return state
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; last state: {state!r}")


def brush(page, chart, unit: int, x0: float, x1: float) -> None:
    """A mouse brush from x0 to x1 across the middle of concat unit ``unit`` of ``chart`` (a locator: Playwright
    sees into marimo's shadow roots, document.querySelector does not)."""
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(500)  # the chart holds still
    root = chart.element_handle()
    a, b = (page.evaluate(UNIT_POINT, [unit, x, 0.5, root]) for x in (x0, x1))
    page.mouse.move(a["x"], a["y"])
    page.mouse.down()
    for k in range(1, 6):
        page.mouse.move(a["x"] + (b["x"] - a["x"]) * k / 5, a["y"], steps=2)
    page.mouse.up()


def test_run_view_in_marimo(marimo_app, browser, artifacts):
    import rlviz_widgets as rw

    base, out = marimo_app
    ctx = browser.new_context(viewport={"width": 1400, "height": 1100})
    page = ctx.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(base)
        views = page.locator(".rlv-run-view")
        expect(views).to_have_count(2, timeout=120_000)
        samples = rw.open_run(out / "demo", cache_dir=out / "check-cache", progress=False).samples  # (written by now)
        for k, name in enumerate(("bare", "wrapped")):
            view = views.nth(k)
            view.scroll_into_view_if_needed()
            chart = view.locator(".rlv-chart").first
            expect(chart.locator("canvas, svg").first).to_be_visible(timeout=90_000)
            expect(view.locator(".rlv-sample-table .rlv-row[data-id]").first).to_be_visible(timeout=60_000)
            page.wait_for_function("c => c._rlvView?.data('hist')?.length > 0", arg=chart.element_handle(),
                                   timeout=30_000)
            assert kernel_state(out, name, lambda s: True, f"{name}: first state")["steps"] is None

            # brush steps 10..20 on the KL curve: the kernel's view.filtered follows
            brush(page, chart, 1, 10.0, 20.0)
            state = kernel_state(out, name, lambda s: s["steps"] is not None, f"{name}: view.steps after a brush")
            lo, hi = state["steps"]
            # (under marimo the brush lands about 5 px, one step, left of the pixels aimed at: a range of ten steps
            # near 10..20 is asked, and the kernel's count checked against the range it holds)
            assert 8.5 < lo < 11.5 and 18.5 < hi < 21.5 and hi - lo == pytest.approx(10, abs=0.2), state
            want = int(samples.step.between(lo, hi).sum())
            assert 0 < state["filtered"] == want < len(samples), (state, want)
            count = view.locator(".rlv-step-row .rlv-count")
            expect(count).to_contain_text(f"{want:,} of {len(samples):,}", timeout=20_000)

            # click a row: the kernel holds the pick, and that sample's token strip is drawn
            row = view.locator(".rlv-sample-table .rlv-row[data-id]").nth(1)
            sid = int(row.get_attribute("data-id"))
            row.click()
            state = kernel_state(out, name, lambda s, sid=sid: s["selected_ids"] == [sid], f"{name}: the pick")
            assert state["strip"] == [sid]
            strip = view.locator(".rlv-part-strip .rlv-token-strip")
            expect(strip.locator(".rlv-tok").first).to_be_visible(timeout=30_000)
            expect(view.locator(".rlv-detail")).to_contain_text(str(sid))
        views.nth(0).screenshot(path=str(artifacts / "run_view_marimo.png"))
    finally:
        ctx.close()
    outside = [u for u in requests if not is_local(u)]
    assert requests and not outside, f"requests left this machine: {outside[:10]}"
