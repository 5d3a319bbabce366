"""What every rlviz widget shares: its built front end, request/response, visible errors."""

from __future__ import annotations

import logging
import traceback
from functools import wraps
from pathlib import Path

import anywidget
import traitlets

STATIC = Path(__file__).resolve().parent.parent / "static"
log = logging.getLogger("rlviz_widgets")


def front_end(name: str) -> Path:
    """The built ES module of one front end; a clear error if the JS was never built."""
    path = STATIC / f"{name}.js"
    if not path.exists():
        raise FileNotFoundError(
            f"the {name} front end is not built ({path} is missing). Install the package with "
            "`pip install .` or `pip install -e .` (needs Node.js and npm), or run `npm install && npm run build` "
            "in js/.")
    return path


def rpc(fn):
    """Marks a method the front end may call by name."""
    fn._rpc = True
    return fn


def surface_errors(fn):
    """Observer decorator: an exception shows in the widget's error line instead of vanishing."""
    @wraps(fn)
    def wrapper(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - shown to the user, and logged
            self._show_error(fn.__name__, e)
    return wrapper


class RpcWidget(anywidget.AnyWidget):
    """An anywidget whose front end pulls data with {type: "rpc"} messages."""

    generation = traitlets.Int(0).tag(sync=True)
    """Bumped whenever the data behind the view changes; the front end then asks again."""

    error = traitlets.Unicode("").tag(sync=True)
    """The last error, shown in the widget; empty when all is well."""

    _front_end = ""

    def __init__(self, **kwargs):
        if self._front_end:
            front_end(self._front_end)  # a clear message if the JS was never built
        super().__init__(**kwargs)
        self.on_msg(self._on_rpc)

    def _show_error(self, where: str, e: BaseException) -> None:
        log.error("%s failed: %s", where, "".join(traceback.format_exception(e)))
        self.error = f"{where}: {type(e).__name__}: {e}"

    def refresh_view(self) -> None:
        """Tell the front end its data changed."""
        self.generation += 1

    def _on_rpc(self, _widget, content, _buffers) -> None:
        if not isinstance(content, dict) or content.get("type") != "rpc":
            return
        method, rid = content.get("method", ""), content.get("id")
        fn = getattr(self, method, None)
        try:
            if not getattr(fn, "_rpc", False):
                raise AttributeError(f"unknown request {method!r}")
            result = fn(**(content.get("params") or {}))
            buffers = []
            if isinstance(result, tuple):
                result, buffers = result
            self.send({"type": "rpc", "id": rid, "ok": True, "result": result}, buffers)
            if self.error.startswith(f"{method}:"):
                self.error = ""
        except Exception as e:  # noqa: BLE001 - the front end shows it
            self._show_error(method, e)
            self.send({"type": "rpc", "id": rid, "ok": False, "error": f"{type(e).__name__}: {e}"})
