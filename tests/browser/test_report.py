"""The self-contained report in a real Chromium, opened from file:// with the network blocked: charts drawn, the
table sorted by a header click, token strips shown, model output inert, no request leaving the file."""

from __future__ import annotations

import pytest

import rlviz_widgets as rw
from tests.widgets.test_report import EVIL, evil_log


@pytest.fixture
def offline_page(browser):
    """A page whose every request is recorded and any not to file:// refused; fails if one was made."""
    ctx = browser.new_context(viewport={"width": 1300, "height": 1000})
    ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://") else route.abort())
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.requests = []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.errors = errors
    yield pg
    ctx.close()
    outside = [u for u in pg.requests if not u.startswith(("file://", "data:", "blob:"))]
    assert not outside, f"requests left the file: {outside[:10]}"


def test_report_offline(offline_page, tmp_path, cache_dir):
    view = rw.RunView(evil_log(tmp_path / "logs"), cache_dir=cache_dir, progress=False)
    view.selected_ids = [int(view.run.samples.sample_id[2])]
    path = view.to_html(tmp_path / "report.html")
    pg = offline_page
    pg.goto(path.as_uri())
    # charts: a canvas (or svg) drawn inside the chart
    pg.wait_for_selector(".rlv-chart .rlv-chart-view canvas, .rlv-chart .rlv-chart-view svg", timeout=20_000)
    assert pg.locator(".rlv-chart-view canvas, .rlv-chart-view svg").count() >= 1
    # the table: rows shown; a click on the reward header sorts descending, a second ascending
    pg.wait_for_selector(".rlv-sample-table .rlv-row[data-row='0'] .rlv-td[data-col='reward']")
    cell = ".rlv-sample-table .rlv-row[data-row='0'] .rlv-td[data-col='reward']"

    def first_reward() -> float:
        return float(pg.locator(cell).inner_text().replace("−", "-"))

    header = pg.locator(".rlv-sample-table .rlv-th", has_text="reward").first
    header.click()
    pg.wait_for_function(f"document.querySelector(\"{cell}\")?.textContent.trim().startsWith('99')")
    assert first_reward() == 99
    header.click()
    pg.wait_for_function(f"!document.querySelector(\"{cell}\")?.textContent.trim().startsWith('99')")
    assert first_reward() == pytest.approx(min(view.run.samples.reward), abs=1e-3)  # (shown to 4 digits)
    # token strips: each section's, with chips
    pg.wait_for_selector(".rlv-report-strip .rlv-strip-body span")
    assert pg.locator(".rlv-report-strip .rlv-strip").count() >= 3
    # model output: shown as the characters it is, never run
    text = pg.locator("body").inner_text()
    for bad in EVIL[:2]:
        assert bad in text
    assert pg.evaluate("window.__xss") is None
    assert pg.locator("img[src='x']").count() == 0
    assert "All 41 filtered samples, by log order" in text
    assert not pg.errors, pg.errors
