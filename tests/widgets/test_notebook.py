"""The quickstart notebook: runs top to bottom, stays output-free, and demo.sh opens a working copy of it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_runs_top_to_bottom(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVIZ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(ROOT / "notebooks" / "quickstart.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) >= 6  # four RunViews (one of several runs), a TokenStrip, a SampleTable
    texts = "".join(o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "sample_id" in texts and "reward" in texts


def test_tracked_quickstart_holds_no_outputs():
    """The tracked notebook stays output-free: JupyterLab saves into the working copy ``scripts/demo.sh`` opens."""
    nb = nbformat.read(ROOT / "notebooks" / "quickstart.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    assert not [c for c in code if c.outputs or c.execution_count is not None]


def _fake_checkout(tmp_path: Path) -> Path:
    """demo.sh in a tree of its own: setup, the CLI and JupyterLab replaced by stubs that record their arguments."""
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    (tree / "notebooks").mkdir()
    (tree / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "demo.sh", tree / "scripts" / "demo.sh")
    shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", tree / "notebooks" / "quickstart.ipynb")
    stubs = {"scripts/setup.sh": "exit 0", ".venv/bin/python": "exit 0",
             ".venv/bin/jupyter": f'printf "%s\\n" "$@" > "{tree / "jupyter_args"}"'}
    for name, body in stubs.items():
        (tree / name).write_text("#!/usr/bin/env bash\n" + body + "\n")
        (tree / name).chmod(0o755)
    return tree


def test_demo_opens_an_ignored_working_copy(tmp_path):
    """``scripts/demo.sh`` opens a copy of the quickstart, made when missing and kept after (the user's work),
    never the tracked notebook; the copy is git-ignored, so using the notebook leaves ``git status`` clean."""
    tree = _fake_checkout(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "RLVIZ_NO_LAB"}
    subprocess.run(["bash", "scripts/demo.sh", "--no-browser"], cwd=tree, env=env, check=True, capture_output=True)
    work = tree / "notebooks" / "quickstart.local.ipynb"
    assert (tree / "jupyter_args").read_text().splitlines()[-2:] == ["notebooks/quickstart.local.ipynb", "--no-browser"]
    assert work.read_bytes() == (ROOT / "notebooks" / "quickstart.ipynb").read_bytes()
    work.write_text("{}")  # the user's edits survive the next run
    subprocess.run(["bash", "scripts/demo.sh"], cwd=tree, env=env, check=True, capture_output=True)
    assert work.read_text() == "{}"
    # without JupyterLab (RLVIZ_NO_LAB=1) it stops after the summary and makes no copy
    work.unlink()
    subprocess.run(["bash", "scripts/demo.sh"], cwd=tree, env={**env, "RLVIZ_NO_LAB": "1"}, check=True,
                   capture_output=True)
    assert not work.exists()
    if shutil.which("git") and (ROOT / ".git").exists():
        ignored = subprocess.run(["git", "check-ignore", "-q", "notebooks/quickstart.local.ipynb"], cwd=ROOT)
        assert ignored.returncode == 0, "the working copy must be git-ignored"
