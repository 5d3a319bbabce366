"""The day's details in a real JupyterLab: RunView's step slider, token chips for hidden and bidi characters,
a CRLF split over two tokens, a 40,000-token answer, the sample table's selection cap; all offline."""

from __future__ import annotations

import json
import random
import re
import time

from playwright.sync_api import expect

from .lab import Notebook, is_local, write_notebook

EVEN_STEPS = list(range(0, 100, 10))  # 0, 10, ..., 90: an IntSlider over the steps themselves
EVEN_COUNTS = {s: k + 2 for k, s in enumerate(EVEN_STEPS)}  # a different number of samples at each step
UNEVEN_COUNTS = {3: 4, 5: 7, 40: 2}  # steps 3, 5, 40: a slider over positions, the step in a label beside it

ODD_TOKENS = ["Hi", "", "\u200b", "\u202e", "A", "B", "C", "\x1b", "می\u200cخواهم", "end"]
CRLF_TOKENS = ["\u2581line", "<0x0D>", "<0x0A>", "\u2581next"]
LONG_TOKENS = 40_000
BIG_ROWS = 6_200


def _write_steps(folder, counts: dict[int, int], seed: int) -> None:
    from rlviz_widgets._synth import make_record

    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    with open(folder / "rollout_rank0.jsonl", "w", encoding="utf-8") as f:
        for k, (step, n) in enumerate(counts.items()):
            for i in range(n):
                rec = make_record(rng, step, i, 8, progress=k / max(len(counts) - 1, 1))
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def _record(tokens: list[str], step: int, index: int) -> dict:
    """A record whose response is exactly these tokens (every token array as long as they are)."""
    from rlviz_widgets._synth import make_record

    rec = make_record(random.Random(index), step, index, len(tokens), progress=0.5)
    n = len(tokens)
    for key in ("logprobs", "ref_logprobs", "values", "token_rewards"):
        rec[key] = (rec[key] * (n // len(rec[key]) + 1))[:n]
    rec["response_tokens"] = tokens
    rec["response"] = "".join(tokens)
    return rec


def _wait_run_views(page, n: int) -> None:
    expect(page.locator(".rlv-run-view")).to_have_count(n, timeout=90_000)
    for k in range(n):
        view = page.locator(".rlv-run-view").nth(k)
        expect(view.locator(".rlv-chart canvas, .rlv-chart svg").first).to_be_visible(timeout=90_000)
        expect(view.locator(".rlv-sample-table .rlv-row[data-id]").first).to_be_attached(timeout=60_000)


def _step_slider(view):
    """The RunView's step slider (its range input, readout and label)."""
    return view.locator(".rlv-step-slider")


THUMB = 16  # px: Chromium's range thumb; its centre runs from track x + THUMB/2 to the right end - THUMB/2


def _handle_x(track_box: dict, lo: int, hi: int, value: int) -> float:
    return track_box["x"] + THUMB / 2 + (track_box["width"] - THUMB) * (value - lo) / (hi - lo)


def _table_steps(view) -> list[str]:
    """The step column of every row the view's sample table draws."""
    return view.locator('.rlv-sample-table .rlv-row[data-id] .rlv-td[data-col="step"]').all_inner_texts()


def test_step_slider_drag_and_keys(page, lab, lab_root):
    _write_steps(lab_root / "slider_even", EVEN_COUNTS, seed=11)
    _write_steps(lab_root / "slider_uneven", UNEVEN_COUNTS, seed=12)
    write_notebook(lab_root / "details_slider.ipynb", [
        "import rlviz_widgets as rw\neven = rw.RunView('slider_even', progress=False)\neven",
        "uneven = rw.RunView('slider_uneven', progress=False)\nuneven",
    ])
    nb = Notebook(page, lab, "details_slider.ipynb")
    nb.run_all()
    _wait_run_views(page, 2)
    assert nb.eval("list(even.run.step_values)") == EVEN_STEPS
    assert nb.eval("list(uneven.run.step_values)") == list(UNEVEN_COUNTS)
    assert nb.eval("even.steps") is None and nb.eval("uneven.steps") is None

    # -- evenly spaced steps: the slider's numbers are the steps, its readout follows the drag
    view = page.locator(".rlv-run-view").nth(0)
    slider = _step_slider(view)
    expect(slider).to_have_count(1)
    slider.scroll_into_view_if_needed()
    readout = slider.locator(".rlv-step-readout")
    label = slider.locator(".rlv-step-label")
    expect(readout).to_be_hidden()  # no step filter: the slider says so, not "0"
    expect(label).to_have_text("all steps")
    nb.exec("even.filter(steps=(0, 0))")
    expect(readout).to_be_visible()
    expect(readout).to_have_text("0")
    handle = slider.locator(".rlv-step-input")
    track = handle.bounding_box()
    y = track["y"] + track["height"] / 2
    page.mouse.move(_handle_x(track, 0, 90, 0), y)
    page.mouse.down()
    seen = []
    for target in (10, 20, 30):  # the button held: the readout shows each step as the handle passes it
        page.mouse.move(_handle_x(track, 0, 90, target), y, steps=4)
        page.wait_for_timeout(150)
        seen.append(readout.inner_text().strip())
    assert seen == ["10", "20", "30"], f"readout while dragging: {seen}"
    assert nb.eval("even.steps") == [0, 0]  # continuous_update=False: nothing sent before the release
    page.mouse.up()
    nb.wait_for("even.steps", lambda v: v == [30, 30], what="even.steps after the drag")
    assert nb.eval("even.step_slider.value") == 30
    nb.wait_for("even.table.row_count", lambda v: v == EVEN_COUNTS[30], what="table rows at step 30")
    total = sum(EVEN_COUNTS.values())
    expect(view.locator(".rlv-count").first).to_contain_text(f"{EVEN_COUNTS[30]:,} of {total:,}")
    expect(view.locator(".rlv-sample-table .rlv-row[data-id]")).to_have_count(EVEN_COUNTS[30], timeout=20_000)
    assert set(_table_steps(view)) == {"30"}

    # arrow keys on the focused handle: one step value each
    handle.focus()
    page.keyboard.press("ArrowRight")
    expect(readout).to_have_text("40")
    nb.wait_for("even.steps", lambda v: v == [40, 40], what="even.steps after ArrowRight")
    nb.wait_for("even.table.row_count", lambda v: v == EVEN_COUNTS[40], what="table rows at step 40")
    expect(view.locator(".rlv-sample-table .rlv-row[data-id]")).to_have_count(EVEN_COUNTS[40], timeout=20_000)
    assert set(_table_steps(view)) == {"40"}
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    expect(readout).to_have_text("20")
    nb.wait_for("even.steps", lambda v: v == [20, 20], what="even.steps after two ArrowLeft")
    nb.wait_for("even.table.row_count", lambda v: v == EVEN_COUNTS[20], what="table rows at step 20")

    # -- uneven steps (3, 5, 40): the slider moves over positions, the label beside it shows the step
    view = page.locator(".rlv-run-view").nth(1)
    slider = _step_slider(view)
    expect(slider).to_have_count(1)
    slider.scroll_into_view_if_needed()
    label = slider.locator(".rlv-step-label")
    expect(label).to_have_count(1)
    expect(label).to_be_visible()
    expect(label).to_have_text("all steps")  # no step filter; the handle at the first position (step 3)
    expect(slider.locator(".rlv-step-readout")).to_be_hidden()  # a position would mean nothing to a reader
    handle = slider.locator(".rlv-step-input")
    handle.focus()
    page.keyboard.press("ArrowRight")
    nb.wait_for("uneven.steps", lambda v: v == [5, 5], what="uneven.steps after ArrowRight")
    expect(label).to_have_text("5")
    nb.wait_for("uneven.table.row_count", lambda v: v == UNEVEN_COUNTS[5], what="table rows at step 5")
    expect(view.locator(".rlv-sample-table .rlv-row[data-id]")).to_have_count(UNEVEN_COUNTS[5], timeout=20_000)
    assert set(_table_steps(view)) == {"5"}
    # drag to the far end: the last position is step 40
    track = handle.bounding_box()
    y = track["y"] + track["height"] / 2
    page.mouse.move(_handle_x(track, 0, 2, 1), y)
    page.mouse.down()
    page.mouse.move(track["x"] + track["width"] - 1, y, steps=6)
    page.mouse.up()
    nb.wait_for("uneven.steps", lambda v: v == [40, 40], what="uneven.steps after dragging to the end")
    expect(label).to_have_text("40")
    nb.wait_for("uneven.table.row_count", lambda v: v == UNEVEN_COUNTS[40], what="table rows at step 40")
    expect(view.locator(".rlv-sample-table .rlv-row[data-id]")).to_have_count(UNEVEN_COUNTS[40], timeout=20_000)
    assert set(_table_steps(view)) == {"40"}

    # Python moves the slider too
    nb.exec("uneven.filter(steps=(3, 3))")
    expect(label).to_have_text("3")
    assert nb.eval("uneven.step_slider._slider.value") == 0

    outside = [u for u in page.requests if not is_local(u)]
    assert not outside and any("127.0.0.1" in u for u in page.requests), outside[:10]


def test_token_chips_long_strip_and_selection_cap(page, lab, lab_root):
    from rlviz_widgets._synth import make_record

    folder = lab_root / "details_tokens"
    folder.mkdir(parents=True, exist_ok=True)
    long_rec = make_record(random.Random(7), 1, 2, LONG_TOKENS, progress=1.0)
    assert len(long_rec["response_tokens"]) == LONG_TOKENS
    with open(folder / "rollout_rank0.jsonl", "w", encoding="utf-8") as f:
        f.write(json.dumps(_record(ODD_TOKENS, 0, 0)) + "\n")
        f.write(json.dumps(_record(CRLF_TOKENS, 0, 1)) + "\n")
        f.write(json.dumps(long_rec) + "\n")
    write_notebook(lab_root / "details_tokens.ipynb", [
        "import pandas as pd, rlviz_widgets as rw\nrun = rw.open_run('details_tokens', progress=False)\n"
        "ids = run.sql('select sample_id, n_tokens from samples order by step, n_tokens desc')\n"
        "odd_id, crlf_id, long_id = (int(ids.sample_id[ids.n_tokens == n].iloc[0]) for n in (10, 4, 40000))",
        "strip = rw.TokenStrip(run, [odd_id, crlf_id], show_table=False)\nstrip",
        "long = rw.TokenStrip(run, [long_id])\nlong",
        f"df = pd.DataFrame({{'sample_id': [100_000 + 3 * i for i in range({BIG_ROWS})],\n"
        f"                   'reward': [((i * 37) % 101) / 100 for i in range({BIG_ROWS})],\n"
        f"                   'prompt': [f'row {{i}}' for i in range({BIG_ROWS})]}})\n"
        "table = rw.SampleTable(df, height=300)\ntable",
    ])
    nb = Notebook(page, lab, "details_tokens.ipynb")
    nb.run_all()

    # -- hidden characters: each gets a visible chip with an escape; Persian with its ZWNJ shows as it is
    strip = page.locator(".rlv-token-strip").nth(0)
    odd = strip.locator(".rlv-strip").nth(0).locator(".rlv-strip-body .rlv-tok")
    expect(odd).to_have_count(len(ODD_TOKENS), timeout=90_000)
    odd.first.scroll_into_view_if_needed()
    texts = [odd.nth(k).text_content() for k in range(len(ODD_TOKENS))]
    want = {1: "\u2205", 2: "\\u200b", 3: "\\u202e", 7: "\\x1b"}
    for k, shown in want.items():
        chip = odd.nth(k)
        expect(chip).to_be_visible()
        box = chip.bounding_box()
        assert box and box["width"] > 2 and box["height"] > 2, (k, box)
        assert texts[k] == shown, f"token {ODD_TOKENS[k]!r} shows {texts[k]!r}, want {shown!r}"
    assert texts[8] == "می\u200cخواهم", f"Persian word shows {texts[8]!r}"
    assert "\\" not in texts[8]
    assert texts[4:7] == ["A", "B", "C"] and texts[9] == "end"
    # no bidi control reaches the page: the chips after U+202E are laid out left to right in token order
    body_text = strip.locator(".rlv-strip-body").first.text_content()
    assert not re.search("[\u200b\u202a-\u202e\u2066-\u2069\x1b]", body_text), repr(body_text)
    boxes = [odd.nth(k).bounding_box() for k in range(3, len(ODD_TOKENS))]
    assert len({round(b["y"]) for b in boxes}) == 1, f"the chips wrapped: {boxes}"
    xs = [b["x"] for b in boxes]
    assert all(a < b for a, b in zip(xs, xs[1:])), f"chips after U+202E are not left to right: x = {xs}"
    assert all(b["width"] > 0 for b in boxes)

    # -- CRLF split over two SentencePiece byte tokens: one line end
    crlf = strip.locator(".rlv-strip").nth(1)
    expect(crlf.locator(".rlv-strip-body .rlv-tok")).to_have_count(len(CRLF_TOKENS))
    assert crlf.locator(".rlv-strip-body br").count() == 1
    chips = crlf.locator(".rlv-strip-body .rlv-tok")
    assert [chips.nth(k).text_content() for k in range(4)] == [" line", "\u240d", "\u21b5", " next"]
    assert chips.nth(3).bounding_box()["y"] > chips.nth(0).bounding_box()["y"]  # "next" on the next line

    # -- 40,000 tokens: 32,768 chips and a note on the rest; the page stays responsive
    long = page.locator(".rlv-token-strip").nth(1)
    body = long.locator(".rlv-strip-body").first
    expect(body.locator(".rlv-tok").first).to_be_attached(timeout=90_000)
    expect(body.locator(".rlv-tok")).to_have_count(32_768, timeout=30_000)
    more = long.locator(".rlv-strip-more")
    expect(more).to_have_count(1)
    expect(more).to_contain_text("7,232 more tokens")
    assert nb.eval("len(long.tokens)") == LONG_TOKENS  # every token is in the kernel
    chip = body.locator(".rlv-tok").nth(200)
    chip.scroll_into_view_if_needed()
    t0 = time.time()
    chip.hover()
    tip = long.locator(".rlv-tooltip")
    expect(tip).to_be_visible(timeout=5_000)
    expect(tip).to_contain_text("kl", timeout=5_000)
    took = time.time() - t0
    assert took < 5.0, f"tooltip after {took:.1f} s"
    # a click far along the strip pins that token
    far = body.locator(".rlv-tok").nth(30_000)
    far.scroll_into_view_if_needed()
    far.click()
    pinned = nb.wait_for("long.pinned", lambda v: v is not None, what="long.pinned")
    assert pinned["sample_id"] == nb.eval("long_id") and pinned["position"] == 30_000

    # -- selection cap: click row 0, scroll to row 5,999, shift-click: 5,000 rows (the kernel's cap)
    assert nb.eval("table.max_selected") == 5000 and nb.eval("table.row_count") == BIG_ROWS
    table = page.locator(".rlv-sample-table").first
    table.scroll_into_view_if_needed()
    r0 = table.locator('.rlv-row[data-row="0"][data-id]')
    expect(r0).to_be_visible(timeout=60_000)
    assert int(r0.get_attribute("data-id")) == 100_000
    r0.click()
    nb.wait_for("table.selected_ids", lambda v: v == [100_000], what="row 0 selected")
    table.evaluate("(el) => el.rlvScrollToRow(5999)")
    last = table.locator('.rlv-row[data-row="5999"][data-id]')
    expect(last).to_be_visible(timeout=30_000)
    assert int(last.get_attribute("data-id")) == 100_000 + 3 * 5999
    last.click(modifiers=["Shift"])
    ids = nb.wait_for("table.selected_ids", lambda v: len(v) > 1, timeout=30, what="the shift-click range")
    assert len(ids) == 5000, len(ids)
    assert sorted(ids) == [100_000 + 3 * i for i in range(5000)]  # the rows nearest the anchor (row 0)
    expect(table.locator(".rlv-note")).to_have_text("selection capped at 5,000 rows")
    expect(table.locator(".rlv-selcount")).to_contain_text("5,000 selected")
    sel = nb.eval("[len(table.selected), sorted(table.selected.sample_id.tolist()) == sorted(table.selected_ids)]")
    assert sel == [5000, True]
    # what the table paints agrees: row 5,999 (clicked, past the cap) is not selected, row 4,999 is, 5,000 not
    expect(last).not_to_have_class(re.compile(r"\brlv-selected\b"))
    table.evaluate("(el) => el.rlvScrollToRow(5000)")
    for row, selected in ((4998, True), (4999, True), (5000, False), (5001, False)):
        r = table.locator(f'.rlv-row[data-row="{row}"][data-id]')
        expect(r).to_be_attached(timeout=20_000)
        if selected:
            expect(r).to_have_class(re.compile(r"\brlv-selected\b"))
            expect(r).to_have_attribute("aria-selected", "true")
        else:
            expect(r).not_to_have_class(re.compile(r"\brlv-selected\b"))

    outside = [u for u in page.requests if not is_local(u)]
    assert not outside and any("127.0.0.1" in u for u in page.requests), outside[:10]
