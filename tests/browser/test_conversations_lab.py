"""Conversations in a real JupyterLab (issue 29): a multi-turn agent trajectory with two tool calls shows its turns
with role badges and its tool calls as JSON text, markup in a tool argument, a role and a tool name staying text;
a whole-sequence log (NeMo-Gym rollouts in a NeMo-RL train file) draws its prompt and tool-result tokens muted
and uncoloured, marks where each turn starts, and says "not trained" in the legend; all offline."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import expect

from .lab import Notebook, is_local, write_notebook

TESTS = Path(__file__).resolve().parents[1]


def _view(page, k: int):
    view = page.locator(".rlv-run-view").nth(k)
    expect(view.locator(".rlv-sample-table .rlv-row[data-id]").first).to_be_attached(timeout=90_000)
    return view


def test_turns_badges_tool_calls_muted_tokens_and_turn_marks(page, lab, lab_root):
    import sys

    sys.path.insert(0, str(TESTS))
    from chat_formats import XSS, write_agent_chat

    write_agent_chat(lab_root / "conv_agent", samples=3)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    write_notebook(lab_root / "conversations.ipynb", [
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\nfrom pathlib import Path\n"
        "from chat_formats import ChatTokenizer, write_nemo_gym\nimport rlviz_widgets as rw\n"
        "tok = ChatTokenizer()\ngym_truth = write_nemo_gym(Path('conv_gym'), tok, samples=2)",
        "agent = rw.RunView('conv_agent', progress=False)\nagent",
        "gym = rw.RunView('conv_gym', tokenizer=tok, progress=False)\ngym",
    ])
    nb = Notebook(page, lab, "conversations.ipynb")
    nb.run_all()
    expect(page.locator(".rlv-run-view")).to_have_count(2, timeout=90_000)

    # -- the agent's trajectory: one block per turn row, the role as a badge, tool calls as JSON text
    agent = _view(page, 0)
    agent.locator(".rlv-sample-table .rlv-row[data-id]").first.click()
    nb.wait_for("len(agent.selected_ids)", lambda v: v == 1, what="a picked agent sample")
    blocks = agent.locator(".rlv-detail .rlv-turn")
    want = nb.eval("agent.selected_turns.role.tolist()")
    assert len(want) == 8 and want.count("assistant") == 3
    expect(blocks).to_have_count(len(want))
    assert agent.locator(".rlv-detail .rlv-role").all_inner_texts() == want
    expect(agent.locator(".rlv-detail .rlv-role").nth(6)).to_have_text(f"critic{XSS}")
    names = agent.locator(".rlv-detail .rlv-tool-name").all_inner_texts()
    assert names[:2] == ["tool: search", f"tool: fetch{XSS}"]
    args = agent.locator(".rlv-detail .rlv-tool-args").first.inner_text()
    assert f'"q": "{XSS}</script>"' in args and args.startswith("{\n")  # pretty JSON, as text
    expect(agent.locator(".rlv-detail .rlv-untrained-turn").first).to_have_text("not trained")
    expect(agent.locator(".rlv-detail .rlv-turn-reasoning")).to_have_text("think first")
    assert agent.locator(".rlv-detail img, .rlv-detail script, .rlv-detail [onerror]").count() == 0
    tool_calls = nb.eval("int(agent.selected.n_tool_calls.iloc[0])")
    assert tool_calls == 2

    # -- a whole-sequence log: prompt and tool results muted and uncoloured, turn marks, "not trained"
    gym = _view(page, 1)
    gym.locator(".rlv-sample-table .rlv-row[data-id]").first.click()
    nb.wait_for("gym.strip.sample_ids", lambda v: len(v) == 1, what="the gym sample's strip")
    strip = gym.locator(".rlv-token-strip")
    expect(strip.locator(".rlv-tok").first).to_be_visible(timeout=30_000)
    marks = strip.locator(".rlv-turn-mark")
    roles = [r for r, _ in nb.eval("gym_truth[0]['turns']")]
    expect(marks).to_have_count(len(roles))
    assert marks.all_inner_texts() == roles
    untrained = strip.locator(".rlv-strip-body .rlv-tok.rlv-untrained")
    trained = strip.locator(".rlv-strip-body .rlv-tok:not(.rlv-untrained)")
    mask = nb.eval("gym.selected_tokens.trained.astype(int).tolist()")
    assert 0 < untrained.count() and 0 < trained.count()
    assert untrained.count() + trained.count() <= len(mask)
    colours = untrained.evaluate_all("cs => cs.map(c => c.style.backgroundColor)")
    assert set(colours) == {""}, colours[:5]  # uncoloured
    assert set(trained.evaluate_all("cs => cs.map(c => c.style.backgroundColor)")) - {""}
    opacity = untrained.first.evaluate("c => getComputedStyle(c).opacity")
    assert float(opacity) < 1  # muted
    expect(strip.locator(".rlv-legend")).to_contain_text("not trained")
    assert nb.eval("sorted(set(gym.selected_tokens.role))") == sorted(set(roles))

    assert not dialogs, dialogs
    assert nb.eval("'__xss' in dir()") is False
    outside = [u for u in page.requests if not is_local(u)]
    assert not outside and any("127.0.0.1" in u for u in page.requests), outside[:10]
