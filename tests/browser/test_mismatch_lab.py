"""Rollout-trainer mismatch in a real JupyterLab (issue 32), on a prime-rl token export: the mismatch and entropy
panels are drawn and brushable (the brushed steps come back as view.filtered), the table sorts by the largest
|log ratio| with a header click, the strip colours by mismatch KL and marks masked tokens (and says so in its
legend); all offline."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import expect

from .lab import Notebook, drag, is_local, write_notebook

TESTS = Path(__file__).resolve().parents[1]
MISMATCH_TITLE = "mismatch KL (k3): mean and p95 over sequences"


def test_mismatch_panels_sort_colour_and_masked_tokens(page, lab, lab_root):
    write_notebook(lab_root / "mismatch.ipynb", [
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\nfrom pathlib import Path\n"
        "from prime_formats import ChatMLTokenizer, write_prime\nimport rlviz_widgets as rw\n"
        "write_prime(Path('prime_export'), steps=tuple(range(1, 9)), prompts=3, n=4, seed=4)",
        "view = rw.RunView('prime_export', tokenizer=ChatMLTokenizer(), progress=False)\nview",
    ])
    nb = Notebook(page, lab, "mismatch.ipynb")
    nb.run_all()
    view = page.locator(".rlv-run-view")
    expect(view.locator(".rlv-sample-table .rlv-row[data-id]").first).to_be_attached(timeout=90_000)
    expect(view.locator(".rlv-chart canvas, .rlv-chart svg").first).to_be_visible(timeout=90_000)
    titles = nb.eval("[c.get('title') for c in view.chart.spec['concat']]")
    assert "mean token entropy (trained tokens)" in titles
    unit = titles.index(MISMATCH_TITLE)
    total = nb.eval("view.run.n_samples")

    # brush steps 3..6 on the mismatch curve: the filter comes back from the kernel
    view.locator(".rlv-chart").first.scroll_into_view_if_needed()
    drag(page, unit, 3.0, 6.0)
    steps = nb.wait_for("view.steps", lambda v: v is not None, what="view.steps after brushing the mismatch curve")
    assert 2.5 < steps[0] < 3.5 and 5.5 < steps[1] < 6.5, steps
    got = nb.eval("[int(view.filtered.step.min()), int(view.filtered.step.max()), len(view.filtered)]")
    want = nb.eval(f"int(((view.run.samples.step >= {steps[0]}) & (view.run.samples.step <= {steps[1]})).sum())")
    assert steps[0] <= got[0] and got[1] <= steps[1] and got[2] == want < total
    nb.exec("view.filter(steps=None)")

    # sort the table by the largest |log ratio|, descending, with header clicks
    header = view.locator('.rlv-sample-table .rlv-th[data-col="mismatch_log_ratio_abs_max"]')
    header.scroll_into_view_if_needed()
    header.click()
    nb.wait_for("view.table.sort_by", lambda v: v == "mismatch_log_ratio_abs_max", what="the sort column")
    if not nb.eval("view.table.sort_desc"):
        header.click()
        nb.wait_for("view.table.sort_desc", lambda v: v is True, what="a descending sort")
    best = nb.eval("int(view.run.samples.sort_values('mismatch_log_ratio_abs_max', ascending=False)"
                   ".sample_id.iloc[0])")
    first = view.locator(".rlv-sample-table .rlv-row[data-id]").first
    expect(first).to_have_attribute("data-id", str(best), timeout=20_000)

    # the strip of a sample with masked tokens, coloured by mismatch KL chosen in the page
    sid = nb.eval("int(view.run.samples.sort_values('masked_tokens').sample_id.iloc[-1])")
    nb.exec(f"view.selected_ids = [{sid}]")
    strip = view.locator(".rlv-token-strip").first
    expect(strip.locator(".rlv-strip-body .rlv-tok").first).to_be_visible(timeout=30_000)
    strip.locator(".rlv-metric-select").select_option("mismatch_kl")
    nb.wait_for("view.color_by", lambda v: v == "mismatch_kl", what="colour by mismatch KL")
    expect(strip.locator(".rlv-legend")).to_contain_text("mismatch_kl")
    masked = nb.eval("int(view.selected_tokens.masked.sum())")
    assert masked > 0
    expect(strip.locator(".rlv-strip-body .rlv-tok.rlv-masked")).to_have_count(masked)
    expect(strip.locator(".rlv-legend")).to_contain_text("masked")
    expect(strip.locator(".rlv-legend")).to_contain_text("not trained")  # the prompt's tokens, muted
    coloured = strip.locator(".rlv-strip-body .rlv-tok:not(.rlv-untrained)").evaluate_all(
        "cs => cs.filter(c => c.style.backgroundColor).length")
    assert coloured > 0

    outside = [u for u in page.requests if not is_local(u)]
    assert not outside and any("127.0.0.1" in u for u in page.requests), outside[:10]
