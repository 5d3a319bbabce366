"""An exported notebook viewed with no kernel: each widget shows its static summary (the text/html of its mime
bundle), in a real Chromium from file:// with the network blocked. See docs/guide/sharing.md for what nbconvert
does with a saved widget state (it picks the widget view, and the summary is not shown)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.browser.lab import write_notebook
from tests.browser.test_report import offline_page  # noqa: F401 - the fixture
from tests.widgets.test_report import EVIL, evil_log

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# nbconvert's own template asks CDNs for require.js and MathJax: pointed at files beside the page instead
OFFLINE = ["--HTMLExporter.require_js_url=require.js", "--HTMLExporter.mathjax_url=mathjax.js"]


def nbconvert(*args: str, cwd, env) -> None:
    proc = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """A notebook of our widgets, executed by nbconvert (widget state stored, as nbclient does by default)."""
    root = tmp_path_factory.mktemp("nbconvert")
    evil_log(root / "logs")
    write_notebook(root / "nb.ipynb", [
        "import rlviz_widgets as rw\nrun = rw.open_run('logs', progress=False)\nview = rw.RunView(run)\nview",
        "rw.SampleTable(run, sort_by='reward', sort_desc=True, height=200)",
        "rw.TokenStrip(run, [int(run.samples.sample_id.iloc[-1])])",
    ])
    env = {**os.environ, "RLVIZ_CACHE_DIR": str(root / "cache")}
    nbconvert("--to", "notebook", "--execute", "nb.ipynb", "--output", "executed.ipynb", cwd=root, env=env)
    return root, env


def test_saved_state_holds_each_bundle_and_hides_the_summary(executed):
    root, env = executed
    nb = json.loads((root / "executed.ipynb").read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", []) if WIDGET_VIEW in o.get("data", {})]
    assert len(outputs) == 3 and all("text/html" in o["data"] for o in outputs)  # the fallback is in the notebook
    state = nb["metadata"]["widgets"][WIDGET_STATE]["state"]
    # anywidget syncs _esm (the whole bundle) as a trait: every model of ours saves its own copy
    esm = [m["state"]["_esm"] for m in state.values() if "_esm" in m["state"]]
    assert len(esm) >= 4 and all(len(e) > 10_000 for e in esm)
    nbconvert("--to", "html", "executed.ipynb", "--output", "with_state.html", *OFFLINE, cwd=root, env=env)
    page = (root / "with_state.html").read_text()
    assert "rlv-static" not in page  # nbconvert shows the widget view when the notebook holds its state


def test_exported_notebook_shows_static_summaries_offline(executed, offline_page):  # noqa: F811
    root, env = executed
    nb = json.loads((root / "executed.ipynb").read_text())
    nb["metadata"].pop("widgets")  # as JupyterLab saves by default (no widget state), or store_widget_state=False
    (root / "plain.ipynb").write_text(json.dumps(nb))
    nbconvert("--to", "html", "plain.ipynb", "--output", "plain.html", *OFFLINE, cwd=root, env=env)
    html = root / "plain.html"
    assert '"_esm"' not in html.read_text() and html.stat().st_size < 1_000_000  # no copy of our bundles
    pg = offline_page
    pg.goto(html.as_uri())
    pg.wait_for_selector(".rlv-static")
    assert pg.locator(".rlv-static").count() == 3
    text = pg.locator("body").inner_text()
    assert "41 samples" in text and "to_html" in text  # RunView: its header and the way to a report
    assert "SampleTable: 41 rows, the first 10 shown" in text
    assert "TokenStrip: 1 sample(s)" in text
    assert EVIL[0] in text  # the top reward's prompt and the tokens: as characters
    assert pg.evaluate("window.__xss") is None
    assert pg.locator(".rlv-static").first.is_visible()
