"""What every rlviz widget shares: its built front end, request/response, visible errors, and its edge to the
browser (which requests may run, which traits the browser may set)."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import ClassVar

import anywidget
import traitlets

from rlviz_widgets.widgets import _fallback as fallback
from rlviz_widgets.widgets._validate import JS_SAFE_INT, clip

STATIC = Path(__file__).resolve().parent.parent / "static"
log = logging.getLogger("rlviz_widgets")
MAX_ID_CHARS = 200  # of a request's id sent back (rpc.ts's are ~20)


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
    """Marks a method the front end may call by name: the class's requests are these, and only these."""
    fn.rpc_request = True
    return fn


def with_fallback(bundle, summary: Callable[[], str]):
    """A widget's mime bundle (``data`` or ``(data, metadata)``) with ``text/html`` added: ``summary()``, a static
    summary for pages without a widget front end (a failing summary is logged, and the bundle sent without it)."""
    data, meta = bundle if isinstance(bundle, tuple) else (bundle, None)
    if not data:
        return bundle
    try:
        data = {**data, "text/html": summary()}
    except Exception:  # noqa: BLE001 - the live widget must still display
        log.exception("the static summary of a widget failed")
    return data if meta is None else (data, meta)


def surface_errors(fn):
    """Observer decorator: an exception shows in the widget's error line instead of vanishing."""
    @wraps(fn)
    def wrapper(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - shown to the user, and logged
            self.show_error(fn.__name__, e)
    return wrapper


class BrowserState:
    """A widget mixin: the front end sets only the traits named in ``_browser_writes``, each through the trait's
    own validation and the check given there (a function taking the sent value, raising ``ValueError``); anything
    else it sends is refused, said (``_say_update``), and its view is sent the kernel's values back. ipywidgets
    hands every front-end update to ``set_state`` and would take any synced trait, even a read-only one."""

    _browser_writes: ClassVar[dict[str, Callable | None]] = {}

    def set_state(self, sync_data) -> None:
        """Takes a front end's update (ipywidgets calls this with what a view's ``save_changes`` sent)."""
        self._send_back(self.take_update(sync_data))

    def take_update(self, sync_data) -> list[str]:
        """Takes a front end's update as ``set_state`` does, through the same checks, and returns the names it
        refused (a view that sent them is to be told the kernel's values). A widget composing others routes its
        parts' updates here."""
        state = sync_data if isinstance(sync_data, dict) else {}
        taken = {k: v for k, v in state.items() if k in self._browser_writes}
        refused = [k for k in state if k not in taken]
        problem = f"the browser may not set {', '.join(map(repr, refused))}" if refused else None
        if taken:
            try:
                for k, check in self._browser_writes.items():
                    if check is not None and k in taken:
                        taken[k] = check(taken[k])
                super().set_state(taken)
            except Exception as e:  # noqa: BLE001 - a value the widget refuses (or its observers fail on): said
                problem = f"{type(e).__name__}: {e}"
                refused += list(taken)
        self._say_update(problem)
        return refused

    def _send_back(self, names: list) -> None:
        keys = [k for k in names if k in self.keys]
        if keys:  # the view already shows what it sent: it is told what the kernel holds
            self.send_state(keys)

    def _say_update(self, problem: str | None) -> None:
        """Where a refused update is said (None: the last one was taken)."""
        if problem:
            log.warning("a front-end update was refused: %s", clip(problem))


def _reply_id(rid):
    """The request's id as sent back: rpc.ts's ids are short strings; any other is answered to no one."""
    if isinstance(rid, str) and len(rid) <= MAX_ID_CHARS:
        return rid
    if isinstance(rid, int) and not isinstance(rid, bool) and abs(rid) <= JS_SAFE_INT:
        return rid
    return None


class RpcWidget(BrowserState, anywidget.AnyWidget):
    """An anywidget whose front end pulls data with {type: "rpc"} messages."""

    generation = traitlets.Int(0).tag(sync=True)
    """Bumped whenever the data behind the view changes; the front end then asks again."""

    error = traitlets.Unicode("").tag(sync=True)
    """The last error, shown in the widget; empty when all is well."""

    _front_end = ""
    _requests: ClassVar[frozenset[str]] = frozenset()  # the names of the @rpc methods (set per class)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._requests = cls._requests | {n for n, f in vars(cls).items() if getattr(f, "rpc_request", False)}

    def __init__(self, **kwargs):
        if self._front_end:
            front_end(self._front_end)  # a clear message if the JS was never built
        super().__init__(**kwargs)
        self.on_msg(self._on_rpc)

    def _repr_mimebundle_(self, **kwargs):
        """The widget view, and a static summary as ``text/html`` for pages without the widget front end."""
        summary = fallback.BY_FRONT_END.get(self._front_end)
        bundle = super()._repr_mimebundle_(**kwargs)
        return bundle if summary is None else with_fallback(bundle, lambda: summary(self))

    def show_error(self, where: str, e: BaseException) -> None:
        """Says ``e`` in the widget (its ``error`` trait, clipped) and in the log: what failed, never raised."""
        message = clip(f"{type(e).__name__}: {e}")
        log.error("%s failed: %s%s", where, "".join(traceback.format_tb(e.__traceback__)), message)
        self.error = f"{where}: {message}"

    def _say_update(self, problem: str | None) -> None:
        if problem:
            self.error = f"update: {clip(problem)}"
        elif self.error.startswith("update:"):
            self.error = ""

    def refresh_view(self) -> None:
        """Tell the front end its data changed."""
        self.generation += 1

    def _on_rpc(self, _widget, content, buffers) -> None:
        self.take_message(content, buffers)

    def take_message(self, content, _buffers=(), send: Callable[[dict, list], None] | None = None) -> None:
        """Answers one request from a front end; every {type: "rpc"} message is answered, with an error if it is
        not one. ``send(content, buffers)`` carries the reply (default: this widget's own comm; a widget composing
        others routes its parts' requests here and their replies through its own comm)."""
        if not isinstance(content, dict) or content.get("type") != "rpc":
            return  # not a request: nothing waits for an answer
        send = send or self.send
        rid, method = _reply_id(content.get("id")), content.get("method")
        where = method if isinstance(method, str) and method in self._requests else "request"
        try:
            result = self._request(method, content.get("params"))
            buffers = []
            if isinstance(result, tuple):
                result, buffers = result
            send({"type": "rpc", "id": rid, "ok": True, "result": result}, buffers)
            if self.error.startswith((f"{where}:", "request:")):  # (a malformed one's error is over too)
                self.error = ""
        except Exception as e:  # noqa: BLE001 - the front end shows it
            self.show_error(where, e)
            send({"type": "rpc", "id": rid, "ok": False, "error": clip(f"{type(e).__name__}: {e}")}, [])

    def _request(self, method, params):
        """Runs the request ``method`` (only an @rpc method's name is one) with ``params``."""
        if not isinstance(method, str) or method not in self._requests:
            raise AttributeError(f"unknown request {clip(repr(method), 100)}")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise TypeError(f"{method}: params must be an object, not {type(params).__name__}")
        return getattr(self, method)(**params)
