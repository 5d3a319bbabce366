"""Packaging: the wheel and sdist built from this checkout ship the bundled demo data and the built front ends.

The wheel is built for real (``pip wheel . --no-build-isolation --no-index``: the backend of the dev venv, no
network). The jupyter-builder hook runs ``npm install`` + ``npm run build`` only when ``rlviz_widgets/static``
is missing or older than ``js/src``; otherwise it only checks that the built files exist.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "rlviz_widgets"
DATA = sorted(p.name for p in (PKG / "data").iterdir() if p.is_file())
STATIC = sorted(f"{p.stem}.js" for p in (ROOT / "js" / "src").iterdir() if p.suffix in (".ts", ".js"))
NOT_SHIPPED = ("tests/", "benchmarks/", "js/", "docs/", "notebooks/", "scripts/", "artifacts/")


def _front_ends_current() -> bool:
    """True if every built front end exists and is newer than every file of js/src (no npm run needed)."""
    built = [PKG / "static" / name for name in STATIC]
    if not all(p.exists() for p in built):
        return False
    newest_source = max(p.stat().st_mtime for p in (ROOT / "js" / "src").rglob("*") if p.is_file())
    return min(p.stat().st_mtime for p in built) >= newest_source


def _require_build_tools() -> None:
    for module, dist in (("hatchling", "hatchling"), ("hatch_jupyter_builder", "hatch-jupyter-builder")):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the build backend is not installed in this venv: pip install {dist}")
    if not _front_ends_current() and shutil.which("npm") is None:
        pytest.skip("rlviz_widgets/static is missing or older than js/src, and npm (Node.js) is not on PATH "
                    "to build it")


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _pip_wheel(source: Path, out: Path, **env: str) -> Path:
    _run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "--no-index",
          "-q", "-w", str(out)], cwd=out.parent, **env)
    (wheel,) = out.glob("rlviz_widgets-*.whl")
    return wheel


def _check_package_files(names: list[str], prefix: str) -> None:
    """The data files and the built front ends are in ``names`` under ``prefix``; caches are not."""
    assert DATA, "rlviz_widgets/data is empty"
    for name in DATA:
        assert f"{prefix}rlviz_widgets/data/{name}" in names, f"data/{name} is missing"
    for name in STATIC:
        assert f"{prefix}rlviz_widgets/static/{name}" in names, f"static/{name} is missing"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or ".ipynb_checkpoints" in n]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    _require_build_tools()
    return _pip_wheel(ROOT, tmp_path_factory.mktemp("wheel"))


def test_wheel_ships_data_and_front_ends(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    _check_package_files(names, "")
    assert "rlviz_widgets/__main__.py" in names
    outside = [n for n in names if not n.startswith(("rlviz_widgets/", "rlviz_widgets-"))]
    assert not outside, f"files outside the package: {outside}"
    _check_native(names, wheel)


def _check_native(names: list[str], wheel: Path) -> None:
    """With a C compiler, the build hook (hatch_build.py) compiled the array reader into a platform wheel."""
    if not any(shutil.which(c) for c in ("cc", "gcc", "clang")):
        return
    assert "rlviz_widgets/_ingest/native/_arrays.so" in names
    assert not wheel.name.endswith("-none-any.whl"), wheel.name  # machine code: not a pure-Python wheel
    with tempfile.TemporaryDirectory() as tmp:  # every C file went in: the array reader and the byte finder
        lib = ctypes.CDLL(zipfile.ZipFile(wheel).extract("rlviz_widgets/_ingest/native/_arrays.so", tmp))
        assert lib.rlviz_arrays and lib.rlviz_find


def test_a_wheel_built_without_a_compiler_works(tmp_path):
    """No C compiler (``CC`` names none): the wheel is a pure one without the array reader, and opens runs."""
    _require_build_tools()
    wheel = _pip_wheel(ROOT, tmp_path / "wheel", CC="/nonexistent/cc")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith(".so")] and wheel.name.endswith("-py3-none-any.whl"), wheel.name
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    proc = _run([sys.executable, "-c", "import rlviz_widgets._ingest.native as n; assert n.library() is None; "
                 "import runpy; runpy.run_module('rlviz_widgets', run_name='__main__')"], cwd=tmp_path,
                PYTHONPATH=str(site), RLVIZ_CACHE_DIR=str(tmp_path / "cache"))
    assert "3000 samples over 24 steps" in proc.stdout


def test_installed_wheel_opens_the_bundled_run(wheel, tmp_path):
    """``python -m rlviz_widgets`` (default: the bundled real run, then a generated one) from the wheel alone."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    proc = _run([sys.executable, "-m", "rlviz_widgets"], cwd=tmp_path, PYTHONPATH=str(site),
                RLVIZ_CACHE_DIR=str(tmp_path / "cache"))
    assert f"== {site / 'rlviz_widgets' / 'data' / 'rlb_eval_poem_task.jsonl'}" in proc.stdout  # from the wheel
    assert "3000 samples over 24 steps" in proc.stdout


def test_sdist_ships_data_and_front_ends_and_builds_a_wheel(tmp_path):
    _require_build_tools()
    out = tmp_path / "sdist"
    _run([sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(out)], cwd=ROOT)
    (sdist,) = out.glob("rlviz_widgets-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    top = sdist.name.removesuffix(".tar.gz") + "/"
    _check_package_files(names, top)
    assert {top + "pyproject.toml", top + "README.md", top + "PKG-INFO", top + "hatch_build.py",
            top + "rlviz_widgets/_ingest/native/arrays.c", top + "rlviz_widgets/_ingest/native/find.c"} <= set(names)
    assert not [n for n in names if n.endswith(".so")]  # built by whoever installs it
    assert not [n for n in names if n.removeprefix(top).startswith(NOT_SHIPPED)]
    # pip installing from the sdist: no js/ in it, so the hook only checks the built files it holds
    from_sdist = _pip_wheel(sdist, tmp_path / "from_sdist")
    wheel_names = zipfile.ZipFile(from_sdist).namelist()
    _check_package_files(wheel_names, "")
    _check_native(wheel_names, from_sdist)


def test_the_demo_command_ends_in_jupyterlab(tmp_path):
    """``scripts/demo.sh``, the README's main job, prints the summaries, then serves the quickstart notebook in
    JupyterLab. As root (containers, CI machines) JupyterLab refused to start: it wants ``--allow-root``."""
    import signal
    import socket
    import time

    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, RLVIZ_CACHE_DIR=str(tmp_path / "cache"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    proc = subprocess.Popen(["bash", "scripts/demo.sh", "--no-browser", f"--ServerApp.port={port}"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    out, deadline = [], time.time() + 300
    try:
        for line in proc.stdout:
            out.append(line)
            if f":{port}/lab" in line or time.time() > deadline:
                break
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    text = "".join(out)
    assert f":{port}/lab" in text, text[-2000:]
    assert "Run:" in text and "steps" in text  # the summaries came first
