"""Driving a real JupyterLab (or Notebook 7) in headless Chromium: server, notebooks, kernel access."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

CHROMIUM = os.environ.get("RLVIZ_CHROMIUM", "/usr/lib/chromium/chromium")  # the real binary, not the sh wrapper
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Run code in the current notebook's kernel from the page; returns captured stdout (and raises on error).
KERNEL_EXEC = """async (code) => {
  const app = window.jupyterapp;
  const widget = app.shell.currentWidget;
  const kernel = widget.sessionContext.session.kernel;
  let out = "", err = "";
  const fut = kernel.requestExecute({ code });
  fut.onIOPub = (msg) => {
    if (msg.header.msg_type === "stream") out += msg.content.text;
    if (msg.header.msg_type === "error") err += msg.content.ename + ": " + msg.content.evalue;
  };
  await fut.done;
  return { out, err };
}"""


# pixel position of a data value inside one concat unit of the chart (the first matching `chart` selector)
UNIT_POINT = """([unit, xValue, yFrac, chart]) => {
  const root = chart instanceof Element ? chart : document.querySelector(chart || '.rlv-chart');
  const v = root._rlvView;
  const groups = [];
  for (const mark of v.scenegraph().root.items[0].items)
    if (mark.marktype === 'group') for (const g of mark.items) groups.push({name: mark.name, g});
  const {name, g} = groups[unit];
  const scale = v.scale(name.replace(/_group$/, '_x'));
  const canvas = root.querySelector('canvas, svg').getBoundingClientRect();
  const [ox, oy] = v.origin();
  return {x: canvas.x + ox + g.x + scale(xValue), y: canvas.y + oy + g.y + g.height * yFrac};
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_notebook(path: Path, cells: list[str]) -> Path:
    """A notebook of code cells (nbformat JSON written directly: importing nbformat is slow)."""
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "cells": [{"cell_type": "code", "id": f"c{i}", "source": c, "metadata": {}, "outputs": [],
                     "execution_count": None} for i, c in enumerate(cells)]}
    path.write_text(json.dumps(nb))
    return path


@contextmanager
def jupyter_server(root: Path, state: Path, app: str = "jupyterlab", env_extra: dict | None = None):
    """JupyterLab (or Notebook 7 with app="notebook") on 127.0.0.1, every config dir inside ``state``."""
    settings = state / "settings"
    (settings / "@jupyterlab/apputils-extension").mkdir(parents=True, exist_ok=True)
    (settings / "@jupyterlab/apputils-extension/notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(state / "cfg"), "JUPYTER_DATA_DIR": str(state / "data"),
           "IPYTHONDIR": str(state / "ipython"), "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(state / "ws"),
           "RLVIZ_CACHE_DIR": str(state / "rlviz-cache"), "PYTHONPATH": str(root), **(env_extra or {})}
    # the kernel finds the data through the notebook folder (cwd)
    cmd = [sys.executable, "-m", app, "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
           "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
           f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
           "--JupyterNotebookApp.expose_app_in_browser=True",
           "--LabApp.extension_manager=readonly", "--LabApp.news_url=None",
           "--LanguageServerManager.autodetect=False"]
    base = f"http://127.0.0.1:{port}"
    with serving(cmd, env, state / f"{app}.log", f"{base}/api/status"):
        yield base


@contextmanager
def serving(cmd: list[str], env: dict, log_path: Path, probe: str, cwd: Path | None = None):
    """Runs the server ``cmd`` (its output to ``log_path``) while the block runs, entered once ``probe`` (a URL)
    answers."""
    log = open(log_path, "w")
    server = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(240):
            if server.poll() is not None:
                raise RuntimeError(log_path.read_text())
            try:
                urllib.request.urlopen(probe, timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            raise TimeoutError(f"{cmd[:3]} did not start: " + log_path.read_text()[-2000:])
        yield
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def is_local(url: str) -> bool:
    """True for requests that stay on this machine (loopback) or never touch the network."""
    if url.startswith(("data:", "blob:", "about:")):
        return True
    host = urlparse(url).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


def drag(page, unit: int, x0: float, x1: float, chart: str = ".rlv-chart") -> None:
    """A mouse brush from data value x0 to x1 across the middle of concat unit ``unit`` of the chart.

    The pixels are taken once the chart holds still: a brush elsewhere just before may still be bringing
    new data (and a new scale) to this unit. If the scale still moves after the drag (an update later than
    the wait, on a busy machine: the brush landed on other values), the brush is cleared and drawn again.
    """

    def points():
        return page.evaluate(UNIT_POINT, [unit, x0, 0.5, chart]), page.evaluate(UNIT_POINT, [unit, x1, 0.5, chart])

    for attempt in range(3):
        a = b = None
        still = 0
        for _ in range(50):  # the same pixels over 0.4 s
            now = points()
            still = still + 1 if now == (a, b) else 0
            a, b = now
            if still == 2:
                break
            page.wait_for_timeout(200)
        page.mouse.move(a["x"], a["y"])
        page.mouse.down()
        for k in range(1, 6):
            page.mouse.move(a["x"] + (b["x"] - a["x"]) * k / 5, a["y"], steps=2)
        page.mouse.up()
        page.wait_for_timeout(400)
        if points() == (a, b) or attempt == 2:  # its own brush leaves the unit's scale as it was
            return
        page.mouse.dblclick(a["x"] - 2, a["y"])  # an interval brush is cleared by a double click


class Notebook:
    """One open notebook page: run all cells, then talk to its kernel."""

    def __init__(self, page, base: str, name: str, app: str = "lab"):
        self.page, self.base, self.name = page, base, name
        # ?reset: a fresh workspace, so notebooks of earlier tests are not restored beside this one
        url = f"{base}/lab/tree/{name}?reset" if app == "lab" else f"{base}/notebooks/{name}"
        page.goto(url)
        page.wait_for_function(
            "window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'",
            timeout=120_000)

    def run_all(self) -> None:
        self.page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")

    def exec(self, code: str) -> str:
        """Run code in the kernel; returns stdout; raises if the code raised."""
        res = self.page.evaluate(KERNEL_EXEC, code)
        if res["err"]:
            raise AssertionError(f"kernel error: {res['err']}\n--- code:\n{code}")
        return res["out"]

    def eval(self, expr: str):
        """The value of a Python expression in the kernel (JSON round trip)."""
        out = self.exec("import json as _j\n"
                        f"print(_j.dumps({expr}, default=lambda o: o.item() if hasattr(o, 'item') else str(o)))")
        return json.loads(out.strip().splitlines()[-1])

    def wait_for(self, expr: str, predicate, timeout: float = 20.0, what: str = ""):
        """Poll a kernel expression until predicate(value) holds (browser -> kernel updates are async)."""
        deadline = time.time() + timeout
        value = None
        while time.time() < deadline:
            value = self.eval(expr)
            if predicate(value):
                return value
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what or expr}; last value: {value!r}")
