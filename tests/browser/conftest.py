"""Real-browser fixtures: one JupyterLab for the session, a fresh Chromium page per test.

Every request a page makes is recorded; a test fails if any leaves this machine.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .lab import CHROMIUM_ARGS, is_local, jupyter_server

ARTIFACTS = Path(os.environ.get("RLVIZ_ARTIFACTS", Path(__file__).resolve().parents[2] / "artifacts"))


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium_path(chromium) -> str:
    """The real Chromium binary (skips, or fails on CI, without it: see tests/conftest.py)."""
    return chromium


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory) -> Path:
    """The folder JupyterLab serves: notebooks are written here, with logs beside them."""
    from rlviz_widgets._synth import make_record, write_log

    root = tmp_path_factory.mktemp("lab-root")
    write_log(root / "logs", steps=12, samples_per_step=48, tokens=40, ranks=2, seed=1)
    # a response that tries to be HTML: it must show as characters and run nothing
    import json
    import random

    rec = make_record(random.Random(5), 11, 9999, 12, progress=1.0)
    evil = '<img src=x onerror="window.__xss=1">'
    rec["response"] = f"{evil} and <script>window.__xss=2</script>"
    rec["response_tokens"] = [evil, "Ġand", "Ġ<script>", "window.__xss=2", "</script>"] + rec["response_tokens"][5:]
    rec["reward"] = 9.5  # the top reward: first when sorting descending
    with open(root / "logs" / "rollout_rank0.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")
    from rlviz_widgets._synth import write_sample_log

    write_sample_log(root / "million", samples=1_000_000, steps=100, ranks=4)  # a million-sample run
    return root


@pytest.fixture(scope="session")
def lab(lab_root, tmp_path_factory, chromium_path):
    with jupyter_server(lab_root, tmp_path_factory.mktemp("lab-state")) as base:
        yield base


@pytest.fixture(scope="session")
def browser(chromium_path, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    home = tmp_path_factory.mktemp("chrome-home")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS,
                              env={**os.environ, "HOME": str(home)})
        yield b
        b.close()


@pytest.fixture
def page(lab, browser, request):
    """A fresh page; fails the test if any request left 127.0.0.1."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    requests: list[str] = []
    pg.on("request", lambda r: requests.append(r.url))
    pg.on("pageerror", lambda e: print("pageerror:", e))
    pg.on("console", lambda m: m.type == "error" and print("console error:", m.text))
    pg.requests = requests
    yield pg
    ctx.close()
    outside = [u for u in requests if not is_local(u)]
    assert not outside, f"requests left this machine: {outside[:10]}"
    assert requests, "no request recorded: the recorder is broken"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Screenshots land here (the README names this folder)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def copy_to_docs(src: Path, name: str) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
    docs.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, docs / name)
