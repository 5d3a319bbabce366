"""Shared fixtures: a private cache dir per test (never the user's cache) and small-log helpers."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the package is used from the checkout, not installed
    sys.path.insert(0, str(ROOT))

import rlviz_widgets  # noqa: E402
from rlviz_widgets._synth import write_log  # noqa: E402

SHARED_DATA = ROOT / "rlviz_widgets" / "data"  # the same real files as shared/data, bundled
POEM = SHARED_DATA / "rlb_eval_poem_task.jsonl"
README_RECORD = SHARED_DATA / "rlb_readme_record.jsonl"


@pytest.fixture(autouse=True)
def _private_default_cache(tmp_path_factory, monkeypatch):
    """Even a test that forgets ``cache_dir`` never touches the user's cache."""
    monkeypatch.setenv("RLVIZ_CACHE_DIR", str(tmp_path_factory.mktemp("default_cache")))


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    """A fresh cache dir for this test, outside every log folder the test writes."""
    d = tmp_path / "cache"
    d.mkdir()
    return d


@pytest.fixture
def open_run(cache_dir):
    """``open_run`` bound to the test's cache dir, without a progress bar; warnings are recorded, not shown."""

    def _open(source, **options):
        options.setdefault("cache_dir", cache_dir)
        options.setdefault("progress", False)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            return rlviz_widgets.open_run(source, **options)

    return _open


@pytest.fixture
def synth_logs(tmp_path):
    """Write a small multi-rank log folder with ``rlviz_widgets._synth.write_log``; returns (folder, files)."""

    def _make(name: str = "logs", **kw) -> tuple[Path, list[Path]]:
        kw.setdefault("steps", 4)
        kw.setdefault("samples_per_step", 12)
        kw.setdefault("tokens", 12)
        kw.setdefault("ranks", 2)
        folder = tmp_path / name
        return folder, write_log(folder, **kw)

    return _make


def write_lines(path: Path, lines: list, newline_at_end: bool = True) -> Path:
    """Write records (dicts, dumped as JSON), text lines (str) or raw bytes lines, one per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = []
    for item in lines:
        if isinstance(item, dict):
            raw.append(json.dumps(item, ensure_ascii=False).encode())
        elif isinstance(item, str):
            raw.append(item.encode())
        else:
            raw.append(bytes(item))
    data = b"\n".join(raw) + (b"\n" if newline_at_end and raw else b"")
    path.write_bytes(data)
    return path


def read_records(files: list[Path]) -> list[dict]:
    """Every JSON record of the files with its ``_file`` and 1-based ``_line`` (the test's own reading)."""
    out = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    rec = json.loads(line)
                    rec["_file"], rec["_line"] = str(Path(f).resolve()), n
                    out.append(rec)
    return out


def f32(values) -> np.ndarray:
    """Values as the cache stores token arrays (float32), widened back to float64 for exact comparisons."""
    return np.asarray(values, dtype=np.float32).astype(np.float64)


def folder_fingerprint(folder: Path) -> dict[str, tuple[int, str]]:
    """Every entry below ``folder`` (files and directories) with size and content hash."""
    out = {}
    for p in sorted(Path(folder).rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_dir():
            out[rel + "/"] = (0, "dir")
        else:
            data = p.read_bytes()
            out[rel] = (len(data), hashlib.sha256(data).hexdigest())
    return out


def file_mtimes(folder: Path) -> dict[str, int]:
    return {str(p): os.stat(p).st_mtime_ns for p in sorted(Path(folder).rglob("*"))}


# -- benchmark smoke tests: the scripts run end to end, as `python benchmarks/X.py ...` from the repo root --------
@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium the browser tests drive (tests/browser/lab.py); the test is skipped without it (fails on CI)."""
    from tests.browser.lab import CHROMIUM

    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"Chromium not found at {CHROMIUM}: CI must install it (apt-get install chromium)")
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    return CHROMIUM


def run_benchmark(script: str, *args: str, timeout: float) -> str:
    """Runs ``benchmarks/<script>`` with ``args`` from the repo root; asserts it exits 0; returns its stdout."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def call(widget, method, **params):
    """Send one rpc request the way the front end does; returns (content, buffers) of the answer."""
    sent = []
    widget.send = lambda content, buffers=None: sent.append((content, buffers or []))
    widget._on_rpc(widget, {"type": "rpc", "id": "t1", "method": method, "params": params}, [])
    assert len(sent) == 1 and sent[0][0]["id"] == "t1"
    return sent[0]
